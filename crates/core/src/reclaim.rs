//! Adaptive Memory Reclaimer mode controller (the AppFlow paper §4.2, Algorithm 1).
//!
//! Every tick (100 ms) the caller passes n_alloc (pages allocated in the last
//! tick) and the domain's memory state. The controller returns the mode:
//!
//! * **Normal** — kernel defaults, restored exactly.
//! * **EfficiencyFirst** — entered when M_aval < M_F and n_alloc > N_alloc
//!   (Algorithm 1 line 4): reclaim file pages only, never protected ones.
//! * **Rebalancing** — after the burst subsides (line 6): reclaim anonymous
//!   pages of background apps while memory is still low (M_aval < M_F),
//!   until memory is above M_F again or a time limit passes, then Normal. Algorithm 1 reclaims
//!   anonymous pages on allocation events under low memory (line 6 sits
//!   inside the line 4 test); paging out past M_F only moves background
//!   apps to swap that the next switch to them brings back (measured on the
//!   testbed's multitask run: +25 % swap-out and 1.5× slower switches before
//!   this bound). It does not stop at an anon/file share by default
//!   (`anon_target_share` 0): on a real machine the background apps' share
//!   was already below such a target while the domain had 0.1 MiB available
//!   against an M_F of 3.2 GiB, so rebalancing freed nothing ahead of the
//!   next launch, and the launch then paid for the page-out itself.
//!
//! A rebalancing also ends, and waits as after a timeout, once a tick's
//! page-out is followed by no rise of M_aval: the memory it freed went to
//! another use at once (background apps growing, page cache), and paging
//! out more only moves background apps to swap. On the testbed's multitask
//! run (a 1 GiB memory cgroup that stays below M_F) rebalancing had filled
//! the swap (512 of 512 MiB with the reclaimer alone, 283 with the stock
//! kernel), and the killer then killed an app in every repetition where the
//! kernel killed none (docs/results-log-bench.md).
//!
//! Hysteresis: a burst is *entered* on the paper's condition but only *left*
//! after `calm_ticks` consecutive ticks below a lower bar (n_alloc below
//! `exit_alloc_ratio`·N_alloc or memory above M_F·(1 + `exit_margin`)), so
//! the mode does not flap on a noisy allocation rate.
//!
//! A launch in progress is never the end of a burst: an app that stalls on
//! reclaim or I/O stops allocating, which looks calm, so calm ticks are not
//! counted while an app launches, and rebalancing pages nothing out until
//! the launch is over (its page-out would compete with the launch for the
//! CPU and the swap device).

use crate::reason::Reason;
use serde::{Deserialize, Serialize};

/// Reclaimer parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReclaimConfig {
    /// Sampling period, ms (§4.2.1: every 100 ms).
    pub tick_ms: u64,
    /// N_alloc: pages per tick that mark a burst (§4.2.1, §6.5.2: 12,800 pages/100 ms).
    pub alloc_threshold_pages: u64,
    /// M_F in bytes; 0 = use `low_memory_fraction` of the domain (M_F is device specific, §4.2.1).
    pub low_memory_bytes: u64,
    /// M_F as a fraction of the domain's memory when `low_memory_bytes` is 0.
    pub low_memory_fraction: f64,
    /// Consecutive calm ticks before leaving efficiency-first.
    pub calm_ticks: u32,
    /// A tick is calm when n_alloc < this × N_alloc ...
    pub exit_alloc_ratio: f64,
    /// ... or M_aval > M_F × (1 + this).
    pub exit_margin: f64,
    /// Rebalancing also stops when anon/(anon+file) is at or below this
    /// share; 0 (the default) = no such stop: rebalancing pages background
    /// apps out until M_aval is back at M_F or nothing background is left.
    /// (0.66 was the 1.92:1 anon-to-file ratio of GB-scale apps, §4.2.1.)
    pub anon_target_share: f64,
    /// Most anonymous bytes paged out per tick while rebalancing; 0 (the
    /// default) = one tick of page-out at the rate the mechanism measures
    /// on its own calls (`ReclaimMechanism::page_out_bytes_per_sec`), so
    /// rebalancing frees memory as fast as the device compresses it. A
    /// fixed 32 MiB paged out 200-370 MB/s on a machine whose page-out
    /// into lz4 zram runs at 700-760 MB/s, and a GB-scale app's launch
    /// then began below M_F (results log, 2026-11-27).
    pub rebalance_step_bytes: u64,
    /// Rebalancing gives up after this long, ms. After a rebalancing that
    /// timed out, the next one ahead of a burst waits this long, doubled at
    /// each timeout in a row (at most [`MAX_TIMEOUT_BACKOFF`] times): a
    /// domain whose background has nothing left to page out does not cycle
    /// through rebalancing while nothing launches.
    pub rebalance_max_ms: u64,
    /// While no app launches, a burst is entered only after this many
    /// ticks in a row above N_alloc (a launch enters it at its first
    /// tick): a single tick of faults (a preload touch, a background app
    /// waking) is no burst, and the mode does not flap on it. 1 (the
    /// default here, the paper's single-tick test; the daemon's default is
    /// [`DAEMON_BURST_TICKS`]).
    pub burst_ticks: u32,
    /// The re-fault policy lowers kswapd's step only when the direct share
    /// over this long (the last windows, summed) is low as well, ms; 0
    /// judges each window alone. Default: three minutes (the re-fault
    /// study's measurements, §3.2 Fig. 3; `crate::refault::REGIME_MS`).
    pub refault_regime_ms: u64,
}

