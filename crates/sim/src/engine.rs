//! The simulated phone's event loop: the device state, the user's actions
//! (launch, use, go home, reset) and the scheduler driven every tick.
//!
//! The user-space policy is not here: it is the core's scheduler
//! ([`appflow_core::scheduler::Scheduler`]), the same type the daemon
//! runs. Each tick (`ReclaimConfig::tick_ms` of simulated time) the loop
//! builds a [`Record`] from the kernel model and applies it; launches,
//! switches and exits become event records. The scheduler acts through the
//! mechanism traits, which [`Sim`] implements (see [`crate::worker`]).
//!
//! | file | owns |
//! |---|---|
//! | this one | the device state, the event loop, driving the scheduler |
//! | [`crate::kernel`] | memory accounting, LRU, kswapd and direct reclaim, zram and swap, PSI, lmkd and the OOM killer |
//! | [`crate::launch`] | the launch model: phases, the app's reads, CPU and allocation, 5 ms steps |
//! | [`crate::worker`] | the preload worker (standby touch, launch streams) and the mechanism traits |
//! | [`crate::peers`] | kernel variants of other systems (Acclaim) |
//!
//! Granularity (chosen for speed, docs/sim.md): memory is counted in pages
//! but held in per-app *extents* — for each app, its launch files in
//! [`CHUNKS`] × {small, large} cells for each holder (the app itself, the
//! before-launch standby set, the launch-time stream), its other file cache,
//! and its anonymous memory (resident, in zram, on flash swap). The LRU is
//! ordered at app granularity by last use. Time advances in 5 ms steps
//! during launches and in coarse steps (≤ 10 s) while idle; idle periods
//! where nothing changes are skipped in one jump.

use crate::catalog::{AppModel, Cells};
use crate::device::Device;
use crate::policy::Policy;
use crate::worker::PrepageJob;
use appflow_core::killer::KillerConfig;
use appflow_core::policy::{KernelVariant, KillerStrategy, SwitchStrategy};
use appflow_core::preload::{CutoffPlan, PreloadConfig};
use appflow_core::prepage::{Feedback, SwitchObservation};
use appflow_core::profile::LaunchProfile;
use appflow_core::reason::Reason;
use appflow_core::reclaim::{ReclaimConfig, ReclaimMode};
use appflow_core::scheduler::{
    DomainSample, EventKind, Mechanisms, ProcInfo, Record, Scheduler, SchedulerConfig,
};
use appflow_core::{MIB, PAGE_BYTES};
use std::collections::BTreeMap;

pub use crate::launch::{LaunchKind, STEP_US};

/// Longest idle step, µs.
pub const IDLE_STEP_US: u64 = 10_000_000;
/// Idle steps per growth span while an app grows ([`Sim::idle_step_us`]).
const GROWTH_STEPS: u64 = 20;
/// Most freezes and compaction steps taken within one quiet stretch (a
/// bound on the loop, far above the apps a device holds).
const COMPACTIONS_PER_JUMP: usize = 4096;
/// Background footprints grow 30-50 % over baseline (the AppFlow paper §4.3) over this long (assumption).
pub const GROWTH_US: u64 = 30 * 60 * 1_000_000;

/// Simulation parameters (the core's configs, at their defaults unless set).
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Run seed.
    pub seed: u64,
    /// Selective File Preloader parameters (M_p etc.).
    pub preload: PreloadConfig,
    /// Adaptive Memory Reclaimer parameters.
    pub reclaim: ReclaimConfig,
    /// Context-Aware Process Killer parameters.
    pub killer: KillerConfig,
    /// kswapd's reclaim batch above the low watermark under the re-fault
    /// policy's kernel, pages, fixed (the re-fault study §5). None: the
    /// device's own gap (high − low) to start with, then the step the
    /// policy's controller sets (`vm.watermark_scale_factor`, mapped by
    /// [`crate::peers`]).
    pub refault_batch_pages: Option<u64>,
}

impl SimConfig {
    /// Defaults of the core with a seed.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            preload: PreloadConfig::default(),
            reclaim: ReclaimConfig::default(),
            killer: KillerConfig::default(),
            refault_batch_pages: None,
        }
    }

    /// The scheduler's configuration for `policy`: the same defaults the
    /// daemon's configuration file has, with this run's module parameters.
    pub fn scheduler_config(
        &self,
        policy: &'static appflow_core::policy::Policy,
    ) -> SchedulerConfig {
        SchedulerConfig {
            preload: self.preload.clone(),
            reclaim: self.reclaim.clone(),
            killer: self.killer.clone(),
            ..SchedulerConfig::for_policy(policy)
        }
    }
}

/// One measured launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchRecord {
    /// App index in the model list.
    pub app: usize,
    /// Cold, warm or hot.
    pub kind: LaunchKind,
    /// Cold launch of an app that had been running and was killed.
    pub relaunch_after_kill: bool,
    /// Launch latency, ms.
    pub latency_ms: f64,
    /// When it started, µs of simulated time.
    pub at_us: u64,
}

/// ASAP's switch prepaging over a run (the scheduler's own counts).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PrepageCounts {
    /// Switches prepaged.
    pub switches: u64,
    /// Bytes asked to be prepaged.
    pub requested_bytes: u64,
    /// Switches whose footprint the room above the killer's trigger level cut.
    pub bounded: u64,
    /// Footprint bytes the room left out.
    pub bounded_out_bytes: u64,
    /// Precision and recall of what was prepaged.
    pub feedback: Feedback,
}

