//! The AppFlow scheduler: the whole decision loop as one pure type.
//!
//! The daemon (`appflow-linux`) drives it from live observations of a real
//! kernel, the simulator (`appflow-sim`) from its kernel model; both go
//! through [`Scheduler::apply`] with the same [`Record`]s, and the scheduler
//! acts only through the mechanism traits ([`Mechs`]). It performs no I/O and
//! reads no clock: time comes in every record.
//!
//! | file | owns |
//! |---|---|
//! | this one | observations, events, process identity, the decision log, the loop |
//! | [`config`] | the scheduler's configuration (no file paths) |
//! | `preloading` | cutoff planning, standby upkeep, launch streams, launch timeouts (the AppFlow paper §4.1) |
//! | `reclaiming` | the mode controller's tick, page-out of background apps, cold-file drops (§4.2) |
//! | `killing` | the kill trigger, the candidates and the victim (§4.3) |
//! | `refaulting` | kswapd's reclaim step from re-faults and direct reclaim (the re-fault study §5) |
//! | `switching` | foreground windows, ASAP's switch prepaging, PMR's page-out ahead of bursts |
//! | `hotness` | Ariadne's cold marking of an app leaving the foreground (the Ariadne paper §4.2) |
//! | [`stats`] | counters of everything the scheduler did |
//!
//! Which modules run and with which strategy comes from the registered
//! [`Policy`](crate::policy::Policy).

pub mod config;
mod hotness;
mod killing;
mod preloading;
mod reclaiming;
mod refaulting;
pub mod stats;
mod switching;

use crate::mechanism::{KillMechanism, PreloadMechanism, ReclaimMechanism};
use crate::preload::{CutoffPlan, FileSpan};
use crate::prepage::FootprintTable;
use crate::profile::LaunchProfile;
use crate::reason::Reason;
use crate::reclaim::{ReclaimController, ReclaimMode};
use crate::storage::ThroughputCurve;
pub use config::SchedulerConfig;
pub use killing::{KillOutlook, OutlookEntry};
use serde::{Deserialize, Serialize};
pub use stats::Stats;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Standby sets per app, shared between the memo and the holds (cheap to
/// clone and to compare when unchanged).
type StandbySets = Arc<BTreeMap<String, Arc<Vec<FileSpan>>>>;

/// One sample of the domain's memory (raw counters; rates are derived here).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct DomainSample {
    /// Monotonic time, ms.
    pub now_ms: u64,
    /// The domain's memory (cgroup limit, MemTotal, or the device's DRAM), bytes.
    pub total_bytes: u64,
    /// M_aval: memory reclaim can hand out soon, bytes.
    pub avail_bytes: u64,
    /// Anonymous memory in the domain, bytes.
    pub anon_bytes: u64,
    /// Page cache in the domain, bytes.
    pub file_bytes: u64,
    /// Cumulative allocation counter (pgalloc sum, or a cgroup's pgfault), pages.
    pub alloc_counter: u64,
    /// Swap the domain can page out to (zram and flash), bytes.
    pub swap_total_bytes: u64,
    /// Of which free, bytes.
    pub swap_free_bytes: u64,
    /// PSI memory "some" avg10, percent (None when PSI is unavailable).
    pub psi_some_avg10: Option<f64>,
    /// PSI memory "some" cumulative stall, µs (the file's `total=`; None
    /// when PSI is unavailable). The killer derives the stall over its
    /// own window from two samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_some_total_us: Option<u64>,
    /// Cumulative pages faulted back after eviction
    /// (`workingset_refault_anon + workingset_refault_file`).
    #[serde(default)]
    pub refault_pages: u64,
    /// Cumulative pages reclaimed by anyone (`pgsteal_anon + pgsteal_file`).
    #[serde(default)]
    pub steal_pages: u64,
    /// Of which by kswapd (`pgsteal_kswapd`); the rest is direct reclaim
    /// (and a memory cgroup's reclaim at its limit).
    #[serde(default)]
    pub steal_kswapd_pages: u64,
    /// The domain's memory per byte in swap, in [0, 1]: what a swapped
    /// byte gives back to M_aval when its app is killed. zram's compressed
    /// data over the bytes swapped when the domain holds zram's pool (a
    /// whole device); 0 when it does not (zram's pool is charged to no
    /// memory cgroup) and for swap on a disk. None: unknown, a swapped byte
    /// counts whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swapped_ram_share: Option<f64>,
}

impl DomainSample {
    /// The reclaim counters the re-fault controller reads.
    pub fn refault_counters(&self) -> crate::refault::RefaultCounters {
        crate::refault::RefaultCounters {
            refault_pages: self.refault_pages,
            steal_pages: self.steal_pages,
            steal_kswapd_pages: self.steal_kswapd_pages,
        }
    }
}

/// A process instance: its PID and its start time (clock ticks since boot).
/// A PID alone is never an identity: it is reused once the process exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcId {
    /// Process id.
    pub pid: u32,
    /// Start time, clock ticks since boot (`/proc/PID/stat` field 22).
    pub start_time: u64,
}

