//! Options of `appflow bench`: the command-line arguments ([`BenchArgs`],
//! and [`AppArgs`] of the hidden `appflow bench-app`) and their validation
//! into [`BenchOptions`] (no root needed; bad input is an exit-2
//! [`InputError`] naming what was wrong).

use crate::device::{self, Device};
use crate::domain::Roots;
use crate::policy::{self, Policy};
use crate::run::{self, Scenario, TraceEvent};
use crate::spec::{self, AppClass, AppSpec};
use anyhow::{Context, Result};
use appflow_core::InputError;
use std::io::IsTerminal;
fn policies_help() -> String {
    format!(
        "Policies, comma-separated (default: stock, prefetch, acclaim+prefetch, appflow and its ablations, then oracle; `all`: every policy a stock kernel can run, then oracle).\n{}\noracle: the same launch with its files cached and no background load (the floor)",
        appflow_core::policy::help_text()
    )
}

#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Scenarios, comma-separated: idle, low, medium, high, multitask, trace (default idle,high: every report shows the load slowdown, the AppFlow paper Fig. 4).
    #[arg(long, default_value = "idle,high", value_delimiter = ',')]
    pub scenario: Vec<String>,
    /// Target app(s) of idle/low/medium/high, comma-separated (default: the first GB-scale app).
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Policies, comma-separated (default: the AppFlow paper's comparison,
    /// then oracle; `all`: every policy a stock kernel can run).
    #[arg(long, value_delimiter = ',', long_help = policies_help())]
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
    /// Keep the run's logs here (each daemon session's log with its kill and
    /// reclaim lines, each app's log, the calibration logs); they are copied
    /// out before the testbed is torn down. The directory must be new or empty.
    #[arg(long)]
    pub logs: Option<PathBuf>,
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
    /// Where the run's logs are kept (`--logs`).
    pub keep_logs: Option<PathBuf>,
    /// Where things go.
    pub roots: Roots,
    /// Progress on stderr.
    pub progress: bool,
}

pub(crate) fn input(msg: impl Into<String>) -> anyhow::Error {
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
                    "unknown scenario {s:?}; known: idle, low, medium, high, multitask, trace"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let policies: Vec<Policy> = if a.policies.is_empty() {
        policy::default_set()
    } else if a.policies.iter().any(|p| p == "all") {
        if a.policies.len() > 1 {
            return Err(input("--policies all names every policy; give it alone"));
        }
        policy::all()
    } else {
        a.policies
            .iter()
            .map(|s| Policy::parse(s).map_err(input))
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
        keep_logs: match &a.logs {
            Some(d) if d.read_dir().is_ok_and(|mut e| e.next().is_some()) => {
                return Err(input(format!(
                    "--logs {}: the directory is not empty (give a new or empty one)",
                    d.display()
                )))
            }
            Some(d) if d.exists() && !d.is_dir() => {
                return Err(input(format!("--logs {}: not a directory", d.display())))
            }
            d => d.clone(),
        },
        roots: Roots::default(),
        progress: std::io::stderr().is_terminal(),
    })
}

