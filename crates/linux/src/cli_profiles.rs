//! `appflow record`, `appflow apps`, `appflow calibrate`.
// Output goes through one fallible write, so a closed pipe ends the
// command normally (`appflow_linux::cli::exit_code`) instead of panicking.
#![deny(clippy::print_stdout)]

use crate::calibrate::{self, CalibrateOptions, DEFAULT_FILE_BYTES, SPEEDUP_BLOCKS};
use crate::cli::{emit, out};
use crate::recorder::{record_launch, Readiness, RecordError, RecordOptions};
use crate::store::{validate_app_name, ProfileStore, StoreError};
use appflow_core::profile::LaunchProfile;
use appflow_core::{InputError, MIB};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The daemon's default state directory.
const DEFAULT_STATE_DIR: &str = "/var/lib/appflow";

/// Output format of data commands.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table.
    #[default]
    Table,
    /// JSON for machines.
    Json,
}

/// Arguments of `appflow record`.
#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// App name; the profile is `<state-dir>/profiles/<APP>.json` (no '/', no '..').
    #[arg(long)]
    pub app: String,
    /// State directory holding `profiles/` (the daemon's `state_dir`).
    #[arg(long, default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// The launch is over when this file exists (it must not exist before the launch).
    #[arg(long, conflicts_with = "ready_line")]
    pub ready_file: Option<PathBuf>,
    /// The launch is over when a line of the app's stdout matches this regex (stdout is passed through).
    #[arg(long)]
    pub ready_line: Option<String>,
    /// Give up after this many milliseconds (the app is killed, nothing is recorded).
    #[arg(long, default_value_t = 60_000)]
    pub timeout_ms: u64,
    /// Cold recording: drop each file from the page cache when the app first opens it.
    #[arg(long)]
    pub cold: bool,
    /// Leave the app running after the launch window (default: SIGTERM, SIGKILL after 2 s).
    #[arg(long)]
    pub keep_running: bool,
    /// Also watch read calls (FAN_ACCESS) to catch files read through descriptors opened before
    /// the launch; every read on the machine then produces an event while recording.
    #[arg(long)]
    pub watch_reads: bool,
    /// Memory and mapping sample interval during the window, milliseconds.
    #[arg(long, default_value_t = 10)]
    pub sample_ms: u64,
    /// Record and print, but do not merge into the stored profile.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// The command to launch and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Arguments of `appflow apps`.
#[derive(clap::Args, Debug)]
pub struct AppsArgs {
    /// State directory holding `profiles/`.
    #[arg(long, default_value = DEFAULT_STATE_DIR, global = true)]
    pub state_dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t, global = true)]
    pub format: Format,
    /// List all profiles when absent.
    #[command(subcommand)]
    pub cmd: Option<AppsCmd>,
}

/// `appflow apps` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AppsCmd {
    /// Show one app's profile: files in first-access order with sizes and touched bytes.
    Show {
        /// The app.
        app: String,
    },
}

/// Arguments of `appflow calibrate`.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// A directory on the storage that holds the apps (a test file is written there and removed).
    #[arg(long)]
    pub dir: PathBuf,
    /// State directory; the curve is stored as `<state-dir>/calibration.json`.
    #[arg(long, default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Test file size in MiB (larger than the device cache gives truer numbers).
    #[arg(long, default_value_t = DEFAULT_FILE_BYTES / MIB)]
    pub size_mib: u64,
    /// Time spent reading at each block size, milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub budget_ms: u64,
    /// Measure and print, but do not store the curve.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Human-readable bytes (binary units).