impl Default for ReclaimConfig {
    fn default() -> Self {
        Self {
            tick_ms: 100,
            alloc_threshold_pages: 12_800,
            low_memory_bytes: 0,
            low_memory_fraction: 0.15,
            calm_ticks: 5,
            exit_alloc_ratio: 0.5,
            exit_margin: 0.10,
            anon_target_share: 0.0,
            rebalance_step_bytes: 0,
            rebalance_max_ms: 5_000,
            burst_ticks: 1,
            refault_regime_ms: crate::refault::REGIME_MS,
        }
    }
}

impl ReclaimConfig {
    /// M_F for a domain of `total_bytes`.
    pub fn low_memory_threshold(&self, total_bytes: u64) -> u64 {
        if self.low_memory_bytes > 0 {
            self.low_memory_bytes
        } else {
            (total_bytes as f64 * self.low_memory_fraction) as u64
        }
    }

    /// The rate at which reclaim supplies memory, bytes/s: N_alloc pages per
    /// tick. The AppFlow paper §4.2.1 calls an allocation rate above N_alloc
    /// a burst, one that outpaces what the kernel's reclaim can free; a
    /// device calibration sets N_alloc from its measured reclaim throughput.
    pub fn reclaim_bytes_per_sec(&self) -> f64 {
        self.alloc_threshold_pages as f64 * crate::PAGE_BYTES as f64 * 1000.0
            / self.tick_ms.max(1) as f64
    }

    /// Checks the fields (finite, positive where zero would disable the
    /// controller, bounded); the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=60_000).contains(&self.tick_ms) {
            return Err("reclaim.tick_ms must be in 1..=60000".into());
        }
        if !(1..=1 << 32).contains(&self.alloc_threshold_pages) {
            return Err("reclaim.alloc_threshold_pages must be in 1..=4294967296".into());
        }
        if self.low_memory_bytes > 1 << 50 {
            return Err("reclaim.low_memory_bytes must be at most 2^50 (1 PiB)".into());
        }
        if !(0.0..1.0).contains(&self.low_memory_fraction) {
            return Err("reclaim.low_memory_fraction must be in [0, 1)".into());
        }
        if !(1..=10_000_000).contains(&self.calm_ticks) {
            return Err("reclaim.calm_ticks must be in 1..=10000000".into());
        }
        if !(0.0..=1.0).contains(&self.exit_alloc_ratio) {
            return Err("reclaim.exit_alloc_ratio must be in [0, 1]".into());
        }
        if !(0.0..=1.0).contains(&self.anon_target_share) {
            return Err("reclaim.anon_target_share must be in [0, 1]".into());
        }
        if !(0.0..=10.0).contains(&self.exit_margin) {
            return Err("reclaim.exit_margin must be in [0, 10]".into());
        }
        if self.rebalance_step_bytes != 0
            && !(crate::PAGE_BYTES..=16 * crate::GIB).contains(&self.rebalance_step_bytes)
        {
            return Err(
                "reclaim.rebalance_step_bytes must be 0 (one tick at the measured rate) or in 4096..=17179869184"
                    .into(),
            );
        }
        if !(1..=3_600_000).contains(&self.rebalance_max_ms) {
            return Err("reclaim.rebalance_max_ms must be in 1..=3600000".into());
        }
        if !(1..=1000).contains(&self.burst_ticks) {
            return Err("reclaim.burst_ticks must be in 1..=1000".into());
        }
        if self.refault_regime_ms > 86_400_000 {
            return Err("reclaim.refault_regime_ms must be in 0..=86400000".into());
        }
        Ok(())
    }
}

