//! Command-line entry points: `appflow bench` ([`run`]) and the hidden
//! `appflow bench-app` ([`run_app`]).
//!
//! [`run_bench`] is the library entry point (the integration test calls it
//! in-process with the path of a built `appflow` binary): it builds the
//! domain, prepares it ([`crate::prepare`]), measures every session
//! ([`crate::measure`]), builds the reports ([`crate::report`]), always tears
//! the domain down, and checks that nothing is left behind.
// Output goes through one fallible write, so a closed pipe ends the
// command normally (`appflow_linux::cli::exit_code`) instead of panicking.
#![deny(clippy::print_stdout)]

use crate::device;
use crate::domain::{self, Resource, Roots};
use crate::live::{self, Domain};
use crate::options::input;
pub use crate::options::{options, AppArgs, BenchArgs, BenchOptions};
use crate::prepare::{self, Prepared};
use crate::progress::{mib, Progress};
use crate::report::{self, TestbedInfo};
use crate::run::{Bed, Measurement};
use crate::spec::AppSpec;
use crate::synth::{self, Layout};
use crate::{plot, simdev};
use anyhow::{bail, Context, Result};
use appflow_core::report::RunReport;
use appflow_core::storage::CurvePoint;
use appflow_linux::store::write_atomic;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

/// What a run produced, plus the checks made after teardown.
#[derive(Debug)]
pub struct BenchOutcome {
    /// One report per scenario.
    pub reports: Vec<RunReport>,
    /// Every session's measurement.
    pub measurements: Vec<Measurement>,
    /// The preload budget M_p, bytes.
    pub budget_bytes: u64,
    /// Leftovers found after teardown (must be empty).
    pub leftovers: Vec<Resource>,
    /// Sysctls that differ after the run from before.
    pub changed_sysctls: Vec<SysctlChange>,
    /// Policies that could not run, with why.
    pub skipped: BTreeMap<String, String>,
}

/// A sysctl whose value differs after the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlChange {
    /// Its name (`vm.swappiness`).
    pub name: String,
    /// Before the run.
    pub before: String,
    /// After the run.
    pub after: String,
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

/// What the domain run gives back besides the domain itself.
struct DomainRun {
    reports: Vec<RunReport>,
    measurements: Vec<Measurement>,
    skipped: BTreeMap<String, String>,
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
    let mut data: u64 = layouts.iter().flatten().map(|l| l.disk_bytes()).sum();
    for s in &o.apps {
        data += prepare::install_bytes(s)?;
    }
    let image_bytes = device::page_round(data + data / 8 + files * 8192 + 256 * 1048576);
    let progress = Progress::new(0, o.progress);
    progress.say(&format!(
        "building the {} domain at scale {}: memory limit {:.0} MiB, zram {:.0} MiB (pool cap {:.0} MiB), \
         flash {:.0} MB/s + {:.0} µs per request, one phone core per app (at most {} core(s) of this host), image {:.0} MiB for {} files",
        o.device.preset.name,
        o.device.scale,
        mib(o.device.app_memory_bytes),
        mib(o.device.zram_disksize_bytes),
        mib(o.device.zram_mem_limit_bytes),
        o.device.preset.flash.bytes_per_sec / 1e6,
        o.device.preset.flash.latency_us,
        o.device.preset.cpu_cores,
        mib(image_bytes),
        files
    ));
    let domain = Domain::build(o.roots.clone(), o.device.clone(), image_bytes)?;
    let (result, mut domain) = run_in_domain(o, domain, layouts, &progress);
    progress.done();
    let kept = o
        .keep_logs
        .as_deref()
        .map(|to| keep_logs(&o.roots.run_dir.join("logs"), to));
    let teardown = domain.teardown();
    drop(domain);
    let leftovers = domain::find_leftovers(&o.roots);
    let sysctl_after = sysctls(&o.roots.proc_root);
    let changed_sysctls = sysctl_before
        .iter()
        .zip(&sysctl_after)
        .filter(|(a, b)| a.1 != b.1 && a.0 != "vm.drop_caches")
        .map(|(a, b)| SysctlChange {
            name: a.0.clone(),
            before: a.1.clone(),
            after: b.1.clone(),
        })
        .collect();
    let run = result?;
    teardown?;
    if let Some(kept) = kept {
        kept?;
    }
    Ok(BenchOutcome {
        reports: run.reports,
        measurements: run.measurements,
        budget_bytes: o.device.preload_budget_bytes,
        leftovers,
        changed_sysctls,
        skipped: run.skipped,
    })
}

