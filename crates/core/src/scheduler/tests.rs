use super::*;
use crate::mechanism::{Call, Hold, Recorder};
use crate::policy;
use crate::{KIB, MIB};

pub(crate) fn curve() -> ThroughputCurve {
    ThroughputCurve::phone_default()
}

fn profile(name: &str, small: usize, large: usize, relaunch_mib: u64) -> LaunchProfile {
    crate::profile::synthetic(name, small, large, relaunch_mib * MIB)
}

fn cfg(policy_name: &str) -> SchedulerConfig {
    SchedulerConfig::for_policy(policy::lookup(policy_name).unwrap())
}

/// A scheduler of the registered policy `name` with `apps` installed and
/// no profile (the peers' tests in the sibling modules use it too).
pub(crate) fn sched_of(name: &str, apps: &[&str]) -> Scheduler {
    let apps: Vec<String> = apps.iter().map(|a| a.to_string()).collect();
    Scheduler::new(cfg(name), curve(), &apps, &[])
}

/// An event of `app` with no announced process (the peers' tests).
pub(crate) fn ev(s: &mut Scheduler, r: &mut Recorder, e: EventKind, app: &str, now: u64) {
    s.notify(e, app, None, now, r).unwrap();
}

fn sched(cfg: SchedulerConfig) -> Scheduler {
    let mut s = Scheduler::new(cfg, curve(), &[], &[7]);
    s.set_profiles(vec![profile("a", 100, 2, 100), profile("b", 50, 1, 50)]);
    s
}

fn sample(now_ms: u64, alloc_counter: u64, avail_mib: u64) -> DomainSample {
    DomainSample {
        now_ms,
        total_bytes: 1024 * MIB,
        avail_bytes: avail_mib * MIB,
        anon_bytes: 600 * MIB,
        file_bytes: 200 * MIB,
        alloc_counter,
        swap_total_bytes: 0,
        swap_free_bytes: 0,
        psi_some_avg10: None,
        ..Default::default()
    }
}

fn proc_(pid: u32, app: &str, mib: u64) -> ProcInfo {
    ProcInfo {
        pid,
        start_time: pid as u64,
        comm: app.into(),
        app: Some(app.into()),
        oom_score_adj: 900,
        footprint_bytes: Some(mib * MIB),
        ..Default::default()
    }
}

fn id(pid: u32) -> Option<ProcId> {
    Some(ProcId {
        pid,
        start_time: pid as u64,
    })
}

#[test]
fn standby_then_launch_stream_then_release() {
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    s.reclaim_step(&sample(0, 0, 800), &[], &mut r);
    s.preload_step(0, 0, &mut r);
    assert!(s.plan().is_some());
    let touch_loads = |r: &Recorder| {
        r.calls
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Call::Load {
                        hold: Hold::Touch,
                        ..
                    }
                )
            })
            .count()
    };
    assert_eq!(touch_loads(&r), 2, "both apps' standby sets");
    // The plan is not re-solved on later ticks without a change.
    s.preload_step(100, 0, &mut r);
    assert_eq!(s.stats.plans_solved, 1);
    let n = r.calls.len();
    s.preload_step(200, 0, &mut r);
    assert_eq!(r.calls.len(), n, "no churn without a change");
    // Launch: every standby hold is dropped, a's large files streamed protected.
    s.notify(EventKind::Launch, "a", id(42), 300, &mut r)
        .unwrap();
    assert!(s.is_launching("a"));
    assert_eq!(
        s.app_of_announced(ProcId {
            pid: 42,
            start_time: 42
        }),
        Some("a")
    );
    assert!(r.calls.contains(&Call::ReleaseHold {
        app: "a".into(),
        hold: Hold::Touch
    }));
    assert!(r.calls.contains(&Call::PauseTouch(true)));
    match r.calls.last().unwrap() {
        Call::Load {
            app, hold, bytes, ..
        } => {
            assert_eq!((app.as_str(), *hold), ("a", Hold::Protect));
            // Two 8 MiB large ranges minus the hot segments kept in standby.
            assert_eq!(*bytes, 2 * (8 * MIB - 128 * KIB));
        }
        c => panic!("unexpected {c:?}"),
    }
    // While a launches, no standby set is loaded for anyone.
    let n = r.calls.len();
    s.preload_step(400, 0, &mut r);
    assert_eq!(r.calls.len(), n, "no standby reads during a launch");
    s.notify(EventKind::Launched, "a", None, 900, &mut r)
        .unwrap();
    assert!(!s.is_launching("a"));
    assert!(r.calls.contains(&Call::Release { app: "a".into() }));
    assert_eq!(r.calls.last(), Some(&Call::PauseTouch(false)));
    // b's set stayed held; a is foreground, so its set is not kept.
    s.preload_step(1000, 0, &mut r);
    assert_eq!(touch_loads(&r), 2);
    // Bad names are refused.
    assert!(s
        .notify(EventKind::Launch, "../x", None, 1000, &mut r)
        .is_err());
}

#[test]
fn launch_stream_is_bounded_by_the_room() {
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    // 1 GiB domain, killer trigger at 5 % ≈ 51.2 MiB, 60 MiB available: ~8.8 MiB of room.
    s.reclaim_step(&sample(0, 0, 60), &[], &mut r);
    s.preload_step(0, 0, &mut r);
    r.calls.clear();
    s.notify(EventKind::Launch, "a", None, 100, &mut r).unwrap();
    let streamed: u64 = r
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Load {
                hold: Hold::Protect,
                bytes,
                ..
            } => Some(*bytes),
            _ => None,
        })
        .sum();
    let room = 60 * MIB - (1024.0 * MIB as f64 * 0.05) as u64;
    assert!(streamed > 0 && streamed <= room, "{streamed} vs {room}");
    // No room at all: nothing is streamed.
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    s.reclaim_step(&sample(0, 0, 40), &[], &mut r);
    s.notify(EventKind::Launch, "a", None, 100, &mut r).unwrap();
    assert!(!r.calls.iter().any(|c| matches!(
        c,
        Call::Load {
            hold: Hold::Protect,
            ..
        }
    )));
}

