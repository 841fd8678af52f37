//! Stock Android 15 as the AppFlow paper's phones ran it (the AppFlow paper
//! §6.1: "Pixel 7 and Pixel 8 … all running the latest Android 15"): the
//! two platform killers that decide which background app dies.
//!
//! - **lmkd** (AOSP `system/memory/lmkd`, `lmkd.cpp` at tag
//!   `android-15.0.0_r1`): PSI monitors wake it (`init_mp_psi`,
//!   `psi_thresholds`); while it polls, `mp_event_psi` reads vmstat and
//!   meminfo and picks a kill reason in a fixed order, each with the lowest
//!   `oom_score_adj` it may kill; `find_and_kill_process` then kills from
//!   adj 1000 down to that floor, the least recently used of an adj first.
//! - **ActivityManager** (AOSP `frameworks/base`, `services/core/java/com/
//!   android/server/am/`): `OomAdjuster` gives each process its adj class
//!   (`ProcessList.java`: foreground 0, visible 100, perceptible 200,
//!   previous 700, cached 900-999 by LRU) and kills cached processes past
//!   the cached-process limit (`OomAdjuster.updateAndTrimProcessLSP`,
//!   `ActivityManagerConstants.CUR_MAX_CACHED_PROCESSES`).
//!   Its `CachedAppOptimizer` freezes a process 10 s after it became
//!   cached and then compacts it: its anonymous memory is paged out to
//!   zram (`onProcessFrozen`, `resolveCompactionProfile`; read from
//!   frameworks/base as of Android 15's cycle: compaction on by default,
//!   the 10 s freezer debounce and the binder-freeze flags that cycle
//!   added; the exact `android-15.0.0_r1` file was not at hand).
//!
//! This module is the decision only: pure functions of a sample of the
//! simulated kernel's counters and of lmkd's own state, so that each rule
//! is tested on hand-computed cases (below). [`crate::kernel`] samples the
//! kernel model, calls it and kills. Every constant is the AOSP default or
//! the Pixel's shipped property (`hardware/google/pixel/mm/device_gki.mk`:
//! `ro.lmk.filecache_min_kb=153600`, `ro.lmk.stall_limit_critical=40`),
//! never fitted (docs/sim.md, "The Android 15 baseline").

/// `ProcessList.FOREGROUND_APP_ADJ`: the app on screen (and launching).
pub const FOREGROUND_APP_ADJ: i32 = 0;
/// `ProcessList.PERCEPTIBLE_APP_ADJ` (lmkd.cpp `PERCEPTIBLE_APP_ADJ`).
pub const PERCEPTIBLE_APP_ADJ: i32 = 200;
/// `ProcessList.PREVIOUS_APP_ADJ` (lmkd.cpp `PREVIOUS_APP_ADJ`): the app
/// the user was in before the foreground one.
pub const PREVIOUS_APP_ADJ: i32 = 700;
/// `ProcessList.CACHED_APP_MIN_ADJ`.
pub const CACHED_APP_MIN_ADJ: i32 = 900;
/// `ProcessList.CACHED_APP_MAX_ADJ`.
pub const CACHED_APP_MAX_ADJ: i32 = 999;
/// lmkd.cpp `OOM_SCORE_ADJ_MAX`: where `find_and_kill_process` starts.
pub const OOM_SCORE_ADJ_MAX: i32 = 1000;
/// lmkd.cpp `PSI_WINDOW_SIZE_MS`: lmkd polls this long after a PSI event
/// (`call_handler`, POLLING_START), because the kernel rate-limits PSI
/// events to one per window.
pub const PSI_WINDOW_SIZE_MS: u64 = 1000;
/// lmkd.cpp `PSI_POLL_PERIOD_SHORT_MS`: polling while swap is low or a
/// kill is in progress.
pub const PSI_POLL_PERIOD_SHORT_MS: u64 = 10;
/// lmkd.cpp `PSI_POLL_PERIOD_LONG_MS`: polling otherwise.
pub const PSI_POLL_PERIOD_LONG_MS: u64 = 100;
/// lmkd.cpp `THRASHING_RESET_INTERVAL_MS`: the window over which refaults
/// are counted against the file LRU.
pub const THRASHING_RESET_INTERVAL_MS: u64 = 1000;

