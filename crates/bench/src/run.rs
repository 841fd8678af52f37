//! The experiment engine: one *session* is one policy in one repetition of
//! one scenario, from a clean domain (every app stopped, the apps' files
//! dropped from the page cache) to its end (daemon stopped, apps stopped).
//!
//! Cold launches are made cold by `posix_fadvise(POSIX_FADV_DONTNEED)` on
//! every file of every app in the loop file system at the start of each
//! session (scoped to the testbed's files; the machine's other caches are
//! untouched; pages a process still maps or locks stay, as on a phone).
//! The daemon, when the policy has one, starts after that drop, so its
//! before-launch preloading is part of what is measured; the preload
//! worker is throttled and charged inside the domain like the apps.

use crate::counters::{self, Delta};
use crate::device::Device;
use crate::launch::{Outcome, Proc, Readiness};
use crate::live::{check_interrupted, sleep_checked, Domain, Leaf, ZramStats};
use crate::policy::{Daemon, DaemonSetup, Policy};
use crate::spec::{AppBody, AppClass, AppSpec, Ready};
use crate::synth::{self, Layout};
use anyhow::{Context, Result};
use appflow_core::report::LaunchKind;
use appflow_linux::readers::{read_cpu_stat, MemCgStat, MemCgroup};
pub use appflow_sim::trace::{EventKind, TraceEvent};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// oom_score_adj of the foreground app (Android FOREGROUND_APP_ADJ).
pub const FOREGROUND_ADJ: i32 = 0;
/// oom_score_adj of background apps (Android CACHED_APP_MIN_ADJ), so the
/// stock kernel's OOM killer picks background apps like lmkd would.
pub const BACKGROUND_ADJ: i32 = 900;

/// A scenario (the AppFlow paper §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Target cold launch with no background load (the baseline of the
    /// load slowdown, the AppFlow paper Fig. 4).
    Idle,
    /// Target cold launch with 5 small apps in the background.
    Low,
    /// ... with up to 15 small apps.
    Medium,
    /// ... with up to 15 small apps and 2 GB-scale apps.
    High,
    /// Every app launched twice; relaunches, cold relaunches, survivors.
    Multitask,
    /// Replay of an app-switch trace, compressed in time.
    Trace,
}

impl Scenario {
    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Idle => "idle",
            Scenario::Low => "low",
            Scenario::Medium => "medium",
            Scenario::High => "high",
            Scenario::Multitask => "multitask",
            Scenario::Trace => "trace",
        }
    }
    /// Whether it is a target cold launch under a load (low/medium/high).
    pub fn has_target(self) -> bool {
        matches!(
            self,
            Scenario::Idle | Scenario::Low | Scenario::Medium | Scenario::High
        )
    }
    /// Every scenario, in the order a run takes them.
    pub const ALL: [Scenario; 6] = [
        Scenario::Idle,
        Scenario::Low,
        Scenario::Medium,
        Scenario::High,
        Scenario::Multitask,
        Scenario::Trace,
    ];
    /// Parses a name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// One app of the bed.
pub struct App {
    /// Its spec.
    pub spec: AppSpec,
    /// Its layout (synthetic apps).
    pub layout: Option<Layout>,
    /// The resolved spec file the app process reads (synthetic apps).
    pub spec_file: PathBuf,
    /// Its leaf cgroups.
    pub leaf: Leaf,
    /// Files of a command app installed on the device (as the domain sees them).
    pub installed: Vec<PathBuf>,
}

impl App {
    /// Name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }
    /// The command line.
    pub fn argv(&self, binary: &Path, device: &Device, root: &Path) -> Vec<String> {
        match &self.spec.body {
            AppBody::Synthetic(_) => vec![
                binary.to_string_lossy().to_string(),
                "bench-app".into(),
                "--spec".into(),
                self.spec_file.to_string_lossy().to_string(),
                "--root".into(),
                root.to_string_lossy().to_string(),
                "--scale".into(),
                device.scale.to_string(),
                "--cpu-share".into(),
                device.cpu_share().to_string(),
            ],
            AppBody::Command(c) => {
                let home = root.join("apps").join(&self.spec.name);
                let home = home.to_string_lossy();
                c.argv.iter().map(|a| a.replace("{root}", &home)).collect()
            }
        }
    }
    /// How its readiness is seen.
    pub fn readiness(&self) -> Readiness {
        match &self.spec.body {
            AppBody::Synthetic(_) => Readiness::Line(
                regex::Regex::new(&format!("^{}$", synth::READY_LINE)).expect("static regex"),
            ),
            AppBody::Command(c) => match c.ready {
                Ready::Exit => Readiness::Exit,
                Ready::Stdout => {
                    Readiness::Line(regex::Regex::new(&c.ready_regex).expect("validated regex"))
                }
                Ready::File => Readiness::File(c.ready_file.clone().into()),
            },
        }
    }
    /// Its launch timeout.
    pub fn timeout(&self, default: Duration) -> Duration {
        match &self.spec.body {
            AppBody::Synthetic(_) => default,
            AppBody::Command(c) => Duration::from_millis(c.timeout_ms),
        }
    }
    /// Files of the app on the device (a synthetic app's, or what a command
    /// app installed).
    pub fn paths(&self) -> Vec<PathBuf> {
        match &self.layout {
            Some(l) => l.paths(),
            None => self.installed.clone(),
        }
    }
}

