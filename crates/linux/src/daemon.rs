//! The scheduler daemon (SPEC §3): one loop that every `tick_ms` samples the
//! domain and runs the three AppFlow modules through the core's policies,
//! acting only through the mechanism traits.
//!
//! * [`Scheduler`] — the daemon's decisions and state between ticks. It does
//!   no I/O and reads no clock: it takes a [`DomainSample`], the domain's
//!   processes ([`ProcInfo`]), notifications and the time, and drives
//!   `&mut dyn PreloadMechanism` / `ReclaimMechanism` / `KillMechanism`, so
//!   unit tests run it against the core's `mechanism::Recorder` fake.
//! * [`metrics`] — Prometheus text metrics and the Chrome/Perfetto trace.
//! * [`run`] — the live part: sampling the domain (system or memory cgroup),
//!   scanning its processes, the control socket, signals, the main loop.
//!
//! ## The domain's signals
//! * system: M_aval = MemAvailable, n_alloc from the sum of vmstat `pgalloc_*`.
//! * cgroup: M_aval = limit − usage + inactive_file (the readers'
//!   `MemCgroup::available_bytes`); n_alloc from the cgroup's own page-fault
//!   counter (v1 `total_pgfault`, v2 `pgfault` of memory.stat). The global
//!   `pgalloc_*` would count every other tenant of the machine; the cgroup's
//!   fault count is the cgroup's own demand for new pages (each first touch
//!   of an anonymous page or an uncached file page faults), which is what
//!   Algorithm 1 watches. A cgroup without a limit uses the system's
//!   MemTotal/MemAvailable for M_total/M_aval.

pub mod metrics;
pub mod run;

use crate::config::{Config, KillerStrategy, PreloadStrategy};
use appflow_core::killer::{self, Candidate, PressureState};
use appflow_core::mechanism::{Hold, KillMechanism, MechError, PreloadMechanism, ReclaimMechanism};
use appflow_core::preload::{self, CutoffPlan, FileSpan};
use appflow_core::profile::LaunchProfile;
use appflow_core::reason::Reason;
use appflow_core::reclaim::{alloc_pages_per_tick, ReclaimController, ReclaimMode, ReclaimSample};
use appflow_core::storage::{CurvePoint, ThroughputCurve};
use appflow_core::KIB;
use metrics::{Metrics, Trace};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One tick's observation of the domain (raw counters; rates are derived here).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct DomainSample {
    /// Monotonic time, ms.
    pub now_ms: u64,
    /// The domain's memory (cgroup limit, or MemTotal), bytes.
    pub total_bytes: u64,
    /// M_aval, bytes.
    pub avail_bytes: u64,
    /// Anonymous memory in the domain, bytes.
    pub anon_bytes: u64,
    /// Page cache in the domain, bytes.
    pub file_bytes: u64,
    /// Cumulative allocation counter (pgalloc sum, or the cgroup's pgfault), pages.
    pub alloc_counter: u64,
    /// Swap the domain can page out to (system swap: zram and flash), bytes.
    pub swap_total_bytes: u64,
    /// Of which free, bytes.
    pub swap_free_bytes: u64,
    /// PSI memory "some" avg10, percent (None when PSI is unavailable).
    pub psi_some_avg10: Option<f64>,
}

/// One process of the domain as the scan saw it.
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
}

/// A notification event (contract C).
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
}

/// A logged decision (shown by `appflow status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Monotonic ms.
    pub at_ms: u64,
    /// "reclaim", "kill", "preload", "event".
    pub kind: &'static str,
    /// The core's reason, if the decision has one.
    pub reason: Option<Reason>,
    /// Stable code of the reason.
    pub code: Option<u16>,
    /// Human-readable detail with the inputs.
    pub detail: String,
}

/// The mechanisms a tick drives.
pub struct Mechs<'a> {
    /// Preloading.
    pub preload: &'a mut dyn PreloadMechanism,
    /// Reclaim modes and page-out.
    pub reclaim: &'a mut dyn ReclaimMechanism,
    /// Kills.
    pub kill: &'a mut dyn KillMechanism,
}

#[derive(Debug, Clone, Default)]
struct AppState {
    last_used_ms: Option<u64>,
    launching_since: Option<u64>,
    /// Pids announced with `notify … --pid`.
    pids: BTreeSet<u32>,
}

/// The storage curve used when no calibration is stored: phone UFS flash
/// shape of seed 000 Fig. 6 (small-block reads ~20× slower than 512 KiB).
pub fn default_curve() -> ThroughputCurve {
    ThroughputCurve::new(vec![
        CurvePoint {
            block_bytes: 4 * KIB,
            bytes_per_sec: 20e6,
        },
        CurvePoint {
            block_bytes: 512 * KIB,
            bytes_per_sec: 450e6,
        },
    ])
    .expect("valid default curve")
}

const DECISIONS_KEPT: usize = 64;