#[test]
fn launch_times_out_without_launched() {
    let mut c = cfg("appflow");
    c.launch_timeout_ms = 500;
    let mut s = sched(c);
    let mut r = Recorder::default();
    s.notify(EventKind::Launch, "b", None, 0, &mut r).unwrap();
    s.preload_step(400, 0, &mut r);
    assert!(s.is_launching("b"));
    s.preload_step(600, 0, &mut r);
    assert!(!s.is_launching("b"));
    let ends = s
        .take_decisions()
        .into_iter()
        .filter(|d| matches!(d.mark, Some(Mark::LaunchEnd { .. })))
        .count();
    assert_eq!(ends, 1);
}

#[test]
fn prefetch_streams_everything_and_keeps_nothing_before() {
    let mut s = sched(cfg("prefetch"));
    let mut r = Recorder::default();
    s.preload_step(0, 0, &mut r);
    assert!(r.calls.is_empty());
    s.notify(EventKind::Launch, "b", None, 0, &mut r).unwrap();
    assert_eq!(
        r.calls,
        vec![Call::Load {
            app: "b".into(),
            spans: 50 + 4,
            bytes: 50 * 16 * KIB + 8 * MIB,
            hold: Hold::Protect
        }]
    );
}

#[test]
fn burst_switches_modes_and_rebalances_background_apps() {
    let mut c = cfg("appflow");
    c.reclaim.low_memory_bytes = 200 * MIB;
    let mut s = sched(c);
    let mut r = Recorder::default();
    let procs = vec![proc_(10, "a", 300), proc_(11, "b", 200)];
    s.notify(EventKind::Foreground, "b", None, 0, &mut r)
        .unwrap();
    r.calls.clear();
    s.reclaim_step(&sample(0, 0, 100), &procs, &mut r);
    // 20,000 pages in 100 ms with 100 MiB available: burst.
    let m = s.reclaim_step(&sample(100, 20_000, 100), &procs, &mut r);
    assert_eq!(m, ReclaimMode::EfficiencyFirst);
    assert_eq!(r.calls, vec![Call::Mode(ReclaimMode::EfficiencyFirst)]);
    let mut t = 200;
    let mut counter = 20_000;
    while s.mode() == ReclaimMode::EfficiencyFirst {
        counter += 10;
        s.reclaim_step(&sample(t, counter, 100), &procs, &mut r);
        t += 100;
    }
    assert_eq!(s.mode(), ReclaimMode::Rebalancing);
    assert!(r.calls.contains(&Call::Mode(ReclaimMode::Rebalancing)));
    let pageouts: Vec<u32> = r
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::PageOut { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect();
    assert_eq!(pageouts, vec![10], "only the background app");
    assert_eq!(s.stats.switches_total(), 2);
    // A vanished pid does not stop the loop.
    r.vanished.push(10);
    s.reclaim_step(&sample(t, counter, 100), &procs, &mut r);
}

/// The bytes of the first page-out of a rebalancing that follows a burst,
/// 100 MiB short of an M_F of 200 MiB, with the mechanism reporting `rate`.
fn first_rebalancing_step(step_bytes: u64, rate: Option<f64>) -> u64 {
    let mut c = cfg("appflow");
    c.reclaim.low_memory_bytes = 200 * MIB;
    c.reclaim.rebalance_step_bytes = step_bytes;
    let mut s = sched(c);
    let mut r = Recorder::default();
    r.page_out_rate = rate;
    let procs = vec![proc_(10, "a", 300), proc_(11, "b", 200)];
    s.notify(EventKind::Foreground, "b", None, 0, &mut r)
        .unwrap();
    s.reclaim_step(&sample(0, 0, 100), &procs, &mut r);
    s.reclaim_step(&sample(100, 20_000, 100), &procs, &mut r);
    let mut t = 200;
    while s.mode() != ReclaimMode::Rebalancing && t < 10_000 {
        s.reclaim_step(&sample(t, 20_000, 100), &procs, &mut r);
        t += 100;
    }
    r.calls
        .iter()
        .find_map(|c| match c {
            Call::PageOut { bytes, .. } => Some(*bytes),
            _ => None,
        })
        .expect("a page-out")
}

#[test]
fn rebalancing_pages_out_one_tick_at_the_measured_rate() {
    // 700 MB/s measured (lz4 zram on the development machine): 70 MB a
    // 100 ms tick, where a fixed 32 MiB step paged out half as fast.
    assert_eq!(first_rebalancing_step(0, Some(700e6)), 70_000_000);
    // Faster than the shortfall: no more than brings M_aval to M_F.
    assert_eq!(first_rebalancing_step(0, Some(4e9)), 100 * MIB);
    // No rate measured yet: N_alloc pages (12,800, §6.5.2), a tick of the
    // rate at which reclaim supplies memory.
    assert_eq!(first_rebalancing_step(0, None), 12_800 * 4096);
    // A rate that is no rate counts as none.
    assert_eq!(first_rebalancing_step(0, Some(f64::NAN)), 12_800 * 4096);
    // A configured step is the step, whatever the rate.
    assert_eq!(first_rebalancing_step(8 * MIB, Some(700e6)), 8 * MIB);
}

#[test]
fn kill_picks_highest_net_freed_background_app_never_foreground() {
    let mut c = cfg("appflow");
    c.killer.trigger_avail_fraction = 0.1;
    c.protected_comms = vec!["sshd".into()];
    let mut s = sched(c);
    let mut r = Recorder::default();
    // a: 400 MiB now, 100 after launch → ΔM 300; b: 120 now, 50 → 70;
    // c (no profile): 900 → ΔM 257 but it is foreground; d is protected;
    // e is the daemon's own pid; f is PID 1; x belongs to no app; g runs
    // where the driver protects it (a protected cgroup).
    let mut procs = vec![
        proc_(10, "a", 400),
        proc_(11, "b", 120),
        proc_(12, "c", 900),
    ];
    procs.push(ProcInfo {
        comm: "sshd".into(),
        ..proc_(13, "d", 2000)
    });
    procs.push(proc_(7, "e", 3000));
    procs.push(proc_(1, "f", 3000));
    procs.push(ProcInfo {
        app: None,
        ..proc_(14, "x", 5000)
    });
    procs.push(ProcInfo {
        protected: true,
        ..proc_(15, "g", 4000)
    });
    s.notify(EventKind::Foreground, "c", None, 0, &mut r)
        .unwrap();
    s.notify(EventKind::Background, "a", None, 0, &mut r)
        .unwrap();
    s.notify(EventKind::Background, "b", None, 0, &mut r)
        .unwrap();
    r.calls.clear();
    let smp = sample(40 * 60 * 1000, 0, 50);
    assert!(s.kill_wanted(&smp).is_ok());
    // Neither a nor b was ever seen opened (no reuse expected): the one
    // that frees more goes first.
    assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("a"));
    assert_eq!(
        r.calls,
        vec![Call::Kill {
            pid: 10,
            reason: Reason::KillNoReuseExpected
        }]
    );
    // Settle time: no second kill at once.
    assert_eq!(s.kill_wanted(&smp), Err(Reason::KillWaitingForMemory));
    let smp2 = sample(40 * 60 * 1000 + 1000, 0, 50);
    let procs2: Vec<ProcInfo> = procs.into_iter().filter(|p| p.pid != 10).collect();
    assert_eq!(s.kill_step(&smp2, &procs2, &mut r).as_deref(), Some("b"));
    let procs3: Vec<ProcInfo> = procs2.into_iter().filter(|p| p.pid != 11).collect();
    let smp3 = sample(40 * 60 * 1000 + 2000, 0, 50);
    assert_eq!(s.kill_step(&smp3, &procs3, &mut r), None);
    assert_eq!(r.calls.len(), 2);
}

