//! Preparing a built domain for measurement: the apps' files and leaf
//! cgroups, the storage calibration inside the domain, the daemon's
//! per-policy configs (checked with `--check-config`), and the launch
//! profiles (recorded with `appflow record`, or from the synthetic specs).

use crate::device::Device;
use crate::live::{check_interrupted, Domain, Leaf};
use crate::options::BenchOptions;
use crate::policy::{self, DaemonSetup};
use crate::progress::{mib, Progress};
use crate::run::App;
use crate::spec::{self, AppBody, AppSpec};
use crate::synth::{self, Layout};
use anyhow::{bail, Context, Result};
use appflow_core::profile::LaunchProfile;
use appflow_core::storage::{CurvePoint, ThroughputCurve};
use appflow_linux::store::ProfileStore;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Block sizes and bytes of the in-domain calibration (O_DIRECT, random
/// offsets, one reader): about 0.2 s each on the phone preset's device.
const CALIBRATION_READS: &[(u64, u64)] = &[
    (4096, 8 << 20),
    (128 << 10, 128 << 20),
    (512 << 10, 256 << 20),
    (1 << 20, 384 << 20),
    (2 << 20, 384 << 20),
];

/// Block size and bytes of each of the two concurrent readers.
const CONCURRENT_READ: (u64, u64) = (1 << 20, 384 << 20);
/// The preload worker's stream measured on a phone core: reads of the
/// core's largest read size (`preload.max_read_bytes`, 2 MiB) through the
/// page cache, up to this many bytes of the largest app file.
const WORKER_READ: (u64, u64) = (2 << 20, 96 << 20);
/// Whether the idle class yields: a foreground reader (block, bytes;
/// O_DIRECT) while an idle-class reader (block, bytes; O_DIRECT, the
/// largest request the device takes) streams from another leaf.
const IDLE_YIELD: (u64, u64, u64, u64) = (128 << 10, 64 << 20, 1 << 20, 256 << 20);

/// The allocation test of the reclaim calibration: a leaf limited to
/// `.0` bytes writes `.1` bytes of app-like anonymous memory, so all but the
/// first `.0` are allocated only as fast as the kernel pages anonymous
/// memory out to zram (within the domain's CPU budget).
const RECLAIM_TEST: (u64, u64) = (16 << 20, 96 << 20);
/// The allocation test with no limit: the same 96 MiB, nothing reclaimed.
const ALLOC_TEST_BYTES: u64 = RECLAIM_TEST.1;
/// Runs of the allocation test (its first run on a fresh leaf measured up
/// to a third slower than the next ones here; the median is kept).
const ALLOC_TEST_RUNS: usize = 3;

/// The domain's anonymous reclaim throughput and the reclaimer's N_alloc
/// derived from it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ReclaimCalibration {
    /// Anonymous memory written per second while the kernel had to page
    /// the same amount out (zram), bytes/s.
    pub anon_reclaim_bytes_per_sec: f64,
    /// N_alloc: pages per 100 ms tick at that rate. The AppFlow paper §4.2.1 switches
    /// to file-only reclaim when allocation outpaces what reclaim can
    /// supply; on this domain anonymous reclaim supplies this much, so an
    /// allocation rate above it is a burst (the paper's 12,800 pages/100 ms
    /// is the same notion on a Pixel).
    pub alloc_threshold_pages: u64,
}

impl ReclaimCalibration {
    /// N_alloc from a measured anonymous reclaim throughput (at least 1 page).
    pub fn from_rate(anon_reclaim_bytes_per_sec: f64, tick_ms: u64) -> Self {
        let pages = anon_reclaim_bytes_per_sec * tick_ms as f64 / 1000.0 / 4096.0;
        Self {
            anon_reclaim_bytes_per_sec,
            alloc_threshold_pages: (pages.round() as u64).max(1),
        }
    }
}

/// How the launch profiles were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSource {
    /// `appflow record` on every app.
    Recorded,
    /// Written from the synthetic apps' known access pattern (command apps
    /// get none): asked for (`--profiles spec`, `failed` None), or because
    /// recording failed (`--profiles auto`; why in `failed`).
    FromSpec {
        /// Why recording failed, when it was tried.
        failed: Option<String>,
    },
}

impl ProfileSource {
    /// Its name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            ProfileSource::Recorded => "recorded",
            ProfileSource::FromSpec { .. } => "from-spec",
        }
    }

    /// What the report's table says when the profiles are not all
    /// recorded (None when they are).
    pub fn note(&self) -> Option<String> {
        match self {
            ProfileSource::Recorded => None,
            ProfileSource::FromSpec { failed: None } => Some(
                "written from the synthetic apps' specs (--profiles spec), not recorded; command apps have none"
                    .into(),
            ),
            ProfileSource::FromSpec { failed: Some(why) } => Some(format!(
                "NOT RECORDED: written from the synthetic apps' specs because `appflow record` failed ({why}); \
                 command apps have none"
            )),
        }
    }
}