/// Counters over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Direct reclaim batches (allocstall-like).
    pub direct_reclaims: u64,
    /// Processes killed (by anyone).
    pub kills: u64,
    /// Of which by the kernel's OOM killer (an allocation could not be met).
    pub oom_kills: u64,
    /// Of the kills, the platform killer's (lmkd or the OOM killer) at an
    /// allocation that found nothing left to reclaim.
    pub kills_blocked: u64,
    /// Of the kills, the platform's with no allocation blocked: lmkd's at
    /// its kill reasons and ActivityManager's past its cached-process limit.
    pub kills_pressure: u64,
    /// Of those, per Android 15 reason ([`crate::android::KillReason::ALL`]
    /// order; all 0 but on an Android 15 platform).
    pub kills_by_reason: [u64; 11],
    /// Anonymous pages Android 15's CachedAppOptimizer paged out.
    pub compacted_pages: u64,
    /// The memory state at the kills (by anyone): with free swap (zram and
    /// flash) below lmkd's `swap_free_low_percentage` (10 %) of its size;
    pub kills_swap_low: u64,
    /// ... with resident anonymous memory in the victim and free swap for
    /// all of it (a page-out of the whole victim had room: it could have
    /// replaced the kill, had it kept up);
    pub kills_swap_room_for_victim: u64,
    /// ... during a launch;
    pub kills_during_launch: u64,
    /// ... while the preloader held a before-launch standby set.
    pub kills_with_standby_set: u64,
    /// Kills while a switch's prepaging job was running (ASAP).
    pub kills_during_prepage: u64,
    /// Kills while pages that a switch's prepaging brought back, and the
    /// switch did not use, were resident (ASAP).
    pub kills_with_prepaged_unused: u64,
    /// File pages evicted.
    pub evicted_file_pages: u64,
    /// Anonymous pages swapped out.
    pub evicted_anon_pages: u64,
    /// Pages reclaimed by kswapd (of the evicted file and anonymous pages).
    pub kswapd_steal_pages: u64,
    /// Re-fault windows the scheduler judged (re-fault-aware reclaim).
    pub refault_windows: u64,
    /// Changes of kswapd's step by the scheduler.
    pub reclaim_step_changes: u64,
    /// kswapd's step in force (vm.watermark_scale_factor), when tuned.
    pub reclaim_step: Option<u32>,
    /// ASAP's switch prepaging as the scheduler did it, for policies that
    /// prepage.
    pub prepage: Option<PrepageCounts>,
    /// Evicted file pages read again.
    pub refault_file_pages: u64,
    /// Swapped pages faulted back.
    pub refault_anon_pages: u64,
    /// Peak pages of the before-launch standby set (bounded by M_p).
    pub preload_peak_pages: u64,
    /// Peak pages of a launch-time stream held for the launching app.
    pub stream_peak_pages: u64,
    /// Pages read by the preloader / prefetcher.
    pub preload_read_pages: u64,
    /// Pages read by the apps themselves.
    pub app_read_pages: u64,
    /// Reclaim mode switches of the scheduler.
    pub amr_switches: u64,
    /// Time spent in direct reclaim by launching apps, ms.
    pub direct_reclaim_ms: f64,
    /// Launches cut off by the safety limit (should stay 0).
    pub stuck_launches: u64,
}

/// Who holds a page-cache page of an app's launch files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    /// The app read it itself (ordinary page cache).
    Own,
    /// The preload worker keeps it in a standby set (touched, reclaimable).
    Held,
    /// The preload worker streamed it for a launch (locked until released).
    Stream,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AppState {
    pub alive: bool,
    pub ran_before: bool,
    pub killed: bool,
    pub pid: u32,
    /// Start time of the process, ms (its identity with the pid).
    pub start_ms: u64,
    pub launches: u64,
    pub last_used_us: u64,
    pub own: Cells,
    pub held: Cells,
    pub stream: Cells,
    /// Page sums of own, held, stream.
    pub sum: [u64; 3],
    /// Page cache of the app's files that is not one of its launch-file
    /// cells: the pages a switch's prepaging read and the switch did not
    /// use (never referenced).
    pub other_file: u64,
    pub anon_res: u64,
    /// Of `anon_res`, the pages a switch's prepaging brought back and the
    /// switch did not use (never referenced).
    pub unused_anon: u64,
    pub anon_zram: u64,
    pub anon_swap: u64,
    pub grow_target: u64,
    pub grown: u64,
    pub grow_start_us: u64,
    pub evicted_outstanding: u64,
    /// The worker's standby target for this app (pages per cell), if held.
    pub standby_target: Option<Cells>,
    /// The worker's launch-stream queue: (chunk, bucket, pages) in order.
    pub stream_q: StreamQueue,
    /// Ariadne: zram pages by hotness class (hot, warm, cold).
    pub zcls: [u64; 3],
    /// What the app's current foreground window brought back, pages (ASAP's feedback).
    pub window: SwitchObservation,
    /// Android 15: since when the app has been cached (adj 900 or more),
    /// and whether CachedAppOptimizer has compacted it in this stay.
    pub cached_since_us: Option<u64>,
    pub compacted: bool,
}

impl AppState {
    pub fn cells_mut(&mut self, h: Holder) -> &mut Cells {
        match h {
            Holder::Own => &mut self.own,
            Holder::Held => &mut self.held,
            Holder::Stream => &mut self.stream,
        }
    }
    pub fn cached(&self, k: usize, b: usize) -> u64 {
        self.own[k][b] + self.held[k][b] + self.stream[k][b]
    }
    pub fn anon_total(&self) -> u64 {
        self.anon_res + self.anon_zram + self.anon_swap
    }
    pub(crate) fn cell_sums(&self) -> [u64; 3] {
        [
            cells_sum(&self.own),
            cells_sum(&self.held),
            cells_sum(&self.stream),
        ]
    }
}

pub(crate) fn cells_sum(c: &Cells) -> u64 {
    c.iter().map(|x| x[0] + x[1]).sum()
}

