//! App-usage traces of the simulator (CSV/TSV), against the built-in catalogue.
#![no_main]
use appflow_sim::catalog::{catalogue, AppSpec};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static CAT: OnceLock<Vec<AppSpec>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cat = CAT.get_or_init(catalogue);
    let _ = appflow_sim::trace::parse(text, "fuzz.csv", cat);
});
