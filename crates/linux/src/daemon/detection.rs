//! Launch detection in the daemon: declared apps' launches found without a
//! launcher, from the kernel's exec/fork/exit events (the process
//! connector, [`crate::procevents`]), their readiness inferred from the
//! app's read and fault rate, and each detected launch recorded into the
//! app's profile (docs/daemon.md, "Launch detection without a launcher").
//!
//! The decisions are the core's ([`appflow_core::detect::Detector`]: which
//! app a process belongs to, when a launch starts and when it is ready);
//! this module reads the kernel and turns what the detector concluded into
//! [`Action`]s the run loop applies to the scheduler, the same events a
//! launcher's `appflow notify` sends.
//!
//! A listener thread blocks on the connector and handles each exec at once:
//! it reads the process's exe, command line and cgroup, and when they match
//! a declared app it starts the launch recorder's fanotify watch
//! ([`crate::recorder::LaunchWatch`]) before passing the event on, so the
//! recording misses only the opens made before the event was handled. The
//! loop thread owns the detector and drains the thread's messages each tick.
//! Without the connector (no `CONFIG_PROC_EVENTS`, or no `CAP_NET_ADMIN`
//! before Linux 6.6) the domain's processes are listed every tick instead,
//! and a new pid is treated as an exec at that tick.

use crate::procevents::{ProcEvent, ProcEvents};
use crate::readers::{self, demand::read_demand};
use crate::recorder::{LaunchWatch, Recording};
use appflow_core::detect::{
    cgroup_relative, demand_cpu_ms, demand_pages, in_memory_cgroup, Demand, DemandCounters,
    Detected, Detector, LaunchEnd, MatcherSpec, Matchers, Notice, ProcObservation, ReadinessConfig,
};
use appflow_core::profile::LaunchProfile;
use appflow_core::storage::ThroughputCurve;
use appflow_core::InputError;
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the loop must do after detection: a scheduler event (as `notify`
/// would send it) or a finished recording to merge.
#[derive(Debug)]
pub enum Action {
    /// `launch`, with the exec'ed process.
    Launch {
        /// App.
        app: String,
        /// The exec'ed process (pid, start time).
        pid: u32,
        /// Its start time.
        start_time: u64,
    },
    /// The launch was inferred ready.
    Launched {
        /// App.
        app: String,
    },
    /// Every process of the app exited.
    Exited {
        /// App.
        app: String,
    },
    /// A launch left unrecorded (a settled profile) ended; count it in
    /// the app's profile.
    NotRecorded {
        /// App.
        app: String,
    },
    /// A recorded launch ended; merge it into the app's profile.
    Recorded {
        /// App.
        app: String,
        /// What it showed.
        recording: Box<Recording>,
    },
}

/// Per-app figures for `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppReport {
    /// Launches detected (inferred from an exec, or notified).
    pub launches_detected: u64,
    /// Exec to readiness of the last ended launch, ms.
    pub last_launch_ms: Option<u64>,
    /// Bytes the preload worker streamed for the last launch.
    pub last_launch_stream_bytes: Option<u64>,
    /// The last launch's exec to the loop acting on it (the scheduler's
    /// `launch`), ms: how long detection took.
    pub last_launch_detect_ms: Option<u64>,
    /// The last launch's exec to the first byte its stream read, ms (None
    /// when the stream read nothing, or has not yet).
    pub last_launch_first_byte_ms: Option<u64>,
}

/// Counters of the detection path (metrics and status).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DetectStats {
    /// "connector" or "scan".
    pub source: &'static str,
    /// Process events handled.
    pub events: u64,
    /// Times the connector lost events (a rescan followed).
    pub overruns: u64,
    /// Launches recorded and merged.
    pub recorded: u64,
    /// Launches not recorded: another recording was running, or the watch
    /// could not start.
    pub not_recorded: u64,
    /// Launches of apps with a settled profile left unrecorded
    /// (`detect.relearn_every`).
    pub settled: u64,
    /// Recordings discarded (timed out, or the recorder failed).
    pub discarded: u64,
}

/// A process of the domain as read from /proc.
#[derive(Debug, Default)]
struct Obs {
    exe: Option<String>,
    cmdline: Option<String>,
    cgroup: Option<String>,
}

impl Obs {
    fn view(&self) -> ProcObservation<'_> {
        ProcObservation {
            exe: self.exe.as_deref(),
            cmdline: self.cmdline.as_deref(),
            cgroup: self.cgroup.as_deref(),
        }
    }
}