#[test]
fn footprints_are_needed_only_for_possible_victims() {
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    s.notify(EventKind::Background, "bg", None, 1_000, &mut r)
        .unwrap();
    s.notify(EventKind::Foreground, "fg", None, 1_000, &mut r)
        .unwrap();
    let mut none = proc_(13, "x", 10);
    none.app = None;
    // The foreground app is never a victim; processes of no app are never
    // candidates.
    assert!(s.footprint_unneeded(&proc_(11, "fg", 100)));
    assert!(s.footprint_unneeded(&none));
    assert!(!s.footprint_unneeded(&proc_(12, "bg", 100)));
    assert!(!s.footprint_unneeded(&proc_(10, "new", 100)));
    // Nor is the launching app.
    s.notify(EventKind::Launch, "new", None, 2_000, &mut r)
        .unwrap();
    assert!(s.footprint_unneeded(&proc_(10, "new", 100)));
    assert!(!s.footprint_unneeded(&proc_(12, "bg", 100)));
    // Once launched and sent to the background, it is a candidate again.
    s.notify(EventKind::Launched, "new", None, 3_000, &mut r)
        .unwrap();
    s.notify(EventKind::Foreground, "fg", None, 3_000, &mut r)
        .unwrap();
    assert!(!s.footprint_unneeded(&proc_(10, "new", 100)));
}

#[test]
fn never_used_apps_are_not_recent_right_after_start() {
    let mut c = cfg("appflow");
    c.killer.trigger_avail_fraction = 0.1;
    let mut s = sched(c);
    let mut r = Recorder::default();
    s.notify(EventKind::Background, "b", None, 4_000, &mut r)
        .unwrap();
    r.calls.clear();
    let procs = vec![proc_(10, "a", 130), proc_(11, "b", 900)];
    let smp = sample(5_000, 0, 50);
    assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("a"));
}

#[test]
fn last_resort_kill_only_when_the_domain_is_about_to_run_out() {
    let mut c = cfg("appflow");
    c.killer.trigger_avail_fraction = 0.1;
    let mut s = sched(c);
    let mut r = Recorder::default();
    // Only b, used 1 s ago: recent.
    s.notify(EventKind::Background, "b", None, 9_000, &mut r)
        .unwrap();
    r.calls.clear();
    let procs = vec![proc_(11, "b", 900)];
    // Swap has room: a stall alone defers the recent app.
    let mut smp = sample(10_000, 0, 50);
    smp.swap_total_bytes = 1024 * MIB;
    smp.swap_free_bytes = 512 * MIB;
    smp.psi_some_avg10 = Some(60.0);
    assert!(s.kill_wanted(&smp).is_ok());
    assert_eq!(s.kill_step(&smp, &procs, &mut r), None);
    assert!(r.calls.is_empty());
    // Swap full as well: the kernel is about to run out, the last resort fires.
    smp.swap_free_bytes = 10 * MIB;
    assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("b"));
    assert_eq!(
        r.calls,
        vec![Call::Kill {
            pid: 11,
            reason: Reason::KillRecentLastResort
        }]
    );
}

#[test]
fn lru_strategy_takes_highest_adj() {
    let mut s = sched(cfg("lru-killer"));
    let mut r = Recorder::default();
    let mut a = proc_(10, "a", 400);
    a.oom_score_adj = 100;
    let b = proc_(11, "b", 10);
    let smp = sample(1000, 0, 10);
    assert_eq!(s.kill_step(&smp, &[a, b], &mut r).as_deref(), Some("b"));
}

