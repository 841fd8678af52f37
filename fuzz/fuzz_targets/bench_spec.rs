//! Testbed app specs (TOML): parse and validate.
#![no_main]
use appflow_bench::spec::AppSpec;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = AppSpec::parse(text, Path::new("fuzz.toml"));
});