/// lmkd's properties (`update_props`), AOSP defaults with the Pixel's
/// overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct LmkdProps {
    /// `ro.lmk.psi_partial_stall_ms` (DEF_PARTIAL_STALL 70): the medium
    /// PSI monitor, `some` stall per 1 s window.
    pub psi_partial_stall_ms: u64,
    /// `ro.lmk.psi_complete_stall_ms` (DEF_COMPLETE_STALL 700): the
    /// critical PSI monitor, `full` stall per 1 s window.
    pub psi_complete_stall_ms: u64,
    /// `ro.lmk.swap_free_low_percentage` (DEF_LOW_SWAP 10).
    pub swap_free_low_percentage: u64,
    /// `ro.lmk.thrashing_limit` (DEF_THRASHING 100, not a low-RAM device).
    pub thrashing_limit_pct: i64,
    /// `ro.lmk.thrashing_limit_decay` (DEF_THRASHING_DECAY 10).
    pub thrashing_limit_decay_pct: i64,
    /// `ro.lmk.thrashing_limit_critical` (3 × thrashing_limit).
    pub thrashing_critical_pct: i64,
    /// `ro.lmk.swap_util_max` (100: the LOW_MEM_AND_SWAP_UTIL rule off).
    pub swap_util_max: i64,
    /// `ro.lmk.filecache_min_kb`: 0 in AOSP, 153,600 on Pixels.
    pub filecache_min_kb: u64,
    /// `ro.lmk.stall_limit_critical`: 100 in AOSP, 40 on Pixels; a PSI
    /// `full` avg10 above it lets a kill reach perceptible apps.
    pub stall_limit_critical: f64,
    /// `ro.lmk.pressure_after_kill_min_score` (0).
    pub pressure_after_kill_min_score: i32,
    /// `ro.lmk.lowmem_min_oom_score` (DEF_LOWMEM_MIN_SCORE =
    /// PREVIOUS_APP_ADJ + 1, and never below PERCEPTIBLE_APP_ADJ + 1).
    pub lowmem_min_oom_score: i32,
    /// `ro.lmk.direct_reclaim_threshold_ms` (DEF_DIRECT_RECL_THRESH_MS 0:
    /// the DIRECT_RECL_STUCK rule off).
    pub direct_reclaim_threshold_ms: u64,
    /// `ro.lmk.swap_compression_ratio` (DEF_SWAP_COMP_RATIO 1): free swap
    /// counts at most this many times the easily available memory
    /// (`get_free_swap`).
    pub swap_compression_ratio: u64,
    /// `ro.lmk.kill_timeout_ms` (100): how long lmkd waits for a victim
    /// to die before it decides again.
    pub kill_timeout_ms: u64,
}

impl LmkdProps {
    /// A Pixel on Android 15: AOSP's defaults with the two properties the
    /// Pixels ship (`hardware/google/pixel/mm/device_gki.mk`).
    pub fn pixel() -> Self {
        let thrashing_limit_pct = 100;
        LmkdProps {
            psi_partial_stall_ms: 70,
            psi_complete_stall_ms: 700,
            swap_free_low_percentage: 10,
            thrashing_limit_pct,
            thrashing_limit_decay_pct: 10,
            thrashing_critical_pct: thrashing_limit_pct * 3,
            swap_util_max: 100,
            filecache_min_kb: 153_600,
            stall_limit_critical: 40.0,
            pressure_after_kill_min_score: 0,
            lowmem_min_oom_score: PREVIOUS_APP_ADJ + 1,
            direct_reclaim_threshold_ms: 0,
            swap_compression_ratio: 1,
            kill_timeout_ms: 100,
        }
    }
}

/// ActivityManager's limits (`ActivityManagerConstants`, Android 15).
#[derive(Debug, Clone, PartialEq)]
pub struct AmProps {
    /// `CUR_MAX_CACHED_PROCESSES`: `config_customizedMaxCachedProcesses`
    /// (1024 since Android 14, which moved cached-app kills to lmkd's
    /// LOW_MEM reason), capped by the `max_cached_processes` device config
    /// (DEFAULT_MAX_CACHED_PROCESSES 1024).
    pub max_cached_processes: usize,
    /// `DEFAULT_MAX_PREVIOUS_TIME` (60 s): how long the previous app keeps
    /// PREVIOUS_APP_ADJ before it is cached like any other.
    pub max_previous_time_ms: u64,
    /// `CachedAppOptimizer.DEFAULT_USE_COMPACTION` (true): a cached app's
    /// anonymous memory is paged out to zram once it is frozen.
    pub use_compaction: bool,
    /// `DEFAULT_FREEZER_DEBOUNCE_TIMEOUT` (10 s): a process is frozen this
    /// long after it became cached (`freezeAppAsyncLSP`).
    pub freezer_debounce_ms: u64,
    /// `DEFAULT_COMPACT_FULL_RSS_THROTTLE_KB` (12,000): no full compaction
    /// of a process with less anonymous memory resident.
    pub compact_full_rss_throttle_kb: u64,
    /// `COMPACT_DOWNGRADE_FREE_SWAP_THRESHOLD` (0.2): below this share of
    /// swap free, a full compaction is downgraded (`resolveCompactionProfile`).
    pub compact_downgrade_free_swap_pct: u64,
}

impl Default for AmProps {
    fn default() -> Self {
        AmProps {
            max_cached_processes: 1024,
            max_previous_time_ms: 60_000,
            use_compaction: true,
            freezer_debounce_ms: 10_000,
            compact_full_rss_throttle_kb: 12_000,
            compact_downgrade_free_swap_pct: 20,
        }
    }
}

/// lmkd's kill reasons (lmkd.h `enum kill_reasons`, Android 15 order and
/// numbers), plus ActivityManager's own cached-limit kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KillReason {
    /// The min watermark still breached on the poll after a kill.
    PressureAfterKill = 0,
    /// The critical PSI monitor fired (`full` stall over its threshold).
    NotResponding = 1,
    /// Swap low and the page cache thrashing.
    LowSwapAndThrashing = 2,
    /// Free memory below the low watermark and swap low.
    LowMemAndSwap = 3,
    /// Free memory below the low watermark and the page cache thrashing.
    LowMemAndThrashing = 4,
    /// Direct reclaim and the page cache thrashing.
    DirectReclAndThrashing = 5,
    /// Free memory low and swap mostly used (off by default).
    LowMemAndSwapUtil = 6,
    /// The page cache below `filecache_min_kb` after thrashing.
    LowFilecacheAfterThrashing = 7,
    /// Free memory below the low watermark: a cached app goes.
    LowMem = 8,
    /// Stuck in direct reclaim (off by default).
    DirectReclStuck = 9,
    /// ActivityManager: more cached processes than its limit.
    AmCachedLimit = 100,
}

