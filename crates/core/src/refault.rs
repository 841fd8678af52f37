//! Re-fault-aware reclaim sizing from user space (the re-fault study §5).
//!
//! The re-fault study finds that kswapd reclaims far more per wake than the
//! allocations it serves (650 pages on average while 99 % of allocations are
//! one page, §4), which evicts pages that are used again; with kswapd off
//! (a tiny reclaim size, 30.6 pages) the re-fault ratio falls from 28.19 % to
//! 20.06 % but the share of heavy-weight direct reclaim rises from 1.12 % to
//! 40.39 % (§5, Table 2). Its preliminary idea: a smaller kswapd reclaim,
//! sized by that trade-off.
//!
//! On a stock kernel the size of one kswapd wake is the gap between the
//! zone watermarks (kswapd wakes below `low` and reclaims up to `high`), and
//! the gap is set by `vm.watermark_scale_factor` (wsf; range 1..=3000,
//! default 10): per zone, `gap = max(min / 4, managed × wsf / 10000)`
//! (mm/page_alloc.c, `__setup_per_zone_wmarks`). So the step this module
//! chooses *is* that knob, bounded by [`StepRange`]: never above the value
//! the device had (the policy only ever makes kswapd's step smaller than
//! stock), never below the lowest value that still changes the gap (below
//! it the kernel's `min / 4` floor rules).
//!
//! The controller ([`RefaultController`]) looks at windows of the domain's
//! counters — pages re-faulted, pages reclaimed, of which by kswapd — and
//! applies one rule per window ([`decide`]):
//!
//! * **raise** (double, up to stock) when the share of pages reclaimed by
//!   anyone but kswapd (direct reclaim: the app stalls) is above
//!   [`DIRECT_RAISE`];
//! * **lower** (halve, down to the floor) when the re-fault ratio is above
//!   [`REFAULT_FLOOR`] and the direct share is below [`DIRECT_LOWER`];
//! * **hold** otherwise.
//!
//! A window asking to lower is held unless the last [`REGIME_MS`] of
//! windows, summed, reclaim directly below [`DIRECT_LOWER`] too.
//!
//! Every threshold is a figure of Table 2 (see each constant). Pure: the
//! scheduler passes the counters and the time in, and applies the step
//! through the reclaim mechanism.