/// The testbed: the domain, the apps, the daemon setup.
pub struct Bed {
    /// The domain.
    pub domain: Domain,
    /// Apps in spec order.
    pub apps: Vec<App>,
    /// The `appflow` binary (for `bench-app` and `daemon`).
    pub binary: PathBuf,
    /// Logs of app processes and daemons.
    pub log_dir: PathBuf,
    /// Daemon configs, socket, state.
    pub daemon: DaemonSetup,
    /// Default launch timeout of synthetic apps.
    pub launch_timeout: Duration,
    /// Wait after the background load is launched, before the target.
    pub settle: Duration,
}

impl Bed {
    /// The app named `name`.
    pub fn app(&self, name: &str) -> Result<&App> {
        self.apps
            .iter()
            .find(|a| a.name() == name)
            .with_context(|| format!("no app named {name:?}"))
    }

    /// Drops every app file from the page cache (see the module docs).
    pub fn drop_app_caches(&self) {
        for a in &self.apps {
            for p in a.paths() {
                let _ = synth::drop_file_cache(&p);
            }
        }
    }

    fn sample(&self) -> counters::Sample {
        let mut s = counters::sample(&self.domain.roots.proc_root, &self.domain.roots.mem_root());
        // The domain reads through the flash device, not from the loop device.
        let st = self.domain.flash_stats();
        s.read_bytes = st.bytes();
        s.read_ios = st.requests.load(std::sync::atomic::Ordering::Relaxed);
        s
    }
}

/// A cgroup's memory.stat; zeros when it cannot be read (a leaf removed).
fn memcg_stat(path: &Path) -> MemCgStat {
    MemCgroup::open(path)
        .and_then(|c| c.stat())
        .unwrap_or_default()
}

/// One launch.
#[derive(Debug, Clone, Serialize)]
pub struct LaunchRecord {
    /// App.
    pub app: String,
    /// Exec (or switch request) to readiness, ms (to the timeout when timed out).
    pub ms: f64,
    /// Cold, warm or hot (a switch to a live app is warm or hot).
    pub kind: LaunchKind,
    /// A cold launch of an app that had been running in this session and
    /// was killed (a cold relaunch).
    pub after_kill: bool,
    /// The oracle's launch: its files cached, nothing else running.
    pub oracle: bool,
    /// Reached readiness.
    pub ready: bool,
    /// Timed out.
    pub timed_out: bool,
    /// Died before readiness (how), if so.
    pub died: Option<String>,
}

/// The domain around the target's cold launch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AtLaunch {
    /// Memory free in the domain just before the launch: the limit minus
    /// memory.usage_in_bytes.
    pub free_bytes: u64,
    /// Pages of the target's own files (its leaf's memory.stat
    /// workingset_refault_file) re-read during the launch after reclaim had
    /// evicted them (the AppFlow paper Fig. 8b).
    pub own_file_refault_pages: u64,
    /// Bytes the flash device served during the launch.
    pub read_bytes: u64,
    /// What the kernel did during the launch (reclaim scans and steals by
    /// type, swap, limit hits, faults): where a loaded launch's time goes.
    pub kernel: counters::Delta,
    /// Time the target's leaf waited for CPU quota during the launch (its
    /// cpu.stat throttled time): how far its phone core bounded it.
    pub cpu_throttled_ms: f64,
}

/// The raw values around a target launch whose deltas make an [`AtLaunch`].
struct Probe {
    free_bytes: u64,
    own_file_refault_pages: u64,
    counters: counters::Sample,
    throttled_ns: u64,
}

impl Probe {
    /// The launch between `self` (just before) and `after`.
    fn until(&self, after: &Probe) -> AtLaunch {
        let kernel = counters::delta(&self.counters, &after.counters);
        AtLaunch {
            free_bytes: self.free_bytes,
            own_file_refault_pages: after
                .own_file_refault_pages
                .saturating_sub(self.own_file_refault_pages),
            read_bytes: kernel.read_bytes,
            kernel,
            cpu_throttled_ms: after.throttled_ns.saturating_sub(self.throttled_ns) as f64 / 1e6,
        }
    }
}