impl KillReason {
    /// Every reason, for per-reason counters.
    pub const ALL: [KillReason; 11] = [
        KillReason::PressureAfterKill,
        KillReason::NotResponding,
        KillReason::LowSwapAndThrashing,
        KillReason::LowMemAndSwap,
        KillReason::LowMemAndThrashing,
        KillReason::DirectReclAndThrashing,
        KillReason::LowMemAndSwapUtil,
        KillReason::LowFilecacheAfterThrashing,
        KillReason::LowMem,
        KillReason::DirectReclStuck,
        KillReason::AmCachedLimit,
    ];

    /// The name lmkd logs (`killinfo`), in snake case.
    pub fn name(self) -> &'static str {
        match self {
            KillReason::PressureAfterKill => "pressure_after_kill",
            KillReason::NotResponding => "not_responding",
            KillReason::LowSwapAndThrashing => "low_swap_and_thrashing",
            KillReason::LowMemAndSwap => "low_mem_and_swap",
            KillReason::LowMemAndThrashing => "low_mem_and_thrashing",
            KillReason::DirectReclAndThrashing => "direct_recl_and_thrashing",
            KillReason::LowMemAndSwapUtil => "low_mem_and_swap_util",
            KillReason::LowFilecacheAfterThrashing => "low_filecache_after_thrashing",
            KillReason::LowMem => "low_mem",
            KillReason::DirectReclStuck => "direct_recl_stuck",
            KillReason::AmCachedLimit => "am_cached_limit",
        }
    }

    /// Index into [`KillReason::ALL`].
    pub fn index(self) -> usize {
        KillReason::ALL.iter().position(|&r| r == self).unwrap_or(0)
    }
}

/// Which zone watermark free memory is below (lmkd.cpp
/// `get_lowest_watermark`, `enum zone_watermark`); ordered as lmkd compares
/// them: `wmark < Wmark::High` is free below the low watermark, `wmark <
/// Wmark::Low` below the min one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wmark {
    /// Below the min watermark.
    Min,
    /// Below the low watermark.
    Low,
    /// Below the high watermark.
    High,
    /// Above every watermark.
    None,
}

/// `get_lowest_watermark`: the lowest watermark free memory is below.
pub fn lowest_watermark(free: u64, min: u64, low: u64, high: u64) -> Wmark {
    if free < min {
        Wmark::Min
    } else if free < low {
        Wmark::Low
    } else if free < high {
        Wmark::High
    } else {
        Wmark::None
    }
}

/// What lmkd reads at a wakeup (meminfo, vmstat, PSI), in pages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Time, ms.
    pub now_ms: u64,
    /// `nr_free_pages` (less CMA).
    pub free: u64,
    /// Zone watermarks (summed over zones), pages.
    pub wmark_min: u64,
    /// Low watermark.
    pub wmark_low: u64,
    /// High watermark.
    pub wmark_high: u64,
    /// `SwapTotal`.
    pub swap_total: u64,
    /// `SwapFree`.
    pub swap_free: u64,
    /// `nr_inactive_file`.
    pub inactive_file: u64,
    /// `nr_inactive_file + nr_active_file`.
    pub file_lru: u64,
    /// `workingset_refault_file`, cumulative.
    pub workingset_refault_file: u64,
    /// `pgscan_direct`, cumulative (any change: in direct reclaim).
    pub pgscan_direct: u64,
    /// `pgscan_kswapd`, cumulative.
    pub pgscan_kswapd: u64,
    /// PSI memory `full` avg10, percent.
    pub psi_full_avg10: f64,
}

impl Sample {
    /// `get_free_swap`: free swap, at most `swap_compression_ratio` times
    /// the easily available memory (free plus inactive file pages): swap
    /// needs free pages to compress into.
    pub fn free_swap(&self, props: &LmkdProps) -> u64 {
        if props.swap_compression_ratio == 0 {
            return self.swap_free;
        }
        self.swap_free
            .min((self.free + self.inactive_file).saturating_mul(props.swap_compression_ratio))
    }

    /// `swap_is_low`: free swap below `swap_free_low_percentage` of the total.
    pub fn swap_is_low(&self, props: &LmkdProps) -> bool {
        props.swap_free_low_percentage > 0
            && self.free_swap(props) < self.swap_total * props.swap_free_low_percentage / 100
    }

    fn wmark(&self) -> Wmark {
        lowest_watermark(self.free, self.wmark_min, self.wmark_low, self.wmark_high)
    }
}

/// A PSI monitor's level (`enum vmpressure_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// No event: a poll.
    Poll,
    /// The medium monitor (`some` stall) fired.
    Medium,
    /// The critical monitor (`full` stall) fired.
    Critical,
}

/// A kill lmkd decided: the reason and the lowest adj it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillOrder {
    /// Why.
    pub reason: KillReason,
    /// `min_score_adj`: `find_and_kill_process` kills adj ≥ this.
    pub min_score_adj: i32,
}