/// What to read about a process and whether it is in the domain.
#[derive(Clone)]
struct Reader {
    proc_root: PathBuf,
    matchers: Matchers,
    /// Which keys some matcher uses (only those are read).
    by_exe: bool,
    by_cmdline: bool,
    by_cgroup: bool,
    /// The domain's memory cgroup (relative form), for a cgroup domain.
    domain: Option<String>,
}

impl Reader {
    fn cgroup_text(&self, pid: u32) -> Option<String> {
        readers::read_text(&self.proc_root.join(pid.to_string()).join("cgroup")).ok()
    }

    /// Fills in what the matchers look at besides the cgroup: the
    /// executable and the command line, each only if some app is declared by it.
    fn read_names(&self, pid: u32, o: &mut Obs) {
        if self.by_exe {
            o.exe = readers::read_exe(&self.proc_root, pid)
                .ok()
                .map(|p| p.to_string_lossy().into_owned());
        }
        if self.by_cmdline {
            o.cmdline = readers::read_cmdline(&self.proc_root, pid)
                .ok()
                .map(|v| v.join(" "));
        }
    }

    /// Reads a process, with the declared app it matches; a matched
    /// process outside the domain is returned blank (it is not an app of
    /// this domain) with none.
    fn read(&self, pid: u32) -> (Obs, Option<usize>) {
        let mut o = Obs::default();
        self.read_names(pid, &mut o);
        if self.by_cgroup {
            o.cgroup = self.cgroup_text(pid);
        }
        let Some(app) = self.matchers.match_process(&o.view()) else {
            return (o, None);
        };
        if let Some(d) = &self.domain {
            if o.cgroup.is_none() {
                o.cgroup = self.cgroup_text(pid);
            }
            if !o.cgroup.as_deref().is_some_and(|t| in_memory_cgroup(t, d)) {
                return (Obs::default(), None);
            }
        }
        (o, Some(app))
    }

    /// What the listener reads about an exec'ed process: `None` when a
    /// cgroup domain's process is outside it (the domain's cgroup is read
    /// first, so the rest of the machine's execs cost one read, not the
    /// three of stat, exe and command line); else the observation and
    /// the declared app it matches.
    fn read_exec(&self, pid: u32) -> Option<(Obs, Option<usize>)> {
        let Some(d) = &self.domain else {
            return Some(self.read(pid));
        };
        let cgroup = self.cgroup_text(pid)?;
        if !in_memory_cgroup(&cgroup, d) {
            return None;
        }
        let mut o = Obs {
            cgroup: Some(cgroup),
            ..Obs::default()
        };
        self.read_names(pid, &mut o);
        let matched = self.matchers.match_process(&o.view());
        Some((o, matched))
    }
}

enum Msg {
    Exec {
        pid: u32,
        start_time: u64,
        ppid: u32,
        at_ms: u64,
        obs: Obs,
        watch: Option<Box<LaunchWatch>>,
    },
    Fork {
        parent: u32,
        child: u32,
    },
    Exit {
        pid: u32,
        at_ms: u64,
    },
    Overrun,
}

use crate::actuators::monotonic_ns;

struct Listener {
    rx: mpsc::Receiver<Msg>,
    stop: Arc<AtomicBool>,
    /// Signalled with `stop`: the thread sleeps in `poll` with no timeout
    /// and this wakes it.
    wake: Arc<EventFd>,
    handle: Option<JoinHandle<()>>,
}

enum Source {
    Connector(Listener),
    /// The domain's processes listed every tick.
    Scan,
}