/// The daemon's decisions and state between ticks (no I/O, no clock).
pub struct Scheduler {
    cfg: Config,
    curve: ThroughputCurve,
    profiles: BTreeMap<String, LaunchProfile>,
    plan: Option<CutoffPlan>,
    plan_dirty: bool,
    /// Standby spans currently held per app (Hold::Touch).
    standby: BTreeMap<String, Vec<FileSpan>>,
    standby_dirty: bool,
    controller: ReclaimController,
    prev_alloc: Option<(u64, u64)>,
    apps: BTreeMap<String, AppState>,
    foreground: Option<String>,
    fg_notified: bool,
    last_kill_ms: Option<u64>,
    last_kill_reason: Option<Reason>,
    ef_reapply_at_ms: u64,
    dropped_cold: bool,
    page_out_unsupported: bool,
    self_pids: BTreeSet<u32>,
    /// Recent decisions, oldest first.
    pub decisions: VecDeque<Decision>,
    /// Metrics.
    pub metrics: Metrics,
    /// Trace of decisions.
    pub trace: Trace,
    /// The latest domain sample.
    pub last_sample: Option<DomainSample>,
    /// n_alloc of the latest tick, pages per reclaim tick.
    pub last_alloc_pages: u64,
}

impl Scheduler {
    /// A scheduler for a validated config. `self_pids` are the daemon and its
    /// worker (never killed, never paged out).
    pub fn new(cfg: Config, curve: ThroughputCurve, self_pids: &[u32]) -> Self {
        let mut apps = BTreeMap::new();
        for a in &cfg.apps {
            apps.insert(a.name.clone(), AppState::default());
        }
        let trace = Trace::new(!cfg.daemon.trace_file.as_os_str().is_empty());
        Self {
            cfg,
            curve,
            profiles: BTreeMap::new(),
            plan: None,
            plan_dirty: true,
            standby: BTreeMap::new(),
            standby_dirty: true,
            controller: ReclaimController::new(),
            prev_alloc: None,
            apps,
            foreground: None,
            fg_notified: false,
            last_kill_ms: None,
            last_kill_reason: None,
            ef_reapply_at_ms: 0,
            dropped_cold: false,
            page_out_unsupported: false,
            self_pids: self_pids.iter().copied().collect(),
            decisions: VecDeque::new(),
            metrics: Metrics::default(),
            trace,
            last_sample: None,
            last_alloc_pages: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Adds a pid that must never be acted on (e.g. a respawned worker).
    pub fn add_self_pid(&mut self, pid: u32) {
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

    /// Whether `app` has a profile.
    pub fn has_profile(&self, app: &str) -> bool {
        self.profiles.contains_key(app)
    }

    /// The app announced with `pid`, if any.
    pub fn app_of_notified_pid(&self, pid: u32) -> Option<&str> {
        self.apps
            .iter()
            .find(|(_, a)| a.pids.contains(&pid))
            .map(|(n, _)| n.as_str())
    }

    /// Standby bytes held (as requested), all apps.
    pub fn standby_bytes(&self) -> u64 {
        self.standby.values().flatten().map(|s| s.len).sum()
    }

    fn log(&mut self, at_ms: u64, kind: &'static str, reason: Option<Reason>, detail: String) {
        if self.decisions.len() >= DECISIONS_KEPT {
            self.decisions.pop_front();
        }
        self.decisions.push_back(Decision {
            at_ms,
            kind,
            reason,
            code: reason.map(Reason::code),
            detail,
        });
    }

    /// Replaces the profiles (from the store). The plan is re-solved only
    /// when they differ from the current ones.
    pub fn set_profiles(&mut self, profiles: Vec<LaunchProfile>) {
        let new: BTreeMap<String, LaunchProfile> =
            profiles.into_iter().map(|p| (p.app.clone(), p)).collect();
        if new != self.profiles {
            self.profiles = new;
            self.plan_dirty = true;
        }
    }

    /// Replaces the storage curve (re-solves the plan if it changed).
    pub fn set_curve(&mut self, curve: ThroughputCurve) {
        if curve != self.curve {
            self.curve = curve;
            self.plan_dirty = true;
        }
    }

    fn active_apps(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .apps
            .iter()
            .filter(|(_, a)| a.launching_since.is_some())
            .map(|(n, _)| n.clone())
            .collect();
        if let Some(f) = &self.foreground {
            if !v.contains(f) {
                v.push(f.clone());
            }
        }
        v
    }

    fn cutoff_of(&self, app: &str) -> u64 {
        self.plan
            .as_ref()
            .and_then(|p| p.apps.iter().find(|a| a.app == app))
            .map(|a| a.chosen.cutoff_bytes)
            .unwrap_or(0)
    }

    fn replan(&mut self, now_ms: u64, now_unix_ms: u64) {
        self.plan_dirty = false;
        self.standby_dirty = true;
        if self.cfg.preload.strategy != PreloadStrategy::Selective {
            self.plan = None;
            return;
        }
        let profs: Vec<&LaunchProfile> = self.profiles.values().collect();
        let weights = if self.cfg.preload.core.weight_by_likelihood {
            preload::likelihood_weights(
                &profs,
                now_unix_ms,
                self.cfg.preload.core.likelihood_window_ms,
            )
        } else {
            vec![1.0; profs.len()]
        };
        match preload::plan_cutoffs(&profs, &weights, &self.curve, &self.cfg.preload.core) {
            Ok(plan) => {
                let detail = format!(
                    "{} apps, preload {} of budget {} bytes, weighted stream {:.3} s, {} nodes",
                    plan.apps.len(),
                    plan.preload_bytes,
                    self.cfg.preload.core.budget_bytes,
                    plan.weighted_stream_secs,
                    plan.nodes
                );
                tracing::info!(reason = %plan.reason, code = plan.reason.code(), "{detail}");
                self.log(now_ms, "preload", Some(plan.reason), detail);
                self.metrics.plan_bytes = plan.preload_bytes;
                self.metrics.plans_solved += 1;
                self.plan = Some(plan);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cutoff plan failed; preloading before launch is off");
                self.log(now_ms, "preload", None, format!("cutoff plan failed: {e}"));
                self.plan = None;
            }
        }
    }

    fn desired_standby(&self) -> BTreeMap<String, Vec<FileSpan>> {
        let mut out: BTreeMap<String, Vec<FileSpan>> = BTreeMap::new();
        let cfg = &self.cfg.preload.core;
        match self.cfg.preload.strategy {
            PreloadStrategy::WholeProfile => {}
            PreloadStrategy::KeepAll => {
                for p in self.profiles.values() {
                    for s in preload::launch_stream(p, 0, cfg, false) {
                        out.entry(s.app.clone()).or_default().push(s);
                    }
                }
            }
            PreloadStrategy::Selective => {
                let Some(plan) = &self.plan else {
                    return out;
                };
                let active = self.active_apps();
                let active: Vec<&str> = active.iter().map(String::as_str).collect();
                let profs: Vec<&LaunchProfile> = self.profiles.values().collect();
                let set = preload::standby_set(&profs, plan, cfg, &active);
                for s in set.spans {
                    out.entry(s.app.clone()).or_default().push(s);
                }
            }
        }
        out
    }

    /// Brings the standby holds in line with the plan and the active apps.
    fn sync_standby(&mut self, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        if !self.standby_dirty {
            return;
        }
        self.standby_dirty = false;
        let desired = self.desired_standby();
        let names: BTreeSet<String> = desired.keys().chain(self.standby.keys()).cloned().collect();
        for app in names {
            let want = desired.get(&app);
            if want == self.standby.get(&app) {
                continue;
            }
            if self.standby.remove(&app).is_some() && !self.is_launching(&app) {
                if let Err(e) = preload.release(&app) {
                    tracing::warn!(app, error = %e, "release of standby set failed");
                }
            }
            if let Some(spans) = want {
                match preload.load(&app, spans, Hold::Touch) {
                    Ok(bytes) => {
                        let small = spans
                            .iter()
                            .filter(|s| s.reason == Reason::PreloadSmallFile)
                            .count();
                        let detail = format!(
                            "standby {app}: {} spans ({small} small-file, {} hot-segment), {bytes} bytes, touched every {} ms",
                            spans.len(),
                            spans.len() - small,
                            self.cfg.preload.core.touch_interval_ms
                        );
                        let reason = if small > 0 {
                            Reason::PreloadSmallFile
                        } else {
                            Reason::PreloadHotSegment
                        };
                        tracing::info!(reason = %reason, code = reason.code(), "{detail}");
                        self.log(now_ms, "preload", Some(reason), detail);
                        self.metrics.preload_queued_bytes_touch += bytes;
                        self.standby.insert(app.clone(), spans.clone());
                    }
                    Err(e) => tracing::warn!(app, error = %e, "standby load failed"),
                }
            }
        }
    }

    /// Handles a notification (contract C). Errors are the reply's message.
    pub fn notify(
        &mut self,
        event: EventKind,
        app: &str,
        pid: Option<u32>,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) -> Result<String, String> {
        if !crate::config::valid_app_name(app) {
            return Err(format!("invalid app name {app:?}"));
        }
        self.metrics.count_event(event);
        let st = self.apps.entry(app.to_string()).or_default();
        if let Some(p) = pid {
            if event != EventKind::Exit {
                st.pids.insert(p);
            }
        }
        let reply;
        match event {
            EventKind::Launch => {
                st.launching_since = Some(now_ms);
                st.last_used_ms = Some(now_ms);
                self.foreground = Some(app.to_string());
                self.fg_notified = true;
                self.standby_dirty = true;
                self.trace.launch_begin(app, now_ms);
                reply = self.start_launch_stream(app, now_ms, preload);
            }
            EventKind::Launched => {
                let since = st.launching_since.take();
                st.last_used_ms = Some(now_ms);
                if self.cfg.preload.enabled {
                    if let Err(e) = preload.release(app) {
                        tracing::warn!(app, error = %e, "release after launch failed");
                    }
                }
                self.standby.remove(app);
                self.standby_dirty = true;
                self.trace.launch_end(app, now_ms);
                let ms = since.map(|s| now_ms.saturating_sub(s));
                let r = Reason::PreloadAppActive;
                let detail = format!("{app} launched after {ms:?} ms: protection released");
                tracing::info!(reason = %r, code = r.code(), app, launch_ms = ?ms, "launch complete");
                self.log(now_ms, "preload", Some(r), detail.clone());
                reply = detail;
            }
            EventKind::Foreground => {
                st.last_used_ms = Some(now_ms);
                self.foreground = Some(app.to_string());
                self.fg_notified = true;
                self.standby_dirty = true;
                reply = format!("{app} is foreground");
            }
            EventKind::Background => {
                st.last_used_ms = Some(now_ms);
                if self.foreground.as_deref() == Some(app) {
                    self.foreground = None;
                }
                self.standby_dirty = true;
                reply = format!("{app} is background");
            }
            EventKind::Exit => {
                let was_launching = st.launching_since.take().is_some();
                match pid {
                    Some(p) => {
                        st.pids.remove(&p);
                    }
                    None => st.pids.clear(),
                }
                if self.foreground.as_deref() == Some(app) {
                    self.foreground = None;
                }
                if was_launching && self.cfg.preload.enabled {
                    let _ = preload.release(app);
                    self.standby.remove(app);
                }
                self.standby_dirty = true;
                reply = format!("{app} exited");
            }
        }
        self.log(
            now_ms,
            "event",
            None,
            format!("{} {app} pid={pid:?}", event.name()),
        );
        Ok(reply)
    }

    fn start_launch_stream(
        &mut self,
        app: &str,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) -> String {
        if !self.cfg.preload.enabled {
            return format!("{app} launching (preloader disabled)");
        }
        let Some(profile) = self.profiles.get(app) else {
            let d = format!("{app} launching: no profile, nothing to preload");
            self.log(now_ms, "preload", None, d.clone());
            return d;
        };
        let cfg = &self.cfg.preload.core;
        let spans = match self.cfg.preload.strategy {
            PreloadStrategy::Selective => {
                let had_hot = self
                    .standby
                    .get(app)
                    .is_some_and(|v| v.iter().any(|s| s.reason == Reason::PreloadHotSegment));
                preload::launch_stream(profile, self.cutoff_of(app), cfg, had_hot)
            }
            PreloadStrategy::WholeProfile => preload::launch_stream(profile, 0, cfg, false),
            // Everything is resident already; nothing to stream.
            PreloadStrategy::KeepAll => Vec::new(),
        };
        // The app's standby set is no longer touched while it is active.
        if self.cfg.preload.strategy == PreloadStrategy::Selective
            && self.standby.remove(app).is_some()
        {
            let _ = preload.release(app);
        }
        if spans.is_empty() {
            let d = format!("{app} launching: nothing to stream");
            self.log(now_ms, "preload", None, d.clone());
            return d;
        }
        match preload.load(app, &spans, Hold::Protect) {
            Ok(bytes) => {
                self.metrics.preload_queued_bytes_protect += bytes;
                let r = Reason::PreloadStreamLarge;
                let detail = format!(
                    "{app} launching: streaming {} reads, {bytes} bytes, cutoff {} bytes, protected until launched ({})",
                    spans.len(),
                    self.cutoff_of(app),
                    Reason::ReclaimLaunchProtect
                );
                tracing::info!(reason = %r, code = r.code(), app, bytes, reads = spans.len(), "launch stream");
                self.log(now_ms, "preload", Some(r), detail.clone());
                detail
            }
            Err(e) => {
                tracing::warn!(app, error = %e, "launch stream failed");
                format!("{app} launching: stream failed: {e}")
            }
        }
    }

    /// Ends launches that never announced readiness.
    fn expire_launches(&mut self, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        let timeout = self.cfg.daemon.launch_timeout_ms;
        let expired: Vec<String> = self
            .apps
            .iter()
            .filter(|(_, a)| {
                a.launching_since
                    .is_some_and(|t| now_ms.saturating_sub(t) >= timeout)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for app in expired {
            if let Some(a) = self.apps.get_mut(&app) {
                a.launching_since = None;
            }
            if self.cfg.preload.enabled {
                let _ = preload.release(&app);
            }
            self.standby.remove(&app);
            self.standby_dirty = true;
            self.trace.launch_end(&app, now_ms);
            let d = format!("{app}: no launched event within {timeout} ms; protection released");
            tracing::warn!("{d}");
            self.log(now_ms, "preload", None, d);
        }
    }

    /// The preloader's part of a tick: expire launches, re-solve the plan if
    /// needed, keep the standby holds in line.
    pub fn preload_step(
        &mut self,
        now_ms: u64,
        now_unix_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        self.expire_launches(now_ms, preload);
        if !self.cfg.preload.enabled {
            return;
        }
        if self.plan_dirty {
            self.replan(now_ms, now_unix_ms);
        }
        self.sync_standby(now_ms, preload);
    }

    fn is_foreground_proc(&self, p: &ProcInfo) -> bool {
        match &p.app {
            Some(a) if self.is_launching(a) => true,
            Some(a) if self.fg_notified => self.foreground.as_deref() == Some(a.as_str()),
            // Without notifications: Android's visible/foreground adj (≤ 0).
            _ => p.oom_score_adj <= 0,
        }
    }

    /// Background app processes, least recently used first.
    fn background_app_pids(&self, procs: &[ProcInfo]) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = procs
            .iter()
            .filter(|p| {
                p.app.is_some() && !self.is_foreground_proc(p) && !self.self_pids.contains(&p.pid)
            })
            .filter(|p| !self.cfg.killer.protected.contains(&p.comm))
            .map(|p| {
                let used = p
                    .app
                    .as_ref()
                    .and_then(|a| self.apps.get(a))
                    .and_then(|a| a.last_used_ms)
                    .unwrap_or(0);
                (used, p.pid)
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, p)| p).collect()
    }

    /// The reclaimer's part of a tick (Algorithm 1).
    pub fn reclaim_step(
        &mut self,
        s: &DomainSample,
        procs: &[ProcInfo],
        reclaim: &mut dyn ReclaimMechanism,
    ) -> ReclaimMode {
        let rcfg = self.cfg.reclaim.core.clone();
        let alloc_pages = match self.prev_alloc {
            Some((c, t)) => {
                alloc_pages_per_tick(c, s.alloc_counter, s.now_ms.saturating_sub(t), rcfg.tick_ms)
            }
            None => 0,
        };
        self.prev_alloc = Some((s.alloc_counter, s.now_ms));
        self.last_alloc_pages = alloc_pages;
        self.last_sample = Some(*s);
        self.trace.counters(s, alloc_pages);
        if !self.cfg.reclaim.enabled {
            return self.controller.mode();
        }
        let d = self.controller.step(
            &rcfg,
            &ReclaimSample {
                now_ms: s.now_ms,
                alloc_pages,
                avail_bytes: s.avail_bytes,
                total_bytes: s.total_bytes,
                anon_bytes: s.anon_bytes,
                file_bytes: s.file_bytes,
            },
        );
        self.metrics.count_reclaim_reason(d.reason);
        if d.switched() {
            let detail = format!(
                "{} -> {}: n_alloc {alloc_pages} pages/tick (N_alloc {}), M_aval {} (M_F {}), anon {} file {}",
                d.prev_mode.name(),
                d.mode.name(),
                rcfg.alloc_threshold_pages,
                s.avail_bytes,
                rcfg.low_memory_threshold(s.total_bytes),
                s.anon_bytes,
                s.file_bytes
            );
            tracing::info!(reason = %d.reason, code = d.reason.code(), from = d.prev_mode.name(),
                to = d.mode.name(), alloc_pages, avail_bytes = s.avail_bytes, "reclaim mode switch");
            self.log(s.now_ms, "reclaim", Some(d.reason), detail);
            self.metrics.count_switch(d.prev_mode, d.mode);
            self.trace.mode_switch(d.prev_mode, d.mode, s.now_ms);
            if d.mode == ReclaimMode::EfficiencyFirst {
                self.dropped_cold = false;
            }
            self.apply_mode(d.mode, s.now_ms, reclaim);
        } else if d.mode == ReclaimMode::EfficiencyFirst && s.now_ms >= self.ef_reapply_at_ms {
            // Cgroups created during the burst get swappiness 0 too.
            self.apply_mode(d.mode, s.now_ms, reclaim);
        }
        if d.mode == ReclaimMode::EfficiencyFirst
            && self.cfg.reclaim.drop_cold_files
            && !self.dropped_cold
        {
            self.dropped_cold = true;
            self.drop_cold_files(s.now_ms, reclaim);
        }
        if d.anon_reclaim_bytes > 0 && !self.page_out_unsupported {
            self.page_out(d.anon_reclaim_bytes, procs, reclaim);
        }
        d.mode
    }

    fn apply_mode(&mut self, mode: ReclaimMode, now_ms: u64, reclaim: &mut dyn ReclaimMechanism) {
        self.ef_reapply_at_ms = now_ms + 1000;
        match reclaim.apply_mode(mode) {
            Ok(()) => {}
            Err(MechError::Unsupported(f)) => {
                tracing::debug!(feature = %f, mode = mode.name(), "mode degraded")
            }
            Err(e) => {
                tracing::warn!(error = %e, mode = mode.name(), "applying reclaim mode failed")
            }
        }
    }

    fn page_out(&mut self, budget: u64, procs: &[ProcInfo], reclaim: &mut dyn ReclaimMechanism) {
        let mut left = budget;
        for pid in self.background_app_pids(procs) {
            if left == 0 {
                break;
            }
            match reclaim.page_out_anon(pid, left) {
                Ok(n) => {
                    self.metrics.reclaimed_anon_bytes += n;
                    left = left.saturating_sub(n.max(1));
                }
                Err(MechError::Vanished(_)) => {}
                Err(MechError::Unsupported(f)) => {
                    tracing::warn!(feature = %f, "anonymous page-out unavailable; rebalancing only restores swappiness");
                    self.page_out_unsupported = true;
                    break;
                }
                Err(e) => tracing::warn!(pid, error = %e, "page-out failed"),
            }
        }
    }

    /// Drops profiled files of background apps that are neither held in the
    /// standby set nor protected by a launch.
    fn drop_cold_files(&mut self, now_ms: u64, reclaim: &mut dyn ReclaimMechanism) {
        let active = self.active_apps();
        let held: BTreeSet<&str> = self
            .standby
            .values()
            .flatten()
            .map(|s| s.path.as_str())
            .collect();
        let mut protected: BTreeSet<&str> = BTreeSet::new();
        for a in &active {
            if let Some(p) = self.profiles.get(a) {
                protected.extend(p.files.iter().map(|f| f.path.as_str()));
            }
        }
        let mut dropped = 0u64;
        let mut files = 0usize;
        let mut targets = Vec::new();
        for (app, p) in &self.profiles {
            if active.contains(app) {
                continue;
            }
            for f in &p.files {
                if !held.contains(f.path.as_str()) && !protected.contains(f.path.as_str()) {
                    targets.push(f.path.clone());
                }
            }
        }
        targets.sort();
        targets.dedup();
        for path in targets {
            if let Ok(n) = reclaim.drop_file(&path, 0, 0) {
                dropped += n;
                files += 1;
            }
        }
        self.metrics.dropped_files += files as u64;
        let d =
            format!("efficiency-first: dropped {files} cold unprotected files of background apps");
        tracing::info!(files, "{d}");
        self.log(now_ms, "reclaim", Some(Reason::ReclaimBurstDetected), d);
        let _ = dropped;
    }

    /// Whether the killer should act now (the core's trigger).
    pub fn kill_wanted(&self, s: &DomainSample) -> Result<Reason, Reason> {
        if !self.cfg.killer.enabled {
            return Err(Reason::KillNotNeeded);
        }
        killer::should_kill(
            &self.cfg.killer.core,
            &PressureState {
                now_ms: s.now_ms,
                avail_bytes: s.avail_bytes,
                total_bytes: s.total_bytes,
                anon_bytes: s.anon_bytes,
                file_bytes: s.file_bytes,
                swap_total_bytes: s.swap_total_bytes,
                swap_free_bytes: s.swap_free_bytes,
                psi_some_avg10: s.psi_some_avg10.unwrap_or(0.0),
                last_kill_ms: self.last_kill_ms,
            },
        )
    }

    /// The killer's clock: the daemon's ms clock shifted by one recency
    /// window, so "never used" (0) is always outside the window.
    pub fn killer_now_ms(&self, now_ms: u64) -> u64 {
        now_ms + self.cfg.killer.core.recency_window_ms
    }

    /// Builds the killer's candidates: one per app with processes in the
    /// domain (pid = its lowest pid). Processes of no app are never
    /// candidates. `last_used_ms` is on the [`Self::killer_now_ms`] clock.
    pub fn candidates(&self, procs: &[ProcInfo]) -> (Vec<Candidate>, Vec<Vec<u32>>) {
        let mut groups: BTreeMap<&str, Vec<&ProcInfo>> = BTreeMap::new();
        for p in procs {
            if let Some(a) = &p.app {
                groups.entry(a.as_str()).or_default().push(p);
            }
        }
        let window = self.cfg.killer.core.recency_window_ms;
        let mut cands = Vec::new();
        let mut pids = Vec::new();
        for (app, ps) in groups {
            let relaunch = self
                .profiles
                .get(app)
                .map(|p| p.relaunch_footprint_bytes)
                .filter(|&b| b > 0);
            // The killer's clock is shifted by one recency window so that an
            // app never used (0) is older than the window even right after
            // the daemon started (see `killer_now_ms`).
            let last_used = self
                .apps
                .get(app)
                .and_then(|a| a.last_used_ms)
                .map_or(0, |t| t + window);
            cands.push(Candidate {
                pid: ps.iter().map(|p| p.pid).min().unwrap_or(0),
                app: app.to_string(),
                current_bytes: ps.iter().filter_map(|p| p.footprint_bytes).sum(),
                relaunch_bytes: relaunch,
                last_used_ms: last_used,
                foreground: ps.iter().any(|p| self.is_foreground_proc(p)),
                protected: ps
                    .iter()
                    .any(|p| self.cfg.killer.protected.contains(&p.comm)),
                is_self: ps.iter().any(|p| self.self_pids.contains(&p.pid)),
                oom_score_adj: ps.iter().map(|p| p.oom_score_adj).max().unwrap_or(0),
            });
            pids.push(ps.iter().map(|p| p.pid).collect());
        }
        (cands, pids)
    }

    /// The killer's part of a tick, once [`Self::kill_wanted`] said yes and the
    /// processes' footprints were read. Returns the victim app.
    pub fn kill_step(
        &mut self,
        s: &DomainSample,
        procs: &[ProcInfo],
        kill: &mut dyn KillMechanism,
    ) -> Option<String> {
        let (cands, pids) = self.candidates(procs);
        let now_k = self.killer_now_ms(s.now_ms);
        let kcfg = &self.cfg.killer.core;
        let d = match self.cfg.killer.strategy {
            KillerStrategy::NetFreed => killer::choose_victim(kcfg, now_k, &cands),
            KillerStrategy::Lru => killer::choose_victim_lru(kcfg, &cands),
        };
        let Some(i) = d.victim else {
            if self.last_kill_reason != Some(d.reason) {
                let detail = format!("no kill: {} candidates, none eligible", cands.len());
                tracing::info!(reason = %d.reason, code = d.reason.code(), "{detail}");
                self.log(s.now_ms, "kill", Some(d.reason), detail);
                self.last_kill_reason = Some(d.reason);
            }
            return None;
        };
        let c = &cands[i];
        let recency = (c.last_used_ms > 0).then(|| now_k.saturating_sub(c.last_used_ms) / 1000);
        let mut killed = 0;
        let mut reaped = false;
        for &pid in &pids[i] {
            match kill.kill(pid, d.reason) {
                Ok(o) => {
                    killed += 1;
                    reaped |= o.reaped;
                }
                Err(MechError::Vanished(_)) => {}
                Err(e) => tracing::warn!(pid, error = %e, "kill failed"),
            }
        }
        let detail = format!(
            "killed {} ({} of {} processes, pid {}): ΔM {} bytes, footprint {} bytes, relaunch {:?}, last used {} s ago, reaped {reaped}",
            c.app,
            killed,
            pids[i].len(),
            c.pid,
            d.net_freed_bytes,
            c.current_bytes,
            c.relaunch_bytes,
            recency.map_or("never".to_string(), |r| r.to_string())
        );
        tracing::warn!(reason = %d.reason, code = d.reason.code(), app = %c.app, pid = c.pid,
            net_freed_bytes = d.net_freed_bytes, footprint_bytes = c.current_bytes, recency_s = ?recency, "kill");
        self.last_kill_ms = Some(s.now_ms);
        self.last_kill_reason = Some(d.reason);
        self.metrics.count_kill(d.reason, c.current_bytes);
        self.trace.kill(&c.app, c.pid, d.net_freed_bytes, s.now_ms);
        let app = c.app.clone();
        self.log(s.now_ms, "kill", Some(d.reason), detail);
        if killed > 0 {
            if let Some(a) = self.apps.get_mut(&app) {
                a.pids.clear();
                a.launching_since = None;
            }
        }
        Some(app)
    }

    /// A whole tick for tests and simple callers: preload, reclaim, then kill
    /// if wanted (with the footprints already in `procs`).
    pub fn tick(&mut self, s: &DomainSample, now_unix_ms: u64, procs: &[ProcInfo], m: Mechs<'_>) {
        self.preload_step(s.now_ms, now_unix_ms, m.preload);
        self.reclaim_step(s, procs, m.reclaim);
        if self.kill_wanted(s).is_ok() {
            self.kill_step(s, procs, m.kill);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use appflow_core::mechanism::{Call, Recorder};
    use appflow_core::MIB;

    fn profile(name: &str, small: usize, large: usize, relaunch_mib: u64) -> LaunchProfile {
        appflow_core::profile::synthetic(name, small, large, relaunch_mib * MIB)
    }

    fn sched(cfg: Config) -> Scheduler {
        let mut s = Scheduler::new(cfg, default_curve(), &[1]);
        s.set_profiles(vec![profile("a", 100, 2, 100), profile("b", 50, 1, 50)]);
        s
    }

    fn sample(now_ms: u64, alloc_counter: u64, avail_mib: u64) -> DomainSample {
        DomainSample {
            now_ms,
            total_bytes: 1024 * MIB,
            avail_bytes: avail_mib * MIB,
            anon_bytes: 600 * MIB,
            file_bytes: 200 * MIB,
            alloc_counter,
            swap_total_bytes: 0,
            swap_free_bytes: 0,
            psi_some_avg10: None,
        }
    }

    fn proc_(pid: u32, app: &str, mib: u64) -> ProcInfo {
        ProcInfo {
            pid,
            start_time: pid as u64,
            comm: app.into(),
            app: Some(app.into()),
            oom_score_adj: 900,
            footprint_bytes: Some(mib * MIB),
        }
    }

    #[test]
    fn standby_then_launch_stream_then_release() {
        let mut s = sched(Config::default());
        let mut r = Recorder::default();
        s.preload_step(0, 0, &mut r);
        assert!(s.plan().is_some());
        // Both apps' standby sets are loaded with Hold::Touch.
        let loads: Vec<_> = r
            .calls
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Call::Load {
                        hold: Hold::Touch,
                        ..
                    }
                )
            })
            .collect();
        assert_eq!(loads.len(), 2);
        // The plan is not re-solved on later ticks without a change.
        s.preload_step(100, 0, &mut r);
        assert_eq!(s.metrics.plans_solved, 1);
        let n = r.calls.len();
        s.preload_step(200, 0, &mut r);
        assert_eq!(r.calls.len(), n, "no churn without a change");
        // Launch: a's touch set is released, its large files streamed protected.
        s.notify(EventKind::Launch, "a", Some(42), 300, &mut r)
            .unwrap();
        assert!(s.is_launching("a"));
        assert_eq!(s.app_of_notified_pid(42), Some("a"));
        let last = r.calls.last().unwrap();
        match last {
            Call::Load {
                app, hold, bytes, ..
            } => {
                assert_eq!((app.as_str(), *hold), ("a", Hold::Protect));
                // Two 8 MiB large ranges minus the hot segments kept in standby.
                assert_eq!(*bytes, 2 * (8 * MIB - 128 * KIB));
            }
            c => panic!("unexpected {c:?}"),
        }
        assert!(r.calls.contains(&Call::Release { app: "a".into() }));
        s.preload_step(400, 0, &mut r);
        s.notify(EventKind::Launched, "a", None, 900, &mut r)
            .unwrap();
        assert!(!s.is_launching("a"));
        assert_eq!(r.calls.last(), Some(&Call::Release { app: "a".into() }));
        // Unknown names are refused.
        assert!(s
            .notify(EventKind::Launch, "../x", None, 1000, &mut r)
            .is_err());
    }

    #[test]
    fn launch_times_out_without_launched() {
        let mut cfg = Config::default();
        cfg.daemon.launch_timeout_ms = 500;
        let mut s = sched(cfg);
        let mut r = Recorder::default();
        s.notify(EventKind::Launch, "b", None, 0, &mut r).unwrap();
        s.preload_step(400, 0, &mut r);
        assert!(s.is_launching("b"));
        s.preload_step(600, 0, &mut r);
        assert!(!s.is_launching("b"));
    }

    #[test]
    fn whole_profile_streams_everything_and_keeps_nothing_before() {
        let mut cfg = Config::default();
        cfg.preload.strategy = PreloadStrategy::WholeProfile;
        let mut s = sched(cfg);
        let mut r = Recorder::default();
        s.preload_step(0, 0, &mut r);
        assert!(r.calls.is_empty());
        s.notify(EventKind::Launch, "b", None, 0, &mut r).unwrap();
        assert_eq!(
            r.calls,
            vec![Call::Load {
                app: "b".into(),
                spans: 50 + 4,
                bytes: 50 * 16 * KIB + 8 * MIB,
                hold: Hold::Protect
            }]
        );
    }

    #[test]
    fn burst_switches_modes_and_rebalances_background_apps() {
        let mut cfg = Config::default();
        cfg.reclaim.core.low_memory_bytes = 200 * MIB;
        let mut s = sched(cfg);
        let mut r = Recorder::default();
        let procs = vec![proc_(10, "a", 300), proc_(11, "b", 200)];
        s.notify(EventKind::Foreground, "b", None, 0, &mut r)
            .unwrap();
        r.calls.clear();
        s.reclaim_step(&sample(0, 0, 100), &procs, &mut r);
        // 20,000 pages in 100 ms with 100 MiB available: burst.
        let m = s.reclaim_step(&sample(100, 20_000, 100), &procs, &mut r);
        assert_eq!(m, ReclaimMode::EfficiencyFirst);
        assert_eq!(r.calls, vec![Call::Mode(ReclaimMode::EfficiencyFirst)]);
        let mut t = 200;
        let mut counter = 20_000;
        while s.mode() == ReclaimMode::EfficiencyFirst {
            counter += 10;
            s.reclaim_step(&sample(t, counter, 100), &procs, &mut r);
            t += 100;
        }
        assert_eq!(s.mode(), ReclaimMode::Rebalancing);
        // Rebalancing pages out the background app only (b is foreground).
        assert!(r.calls.contains(&Call::Mode(ReclaimMode::Rebalancing)));
        let pageouts: Vec<u32> = r
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::PageOut { pid, .. } => Some(*pid),
                _ => None,
            })
            .collect();
        assert_eq!(pageouts, vec![10]);
        assert_eq!(s.metrics.switches_total(), 2);
        // A vanished pid does not stop the loop.
        r.vanished.push(10);
        s.reclaim_step(&sample(t, counter, 100), &procs, &mut r);
    }

    #[test]
    fn kill_picks_highest_net_freed_background_app_never_foreground() {
        let mut cfg = Config::default();
        cfg.killer.core.trigger_avail_fraction = 0.1;
        let mut s = sched(cfg);
        let mut r = Recorder::default();
        // a: 400 MiB now, 100 after launch → ΔM 300; b: 120 now, 50 → 70;
        // c (no profile): 900 → ΔM 257 but it is foreground; d is protected;
        // e is the daemon's own pid; f belongs to no app.
        let mut procs = vec![
            proc_(10, "a", 400),
            proc_(11, "b", 120),
            proc_(12, "c", 900),
        ];
        procs.push(ProcInfo {
            comm: "sshd".into(),
            ..proc_(13, "d", 2000)
        });
        procs.push(ProcInfo {
            pid: 1,
            ..proc_(1, "e", 3000)
        });
        procs.push(ProcInfo {
            app: None,
            ..proc_(14, "x", 5000)
        });
        s.notify(EventKind::Foreground, "c", None, 0, &mut r)
            .unwrap();
        s.notify(EventKind::Background, "a", None, 0, &mut r)
            .unwrap();
        s.notify(EventKind::Background, "b", None, 0, &mut r)
            .unwrap();
        r.calls.clear();
        let smp = sample(40 * 60 * 1000, 0, 50);
        assert!(s.kill_wanted(&smp).is_ok());
        assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("a"));
        assert_eq!(
            r.calls,
            vec![Call::Kill {
                pid: 10,
                reason: Reason::KillHighestNetFreed
            }]
        );
        // Settle time: no second kill at once.
        assert_eq!(s.kill_wanted(&smp), Err(Reason::KillWaitingForMemory));
        // Without a: b next, never c/d/e/x.
        let smp2 = sample(40 * 60 * 1000 + 1000, 0, 50);
        let procs2: Vec<ProcInfo> = procs.into_iter().filter(|p| p.pid != 10).collect();
        assert_eq!(s.kill_step(&smp2, &procs2, &mut r).as_deref(), Some("b"));
        let procs3: Vec<ProcInfo> = procs2.into_iter().filter(|p| p.pid != 11).collect();
        let smp3 = sample(40 * 60 * 1000 + 2000, 0, 50);
        assert_eq!(s.kill_step(&smp3, &procs3, &mut r), None);
        assert_eq!(r.calls.len(), 2);
    }