/// lmkd's state between wakeups (the statics of `mp_event_psi` and the
/// polling of `mainloop`/`call_handler`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lmkd {
    init_ws_refault: u64,
    prev_workingset_refault: u64,
    base_file_lru: u64,
    init_pgscan_kswapd: u64,
    init_pgscan_direct: u64,
    /// Set when the last wakeup killed; the next one is a cycle after a kill.
    killing: bool,
    thrashing_limit: i64,
    thrashing_reset_ms: u64,
    prev_thrash_growth: i64,
    check_filecache: bool,
    /// When direct reclaim was first seen in the current stretch of it.
    direct_reclaim_start_ms: Option<u64>,
    /// Polling: since when (None while not polling), and the next poll.
    poll_start_ms: Option<u64>,
    next_poll_ms: u64,
    poll_interval_ms: u64,
    /// The last event of each PSI monitor (rate-limited to one a window).
    last_event_ms: [Option<u64>; 2],
    /// The last kill, for `kill_timeout_ms`.
    pub last_kill_ms: Option<u64>,
    initialised: bool,
}

impl Lmkd {
    /// A fresh lmkd (boot).
    pub fn new(props: &LmkdProps) -> Self {
        Lmkd {
            thrashing_limit: props.thrashing_limit_pct,
            poll_interval_ms: PSI_POLL_PERIOD_LONG_MS,
            ..Lmkd::default()
        }
    }

    /// Whether lmkd is polling (awake between PSI events).
    pub fn polling(&self) -> bool {
        self.poll_start_ms.is_some()
    }

    /// The PSI monitor that fires now, if any: the kernel raises a trigger
    /// when the stall in the last 1 s window reaches its threshold, at most
    /// once per window (`psi_thresholds`, `init_mp_psi`). `some_ms` and
    /// `full_ms` are the stall over the last second.
    pub fn psi_event(
        &mut self,
        props: &LmkdProps,
        now_ms: u64,
        some_ms: f64,
        full_ms: f64,
    ) -> Level {
        let due =
            |last: Option<u64>| last.is_none_or(|t| now_ms.saturating_sub(t) >= PSI_WINDOW_SIZE_MS);
        if full_ms >= props.psi_complete_stall_ms as f64 && due(self.last_event_ms[1]) {
            self.last_event_ms[1] = Some(now_ms);
            return Level::Critical;
        }
        if some_ms >= props.psi_partial_stall_ms as f64 && due(self.last_event_ms[0]) {
            self.last_event_ms[0] = Some(now_ms);
            return Level::Medium;
        }
        Level::Poll
    }

    /// Whether a wakeup is due now: a PSI event, or a poll while polling.
    pub fn due(&self, level: Level, now_ms: u64) -> bool {
        level != Level::Poll || (self.polling() && now_ms >= self.next_poll_ms)
    }

    /// One call of `mp_event_psi` (with the polling bookkeeping of
    /// `call_handler`): returns the kill to make, if any. The caller kills
    /// with [`find_victim`] and reports it with [`Lmkd::killed`].
    pub fn wakeup(&mut self, props: &LmkdProps, s: &Sample, level: Level) -> Option<KillOrder> {
        let now = s.now_ms;
        if !self.initialised {
            // The statics start at the counters' first reading (lmkd's
            // start); the thrashing window with it.
            self.initialised = true;
            self.init_ws_refault = s.workingset_refault_file;
            self.prev_workingset_refault = s.workingset_refault_file;
            self.base_file_lru = s.file_lru;
            self.init_pgscan_direct = s.pgscan_direct;
            self.init_pgscan_kswapd = s.pgscan_kswapd;
            self.thrashing_reset_ms = now;
            self.thrashing_limit = props.thrashing_limit_pct;
        }
        let order = self.decide(props, s, level);
        // call_handler: POLLING_START on an event, while killing or in
        // direct reclaim; stop once polled for a PSI window otherwise.
        let direct = self.direct_reclaim_start_ms.is_some();
        if level != Level::Poll || order.is_some() || direct {
            self.poll_start_ms = Some(now);
        } else if let Some(t) = self.poll_start_ms {
            if now.saturating_sub(t) > PSI_WINDOW_SIZE_MS {
                self.poll_start_ms = None;
            }
        }
        self.poll_interval_ms = if s.swap_is_low(props) || order.is_some() {
            PSI_POLL_PERIOD_SHORT_MS
        } else {
            PSI_POLL_PERIOD_LONG_MS
        };
        self.next_poll_ms = now + self.poll_interval_ms;
        order
    }

    /// The victim died: the next wakeup is a cycle after a kill; a
    /// thrashing reason cuts the thrashing limit (`mp_event_psi`, after
    /// `find_and_kill_process`).
    pub fn killed(&mut self, props: &LmkdProps, order: KillOrder, now_ms: u64) {
        self.killing = true;
        self.last_kill_ms = Some(now_ms);
        if matches!(
            order.reason,
            KillReason::LowMemAndThrashing | KillReason::DirectReclAndThrashing
        ) {
            self.thrashing_limit =
                self.thrashing_limit * (100 - props.thrashing_limit_decay_pct) / 100;
        }
        self.poll_interval_ms = PSI_POLL_PERIOD_SHORT_MS;
        self.next_poll_ms = now_ms + PSI_POLL_PERIOD_SHORT_MS;
    }