/// One timeline point (sampled every 50 ms during a target launch).
#[derive(Debug, Clone, Serialize)]
pub struct TimelinePoint {
    /// ms since the launch started.
    pub t_ms: f64,
    /// Domain memory.usage_in_bytes.
    pub usage_bytes: u64,
    /// Page cache in the domain.
    pub cache_bytes: u64,
    /// Anonymous memory in the domain.
    pub rss_bytes: u64,
    /// Swapped-out bytes of the domain.
    pub swap_bytes: u64,
    /// Bytes read from storage by the domain since the launch started.
    pub read_bytes: u64,
    /// The domain's swappiness (0 while the daemon is in efficiency-first mode).
    pub swappiness: u64,
    /// The daemon's reclaim mode when its status says it.
    pub mode: Option<String>,
}

/// One session's results.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// Scenario.
    pub scenario: Scenario,
    /// Policy.
    pub policy: Policy,
    /// Repetition.
    pub rep: u32,
    /// The measured launches (the target's cold launch; multitask round 2; trace launches).
    pub launches: Vec<LaunchRecord>,
    /// Launches that built the background load.
    pub load_launches: Vec<LaunchRecord>,
    /// Kernel counter deltas over the session.
    pub delta: Delta,
    /// Apps killed by someone other than the testbed (daemon or kernel OOM killer).
    pub killed: Vec<String>,
    /// The foreground app was killed at some point.
    pub foreground_killed: bool,
    /// Background apps alive at the end of the load (multitask: end of round 1).
    pub survivors: u64,
    /// Peak resident bytes of files of apps not launched yet in the session
    /// (what the preloader holds, readahead included; measured with mincore).
    pub preload_peak_bytes: u64,
    /// Peak standby bytes the daemon reports holding (status `preload.standby_bytes`).
    pub daemon_standby_peak_bytes: Option<u64>,
    /// The daemon's switch prepaging at the end of the session (status
    /// `prepage`: switches prepaged, bytes asked and advised, precision,
    /// recall), for policies that prepage switches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_prepage: Option<serde_json::Value>,
    /// The daemon's cold marking at the end of the session (status `cold`:
    /// apps marked, bytes asked and marked), for policies that mark
    /// background apps cold (Ariadne).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_cold: Option<serde_json::Value>,
    /// zram at the end of the load.
    pub zram: ZramStats,
    /// The domain at the target's launch (target-launch scenarios).
    pub at_launch: Option<AtLaunch>,
    /// Timeline of one target launch.
    pub timeline: Vec<TimelinePoint>,
    /// Why the session did not run, if it did not.
    pub error: Option<String>,
}

/// What a session ends with.
#[derive(Debug, Clone)]
pub struct SessionEnd {
    /// Kernel counter deltas over the session.
    pub delta: Delta,
    /// Apps killed by someone other than the testbed.
    pub killed: Vec<String>,
    /// The foreground app was killed at some point.
    pub foreground_killed: bool,
    /// Peak resident bytes of apps not launched yet (mincore).
    pub preload_peak_bytes: u64,
    /// Peak standby bytes the daemon reported.
    pub daemon_standby_peak_bytes: Option<u64>,
    /// The daemon's status `prepage` before it stopped (prepaging policies).
    pub daemon_prepage: Option<serde_json::Value>,
    /// The daemon's status `cold` before it stopped (cold-marking policies).
    pub daemon_cold: Option<serde_json::Value>,
}

/// A session: one policy, one repetition.
pub struct Session<'a> {
    bed: &'a mut Bed,
    procs: BTreeMap<String, Proc>,
    daemon: Option<Daemon>,
    daemon_res: Option<crate::domain::Resource>,
    ever: BTreeSet<String>,
    fg: Option<String>,
    counted: BTreeSet<u32>,
    killed: Vec<String>,
    fg_killed: bool,
    preload_peak: u64,
    daemon_standby_peak: Option<u64>,
    start: counters::Sample,
}

impl<'a> Session<'a> {
    /// Cleans the domain and starts the policy's daemon.
    pub fn begin(bed: &'a mut Bed, policy: Policy, label: &str) -> Result<Self> {
        check_interrupted()?;
        bed.drop_app_caches();
        let start = bed.sample();
        let mut s = Session {
            bed,
            procs: BTreeMap::new(),
            daemon: None,
            daemon_res: None,
            ever: BTreeSet::new(),
            fg: None,
            counted: BTreeSet::new(),
            killed: Vec::new(),
            fg_killed: false,
            preload_peak: 0,
            daemon_standby_peak: None,
            start,
        };
        if policy.needs_daemon() {
            let cfg = s.bed.daemon.config_path(policy);
            let log = s
                .bed
                .log_dir
                .join(format!("daemon-{}-{label}.log", policy.name()));
            let d = Daemon::start(
                &s.bed.binary,
                &cfg,
                &s.bed.daemon.socket(),
                &log,
                &s.bed.daemon.cpu_cgroup,
            )?;
            s.daemon_res = s.bed.domain.track_process(d.pid())?;
            s.daemon = Some(d);
        }
        Ok(s)
    }