#[test]
fn without_events_oom_adj_decides_foreground() {
    let s = sched(cfg("appflow"));
    let mut fg = proc_(10, "a", 400);
    fg.oom_score_adj = 0;
    let bg = proc_(11, "b", 10);
    let (c, _) = s.candidates(&[fg, bg]);
    assert!(c[0].foreground && !c[1].foreground);
}

#[test]
fn announced_processes_are_instances_not_pid_numbers() {
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    s.notify(EventKind::Launch, "a", id(500), 0, &mut r)
        .unwrap();
    let a = ProcId {
        pid: 500,
        start_time: 500,
    };
    assert_eq!(s.app_of_announced(a), Some("a"));
    // The same PID with another start time is another process.
    let stranger = ProcId {
        pid: 500,
        start_time: 9_999,
    };
    assert_eq!(s.app_of_announced(stranger), None);
    // A scan that sees the stranger (a exited without an event) forgets a.
    let procs = vec![ProcInfo {
        pid: 500,
        start_time: 9_999,
        comm: "sleep".into(),
        ..Default::default()
    }];
    s.tick(
        &sample(100, 0, 800),
        0,
        &procs,
        &mut Mechs {
            preload: &mut Recorder::default(),
            reclaim: &mut Recorder::default(),
            kill: &mut r,
        },
    );
    assert_eq!(s.app_of_announced(a), None);
    // PID 1 and the daemon's own pids are refused.
    for pid in [0, 1, 7] {
        let e = s
            .notify(EventKind::Launch, "a", id(pid), 200, &mut r)
            .unwrap_err();
        assert_eq!(e, EventError::ForbiddenPid(pid));
    }
}

#[test]
fn undeclared_app_names_are_bounded() {
    let mut c = cfg("appflow");
    c.max_undeclared_apps = 3;
    let mut s = Scheduler::new(c, curve(), &["decl".to_string()], &[]);
    let mut r = Recorder::default();
    for i in 0..3 {
        s.notify(EventKind::Foreground, &format!("n{i}"), None, 0, &mut r)
            .unwrap();
    }
    let e = s
        .notify(EventKind::Foreground, "n3", None, 0, &mut r)
        .unwrap_err();
    assert!(matches!(e, EventError::UnknownApp(_)));
    // Declared and already known names still work.
    s.notify(EventKind::Foreground, "decl", None, 0, &mut r)
        .unwrap();
    s.notify(EventKind::Background, "n1", None, 0, &mut r)
        .unwrap();
}

#[test]
fn a_record_stream_replays_to_the_same_decisions() {
    let records = vec![
        Record::Tick {
            sample: sample(0, 0, 800),
            now_unix_ms: 0,
            procs: vec![],
        },
        Record::Event {
            now_ms: 50,
            event: EventKind::Launch,
            app: "a".into(),
            proc_id: id(40),
        },
        Record::Tick {
            sample: sample(100, 30_000, 100),
            now_unix_ms: 100,
            procs: vec![proc_(40, "a", 300), proc_(41, "b", 200)],
        },
    ];
    let run = || {
        let mut s = sched(cfg("appflow"));
        let (mut p, mut q, mut k) = (
            Recorder::default(),
            Recorder::default(),
            Recorder::default(),
        );
        for rec in &records {
            s.apply(
                rec,
                &mut Mechs {
                    preload: &mut p,
                    reclaim: &mut q,
                    kill: &mut k,
                },
            )
            .unwrap();
        }
        (s.take_decisions(), p.calls, q.calls, k.calls)
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.0.iter().any(|d| d.kind == "reclaim"));
}

#[test]
fn launch_protection_yields_when_memory_falls_below_the_floor() {
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    s.tick(&sample(0, 0, 800), 0, &[], &mut r);
    s.notify(EventKind::Launch, "a", id(42), 100, &mut r)
        .unwrap();
    assert!(r.calls.iter().any(|c| matches!(
        c,
        Call::Load {
            hold: Hold::Protect,
            ..
        }
    )));
    // Above the floor (5 % of 1 GiB ≈ 51 MiB): the protection holds.
    r.calls.clear();
    s.tick(&sample(200, 0, 60), 0, &[], &mut r);
    assert!(!r
        .calls
        .iter()
        .any(|c| matches!(c, Call::ReleaseHold { .. })));
    // Below it: released once, and no kill in the same tick (the memory
    // the locks give back is waited for).
    let mut low = sample(300, 0, 20);
    low.anon_bytes = 900 * MIB;
    low.file_bytes = 50 * MIB;
    let procs = [proc_(50, "b", 300)];
    s.tick(&low, 0, &procs, &mut r);
    let expected = Call::ReleaseHold {
        app: "a".into(),
        hold: Hold::Protect,
    };
    assert_eq!(r.calls.iter().filter(|c| **c == expected).count(), 1);
    assert!(!r.calls.iter().any(|c| matches!(c, Call::Kill { .. })));
    assert_eq!(s.stats.launch_protect_yields, 1);
    assert!(s.is_launching("a"), "the launch itself goes on");
    r.calls.clear();
    s.tick(&sample(400, 0, 20), 0, &[], &mut r);
    assert!(!r.calls.contains(&expected), "released only once");
}

