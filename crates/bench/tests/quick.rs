//! `appflow bench --quick` on the real kernel, asserting only what must hold
//! regardless of noise.
//!
//! Choice (see docs/bench-reference.md, "Tests"): the test runs the bench *library* in-process
//! (`appflow_bench::cli::run_bench`) and hands it the `appflow` binary found
//! at `<workspace>/target/<profile>/appflow` for the app processes and the
//! daemon. It never builds that binary itself; when it is absent, or when not
//! root, or when the kernel lacks a feature, the test prints why and skips.

use appflow_bench::cli::{options, run_bench, BenchArgs};
use appflow_bench::domain::{find_leftovers, Roots};
use appflow_bench::live;
mod common;
use common::appflow_binary;

#[test]
fn quick_bench_leaves_nothing_behind_and_keeps_invariants() {
    if !live::is_root() {
        eprintln!("SKIP quick_bench: needs root (cgroups, loop device, zram swap, mount)");
        return;
    }
    if let Some(m) = live::missing_feature(&Roots::default()) {
        eprintln!("SKIP quick_bench: kernel feature missing: {m}");
        return;
    }
    let Some(bin) = appflow_binary() else {
        eprintln!(
            "SKIP quick_bench: no appflow binary in target/debug or target/release \
             (run `cargo build -p appflow` first)"
        );
        return;
    };
    let args = BenchArgs {
        quick: true,
        binary: Some(bin),
        ..BenchArgs::default()
    };
    let mut o = options(&args).expect("quick options");
    o.progress = false;
    let out = run_bench(&o).expect("quick bench run");

    // 1. The domain is gone: no cgroup, loop device, mount, swap, image or run dir.
    assert!(out.leftovers.is_empty(), "leftovers: {:?}", out.leftovers);
    assert!(find_leftovers(&Roots::default()).is_empty());
    assert!(!std::path::Path::new("/sys/fs/cgroup/memory/appflow-bench").exists());
    assert!(!std::path::Path::new("/sys/fs/cgroup/blkio/appflow-bench").exists());
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains("/run/appflow-bench"), "{mounts}");
    // No changed sysctl.
    assert!(out.changed_sysctls.is_empty(), "{:?}", out.changed_sysctls);
    eprintln!("swaps after: {swaps}");

    // 2. Every launch reached readiness or was reported as timed out.
    assert!(!out.measurements.is_empty());
    let mut launches = 0;
    for m in &out.measurements {
        assert!(
            m.error.is_none(),
            "{:?} session failed: {:?}",
            m.policy,
            m.error
        );
        for l in m.launches.iter().chain(&m.load_launches) {
            launches += 1;
            assert!(
                l.ready || l.timed_out,
                "{:?}: launch of {} neither ready nor timed out: {:?}",
                m.policy,
                l.app,
                l.died
            );
        }
        // 3. Preloaded bytes never exceeded the budget (as the daemon holds them).
        if let Some(peak) = m.daemon_standby_peak_bytes {
            assert!(
                peak <= out.budget_bytes,
                "{:?}: standby {} > budget {}",
                m.policy,
                peak,
                out.budget_bytes
            );
        }
        // 4. The foreground app was never killed.
        assert!(
            !m.foreground_killed,
            "{:?}: the foreground app was killed",
            m.policy
        );
    }
    assert!(launches > 0);
    // The report has the oracle row and a stock row.
    let r = &out.reports[0];
    assert!(r.results.iter().any(|p| p.policy == "oracle"));
    assert!(r.results.iter().any(|p| p.policy == "stock"));
    eprintln!("{}", appflow_bench::report::table(r));

    // 5. The quick run has no `idle` or `high`: a device file written from it
    //    cannot derive the kernel's LRU reclaim cost from stock's loaded
    //    launch, and `--emit-sim-device` says so, with the runs to add
    //    (issue 30, defect 4).
    let measured = appflow_bench::cli::measured_for_sim(&o, &out);
    let msg = appflow_bench::simdev::underived_message(&o, &measured, "q.toml".as_ref());
    assert!(msg.contains("device.lru_anon_ms_per_mib"), "{msg}");
    assert!(msg.contains("--scenario idle,low,high"), "{msg}");
    eprintln!("{msg}");
}
