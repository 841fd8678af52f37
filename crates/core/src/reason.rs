//! Stable reason codes. Every decision the policies return carries one.
//!
//! The numbers are part of the interface (logs, metrics, JSON): they are
//! never renumbered, and retired codes are never reused.

use serde::{Deserialize, Serialize};

/// Why a policy decided what it decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum Reason {
    // --- reclaimer (1xx) ---
    /// Pressure absent: kernel defaults in force.
    ReclaimNormal = 100,
    /// M_aval < M_F and n_alloc > N_alloc: file-only reclaim (Algorithm 1 line 4).
    ReclaimBurstDetected = 101,
    /// Still in a burst window (hysteresis keeps efficiency-first).
    ReclaimBurstOngoing = 102,
    /// The burst subsided: rebalance by reclaiming anonymous pages (Algorithm 1 line 6).
    ReclaimBurstEnded = 103,
    /// Rebalancing goes on: anonymous share still above target.
    ReclaimRebalancing = 104,
    /// Rebalancing finished: file/anon balance restored.
    ReclaimBalanced = 105,
    /// Rebalancing hit its time limit.
    ReclaimRebalanceTimeout = 106,
    /// A launch is in progress: protected ranges are held.
    ReclaimLaunchProtect = 107,
    /// Efficiency-first yields to the kernel's own balance: the page cache
    /// reclaim can still free is nearly gone, and file-only reclaim would
    /// leave the domain nothing to reclaim (anonymous reclaim allowed again
    /// until memory comes back).
    ReclaimFileExhausted = 108,
    /// Rebalancing finished: available memory is back above M_F, so no
    /// more anonymous memory is paged out ahead of need.
    ReclaimHeadroomRestored = 109,
    /// Re-fault-aware reclaim (the re-fault study §5): re-faults high, direct
    /// reclaim low: kswapd's step (vm.watermark_scale_factor) halved.
    ReclaimStepLowered = 110,
    /// Re-fault-aware reclaim: direct reclaim grew: kswapd's step doubled
    /// (never above the device's own).
    ReclaimStepRaised = 111,
    /// Re-fault-aware reclaim: a window judged, the step kept (in the
    /// hysteresis band, at a bound, or nothing to tune).
    ReclaimStepHeld = 112,
    /// Re-fault-aware reclaim: the domain has no kswapd step to tune (a
    /// memory cgroup reclaims at its limit in the charging task); the
    /// re-fault ratio is measured and reported only.
    ReclaimStepNoKnob = 113,
    /// Rebalancing entered without a burst: memory has stayed below M_F
    /// while allocations are calm, so anonymous memory of background apps
    /// is paged out ahead of the next burst (the AppFlow paper §4.2.1: "otherwise,
    /// reclaims anonymous pages to clear costly regions ahead of future
    /// bursts").
    ReclaimAheadOfBurst = 114,
    /// Ariadne's user-space half (the Ariadne paper §4.2): an app left the
    /// foreground, so its anonymous pages that its last foreground window
    /// did not bring back are marked cold (`MADV_COLD`): the kernel's
    /// reclaim takes them before the window's hot set.
    ReclaimColdMarked = 115,
    /// Rebalancing stopped: its last page-out did not raise M_aval (the
    /// memory went to another use at once, so paging out more only moves
    /// background apps to swap); waits as after a timeout.
    ReclaimRebalanceFutile = 116,

    // --- killer (2xx) ---
    /// The kill trigger fired (`killer::should_kill`). Until the expected-cost
    /// order (208) it was also the reason of a kill of the first non-recent
    /// app in AppFlow's order (ΔM, then the memory-time since last use).
    KillHighestNetFreed = 200,
    /// Killed: only recently used apps were left (deferment exhausted).
    KillRecentLastResort = 201,
    /// No kill: reclaim keeps up.
    KillNotNeeded = 202,
    /// No kill: no eligible candidate.
    KillNoCandidate = 203,
    /// No kill: a previous kill's memory is still coming back.
    KillWaitingForMemory = 204,
    /// Killed by the stock (lmkd-like) order: highest adj, then least recently used.
    KillLruByAdj = 205,
    /// No kill: only recently used apps remain and the domain is not about
    /// to run out (swap has room or anonymous memory is not dominant).
    KillDeferredRecent = 206,
    /// Killed by the kernel's OOM killer: an allocation could not be met
    /// (simulator kernel model; on Linux the kernel does it, not appflow).
    KillKernelOom = 207,
    /// Killed: among the apps past the recency window, the one whose kill
    /// frees the most memory-time per millisecond of expected relaunch
    /// (memory freed × expected time until reuse, over the probability of
    /// reuse × its relaunch cost; `killer::kill_value`).
    KillLeastExpectedCost = 208,
    /// No kill: the victim's resident anonymous memory was paged out to
    /// swap instead (reclaim, not kill), and the page-out kept up with what
    /// was missing or with the domain's allocation.
    KillAvoidedByPageOut = 209,
    /// Excluded: foreground app.
    ExcludedForeground = 210,
    /// Excluded: protected or system process.
    ExcludedProtected = 211,
    /// Excluded: the daemon itself.
    ExcludedSelf = 212,
    /// Killed: among the apps past the recency window, one with no reuse
    /// expected (no history of it being opened) or a relaunch that costs
    /// nothing, the most memory freed first.
    KillNoReuseExpected = 213,
    /// The kill trigger fired ahead of a relaunch: with swap at its bound,
    /// less memory is available than relaunching an app the user is likely
    /// to open next would bring back (`killer::relaunch_need_bytes`).
    KillRelaunchHeadroom = 214,

    // --- preloader (3xx) ---
    /// Cutoffs chosen by the exact multiple-choice knapsack.
    CutoffsSolved = 300,
    /// Budget not binding: every app gets its cheapest-time cutoff.
    CutoffsBudgetSlack = 301,
    /// File kept resident before launch (small file under the cutoff).
    PreloadSmallFile = 302,
    /// Hot segment of a large file kept resident before launch.
    PreloadHotSegment = 303,
    /// Large file streamed during launch.
    PreloadStreamLarge = 304,
    /// App became active: its standby set is no longer touched.
    PreloadAppActive = 305,
    /// A launch's protected (locked) ranges were released early: memory
    /// fell to the killer's trigger level while the app was launching.
    PreloadYieldPressure = 306,
}

