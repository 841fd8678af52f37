//! `appflow sim`: arguments and entry point.
// Output goes through one fallible write, so a closed pipe ends the
// command normally (`appflow_linux::cli::exit_code`) instead of panicking.
#![deny(clippy::print_stdout)]

use crate::catalog::{self, AppModel};
use crate::devfile;
use crate::device::{self, DEVICE_NAMES};
use crate::engine::SimConfig;
use crate::output;
use crate::policy::{self, Policy};
use crate::population;
use crate::trace;
use crate::workload::{
    self, Setup, Workload, MAX_MULTITASK_ROUNDS, MULTITASK_ROUNDS, WORKLOAD_NAMES,
};
use appflow_core::report::RunReport;
use appflow_core::{InputError, MIB};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::io::Write as _;
use std::path::PathBuf;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable table.
    Table,
    /// The RunReport JSON contract.
    Json,
    /// One CSV row per policy.
    Csv,
}

/// Arguments of `appflow sim`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Deterministic phone simulator: compare memory policies on the AppFlow paper's workloads",
    after_help = "Examples:\n  appflow sim --device pixel8-6gb --workload high --seed 1\n  appflow sim --workload multitask --device pixel7-6gb --compare-paper\n  appflow sim --generate-trace t.csv --days 100 --apps 60 --seed 1\n  appflow sim --generate-trace fleet.csv --users 48 --population mixed --days 30 --seed 1\n  appflow sim --device pixel8-8gb --workload trace --trace t.csv --policy android,appflow\n  appflow sim --device-file crates/bench/sim-device.default.toml --workload high --policy android,paralfetch,appflow"
)]
pub struct SimArgs {
    /// Device preset (pixel7-6gb, pixel7-8gb, pixel8-6gb, pixel8-8gb, headunit-4gb).
    #[arg(long, default_value = "pixel8-6gb")]
    pub device: String,
    /// Device file (TOML, see docs/sim.md) instead of a preset, e.g. the
    /// testbed's domain from `appflow bench --emit-sim-device`. Its `[[app]]`
    /// list and `[workload]` lists, if any, replace the app catalogue.
    #[arg(long, conflicts_with = "device")]
    pub device_file: Option<PathBuf>,
    /// App file (TOML `[[app]]` list and optional `[workload]`, see
    /// docs/sim.md) replacing the app catalogue; wins over the device file's apps.
    #[arg(long)]
    pub apps_file: Option<PathBuf>,
    /// Workload: none (no background), low, medium, high (§6.1), multitask (§6.3) or trace (needs --trace).
    #[arg(long, default_value = "high")]
    pub workload: String,
    /// Comma-separated policies (names or aliases of the policy registry).
    #[arg(
        long,
        default_value = "android,paralfetch,acclaim,acclaim+paralfetch,appflow",
        long_help = policy_help()
    )]
    pub policy: String,
    /// Seed of the run: same seed, same output, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the output to this file (atomically) instead of stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Also write an SVG plot of the policy comparison to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Show the paper's own reported figures beside ours (table and JSON `extra`).
    #[arg(long)]
    pub compare_paper: bool,
    /// Comma-separated GB-scale target apps for low/medium/high (default: the eight of §6.2).
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// App-usage trace to replay (CSV or TSV: user,timestamp,app,event; see docs/sim.md).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Generate a synthetic trace into this file and exit (with --days, --apps, --seed).
    #[arg(long)]
    pub generate_trace: Option<PathBuf>,
    /// Days of the generated trace (1-100).
    #[arg(long, default_value_t = 100)]
    pub days: u64,
    /// Apps in the generated trace (at least the 23 GB-scale and low-memory apps; at most the catalogue).
    #[arg(long, default_value_t = 60)]
    pub apps: usize,
    /// Users in the generated trace, drawn from --population (1-100000;
    /// without --users and --population: the single-user generator).
    #[arg(long)]
    pub users: Option<usize>,
    /// Mix of generated users (docs/sim.md "A user population"): mixed (the
    /// published mix, default with --users), uniform, one type (light,
    /// typical, heavy, gb-heavy, work, night, regular), or type=weight,...
    #[arg(long)]
    pub population: Option<String>,
    /// Preload budget M_p in MiB (default: the core's 100 MB, the AppFlow paper §4.1).
    #[arg(long)]
    pub preload_budget_mb: Option<u64>,
    /// kswapd's reclaim batch above the low watermark for the `refault`
    /// policy, KiB, fixed (default: the device's watermark gap, moved by the
    /// policy's controller; docs/peers.md; the re-fault study §5).
    #[arg(long)]
    pub kswapd_batch_kib: Option<u64>,
    /// Rounds of the multitask workload (2-20; default 2, the AppFlow
    /// paper's §6.3). Every round after the first is measured; with more
    /// than 2, an app comes back more than once, as in the ASAP paper's
    /// evaluation (apps running concurrently, switched among).
    #[arg(long)]
    pub multitask_rounds: Option<u32>,
    /// List devices, policies, workloads and apps, then exit.
    #[arg(long)]
    pub list: bool,
    /// Also write one row per user × policy to this file (.csv or .json),
    /// each user replayed alone on a fresh device (docs/python.md); needs
    /// --workload trace.
    #[arg(long)]
    pub per_user: Option<PathBuf>,
    /// Worker threads for running policies (results are assembled in policy order).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