#[test]
fn efficiency_first_yields_to_the_kernel_when_file_reclaim_runs_out() {
    let mut s = sched(cfg("appflow-amr"));
    let mut r = Recorder::default();
    let n = s.config().reclaim.alloc_threshold_pages;
    // A burst with 100 MiB available (M_F = 15 % ≈ 154 MiB): efficiency-first.
    s.tick(&sample(0, 0, 100), 0, &[], &mut r);
    s.tick(&sample(100, 2 * n, 100), 0, &[], &mut r);
    assert_eq!(s.mode(), ReclaimMode::EfficiencyFirst);
    assert_eq!(
        r.calls.last(),
        Some(&Call::Mode(ReclaimMode::EfficiencyFirst))
    );
    // Page cache exhausted (below the 51 MiB floor): the kernel's balance
    // is restored while the controller stays in its burst.
    r.calls.clear();
    s.tick(&sample(200, 4 * n, 40), 0, &[], &mut r);
    assert_eq!(s.mode(), ReclaimMode::EfficiencyFirst);
    assert_eq!(r.calls, vec![Call::Mode(ReclaimMode::Normal)]);
    assert_eq!(s.stats.efficiency_first_yields, 1);
    // Not re-applied a second later while still short (no flapping
    // between the floor and twice the floor either).
    r.calls.clear();
    s.tick(&sample(1300, 6 * n, 80), 0, &[], &mut r);
    assert!(!r.calls.contains(&Call::Mode(ReclaimMode::EfficiencyFirst)));
    // Memory back above twice the floor: file-only reclaim again.
    s.tick(&sample(1400, 8 * n, 110), 0, &[], &mut r);
    assert_eq!(
        r.calls.last(),
        Some(&Call::Mode(ReclaimMode::EfficiencyFirst))
    );
}

#[test]
fn a_stalled_launch_keeps_efficiency_first_until_launched() {
    let mut s = sched(cfg("appflow-amr"));
    let mut r = Recorder::default();
    let n = s.config().reclaim.alloc_threshold_pages;
    s.tick(&sample(0, 0, 100), 0, &[], &mut r);
    s.notify(EventKind::Launch, "a", id(42), 50, &mut r)
        .unwrap();
    s.tick(&sample(100, 2 * n, 100), 0, &[], &mut r);
    assert_eq!(s.mode(), ReclaimMode::EfficiencyFirst);
    // The app stalls for 3 s: no allocation, but it is still launching.
    let procs = [proc_(50, "b", 300)];
    for t in 2..32 {
        s.tick(&sample(t * 100, 2 * n, 100), 0, &procs, &mut r);
    }
    assert_eq!(s.mode(), ReclaimMode::EfficiencyFirst);
    assert!(!r.calls.iter().any(|c| matches!(c, Call::PageOut { .. })));
    s.notify(EventKind::Launched, "a", None, 3200, &mut r)
        .unwrap();
    for t in 33..45 {
        s.tick(&sample(t * 100, 2 * n, 100), 0, &procs, &mut r);
    }
    assert_ne!(s.mode(), ReclaimMode::EfficiencyFirst);
}

#[test]
fn launch_readahead_is_raised_while_launches_stream_and_restored_after() {
    let readaheads = |r: &Recorder| -> Vec<(usize, Option<u64>)> {
        r.calls
            .iter()
            .filter_map(|c| match c {
                Call::Readahead { paths, bytes } => Some((paths.len(), *bytes)),
                _ => None,
            })
            .collect()
    };
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    s.reclaim_step(&sample(0, 0, 800), &[], &mut r);
    s.preload_step(0, 0, &mut r);
    let big = s.config().preload.max_read_bytes;
    // The window is the fastest for a's profile on the device's curve, at
    // most the stream's read size (512 KiB on the test curve, flat above
    // it).
    let want = crate::preload::launch_readahead_window(
        s.profile("a").unwrap(),
        s.cutoff_of("a"),
        &curve(),
        big,
        s.room(),
        s.config().reclaim.reclaim_bytes_per_sec(),
    );
    assert_eq!(want, Some(512 * crate::KIB));
    // Two launches overlap: raised once (for a's two streamed files), restored
    // only when neither is launching any more.
    s.notify(EventKind::Launch, "a", id(42), 100, &mut r)
        .unwrap();
    s.notify(EventKind::Launch, "b", id(43), 150, &mut r)
        .unwrap();
    assert_eq!(readaheads(&r), vec![(2, want)]);
    s.notify(EventKind::Launched, "a", id(42), 200, &mut r)
        .unwrap();
    assert_eq!(readaheads(&r).len(), 1, "b still launches");
    s.notify(EventKind::Exit, "b", id(43), 300, &mut r).unwrap();
    assert_eq!(readaheads(&r), vec![(2, want), (0, None)]);
    assert_eq!(s.stats.readahead_raises, 1);
    // Only AppFlow's selective preloader does it: Paralfetch-like whole-profile
    // prefetch and the stock system leave the device alone.
    for name in ["prefetch", "stock"] {
        let mut s = sched(cfg(name));
        let mut r = Recorder::default();
        s.reclaim_step(&sample(0, 0, 800), &[], &mut r);
        s.preload_step(0, 0, &mut r);
        s.notify(EventKind::Launch, "a", id(42), 100, &mut r)
            .unwrap();
        s.notify(EventKind::Launched, "a", id(42), 200, &mut r)
            .unwrap();
        assert!(readaheads(&r).is_empty(), "{name}");
    }
}

