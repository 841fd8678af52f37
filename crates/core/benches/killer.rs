//! The killer's decision speed (issue #26: ≤ 50 µs for 60 apps): the
//! candidates of 60 running apps priced by the reuse predictor after a
//! month of history (visits, gaps, successors) and ranked, as the
//! scheduler does at a kill (`Scheduler::candidates`, `predict`,
//! `killer::rank`, `killer::decide`, `killer::explain`), with a process per
//! app and their smaps numbers read.

use appflow_core::killer;
use appflow_core::mechanism::Recorder;
use appflow_core::rng::SplitMix;
use appflow_core::scheduler::{EventKind, ProcInfo, Scheduler, SchedulerConfig};
use appflow_core::storage::ThroughputCurve;
use appflow_core::MIB;
use criterion::{black_box, criterion_group, criterion_main, Criterion};

const APPS: usize = 60;
const DAY_MS: u64 = 86_400_000;

fn setup() -> (Scheduler, Vec<ProcInfo>, u64) {
    let names: Vec<String> = (0..APPS).map(|i| format!("app{i:02}")).collect();
    let mut s = Scheduler::new(
        SchedulerConfig::default(),
        ThroughputCurve::phone_default(),
        &names,
        &[],
    );
    s.set_profiles(
        (0..APPS)
            .map(|i| {
                appflow_core::profile::synthetic(&names[i], 40, 4, (100 + 30 * i as u64) * MIB)
            })
            .collect(),
    );
    let mut r = Recorder::default();
    // A month: a switch every few minutes while awake, popularity skewed.
    let mut g = SplitMix::new(26);
    let mut t = 0u64;
    while t < 30 * DAY_MS {
        let hour = (t / 3_600_000) % 24;
        if (7..23).contains(&hour) {
            let i = ((g.unit() * g.unit()) * APPS as f64) as usize;
            s.notify(EventKind::Foreground, &names[i], None, t, &mut r)
                .unwrap();
            t += 60_000 + g.exp(300_000.0) as u64;
        } else {
            t += 3_600_000;
        }
    }
    let procs = (0..APPS)
        .map(|i| ProcInfo {
            pid: 1000 + i as u32,
            start_time: i as u64,
            comm: names[i].clone(),
            app: Some(names[i].clone()),
            oom_score_adj: 900 + i as i32,
            footprint_bytes: Some((150 + 20 * i as u64) * MIB),
            anon_bytes: Some((100 + 10 * i as u64) * MIB),
            swap_bytes: Some((30 + 5 * i as u64) * MIB),
            ..Default::default()
        })
        .collect();
    (s, procs, t)
}

fn bench(c: &mut Criterion) {
    let (s, procs, now) = setup();
    let kcfg = s.config().killer.clone();
    c.bench_function("killer decision, 60 apps", |b| {
        b.iter(|| {
            let (mut cands, _) = s.candidates(black_box(&procs));
            s.predict(&mut cands, now);
            let ranked = killer::rank(&kcfg, s.killer_now_ms(now), &cands);
            let d = killer::decide(&ranked);
            let e = killer::explain(&cands, &ranked, d.reason);
            black_box((d, e))
        })
    });
    c.bench_function("candidates only", |b| {
        b.iter(|| black_box(s.candidates(black_box(&procs))))
    });
    let (cands0, _) = s.candidates(&procs);
    c.bench_function("predict only", |b| {
        b.iter(|| {
            let mut cands = cands0.clone();
            s.predict(&mut cands, now);
            black_box(cands)
        })
    });
    let mut priced = cands0.clone();
    s.predict(&mut priced, now);
    c.bench_function("rank only", |b| {
        b.iter(|| {
            black_box(killer::rank(
                &kcfg,
                s.killer_now_ms(now),
                black_box(&priced),
            ))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
