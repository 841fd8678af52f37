//! Workloads (the AppFlow paper §6.1-§6.3, §6.6) and the report they produce.
//!
//! * `low` / `medium` / `high`: for each target GB-scale app, the device
//!   is reset (apps killed, caches cleared), the background load is
//!   launched app by app (each used for 5 s), the user goes home, the load
//!   settles for 30 s, then the target is cold-launched and measured. Low =
//!   5 low-memory apps; medium = 15; high = 15 low-memory + the two GB-scale
//!   apps that follow the target in the §6.2 list.
//! * `multitask` (§6.3): 15 low-memory apps + TikTok + Snow, each launched
//!   twice (10 s of use each); the second round is measured.
//! * `trace`: replay of an app-usage trace, each user on a fresh device.
//! * `none`: a scenario with no background app (the Fig. 4 reference).

use crate::catalog::{AppClass, AppModel, GB_SCALE_APPS, LOW_APPS};
use crate::device::Device;
use crate::engine::{Counters, LaunchKind, LaunchRecord, Sim, SimConfig};
use crate::policy::Policy;
use crate::trace::{EventKind, TraceEvent};
use appflow_core::report::{round3, AppResult, LatencyStats, PolicyResult, Summary};
use appflow_core::{InputError, PAGE_BYTES};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Names of the workloads.
pub const WORKLOAD_NAMES: [&str; 6] = ["none", "low", "medium", "high", "multitask", "trace"];

/// Background load of the §6.1 scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// No background app (the Fig. 4 reference: >2 GB free).
    None,
    /// 5 low-memory apps.
    Low,
    /// 15 low-memory apps.
    Medium,
    /// 15 low-memory apps + 2 GB-scale apps.
    High,
}

/// A workload, resolved to app indices.
#[derive(Debug, Clone)]
pub enum Workload {
    /// A §6.1 scenario over these target apps.
    Scenario {
        /// The load.
        load: Load,
        /// Target app indices.
        targets: Vec<usize>,
        /// Background apps of each target, in launch order (parallel to `targets`).
        background: Vec<Vec<usize>>,
        /// Use time after each background launch, µs.
        use_us: u64,
        /// Settling time before the target launch, µs.
        settle_us: u64,
    },
    /// §6.3 multitask rounds over these apps (in launch order).
    Multitask {
        /// App indices.
        apps: Vec<usize>,
        /// Use time after each launch, µs.
        use_us: u64,
        /// Rounds over the apps; every round after the first is measured
        /// (§6.3: 2).
        rounds: u32,
    },
    /// Trace replay.
    Trace {
        /// Events, in file order.
        events: Vec<TraceEvent>,
    },
}

/// A day of simulated time, µs.
const DAY_US: u64 = 86_400_000_000;

/// Time an app is used after each scenario launch, µs.
pub const SCENARIO_USE_US: u64 = 5_000_000;
/// Settling time before the target launch (§6.1 "once the load is established"), µs.
pub const SETTLE_US: u64 = 30_000_000;
/// Use time of each multitask launch, µs.
pub const MULTITASK_USE_US: u64 = 10_000_000;
/// Rounds of the multitask workload: §6.3 launches each app twice and
/// measures the second round.
pub const MULTITASK_ROUNDS: u32 = 2;
/// Most rounds `--multitask-rounds` accepts.
pub const MAX_MULTITASK_ROUNDS: u32 = 20;

/// Which apps the workloads use and how long they wait: the §6.1/§6.3
/// lists of the built-in catalogue, or those of an apps file.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// GB-scale apps in order: `high` adds the two that follow the target
    /// (cyclically) to the background.
    pub gb: Vec<String>,
    /// Low-memory apps in order: `low` uses the first 5, `medium` and
    /// `high` the first 15.
    pub low: Vec<String>,
    /// Default targets of low/medium/high.
    pub targets: Vec<String>,
    /// Explicit background lists (launch order) of low, medium, high; when
    /// set they replace the rule above (the target itself is skipped).
    pub background: [Option<Vec<String>>; 3],
    /// Multitask launch order.
    pub multitask: Vec<String>,
    /// Use time after each background launch, µs.
    pub use_us: u64,
    /// Settling time before the target launch, µs.
    pub settle_us: u64,
    /// Use time after each multitask launch, µs.
    pub multitask_use_us: u64,
    /// Rounds of the multitask workload (every round after the first is
    /// measured).
    pub multitask_rounds: u32,
}