    fn reap(&mut self) {
        for (name, p) in self.procs.iter_mut() {
            if !self.counted.contains(&p.pid) && p.killed_externally() {
                self.counted.insert(p.pid);
                self.killed.push(name.clone());
                if self.fg.as_deref() == Some(name) {
                    self.fg_killed = true;
                }
            }
        }
    }

    fn notify(&self, event: &str, app: &str, pid: Option<u32>) {
        if let Some(d) = &self.daemon {
            d.notify(event, app, pid);
        }
    }

    /// Resident bytes of files of apps not launched yet in this session.
    pub fn checkpoint_preload(&mut self) {
        let mut b = 0;
        for a in &self.bed.apps {
            if !self.ever.contains(a.name()) {
                b += a
                    .paths()
                    .iter()
                    .map(|p| synth::resident_bytes(p))
                    .sum::<u64>();
            }
        }
        self.preload_peak = self.preload_peak.max(b);
        if let Some(d) = &self.daemon {
            if let Ok(v) = d.request(r#"{"cmd":"status"}"#) {
                let held = v["preload"]["standby_bytes"].as_u64();
                if let Some(h) = held {
                    self.daemon_standby_peak = Some(self.daemon_standby_peak.unwrap_or(0).max(h));
                }
            }
        }
    }

    /// Brings `app` to the foreground: a cold launch if it is not running,
    /// a switch if it is. With `timeline`, samples the domain every 50 ms.
    pub fn launch(
        &mut self,
        app: &str,
        timeline: Option<&mut Vec<TimelinePoint>>,
    ) -> Result<LaunchRecord> {
        check_interrupted()?;
        self.reap();
        if let Some(prev) = self.fg.take() {
            if prev != app {
                if let Some(p) = self.procs.get_mut(&prev) {
                    if p.alive() {
                        p.set_oom_score_adj(BACKGROUND_ADJ);
                        let pid = p.pid;
                        self.notify("background", &prev, Some(pid));
                    }
                }
            }
        }
        let a = self.bed.app(app)?;
        let timeout = a.timeout(self.bed.launch_timeout);
        let alive = self.procs.get_mut(app).is_some_and(|p| p.alive());
        let sampler = timeline
            .is_some()
            .then(|| Sampler::start(self.bed, self.daemon.is_some()));
        let (outcome, ms, kind) = if alive {
            let p = self.procs.get_mut(app).expect("alive");
            p.set_oom_score_adj(FOREGROUND_ADJ);
            let pid = p.pid;
            if let Some(d) = &self.daemon {
                d.notify("foreground", app, Some(pid));
            }
            let kind = self.switch_kind(app)?;
            let p = self.procs.get_mut(app).expect("alive");
            let (o, ms) = p.switch_to(timeout)?;
            (o, ms, kind)
        } else {
            self.procs.remove(app);
            self.checkpoint_preload();
            let a = self.bed.app(app)?;
            let argv = a.argv(
                &self.bed.binary,
                &self.bed.domain.device,
                &self.bed.domain.mnt,
            );
            let readiness = a.readiness();
            if let Readiness::File(f) = &readiness {
                let _ = std::fs::remove_file(f);
            }
            let log = self.bed.log_dir.join(format!("{app}.log"));
            let (mut p, t0) = crate::launch::spawn(app, &argv, &a.leaf, FOREGROUND_ADJ, &log)?;
            self.notify("launch", app, Some(p.pid));
            let (o, ms) = p.wait_ready(&readiness, t0, timeout);
            self.procs.insert(app.to_string(), p);
            (o, ms, LaunchKind::Cold)
        };
        let after_kill = kind == LaunchKind::Cold && self.ever.contains(app);
        if let (Some(s), Some(tl)) = (sampler, timeline) {
            *tl = s.stop();
        }
        if outcome == Outcome::Ready {
            let pid = self.procs.get(app).map(|p| p.pid);
            if kind == LaunchKind::Cold {
                self.notify("launched", app, pid);
                self.notify("foreground", app, pid);
            }
        }
        self.ever.insert(app.to_string());
        self.fg = Some(app.to_string());
        self.reap();
        if let Some(d) = self.daemon.as_mut() {
            if !d.alive() {
                anyhow::bail!("the daemon died during the session (see its log in the run dir)");
            }
        }
        Ok(LaunchRecord {
            app: app.to_string(),
            ms,
            kind,
            after_kill,
            oracle: false,
            ready: outcome == Outcome::Ready,
            timed_out: outcome == Outcome::TimedOut,
            died: match outcome {
                Outcome::Died(s) => Some(s),
                _ => None,
            },
        })
    }