/// Two readers at once, each in its own leaf.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConcurrentRead {
    /// Block size of both, bytes.
    pub block_bytes: u64,
    /// Each reader's bytes/s.
    pub each_bytes_per_sec: Vec<f64>,
    /// Their sum, bytes/s.
    pub sum_bytes_per_sec: f64,
}

/// A foreground reader while an idle-class reader streams from another
/// leaf ([`IDLE_YIELD`]): whether the device's idle class yields.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IdleYield {
    /// The foreground's block size (O_DIRECT, best-effort class), bytes.
    pub block_bytes: u64,
    /// The foreground alone (the calibration's point at that size), bytes/s.
    pub alone_bytes_per_sec: f64,
    /// The foreground beside the idle-class reader, bytes/s.
    pub beside_idle_bytes_per_sec: f64,
    /// The idle-class reader's block size (O_DIRECT), bytes.
    pub idle_block_bytes: u64,
    /// The idle-class reader over its run (it goes on after the
    /// foreground's end), bytes/s.
    pub idle_bytes_per_sec: f64,
}

/// What [`calibrate`] measured.
struct Calibrated {
    points: Vec<CurvePoint>,
    concurrent: Option<ConcurrentRead>,
    worker_read_bytes_per_sec: Option<f64>,
    idle_yield: Option<IdleYield>,
}

/// A domain ready for measurement.
pub struct Prepared {
    /// The apps with their leaves.
    pub apps: Vec<App>,
    /// Where the daemon of each policy lives.
    pub daemon: DaemonSetup,
    /// Daemon policies the daemon refused (or that it cannot run), with why.
    pub skipped: BTreeMap<String, String>,
    /// The storage measured inside the domain (O_DIRECT, random offsets).
    pub calibration: Vec<CurvePoint>,
    /// Two readers in different leaves at once ([`CONCURRENT_READ`]): their
    /// bytes/s summed, and each reader's.
    pub concurrent: Option<ConcurrentRead>,
    /// Anonymous reclaim measured in the domain on its CPU budget (None if
    /// it failed).
    pub reclaim: Option<ReclaimCalibration>,
    /// Reading through the page cache on a phone core as the preload
    /// worker streams ([`WORKER_READ`]), bytes/s.
    pub worker_read_bytes_per_sec: Option<f64>,
    /// A foreground reader beside an idle-class one (None if it failed).
    pub idle_yield: Option<IdleYield>,
    /// The apps' anonymous allocation on the phone core with no reclaim
    /// ([`ALLOC_TEST_BYTES`] in a leaf with no limit, median of
    /// [`ALLOC_TEST_RUNS`]), bytes/s: what faulting in and filling a launch's
    /// heap costs the app's core.
    pub anon_alloc_bytes_per_sec: Option<f64>,
    /// The phone core each leaf runs on, calibrated against the device's
    /// reclaim.
    pub cpu_budget: CpuCalibration,
    /// How the profiles were made.
    pub profiles: ProfileSource,
}

