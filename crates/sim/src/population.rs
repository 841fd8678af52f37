//! A population of generated users: `appflow sim --generate-trace FILE
//! --users N --population SPEC` (docs/sim.md, "A user population").
//!
//! Users differ the way published app-usage studies found them to differ:
//! in how often they pick up the phone, how many apps they use, how long a
//! session lasts, when in the day they use it, and how much of it goes to
//! GB-scale apps (games, on-device LLMs, the AppFlow paper's Table 1). Each
//! user draws its own parameters from distributions whose ranges are those
//! figures; every figure below names its source and its address.
//!
//! * **Sessions per day.** Falaki et al., "Diversity in Smartphone Usage"
//!   (MobiSys 2010): "the average number of interactions per day varies
//!   from 10 to 200" over 255 users
//!   (<https://pdfslide.us/documents/diversity-in-smartphone-broad-and-detailed-view-of-smartphone-usage-we-leave-for.html>).
//!   We take 10 and 200 as the 5th and 95th percentiles of a log-normal
//!   across users (median 44.7). Check against a second study: Hintze et
//!   al. (2017, 29,279 devices) report "an average of 60 interactions per
//!   day" on smartphones
//!   (<http://staff.fh-hagenberg.at/P24316/bibliography/Hintze_17_LargeScaleLong.html>);
//!   this log-normal's mean is 68.
//! * **Apps used.** Falaki: "the number of applications used varies from 10
//!   to 90" (<https://xiangchen.wordpress.com/2011/08/04/response-to-diversity-in-smartphone-usage-by-falaki-et-al/>):
//!   a user's repertoire is log-normal with those 5th/95th percentiles,
//!   capped by `--apps` (the catalogue apps the trace may use).
//! * **Session length.** Falaki: "the mean interaction length varies from
//!   10 to 250 seconds" (same address): a user's mean session length is
//!   log-normal with those percentiles (population mean 81 s). Check:
//!   Böhmer et al., "Falling Asleep with Angry Birds, Facebook and Kindle"
//!   (MobileHCI 2011, 4,125 users) measured 71.56 s per app session
//!   (<https://readwrite.com/study_average_app_session_lasts_about_1_minute/>).
//! * **Apps per session.** Falaki: "close to 90% of interactions include
//!   only one application"; the rest use 2-4 here.
//! * **App popularity.** Falaki: "the relative application popularity can
//!   be modeled using an exponential distribution, with different
//!   distribution parameters for different users": each user ranks its
//!   repertoire in its own seeded order, weight exp(−rank / (A/5)) for A
//!   apps (the rate A/5 is our assumption: the top fifth of the repertoire
//!   takes 63 % of fresh picks).
//! * **Time of day.** Böhmer: "news applications are most popular in the
//!   morning and games are at night" (<https://www.dfki.de/en/web/research/projects-and-publications/publication/5438>);
//!   the trace generator's daily rhythm (`trace::hour_weight`, the AppFlow
//!   paper §2.2.3) applies to every user.
//! * **Night users: 12 %.** Rod et al., "Overnight smartphone use" (PLoS
//!   One 2018, 815 young adults): "more than 12% had smartphone activity in
//!   the middle of the night (3 to 5 hours after self-reported bedtime)"
//!   (<https://research.ku.dk/find-a-researcher/?pure=en%2Fpublications%2Fovernight-smartphone-use(c3547640-f569-401a-b6c8-125f2b6f41cd).html>).
//!   A night user wakes at 10-11 h and goes to sleep at 1-4 h.
//! * **GB-app-heavy users: 29.7 %.** 66 % of smartphone users played a
//!   game in the past six months (Mobile Ecosystem Forum,
//!   <https://mobileecosystemforum.com/mef_data_post/games/>), and 45 % of
//!   smartphone owners who play mobile games play daily (PopCap survey,
//!   <https://www.computeruser.com/survey-one-third-of-us-and-uk-adults-are-mobile-phone-gamers/>):
//!   0.66 × 0.45 = 0.297 play daily. Of their fresh app picks, 43.6 % go
//!   to a GB-scale app: 25.8 min a day of games (eMarketer 2012,
//!   <http://www.mediabrix.com/smartphone-users-spent-the-most-time-per-day-playing-games-on-their-phone/>)
//!   of the 59.23 min a day on the phone (Böhmer, readwrite address above).
//!   Their GB-scale sessions are twice as long (Falaki: "interactions with
//!   maps and games tend to be the longest"; the factor 2 is ours).
//! * **Work-pattern users: 20 %.** No published share was found; 20 % is an
//!   assumption. On weekdays 9-17 h they weigh productivity apps 3× more
//!   and media 0.5×.
//! * **Light / typical / heavy.** The remaining 38.3 % ("regular" users)
//!   are labelled by their own sessions per day: light below 25, heavy
//!   above 100 (the log-normal's 26th and 81st percentiles; the boundaries
//!   are ours). A population that names `light`, `typical` or `heavy`
//!   directly draws sessions per day from that part of the log-normal.
//!
//! Re-access: within 30 minutes of the last switch, a session re-opens one
//! of the three most recent apps with probability 0.925 (the AppFlow paper
//! §2.2.3: 92.5 % of re-accesses within 30 minutes), as the single-user
//! generator does with 0.92.
//!
//! Every user has a stream of random numbers of its own, keyed by the seed
//! and its index: user k of a 48-user trace is user k of a 1,000-user trace.

