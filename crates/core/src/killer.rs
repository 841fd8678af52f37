//! Context-Aware Process Killer (the AppFlow paper §4.3), and the stock lmkd-like
//! order it is compared against.
//!
//! Candidates are background apps only: never the foreground app, never a
//! protected or system process, never the daemon itself. AppFlow defers apps
//! used within the recency window: they are killed last, only when nothing
//! else is left, in order of net freed memory ΔM = M_current − M_relaunch
//! (what a kill frees for good, since a relaunch needs M_relaunch again).
//!
//! Apps past the window are ordered by **expected cost against benefit**
//! (see [`rank`], docs/killer.md). A kill is a bet that the app is not
//! opened again soon; its price is the app's cold relaunch. The expected
//! cost is the probability that the app is opened again within the horizon
//! ([`crate::reuse`], learned from this user's own history) times its
//! relaunch cost (the launch files read again on the device's curve,
//! [`relaunch_cost_ms`]). The benefit is the memory the kill frees (the
//! app's anonymous memory, resident and swapped; its page cache stays) for
//! as long as the app stays away: the memory-time, memory × E[min(T, H)].
//! The victim is the app with the most memory-time freed per millisecond of
//! expected relaunch.

use crate::profile::LaunchProfile;
use crate::reason::Reason;
use crate::reuse::ReuseEstimate;
use crate::storage::ThroughputCurve;
use serde::{Deserialize, Serialize};

/// The read size of an app's own page-cache misses: Linux's default
/// readahead window (`VM_READAHEAD_PAGES`, 128 KiB). A cold relaunch reads
/// its large files in windows of this size and its small files whole.
pub const READAHEAD_BYTES: u64 = 128 * 1024;

/// Killer parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KillerConfig {
    /// Apps used within this window are deferred, ms. Default 30 min: 92.5 %
    /// of apps are re-accessed within 30 minutes (the AppFlow paper §2.2.3).
    pub recency_window_ms: u64,
    /// When an app's relaunch footprint is unknown, assume this fraction of
    /// its current footprint. Default 1/1.4: background apps grow 30-50 %
    /// over their post-launch baseline (§4.3).
    pub unknown_relaunch_fraction: f64,
    /// Kill only when available memory is below this fraction of the domain.
    pub trigger_avail_fraction: f64,
    /// ... and reclaim cannot keep up: anonymous share of used memory above this,
    pub trigger_anon_share: f64,
    /// ... and anonymous reclaim is near its capacity: free swap (zram or
    /// flash) below this share of the total. §4.3: anonymous reclaim "is
    /// bounded, either by swap partition size or by zRAM capacity"; a killer
    /// must "factor in both the current page-type imbalance and reclaim
    /// capacity limits". Default 0.10, lmkd's `swap_free_low_percentage`.
    pub trigger_swap_free_fraction: f64,
    /// ... or the memory-pressure stall (PSI some avg10, %) above this.
    pub trigger_psi_some_avg10: f64,
    /// Capacity stall: with anonymous memory dominant and swap nearly full,
    /// a stall (PSI some avg10, %) above this triggers a kill even when
    /// available memory is not low. §4.3: once anonymous reclaim reaches
    /// its bound "the system falls back to dropping file pages", and the
    /// page cache churns while M_aval (free + page cache) stays up. Default
    /// 7 %, lmkd's `ro.lmk.psi_partial_stall_ms` (70 ms of stall per 1 s),
    /// the level at which stock Android kills when swap is low. 100 = off.
    /// Measured over `capacity_stall_window_ms` when the driver gives the
    /// cumulative stall counter, over avg10 otherwise.
    pub trigger_capacity_psi_some_avg10: f64,
    /// The window of the capacity stall, ms. Default 1000, lmkd's PSI
    /// monitor window (70 ms of stall per 1 s window). After a kill the
    /// capacity stall waits one whole window, so that the stall it measures
    /// lies after the kill (the memory of the victim has come back).
    pub capacity_stall_window_ms: u64,
    /// After a kill whose memory was not reaped at once, wait this long for
    /// it to come back before another, ms (a reaped kill waits one tick).
    pub settle_ms: u64,
    /// The horizon of the reuse prediction, ms: a kill's memory is counted
    /// as freed at most this long, and the relaunch it risks is the one
    /// within it. Default one week, the period of a user's routine
    /// (weekdays and weekends; the daily rhythm of the AppFlow paper
    /// §2.2.3 repeats within it).
    pub reuse_horizon_ms: u64,
    /// Before a kill, page the victim's resident anonymous memory out
    /// (reclaim, not kill) when swap has room for what is missing; kill
    /// only when that cannot keep up (it moves less than the memory missing
    /// and less than the domain allocated in the last tick).
    pub page_out_before_kill: bool,
    /// The relaunch headroom's threshold: an app more likely than this to
    /// be the next one opened (from the foreground app's successors) has
    /// room kept for its relaunch once swap is at its bound
    /// ([`relaunch_need_bytes`]). Default 0.1. 1 = off.
    pub relaunch_min_p_next: f64,
}

impl Default for KillerConfig {
    fn default() -> Self {
        Self {
            recency_window_ms: 30 * 60 * 1000,
            unknown_relaunch_fraction: 1.0 / 1.4,
            trigger_avail_fraction: 0.05,
            trigger_anon_share: 0.66,
            trigger_swap_free_fraction: 0.10,
            trigger_psi_some_avg10: 20.0,
            trigger_capacity_psi_some_avg10: 7.0,
            capacity_stall_window_ms: 1000,
            settle_ms: 500,
            reuse_horizon_ms: 7 * 24 * 3_600_000,
            page_out_before_kill: true,
            relaunch_min_p_next: 0.1,
        }
    }
}

impl KillerConfig {
    /// Whether anonymous reclaim is at its capacity bound: no swap, or free
    /// swap under `trigger_swap_free_fraction` of it.
    pub fn swap_at_bound(&self, swap_total_bytes: u64, swap_free_bytes: u64) -> bool {
        swap_total_bytes == 0
            || (swap_free_bytes as f64) < self.trigger_swap_free_fraction * swap_total_bytes as f64
    }

