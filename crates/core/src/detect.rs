//! Launch detection without launcher integration: which declared app a new
//! process belongs to, when a launch starts, when it is ready, and which app
//! is in the foreground — from process events (fork/exec/exit), per-pid
//! observations and per-tick activity rates the caller supplies. Pure: the
//! caller reads /proc and the clock and passes what it read.
//!
//! * [`Matchers`] — declared apps (name + exe / command-line regex / memory
//!   cgroup, the daemon's `[[app]]` keys) matched against one process.
//! * [`Detector`] — per-process app attribution (a process forked by, or
//!   exec'd inside, an app stays in that app), launch detection (the first
//!   exec of an app with no live process), readiness (a [`Readiness`] per
//!   launch), foreground inference, and launcher notifications, which win
//!   over inference.
//! * [`Readiness`] — a launch is ready once the app's page demand (reads +
//!   faults) has stayed at or below a floor for a quiet window; it times out
//!   after a bound. Defaults and their derivation: [`ReadinessConfig`].
//!
//! Latency follows the AppFlow paper §6.1 (launch = exec to readiness, like
//! `am start -W`): the ready time is back-dated to the start of the quiet
//! window, so the window length delays the *decision*, not the measured
//! latency.

use crate::profile::LaunchProfile;
use crate::storage::ThroughputCurve;
use crate::{InputError, KIB, PAGE_BYTES};
use std::collections::{BTreeMap, BTreeSet};

/// One declared app as the configuration spells it (empty = key unused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatcherSpec {
    /// App name.
    pub name: String,
    /// Executable path (as /proc/PID/exe reads).
    pub exe: String,
    /// Regex matched against the space-joined command line.
    pub cmdline: String,
    /// Memory cgroup holding the app's processes, as a /sys/fs/cgroup path
    /// or as /proc/PID/cgroup shows it.
    pub cgroup: String,
}

/// What the caller read about one process (any of it may be unreadable).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcObservation<'a> {
    /// Target of /proc/PID/exe.
    pub exe: Option<&'a str>,
    /// /proc/PID/cmdline with NULs replaced by spaces.
    pub cmdline: Option<&'a str>,
    /// The text of /proc/PID/cgroup.
    pub cgroup: Option<&'a str>,
}

#[derive(Debug, Clone)]
struct Matcher {
    name: String,
    exe: Option<String>,
    cmdline: Option<regex::Regex>,
    cgroup: Option<String>,
}

/// The declared apps, compiled.
#[derive(Debug, Clone, Default)]
pub struct Matchers {
    apps: Vec<Matcher>,
}

/// The cgroup path as /proc/PID/cgroup shows it: the part below the
/// cgroup mount point (`cgroup_mounts`: mount points of the `cgroup` and
/// `cgroup2` file systems, from /proc/self/mountinfo) that holds it. With
/// memory on v1 at `/sys/fs/cgroup/memory`, `/sys/fs/cgroup/memory/a/b` →
/// `/a/b`; with v2 mounted at `/sys/fs/cgroup` itself, `/sys/fs/cgroup/a`
/// → `/a`. A path under no mount is taken as already relative.
pub fn cgroup_relative(path: &str, cgroup_mounts: &[&str]) -> String {
    let p = path.trim_end_matches('/');
    let best = cgroup_mounts
        .iter()
        .map(|m| m.trim_end_matches('/'))
        .filter(|m| p == *m || p.strip_prefix(m).is_some_and(|r| r.starts_with('/')))
        .max_by_key(|m| m.len());
    let rest = match best {
        Some(m) => &p[m.len()..],
        None => p,
    };
    if rest.is_empty() {
        "/".into()
    } else {
        rest.to_string()
    }
}

/// True when /proc/PID/cgroup text puts the process in the memory cgroup
/// `want` (relative form) or below it. Lines are `id:controllers:path`; the
/// v1 memory line and the v2 line (`0::path`) are both considered.
pub fn in_memory_cgroup(proc_cgroup: &str, want: &str) -> bool {
    let want = want.trim_end_matches('/');
    proc_cgroup.lines().any(|l| {
        let mut f = l.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            return false;
        };
        let memory = ctrl.is_empty() || ctrl.split(',').any(|c| c == "memory");
        memory
            && (want.is_empty()
                || path == want
                || path.strip_prefix(want).is_some_and(|r| r.starts_with('/')))
    })
}

impl Matchers {
    /// Compiles the specs; a bad regex or an app with no key is an input
    /// error naming the app. `cgroup_mounts`: see [`cgroup_relative`].
    pub fn new(specs: &[MatcherSpec], cgroup_mounts: &[&str]) -> Result<Self, InputError> {
        let mut apps = Vec::with_capacity(specs.len());
        for s in specs {
            if s.exe.is_empty() && s.cmdline.is_empty() && s.cgroup.is_empty() {
                return Err(InputError::new(format!(
                    "app {:?}: needs at least one of exe, cmdline, cgroup",
                    s.name
                )));
            }
            let cmdline = if s.cmdline.is_empty() {
                None
            } else {
                Some(regex::Regex::new(&s.cmdline).map_err(|e| {
                    InputError::new(format!("app {:?}: cmdline regex: {e}", s.name))
                })?)
            };
            apps.push(Matcher {
                name: s.name.clone(),
                exe: (!s.exe.is_empty()).then(|| s.exe.clone()),
                cmdline,
                cgroup: (!s.cgroup.is_empty()).then(|| cgroup_relative(&s.cgroup, cgroup_mounts)),
            });
        }
        Ok(Self { apps })
    }

    /// Number of declared apps.
    pub fn len(&self) -> usize {
        self.apps.len()
    }

    /// True when no app is declared.
    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// Name of app `i`.
    pub fn name(&self, i: usize) -> &str {
        &self.apps[i].name
    }

    /// Index of an app by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.apps.iter().position(|m| m.name == name)
    }

    /// The first declared app the process matches (declaration order), by
    /// any of its keys: exe equal, command line (non-empty) matching the
    /// regex, or memory cgroup at or below the declared one.
    pub fn match_process(&self, p: &ProcObservation<'_>) -> Option<usize> {
        self.apps.iter().position(|m| {
            let by_exe = m.exe.as_deref().is_some_and(|e| p.exe == Some(e));
            let by_cmd = m.cmdline.as_ref().is_some_and(|r| {
                p.cmdline
                    .is_some_and(|c| !c.trim().is_empty() && r.is_match(c))
            });
            let by_cg = m
                .cgroup
                .as_deref()
                .is_some_and(|w| p.cgroup.is_some_and(|t| in_memory_cgroup(t, w)));
            by_exe || by_cmd || by_cg
        })
    }
}