use crate::catalog::{AppClass, AppSpec};
use crate::rng::{mix, SplitMix};
use crate::trace::{category, hour_weight, Category, EventKind, TraceEvent, TRACE_EPOCH_MS};
use appflow_core::InputError;
use std::fmt::Write as _;

/// Falaki: interactions per day, 5th and 95th percentile across users.
pub const SESSIONS_PER_DAY_P5_P95: (f64, f64) = (10.0, 200.0);
/// Falaki: applications used, 5th and 95th percentile across users.
pub const APPS_USED_P5_P95: (f64, f64) = (10.0, 90.0);
/// Falaki: mean interaction length, seconds, 5th and 95th percentile.
pub const SESSION_S_P5_P95: (f64, f64) = (10.0, 250.0);
/// Falaki: share of interactions with a single application.
pub const SINGLE_APP_SESSION_SHARE: f64 = 0.9;
/// Rod et al. 2018: share of users active in the middle of the night.
pub const NIGHT_SHARE: f64 = 0.12;
/// MEF (66 % played a game in six months) × PopCap (45 % of them daily).
pub const GB_HEAVY_SHARE: f64 = 0.66 * 0.45;
/// Assumption (no published share found).
pub const WORK_SHARE: f64 = 0.20;
/// eMarketer 2012 (25.8 min/day of games) over Böhmer (59.23 min/day).
pub const GB_PICK_SHARE: f64 = 25.8 / 59.23;
/// Sessions per day below which a regular user is light (ours).
pub const LIGHT_BELOW: f64 = 25.0;
/// Sessions per day above which a regular user is heavy (ours).
pub const HEAVY_ABOVE: f64 = 100.0;
/// AppFlow paper §2.2.3: re-accesses within 30 minutes.
pub const REACCESS_SHARE: f64 = 0.925;
/// Most users a generated trace may hold.
pub const MAX_USERS: usize = 100_000;

/// z of the 95th percentile of the standard normal.
const Z95: f64 = 1.644_853_626_951_472_2;

/// The kinds of user a population mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UserType {
    /// Few sessions a day (below 25).
    Light,
    /// 25-100 sessions a day.
    Typical,
    /// More than 100 sessions a day.
    Heavy,
    /// Games and on-device LLMs: GB-scale apps take 43.6 % of fresh picks.
    GbHeavy,
    /// Productivity apps on weekdays 9-17 h.
    Work,
    /// Awake 10-11 h to 1-4 h.
    Night,
    /// Labelled light, typical or heavy by its own sessions per day.
    Regular,
}