impl Default for SimArgs {
    /// The arguments of a bare `appflow sim`: every flag at its default
    /// (for library callers such as the Python binding).
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Bare {
            #[command(flatten)]
            a: SimArgs,
        }
        <Bare as clap::Parser>::parse_from(["sim"]).a
    }
}

/// The catalogue and workload lists of a run: the built-in ones, or those
/// of `--apps-file` (else of the device file's `[[app]]` list).
pub fn catalogue_of(a: &SimArgs) -> anyhow::Result<(Vec<catalog::AppSpec>, Setup)> {
    for p in [&a.apps_file, &a.device_file].into_iter().flatten() {
        let f = devfile::read(p)?;
        if let Some(l) = devfile::apps(&f, &p.display().to_string())? {
            return Ok((l.apps, l.setup));
        }
        if a.apps_file.as_ref() == Some(p) {
            return Err(InputError::new(format!(
                "{}: --apps-file has no [[app]] entries",
                p.display()
            ))
            .into());
        }
    }
    Ok((catalog::catalogue(), Setup::builtin()))
}

fn policy_help() -> String {
    format!(
        "Comma-separated policies, by name or alias:\n{}",
        appflow_core::policy::help_text()
    )
}

/// Runs `appflow sim`.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    let (cat, setup) = catalogue_of(&a)?;
    if a.list {
        std::io::stdout()
            .lock()
            .write_all(listing(&cat).as_bytes())?;
        return Ok(());
    }
    if let Some(path) = &a.generate_trace {
        if a.users.is_some() || a.population.is_some() {
            return generate_population(&a, &cat, path);
        }
        let (text, st) = trace::generate(&cat, a.days, a.apps, a.seed)?;
        output::write_atomic(path, &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        eprintln!(
            "wrote {}: {} days, {} switches, {} apps used, {:.1} % of re-opens within 30 min",
            path.display(),
            st.days,
            st.switches,
            st.apps_used,
            st.reaccess_30min_share * 100.0
        );
        return Ok(());
    }
    let (report, per_user) = simulate_full(&a, &cat, &setup)?;
    let text = match a.format {
        Format::Table => output::table(&report, a.compare_paper),
        Format::Json => output::json(&report),
        Format::Csv => output::csv(&report),
    };
    if let Some(p) = &a.plot {
        let svg = output::plot_svg(&report, a.compare_paper)
            .map_err(|e| anyhow::anyhow!("plotting: {e}"))?;
        output::write_atomic(p, &svg)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    }
    if let (Some(p), Some(text)) = (&a.per_user, per_user) {
        output::write_atomic(p, &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    }
    match &a.output {
        Some(p) => output::write_atomic(p, &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

/// `--generate-trace` with `--users` / `--population`: a population of users.
fn generate_population(
    a: &SimArgs,
    cat: &[catalog::AppSpec],
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let pop = match &a.population {
        Some(s) => population::Population::parse(s)?,
        None => population::Population::mixed(),
    };
    let users = a.users.unwrap_or(1);
    let (events, _, st) = population::generate(cat, users, a.days, a.apps, a.seed, &pop)?;
    output::write_atomic(path, &population::to_csv(&events))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    eprintln!(
        "wrote {}: {users} users, {} days, {} events, {:.1} % of re-opens within 30 min\n{}",
        path.display(),
        st.days,
        events.len(),
        st.reaccess_30min_share * 100.0,
        st.table().trim_end()
    );
    Ok(())
}

fn listing(cat: &[catalog::AppSpec]) -> String {
    let mut s = String::new();
    s.push_str(&format!("devices:   {}\n", DEVICE_NAMES.join(", ")));
    s.push_str(&format!("policies:  {}\n", policy::names().join(", ")));
    s.push_str(&format!("workloads: {}\n", WORKLOAD_NAMES.join(", ")));
    s.push_str("apps (name, class, anon MiB, file MiB, small files):\n");
    for a in cat {
        s.push_str(&format!(
            "  {:<12} {:<8} {:>5} {:>5} {:>5}\n",
            a.name,
            format!("{:?}", a.class),
            a.anon_mib,
            a.file_mib,
            a.small_files
        ));
    }
    s
}

/// Validates the arguments and runs the simulation over the built-in
/// workload lists (no file is written).
pub fn simulate(a: &SimArgs, cat: &[catalog::AppSpec]) -> anyhow::Result<RunReport> {
    simulate_with(a, cat, &Setup::builtin())
}

/// Validates the arguments and runs the simulation over `cat` with the
/// workload lists of `setup` (no file is written).
pub fn simulate_with(
    a: &SimArgs,
    cat: &[catalog::AppSpec],
    setup: &Setup,
) -> anyhow::Result<RunReport> {
    Ok(simulate_full(a, cat, setup)?.0)
}

/// [`simulate_with`], and with `--per-user` also the per-user rows as the
/// file's text (CSV, or JSON for a `.json` name), through
/// [`crate::fleet::run_users`].
pub fn simulate_full(
    a: &SimArgs,
    cat: &[catalog::AppSpec],
    setup: &Setup,
) -> anyhow::Result<(RunReport, Option<String>)> {
    let (dev, file_budget) = match &a.device_file {
        Some(p) => {
            let d = devfile::device(&devfile::read(p)?, &p.display().to_string())?;
            (d.device, d.preload_budget_bytes)
        }
        None => (device::device(&a.device)?, None),
    };
    let policies = policy::parse_list(&a.policy)?;
    let mut cfg = SimConfig::with_seed(a.seed);
    if let Some(b) = file_budget {
        cfg.preload.budget_bytes = b;
    }
    if let Some(mb) = a.preload_budget_mb {
        let bytes = mb.saturating_mul(MIB);
        if bytes >= dev.app_memory_bytes() {
            return Err(InputError::new(format!(
                "--preload-budget-mb {mb} is not below the memory apps can use on {} ({} MiB)",
                dev.name,
                dev.app_memory_bytes() / MIB
            ))
            .into());
        }
        cfg.preload.budget_bytes = bytes;
    }
    if let Some(kib) = a.kswapd_batch_kib {
        let pages = kib.saturating_mul(appflow_core::KIB) / appflow_core::PAGE_BYTES;
        if pages == 0 || pages.saturating_mul(appflow_core::PAGE_BYTES) >= dev.app_memory_bytes() {
            return Err(InputError::new(format!(
                "--kswapd-batch-kib {kib} must be at least one page (4) and below the memory apps can use on {} ({} MiB)",
                dev.name,
                dev.app_memory_bytes() / MIB
            ))
            .into());
        }
        cfg.refault_batch_pages = Some(pages);
    }
    if let Some(p) = &a.plot {
        if p.extension().and_then(|e| e.to_str()) != Some("svg") {
            return Err(InputError::new(format!(
                "--plot {}: the plot is SVG; use a .svg file name",
                p.display()
            ))
            .into());
        }
    }
    let per_user_json = match &a.per_user {
        None => false,
        Some(_) if a.workload != "trace" => {
            return Err(InputError::new(format!(
                "--per-user needs --workload trace (got --workload {})",
                a.workload
            ))
            .into())
        }
        Some(p) => match p.extension().and_then(|e| e.to_str()) {
            Some("csv") => false,
            Some("json") => true,
            _ => {
                return Err(InputError::new(format!(
                    "--per-user {}: use a .csv or .json file name",
                    p.display()
                ))
                .into())
            }
        },
    };
    let events = match (&a.trace, a.workload.as_str()) {
        (Some(p), "trace") => Some(trace::TraceReader::open(p, cat)?.into_events()),
        (Some(_), w) => {
            return Err(InputError::new(format!(
                "--trace is only used with --workload trace (got --workload {w})"
            ))
            .into())
        }
        (None, _) => None,
    };
    let mut setup = setup.clone();
    match a.multitask_rounds {
        None => {}
        Some(_) if a.workload != "multitask" => {
            return Err(InputError::new(format!(
                "--multitask-rounds needs --workload multitask (got --workload {})",
                a.workload
            ))
            .into())
        }
        Some(n) if n != MULTITASK_ROUNDS && a.compare_paper => {
            return Err(InputError::new(format!(
                "--compare-paper compares the papers' two-round multitask; drop it or --multitask-rounds {n}"
            ))
            .into())
        }
        Some(n) if (2..=MAX_MULTITASK_ROUNDS).contains(&n) => setup.multitask_rounds = n,
        Some(n) => {
            return Err(InputError::new(format!(
                "--multitask-rounds {n}: use 2 to {MAX_MULTITASK_ROUNDS} rounds (the first launches, the rest are measured)"
            ))
            .into())
        }
    }
    let models: Vec<AppModel> = cat.iter().map(catalog::model).collect();
    let w = Workload::resolve_with(&a.workload, &models, &a.targets, events, &setup)?;
    crate::launch::check_launchable(&dev, &models, &w.installed(&models))?;
    let results = run_all(&dev, &policies, &cfg, &models, &w, a.threads);
    let per_user = match (&a.per_user, &w) {
        (Some(_), Workload::Trace { events }) => {
            let users = crate::fleet::split_users(events.clone());
            let b = crate::fleet::Batch {
                device: &dev,
                policies: &policies,
                cfg: &cfg,
                models: &models,
                launches: false,
                threads: a.threads,
            };
            let rows = crate::fleet::run_users(&b, &users, None)
                .expect("nothing cancels a CLI batch")
                .users;
            Some(if per_user_json {
                serde_json::to_string_pretty(&rows)? + "\n"
            } else {
                crate::fleet::to_csv(&rows).map_err(|e| anyhow::anyhow!("per-user CSV: {e}"))?
            })
        }
        _ => None,
    };
    let mut extra = BTreeMap::new();
    extra.insert("device_description".into(), json!(dev.description));
    if let Some(p) = &a.device_file {
        extra.insert("device_file".into(), json!(p.display().to_string()));
    }
    extra.insert(
        "model".into(),
        json!({
            "launch_step_ms": crate::engine::STEP_US as f64 / 1000.0,
            "launch_chunks": catalog::CHUNKS,
            "preload_budget_bytes": cfg.preload.budget_bytes,
            "n_alloc_pages": cfg.reclaim.alloc_threshold_pages,
        }),
    );
    extra.insert("definitions".into(), json!(definitions(&w)));
    let mut report = RunReport {
        device: dev.name.clone(),
        workload: a.workload.clone(),
        seed: a.seed,
        results,
        extra,
    };
    if a.compare_paper {
        let rows: Vec<_> = output::compare(&report)
            .into_iter()
            .map(|c| {
                json!({
                    "source": c.fig.source,
                    "metric": c.fig.metric,
                    "policy": c.fig.policy,
                    "baseline": c.fig.baseline,
                    "relative_percent": c.fig.relative,
                    "paper": c.fig.value,
                    "ours": c.ours.map(appflow_core::report::round3),
                    "paper_says": c.fig.text,
                })
            })
            .collect();
        report.extra.insert("paper_comparison".into(), json!(rows));
    }
    Ok((report, per_user))
}

fn definitions(w: &Workload) -> String {
    match w {
        Workload::Scenario { .. } => "launches/latency: the target GB-scale cold launches; cold-rel: background apps lost (killed) by the end of each target launch, summed; survivors: background apps alive after each target launch, summed; kills/DR: during the target launches".into(),
        Workload::Multitask { rounds, .. } if *rounds != MULTITASK_ROUNDS => format!("launches/latency/<1s: rounds 2-{rounds}; cold-rel: those launches that found the app killed; survivors: apps alive at their relaunch, summed over rounds 2-{rounds}; kills/DR: during rounds 2-{rounds}; relaunch_ms_mean_by_round: each measured round's mean"),
        Workload::Multitask { .. } => "launches/latency/<1s: the second round; cold-rel: second-round launches that found the app killed; survivors: apps alive at their relaunch (of 17); kills/DR: during the second round".into(),
        Workload::Trace { .. } => "launches: every app switch; latency: cold launches; <1s: all launches; cold-rel: cold launches of apps killed earlier; survivors: background apps alive at the end; kills/DR: whole replay".into(),
    }
}

fn run_all(
    dev: &device::Device,
    policies: &[Policy],
    cfg: &SimConfig,
    models: &[AppModel],
    w: &Workload,
    threads: usize,
) -> Vec<appflow_core::report::PolicyResult> {
    let total = w.units() * policies.len() as u64;
    let bar = if std::io::stderr().is_terminal() && total > 50 {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} events ({eta} left)",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    // Policies are independent; results come back in policy order, so the
    // output does not depend on thread timing.
    let results = crate::fleet::par_map(policies.len(), threads, None, &|i| {
        let o = workload::run_policy(dev, policies[i], cfg, models, w, &tick);
        workload::policy_result(&policies[i], w, models, &o)
    })
    .expect("nothing cancels the CLI's run");
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    results
}