/// When a launch counts as ready. Rates are pages (4 KiB) of demand: bytes
/// read from storage / 4096 + page faults (major + minor), per second; and
/// CPU time of the app's processes, per mille of one core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadinessConfig {
    /// A sample whose rate is at or below this is quiet, pages/s.
    pub quiet_floor_pages_per_s: u64,
    /// ... and whose CPU use is at or below this, per mille of one core
    /// (when the caller measures CPU): an app still computing its first
    /// frame or result is not ready, however little it reads.
    pub quiet_cpu_permille: u32,
    /// The launch is ready after quiet samples spanning this long, ms.
    pub quiet_ms: u64,
    /// A launch not ready after this long is ended as timed out, ms.
    pub timeout_ms: u64,
}

/// The default quiet window: 1 s, the AppFlow paper's usability threshold (§2:
/// launches under 1 s are the ones users perceive as fast). A launch that
/// brings in nothing for as long as a whole fast launch takes has finished
/// loading; pauses shorter than that inside a launch (CPU-only phases) do
/// not end it. A recorded profile can lengthen it ([`quiet_window_ms`]).
pub const DEFAULT_QUIET_MS: u64 = 1000;
/// The default timeout: the daemon's `launch_timeout_ms` default (30 s).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The default CPU bar of a quiet sample: a tenth of one core. An
/// interactive app that is ready waits for its user, and its timers and
/// housekeeping stay far below this; a launch still parsing, compiling or
/// drawing uses a whole core (docs/daemon.md, "Readiness inference").
pub const DEFAULT_QUIET_CPU_PERMILLE: u32 = 100;

/// What one app demanded between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Demand {
    /// Bytes read / 4096 + page faults ([`demand_pages`]).
    pub pages: u64,
    /// CPU time of its processes, ms (None: not measured; pages alone
    /// decide).
    pub cpu_ms: Option<u64>,
}

impl Demand {
    /// Demand of pages alone (CPU not measured).
    pub fn pages(pages: u64) -> Self {
        Self {
            pages,
            cpu_ms: None,
        }
    }
}

impl ReadinessConfig {
    /// The defaults for a device whose storage reads 4 KiB blocks at
    /// `curve.throughput(4 KiB)`: the floor is half of that, in pages per
    /// second. A launch that is still loading from storage reads at least
    /// as fast as the storage serves its smallest blocks (the slowest way
    /// to read, the AppFlow paper Fig. 6); an app below half of it is no longer
    /// storage-bound. With the daemon's default phone curve (4 KiB at
    /// 20 MB/s) this is 2,441 pages/s (≈ 9.5 MiB/s, 244 pages per 100 ms
    /// tick).
    pub fn for_device(curve: &ThroughputCurve) -> Self {
        let small = curve.throughput(4 * KIB).max(0.0);
        Self {
            quiet_floor_pages_per_s: (small / 2.0 / PAGE_BYTES as f64) as u64,
            quiet_cpu_permille: DEFAULT_QUIET_CPU_PERMILLE,
            quiet_ms: DEFAULT_QUIET_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }

    /// Checks the values (names the field at fault).
    pub fn validate(&self) -> Result<(), InputError> {
        if self.quiet_ms == 0 {
            return Err(InputError::new("readiness quiet_ms must be > 0"));
        }
        if self.timeout_ms <= self.quiet_ms {
            return Err(InputError::new(
                "readiness timeout_ms must be greater than quiet_ms",
            ));
        }
        Ok(())
    }
}

/// How long a launch of an app may take before it is ended as timed out:
/// the configured bound, or twice the app's recorded launch when that is
/// longer (a GB-scale model or a JVM job takes 25-60 s on a loaded
/// machine: the daemon's 30 s default ended every such launch by timeout
/// before its readiness). Twice its own recorded time is no launch any
/// more: it stalls, and its protection must not be held on.
pub fn launch_timeout_ms(base_ms: u64, profile: Option<&LaunchProfile>) -> u64 {
    base_ms.max(profile.map_or(0, |p| p.last_launch_ms.saturating_mul(2)))
}

/// The quiet window for an app: the configured one, lengthened to the
/// longest pause between consecutive first file accesses of its recorded
/// launch plus one tick (a pause the app is known to make while launching
/// must not read as the end of the launch). Bounded by `timeout_ms / 2` so
/// that a launch can still be found ready before it times out.
pub fn quiet_window_ms(
    cfg: &ReadinessConfig,
    profile: Option<&LaunchProfile>,
    tick_ms: u64,
) -> u64 {
    let mut firsts: Vec<u64> = profile
        .map(|p| p.active_files().iter().map(|f| f.first_access_us).collect())
        .unwrap_or_default();
    firsts.sort_unstable();
    let gap_ms = firsts
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(1000))
        .max()
        .unwrap_or(0);
    cfg.quiet_ms
        .max(gap_ms + tick_ms)
        .min((cfg.timeout_ms / 2).max(1))
}

/// How a launch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchEnd {
    /// The rate fell to the floor and stayed there for the quiet window.
    Inferred,
    /// A launcher said `launched`.
    Notified,
    /// No readiness within the timeout.
    TimedOut,
    /// Every process of the app exited during the launch: a batch app's
    /// readiness (its work is done), the daemon's `launched`.
    Exited,
}

/// The verdict of one [`Readiness::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Still launching.
    Launching,
    /// Ready at `at_ms` (the start of the quiet window).
    Ready {
        /// When the launch became ready, ms (caller's clock).
        at_ms: u64,
    },
    /// Not ready within the timeout; ended at `at_ms`.
    TimedOut {
        /// Launch start + timeout, ms.
        at_ms: u64,
    },
}

/// Readiness inference for one launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    cfg: ReadinessConfig,
    started_ms: u64,
    last_ms: u64,
    /// Start of the current run of quiet samples (None while active).
    quiet_since_ms: Option<u64>,
    done: Option<Verdict>,
}

