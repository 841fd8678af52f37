//! Command-line entry points: `appflow bench` and the hidden `appflow bench-app`.
//!
//! [`run_bench`] is the library entry point (the integration test calls it
//! in-process with the path of a built `appflow` binary); [`run`] parses
//! nothing more than [`BenchArgs`] into [`BenchOptions`] and prints.
// Output goes through one fallible write, so a closed pipe ends the
// command normally (`appflow_linux::cli::exit_code`) instead of panicking.
#![deny(clippy::print_stdout)]

use crate::device::{self, Device};
use crate::domain::{self, Resource, Roots};
use crate::live::{self, check_interrupted, Domain};
use crate::policy::{self, DaemonSetup, Policy};
use crate::run::{self, App, Bed, Measurement, Scenario, TraceEvent};
use crate::spec::{self, AppBody, AppClass, AppSpec};
use crate::synth::{self, Layout};
use crate::{plot, report};
use anyhow::{bail, Context, Result};
use appflow_core::profile::LaunchProfile;
use appflow_core::report::RunReport;
use appflow_core::InputError;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `appflow bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Device preset: phone-6gb, phone-8gb or headunit-4gb.
    #[arg(long, default_value = "phone-6gb")]
    pub device: String,
    /// Multiply every size (memory, swap, app files, allocations, CPU work,
    /// preload budget) by this factor; storage throughput is not scaled.
    #[arg(long, default_value_t = 0.25)]
    pub scale: f64,
    /// Scenarios, comma-separated: low, medium, high, multitask, trace.
    #[arg(long, default_value = "high", value_delimiter = ',')]
    pub scenario: Vec<String>,
    /// Target app(s) of low/medium/high, comma-separated (default: the first GB-scale app).
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Policies, comma-separated (default: all): stock, appflow, appflow-sfp,
    /// appflow-amr, appflow-cpk, preload-all, prefetch, lru-killer, oracle.
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<String>,
    /// Repetitions of each policy (interleaved across policies).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Directory of app spec files (*.toml) instead of the built-in set.
    #[arg(long)]
    pub apps: Option<PathBuf>,
    /// An extra app spec file (repeatable), e.g. a real command line.
    #[arg(long = "app")]
    pub app_files: Vec<PathBuf>,
    /// Trace CSV (user,timestamp,app,event) for the `trace` scenario.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Which user of the trace to replay (default: the first).
    #[arg(long)]
    pub trace_user: Option<String>,
    /// Replay the trace this many times faster than recorded (events are
    /// at least 300 ms apart after compression).
    #[arg(long, default_value_t = 600.0)]
    pub time_compress: f64,
    /// Trace apps without a spec: `error`, or `hash` (map each onto the set
    /// deterministically, e.g. to replay a simulator trace of 60+ apps).
    #[arg(long, default_value = "error")]
    pub trace_map: String,
    /// At most this many trace events are replayed.
    #[arg(long, default_value_t = 60)]
    pub trace_max_events: usize,
    /// How profiles are made: auto (record with `appflow record`, else from
    /// the synthetic spec), record, or spec.
    #[arg(long, default_value = "auto")]
    pub profiles: String,
    /// Launch timeout of synthetic apps, ms (command apps use their spec's).
    #[arg(long, default_value_t = 60_000)]
    pub timeout_ms: u64,
    /// Wait after the background load is up, before the target launch, ms.
    #[arg(long, default_value_t = 1_500)]
    pub settle_ms: u64,
    /// A short run for CI (≤ 5 min): phone-6gb at scale 0.08, scenario low,
    /// 1 repetition, policies stock, appflow, oracle.
    #[arg(long)]
    pub quick: bool,
    /// Remove leftovers of a crashed run and exit.
    #[arg(long)]
    pub cleanup: bool,
    /// Output on stdout: table or json.
    #[arg(long, default_value = "table")]
    pub format: String,
    /// Also write the JSON report here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write an `appflow sim --device-file` TOML describing this run's domain
    /// and apps at the chosen preset and scale (written before the run and
    /// again after it with the measured calibration and zram ratio), so
    /// `appflow sim --device-file FILE --workload high` runs the same workload.
    #[arg(long)]
    pub emit_sim_device: Option<PathBuf>,
    /// Write SVG plots (latency per app and policy; timelines) here.
    #[arg(long)]
    pub plot_dir: Option<PathBuf>,
    /// The appflow binary to run apps and the daemon with (default: this one).
    #[arg(long)]
    pub binary: Option<PathBuf>,
}

impl Default for BenchArgs {
    fn default() -> Self {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            a: BenchArgs,
        }
        W::parse_from(["bench"]).a
    }
}

/// Validated options of a run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The device.
    pub device: Device,
    /// Scenarios.
    pub scenarios: Vec<Scenario>,
    /// Targets.
    pub targets: Vec<String>,
    /// Policies.
    pub policies: Vec<Policy>,
    /// Repetitions.
    pub reps: u32,
    /// Apps.
    pub apps: Vec<AppSpec>,
    /// Trace events (trace scenario).
    pub trace: Vec<TraceEvent>,
    /// Trace compression.
    pub time_compress: f64,
    /// Profile mode.
    pub profiles: String,
    /// Launch timeout.
    pub timeout: Duration,
    /// Settle time.
    pub settle: Duration,
    /// The appflow binary.
    pub binary: PathBuf,
    /// Plot dir.
    pub plot_dir: Option<PathBuf>,
    /// Where things go.
    pub roots: Roots,
    /// Progress on stderr.
    pub progress: bool,
}

fn input(msg: impl Into<String>) -> anyhow::Error {
    InputError::new(msg.into()).into()
}

/// Validates arguments (no root needed).
pub fn options(a: &BenchArgs) -> Result<BenchOptions> {
    let mut a = a.clone();
    if a.quick {
        a.scale = 0.08;
        a.scenario = vec!["low".into()];
        a.reps = 1;
        if a.policies.is_empty() {
            a.policies = vec!["stock".into(), "appflow".into(), "oracle".into()];
        }
        a.settle_ms = a.settle_ms.min(1000);
    }
    let preset = device::preset(&a.device).ok_or_else(|| {
        input(format!(
            "unknown device preset {:?}; known: {}",
            a.device,
            device::preset_names().join(", ")
        ))
    })?;
    let device = Device::new(preset, a.scale).map_err(input)?;
    let scenarios = a
        .scenario
        .iter()
        .map(|s| {
            Scenario::parse(s).ok_or_else(|| {
                input(format!(
                    "unknown scenario {s:?}; known: low, medium, high, multitask, trace"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let policies: Vec<Policy> = if a.policies.is_empty() {
        policy::ALL.to_vec()
    } else {
        a.policies
            .iter()
            .map(|s| {
                Policy::parse(s).ok_or_else(|| {
                    let names: Vec<&str> = policy::ALL.iter().map(|p| p.name()).collect();
                    input(format!("unknown policy {s:?}; known: {}", names.join(", ")))
                })
            })
            .collect::<Result<_>>()?
    };
    if a.reps == 0 {
        return Err(input("--reps must be at least 1"));
    }
    let mut apps = match &a.apps {
        Some(d) => spec::load_dir(d),
        None => spec::default_set(),
    }
    .map_err(|e| input(e.to_string()))?;
    for f in &a.app_files {
        let s = AppSpec::load(f).map_err(|e| input(e.to_string()))?;
        if let Some(o) = apps.iter().find(|x| x.name == s.name) {
            return Err(input(format!(
                "{}: app name {:?} is already used by {}",
                f.display(),
                s.name,
                o.file.display()
            )));
        }
        apps.push(s);
    }
    let targets = if a.target.is_empty() {
        vec![apps
            .iter()
            .find(|s| s.class == AppClass::Gb)
            .or(apps.first())
            .map(|s| s.name.clone())
            .ok_or_else(|| input("the app set is empty"))?]
    } else {
        a.target.clone()
    };
    for t in &targets {
        if !apps.iter().any(|s| &s.name == t) {
            let names: Vec<&str> = apps.iter().map(|s| s.name.as_str()).collect();
            return Err(input(format!(
                "--target {t:?} is not an app of the set ({})",
                names.join(", ")
            )));
        }
    }
    let mut trace = Vec::new();
    if scenarios.contains(&Scenario::Trace) {
        let p = a
            .trace
            .as_ref()
            .ok_or_else(|| input("scenario trace needs --trace FILE"))?;
        trace = run::read_trace(p, a.trace_user.as_deref())?;
        if trace.is_empty() {
            return Err(input(format!(
                "{}: no launch events{} (nothing to replay)",
                p.display(),
                a.trace_user
                    .as_deref()
                    .map(|u| format!(" for user {u:?}"))
                    .unwrap_or_default()
            )));
        }
        if a.trace_max_events == 0 {
            return Err(input("--trace-max-events must be at least 1"));
        }
        trace.truncate(a.trace_max_events);
        if !["error", "hash"].contains(&a.trace_map.as_str()) {
            return Err(input(format!(
                "--trace-map must be error or hash, got {:?}",
                a.trace_map
            )));
        }
        let names: Vec<String> = apps.iter().map(|s| s.name.clone()).collect();
        run::map_trace_apps(&mut trace, &names, a.trace_map == "hash")
            .map_err(|e| input(format!("{}: {e}", p.display())))?;
        // Bounded so that every compressed gap is a valid Duration.
        if !(a.time_compress.is_finite() && (1e-3..=1e7).contains(&a.time_compress)) {
            return Err(input(format!(
                "--time-compress must be in [0.001, 10000000], got {}",
                a.time_compress
            )));
        }
    }
    if !["auto", "record", "spec"].contains(&a.profiles.as_str()) {
        return Err(input(format!(
            "--profiles must be auto, record or spec, got {:?}",
            a.profiles
        )));
    }
    if !["table", "json"].contains(&a.format.as_str()) {
        return Err(input(format!(
            "--format must be table or json, got {:?}",
            a.format
        )));
    }
    let binary = match &a.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("locating the appflow binary")?,
    };
    Ok(BenchOptions {
        device,
        scenarios,
        targets,
        policies,
        reps: a.reps,
        apps,
        trace,
        time_compress: a.time_compress,
        profiles: a.profiles.clone(),
        timeout: Duration::from_millis(a.timeout_ms),
        settle: Duration::from_millis(a.settle_ms),
        binary,
        plot_dir: a.plot_dir.clone(),
        roots: Roots::default(),
        progress: std::io::stderr().is_terminal(),
    })
}

/// What a run produced, plus the checks made after teardown.
#[derive(Debug)]
pub struct BenchOutcome {
    /// One report per scenario.
    pub reports: Vec<RunReport>,
    /// Every session's measurement, with its scenario.
    pub measurements: Vec<(Scenario, Measurement)>,
    /// The preload budget M_p, bytes.
    pub budget_bytes: u64,
    /// Leftovers found after teardown (must be empty).
    pub leftovers: Vec<Resource>,
    /// Sysctls that differ after the run from before: (name, before, after).
    pub changed_sysctls: Vec<(String, String, String)>,
    /// Policies that could not run, with why.
    pub skipped: BTreeMap<String, String>,
}

/// Sysctls the testbed and the daemon might touch; compared before/after.
pub const WATCHED_SYSCTLS: &[&str] = &[
    "vm/swappiness",
    "vm/watermark_scale_factor",
    "vm/min_free_kbytes",
    "vm/page-cluster",
    "vm/vfs_cache_pressure",
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/overcommit_memory",
    "vm/drop_caches",
];

fn sysctls(proc_root: &Path) -> Vec<(String, String)> {
    WATCHED_SYSCTLS
        .iter()
        .map(|k| {
            let v = std::fs::read_to_string(proc_root.join("sys").join(k)).unwrap_or_default();
            (k.replace('/', "."), v.trim().to_string())
        })
        .collect()
}

/// Progress: indicatif on a terminal, plain lines otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    t0: Instant,
}

impl Progress {
    fn new(total: u64, tty: bool) -> Self {
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} sessions  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b
        });
        Self {
            bar,
            t0: Instant::now(),
        }
    }
    fn say(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("[{:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64()),
        }
    }
    fn step(&self, msg: &str) {
        match &self.bar {
            Some(b) => {
                b.set_message(msg.to_string());
            }
            None => eprintln!("[{:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64()),
        }
    }
    fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
    fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

/// Runs the testbed: builds the domain, runs every scenario × repetition ×
/// policy (interleaved), tears down, verifies nothing is left.
pub fn run_bench(o: &BenchOptions) -> Result<BenchOutcome> {
    if !live::is_root() {
        return Err(input(
            "appflow bench needs root: it creates memory/blkio cgroups, a loop device, a mount \
             and zram swap (run it with sudo)",
        ));
    }
    if let Some(m) = live::missing_feature(&o.roots) {
        bail!("this machine lacks what the testbed needs: {m}");
    }
    live::install_signal_handlers()?;
    let sysctl_before = sysctls(&o.roots.proc_root);
    let removed = live::cleanup(&o.roots)?;
    if !removed.is_empty() {
        eprintln!(
            "appflow bench: removed {} leftover(s) of an earlier run: {:?}",
            removed.len(),
            removed
        );
    }
    let mnt = o.roots.run_dir.join("mnt");
    let layouts: Vec<Option<Layout>> = o
        .apps
        .iter()
        .map(|s| {
            s.synthetic().map(|syn| {
                Layout::new(
                    &s.name,
                    syn,
                    o.device.scale,
                    &mnt.join("apps").join(&s.name),
                )
            })
        })
        .collect();
    let files: u64 = layouts
        .iter()
        .flatten()
        .map(|l| (l.small.len() + l.large.len()) as u64)
        .sum();
    let data: u64 = layouts.iter().flatten().map(|l| l.disk_bytes()).sum();
    let image_bytes = device::page_round(data + data / 8 + files * 8192 + 256 * 1048576);
    let progress = Progress::new(0, o.progress);
    progress.say(&format!(
        "building the {} domain at scale {}: memory limit {:.0} MiB, zram {:.0} MiB (pool cap {:.0} MiB), \
         storage {} MiB/s / {} IOPS, image {:.0} MiB for {} files",
        o.device.preset.name,
        o.device.scale,
        mib(o.device.app_memory_bytes),
        mib(o.device.zram_disksize_bytes),
        mib(o.device.zram_mem_limit_bytes),
        o.device.preset.read_bps / 1048576,
        o.device.preset.read_iops,
        mib(image_bytes),
        files
    ));
    let domain = Domain::build(o.roots.clone(), o.device.clone(), image_bytes)?;
    let (result, mut domain) = run_in_domain(o, domain, layouts, &progress);
    progress.done();
    let teardown = domain.teardown();
    drop(domain);
    let leftovers = domain::find_leftovers(&o.roots);
    let sysctl_after = sysctls(&o.roots.proc_root);
    let changed_sysctls = sysctl_before
        .iter()
        .zip(&sysctl_after)
        .filter(|(a, b)| a.1 != b.1 && a.0 != "vm.drop_caches")
        .map(|(a, b)| (a.0.clone(), a.1.clone(), b.1.clone()))
        .collect();
    let (reports, measurements, skipped) = result?;
    teardown?;
    Ok(BenchOutcome {
        reports,
        measurements,
        budget_bytes: o.device.preload_budget_bytes,
        leftovers,
        changed_sysctls,
        skipped,
    })
}

/// Reports and the measurements behind them.
type Measured = (Vec<RunReport>, Vec<(Scenario, Measurement)>);

type RunResult = (
    Vec<RunReport>,
    Vec<(Scenario, Measurement)>,
    BTreeMap<String, String>,
);

type Prepared = (
    Vec<App>,
    DaemonSetup,
    BTreeMap<String, String>,
    Vec<(u64, f64)>,
    String,
);

fn run_in_domain(
    o: &BenchOptions,
    mut domain: Domain,
    layouts: Vec<Option<Layout>>,
    progress: &Progress,
) -> (Result<RunResult>, Domain) {
    let (apps, setup, skipped, calibration, profile_mode) =
        match prepare(o, &mut domain, layouts, progress) {
            Ok(x) => x,
            Err(e) => return (Err(e), domain),
        };
    let mut bed = Bed {
        domain,
        apps,
        binary: o.binary.clone(),
        log_dir: setup
            .dir
            .parent()
            .map(|d| d.join("logs"))
            .unwrap_or_default(),
        daemon: setup,
        launch_timeout: o.timeout,
        settle: o.settle,
    };
    let out = measure_all(o, &mut bed, &skipped, progress, &calibration, &profile_mode);
    (out.map(|(r, m)| (r, m, skipped)), bed.domain)
}

fn prepare(
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
        written += l.generate()?;
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
        apps.push(App {
            spec: s.clone(),
            layout,
            spec_file,
            leaf,
        });
    }
    let worker = domain.leaf("worker")?;
    let calib_leaf = domain.leaf("calib")?;
    // Calibration inside the domain (O_DIRECT, from a throttled leaf).
    let biggest = apps
        .iter()
        .filter_map(|a| a.layout.as_ref())
        .flat_map(|l| l.large.iter().map(move |f| (f.size, l.dir.join(&f.rel))))
        .max_by_key(|x| x.0)
        .map(|x| x.1);
    let mut calibration = Vec::new();
    if let Some(f) = &biggest {
        for (bs, total) in [
            // Each read lasts ~0.4 s at the caps: blk-throttle lets a first
            // slice through unthrottled, so short tests overstate throughput.
            (4096u64, 6u64 << 20),
            (32 << 10, 48 << 20),
            (128 << 10, 128 << 20),
            (512 << 10, 160 << 20),
            (2 << 20, 160 << 20),
        ] {
            check_interrupted()?;
            let bps = io_test_in_leaf(&o.binary, &calib_leaf, f, bs, total, &log_dir)?;
            calibration.push((bs, bps));
        }
        let at = |b: u64| {
            calibration
                .iter()
                .find(|c| c.0 == b)
                .map(|c| c.1)
                .unwrap_or(0.0)
        };
        progress.say(&format!(
            "calibration inside the domain (O_DIRECT, random offsets): 4 KiB {:.1} MB/s, 512 KiB {:.1} MB/s ({:.1}x)",
            at(4096) / 1e6,
            at(512 << 10) / 1e6,
            at(512 << 10) / at(4096).max(1.0)
        ));
        let curve = serde_json::json!({"points": calibration.iter().map(|(b, v)| serde_json::json!({"block_bytes": b, "bytes_per_sec": v})).collect::<Vec<_>>()});
        std::fs::write(
            daemon_dir.join("state/calibration.json"),
            serde_json::to_string_pretty(&curve)?,
        )?;
    }
    // Daemon setup and availability.
    let setup = DaemonSetup {
        binary: o.binary.clone(),
        dir: daemon_dir.clone(),
        memory_cgroup: domain.roots.mem_root(),
        blkio_cgroup: worker.blkio.clone(),
        budget_bytes: o.device.preload_budget_bytes,
        apps: apps
            .iter()
            .map(|a| (a.name().to_string(), a.leaf.mem.clone()))
            .collect(),
    };
    let mut skipped: BTreeMap<String, String> = BTreeMap::new();
    for &p in o.policies.iter().filter(|p| p.needs_daemon()) {
        let cfg = setup.config_path(p);
        std::fs::write(
            &cfg,
            setup.config(p, &log_dir.join(format!("trace-{}.json", p.name()))),
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
    // Profiles.
    let profile_mode = make_profiles(o, &apps, &setup, &log_dir, progress)?;
    Ok((apps, setup, skipped, calibration, profile_mode))
}

fn io_test_in_leaf(
    binary: &Path,
    leaf: &live::Leaf,
    file: &Path,
    block: u64,
    total: u64,
    log_dir: &Path,
) -> Result<f64> {
    let argv = vec![
        binary.to_string_lossy().to_string(),
        "bench-app".into(),
        "--io-test".into(),
        file.to_string_lossy().to_string(),
        "--block-bytes".into(),
        block.to_string(),
        "--total-bytes".into(),
        total.to_string(),
    ];
    let (mut p, t0) = crate::launch::spawn(
        "calibration",
        &argv,
        leaf,
        0,
        &log_dir.join("calibration.log"),
    )?;
    let re = regex::Regex::new(r"^bytes_per_sec (\S+)$")?;
    let (o, _) = p.wait_ready(
        &crate::launch::Readiness::Line(re),
        t0,
        Duration::from_secs(120),
    );
    p.stop();
    if o != crate::launch::Outcome::Ready {
        bail!(
            "calibration read of {} with {block}-byte blocks failed ({o:?}); see {}",
            file.display(),
            log_dir.join("calibration.log").display()
        );
    }
    // The reader thread saw the line; re-run parse from the log is not needed:
    // the io-test prints the same number to stderr as well.
    let log = std::fs::read_to_string(log_dir.join("calibration.log")).unwrap_or_default();
    let v = log
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("bytes_per_sec "))
        .and_then(|x| x.trim().parse::<f64>().ok())
        .context("calibration result missing from its log")?;
    Ok(v)
}

fn make_profiles(
    o: &BenchOptions,
    apps: &[App],
    setup: &DaemonSetup,
    log_dir: &Path,
    progress: &Progress,
) -> Result<String> {
    let dir = setup.state_dir().join("profiles");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut mode = o.profiles.clone();
    if mode != "spec" {
        match record_profiles(o, apps, setup, log_dir) {
            Ok(n) => {
                progress.say(&format!(
                    "recorded {n} launch profiles with `appflow record`"
                ));
                return Ok("recorded".into());
            }
            Err(e) if mode == "record" => return Err(e.context("--profiles record")),
            Err(e) => {
                progress.say(&format!(
                    "`appflow record` unavailable ({e:#}); writing profiles from the synthetic specs"
                ));
                mode = "spec".into();
            }
        }
    }
    let _ = mode;
    let mut n = 0;
    for a in apps {
        if let Some(l) = &a.layout {
            let mut p = LaunchProfile::new(a.name());
            p.merge_launch(&l.observation(now_ms));
            domain::write_atomic(
                &dir.join(format!("{}.json", a.name())),
                p.to_json().as_bytes(),
            )?;
            n += 1;
        }
    }
    progress.say(&format!(
        "wrote {n} launch profiles from the synthetic apps' known access patterns"
    ));
    Ok("from-spec".into())
}

fn record_profiles(
    o: &BenchOptions,
    apps: &[App],
    setup: &DaemonSetup,
    log_dir: &Path,
) -> Result<usize> {
    let mut n = 0;
    for a in apps {
        check_interrupted()?;
        for p in a.paths() {
            let _ = synth::drop_file_cache(&p);
        }
        let argv = a.argv(&o.binary, o.device.scale, &o.roots.run_dir.join("mnt"));
        let mut cmd = std::process::Command::new(&o.binary);
        cmd.arg("record")
            .arg("--app")
            .arg(a.name())
            .arg("--state-dir")
            .arg(setup.state_dir());
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
        let log = std::fs::File::create(log_dir.join(format!("record-{}.log", a.name())))?;
        cmd.stdout(log.try_clone()?).stderr(log);
        let st = cmd.status().context("running appflow record")?;
        if !st.success() {
            bail!(
                "appflow record of {} exited with {st}: {}",
                a.name(),
                policy::last_line(&log_dir.join(format!("record-{}.log", a.name())))
            );
        }
        let pf = setup
            .state_dir()
            .join(format!("profiles/{}.json", a.name()));
        let text = std::fs::read_to_string(&pf)
            .with_context(|| format!("appflow record wrote no {}", pf.display()))?;
        let p = LaunchProfile::from_json(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", pf.display()))?;
        if p.files.is_empty() {
            bail!("the recorded profile of {} has no files", a.name());
        }
        n += 1;
    }
    Ok(n)
}

fn measure_all(
    o: &BenchOptions,
    bed: &mut Bed,
    skipped: &BTreeMap<String, String>,
    progress: &Progress,
    calibration: &[(u64, f64)],
    profile_mode: &str,
) -> Result<Measured> {
    let policies: Vec<Policy> = o
        .policies
        .iter()
        .copied()
        .filter(|p| !skipped.contains_key(p.name()))
        .collect();
    let mut jobs: Vec<(Scenario, Option<String>)> = Vec::new();
    for &s in &o.scenarios {
        match s {
            Scenario::Low | Scenario::Medium | Scenario::High => {
                jobs.extend(o.targets.iter().map(|t| (s, Some(t.clone()))))
            }
            _ => jobs.push((s, None)),
        }
    }
    let total = jobs.len() as u64 * o.reps as u64 * policies.len() as u64;
    if let Some(b) = &progress.bar {
        b.set_length(total);
    }
    let mut all: Vec<(Scenario, Measurement)> = Vec::new();
    for (scenario, target) in &jobs {
        for rep in 0..o.reps {
            // Interleave: rotate the policy order each repetition (ABC, BCA, CAB...).
            let n = policies.len();
            for i in 0..n {
                let p = policies[(i + rep as usize) % n];
                check_interrupted()?;
                let what = format!(
                    "{} {}rep {}/{} policy {}",
                    scenario.name(),
                    target
                        .as_deref()
                        .map(|t| format!("target {t} "))
                        .unwrap_or_default(),
                    rep + 1,
                    o.reps,
                    p.name()
                );
                progress.step(&what);
                let r = match scenario {
                    Scenario::Low | Scenario::Medium | Scenario::High => {
                        run::run_target(bed, p, *scenario, target.as_deref().expect("target"), rep)
                    }
                    Scenario::Multitask => run::run_multitask(bed, p, rep),
                    Scenario::Trace => run::run_trace(
                        bed,
                        p,
                        rep,
                        &o.trace,
                        o.time_compress,
                        Duration::from_millis(300),
                    ),
                };
                let m = match r {
                    Ok(m) => m,
                    Err(e) if live::interrupted() => return Err(e),
                    Err(e) => {
                        progress.say(&format!("{what}: session failed: {e:#}"));
                        let mut m = run::Measurement {
                            policy: p,
                            rep,
                            launches: vec![],
                            load_launches: vec![],
                            delta: Default::default(),
                            killed: vec![],
                            foreground_killed: false,
                            survivors: 0,
                            preload_peak_bytes: 0,
                            daemon_standby_peak_bytes: None,
                            zram: (0, 0),
                            timeline: vec![],
                            error: None,
                        };
                        m.error = Some(format!("{e:#}"));
                        m
                    }
                };
                let lat: Vec<String> = m
                    .launches
                    .iter()
                    .map(|l| {
                        format!(
                            "{} {:.0} ms{}",
                            l.app,
                            l.ms,
                            if l.timed_out {
                                " (timed out)"
                            } else if l.died.is_some() {
                                " (died)"
                            } else {
                                ""
                            }
                        )
                    })
                    .collect();
                if !o.progress || lat.len() <= 3 {
                    progress.say(&format!(
                        "{what}: {} kills {}",
                        lat.join(", "),
                        m.killed.len()
                    ));
                }
                all.push((*scenario, m));
                progress.inc();
            }
        }
    }
    let mut reports = Vec::new();
    for &s in &o.scenarios {
        let ms: Vec<Measurement> = all
            .iter()
            .filter(|(x, _)| *x == s)
            .map(|(_, m)| m.clone())
            .collect();
        let mut extra = BTreeMap::new();
        extra.insert(
            "testbed".into(),
            serde_json::json!({
                "scale": o.device.scale,
                "preset": o.device.preset,
                "app_memory_bytes": o.device.app_memory_bytes,
                "zram_disksize_bytes": o.device.zram_disksize_bytes,
                "zram_mem_limit_bytes": o.device.zram_mem_limit_bytes,
                "preload_budget_bytes": o.device.preload_budget_bytes,
                "image_bytes": bed.domain.image_bytes,
                "calibration_bytes_per_sec": calibration.iter().map(|(b, v)| serde_json::json!({"block_bytes": b, "bytes_per_sec": v.round()})).collect::<Vec<_>>(),
                "profiles": profile_mode,
                "repetitions": o.reps,
                "targets": o.targets,
                "cache_drop": "posix_fadvise(DONTNEED) on every app file of the loop fs at each session start",
                "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            }),
        );
        let r = report::build(o.device.preset.name, s, &o.policies, &ms, skipped, extra);
        if let Some(dir) = &o.plot_dir {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            plot::latency(&r, &dir.join(format!("latency-{}.svg", s.name())))?;
            for m in ms.iter().filter(|m| m.rep == 0 && !m.timeline.is_empty()) {
                plot::timeline(
                    &format!(
                        "{} — {} cold launch of {} (rep 1)",
                        m.policy.name(),
                        s.name(),
                        m.launches.first().map(|l| l.app.as_str()).unwrap_or("")
                    ),
                    &m.timeline,
                    &dir.join(format!("timeline-{}-{}.svg", s.name(), m.policy.name())),
                )?;
            }
        }
        reports.push(r);
    }
    Ok((reports, all))
}

/// Runs `appflow bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    if a.cleanup {
        if !live::is_root() {
            return Err(input(
                "appflow bench --cleanup needs root (run it with sudo)",
            ));
        }
        let removed = live::cleanup(&Roots::default())?;
        let mut text = String::new();
        if removed.is_empty() {
            text.push_str("nothing to clean up\n");
        } else {
            for r in &removed {
                text += &format!("removed {r:?}\n");
            }
        }
        std::io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(());
    }
    let o = options(&a)?;
    if let Some(p) = &a.emit_sim_device {
        let text = crate::simdev::sim_device_toml(&o, &crate::simdev::Measured::default());
        domain::write_atomic(p, text.as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let out = run_bench(&o)?;
    if let Some(p) = &a.emit_sim_device {
        let measured = crate::simdev::Measured {
            calibration: calibration_of(&out.reports),
            stock_zram_ratio: crate::simdev::stock_zram_ratio(
                &out.measurements
                    .iter()
                    .map(|(_, m)| m.clone())
                    .collect::<Vec<_>>(),
            ),
        };
        let text = crate::simdev::sim_device_toml(&o, &measured);
        domain::write_atomic(p, text.as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
        eprintln!(
            "appflow bench: wrote the simulator's device file {}",
            p.display()
        );
    }
    let json = if out.reports.len() == 1 {
        serde_json::to_string_pretty(&out.reports[0])?
    } else {
        serde_json::to_string_pretty(&out.reports)?
    };
    if let Some(p) = &a.out {
        std::fs::write(p, &json).with_context(|| format!("writing {}", p.display()))?;
    }
    let mut text = String::new();
    if a.format == "json" {
        text = format!("{json}\n");
    } else {
        for r in &out.reports {
            text += &format!("{}\n", report::table(r));
        }
        text += &format!(
            "domain torn down: {}\n",
            if out.leftovers.is_empty() {
                "nothing left behind".to_string()
            } else {
                format!("LEFTOVERS {:?}", out.leftovers)
            }
        );
    }
    // A closed pipe is reported after the leftover check below.
    let written = std::io::stdout().lock().write_all(text.as_bytes());
    if !out.changed_sysctls.is_empty() {
        eprintln!(
            "appflow bench: warning: sysctls differ after the run: {:?}",
            out.changed_sysctls
        );
    }
    if !out.leftovers.is_empty() {
        bail!("leftovers after teardown: {:?}", out.leftovers);
    }
    Ok(written?)
}

/// The in-domain calibration recorded in a report's `extra.testbed`.
fn calibration_of(reports: &[RunReport]) -> Vec<(u64, f64)> {
    reports
        .first()
        .and_then(|r| r.extra.get("testbed"))
        .and_then(|t| t.get("calibration_bytes_per_sec"))
        .and_then(|c| c.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p.get("block_bytes")?.as_u64()?,
                        p.get("bytes_per_sec")?.as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Arguments of the hidden `appflow bench-app` (one synthetic app process).
#[derive(clap::Args, Debug)]
pub struct AppArgs {
    /// The app's spec file.
    #[arg(long, required_unless_present = "io_test")]
    pub spec: Option<PathBuf>,
    /// The mounted app file system (the app's files are under ROOT/apps/NAME).
    #[arg(long, required_unless_present = "io_test")]
    pub root: Option<PathBuf>,
    /// The scale of sizes.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Instead of an app: read this file with O_DIRECT and print `bytes_per_sec N`.
    #[arg(long)]
    pub io_test: Option<PathBuf>,
    /// Block size of the I/O test, bytes.
    #[arg(long, default_value_t = 4096)]
    pub block_bytes: u64,
    /// Bytes the I/O test reads.
    #[arg(long, default_value_t = 8 << 20)]
    pub total_bytes: u64,
}

/// Runs one synthetic app (or the I/O test).
pub fn run_app(a: AppArgs) -> Result<()> {
    if let Some(f) = &a.io_test {
        let bps = synth::io_test(f, a.block_bytes, a.total_bytes)?;
        eprintln!("bytes_per_sec {bps:.0}");
        writeln!(std::io::stdout().lock(), "bytes_per_sec {bps:.0}")?;
        return Ok(());
    }
    let spec_file = a.spec.as_ref().context("--spec")?;
    let s = AppSpec::load(spec_file).map_err(|e| input(e.to_string()))?;
    let syn = s
        .synthetic()
        .ok_or_else(|| input(format!("{}: not a synthetic app", spec_file.display())))?;
    let root = a.root.as_ref().context("--root")?;
    let layout = Layout::new(&s.name, syn, a.scale, &root.join("apps").join(&s.name));
    let switch_cpu_us = (syn.cpu_ms as f64 * 1000.0 * a.scale / 10.0) as u64;
    synth::run_app(&layout, switch_cpu_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_refused_with_exit_2_errors() {
        let is_input =
            |e: anyhow::Error| e.chain().any(|c| c.downcast_ref::<InputError>().is_some());
        assert_eq!(BenchArgs::default().device, "phone-6gb");
        let a = BenchArgs {
            device: "phone-3gb".into(),
            ..BenchArgs::default()
        };
        let e = options(&a).unwrap_err();
        assert!(e.to_string().contains("phone-6gb"), "{e}");
        assert!(is_input(e));
        let a = BenchArgs {
            policies: vec!["android".into()],
            ..BenchArgs::default()
        };
        assert!(is_input(options(&a).unwrap_err()));
        let a = BenchArgs {
            target: vec!["nope".into()],
            ..BenchArgs::default()
        };
        assert!(is_input(options(&a).unwrap_err()));
        let a = BenchArgs {
            scenario: vec!["trace".into()],
            ..BenchArgs::default()
        };
        assert!(is_input(options(&a).unwrap_err()));
        let a = BenchArgs {
            scale: -1.0,
            ..BenchArgs::default()
        };
        assert!(is_input(options(&a).unwrap_err()));
        let d = tempfile::tempdir().unwrap();
        // An empty trace, and compression factors that would break the replay clock.
        let empty = d.path().join("empty.csv");
        std::fs::write(&empty, "user,timestamp,app,event\n").unwrap();
        let trace_args = |f: f64| BenchArgs {
            scenario: vec!["trace".into()],
            trace: Some(empty.clone()),
            time_compress: f,
            ..BenchArgs::default()
        };
        let e = options(&trace_args(600.0)).unwrap_err();
        assert!(e.to_string().contains("no launch events"), "{e}");
        assert!(is_input(e));
        std::fs::write(&empty, "u,1000,llm,open\n").unwrap();
        options(&trace_args(600.0)).unwrap();
        for f in [1e-300, 0.0, -1.0, f64::NAN, f64::INFINITY, 1e300] {
            let e = options(&trace_args(f)).unwrap_err();
            assert!(e.to_string().contains("--time-compress"), "{f}: {e}");
            assert!(is_input(e));
        }
        std::fs::write(d.path().join("bad.toml"), "name = \"x\"\nclass = \"gb\"\n").unwrap();
        let a = BenchArgs {
            app_files: vec![d.path().join("bad.toml")],
            ..BenchArgs::default()
        };
        let e = options(&a).unwrap_err();
        assert!(e.to_string().contains("bad.toml"), "{e}");
        assert!(is_input(e));
    }

    #[test]
    fn defaults_and_quick() {
        let o = options(&BenchArgs::default()).unwrap();
        assert_eq!(o.targets, vec!["llm".to_string()]);
        assert_eq!(o.policies.len(), policy::ALL.len());
        assert_eq!(o.scenarios, vec![Scenario::High]);
        let q = options(&BenchArgs {
            quick: true,
            ..BenchArgs::default()
        })
        .unwrap();
        assert_eq!(q.reps, 1);
        assert_eq!(q.scenarios, vec![Scenario::Low]);
        assert_eq!(
            q.policies,
            vec![Policy::Stock, Policy::Appflow, Policy::Oracle]
        );
    }
}