/// The reclaim mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimMode {
    /// Kernel defaults.
    Normal,
    /// File-only reclaim; protected files kept.
    EfficiencyFirst,
    /// Anonymous reclaim of background apps.
    Rebalancing,
}

impl ReclaimMode {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            ReclaimMode::Normal => "normal",
            ReclaimMode::EfficiencyFirst => "efficiency_first",
            ReclaimMode::Rebalancing => "rebalancing",
        }
    }
}

/// One tick's observation of the domain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReclaimSample {
    /// Caller's monotonic time, ms.
    pub now_ms: u64,
    /// n_alloc: pages allocated during the last tick (normalise with [`alloc_pages_per_tick`]).
    pub alloc_pages: u64,
    /// M_aval: memory available to the domain, bytes.
    pub avail_bytes: u64,
    /// The domain's memory, bytes.
    pub total_bytes: u64,
    /// Anonymous memory in the domain, bytes.
    pub anon_bytes: u64,
    /// File-backed memory in the domain, bytes.
    pub file_bytes: u64,
    /// An app is launching (its `launched` event has not come yet).
    #[serde(default)]
    pub launching: bool,
}

/// What the controller decided this tick.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReclaimDecision {
    /// Mode from now on.
    pub mode: ReclaimMode,
    /// Mode before this tick.
    pub prev_mode: ReclaimMode,
    /// Why.
    pub reason: Reason,
    /// In rebalancing: anonymous bytes of background apps to page out this tick.
    pub anon_reclaim_bytes: u64,
}

impl ReclaimDecision {
    /// True when the mode changed this tick.
    pub fn switched(&self) -> bool {
        self.mode != self.prev_mode
    }
}

/// Normalises an allocation-counter delta to pages per configured tick.
pub fn alloc_pages_per_tick(prev_count: u64, cur_count: u64, elapsed_ms: u64, tick_ms: u64) -> u64 {
    if elapsed_ms == 0 {
        return 0;
    }
    let delta = cur_count.saturating_sub(prev_count) as u128;
    (delta * tick_ms as u128 / elapsed_ms as u128) as u64
}

/// Whether anonymous memory is at or below its target share of the used
/// memory (`anon_target_share`; never with the default 0, no target).
fn anon_balanced(cfg: &ReclaimConfig, s: &ReclaimSample) -> bool {
    cfg.anon_target_share > 0.0 && s.anon_bytes <= anon_target(cfg, s)
}

/// Anonymous bytes at the anon/file balance (`anon_target_share` of the
/// used memory; with no target, none: every anonymous byte is above it).
fn anon_target(cfg: &ReclaimConfig, s: &ReclaimSample) -> u64 {
    (cfg.anon_target_share * (s.anon_bytes + s.file_bytes) as f64) as u64
}

/// Anonymous bytes one rebalancing tick pages out: what brings M_aval back
/// to M_F, no more than the excess over the anon/file balance (when a
/// target is set), and at most one configured step (with none, 0, the
/// scheduler caps it at one tick of the mechanism's measured rate).
fn rebalance_bytes(cfg: &ReclaimConfig, s: &ReclaimSample, m_f: u64) -> u64 {
    let step = match cfg.rebalance_step_bytes {
        0 => u64::MAX,
        b => b,
    };
    s.anon_bytes
        .saturating_sub(anon_target(cfg, s))
        .min(m_f.saturating_sub(s.avail_bytes))
        .min(step)
}

/// The controller's state between ticks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimController {
    mode: ReclaimMode,
    calm: u32,
    since_ms: u64,
    /// When a rebalancing last timed out.
    #[serde(default)]
    timed_out_ms: Option<u64>,
    /// Rebalancings that timed out in a row (reset by one that restored
    /// the headroom, and by a burst).
    #[serde(default)]
    timeouts: u32,
    /// Ticks in a row above N_alloc with M_aval below M_F.
    #[serde(default)]
    over: u32,
    /// M_aval before the last tick's page-out, when it paged any out.
    #[serde(default)]
    paged_out_from: Option<u64>,
}