impl Readiness {
    /// A launch that started at `started_ms`.
    pub fn new(cfg: ReadinessConfig, started_ms: u64) -> Self {
        Self {
            cfg,
            started_ms,
            last_ms: started_ms,
            quiet_since_ms: Some(started_ms),
            done: None,
        }
    }

    /// When the launch started.
    pub fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// The launch's end by its bound alone: `Some(deadline)` once `now_ms`
    /// is past the timeout (a launch whose readiness is told, not inferred).
    pub fn timed_out(&mut self, now_ms: u64) -> Option<u64> {
        let deadline = self.started_ms.saturating_add(self.cfg.timeout_ms);
        (now_ms >= deadline).then(|| {
            self.done = Some(Verdict::TimedOut { at_ms: deadline });
            deadline
        })
    }

    /// Feeds the app's demand since the previous sample observed at
    /// `now_ms`. Once a verdict other than `Launching` is returned, it is
    /// returned again on every call.
    pub fn step(&mut self, now_ms: u64, demand: Demand) -> Verdict {
        if let Some(v) = self.done {
            return v;
        }
        let now_ms = now_ms.max(self.last_ms);
        let elapsed = now_ms - self.last_ms;
        if elapsed > 0 {
            // pages/s ≤ floor and CPU ≤ its bar, without overflow or division.
            let quiet = (demand.pages as u128) * 1000
                <= (self.cfg.quiet_floor_pages_per_s as u128) * (elapsed as u128)
                && demand.cpu_ms.is_none_or(|c| {
                    (c as u128) * 1000 <= (self.cfg.quiet_cpu_permille as u128) * (elapsed as u128)
                });
            if !quiet {
                self.quiet_since_ms = None;
            } else if self.quiet_since_ms.is_none() {
                self.quiet_since_ms = Some(self.last_ms);
            }
            self.last_ms = now_ms;
        }
        let deadline = self.started_ms.saturating_add(self.cfg.timeout_ms);
        let v = match self.quiet_since_ms {
            Some(q) if now_ms.saturating_sub(q) >= self.cfg.quiet_ms && q < deadline => {
                Verdict::Ready { at_ms: q }
            }
            _ if now_ms >= deadline => Verdict::TimedOut { at_ms: deadline },
            _ => Verdict::Launching,
        };
        if v != Verdict::Launching {
            self.done = Some(v);
        }
        v
    }
}

/// Who said which app is in the foreground.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Inferred from a detected launch or switch.
    Inferred,
    /// A launcher's notification.
    Notified,
}

/// A launcher notification (`appflow notify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// The launcher started the app.
    Launch,
    /// The app is ready.
    Launched,
    /// The app came to the foreground.
    Foreground,
    /// The app went to the background.
    Background,
}

/// What the detector concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// A launch of `app` began at `at_ms` with process `pid` (exec time).
    Launch {
        /// App name.
        app: String,
        /// The exec'd process.
        pid: u32,
        /// Exec time, ms.
        at_ms: u64,
        /// Inferred from an exec, or notified.
        origin: Origin,
    },
    /// The launch of `app` ended.
    LaunchEnded {
        /// App name.
        app: String,
        /// How.
        how: LaunchEnd,
        /// Exec to readiness (or to the end), ms.
        latency_ms: u64,
    },
    /// The last process of `app` exited.
    AppExited {
        /// App name.
        app: String,
    },
    /// The foreground changed.
    Foreground {
        /// The foreground app (None: none known).
        app: Option<String>,
        /// Who said so.
        origin: Origin,
    },
}

#[derive(Debug, Clone)]
struct Tracked {
    start_time: u64,
    app: Option<usize>,
}

#[derive(Debug, Clone, Default)]
struct AppTrack {
    live: BTreeSet<u32>,
    launch: Option<Readiness>,
    /// A launcher announced the launch in progress (or took over one
    /// detected at its exec): only its `launched`, the app's exit or the
    /// timeout end it, never inference.
    announced: bool,
    launches_detected: u64,
    last_launch_ms: Option<u64>,
}

/// Per-app counters the daemon reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppCounters {
    /// Launches seen (inferred or notified).
    pub launches_detected: u64,
    /// Latency of the last ended launch, ms.
    pub last_launch_ms: Option<u64>,
    /// Live processes attributed to the app.
    pub live_processes: usize,
    /// A launch is in progress.
    pub launching: bool,
}

/// Attribution, launch, readiness and foreground state (no I/O, no clock).
///
/// Pids are process ids (tgids): the caller passes process-level events
/// only (a thread's fork or exit is not a process's; see
/// `appflow_linux::procevents::ProcEvent::is_process`). Times are ms on the
/// caller's monotonic clock.
#[derive(Debug, Clone)]
pub struct Detector {
    matchers: Matchers,
    readiness: Vec<ReadinessConfig>,
    procs: BTreeMap<u32, Tracked>,
    apps: Vec<AppTrack>,
    foreground: Option<usize>,
    fg_origin: Origin,
    /// A launcher has spoken: foreground follows notifications only.
    launcher_integrated: bool,
}

impl Detector {
    /// A detector for the declared apps, every app with `cfg`.
    pub fn new(matchers: Matchers, cfg: ReadinessConfig) -> Result<Self, InputError> {
        cfg.validate()?;
        let n = matchers.len();
        Ok(Self {
            matchers,
            readiness: vec![cfg; n],
            procs: BTreeMap::new(),
            apps: vec![AppTrack::default(); n],
            foreground: None,
            fg_origin: Origin::Inferred,
            launcher_integrated: false,
        })
    }

    /// Sets one app's readiness configuration (e.g. a quiet window from its
    /// profile, [`quiet_window_ms`]); applies to its next launch.
    pub fn set_readiness(&mut self, app: &str, cfg: ReadinessConfig) -> Result<(), InputError> {
        cfg.validate()?;
        let i = self.app_index(app)?;
        self.readiness[i] = cfg;
        Ok(())
    }

    fn app_index(&self, app: &str) -> Result<usize, InputError> {
        self.matchers
            .index(app)
            .ok_or_else(|| InputError::new(format!("unknown app {app:?}")))
    }

    /// The app a tracked process belongs to.
    pub fn app_of(&self, pid: u32) -> Option<&str> {
        self.procs
            .get(&pid)
            .and_then(|t| t.app)
            .map(|i| self.matchers.name(i))
    }

