//! Cutoff selection speed: the paper reports < 0.1 ms for 60 apps (the AppFlow paper
//! §6.5.3); issue #2 targets ≤ 10 µs median for 60 apps × 12 cutoffs under a
//! 100 MB budget. Instances are built from synthetic GB-scale and small
//! launch profiles, the way the daemon builds them.

use appflow_core::cutoff::{candidate_cutoffs, cutoff_options};
use appflow_core::knapsack::{solve, Item};
use appflow_core::profile::{ByteRange, LaunchObservation, LaunchProfile, ObservedFile};
use appflow_core::storage::{CurvePoint, ThroughputCurve};
use appflow_core::{KIB, MIB};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

/// A deterministic pseudo-random profile: `small` files of 1-120 KiB and
/// `large` files of 1-400 MiB, sizes from a xorshift stream.
fn profile(app: usize, small: usize, large: usize) -> LaunchProfile {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (app as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut files = Vec::new();
    for i in 0..small {
        let size = (next() % (120 * KIB)).max(KIB);
        files.push(ObservedFile {
            path: format!("/app{app}/s{i}"),
            size_bytes: size,
            first_access_us: i as u64,
            ranges: vec![ByteRange {
                start: 0,
                end: size,
            }],
        });
    }
    for i in 0..large {
        let size = (next() % (400 * MIB)).max(MIB);
        let touched = (size / 3).max(MIB);
        files.push(ObservedFile {
            path: format!("/app{app}/L{i}"),
            size_bytes: size,
            first_access_us: 10_000 + i as u64,
            ranges: vec![ByteRange {
                start: 0,
                end: touched,
            }],
        });
    }
    let mut p = LaunchProfile::new(&format!("app{app}"));
    p.merge_launch(&LaunchObservation {
        files,
        ..Default::default()
    });
    p
}

fn bench(c: &mut Criterion) {
    let curve = ThroughputCurve::new(vec![
        CurvePoint {
            block_bytes: 4 * KIB,
            bytes_per_sec: 22e6,
        },
        CurvePoint {
            block_bytes: 128 * KIB,
            bytes_per_sec: 300e6,
        },
        CurvePoint {
            block_bytes: 512 * KIB,
            bytes_per_sec: 500e6,
        },
    ])
    .unwrap();
    let cutoffs = candidate_cutoffs(12);
    // 60 apps: 8 GB-scale (1000 small files each, as TikTok's 1,002, §2.2.1), 52 small apps.
    let classes: Vec<Vec<Item>> = (0..60)
        .map(|a| {
            let p = if a < 8 {
                profile(a, 1000, 12)
            } else {
                profile(a, 150, 2)
            };
            cutoff_options(&p, &curve, &cutoffs, 2 * MIB)
                .iter()
                .map(|o| Item {
                    weight: o.preload_bytes,
                    cost: o.stream_secs,
                })
                .collect()
        })
        .collect();
    let sol = solve(&classes, 100 * MIB).unwrap();
    eprintln!(
        "60 apps x {} options: slack={} nodes={} preload={} MiB",
        cutoffs.len(),
        sol.budget_slack,
        sol.nodes,
        sol.total_weight / MIB
    );
    c.bench_function("knapsack_60x12_100MB", |b| {
        b.iter(|| solve(black_box(&classes), black_box(100 * MIB)).unwrap())
    });
    c.bench_function("knapsack_60x12_20MB", |b| {
        b.iter(|| solve(black_box(&classes), black_box(20 * MIB)).unwrap())
    });
    // The planner's default counts the budget in 256 KiB units (PreloadConfig::budget_unit_bytes).
    for unit in [4 * KIB, 64 * KIB, 256 * KIB] {
        let units: Vec<Vec<Item>> = classes
            .iter()
            .map(|c| {
                c.iter()
                    .map(|it| Item {
                        weight: it.weight.div_ceil(unit),
                        cost: it.cost,
                    })
                    .collect()
            })
            .collect();
        let s = solve(&units, 100 * MIB / unit).unwrap();
        eprintln!(
            "unit {} KiB: nodes={} cost={:.6} vs bytes {:.6}",
            unit / KIB,
            s.nodes,
            s.total_cost,
            sol.total_cost
        );
        c.bench_function(&format!("knapsack_60x12_100MB_unit{}k", unit / KIB), |b| {
            b.iter(|| solve(black_box(&units), black_box(100 * MIB / unit)).unwrap())
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