pub(crate) const PSI_BUCKETS: usize = 100;

/// Per app: the spans of the last launch stream loaded and the worker's queue for them.
pub(crate) type StreamMemo = Vec<Option<(Vec<appflow_core::preload::FileSpan>, StreamQueue)>>;
/// A launch-stream queue: (chunk, bucket, pages) in order.
pub(crate) type StreamQueue = Vec<(usize, usize, u64)>;

/// The simulated phone running one policy.
pub struct Sim<'a> {
    pub(crate) dev: &'a Device,
    pub(crate) pol: Policy,
    pub(crate) cfg: &'a SimConfig,
    pub(crate) models: &'a [AppModel],
    pub(crate) st: Vec<AppState>,
    pub(crate) now_us: u64,
    pub(crate) fg: Option<usize>,
    pub(crate) launching: Option<usize>,
    pub(crate) lru: Vec<usize>,
    /// Each app's position in `lru`.
    pub(crate) lru_pos: Vec<usize>,
    /// The first `clear_file` apps of `lru` hold no page cache (no cell of
    /// any holder, no other file cache), and the first `clear_anon` no
    /// resident anonymous memory. Reclaim walks the LRU from its oldest
    /// app, and after a while the oldest apps are the ones it emptied: it
    /// starts past them. Every gain of an app's pages pulls the bound back
    /// to the app ([`Sim::gain_file`], [`Sim::gain_anon`]); the walks push
    /// it forward past the apps they find empty.
    pub(crate) clear_file: usize,
    pub(crate) clear_anon: usize,
    /// Some switch's prepaging has left pages it did not use (an app's
    /// `unused_anon` or `other_file`). Until then every app has none, and
    /// reclaim's first pass over them (the inactive list's tail) is skipped:
    /// it would take nothing. Policies that never prepage never set it.
    pub(crate) prepage_leftovers: bool,
    // memory totals, pages
    pub(crate) dram_pages: u64,
    pub(crate) reserved_pages: u64,
    pub(crate) anon_total: u64,
    pub(crate) file_total: u64,
    pub(crate) zram_stored: u64,
    pub(crate) swap_used: u64,
    pub(crate) zram_cap: u64,
    pub(crate) swap_cap: u64,
    // kernel
    pub(crate) kswapd_on: bool,
    /// The reclaim mode the scheduler set (swappiness 0 in efficiency-first).
    pub(crate) mode: ReclaimMode,
    /// Pages allocated since boot (the scheduler's n_alloc counter).
    pub(crate) alloc_counter: u64,
    pub(crate) blocked: bool,
    pub(crate) last_kill_us: Option<u64>,
    /// Android 15's lmkd between wakeups (the stock baseline's killer).
    pub(crate) lmkd: crate::android::Lmkd,
    pub(crate) lmkd_props: crate::android::LmkdProps,
    pub(crate) am_props: crate::android::AmProps,
    /// CachedAppOptimizer's compaction thread: the apps it is paging out,
    /// in order, with the pages left of each, and when it last ran.
    pub(crate) compacting: std::collections::VecDeque<(usize, u64)>,
    pub(crate) compact_clock_us: u64,
    /// When it next reads the adj classes.
    pub(crate) compact_scan_us: u64,
    pub(crate) psi_some: [f64; PSI_BUCKETS],
    pub(crate) psi_full: [f64; PSI_BUCKETS],
    pub(crate) psi_bucket: u64,
    /// The PSI bucket of the newest stall added, if any since the last
    /// reset: buckets after it hold none (they were zeroed as the clock
    /// entered them), which lets [`Sim::psi`] skip a window with no stall.
    pub(crate) psi_last_bucket: Option<u64>,
    /// Bumped at every change of the PSI buckets (a stall added, the
    /// clock entering a new bucket, a reset).
    pub(crate) psi_version: u64,
    /// The last stall shares computed, per window (the tick's 10 s and
    /// lmkd's 1 s): (version, buckets, some, full). Between changes of the
    /// buckets, [`Sim::psi`] is the same sum.
    pub(crate) psi_memo: std::cell::Cell<[(u64, usize, f64, f64); 2]>,
    /// The zram pool of the last [`Sim::zram_pool`]: (stored pages, pool pages).
    pub(crate) zram_pool_memo: std::cell::Cell<(u64, u64)>,
    /// Cumulative `some` stall, µs (PSI's `total=`; never reset).
    pub(crate) psi_some_total_us: u64,
    /// PMR: pages in kshrinkd's victim list.
    pub(crate) pmr_victims: u64,
    /// kswapd's batch above the low watermark under the re-fault kernel
    /// variant, pages (the step the re-fault controller sets).
    pub(crate) kswapd_batch_pages: u64,
    /// Ariadne: zram pages by hotness class, all apps.
    pub(crate) zram_cls: [u64; 3],
    // user space
    /// ASAP: the prepaging job of the switching app.
    pub(crate) prepage_job: Option<PrepageJob>,
    /// Boxed: it is taken out and put back at every record it applies.
    sched: Option<Box<Scheduler>>,
    next_tick_us: u64,
    /// CPU the rebalancing page-out may use in the current tick, ms.
    pub(crate) rebalance_budget_ms: f64,
    /// CPU time of the scheduler's page-out not yet run, ms, on a device
    /// whose launch shares its cores with it (`Device::cpu_budget_cores`).
    pub(crate) daemon_cpu_debt_ms: f64,
    pub(crate) next_touch_us: u64,
    /// The scheduler paused the worker's touching (a launch is in progress).
    pub(crate) touch_paused: bool,
    next_pid: u32,
    pub(crate) name_idx: BTreeMap<String, usize>,
    /// The app each pid since the last reset was given to, by pid −
    /// `pid_base` (pids are handed out in order and never reused): the
    /// scheduler names processes by pid at every page-out, many times a
    /// rebalancing tick. Lookups check that the app is alive with that pid.
    pub(crate) pid_apps: Vec<usize>,
    pub(crate) pid_base: u32,
    /// Per app, the last standby set loaded and its cells: the scheduler
    /// reloads the same set after every launch, and mapping its spans to
    /// cells is the simulator's costliest step.
    pub(crate) touch_memo: Vec<Option<(Vec<appflow_core::preload::FileSpan>, Cells)>>,
    /// Per app, the last launch stream loaded and the worker's queue for
    /// it: the scheduler hands the same stream at every launch of an app
    /// (until the profiles or the cutoff change), and mapping its files to
    /// cells costs a lookup per file.
    pub(crate) stream_memo: StreamMemo,
    /// The process list of the last tick, reused (its strings keep their buffers).
    procs_buf: Vec<ProcInfo>,
    /// Read rates looked up once.
    pub(crate) rates: crate::launch::Rates,
    /// Pages of every app's standby set held (the sum of the apps' `Held`
    /// sums), kept as they change: the preload peak reads it every step.
    pub(crate) held_total: u64,
    /// Pages of every app's launch streams (the apps' `Stream` sums).
    pub(crate) stream_total: u64,
    /// Apps whose launch-stream queue may be non-empty, ascending: the
    /// worker streams only for them.
    pub(crate) stream_apps: Vec<usize>,
    /// Apps whose state may differ from a fresh device's since the last
    /// reset: launched, or handed a standby set, a launch stream or a
    /// prepaging job. Every other path changes only apps that hold pages or
    /// run, so the others are as `reset` left them and need no reset or
    /// accounting walk (debug builds check this at every reset).
    pub(crate) touched: Vec<bool>,
    /// Apps that may still grow (alive, below their growth target),
    /// ascending: the idle loop grows only them.
    pub(crate) growing: Vec<usize>,
    /// Apps with a standby target whose held pages may differ from it,
    /// ascending: the touch pass walks only them.
    pub(crate) touch_pending: Vec<usize>,
    /// A process came or went (a cold launch, a kill, a reset) since the
    /// latest tick that was given the process list or its absence. While
    /// none did, a tick that reads no footprint is the scheduler's
    /// [`Scheduler::tick_same_procs`], without the list.
    pub(crate) procs_ids_changed: bool,
    /// The latest tick was given the process list (not an empty one).
    last_tick_listed: bool,
    /// The tick times of quiet steps offered to the scheduler (reused).
    quiet_times: Vec<u64>,
    /// Counters of the run.
    pub counters: Counters,
    /// Kill log: (time µs, app, reason).
    pub kill_log: Vec<(u64, usize, Reason)>,
}