    /// The tracked identity (start time) of a process.
    pub fn start_time_of(&self, pid: u32) -> Option<u64> {
        self.procs.get(&pid).map(|t| t.start_time)
    }

    /// The live processes of an app.
    pub fn pids_of(&self, app: &str) -> Vec<u32> {
        self.matchers
            .index(app)
            .map(|i| self.apps[i].live.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The foreground app and who said so.
    pub fn foreground(&self) -> Option<(&str, Origin)> {
        self.foreground
            .map(|i| (self.matchers.name(i), self.fg_origin))
    }

    /// Apps with a launch in progress.
    pub fn launching(&self) -> Vec<&str> {
        (0..self.apps.len())
            .filter(|&i| self.apps[i].launch.is_some())
            .map(|i| self.matchers.name(i))
            .collect()
    }

    /// Counters of one app.
    pub fn counters(&self, app: &str) -> Option<AppCounters> {
        let i = self.matchers.index(app)?;
        let a = &self.apps[i];
        Some(AppCounters {
            launches_detected: a.launches_detected,
            last_launch_ms: a.last_launch_ms,
            live_processes: a.live.len(),
            launching: a.launch.is_some(),
        })
    }

    fn join(&mut self, pid: u32, start_time: u64, app: Option<usize>) {
        if let Some(old) = self.procs.get(&pid).and_then(|t| t.app) {
            self.apps[old].live.remove(&pid);
        }
        self.procs.insert(pid, Tracked { start_time, app });
        if let Some(i) = app {
            self.apps[i].live.insert(pid);
        }
    }

    fn set_foreground(&mut self, app: Option<usize>, origin: Origin, out: &mut Vec<Detected>) {
        if origin == Origin::Inferred && self.launcher_integrated {
            return;
        }
        if self.foreground != app || self.fg_origin != origin {
            self.foreground = app;
            self.fg_origin = origin;
            out.push(Detected::Foreground {
                app: app.map(|i| self.matchers.name(i).to_string()),
                origin,
            });
        }
    }

    fn start_launch(
        &mut self,
        i: usize,
        pid: u32,
        at_ms: u64,
        origin: Origin,
        out: &mut Vec<Detected>,
    ) {
        let a = &mut self.apps[i];
        a.launch = Some(Readiness::new(self.readiness[i], at_ms));
        a.announced = origin == Origin::Notified;
        a.launches_detected += 1;
        out.push(Detected::Launch {
            app: self.matchers.name(i).to_string(),
            pid,
            at_ms,
            origin,
        });
        self.set_foreground(Some(i), origin, out);
    }

    fn end_launch(&mut self, i: usize, how: LaunchEnd, at_ms: u64, out: &mut Vec<Detected>) {
        if let Some(r) = self.apps[i].launch.take() {
            let latency_ms = at_ms.saturating_sub(r.started_ms());
            self.apps[i].last_launch_ms = Some(latency_ms);
            out.push(Detected::LaunchEnded {
                app: self.matchers.name(i).to_string(),
                how,
                latency_ms,
            });
        }
    }

    /// A fork: the child belongs to the parent's app (if any). A child of
    /// an unattributed process stays unattributed until its exec.
    pub fn on_fork(&mut self, parent: u32, child: u32, child_start_time: u64) {
        let app = self.procs.get(&parent).and_then(|t| t.app);
        if app.is_some() {
            self.join(child, child_start_time, app);
        }
    }

    /// An exec of `pid` (identity `start_time`) observed as `obs`, with its
    /// parent `ppid`, at `now_ms` (the exec event's time). A process already
    /// in an app, or whose parent is, stays in that app (no launch);
    /// otherwise the declared apps are matched, and the first process of an
    /// app with none alive is a launch, which also becomes the foreground
    /// unless a launcher reports the foreground.
    pub fn on_exec(
        &mut self,
        pid: u32,
        start_time: u64,
        ppid: u32,
        obs: &ProcObservation<'_>,
        now_ms: u64,
    ) -> Vec<Detected> {
        let mut out = Vec::new();
        let own = self
            .procs
            .get(&pid)
            .filter(|t| t.start_time == start_time)
            .and_then(|t| t.app);
        let inherited = own.or_else(|| self.procs.get(&ppid).and_then(|t| t.app));
        if let Some(i) = inherited {
            self.join(pid, start_time, Some(i));
            return out;
        }
        let app = self.matchers.match_process(obs);
        let first = app.is_some_and(|i| self.apps[i].live.is_empty());
        self.join(pid, start_time, app);
        if let (Some(i), true) = (app, first) {
            self.start_launch(i, pid, now_ms, Origin::Inferred, &mut out);
        }
        out
    }

    /// A process found already running (at start, or when rescanning after
    /// lost events): attributed like an exec, but never counted as a launch
    /// (its exec time is unknown).
    pub fn adopt(&mut self, pid: u32, start_time: u64, ppid: u32, obs: &ProcObservation<'_>) {
        if self
            .procs
            .get(&pid)
            .is_some_and(|t| t.start_time == start_time)
        {
            return;
        }
        let app = self
            .procs
            .get(&ppid)
            .and_then(|t| t.app)
            .or_else(|| self.matchers.match_process(obs));
        self.join(pid, start_time, app);
    }

    /// A process exited. When it was its app's last, the app's launch ends
    /// (as [`LaunchEnd::Exited`]) and it leaves the foreground.
    pub fn on_exit(&mut self, pid: u32, now_ms: u64) -> Vec<Detected> {
        let mut out = Vec::new();
        let Some(t) = self.procs.remove(&pid) else {
            return out;
        };
        let Some(i) = t.app else { return out };
        self.apps[i].live.remove(&pid);
        if self.apps[i].live.is_empty() {
            self.end_launch(i, LaunchEnd::Exited, now_ms, &mut out);
            out.push(Detected::AppExited {
                app: self.matchers.name(i).to_string(),
            });
            if self.foreground == Some(i) {
                // Nobody is known to be in front any more; inference may
                // resume until a launcher speaks again.
                self.launcher_integrated = false;
                self.set_foreground(None, Origin::Inferred, &mut out);
            }
        }
        out
    }

    /// After lost events: `live` is every (pid, start time) now running.
    /// Tracked processes not in it exited (at `now_ms`); processes in it
    /// that are unknown must be passed to [`Self::adopt`] by the caller.
    pub fn retain_live(&mut self, live: &[(u32, u64)], now_ms: u64) -> Vec<Detected> {
        let alive: BTreeMap<u32, u64> = live.iter().copied().collect();
        let gone: Vec<u32> = self
            .procs
            .iter()
            .filter(|(p, t)| alive.get(p) != Some(&t.start_time))
            .map(|(p, _)| *p)
            .collect();
        gone.into_iter()
            .flat_map(|p| self.on_exit(p, now_ms))
            .collect()
    }

    /// One tick: `demand` gives, per app in a launch, its demand since the
    /// previous tick (pages, see [`demand_pages`]; and CPU). Apps in a
    /// launch without an entry count as quiet. Returns the launches that
    /// ended.
    pub fn tick(&mut self, demand: &BTreeMap<String, Demand>, now_ms: u64) -> Vec<Detected> {
        let mut out = Vec::new();
        for i in 0..self.apps.len() {
            let announced = self.apps[i].announced;
            let Some(r) = self.apps[i].launch.as_mut() else {
                continue;
            };
            if announced {
                // The launcher says when it is ready; only the bound applies.
                if let Some(at_ms) = r.timed_out(now_ms) {
                    self.end_launch(i, LaunchEnd::TimedOut, at_ms, &mut out);
                }
                continue;
            }
            let d = demand
                .get(self.matchers.name(i))
                .copied()
                .unwrap_or_default();
            match r.step(now_ms, d) {
                Verdict::Launching => {}
                Verdict::Ready { at_ms } => {
                    self.end_launch(i, LaunchEnd::Inferred, at_ms, &mut out)
                }
                Verdict::TimedOut { at_ms } => {
                    self.end_launch(i, LaunchEnd::TimedOut, at_ms, &mut out)
                }
            }
        }
        out
    }

    /// A launcher's notification; it overrides inference. `launch` starts a
    /// launch (unless one is already in progress, e.g. detected from the
    /// exec), `launched` ends it as notified, `foreground`/`background` set
    /// the foreground. From the first foreground-related notification on,
    /// inferred launches no longer move the foreground (until the notified
    /// foreground app exits). `pid`: the launched process, joined to the app.
    pub fn notify(
        &mut self,
        app: &str,
        notice: Notice,
        pid: Option<(u32, u64)>,
        now_ms: u64,
    ) -> Result<Vec<Detected>, InputError> {
        let i = self.app_index(app)?;
        let mut out = Vec::new();
        if let Some((p, start)) = pid {
            self.join(p, start, Some(i));
        }
        match notice {
            Notice::Launch => {
                if self.apps[i].launch.is_none() {
                    self.start_launch(
                        i,
                        pid.map_or(0, |p| p.0),
                        now_ms,
                        Origin::Notified,
                        &mut out,
                    );
                } else {
                    // Detected at its exec first: the launcher's events
                    // now decide its end.
                    self.apps[i].announced = true;
                }
                self.launcher_integrated = true;
                self.set_foreground(Some(i), Origin::Notified, &mut out);
            }
            Notice::Launched => self.end_launch(i, LaunchEnd::Notified, now_ms, &mut out),
            Notice::Foreground => {
                self.launcher_integrated = true;
                self.set_foreground(Some(i), Origin::Notified, &mut out);
            }
            Notice::Background => {
                self.launcher_integrated = true;
                if self.foreground == Some(i) {
                    self.set_foreground(None, Origin::Notified, &mut out);
                }
            }
        }
        Ok(out)
    }

    /// An app switch the caller observed (e.g. an app's demand rising again
    /// while it had processes alive): the app becomes the foreground unless
    /// a launcher reports the foreground.
    pub fn on_switch(&mut self, app: &str) -> Result<Vec<Detected>, InputError> {
        let i = self.app_index(app)?;
        let mut out = Vec::new();
        self.set_foreground(Some(i), Origin::Inferred, &mut out);
        Ok(out)
    }
}

/// Cumulative demand counters of one process, as read from /proc/PID/io
/// (bytes read: the larger of `rchar`, reads served from storage or the
/// page cache, and `read_bytes`, bytes brought in from storage) and
/// /proc/PID/stat (`minflt` + `majflt`; `utime` + `stime`). Reads from the
/// page cache count: a launch whose files were preloaded is still loading
/// while it reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DemandCounters {
    /// /proc/PID/io max(`rchar`, `read_bytes`).
    pub read_bytes: u64,
    /// /proc/PID/stat minflt + majflt.
    pub faults: u64,
    /// /proc/PID/stat utime + stime, ms.
    pub cpu_ms: u64,
}

/// An app's CPU time between two samples, ms, per pid as
/// [`demand_pages`] counts pages.
pub fn demand_cpu_ms(
    prev: &BTreeMap<u32, DemandCounters>,
    cur: &BTreeMap<u32, DemandCounters>,
) -> u64 {
    cur.iter()
        .map(|(pid, c)| {
            let p = prev.get(pid).map_or(0, |p| p.cpu_ms);
            if c.cpu_ms >= p {
                c.cpu_ms - p
            } else {
                c.cpu_ms
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// An app's demand between two samples, pages: per pid present in `cur`,
/// the growth of its counters since `prev` (a pid absent from `prev` counts
/// from zero: it started within the interval; a counter that went down
/// belongs to a reused pid and counts from zero too). Exited pids add
/// nothing (their last interval is lost; /proc no longer has them).
pub fn demand_pages(
    prev: &BTreeMap<u32, DemandCounters>,
    cur: &BTreeMap<u32, DemandCounters>,
) -> u64 {
    cur.iter()
        .map(|(pid, c)| {
            let p = prev.get(pid).copied().unwrap_or_default();
            let reads = if c.read_bytes >= p.read_bytes {
                c.read_bytes - p.read_bytes
            } else {
                c.read_bytes
            };
            let faults = if c.faults >= p.faults {
                c.faults - p.faults
            } else {
                c.faults
            };
            reads / PAGE_BYTES + faults
        })
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn specs() -> Vec<MatcherSpec> {
        vec![
            MatcherSpec {
                name: "maps".into(),
                exe: "/usr/bin/maps".into(),
                ..Default::default()
            },
            MatcherSpec {
                name: "ml".into(),
                cmdline: r"python3 .*infer\.py".into(),
                ..Default::default()
            },
            MatcherSpec {
                name: "cg".into(),
                cgroup: "/sys/fs/cgroup/memory/apps/cg".into(),
                ..Default::default()
            },
        ]
    }

    const MOUNTS: &[&str] = &["/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"];

    fn cfg() -> ReadinessConfig {
        ReadinessConfig {
            quiet_floor_pages_per_s: 1000,
            quiet_cpu_permille: DEFAULT_QUIET_CPU_PERMILLE,
            quiet_ms: 500,
            timeout_ms: 10_000,
        }
    }

    fn det() -> Detector {
        Detector::new(Matchers::new(&specs(), MOUNTS).unwrap(), cfg()).unwrap()
    }

    fn exe(p: &str) -> ProcObservation<'_> {
        ProcObservation {
            exe: Some(p),
            ..Default::default()
        }
    }

    #[test]
    fn matchers_by_exe_cmdline_and_cgroup() {
        let m = Matchers::new(&specs(), MOUNTS).unwrap();
        assert_eq!(m.match_process(&exe("/usr/bin/maps")), Some(0));
        assert_eq!(m.match_process(&exe("/usr/bin/mapsx")), None);
        let cmd = ProcObservation {
            cmdline: Some("python3 /opt/m/infer.py --model x"),
            ..Default::default()
        };
        assert_eq!(m.match_process(&cmd), Some(1));
        let nodot = ProcObservation {
            cmdline: Some("python3 /opt/m/inferXpy"),
            ..Default::default()
        };
        assert_eq!(m.match_process(&nodot), None);
        // Real /proc/PID/cgroup text of this machine (cgroup v1), and a v2 line.
        let v1 = "9:name=systemd:/\n4:memory:/apps/cg/leaf\n0::/\n";
        let cg = ProcObservation {
            cgroup: Some(v1),
            ..Default::default()
        };
        assert_eq!(m.match_process(&cg), Some(2));
        let other = "4:memory:/apps/cgx\n";
        assert!(!in_memory_cgroup(other, "/apps/cg"));
        assert!(in_memory_cgroup("0::/apps/cg\n", "/apps/cg"));
        assert!(!in_memory_cgroup("4:cpu:/apps/cg\n", "/apps/cg"));
        assert!(!in_memory_cgroup("garbage", "/apps/cg"));
        assert_eq!(m.match_process(&ProcObservation::default()), None);
        let empty = ProcObservation {
            cmdline: Some(" "),
            ..Default::default()
        };
        assert_eq!(m.match_process(&empty), None);
    }

    #[test]
    fn bad_specs_are_input_errors_naming_the_app() {
        let e = Matchers::new(
            &[MatcherSpec {
                name: "x".into(),
                cmdline: "(".into(),
                ..Default::default()
            }],
            MOUNTS,
        )
        .unwrap_err();
        assert!(e.0.contains("app \"x\": cmdline regex"), "{e}");
        let e = Matchers::new(
            &[MatcherSpec {
                name: "y".into(),
                ..Default::default()
            }],
            MOUNTS,
        )
        .unwrap_err();
        assert!(e.0.contains("\"y\""), "{e}");
    }

    #[test]
    fn cgroup_paths_relative() {
        // This machine's layout: v1 controllers and a cgroup2 under a tmpfs.
        let v1 = [
            "/sys/fs/cgroup/memory",
            "/sys/fs/cgroup/cpu",
            "/sys/fs/cgroup/unified",
        ];
        assert_eq!(cgroup_relative("/sys/fs/cgroup/memory/a/b/", &v1), "/a/b");
        assert_eq!(cgroup_relative("/sys/fs/cgroup/unified/x", &v1), "/x");
        assert_eq!(cgroup_relative("/sys/fs/cgroup/memory", &v1), "/");
        assert_eq!(
            cgroup_relative("/sys/fs/cgroup/memoryx/a", &v1),
            "/sys/fs/cgroup/memoryx/a"
        );
        // A pure v2 machine: the first component is a cgroup, not a controller.
        let v2 = ["/sys/fs/cgroup"];
        assert_eq!(
            cgroup_relative("/sys/fs/cgroup/appflow/app", &v2),
            "/appflow/app"
        );
        assert_eq!(cgroup_relative("/a", &v2), "/a");
        assert_eq!(cgroup_relative("", &v2), "/");
    }

    #[test]
    fn first_exec_is_a_launch_children_stay_in_the_app() {
        let mut d = det();
        let ev = d.on_exec(100, 5, 1, &exe("/usr/bin/maps"), 1000);
        assert_eq!(
            ev,
            vec![
                Detected::Launch {
                    app: "maps".into(),
                    pid: 100,
                    at_ms: 1000,
                    origin: Origin::Inferred
                },
                Detected::Foreground {
                    app: Some("maps".into()),
                    origin: Origin::Inferred
                }
            ]
        );
        // A child forks and execs a helper that matches nothing: still maps, no launch.
        d.on_fork(100, 101, 6);
        assert!(d
            .on_exec(101, 6, 100, &exe("/usr/lib/helper"), 1010)
            .is_empty());
        assert_eq!(d.app_of(101), Some("maps"));
        // A second maps process while one is alive: no new launch.
        assert!(d.on_exec(200, 7, 1, &exe("/usr/bin/maps"), 1020).is_empty());
        assert_eq!(d.counters("maps").unwrap().launches_detected, 1);
        assert_eq!(d.pids_of("maps"), vec![100, 101, 200]);
        // A process of maps that execs the ml command line stays maps.
        let ml = ProcObservation {
            cmdline: Some("python3 infer.py"),
            ..Default::default()
        };
        assert!(d.on_exec(101, 6, 100, &ml, 1030).is_empty());
        assert_eq!(d.app_of(101), Some("maps"));
        // Unmatched processes are tracked with no app.
        assert!(d.on_exec(300, 8, 1, &exe("/bin/ls"), 1040).is_empty());
        assert_eq!(d.app_of(300), None);
        // All maps processes exit: the app exits and leaves the foreground.
        assert!(d
            .on_exit(100, 2000)
            .iter()
            .all(|e| !matches!(e, Detected::AppExited { .. })));
        d.on_exit(200, 2001);
        let ev = d.on_exit(101, 2002);
        assert!(ev.contains(&Detected::AppExited { app: "maps".into() }));
        assert!(ev.contains(&Detected::Foreground {
            app: None,
            origin: Origin::Inferred
        }));
        // The next exec of maps is a new launch.
        let ev = d.on_exec(400, 9, 1, &exe("/usr/bin/maps"), 3000);
        assert!(matches!(ev[0], Detected::Launch { at_ms: 3000, .. }));
        assert_eq!(d.counters("maps").unwrap().launches_detected, 2);
    }

    #[test]
    fn launch_that_exits_early_ends_as_exited() {
        let mut d = det();
        d.on_exec(100, 5, 1, &exe("/usr/bin/maps"), 1000);
        let ev = d.on_exit(100, 1300);
        assert_eq!(
            ev[0],
            Detected::LaunchEnded {
                app: "maps".into(),
                how: LaunchEnd::Exited,
                latency_ms: 300
            }
        );
    }

    #[test]
    fn pid_reuse_is_not_the_same_process() {
        let mut d = det();
        d.on_exec(100, 5, 1, &exe("/usr/bin/maps"), 1000);
        // Lost events: pid 100 is now another process (other start time).
        let ev = d.retain_live(&[(100, 99)], 2000);
        assert!(ev.contains(&Detected::AppExited { app: "maps".into() }));
        d.adopt(100, 99, 1, &exe("/bin/ls"));
        assert_eq!(d.app_of(100), None);
        // Adopting a running app process is no launch.
        d.adopt(150, 3, 1, &exe("/usr/bin/maps"));
        assert_eq!(d.app_of(150), Some("maps"));
        assert_eq!(d.counters("maps").unwrap().launches_detected, 1);
    }

    #[test]
    fn readiness_inferred_when_demand_falls_and_stays_low() {
        let mut d = det();
        d.on_exec(100, 5, 1, &exe("/usr/bin/maps"), 1000);
        let busy = BTreeMap::from([("maps".to_string(), Demand::pages(5000))]); // 50,000 pages/s
        let calm = BTreeMap::from([("maps".to_string(), Demand::pages(50))]); // 500 pages/s
        let mut ended = Vec::new();
        for t in 1..=30u64 {
            let now = 1000 + 100 * t;
            let dem = if t <= 12 { &busy } else { &calm };
            ended.extend(d.tick(dem, now));
        }
        // Busy until 2200, quiet from there; 500 ms window → decided at 2700, ready at 2200.
        assert_eq!(
            ended,
            vec![Detected::LaunchEnded {
                app: "maps".into(),
                how: LaunchEnd::Inferred,
                latency_ms: 1200
            }]
        );
        assert_eq!(d.counters("maps").unwrap().last_launch_ms, Some(1200));
        assert!(d.launching().is_empty());
    }

    #[test]
    fn notify_overrides_inference() {
        let mut d = det();
        d.on_exec(100, 5, 1, &exe("/usr/bin/maps"), 1000);
        // The launcher says the launch is done before inference would.
        let ev = d.notify("maps", Notice::Launched, None, 1100).unwrap();
        assert_eq!(
            ev,
            vec![Detected::LaunchEnded {
                app: "maps".into(),
                how: LaunchEnd::Notified,
                latency_ms: 100
            }]
        );
        // The launcher puts cg in front; a later inferred launch of ml does not move it.
        d.on_exec(300, 8, 1, &exe("/x"), 1150);
        d.notify("cg", Notice::Foreground, Some((300, 8)), 1200)
            .unwrap();
        assert_eq!(d.foreground(), Some(("cg", Origin::Notified)));
        let ml = ProcObservation {
            cmdline: Some("python3 infer.py"),
            ..Default::default()
        };
        let ev = d.on_exec(400, 9, 1, &ml, 1300);
        assert!(matches!(ev[..], [Detected::Launch { .. }]));
        assert_eq!(d.foreground(), Some(("cg", Origin::Notified)));
        assert!(d.on_switch("maps").unwrap().is_empty());
        // Unknown app names are input errors.
        assert!(d.notify("nosuchapp", Notice::Launch, None, 1400).is_err());
        // The notified foreground app exits: inference resumes.
        d.on_exit(300, 1500);
        assert_eq!(d.foreground(), None);
        d.on_switch("ml").unwrap();
        assert_eq!(d.foreground(), Some(("ml", Origin::Inferred)));
        // A notified launch while an inferred one runs does not count twice.
        let n = d.counters("ml").unwrap().launches_detected;
        d.notify("ml", Notice::Launch, None, 1600).unwrap();
        assert_eq!(d.counters("ml").unwrap().launches_detected, n);
    }

    #[test]
    fn an_announced_launch_is_never_ended_by_inference() {
        // The deployed daemon: "office launched after 3339 ms" by inferred
        // readiness, then the launcher's own `launched` found no launch.
        let mut d = det();
        d.notify("maps", Notice::Launch, Some((100, 5)), 1000)
            .unwrap();
        // Quiet for far longer than the quiet window: still launching.
        let quiet = BTreeMap::new();
        for t in 1..20 {
            assert!(d.tick(&quiet, 1000 + t * 100).is_empty());
        }
        assert_eq!(d.launching(), vec!["maps"]);
        let ev = d.notify("maps", Notice::Launched, None, 4339).unwrap();
        assert!(matches!(
            ev[..],
            [Detected::LaunchEnded {
                how: LaunchEnd::Notified,
                latency_ms: 3339,
                ..
            }]
        ));
        // Detected at its exec, then announced: the launcher takes it over.
        d.on_exit(100, 9_000);
        let ev = d.on_exec(200, 6, 1, &exe("/usr/bin/maps"), 10_000);
        assert!(matches!(ev[..], [Detected::Launch { .. }, ..]), "{ev:?}");
        d.notify("maps", Notice::Launch, Some((200, 6)), 10_001)
            .unwrap();
        for t in 1..20 {
            assert!(d.tick(&quiet, 10_000 + t * 100).is_empty());
        }
        // The bound still ends it.
        let ev = d.tick(&quiet, 10_000 + cfg().timeout_ms);
        assert!(matches!(
            ev[..],
            [Detected::LaunchEnded {
                how: LaunchEnd::TimedOut,
                ..
            }]
        ));
    }

    #[test]
    fn an_app_still_computing_is_not_ready_however_little_it_reads() {
        // The deployed daemon found an office app ready 4.6 s after its exec
        // while it converted its document until 7.2 s: a CPU-bound phase
        // reads nothing. Quiet now needs the CPU to rest too.
        let mut r = Readiness::new(cfg(), 0);
        let computing = Demand {
            pages: 0,
            cpu_ms: Some(95),
        };
        for t in 1..=30 {
            assert_eq!(r.step(t * 100, computing), Verdict::Launching);
        }
        let idle = Demand {
            pages: 0,
            cpu_ms: Some(2),
        };
        let mut v = Verdict::Launching;
        let mut t = 30;
        while v == Verdict::Launching {
            t += 1;
            v = r.step(t * 100, idle);
        }
        assert_eq!(v, Verdict::Ready { at_ms: 3000 });
        // Per pid CPU deltas, as pages: a counter that went down counts from 0.
        let c = |ms| DemandCounters {
            cpu_ms: ms,
            ..Default::default()
        };
        let prev = BTreeMap::from([(1, c(100)), (2, c(50))]);
        let cur = BTreeMap::from([(1, c(160)), (2, c(10)), (3, c(5))]);
        assert_eq!(demand_cpu_ms(&prev, &cur), 60 + 10 + 5);
    }

    #[test]
    fn demand_from_counters() {
        let c = |r, f| DemandCounters {
            read_bytes: r,
            faults: f,
            cpu_ms: 0,
        };
        let prev = BTreeMap::from([(1, c(4096 * 10, 5)), (2, c(0, 100))]);
        let cur = BTreeMap::from([(1, c(4096 * 30, 7)), (3, c(8192, 1))]);
        // pid 1: 20 pages + 2 faults; pid 3 new: 2 pages + 1 fault; pid 2 gone.
        assert_eq!(demand_pages(&prev, &cur), 25);
        // A counter that went down (reused pid) counts from zero.
        let cur = BTreeMap::from([(2, c(4096, 3))]);
        assert_eq!(demand_pages(&prev, &cur), 4);
    }

    #[test]
    fn defaults_from_the_device_curve() {
        let curve = ThroughputCurve::phone_default();
        let c = ReadinessConfig::for_device(&curve);
        assert_eq!(c.quiet_floor_pages_per_s, 2441);
        assert_eq!(c.quiet_ms, 1000);
        assert_eq!(c.timeout_ms, 30_000);
        assert!(c.validate().is_ok());
        let bad = ReadinessConfig {
            timeout_ms: 1000,
            ..c
        };
        assert!(bad.validate().is_err());
        // The profile's longest pause between first accesses lengthens the window.
        let mut p = crate::profile::synthetic("a", 3, 1, 0);
        for (k, f) in p.files.iter_mut().enumerate() {
            f.first_access_us = [0, 100_000, 2_600_000, 2_700_000][k.min(3)];
        }
        assert_eq!(quiet_window_ms(&c, Some(&p), 100), 2600);
        assert_eq!(quiet_window_ms(&c, None, 100), 1000);
    }

    proptest! {
        /// Any demand series ends in Ready or TimedOut by the timeout, never later.
        #[test]
        fn launch_always_ends(
            series in proptest::collection::vec((1u64..400, 0u64..20_000), 1..400),
            floor in 0u64..5000,
            quiet in 1u64..3000,
            extra in 1u64..20_000,
        ) {
            let cfg = ReadinessConfig { quiet_floor_pages_per_s: floor, quiet_cpu_permille: DEFAULT_QUIET_CPU_PERMILLE, quiet_ms: quiet, timeout_ms: quiet + extra };
            let mut r = Readiness::new(cfg, 1000);
            let mut now = 1000;
            let mut verdict = Verdict::Launching;
            for (dt, pages) in series {
                now += dt;
                verdict = r.step(now, Demand::pages(pages));
                if let Verdict::Ready { at_ms } = verdict {
                    prop_assert!(at_ms >= 1000 && at_ms + quiet <= now);
                }
            }
            // Keep the clock going with any demand: it must end by the timeout.
            let mut now2 = now;
            while verdict == Verdict::Launching {
                now2 += 100;
                verdict = r.step(now2, Demand::pages(u64::MAX / 4));
                prop_assert!(now2 <= 1000 + cfg.timeout_ms + 100);
            }
            match verdict {
                Verdict::Ready { at_ms } => prop_assert!(at_ms < 1000 + cfg.timeout_ms),
                Verdict::TimedOut { at_ms } => prop_assert_eq!(at_ms, 1000 + cfg.timeout_ms),
                Verdict::Launching => unreachable!(),
            }
            // The verdict is final.
            prop_assert_eq!(r.step(now2 + 1, Demand::pages(0)), verdict);
        }

        /// A steady rate above the floor never reads as ready, whatever the tick lengths.
        #[test]
        fn steady_high_rate_never_ready(
            floor in 0u64..100_000,
            excess in 1u64..100_000,
            ticks in proptest::collection::vec(1u64..1000, 1..300),
        ) {
            let cfg = ReadinessConfig { quiet_floor_pages_per_s: floor, quiet_cpu_permille: DEFAULT_QUIET_CPU_PERMILLE, quiet_ms: 200, timeout_ms: 60_000 };
            let mut r = Readiness::new(cfg, 0);
            let rate = floor + excess; // pages/s
            let mut now = 0u64;
            for dt in ticks {
                now += dt;
                // The rate over dt, rounded up: above the floor.
                let pages = (rate * dt).div_ceil(1000);
                let v = r.step(now, Demand::pages(pages));
                prop_assert!(!matches!(v, Verdict::Ready { .. }), "ready at {} with rate {}", now, rate);
            }
        }

        /// The detector ends every launch through ticks alone.
        #[test]
        fn detector_launches_end(demands in proptest::collection::vec(0u64..10_000, 1..200)) {
            let mut d = det();
            d.on_exec(100, 5, 1, &exe("/usr/bin/maps"), 0);
            let mut ended = 0;
            let mut now = 0;
            for p in demands.iter().copied().chain((0..200).map(|_| 10_000u64)) {
                now += 100;
                ended += d.tick(&BTreeMap::from([("maps".to_string(), Demand::pages(p))]), now).len();
            }
            prop_assert_eq!(ended, 1);
            prop_assert!(d.launching().is_empty());
        }
    }
}
