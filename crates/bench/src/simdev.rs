//! The testbed's workload described to the simulator (SPEC §6: "the
//! simulator can also be configured as the testbed's device").
//!
//! [`sim_device_toml`] writes an `appflow sim --device-file` file (format:
//! docs/sim.md, `appflow_sim::devfile`) for the domain a run builds at its
//! preset and scale: the memory cgroup limit as the device's memory, no
//! system reserve and no watermarks (a memory cgroup reclaims directly at
//! its limit), zram with its disk size and pool cap (the pool is not charged
//! to the cgroup), the blkio bandwidth and IOPS caps, the scaled preload
//! budget, and the synthetic apps at the run's scale with the scenario lists
//! and waits the testbed uses. Pure: the caller writes the text.

use crate::cli::BenchOptions;
use crate::run::{background_of, multitask_order_of, Scenario};
use crate::spec::AppClass;
use crate::synth::{Layout, Op};
use appflow_core::MIB;
use std::fmt::Write as _;
use std::path::Path;

/// Files at or above this size are "large" in the simulator (its small
/// files hold at most 31 pages).
const SIM_SMALL_MAX_BYTES: u64 = 124 * 1024;

/// zram compression cost on the testbed host, ms per MiB (1 ms/MiB ≈ 1 GB/s,
/// lzo-rle on one x86 core; a phone's is 12.5, seed 001's < 80 MB/s).
/// Checked against the testbed's `stock` p50 on the default run: with the
/// phone's costs the simulator's `android` row is 2.6× stock, with these
/// +12 %; lower costs gain at most 3 % (the rest is the read time).
pub const HOST_ANON_ZRAM_MS_PER_MIB: f64 = 1.0;
/// Cost of dropping clean file pages on the host, ms per MiB (a fifth of
/// the anonymous cost, seed 000 §4.3).
pub const HOST_FILE_DROP_MS_PER_MIB: f64 = 0.2;

/// What a finished run measured that the device file records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// The in-domain O_DIRECT calibration: (block bytes, bytes/s).
    pub calibration: Vec<(u64, f64)>,
    /// zram compression ratio measured under `stock` (original / pool
    /// bytes after the load), if any session swapped.
    pub stock_zram_ratio: Option<f64>,
}

fn mib(b: u64) -> f64 {
    b as f64 / MIB as f64
}

fn list(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("[{}]", q.join(", "))
}