    fn decide(&mut self, props: &LmkdProps, s: &Sample, level: Level) -> Option<KillOrder> {
        let now = s.now_ms;
        // A victim dies at once here (pidfd and process_mrelease), so no
        // kill is ever pending (`is_kill_pending`); the poll 10 ms after a
        // kill (`killed`) is the next decision.
        let refault = s.workingset_refault_file;
        let mut cycle_after_kill = false;
        if self.killing {
            self.killing = false;
            cycle_after_kill = true;
            self.base_file_lru = s.file_lru;
            self.init_ws_refault = refault;
            self.thrashing_reset_ms = now;
            self.prev_thrash_growth = 0;
        }
        let swap_is_low = s.swap_is_low(props);
        let in_direct = s.pgscan_direct != self.init_pgscan_direct;
        let in_kswapd = s.pgscan_kswapd != self.init_pgscan_kswapd;
        let mut direct_reclaim = false;
        if in_direct {
            self.init_pgscan_direct = s.pgscan_direct;
            self.init_pgscan_kswapd = s.pgscan_kswapd;
            self.direct_reclaim_start_ms.get_or_insert(now);
            direct_reclaim = true;
        } else {
            self.direct_reclaim_start_ms = None;
            if in_kswapd {
                self.init_pgscan_kswapd = s.pgscan_kswapd;
            } else if refault == self.prev_workingset_refault {
                // Not thrashing and not reclaiming: no kill.
                return None;
            }
        }
        self.prev_workingset_refault = refault;

        // Thrashing: refaults in the current 1 s window as a share of the
        // file LRU at its start, plus the previous window's, decayed.
        let since_reset = now.saturating_sub(self.thrashing_reset_ms);
        let mut thrashing: i64 = 0;
        if since_reset > THRASHING_RESET_INTERVAL_MS {
            self.prev_thrash_growth = (refault.saturating_sub(self.init_ws_refault) * 100
                / (self.base_file_lru + 1)) as i64;
            let windows = (since_reset / THRASHING_RESET_INTERVAL_MS).min(63);
            if windows > 1 || self.prev_thrash_growth < self.thrashing_limit {
                self.prev_thrash_growth >>= windows;
            }
            self.base_file_lru = s.file_lru;
            self.init_ws_refault = refault;
            self.thrashing_reset_ms = now;
            self.thrashing_limit = props.thrashing_limit_pct;
        } else {
            thrashing = (refault.saturating_sub(self.init_ws_refault) * 100
                / (self.base_file_lru + 1)) as i64;
        }
        thrashing += self.prev_thrash_growth;

        let wmark = s.wmark();
        let critical_stall = s.psi_full_avg10 > props.stall_limit_critical;
        let perceptible_floor = PERCEPTIBLE_APP_ADJ + 1;
        let mut order = if cycle_after_kill && wmark < Wmark::Low {
            Some((
                KillReason::PressureAfterKill,
                props.pressure_after_kill_min_score,
            ))
        } else if level == Level::Critical {
            Some((KillReason::NotResponding, 0))
        } else if swap_is_low && thrashing > props.thrashing_limit_pct {
            self.check_filecache = true;
            let floor = if wmark > Wmark::Min && thrashing < props.thrashing_critical_pct {
                perceptible_floor
            } else {
                0
            };
            Some((KillReason::LowSwapAndThrashing, floor))
        } else if swap_is_low && wmark < Wmark::High {
            let floor = if wmark > Wmark::Min && thrashing < props.thrashing_critical_pct {
                perceptible_floor
            } else {
                0
            };
            Some((KillReason::LowMemAndSwap, floor))
        } else if wmark < Wmark::High
            && props.swap_util_max < 100
            && swap_util(s, props) > props.swap_util_max
        {
            Some((KillReason::LowMemAndSwapUtil, 0))
        } else if wmark < Wmark::High && thrashing > self.thrashing_limit {
            self.check_filecache = true;
            let floor = if thrashing < props.thrashing_critical_pct {
                perceptible_floor
            } else {
                0
            };
            Some((KillReason::LowMemAndThrashing, floor))
        } else if direct_reclaim && thrashing > self.thrashing_limit {
            self.check_filecache = true;
            let floor = if thrashing < props.thrashing_critical_pct {
                perceptible_floor
            } else {
                0
            };
            Some((KillReason::DirectReclAndThrashing, floor))
        } else if direct_reclaim
            && props.direct_reclaim_threshold_ms > 0
            && self
                .direct_reclaim_start_ms
                .is_some_and(|t| now.saturating_sub(t) > props.direct_reclaim_threshold_ms)
        {
            Some((KillReason::DirectReclStuck, 0))
        } else if self.check_filecache {
            if s.file_lru * 4 < props.filecache_min_kb {
                Some((KillReason::LowFilecacheAfterThrashing, perceptible_floor))
            } else {
                self.check_filecache = false;
                None
            }
        } else {
            None
        };
        // Check if a cached app should be killed (Android 14 on).
        if order.is_none() && wmark < Wmark::High {
            order = Some((
                KillReason::LowMem,
                props.lowmem_min_oom_score.max(perceptible_floor),
            ));
        }
        order.map(|(reason, mut min_score_adj)| {
            // Allow killing perceptible apps if the system is stalled.
            if critical_stall {
                min_score_adj = 0;
            }
            KillOrder {
                reason,
                min_score_adj,
            }
        })
    }
}