/// One process of the domain as observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProcInfo {
    /// Process id.
    pub pid: u32,
    /// Start time (clock ticks since boot): identity across PID reuse.
    pub start_time: u64,
    /// Kernel task name.
    pub comm: String,
    /// The app it belongs to, if recognised.
    pub app: Option<String>,
    /// oom_score_adj.
    pub oom_score_adj: i32,
    /// Resident + swapped bytes (read only when the killer needs it).
    pub footprint_bytes: Option<u64>,
    /// Resident anonymous bytes (`Anonymous:` of smaps_rollup; read with
    /// the footprint): what a page-out could move to swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon_bytes: Option<u64>,
    /// Swapped-out anonymous bytes (`Swap:`; read with the footprint).
    /// Resident and swapped anonymous memory is what a kill frees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_bytes: Option<u64>,
    /// The driver found it protected by where it runs (the daemon's
    /// `[killer] protected_cgroups`): never killed nor paged out, like a
    /// protected name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub protected: bool,
    /// How long the process has been quiet, ms, when the driver measures
    /// it (the daemon, from /proc/PID/stat: no more CPU than the readiness
    /// rule's quiet share, `detect.quiet_cpu_permille`). A process idle for
    /// [`IDLE_BACKGROUND_MS`] is background by activity (see
    /// `Scheduler::is_foreground_proc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
}

/// A process quiet this long is in the background by activity, where
/// nothing else says which app is in front (a desktop Linux machine gives
/// every process the same `oom_score_adj`, and no launcher names the
/// foreground): 1 s, the readiness rule's quiet window (`detect.quiet_ms`:
/// a pause that long ends a launch), by the signal launch detection
/// already reads (CPU at most the readiness rule's quiet share). It was
/// 10 s (the debounce after which Android freezes a cached app); on the
/// deployment harness background processes started 5 s before an
/// unannounced launch were never idle that long, so rebalancing had
/// nothing to page out ahead of the launch; at 2 s the page-out began late
/// enough that in 3 of 5 launches of the ML app it had not finished when
/// the launch began (docs/daemon.md, "Background apps"). Paging out is
/// reversible and happens only below M_F.
pub const IDLE_BACKGROUND_MS: u64 = 1_000;

impl ProcInfo {
    /// Its identity.
    pub fn id(&self) -> ProcId {
        ProcId {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

/// An app lifecycle event (from a launcher's notification, from kernel
/// process events, or from the simulator's workload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The app is being exec'ed: stream and protect its launch files.
    Launch,
    /// The app is ready: release the protection.
    Launched,
    /// The app is in the foreground.
    Foreground,
    /// The app went to the background.
    Background,
    /// The app exited.
    Exit,
}

impl EventKind {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Launch => "launch",
            EventKind::Launched => "launched",
            EventKind::Foreground => "foreground",
            EventKind::Background => "background",
            EventKind::Exit => "exit",
        }
    }

    /// Every kind.
    pub const ALL: [EventKind; 5] = [
        EventKind::Launch,
        EventKind::Launched,
        EventKind::Foreground,
        EventKind::Background,
        EventKind::Exit,
    ];
}

/// One input of the scheduler. A run of the scheduler is a sequence of
/// these; the daemon can log them and any run can be replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// A tick: the domain's sample, its processes, the wall clock.
    Tick {
        /// The domain.
        sample: DomainSample,
        /// Wall-clock time, Unix ms (launch likelihood only).
        now_unix_ms: u64,
        /// The domain's processes (footprints read when a kill was wanted).
        procs: Vec<ProcInfo>,
    },
    /// An app event.
    Event {
        /// Monotonic ms.
        now_ms: u64,
        /// What happened.
        event: EventKind,
        /// To which app.
        app: String,
        /// Its process, when announced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proc_id: Option<ProcId>,
    },
}

/// A mark on a decision, for timelines (traces, plots).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "mark", rename_all = "snake_case")]
pub enum Mark {
    /// The reclaim mode changed.
    ModeSwitch {
        /// From.
        from: ReclaimMode,
        /// To.
        to: ReclaimMode,
    },
    /// A launch began.
    LaunchBegin {
        /// App.
        app: String,
    },
    /// A launch ended (ready, timed out, or exited).
    LaunchEnd {
        /// App.
        app: String,
    },
    /// A process group was killed.
    Kill {
        /// App.
        app: String,
        /// Its lowest pid.
        pid: u32,
        /// ΔM.
        net_freed_bytes: i64,
    },
}

/// One decision, with its inputs in words (shown by `appflow status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Monotonic ms.
    pub at_ms: u64,
    /// "reclaim", "kill", "preload", "event" or "error" (a mechanism failed).
    pub kind: &'static str,
    /// The core's reason, if the decision has one.
    pub reason: Option<Reason>,
    /// Stable code of the reason.
    pub code: Option<u16>,
    /// Human-readable detail with the inputs.
    pub detail: String,
    /// Timeline mark, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark: Option<Mark>,
    /// For a kill: why the victim won, with the candidates it was ranked
    /// against (their predicted reuse, relaunch cost and memory freed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Box<crate::killer::KillExplanation>>,
}