/// The listener thread: connector events in, messages out.
fn listen(
    mut ev: ProcEvents,
    reader: Reader,
    tx: mpsc::Sender<Msg>,
    (stop, watching, wake): (Arc<AtomicBool>, Arc<AtomicBool>, Arc<EventFd>),
    learn: Learning,
    origin_mono_ns: u64,
    on_app_exec: Arc<dyn Fn() + Send + Sync>,
) {
    let to_ms = |ns: u64| ns.saturating_sub(origin_mono_ns) / 1_000_000;
    // The thread wakes for each batch of events: at once, so a launch's
    // recording starts before the app's first file opens. (Waking at most
    // every 10 ms instead cost the recording the first 27 of 120 files of
    // the test app and saved nothing measurable at idle: 0.28 against 0.30 %
    // of a core more than without detection, on this loaded machine.)
    while !stop.load(Ordering::SeqCst) {
        let mut pfds = [
            libc::pollfd {
                fd: std::os::fd::AsFd::as_fd(&ev).as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds. No timeout: the thread wakes only for
        // events and for `stop` (signalled on `wake`), not to check a flag.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), 2, -1) };
        if n <= 0 || pfds[0].revents == 0 {
            continue;
        }
        for e in ev.drain() {
            if !e.is_process() {
                continue;
            }
            let mut app_exec = false;
            let msg = match e {
                ProcEvent::Overrun => Msg::Overrun,
                ProcEvent::Fork {
                    parent_tgid,
                    child_tgid,
                    ..
                } => Msg::Fork {
                    parent: parent_tgid,
                    child: child_tgid,
                },
                ProcEvent::Exit { tgid, time_ns, .. } => Msg::Exit {
                    pid: tgid,
                    at_ms: to_ms(time_ns),
                },
                ProcEvent::Exec { tgid, time_ns, .. } => {
                    // Outside a cgroup domain: no app of this domain (a
                    // child an app forked is followed from its fork).
                    let Some((obs, matched)) = reader.read_exec(tgid) else {
                        continue;
                    };
                    let record = matched.is_some_and(|i| learn.records(reader.matchers.name(i)));
                    let matched = matched.is_some();
                    // One read of /proc/PID/stat for both identity and parent.
                    let Ok(stat) = readers::read_stat(&reader.proc_root, tgid) else {
                        continue; // gone already; its exit follows
                    };
                    let (start_time, ppid) = (stat.start_time, stat.ppid);
                    app_exec = matched;
                    // Start recording at once (one recording at a time).
                    let watch = if record
                        && watching
                            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                            .is_ok()
                    {
                        let ago = Duration::from_nanos(monotonic_ns().saturating_sub(time_ns));
                        let start = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
                        match LaunchWatch::start(&reader.proc_root, tgid, start) {
                            Ok(w) => Some(Box::new(w)),
                            Err(e) => {
                                tracing::warn!(error = %e, pid = tgid, "launch recording could not start");
                                watching.store(false, Ordering::SeqCst);
                                None
                            }
                        }
                    } else {
                        None
                    };
                    Msg::Exec {
                        pid: tgid,
                        start_time,
                        ppid,
                        at_ms: to_ms(time_ns),
                        obs,
                        watch,
                    }
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
            if app_exec {
                on_app_exec();
            }
        }
    }
}

struct Recorder {
    app: String,
    watch: LaunchWatch,
}

/// Which launches are recorded (shared with the listener thread, which
/// starts a watch at the exec): none without `detect.learn_profiles`; else
/// every launch but those of apps whose settled profile skips this one
/// (`LaunchProfile::records_next_launch`, updated with the profiles).
#[derive(Clone)]
struct Learning {
    on: bool,
    skip: Arc<std::sync::Mutex<BTreeSet<String>>>,
}

impl Learning {
    fn records(&self, app: &str) -> bool {
        self.on && !self.skip.lock().map(|s| s.contains(app)).unwrap_or(false)
    }
}

/// The daemon's launch detection (one per daemon, owned by the loop).
pub struct Detection {
    detector: Detector,
    reader: Reader,
    source: Source,
    /// A recording's watch is running (shared with the listener thread).
    watching: Arc<AtomicBool>,
    recording: Option<Recorder>,
    /// Launches to record: (app, exec'ed pid), matched with the listener's
    /// watches or started late.
    want_watch: Vec<(String, u32)>,
    learn: Learning,
    /// `detect.relearn_every`.
    relearn_every: u32,
    /// Apps launching now whose launch is not recorded (their profile is
    /// settled): counted in the profile when the launch ends.
    unrecorded: BTreeSet<String>,
    base: ReadinessConfig,
    tick_ms: u64,
    prev_demand: BTreeMap<String, BTreeMap<u32, DemandCounters>>,
    /// Per app: the worker's `loads` count when its last launch began, until its stream completes.
    stream_pending: BTreeMap<String, u64>,
    stream_bytes: BTreeMap<String, u64>,
    /// Per app, its last launch's exec time (daemon ms) and the delay to
    /// the loop acting on it.
    launch_exec: BTreeMap<String, (u64, u64)>,
    /// Per app, exec to its last stream's first byte, ms.
    first_byte: BTreeMap<String, u64>,
    /// The daemon's clock origin on CLOCK_MONOTONIC, ns (the worker
    /// reports its first byte on that clock).
    origin_mono_ns: u64,
    /// What the kernel's events said about processes since the last
    /// [`Detection::take_changes`].
    changes: ProcessChanges,
    /// Detection counters.
    pub stats: DetectStats,
}

/// Process events seen since the loop last asked: whether the domain's
/// process list may have changed. Forks and exits are machine-wide (the
/// loop checks their pids against the domain's); execs reach the loop only
/// for the domain's processes in a cgroup domain (every exec in a system
/// domain).
#[derive(Debug, Default)]
pub struct ProcessChanges {
    /// Some process the listener forwarded exec'ed.
    pub exec: bool,
    /// Parents of forks and pids that exited.
    pub pids: Vec<u32>,
    /// Events were lost (the connector overran).
    pub lost: bool,
}

/// How detection is set up (from the configuration).
pub struct DetectSetup<'a> {
    /// The declared apps.
    pub apps: &'a [MatcherSpec],
    /// /proc.
    pub proc_root: &'a Path,
    /// The domain's memory cgroup directory (cgroup domains).
    pub domain_cgroup: Option<&'a Path>,
    /// `detect.quiet_floor_pages_per_s` (0 = from the curve).
    pub quiet_floor_pages_per_s: u64,
    /// `detect.quiet_cpu_permille`.
    pub quiet_cpu_permille: u32,
    /// `detect.quiet_ms`.
    pub quiet_ms: u64,
    /// `daemon.launch_timeout_ms`.
    pub launch_timeout_ms: u64,
    /// `daemon.tick_ms`.
    pub tick_ms: u64,
    /// `detect.learn_profiles`, and not a dry run.
    pub learn: bool,
    /// `detect.relearn_every`.
    pub relearn_every: u32,
    /// The storage curve (calibration or default).
    pub curve: &'a ThroughputCurve,
    /// The daemon's clock origin (its ms are since then).
    pub origin: Instant,
    /// Called by the listener thread after it passes on the exec of a
    /// declared app: the daemon's loop then handles it at once
    /// ([`Detection::step`] between ticks) instead of at its next tick, so the launch
    /// stream starts while the app is still starting up.
    pub on_app_exec: Arc<dyn Fn() + Send + Sync>,
}

/// Mount points of the cgroup file systems (for the relative cgroup paths
/// /proc/PID/cgroup shows).
fn cgroup_mounts(proc_root: &Path) -> Vec<String> {
    readers::read_mountinfo(proc_root)
        .map(|ms| {
            ms.into_iter()
                .filter(|m| m.fs_type == "cgroup" || m.fs_type == "cgroup2")
                .map(|m| m.mount_point.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Cgroup directories (`/sys/fs/cgroup/memory/a`) in the form
/// /proc/PID/cgroup shows them (`/a`), by this machine's cgroup mounts.
pub fn cgroups_relative(paths: &[String], proc_root: &Path) -> Vec<String> {
    let mounts = cgroup_mounts(proc_root);
    let refs: Vec<&str> = mounts.iter().map(String::as_str).collect();
    paths
        .iter()
        .map(|p| appflow_core::detect::cgroup_relative(p, &refs))
        .collect()
}

/// The declared apps compiled with this machine's cgroup mounts (the one
/// matcher the scan and the detector share).
pub fn compile_matchers(apps: &[MatcherSpec], proc_root: &Path) -> Result<Matchers, InputError> {
    let mounts = cgroup_mounts(proc_root);
    let refs: Vec<&str> = mounts.iter().map(String::as_str).collect();
    Matchers::new(apps, &refs)
}

impl Detection {
    /// Sets detection up: the connector (with its listener thread) when it
    /// can be opened, else per-tick scans.
    pub fn new(s: &DetectSetup<'_>) -> Result<Self, InputError> {
        let matchers = compile_matchers(s.apps, s.proc_root)?;
        let mounts = cgroup_mounts(s.proc_root);
        let refs: Vec<&str> = mounts.iter().map(String::as_str).collect();
        let mut base = ReadinessConfig::for_device(s.curve);
        if s.quiet_floor_pages_per_s > 0 {
            base.quiet_floor_pages_per_s = s.quiet_floor_pages_per_s;
        }
        base.quiet_cpu_permille = s.quiet_cpu_permille;
        base.quiet_ms = s.quiet_ms;
        base.timeout_ms = s.launch_timeout_ms;
        let reader = Reader {
            proc_root: s.proc_root.to_path_buf(),
            by_exe: s.apps.iter().any(|a| !a.exe.is_empty()),
            by_cmdline: s.apps.iter().any(|a| !a.cmdline.is_empty()),
            by_cgroup: s.apps.iter().any(|a| !a.cgroup.is_empty()),
            matchers: matchers.clone(),
            domain: s
                .domain_cgroup
                .map(|d| cgroup_relative(&d.to_string_lossy(), &refs)),
        };
        let detector = Detector::new(matchers, base)?;
        let watching = Arc::new(AtomicBool::new(false));
        let learn = Learning {
            on: s.learn,
            skip: Default::default(),
        };
        let (source, name) = match ProcEvents::open() {
            Ok(ev) => {
                if let Err(e) = ev.drop_thread_events() {
                    tracing::info!(error = %e, "no socket filter on the process connector; thread events are dropped in user space");
                }
                let (tx, rx) = mpsc::channel();
                let stop = Arc::new(AtomicBool::new(false));
                let wake = Arc::new(
                    EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                        .map_err(|e| InputError::new(format!("detection thread: eventfd: {e}")))?,
                );
                let flags = (stop.clone(), watching.clone(), wake.clone());
                let (r, learn, on_app_exec) =
                    (reader.clone(), learn.clone(), s.on_app_exec.clone());
                let origin_mono_ns = monotonic_ns()
                    .saturating_sub(s.origin.elapsed().as_nanos().min(u64::MAX as u128) as u64);
                let handle = std::thread::Builder::new()
                    .name("appflow-procevents".into())
                    .spawn(move || listen(ev, r, tx, flags, learn, origin_mono_ns, on_app_exec))
                    .map_err(|e| InputError::new(format!("detection thread: {e}")))?;
                (
                    Source::Connector(Listener {
                        rx,
                        stop,
                        wake,
                        handle: Some(handle),
                    }),
                    "connector",
                )
            }
            Err(e) => {
                tracing::warn!(error = %e, feature = "cn_proc",
                    "process connector unavailable; launches are detected by listing the domain's processes every tick");
                (Source::Scan, "scan")
            }
        };
        Ok(Self {
            detector,
            reader,
            source,
            watching,
            recording: None,
            want_watch: Vec::new(),
            learn,
            relearn_every: s.relearn_every,
            unrecorded: BTreeSet::new(),
            base,
            tick_ms: s.tick_ms,
            prev_demand: BTreeMap::new(),
            stream_pending: BTreeMap::new(),
            stream_bytes: BTreeMap::new(),
            launch_exec: BTreeMap::new(),
            first_byte: BTreeMap::new(),
            origin_mono_ns: monotonic_ns()
                .saturating_sub(s.origin.elapsed().as_nanos().min(u64::MAX as u128) as u64),
            changes: ProcessChanges::default(),
            stats: DetectStats {
                source: name,
                ..Default::default()
            },
        })
    }

    /// Whether every exec, fork and exit reaches the detector (the process
    /// connector), so that the loop may rescan the domain only when they
    /// say it changed. False when it lists the processes every tick.
    pub fn follows_processes(&self) -> bool {
        matches!(self.source, Source::Connector(_))
    }

    /// The process events since the last call.
    pub fn take_changes(&mut self) -> ProcessChanges {
        std::mem::take(&mut self.changes)
    }

    /// The readiness rule in force (before per-app lengthening).
    pub fn readiness(&self) -> ReadinessConfig {
        self.base
    }

    /// Adopts the processes running now (never counted as launches).
    pub fn adopt_running(&mut self, pids: &[u32]) {
        let root = self.reader.proc_root.clone();
        for &pid in pids {
            let Some(start) = crate::actuators::read_start_time(&root, pid) else {
                continue;
            };
            let ppid = readers::read_ppid(&root, pid).unwrap_or(0);
            let (obs, _) = self.reader.read(pid);
            self.detector.adopt(pid, start, ppid, &obs.view());
        }
    }

    /// Per-app quiet windows from the profiles (a pause the app is known
    /// to make while launching is not its readiness).
    /// Also which apps' next launch goes unrecorded
    /// (`LaunchProfile::records_next_launch`).
    pub fn set_profiles(&mut self, profiles: &[LaunchProfile]) {
        if let Ok(mut skip) = self.learn.skip.lock() {
            *skip = profiles
                .iter()
                .filter(|p| !p.records_next_launch(self.relearn_every))
                .map(|p| p.app.clone())
                .collect();
        }
        for p in profiles {
            let mut cfg = self.base;
            cfg.timeout_ms = appflow_core::detect::launch_timeout_ms(self.base.timeout_ms, Some(p));
            cfg.quiet_ms = appflow_core::detect::quiet_window_ms(&cfg, Some(p), self.tick_ms);
            // Only declared apps are detected; others are skipped.
            let _ = self.detector.set_readiness(&p.app, cfg);
        }
    }

    /// The app a process belongs to, by identity (pid and start time).
    pub fn app_of(&self, pid: u32, start_time: u64) -> Option<&str> {
        (self.detector.start_time_of(pid) == Some(start_time))
            .then(|| self.detector.app_of(pid))
            .flatten()
    }

    /// Figures for `status`.
    pub fn report(&self, app: &str) -> AppReport {
        let c = self.detector.counters(app).unwrap_or_default();
        AppReport {
            launches_detected: c.launches_detected,
            last_launch_ms: c.last_launch_ms,
            last_launch_stream_bytes: self.stream_bytes.get(app).copied(),
            last_launch_detect_ms: self.launch_exec.get(app).map(|(_, d)| *d),
            last_launch_first_byte_ms: self.first_byte.get(app).copied(),
        }
    }

    /// Whether the app is declared (detected).
    pub fn knows(&self, app: &str) -> bool {
        self.reader.matchers.index(app).is_some()
    }

    /// Whether `app` has a launch in progress (inferred or notified).
    pub fn is_launching(&self, app: &str) -> bool {
        self.detector.launching().contains(&app)
    }

    /// A launcher's notification: it overrides inference. Returns what to
    /// do (a recording to merge when `launched` ends a recorded launch).
    pub fn notify(
        &mut self,
        app: &str,
        notice: Notice,
        pid: Option<(u32, u64)>,
        now_ms: u64,
        worker_loads: u64,
        profile_of: &dyn Fn(&str) -> Option<LaunchProfile>,
    ) -> Vec<Action> {
        if !self.knows(app) {
            return Vec::new();
        }
        let found = self
            .detector
            .notify(app, notice, pid, now_ms)
            .unwrap_or_default();
        let out = self.conclude(found, worker_loads, profile_of, false, now_ms);
        self.start_late_watches();
        out
    }

    /// One tick (`tick` true): handles the kernel's process events (or lists
    /// the domain's processes), infers readiness of launching apps from
    /// their demand, and samples a running recording. Between ticks (`tick`
    /// false, when the listener passed on an app's exec): only the events,
    /// so that a launch acts at once. `domain_pids` lists the domain's
    /// processes (used after lost events and without the connector).
    /// `profile_of` gives an app's stored profile (for a recording's end).
    pub fn step(
        &mut self,
        now_ms: u64,
        domain_pids: &dyn Fn() -> Vec<u32>,
        worker: &crate::actuators::preload::WorkerStats,
        profile_of: &dyn Fn(&str) -> Option<LaunchProfile>,
        tick: bool,
    ) -> Vec<Action> {
        let (mut found, watches) = self.drain(now_ms, domain_pids);
        if tick {
            // Demand of launching apps since the previous tick.
            let mut demand = BTreeMap::new();
            for app in self
                .detector
                .launching()
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
            {
                let cur: BTreeMap<u32, DemandCounters> = self
                    .detector
                    .pids_of(&app)
                    .into_iter()
                    .filter_map(|p| read_demand(&self.reader.proc_root, p).ok().map(|c| (p, c)))
                    .collect();
                let prev = self.prev_demand.remove(&app).unwrap_or_default();
                demand.insert(
                    app.clone(),
                    Demand {
                        pages: demand_pages(&prev, &cur),
                        cpu_ms: Some(demand_cpu_ms(&prev, &cur)),
                    },
                );
                self.prev_demand.insert(app, cur);
            }
            found.extend(self.detector.tick(&demand, now_ms));
            if let Some(r) = self.recording.as_mut() {
                let pids = self.detector.pids_of(&r.app);
                r.watch.sample(&pids);
            }
        }
        let out = self.conclude(found, worker.loads, profile_of, true, now_ms);
        self.adopt_watches(watches);
        if !tick {
            return out;
        }
        // Launch streams completed since.
        let done: Vec<(String, u64, Option<u64>)> = self
            .stream_pending
            .iter()
            .filter_map(|(app, base)| {
                worker
                    .last_stream
                    .get(app)
                    .filter(|(n, _)| n > base)
                    .map(|(_, b)| {
                        (
                            app.clone(),
                            *b,
                            worker.last_stream_first_ns.get(app).copied(),
                        )
                    })
            })
            .collect();
        for (app, bytes, first_ns) in done {
            self.stream_pending.remove(&app);
            if let (Some(ns), Some((exec_ms, _))) = (first_ns, self.launch_exec.get(&app)) {
                let at_ms = ns.saturating_sub(self.origin_mono_ns) / 1_000_000;
                self.first_byte
                    .insert(app.clone(), at_ms.saturating_sub(*exec_ms));
            }
            self.stream_bytes.insert(app, bytes);
        }
        out
    }

    /// The listener's messages since the last call, to the detector.
    fn drain(
        &mut self,
        now_ms: u64,
        domain_pids: &dyn Fn() -> Vec<u32>,
    ) -> (Vec<Detected>, Vec<(u32, LaunchWatch)>) {
        let mut found: Vec<Detected> = Vec::new();
        let mut watches: Vec<(u32, LaunchWatch)> = Vec::new();
        let mut rescan = false;
        let msgs: Vec<Msg> = match &self.source {
            Source::Connector(l) => l.rx.try_iter().collect(),
            Source::Scan => {
                rescan = true;
                Vec::new()
            }
        };
        for m in msgs {
            self.stats.events += 1;
            match m {
                Msg::Overrun => {
                    self.stats.overruns += 1;
                    self.changes.lost = true;
                    rescan = true;
                }
                Msg::Fork { parent, child } => {
                    self.changes.pids.push(parent);
                    if self.detector.app_of(parent).is_some() {
                        if let Some(st) =
                            crate::actuators::read_start_time(&self.reader.proc_root, child)
                        {
                            self.detector.on_fork(parent, child, st);
                            self.feed_recording(child);
                        }
                    }
                }
                Msg::Exit { pid, at_ms } => {
                    self.changes.pids.push(pid);
                    found.extend(self.detector.on_exit(pid, at_ms.min(now_ms)))
                }
                Msg::Exec {
                    pid,
                    start_time,
                    ppid,
                    at_ms,
                    obs,
                    watch,
                } => {
                    self.changes.exec = true;
                    found.extend(self.detector.on_exec(
                        pid,
                        start_time,
                        ppid,
                        &obs.view(),
                        at_ms.min(now_ms),
                    ));
                    self.feed_recording(pid);
                    if let Some(w) = watch {
                        watches.push((pid, *w));
                    }
                }
            }
        }
        if rescan {
            found.extend(self.rescan(&domain_pids(), now_ms));
        }
        (found, watches)
    }

    /// A watch the listener started for the exec that was a launch is its
    /// recording; watches of other execs are dropped. Then the launches
    /// whose exec had no watch get one.
    fn adopt_watches(&mut self, watches: Vec<(u32, LaunchWatch)>) {
        for (pid, w) in watches {
            let wanted = self.recording.is_none() && self.want_watch.iter().any(|(_, p)| *p == pid);
            if wanted {
                let app = self.detector.app_of(pid).unwrap_or_default().to_string();
                self.want_watch.retain(|(_, p)| *p != pid);
                self.recording = Some(Recorder { app, watch: w });
            } else {
                w.abandon();
                self.watching.store(false, Ordering::SeqCst);
            }
        }
        self.start_late_watches();
    }

    /// After lost events, or without the connector: the domain's processes
    /// now against the ones tracked. Without the connector a new process is
    /// taken as an exec at this tick (so it can be a launch); after lost
    /// events it is adopted (its exec time is unknown).
    fn rescan(&mut self, pids: &[u32], now_ms: u64) -> Vec<Detected> {
        let root = self.reader.proc_root.clone();
        let live: Vec<(u32, u64)> = pids
            .iter()
            .filter_map(|&p| crate::actuators::read_start_time(&root, p).map(|s| (p, s)))
            .collect();
        let as_exec = matches!(self.source, Source::Scan);
        let mut out = self.detector.retain_live(&live, now_ms);
        for (p, s) in live {
            if self.detector.start_time_of(p) == Some(s) {
                continue;
            }
            let ppid = readers::read_ppid(&root, p).unwrap_or(0);
            let (obs, _) = self.reader.read(p);
            if as_exec {
                out.extend(self.detector.on_exec(p, s, ppid, &obs.view(), now_ms));
            } else {
                self.detector.adopt(p, s, ppid, &obs.view());
            }
        }
        out
    }

    /// Starts the recording of a launch no watch was started for at its
    /// exec (no connector, or a launch notified before its exec was seen).
    fn start_late_watches(&mut self) {
        let wanted = std::mem::take(&mut self.want_watch);
        for (app, pid) in wanted {
            let busy = self.recording.is_some()
                || self
                    .watching
                    .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err();
            if busy || pid == 0 {
                if !busy {
                    self.watching.store(false, Ordering::SeqCst);
                }
                self.stats.not_recorded += 1;
                let why = if pid == 0 {
                    "the launch was announced without --pid and its exec was not seen"
                } else {
                    "another launch is being recorded (one at a time)"
                };
                tracing::info!(app, reason = why, "launch not recorded");
                continue;
            }
            match LaunchWatch::start(&self.reader.proc_root, pid, Instant::now()) {
                Ok(watch) => self.recording = Some(Recorder { app, watch }),
                Err(e) => {
                    self.watching.store(false, Ordering::SeqCst);
                    self.stats.not_recorded += 1;
                    tracing::warn!(app, error = %e, "launch recording could not start");
                }
            }
        }
    }

    /// Turns the detector's conclusions into actions. `inferred`: they come
    /// from kernel events (scheduler events are wanted), not from a
    /// notification (the scheduler has that one already).
    fn conclude(
        &mut self,
        found: Vec<Detected>,
        worker_loads: u64,
        profile_of: &dyn Fn(&str) -> Option<LaunchProfile>,
        inferred: bool,
        now_ms: u64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        for d in found {
            match d {
                Detected::Launch {
                    app, pid, at_ms, ..
                } => {
                    self.stream_pending.insert(app.clone(), worker_loads);
                    self.stream_bytes.insert(app.clone(), 0);
                    self.launch_exec
                        .insert(app.clone(), (at_ms, now_ms.saturating_sub(at_ms)));
                    self.first_byte.remove(&app);
                    self.prev_demand.remove(&app);
                    if self.learn.records(&app) {
                        self.want_watch.push((app.clone(), pid));
                    } else if self.learn.on {
                        self.stats.settled += 1;
                        self.unrecorded.insert(app.clone());
                    }
                    if inferred {
                        let start_time = self.detector.start_time_of(pid).unwrap_or(0);
                        out.push(Action::Launch {
                            app,
                            pid,
                            start_time,
                        });
                    }
                }
                Detected::LaunchEnded {
                    app,
                    how,
                    latency_ms,
                } => {
                    self.prev_demand.remove(&app);
                    if self.unrecorded.remove(&app) {
                        out.push(Action::NotRecorded { app: app.clone() });
                    }
                    // An app whose processes all exit during its launch did
                    // its work: a batch app (a conversion, a query, a
                    // render) is ready when it exits.
                    if inferred && matches!(how, LaunchEnd::Inferred | LaunchEnd::Exited) {
                        out.push(Action::Launched { app: app.clone() });
                    }
                    if self.recording.as_ref().is_some_and(|r| r.app == app) {
                        let r = self.recording.take().expect("checked");
                        self.watching.store(false, Ordering::SeqCst);
                        if how == LaunchEnd::TimedOut {
                            self.stats.discarded += 1;
                            r.watch.abandon();
                            continue;
                        }
                        let profile = profile_of(&app);
                        match r.watch.finish(latency_ms, profile.as_ref()) {
                            Ok(rec) => out.push(Action::Recorded {
                                app,
                                recording: Box::new(rec),
                            }),
                            Err(e) => {
                                self.stats.discarded += 1;
                                tracing::warn!(app, error = %e, "launch recording failed; profile unchanged");
                            }
                        }
                    }
                }
                Detected::AppExited { app } => {
                    if inferred {
                        out.push(Action::Exited { app });
                    }
                }
                Detected::Foreground { .. } => {}
            }
        }
        out
    }

    /// A process the detector attributed: when it belongs to the app being
    /// recorded, the recording's tree learns it.
    fn feed_recording(&self, pid: u32) {
        if let Some(r) = &self.recording {
            if self.detector.app_of(pid) == Some(r.app.as_str()) {
                r.watch.add_pids(&[pid]);
            }
        }
    }

    /// Tells a running recording which devices read ahead more than their
    /// own window now (`entries`: the launch readahead's journal, each
    /// device's `read_ahead_kb` with its own value in KiB), so that the
    /// learned launch does not take the raised read-around for the app's
    /// reads ([`LaunchWatch::note_readahead`]).
    pub fn note_readahead(&mut self, entries: &[crate::journal::Entry]) {
        let Some(r) = self.recording.as_mut() else {
            return;
        };
        use crate::actuators::readahead::{kib_bytes, read_window_bytes};
        for e in entries {
            let (Some(own), Some(now)) = (kib_bytes(&e.original), read_window_bytes(&e.path))
            else {
                continue;
            };
            r.watch.note_readahead(&e.path, own, now);
        }
    }

    /// Counts a merged recording.
    pub fn note_recorded(&mut self) {
        self.stats.recorded += 1;
    }
}

impl Drop for Detection {
    fn drop(&mut self) {
        if let Some(r) = self.recording.take() {
            r.watch.abandon();
        }
        if let Source::Connector(l) = &mut self.source {
            l.stop.store(true, Ordering::SeqCst);
            let _ = l.wake.write(1);
            if let Some(h) = l.handle.take() {
                let _ = h.join();
            }
            // Watches the thread started and the loop never took.
            while let Ok(m) = l.rx.try_recv() {
                if let Msg::Exec { watch: Some(w), .. } = m {
                    w.abandon();
                }
            }
        }
    }
}

/// Matcher specs from the configuration's `[[app]]` entries.
pub fn specs(apps: &[crate::config::AppDecl]) -> Vec<MatcherSpec> {
    apps.iter()
        .map(|a| MatcherSpec {
            name: a.name.clone(),
            exe: a.exe.clone(),
            cmdline: a.cmdline.clone(),
            cgroup: a.cgroup.clone(),
        })
        .collect()
}
