//! `appflow doctor`: which kernel interfaces this machine offers the daemon.

use crate::actuators::Features;
use crate::cli::emit;
use crate::cli_profiles::Format;
use crate::config::Config;
use crate::daemon::run::sizing_checks;
use crate::doctor::{render_table, run_checks, Roots};
use appflow_core::InputError;
use std::path::{Path, PathBuf};

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
    /// A daemon configuration: also check the M_F and N_alloc it would use
    /// against the launch profiles in its `state_dir` and its domain's size
    /// (docs/daemon.md "Sizing").
    #[arg(long)]
    pub config: Option<PathBuf>,
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
    let sizing = match &a.config {
        Some(path) => {
            let cfg = Config::load(path).map_err(|e| InputError::new(e.to_string()))?;
            Some(sizing_checks(&cfg, &roots.proc_root)?)
        }
        None => None,
    };
    let text = match a.format {
        Format::Table => {
            let mut t = render_table(&checks);
            if let Some((m_f, n_alloc, cs)) = &sizing {
                t.push_str(&format!(
                    "\nsizing of {}: M_F {} MiB, N_alloc {n_alloc} pages/tick\n",
                    a.config.as_deref().unwrap_or(Path::new("")).display(),
                    m_f / (1 << 20),
                ));
                for c in cs {
                    t.push_str(&format!(
                        "  {} {}\n",
                        if c.ok { "ok  " } else { "WARN" },
                        c.what
                    ));
                }
            }
            t
        }
        Format::Json => match &sizing {
            Some((m_f, n_alloc, cs)) => format!(
                "{}\n",
                serde_json::to_string_pretty(&serde_json::json!({
                    "checks": checks,
                    "sizing": {"low_memory_bytes": m_f, "alloc_threshold_pages": n_alloc, "checks": cs}
                }))?
            ),
            None => format!("{}\n", serde_json::to_string_pretty(&checks)?),
        },
    };
    emit(&text)
}