impl<'a> Sim<'a> {
    /// A fresh device with nothing running. `installed` marks the apps the
    /// workload uses (the scheduler plans over their profiles).
    pub fn new(
        dev: &'a Device,
        pol: Policy,
        cfg: &'a SimConfig,
        models: &'a [AppModel],
        installed: &[bool],
    ) -> Self {
        let n = models.len();
        let sched = pol.def.has_user_space().then(|| {
            let names: Vec<String> = (0..n)
                .filter(|&i| installed[i])
                .map(|i| models[i].spec.name.clone())
                .collect();
            let mut s = Scheduler::new(
                cfg.scheduler_config(pol.def),
                dev.read_curve.clone(),
                &names,
                &[],
            );
            let profiles: Vec<LaunchProfile> = (0..n)
                .filter(|&i| installed[i])
                .map(|i| models[i].profile.clone())
                .collect();
            s.set_profiles(profiles);
            s.ensure_plan(0, 0);
            Box::new(s)
        });
        Sim {
            dev,
            pol,
            cfg,
            models,
            st: vec![AppState::default(); n],
            now_us: 0,
            fg: None,
            launching: None,
            lru: (0..n).collect(),
            lru_pos: (0..n).collect(),
            clear_file: 0,
            clear_anon: 0,
            prepage_leftovers: false,
            dram_pages: dev.dram_bytes / PAGE_BYTES,
            reserved_pages: dev.reserved_bytes / PAGE_BYTES,
            anon_total: 0,
            file_total: 0,
            zram_stored: 0,
            swap_used: 0,
            zram_cap: dev.zram_disksize_bytes / PAGE_BYTES,
            swap_cap: dev.swap_bytes / PAGE_BYTES,
            kswapd_on: false,
            mode: ReclaimMode::Normal,
            alloc_counter: 0,
            blocked: false,
            last_kill_us: None,
            lmkd: crate::android::Lmkd::new(&crate::android::LmkdProps::pixel()),
            lmkd_props: crate::android::LmkdProps::pixel(),
            am_props: crate::android::AmProps::default(),
            compacting: std::collections::VecDeque::new(),
            compact_clock_us: 0,
            compact_scan_us: 0,
            psi_some: [0.0; PSI_BUCKETS],
            psi_full: [0.0; PSI_BUCKETS],
            psi_bucket: 0,
            psi_last_bucket: None,
            psi_version: 0,
            psi_memo: std::cell::Cell::new([(u64::MAX, 0, 0.0, 0.0); 2]),
            zram_pool_memo: std::cell::Cell::new((0, 0)),
            psi_some_total_us: 0,
            pmr_victims: 0,
            kswapd_batch_pages: cfg
                .refault_batch_pages
                .unwrap_or((dev.wmark_high_bytes - dev.wmark_low_bytes) / PAGE_BYTES),
            zram_cls: [0; 3],
            prepage_job: None,
            sched,
            next_tick_us: 0,
            rebalance_budget_ms: 0.0,
            daemon_cpu_debt_ms: 0.0,
            next_touch_us: 0,
            touch_paused: false,
            next_pid: 1000,
            pid_apps: Vec::new(),
            pid_base: 1000,
            name_idx: models
                .iter()
                .enumerate()
                .map(|(i, m)| (m.spec.name.clone(), i))
                .collect(),
            counters: Counters::default(),
            kill_log: Vec::new(),
            touch_memo: vec![None; models.len()],
            stream_memo: vec![None; models.len()],
            procs_buf: Vec::new(),
            rates: crate::launch::Rates::new(dev, models, cfg.preload.hot_segment_bytes),
            held_total: 0,
            stream_total: 0,
            stream_apps: Vec::new(),
            touched: vec![false; n],
            growing: Vec::new(),
            touch_pending: Vec::new(),
            procs_ids_changed: true,
            last_tick_listed: false,
            quiet_times: Vec::new(),
        }
    }