use crate::reason::Reason;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Re-fault ratio reached with the smallest reclaim size (Table 2, kswapd
/// off: 20.06 %). At or below it a smaller step has nothing left to save.
pub const REFAULT_FLOOR: f64 = 0.2006;

/// Re-fault ratio with stock kswapd (Table 2: 28.19 %).
pub const REFAULT_STOCK: f64 = 0.2819;

/// Share of reclaim done directly with stock kswapd (Table 2: 1.12 %).
pub const DIRECT_STOCK: f64 = 0.0112;

/// The most re-faults a smaller reclaim saved in the study: 28.19 − 20.06
/// = 8.13 points of the re-fault ratio (Table 2).
pub const REFAULT_SAVING: f64 = REFAULT_STOCK - REFAULT_FLOOR;

/// Direct share above which the step is raised: stock's share plus the most
/// a smaller step can save in re-faults. Weighing a page reclaimed directly
/// like a page re-faulted (both are a stall of the app on memory), direct
/// reclaim grown by more than the largest possible saving is a loss
/// whatever the step saved. 1.12 % + 8.13 % = 9.25 %.
pub const DIRECT_RAISE: f64 = DIRECT_STOCK + REFAULT_SAVING;

/// Direct share below which the step may be lowered: stock's share plus
/// half the saving (5.19 %). The band up to [`DIRECT_RAISE`] is the
/// hysteresis: inside it the step holds.
pub const DIRECT_LOWER: f64 = DIRECT_STOCK + REFAULT_SAVING / 2.0;

/// A window is judged only once this many pages were reclaimed in it: one
/// average stock kswapd reclaim (Table 2: 650 pages), so that at least one
/// kswapd wake's worth of evictions is behind the ratio.
pub const WINDOW_MIN_EVICTED_PAGES: u64 = 650;

/// A window lasts at least this long, ms: a page is re-faulted after it
/// was evicted, so a window must be long enough for the evictions of its
/// start to show up as re-faults. 10 s, the kernel's shortest memory
/// pressure average (PSI `avg10`).
pub const WINDOW_MIN_MS: u64 = 10_000;

/// The horizon over which the regime is judged before the step is lowered,
/// ms. The study's shares are a workload's, not a moment's: Table 2 is over
/// whole runs, its re-fault measurements over three minutes of use (§3.2,
/// Fig. 3). A quiet window between two bursts of launches has the stock
/// regime's low direct share without being in it; so a step is lowered
/// only when the direct share over the last three minutes of windows is
/// below [`DIRECT_LOWER`] as well. Raising answers one window at once.
pub const REGIME_MS: u64 = 180_000;

/// `vm.watermark_scale_factor`'s smallest value.
pub const WSF_MIN: u32 = 1;
/// `vm.watermark_scale_factor`'s largest value.
pub const WSF_MAX: u32 = 3000;
/// The kernel's default `vm.watermark_scale_factor` (0.1 % of memory).
pub const WSF_DEFAULT: u32 = 10;

/// The watermark gap the kernel sets for a scale factor: `max(min / 4,
/// total × wsf / 10000)` bytes (per zone in the kernel; here over the whole
/// memory, whose zones scale alike).
pub fn gap_bytes(wsf: u32, total_bytes: u64, min_bytes: u64) -> u64 {
    let scaled = (total_bytes as u128 * wsf as u128 / 10_000) as u64;
    scaled.max(min_bytes / 4)
}

/// The range the controller moves the knob in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRange {
    /// The value the device had when the policy started (the stock step).
    pub stock: u32,
    /// The lowest value that still shrinks the gap: below it `min / 4` rules.
    pub floor: u32,
}

impl StepRange {
    /// The range for a device whose knob is `stock`, with `total_bytes` of
    /// memory and a min watermark (`vm.min_free_kbytes`) of `min_bytes`:
    /// the floor is the smallest wsf whose gap reaches `min / 4`, that is
    /// ⌈min / 4 × 10000 / total⌉. Values are clamped to the kernel's range.
    pub fn new(stock: u32, total_bytes: u64, min_bytes: u64) -> Self {
        let floor = if total_bytes == 0 {
            WSF_MAX as u128
        } else {
            ((min_bytes / 4) as u128 * 10_000).div_ceil(total_bytes as u128)
        };
        Self {
            stock: stock.clamp(WSF_MIN, WSF_MAX),
            floor: (floor.min(WSF_MAX as u128) as u32).max(WSF_MIN),
        }
    }

    /// The lowest step the controller uses (never above stock).
    pub fn lowest(&self) -> u32 {
        self.floor.min(self.stock)
    }

    /// Whether there is anything below stock to move to.
    pub fn can_lower(&self) -> bool {
        self.lowest() < self.stock
    }
}

/// The domain's reclaim counters, cumulative (as sampled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefaultCounters {
    /// Pages faulted back after eviction (`workingset_refault_anon + _file`).
    pub refault_pages: u64,
    /// Pages reclaimed by anyone (`pgsteal_anon + pgsteal_file`).
    pub steal_pages: u64,
    /// Of which by kswapd (`pgsteal_kswapd`).
    pub steal_kswapd_pages: u64,
}

/// The counters of one window (differences of two samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Length, ms.
    pub ms: u64,
    /// Pages re-faulted.
    pub refault_pages: u64,
    /// Pages evicted (reclaimed).
    pub evicted_pages: u64,
    /// Of which by kswapd.
    pub kswapd_pages: u64,
    /// Of which by anyone else: direct reclaim, and a memory cgroup's
    /// reclaim at its limit (done by the charging task, like direct reclaim).
    pub direct_pages: u64,
}

