//! Shared by the real-kernel tests of the testbed.

use std::path::PathBuf;

/// The `appflow` binary the tests hand to the bench library for the app
/// processes and the daemon: `<workspace>/target/<profile>/appflow`, the
/// profile this test was built with first, then the other one. The tests
/// never build it themselves.
pub fn appflow_binary() -> Option<PathBuf> {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join("target"));
    let first = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    [first, "debug", "release"]
        .iter()
        .map(|p| target.join(p).join("appflow"))
        .find(|p| p.is_file())
}