impl Setup {
    /// The built-in catalogue's lists (§6.1, §6.2, §6.3): TikTok and Snow
    /// among the low-memory apps of the multitask sequence (§6.3).
    pub fn builtin() -> Self {
        let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Self::with_lists(
            names(&GB_SCALE_APPS),
            names(&LOW_APPS),
            &names(&["TikTok", "Snow"]),
        )
    }

    /// Lists derived from the classes of a custom catalogue (file order):
    /// targets = every GB-scale app; multitask = the low-memory apps with
    /// the first two GB-scale apps at positions 5 and 11 (like §6.3).
    pub fn from_classes(models: &[AppModel]) -> Self {
        let of = |c: AppClass| -> Vec<String> {
            models
                .iter()
                .filter(|m| m.spec.class == c)
                .map(|m| m.spec.name.clone())
                .collect()
        };
        let gb = of(AppClass::GbScale);
        let first_two: Vec<String> = gb.iter().take(2).cloned().collect();
        Self::with_lists(gb, of(AppClass::Low), &first_two)
    }

    /// Targets = the GB-scale apps; multitask = the low-memory apps with
    /// `multitask_gb` inserted at positions 5 and 11.
    fn with_lists(gb: Vec<String>, low: Vec<String>, multitask_gb: &[String]) -> Self {
        let mut multitask = low.clone();
        for (pos, g) in [5usize, 11].into_iter().zip(multitask_gb) {
            multitask.insert(pos.min(multitask.len()), g.clone());
        }
        Self {
            targets: gb.clone(),
            gb,
            low,
            background: [None, None, None],
            multitask,
            use_us: SCENARIO_USE_US,
            settle_us: SETTLE_US,
            multitask_use_us: MULTITASK_USE_US,
            multitask_rounds: MULTITASK_ROUNDS,
        }
    }

    /// The background apps of a scenario for `target`, in launch order.
    pub fn background_for(&self, load: Load, target: &str) -> Vec<String> {
        let slot = match load {
            Load::None => return Vec::new(),
            Load::Low => 0,
            Load::Medium => 1,
            Load::High => 2,
        };
        if let Some(list) = &self.background[slot] {
            return list.iter().filter(|n| *n != target).cloned().collect();
        }
        let n_low = if load == Load::Low { 5 } else { 15 };
        let mut v: Vec<String> = self
            .low
            .iter()
            .filter(|n| *n != target)
            .take(n_low)
            .cloned()
            .collect();
        if load == Load::High && !self.gb.is_empty() {
            let p = self.gb.iter().position(|n| n == target).unwrap_or(0);
            for d in 1..=2 {
                let g = &self.gb[(p + d) % self.gb.len()];
                if g != target && !v.contains(g) {
                    v.push(g.clone());
                }
            }
        }
        v
    }
}

/// The model index of every event's app (one hash lookup per event, not a
/// walk of the catalogue).
fn app_indices(models: &[AppModel], events: &[TraceEvent]) -> Vec<usize> {
    let by_name: std::collections::HashMap<&str, usize> = models
        .iter()
        .enumerate()
        .map(|(i, m)| (m.spec.name.as_str(), i))
        .collect();
    events
        .iter()
        .map(|e| {
            *by_name
                .get(e.app.as_str())
                .unwrap_or_else(|| panic!("{} is in the catalogue", e.app))
        })
        .collect()
}