impl Window {
    /// The window between two samples; None when a counter went backwards
    /// (a recreated domain or a reset counter).
    pub fn between(ms: u64, a: &RefaultCounters, b: &RefaultCounters) -> Option<Self> {
        let refault_pages = b.refault_pages.checked_sub(a.refault_pages)?;
        let evicted_pages = b.steal_pages.checked_sub(a.steal_pages)?;
        let kswapd_pages = b
            .steal_kswapd_pages
            .checked_sub(a.steal_kswapd_pages)?
            .min(evicted_pages);
        Some(Self {
            ms,
            refault_pages,
            evicted_pages,
            kswapd_pages,
            direct_pages: evicted_pages - kswapd_pages,
        })
    }

    /// Re-fault ratio: pages re-faulted / pages evicted (the re-fault study §2);
    /// 0 when nothing was evicted.
    pub fn refault_ratio(&self) -> f64 {
        ratio(self.refault_pages, self.evicted_pages)
    }

    /// Share of the evicted pages reclaimed directly (not by kswapd).
    pub fn direct_share(&self) -> f64 {
        ratio(self.direct_pages, self.evicted_pages)
    }

    /// Whether the window has enough behind it to be judged.
    pub fn complete(&self) -> bool {
        self.ms >= WINDOW_MIN_MS && self.evicted_pages >= WINDOW_MIN_EVICTED_PAGES
    }

    /// Adds another window's counts.
    pub fn add(&mut self, o: &Window) {
        self.ms += o.ms;
        self.refault_pages += o.refault_pages;
        self.evicted_pages += o.evicted_pages;
        self.kswapd_pages += o.kswapd_pages;
        self.direct_pages += o.direct_pages;
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// What a window asks of the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepAction {
    /// Smaller kswapd step: re-faults high, direct reclaim low.
    Lower,
    /// Larger kswapd step (back toward stock): direct reclaim grew.
    Raise,
    /// Keep it.
    Hold,
}

/// The rule: raise when the direct share is above [`DIRECT_RAISE`]; lower
/// when the re-fault ratio is above [`REFAULT_FLOOR`] and the direct share
/// below [`DIRECT_LOWER`]; hold otherwise. Monotone: more re-faults never
/// ask for a larger step, more direct reclaim never for a smaller one.
pub fn decide(refault_ratio: f64, direct_share: f64) -> StepAction {
    if direct_share > DIRECT_RAISE {
        StepAction::Raise
    } else if refault_ratio > REFAULT_FLOOR && direct_share < DIRECT_LOWER {
        StepAction::Lower
    } else {
        StepAction::Hold
    }
}

/// The step after `action`: halved (at least the range's lowest) or
/// doubled (at most stock); bounded by the range whatever `current` is.
/// Halving and doubling reach either end of the range in log2(stock /
/// floor) windows (the study's two sizes, 650 and 30.6 pages, are 4.4
/// halvings apart).
pub fn next_step(current: u32, range: StepRange, action: StepAction) -> u32 {
    let lo = range.lowest();
    let hi = range.stock;
    let cur = current.clamp(lo, hi);
    match action {
        StepAction::Lower => (cur / 2).max(lo),
        StepAction::Raise => cur.saturating_mul(2).min(hi),
        StepAction::Hold => cur,
    }
}

/// A judged window and what it did to the step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepDecision {
    /// The window.
    pub window: Window,
    /// The rule's answer.
    pub action: StepAction,
    /// The step before.
    pub from: u32,
    /// The step wanted (equal to `from` when held or at a bound).
    pub to: u32,
}

impl StepDecision {
    /// Whether the knob must change.
    pub fn changes(&self) -> bool {
        self.from != self.to
    }