pub(crate) fn fmt_bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn fmt_unix_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn store_err(e: StoreError) -> anyhow::Error {
    if e.is_input_error() {
        InputError::new(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Runs `appflow record`.
pub fn run_record(a: RecordArgs) -> anyhow::Result<()> {
    validate_app_name(&a.app).map_err(store_err)?;
    let readiness = match (&a.ready_file, &a.ready_line) {
        (Some(f), _) => Readiness::File(f.clone()),
        (None, Some(re)) => Readiness::Line(
            regex::Regex::new(re)
                .map_err(|e| InputError::new(format!("--ready-line {re:?}: {e}")))?,
        ),
        (None, None) => Readiness::Exit,
    };
    if a.timeout_ms == 0 {
        return Err(InputError::new("--timeout-ms must be > 0").into());
    }
    let mut opts = RecordOptions::new(a.command.clone());
    opts.readiness = readiness;
    opts.timeout_ms = a.timeout_ms;
    opts.cold = a.cold;
    opts.keep_running = a.keep_running;
    opts.watch_reads = a.watch_reads;
    opts.sample_ms = a.sample_ms.max(1);
    let rec = record_launch(&opts).map_err(|e| -> anyhow::Error {
        match e {
            RecordError::NoCommand
            | RecordError::ReadyFileExists(_)
            | RecordError::Spawn { .. } => InputError::new(e.to_string()).into(),
            other => anyhow::Error::new(other).context(format!("recording {}", a.app)),
        }
    })?;
    let store = ProfileStore::open(&a.state_dir);
    let saved = if a.dry_run {
        None
    } else {
        // Temp files of recordings killed mid-write go before this one is saved.
        crate::store::remove_stale_temp_files(store.dir());
        let p = store.record(&a.app, &rec.observation).map_err(store_err)?;
        Some((store.path_of(&a.app).map_err(store_err)?, p))
    };
    let obs = &rec.observation;
    let s = &rec.summary;
    let mut o = String::new();
    match a.format {
        Format::Json => {
            let v = serde_json::json!({
                "app": a.app,
                "launch_ms": obs.launch_ms,
                "anon_launch_bytes": obs.anon_launch_bytes,
                "footprint_after_launch_bytes": obs.footprint_after_launch_bytes,
                "summary": s,
                "observation": obs,
                "profile_path": saved.as_ref().map(|(p, _)| p.display().to_string()),
                "profile_launches": saved.as_ref().map(|(_, p)| p.launches),
            });
            out!(o, "{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Table => {
            let exit = match s.exit_code {
                Some(c) => format!(", exit code {c}"),
                None if matches!(opts.readiness, Readiness::Exit) => ", killed by a signal".into(),
                None => String::new(),
            };
            out!(
                o,
                "recorded launch of {} ({} ms{exit})",
                a.app,
                obs.launch_ms
            );
            out!(o,
                "  files        {} recorded (of {} opened: {} already cached, {} written, {} dropped first; {} mapped-only)",
                s.files_recorded,
                s.files_seen,
                s.files_already_cached,
                s.files_written,
                s.files_dropped,
                s.files_mapped_only
            );
            out!(o, "  brought in   {}", fmt_bytes(s.bytes_brought_in));
            out!(
                o,
                "  M_sum        {} (anonymous memory of the launch)",
                fmt_bytes(obs.anon_launch_bytes)
            );
            out!(
                o,
                "  baseline     {} (footprint after launch)",
                fmt_bytes(obs.footprint_after_launch_bytes)
            );
            out!(
                o,
                "  processes    {} ({} memory samples)",
                s.processes,
                s.samples
            );
            if s.files_late_snapshot > 0 || s.overflowed {
                out!(o,
                    "  note         {} files first seen by a read notification (ranges may be short){}",
                    s.files_late_snapshot,
                    if s.overflowed { "; notification queue overflowed" } else { "" }
                );
            }
            if s.files_unopenable > 0 {
                out!(
                    o,
                    "  note         {} opened files could not be read back (removed since they were opened): left out",
                    s.files_unopenable
                );
            }
            for f in obs.files.iter().take(10) {
                let t: u64 = f.ranges.iter().map(|r| r.len()).sum();
                out!(
                    o,
                    "  {:>9.1} ms  {:>10} of {:>10}  {}",
                    f.first_access_us as f64 / 1000.0,
                    fmt_bytes(t),
                    fmt_bytes(f.size_bytes),
                    f.path
                );
            }
            if obs.files.len() > 10 {
                out!(
                    o,
                    "  ... {} more (appflow apps show {})",
                    obs.files.len() - 10,
                    a.app
                );
            }
            match &saved {
                Some((path, p)) => out!(
                    o,
                    "profile {}: {} launches, {} files, {} in launch ranges",
                    path.display(),
                    p.launches,
                    p.active_files().len(),
                    fmt_bytes(p.file_bytes())
                ),
                None => out!(o, "dry run: profile not updated"),
            }
        }
    }
    emit(&o)
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn profile_row(p: &LaunchProfile) -> serde_json::Value {
    serde_json::json!({
        "app": p.app,
        "launches": p.launches,
        "files": p.active_files().len(),
        "file_bytes": p.file_bytes(),
        "anon_launch_bytes": p.anon_launch_bytes,
        "relaunch_footprint_bytes": p.relaunch_footprint_bytes,
        "last_launch_ms": p.last_launch_ms,
        "last_used_unix_ms": p.last_used_unix_ms(),
    })
}

/// Runs `appflow apps` and `appflow apps show`.
pub fn run_apps(a: AppsArgs) -> anyhow::Result<()> {
    let store = ProfileStore::open(&a.state_dir);
    let mut o = String::new();
    match a.cmd {
        None => {
            let (profiles, skipped) = store.load_all().map_err(store_err)?;
            match a.format {
                Format::Json => {
                    let v = serde_json::json!({
                        "profiles": profiles.iter().map(profile_row).collect::<Vec<_>>(),
                        "skipped": skipped.iter().map(|(p, e)| serde_json::json!({
                            "path": p.display().to_string(), "error": e.to_string()
                        })).collect::<Vec<_>>(),
                    });
                    out!(o, "{}", serde_json::to_string_pretty(&v)?);
                }
                Format::Table => {
                    if profiles.is_empty() {
                        out!(o, "no profiles in {}", store.dir().display());
                    } else {
                        out!(
                            o,
                            "{:<24} {:>8} {:>6} {:>11} {:>11} {:>11} {:>9}  last use",
                            "app",
                            "launches",
                            "files",
                            "file bytes",
                            "M_sum",
                            "baseline",
                            "launch ms"
                        );
                        for p in &profiles {
                            out!(
                                o,
                                "{:<24} {:>8} {:>6} {:>11} {:>11} {:>11} {:>9}  {}",
                                p.app,
                                p.launches,
                                p.active_files().len(),
                                fmt_bytes(p.file_bytes()),
                                fmt_bytes(p.anon_launch_bytes),
                                fmt_bytes(p.relaunch_footprint_bytes),
                                p.last_launch_ms,
                                p.last_used_unix_ms()
                                    .map(|t| age(now_unix_ms(), t))
                                    .unwrap_or_else(|| "never".into())
                            );
                        }
                    }
                    if !skipped.is_empty() {
                        out!(
                            o,
                            "{} profile file(s) skipped as corrupt or foreign (see the warnings on stderr)",
                            skipped.len()
                        );
                    }
                }
            }
        }
        Some(AppsCmd::Show { app }) => {
            validate_app_name(&app).map_err(store_err)?;
            let p = store.load(&app).map_err(store_err)?.ok_or_else(|| {
                InputError::new(format!(
                    "no profile for app {app:?} in {} (record one with `appflow record --app {app} -- CMD`)",
                    store.dir().display()
                ))
            })?;
            match a.format {
                Format::Json => out!(o, "{}", p.to_json()),
                Format::Table => show_table(&mut o, &p),
            }
        }
    }
    emit(&o)
}

fn age(now: u64, t: u64) -> String {
    let d = Duration::from_millis(now.saturating_sub(t)).as_secs();
    let rel = match d {
        0..=59 => format!("{d} s ago"),
        60..=3599 => format!("{} min ago", d / 60),
        3600..=86_399 => format!("{} h ago", d / 3600),
        _ => format!("{} days ago", d / 86_400),
    };
    format!("{} ({rel})", fmt_unix_ms(t))
}

fn show_table(o: &mut String, p: &LaunchProfile) {
    out!(o, "app              {}", p.app);
    out!(o, "launches         {}", p.launches);
    if let Some(t) = p.last_used_unix_ms() {
        out!(o, "last use         {}", age(now_unix_ms(), t));
    }
    out!(o, "last launch      {} ms", p.last_launch_ms);
    out!(o, "M_sum            {}", fmt_bytes(p.anon_launch_bytes));
    out!(
        o,
        "baseline         {}",
        fmt_bytes(p.relaunch_footprint_bytes)
    );
    let active = p.active_files();
    out!(
        o,
        "files            {} in launch ranges ({} in the profile), {} in launch ranges",
        active.len(),
        p.files.len(),
        fmt_bytes(p.file_bytes())
    );
    out!(
        o,
        "{:>4} {:>11} {:>11} {:>11} {:>8}  path",
        "#",
        "first ms",
        "size",
        "touched",
        "ranges"
    );
    for (i, f) in active.iter().enumerate() {
        out!(
            o,
            "{:>4} {:>11.1} {:>11} {:>11} {:>8}  {}",
            i + 1,
            f.first_access_us as f64 / 1000.0,
            fmt_bytes(f.size_bytes),
            fmt_bytes(f.touched_bytes()),
            f.ranges.len(),
            f.path
        );
    }
}

/// Runs `appflow calibrate`.
pub fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<()> {
    if a.size_mib == 0 {
        return Err(InputError::new("--size-mib must be > 0").into());
    }
    let opts = CalibrateOptions {
        dir: a.dir.clone(),
        file_bytes: a.size_mib * MIB,
        block_sizes: calibrate::default_block_sizes(),
        budget_per_size: Duration::from_millis(a.budget_ms),
    };
    let cal = calibrate::calibrate(&opts).map_err(|e| -> anyhow::Error {
        match e {
            calibrate::CalibrateError::Input(m) => InputError::new(m).into(),
            calibrate::CalibrateError::Io {
                ref path,
                ref source,
            } if path == &a.dir && source.kind() == std::io::ErrorKind::NotFound => {
                InputError::new(format!("--dir {}: no such directory", a.dir.display())).into()
            }
            other => other.into(),
        }
    })?;
    let saved = if a.dry_run {
        None
    } else {
        Some(calibrate::save_curve(&a.state_dir, &cal.curve)?)
    };
    let (small, large) = SPEEDUP_BLOCKS;
    let speedup = cal.curve.speedup(small, large);
    let mut o = String::new();
    match a.format {
        Format::Json => {
            let v = serde_json::json!({
                "dir": a.dir.display().to_string(),
                "method": cal.method,
                "file_bytes": opts.file_bytes,
                "curve": cal.curve,
                "bytes_read": cal.bytes_read,
                "speedup_4k_to_512k": speedup,
                "saved": saved.as_ref().map(|p| p.display().to_string()),
            });
            out!(o, "{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Table => {
            out!(
                o,
                "read throughput on {} ({}, {} MiB test file)",
                a.dir.display(),
                cal.method,
                a.size_mib
            );
            out!(o, "{:>10} {:>12} {:>12}", "block", "MiB/s", "MiB read");
            for (pt, read) in cal.curve.points().iter().zip(&cal.bytes_read) {
                out!(
                    o,
                    "{:>10} {:>12.1} {:>12.1}",
                    fmt_bytes(pt.block_bytes),
                    pt.bytes_per_sec / MIB as f64,
                    *read as f64 / MIB as f64
                );
            }
            out!(o, "speedup 512 KiB vs 4 KiB: {speedup:.1}x");
            match saved {
                Some(p) => out!(o, "stored {}", p.display()),
                None => out!(o, "dry run: curve not stored"),
            }
        }
    }
    emit(&o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_bytes(3 * MIB), "3.0 MiB");
        assert_eq!(fmt_unix_ms(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_unix_ms(1_700_000_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(fmt_unix_ms(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }
}