#[test]
fn capacity_stall_is_measured_over_the_window_and_waits_a_window_after_a_kill() {
    let mut s = sched(cfg("appflow"));
    let mut r = Recorder::default();
    // 1 GiB domain, 500 MiB available (not low), mostly anonymous, swap
    // full; the stall comes from the cumulative PSI counter.
    let smp = |now_ms: u64, total_us: u64| DomainSample {
        swap_total_bytes: 100 * MIB,
        swap_free_bytes: 0,
        psi_some_avg10: Some(0.0),
        psi_some_total_us: Some(total_us),
        ..sample(now_ms, 0, 500)
    };
    let procs = vec![proc_(10, "a", 400), proc_(11, "b", 120)];
    let t0 = 40 * 60 * 1000;
    // No window yet: avg10 (0 %) decides.
    assert_eq!(s.kill_wanted(&smp(t0, 0)), Err(Reason::KillNotNeeded));
    s.record_psi(&smp(t0, 0));
    s.record_psi(&smp(t0 + 500, 0));
    // 100 ms of stall in the last second: 10 %, above lmkd's 7 %.
    let at = smp(t0 + 1000, 100_000);
    assert_eq!(s.kill_wanted(&at), Ok(Reason::KillHighestNetFreed));
    assert_eq!(s.kill_step(&at, &procs, &mut r).as_deref(), Some("a"));
    s.record_psi(&at);
    // Past the settle time, still stalled, but the window reaches back
    // before the kill: wait.
    let later = smp(t0 + 1600, 160_000);
    assert_eq!(s.kill_wanted(&later), Err(Reason::KillNotNeeded));
    s.record_psi(&later);
    // A whole window after the kill: its own stall decides (10 %, then 3 %).
    assert_eq!(
        s.kill_wanted(&smp(t0 + 2000, 200_000)),
        Ok(Reason::KillHighestNetFreed)
    );
    assert_eq!(
        s.kill_wanted(&smp(t0 + 2000, 100_000 + 30_000)),
        Err(Reason::KillNotNeeded)
    );
    // Without the cumulative counter, avg10 is the measure.
    let no_total = DomainSample {
        psi_some_total_us: None,
        psi_some_avg10: Some(9.0),
        ..smp(t0 + 2000, 0)
    };
    assert_eq!(s.kill_wanted(&no_total), Ok(Reason::KillHighestNetFreed));
}