impl UserType {
    /// Every type, in the order of `--population` help.
    pub const ALL: [UserType; 7] = [
        UserType::Light,
        UserType::Typical,
        UserType::Heavy,
        UserType::GbHeavy,
        UserType::Work,
        UserType::Night,
        UserType::Regular,
    ];

    /// The name used in `--population` and in user ids.
    pub fn name(self) -> &'static str {
        match self {
            UserType::Light => "light",
            UserType::Typical => "typical",
            UserType::Heavy => "heavy",
            UserType::GbHeavy => "gb-heavy",
            UserType::Work => "work",
            UserType::Night => "night",
            UserType::Regular => "regular",
        }
    }

    fn by_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// A mix of user types, weights summing to 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Population {
    /// (type, share), shares summing to 1, no zero share.
    pub mix: Vec<(UserType, f64)>,
}

/// Names of the built-in populations.
pub const POPULATION_NAMES: [&str; 2] = ["mixed", "uniform"];

impl Population {
    /// The published mix: night 12 %, GB-app-heavy 29.7 %, work 20 %, the
    /// rest regular (light / typical / heavy by their own activity).
    pub fn mixed() -> Self {
        let regular = 1.0 - NIGHT_SHARE - GB_HEAVY_SHARE - WORK_SHARE;
        Population {
            mix: vec![
                (UserType::Regular, regular),
                (UserType::GbHeavy, GB_HEAVY_SHARE),
                (UserType::Work, WORK_SHARE),
                (UserType::Night, NIGHT_SHARE),
            ],
        }
    }

    /// Each of the six labelled types in equal shares.
    pub fn uniform() -> Self {
        Population {
            mix: UserType::ALL[..6].iter().map(|&t| (t, 1.0 / 6.0)).collect(),
        }
    }

    /// Parses `--population`: `mixed` (default), `uniform`, one type name
    /// (every user of that type), or `type=weight,...` (weights are
    /// normalised; e.g. `light=1,heavy=1,gb-heavy=2`).
    pub fn parse(spec: &str) -> Result<Self, InputError> {
        let spec = spec.trim();
        let valid = || {
            format!(
                "valid: {}, a type ({}), or type=weight,... (e.g. light=1,gb-heavy=2)",
                POPULATION_NAMES.join(", "),
                UserType::ALL.map(|t| t.name()).join(", ")
            )
        };
        match spec {
            "mixed" => return Ok(Self::mixed()),
            "uniform" => return Ok(Self::uniform()),
            _ => {}
        }
        if let Some(t) = UserType::by_name(spec) {
            return Ok(Population {
                mix: vec![(t, 1.0)],
            });
        }
        if !spec.contains('=') {
            return Err(InputError::new(format!(
                "--population: unknown population {spec:?}; {}",
                valid()
            )));
        }
        let mut mix: Vec<(UserType, f64)> = Vec::new();
        for part in spec.split(',') {
            let (name, w) = part.split_once('=').ok_or_else(|| {
                InputError::new(format!(
                    "--population: {part:?} is not type=weight; {}",
                    valid()
                ))
            })?;
            let name = name.trim();
            let t = UserType::by_name(name).ok_or_else(|| {
                InputError::new(format!(
                    "--population: unknown user type {name:?}; {}",
                    valid()
                ))
            })?;
            let w: f64 = w
                .trim()
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| {
                    InputError::new(format!(
                        "--population: weight {:?} of {name} is not a number >= 0",
                        w.trim()
                    ))
                })?;
            if mix.iter().any(|(u, _)| *u == t) {
                return Err(InputError::new(format!(
                    "--population: {name} is given twice"
                )));
            }
            if w > 0.0 {
                mix.push((t, w));
            }
        }
        let total: f64 = mix.iter().map(|(_, w)| w).sum();
        if total <= 0.0 {
            return Err(InputError::new(
                "--population: the weights are all zero".to_string(),
            ));
        }
        for (_, w) in &mut mix {
            *w /= total;
        }
        Ok(Population { mix })
    }

    fn draw(&self, r: &mut SplitMix) -> UserType {
        let mut x = r.unit();
        for &(t, w) in &self.mix {
            if x < w {
                return t;
            }
            x -= w;
        }
        self.mix[self.mix.len() - 1].0
    }
}