/// The daemon's `burst_ticks`: a burst with nothing launching lasts three
/// ticks (300 ms) before efficiency-first is entered. On the deployment
/// harness the domain's own faults (the preload worker's standby touch,
/// background processes waking) crossed N_alloc for single ticks while
/// nothing launched, and each crossing switched the mode twice.
pub const DAEMON_BURST_TICKS: u32 = 3;

/// The back-off after rebalancings that timed out in a row doubles the
/// wait at most this many times (5 s becomes at most 80 s).
pub const MAX_TIMEOUT_BACKOFF: u32 = 4;

impl Default for ReclaimController {
    fn default() -> Self {
        Self::new()
    }
}

impl ReclaimController {
    /// Starts in Normal.
    pub fn new() -> Self {
        Self {
            mode: ReclaimMode::Normal,
            calm: 0,
            since_ms: 0,
            timed_out_ms: None,
            timeouts: 0,
            over: 0,
            paged_out_from: None,
        }
    }

    /// Records what this tick's rebalancing paged out, bytes, and M_aval
    /// before it; the next step checks that M_aval rose.
    pub fn paged_out(&mut self, bytes: u64, avail_before: u64) {
        self.paged_out_from = (bytes > 0).then_some(avail_before);
    }

    /// Current mode.
    pub fn mode(&self) -> ReclaimMode {
        self.mode
    }

