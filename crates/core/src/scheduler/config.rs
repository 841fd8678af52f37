//! The scheduler's configuration: the registered policy, the modules' core
//! parameters and the scheduler's own switches. It carries no file path:
//! where profiles, sockets or cgroups live is the driver's business.

use crate::killer::KillerConfig;
use crate::policy::{self, KillerStrategy, Policy, PreloadStrategy, ReclaimStrategy};
use crate::preload::PreloadConfig;
use crate::reclaim::ReclaimConfig;

/// Everything the scheduler decides with.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// The policy: which modules run, with which strategy.
    pub policy: &'static Policy,
    /// Preloader parameters (M_p, cutoffs, read size, touch interval).
    pub preload: PreloadConfig,
    /// Reclaimer parameters (N_alloc, M_F, hysteresis, rebalancing).
    pub reclaim: ReclaimConfig,
    /// Killer parameters (recency window, trigger, settle time).
    pub killer: KillerConfig,
    /// Switch the preloader off even when the policy has one.
    pub preload_enabled: bool,
    /// Switch the reclaimer off even when the policy has one.
    pub reclaim_enabled: bool,
    /// Switch the killer off even when the policy has one.
    pub killer_enabled: bool,
    /// In efficiency-first, also drop cold unprotected files of background
    /// apps' profiles (POSIX_FADV_DONTNEED on a real kernel).
    pub drop_cold_files: bool,
    /// Process names (comm) never killed nor paged out.
    pub protected_comms: Vec<String>,
    /// A launch whose `launched` event never comes ends after this long, ms.
    pub launch_timeout_ms: u64,
    /// Apps neither declared nor profiled that events may add (bounds the
    /// app table against a flood of names).
    pub max_undeclared_apps: usize,
    /// M_F derived from the apps' launches instead of
    /// `reclaim.low_memory_bytes` ([`crate::sizing`]; the daemon's default).
    pub auto_low_memory: bool,
    /// N_alloc derived from the apps' launch rates instead of
    /// `reclaim.alloc_threshold_pages` ([`crate::sizing`]; the daemon's default).
    pub auto_alloc_threshold: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self::for_policy(policy::lookup("appflow").expect("registered"))
    }
}

impl SchedulerConfig {
    /// The defaults, running `policy`.
    pub fn for_policy(policy: &'static Policy) -> Self {
        Self {
            policy,
            preload: PreloadConfig::default(),
            reclaim: ReclaimConfig::default(),
            killer: KillerConfig::default(),
            preload_enabled: true,
            reclaim_enabled: true,
            killer_enabled: true,
            drop_cold_files: false,
            protected_comms: Vec::new(),
            launch_timeout_ms: 30_000,
            max_undeclared_apps: 256,
            auto_low_memory: false,
            auto_alloc_threshold: false,
        }
    }

    /// The preload strategy in force (None when switched off).
    pub fn preload_strategy(&self) -> PreloadStrategy {
        if self.preload_enabled {
            self.policy.preload
        } else {
            PreloadStrategy::None
        }
    }

    /// Whether the adaptive reclaimer runs.
    pub fn reclaim_active(&self) -> bool {
        self.reclaim_enabled && self.policy.reclaim == ReclaimStrategy::Adaptive
    }

    /// The killer in force (Kernel when switched off: the scheduler kills nothing).
    pub fn killer_strategy(&self) -> KillerStrategy {
        if self.killer_enabled {
            self.policy.killer
        } else {
            KillerStrategy::Kernel
        }
    }
}