/// A log-normal whose 5th and 95th percentiles are `p5_p95`.
fn lognormal(r: &mut SplitMix, p5_p95: (f64, f64)) -> f64 {
    let (lo, hi) = (p5_p95.0.ln(), p5_p95.1.ln());
    let mu = (lo + hi) / 2.0;
    let sigma = (hi - lo) / (2.0 * Z95);
    // Box-Muller.
    let u1 = 1.0 - r.unit();
    let u2 = r.unit();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (mu + sigma * z).exp()
}

/// The same log-normal restricted to [lo, hi) by rejection.
fn lognormal_within(r: &mut SplitMix, p5_p95: (f64, f64), lo: f64, hi: f64) -> f64 {
    loop {
        let x = lognormal(r, p5_p95);
        if x >= lo && x < hi {
            return x;
        }
    }
}

/// One generated user's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct UserParams {
    /// User id in the trace: `u0007-night`.
    pub id: String,
    /// Its type (a regular user labelled light, typical or heavy).
    pub kind: UserType,
    /// Mean sessions per day.
    pub sessions_per_day: f64,
    /// Apps in its repertoire.
    pub apps: usize,
    /// Mean session length, s.
    pub session_s: f64,
}

/// What a generated population holds, per type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeStats {
    /// Users.
    pub users: u64,
    /// Sessions (screen-on periods ending in a close).
    pub sessions: u64,
    /// App opens.
    pub opens: u64,
    /// Opens of GB-scale apps.
    pub gb_opens: u64,
    /// Distinct apps used, summed over user-days with use.
    pub apps_per_day_sum: u64,
    /// User-days with use.
    pub active_days: u64,
    /// Session time, ms.
    pub session_ms: u64,
}

/// Summary of a generated population.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PopulationStats {
    /// Per type, in [`UserType::ALL`] order (regular never appears).
    pub by_type: Vec<(UserType, TypeStats)>,
    /// Re-opens of an app within 30 minutes of its previous use, over all re-opens.
    pub reaccess_30min_share: f64,
    /// Days.
    pub days: u64,
}

impl PopulationStats {
    /// One line per type, as `--generate-trace` prints it.
    pub fn table(&self) -> String {
        let mut s = String::from(
            "type      users  sessions/day  apps/day  session s  GB-scale share of opens\n",
        );
        for (t, st) in &self.by_type {
            let days = st.users as f64 * self.days as f64;
            let _ = writeln!(
                s,
                "{:<9} {:>5}  {:>12.1}  {:>8.1}  {:>9.1}  {:>5.1} %",
                t.name(),
                st.users,
                st.sessions as f64 / days.max(1.0),
                st.apps_per_day_sum as f64 / (st.active_days.max(1)) as f64,
                st.session_ms as f64 / 1000.0 / (st.sessions.max(1)) as f64,
                100.0 * st.gb_opens as f64 / (st.opens.max(1)) as f64
            );
        }
        s
    }
}