    /// Whether memory is mostly anonymous: anonymous pages above
    /// `trigger_anon_share` of what is used (anonymous and file).
    pub fn anon_bound(&self, anon_bytes: u64, file_bytes: u64) -> bool {
        let used = (anon_bytes + file_bytes).max(1) as f64;
        anon_bytes as f64 / used > self.trigger_anon_share
    }

    /// Checks the fields (finite fractions in [0, 1], bounded times); the
    /// error names the field.
    pub fn validate(&self) -> Result<(), String> {
        for (field, v) in [
            ("unknown_relaunch_fraction", self.unknown_relaunch_fraction),
            ("relaunch_min_p_next", self.relaunch_min_p_next),
            ("trigger_avail_fraction", self.trigger_avail_fraction),
            ("trigger_anon_share", self.trigger_anon_share),
            (
                "trigger_swap_free_fraction",
                self.trigger_swap_free_fraction,
            ),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("killer.{field} must be in [0, 1], got {v}"));
            }
        }
        for (field, v) in [
            ("trigger_psi_some_avg10", self.trigger_psi_some_avg10),
            (
                "trigger_capacity_psi_some_avg10",
                self.trigger_capacity_psi_some_avg10,
            ),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("killer.{field} must be in [0, 100], got {v}"));
            }
        }
        if self.recency_window_ms > 30 * 24 * 3_600_000 {
            return Err("killer.recency_window_ms must be at most 30 days (2592000000)".into());
        }
        if !(100..=60_000).contains(&self.capacity_stall_window_ms) {
            return Err("killer.capacity_stall_window_ms must be in 100..=60000".into());
        }
        if self.settle_ms > 600_000 {
            return Err("killer.settle_ms must be at most 600000".into());
        }
        if !(3_600_000..=90 * 24 * 3_600_000).contains(&self.reuse_horizon_ms) {
            return Err(
                "killer.reuse_horizon_ms must be in 3600000..=7776000000 (1 hour to 90 days)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// A process the killer may consider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Process id (the caller holds a pidfd for it).
    pub pid: u32,
    /// App it belongs to.
    pub app: String,
    /// M_current: resident + swapped bytes now.
    pub current_bytes: u64,
    /// M_relaunch: footprint right after its last launch, if recorded.
    pub relaunch_bytes: Option<u64>,
    /// Last time the app was in the foreground, caller's ms clock.
    pub last_used_ms: u64,
    /// The app in the foreground.
    pub foreground: bool,
    /// Protected or system process (configured lists).
    pub protected: bool,
    /// The daemon itself.
    pub is_self: bool,
    /// oom_score_adj (used by the stock order).
    pub oom_score_adj: i32,
    /// Anonymous memory, resident and swapped, bytes: what a kill frees
    /// (its page cache stays cached). None: unknown (M_current counts).
    #[serde(default)]
    pub anon_bytes: Option<u64>,
    /// Of which resident, bytes: what a page-out could move to swap.
    #[serde(default)]
    pub resident_anon_bytes: Option<u64>,
    /// The predicted reuse (None: no history; counted as never reused).
    #[serde(default)]
    pub reuse: Option<ReuseEstimate>,
    /// What its cold relaunch costs over a warm one, ms (None: unknown,
    /// counted as free).
    #[serde(default)]
    pub relaunch_cost_ms: Option<f64>,
}

/// A candidate as ranked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// Index into the caller's candidates.
    pub index: usize,
    /// ΔM in bytes (may be negative).
    pub net_freed_bytes: i64,
    /// Used within the recency window.
    pub recent: bool,
    /// Memory a kill frees, bytes ([`freed_bytes`]).
    pub freed_bytes: u64,
    /// Memory-time freed per ms of expected relaunch, byte·ms/ms
    /// ([`kill_value`]; infinite when no relaunch is expected or it costs
    /// nothing).
    pub value: f64,
}

/// One candidate as the killer priced it (the decision log and
/// `appflow status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PricedCandidate {
    /// The app.
    pub app: String,
    /// Memory a kill frees, bytes ([`freed_bytes`]).
    pub freed_bytes: u64,
    /// Predicted probability of reuse within the horizon (None: no history).
    pub p_reuse: Option<f64>,
    /// Predicted time until reuse, capped at the horizon, s.
    pub expected_idle_s: Option<f64>,
    /// Its relaunch cost, ms.
    pub relaunch_cost_ms: Option<f64>,
    /// Memory-time freed per ms of expected relaunch, MiB·h per s ([`kill_value`]);
    /// None: infinite (no reuse expected, or a free relaunch).
    pub value_mib_h_per_s: Option<f64>,
    /// Used within the recency window (deferred).
    pub recent: bool,
}

/// Why the victim won: its reason and the candidates it was ranked
/// against, best first (at most [`EXPLAINED_CANDIDATES`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KillExplanation {
    /// The victim.
    pub victim: String,
    /// The stable reason of the choice.
    pub reason: Reason,
    /// Eligible candidates in all.
    pub eligible: usize,
    /// The best-ranked ones, the victim first.
    pub ranked: Vec<PricedCandidate>,
}

/// Candidates shown in a kill's explanation.
pub const EXPLAINED_CANDIDATES: usize = 8;

/// The candidate as priced, for explanations.
pub fn priced(c: &Candidate, r: &Ranked) -> PricedCandidate {
    // byte·ms per ms → MiB·h per s: / MiB / 3.6e6 ms per h × 1000 ms per s.
    let scale = 1000.0 / (crate::MIB as f64 * 3_600_000.0);
    PricedCandidate {
        app: c.app.clone(),
        freed_bytes: r.freed_bytes,
        p_reuse: c.reuse.map(|e| e.p_reuse),
        expected_idle_s: c.reuse.map(|e| e.expected_idle_ms / 1000.0),
        relaunch_cost_ms: c.relaunch_cost_ms,
        value_mib_h_per_s: r.value.is_finite().then_some(r.value * scale),
        recent: r.recent,
    }
}