/// Everything the scheduler acts through. One object may implement all
/// three mechanisms (the simulator's kernel model does); [`Mechs`] bundles
/// three separate ones (the daemon's worker, reclaimer and killer).
pub trait Mechanisms {
    /// Preloading.
    fn preload(&mut self) -> &mut dyn PreloadMechanism;
    /// Reclaim modes and page-out.
    fn reclaim(&mut self) -> &mut dyn ReclaimMechanism;
    /// Kills.
    fn kill(&mut self) -> &mut dyn KillMechanism;
}

/// Three separate mechanisms as one [`Mechanisms`].
pub struct Mechs<'a> {
    /// Preloading.
    pub preload: &'a mut dyn PreloadMechanism,
    /// Reclaim modes and page-out.
    pub reclaim: &'a mut dyn ReclaimMechanism,
    /// Kills.
    pub kill: &'a mut dyn KillMechanism,
}

impl Mechanisms for Mechs<'_> {
    fn preload(&mut self) -> &mut dyn PreloadMechanism {
        self.preload
    }
    fn reclaim(&mut self) -> &mut dyn ReclaimMechanism {
        self.reclaim
    }
    fn kill(&mut self) -> &mut dyn KillMechanism {
        self.kill
    }
}

/// Why an event was refused (the reply's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// The app name is not usable.
    #[error("invalid app name {0:?}")]
    BadName(String),
    /// The app is not declared and the table of undeclared apps is full or closed.
    #[error("unknown app {0:?}: not declared in the configuration")]
    UnknownApp(String),
    /// The process cannot belong to an app (PID 1, the daemon, its worker, its ancestors).
    #[error("pid {0} cannot be an app process (init, the daemon, its worker or an ancestor)")]
    ForbiddenPid(u32),
}

#[derive(Debug, Clone, Default)]
struct AppState {
    last_used_ms: Option<u64>,
    launching_since: Option<u64>,
    /// Processes announced with an event, by identity.
    procs: BTreeSet<ProcId>,
    /// Processes the driver attributed to the app in the latest tick
    /// (kept only by policies that prepage switches), each with the number
    /// of the last tick that attributed it (see `note_app_procs`).
    seen: BTreeMap<ProcId, u64>,
    /// The app's open foreground window is a switch (not its launch): only
    /// a switch's window teaches ASAP's estimator (`end_window`).
    switch_window: bool,
    /// A `background` event said so, and no `launch` or `foreground` came
    /// since: its processes are background whatever their adj or activity.
    background_notified: bool,
    /// Pages allocated in the domain in each tick of the launch in
    /// progress (the launch's allocation rate, for sizing; at most
    /// [`crate::sizing::LAUNCH_TICKS_KEPT`] ticks).
    launch_alloc: Vec<u32>,
    /// Mean pages per tick the domain allocated over the app's last
    /// complete launch.
    launch_rate_pages: Option<f64>,
}

const DECISIONS_KEPT: usize = 64;

/// The background processes of a page-out and what they were found from.
struct BackgroundMemo {
    /// [`Scheduler::apps_epoch`] then.
    apps_epoch: u64,
    /// The processes (footprints left out: the order does not read them).
    procs: Vec<ProcInfo>,
    /// The background app processes, least recently used first.
    pids: Vec<u32>,
}