    /// The reason code of the decision.
    pub fn reason(&self) -> Reason {
        match (self.changes(), self.action) {
            (true, StepAction::Lower) => Reason::ReclaimStepLowered,
            (true, StepAction::Raise) => Reason::ReclaimStepRaised,
            _ => Reason::ReclaimStepHeld,
        }
    }
}

/// The re-fault controller: windows of the counters, one decision per
/// complete window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RefaultController {
    /// Start of the open window: (ms, counters).
    start: Option<(u64, RefaultCounters)>,
    /// The step in force (None until a range is known).
    step: Option<u32>,
    /// Every complete window since the start, summed.
    total: Window,
    /// Windows judged.
    windows: u64,
    /// The newest complete windows, the fewest that cover the regime's
    /// horizon.
    recent: VecDeque<Window>,
    /// The regime's horizon, ms (0: each window alone).
    regime_ms: u64,
}

impl RefaultController {
    /// A controller with no window open, judging the regime over
    /// [`REGIME_MS`].
    pub fn new() -> Self {
        Self::with_regime(REGIME_MS)
    }

    /// A controller judging the regime over `regime_ms` (0: each window
    /// alone).
    pub fn with_regime(regime_ms: u64) -> Self {
        Self {
            regime_ms,
            ..Self::default()
        }
    }

    /// The step in force, if the domain has a knob.
    pub fn step(&self) -> Option<u32> {
        self.step
    }

    /// Every judged window, summed (the run's re-fault ratio and direct share).
    pub fn total(&self) -> Window {
        self.total
    }

    /// Windows judged.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// Drops the open window (the next sample starts a new one).
    pub fn restart_window(&mut self) {
        self.start = None;
    }

    /// The regime's horizon: the newest windows, summed, when they cover
    /// it (None before that).
    pub fn horizon(&self) -> Option<Window> {
        let mut h = Window::default();
        for w in &self.recent {
            h.add(w);
        }
        (h.ms >= self.regime_ms).then_some(h)
    }

    fn remember(&mut self, w: Window) {
        self.recent.push_back(w);
        // Keep the fewest newest windows that still cover the horizon.
        while self.recent.len() > 1 {
            let rest: u64 = self.recent.iter().skip(1).map(|w| w.ms).sum();
            if rest < self.regime_ms {
                break;
            }
            self.recent.pop_front();
        }
    }

    /// Records that the knob is `step` now (after the mechanism applied it,
    /// or the stock value at start).
    pub fn set_step(&mut self, step: u32) {
        self.step = Some(step);
    }