    /// The domain's free memory and kernel counters, the `app` leaf's file
    /// re-faults and CPU throttling now (deltas make [`AtLaunch`]).
    fn launch_probe(&self, app: &str) -> Result<Probe> {
        let a = self.bed.app(app)?;
        let usage = MemCgroup::open(&self.bed.domain.roots.mem_root())
            .and_then(|c| c.usage_bytes())
            .unwrap_or(0);
        Ok(Probe {
            free_bytes: self
                .bed
                .domain
                .device
                .app_memory_bytes
                .saturating_sub(usage),
            own_file_refault_pages: memcg_stat(&a.leaf.mem).refault_file,
            counters: self.bed.sample(),
            throttled_ns: read_cpu_stat(&a.leaf.cpu)
                .map(|c| c.throttled_ns)
                .unwrap_or(0),
        })
    }

    /// Warm or hot: what of a live app is gone just before a switch to it
    /// (its swapped-out share of anonymous memory, from its leaf's
    /// memory.stat, and the share of its launch file bytes no longer cached).
    fn switch_kind(&self, app: &str) -> Result<LaunchKind> {
        let a = self.bed.app(app)?;
        let stat = memcg_stat(&a.leaf.mem);
        let (swap, rss) = (stat.swap_bytes, stat.anon_bytes);
        let swapped = swap as f64 / (swap + rss).max(1) as f64;
        let gone = match &a.layout {
            Some(l) => {
                let cached: u64 = l.paths().iter().map(|p| synth::resident_bytes(p)).sum();
                1.0 - (cached as f64 / l.launch_file_bytes().max(1) as f64).min(1.0)
            }
            None => 0.0,
        };
        Ok(LaunchKind::classify(true, swapped, gone))
    }

    /// The oracle launch: one launch to cache the files, stop, then the
    /// measured launch with nothing else running.
    pub fn oracle(&mut self, app: &str) -> Result<LaunchRecord> {
        let _ = self.launch(app, None)?;
        if let Some(mut p) = self.procs.remove(app) {
            p.stop();
        }
        self.fg = None;
        let mut r = self.launch(app, None)?;
        r.oracle = true;
        if let Some(mut p) = self.procs.remove(app) {
            p.stop();
        }
        // It stays in `ever`: its cached files are not preloaded bytes.
        self.fg = None;
        Ok(r)
    }

    /// Stops the app `name` (an `exit` event of a trace).
    pub fn exit_app(&mut self, name: &str) {
        self.reap();
        if let Some(mut p) = self.procs.remove(name) {
            let pid = p.pid;
            p.stop();
            self.notify("exit", name, Some(pid));
        }
        if self.fg.as_deref() == Some(name) {
            self.fg = None;
        }
    }

    /// Background apps alive now.
    pub fn alive_background(&mut self) -> u64 {
        self.reap();
        let fg = self.fg.clone();
        self.procs
            .iter_mut()
            .filter(|(n, _)| Some(n.as_str()) != fg.as_deref())
            .filter_map(|(_, p)| p.alive().then_some(()))
            .count() as u64
    }

    /// zram statistics now.
    pub fn zram(&self) -> ZramStats {
        self.bed.domain.zram_stats()
    }

    /// Sleeps (checking for signals) and reaps kills.
    pub fn settle(&mut self, d: Duration) -> Result<()> {
        sleep_checked(d)?;
        self.reap();
        Ok(())
    }

    /// Ends the session: stops the daemon (it restores its settings), then every app.
    pub fn end(mut self) -> Result<SessionEnd> {
        self.reap();
        let delta = counters::delta(&self.start, &self.bed.sample());
        let mut daemon_prepage = None;
        let mut daemon_cold = None;
        if let Some(mut d) = self.daemon.take() {
            // Switch prepaging's and cold marking's counters, for the
            // policies that have them.
            if let Ok(v) = d.request(r#"{"cmd":"status"}"#) {
                let policy = v["policy"]
                    .as_str()
                    .and_then(|n| appflow_core::policy::lookup(n).ok());
                if policy.is_some_and(|p| p.switch == appflow_core::policy::SwitchStrategy::Prepage)
                {
                    daemon_prepage = Some(v["prepage"].clone());
                }
                if policy.is_some_and(|p| {
                    p.reclaim == appflow_core::policy::ReclaimStrategy::HotnessAware
                }) {
                    daemon_cold = Some(v["cold"].clone());
                }
            }
            d.stop();
        }
        if let Some(r) = self.daemon_res.take() {
            self.bed.domain.untrack(&r)?;
        }
        for (_, mut p) in std::mem::take(&mut self.procs) {
            p.stop();
        }
        Ok(SessionEnd {
            delta,
            killed: self.killed.clone(),
            foreground_killed: self.fg_killed,
            preload_peak_bytes: self.preload_peak,
            daemon_standby_peak_bytes: self.daemon_standby_peak,
            daemon_prepage,
            daemon_cold,
        })
    }
}