/// Writes the apps' files, makes their leaves, calibrates, writes and checks
/// the daemon configs, and makes the profiles.
pub fn prepare(
    o: &BenchOptions,
    domain: &mut Domain,
    layouts: Vec<Option<Layout>>,
    progress: &Progress,
) -> Result<Prepared> {
    let run_dir = domain.roots.run_dir.clone();
    let log_dir = run_dir.join("logs");
    let spec_dir = run_dir.join("specs");
    let daemon_dir = run_dir.join("daemon");
    for d in [&log_dir, &spec_dir, &daemon_dir.join("state/profiles")] {
        std::fs::create_dir_all(d)?;
    }
    // Files.
    let t0 = Instant::now();
    let mut written = 0;
    for l in layouts.iter().flatten() {
        check_interrupted()?;
        written += l.generate(&domain.backing_path(&l.dir))?;
    }
    nix::unistd::sync();
    progress.say(&format!(
        "wrote {:.0} MiB of app files in {:.1} s",
        mib(written),
        t0.elapsed().as_secs_f64()
    ));
    // Apps and their leaves.
    let mut apps = Vec::new();
    for (s, layout) in o.apps.iter().zip(layouts) {
        let spec_file = spec_dir.join(format!("{}.toml", s.name));
        std::fs::write(&spec_file, &s.text)?;
        let leaf = domain.leaf(&format!("app-{}", s.name))?;
        let installed = install(domain, s)?;
        apps.push(App {
            spec: s.clone(),
            layout,
            spec_file,
            leaf,
            installed,
        });
    }
    let worker = domain.leaf("worker")?;
    let calib_leaf = domain.leaf("calib")?;
    let calib_leaf2 = domain.leaf("calib2")?;
    let mut daemon = DaemonSetup {
        binary: o.binary.clone(),
        dir: daemon_dir.clone(),
        memory_cgroup: domain.roots.mem_root(),
        blkio_cgroup: worker.blkio.clone(),
        cpu_cgroup: worker.cpu.clone(),
        budget_bytes: o.device.preload_budget_bytes,
        apps: apps
            .iter()
            .map(|a| (a.name().to_string(), a.leaf.mem.clone()))
            .collect(),
        alloc_threshold_pages: None,
    };
    // The phone core first: the storage is then measured as the domain,
    // on its cores, sees it.
    let (cpu_budget, reclaim) = calibrate_cpu_budget(o, domain, &calib_leaf, &log_dir, progress)?;
    match &reclaim {
        Some(r) => {
            progress.say(&format!(
                "anonymous reclaim inside the domain: {:.1} MB/s on a phone core of {:.2} host core(s), N_alloc {} pages per 100 ms",
                r.anon_reclaim_bytes_per_sec / 1e6,
                cpu_budget.cores,
                r.alloc_threshold_pages
            ));
            daemon.alloc_threshold_pages = Some(r.alloc_threshold_pages);
        }
        None => progress.say(&format!(
            "anonymous reclaim calibration failed; the daemon keeps its default N_alloc and the domain its budget of {} core(s)",
            cpu_budget.cores
        )),
    }
    let anon_alloc_bytes_per_sec = calibrate_alloc(o, &calib_leaf, &log_dir);
    if let Some(r) = anon_alloc_bytes_per_sec {
        progress.say(&format!(
            "anonymous allocation with no reclaim (the apps' heaps): {:.1} MB/s on the phone core",
            r / 1e6
        ));
    }
    let Calibrated {
        points: calibration,
        concurrent,
        worker_read_bytes_per_sec,
        idle_yield,
    } = calibrate(
        o,
        &apps,
        [&calib_leaf, &calib_leaf2],
        &daemon,
        &log_dir,
        progress,
    )?;
    // Daemon configs and availability.
    let mut skipped: BTreeMap<String, String> = BTreeMap::new();
    for &p in o.policies.iter().filter(|p| p.needs_daemon()) {
        let cfg = daemon.config_path(p);
        std::fs::write(
            &cfg,
            daemon.config(p, &log_dir.join(format!("trace-{}.json", p.name()))),
        )?;
        if let Err(e) = policy::check_config(&o.binary, &cfg) {
            skipped.insert(p.name().to_string(), format!("{e:#}"));
        }
    }
    if !skipped.is_empty() {
        progress.say(&format!(
            "skipping daemon policies (the daemon is not available or refused the config): {}",
            skipped.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let profiles = make_profiles(o, &domain.device, &apps, &daemon, &log_dir, progress)?;
    Ok(Prepared {
        apps,
        daemon,
        skipped,
        calibration,
        concurrent,
        reclaim,
        anon_alloc_bytes_per_sec,
        worker_read_bytes_per_sec,
        idle_yield,
        cpu_budget,
        profiles,
    })
}

/// Reclaim measurements the CPU budget's calibration makes at most.
const CPU_CALIBRATION_STEPS: usize = 5;

/// How close to the device's reclaim throughput the calibration stops: 10 %.
const CPU_CALIBRATION_TOLERANCE: f64 = 0.10;

/// The smallest budget the calibration sets: the kernel's 1 ms quota over
/// the domain's period.
const MIN_CPU_CORES: f64 = 1000.0 / crate::live::CPU_PERIOD_US as f64;

/// One measurement of the CPU budget's calibration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CpuStep {
    /// The budget, host cores.
    pub cores: f64,
    /// The domain's anonymous reclaim on it ([`RECLAIM_TEST`]), bytes/s.
    pub anon_reclaim_bytes_per_sec: f64,
}

/// The phone core (each leaf's CPU budget) and how it was found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CpuCalibration {
    /// The budget each leaf of the domain runs on, host cores.
    pub cores: f64,
    /// The most it may be (the preset's `cpu_cores`).
    pub max_cores: f64,
    /// The device's reclaim throughput it is held to, bytes/s.
    pub target_reclaim_bytes_per_sec: f64,
    /// The measurements, in order.
    pub steps: Vec<CpuStep>,
}

/// Lowers the leaves' CPU budget from the preset's until the anonymous
/// reclaim runs at the device's throughput (within
/// [`CPU_CALIBRATION_TOLERANCE`]), or no faster when the preset's budget
/// already is. Reclaim at a memory cgroup's limit runs in the allocating
/// task, so its throughput follows the budget, though not in proportion
/// (the next budget is interpolated between the closest measurements on
/// either side). Returns the budget and the reclaim measured on it (None
/// when the measurement failed; the budget then stays the preset's).
fn calibrate_cpu_budget(
    o: &BenchOptions,
    domain: &mut Domain,
    leaf: &Leaf,
    log_dir: &Path,
    progress: &Progress,
) -> Result<(CpuCalibration, Option<ReclaimCalibration>)> {
    let max = domain.device.preset.cpu_cores;
    let target = domain.device.preset.reclaim_bytes_per_sec;
    let mut cal = CpuCalibration {
        cores: max,
        max_cores: max,
        target_reclaim_bytes_per_sec: target,
        steps: Vec::new(),
    };
    let mut cores = max;
    for _ in 0..CPU_CALIBRATION_STEPS {
        let rate = match calibrate_reclaim(o, leaf, log_dir) {
            Ok(r) => r,
            // Nothing measured: the budget is still the preset's.
            Err(e) if cal.steps.is_empty() => {
                progress.say(&format!("anonymous reclaim calibration failed ({e:#})"));
                return Ok((cal, None));
            }
            Err(e) => {
                progress.say(&format!(
                    "a reclaim measurement failed ({e:#}); keeping the best so far"
                ));
                break;
            }
        };
        cal.steps.push(CpuStep {
            cores,
            anon_reclaim_bytes_per_sec: rate,
        });
        if (rate - target).abs() <= target * CPU_CALIBRATION_TOLERANCE
            || (rate <= target && cores >= max)
        {
            break;
        }
        let next = next_budget(&cal.steps, target, max);
        if (next - cores).abs() < 1e-3 {
            break;
        }
        cores = next;
        domain.set_cpu_budget(cores)?;
    }
    let best = cal.steps[best_step(&cal.steps, target)];
    cal.cores = best.cores;
    domain.set_cpu_budget(cal.cores)?;
    let tick_ms = appflow_core::reclaim::ReclaimConfig::default().tick_ms;
    Ok((
        cal,
        Some(ReclaimCalibration::from_rate(
            best.anon_reclaim_bytes_per_sec,
            tick_ms,
        )),
    ))
}

/// The next budget to measure: interpolated between the closest
/// measurements below and above `target` (bytes/s), or scaled from the
/// closest one when all are on one side; within [[`MIN_CPU_CORES`], `max`].
fn next_budget(steps: &[CpuStep], target: f64, max: f64) -> f64 {
    let below = steps
        .iter()
        .filter(|s| s.anon_reclaim_bytes_per_sec <= target)
        .max_by(|a, b| a.cores.total_cmp(&b.cores));
    let above = steps
        .iter()
        .filter(|s| s.anon_reclaim_bytes_per_sec > target)
        .min_by(|a, b| a.cores.total_cmp(&b.cores));
    let c = match (below, above) {
        (Some(l), Some(h)) if h.anon_reclaim_bytes_per_sec > l.anon_reclaim_bytes_per_sec => {
            l.cores
                + (target - l.anon_reclaim_bytes_per_sec) * (h.cores - l.cores)
                    / (h.anon_reclaim_bytes_per_sec - l.anon_reclaim_bytes_per_sec)
        }
        (Some(l), Some(h)) => (l.cores + h.cores) / 2.0,
        (None, Some(h)) => h.cores * target / h.anon_reclaim_bytes_per_sec,
        (Some(l), None) => l.cores * target / l.anon_reclaim_bytes_per_sec.max(1.0),
        (None, None) => max,
    };
    c.clamp(MIN_CPU_CORES, max)
}

/// The measurement the domain keeps: the closest to `target` within the
/// tolerance, else the fastest at or below it, else the slowest above it.
fn best_step(steps: &[CpuStep], target: f64) -> usize {
    let off = |s: &CpuStep| (s.anon_reclaim_bytes_per_sec - target).abs();
    let idx = |pred: &dyn Fn(&CpuStep) -> bool, key: &dyn Fn(&CpuStep) -> f64| {
        steps
            .iter()
            .enumerate()
            .filter(|(_, s)| pred(s))
            .min_by(|a, b| key(a.1).total_cmp(&key(b.1)))
            .map(|(i, _)| i)
    };
    idx(&|s| off(s) <= target * CPU_CALIBRATION_TOLERANCE, &off)
        .or_else(|| {
            idx(&|s| s.anon_reclaim_bytes_per_sec <= target, &|s| {
                -s.anon_reclaim_bytes_per_sec
            })
        })
        .or_else(|| idx(&|_| true, &|s| s.anon_reclaim_bytes_per_sec))
        .unwrap_or(0)
}

/// Runs [`RECLAIM_TEST`] in `leaf` (its limit set for the test, then
/// lifted); returns the anonymous memory written per second.
fn calibrate_reclaim(o: &BenchOptions, leaf: &Leaf, log_dir: &Path) -> Result<f64> {
    check_interrupted()?;
    let (limit, bytes) = RECLAIM_TEST;
    let limit_file = leaf.mem.join("memory.limit_in_bytes");
    std::fs::write(&limit_file, limit.to_string())
        .with_context(|| format!("writing {}", limit_file.display()))?;
    let log = log_dir.join(format!("reclaim-calibration-{}.log", leaf.name));
    let r = alloc_test(o, leaf, bytes, &log, "reclaim calibration");
    let _ = std::fs::write(&limit_file, "-1");
    r
}

/// The apps' anonymous allocation with nothing to reclaim: the median of
/// [`ALLOC_TEST_RUNS`] runs of [`ALLOC_TEST_BYTES`] in `leaf` (no limit).
/// None when a run failed (the emitted simulator device then charges no
/// allocation cost).
fn calibrate_alloc(o: &BenchOptions, leaf: &Leaf, log_dir: &Path) -> Option<f64> {
    let mut runs = Vec::with_capacity(ALLOC_TEST_RUNS);
    for i in 0..ALLOC_TEST_RUNS {
        check_interrupted().ok()?;
        let log = log_dir.join(format!("alloc-calibration-{}-{i}.log", leaf.name));
        runs.push(alloc_test(o, leaf, ALLOC_TEST_BYTES, &log, "allocation calibration").ok()?);
    }
    runs.sort_by(f64::total_cmp);
    Some(appflow_core::report::percentile(&runs, 50.0))
}

/// Runs `bench-app --alloc-test bytes` in `leaf`; returns bytes/s (an
/// error naming `what` when it failed).
fn alloc_test(o: &BenchOptions, leaf: &Leaf, bytes: u64, log: &Path, what: &str) -> Result<f64> {
    let argv = vec![
        o.binary.to_string_lossy().to_string(),
        "bench-app".into(),
        "--alloc-test".into(),
        bytes.to_string(),
    ];
    crate::launch::spawn("calibration", &argv, leaf, 0, log)
        .and_then(|(proc, t0)| result_line(proc, t0, log, what))
}

/// Waits for a calibration process's `bytes_per_sec N` line; returns N.
fn result_line(mut proc: crate::launch::Proc, t0: Instant, log: &Path, what: &str) -> Result<f64> {
    let re = regex::Regex::new(r"^bytes_per_sec (\S+)$")?;
    let (o, _) = proc.wait_ready(
        &crate::launch::Readiness::Line(re),
        t0,
        Duration::from_secs(120),
    );
    proc.stop();
    if o != crate::launch::Outcome::Ready {
        bail!("{what} failed ({o:?}); see {}", log.display());
    }
    // The test prints its result on stderr too, which lands in the log.
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("bytes_per_sec "))
        .and_then(|x| x.trim().parse::<f64>().ok())
        .with_context(|| format!("{what}: result missing from {}", log.display()))
}

