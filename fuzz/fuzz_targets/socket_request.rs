//! One control-socket request line, as the daemon's connection thread parses it.
#![no_main]
use appflow_linux::socket::parse_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_request(text);
});