/// Explains a choice made from `ranked` (the order of [`rank`]).
pub fn explain(cands: &[Candidate], ranked: &[Ranked], reason: Reason) -> Option<KillExplanation> {
    let first = ranked.first()?;
    Some(KillExplanation {
        victim: cands[first.index].app.clone(),
        reason,
        eligible: ranked.len(),
        ranked: ranked
            .iter()
            .take(EXPLAINED_CANDIDATES)
            .map(|r| priced(&cands[r.index], r))
            .collect(),
    })
}

/// The killer's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillDecision {
    /// Index of the victim, if any.
    pub victim: Option<usize>,
    /// Why.
    pub reason: Reason,
    /// ΔM of the victim.
    pub net_freed_bytes: i64,
}

/// Why a candidate is not eligible, if it is not.
pub fn exclusion(c: &Candidate) -> Option<Reason> {
    if c.is_self {
        Some(Reason::ExcludedSelf)
    } else if c.foreground {
        Some(Reason::ExcludedForeground)
    } else if c.protected {
        Some(Reason::ExcludedProtected)
    } else {
        None
    }
}

/// ΔM for a candidate.
pub fn net_freed_bytes(cfg: &KillerConfig, c: &Candidate) -> i64 {
    let relaunch = c
        .relaunch_bytes
        .unwrap_or((c.current_bytes as f64 * cfg.unknown_relaunch_fraction) as u64);
    c.current_bytes as i64 - relaunch as i64
}

/// The memory a kill of `c` frees, bytes: its anonymous memory (resident
/// and swapped) when known, else M_current.
pub fn freed_bytes(c: &Candidate) -> u64 {
    c.anon_bytes.unwrap_or(c.current_bytes)
}

/// Memory held per unit swapped, in [0, 1]: `held` (what the domain
/// spends holding its swapped pages: zram's compressed data, a cgroup's
/// zswap pool) over `swapped` (in the same unit); 0 with nothing swapped.
/// The daemon's readers and the simulator give
/// [`crate::scheduler::DomainSample::swapped_ram_share`] through it.
pub fn swapped_ram_share(held: u64, swapped: u64) -> f64 {
    if swapped == 0 {
        return 0.0;
    }
    (held as f64 / swapped as f64).min(1.0)
}

/// What a kill of `c` gives back to the domain's available memory, bytes:
/// its resident anonymous memory, and its swapped memory at what the
/// domain spends holding it (`swapped_ram_share`, see
/// [`crate::scheduler::DomainSample::swapped_ram_share`]: zram's
/// compressed pool on a whole device, nothing when the pool lies outside
/// the domain). [`freed_bytes`] when the resident part or the share is
/// unknown. On the testbed (a memory cgroup, whose zram pool is charged to
/// no cgroup) an app mostly in swap was counted at its whole anonymous
/// memory, covered a launch's need on paper, gave back its few resident
/// MB, and the next launch killed again (docs/results-log-bench.md).
pub fn returned_bytes(c: &Candidate, swapped_ram_share: Option<f64>) -> u64 {
    match (c.resident_anon_bytes, swapped_ram_share) {
        (Some(resident), Some(share)) => {
            let swapped = freed_bytes(c).saturating_sub(resident);
            resident.saturating_add((swapped as f64 * share.clamp(0.0, 1.0)) as u64)
        }
        _ => freed_bytes(c),
    }
}

/// What a kill of `c` is worth: the memory-time it frees per millisecond
/// of expected relaunch, freed × E[min(T, H)] / (P(reuse within H) ×
/// relaunch cost). An app with no history, no reuse expected or a free
/// relaunch is worth infinity (then the memory freed decides).
///
/// For a constant visit rate λ the horizon cancels (P = 1 − e^−λH and
/// E = P/λ), and the value is freed / (λ × cost): the large, rarely used,
/// cheap to relaunch apps go first, like the size- and cost-aware cache
/// replacement of GreedyDual-Size (docs/killer.md).
pub fn kill_value(c: &Candidate) -> f64 {
    let Some(r) = c.reuse else {
        return f64::INFINITY;
    };
    let cost = r.p_reuse * c.relaunch_cost_ms.unwrap_or(0.0);
    if cost <= 0.0 {
        return f64::INFINITY;
    }
    freed_bytes(c) as f64 * r.expected_idle_ms / cost
}

/// A cold relaunch's price over a warm one, ms: the launch files of the
/// profile read again on the device's curve, large files in readahead
/// windows ([`READAHEAD_BYTES`]) and small ones whole. A warm relaunch
/// keeps its process, its heap and its mapped files; a cold one reads its
/// launch set anew, the cost the AppFlow paper §2.2.1 measures.
pub fn relaunch_cost_ms(profile: &LaunchProfile, curve: &ThroughputCurve) -> f64 {
    crate::cutoff::cutoff_options(profile, curve, &[0], READAHEAD_BYTES)
        .first()
        .map_or(0.0, |o| o.stream_secs * 1000.0)
}

/// Eligible candidates in kill order: apps past the recency window first,
/// by [`kill_value`], largest first; then the recent ones (deferred, §4.3)
/// by ΔM, largest first. Ties go to the more memory freed, then the larger
/// ΔM, then the least recently used, then the lower pid.
///
/// Orders measured before (docs/results-log-sim.md): ΔM for every app took apps whose
/// launch files were still cached, used a few hours ago; the memory-time
/// since last use (M_current × idle time) took big idle apps and lost more
/// GB-scale apps than lmkd; the relaunch-size ratio kept them but killed
/// more than lmkd. Pricing each app's reuse and relaunch is what this order
/// adds (docs/killer.md).
pub fn rank(cfg: &KillerConfig, now_ms: u64, cands: &[Candidate]) -> Vec<Ranked> {
    let mut out: Vec<Ranked> = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| exclusion(c).is_none())
        .map(|(index, c)| Ranked {
            index,
            net_freed_bytes: net_freed_bytes(cfg, c),
            recent: now_ms.saturating_sub(c.last_used_ms) < cfg.recency_window_ms,
            freed_bytes: freed_bytes(c),
            value: kill_value(c),
        })
        .collect();
    out.sort_by(|a, b| {
        let by_value = if a.recent || b.recent {
            std::cmp::Ordering::Equal
        } else {
            b.value
                .total_cmp(&a.value)
                .then(b.freed_bytes.cmp(&a.freed_bytes))
        };
        a.recent
            .cmp(&b.recent)
            .then(by_value)
            .then(b.net_freed_bytes.cmp(&a.net_freed_bytes))
            .then(
                cands[a.index]
                    .last_used_ms
                    .cmp(&cands[b.index].last_used_ms),
            )
            .then(cands[a.index].pid.cmp(&cands[b.index].pid))
    });
    out
}