/// The host paths a command app installs on the device.
fn install_paths(s: &AppSpec) -> &[String] {
    match &s.body {
        AppBody::Command(c) => &c.install,
        AppBody::Synthetic(_) => &[],
    }
}

/// Bytes a command app's install takes (regular files; symlinks not followed).
pub fn install_bytes(s: &AppSpec) -> Result<u64> {
    let mut total = 0;
    for p in install_paths(s) {
        for f in
            walk(Path::new(p)).with_context(|| format!("{}: install path {p}", s.file.display()))?
        {
            total += std::fs::symlink_metadata(&f).map(|m| m.len()).unwrap_or(0);
        }
    }
    Ok(total)
}

/// Regular files under `p` (itself when it is one), symlinks not followed.
fn walk(p: &Path) -> Result<Vec<std::path::PathBuf>> {
    let m = std::fs::symlink_metadata(p).with_context(|| format!("reading {}", p.display()))?;
    if m.is_file() {
        return Ok(vec![p.to_path_buf()]);
    }
    let mut out = Vec::new();
    if m.is_dir() {
        for e in std::fs::read_dir(p).with_context(|| format!("listing {}", p.display()))? {
            out.extend(walk(&e?.path())?);
        }
    }
    Ok(out)
}

/// Copies a command app's install paths onto the device (`apps/NAME/`) and
/// returns its files as the domain sees them.
fn install(domain: &Domain, s: &AppSpec) -> Result<Vec<std::path::PathBuf>> {
    let home = domain.mnt.join("apps").join(&s.name);
    let backing = domain.backing_path(&home);
    let mut files = Vec::new();
    for p in install_paths(s) {
        std::fs::create_dir_all(&backing)?;
        let st = std::process::Command::new("cp")
            .arg("-a")
            .arg(p)
            .arg(&backing)
            .status()
            .context("running cp")?;
        if !st.success() {
            bail!(
                "{}: installing {p} on the device failed ({st})",
                s.file.display()
            );
        }
        let name = Path::new(p)
            .file_name()
            .context("install path has no file name")?;
        for f in walk(&backing.join(name))? {
            if let Ok(rel) = f.strip_prefix(&backing) {
                files.push(home.join(rel));
            }
        }
    }
    Ok(files)
}

