//! # appflow-core — the pure policy core
//!
//! Everything AppFlow (MobiCom '26, seed 000) *decides* lives here, as pure
//! functions of observed state, configuration and the current time passed in
//! by the caller. Nothing in this crate performs I/O or reads a clock, so the
//! same decisions run in the daemon (`appflow-linux`), the testbed
//! (`appflow-bench`) and the simulator (`appflow-sim`).
//!
//! | module | owns |
//! |---|---|
//! | [`profile`] | versioned launch profiles and their merge across launches (docs/recording.md) |
//! | [`storage`] | read throughput as a function of I/O block size (seed 000 Fig. 6) |
//! | [`detect`] | launch detection without a launcher: app matching, launch and readiness inference, foreground |
//! | [`cutoff`] | per-app candidate cutoffs s with P_i(s) and the streaming time of the rest (seed 000 §4.1) |
//! | [`knapsack`] | exact multiple-choice knapsack choosing one cutoff per app under the budget M_p |
//! | [`preload`] | before-launch standby set and during-launch stream plan |
//! | [`reclaim`] | Adaptive Memory Reclaimer mode controller (seed 000 Algorithm 1) |
//! | [`killer`] | Context-Aware Process Killer ranking by ΔM with recency deferment (seed 000 §4.3) |
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
pub mod profile;
pub mod reason;
pub mod reclaim;
pub mod report;
pub mod rng;
pub mod scheduler;
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
/// ablations of seed 000 §6.5.1 have one each.
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

/// Whether `name` is usable as an app name: in the configuration, in
/// events, and as a profile file name (`<name>.json`). One rule for all:
/// 1-200 characters of letters, digits, `-`, `_`, `.` and `+`, not starting
/// with `.` (no hidden files, no `.`/`..`).
pub fn valid_app_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
}