/// Samples the domain every 50 ms on a thread.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<TimelinePoint>>,
}

impl Sampler {
    fn start(bed: &Bed, with_daemon: bool) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let mem = bed.domain.roots.mem_root();
        let flash = bed.domain.flash_stats();
        let socket = with_daemon.then(|| bed.daemon.socket());
        let handle = std::thread::spawn(move || {
            let t0 = Instant::now();
            let cg = MemCgroup::open(&mem).ok();
            let read0 = flash.bytes();
            let mut out = Vec::new();
            let mut k = 0u64;
            loop {
                let stat = cg.as_ref().and_then(|c| c.stat().ok()).unwrap_or_default();
                let mode = match (&socket, k % 2) {
                    (Some(sock), 0) => daemon_mode(sock),
                    _ => out.last().and_then(|p: &TimelinePoint| p.mode.clone()),
                };
                out.push(TimelinePoint {
                    t_ms: t0.elapsed().as_secs_f64() * 1000.0,
                    usage_bytes: cg.as_ref().and_then(|c| c.usage_bytes().ok()).unwrap_or(0),
                    cache_bytes: stat.file_bytes,
                    rss_bytes: stat.anon_bytes,
                    swap_bytes: stat.swap_bytes,
                    read_bytes: flash.bytes().saturating_sub(read0),
                    swappiness: cg
                        .as_ref()
                        .and_then(|c| c.swappiness().ok().flatten())
                        .map_or(0, u64::from),
                    mode,
                });
                k += 1;
                if s2.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            out
        });
        Sampler { stop, handle }
    }

    fn stop(self) -> Vec<TimelinePoint> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap_or_default()
    }
}

/// The daemon's reclaim mode from its status reply, when it reports one
/// (the first string value under a key containing "mode").
fn daemon_mode(socket: &Path) -> Option<String> {
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    s.write_all(b"{\"cmd\":\"status\"}\n").ok()?;
    let mut line = String::new();
    std::io::BufReader::new(&s).read_line(&mut line).ok()?;
    let v: serde_json::Value = serde_json::from_str(&line).ok()?;
    find_mode(&v)
}

fn find_mode(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if k.contains("mode") {
                    if let Some(s) = x.as_str() {
                        return Some(s.to_string());
                    }
                }
            }
            m.values().find_map(find_mode)
        }
        _ => None,
    }
}

/// The background load of a target-launch scenario (the AppFlow paper §6.1):
/// GB-scale apps first, then small ones.
pub fn background(apps: &[App], scenario: Scenario, target: &str) -> Vec<String> {
    let set: Vec<(&str, AppClass)> = apps.iter().map(|a| (a.name(), a.spec.class)).collect();
    background_of(&set, scenario, target)
}

/// [`background`] over (name, class) pairs in set order (pure; also used to
/// describe the workload to the simulator).
pub fn background_of(apps: &[(&str, AppClass)], scenario: Scenario, target: &str) -> Vec<String> {
    let of = |c: AppClass| -> Vec<String> {
        apps.iter()
            .filter(|a| a.1 == c && a.0 != target)
            .map(|a| a.0.to_string())
            .collect()
    };
    let (small, gb) = (of(AppClass::Small), of(AppClass::Gb));
    let (n_small, n_gb) = match scenario {
        Scenario::Idle => (0, 0),
        Scenario::Low => (5, 0),
        Scenario::Medium => (15, 0),
        Scenario::High => (15, 2),
        Scenario::Multitask | Scenario::Trace => (0, 0),
    };
    gb.into_iter()
        .take(n_gb)
        .chain(small.into_iter().take(n_small))
        .collect()
}

/// The multitask order: every app, GB-scale apps spread among the small ones.
pub fn multitask_order(apps: &[App]) -> Vec<String> {
    let set: Vec<(&str, AppClass)> = apps.iter().map(|a| (a.name(), a.spec.class)).collect();
    multitask_order_of(&set)
}

/// [`multitask_order`] over (name, class) pairs in set order.
pub fn multitask_order_of(apps: &[(&str, AppClass)]) -> Vec<String> {
    let gb: Vec<&str> = apps
        .iter()
        .filter(|a| a.1 == AppClass::Gb)
        .map(|a| a.0)
        .collect();
    let small: Vec<&str> = apps
        .iter()
        .filter(|a| a.1 == AppClass::Small)
        .map(|a| a.0)
        .collect();
    let mut out = Vec::new();
    let every = (small.len() / gb.len().max(1)).max(1);
    let mut g = gb.iter();
    for (i, s) in small.iter().enumerate() {
        if i % every == 0 {
            if let Some(x) = g.next() {
                out.push(x.to_string());
            }
        }
        out.push(s.to_string());
    }
    out.extend(g.map(|x| x.to_string()));
    out
}