/// The reason a ranked first candidate wins: deferred apps only left, no
/// reuse expected (or a free relaunch), or the most memory-time per
/// expected relaunch.
pub fn victim_reason(r: &Ranked) -> Reason {
    if r.recent {
        Reason::KillRecentLastResort
    } else if r.value.is_infinite() {
        Reason::KillNoReuseExpected
    } else {
        Reason::KillLeastExpectedCost
    }
}

/// AppFlow's choice: the first in [`rank`] order.
pub fn choose_victim(cfg: &KillerConfig, now_ms: u64, cands: &[Candidate]) -> KillDecision {
    decide(&rank(cfg, now_ms, cands))
}

/// The decision for an order of [`rank`]: its first candidate.
pub fn decide(ranked: &[Ranked]) -> KillDecision {
    match ranked.first() {
        Some(r) => KillDecision {
            victim: Some(r.index),
            reason: victim_reason(r),
            net_freed_bytes: r.net_freed_bytes,
        },
        None => KillDecision {
            victim: None,
            reason: Reason::KillNoCandidate,
            net_freed_bytes: 0,
        },
    }
}

/// The stock lmkd-like choice: highest oom_score_adj, then least recently used.
pub fn choose_victim_lru(cfg: &KillerConfig, cands: &[Candidate]) -> KillDecision {
    let best = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| exclusion(c).is_none())
        .max_by(|(_, a), (_, b)| {
            a.oom_score_adj
                .cmp(&b.oom_score_adj)
                .then(b.last_used_ms.cmp(&a.last_used_ms))
                .then(b.pid.cmp(&a.pid))
        });
    match best {
        Some((i, c)) => KillDecision {
            victim: Some(i),
            reason: Reason::KillLruByAdj,
            net_freed_bytes: net_freed_bytes(cfg, c),
        },
        None => KillDecision {
            victim: None,
            reason: Reason::KillNoCandidate,
            net_freed_bytes: 0,
        },
    }
}

/// Inputs of the kill trigger.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PressureState {
    /// Caller's ms clock.
    pub now_ms: u64,
    /// Available memory in the domain, bytes.
    pub avail_bytes: u64,
    /// The domain's memory, bytes.
    pub total_bytes: u64,
    /// Anonymous bytes in the domain.
    pub anon_bytes: u64,
    /// File-backed bytes in the domain.
    pub file_bytes: u64,
    /// Swap (zram and flash) the domain can page out to, bytes; 0 = none.
    pub swap_total_bytes: u64,
    /// Of which free, bytes.
    pub swap_free_bytes: u64,
    /// PSI memory "some" avg10, percent (0 if unavailable).
    pub psi_some_avg10: f64,
    /// PSI memory "some" over the last `capacity_stall_window_ms`, percent
    /// ([`stall_percent`] of two samples), if measured.
    #[serde(default)]
    pub psi_some_window: Option<f64>,
    /// Time of the last kill, if any.
    pub last_kill_ms: Option<u64>,
    /// The last kill's memory was reaped at once (process_mrelease, or the
    /// simulator's kill): its memory is back, so the settle time ends as
    /// soon as available memory falls below this level (the available
    /// memory when that kill was decided; the maximum when the victim freed
    /// less than was missing): the demand outran what the kill gave.
    #[serde(default)]
    pub reaped_settle_until_below: Option<u64>,
    /// What the launches on now still need (their profiles' M_sum and
    /// launch files less what they allocated), bytes; 0 with none.
    #[serde(default)]
    pub launch_need_bytes: u64,
    /// What relaunching the likely next app would bring back into memory
    /// ([`relaunch_need_bytes`]), bytes; 0 when none is likely or its
    /// memory is resident.
    #[serde(default)]
    pub relaunch_need_bytes: u64,
}

/// Stall share, percent, between two readings of a cumulative PSI counter
/// (µs) taken `elapsed_ms` apart; None when nothing elapsed. A counter that
/// went back (a reset) counts as no stall.
pub fn stall_percent(prev_total_us: u64, now_total_us: u64, elapsed_ms: u64) -> Option<f64> {
    if elapsed_ms == 0 {
        return None;
    }
    let stalled_us = now_total_us.saturating_sub(prev_total_us) as f64;
    // µs per ms of wall time, as a percentage: µs / (ms × 1000) × 100.
    Some((stalled_us / (elapsed_ms as f64 * 10.0)).min(100.0))
}