    /// Feeds one sample. When it completes a window, returns the window
    /// and (with a `range`) the step it asks for; the caller applies the
    /// step and then calls [`Self::set_step`]. Without a range (nothing to
    /// tune) the window is measured and reported with the step held.
    pub fn observe(
        &mut self,
        now_ms: u64,
        c: RefaultCounters,
        range: Option<StepRange>,
    ) -> Option<StepDecision> {
        let Some((t0, c0)) = self.start else {
            self.start = Some((now_ms, c));
            return None;
        };
        let Some(w) = Window::between(now_ms.saturating_sub(t0), &c0, &c) else {
            // A counter went backwards: start over from here.
            self.start = Some((now_ms, c));
            return None;
        };
        if !w.complete() {
            return None;
        }
        self.start = Some((now_ms, c));
        self.total.add(&w);
        self.windows += 1;
        self.remember(w);
        let mut action = decide(w.refault_ratio(), w.direct_share());
        let regime = self
            .horizon()
            .is_some_and(|h| h.direct_share() < DIRECT_LOWER);
        if action == StepAction::Lower && !regime {
            action = StepAction::Hold;
        }
        let (from, to) = match (range, self.step) {
            (Some(r), Some(cur)) => (cur, next_step(cur, r, action)),
            (_, cur) => {
                let cur = cur.unwrap_or(0);
                (cur, cur)
            }
        };
        Some(StepDecision {
            window: w,
            action,
            from,
            to,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MIB;
    use proptest::prelude::*;

    fn c(refault: u64, steal: u64, kswapd: u64) -> RefaultCounters {
        RefaultCounters {
            refault_pages: refault,
            steal_pages: steal,
            steal_kswapd_pages: kswapd,
        }
    }

    #[test]
    fn thresholds_come_from_table_2() {
        assert!((REFAULT_SAVING - 0.0813).abs() < 1e-9);
        assert!((DIRECT_RAISE - 0.0925).abs() < 1e-9);
        assert!((DIRECT_LOWER - 0.05185).abs() < 1e-9);
        const { assert!(DIRECT_STOCK < DIRECT_LOWER && DIRECT_LOWER < DIRECT_RAISE) };
        // Table 2's two columns: stock would be lowered, kswapd-off raised.
        assert_eq!(decide(0.2819, 0.0112), StepAction::Lower);
        assert_eq!(decide(0.2006, 0.4039), StepAction::Raise);
        // Re-faults at the floor: nothing to save.
        assert_eq!(decide(0.2006, 0.0), StepAction::Hold);
        // Inside the hysteresis band.
        assert_eq!(decide(0.5, 0.07), StepAction::Hold);
    }

    #[test]
    fn range_follows_the_kernel_gap_formula() {
        // A 6 GiB phone, min watermark 77 MiB: min/4 = 19.25 MiB is the
        // gap at wsf ⌈19.25 / 6144 × 10000⌉ = 32.
        let r = StepRange::new(62, 6144 * MIB, 77 * MIB);
        assert_eq!(
            r,
            StepRange {
                stock: 62,
                floor: 32
            }
        );
        assert_eq!(
            gap_bytes(32, 6144 * MIB, 77 * MIB),
            6144 * MIB * 32 / 10_000
        );
        assert_eq!(gap_bytes(31, 6144 * MIB, 77 * MIB), 77 * MIB / 4);
        assert!(r.can_lower());
        // This kind of desktop: 24 GB, min_free_kbytes 67584, wsf 10.
        let r = StepRange::new(10, 24_684_084 * 1024, 67_584 * 1024);
        assert_eq!(r.floor, 7);
        // Floor at or above stock: nothing to lower.
        let r = StepRange::new(10, 1024 * MIB, 64 * MIB);
        assert!(!r.can_lower());
        assert_eq!(next_step(10, r, StepAction::Lower), 10);
        // Kernel bounds.
        assert_eq!(StepRange::new(0, 0, 0).stock, WSF_MIN);
        assert_eq!(StepRange::new(9000, 1, u64::MAX).floor, WSF_MAX);
    }

    #[test]
    fn windows_wait_for_time_and_evictions() {
        let mut k = RefaultController::new();
        k.set_step(62);
        let r = Some(StepRange::new(62, 6144 * MIB, 77 * MIB));
        assert_eq!(k.observe(0, c(0, 0, 0), r), None);
        // Enough evictions, not enough time.
        assert_eq!(k.observe(5_000, c(500, 1000, 1000), r), None);
        // Enough time: 50 % re-faults, all by kswapd, but less than the
        // regime's horizon behind it: hold, for 17 windows.
        for i in 1..=17u64 {
            let d = k
                .observe(i * 10_000, c(500 * i, 1000 * i, 1000 * i), r)
                .unwrap();
            assert_eq!((d.action, d.to), (StepAction::Hold, 62), "window {i}");
        }
        assert_eq!(k.horizon(), None);
        // Three minutes of it: lower.
        let d = k.observe(180_000, c(9000, 18_000, 18_000), r).unwrap();
        assert_eq!(k.horizon().unwrap().ms, REGIME_MS);
        assert_eq!(d.action, StepAction::Lower);
        assert_eq!((d.from, d.to), (62, 32));
        assert_eq!(d.reason(), Reason::ReclaimStepLowered);
        k.set_step(d.to);
        // Too few evictions in the next 10 s: no decision.
        assert_eq!(k.observe(190_000, c(9100, 18_600, 18_600), r), None);
        // Direct reclaim took over: raise back to stock at once.
        let d = k.observe(200_000, c(9100, 20_000, 18_700), r).unwrap();
        assert_eq!(d.window.evicted_pages, 2000);
        assert_eq!(d.window.direct_pages, 1300);
        assert_eq!((d.action, d.to), (StepAction::Raise, 62));
        assert_eq!(k.windows(), 19);
        assert_eq!(k.total().evicted_pages, 20_000);
        k.set_step(d.to);
        // A quiet window right after: the last three minutes reclaimed
        // directly above the bound, so it does not lower.
        for i in 1..=3u64 {
            let d = k
                .observe(
                    200_000 + i * 10_000,
                    c(9100 + 900 * i, 20_000 + 1000 * i, 18_700 + 1000 * i),
                    r,
                )
                .unwrap();
            assert_eq!(d.window.direct_share(), 0.0);
            assert_eq!(d.action, StepAction::Hold, "window {i}");
        }
        // A counter going backwards restarts the window.
        assert_eq!(k.observe(240_000, c(0, 0, 0), r), None);
        assert_eq!(
            k.observe(250_000, c(10, 700, 700), r).unwrap().window.ms,
            10_000
        );
    }

    #[test]
    fn without_a_knob_the_controller_measures_and_holds() {
        let mut k = RefaultController::new();
        assert_eq!(k.observe(0, c(0, 0, 0), None), None);
        let d = k.observe(10_000, c(900, 1000, 0), None).unwrap();
        assert!(!d.changes());
        assert_eq!(d.reason(), Reason::ReclaimStepHeld);
        assert!((d.window.refault_ratio() - 0.9).abs() < 1e-9);
        assert_eq!(d.window.direct_share(), 1.0);
    }

    proptest! {
        #[test]
        fn steps_stay_in_bounds_and_respond_monotonically(
            cur in 0u32..4000,
            stock in 1u32..=3000,
            floor in 1u32..=3000,
            r1 in 0.0f64..1.5, r2 in 0.0f64..1.5,
            d1 in 0.0f64..1.0, d2 in 0.0f64..1.0,
        ) {
            let range = StepRange { stock, floor };
            let (rl, rh) = if r1 <= r2 { (r1, r2) } else { (r2, r1) };
            let (dl, dh) = if d1 <= d2 { (d1, d2) } else { (d2, d1) };
            let step = |r: f64, d: f64| next_step(cur, range, decide(r, d));
            for (r, d) in [(rl, dl), (rh, dh), (rl, dh), (rh, dl)] {
                let s = step(r, d);
                prop_assert!(s >= range.lowest() && s <= range.stock);
                prop_assert!((WSF_MIN..=WSF_MAX).contains(&s));
            }
            // More re-faults: never a larger step.
            prop_assert!(step(rh, dl) <= step(rl, dl));
            prop_assert!(step(rh, dh) <= step(rl, dh));
            // More direct reclaim: never a smaller step.
            prop_assert!(step(rl, dh) >= step(rl, dl));
            prop_assert!(step(rh, dh) >= step(rh, dl));
        }

        #[test]
        fn windows_never_panic_and_split_evictions(
            a in any::<[u64; 3]>(), b in any::<[u64; 3]>(), ms in any::<u64>(),
        ) {
            if let Some(w) = Window::between(ms, &c(a[0], a[1], a[2]), &c(b[0], b[1], b[2])) {
                prop_assert_eq!(w.kswapd_pages + w.direct_pages, w.evicted_pages);
                prop_assert!((0.0..=1.0).contains(&w.direct_share()));
            }
        }
    }
}
