//! Safety on the real kernel: a GB-scale launch whose launch profile is
//! larger than the memory free in the domain, under load, with AppFlow's
//! daemon (preloader, reclaimer, killer) against stock in the same run.
//!
//! This is, at small scale, the case where the daemon's launch stream read
//! and locked a whole 1.2 GiB model into a full cgroup: the OOM killer took
//! the preload worker and once the launching app, and the daemon's own
//! killer took background apps that stock kept. The test asserts, for every
//! repetition:
//! * the case is reproduced: the target's launch reads more than the memory
//!   free in the domain just before it;
//! * AppFlow causes no kernel OOM kill beyond stock's;
//! * AppFlow never kills the launching (foreground) app;
//! * AppFlow kills no more background apps than stock;
//! * every launch became ready.
//!
//! Like `quick.rs` it runs the bench library in-process with the `appflow`
//! binary of `<workspace>/target/{release,debug}` and skips, saying why,
//! without root, a kernel feature or the binary.

use appflow_bench::cli::{options, run_bench, BenchArgs};
use appflow_bench::live;
use appflow_bench::run::Measurement;
mod common;
use common::appflow_binary;

fn background_kills(m: &Measurement, target: &str) -> usize {
    m.killed.iter().filter(|a| a.as_str() != target).count()
}

#[test]
fn a_launch_larger_than_free_memory_under_load_kills_nothing_stock_keeps() {
    if !live::is_root() {
        eprintln!("SKIP safety: needs root (cgroups, loop device, zram swap, mount)");
        return;
    }
    if let Some(m) = live::missing_feature(&appflow_bench::domain::Roots::default()) {
        eprintln!("SKIP safety: kernel feature missing: {m}");
        return;
    }
    let Some(bin) = appflow_binary() else {
        eprintln!(
            "SKIP safety: no appflow binary in target/release or target/debug \
             (run `cargo build --release -p appflow` first)"
        );
        return;
    };
    let target = "llm";
    let args = BenchArgs {
        // 491 MiB domain: `llm` reads about 196 MiB of mmapped weights and
        // writes 37 MiB of anonymous memory while `high` fills the domain.
        scale: 0.12,
        scenario: vec!["high".into()],
        target: vec![target.into()],
        policies: vec!["stock".into(), "appflow".into()],
        reps: 2,
        profiles: "spec".into(),
        binary: Some(bin),
        ..BenchArgs::default()
    };
    let mut o = options(&args).expect("safety options");
    o.progress = false;
    let out = run_bench(&o).expect("safety bench run");
    assert!(out.leftovers.is_empty(), "leftovers: {:?}", out.leftovers);

    let of = |p: &str| -> Vec<&Measurement> {
        out.measurements
            .iter()
            .filter(|m| m.policy.name() == p)
            .collect()
    };
    let (stock, appflow) = (of("stock"), of("appflow"));
    assert_eq!(stock.len(), 2);
    assert_eq!(appflow.len(), 2);
    for (s, a) in stock.iter().zip(&appflow) {
        for m in [s, a] {
            assert!(m.error.is_none(), "{:?}: {:?}", m.policy, m.error);
            for l in m.launches.iter().chain(&m.load_launches) {
                assert!(l.ready, "{:?}: {} not ready: {:?}", m.policy, l.app, l.died);
            }
            // The case is reproduced: the launch reads more than is free.
            let at = m.at_launch.expect("target-launch scenario");
            assert!(
                at.read_bytes > at.free_bytes,
                "{:?} rep {}: launch read {} bytes, {} free: not the case under test",
                m.policy,
                m.rep,
                at.read_bytes,
                at.free_bytes
            );
        }
        eprintln!(
            "rep {}: stock oom {} killed {:?}; appflow oom {} killed {:?}",
            s.rep, s.delta.oom_kills, s.killed, a.delta.oom_kills, a.killed
        );
        assert!(
            a.delta.oom_kills <= s.delta.oom_kills,
            "rep {}: appflow caused {} OOM kills, stock {}",
            a.rep,
            a.delta.oom_kills,
            s.delta.oom_kills
        );
        assert!(
            !a.foreground_killed && !a.killed.iter().any(|k| k == target),
            "rep {}: appflow's launching app was killed ({:?})",
            a.rep,
            a.killed
        );
        assert!(
            background_kills(a, target) <= background_kills(s, target),
            "rep {}: appflow killed {:?} in the background, stock {:?}",
            a.rep,
            a.killed,
            s.killed
        );
    }
    eprintln!("{}", appflow_bench::report::table(&out.reports[0]));
}
