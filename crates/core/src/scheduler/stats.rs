//! What the scheduler did, counted (the daemon renders these as Prometheus
//! metrics, the simulator reports them).

use super::EventKind;
use crate::reason::Reason;
use crate::reclaim::ReclaimMode;
use std::collections::BTreeMap;

/// The scheduler's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Mode switches by (from, to).
    pub mode_switches: BTreeMap<(&'static str, &'static str), u64>,
    /// Reclaim ticks by reason (code, name).
    pub reclaim_reasons: BTreeMap<(u16, &'static str), u64>,
    /// Kills by reason (code, name).
    pub kills: BTreeMap<(u16, &'static str), u64>,
    /// Footprint of killed apps, bytes.
    pub killed_bytes: u64,
    /// Kills avoided: the victim's resident anonymous memory was paged out
    /// instead, and that kept up.
    pub kills_avoided_by_page_out: u64,
    /// Events by kind.
    pub events: BTreeMap<&'static str, u64>,
    /// Anonymous bytes the kernel accepted for page-out.
    pub reclaimed_anon_bytes: u64,
    /// Page-out calls that failed for another reason than a vanished process.
    pub page_out_failures: u64,
    /// Files dropped from the page cache (efficiency-first, drop_cold_files).
    pub dropped_files: u64,
    /// Bytes queued for standby (touch) holds.
    pub preload_queued_bytes_touch: u64,
    /// Bytes queued for launch (protect) streams.
    pub preload_queued_bytes_protect: u64,
    /// Σ P_i(s_i) of the current plan.
    pub plan_bytes: u64,
    /// Plans solved.
    pub plans_solved: u64,
    /// Switches prepaged (ASAP).
    pub prepage_calls: u64,
    /// Bytes asked to be prepaged.
    pub prepage_requested_bytes: u64,
    /// Switches with a footprint to prepage, cut down by the room above
    /// the killer's trigger level (to nothing, or to less than wanted).
    pub prepage_bounded: u64,
    /// Footprint bytes the room left out.
    pub prepage_bounded_bytes: u64,
    /// Apps marked cold on leaving the foreground (Ariadne's user-space half).
    pub cold_mark_calls: u64,
    /// Anonymous bytes asked to be marked cold.
    pub cold_marked_bytes: u64,
    /// Anonymous bytes paged out ahead of bursts (PMR's user-space half).
    pub proactive_bytes: u64,
    /// Launch protections released early under memory pressure.
    pub launch_protect_yields: u64,
    /// Times the devices' readahead was raised for a launch.
    pub readahead_raises: u64,
    /// Times efficiency-first yielded to the kernel's balance (file reclaim exhausted).
    pub efficiency_first_yields: u64,
    /// Re-fault windows judged (the re-fault study §5).
    pub refault_windows: u64,
    /// Every judged window summed: the run's re-faults, evictions, kswapd
    /// and direct reclaim.
    pub refault_total: crate::refault::Window,
    /// kswapd's step (vm.watermark_scale_factor) in force, when the domain has one.
    pub reclaim_step: Option<u32>,
    /// Times the step was changed.
    pub reclaim_step_changes: u64,
}

impl Stats {
    /// Counts an event.
    pub fn count_event(&mut self, e: EventKind) {
        *self.events.entry(e.name()).or_default() += 1;
    }

    /// Counts a reclaim tick's reason.
    pub fn count_reclaim_reason(&mut self, r: Reason) {
        *self
            .reclaim_reasons
            .entry((r.code(), r.name()))
            .or_default() += 1;
    }

    /// Counts a mode switch.
    pub fn count_switch(&mut self, from: ReclaimMode, to: ReclaimMode) {
        *self
            .mode_switches
            .entry((from.name(), to.name()))
            .or_default() += 1;
    }

    /// All mode switches.
    pub fn switches_total(&self) -> u64 {
        self.mode_switches.values().sum()
    }

    /// All kills.
    pub fn kills_total(&self) -> u64 {
        self.kills.values().sum()
    }

    /// Counts a kill.
    pub fn count_kill(&mut self, r: Reason, footprint_bytes: u64) {
        *self.kills.entry((r.code(), r.name())).or_default() += 1;
        self.killed_bytes += footprint_bytes;
    }
}