/// The scheduler's state between records (no I/O, no clock).
pub struct Scheduler {
    cfg: SchedulerConfig,
    curve: ThroughputCurve,
    profiles: BTreeMap<String, LaunchProfile>,
    plan: Option<CutoffPlan>,
    plan_dirty: bool,
    /// Every app's standby set under the current plan (cleared on replan).
    standby_memo: Option<StandbySets>,
    /// Launch streams already computed from the current profiles, by app,
    /// cutoff and whether the hot segment is skipped (cleared when the
    /// profiles change): a stream is a pure function of these, and
    /// recomputing it walks every file of the profile.
    stream_memo: BTreeMap<(String, u64, bool), Arc<Vec<FileSpan>>>,
    /// Standby spans currently held per app (Hold::Touch).
    standby: BTreeMap<String, Arc<Vec<FileSpan>>>,
    standby_dirty: bool,
    /// The smallest standby set left unloaded for want of room: the holds
    /// are synced again once the room reaches it (nothing else changed).
    standby_need: Option<u64>,
    touch_paused: bool,
    controller: ReclaimController,
    prev_alloc: Option<(u64, u64)>,
    apps: BTreeMap<String, AppState>,
    /// Apps launching, and processes announced, over all of `apps`: kept
    /// as apps change (at events, kills and expiries), since every tick
    /// asks for them several times.
    launching_count: usize,
    announced_count: usize,
    /// Bumped whenever what decides which processes are background, and
    /// in which order, may change: an app's use or launch, the
    /// foreground, the processes never acted on.
    apps_epoch: u64,
    /// The latest page-out's background processes.
    background_memo: Option<BackgroundMemo>,
    declared: BTreeSet<String>,
    foreground: Option<String>,
    fg_notified: bool,
    last_kill_ms: Option<u64>,
    /// After a reaped kill, the available memory below which the settle
    /// time ends (`killer::PressureState::reaped_settle_until_below`).
    reaped_settle_until_below: Option<u64>,
    last_kill_reason: Option<Reason>,
    /// (ms, cumulative PSI some µs) of recent ticks, oldest first: the
    /// killer's stall window (`killer.capacity_stall_window_ms`).
    psi_history: VecDeque<(u64, u64)>,
    ef_reapply_at_ms: u64,
    /// Efficiency-first is in force in the controller but yields to the
    /// kernel's balance: reclaimable page cache ran out.
    ef_yielded: bool,
    /// The derived thresholds for the domain size they were derived for
    /// (`cfg.auto_*`), cleared when a profile or a launch rate changes.
    sizing: Option<(u64, crate::sizing::Sizing)>,
    /// Launch-file bytes per profiled app (cleared when the profiles change).
    file_bytes_memo: BTreeMap<String, u64>,
    /// Ticks whose processes were noted (`note_app_procs`), counted.
    procs_noted: u64,
    /// The processes of the latest noting (identity, app), and the apps'
    /// epoch then: the same list again changes nothing.
    noted: Vec<(ProcId, Option<String>)>,
    noted_epoch: Option<u64>,
    /// Apps whose launch stream is held protected (locked).
    protecting: BTreeSet<String>,
    dropped_cold: bool,
    page_out_unsupported: bool,
    prepage_unsupported: bool,
    /// The mechanism has no cold marking (asked once).
    cold_mark_unsupported: bool,
    /// The devices' readahead is raised for the launches in progress.
    readahead_raised: bool,
    /// The mechanism has no launch readahead (asked once).
    readahead_unsupported: bool,
    /// ASAP's per-app switch footprints (policies that prepage switches).
    footprints: FootprintTable,
    /// The re-fault controller (policies with re-fault-aware reclaim).
    refault: crate::refault::RefaultController,
    /// The domain's kswapd step, once asked.
    step_knob: refaulting::StepKnob,
    self_pids: BTreeSet<u32>,
    pending: Vec<Decision>,
    recent: VecDeque<Decision>,
    /// What the scheduler did, counted.
    pub stats: Stats,
    /// The killer's reuse predictor (this user's history; the daemon saves it).
    usage: crate::reuse::UsageModel,
    /// Each profiled app's relaunch cost on the curve, ms (recomputed when
    /// the profiles or the curve change).
    relaunch_costs: BTreeMap<String, f64>,
    /// Wall clock minus the monotonic clock, ms, from the latest tick
    /// (events carry the monotonic clock; the predictor's hours are wall time).
    unix_offset_ms: Option<i64>,
    /// The latest explained kill (shown by `appflow status`).
    last_kill_explained: Option<Box<crate::killer::KillExplanation>>,
    /// The latest domain sample.
    pub last_sample: Option<DomainSample>,
    /// n_alloc of the latest tick, pages per reclaim tick.
    pub last_alloc_pages: u64,
    /// What relaunching the likely next app would bring back, bytes, from
    /// the latest footprints read ([`crate::killer::relaunch_need_bytes`]).
    relaunch_need: u64,
    /// When `relaunch_need` was read, ms (None: not since the reset).
    relaunch_need_at_ms: Option<u64>,
}

