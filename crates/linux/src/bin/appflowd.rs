//! `appflowd`: the daemon side of `appflow` as a slim binary — `daemon`,
//! `status`, `notify` and the hidden `preload-worker`, with exactly the same
//! code and arguments as the `appflow` subcommands. For devices that only
//! need the scheduler, and for this crate's integration tests (cargo gives
//! tests the path of their own package's binaries only).

use appflow_linux::cli;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// The appflow scheduler daemon and its control commands.
#[derive(Parser)]
#[command(name = "appflowd", version, about)]
struct Args {
    /// Log filter (tracing syntax); RUST_LOG overrides.
    #[arg(long, global = true, default_value = "info")]
    log: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the scheduler daemon (root).
    Daemon(cli::DaemonArgs),
    /// Show the running daemon's state.
    Status(cli::StatusArgs),
    /// Tell the daemon about launches and foreground changes.
    Notify(cli::NotifyArgs),
    /// The daemon's preload worker.
    #[command(hide = true)]
    PreloadWorker(cli::PreloadWorkerArgs),
}

fn main() -> ExitCode {
    let a = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&a.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: a log written to a file stays greppable.
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let r = match a.cmd {
        Cmd::Daemon(x) => cli::run_daemon(x),
        Cmd::Status(x) => cli::run_status(x),
        Cmd::Notify(x) => cli::run_notify(x),
        Cmd::PreloadWorker(x) => cli::run_preload_worker(x),
    };
    appflow_linux::cli::exit_code("appflowd", r)
}