/// Whether to kill now: only when reclaim cannot keep up (the AppFlow
/// paper §4.3): memory is low, what is left is mostly anonymous (file pages
/// are cheap to drop, and dropping them is the reclaimer's job), and
/// anonymous reclaim is either at its capacity (swap nearly full; no swap
/// counts as full) or too slow for the demand (a stall, PSI). These are the
/// paper's two cases of anonymous-page dominance: reclaim capacity limits,
/// and burst allocations that outrun anonymous writeback.
///
/// At the capacity limit memory need not look low: reclaim then drops file
/// pages, and M_aval (free + page cache) stays up while the page cache
/// churns. So with anonymous memory dominant and swap nearly full, a stall
/// above `trigger_capacity_psi_some_avg10` is a trigger too (a *capacity
/// stall*).
pub fn should_kill(cfg: &KillerConfig, p: &PressureState) -> Result<Reason, Reason> {
    let Capacity {
        low,
        anon_bound,
        swap_full,
    } = capacity(cfg, p);
    // A launch that needs more than is available while anonymous reclaim is
    // at its capacity blocks on an allocation nothing can meet: the kill
    // comes before it does. Swap can be full with memory not yet low:
    // Android 15's ActivityManager pages frozen cached apps out to zram
    // (docs/sim.md, "The Android 15 baseline"); without this, the simulated
    // Pixel 7 6 GB met its OOM killer in 5 of 48 users' launches.
    let launch_short = anon_bound && swap_full && p.launch_need_bytes > p.avail_bytes;
    // Likewise a relaunch of an app the user is likely to open next, whose
    // memory is in swap: with swap at its bound, the memory it faults back
    // in comes from a kill or from other pages swapped out in its place,
    // either during the relaunch, on the user's time. The kill comes
    // before it (the relaunch headroom).
    let relaunch_short = anon_bound && swap_full && p.relaunch_need_bytes > p.avail_bytes;
    if let Some(t) = p.last_kill_ms {
        // A reaped victim's memory is back already. Waiting the settle time
        // lets reclaim catch up with the demand; once available memory has
        // fallen below where it was when the victim was chosen *and* below
        // half the trigger level (halfway from where the killer starts to
        // nothing left to reclaim), the demand has outrun both, and the
        // next kill must not wait (lmkd's kill timeout likewise covers only
        // a victim not yet reaped). Without it a launch allocating faster
        // than reclaim drove the simulated kernel to its OOM killer within
        // the settle time (docs/killer.md). Nor does a launch still short
        // after a reaped kill wait: no reclaim can catch up with it.
        let critical = (cfg.trigger_avail_fraction * p.total_bytes as f64 / 2.0) as u64;
        let reaped = p.reaped_settle_until_below;
        let outran = reaped.is_some_and(|level| p.avail_bytes < level.min(critical));
        let settle = if outran || (launch_short && reaped.is_some()) {
            0
        } else {
            cfg.settle_ms
        };
        if p.now_ms.saturating_sub(t) < settle {
            return Err(Reason::KillWaitingForMemory);
        }
    }
    let stalled = p.psi_some_avg10 > cfg.trigger_psi_some_avg10;
    let stall = p.psi_some_window.unwrap_or(p.psi_some_avg10);
    let window_after_kill = p
        .last_kill_ms
        .is_none_or(|t| p.now_ms.saturating_sub(t) >= cfg.capacity_stall_window_ms);
    let capacity_stall =
        anon_bound && swap_full && stall > cfg.trigger_capacity_psi_some_avg10 && window_after_kill;
    if (low && anon_bound && (swap_full || stalled)) || capacity_stall || launch_short {
        Ok(Reason::KillHighestNetFreed)
    } else if relaunch_short {
        Ok(Reason::KillRelaunchHeadroom)
    } else {
        Err(Reason::KillNotNeeded)
    }
}

/// Share of an app's swapped anonymous memory that a switch back to it
/// faults in again: 44 %, the anonymous pages ASAP measured invariant
/// across switches (the ASAP paper, "Optimized SFE for Each Type of
/// Pages"). The rest a switch may or may not touch.
pub const RELAUNCH_ANON_SHARE: f64 = 0.44;

/// Share of an app's launch files that a switch back to it reads again:
/// the same 44 %. ASAP's file-backed share (75 %) is of the pages a switch
/// touched, and a cold launch's files are more than a switch touches: with
/// 75 % of them the kill came too early (simulated, 200 generated users,
/// 30 days: 52 of them on the Pixel 7 6 GB killed more than android,
/// against 17 with 44 %; docs/killer.md).
pub const RELAUNCH_FILE_SHARE: f64 = 0.44;

/// An app the user may open next, as the relaunch headroom sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LikelyRelaunch {
    /// The chance it is the next app opened ([`crate::reuse::UsageModel::p_next`]).
    pub p_next: f64,
    /// Its anonymous memory in swap, bytes (`Swap:` of smaps_rollup).
    pub swapped_bytes: u64,
    /// Its launch files, bytes (its profile's; 0 without one). Once swap
    /// is at its bound, page cache is what reclaim has left to take, and a
    /// background app's files are counted as gone.
    pub file_bytes: u64,
}

/// What relaunching the likely next app brings back into memory, bytes:
/// of the apps more than `relaunch_min_p_next` likely to be opened next,
/// the most that one faults back in from swap and reads from its files
/// ([`RELAUNCH_ANON_SHARE`], [`RELAUNCH_FILE_SHARE`]).
/// The trigger ([`should_kill`]) keeps that much available once swap is
/// at its bound, so that the kill comes before the relaunch, not during it.
pub fn relaunch_need_bytes(cfg: &KillerConfig, apps: &[LikelyRelaunch]) -> u64 {
    apps.iter()
        .filter(|a| a.p_next > cfg.relaunch_min_p_next)
        .map(|a| {
            (a.swapped_bytes as f64 * RELAUNCH_ANON_SHARE
                + a.file_bytes as f64 * RELAUNCH_FILE_SHARE) as u64
        })
        .max()
        .unwrap_or(0)
}

/// Whether a last-resort kill (only recently used apps left) is allowed:
/// memory low, what is used mostly anonymous, and anonymous reclaim at its
/// capacity (swap nearly full, or none). The kernel is then about to run
/// out; a memory stall alone (PSI) is not enough, since reclaim still has
/// somewhere to put pages (the AppFlow paper §4.3: reclaim capacity limits).
pub fn last_resort_allowed(cfg: &KillerConfig, p: &PressureState) -> bool {
    let c = capacity(cfg, p);
    c.low && c.anon_bound && c.swap_full
}

/// The three readings both triggers start from.
struct Capacity {
    /// Available memory under `trigger_avail_fraction` of the domain.
    low: bool,
    /// Anonymous pages above `trigger_anon_share` of what is used.
    anon_bound: bool,
    /// Anonymous reclaim at its capacity ([`KillerConfig::swap_at_bound`]).
    swap_full: bool,
}