impl Scheduler {
    /// A scheduler for a validated config. `declared` are the apps the
    /// configuration names; `self_pids` are processes never acted on (the
    /// daemon, its worker, its ancestors).
    pub fn new(
        cfg: SchedulerConfig,
        curve: ThroughputCurve,
        declared: &[String],
        self_pids: &[u32],
    ) -> Self {
        let regime_ms = cfg.reclaim.refault_regime_ms;
        let apps = declared
            .iter()
            .map(|a| (a.clone(), AppState::default()))
            .collect();
        Self {
            cfg,
            curve,
            profiles: BTreeMap::new(),
            plan: None,
            plan_dirty: true,
            standby_memo: None,
            stream_memo: BTreeMap::new(),
            standby: BTreeMap::new(),
            standby_dirty: true,
            standby_need: None,
            touch_paused: false,
            controller: ReclaimController::new(),
            prev_alloc: None,
            apps,
            launching_count: 0,
            announced_count: 0,
            apps_epoch: 0,
            background_memo: None,
            declared: declared.iter().cloned().collect(),
            foreground: None,
            fg_notified: false,
            last_kill_ms: None,
            reaped_settle_until_below: None,
            last_kill_reason: None,
            psi_history: VecDeque::new(),
            ef_reapply_at_ms: 0,
            ef_yielded: false,
            sizing: None,
            file_bytes_memo: BTreeMap::new(),
            procs_noted: 0,
            noted: Vec::new(),
            noted_epoch: None,
            protecting: BTreeSet::new(),
            dropped_cold: false,
            page_out_unsupported: false,
            prepage_unsupported: false,
            cold_mark_unsupported: false,
            readahead_raised: false,
            readahead_unsupported: false,
            footprints: FootprintTable::new(),
            refault: crate::refault::RefaultController::with_regime(regime_ms),
            step_knob: refaulting::StepKnob::Unknown,
            self_pids: self_pids.iter().copied().collect(),
            pending: Vec::new(),
            recent: VecDeque::new(),
            stats: Stats::default(),
            usage: crate::reuse::UsageModel::new(),
            relaunch_costs: BTreeMap::new(),
            unix_offset_ms: None,
            last_kill_explained: None,
            last_sample: None,
            last_alloc_pages: 0,
            relaunch_need: 0,
            relaunch_need_at_ms: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// Adds a pid that must never be acted on (e.g. a respawned worker).
    pub fn add_self_pid(&mut self, pid: u32) {
        self.apps_epoch += 1;
        self.self_pids.insert(pid);
    }

    /// The preload worker was replaced: nothing is held any more, so the
    /// standby set is queued again on the next tick.
    pub fn worker_restarted(&mut self) {
        self.standby.clear();
        self.standby_dirty = true;
    }

    /// The reclaim mode now.
    pub fn mode(&self) -> ReclaimMode {
        self.controller.mode()
    }

    /// The cutoff plan, once solved.
    pub fn plan(&self) -> Option<&CutoffPlan> {
        self.plan.as_ref()
    }

    /// The cutoff chosen for `app` (0 = nothing kept before launch).
    pub fn cutoff_of(&self, app: &str) -> u64 {
        self.plan
            .as_ref()
            .and_then(|p| p.apps.iter().find(|a| a.app == app))
            .map(|a| a.chosen.cutoff_bytes)
            .unwrap_or(0)
    }

    /// The foreground app, if known.
    pub fn foreground(&self) -> Option<&str> {
        self.foreground.as_deref()
    }

    /// Known apps (declared, notified or profiled).
    pub fn app_names(&self) -> Vec<String> {
        let mut s: BTreeSet<String> = self.apps.keys().cloned().collect();
        s.extend(self.profiles.keys().cloned());
        s.into_iter().collect()
    }

    /// Whether `app` is launching now.
    pub fn is_launching(&self, app: &str) -> bool {
        self.apps
            .get(app)
            .is_some_and(|a| a.launching_since.is_some())
    }

    /// Whether any app is launching now.
    pub fn any_launching(&self) -> bool {
        debug_assert_eq!(
            self.launching_count,
            self.apps
                .values()
                .filter(|a| a.launching_since.is_some())
                .count(),
            "the count of launching apps is out of date"
        );
        self.launching_count > 0
    }

    /// Ends the launch of `app`, if it was launching; returns when it began.
    fn end_launching(&mut self, app: &str) -> Option<u64> {
        self.apps_epoch += 1;
        let since = self.apps.get_mut(app)?.launching_since.take();
        if since.is_some() {
            self.launching_count -= 1;
        }
        since
    }

    /// Forgets the announced processes of `app`.
    fn clear_announced(&mut self, app: &str) {
        if let Some(a) = self.apps.get_mut(app) {
            self.announced_count -= a.procs.len();
            a.procs.clear();
        }
    }

    /// The memory floor: the killer's trigger level
    /// (`killer.trigger_avail_fraction` of the domain). Preloading never
    /// holds memory below it, and efficiency-first never keeps the kernel
    /// from reclaiming anonymous memory below it.
    pub(crate) fn floor_bytes(&self, total_bytes: u64) -> u64 {
        (self.cfg.killer.trigger_avail_fraction * total_bytes as f64) as u64
    }

    /// Whether `app` has a profile.
    pub fn has_profile(&self, app: &str) -> bool {
        self.profiles.contains_key(app)
    }

    /// The profile of `app`, if any.
    pub fn profile(&self, app: &str) -> Option<&LaunchProfile> {
        self.profiles.get(app)
    }

    /// The app whose event announced exactly this process instance, if any.
    pub fn app_of_announced(&self, id: ProcId) -> Option<&str> {
        self.apps
            .iter()
            .find(|(_, a)| a.procs.contains(&id))
            .map(|(n, _)| n.as_str())
    }

    /// Standby bytes held (as requested), all apps.
    pub fn standby_bytes(&self) -> u64 {
        self.standby
            .values()
            .flat_map(|v| v.iter())
            .map(|s| s.len)
            .sum()
    }

    /// The most recent decisions, oldest first.
    pub fn recent_decisions(&self) -> impl DoubleEndedIterator<Item = &Decision> {
        self.recent.iter()
    }

    /// Takes the decisions made since the last call (the decision stream).
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.pending)
    }

    fn log(&mut self, at_ms: u64, kind: &'static str, reason: Option<Reason>, detail: String) {
        self.log_marked(at_ms, kind, reason, detail, None);
    }

