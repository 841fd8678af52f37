//! `appflow daemon`, `appflow status`, `appflow notify`, and the hidden
//! `appflow preload-worker`.
// Output goes through one fallible write, so a closed pipe ends the
// command normally (`appflow_linux::cli::exit_code`) instead of panicking.
#![deny(clippy::print_stdout)]

use crate::cli::{emit, out};
use crate::config::Config;
use crate::daemon::run::{Runtime, WorkerCommand};
use crate::daemon::EventKind;
use crate::socket::{request, Request};
use appflow_core::InputError;
use std::path::PathBuf;

const DEFAULT_SOCKET: &str = "/run/appflow/appflow.sock";

/// Arguments of `appflow daemon`.
#[derive(clap::Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see crates/linux/appflow.example.toml). Without it, every default applies.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Validate the configuration and exit: 0 when valid, 2 (naming the field) when not.
    #[arg(long)]
    pub check_config: bool,
    /// Decide and log, change nothing (overrides `daemon.dry_run`).
    #[arg(long)]
    pub dry_run: bool,
    /// Control socket (overrides `daemon.socket`).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// State directory (overrides `daemon.state_dir`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Output format of `appflow status`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFormat {
    /// Human-readable.
    Table,
    /// The daemon's JSON reply.
    Json,
}

/// Arguments of `appflow status`.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = StatusFormat::Table)]
    pub format: StatusFormat,
    /// Print the Prometheus metrics instead of the status.
    #[arg(long)]
    pub metrics: bool,
}

/// A notification event.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotifyEvent {
    /// The app is being exec'ed (stream and protect its launch files).
    Launch,
    /// The app is ready (release the protection).
    Launched,
    /// The app is in the foreground.
    Foreground,
    /// The app went to the background.
    Background,
    /// The app exited.
    Exit,
}

impl From<NotifyEvent> for EventKind {
    fn from(e: NotifyEvent) -> Self {
        match e {
            NotifyEvent::Launch => EventKind::Launch,
            NotifyEvent::Launched => EventKind::Launched,
            NotifyEvent::Foreground => EventKind::Foreground,
            NotifyEvent::Background => EventKind::Background,
            NotifyEvent::Exit => EventKind::Exit,
        }
    }
}

/// Arguments of `appflow notify`.
#[derive(clap::Args, Debug)]
pub struct NotifyArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// What happened.
    #[arg(value_enum)]
    pub event: NotifyEvent,
    /// The app's name (as in its profile / the config's [[app]]).
    pub app: String,
    /// The app's main process (its children are recognised too).
    #[arg(long)]
    pub pid: Option<u32>,
}

/// Arguments of the hidden `appflow preload-worker`.
#[derive(clap::Args, Debug)]
pub struct PreloadWorkerArgs {
    /// Largest single read, bytes.
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    pub max_read_bytes: u64,
    /// Keep standby spans warm this often (evicted pages read back, resident ones touched), ms.
    #[arg(long, default_value_t = 10_000)]
    pub touch_interval_ms: u64,
}

/// Loads and validates the configuration with the command-line overrides.
pub fn load_config(a: &DaemonArgs) -> anyhow::Result<Config> {
    let mut cfg = match &a.config {
        Some(p) => Config::load(p).map_err(|e| InputError::new(e.to_string()))?,
        None => Config::default(),
    };
    if a.dry_run {
        cfg.daemon.dry_run = true;
    }
    if let Some(s) = &a.socket {
        cfg.daemon.socket = s.clone();
    }
    if let Some(d) = &a.state_dir {
        cfg.daemon.state_dir = d.clone();
    }
    cfg.validate()
        .map_err(|(f, m)| InputError::new(format!("field {f}: {m}")))?;
    Ok(cfg)
}