    #[test]
    fn never_used_apps_are_not_recent_right_after_start() {
        let mut cfg = Config::default();
        cfg.killer.core.trigger_avail_fraction = 0.1;
        let mut s = sched(cfg);
        let mut r = Recorder::default();
        // At t = 5 s: b was used 1 s ago (recent, deferred); a never (not recent).
        s.notify(EventKind::Background, "b", None, 4_000, &mut r)
            .unwrap();
        r.calls.clear();
        let procs = vec![proc_(10, "a", 130), proc_(11, "b", 900)];
        let smp = sample(5_000, 0, 50);
        assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("a"));
        assert_eq!(
            r.calls,
            vec![Call::Kill {
                pid: 10,
                reason: Reason::KillHighestNetFreed
            }]
        );
    }

    #[test]
    fn lru_strategy_takes_highest_adj() {
        let mut cfg = Config::default();
        cfg.killer.strategy = KillerStrategy::Lru;
        let mut s = sched(cfg);
        let mut r = Recorder::default();
        let mut a = proc_(10, "a", 400);
        a.oom_score_adj = 100;
        let b = proc_(11, "b", 10);
        let smp = sample(1000, 0, 10);
        assert_eq!(s.kill_step(&smp, &[a, b], &mut r).as_deref(), Some("b"));
    }

    #[test]
    fn without_notifications_oom_adj_decides_foreground() {
        let s = sched(Config::default());
        let mut fg = proc_(10, "a", 400);
        fg.oom_score_adj = 0;
        let bg = proc_(11, "b", 10);
        let (c, _) = s.candidates(&[fg, bg]);
        assert!(c[0].foreground && !c[1].foreground);
    }
}