    fn log_marked(
        &mut self,
        at_ms: u64,
        kind: &'static str,
        reason: Option<Reason>,
        detail: String,
        mark: Option<Mark>,
    ) {
        let d = Decision {
            at_ms,
            kind,
            reason,
            code: reason.map(Reason::code),
            detail,
            mark,
            explain: None,
        };
        if self.recent.len() >= DECISIONS_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(d.clone());
        self.pending.push(d);
    }

    /// Replaces the profiles (from the store). The plan is re-solved only
    /// when they differ from the current ones.
    pub fn set_profiles(&mut self, profiles: Vec<LaunchProfile>) {
        let new: BTreeMap<String, LaunchProfile> =
            profiles.into_iter().map(|p| (p.app.clone(), p)).collect();
        if new != self.profiles {
            self.profiles = new;
            self.plan_dirty = true;
            self.stream_memo.clear();
            self.refresh_relaunch_costs();
            self.sizing = None;
            self.file_bytes_memo.clear();
        }
    }

    /// Replaces the storage curve (re-solves the plan if it changed).
    pub fn set_curve(&mut self, curve: ThroughputCurve) {
        if curve != self.curve {
            self.curve = curve;
            self.plan_dirty = true;
            self.refresh_relaunch_costs();
        }
    }

    /// Checks an event without acting on it: the name rule, the table of
    /// apps, and the announced process.
    pub fn check_event(&self, app: &str, proc_id: Option<ProcId>) -> Result<(), EventError> {
        if crate::valid_app_name(app).is_err() {
            return Err(EventError::BadName(app.to_string()));
        }
        // The table bound is the shared admission rule; which names a
        // driver accepts at all (declared only, or any) is the driver's.
        let known = self.apps.contains_key(app)
            || self.profiles.contains_key(app)
            || self.declared.contains(app);
        let undeclared = self.apps.len().saturating_sub(self.declared.len());
        if crate::admit_app(app, known, undeclared, true, self.cfg.max_undeclared_apps).is_err() {
            return Err(EventError::UnknownApp(app.to_string()));
        }
        if let Some(id) = proc_id {
            if id.pid <= 1 || self.self_pids.contains(&id.pid) {
                return Err(EventError::ForbiddenPid(id.pid));
            }
        }
        Ok(())
    }

    /// Acts on one record: the single entry point of every driver.
    pub fn apply(&mut self, r: &Record, m: &mut dyn Mechanisms) -> Result<String, EventError> {
        match r {
            Record::Tick {
                sample,
                now_unix_ms,
                procs,
            } => {
                self.tick(sample, *now_unix_ms, procs, m);
                Ok(String::new())
            }
            Record::Event {
                now_ms,
                event,
                app,
                proc_id,
            } => self.notify(*event, app, *proc_id, *now_ms, m.preload()),
        }
    }

    /// One tick: forget dead announced processes, then the preloader's,
    /// the reclaimer's and (when its trigger says so) the killer's parts.
    /// `procs` must carry footprints when [`Self::kill_wanted`] says yes.
    pub fn tick(
        &mut self,
        s: &DomainSample,
        now_unix_ms: u64,
        procs: &[ProcInfo],
        m: &mut dyn Mechanisms,
    ) {
        self.unix_offset_ms = Some(now_unix_ms as i64 - s.now_ms as i64);
        self.prune_announced(procs);
        self.note_app_procs(procs);
        if self.headroom_watch(s) {
            self.note_relaunch_need(s.now_ms, procs);
        }
        self.tick_parts(s, now_unix_ms, procs, None, m);
    }

    /// A tick given without its process list, for a driver whose processes
    /// are, in who they are (pid, start time, app), those it gave the
    /// latest tick, and which would give the list again, or again not, as
    /// it did then (the list goes with [`Self::wants_procs`]). When the tick
    /// reads no more of the list than who is in it (no page-out the
    /// mechanism can carry out, no proactive page-out, no kill considered:
    /// these order and weigh the processes by their use and footprints), it
    /// decides and acts here as [`Self::tick`] with the list would, and true
    /// is returned; otherwise nothing changes, false is returned, and the
    /// driver gives the full tick. A driver replays long stretches in which
    /// no process comes or goes (the simulator's idle hours) without making
    /// the list at every tick.
    pub fn tick_same_procs(
        &mut self,
        s: &DomainSample,
        now_unix_ms: u64,
        m: &mut dyn Mechanisms,
    ) -> bool {
        // A launch may expire at this tick, before the reclaimer plans.
        if self.any_launching() || self.proactive_wants_procs(s) || self.headroom_due(s) {
            return false;
        }
        let kill = self.kill_wanted(s).is_ok();
        let plan = self.plan_reclaim(s);
        if kill
            || (plan.pages_out()
                && !self.page_out_unsupported
                && plan.page_out_possible(m.reclaim()))
        {
            return false;
        }
        // Pruning and noting the same processes again changes nothing.
        self.tick_parts(s, now_unix_ms, &[], Some((plan, kill)), m);
        true
    }