/// Runs `appflow daemon`.
pub fn run_daemon(a: DaemonArgs) -> anyhow::Result<()> {
    let cfg = load_config(&a)?;
    if a.check_config {
        // The domain must exist too; nothing is changed.
        crate::daemon::run::open_domain(&cfg)?;
        let sc = cfg.scheduler_config();
        emit(&format!(
            "config OK: policy {}, domain {:?}{}, preload {:?}, reclaim {}, killer {:?}, {} declared apps\n",
            sc.policy.name,
            cfg.domain.kind,
            if cfg.domain.memory_cgroup.as_os_str().is_empty() {
                String::new()
            } else {
                format!(" {}", cfg.domain.memory_cgroup.display())
            },
            sc.preload_strategy(),
            // The user-space reclaimer's strategy (AppFlow's modes, PMR's
            // page-out, Ariadne's cold marking, ...), or off.
            if sc.reclaim_enabled {
                format!("{:?}", sc.policy.reclaim)
            } else {
                "off".to_string()
            },
            sc.killer_strategy(),
            cfg.apps.len()
        ))?;
        return Ok(());
    }
    let stop = crate::signals::install()?;
    let rt = Runtime::new(cfg, &WorkerCommand::current_exe()?)?;
    rt.run(stop)
}

fn mib(v: &serde_json::Value) -> String {
    match v.as_u64() {
        Some(b) => format!("{:.1} MiB", b as f64 / 1048576.0),
        None => "-".into(),
    }
}