    /// One tick of Algorithm 1.
    pub fn step(&mut self, cfg: &ReclaimConfig, s: &ReclaimSample) -> ReclaimDecision {
        let m_f = cfg.low_memory_threshold(s.total_bytes);
        let over = s.avail_bytes < m_f && s.alloc_pages > cfg.alloc_threshold_pages;
        self.over = if over { self.over + 1 } else { 0 };
        let burst = over && (s.launching || self.over >= cfg.burst_ticks.max(1));
        if burst {
            self.timeouts = 0;
        }
        let calm_tick = !s.launching
            && ((s.alloc_pages as f64) < cfg.exit_alloc_ratio * cfg.alloc_threshold_pages as f64
                || s.avail_bytes as f64 > m_f as f64 * (1.0 + cfg.exit_margin));
        let prev = self.mode;
        // The last tick paged out, and M_aval did not rise after it.
        let futile = self
            .paged_out_from
            .take()
            .is_some_and(|before| s.avail_bytes <= before);
        let (mode, reason, anon) = match self.mode {
            ReclaimMode::Normal if burst => (
                ReclaimMode::EfficiencyFirst,
                Reason::ReclaimBurstDetected,
                0,
            ),
            ReclaimMode::Normal => {
                // §4.2.1 (ii): outside high-pressure phases, anonymous pages
                // are reclaimed ahead of future bursts. Memory below M_F for
                // `calm_ticks` calm ticks in a row (no launch, no burst),
                // (and anonymous memory above its balance, when a target is
                // set), starts a rebalancing; not again within
                // `rebalance_max_ms` of one that timed out (its page-out did
                // not bring memory back).
                let wait = cfg
                    .rebalance_max_ms
                    .saturating_mul(1 << self.timeouts.saturating_sub(1).min(MAX_TIMEOUT_BACKOFF));
                let cooled = self
                    .timed_out_ms
                    .is_none_or(|t| s.now_ms.saturating_sub(t) >= wait);
                let low_calm = calm_tick && s.avail_bytes < m_f && !anon_balanced(cfg, s) && cooled;
                self.calm = if low_calm { self.calm + 1 } else { 0 };
                if self.calm >= cfg.calm_ticks {
                    (ReclaimMode::Rebalancing, Reason::ReclaimAheadOfBurst, 0)
                } else {
                    (ReclaimMode::Normal, Reason::ReclaimNormal, 0)
                }
            }
            ReclaimMode::EfficiencyFirst => {
                self.calm = if calm_tick { self.calm + 1 } else { 0 };
                if self.calm >= cfg.calm_ticks {
                    (ReclaimMode::Rebalancing, Reason::ReclaimBurstEnded, 0)
                } else {
                    (ReclaimMode::EfficiencyFirst, Reason::ReclaimBurstOngoing, 0)
                }
            }
            ReclaimMode::Rebalancing if burst => (
                ReclaimMode::EfficiencyFirst,
                Reason::ReclaimBurstDetected,
                0,
            ),
            ReclaimMode::Rebalancing => {
                if anon_balanced(cfg, s) {
                    (ReclaimMode::Normal, Reason::ReclaimBalanced, 0)
                } else if s.avail_bytes >= m_f {
                    self.timeouts = 0;
                    (ReclaimMode::Normal, Reason::ReclaimHeadroomRestored, 0)
                } else if futile || s.now_ms.saturating_sub(self.since_ms) >= cfg.rebalance_max_ms {
                    self.timed_out_ms = Some(s.now_ms);
                    self.timeouts = self.timeouts.saturating_add(1);
                    let why = if futile {
                        Reason::ReclaimRebalanceFutile
                    } else {
                        Reason::ReclaimRebalanceTimeout
                    };
                    (ReclaimMode::Normal, why, 0)
                } else if s.launching {
                    // Paged out once the launch is over.
                    (ReclaimMode::Rebalancing, Reason::ReclaimRebalancing, 0)
                } else {
                    (
                        ReclaimMode::Rebalancing,
                        Reason::ReclaimRebalancing,
                        rebalance_bytes(cfg, s, m_f),
                    )
                }
            }
        };
        if mode != prev {
            self.since_ms = s.now_ms;
            self.calm = 0;
        }
        // A fresh rebalancing tick pages out its first step at once.
        let anon = if mode == ReclaimMode::Rebalancing && prev != mode {
            rebalance_bytes(cfg, s, m_f)
        } else {
            anon
        };
        self.mode = mode;
        ReclaimDecision {
            mode,
            prev_mode: prev,
            reason,
            anon_reclaim_bytes: anon,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GIB, MIB};
    use proptest::prelude::*;

    fn sample(now_ms: u64, alloc_pages: u64, avail_mib: u64) -> ReclaimSample {
        ReclaimSample {
            now_ms,
            alloc_pages,
            avail_bytes: avail_mib * MIB,
            total_bytes: 6 * GIB,
            anon_bytes: 3 * GIB,
            file_bytes: GIB,
            launching: false,
        }
    }

    #[test]
    fn with_nothing_launching_a_burst_must_last_burst_ticks() {
        let cfg = ReclaimConfig {
            burst_ticks: DAEMON_BURST_TICKS,
            ..ReclaimConfig::default()
        };
        let mut c = ReclaimController::new();
        // Single ticks of faults (a preload touch every 10 s): never a burst.
        for t in 0..20 {
            let alloc = if t % 4 == 0 { 20_000 } else { 0 };
            let d = c.step(&cfg, &sample(t * 100, alloc, 300));
            assert_ne!(d.mode, ReclaimMode::EfficiencyFirst, "tick {t}");
        }
        // Three ticks in a row: a burst, entered at the third.
        let mut c = ReclaimController::new();
        for t in 0..2 {
            assert_eq!(
                c.step(&cfg, &sample(t * 100, 20_000, 300)).mode,
                ReclaimMode::Normal
            );
        }
        assert_eq!(
            c.step(&cfg, &sample(200, 20_000, 300)).mode,
            ReclaimMode::EfficiencyFirst
        );
        // A launch enters at its first tick.
        let mut c = ReclaimController::new();
        let mut s = sample(0, 20_000, 300);
        s.launching = true;
        assert_eq!(c.step(&cfg, &s).mode, ReclaimMode::EfficiencyFirst);
    }

    #[test]
    fn rebalancings_that_time_out_in_a_row_back_off() {
        let cfg = ReclaimConfig::default();
        let mut c = ReclaimController::new();
        // Low memory, calm, nothing to page out: each rebalancing times out.
        let mut starts = Vec::new();
        let mut prev = ReclaimMode::Normal;
        for t in 0..2000u64 {
            let d = c.step(&cfg, &sample(t * 100, 0, 300));
            if d.mode == ReclaimMode::Rebalancing && prev != ReclaimMode::Rebalancing {
                starts.push(t * 100);
            }
            prev = d.mode;
        }
        let gaps: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        // Each gap: the rebalancing (5 s), then the wait (5, 5, 10, 20, 40,
        // 80, 80 s), then the calm ticks.
        let calm = (cfg.calm_ticks as u64 - 1) * 100;
        let run = cfg.rebalance_max_ms;
        let waits: Vec<u64> = gaps.iter().map(|g| g - run - calm).collect();
        assert_eq!(waits[..4], [5_000, 10_000, 20_000, 40_000]);
        assert!(waits
            .iter()
            .all(|w| *w <= cfg.rebalance_max_ms << MAX_TIMEOUT_BACKOFF));
        // A rebalancing that restores the headroom ends the back-off.
        assert!(c.timeouts > 0);
        let mut s = sample(300_000, 0, 300);
        s.avail_bytes = 6 * GIB;
        c.mode = ReclaimMode::Rebalancing;
        c.step(&cfg, &s);
        assert_eq!(c.timeouts, 0);
    }

    #[test]
    fn a_rebalancing_whose_page_out_frees_nothing_stops_and_waits() {
        let cfg = ReclaimConfig::default();
        let rebalancing = |c: &mut ReclaimController| {
            for t in 0..cfg.calm_ticks as u64 {
                c.step(&cfg, &sample(t * 100, 0, 300));
            }
            assert_eq!(c.mode(), ReclaimMode::Rebalancing);
        };
        // M_aval rises after each page-out: rebalancing goes on.
        let mut c = ReclaimController::new();
        rebalancing(&mut c);
        for (i, avail) in [310u64, 320, 330].into_iter().enumerate() {
            c.paged_out(10 * MIB, (avail - 10) * MIB);
            let d = c.step(&cfg, &sample(1_000 + i as u64 * 100, 0, avail));
            assert_eq!(d.mode, ReclaimMode::Rebalancing);
            assert!(d.anon_reclaim_bytes > 0);
        }
        // It does not: the memory went elsewhere; stop, and wait as after
        // a timeout before the next rebalancing.
        c.paged_out(10 * MIB, 330 * MIB);
        let d = c.step(&cfg, &sample(1_300, 0, 330));
        assert_eq!(
            (d.mode, d.reason),
            (ReclaimMode::Normal, Reason::ReclaimRebalanceFutile)
        );
        for t in 14..(14 + cfg.rebalance_max_ms / 100) {
            assert_eq!(
                c.step(&cfg, &sample(t * 100, 0, 330)).mode,
                ReclaimMode::Normal
            );
        }
        // A tick that paged nothing out is not judged.
        let mut c = ReclaimController::new();
        rebalancing(&mut c);
        c.paged_out(0, 300 * MIB);
        assert_eq!(
            c.step(&cfg, &sample(1_000, 0, 300)).mode,
            ReclaimMode::Rebalancing
        );
    }

    #[test]
    fn a_stalled_launch_is_not_the_end_of_a_burst() {
        let cfg = ReclaimConfig::default();
        let mut c = ReclaimController::new();
        let mut s = sample(0, 20_000, 300);
        s.launching = true;
        assert_eq!(c.step(&cfg, &s).mode, ReclaimMode::EfficiencyFirst);
        // The app stalls: no allocation for many ticks, still launching.
        for t in 1..50 {
            let mut s = sample(t * 100, 0, 300);
            s.launching = true;
            assert_eq!(c.step(&cfg, &s).mode, ReclaimMode::EfficiencyFirst);
        }
        // Launched: calm ticks count again, rebalancing follows.
        let mut t = 5000;
        let mut d = c.step(&cfg, &sample(t, 0, 300));
        while d.mode == ReclaimMode::EfficiencyFirst {
            t += 100;
            d = c.step(&cfg, &sample(t, 0, 300));
        }
        assert_eq!(d.mode, ReclaimMode::Rebalancing);
        // A new launch while rebalancing: nothing paged out during it.
        let mut s = sample(t + 100, 0, 300);
        s.launching = true;
        let d = c.step(&cfg, &s);
        assert_eq!(
            (d.mode, d.anon_reclaim_bytes),
            (ReclaimMode::Rebalancing, 0)
        );
    }

    #[test]
    fn burst_enters_efficiency_first_then_rebalances_then_normal() {
        let cfg = ReclaimConfig::default();
        let mut c = ReclaimController::new();
        let d = c.step(&cfg, &sample(0, 20_000, 300));
        assert_eq!(
            (d.mode, d.reason),
            (ReclaimMode::EfficiencyFirst, Reason::ReclaimBurstDetected)
        );
        assert!(d.switched());
        // One calm tick is not enough (hysteresis).
        let d = c.step(&cfg, &sample(100, 100, 300));
        assert_eq!(d.mode, ReclaimMode::EfficiencyFirst);
        // A noisy burst tick resets the calm count.
        c.step(&cfg, &sample(200, 20_000, 300));
        let mut t = 300;
        let mut d = c.step(&cfg, &sample(t, 0, 300));
        while d.mode == ReclaimMode::EfficiencyFirst {
            t += 100;
            d = c.step(&cfg, &sample(t, 0, 300));
        }
        assert_eq!(
            (d.mode, d.reason),
            (ReclaimMode::Rebalancing, Reason::ReclaimBurstEnded)
        );
        assert_eq!(t, 300 + 100 * (cfg.calm_ticks as u64 - 1));
        assert!(d.anon_reclaim_bytes > 0);
        // Memory back above M_F ends rebalancing.
        let s = sample(t + 100, 0, 3000);
        let d = c.step(&cfg, &s);
        assert_eq!(
            (d.mode, d.reason),
            (ReclaimMode::Normal, Reason::ReclaimHeadroomRestored)
        );
    }

    #[test]
    fn rebalancing_frees_memory_whatever_the_anon_share() {
        // The deployed daemon on a GB-scale ML app: 0.1 MiB available
        // against an M_F of 3.2 GiB, anonymous memory 62 % of what is used.
        // With a 66 % target rebalancing stopped at once and freed nothing.
        let mut s = ReclaimSample {
            now_ms: 0,
            alloc_pages: 0,
            avail_bytes: MIB / 10,
            total_bytes: 4 * GIB,
            anon_bytes: 1240 * MIB,
            file_bytes: 760 * MIB,
            launching: false,
        };
        let mut cfg = ReclaimConfig {
            low_memory_bytes: 3277 * MIB,
            ..ReclaimConfig::default()
        };
        let mut c = ReclaimController::new();
        let mut d = c.step(&cfg, &s);
        while d.mode == ReclaimMode::Normal && s.now_ms < 10_000 {
            s.now_ms += 100;
            d = c.step(&cfg, &s);
        }
        assert_eq!(
            (d.mode, d.reason, d.anon_reclaim_bytes),
            (
                ReclaimMode::Rebalancing,
                Reason::ReclaimAheadOfBurst,
                // No step configured: all the anonymous memory there is,
                // short of the headroom (the scheduler caps it per tick).
                s.anon_bytes
            )
        );
        s.now_ms += 100;
        let d = c.step(&cfg, &s);
        assert_eq!(d.reason, Reason::ReclaimRebalancing);
        // The old target stops it at once, as before.
        cfg.anon_target_share = 0.66;
        let mut c = ReclaimController::new();
        for t in 0..100 {
            s.now_ms = t * 100;
            assert_eq!(c.step(&cfg, &s).mode, ReclaimMode::Normal);
        }
    }

    #[test]
    fn rebalancing_pages_out_only_up_to_the_headroom() {
        let cfg = ReclaimConfig {
            rebalance_step_bytes: 32 * MIB,
            ..ReclaimConfig::default()
        };
        let m_f = cfg.low_memory_threshold(6 * GIB);
        let mut c = ReclaimController::new();
        c.step(&cfg, &sample(0, 20_000, 300));
        let mut t = 100;
        let mut s = sample(t, 0, 300);
        // Memory is low: 50 MiB short of M_F, anonymous share far above target.
        s.avail_bytes = m_f - 50 * MIB;
        let mut d = c.step(&cfg, &s);
        while d.mode == ReclaimMode::EfficiencyFirst {
            t += 100;
            s.now_ms = t;
            d = c.step(&cfg, &s);
        }
        assert_eq!(d.mode, ReclaimMode::Rebalancing);
        // One step is 32 MiB; the shortfall caps nothing here ...
        assert_eq!(d.anon_reclaim_bytes, 32 * MIB);
        // (with no step configured, the whole shortfall is asked) ...
        let mut free = c.clone();
        let unstepped = ReclaimConfig {
            rebalance_step_bytes: 0,
            ..cfg.clone()
        };
        s.now_ms = t + 100;
        assert_eq!(free.step(&unstepped, &s).anon_reclaim_bytes, 50 * MIB);
        // ... but 10 MiB short pages out 10 MiB, not a step.
        s.now_ms = t + 100;
        s.avail_bytes = m_f - 10 * MIB;
        let d = c.step(&cfg, &s);
        assert_eq!(
            (d.mode, d.anon_reclaim_bytes),
            (ReclaimMode::Rebalancing, 10 * MIB)
        );
        // Memory back above M_F with anonymous memory still dominant:
        // nothing more is paged out ahead of need.
        s.now_ms = t + 200;
        s.avail_bytes = m_f;
        let d = c.step(&cfg, &s);
        assert_eq!(
            (d.mode, d.reason, d.anon_reclaim_bytes),
            (ReclaimMode::Normal, Reason::ReclaimHeadroomRestored, 0)
        );
    }

    #[test]
    fn low_memory_while_calm_pages_out_ahead_of_the_next_burst() {
        let cfg = ReclaimConfig::default();
        let m_f = cfg.low_memory_threshold(6 * GIB);
        let mut c = ReclaimController::new();
        let mut s = sample(0, 0, 0);
        s.avail_bytes = m_f - 100 * MIB;
        // A launch in progress is never a calm tick: nothing happens.
        s.launching = true;
        for t in 0..20 {
            s.now_ms = t * 100;
            assert_eq!(c.step(&cfg, &s).mode, ReclaimMode::Normal);
        }
        // Calm and low: after `calm_ticks` ticks, rebalancing pages out.
        s.launching = false;
        let mut ticks = 0;
        let d = loop {
            ticks += 1;
            s.now_ms += 100;
            let d = c.step(&cfg, &s);
            if d.mode != ReclaimMode::Normal {
                break d;
            }
        };
        assert_eq!(ticks, cfg.calm_ticks);
        assert_eq!(
            (d.mode, d.reason, d.anon_reclaim_bytes),
            (
                ReclaimMode::Rebalancing,
                Reason::ReclaimAheadOfBurst,
                100 * MIB
            )
        );
        // Page-out that brings nothing back times out, and no new
        // rebalancing starts within `rebalance_max_ms` of it.
        let started = s.now_ms;
        while c.step(&cfg, &s).mode == ReclaimMode::Rebalancing {
            s.now_ms += 100;
        }
        assert!(s.now_ms - started >= cfg.rebalance_max_ms);
        let timed_out = s.now_ms;
        while s.now_ms < timed_out + cfg.rebalance_max_ms {
            s.now_ms += 100;
            let d = c.step(&cfg, &s);
            if s.now_ms < timed_out + cfg.rebalance_max_ms {
                assert_eq!(d.mode, ReclaimMode::Normal, "at {}", s.now_ms);
            }
        }
        // Memory above M_F, or anonymous memory at its balance (a target
        // set): no page-out.
        let cfg = ReclaimConfig {
            anon_target_share: 0.0,
            ..cfg
        };
        let mut c = ReclaimController::new();
        let mut high = sample(0, 0, 0);
        high.avail_bytes = m_f + MIB;
        let mut balanced = sample(0, 0, 0);
        balanced.avail_bytes = m_f - 100 * MIB;
        balanced.anon_bytes = GIB;
        balanced.file_bytes = GIB;
        for t in 0..20 {
            for x in [&mut high, &mut balanced] {
                x.now_ms = t * 100;
                assert_eq!(c.step(&cfg, x).mode, ReclaimMode::Normal);
            }
        }
    }

    #[test]
    fn no_burst_when_memory_is_plentiful() {
        let cfg = ReclaimConfig::default();
        let mut c = ReclaimController::new();
        let d = c.step(&cfg, &sample(0, 1_000_000, 4000));
        assert_eq!(d.mode, ReclaimMode::Normal);
    }

    #[test]
    fn rate_is_normalised_to_the_tick() {
        assert_eq!(alloc_pages_per_tick(100, 300, 200, 100), 100);
        assert_eq!(alloc_pages_per_tick(300, 100, 100, 100), 0);
        assert_eq!(alloc_pages_per_tick(0, 100, 0, 100), 0);
    }

    proptest! {
        /// Whatever happened before, once pressure ends the controller is
        /// back in Normal within calm_ticks + rebalance_max/tick + 1 ticks.
        #[test]
        fn returns_to_normal_when_pressure_ends(
            history in prop::collection::vec((0u64..40_000, 0u64..6144, 0u64..6144), 0..200),
            anon_mib in 0u64..6000,
        ) {
            let cfg = ReclaimConfig::default();
            let mut c = ReclaimController::new();
            let mut t = 0;
            for (alloc, avail, anon) in history {
                let mut s = sample(t, alloc, avail);
                s.anon_bytes = anon * MIB;
                c.step(&cfg, &s);
                t += cfg.tick_ms;
            }
            let limit = cfg.calm_ticks as u64 + cfg.rebalance_max_ms / cfg.tick_ms + 1;
            let mut mode = c.mode();
            for _ in 0..limit {
                let mut s = sample(t, 0, 6000);
                s.anon_bytes = anon_mib * MIB;
                mode = c.step(&cfg, &s).mode;
                t += cfg.tick_ms;
            }
            prop_assert_eq!(mode, ReclaimMode::Normal);
        }
    }
}