/// Reads the biggest large file from a leaf at each block size of
/// [`CALIBRATION_READS`], then from two leaves at once, and saves the
/// one-reader curve as the daemon's calibration.
fn calibrate(
    o: &BenchOptions,
    apps: &[App],
    leaves: [&Leaf; 2],
    daemon: &DaemonSetup,
    log_dir: &Path,
    progress: &Progress,
) -> Result<Calibrated> {
    let biggest = apps
        .iter()
        .filter_map(|a| a.layout.as_ref())
        .flat_map(|l| l.large.iter().map(move |f| (f.size, l.dir.join(&f.rel))))
        .max_by_key(|x| x.0)
        .map(|x| x.1);
    let Some(file) = biggest else {
        return Ok(Calibrated {
            points: Vec::new(),
            concurrent: None,
            worker_read_bytes_per_sec: None,
            idle_yield: None,
        });
    };
    let mut points = Vec::new();
    for &(block_bytes, total) in CALIBRATION_READS {
        check_interrupted()?;
        let t = IoTest::start(
            &o.binary,
            leaves[0],
            &file,
            block_bytes,
            total,
            IoMode::Direct,
            log_dir,
        )?;
        points.push(CurvePoint {
            block_bytes,
            bytes_per_sec: t.finish()?,
        });
    }
    check_interrupted()?;
    let (b, total) = CONCURRENT_READ;
    let tests = [
        IoTest::start(
            &o.binary,
            leaves[0],
            &file,
            b,
            total,
            IoMode::Direct,
            log_dir,
        )?,
        IoTest::start(
            &o.binary,
            leaves[1],
            &file,
            b,
            total,
            IoMode::Direct,
            log_dir,
        )?,
    ];
    let each = tests
        .into_iter()
        .map(IoTest::finish)
        .collect::<Result<Vec<f64>>>()?;
    let concurrent = ConcurrentRead {
        block_bytes: b,
        sum_bytes_per_sec: each.iter().sum(),
        each_bytes_per_sec: each,
    };
    let at = |b: u64| {
        points
            .iter()
            .find(|c| c.block_bytes == b)
            .map(|c| c.bytes_per_sec)
            .unwrap_or(0.0)
    };
    progress.say(&format!(
        "storage inside the domain (O_DIRECT, random offsets): 4 KiB {:.1}, 128 KiB {:.1}, 512 KiB {:.1}, \
         1 MiB {:.1}, 2 MiB {:.1} MB/s; two 1 MiB readers together {:.1} MB/s",
        at(4096) / 1e6,
        at(128 << 10) / 1e6,
        at(512 << 10) / 1e6,
        at(1 << 20) / 1e6,
        at(2 << 20) / 1e6,
        concurrent.sum_bytes_per_sec / 1e6,
    ));
    check_interrupted()?;
    let (b, total) = WORKER_READ;
    // A failed measurement leaves the worker's rate to the storage curve.
    let worker = IoTest::start(
        &o.binary,
        leaves[0],
        &file,
        b,
        total,
        IoMode::Buffered,
        log_dir,
    )
    .and_then(IoTest::finish)
    .ok();
    if let Some(w) = worker {
        progress.say(&format!(
            "the preload worker's stream on a phone core (2 MiB reads through the page cache): {:.1} MB/s",
            w / 1e6
        ));
    }
    check_interrupted()?;
    // A failed measurement is left out of the report.
    let idle_yield = idle_yield(o, leaves, &file, at(IDLE_YIELD.0), log_dir).ok();
    if let Some(y) = &idle_yield {
        progress.say(&format!(
            "a 128 KiB reader beside an idle-class 1 MiB reader: {:.1} MB/s (alone {:.1}); the idle reader {:.1} MB/s",
            y.beside_idle_bytes_per_sec / 1e6,
            y.alone_bytes_per_sec / 1e6,
            y.idle_bytes_per_sec / 1e6,
        ));
    }
    let curve = ThroughputCurve::new(points.clone())
        .map_err(|e| anyhow::anyhow!("the in-domain calibration is unusable: {e}"))?;
    appflow_linux::calibrate::save_curve(&daemon.state_dir(), &curve)?;
    Ok(Calibrated {
        points,
        concurrent: Some(concurrent),
        worker_read_bytes_per_sec: worker,
        idle_yield,
    })
}

