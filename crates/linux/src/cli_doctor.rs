//! `appflow doctor`: which kernel interfaces this machine offers the daemon.

use crate::actuators::Features;
use crate::cli::emit;
use crate::cli_profiles::Format;
use crate::doctor::{render_table, run_checks, Roots};
use std::path::PathBuf;

/// Arguments of `appflow doctor`.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Root of the proc file system to read.
    #[arg(long, default_value = "/proc")]
    pub proc_root: PathBuf,
    /// Root of sysfs to read (cgroup mounts under /sys are looked up below it).
    #[arg(long, default_value = "/sys")]
    pub sys_root: PathBuf,
}

/// Lists every interface with present/missing and what degrades without it.
/// Exits 0 whatever is missing: it reports, it does not judge.
pub fn run_doctor(a: DoctorArgs) -> anyhow::Result<()> {
    let roots = Roots {
        proc_root: a.proc_root,
        sys_root: a.sys_root,
    };
    let features = Features::probe(&roots.proc_root);
    let checks = run_checks(&roots, &features);
    let text = match a.format {
        Format::Table => render_table(&checks),
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&checks)?),
    };
    emit(&text)
}