/// Arguments of the hidden `appflow bench-app` (one synthetic app process).
#[derive(clap::Args, Debug)]
pub struct AppArgs {
    /// The app's spec file.
    #[arg(long, required_unless_present_any = ["io_test", "alloc_test"])]
    pub spec: Option<PathBuf>,
    /// The mounted app file system (the app's files are under ROOT/apps/NAME).
    #[arg(long, required_unless_present_any = ["io_test", "alloc_test"])]
    pub root: Option<PathBuf>,
    /// The scale of sizes.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// The share of the preset's CPU budget the domain has, in (0, 1]: the
    /// app burns its `cpu_ms` × this of CPU time, so its own work takes the
    /// preset's time on the calibrated budget.
    #[arg(long, default_value_t = 1.0)]
    pub cpu_share: f64,
    /// Instead of an app: read this file with O_DIRECT and print `bytes_per_sec N`.
    #[arg(long)]
    pub io_test: Option<PathBuf>,
    /// Block size of the I/O test, bytes.
    #[arg(long, default_value_t = 4096)]
    pub block_bytes: u64,
    /// Bytes the I/O test reads.
    #[arg(long, default_value_t = 8 << 20)]
    pub total_bytes: u64,
    /// The I/O test reads through the page cache, in order from the start
    /// (its pages dropped first), as the preload worker streams, instead of
    /// O_DIRECT at random offsets.
    #[arg(long, requires = "io_test")]
    pub buffered: bool,
    /// The I/O test reads in the idle I/O class (ioprio IDLE), as the
    /// preload worker does.
    #[arg(long, requires = "io_test")]
    pub idle_class: bool,
    /// Instead of an app: write this many bytes of app-like anonymous
    /// memory as fast as possible and print `bytes_per_sec N`.
    #[arg(long)]
    pub alloc_test: Option<u64>,
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
            policies: vec!["acclaim".into()],
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
        std::fs::write(d.path().join("bad.toml"), "name = \"x\"\nclass = \"gb\"\n").unwrap();
        let a = BenchArgs {
            app_files: vec![d.path().join("bad.toml")],
            ..BenchArgs::default()
        };
        let e = options(&a).unwrap_err();
        assert!(e.to_string().contains("bad.toml"), "{e}");
        assert!(is_input(e));
        // --logs: never into a directory with files in it, nor onto a file;
        // a new or empty directory is taken.
        for logs in [d.path().to_path_buf(), d.path().join("bad.toml")] {
            let e = options(&BenchArgs {
                logs: Some(logs),
                ..BenchArgs::default()
            })
            .unwrap_err();
            assert!(e.to_string().contains("--logs"), "{e}");
            assert!(is_input(e));
        }
        let empty = tempfile::tempdir().unwrap();
        for logs in [d.path().join("new"), empty.path().to_path_buf()] {
            let o = options(&BenchArgs {
                logs: Some(logs.clone()),
                ..BenchArgs::default()
            })
            .unwrap();
            assert_eq!(o.keep_logs, Some(logs));
        }
    }

    #[test]
    fn real_app_pack_specs_are_valid_command_apps_that_install() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps-real");
        let specs = spec::load_dir(&dir).unwrap();
        assert_eq!(specs.len(), 3);
        for s in &specs {
            match &s.body {
                spec::AppBody::Command(c) => {
                    assert!(!c.install.is_empty(), "{}", s.name);
                    assert!(c.argv[0].starts_with("{root}/"), "{}", s.name);
                }
                spec::AppBody::Synthetic(_) => panic!("{} is synthetic", s.name),
            }
        }
        let bad = "name = \"x\"\nclass = \"gb\"\nkind = \"command\"\n[command]\nargv = [\"a\"]\nready = \"exit\"\ntimeout_ms = 1\ninstall = [\"rel/path\"]\n";
        let e = AppSpec::parse(bad, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("install"), "{e}");
    }

    #[test]
    fn defaults_and_quick() {
        let o = options(&BenchArgs::default()).unwrap();
        assert_eq!(o.targets, vec!["llm".to_string()]);
        assert_eq!(o.policies, policy::default_set());
        assert_eq!(o.policies.len(), policy::DEFAULT_POLICIES.len() + 1);
        let all = options(&BenchArgs {
            policies: vec!["all".into()],
            ..BenchArgs::default()
        })
        .unwrap();
        assert_eq!(all.policies, policy::all());
        assert!(options(&BenchArgs {
            policies: vec!["all".into(), "stock".into()],
            ..BenchArgs::default()
        })
        .is_err());
        assert_eq!(o.scenarios, vec![Scenario::Idle, Scenario::High]);
        let q = options(&BenchArgs {
            quick: true,
            ..BenchArgs::default()
        })
        .unwrap();
        assert_eq!(q.reps, 1);
        assert_eq!(q.scenarios, vec![Scenario::Low]);
        assert_eq!(
            q.policies,
            vec![
                Policy::named("stock"),
                Policy::named("appflow"),
                Policy::Oracle
            ]
        );
    }
}