/// Runs `appflow status`.
pub fn run_status(a: StatusArgs) -> anyhow::Result<()> {
    let req = if a.metrics {
        Request::Metrics {}
    } else {
        Request::Status {}
    };
    let v = request(&a.socket, &req)?;
    if v["ok"] != true {
        anyhow::bail!("daemon: {}", v["error"].as_str().unwrap_or("error"));
    }
    if a.metrics {
        return emit(v["text"].as_str().unwrap_or(""));
    }
    if a.format == StatusFormat::Json {
        return emit(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    }
    let mut o = String::new();
    let d = &v["domain"];
    let p = &v["preload"];
    let l = &v["loop"];
    out!(
        o,
        "appflow daemon pid {}{}, up {} s",
        v["pid"],
        if v["dry_run"] == true {
            " (dry-run)"
        } else {
            ""
        },
        v["uptime_ms"].as_u64().unwrap_or(0) / 1000
    );
    out!(o, "mode            {}", v["mode"].as_str().unwrap_or("?"));
    out!(o, "domain          {}", d["kind"].as_str().unwrap_or("?"));
    out!(
        o,
        "memory          total {}, available {} (M_F {}), anon {}, file {}",
        mib(&d["total_bytes"]),
        mib(&d["available_bytes"]),
        mib(&d["low_memory_bytes"]),
        mib(&d["anon_bytes"]),
        mib(&d["file_bytes"])
    );
    out!(
        o,
        "n_alloc         {} pages/tick (N_alloc {}), PSI some avg10 {}",
        d["alloc_pages_per_tick"],
        d["alloc_threshold_pages"],
        d["psi_some_avg10"]
    );
    let z = &d["sizing"];
    out!(
        o,
        "sizing          M_F {}, N_alloc {}",
        z["low_memory"].as_str().unwrap_or("?"),
        z["alloc_threshold"].as_str().unwrap_or("?")
    );
    for c in z["checks"].as_array().into_iter().flatten() {
        out!(
            o,
            "  {} {}",
            if c["ok"] == true { "ok  " } else { "WARN" },
            c["what"].as_str().unwrap_or("")
        );
    }
    out!(
        o,
        "preload         {} ({}): budget {}, plan {}, standby {}, protected {}, loaded {} in {} loads",
        if p["enabled"] == true { "on" } else { "off" },
        p["strategy"].as_str().unwrap_or("?"),
        mib(&p["budget_bytes"]), mib(&p["plan_bytes"]), mib(&p["standby_bytes"]), mib(&p["protected_bytes"]), mib(&p["loaded_bytes"]), p["loads"]
    );
    out!(
        o,
        "foreground      {}",
        v["foreground"].as_str().unwrap_or("-")
    );
    out!(
        o,
        "kills           {}   mode switches {}   processes {}",
        v["kills"],
        v["mode_switches"],
        v["processes"]
    );
    out!(
        o,
        "loop            {} ticks, jitter p50 {} ms p99 {} ms, work p50 {} ms p99 {} ms",
        l["ticks"],
        l["jitter_p50_ms"],
        l["jitter_p99_ms"],
        l["work_p50_ms"],
        l["work_p99_ms"]
    );
    let r = &v["reclaim"];
    let errors: Vec<String> = r["page_out_errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| format!("{} {}", e["name"].as_str().unwrap_or("?"), e["count"]))
        .collect();
    out!(
        o,
        "page-out        {} in {} calls, errors: {}",
        mib(&r["paged_out_bytes"]),
        r["page_out_calls"],
        if errors.is_empty() {
            "none".to_string()
        } else {
            errors.join(", ")
        }
    );
    let changed = v["changed_settings"].as_array().map(Vec::len).unwrap_or(0);
    out!(o, "changed         {changed} settings (restored on exit)");
    out!(
        o,
        "\n{:<20} {:>6} {:>4} {:>5} {:>8} {:>12} {:>8} {:>10} {:>10}  pids",
        "app",
        "fg",
        "lnch",
        "prof",
        "cutoff",
        "preload",
        "det/prof",
        "last ms",
        "stream"
    );
    for app in v["apps"].as_array().into_iter().flatten() {
        out!(
            o,
            "{:<20} {:>6} {:>4} {:>5} {:>8} {:>12} {:>8} {:>10} {:>10}  {}",
            app["name"].as_str().unwrap_or("?"),
            if app["foreground"] == true { "yes" } else { "" },
            if app["launching"] == true { "yes" } else { "" },
            if app["profile"] == true { "yes" } else { "no" },
            app["cutoff_bytes"]
                .as_u64()
                .map(|c| format!("{} KiB", c / 1024))
                .unwrap_or("-".into()),
            mib(&app["preload_bytes"]),
            format!(
                "{}/{}",
                app["launches_detected"].as_u64().unwrap_or(0),
                app["profile_launches"].as_u64().unwrap_or(0)
            ),
            app["last_launch_ms"]
                .as_u64()
                .map(|m| m.to_string())
                .unwrap_or("-".into()),
            mib(&app["last_launch_stream_bytes"]),
            app["pids"]
        );
    }
    out!(o, "\nlast decisions (newest first):");
    for dcs in v["decisions"].as_array().into_iter().flatten() {
        let reason = match (dcs["reason"].as_str(), dcs["code"].as_u64()) {
            (Some(r), Some(c)) => format!("{r}({c})"),
            _ => "-".into(),
        };
        out!(
            o,
            "  {:>9.1}s {:<8} {:<28} {}",
            dcs["at_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
            dcs["kind"].as_str().unwrap_or(""),
            reason,
            dcs["detail"].as_str().unwrap_or("")
        );
    }
    emit(&o)
}

/// Runs `appflow notify`.
pub fn run_notify(a: NotifyArgs) -> anyhow::Result<()> {
    if let Err(why) = appflow_core::valid_app_name(&a.app) {
        return Err(InputError::new(format!("invalid app name {:?}: {why}", a.app)).into());
    }
    let v = request(
        &a.socket,
        &Request::Notify {
            event: a.event.into(),
            app: a.app.clone(),
            pid: a.pid,
        },
    )?;
    let error = v["error"].as_str().unwrap_or("error");
    if v["ok"] == true {
        // The confirmation is the command's output: stdout.
        if let Some(m) = v["message"].as_str() {
            emit(&format!("{m}\n"))?;
        }
        Ok(())
    } else if v["bad_input"] == true {
        Err(InputError::new(format!("daemon refused: {error}")).into())
    } else {
        anyhow::bail!("daemon refused: {error}")
    }
}

/// Runs the hidden `appflow preload-worker` (spawned by the daemon).
pub fn run_preload_worker(a: PreloadWorkerArgs) -> anyhow::Result<()> {
    // Die with the daemon even if its stdin pipe is inherited elsewhere.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
    // Also set our own priorities (the daemon sets them too, from outside).
    let _ = crate::actuators::set_idle_io_priority(0);
    let _ = crate::actuators::set_nice(0, 19);
    let stdin = std::io::BufReader::new(std::io::stdin());
    let mut out = std::io::stdout().lock();
    crate::actuators::preload::worker_main(stdin, &mut out, a.max_read_bytes, a.touch_interval_ms)
}
