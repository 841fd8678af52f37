//! The daemon's TOML configuration: parse and validate.
#![no_main]
use appflow_linux::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = Config::from_toml(text, "fuzz.toml") {
        let _ = c.scheduler_config();
    }
});