/// An empty measurement of one session (filled in as it runs).
pub fn measurement(policy: Policy, scenario: Scenario, rep: u32) -> Measurement {
    Measurement {
        scenario,
        policy,
        rep,
        launches: Vec::new(),
        load_launches: Vec::new(),
        delta: Delta::default(),
        killed: Vec::new(),
        foreground_killed: false,
        survivors: 0,
        preload_peak_bytes: 0,
        daemon_standby_peak_bytes: None,
        daemon_prepage: None,
        daemon_cold: None,
        zram: ZramStats::default(),
        at_launch: None,
        timeline: Vec::new(),
        error: None,
    }
}

fn finish(m: &mut Measurement, s: Session<'_>) -> Result<()> {
    let end = s.end()?;
    m.daemon_standby_peak_bytes = end.daemon_standby_peak_bytes;
    m.daemon_prepage = end.daemon_prepage;
    m.daemon_cold = end.daemon_cold;
    m.delta = end.delta;
    m.killed = end.killed;
    m.foreground_killed = end.foreground_killed;
    m.preload_peak_bytes = end.preload_peak_bytes;
    Ok(())
}

/// One target cold launch under a background load.
pub fn run_target(
    bed: &mut Bed,
    policy: Policy,
    scenario: Scenario,
    target: &str,
    rep: u32,
) -> Result<Measurement> {
    let mut m = measurement(policy, scenario, rep);
    let label = format!("{}-{target}-r{rep}", scenario.name());
    let bg = background(&bed.apps, scenario, target);
    let settle = bed.settle;
    let mut s = Session::begin(bed, policy, &label)?;
    if policy == Policy::Oracle {
        m.launches.push(s.oracle(target)?);
    } else {
        for b in &bg {
            m.load_launches.push(s.launch(b, None)?);
        }
        s.settle(settle)?;
        m.zram = s.zram();
        s.checkpoint_preload();
        let before = s.launch_probe(target)?;
        let mut tl = Vec::new();
        m.launches.push(s.launch(target, Some(&mut tl))?);
        m.at_launch = Some(before.until(&s.launch_probe(target)?));
        m.timeline = tl;
        // Background apps (the load) still alive after the target launched.
        m.survivors = s.alive_background();
    }
    finish(&mut m, s)?;
    Ok(m)
}

/// Multitask rounds: every app launched in order, then again; the second
/// round is measured (switches to survivors, cold relaunches of the killed).
pub fn run_multitask(bed: &mut Bed, policy: Policy, rep: u32) -> Result<Measurement> {
    let mut m = measurement(policy, Scenario::Multitask, rep);
    let order = multitask_order(&bed.apps);
    let mut s = Session::begin(bed, policy, &format!("multitask-r{rep}"))?;
    if policy == Policy::Oracle {
        for a in &order {
            m.launches.push(s.oracle(a)?);
        }
    } else {
        for a in &order {
            m.load_launches.push(s.launch(a, None)?);
        }
        s.settle(Duration::from_millis(500))?;
        m.survivors = s.alive_background();
        m.zram = s.zram();
        for a in &order {
            m.launches.push(s.launch(a, None)?);
        }
    }
    finish(&mut m, s)?;
    Ok(m)
}

/// Reads an app-usage trace with the simulator's reader (format:
/// `appflow_sim::trace`, docs/sim.md), accepting the testbed's extra event
/// `exit` (the app is stopped). Keeps `user` (the first user when None) and
/// its `open` and `exit` events: a `close` (home screen) needs no action,
/// since the next open backgrounds the app.
pub fn read_trace(path: &Path, user: Option<&str>) -> Result<Vec<TraceEvent>> {
    let all = appflow_sim::trace::read_events(path, true)?;
    let want = match user {
        Some(u) => u.to_string(),
        None => all.first().map(|e| e.user.clone()).unwrap_or_default(),
    };
    Ok(all
        .into_iter()
        .filter(|e| e.user == want && e.kind != EventKind::Close)
        .collect())
}

