//! Fleet evaluation: one call simulates a batch of users on one device
//! under several policies and returns one row per user × policy, and on
//! request one row per launch. The CLI's `--per-user FILE` and the Python
//! package (`crates/py`, docs/python.md) both go through [`run_users`].
//!
//! **Each user is independent here**: a fresh device and a fresh scheduler
//! per user and policy, with the apps of that user's own trace installed,
//! so a user's row depends on its own events, the device, the policy and
//! the seed only. That is what lets a sweep cut users into chunks on
//! threads or on Ray tasks and still produce the same table, byte for
//! byte. (The CLI's summary over a multi-user trace replays the users one
//! after the other on one device, which carries some state from user to
//! user, docs/sim.md "Many users"; for a one-user trace the two agree
//! exactly.)

use crate::catalog::{AppClass, AppModel};
use crate::device::Device;
use crate::engine::{LaunchKind, SimConfig};
use crate::policy::Policy;
use crate::trace::TraceEvent;
use crate::workload::{self, UserGroups, Workload};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// One user's events, in trace order.
#[derive(Debug, Clone, PartialEq)]
pub struct UserTrace {
    /// The user id.
    pub user: String,
    /// Its events.
    pub events: Vec<TraceEvent>,
}

/// Splits a trace into users, in order of first appearance.
pub fn split_users(events: Vec<TraceEvent>) -> Vec<UserTrace> {
    let groups = UserGroups::new(&events);
    let mut slots: Vec<Option<TraceEvent>> = events.into_iter().map(Some).collect();
    (0..groups.len())
        .map(|u| {
            let evs: Vec<TraceEvent> = groups
                .user(u)
                .iter()
                .map(|&i| slots[i].take().expect("each event belongs to one user"))
                .collect();
            UserTrace {
                user: evs[0].user.clone(),
                events: evs,
            }
        })
        .collect()
}

/// What a batch runs on.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The device.
    pub device: &'a Device,
    /// The policies, each run on every user.
    pub policies: &'a [Policy],
    /// The run's configuration (its seed included).
    pub cfg: &'a SimConfig,
    /// The app models (the catalogue the traces name).
    pub models: &'a [AppModel],
    /// Also return one row per launch.
    pub launches: bool,
    /// Worker threads (0: one per core).
    pub threads: usize,
}

/// One user under one policy: the summary's fields, kills, GB-scale cold
/// relaunches and the scheduler's decision counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserRow {
    /// User id.
    pub user: String,
    /// Device name.
    pub device: String,
    /// Policy name (as asked).
    pub policy: String,
    /// Seed of the run.
    pub seed: u64,
    /// Days between the user's first and last event.
    pub days: f64,
    /// App switches (every launch, cold, warm or hot).
    pub launches: u64,
    /// Cold launches.
    pub cold_launches: u64,
    /// Warm launches (process alive, pages partly gone).
    pub warm_launches: u64,
    /// Hot launches.
    pub hot_launches: u64,
    /// Cold-launch latency, mean, ms.
    pub cold_mean_ms: f64,
    /// Cold-launch latency, median, ms.
    pub cold_p50_ms: f64,
    /// Cold-launch latency, 90th percentile, ms.
    pub cold_p90_ms: f64,
    /// Mean latency over all launches, ms.
    pub launch_mean_ms: f64,
    /// Share of launches under 1 s.
    pub under_1s_share: f64,
    /// Cold launches of apps killed earlier.
    pub cold_relaunches: u64,
    /// Of which GB-scale apps (the `--compare-paper` row).
    pub gb_scale_cold_relaunches: u64,
    /// Cold launches of GB-scale apps.
    pub gb_scale_cold_launches: u64,
    /// Processes killed (by anyone).
    pub kills: u64,
    /// Of which by the kernel's OOM killer.
    pub oom_kills: u64,
    /// Background apps alive at the end.
    pub survivors: u64,
    /// Direct reclaim batches.
    pub direct_reclaims: u64,
    /// Time launching apps spent in direct reclaim, ms.
    pub direct_reclaim_stall_ms: f64,
    /// Re-faulted pages over evicted pages.
    pub refault_ratio: f64,
    /// Peak bytes of the before-launch standby set.
    pub preload_bytes_peak: u64,
    /// Reclaim-mode switches of the scheduler (AMR).
    pub amr_mode_switches: u64,
    /// Changes of kswapd's step by the scheduler (re-fault policy).
    pub reclaim_step_changes: u64,
    /// Switches prepaged (ASAP).
    pub prepage_switches: u64,
    /// Launches cut off by the safety limit (should stay 0).
    pub stuck_launches: u64,
}