impl Reason {
    /// The stable number of this reason.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// The stable snake_case name of this reason.
    pub fn name(self) -> &'static str {
        use Reason::*;
        match self {
            ReclaimNormal => "reclaim_normal",
            ReclaimBurstDetected => "reclaim_burst_detected",
            ReclaimBurstOngoing => "reclaim_burst_ongoing",
            ReclaimBurstEnded => "reclaim_burst_ended",
            ReclaimRebalancing => "reclaim_rebalancing",
            ReclaimBalanced => "reclaim_balanced",
            ReclaimRebalanceTimeout => "reclaim_rebalance_timeout",
            ReclaimLaunchProtect => "reclaim_launch_protect",
            ReclaimFileExhausted => "reclaim_file_exhausted",
            ReclaimHeadroomRestored => "reclaim_headroom_restored",
            ReclaimStepLowered => "reclaim_step_lowered",
            ReclaimStepRaised => "reclaim_step_raised",
            ReclaimStepHeld => "reclaim_step_held",
            ReclaimStepNoKnob => "reclaim_step_no_knob",
            ReclaimAheadOfBurst => "reclaim_ahead_of_burst",
            ReclaimColdMarked => "reclaim_cold_marked",
            ReclaimRebalanceFutile => "reclaim_rebalance_futile",
            KillHighestNetFreed => "kill_highest_net_freed",
            KillRecentLastResort => "kill_recent_last_resort",
            KillNotNeeded => "kill_not_needed",
            KillNoCandidate => "kill_no_candidate",
            KillWaitingForMemory => "kill_waiting_for_memory",
            KillLruByAdj => "kill_lru_by_adj",
            KillDeferredRecent => "kill_deferred_recent",
            KillKernelOom => "kill_kernel_oom",
            KillLeastExpectedCost => "kill_least_expected_cost",
            KillAvoidedByPageOut => "kill_avoided_by_page_out",
            ExcludedForeground => "excluded_foreground",
            ExcludedProtected => "excluded_protected",
            ExcludedSelf => "excluded_self",
            KillNoReuseExpected => "kill_no_reuse_expected",
            KillRelaunchHeadroom => "kill_relaunch_headroom",
            CutoffsSolved => "cutoffs_solved",
            CutoffsBudgetSlack => "cutoffs_budget_slack",
            PreloadSmallFile => "preload_small_file",
            PreloadHotSegment => "preload_hot_segment",
            PreloadStreamLarge => "preload_stream_large",
            PreloadAppActive => "preload_app_active",
            PreloadYieldPressure => "preload_yield_pressure",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        // These numbers are an interface: changing one is a breaking change.
        assert_eq!(Reason::ReclaimBurstDetected.code(), 101);
        assert_eq!(Reason::KillHighestNetFreed.code(), 200);
        assert_eq!(Reason::CutoffsSolved.code(), 300);
        assert_eq!(Reason::KillKernelOom.code(), 207);
        assert_eq!(Reason::KillLeastExpectedCost.code(), 208);
        assert_eq!(Reason::KillAvoidedByPageOut.code(), 209);
        assert_eq!(Reason::ExcludedForeground.code(), 210);
        assert_eq!(Reason::KillNoReuseExpected.code(), 213);
        assert_eq!(Reason::ReclaimRebalanceFutile.code(), 116);
        assert_eq!(
            Reason::KillHighestNetFreed.to_string(),
            "kill_highest_net_freed(200)"
        );
        let json = serde_json::to_string(&Reason::ReclaimBurstEnded).unwrap();
        assert_eq!(json, "\"reclaim_burst_ended\"");
    }
}
