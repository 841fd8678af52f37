//! The `appflow` binary: one command, three parts over one policy core.
//!
//! Each part owns its arguments and its `run` (in `appflow_sim::cli`,
//! `appflow_linux::cli`, `appflow_bench::cli`); this file only composes them
//! and maps errors to exit codes: 0 success, 1 failure, 2 bad input.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Launch-aware memory scheduling for Linux devices (AppFlow, MobiCom '26).
#[derive(Parser)]
#[command(name = "appflow", version, about, long_about = None)]
struct Cli {
    /// Log filter (tracing syntax, e.g. `info`, `appflow_linux=debug`); RUST_LOG overrides.
    #[arg(long, global = true, default_value = "info")]
    log: String,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the deterministic phone simulator (no root needed).
    Sim(appflow_sim::cli::SimArgs),
    /// Run the real-kernel testbed: builds a phone-like domain, launches real processes (root).
    Bench(appflow_bench::cli::BenchArgs),
    /// Serve a directory through the testbed's phone-like flash device at a mount point, until stopped (root).
    FlashServe(appflow_bench::serve::ServeArgs),
    /// Run the scheduler daemon on this kernel (root).
    Daemon(appflow_linux::cli::DaemonArgs),
    /// Show the running daemon's state.
    Status(appflow_linux::cli::StatusArgs),
    /// Tell the daemon about launches and foreground changes.
    Notify(appflow_linux::cli::NotifyArgs),
    /// Record one launch of a command into the app's launch profile.
    Record(appflow_linux::cli::RecordArgs),
    /// List or show launch profiles.
    Apps(appflow_linux::cli::AppsArgs),
    /// Measure read throughput vs block size on the storage holding the apps.
    Calibrate(appflow_linux::cli::CalibrateArgs),
    /// List the kernel interfaces the daemon uses: present or missing, and what degrades.
    Doctor(appflow_linux::cli::DoctorArgs),
    /// The daemon's preload worker (spawned by the daemon inside the device domain).
    #[command(hide = true)]
    PreloadWorker(appflow_linux::cli::PreloadWorkerArgs),
    /// A synthetic app process of the testbed (spawned by `appflow bench`).
    #[command(hide = true)]
    BenchApp(appflow_bench::cli::AppArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cli.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: a log written to a file stays greppable.
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if cli.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
    let result = match cli.cmd {
        Cmd::Sim(a) => appflow_sim::cli::run(a),
        Cmd::Bench(a) => appflow_bench::cli::run(a),
        Cmd::FlashServe(a) => appflow_bench::serve::run_serve(a),
        Cmd::Daemon(a) => appflow_linux::cli::run_daemon(a),
        Cmd::Status(a) => appflow_linux::cli::run_status(a),
        Cmd::Notify(a) => appflow_linux::cli::run_notify(a),
        Cmd::Record(a) => appflow_linux::cli::run_record(a),
        Cmd::Apps(a) => appflow_linux::cli::run_apps(a),
        Cmd::Calibrate(a) => appflow_linux::cli::run_calibrate(a),
        Cmd::Doctor(a) => appflow_linux::cli::run_doctor(a),
        Cmd::PreloadWorker(a) => appflow_linux::cli::run_preload_worker(a),
        Cmd::BenchApp(a) => appflow_bench::cli::run_app(a),
    };
    appflow_linux::cli::exit_code("appflow", result)
}