/// Reads `file` from `leaves[0]` in the foreground while an idle-class
/// reader in `leaves[1]` streams it ([`IDLE_YIELD`]); `alone` is the
/// foreground's rate measured alone.
fn idle_yield(
    o: &BenchOptions,
    leaves: [&Leaf; 2],
    file: &Path,
    alone: f64,
    log_dir: &Path,
) -> Result<IdleYield> {
    let (block, total, idle_block, idle_total) = IDLE_YIELD;
    let idle = IoTest::start(
        &o.binary,
        leaves[1],
        file,
        idle_block,
        idle_total,
        IoMode::DirectIdle,
        log_dir,
    )?;
    // The idle reader is streaming before the foreground starts.
    std::thread::sleep(Duration::from_millis(50));
    let fg = IoTest::start(
        &o.binary,
        leaves[0],
        file,
        block,
        total,
        IoMode::Direct,
        log_dir,
    );
    let fg = fg.and_then(IoTest::finish);
    let idle = idle.finish()?;
    Ok(IdleYield {
        block_bytes: block,
        alone_bytes_per_sec: alone,
        beside_idle_bytes_per_sec: fg?,
        idle_block_bytes: idle_block,
        idle_bytes_per_sec: idle,
    })
}

/// How an I/O test reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// O_DIRECT at random offsets, best-effort class (the device's curve).
    Direct,
    /// Through the page cache, in order from the start (the worker's stream).
    Buffered,
    /// O_DIRECT at random offsets in the idle I/O class (the worker's class).
    DirectIdle,
}

/// One `appflow bench-app --io-test` running in a leaf.
pub struct IoTest {
    proc: crate::launch::Proc,
    t0: std::time::Instant,
    log: std::path::PathBuf,
    what: String,
}