/// The device file of a run (`appflow bench --emit-sim-device`).
pub fn sim_device_toml(o: &BenchOptions, measured: &Measured) -> String {
    let d = &o.device;
    let p = &d.preset;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# appflow sim device file: the appflow bench domain `{}` at --scale {}.\n\
         # Written by `appflow bench --emit-sim-device`; run it with\n\
         #   appflow sim --device-file THIS.toml --workload high --policy android,paralfetch,appflow,appflow-sfp,appflow-amr,appflow-cpk\n\
         # Bench policy -> sim policy: stock -> android, prefetch -> paralfetch, appflow -> appflow,\n\
         # appflow-sfp/-amr/-cpk -> appflow-sfp/-amr/-cpk (preload-all, lru-killer, oracle have no sim row).\n\
         # Format: docs/simdev.md (\"Device and app files\").",
        p.name, d.scale
    );
    let base = if p.name.starts_with("headunit") {
        "headunit-4gb"
    } else {
        "pixel8-6gb"
    };
    let ratio = measured.stock_zram_ratio.unwrap_or(3.0);
    let _ = writeln!(t, "\n[device]");
    let _ = writeln!(t, "name = \"bench-{}-x{}\"", p.name, d.scale);
    let _ = writeln!(
        t,
        "description = {:?}",
        format!(
            "appflow bench domain: {} at scale {} (memory cgroup {:.0} MiB, zram {:.0} MiB, {} MiB/s, {} IOPS)",
            p.about,
            d.scale,
            mib(d.app_memory_bytes),
            mib(d.zram_disksize_bytes),
            p.read_bps / MIB,
            p.read_iops
        )
    );
    let _ = writeln!(
        t,
        "base = \"{base}\"  # reclaim and zram CPU costs come from this preset"
    );
    let _ = writeln!(
        t,
        "dram_mib = {}  # the domain's memory.limit_in_bytes",
        mib(d.app_memory_bytes)
    );
    let _ = writeln!(
        t,
        "reserved_mib = 0  # the cgroup holds only the apps and the preload worker"
    );
    let _ = writeln!(t, "zram_disksize_mib = {}", mib(d.zram_disksize_bytes));
    let _ = writeln!(
        t,
        "zram_pool_cap_mib = {}  # zram's mem_limit",
        mib(d.zram_mem_limit_bytes)
    );
    let _ = writeln!(
        t,
        "zram_ratio = {:.2}  # {}",
        ratio,
        if measured.stock_zram_ratio.is_some() {
            "measured under stock (original / pool bytes after the load)"
        } else {
            "synthetic anon: 1/4 of each page random (about 3:1)"
        }
    );
    let _ = writeln!(
        t,
        "zram_pool_in_dram = false  # the pool is not charged to the memory cgroup"
    );
    let _ = writeln!(t, "swap_mib = 0");
    let _ = writeln!(
        t,
        "cpu_scale = 1.0  # the synthetic apps burn their cpu_ms as thread CPU time"
    );
    let _ = writeln!(
        t,
        "wmark_min_mib = 0  # a memory cgroup has no watermarks and no kswapd:\n\
         wmark_low_mib = 0  #  every allocation at the limit reclaims directly\n\
         wmark_high_mib = 0"
    );
    let _ = writeln!(
        t,
        "direct_reclaim_threads = 1.0  # a synthetic app launches on one thread"
    );
    let _ = writeln!(
        t,
        "# Reclaim CPU costs of this host (x86, zram lzo-rle), not a phone's (12.5 / 2.5),\n\
         # checked against the stock row of the default run (docs/bench.md); the 5:1 ratio is\n\
         # seed 000 §4.3 (anonymous page writes 5x slower than dropping file pages).\n\
         anon_zram_ms_per_mib = {HOST_ANON_ZRAM_MS_PER_MIB}\n\
         file_drop_ms_per_mib = {HOST_FILE_DROP_MS_PER_MIB}"
    );
    let _ = writeln!(t, "readahead_kib = {}", p.read_ahead_kib);
    let _ = writeln!(
        t,
        "preload_budget_mib = {}  # M_p at this scale",
        mib(d.preload_budget_bytes)
    );
    let _ = writeln!(t, "\n[device.storage]  # the blkio throttle on every leaf");
    let _ = writeln!(t, "read_mib_per_sec = {}", mib(p.read_bps));
    let _ = writeln!(t, "read_iops = {}", p.read_iops);
    if !measured.calibration.is_empty() {
        // Recorded, not used: the short calibration reads vary from run to
        // run by up to 1.7x at 128 KiB (blk-throttle's first-slice burst).
        let _ = writeln!(
            t,
            "# measured in the domain by this run (O_DIRECT, random offsets; not used: short\n\
             # reads vary between runs because blk-throttle lets a first slice through):"
        );
        for (b, bps) in &measured.calibration {
            let _ = writeln!(t, "#   {:>5} KiB  {:.1} MiB/s", b / 1024, bps / MIB as f64);
        }
    }
    // Apps at the run's scale.
    let mut synthetic: Vec<(&str, AppClass)> = Vec::new();
    for s in &o.apps {
        let Some(syn) = s.synthetic() else {
            let _ = writeln!(
                t,
                "\n# app {:?} is a command line: the simulator cannot model it; left out",
                s.name
            );
            continue;
        };
        synthetic.push((s.name.as_str(), s.class));
        let l = Layout::new(&s.name, syn, d.scale, Path::new("/"));
        let small: Vec<u64> = l
            .small
            .iter()
            .map(|f| f.size)
            .filter(|&b| b < SIM_SMALL_MAX_BYTES)
            .collect();
        let big_small = l.small.len() - small.len();
        let cpu_us: u64 = l
            .ops
            .iter()
            .map(|o| if let Op::Cpu(u) = o { *u } else { 0 })
            .sum();
        let file = l.launch_file_bytes();
        let _ = writeln!(t, "\n[[app]]");
        let _ = writeln!(t, "name = {:?}", s.name);
        let _ = writeln!(
            t,
            "class = \"{}\"",
            if s.class == AppClass::Gb { "gb" } else { "low" }
        );
        let _ = writeln!(t, "anon_mib = {:.4}", mib(l.anon_bytes()));
        let _ = writeln!(t, "file_mib = {:.4}", mib(file));
        if small.is_empty() {
            // The simulator needs at least one small file: a 4 KiB one.
            let _ = writeln!(t, "small_files = 1\nsmall_mib = 0.0039");
        } else {
            let _ = writeln!(t, "small_files = {}", small.len());
            let _ = writeln!(t, "small_mib = {:.4}", mib(small.iter().sum()));
        }
        let _ = writeln!(t, "large_files = {}", (l.large.len() + big_small).max(1));
        let _ = writeln!(t, "cpu_init_ms = {:.3}", (cpu_us as f64 / 1000.0).max(1.0));
        let _ = writeln!(
            t,
            "resume_ms = {:.3}  # a switch re-runs a tenth of the launch CPU",
            cpu_us as f64 / 10_000.0
        );
        let _ = writeln!(t, "background_growth = {}", syn.background_growth);
        let _ = writeln!(t, "growth_ms = {}", syn.growth_ms);
    }
    // Workload lists: what run_target and run_multitask launch.
    let targets: Vec<String> = o
        .targets
        .iter()
        .filter(|x| synthetic.iter().any(|s| s.0 == x.as_str()))
        .cloned()
        .collect();
    let _ = writeln!(t, "\n[workload]");
    let _ = writeln!(t, "targets = {}", list(&targets));
    if let Some(first) = targets.first() {
        for (name, sc) in [
            ("low", Scenario::Low),
            ("medium", Scenario::Medium),
            ("high", Scenario::High),
        ] {
            let bg = background_of(&synthetic, sc, first);
            let differs = targets[1..]
                .iter()
                .any(|x| background_of(&synthetic, sc, x) != bg);
            if differs {
                let _ = writeln!(
                    t,
                    "# the testbed's {name} load differs for other targets; this is {first:?}'s"
                );
            }
            let _ = writeln!(t, "{name} = {}", list(&bg));
        }
    }
    let _ = writeln!(t, "multitask = {}", list(&multitask_order_of(&synthetic)));
    let _ = writeln!(
        t,
        "use_ms = 0  # the testbed launches the load back to back"
    );
    let _ = writeln!(t, "settle_ms = {}  # --settle-ms", o.settle.as_millis());
    let _ = writeln!(t, "multitask_use_ms = 0");
    t
}