    // ------------------------------------------------------------------
    // State seen from outside
    // ------------------------------------------------------------------

    /// Current simulated time, µs.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// The foreground app, if any.
    pub fn foreground(&self) -> Option<usize> {
        self.fg
    }

    /// Whether an app is alive.
    pub fn alive(&self, app: usize) -> bool {
        self.st[app].alive
    }

    /// Background apps alive (not the foreground one).
    pub fn alive_background(&self) -> u64 {
        self.st
            .iter()
            .enumerate()
            .filter(|(i, s)| s.alive && Some(*i) != self.fg)
            .count() as u64
    }

    /// The scheduler's cutoff plan, when the policy has the selective preloader.
    pub fn sfp_plan(&self) -> Option<&CutoffPlan> {
        self.sched.as_deref().and_then(Scheduler::plan)
    }

    /// Simulated memory state in MiB (for reports and debugging).
    pub fn memory_mib(&self) -> BTreeMap<&'static str, f64> {
        let m = |p: u64| (p * PAGE_BYTES) as f64 / MIB as f64;
        let mut out = BTreeMap::new();
        out.insert("free", m(self.free_pages()));
        out.insert("anon", m(self.anon_total));
        out.insert("file", m(self.file_total));
        out.insert("zram_stored", m(self.zram_stored));
        out.insert("swap_used", m(self.swap_used));
        out
    }

    /// Recomputes app `a`'s holder sums from its cells after a bulk move
    /// between holders, keeping the held total in step.
    pub(crate) fn fix_sums(&mut self, a: usize) {
        let s = &mut self.st[a];
        let sums = s.cell_sums();
        self.held_total =
            self.held_total - s.sum[Holder::Held as usize] + sums[Holder::Held as usize];
        self.stream_total =
            self.stream_total - s.sum[Holder::Stream as usize] + sums[Holder::Stream as usize];
        s.sum = sums;
    }

    /// Marks app `a` as possibly changed since the last reset.
    pub(crate) fn mark_touched(&mut self, a: usize) {
        self.touched[a] = true;
    }

    pub(crate) fn touch_lru(&mut self, a: usize) {
        self.st[a].last_used_us = self.now_us;
        let p = self.lru_pos[a];
        self.lru.remove(p);
        self.lru.push(a);
        for (i, &b) in self.lru.iter().enumerate().skip(p) {
            self.lru_pos[b] = i;
        }
        // The apps after `a` in the cleared prefix move up one place; `a`
        // leaves it.
        if p < self.clear_file {
            self.clear_file -= 1;
        }
        if p < self.clear_anon {
            self.clear_anon -= 1;
        }
    }

    /// App `a` gains page cache: the prefix of apps without any ends
    /// before it.
    pub(crate) fn gain_file(&mut self, a: usize) {
        self.clear_file = self.clear_file.min(self.lru_pos[a]);
    }

    /// App `a` gains resident anonymous memory.
    pub(crate) fn gain_anon(&mut self, a: usize) {
        self.clear_anon = self.clear_anon.min(self.lru_pos[a]);
    }

    /// Debug builds check the LRU positions and the cleared prefixes
    /// before every walk that trusts them.
    pub(crate) fn debug_check_lru(&self) {
        if cfg!(debug_assertions) {
            for (i, &a) in self.lru.iter().enumerate() {
                assert_eq!(self.lru_pos[a], i, "LRU position of app {a}");
                let s = &self.st[a];
                if i < self.clear_file {
                    assert!(
                        s.sum == [0; 3] && s.other_file == 0,
                        "app {a} in the file-clear prefix holds page cache"
                    );
                }
                if i < self.clear_anon {
                    assert_eq!(s.anon_res, 0, "app {a} in the anon-clear prefix");
                }
            }
        }
    }

    // ------------------------------------------------------------------
    // Driving the scheduler
    // ------------------------------------------------------------------

    /// The domain as the scheduler sees it (what the daemon reads from a
    /// memory cgroup or /proc/meminfo).
    fn sample(&self) -> DomainSample {
        let (some, _) = self.psi(PSI_BUCKETS);
        DomainSample {
            now_ms: self.now_us / 1000,
            total_bytes: self.dev.dram_bytes,
            avail_bytes: self.avail_pages() * PAGE_BYTES,
            anon_bytes: self.anon_total * PAGE_BYTES,
            file_bytes: self.file_total * PAGE_BYTES,
            alloc_counter: self.alloc_counter,
            swap_total_bytes: (self.zram_cap + self.swap_cap) * PAGE_BYTES,
            swap_free_bytes: self.swap_room() * PAGE_BYTES,
            psi_some_avg10: Some(some * 100.0),
            psi_some_total_us: Some(self.psi_some_total_us),
            refault_pages: self.counters.refault_file_pages + self.counters.refault_anon_pages,
            steal_pages: self.counters.evicted_file_pages + self.counters.evicted_anon_pages,
            steal_kswapd_pages: self.counters.kswapd_steal_pages,
            swapped_ram_share: Some(self.swapped_ram_share()),
        }
    }

    /// The apps' processes as the scheduler sees them (one per app).
    fn procs(&self, out: &mut Vec<ProcInfo>) {
        let mut n = 0;
        for (i, (a, adj)) in self.oom_adjs().enumerate() {
            n = i + 1;
            let s = &self.st[a];
            let name = &self.models[a].spec.name;
            let footprint =
                (s.anon_total() + s.sum[Holder::Own as usize] + s.other_file) * PAGE_BYTES;
            if i == out.len() {
                out.push(ProcInfo {
                    pid: 0,
                    start_time: 0,
                    comm: String::new(),
                    app: None,
                    oom_score_adj: 0,
                    footprint_bytes: None,
                    ..Default::default()
                });
            }
            let p = &mut out[i];
            // A slot that listed this process last time has its names
            // already (the simulator never reuses a pid): only the numbers
            // change, and most ticks list the processes of the last one.
            if p.pid != s.pid || p.app.is_none() {
                p.comm.clone_from(name);
                match &mut p.app {
                    Some(app) => app.clone_from(name),
                    None => p.app = Some(name.clone()),
                }
            }
            p.pid = s.pid;
            p.start_time = s.start_ms;
            p.oom_score_adj = adj;
            p.footprint_bytes = Some(footprint);
            // smaps_rollup's Anonymous and Swap (zram and flash swap).
            p.anon_bytes = Some(s.anon_res * PAGE_BYTES);
            p.swap_bytes = Some((s.anon_zram + s.anon_swap) * PAGE_BYTES);
        }
        out.truncate(n);
    }

    /// Applies one record to the scheduler with this device as its mechanisms.
    fn apply(&mut self, rec: &Record) {
        self.apply_with(|sched, sim| {
            // The scheduler refuses nothing the simulator sends (catalogue names).
            let _ = sched.apply(rec, sim);
        });
    }

    /// Runs `f` on the scheduler with this device as its mechanisms, and
    /// takes the run's counters from it.
    fn apply_with(&mut self, f: impl FnOnce(&mut Scheduler, &mut Self)) {
        let Some(mut sched) = self.sched.take() else {
            return;
        };
        let mode = sched.mode();
        f(&mut sched, self);
        if sched.mode() != mode {
            // A record switches the mode at most once (one controller step
            // per tick, none at an event), and the scheduler lives as long
            // as the run: its count is the run's.
            self.counters.amr_switches = sched.stats.switches_total();
        }
        self.counters.refault_windows = sched.stats.refault_windows;
        self.counters.reclaim_step_changes = sched.stats.reclaim_step_changes;
        self.counters.reclaim_step = sched.stats.reclaim_step;
        let cfg = sched.config();
        if cfg.preload_enabled && cfg.policy.switch == SwitchStrategy::Prepage {
            let st = &sched.stats;
            self.counters.prepage = Some(PrepageCounts {
                switches: st.prepage_calls,
                requested_bytes: st.prepage_requested_bytes,
                bounded: st.prepage_bounded,
                bounded_out_bytes: st.prepage_bounded_bytes,
                feedback: sched.switch_feedback(),
            });
        }
        sched.take_decisions();
        self.sched = Some(sched);
    }

    /// An app event for the scheduler.
    fn event(&mut self, event: EventKind, a: usize) {
        if self.sched.is_none() {
            return;
        }
        let rec = Record::Event {
            now_ms: self.now_us / 1000,
            event,
            app: self.models[a].spec.name.clone(),
            proc_id: None,
        };
        self.apply(&rec);
    }

    /// One scheduler tick. Processes are listed only when the scheduler
    /// will look at them (rebalancing, or a kill considered), as the daemon
    /// reads footprints only then.
    fn sched_tick(&mut self) {
        if self.sched.is_none() {
            return;
        }
        self.rebalance_budget_ms = self.cfg.reclaim.tick_ms as f64;
        if self.launching.is_none() {
            // No launch competes: the page-out runs alone, on one core of
            // the budget (its debt is in wall time on the whole budget).
            if let Some(c) = self.dev.cpu_budget_cores {
                let paid = self.cfg.reclaim.tick_ms as f64 * c.min(1.0) / c;
                self.daemon_cpu_debt_ms = (self.daemon_cpu_debt_ms - paid).max(0.0);
            }
        }
        let sample = self.sample();
        // No process came or went since the latest tick, and this one would
        // be given the list, or not, as that one was (a tick that reads no
        // more than who the processes are is given the list only in a mode
        // other than normal): the scheduler takes the tick without a new
        // list when it does not read their footprints.
        if !self.procs_ids_changed {
            let listed = self.last_tick_listed;
            let mut same = false;
            self.apply_with(|sched, sim| {
                same = listed == (sched.mode() != ReclaimMode::Normal)
                    && sched.tick_same_procs(&sample, sample.now_ms, sim);
            });
            if same {
                return;
            }
        }
        let mut procs = std::mem::take(&mut self.procs_buf);
        let Some(sched) = &self.sched else {
            return;
        };
        self.last_tick_listed = sched.wants_procs(&sample);
        if self.last_tick_listed {
            self.procs(&mut procs);
        } else {
            procs.clear();
        }
        self.procs_ids_changed = false;
        let rec = Record::Tick {
            sample,
            now_unix_ms: self.now_us / 1000,
            procs,
        };
        self.apply(&rec);
        if let Record::Tick { procs, .. } = rec {
            self.procs_buf = procs;
        }
    }

    /// Runs every scheduler tick due by now.
    pub(crate) fn sched_ticks(&mut self) {
        let tick_us = self.cfg.reclaim.tick_ms * 1000;
        while self.now_us >= self.next_tick_us {
            self.next_tick_us += tick_us;
            self.sched_tick();
        }
    }

    fn scheduler_busy(&self) -> bool {
        self.sched
            .as_ref()
            .is_some_and(|s| s.mode() != ReclaimMode::Normal || s.any_launching())
    }

    // ------------------------------------------------------------------
    // The user
    // ------------------------------------------------------------------

    /// Launches `a` (brings it to the foreground) and runs until it is
    /// ready. A cold launch is a `launch` event (an exec); bringing back a
    /// running app is a `foreground` switch. Returns the record.
    pub fn launch(&mut self, a: usize) -> LaunchRecord {
        self.mark_touched(a);
        let kind = self.classify(a);
        let start = self.now_us;
        let relaunch_after_kill =
            kind == LaunchKind::Cold && self.st[a].ran_before && self.st[a].killed;
        if let Some(prev) = self.fg {
            self.touch_lru(prev);
            if prev != a {
                self.event(EventKind::Background, prev);
            }
        }
        self.fg = Some(a);
        self.launching = Some(a);
        self.touch_lru(a);
        self.st[a].window = SwitchObservation::default();
        if kind == LaunchKind::Cold {
            let pid = self.next_pid;
            self.next_pid += 1;
            let now_ms = self.now_us / 1000;
            let s = &mut self.st[a];
            s.alive = true;
            s.pid = pid;
            self.procs_ids_changed = true;
            debug_assert_eq!(pid - self.pid_base, self.pid_apps.len() as u32);
            self.pid_apps.push(a);
            s.start_ms = now_ms;
            s.killed = false;
            self.event(EventKind::Launch, a);
        } else {
            self.event(EventKind::Foreground, a);
        }
        let end_us = self.run_launch(a, kind, start);
        if kind == LaunchKind::Cold {
            self.event(EventKind::Launched, a);
        }
        // Whatever the worker still holds for the launch is the app's now;
        // switch prepaging ends with the switch.
        self.release_stream(a);
        self.end_prepage(a);
        self.launching = None;
        self.finish_launch(a, kind);
        LaunchRecord {
            app: a,
            kind,
            relaunch_after_kill,
            latency_ms: (end_us - start) as f64 / 1000.0,
            at_us: start,
        }
    }

    /// Leaves the foreground app in use (or the home screen) for `dur_us`.
    pub fn idle(&mut self, dur_us: u64) {
        let end = self.now_us + dur_us;
        while self.now_us < end {
            let busy = self.mode != ReclaimMode::Normal || self.kswapd_on || self.scheduler_busy();
            if busy && self.skip_quiet_steps(end) {
                continue;
            }
            let step = if busy {
                (self.cfg.reclaim.tick_ms * 1000).min(end - self.now_us)
            } else {
                self.idle_step_us().min(end - self.now_us)
            };
            self.now_us += step;
            let growing = self.grow();
            self.run_kswapd(step as f64 / 1000.0);
            if self.now_us >= self.next_touch_us {
                self.touch_standby(None);
                self.next_touch_us = self.now_us + self.cfg.preload.touch_interval_ms * 1000;
            }
            if !busy {
                // Coarse steps: one tick now, with the rate over the whole step.
                self.next_tick_us = self.now_us;
            }
            self.sched_ticks();
            self.kernel_kill_check();
            let quiet = !growing
                && !self.kswapd_on
                && self.mode == ReclaimMode::Normal
                && !self.scheduler_busy();
            if quiet && !self.blocked {
                // Nothing changes until `end` (touches would find the
                // standby set resident) but Android 15's freezes and
                // compactions, which need no step of their own.
                for _ in 0..COMPACTIONS_PER_JUMP {
                    match self.next_compaction_us() {
                        Some(t) if t > self.now_us && t <= end => {
                            self.now_us = t;
                            self.cached_app_optimizer(true);
                        }
                        _ => break,
                    }
                }
                self.now_us = end;
                self.next_tick_us = end;
                self.sched_ticks();
            }
        }
        self.roll_psi();
    }

    /// Busy idle steps (one scheduler tick each, at the step's end) in which
    /// nothing but the clock moves: no app grows, kswapd sleeps, no touch
    /// is due, no process came or went, lmkd sees no pressure, and the
    /// scheduler decides and does nothing ([`Scheduler::quiet_ticks`]; a
    /// rebalancing with nothing to page out waits out its time limit so).
    /// Takes as many of them as the scheduler does, in one go; returns
    /// whether it took any. Every step and tick not taken is made as
    /// before.
    fn skip_quiet_steps(&mut self, end: u64) -> bool {
        let tick_us = self.cfg.reclaim.tick_ms * 1000;
        let Some(sched) = &self.sched else {
            return false;
        };
        let st = &self.st;
        let still = !self.procs_ids_changed
            && !self.kswapd_on
            && !self.blocked
            && self.pol.def.kernel != KernelVariant::Pmr
            // One tick per step, at its end.
            && self.next_tick_us > self.now_us
            && self.next_tick_us <= self.now_us + tick_us
            // The tick would be given the process list again, or again not.
            && self.last_tick_listed == (sched.mode() != ReclaimMode::Normal)
            && (self.dev.cpu_budget_cores.is_none() || self.daemon_cpu_debt_ms == 0.0)
            && !self.growing.iter().any(|&a| {
                st[a].alive && st[a].grow_target > 0 && st[a].grown < st[a].grow_target
            })
            && !(self.pol.def.killer == KillerStrategy::Kernel && self.lmkd_pressure());
        if !still {
            return false;
        }
        let mut times = std::mem::take(&mut self.quiet_times);
        times.clear();
        let mut t = self.now_us + tick_us;
        while t <= end && t < self.next_touch_us && times.len() < 4096 {
            times.push(t / 1000);
            t += tick_us;
        }
        // Each of those ticks would be given this sample but for its time,
        // and a fresh page-out budget.
        let sample = self.sample();
        self.rebalance_budget_ms = self.cfg.reclaim.tick_ms as f64;
        let mut taken = 0;
        if !times.is_empty() {
            self.apply_with(|sched, sim| {
                taken = sched.quiet_ticks(&sample, &times, sim);
            });
        }
        self.quiet_times = times;
        let skipped = taken as u64 * tick_us;
        self.now_us += skipped;
        self.next_tick_us += skipped;
        taken > 0
    }

    /// An idle step while nothing is busy: [`IDLE_STEP_US`], or finer while
    /// an app grows, a [`GROWTH_STEPS`]th of its growth span (at least a
    /// scheduler tick). The daemon ticks every tick whatever the phone
    /// does; a step longer than the growth would hand its scheduler the
    /// growth as one slow average and too few ticks to see memory fall
    /// below its thresholds (the AppFlow paper Algorithm 1 counts calm
    /// ticks before it rebalances ahead of a burst).
    fn idle_step_us(&self) -> u64 {
        let tick = self.cfg.reclaim.tick_ms * 1000;
        self.growing
            .iter()
            .copied()
            .filter(|&a| {
                let s = &self.st[a];
                s.alive && s.grow_target > 0 && s.grown < s.grow_target
            })
            .map(|a| {
                let span = self.models[a]
                    .spec
                    .growth_ms
                    .map_or(GROWTH_US, |ms| ms * 1000);
                (span / GROWTH_STEPS).max(tick)
            })
            .fold(IDLE_STEP_US, u64::min)
    }

    /// Background (and foreground) footprint growth. Returns whether any app still grows.
    fn grow(&mut self) -> bool {
        let mut any = false;
        // Apps that are not growing are as if skipped (they were, in a walk
        // of every app); they leave the list.
        let st = &self.st;
        self.growing
            .retain(|&a| st[a].alive && st[a].grow_target > 0 && st[a].grown < st[a].grow_target);
        for i in 0..self.growing.len() {
            let a = self.growing[i];
            let s = &self.st[a];
            if !s.alive || s.grow_target == 0 || s.grown >= s.grow_target {
                continue;
            }
            any = true;
            let span_us = match self.models[a].spec.growth_ms {
                Some(ms) => (ms * 1000).max(1),
                None => GROWTH_US,
            };
            let el = self.now_us.saturating_sub(s.grow_start_us).min(span_us);
            let want = (s.grow_target as u128 * el as u128 / span_us as u128) as u64;
            let delta = want.saturating_sub(s.grown);
            if delta == 0 {
                continue;
            }
            let mut t = 10_000.0;
            let got = self.alloc(delta, &mut t, false);
            let s = &mut self.st[a];
            s.anon_res += got;
            s.grown += got;
            self.gain_anon(a);
            self.anon_total += got;
            if got < delta {
                // Could not grow: memory exhausted; the killer will act.
                self.blocked = true;
            }
        }
        any
    }

    /// Kills everything, drops every cache and empties swap (§6.1: "terminate
    /// all background apps and clear the file cache"). The clock keeps running.
    pub fn reset(&mut self) {
        for a in 0..self.st.len() {
            let launches = self.st[a].launches;
            let fresh = AppState {
                launches,
                ..AppState::default()
            };
            if std::mem::take(&mut self.touched[a]) {
                self.st[a] = fresh;
            } else {
                debug_assert!(self.st[a] == fresh, "untouched app {a} changed");
            }
        }
        self.anon_total = 0;
        self.file_total = 0;
        self.held_total = 0;
        self.stream_total = 0;
        self.stream_apps.clear();
        self.growing.clear();
        self.touch_pending.clear();
        self.procs_ids_changed = true;
        self.pid_apps.clear();
        self.pid_base = self.next_pid;
        self.zram_stored = 0;
        self.swap_used = 0;
        self.zram_cls = [0; 3];
        self.pmr_victims = 0;
        self.prepage_job = None;
        self.fg = None;
        self.launching = None;
        self.kswapd_on = false;
        self.mode = ReclaimMode::Normal;
        self.blocked = false;
        self.last_kill_us = None;
        self.lmkd = crate::android::Lmkd::new(&self.lmkd_props);
        self.compacting.clear();
        self.compact_clock_us = self.now_us;
        self.compact_scan_us = self.now_us;
        self.psi_some = [0.0; PSI_BUCKETS];
        self.psi_full = [0.0; PSI_BUCKETS];
        self.psi_last_bucket = None;
        self.psi_version += 1;
        if let Some(s) = self.sched.as_mut() {
            s.reset_state();
        }
        self.next_tick_us = self.now_us;
        self.next_touch_us = self.now_us;
        self.touch_paused = false;
    }

    /// Sends the foreground app to the background (home screen).
    pub fn go_home(&mut self) {
        if let Some(a) = self.fg.take() {
            self.touch_lru(a);
            self.event(EventKind::Background, a);
        }
    }
}

impl Mechanisms for Sim<'_> {
    fn preload(&mut self) -> &mut dyn appflow_core::mechanism::PreloadMechanism {
        self
    }
    fn reclaim(&mut self) -> &mut dyn appflow_core::mechanism::ReclaimMechanism {
        self
    }
    fn kill(&mut self) -> &mut dyn appflow_core::mechanism::KillMechanism {
        self
    }
}