impl IoTest {
    /// Starts reading `file` in `block`-byte reads from `leaf`, as `mode`
    /// says.
    pub fn start(
        binary: &Path,
        leaf: &Leaf,
        file: &Path,
        block: u64,
        total: u64,
        mode: IoMode,
        log_dir: &Path,
    ) -> Result<IoTest> {
        let mut argv = vec![
            binary.to_string_lossy().to_string(),
            "bench-app".into(),
            "--io-test".into(),
            file.to_string_lossy().to_string(),
            "--block-bytes".into(),
            block.to_string(),
            "--total-bytes".into(),
            total.to_string(),
        ];
        match mode {
            IoMode::Direct => {}
            IoMode::Buffered => argv.push("--buffered".into()),
            IoMode::DirectIdle => argv.push("--idle-class".into()),
        }
        let log = log_dir.join(format!("calibration-{}.log", leaf.name));
        let _ = std::fs::remove_file(&log);
        let (proc, t0) = crate::launch::spawn("calibration", &argv, leaf, 0, &log)?;
        Ok(IoTest {
            proc,
            t0,
            log,
            what: format!(
                "calibration read of {} with {block}-byte blocks",
                file.display()
            ),
        })
    }

    /// Waits for its result, bytes/s.
    pub fn finish(self) -> Result<f64> {
        result_line(self.proc, self.t0, &self.log, &self.what)
    }
}