/// `calc_swap_utilization`: swapped pages as a share of all swappable ones.
fn swap_util(s: &Sample, props: &LmkdProps) -> i64 {
    let used = s.swap_total.saturating_sub(s.free_swap(props));
    // The sample has no anon LRU sizes: only the swapped share counts,
    // and the rule is off by default (swap_util_max 100).
    (used * 100).checked_div(s.swap_total).unwrap_or(0) as i64
}

/// A process as lmkd and ActivityManager see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proc {
    /// `oom_score_adj`.
    pub adj: i32,
    /// When it was last in front, ms (its place in the LRU).
    pub last_used_ms: u64,
    /// Resident set, pages (for the heaviest choice at adj ≤ 200).
    pub rss: u64,
}

/// `find_and_kill_process`: from adj 1000 down to `min_score_adj`, the
/// process added to its adj slot longest ago (`proc_adj_tail`, the least
/// recently used), or at adj ≤ PERCEPTIBLE_APP_ADJ the heaviest
/// (`proc_get_heaviest`). Returns the index into `procs`.
pub fn find_victim(procs: &[Proc], min_score_adj: i32) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, p) in procs.iter().enumerate() {
        if p.adj < min_score_adj || p.adj > OOM_SCORE_ADJ_MAX {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) => {
                let q = &procs[b];
                if p.adj != q.adj {
                    p.adj > q.adj
                } else if p.adj <= PERCEPTIBLE_APP_ADJ {
                    p.rss > q.rss
                } else {
                    p.last_used_ms < q.last_used_ms
                }
            }
        };
        if better {
            best = Some(i);
        }
    }
    best
}

/// OomAdjuster's adj for a background app: the previous app keeps
/// PREVIOUS_APP_ADJ for `max_previous_time_ms` after it left the
/// foreground; every other one is cached, ranked by LRU from
/// CACHED_APP_MIN_ADJ (`assignCachedAdjIfNecessary` spreads them over
/// 900-999 in recency order; only that order matters to lmkd).
/// `rank` is 0 for the most recently used background app.
pub fn background_adj(rank: usize, left_foreground_ago_ms: u64, am: &AmProps) -> i32 {
    if rank == 0 && left_foreground_ago_ms < am.max_previous_time_ms {
        PREVIOUS_APP_ADJ
    } else {
        (CACHED_APP_MIN_ADJ + rank as i32).min(CACHED_APP_MAX_ADJ)
    }
}

/// `CachedAppOptimizer`'s compaction of a cached app: `onProcessFrozen`
/// asks for a FULL compaction once the freezer has frozen the process
/// (its debounce after the app became cached); `resolveCompactionProfile`
/// downgrades FULL to SOME when less than 20 % of swap is free, and with
/// `ENABLE_SHARED_AND_CODE_COMPACT` false, FULL means ANON (anonymous
/// pages only) and SOME means NONE; the RSS throttle skips a process with
/// less than 12,000 KB of anonymous memory resident. A process is
/// compacted once per stay in the cached range (the OOM-adj throttle).
/// Returns the pages to page out of `anon_resident` (all or none).
pub fn compaction_pages(
    cached_for_ms: u64,
    anon_resident: u64,
    swap_free: u64,
    swap_total: u64,
    am: &AmProps,
) -> u64 {
    let frozen = cached_for_ms >= am.freezer_debounce_ms;
    // `getFreeSwapPercent`: sysinfo's freeswap / totalswap (0 with no swap).
    let swap_low = swap_free * 100 < swap_total * am.compact_downgrade_free_swap_pct;
    let small = anon_resident * (PAGE_KB) < am.compact_full_rss_throttle_kb;
    if !am.use_compaction || !frozen || swap_total == 0 || swap_low || small {
        return 0;
    }
    anon_resident
}

/// Kilobytes in a page (4 KiB pages, as on the Pixels).
const PAGE_KB: u64 = 4;