/// The zram ratio measured under `stock`: median of original / pool bytes
/// over the sessions whose pool held at least 1 MiB.
pub fn stock_zram_ratio(ms: &[crate::run::Measurement]) -> Option<f64> {
    let mut r: Vec<f64> = ms
        .iter()
        .filter(|m| m.policy.is_stock() && m.zram.1 >= MIB)
        .map(|m| m.zram.0 as f64 / m.zram.1 as f64)
        .filter(|x| x.is_finite() && *x >= 1.0)
        .collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    Some(r[(r.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{options, BenchArgs};

    fn emitted(a: &BenchArgs) -> String {
        sim_device_toml(&options(a).unwrap(), &Measured::default())
    }

    #[test]
    fn emitted_file_parses_in_the_simulator_and_matches_the_domain() {
        let text = emitted(&BenchArgs::default());
        let f = appflow_sim::devfile::parse(&text, "emitted.toml").unwrap();
        let d = appflow_sim::devfile::device(&f, "emitted.toml").unwrap();
        assert_eq!(d.device.dram_bytes, 1024 * MIB);
        assert!(!d.device.zram_pool_in_dram);
        // 512 MiB disk; pool cap 384 MiB × 3 does not bind.
        assert_eq!(d.device.zram_disksize_bytes, 512 * MIB);
        let c = &d.device.read_curve;
        assert!((c.throughput(4096) - 3000.0 * 4096.0).abs() < 1.0);
        assert!((c.throughput(2 << 20) - 400.0 * MIB as f64).abs() < 1.0);
        assert_eq!(
            d.preload_budget_bytes,
            Some(crate::device::page_round(25 * MIB))
        );
        let apps = appflow_sim::devfile::apps(&f, "emitted.toml")
            .unwrap()
            .unwrap();
        assert_eq!(apps.apps.len(), 17);
        let llm = apps.apps.iter().find(|a| a.name == "llm").unwrap();
        // llm at 0.25: 307 MiB anon → 76.75 MiB; ~1637/4 MiB of large reads.
        assert!((llm.anon_mib - 76.75).abs() < 0.01, "{}", llm.anon_mib);
        assert!((395.0..425.0).contains(&llm.file_mib), "{}", llm.file_mib);
        assert_eq!(llm.small_files, 150);
        assert_eq!(llm.growth_fraction, Some(0.3));
        assert_eq!(apps.setup.targets, vec!["llm".to_string()]);
        let high = apps.setup.background[2].as_ref().unwrap();
        assert_eq!(&high[..2], &["video".to_string(), "game".to_string()]);
        assert_eq!(high.len(), 16); // 2 GB-scale + the 14 small apps
        assert_eq!(apps.setup.settle_us, 1_500_000);
        assert_eq!(apps.setup.use_us, 0);
        assert_eq!(apps.setup.multitask.len(), 17);
    }

    #[test]
    fn emitted_file_runs_in_the_simulator_deterministically() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("dev.toml");
        std::fs::write(&f, emitted(&BenchArgs::default())).unwrap();
        let run = || {
            use clap::Parser;
            #[derive(clap::Parser)]
            struct W {
                #[command(flatten)]
                a: appflow_sim::cli::SimArgs,
            }
            let a = W::parse_from([
                "sim",
                "--device-file",
                f.to_str().unwrap(),
                "--workload",
                "high",
                "--policy",
                "android,appflow",
            ])
            .a;
            let (cat, setup) = appflow_sim::cli::catalogue_of(&a).unwrap();
            let r = appflow_sim::cli::simulate_with(&a, &cat, &setup).unwrap();
            serde_json::to_string(&r).unwrap()
        };
        let (x, y) = (run(), run());
        assert_eq!(x, y);
        assert!(x.contains("bench-phone-6gb-x0.25"), "{x}");
    }

    #[test]
    fn measured_ratio_and_calibration_are_recorded() {
        let o = options(&BenchArgs::default()).unwrap();
        let m = Measured {
            calibration: vec![(4096, 13.0e6), (512 << 10, 815.0e6)],
            stock_zram_ratio: Some(2.5),
        };
        let text = sim_device_toml(&o, &m);
        assert!(text.contains("zram_ratio = 2.50"), "{text}");
        assert!(text.contains("  512 KiB  777.2 MiB/s"), "{text}");
        let f = appflow_sim::devfile::parse(&text, "e").unwrap();
        let d = appflow_sim::devfile::device(&f, "e").unwrap();
        assert_eq!(d.device.zram_ratio, 2.5);
        // The measured curve is recorded; the caps stay the curve.
        let c = &d.device.read_curve;
        assert!((c.throughput(4096) - 3000.0 * 4096.0).abs() < 1.0);
        assert_eq!(d.device.anon_zram_ms_per_mib, HOST_ANON_ZRAM_MS_PER_MIB);
        // Pool cap 384 MiB × 2.5 = 960 MiB > 512 MiB disk: the disk binds.
        assert_eq!(d.device.zram_disksize_bytes, 512 * MIB);
    }
}
