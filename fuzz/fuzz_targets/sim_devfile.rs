//! Simulator device/app files: parse, then build the device and the apps.
#![no_main]
use appflow_sim::devfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(f) = devfile::parse(text, "fuzz.toml") {
        let _ = devfile::device(&f, "fuzz.toml");
        let _ = devfile::apps(&f, "fuzz.toml");
    }
});