    /// Ticks at `times` (ms, ascending, after the latest tick) that the
    /// driver would give through [`Self::tick_same_procs`] with the latest
    /// tick's sample but for the time (`s`, whose `now_ms` is ignored), and
    /// in which nothing changed in the domain: as long as such a tick
    /// decides and does nothing (no mode switch, no mechanism call, nothing
    /// logged, no kill considered; the page-out asked of it finds nothing
    /// the mechanism can move), it is taken here at the cost of the
    /// controller's step, the killer's trigger and the bookkeeping, and the
    /// count taken is returned. The first tick not taken would act: the
    /// driver gives it as usual. The scheduler is left as those ticks would
    /// leave it. A driver replays long stretches in which nothing changes
    /// (a rebalancing that finds nothing to page out, waiting out its time
    /// limit) without stepping its own model through them.
    pub fn quiet_ticks(
        &mut self,
        s: &DomainSample,
        times: &[u64],
        reclaim: &mut dyn ReclaimMechanism,
    ) -> usize {
        let Some(last) = self.last_sample else {
            return 0;
        };
        let unchanged = DomainSample {
            now_ms: last.now_ms,
            ..*s
        } == last;
        // What a tick's preloading, PMR's and the re-fault controller's
        // parts, and a launch's protection do does not stay the same with
        // time: such ticks are given in full.
        if !unchanged
            || self.any_launching()
            || !self.protecting.is_empty()
            || self.refault_active()
            || self.proactive_active()
            || (self.cfg.preload_strategy() != crate::policy::PreloadStrategy::None
                && (self.plan_dirty
                    || (self.standby_allowed()
                        && (self.standby_dirty
                            || self.standby_need.is_some_and(|n| self.room() >= n)))))
        {
            return 0;
        }
        let mut taken = 0;
        for &now_ms in times {
            let st = DomainSample { now_ms, ..*s };
            let plan = self.plan_reclaim(&st);
            if self.reclaim_acts(&plan, now_ms, reclaim) || self.kill_wanted(&st).is_ok() {
                break;
            }
            // The tick's whole effect (`tick_parts` when nothing acts).
            self.commit_reclaim(&st, &plan);
            self.record_psi(&st);
            taken += 1;
        }
        taken
    }

    /// The modules' parts of a tick; `planned` is the reclaimer's plan and
    /// the kill trigger, when already found for this sample.
    fn tick_parts(
        &mut self,
        s: &DomainSample,
        now_unix_ms: u64,
        procs: &[ProcInfo],
        planned: Option<(reclaiming::ReclaimPlan, bool)>,
        m: &mut dyn Mechanisms,
    ) {
        self.preload_step(s.now_ms, now_unix_ms, m.preload());
        let (plan, kill) = match planned {
            Some((p, k)) => (p, Some(k)),
            None => (self.plan_reclaim(s), None),
        };
        self.reclaim_planned(s, plan, procs, m.reclaim());
        self.proactive_step(s, procs, m.reclaim());
        self.refault_step(s, m.reclaim());
        // Memory the released locks give back is waited for before a kill.
        let yielded = self.yield_launch_protection(s, m.preload());
        // (The trigger reads the sample, the PSI history and the last kill,
        // which nothing above changes.)
        if !yielded && kill.unwrap_or_else(|| self.kill_wanted(s).is_ok()) {
            self.kill_step(s, procs, m);
        }
        self.record_psi(s);
    }

    /// Forgets everything about the running apps (a device reset: every app
    /// killed, caches dropped) but keeps the profiles, the plan and the
    /// counters, so a replay of many users does not re-plan for each.
    pub fn reset_state(&mut self) {
        for a in self.apps.values_mut() {
            *a = AppState::default();
        }
        self.launching_count = 0;
        self.announced_count = 0;
        self.apps_epoch += 1;
        self.standby.clear();
        self.standby_dirty = true;
        self.standby_need = None;
        self.touch_paused = false;
        self.controller = ReclaimController::new();
        self.prev_alloc = None;
        self.foreground = None;
        self.fg_notified = false;
        self.last_kill_ms = None;
        self.reaped_settle_until_below = None;
        self.last_kill_reason = None;
        self.psi_history.clear();
        self.ef_reapply_at_ms = 0;
        self.ef_yielded = false;
        self.protecting.clear();
        self.dropped_cold = false;
        self.footprints = FootprintTable::new();
        // The knob keeps its setting across a device reset; only the window
        // restarts (the counters of a reset device start again).
        self.refault.restart_window();
        self.last_sample = None;
        self.last_alloc_pages = 0;
        self.relaunch_need = 0;
        self.relaunch_need_at_ms = None;
        // A reset device is a new user: the predictor learns from this
        // user's own history only.
        self.usage.clear();
        self.unix_offset_ms = None;
        self.last_kill_explained = None;
    }

    /// Forgets announced processes that are gone: a PID absent from the
    /// scan, or present with another start time (reused).
    fn prune_announced(&mut self, procs: &[ProcInfo]) {
        debug_assert_eq!(
            self.announced_count,
            self.apps.values().map(|a| a.procs.len()).sum::<usize>(),
            "the count of announced processes is out of date"
        );
        if self.announced_count == 0 {
            return;
        }
        let live: BTreeSet<ProcId> = procs.iter().map(ProcInfo::id).collect();
        for a in self.apps.values_mut() {
            a.procs.retain(|id| live.contains(id));
        }
        self.announced_count = self.apps.values().map(|a| a.procs.len()).sum();
    }