/// One launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchRow {
    /// User id.
    pub user: String,
    /// Device name.
    pub device: String,
    /// Policy name.
    pub policy: String,
    /// Seed.
    pub seed: u64,
    /// Simulated time of the launch since the user's first event, ms.
    pub at_ms: f64,
    /// App name.
    pub app: String,
    /// Whether the app is GB-scale.
    pub gb_scale: bool,
    /// cold, warm or hot.
    pub kind: &'static str,
    /// A cold launch of an app killed earlier.
    pub relaunch_after_kill: bool,
    /// Latency, ms.
    pub latency_ms: f64,
}

/// What a batch produced: rows user-major, policies in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchResult {
    /// One row per user × policy.
    pub users: Vec<UserRow>,
    /// One row per launch (empty unless asked for).
    pub launches: Vec<LaunchRow>,
}

/// The batch was cancelled (e.g. Ctrl-C in Python) before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// Runs `f(0..n)` on `threads` threads (0: one per core), results in index
/// order whatever the timing. Stops taking new indices once `cancel` is set.
pub fn par_map<T: Send>(
    n: usize,
    threads: usize,
    cancel: Option<&AtomicBool>,
    f: &(dyn Fn(usize) -> T + Sync),
) -> Result<Vec<T>, Cancelled> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
    .clamp(1, n.max(1));
    let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                if cancelled() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let r = f(i);
                done.lock()
                    .expect("no panics while holding the lock")
                    .push((i, r));
            });
        }
    });
    if cancelled() {
        return Err(Cancelled);
    }
    let mut done = done.into_inner().expect("threads joined");
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, r)| r).collect())
}

/// Simulates every user under every policy of `b`, each on a fresh device.
/// Stops early with [`Cancelled`] when `cancel` is set.
pub fn run_users(
    b: &Batch,
    users: &[UserTrace],
    cancel: Option<&AtomicBool>,
) -> Result<BatchResult, Cancelled> {
    let np = b.policies.len();
    let rows = par_map(users.len() * np, b.threads, cancel, &|job| {
        run_one(b, &users[job / np], b.policies[job % np])
    })?;
    let mut out = BatchResult::default();
    for (row, launches) in rows {
        out.users.push(row);
        out.launches.extend(launches);
    }
    Ok(out)
}