/// Copies the run's log files out of the domain (which teardown removes).
fn keep_logs(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        if e.file_type()?.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name()))
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// Prepares and measures; always gives the domain back for teardown.
fn run_in_domain(
    o: &BenchOptions,
    mut domain: Domain,
    layouts: Vec<Option<Layout>>,
    progress: &Progress,
) -> (Result<DomainRun>, Domain) {
    let p: Prepared = match prepare::prepare(o, &mut domain, layouts, progress) {
        Ok(x) => x,
        Err(e) => return (Err(e), domain),
    };
    let info = testbed_info(o, domain.image_bytes, &p);
    let mut bed = Bed {
        domain,
        apps: p.apps,
        binary: o.binary.clone(),
        log_dir: p
            .daemon
            .dir
            .parent()
            .map(|d| d.join("logs"))
            .unwrap_or_default(),
        daemon: p.daemon,
        launch_timeout: o.timeout,
        settle: o.settle,
    };
    let out = crate::measure::measure_all(o, &mut bed, &p.skipped, progress).and_then(|ms| {
        let reports = reports(o, &ms, &p.skipped, &info)?;
        Ok(DomainRun {
            reports,
            measurements: ms,
            skipped: p.skipped.clone(),
        })
    });
    (out, bed.domain)
}

fn testbed_info(o: &BenchOptions, image_bytes: u64, p: &Prepared) -> TestbedInfo {
    let calibration = &p.calibration;
    TestbedInfo {
        scale: o.device.scale,
        preset: o.device.preset.clone(),
        app_memory_bytes: o.device.app_memory_bytes,
        zram_disksize_bytes: o.device.zram_disksize_bytes,
        zram_mem_limit_bytes: o.device.zram_mem_limit_bytes,
        preload_budget_bytes: o.device.preload_budget_bytes,
        image_bytes,
        storage: report::StorageInfo {
            mechanism: "one FUSE-served device for the whole domain (service-time model: latency + size / bandwidth, queue depth, idle class yields), files in an ext4 image on a loop device behind it",
            flash: o.device.preset.flash,
            host_turnaround: crate::fusefs::HOST_FUSE_TURNAROUND,
        },
        concurrent_read_bytes_per_sec: p.concurrent.clone(),
        reclaim_calibration: p.reclaim,
        anon_alloc_bytes_per_sec: p.anon_alloc_bytes_per_sec,
        worker_read_bytes_per_sec: p.worker_read_bytes_per_sec,
        idle_yield: p.idle_yield.clone(),
        cpu_budget: report::CpuBudget {
            cores: p.cpu_budget.cores,
            quota_us: live::cpu_quota_us(p.cpu_budget.cores),
            period_us: live::CPU_PERIOD_US,
            shares: live::CPU_SHARES,
            calibration: p.cpu_budget.clone(),
        },
        calibration_bytes_per_sec: calibration
            .iter()
            .map(|c| CurvePoint {
                block_bytes: c.block_bytes,
                bytes_per_sec: c.bytes_per_sec.round(),
            })
            .collect(),
        profiles: p.profiles.name(),
        profiles_note: p.profiles.note(),
        repetitions: o.reps,
        targets: o.targets.clone(),
        cache_drop:
            "posix_fadvise(DONTNEED) on every app file of the loop fs at each session start",
        kernel: std::fs::read_to_string(o.roots.proc_root.join("sys/kernel/osrelease"))
            .unwrap_or_default()
            .trim()
            .to_string(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
    }
}

/// One report per scenario, and the plots when asked for.
fn reports(
    o: &BenchOptions,
    all: &[Measurement],
    skipped: &BTreeMap<String, String>,
    info: &TestbedInfo,
) -> Result<Vec<RunReport>> {
    let mut out = Vec::new();
    for &s in &o.scenarios {
        let ms: Vec<Measurement> = all.iter().filter(|m| m.scenario == s).cloned().collect();
        let mut extra = BTreeMap::new();
        extra.insert("testbed".into(), serde_json::to_value(info)?);
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
        out.push(r);
    }
    Ok(out)
}

fn write_text(p: &Path, text: &str) -> Result<()> {
    write_atomic(p, text.as_bytes()).with_context(|| format!("writing {}", p.display()))
}

/// What a finished run measured that `--emit-sim-device` records.
pub fn measured_for_sim(o: &BenchOptions, out: &BenchOutcome) -> simdev::Measured {
    simdev::Measured {
        calibration: calibration_of(&out.reports),
        stock_zram_ratio: simdev::stock_zram_ratio(&out.measurements),
        stock_file_reclaim_share: simdev::stock_file_reclaim_share(&out.measurements),
        anon_reclaim_bytes_per_sec: testbed_f64(
            &out.reports,
            &["reclaim_calibration", "anon_reclaim_bytes_per_sec"],
        ),
        cpu_budget_cores: testbed_f64(&out.reports, &["cpu_budget", "cores"]),
        stock_launch: o
            .targets
            .first()
            .and_then(|t| simdev::stock_launch(&out.measurements, t)),
        anon_alloc_bytes_per_sec: testbed_f64(&out.reports, &["anon_alloc_bytes_per_sec"]),
        worker_read_bytes_per_sec: testbed_f64(&out.reports, &["worker_read_bytes_per_sec"]),
        oracle_ms: simdev::oracle_launches(&out.measurements),
    }
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
        write_text(
            p,
            &simdev::sim_device_toml(&o, &simdev::Measured::default())?,
        )?;
    }
    let out = run_bench(&o)?;
    if let Some(p) = &a.emit_sim_device {
        let measured = measured_for_sim(&o, &out);
        write_text(p, &simdev::sim_device_toml(&o, &measured)?)?;
        eprintln!(
            "appflow bench: wrote the simulator's device file {}",
            p.display()
        );
        eprint!("{}", simdev::underived_message(&o, &measured, p));
    }
    let json = if out.reports.len() == 1 {
        serde_json::to_string_pretty(&out.reports[0])?
    } else {
        serde_json::to_string_pretty(&out.reports)?
    };
    if let Some(p) = &a.out {
        write_text(p, &json)?;
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
fn calibration_of(reports: &[RunReport]) -> Vec<CurvePoint> {
    testbed_field(reports, &["calibration_bytes_per_sec"])
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

/// The number at `path` under the first report's `extra.testbed`.
fn testbed_f64(reports: &[RunReport], path: &[&str]) -> Option<f64> {
    testbed_field(reports, path).and_then(serde_json::Value::as_f64)
}

/// The value at `path` under the first report's `extra.testbed`.
fn testbed_field<'a>(reports: &'a [RunReport], path: &[&str]) -> Option<&'a serde_json::Value> {
    let testbed = reports.first()?.extra.get("testbed")?;
    path.iter().try_fold(testbed, |v, k| v.get(k))
}

/// Runs one synthetic app (or the I/O test).
pub fn run_app(a: AppArgs) -> Result<()> {
    if let Some(f) = &a.io_test {
        if a.idle_class {
            appflow_linux::actuators::set_idle_io_priority(0).map_err(|e| {
                anyhow::anyhow!("ioprio_set(IDLE): {}", std::io::Error::from_raw_os_error(e))
            })?;
        }
        let bps = if a.buffered {
            synth::buffered_read_test(f, a.block_bytes, a.total_bytes)?
        } else {
            synth::io_test(f, a.block_bytes, a.total_bytes)?
        };
        eprintln!("bytes_per_sec {bps:.0}");
        writeln!(std::io::stdout().lock(), "bytes_per_sec {bps:.0}")?;
        return Ok(());
    }
    if let Some(bytes) = a.alloc_test {
        let bps = synth::alloc_test(bytes);
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
    if !(a.cpu_share.is_finite() && a.cpu_share > 0.0 && a.cpu_share <= 1.0) {
        return Err(input(format!(
            "--cpu-share must be in (0, 1], got {}",
            a.cpu_share
        )));
    }
    let mut layout = Layout::new(&s.name, syn, a.scale, &root.join("apps").join(&s.name));
    layout.scale_cpu(a.cpu_share);
    let switch_cpu_us = (syn.cpu_ms as f64 * 1000.0 * a.scale * a.cpu_share / 10.0) as u64;
    synth::run_app(&layout, switch_cpu_us)
}
