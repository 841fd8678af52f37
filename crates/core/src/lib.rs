//! # appflow-core — the pure policy core
//!
//! Everything AppFlow (MobiCom '26; see docs/papers.md) *decides* lives here, as pure
//! functions of observed state, configuration and the current time passed in
//! by the caller. Nothing in this crate performs I/O or reads a clock, so the
//! same decisions run in the daemon (`appflow-linux`), the testbed
//! (`appflow-bench`) and the simulator (`appflow-sim`).
//!
//! | module | owns |
//! |---|---|
//! | [`profile`] | versioned launch profiles and their merge across launches (docs/recording.md) |
//! | [`storage`] | read throughput as a function of I/O block size (the AppFlow paper Fig. 6) |
//! | [`detect`] | launch detection without a launcher: app matching, launch and readiness inference, foreground |
//! | [`cutoff`] | per-app candidate cutoffs s with P_i(s) and the streaming time of the rest (the AppFlow paper §4.1) |
//! | [`knapsack`] | exact multiple-choice knapsack choosing one cutoff per app under the budget M_p |
//! | [`preload`] | before-launch standby set and during-launch stream plan |
//! | [`prepage`] | ASAP's switch footprint estimator: what to prepage at a switch (the ASAP paper) |
//! | [`proactive`] | PMR's batched per-app page-out ahead of bursts, from user space (the PMR paper) |
//! | [`reclaim`] | Adaptive Memory Reclaimer mode controller (the AppFlow paper Algorithm 1) |
//! | [`refault`] | re-fault-aware kswapd step (vm.watermark_scale_factor) from the re-fault/direct-reclaim trade-off (the re-fault study §5) |
//! | [`killer`] | Context-Aware Process Killer: when to kill and the victim by expected relaunch cost against the memory-time freed (the AppFlow paper §4.3) |
//! | [`reuse`] | the killer's reuse predictor: visits per hour of day, successors, learned online per user (bounded, saved by the daemon) |
//! | [`mechanism`] | the traits the policies drive (preload, reclaim, kill) and a recording fake |
//! | [`policy`] | the policy registry: every policy by name, composing the strategies |
//! | [`scheduler`] | the whole decision loop as one pure type, driven by the daemon and the simulator |
//! | [`reason`] | stable, numbered reason codes used in logs and metrics |
//! | [`report`] | the JSON result contract shared by `sim`, `bench` and the daemon |
//! | [`rng`] | deterministic random numbers (SplitMix64, FNV-1a) |

pub mod cutoff;
pub mod detect;
pub mod killer;
pub mod knapsack;
pub mod mechanism;
pub mod policy;
pub mod preload;
pub mod prepage;
pub mod proactive;
pub mod profile;
pub mod reason;
pub mod reclaim;
pub mod refault;
pub mod report;
pub mod reuse;
pub mod rng;
pub mod scheduler;
pub mod sizing;
pub mod storage;

/// One kibibyte in bytes.
pub const KIB: u64 = 1024;
/// One mebibyte in bytes.
pub const MIB: u64 = 1024 * 1024;
/// One gibibyte in bytes.
pub const GIB: u64 = 1024 * 1024 * 1024;
/// The page size the policies reason in (pages are counted, not addressed).
pub const PAGE_BYTES: u64 = 4096;

/// Which AppFlow modules are active. The full system has all three; the
/// ablations of the AppFlow paper §6.5.1 have one each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Modules {
    /// Selective File Preloader (§4.1).
    pub sfp: bool,
    /// Adaptive Memory Reclaimer (§4.2).
    pub amr: bool,
    /// Context-Aware Process Killer (§4.3).
    pub cpk: bool,
}

impl Modules {
    /// All three modules (the full AppFlow).
    pub const ALL: Modules = Modules {
        sfp: true,
        amr: true,
        cpk: true,
    };
    /// No module (the stock system).
    pub const NONE: Modules = Modules {
        sfp: false,
        amr: false,
        cpk: false,
    };
}

/// The longest app name accepted, in bytes (names become profile file
/// names, and file names are limited to 255 bytes).
pub const MAX_APP_NAME_BYTES: usize = 200;

/// The one rule for app names, used by the daemon's config, its control
/// socket and the profile store alike: not blank, at most
/// [`MAX_APP_NAME_BYTES`], no `/`, no `..` anywhere, not starting with `.`
/// (dot files are the store's temp files), no control character (NUL
/// included). `Err` says what is wrong.
pub fn valid_app_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        Err("empty")
    } else if name.len() > MAX_APP_NAME_BYTES {
        Err("longer than 200 bytes")
    } else if name.contains('/') {
        Err("contains '/'")
    } else if name.contains("..") {
        Err("contains '..'")
    } else if name.starts_with('.') {
        Err("starts with '.'")
    } else if name.chars().any(char::is_control) {
        Err("contains a control character")
    } else {
        Ok(())
    }
}

/// Whether the scheduler's app table may take a notified name: names it
/// already has (declared in the configuration, profiled, or admitted
/// before) always; a new undeclared one only when `allow_undeclared` is on
/// and fewer than `max_undeclared` undeclared names are held. This keeps the
/// table, and the memory and `status` reply that grow with it, bounded
/// whatever a client sends. `Err` is the refusal's message.
pub fn admit_app(
    name: &str,
    known: bool,
    undeclared_held: usize,
    allow_undeclared: bool,
    max_undeclared: usize,
) -> Result<(), String> {
    if known {
        Ok(())
    } else if !allow_undeclared {
        Err(format!(
            "unknown app {name:?}: not declared ([[app]]) and no profile (set daemon.allow_undeclared_apps to accept it)"
        ))
    } else if undeclared_held >= max_undeclared {
        Err(format!(
            "unknown app {name:?}: {undeclared_held} undeclared apps already held (daemon.max_undeclared_apps)"
        ))
    } else {
        Ok(())
    }
}

/// An error caused by bad input: a name that does not exist, a malformed
/// file, an impossible configuration. The binary exits with code 2 on it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

impl InputError {
    /// Builds an input error from anything printable.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_bounds_undeclared_names() {
        assert!(admit_app("a", true, 10, false, 1).is_ok());
        let e = admit_app("a", false, 0, false, 256).unwrap_err();
        assert!(e.contains("allow_undeclared_apps"), "{e}");
        assert!(admit_app("a", false, 255, true, 256).is_ok());
        let e = admit_app("a", false, 256, true, 256).unwrap_err();
        assert!(e.contains("max_undeclared_apps"), "{e}");
    }

    #[test]
    fn app_name_rule() {
        for bad in [
            "",
            "  ",
            "a/b",
            "..",
            ".x",
            "a..b",
            "x\0y",
            "tab\there",
            &"x".repeat(201),
        ] {
            assert!(valid_app_name(bad).is_err(), "{bad:?}");
        }
        for good in [
            "tiktok",
            "com.example.app",
            "my app",
            "a-b_c.1",
            &"x".repeat(200),
        ] {
            assert_eq!(valid_app_name(good), Ok(()), "{good:?}");
        }
    }
}