fn find(models: &[AppModel], name: &str, what: &str) -> Result<usize, InputError> {
    models
        .iter()
        .position(|m| m.spec.name == name)
        .ok_or_else(|| {
            InputError::new(format!(
                "{what}: unknown app {name:?}; valid apps: {}",
                models
                    .iter()
                    .map(|m| m.spec.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

impl Workload {
    /// Resolves a workload name over the built-in catalogue's lists.
    /// `targets` restricts the scenario targets (default: the eight
    /// GB-scale apps of §6.2).
    pub fn resolve(
        name: &str,
        models: &[AppModel],
        targets: &[String],
        trace: Option<Vec<TraceEvent>>,
    ) -> Result<Workload, InputError> {
        Self::resolve_with(name, models, targets, trace, &Setup::builtin())
    }

    /// Resolves a workload name with the lists and times of `setup`.
    pub fn resolve_with(
        name: &str,
        models: &[AppModel],
        targets: &[String],
        trace: Option<Vec<TraceEvent>>,
        setup: &Setup,
    ) -> Result<Workload, InputError> {
        let load = match name {
            "none" => Some(Load::None),
            "low" => Some(Load::Low),
            "medium" => Some(Load::Medium),
            "high" => Some(Load::High),
            _ => None,
        };
        if let Some(load) = load {
            let mut t = Vec::new();
            if targets.is_empty() {
                if setup.targets.is_empty() {
                    return Err(InputError::new(
                        "the app set has no GB-scale app to cold-launch (class = \"gb\")",
                    ));
                }
                for n in &setup.targets {
                    t.push(find(models, n, "workload target")?);
                }
            } else {
                for n in targets {
                    let i = models
                        .iter()
                        .position(|m| &m.spec.name == n)
                        .ok_or_else(|| {
                            InputError::new(format!(
                                "unknown target app {n:?}; valid targets: {}",
                                setup.gb.join(", ")
                            ))
                        })?;
                    if models[i].spec.class != AppClass::GbScale {
                        return Err(InputError::new(format!(
                            "target {n:?} is not a GB-scale app; valid targets: {}",
                            setup.gb.join(", ")
                        )));
                    }
                    t.push(i);
                }
            }
            let mut background = Vec::new();
            for &ti in &t {
                let bg = setup.background_for(load, &models[ti].spec.name);
                let bg = bg
                    .iter()
                    .map(|n| find(models, n, "background app"))
                    .collect::<Result<Vec<_>, _>>()?;
                background.push(bg);
            }
            return Ok(Workload::Scenario {
                load,
                targets: t,
                background,
                use_us: setup.use_us,
                settle_us: setup.settle_us,
            });
        }
        match name {
            "multitask" => {
                if setup.multitask.is_empty() {
                    return Err(InputError::new(
                        "the multitask list of the app set is empty",
                    ));
                }
                let apps = setup
                    .multitask
                    .iter()
                    .map(|n| find(models, n, "multitask app"))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Workload::Multitask {
                    apps,
                    use_us: setup.multitask_use_us,
                    rounds: setup.multitask_rounds,
                })
            }
            "trace" => match trace {
                Some(events) if !events.is_empty() => {
                    check_trace_clock(&events)?;
                    Ok(Workload::Trace { events })
                }
                _ => Err(InputError::new(
                    "workload trace needs --trace FILE (a CSV/TSV trace, see docs/sim.md)",
                )),
            },
            _ => Err(InputError::new(format!(
                "unknown workload {name:?}; valid workloads: {}",
                WORKLOAD_NAMES.join(", ")
            ))),
        }
    }

    /// Units of work (for the progress bar).
    pub fn units(&self) -> u64 {
        match self {
            Workload::Scenario { targets, .. } => targets.len() as u64,
            Workload::Multitask { apps, rounds, .. } => u64::from(*rounds) * apps.len() as u64,
            Workload::Trace { events } => events.len() as u64,
        }
    }

    /// Apps the workload uses (the preloader plans over their profiles).
    pub fn installed(&self, models: &[AppModel]) -> Vec<bool> {
        let mut v = vec![false; models.len()];
        match self {
            Workload::Scenario {
                targets,
                background,
                ..
            } => {
                for (&t, bg) in targets.iter().zip(background) {
                    v[t] = true;
                    for &b in bg {
                        v[b] = true;
                    }
                }
            }
            Workload::Multitask { apps, .. } => apps.iter().for_each(|&a| v[a] = true),
            Workload::Trace { events } => {
                for a in app_indices(models, events) {
                    v[a] = true;
                }
            }
        }
        v
    }
}

/// What one policy's run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The measured launches (targets, second multitask round, or all trace launches).
    pub measured: Vec<LaunchRecord>,
    /// Counters over the whole run.
    pub counters: Counters,
    /// Direct reclaims during the measured launches.
    pub measured_direct_reclaims: u64,
    /// Kills during the measured launches.
    pub measured_kills: u64,
    /// Background apps alive after each measured unit (scenario) or at the end.
    pub survivors: u64,
    /// Apps killed and not relaunched by the end (scenarios: lost background apps).
    pub lost_background: u64,
    /// Simulated days (trace).
    pub days: f64,
    /// Chosen cutoffs (SFP), app → cutoff bytes.
    pub cutoffs: BTreeMap<String, u64>,
    /// Internal check failures (accounting), if any.
    pub check_errors: Vec<String>,
}

/// Runs one policy over a workload. `tick` is called after each unit.
pub fn run_policy(
    dev: &Device,
    pol: Policy,
    cfg: &SimConfig,
    models: &[AppModel],
    w: &Workload,
    tick: &(dyn Fn() + Sync),
) -> Outcome {
    let installed = w.installed(models);
    let mut sim = Sim::new(dev, pol, cfg, models, &installed);
    let mut out = Outcome {
        measured: Vec::new(),
        counters: Counters::default(),
        measured_direct_reclaims: 0,
        measured_kills: 0,
        survivors: 0,
        lost_background: 0,
        days: 0.0,
        cutoffs: BTreeMap::new(),
        check_errors: Vec::new(),
    };
    if let Some(plan) = sim.sfp_plan() {
        for a in &plan.apps {
            out.cutoffs.insert(a.app.clone(), a.chosen.cutoff_bytes);
        }
    }
    let check = |sim: &Sim, out: &mut Outcome| {
        if let Err(e) = sim.check_accounting() {
            if out.check_errors.len() < 5 {
                out.check_errors.push(e);
            }
        }
    };
    match w {
        Workload::Scenario {
            targets,
            background,
            use_us,
            settle_us,
            ..
        } => {
            for (&t, bg) in targets.iter().zip(background) {
                sim.reset();
                // Preloading (if any) refills during the first idle period.
                sim.idle(1_000_000);
                for &b in bg {
                    sim.launch(b);
                    sim.idle(*use_us);
                }
                sim.go_home();
                sim.idle(*settle_us);
                let (dr, k) = (sim.counters.direct_reclaims, sim.counters.kills);
                let rec = sim.launch(t);
                out.measured_direct_reclaims += sim.counters.direct_reclaims - dr;
                out.measured_kills += sim.counters.kills - k;
                out.measured.push(rec);
                let alive = bg.iter().filter(|&&b| sim.alive(b)).count() as u64;
                out.survivors += alive;
                out.lost_background += bg.len() as u64 - alive;
                check(&sim, &mut out);
                tick();
            }
        }
        Workload::Multitask {
            apps,
            use_us,
            rounds,
        } => {
            sim.reset();
            sim.idle(1_000_000);
            for round in 0..*rounds {
                for &a in apps {
                    let (dr, k) = (sim.counters.direct_reclaims, sim.counters.kills);
                    let rec = sim.launch(a);
                    if round >= 1 {
                        out.measured_direct_reclaims += sim.counters.direct_reclaims - dr;
                        out.measured_kills += sim.counters.kills - k;
                        out.measured.push(rec);
                    }
                    sim.idle(*use_us);
                    check(&sim, &mut out);
                    tick();
                }
            }
            // Survivors: apps whose process was still alive when relaunched.
            out.survivors = out
                .measured
                .iter()
                .filter(|r| r.kind != LaunchKind::Cold)
                .count() as u64;
            // Relaunches that found their app gone (one per app and
            // measured round; with the paper's 2 rounds, the apps lost).
            out.lost_background = out.measured.len() as u64 - out.survivors;
        }
        Workload::Trace { events } => {
            let mut span_ms = 0u64;
            let app_of = app_indices(models, events);
            let groups = UserGroups::new(events);
            for u in 0..groups.len() {
                let evs = groups.user(u);
                sim.reset();
                let t0 = events[evs[0]].ts_ms;
                span_ms += events[evs[evs.len() - 1]].ts_ms - t0;
                let base = sim.now_us();
                for &i in evs {
                    let e = &events[i];
                    let at = base + (e.ts_ms - t0) * 1000;
                    if at > sim.now_us() {
                        sim.idle(at - sim.now_us());
                    }
                    let a = app_of[i];
                    match e.kind {
                        EventKind::Open => {
                            if !(sim.alive(a) && sim.foreground() == Some(a)) {
                                let rec = sim.launch(a);
                                out.measured.push(rec);
                            }
                        }
                        EventKind::Close | EventKind::Exit => sim.go_home(),
                    }
                    tick();
                }
                out.survivors += sim.alive_background();
                check(&sim, &mut out);
            }
            out.measured_direct_reclaims = sim.counters.direct_reclaims;
            out.measured_kills = sim.counters.kills;
            out.days = span_ms as f64 / 86_400_000.0;
        }
    }
    out.counters = sim.counters.clone();
    out
}

/// The most simulated time a trace replay may take, µs: half the
/// simulator's clock (a u64 of µs, about 292,000 years), so that the
/// replay's time, what its launches add to it and every timer set from it
/// stay far from overflow. Users are replayed one after another on one
/// clock, so the bound is on the sum of their spans. A real trace (a
/// million users over 100 days: 8.6 × 10^18 µs) fits; a timestamp near
/// u64::MAX ms does not, and is refused instead of replayed for ever.
pub const MAX_REPLAY_US: u64 = u64::MAX / 2;

/// The latest timestamp a trace may hold, Unix ms: `i64::MAX`, so that
/// every timestamp survives a trip through an Arrow int64 column (the
/// Python package's tables, Parquet, pandas) unchanged.
pub const MAX_TRACE_TS_MS: u64 = i64::MAX as u64;

/// Refuses a trace whose replay would not fit the simulator's clock
/// ([`MAX_REPLAY_US`]), whose user goes back in time (the replay counts
/// time forward from each user's first event), or with a timestamp past
/// [`MAX_TRACE_TS_MS`]. One pass, no replay. The CLI's trace workload and
/// the Python package's traces both call it.
pub fn check_trace_clock(events: &[TraceEvent]) -> Result<(), InputError> {
    let mut last_of: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    // The sum of the users' spans, counted as each user's clock moves on.
    let mut total_us: u64 = 0;
    for e in events {
        let last = last_of.entry(e.user.as_str()).or_insert(e.ts_ms);
        let Some(step_ms) = e.ts_ms.checked_sub(*last) else {
            return Err(InputError::new(format!(
                "trace: timestamp {} goes back in time for user {:?} (previous {last})",
                e.ts_ms, e.user
            )));
        };
        *last = e.ts_ms;
        total_us = match step_ms
            .checked_mul(1000)
            .and_then(|u| total_us.checked_add(u))
            .filter(|&t| t <= MAX_REPLAY_US)
        {
            Some(t) => t,
            None => {
                return Err(InputError::new(format!(
                    "trace: user {:?}'s event at {} ms takes the replay past the simulator's clock \
                     ({} ms, about {:.0} years, for all users' spans together; this one steps {step_ms} ms): \
                     timestamps are Unix milliseconds",
                    e.user,
                    e.ts_ms,
                    MAX_REPLAY_US / 1000,
                    MAX_REPLAY_US as f64 / 1e6 / 86_400.0 / 365.25,
                )))
            }
        };
        if e.ts_ms > MAX_TRACE_TS_MS {
            return Err(InputError::new(format!(
                "trace: user {:?}'s timestamp {} ms is past the latest a trace may hold \
                 ({MAX_TRACE_TS_MS} ms, the largest Arrow int64): timestamps are Unix milliseconds",
                e.user, e.ts_ms
            )));
        }
    }
    Ok(())
}

/// The trace's events grouped by user, users in order of first appearance,
/// each user's events in trace order.
pub fn events_by_user(events: &[TraceEvent]) -> Vec<Vec<&TraceEvent>> {
    let g = UserGroups::new(events);
    (0..g.len())
        .map(|u| g.user(u).iter().map(|&i| &events[i]).collect())
        .collect()
}

/// The trace's event indices grouped by user (users in order of first
/// appearance, each user's events in trace order), in two flat arrays: a
/// counting sort over one pass with a hash of user names, so replay stays
/// linear in the number of users and allocates nothing per user.
#[derive(Debug, Clone)]
pub struct UserGroups {
    /// Event indices, user after user.
    order: Vec<usize>,
    /// Where each user's indices start in `order` (one more entry than users).
    starts: Vec<usize>,
}

impl UserGroups {
    /// Groups `events` by user.
    pub fn new(events: &[TraceEvent]) -> Self {
        let mut slot: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut user_of = Vec::with_capacity(events.len());
        let mut count: Vec<usize> = Vec::new();
        for e in events {
            let next = count.len();
            let u = *slot.entry(e.user.as_str()).or_insert(next);
            if u == next {
                count.push(0);
            }
            count[u] += 1;
            user_of.push(u);
        }
        drop(slot);
        let mut starts = Vec::with_capacity(count.len() + 1);
        let mut at = 0;
        for c in &count {
            starts.push(at);
            at += c;
        }
        starts.push(at);
        // `count` becomes each user's fill position.
        let users = count.len();
        count.copy_from_slice(&starts[..users]);
        let mut order = vec![0; events.len()];
        for (i, &u) in user_of.iter().enumerate() {
            order[count[u]] = i;
            count[u] += 1;
        }
        Self { order, starts }
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Whether there is no user.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The event indices of user `u`, in trace order.
    pub fn user(&self, u: usize) -> &[usize] {
        &self.order[self.starts[u]..self.starts[u + 1]]
    }
}

/// Builds the contract's per-policy result from an outcome.
pub fn policy_result(pol: &Policy, w: &Workload, models: &[AppModel], o: &Outcome) -> PolicyResult {
    let c = &o.counters;
    let cold: Vec<f64> = o
        .measured
        .iter()
        .filter(|r| r.kind == LaunchKind::Cold)
        .map(|r| r.latency_ms)
        .collect();
    let all: Vec<f64> = o.measured.iter().map(|r| r.latency_ms).collect();
    let under = if all.is_empty() {
        0.0
    } else {
        all.iter().filter(|&&x| x < 1000.0).count() as f64 / all.len() as f64
    };
    let evicted = c.evicted_file_pages + c.evicted_anon_pages;
    let refault = if evicted > 0 {
        (c.refault_file_pages + c.refault_anon_pages) as f64 / evicted as f64
    } else {
        0.0
    };
    let cold_relaunches = match w {
        Workload::Scenario { .. } => o.lost_background,
        _ => o.measured.iter().filter(|r| r.relaunch_after_kill).count() as u64,
    };
    let summary = Summary {
        launches: o.measured.len() as u64,
        cold_launch_ms: LatencyStats::from_samples(&cold),
        under_1s_share: round3(under),
        cold_relaunches,
        survivors: o.survivors,
        kills: o.measured_kills,
        direct_reclaims: o.measured_direct_reclaims,
        refault_ratio: round3(refault),
        preload_bytes_peak: c.preload_peak_pages * PAGE_BYTES,
    };
    // Per app, in catalogue order.
    let mut apps = Vec::new();
    for (i, m) in models.iter().enumerate() {
        let recs: Vec<&LaunchRecord> = o.measured.iter().filter(|r| r.app == i).collect();
        if recs.is_empty() {
            continue;
        }
        let cold: Vec<f64> = recs
            .iter()
            .filter(|r| r.kind == LaunchKind::Cold)
            .map(|r| r.latency_ms)
            .collect();
        apps.push(AppResult {
            app: m.spec.name.clone(),
            launches: recs.len() as u64,
            cold_launch_ms: LatencyStats::from_samples(&cold),
        });
    }
    let mut extra: BTreeMap<String, Value> = BTreeMap::new();
    let mean_all = if all.is_empty() {
        0.0
    } else {
        all.iter().sum::<f64>() / all.len() as f64
    };
    extra.insert("launch_ms_mean_all".into(), json!(round3(mean_all)));
    let kinds = |k: LaunchKind| o.measured.iter().filter(|r| r.kind == k).count();
    extra.insert(
        "launch_kinds".into(),
        json!({"cold": kinds(LaunchKind::Cold), "warm": kinds(LaunchKind::Warm), "hot": kinds(LaunchKind::Hot)}),
    );
    extra.insert("direct_reclaims_total".into(), json!(c.direct_reclaims));
    extra.insert("kills_total".into(), json!(c.kills));
    // Who killed, and why: the platform killer at a blocked allocation or
    // at lmkd's pressure thresholds; the rest are the scheduler's killer's.
    extra.insert(
        "kills_by_cause".into(),
        json!({
            "allocation_blocked": c.kills_blocked,
            "lmkd_pressure": c.kills_pressure,
            "scheduler": c.kills.saturating_sub(c.kills_blocked + c.kills_pressure),
        }),
    );
    // The platform's kills by Android 15 reason (lmkd's kill_reasons,
    // ActivityManager's cached limit); only the reasons that fired.
    let by_reason: serde_json::Map<String, Value> = crate::android::KillReason::ALL
        .iter()
        .filter(|r| c.kills_by_reason[r.index()] > 0)
        .map(|r| (r.name().to_string(), json!(c.kills_by_reason[r.index()])))
        .collect();
    extra.insert("kills_by_android_reason".into(), Value::Object(by_reason));
    // The memory state the kills fired in: swap nearly full (lmkd's
    // swap_free_low_percentage), room in swap for the whole victim (a
    // page-out could have replaced the kill), a launch on, the preloader's
    // standby set held.
    extra.insert(
        "kills_by_state".into(),
        json!({
            "swap_free_below_10pct": c.kills_swap_low,
            "swap_room_for_victim": c.kills_swap_room_for_victim,
            "during_launch": c.kills_during_launch,
            "with_standby_set": c.kills_with_standby_set,
        }),
    );
    extra.insert(
        "direct_reclaim_stall_ms_total".into(),
        json!(round3(c.direct_reclaim_ms)),
    );
    extra.insert(
        "preload_read_mib".into(),
        json!(round3(
            c.preload_read_pages as f64 * PAGE_BYTES as f64 / 1048576.0
        )),
    );
    extra.insert("amr_mode_switches".into(), json!(c.amr_switches));
    // The re-fault ratio's two counts (the summary's ratio is rounded).
    extra.insert(
        "refault_pages".into(),
        json!(c.refault_file_pages + c.refault_anon_pages),
    );
    extra.insert(
        "evicted_pages".into(),
        json!(c.evicted_file_pages + c.evicted_anon_pages),
    );
    // The re-fault study's direct-reclaim share: pages reclaimed by anyone
    // but kswapd over all pages reclaimed (whole run).
    let evicted = c.evicted_file_pages + c.evicted_anon_pages;
    if evicted > 0 {
        extra.insert(
            "direct_reclaim_page_share".into(),
            json!(round3(
                1.0 - c.kswapd_steal_pages.min(evicted) as f64 / evicted as f64
            )),
        );
    }
    if c.refault_windows > 0 || c.reclaim_step.is_some() {
        extra.insert(
            "kswapd_step".into(),
            json!({
                "windows": c.refault_windows,
                "changes": c.reclaim_step_changes,
                "watermark_scale_factor_last": c.reclaim_step,
            }),
        );
    }
    if let Some(p) = &c.prepage {
        // ASAP: switches prepaged, those the room cut, and the feedback
        // (precision per kind beside the ASAP paper's invariant shares).
        let mib = |b: u64| round3(b as f64 / 1048576.0);
        let by_kind = p.feedback.precision_by_kind();
        extra.insert(
            "prepage".into(),
            json!({
                "switches_prepaged": p.switches,
                "requested_mib": mib(p.requested_bytes),
                "bounded_by_room": p.bounded,
                "bounded_out_mib": mib(p.bounded_out_bytes),
                "precision": p.feedback.precision().map(round3),
                "precision_anon": by_kind.anon.map(round3),
                "precision_file": by_kind.file.map(round3),
                "recall": p.feedback.recall().map(round3),
                "kills_during_job": c.kills_during_prepage,
                "kills_with_unused_resident": c.kills_with_prepaged_unused,
            }),
        );
    }
    extra.insert(
        "stream_bytes_peak".into(),
        json!(c.stream_peak_pages * PAGE_BYTES),
    );
    extra.insert("stuck_launches".into(), json!(c.stuck_launches));
    if !o.cutoffs.is_empty() {
        extra.insert("sfp_cutoff_bytes".into(), json!(o.cutoffs));
    }
    if !o.check_errors.is_empty() {
        extra.insert("accounting_errors".into(), json!(o.check_errors));
    }
    match w {
        Workload::Scenario { background, .. } => {
            let n = background.first().map_or(0, |b| b.len());
            extra.insert("background_apps_per_target".into(), json!(n));
        }
        Workload::Multitask { apps, rounds, .. } => {
            let relaunch = if all.is_empty() { 0.0 } else { mean_all };
            extra.insert("relaunch_ms_mean".into(), json!(round3(relaunch)));
            extra.insert("apps".into(), json!(apps.len()));
            if *rounds != MULTITASK_ROUNDS && !apps.is_empty() {
                // Beyond §6.3's two rounds: each measured round's mean, in
                // order (rounds 2, 3, ...).
                let by_round: Vec<f64> = o
                    .measured
                    .chunks(apps.len())
                    .map(|r| round3(r.iter().map(|l| l.latency_ms).sum::<f64>() / r.len() as f64))
                    .collect();
                extra.insert("rounds".into(), json!(rounds));
                extra.insert("relaunch_ms_mean_by_round".into(), json!(by_round));
            }
        }
        Workload::Trace { .. } => {
            let days = o.days.max(1.0 / 24.0);
            extra.insert("days".into(), json!(round3(o.days)));
            extra.insert(
                "cold_relaunches_per_day".into(),
                json!(round3(cold_relaunches as f64 / days)),
            );
            let gb = o
                .measured
                .iter()
                .filter(|r| r.relaunch_after_kill && models[r.app].spec.class == AppClass::GbScale)
                .count();
            extra.insert("gb_scale_cold_relaunches".into(), json!(gb));
            let gb_cold = o
                .measured
                .iter()
                .filter(|r| {
                    r.kind == LaunchKind::Cold && models[r.app].spec.class == AppClass::GbScale
                })
                .count();
            extra.insert("gb_scale_cold_launches".into(), json!(gb_cold));
            // The AppFlow paper §1's "frozen-app moments": launches past
            // the 1 s usability cliff, "up to 7 times per day in our
            // 100-day tests" (stock). Per 24 h of simulated time.
            let mut per_day: BTreeMap<u64, u64> = BTreeMap::new();
            for r in o.measured.iter().filter(|r| r.latency_ms > 1000.0) {
                *per_day.entry(r.at_us / DAY_US).or_default() += 1;
            }
            let max = per_day.values().copied().max().unwrap_or(0);
            extra.insert("launches_over_1s_per_day_max".into(), json!(max));
        }
    }
    let _ = pol;
    PolicyResult {
        policy: pol.name.to_string(),
        summary,
        apps,
        extra,
    }
}