/// Generates `users` users of `pop` over `days` days, each using apps of
/// the first `apps` catalogue apps. Events are grouped by user (user after
/// user), each user's in time order. Deterministic for a seed.
pub fn generate(
    cat: &[AppSpec],
    users: usize,
    days: u64,
    apps: usize,
    seed: u64,
    pop: &Population,
) -> Result<(Vec<TraceEvent>, Vec<UserParams>, PopulationStats), InputError> {
    if !(1..=100).contains(&days) {
        return Err(InputError::new(format!("--days must be 1-100, got {days}")));
    }
    if !(1..=MAX_USERS).contains(&users) {
        return Err(InputError::new(format!(
            "--users must be 1-{MAX_USERS}, got {users}"
        )));
    }
    let core = cat.iter().filter(|a| a.class != AppClass::Tail).count();
    if apps < core.max(1) || apps > cat.len() {
        return Err(InputError::new(format!(
            "--apps must be {core}-{} (the catalogue's size), got {apps}",
            cat.len()
        )));
    }
    let pool: Vec<&AppSpec> = cat.iter().take(apps).collect();
    let cats: Vec<Category> = pool.iter().map(|a| category(&a.name)).collect();
    let width = users.to_string().len().max(4);
    let mut events = Vec::new();
    let mut params = Vec::with_capacity(users);
    let mut by_type: Vec<(UserType, TypeStats)> = UserType::ALL[..6]
        .iter()
        .map(|&t| (t, TypeStats::default()))
        .collect();
    let (mut reopen, mut reopen_30) = (0u64, 0u64);
    for u in 0..users {
        let mut r = SplitMix::new(mix(seed ^ 0x706f_7075_6c61_7469) ^ mix(u as u64));
        let p = draw_user(&mut r, pop, u, width, pool.len());
        let st = &mut by_type
            .iter_mut()
            .find(|(t, _)| *t == p.kind)
            .expect("every labelled type has a row")
            .1;
        st.users += 1;
        let g = UserGen {
            pool: &pool,
            cats: &cats,
            params: &p,
            days,
        };
        let (n30, n) = g.run(&mut r, &mut events, st);
        reopen_30 += n30;
        reopen += n;
        params.push(p);
    }
    by_type.retain(|(_, s)| s.users > 0);
    let stats = PopulationStats {
        by_type,
        reaccess_30min_share: if reopen > 0 {
            reopen_30 as f64 / reopen as f64
        } else {
            0.0
        },
        days,
    };
    Ok((events, params, stats))
}

fn draw_user(
    r: &mut SplitMix,
    pop: &Population,
    u: usize,
    width: usize,
    pool: usize,
) -> UserParams {
    let t = pop.draw(r);
    let s = SESSIONS_PER_DAY_P5_P95;
    let sessions_per_day = match t {
        UserType::Light => lognormal_within(r, s, 0.0, LIGHT_BELOW),
        UserType::Typical => lognormal_within(r, s, LIGHT_BELOW, HEAVY_ABOVE),
        UserType::Heavy => lognormal_within(r, s, HEAVY_ABOVE, f64::INFINITY),
        _ => lognormal(r, s),
    };
    let kind = match t {
        UserType::Regular if sessions_per_day < LIGHT_BELOW => UserType::Light,
        UserType::Regular if sessions_per_day > HEAVY_ABOVE => UserType::Heavy,
        UserType::Regular => UserType::Typical,
        other => other,
    };
    let apps = (lognormal(r, APPS_USED_P5_P95).round() as usize).clamp(pool.min(8), pool);
    let session_s = lognormal(r, SESSION_S_P5_P95);
    UserParams {
        id: format!("u{u:0width$}-{}", kind.name()),
        kind,
        sessions_per_day,
        apps,
        session_s,
    }
}

/// One user's trace.
struct UserGen<'a> {
    pool: &'a [&'a AppSpec],
    cats: &'a [Category],
    params: &'a UserParams,
    days: u64,
}