fn make_profiles(
    o: &BenchOptions,
    device: &Device,
    apps: &[App],
    daemon: &DaemonSetup,
    log_dir: &Path,
    progress: &Progress,
) -> Result<ProfileSource> {
    let mut failed = None;
    if o.profiles != "spec" {
        match record_profiles(o, device, apps, daemon, log_dir) {
            Ok(n) => {
                progress.say(&format!(
                    "recorded {n} launch profiles with `appflow record`"
                ));
                return Ok(ProfileSource::Recorded);
            }
            Err(e) if o.profiles == "record" => return Err(e.context("--profiles record")),
            Err(e) => {
                progress.say(&format!(
                    "`appflow record` unavailable ({e:#}); writing profiles from the synthetic specs"
                ));
                failed = Some(format!("{e:#}"));
            }
        }
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let store = ProfileStore::open(&daemon.state_dir());
    let mut n = 0;
    for a in apps {
        if let Some(l) = &a.layout {
            // A fresh profile: a partial recording must not merge into it.
            let mut p = LaunchProfile::new(a.name());
            p.merge_launch(&l.observation(now_ms));
            store.save(&p)?;
            n += 1;
        }
    }
    progress.say(&format!(
        "wrote {n} launch profiles from the synthetic apps' known access patterns"
    ));
    Ok(ProfileSource::FromSpec { failed })
}

/// The path `p` under the flash device's mount `mnt` has under the image's
/// own mount `backing` (the same file), or None when it is not under `mnt`.
fn on_backing(p: &Path, mnt: &Path, backing: &Path) -> Option<std::path::PathBuf> {
    p.strip_prefix(mnt).ok().map(|rest| backing.join(rest))
}

/// A profile recorded on the image's own mount, as the apps see it through
/// the flash device: each file under `backing` renamed to its path under
/// `mnt`; files elsewhere (the host's binaries and libraries, not on the
/// device) left out, as the preloader must not read them from outside the
/// domain. Returns how many were left out.
fn to_device_paths(p: &mut LaunchProfile, mnt: &Path, backing: &Path) -> usize {
    let before = p.files.len();
    p.files
        .retain_mut(|f| match Path::new(&f.path).strip_prefix(backing) {
            Ok(rest) => {
                f.path = mnt.join(rest).to_string_lossy().into_owned();
                true
            }
            Err(_) => false,
        });
    before - p.files.len()
}

/// Records each app's launch with `appflow record`. The recorder watches
/// storage filesystems with fanotify permission events and skips FUSE ones
/// (a FUSE server opening its backing files would wait on the recorder's
/// own answers; docs/recording.md), so the apps are recorded reading the
/// image's ext4 mount (`backing`), the same files the flash device at `mnt`
/// serves, and the profiles are renamed to the `mnt` paths the apps and the
/// daemon use in the runs. Recording through `mnt` saw no file the apps
/// read, only those mapped (from /proc/PID/maps): an app without a mapped
/// file had an empty profile, and `--profiles auto` fell back to the specs
/// for every app (issue 30).
fn record_profiles(
    o: &BenchOptions,
    device: &Device,
    apps: &[App],
    daemon: &DaemonSetup,
    log_dir: &Path,
) -> Result<usize> {
    let store = ProfileStore::open(&daemon.state_dir());
    let mnt = o.roots.run_dir.join("mnt");
    let backing = o.roots.run_dir.join("backing");
    let mut n = 0;
    for a in apps {
        check_interrupted()?;
        let drop_all = || {
            for p in a.paths() {
                let _ = synth::drop_file_cache(&p);
                if let Some(b) = on_backing(&p, &mnt, &backing) {
                    let _ = synth::drop_file_cache(&b);
                }
            }
        };
        drop_all();
        let argv = a.argv(&o.binary, device, &backing);
        let mut cmd = std::process::Command::new(&o.binary);
        cmd.arg("record")
            .arg("--app")
            .arg(a.name())
            .arg("--state-dir")
            .arg(daemon.state_dir());
        match &a.spec.body {
            AppBody::Synthetic(_) => {
                cmd.arg("--ready-line")
                    .arg(format!("^{}$", synth::READY_LINE));
            }
            AppBody::Command(c) => match c.ready {
                spec::Ready::Stdout => {
                    cmd.arg("--ready-line").arg(&c.ready_regex);
                }
                spec::Ready::File => {
                    cmd.arg("--ready-file").arg(&c.ready_file);
                }
                spec::Ready::Exit => {}
            },
        }
        cmd.arg("--timeout-ms")
            .arg(o.timeout.as_millis().to_string())
            .arg("--")
            .args(&argv)
            .stdin(std::process::Stdio::null());
        let log_path = log_dir.join(format!("record-{}.log", a.name()));
        let log = std::fs::File::create(&log_path)?;
        cmd.stdout(log.try_clone()?).stderr(log);
        let st = cmd.status().context("running appflow record")?;
        if !st.success() {
            bail!(
                "appflow record of {} exited with {st}: {}",
                a.name(),
                policy::last_line(&log_path)
            );
        }
        // The recording's reads leave the image's pages cached on the host;
        // the runs read through the device, whose cache is dropped per session.
        drop_all();
        let mut p = store
            .load(a.name())?
            .with_context(|| format!("appflow record wrote no profile of {}", a.name()))?;
        let outside = to_device_paths(&mut p, &mnt, &backing);
        if p.files.is_empty() {
            // The recorder's summary line says what it saw.
            let seen = std::fs::read_to_string(&log_path)
                .unwrap_or_default()
                .lines()
                .find(|l| l.trim_start().starts_with("files "))
                .map(|l| l.trim().to_string())
                .unwrap_or_else(|| policy::last_line(&log_path));
            bail!(
                "the recorded profile of {} has no file on the device ({outside} elsewhere; {seen})",
                a.name()
            );
        }
        store.save(&p)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(cores: f64, mb_s: f64) -> CpuStep {
        CpuStep {
            cores,
            anon_reclaim_bytes_per_sec: mb_s * 1e6,
        }
    }

    /// A recording on the image's mount becomes the profile of the device's
    /// paths; the host's files the launch opened (the binary, libraries)
    /// are left out (issue 30, defect 3).
    #[test]
    fn recorded_paths_move_from_the_image_mount_to_the_device() {
        let (mnt, backing) = (Path::new("/run/ab/mnt"), Path::new("/run/ab/backing"));
        let mut p = LaunchProfile::new("music");
        p.merge_launch(&appflow_core::profile::LaunchObservation {
            files: ["/run/ab/backing/apps/music/s/0.bin", "/usr/lib/libc.so.6"]
                .iter()
                .enumerate()
                .map(|(i, f)| appflow_core::profile::ObservedFile {
                    path: f.to_string(),
                    size_bytes: 8192,
                    first_access_us: i as u64,
                    ranges: vec![appflow_core::profile::ByteRange {
                        start: 0,
                        end: 8192,
                    }],
                })
                .collect(),
            ..Default::default()
        });
        assert_eq!(to_device_paths(&mut p, mnt, backing), 1);
        let paths: Vec<&str> = p.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["/run/ab/mnt/apps/music/s/0.bin"]);
        assert_eq!(
            on_backing(Path::new("/run/ab/mnt/apps/x/a"), mnt, backing),
            Some(backing.join("apps/x/a"))
        );
        assert_eq!(on_backing(Path::new("/elsewhere"), mnt, backing), None);
    }

    #[test]
    fn the_next_budget_scales_from_one_side_and_interpolates_between_two() {
        let t = 150e6;
        // Only faster than the device: scaled down in proportion.
        let c = next_budget(&[step(1.0, 500.0)], t, 1.0);
        assert!((c - 0.3).abs() < 1e-9, "{c}");
        // Both sides: linear between the closest measurements.
        let c = next_budget(&[step(1.0, 500.0), step(0.3, 100.0)], t, 1.0);
        assert!((c - (0.3 + 50.0 * 0.7 / 400.0)).abs() < 1e-9, "{c}");
        // Only slower: raised, never past the preset's budget.
        assert_eq!(next_budget(&[step(0.5, 50.0)], t, 1.0), 1.0);
        assert_eq!(next_budget(&[step(0.5, 100.0)], t, 0.6), 0.6);
        // Never under the kernel's 1 ms quota.
        assert_eq!(next_budget(&[step(1.0, 1e6)], t, 1.0), MIN_CPU_CORES);
    }

    #[test]
    fn the_kept_budget_is_the_closest_within_tolerance_else_never_faster_than_the_device() {
        let t = 150e6;
        assert_eq!(best_step(&[step(1.0, 500.0), step(0.3, 140.0)], t), 1);
        assert_eq!(
            best_step(&[step(1.0, 500.0), step(0.3, 100.0), step(0.4, 170.0)], t),
            1
        );
        assert_eq!(
            best_step(&[step(1.0, 500.0), step(0.3, 200.0), step(0.2, 180.0)], t),
            2
        );
        assert_eq!(best_step(&[step(1.0, 120.0)], t), 0);
    }
}