/// `OomAdjuster.updateAndTrimProcessLSP`: cached processes past the
/// cached-process limit are killed, the least recently used first.
/// Returns the indices into `procs` to kill.
pub fn am_trim(procs: &[Proc], am: &AmProps) -> Vec<usize> {
    let mut cached: Vec<usize> = (0..procs.len())
        .filter(|&i| procs[i].adj >= CACHED_APP_MIN_ADJ)
        .collect();
    if cached.len() <= am.max_cached_processes {
        return Vec::new();
    }
    // Most recent first; everything past the limit goes.
    cached.sort_by(|&a, &b| procs[b].last_used_ms.cmp(&procs[a].last_used_ms));
    cached.split_off(am.max_cached_processes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A calm sample: free above the high watermark, swap mostly free.
    fn calm(now_ms: u64) -> Sample {
        Sample {
            now_ms,
            free: 50_000,
            wmark_min: 20_000,
            wmark_low: 30_000,
            wmark_high: 40_000,
            swap_total: 400_000,
            swap_free: 300_000,
            inactive_file: 100_000,
            file_lru: 200_000,
            workingset_refault_file: 0,
            pgscan_direct: 0,
            pgscan_kswapd: 0,
            psi_full_avg10: 0.0,
        }
    }

    fn started(props: &LmkdProps) -> Lmkd {
        let mut l = Lmkd::new(props);
        assert_eq!(l.wakeup(props, &calm(0), Level::Medium), None);
        l
    }

    #[test]
    fn trigger_psi_monitors_fire_at_their_thresholds_once_a_window() {
        let p = LmkdProps::pixel();
        let mut l = Lmkd::new(&p);
        // 69 ms of `some` stall in the last second: below 70.
        assert_eq!(l.psi_event(&p, 1_000, 69.0, 0.0), Level::Poll);
        assert_eq!(l.psi_event(&p, 1_000, 70.0, 0.0), Level::Medium);
        // Rate-limited: not again within the window.
        assert_eq!(l.psi_event(&p, 1_500, 500.0, 0.0), Level::Poll);
        assert_eq!(l.psi_event(&p, 2_000, 70.0, 0.0), Level::Medium);
        // 700 ms of `full` stall: the critical monitor.
        assert_eq!(l.psi_event(&p, 2_100, 800.0, 700.0), Level::Critical);
        // Polling lasts a PSI window after the event, then stops.
        let mut l = started(&p);
        assert!(l.polling());
        assert!(l.due(Level::Poll, 100) && !l.due(Level::Poll, 99));
        l.wakeup(&p, &calm(900), Level::Poll);
        assert!(l.polling());
        l.wakeup(&p, &calm(1_001), Level::Poll);
        assert!(!l.polling());
    }

    #[test]
    fn trigger_nothing_when_not_reclaiming_and_not_refaulting() {
        let p = LmkdProps::pixel();
        let mut l = started(&p);
        // Free below the low watermark, but no counter moved: lmkd bails
        // out before its rules (`goto no_kill`).
        let s = Sample {
            free: 25_000,
            ..calm(100)
        };
        assert_eq!(l.wakeup(&p, &s, Level::Poll), None);
        // kswapd scanned, free between low and high: nothing to do.
        let s = Sample {
            free: 35_000,
            pgscan_kswapd: 32,
            ..calm(150)
        };
        assert_eq!(l.wakeup(&p, &s, Level::Poll), None);
        // Below the low watermark: LOW_MEM, cached apps only (701).
        let s = Sample {
            free: 25_000,
            pgscan_kswapd: 64,
            ..calm(200)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Poll),
            Some(KillOrder {
                reason: KillReason::LowMem,
                min_score_adj: 701
            })
        );
    }

    #[test]
    fn victim_floor_low_mem_and_swap_spares_perceptible_above_min() {
        let p = LmkdProps::pixel();
        let mut l = started(&p);
        // Free swap 30,000 of 400,000 (< 10 %), free between min and low.
        let s = Sample {
            free: 25_000,
            swap_free: 30_000,
            pgscan_kswapd: 10,
            ..calm(100)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Poll),
            Some(KillOrder {
                reason: KillReason::LowMemAndSwap,
                min_score_adj: 201
            })
        );
        // Below the min watermark: anything down to adj 0.
        let s = Sample {
            free: 10_000,
            swap_free: 30_000,
            pgscan_kswapd: 20,
            ..calm(200)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Poll).map(|o| o.min_score_adj),
            Some(0)
        );
    }

    #[test]
    fn victim_floor_free_swap_is_capped_by_easily_available_memory() {
        let p = LmkdProps::pixel();
        // SwapFree 300,000 of 400,000, but free + inactive file is 35,000
        // pages: free swap counts 35,000 (< 40,000), so swap is low.
        let s = Sample {
            free: 25_000,
            inactive_file: 10_000,
            ..calm(0)
        };
        assert_eq!(s.free_swap(&p), 35_000);
        assert!(s.swap_is_low(&p));
        assert!(!calm(0).swap_is_low(&p));
    }

    #[test]
    fn trigger_pressure_after_kill_and_not_responding() {
        let p = LmkdProps::pixel();
        let mut l = started(&p);
        let s = Sample {
            free: 25_000,
            pgscan_kswapd: 10,
            ..calm(100)
        };
        let o = l.wakeup(&p, &s, Level::Poll).unwrap();
        l.killed(&p, o, 100);
        // The poll after the kill (10 ms), free still below min.
        let s = Sample {
            free: 15_000,
            pgscan_kswapd: 20,
            ..calm(110)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Poll),
            Some(KillOrder {
                reason: KillReason::PressureAfterKill,
                min_score_adj: 0
            })
        );
        // The critical monitor: NOT_RESPONDING, down to adj 0.
        let s = Sample {
            pgscan_direct: 5,
            ..calm(300)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Critical),
            Some(KillOrder {
                reason: KillReason::NotResponding,
                min_score_adj: 0
            })
        );
    }

    #[test]
    fn trigger_thrashing_counts_refaults_against_the_file_lru() {
        let p = LmkdProps::pixel();
        let mut l = started(&p);
        // 210,000 refaults on a 200,000-page file LRU: 104 % > 100 %, free
        // below low: LOW_MEM_AND_THRASHING, perceptible spared (< 300 %).
        let s = Sample {
            free: 25_000,
            workingset_refault_file: 210_000,
            ..calm(500)
        };
        let o = l.wakeup(&p, &s, Level::Poll).unwrap();
        assert_eq!(o.reason, KillReason::LowMemAndThrashing);
        assert_eq!(o.min_score_adj, 201);
        // The kill cuts the limit by 10 %: 90.
        l.killed(&p, o, 500);
        assert_eq!(l.thrashing_limit, 90);
        // In direct reclaim with free above low: DIRECT_RECL_AND_THRASHING.
        let mut l = started(&p);
        let s = Sample {
            workingset_refault_file: 210_000,
            pgscan_direct: 32,
            ..calm(500)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Poll).map(|o| o.reason),
            Some(KillReason::DirectReclAndThrashing)
        );
        // Page cache low afterwards (< 150 MiB on a Pixel):
        // LOW_FILECACHE_AFTER_THRASHING.
        let s = Sample {
            workingset_refault_file: 210_000,
            file_lru: 30_000,
            pgscan_direct: 32,
            pgscan_kswapd: 8,
            ..calm(600)
        };
        // (no direct reclaim since, but kswapd scans; the file LRU is 117 MiB)
        let o = l.wakeup(&p, &s, Level::Poll);
        assert_eq!(
            o.map(|o| o.reason),
            Some(KillReason::LowFilecacheAfterThrashing)
        );
    }

    #[test]
    fn trigger_critical_stall_lowers_every_floor_to_zero() {
        let p = LmkdProps::pixel();
        let mut l = started(&p);
        let s = Sample {
            free: 25_000,
            pgscan_kswapd: 10,
            psi_full_avg10: 41.0,
            ..calm(100)
        };
        assert_eq!(
            l.wakeup(&p, &s, Level::Poll).map(|o| o.min_score_adj),
            Some(0)
        );
    }

    #[test]
    fn order_highest_adj_then_least_recently_used_then_heaviest() {
        let procs = [
            Proc {
                adj: 905,
                last_used_ms: 50,
                rss: 10,
            },
            Proc {
                adj: 910,
                last_used_ms: 90,
                rss: 10,
            },
            Proc {
                adj: 910,
                last_used_ms: 20,
                rss: 1,
            },
            Proc {
                adj: 700,
                last_used_ms: 1,
                rss: 99,
            },
            Proc {
                adj: 200,
                last_used_ms: 5,
                rss: 5,
            },
            Proc {
                adj: 200,
                last_used_ms: 6,
                rss: 50,
            },
            Proc {
                adj: 0,
                last_used_ms: 0,
                rss: 500,
            },
        ];
        // The highest adj, of two the one used longest ago.
        assert_eq!(find_victim(&procs, 701), Some(2));
        // Floor 701 leaves the previous app (700) and below alone.
        assert_eq!(find_victim(&procs[3..], 701), None);
        assert_eq!(find_victim(&procs[3..], 201), Some(0));
        // At perceptible adj the heaviest goes, not the oldest.
        assert_eq!(find_victim(&procs[4..], 0), Some(1));
    }

    #[test]
    fn order_previous_app_keeps_its_adj_for_a_minute() {
        let am = AmProps::default();
        assert_eq!(background_adj(0, 59_999, &am), PREVIOUS_APP_ADJ);
        assert_eq!(background_adj(0, 60_000, &am), CACHED_APP_MIN_ADJ);
        assert_eq!(background_adj(3, 10, &am), CACHED_APP_MIN_ADJ + 3);
        assert_eq!(background_adj(500, 10, &am), CACHED_APP_MAX_ADJ);
    }

    #[test]
    fn activity_manager_limit_kills_the_oldest_cached_past_it() {
        let am = AmProps {
            max_cached_processes: 2,
            ..AmProps::default()
        };
        let procs = [
            Proc {
                adj: 700,
                last_used_ms: 1,
                rss: 1,
            },
            Proc {
                adj: 900,
                last_used_ms: 40,
                rss: 1,
            },
            Proc {
                adj: 902,
                last_used_ms: 10,
                rss: 1,
            },
            Proc {
                adj: 901,
                last_used_ms: 30,
                rss: 1,
            },
            Proc {
                adj: 903,
                last_used_ms: 5,
                rss: 1,
            },
        ];
        let mut k = am_trim(&procs, &am);
        k.sort();
        // Four cached, limit two: the two used longest ago go; the
        // previous app is not cached.
        assert_eq!(k, vec![2, 4]);
        // AOSP's 1024 never trims a phone's 60 apps.
        assert!(am_trim(&procs, &AmProps::default()).is_empty());
    }

    #[test]
    fn compaction_pages_out_a_frozen_cached_app_unless_swap_is_low_or_it_is_small() {
        let am = AmProps::default();
        // 100 MiB resident (25,600 pages), about 1 GB of swap.
        let (anon, total) = (25_600, 250_000);
        // Cached for 9.999 s: not frozen yet (debounce 10 s).
        assert_eq!(compaction_pages(9_999, anon, total / 2, total, &am), 0);
        // Frozen: all of it (FULL = ANON with shared/code compaction off).
        assert_eq!(compaction_pages(10_000, anon, total / 2, total, &am), anon);
        // 19.9 % of swap free: FULL downgrades to SOME = NONE.
        assert_eq!(
            compaction_pages(10_000, anon, total * 199 / 1000, total, &am),
            0
        );
        // Exactly 20 % free is not below the threshold.
        assert_eq!(compaction_pages(10_000, anon, total / 5, total, &am), anon);
        // 11,996 KB resident (2,999 pages) is under the 12,000 KB throttle;
        // 3,000 pages (12,000 KB) is not.
        assert_eq!(compaction_pages(10_000, 2_999, total, total, &am), 0);
        assert_eq!(compaction_pages(10_000, 3_000, total, total, &am), 3_000);
        // No swap, or compaction off: nothing.
        assert_eq!(compaction_pages(10_000, anon, 0, 0, &am), 0);
        let off = AmProps {
            use_compaction: false,
            ..AmProps::default()
        };
        assert_eq!(compaction_pages(10_000, anon, total, total, &off), 0);
    }
}