impl UserGen<'_> {
    /// Appends the user's events; returns (re-opens within 30 min, re-opens).
    fn run(&self, r: &mut SplitMix, out: &mut Vec<TraceEvent>, st: &mut TypeStats) -> (u64, u64) {
        let p = self.params;
        // Repertoire: a seeded subset of the pool in a seeded popularity order.
        let mut order: Vec<usize> = (0..self.pool.len()).collect();
        for i in (1..order.len()).rev() {
            let j = r.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let mut rep: Vec<usize> = order[..p.apps].to_vec();
        let is_gb = |i: usize| self.pool[i].class == AppClass::GbScale;
        if p.kind == UserType::GbHeavy {
            // At least two GB-scale apps, swapped in from the rest of the pool.
            let mut extra = order[p.apps..].iter().copied().filter(|&i| is_gb(i));
            while rep.iter().filter(|&&i| is_gb(i)).count() < 2 {
                let Some(g) = extra.next() else { break };
                let slot = rep.iter().rposition(|&i| !is_gb(i)).unwrap_or(0);
                rep[slot] = g;
            }
        }
        let scale = (rep.len() as f64 / 5.0).max(1.0);
        let pop: Vec<f64> = (0..rep.len())
            .map(|k| (-(k as f64) / scale).exp())
            .collect();
        let gb_slots: Vec<usize> = (0..rep.len()).filter(|&k| is_gb(rep[k])).collect();
        let night = p.kind == UserType::Night;
        let mut last_use: Vec<Option<u64>> = vec![None; self.pool.len()];
        let mut recent: Vec<usize> = Vec::new();
        let mut last_switch: Option<u64> = None;
        let (mut reopen, mut reopen_30) = (0u64, 0u64);
        let mut w = vec![0.0; rep.len()];
        for day in 0..self.days {
            let weekend = matches!(day % 7, 5 | 6);
            let day0 = TRACE_EPOCH_MS + day * 86_400_000;
            let (wake_h, sleep_h) = match (night, weekend) {
                (true, false) => (10, 25 + r.below(3)),
                (true, true) => (11, 25 + r.below(3)),
                (false, false) => (7, 23),
                (false, true) => (9, 23),
            };
            let wake = wake_h * 3_600_000 + r.below(3_600_000);
            let sleep = sleep_h * 3_600_000 + r.below(3_600_000);
            let gap_mean = (sleep - wake) as f64 / p.sessions_per_day;
            let mut used_today: Vec<bool> = vec![false; self.pool.len()];
            let mut t = wake + r.exp(gap_mean) as u64;
            while t < sleep {
                let n = if r.unit() < SINGLE_APP_SESSION_SHARE {
                    1
                } else {
                    2 + r.below(3)
                };
                let session_ms = 2_000.0 + r.exp(p.session_s * 1000.0);
                let start = t;
                let mut prev: Option<usize> = None;
                for _ in 0..n {
                    let hour = (t / 3_600_000) % 24;
                    let recent_ok = last_switch.is_some_and(|ls| day0 + t - ls <= 30 * 60_000);
                    let app = if !recent.is_empty() && recent_ok && r.unit() < REACCESS_SHARE {
                        recent[r.below(recent.len().min(3) as u64) as usize]
                    } else if p.kind == UserType::GbHeavy
                        && !gb_slots.is_empty()
                        && r.unit() < GB_PICK_SHARE
                    {
                        let gw: Vec<f64> = gb_slots.iter().map(|&k| pop[k]).collect();
                        rep[gb_slots[pick(r, &gw)]]
                    } else {
                        for (k, wk) in w.iter_mut().enumerate() {
                            *wk = pop[k] * self.weight(rep[k], hour, weekend);
                        }
                        rep[pick(r, &w)]
                    };
                    if Some(app) == prev {
                        continue;
                    }
                    prev = Some(app);
                    let ts = day0 + t;
                    if let Some(lu) = last_use[app] {
                        reopen += 1;
                        if ts - lu <= 30 * 60_000 {
                            reopen_30 += 1;
                        }
                    }
                    out.push(TraceEvent {
                        user: p.id.clone(),
                        ts_ms: ts,
                        app: self.pool[app].name.clone(),
                        kind: EventKind::Open,
                    });
                    st.opens += 1;
                    if is_gb(app) {
                        st.gb_opens += 1;
                    }
                    used_today[app] = true;
                    recent.retain(|&x| x != app);
                    recent.insert(0, app);
                    recent.truncate(8);
                    // The session's time split over its apps; a GB-app-heavy
                    // user's GB-scale sessions last twice as long (Falaki).
                    let long = if p.kind == UserType::GbHeavy && is_gb(app) {
                        2.0
                    } else {
                        1.0
                    };
                    t += 1_000 + (long * session_ms / n as f64) as u64;
                    last_use[app] = Some(day0 + t);
                    last_switch = Some(day0 + t);
                }
                if let Some(a) = prev {
                    out.push(TraceEvent {
                        user: p.id.clone(),
                        ts_ms: day0 + t,
                        app: self.pool[a].name.clone(),
                        kind: EventKind::Close,
                    });
                    st.sessions += 1;
                    st.session_ms += t - start;
                }
                t += 30_000 + r.exp(gap_mean) as u64;
            }
            let n_used = used_today.iter().filter(|&&x| x).count() as u64;
            if n_used > 0 {
                st.apps_per_day_sum += n_used;
                st.active_days += 1;
            }
        }
        (reopen_30, reopen)
    }

    /// The daily rhythm of an app for this user at an hour.
    fn weight(&self, app: usize, hour: u64, weekend: bool) -> f64 {
        let c = self.cats[app];
        match self.params.kind {
            // After midnight a night user is still in its evening.
            UserType::Night if hour < 5 => hour_weight(c, 23, weekend),
            UserType::Work if !weekend && (9..17).contains(&hour) => {
                hour_weight(c, hour, weekend)
                    * match c {
                        Category::Productivity => 3.0,
                        Category::Media => 0.5,
                        _ => 1.0,
                    }
            }
            _ => hour_weight(c, hour, weekend),
        }
    }
}

