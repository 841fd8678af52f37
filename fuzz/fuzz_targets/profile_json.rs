//! Launch-profile JSON (the profile store's files): parse, validate, and a
//! parsed profile must survive its own round trip.
#![no_main]
use appflow_core::profile::LaunchProfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = LaunchProfile::from_json(text) {
        let _ = p.file_bytes();
        let _ = p.active_files();
        let again = LaunchProfile::from_json(&p.to_json()).expect("a parsed profile re-parses");
        assert_eq!(again.to_json(), p.to_json());
    }
});