/// Maps trace app names onto the bed's apps: an exact (case-insensitive)
/// name match first; otherwise, with `hash`, a deterministic FNV-1a choice
/// among the bed's apps (so a simulator trace of 60+ catalogue apps replays
/// on the testbed's set); without it, an error naming the app.
pub fn map_trace_apps(events: &mut [TraceEvent], names: &[String], hash: bool) -> Result<()> {
    for e in events.iter_mut() {
        if let Some(n) = names.iter().find(|n| n.eq_ignore_ascii_case(&e.app)) {
            e.app = n.clone();
        } else if hash && !names.is_empty() {
            let i = (appflow_core::rng::fnv1a(e.app.to_ascii_lowercase().as_bytes())
                % names.len() as u64) as usize;
            e.app = names[i].clone();
        } else {
            return Err(appflow_core::InputError::new(format!(
                "trace app {:?} has no spec in the app set (add one with --app FILE, or use --trace-map hash)",
                e.app
            ))
            .into());
        }
    }
    Ok(())
}

/// Replays trace events, `compress` times faster than recorded, with at
/// least `min_gap` between events.
pub fn run_trace(
    bed: &mut Bed,
    policy: Policy,
    rep: u32,
    events: &[TraceEvent],
    compress: f64,
    min_gap: Duration,
) -> Result<Measurement> {
    let mut m = measurement(policy, Scenario::Trace, rep);
    let mut s = Session::begin(bed, policy, &format!("trace-r{rep}"))?;
    if policy == Policy::Oracle {
        let mut seen = BTreeSet::new();
        for e in events.iter().filter(|e| e.kind == EventKind::Open) {
            if seen.insert(e.app.clone()) {
                m.launches.push(s.oracle(&e.app)?);
            }
        }
    } else {
        let t0 = Instant::now();
        let first_ms = events.first().map(|e| e.ts_ms).unwrap_or(0);
        let mut last = Duration::ZERO;
        for e in events {
            let t_secs = e.ts_ms.saturating_sub(first_ms) as f64 / 1000.0;
            let due = Duration::from_secs_f64(t_secs / compress).max(last + min_gap);
            let now = t0.elapsed();
            if due > now {
                s.settle(due - now)?;
            }
            last = t0.elapsed();
            if e.kind == EventKind::Open {
                m.launches.push(s.launch(&e.app, None)?);
            } else {
                s.exit_app(&e.app);
            }
        }
        m.survivors = s.alive_background();
        m.zram = s.zram();
    }
    finish(&mut m, s)?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_reader_validates_and_filters_user() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.csv");
        std::fs::write(
            &p,
            "user,timestamp,app,event\n# comment\nu1,100000,llm,open\nu2,101000,chat,launch\n\nu1,160500,Chat,foreground\nu1,170000,chat,close\nu1,200000,llm,exit\n",
        )
        .unwrap();
        let mut ev = read_trace(&p, None).unwrap();
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[1].ts_ms - ev[0].ts_ms, 60_500);
        assert_eq!(ev[2].kind, EventKind::Exit);
        assert_eq!(read_trace(&p, Some("u2")).unwrap().len(), 1);
        map_trace_apps(&mut ev, &["llm".into(), "chat".into()], false).unwrap();
        assert_eq!(ev[1].app, "chat");
        let mut other = vec![TraceEvent {
            user: "u".into(),
            ts_ms: 0,
            app: "TikTok".into(),
            kind: EventKind::Open,
        }];
        assert!(map_trace_apps(&mut other.clone(), &["llm".into()], false).is_err());
        map_trace_apps(&mut other, &["llm".into(), "chat".into()], true).unwrap();
        assert!(other[0].app == "llm" || other[0].app == "chat");
        let tsv = d.path().join("t.tsv");
        std::fs::write(&tsv, "alice\t1704096000000\tTikTok\topen\n").unwrap();
        assert_eq!(read_trace(&tsv, None).unwrap()[0].app, "TikTok");
        std::fs::write(&p, "user,timestamp,app,event\nu1,x,llm,open\n").unwrap();
        let e = read_trace(&p, None).unwrap_err().to_string();
        assert!(e.contains("timestamp") && e.contains("t.csv:2"), "{e}");
        std::fs::write(&p, "u1,5,llm,open\nu1,4,llm,open\n").unwrap();
        assert!(read_trace(&p, None)
            .unwrap_err()
            .to_string()
            .contains("goes back in time"));
        std::fs::write(&p, "u1,1,llm,jump\n").unwrap();
        assert!(read_trace(&p, None)
            .unwrap_err()
            .to_string()
            .contains("jump"));
        std::fs::write(&p, "u1,1,llm\n").unwrap();
        assert!(read_trace(&p, None)
            .unwrap_err()
            .to_string()
            .contains("4 columns"));
    }

    #[test]
    fn find_mode_in_status() {
        let v = serde_json::json!({"ok": true, "reclaim": {"mode": "efficiency_first"}});
        assert_eq!(find_mode(&v).as_deref(), Some("efficiency_first"));
        assert_eq!(find_mode(&serde_json::json!({"ok": true})), None);
    }
}