/// Index drawn in proportion to the weights.
fn pick(r: &mut SplitMix, w: &[f64]) -> usize {
    let total: f64 = w.iter().sum();
    let mut x = r.unit() * total;
    for (i, wi) in w.iter().enumerate() {
        if x < *wi {
            return i;
        }
        x -= wi;
    }
    w.len() - 1
}

/// The events as trace CSV text with a header (`trace::parse` reads it back).
pub fn to_csv(events: &[TraceEvent]) -> String {
    let mut text = String::with_capacity(events.len() * 40 + 32);
    text.push_str("user,timestamp,app,event\n");
    for e in events {
        let kind = match e.kind {
            EventKind::Open => "open",
            EventKind::Close => "close",
            EventKind::Exit => "exit",
        };
        let _ = writeln!(text, "{},{},{},{kind}", e.user, e.ts_ms, e.app);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::catalogue;

    #[test]
    fn parses_presets_types_and_weights() {
        assert_eq!(Population::parse("mixed").unwrap(), Population::mixed());
        let m = Population::mixed();
        let total: f64 = m.mix.iter().map(|(_, w)| w).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(
            Population::parse("night").unwrap().mix,
            vec![(UserType::Night, 1.0)]
        );
        let p = Population::parse("light=1, gb-heavy=3,work=0").unwrap();
        assert_eq!(
            p.mix,
            vec![(UserType::Light, 0.25), (UserType::GbHeavy, 0.75)]
        );
        for bad in [
            "",
            "crowd",
            "light=x",
            "light=-1",
            "light=1,light=2",
            "nerd=1",
            "light=0",
        ] {
            let e = Population::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--population"), "{bad}: {e}");
        }
        let e = Population::parse("crowd").unwrap_err().to_string();
        assert!(e.contains("gb-heavy") && e.contains("mixed"), "{e}");
    }

    #[test]
    fn users_differ_by_type_as_the_cited_figures_say() {
        let c = catalogue();
        let (ev, params, st) = generate(&c, 6 * 40, 14, 60, 3, &Population::uniform()).unwrap();
        assert_eq!(params.len(), 240);
        let row = |t: UserType| st.by_type.iter().find(|(k, _)| *k == t).unwrap().1.clone();
        let per_day = |s: &TypeStats| s.sessions as f64 / (s.users * 14) as f64;
        let (light, typical, heavy) = (
            row(UserType::Light),
            row(UserType::Typical),
            row(UserType::Heavy),
        );
        assert!(
            per_day(&light) < 25.0 && per_day(&heavy) > 100.0,
            "{}",
            st.table()
        );
        assert!(per_day(&light) < per_day(&typical) && per_day(&typical) < per_day(&heavy));
        let gb = |s: &TypeStats| s.gb_opens as f64 / s.opens as f64;
        assert!(
            gb(&row(UserType::GbHeavy)) > 2.0 * gb(&typical),
            "{}",
            st.table()
        );
        // Night users open apps after midnight; the others do not.
        let after_midnight = |id: &str| {
            ev.iter()
                .filter(|e| {
                    let tod = (e.ts_ms - TRACE_EPOCH_MS) % 86_400_000;
                    e.user == id
                        && e.kind == EventKind::Open
                        && (3_600_000..4 * 3_600_000).contains(&tod)
                })
                .count()
        };
        for p in &params {
            let n = after_midnight(&p.id);
            if p.kind == UserType::Night {
                assert!(n > 0, "{}", p.id);
            } else {
                assert_eq!(n, 0, "{}", p.id);
            }
        }
        // Per user: time never goes back, and opens/closes alternate sensibly.
        let text = to_csv(&ev);
        let back = crate::trace::parse(&text, "gen", &c).unwrap();
        assert_eq!(back, ev);
        assert!(st.reaccess_30min_share > 0.5, "{}", st.reaccess_30min_share);
    }

    #[test]
    fn deterministic_and_a_user_does_not_depend_on_the_others() {
        let c = catalogue();
        let (a, pa, _) = generate(&c, 48, 5, 60, 9, &Population::mixed()).unwrap();
        let (b, _, _) = generate(&c, 48, 5, 60, 9, &Population::mixed()).unwrap();
        assert_eq!(a, b);
        let (few, pf, _) = generate(&c, 5, 5, 60, 9, &Population::mixed()).unwrap();
        assert_eq!(pf[..], pa[..5]);
        let first5: Vec<_> = a
            .iter()
            .filter(|e| pf.iter().any(|p| p.id == e.user))
            .cloned()
            .collect();
        assert_eq!(first5, few);
        let (other, _, _) = generate(&c, 48, 5, 60, 10, &Population::mixed()).unwrap();
        assert_ne!(a, other);
        // At least three types in a 48-user mixed population.
        let kinds: std::collections::HashSet<_> = pa.iter().map(|p| p.kind).collect();
        assert!(kinds.len() >= 3, "{kinds:?}");
        assert!(generate(&c, 0, 5, 60, 1, &Population::mixed()).is_err());
        assert!(generate(&c, 2, 0, 60, 1, &Population::mixed()).is_err());
        assert!(generate(&c, 2, 5, 500, 1, &Population::mixed()).is_err());
    }

    #[test]
    fn the_mixed_population_matches_its_sources() {
        // Over many users the draws land on the cited figures.
        let c = catalogue();
        let (_, params, _) = generate(&c, 4000, 1, 68, 1, &Population::mixed()).unwrap();
        let n = params.len() as f64;
        let share = |t: UserType| params.iter().filter(|p| p.kind == t).count() as f64 / n;
        assert!((share(UserType::Night) - NIGHT_SHARE).abs() < 0.02);
        assert!((share(UserType::GbHeavy) - GB_HEAVY_SHARE).abs() < 0.025);
        let mut s: Vec<f64> = params.iter().map(|p| p.sessions_per_day).collect();
        s.sort_by(|a, b| a.total_cmp(b));
        let q = |f: f64| s[(f * (s.len() - 1) as f64) as usize];
        assert!(
            (q(0.05) - 10.0).abs() < 1.5 && (q(0.95) - 200.0).abs() < 30.0,
            "{} {}",
            q(0.05),
            q(0.95)
        );
        let mean = s.iter().sum::<f64>() / n;
        assert!((mean - 68.0).abs() < 6.0, "{mean}");
        let mean_s = params.iter().map(|p| p.session_s).sum::<f64>() / n;
        assert!((mean_s - 81.0).abs() < 8.0, "{mean_s}");
    }
}