fn run_one(b: &Batch, u: &UserTrace, pol: Policy) -> (UserRow, Vec<LaunchRow>) {
    let w = Workload::Trace {
        events: u.events.clone(),
    };
    let o = workload::run_policy(b.device, pol, b.cfg, b.models, &w, &|| {});
    let r = workload::policy_result(&pol, &w, b.models, &o);
    let count = |k: LaunchKind| o.measured.iter().filter(|l| l.kind == k).count() as u64;
    let extra_u64 = |k: &str| r.extra.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let extra_f64 = |k: &str| r.extra.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let c = &o.counters;
    let s = &r.summary;
    let row = UserRow {
        user: u.user.clone(),
        device: b.device.name.clone(),
        policy: pol.name.to_string(),
        seed: b.cfg.seed,
        days: extra_f64("days"),
        launches: s.launches,
        cold_launches: count(LaunchKind::Cold),
        warm_launches: count(LaunchKind::Warm),
        hot_launches: count(LaunchKind::Hot),
        cold_mean_ms: s.cold_launch_ms.mean,
        cold_p50_ms: s.cold_launch_ms.p50,
        cold_p90_ms: s.cold_launch_ms.p90,
        launch_mean_ms: extra_f64("launch_ms_mean_all"),
        under_1s_share: s.under_1s_share,
        cold_relaunches: s.cold_relaunches,
        gb_scale_cold_relaunches: extra_u64("gb_scale_cold_relaunches"),
        gb_scale_cold_launches: extra_u64("gb_scale_cold_launches"),
        kills: s.kills,
        oom_kills: c.oom_kills,
        survivors: s.survivors,
        direct_reclaims: s.direct_reclaims,
        direct_reclaim_stall_ms: extra_f64("direct_reclaim_stall_ms_total"),
        refault_ratio: s.refault_ratio,
        preload_bytes_peak: s.preload_bytes_peak,
        amr_mode_switches: c.amr_switches,
        reclaim_step_changes: c.reclaim_step_changes,
        prepage_switches: c.prepage.map_or(0, |p| p.switches),
        stuck_launches: c.stuck_launches,
    };
    let launches = if b.launches {
        let t0 = o.measured.first().map_or(0, |l| l.at_us);
        o.measured
            .iter()
            .map(|l| LaunchRow {
                user: u.user.clone(),
                device: b.device.name.clone(),
                policy: pol.name.to_string(),
                seed: b.cfg.seed,
                at_ms: (l.at_us - t0) as f64 / 1000.0,
                app: b.models[l.app].spec.name.clone(),
                gb_scale: b.models[l.app].spec.class == AppClass::GbScale,
                kind: match l.kind {
                    LaunchKind::Cold => "cold",
                    LaunchKind::Warm => "warm",
                    LaunchKind::Hot => "hot",
                },
                relaunch_after_kill: l.relaunch_after_kill,
                latency_ms: l.latency_ms,
            })
            .collect()
    } else {
        Vec::new()
    };
    (row, launches)
}

/// Rows as CSV text with a header.
pub fn to_csv<T: Serialize>(rows: &[T]) -> Result<String, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).map_err(|e| e.to_string())?;
    }
    let bytes = w.into_inner().map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{catalogue, model};
    use crate::policy;

    fn small() -> Vec<UserTrace> {
        let text = "user,timestamp,app,event\n\
                    a,1000,TikTok,open\na,61000,WhatsApp,open\na,121000,TikTok,open\na,181000,TikTok,close\n\
                    b,1000,PUBG,open\nb,9000,Gmail,open\nb,90000,PUBG,open\nb,95000,PUBG,close\n";
        split_users(crate::trace::parse(text, "t", &catalogue()).unwrap())
    }

    #[test]
    fn rows_do_not_depend_on_threads_chunks_or_order() {
        let models: Vec<AppModel> = catalogue().iter().map(model).collect();
        let dev = crate::device::device("pixel8-6gb").unwrap();
        let pols = policy::parse_list("android,appflow").unwrap();
        let cfg = SimConfig::with_seed(1);
        let users = small();
        assert_eq!(users.len(), 2);
        let b = Batch {
            device: &dev,
            policies: &pols,
            cfg: &cfg,
            models: &models,
            launches: true,
            threads: 1,
        };
        let one = run_users(&b, &users, None).unwrap();
        assert_eq!(one.users.len(), 4);
        assert_eq!(
            one.users
                .iter()
                .map(|r| (r.user.as_str(), r.policy.as_str()))
                .collect::<Vec<_>>(),
            [
                ("a", "android"),
                ("a", "appflow"),
                ("b", "android"),
                ("b", "appflow")
            ]
        );
        assert_eq!(
            one.launches
                .iter()
                .filter(|l| l.user == "a" && l.policy == "android")
                .count() as u64,
            one.users[0].launches
        );
        let two = run_users(&Batch { threads: 2, ..b }, &users, None).unwrap();
        assert_eq!(one, two);
        // User b alone gives b's rows.
        let b_only = run_users(&b, &users[1..], None).unwrap();
        assert_eq!(b_only.users[..], one.users[2..]);
        let cancel = AtomicBool::new(true);
        assert_eq!(run_users(&b, &users, Some(&cancel)), Err(Cancelled));
        let csv = to_csv(&one.users).unwrap();
        assert!(
            csv.starts_with("user,device,policy,seed,days,launches,"),
            "{csv}"
        );
        assert_eq!(csv.lines().count(), 5);
    }
}