/// A run driven two ways gives the same decisions, mechanism calls and
/// counts: every tick in full (processes listed when `wants_procs` says
/// so, as the simulator always did), or, while no process came or went,
/// through `quiet_ticks` over the stretches in which the sample stays the
/// same and `tick_same_procs` where they take the tick. Memory swings
/// through bursts, rebalancing and kills; the swap fills and empties.
#[test]
fn ticks_without_the_process_list_decide_as_full_ticks() {
    // (policy, M_F and N_alloc derived from the launches: the daemon's
    // default, which the launches' ticks feed).
    for (policy, auto) in [
        ("appflow", false),
        ("appflow", true),
        ("appflow+asap", false),
        ("appflow-amr", false),
        ("pmr", false),
        ("ariadne", false),
        ("refault", false),
    ] {
        // The script: each tick's sample (constant over stretches), its
        // event, the app whose launch ends at it (three ticks after it
        // began), and whether a process ends before it.
        struct Step {
            sample: DomainSample,
            full_swap: bool,
            event: Option<(EventKind, &'static str)>,
            launched: Option<&'static str>,
            ends: bool,
        }
        let apps = ["a", "b", "c", "d"];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let (mut alloc, mut avail, mut psi, mut stall) = (0u64, 700u64, 0u64, 0u64);
        let steps: Vec<Step> = (1..4000u64)
            .map(|t| {
                let event = (t % 97 == 0).then(|| {
                    let e = if rnd(2) == 0 {
                        EventKind::Launch
                    } else {
                        EventKind::Foreground
                    };
                    (e, apps[rnd(4) as usize])
                });
                // Bursts now and then, long calm stretches otherwise.
                if rnd(50) == 0 {
                    alloc += 20_000;
                    avail = 20 + rnd(120);
                    stall += rnd(300_000);
                } else if rnd(20) == 0 {
                    avail = (avail + 10).min(900);
                }
                if rnd(25) == 0 {
                    psi = rnd(20);
                }
                let full_swap = (t / 300) % 2 == 0;
                Step {
                    sample: DomainSample {
                        swap_total_bytes: 512 * MIB,
                        swap_free_bytes: if full_swap { 0 } else { 256 * MIB },
                        psi_some_avg10: Some(psi as f64),
                        psi_some_total_us: Some(stall),
                        ..sample(t * 100, alloc, avail)
                    },
                    full_swap,
                    event,
                    launched: None,
                    ends: t % 331 == 0,
                }
            })
            .collect();
        let mut steps = steps;
        for i in 0..steps.len().saturating_sub(3) {
            if let Some((EventKind::Launch, app)) = steps[i].event {
                steps[i + 3].launched = Some(app);
            }
        }
        let same = |a: &Step, b: &Step| {
            DomainSample {
                now_ms: 0,
                ..a.sample
            } == DomainSample {
                now_ms: 0,
                ..b.sample
            } && a.full_swap == b.full_swap
                && b.event.is_none()
                && b.launched.is_none()
                && !b.ends
        };
        let conf = || {
            let mut c = cfg(policy);
            c.auto_low_memory = auto;
            c.auto_alloc_threshold = auto;
            c
        };
        let mut full = sched(conf());
        let mut lean = sched(conf());
        let (mut rf, mut rl) = (Recorder::default(), Recorder::default());
        let (mut df, mut dl) = (Vec::new(), Vec::new());
        let mut alive: Vec<(u32, &str)> = Vec::new();
        let mut next_pid = 100;
        let (mut changed, mut listed) = (true, false);
        let (mut quiet, mut taken, mut given) = (0, 0, 0);
        let mut lean_until = 0;
        let mut calls_seen = 0;
        for (i, step) in steps.iter().enumerate() {
            let now = step.sample.now_ms;
            if let Some(app) = step.launched {
                for (s, r) in [(&mut full, &mut rf), (&mut lean, &mut rl)] {
                    s.notify(EventKind::Launched, app, None, now, r).unwrap();
                }
            }
            if let Some((e, app)) = step.event {
                if !alive.iter().any(|(_, a)| *a == app) {
                    next_pid += 1;
                    alive.push((next_pid, app));
                    changed = true;
                }
                for (s, r) in [(&mut full, &mut rf), (&mut lean, &mut rl)] {
                    s.notify(e, app, None, now, r).unwrap();
                }
            }
            if step.ends && alive.len() > 1 {
                alive.remove(0);
                changed = true;
            }
            rf.page_out_full = step.full_swap;
            rl.page_out_full = step.full_swap;
            let s = &step.sample;
            let procs: Vec<ProcInfo> = alive
                .iter()
                .map(|&(pid, app)| proc_(pid, app, 100 + (i as u64 / 50) % 7))
                .collect();
            // Every tick in full.
            let p: &[ProcInfo] = if full.wants_procs(s) { &procs } else { &[] };
            full.tick(s, now, p, &mut rf);
            df.extend(full.take_decisions());
            // The stretch from here on with this sample, taken at once
            // while quiet; then this tick without the list where the
            // scheduler takes it so; else in full.
            if i >= lean_until {
                let stretch = i > 0
                    && !changed
                    && listed == (lean.mode() != ReclaimMode::Normal)
                    && same(&steps[i - 1], step);
                let k = if stretch {
                    let times: Vec<u64> = steps[i..]
                        .iter()
                        .take_while(|b| same(step, b))
                        .map(|b| b.sample.now_ms)
                        .collect();
                    lean.quiet_ticks(s, &times, &mut rl)
                } else {
                    0
                };
                quiet += k;
                lean_until = i + k;
                if k == 0 {
                    if !changed
                        && listed == (lean.mode() != ReclaimMode::Normal)
                        && lean.tick_same_procs(s, now, &mut rl)
                    {
                        taken += 1;
                    } else {
                        listed = lean.wants_procs(s);
                        let p: &[ProcInfo] = if listed { &procs } else { &[] };
                        lean.tick(s, now, p, &mut rl);
                        changed = false;
                        given += 1;
                    }
                }
                dl.extend(lean.take_decisions());
            }
            // A killed process is gone from the next tick on.
            for c in &rf.calls[calls_seen..] {
                if let Call::Kill { pid, .. } = c {
                    alive.retain(|&(p, _)| p != *pid);
                    changed = true;
                }
            }
            calls_seen = rf.calls.len();
        }
        assert_eq!(df, dl, "{policy}: decisions");
        assert_eq!(rf.calls, rl.calls, "{policy}: mechanism calls");
        assert_eq!(full.stats, lean.stats, "{policy}: counts");
        assert_eq!(full.mode(), lean.mode(), "{policy}: mode");
        if auto {
            // The launches' rates were measured and the sizing derived.
            assert!(
                full.apps.values().any(|a| a.launch_rate_pages.is_some()),
                "no launch rate measured"
            );
            assert_eq!(full.launch_needs(), lean.launch_needs(), "launch needs");
        }
        if policy == "appflow" && !auto {
            let count = |f: fn(&Call) -> bool| rf.calls.iter().filter(|c| f(c)).count();
            let page_outs = count(|c| matches!(c, Call::PageOut { .. }));
            let kills = count(|c| matches!(c, Call::Kill { .. }));
            let switches = full.stats.switches_total();
            assert!(
                page_outs > 10 && kills > 0 && switches > 10 && quiet > 100,
                "{page_outs} page-outs, {kills} kills, {switches} mode switches, {quiet} quiet"
            );
        }
        // Every way was taken (PMR's page-out wants the list whenever
        // less than δ is available, which is most of this run).
        assert!(
            taken > 10 && given > 10,
            "{policy}: {quiet} quiet, {taken} taken, {given} given"
        );
    }
}

fn desktop_proc(pid: u32, app: Option<&str>, idle_ms: Option<u64>) -> ProcInfo {
    ProcInfo {
        pid,
        start_time: pid as u64,
        comm: format!("p{pid}"),
        app: app.map(str::to_string),
        oom_score_adj: 0,
        footprint_bytes: Some(300 * MIB),
        idle_ms,
        ..Default::default()
    }
}

fn paged_out(r: &Recorder) -> Vec<u32> {
    r.calls
        .iter()
        .filter_map(|c| match c {
            Call::PageOut { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect()
}

/// Calm ticks with memory far below M_F for 12 s: past a time-out of an
/// earlier rebalancing and its cool-down, a rebalancing runs.
fn rebalance_ticks(s: &mut Scheduler, r: &mut Recorder, procs: &[ProcInfo], from: u64) {
    for t in 0..120 {
        let mut low = sample(from + t * 100, 0, 20);
        low.anon_bytes = 900 * MIB;
        s.tick(&low, 0, procs, r);
    }
}

#[test]
fn idle_processes_of_no_app_are_paged_out_active_ones_are_not() {
    // A desktop: every process has adj 0 and no launcher speaks. Before,
    // nothing was background, so rebalancing paged nothing out.
    let mut s = sched(cfg("appflow-amr"));
    let mut r = Recorder::default();
    let procs = [
        desktop_proc(60, None, Some(IDLE_BACKGROUND_MS)),
        desktop_proc(61, None, Some(IDLE_BACKGROUND_MS - 1)),
        desktop_proc(62, None, None),
        desktop_proc(63, Some("b"), Some(60_000)),
    ];
    // Apps first (b, least recently used), then idle processes of no app.
    assert_eq!(s.background_app_pids(&procs), vec![63, 60]);
    rebalance_ticks(&mut s, &mut r, &procs, 0);
    assert!(paged_out(&r).contains(&63));
}

#[test]
fn notify_background_makes_an_app_pageable_whatever_its_adj() {
    let mut s = sched(cfg("appflow-amr"));
    let mut r = Recorder::default();
    // Active (not idle) processes of app b with adj 0.
    let procs = [desktop_proc(70, Some("b"), None)];
    rebalance_ticks(&mut s, &mut r, &procs, 0);
    assert!(paged_out(&r).is_empty(), "in front by its adj");
    s.notify(EventKind::Background, "b", None, 5000, &mut r)
        .unwrap();
    r.calls.clear();
    rebalance_ticks(&mut s, &mut r, &procs, 20_000);
    assert!(paged_out(&r).contains(&70));
    // Foreground again: no longer pageable.
    s.notify(EventKind::Foreground, "b", None, 40_000, &mut r)
        .unwrap();
    r.calls.clear();
    rebalance_ticks(&mut s, &mut r, &procs, 60_000);
    assert!(!paged_out(&r).contains(&70));
}

#[test]
fn an_idle_app_with_adj_zero_is_paged_out_but_never_a_kill_candidate() {
    let s = sched(cfg("appflow"));
    let idle = desktop_proc(80, Some("b"), Some(3_600_000));
    assert!(
        s.is_foreground_proc(&idle),
        "activity alone never makes a kill candidate"
    );
    assert!(s.is_pageable_with(&idle, s.apps.get("b")));
}

#[test]
fn a_launching_app_is_never_paged_out() {
    let mut s = sched(cfg("appflow-amr"));
    let mut r = Recorder::default();
    s.notify(EventKind::Launch, "a", id(90), 0, &mut r).unwrap();
    let procs = [desktop_proc(90, Some("a"), Some(60_000))];
    rebalance_ticks(&mut s, &mut r, &procs, 100);
    assert!(!paged_out(&r).contains(&90));
}

#[test]
fn auto_sizing_takes_m_f_from_the_largest_launch_and_n_alloc_from_the_slowest() {
    let mut c = cfg("appflow-amr");
    c.auto_low_memory = true;
    c.auto_alloc_threshold = true;
    let mut s = Scheduler::new(c, curve(), &[], &[]);
    let mut big = profile("big", 10, 4, 600);
    big.anon_launch_bytes = 400 * MIB;
    big.last_launch_ms = 2000;
    let mut small = profile("small", 20, 0, 50);
    small.anon_launch_bytes = 20 * MIB;
    small.last_launch_ms = 1000;
    s.set_profiles(vec![big.clone(), small.clone()]);
    let total = 1024 * MIB;
    let rc = s.reclaim_config(total);
    // The largest need above the killer's floor (5 % of the domain).
    let floor = (0.05 * total as f64) as u64;
    assert_eq!(rc.low_memory_bytes, 400 * MIB + big.file_bytes() + floor);
    let small_rate = (20 * MIB + small.file_bytes()) as f64 / 4096.0 / 10.0;
    assert_eq!(rc.alloc_threshold_pages, (small_rate / 2.0).floor() as u64);
    // Fixed sizing leaves the configuration alone.
    let mut f = Scheduler::new(cfg("appflow-amr"), curve(), &[], &[]);
    f.set_profiles(vec![big, small]);
    assert_eq!(f.reclaim_config(total), f.config().reclaim);
}

#[test]
fn a_measured_launch_rate_replaces_the_profile_estimate() {
    let mut c = cfg("appflow-amr");
    c.auto_alloc_threshold = true;
    let mut s = Scheduler::new(c, curve(), &[], &[]);
    let mut p = profile("a", 10, 1, 100);
    p.anon_launch_bytes = 100 * MIB;
    p.last_launch_ms = 1000;
    s.set_profiles(vec![p]);
    let mut r = Recorder::default();
    s.tick(&sample(0, 0, 800), 0, &[], &mut r);
    s.notify(EventKind::Launch, "a", id(42), 0, &mut r).unwrap();
    // Four ticks of 6,000 pages each.
    for t in 1..=4 {
        s.tick(&sample(t * 100, t * 6000, 800), 0, &[], &mut r);
    }
    s.notify(EventKind::Launched, "a", id(42), 450, &mut r)
        .unwrap();
    assert_eq!(s.reclaim_config(1024 * MIB).alloc_threshold_pages, 3000);
}

#[test]
fn no_standby_set_takes_the_room_the_likeliest_next_launch_needs() {
    // A 768 MiB office domain took 85.8 MB of an ML app's standby set, then
    // had no room to stream office's own launch. Office is launched daily
    // here, the ML app never: office's need is kept free.
    let mut office = profile("office", 40, 2, 100);
    office.anon_launch_bytes = 150 * MIB;
    office.launch_times_unix_ms = (1..=5).map(|d| d * 86_400_000).collect();
    let ml = profile("ml", 200, 2, 500);
    let need = office.anon_launch_bytes + office.file_bytes();
    let loads = |avail_mib: u64| -> Vec<String> {
        let mut s = Scheduler::new(cfg("appflow"), curve(), &[], &[]);
        s.set_profiles(vec![office.clone(), ml.clone()]);
        let mut r = Recorder::default();
        let mut smp = sample(0, 0, avail_mib);
        smp.total_bytes = 768 * MIB;
        s.reclaim_step(&smp, &[], &mut r);
        s.preload_step(0, 6 * 86_400_000, &mut r);
        r.calls
            .iter()
            .filter_map(|c| match c {
                Call::Load { app, .. } => Some(app.clone()),
                _ => None,
            })
            .collect()
    };
    // Room (above the 5 % floor) for the ML app's set, but not for it and
    // office's launch.
    let tight = need / 2 / MIB + 39;
    let l = loads(tight);
    assert!(!l.contains(&"ml".to_string()), "{l:?}");
    // Ample room: both sets are held.
    let l = loads(700);
    assert!(
        l.contains(&"ml".to_string()) && l.contains(&"office".to_string()),
        "{l:?}"
    );
}