fn capacity(cfg: &KillerConfig, p: &PressureState) -> Capacity {
    Capacity {
        low: (p.avail_bytes as f64) < cfg.trigger_avail_fraction * p.total_bytes as f64,
        anon_bound: cfg.anon_bound(p.anon_bytes, p.file_bytes),
        swap_full: cfg.swap_at_bound(p.swap_total_bytes, p.swap_free_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MIB;
    use proptest::prelude::*;

    /// A pressure state at 10 s, no stall, no kill yet; sizes in MiB.
    fn pressure(avail: u64, total: u64, anon: u64, file: u64, swap: (u64, u64)) -> PressureState {
        PressureState {
            now_ms: 10_000,
            avail_bytes: avail * MIB,
            total_bytes: total * MIB,
            anon_bytes: anon * MIB,
            file_bytes: file * MIB,
            swap_total_bytes: swap.0 * MIB,
            swap_free_bytes: swap.1 * MIB,
            psi_some_avg10: 0.0,
            psi_some_window: None,
            last_kill_ms: None,
            reaped_settle_until_below: None,
            launch_need_bytes: 0,
            relaunch_need_bytes: 0,
        }
    }

    fn cand(pid: u32, cur_mib: u64, relaunch_mib: u64, last_used_ms: u64) -> Candidate {
        Candidate {
            pid,
            app: format!("app{pid}"),
            current_bytes: cur_mib * MIB,
            relaunch_bytes: Some(relaunch_mib * MIB),
            last_used_ms,
            foreground: false,
            protected: false,
            is_self: false,
            oom_score_adj: 900,
            anon_bytes: None,
            resident_anon_bytes: None,
            reuse: None,
            relaunch_cost_ms: None,
        }
    }

    /// A candidate idle since `last_used_ms` with a prediction: reuse
    /// probability `p`, expected idle `idle_h` hours, relaunch cost `ms`.
    fn priced(pid: u32, mib: u64, last_used_ms: u64, p: f64, idle_h: f64, ms: f64) -> Candidate {
        Candidate {
            anon_bytes: Some(mib * MIB),
            reuse: Some(ReuseEstimate {
                p_reuse: p,
                expected_idle_ms: idle_h * 3_600_000.0,
                horizon_ms: 7 * 24 * 3_600_000,
            }),
            relaunch_cost_ms: Some(ms),
            ..cand(pid, mib, mib, last_used_ms)
        }
    }

    #[test]
    fn a_launch_needing_more_than_is_available_with_swap_full_kills_before_it_blocks() {
        let cfg = KillerConfig::default();
        // 6 GiB domain, 2 GiB available (not low), mostly anonymous, zram
        // with 5 % free: below the trigger's 10 %.
        let mut p = pressure(2048, 6144, 3000, 500, (1700, 85));
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // A launch that still needs 2.5 GiB: nothing can page out, so it
        // would block.
        p.launch_need_bytes = 2560 * MIB;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        // Needing what is available, it would not.
        p.launch_need_bytes = 2048 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Just after a kill whose memory is back, still short: no settle
        // (nothing but another kill can help); a victim not yet reaped is
        // waited for.
        p.launch_need_bytes = 2560 * MIB;
        p.last_kill_ms = Some(p.now_ms - 50);
        p.reaped_settle_until_below = Some(2048 * MIB);
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        p.reaped_settle_until_below = None;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
        // With swap room the kernel pages out instead.
        p.last_kill_ms = None;
        p.swap_free_bytes = 600 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
    }

    #[test]
    fn room_is_kept_for_the_likely_next_apps_relaunch_once_swap_is_full() {
        let cfg = KillerConfig::default();
        // A GB-scale app likely next (1 in 4), 1.5 GiB in swap and 1 GiB of
        // launch files; a small one likelier still; a big one unlikely.
        let apps = [
            LikelyRelaunch {
                p_next: 0.25,
                swapped_bytes: 1536 * MIB,
                file_bytes: 1024 * MIB,
            },
            LikelyRelaunch {
                p_next: 0.6,
                swapped_bytes: 100 * MIB,
                file_bytes: 50 * MIB,
            },
            LikelyRelaunch {
                p_next: 0.05,
                swapped_bytes: 3000 * MIB,
                file_bytes: 0,
            },
        ];
        let need = relaunch_need_bytes(&cfg, &apps);
        // The big likely one: 44 % of what it faults back in, both kinds.
        assert_eq!(need, ((2560 * MIB) as f64 * 0.44) as u64);
        // Off: nothing is kept.
        let off = KillerConfig {
            relaunch_min_p_next: 1.0,
            ..cfg.clone()
        };
        assert_eq!(relaunch_need_bytes(&off, &apps), 0);
        assert_eq!(relaunch_need_bytes(&cfg, &[]), 0);
        // 6 GiB domain, 1 GiB available (not low), mostly anonymous.
        let mut p = pressure(1024, 6144, 3000, 500, (1700, 85));
        p.relaunch_need_bytes = need;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillRelaunchHeadroom));
        // Enough available for it: no kill.
        p.avail_bytes = need;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Swap with room: the relaunch's memory can come from a page-out.
        p.avail_bytes = 1024 * MIB;
        p.swap_free_bytes = 600 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Memory mostly page cache: reclaim can take it.
        p.swap_free_bytes = 85 * MIB;
        p.file_bytes = 3000 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Within the settle time of a kill, its memory is waited for.
        p.file_bytes = 500 * MIB;
        p.last_kill_ms = Some(p.now_ms - 50);
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
    }

    #[test]
    fn recent_apps_order_by_net_freed_not_size() {
        let cfg = KillerConfig::default();
        let now = 100 * 60 * 1000;
        // Fig. 12a: a 1200 MB app that needs 1100 MB again frees 100 MB for
        // good; a 600 MB app bloated from 300 MB frees 300 MB. Both used a
        // minute ago (deferred): the last resort takes the larger ΔM.
        let used = now - 60_000;
        let c = vec![cand(1, 1200, 1100, used), cand(2, 600, 300, used)];
        let d = choose_victim(&cfg, now, &c);
        assert_eq!(d.victim, Some(1));
        assert_eq!(d.reason, Reason::KillRecentLastResort);
        assert_eq!(d.net_freed_bytes, 300 * MIB as i64);
        let c = vec![cand(1, 1200, 1100, 0), cand(2, 600, 300, 0)];
        // The stock order would take the least recently used (equal adj).
        let mut c2 = c.clone();
        c2[1].last_used_ms = 10;
        assert_eq!(choose_victim_lru(&cfg, &c2).victim, Some(0));
    }

    #[test]
    fn apps_past_the_window_order_by_memory_time_per_expected_relaunch() {
        let cfg = KillerConfig::default();
        let hour = 3_600_000;
        let now = 100 * hour;
        // A 2 GB app reused every evening (certain within the week, back in
        // 5 h, a 1.5 s relaunch) and a 300 MB app opened every few days
        // (P 0.9, back in 60 h, 150 ms): 2000 × 5 / 1500 ≈ 6.7 against
        // 300 × 60 / 135 ≈ 133 MB·h per s; the rarely used one goes,
        // although the big one frees more memory-time by its idle time
        // (today's order took it: 2000 MB × 19 h against 300 MB × 40 h).
        let c = vec![
            priced(1, 2000, now - 19 * hour, 1.0, 5.0, 1500.0),
            priced(2, 300, now - 40 * hour, 0.9, 60.0, 150.0),
        ];
        let d = choose_victim(&cfg, now, &c);
        assert_eq!(
            (d.victim, d.reason),
            (Some(1), Reason::KillLeastExpectedCost)
        );
        // Alike in reuse and cost: the larger frees more.
        let c = vec![
            priced(1, 300, now - 10 * hour, 0.5, 40.0, 200.0),
            priced(2, 500, now - 10 * hour, 0.5, 40.0, 200.0),
        ];
        assert_eq!(choose_victim(&cfg, now, &c).victim, Some(1));
        // No history (never seen opened) or a free relaunch: worth most.
        let c = vec![
            priced(1, 800, now - hour, 0.9, 10.0, 300.0),
            cand(2, 50, 40, now - hour),
        ];
        assert_eq!(choose_victim(&cfg, now, &c).victim, Some(1));
        assert!(kill_value(&c[1]).is_infinite());
        assert_eq!(
            choose_victim(&cfg, now, &c[1..]).reason,
            Reason::KillNoReuseExpected
        );
        let free = priced(3, 10, now - hour, 1.0, 1.0, 0.0);
        assert!(kill_value(&free).is_infinite());
        // A recent app, however cheap, stays behind every idle one.
        let c = vec![
            priced(1, 4000, now - 1000, 0.01, 160.0, 10.0),
            priced(2, 50, now - hour, 1.0, 1.0, 2000.0),
        ];
        let order: Vec<usize> = rank(&cfg, now, &c).iter().map(|r| r.index).collect();
        assert_eq!(order, vec![1, 0]);
        // The anonymous memory is what a kill frees, not the page cache.
        let mut a = priced(1, 100, now - hour, 0.5, 10.0, 100.0);
        a.current_bytes = 900 * MIB;
        assert_eq!(freed_bytes(&a), 100 * MIB);
    }

    #[test]
    fn a_big_app_unused_for_a_week_goes_before_a_small_daily_one() {
        let cfg = KillerConfig::default();
        let hour = 3_600_000;
        let now = 1000 * hour;
        // A GB-scale app (1.2 GB, a 2.5 s relaunch) last used a week ago,
        // seldom before (P 0.3 within the week, 140 h away on average), and
        // a 150 MB chat app used daily (certain, back in 10 h, 100 ms):
        // 1200 × 140 / 750 ≈ 224 against 150 × 10 / 100 = 15. Pricing the
        // relaunch does not keep a big app nobody opens.
        let c = vec![
            priced(1, 150, now - 20 * hour, 1.0, 10.0, 100.0),
            priced(2, 1200, now - 168 * hour, 0.3, 140.0, 2500.0),
        ];
        assert_eq!(choose_victim(&cfg, now, &c).victim, Some(1));
    }

    #[test]
    fn relaunch_cost_is_the_launch_set_read_on_the_curve() {
        use crate::profile::{ByteRange, LaunchObservation, ObservedFile};
        use crate::storage::CurvePoint;
        let curve = ThroughputCurve::new(vec![
            CurvePoint {
                block_bytes: 4096,
                bytes_per_sec: 10e6,
            },
            CurvePoint {
                block_bytes: READAHEAD_BYTES,
                bytes_per_sec: 100e6,
            },
        ])
        .unwrap();
        let file = |name: &str, size: u64| ObservedFile {
            path: format!("/{name}"),
            size_bytes: size,
            first_access_us: 0,
            ranges: vec![ByteRange {
                start: 0,
                end: size,
            }],
        };
        let mut p = LaunchProfile::new("a");
        p.merge_launch(&LaunchObservation {
            // 100 MB read in readahead windows (1 s) and 4 KiB read whole
            // at 10 MB/s (0.4096 ms).
            files: vec![file("big", 100_000_000), file("small", 4096)],
            ..Default::default()
        });
        let ms = relaunch_cost_ms(&p, &curve);
        assert!((ms - 1000.4096).abs() < 1e-6, "{ms}");
        assert_eq!(relaunch_cost_ms(&LaunchProfile::new("none"), &curve), 0.0);
    }

    #[test]
    fn recent_apps_are_deferred() {
        let cfg = KillerConfig::default();
        let now = 100 * 60 * 1000;
        let c = vec![cand(1, 2000, 100, now - 1000), cand(2, 400, 300, 0)];
        assert_eq!(choose_victim(&cfg, now, &c).victim, Some(1));
        let only_recent = vec![cand(1, 2000, 100, now - 1000)];
        let d = choose_victim(&cfg, now, &only_recent);
        assert_eq!(
            (d.victim, d.reason),
            (Some(0), Reason::KillRecentLastResort)
        );
    }

    #[test]
    fn trigger_needs_low_memory_anon_dominance_and_full_or_stalled_anon_reclaim() {
        let cfg = KillerConfig::default();
        let mut p = pressure(100, 6000, 4000, 500, (0, 0));
        // No swap: anonymous memory cannot be reclaimed.
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        // Swap with room: reclaim can still keep up, no kill.
        p.swap_total_bytes = 2000 * MIB;
        p.swap_free_bytes = 1000 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Swap nearly full: kill.
        p.swap_free_bytes = 100 * MIB;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        p.last_kill_ms = Some(9_900);
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
        p.last_kill_ms = None;
        // Mostly file pages: the reclaimer drops them, no kill, stalled or not.
        p.file_bytes = 4000 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        p.psi_some_avg10 = 50.0;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Mostly anonymous, swap with room, but reclaim stalls: kill.
        p.file_bytes = 500 * MIB;
        p.swap_free_bytes = 1000 * MIB;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
    }

    #[test]
    fn capacity_stall_triggers_while_page_cache_keeps_memory_up() {
        let cfg = KillerConfig::default();
        // Swap full, mostly anonymous, 1.2 GB available (page cache that
        // reclaim keeps dropping): not low.
        let mut p = pressure(1200, 8000, 5000, 1200, (2000, 50));
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Stalled above lmkd's 70 ms per second: kill.
        p.psi_some_avg10 = 9.0;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        // Not once the stall is below it.
        p.psi_some_avg10 = 5.0;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        p.psi_some_avg10 = 9.0;
        // Swap with room: anonymous reclaim can still move pages, no kill.
        p.swap_free_bytes = 1000 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Mostly file pages: the reclaimer's job.
        p.swap_free_bytes = 50 * MIB;
        p.file_bytes = 5000 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        // Switched off (100 %): as before.
        p.file_bytes = 1200 * MIB;
        let off = KillerConfig {
            trigger_capacity_psi_some_avg10: 100.0,
            ..KillerConfig::default()
        };
        assert_eq!(should_kill(&off, &p), Err(Reason::KillNotNeeded));
        // Within the settle time of a kill: wait.
        p.last_kill_ms = Some(9_800);
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
        // Past the settle time but within one stall window of the kill: the
        // stall measured may predate the kill; wait for a whole window.
        p.last_kill_ms = Some(9_400);
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        p.last_kill_ms = Some(9_000);
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        // The window's own stall, when measured, counts instead of avg10.
        p.psi_some_window = Some(3.0);
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillNotNeeded));
        p.psi_some_window = Some(8.0);
        p.psi_some_avg10 = 1.0;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
    }

    #[test]
    fn a_reaped_kill_waits_only_while_reclaim_can_catch_up() {
        let cfg = KillerConfig::default();
        // 8 GB, trigger level 5 % (410 MB), critical below 205 MB.
        let mut p = pressure(380, 8192, 6000, 300, (2000, 0));
        p.last_kill_ms = Some(9_900);
        // Not reaped: the settle time.
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
        // Reaped at 380 MB available: still the settle time while memory
        // stays above half the trigger level.
        p.reaped_settle_until_below = Some(380 * MIB);
        p.avail_bytes = 300 * MIB;
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
        // Below it and below where the kill was decided: kill at once.
        p.avail_bytes = 150 * MIB;
        assert_eq!(should_kill(&cfg, &p), Ok(Reason::KillHighestNetFreed));
        // Memory came back above the kill's level: wait.
        p.reaped_settle_until_below = Some(100 * MIB);
        assert_eq!(should_kill(&cfg, &p), Err(Reason::KillWaitingForMemory));
    }

    #[test]
    fn stall_percent_from_two_counter_readings() {
        assert_eq!(stall_percent(1_000, 71_000, 1000), Some(7.0));
        assert_eq!(stall_percent(0, 0, 1000), Some(0.0));
        assert_eq!(stall_percent(5, 9, 0), None);
        // A counter that went back counts as no stall; more than the
        // elapsed time is capped.
        assert_eq!(stall_percent(9_000, 5, 1000), Some(0.0));
        assert_eq!(stall_percent(0, 5_000_000, 1000), Some(100.0));
    }

    proptest! {
        #[test]
        fn never_picks_foreground_protected_or_self(
            procs in prop::collection::vec(
                (0u64..4000, 0u64..4000, 0u64..10_000_000, any::<bool>(), any::<bool>(), any::<bool>(), -1000i32..1000),
                0..30),
            now in 0u64..20_000_000,
        ) {
            let cfg = KillerConfig::default();
            let cands: Vec<Candidate> = procs.iter().enumerate().map(|(i, p)| Candidate {
                pid: i as u32 + 1,
                app: format!("a{i}"),
                current_bytes: p.0 * MIB,
                relaunch_bytes: Some(p.1 * MIB),
                last_used_ms: p.2,
                foreground: p.3,
                protected: p.4,
                is_self: p.5,
                oom_score_adj: p.6,
                anon_bytes: None,
                resident_anon_bytes: None,
                reuse: None,
                relaunch_cost_ms: None,
            }).collect();
            for d in [choose_victim(&cfg, now, &cands), choose_victim_lru(&cfg, &cands)] {
                match d.victim {
                    Some(i) => {
                        let c = &cands[i];
                        prop_assert!(!c.foreground && !c.protected && !c.is_self);
                    }
                    None => prop_assert!(cands.iter().all(|c| exclusion(c).is_some())),
                }
            }
        }
    }

    #[test]
    fn a_kill_gives_back_its_swapped_memory_at_what_swap_holds_of_it() {
        let mut c = cand(1, 400, 100, 0);
        c.anon_bytes = Some(300 * MIB);
        c.resident_anon_bytes = Some(100 * MIB);
        // Swap outside the domain: the resident part only.
        assert_eq!(returned_bytes(&c, Some(0.0)), 100 * MIB);
        // zram at 4:1 on a whole device: a quarter of the swapped part.
        assert_eq!(returned_bytes(&c, Some(0.25)), 150 * MIB);
        // A share above 1 is read as 1; unknown counts the whole.
        assert_eq!(returned_bytes(&c, Some(7.0)), 300 * MIB);
        assert_eq!(returned_bytes(&c, None), 300 * MIB);
        // The resident part unknown: the whole anonymous memory.
        c.resident_anon_bytes = None;
        assert_eq!(returned_bytes(&c, Some(0.0)), 300 * MIB);
        // The share: held over swapped, at most 1, 0 with nothing swapped.
        assert_eq!(swapped_ram_share(1, 4), 0.25);
        assert_eq!(swapped_ram_share(9, 4), 1.0);
        assert_eq!(swapped_ram_share(5, 0), 0.0);
    }
}