    /// The processes of `app` the scheduler knows, by identity: those
    /// announced with its events and those the driver attributed to it in
    /// the latest tick.
    pub fn app_proc_ids(&self, app: &str) -> Vec<ProcId> {
        self.apps
            .get(app)
            .map(|a| {
                let mut ids = a.procs.clone();
                ids.extend(a.seen.keys().copied());
                ids.into_iter().collect()
            })
            .unwrap_or_default()
    }

    /// Handles an app event. Errors are the reply's message.
    pub fn notify(
        &mut self,
        event: EventKind,
        app: &str,
        proc_id: Option<ProcId>,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) -> Result<String, EventError> {
        self.check_event(app, proc_id)?;
        self.stats.count_event(event);
        self.apps_epoch += 1;
        let st = self.apps.entry(app.to_string()).or_default();
        if let Some(id) = proc_id {
            if event != EventKind::Exit && st.procs.insert(id) {
                self.announced_count += 1;
            }
        }
        let reply;
        match event {
            EventKind::Launch => {
                if st.launching_since.replace(now_ms).is_none() {
                    self.launching_count += 1;
                }
                st.last_used_ms = Some(now_ms);
                st.background_notified = false;
                st.launch_alloc.clear();
                self.record_open(app, now_ms);
                self.end_window(app, true, now_ms, preload);
                self.foreground = Some(app.to_string());
                self.fg_notified = true;
                self.standby_dirty = true;
                self.start_window(app, false, now_ms, preload);
                reply = self.start_launch(app, now_ms, preload);
            }
            EventKind::Launched => {
                st.last_used_ms = Some(now_ms);
                let since = self.end_launching(app);
                // The launch's allocation rate, for sizing.
                if let Some(st) = self.apps.get_mut(app) {
                    let rate = crate::sizing::launch_alloc_rate(&st.launch_alloc);
                    st.launch_alloc.clear();
                    if let (Some(_), Some(rate)) = (since, rate) {
                        st.launch_rate_pages = Some(rate);
                        self.sizing = None;
                    }
                }
                reply = self.end_launch(app, now_ms, since, preload);
            }
            EventKind::Foreground => {
                st.last_used_ms = Some(now_ms);
                st.background_notified = false;
                // Already in front (a launcher's "foreground" after the
                // launch): its window goes on, it is no switch.
                let switch = self.foreground.as_deref() != Some(app);
                self.foreground = Some(app.to_string());
                self.fg_notified = true;
                self.standby_dirty = true;
                if switch {
                    self.record_open(app, now_ms);
                    self.start_switch(app, now_ms, preload);
                }
                reply = format!("{app} is foreground");
            }
            EventKind::Background => {
                st.last_used_ms = Some(now_ms);
                st.background_notified = true;
                if self.foreground.as_deref() == Some(app) {
                    self.foreground = None;
                }
                self.standby_dirty = true;
                self.end_window(app, false, now_ms, preload);
                self.mark_cold(app, now_ms, preload);
                reply = format!("{app} is background");
            }
            EventKind::Exit => {
                match proc_id {
                    Some(id) => {
                        if st.procs.remove(&id) {
                            self.announced_count -= 1;
                        }
                    }
                    None => self.clear_announced(app),
                }
                let was_launching = self.end_launching(app).is_some();
                if self.foreground.as_deref() == Some(app) {
                    self.foreground = None;
                }
                if was_launching {
                    self.abandon_launch(app, now_ms, preload);
                }
                self.standby_dirty = true;
                self.end_window(app, true, now_ms, preload);
                reply = format!("{app} exited");
            }
        }
        let who = proc_id.map_or(String::new(), |p| format!(" pid {}", p.pid));
        self.log(
            now_ms,
            "event",
            None,
            format!("{} {app}{who}", event.name()),
        );
        Ok(reply)
    }
}

/// Replays recorded inputs through a fresh scheduler against a recording
/// fake of the mechanisms; returns the decision stream and the mechanism
/// calls. Drivers differ only in how they build `cfg`: replaying one
/// record file with the daemon's and the simulator's configuration of the
/// same policy must give the same stream.
pub fn replay(
    cfg: SchedulerConfig,
    curve: ThroughputCurve,
    profiles: Vec<LaunchProfile>,
    declared: &[String],
    records: &[Record],
) -> (Vec<Decision>, Vec<crate::mechanism::Call>) {
    let mut s = Scheduler::new(cfg, curve, declared, &[]);
    s.set_profiles(profiles);
    let mut fake = crate::mechanism::Recorder::default();
    let mut decisions = Vec::new();
    for r in records {
        // A refused event is part of the stream too (nothing is decided).
        let _ = s.apply(r, &mut fake);
        decisions.extend(s.take_decisions());
    }
    (decisions, fake.calls)
}

#[cfg(test)]
mod tests;
