//! The killer's reuse predictor: how likely an app is to be opened again,
//! and how soon, learned online from this user's own history only.
//!
//! A kill is a bet that the app will not be opened again soon; its price is
//! the app's cold relaunch (docs/killer.md). The predictor prices the bet
//! from three things it sees in the app events, and nothing else (no
//! look-ahead, no other user's history):
//!
//! * **reuse gaps**: an open after more than the recency window (30 min,
//!   the AppFlow paper §2.2.3: 92.5 % of re-accesses come within 30
//!   minutes) starts a new *visit*; opens closer together are the same
//!   visit. The latest [`MAX_GAPS`] gaps between visits are kept: of those
//!   longer than the app's current idle time, the share that would end
//!   within the horizon is its chance of reuse (a renewal estimate: a
//!   regular app, used every evening, is near certain by the evening).
//! * **time of day**: visits are counted per hour of the day (§2.2.3:
//!   "mobile users tend to focus on certain app categories at diverse
//!   time"). The rate of visits in hour h is the hour's count over the
//!   days observed, shrunk toward the app's own mean hourly rate by one
//!   day of pseudo-observation (so that one visit does not make an hour
//!   certain and the other 23 impossible); visits are taken as a Poisson
//!   process with that daily rhythm (M2ARP and SmartLMK predict from the
//!   same per-app usage statistics, docs/killer.md).
//! * **what follows the current foreground app**: for each app, the apps
//!   opened right after it within the recency window (used together; at
//!   most [`MAX_SUCCESSORS`], the least counted replaced first). The share
//!   of the foreground app's successors that went to a candidate is the
//!   chance that the candidate is the very next app, expected one mean
//!   successor gap from now.
//!
//! The two estimates are blended by how many of the app's gaps are still
//! possible (n of them weigh n/(n + 1) against the time-of-day model).
//!
//! State is bounded: per app 24 counters, a few timestamps, at most
//! [`MAX_GAPS`] gaps and [`MAX_SUCCESSORS`] successors; the number of apps is the scheduler's
//! table (declared apps plus `max_undeclared_apps`). It is serialisable
//! ([`UsageModel`], versioned) so the daemon keeps it across restarts.
//! Everything is a pure function of the events and the times passed in:
//! the same events give the same predictions, bit for bit.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Hours in a day: the time-of-day bins.
pub const HOURS: usize = 24;
/// One hour, ms.
pub const HOUR_MS: u64 = 3_600_000;
/// One day, ms.
pub const DAY_MS: u64 = 24 * HOUR_MS;
/// Successors kept per app.
pub const MAX_SUCCESSORS: usize = 8;
/// Visit gaps kept per app (the most recent).
pub const MAX_GAPS: usize = 32;
/// The `format` tag of a saved model.
pub const USAGE_FORMAT: &str = "appflow-usage";
/// The saved model's schema version.
pub const USAGE_VERSION: u32 = 1;

/// One app's history, as counts (bounded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppUsage {
    /// Visits that began in each hour of the day (Unix time, UTC).
    pub visits_by_hour: [u32; HOURS],
    /// Opens in all (visits and the re-opens within them).
    pub opens: u32,
    /// Time of the latest open, Unix ms.
    pub last_open_unix_ms: Option<u64>,
    /// Sum of the gaps between consecutive opens of this app, ms (for the
    /// mean inter-open gap), with their count.
    pub open_gap_sum_ms: u64,
    /// Number of gaps summed.
    pub open_gaps: u32,
    /// Apps opened right after this one, most counted first.
    pub successors: Vec<Successor>,
    /// When the latest visit began, Unix ms.
    pub last_visit_unix_ms: Option<u64>,
    /// The latest gaps between visit starts, minutes, oldest first (at
    /// most [`MAX_GAPS`]).
    pub visit_gaps_min: Vec<u32>,
}

/// An app opened right after another, with how often.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Successor {
    /// The app.
    pub app: String,
    /// How often it came next.
    pub count: u32,
}

impl AppUsage {
    /// Visits in all.
    pub fn visits(&self) -> u32 {
        self.visits_by_hour.iter().sum()
    }
}

/// A prediction for one app at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReuseEstimate {
    /// Probability that the app is opened within the horizon.
    pub p_reuse: f64,
    /// Expected time until it is opened, capped at the horizon, ms
    /// (E[min(T, H)]): how long a kill's memory stays free.
    pub expected_idle_ms: f64,
    /// The horizon both are taken over, ms.
    pub horizon_ms: u64,
}

/// The predictor: every app's history since `since_unix_ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageModel {
    /// Always [`USAGE_FORMAT`] when saved.
    pub format: String,
    /// [`USAGE_VERSION`] when saved.
    pub version: u32,
    /// When the history began (the first open seen), Unix ms.
    pub since_unix_ms: Option<u64>,
    /// Per app.
    pub apps: BTreeMap<String, AppUsage>,
    /// The app opened last (successors are counted from it), and when.
    pub last_app: Option<String>,
    /// When `last_app` was opened, Unix ms.
    pub last_open_unix_ms: Option<u64>,
    /// Sum of the gaps from an app's open to its successor's, ms (only
    /// successors within the recency window count), with their count.
    pub successor_gap_sum_ms: u64,
    /// Number of successor gaps summed.
    pub successor_gaps: u32,
}

/// Why a saved model cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UsageError {
    /// Not JSON of the model's shape.
    #[error("not a usage model: {0}")]
    Malformed(String),
    /// Another format or version.
    #[error("usage model of format {format:?} version {version}, expected {USAGE_FORMAT:?} version {USAGE_VERSION}")]
    Foreign {
        /// Format found.
        format: String,
        /// Version found.
        version: u32,
    },
    /// The content breaks a bound.
    #[error("usage model: {0}")]
    Invalid(String),
}

impl UsageModel {
    /// An empty model.
    pub fn new() -> Self {
        Self {
            format: USAGE_FORMAT.to_string(),
            version: USAGE_VERSION,
            ..Self::default()
        }
    }

    /// Forgets everything (a new user on the device).
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    /// Records that `app` came to the foreground at `unix_ms`. An open
    /// more than `recency_window_ms` after the app's previous one starts a
    /// new visit, counted in its hour of the day. Times that go back are
    /// taken as equal to the latest one seen.
    pub fn record_open(&mut self, app: &str, unix_ms: u64, recency_window_ms: u64) {
        let since = *self.since_unix_ms.get_or_insert(unix_ms);
        let unix_ms = unix_ms.max(since).max(self.last_open_unix_ms.unwrap_or(0));
        if let (Some(prev), Some(at)) = (self.last_app.take(), self.last_open_unix_ms) {
            // Apps used together: the next app opened within the window.
            let gap = unix_ms - at;
            if prev != app && gap <= recency_window_ms {
                if let Some(p) = self.apps.get_mut(&prev) {
                    count_successor(&mut p.successors, app);
                    self.successor_gap_sum_ms = self.successor_gap_sum_ms.saturating_add(gap);
                    self.successor_gaps = self.successor_gaps.saturating_add(1);
                }
            }
        }
        self.last_app = Some(app.to_string());
        self.last_open_unix_ms = Some(unix_ms);
        let u = self.apps.entry(app.to_string()).or_default();
        let new_visit = match u.last_open_unix_ms {
            Some(last) => {
                let gap = unix_ms.saturating_sub(last);
                u.open_gap_sum_ms = u.open_gap_sum_ms.saturating_add(gap);
                u.open_gaps = u.open_gaps.saturating_add(1);
                gap > recency_window_ms
            }
            None => true,
        };
        if new_visit {
            let h = hour_of(unix_ms);
            u.visits_by_hour[h] = u.visits_by_hour[h].saturating_add(1);
            if let Some(v) = u.last_visit_unix_ms {
                if u.visit_gaps_min.len() == MAX_GAPS {
                    u.visit_gaps_min.remove(0);
                }
                let min = (unix_ms.saturating_sub(v) / 60_000).min(u64::from(u32::MAX));
                u.visit_gaps_min.push(min as u32);
            }
            u.last_visit_unix_ms = Some(unix_ms);
        }
        u.opens = u.opens.saturating_add(1);
        u.last_open_unix_ms = Some(unix_ms.max(u.last_open_unix_ms.unwrap_or(0)));
    }

    /// Drops apps beyond `keep` (those opened longest ago first), so a
    /// flood of names cannot grow the model.
    pub fn bound(&mut self, keep: usize) {
        while self.apps.len() > keep {
            let oldest = self
                .apps
                .iter()
                .min_by_key(|(n, u)| (u.last_open_unix_ms.unwrap_or(0), (*n).clone()))
                .map(|(n, _)| n.clone());
            match oldest {
                Some(n) => {
                    self.apps.remove(&n);
                }
                None => break,
            }
        }
    }

    /// Days of history at `unix_ms` (at least one hour's worth).
    pub fn days_observed(&self, unix_ms: u64) -> f64 {
        let since = self.since_unix_ms.unwrap_or(unix_ms);
        (unix_ms.saturating_sub(since) as f64 / DAY_MS as f64).max(1.0 / HOURS as f64)
    }

    /// Visit rate of `app` per hour, for each hour of the day: the hour's
    /// visits over the days observed, shrunk toward the app's own mean by
    /// one pseudo-day. All zero for an app never opened.
    pub fn hourly_rates(&self, app: &str, unix_ms: u64) -> [f64; HOURS] {
        self.apps
            .get(app)
            .map_or([0.0; HOURS], |u| self.rates_of(u, unix_ms))
    }

    fn rates_of(&self, u: &AppUsage, unix_ms: u64) -> [f64; HOURS] {
        let mut r = [0.0; HOURS];
        let days = self.days_observed(unix_ms);
        let total = u.visits() as f64;
        // The app's mean visits per hour-of-day bin per day, as the prior
        // of one pseudo-day.
        let prior = total / days / HOURS as f64;
        for (h, v) in u.visits_by_hour.iter().enumerate() {
            r[h] = (*v as f64 + prior) / (days + 1.0);
        }
        r
    }

    /// The chance that `app` is the next app opened after the current
    /// foreground app `fg`, from `fg`'s successors.
    pub fn p_next(&self, fg: Option<&str>, app: &str) -> f64 {
        let Some((succ, total)) = self.successors_of(fg) else {
            return 0.0;
        };
        succ.iter()
            .find(|s| s.app == app)
            .map_or(0.0, |s| f64::from(s.count) / total as f64)
    }

    /// The apps that followed `fg`, each with its chance of being the next
    /// app opened ([`Self::p_next`]); none without `fg` or its successors.
    pub fn next_shares(&self, fg: Option<&str>) -> Vec<(&str, f64)> {
        let Some((succ, total)) = self.successors_of(fg) else {
            return Vec::new();
        };
        succ.iter()
            .map(|s| (s.app.as_str(), f64::from(s.count) / total as f64))
            .collect()
    }

    /// `fg`'s successors and their count in all (None without `fg`, or
    /// with no successor counted).
    fn successors_of(&self, fg: Option<&str>) -> Option<(&[Successor], u64)> {
        let f = self.apps.get(fg?)?;
        let total: u64 = f.successors.iter().map(|s| u64::from(s.count)).sum();
        (total > 0).then_some((f.successors.as_slice(), total))
    }

    /// Mean time between consecutive opens of `app`, ms, if it was opened
    /// twice or more.
    pub fn mean_open_gap_ms(&self, app: &str) -> Option<f64> {
        let u = self.apps.get(app)?;
        (u.open_gaps > 0).then(|| u.open_gap_sum_ms as f64 / f64::from(u.open_gaps))
    }

    /// Mean time from an app's open to its successor's, ms.
    pub fn mean_successor_gap_ms(&self) -> Option<f64> {
        (self.successor_gaps > 0)
            .then(|| self.successor_gap_sum_ms as f64 / f64::from(self.successor_gaps))
    }

    /// Predicts `app`'s reuse over `horizon_ms` from `unix_ms`, the
    /// foreground app being `fg` (None for an app never seen opened).
    ///
    /// Two estimates, blended:
    /// * *time of day*: visits arrive as a Poisson process with the hourly
    ///   rates of [`Self::hourly_rates`]; over an hour of rate r the
    ///   survival falls by e^−r, and the time alive within it is
    ///   (1 − e^−r)/r of the hour. The day repeats, so a day is integrated
    ///   once and the following days are the same day scaled by the
    ///   survival so far.
    /// * *reuse gaps*: the app's own gaps between visits that are longer
    ///   than its current idle time x (the gaps still possible): the share
    ///   ending within x + H, and their mean remaining time, capped at H.
    ///   A regular app (every evening) is certain where a Poisson process
    ///   of the same rate is not.
    ///
    /// With n such gaps the gaps weigh n/(n + 1) and the time-of-day model
    /// 1/(n + 1), one pseudo-observation as in [`Self::hourly_rates`].
    /// Then the successor chance p mixes in a reuse one mean successor gap
    /// g from now: P = p + (1 − p)·P₀, E = p·min(g, H) + (1 − p)·E₀.
    pub fn estimate(
        &self,
        app: &str,
        fg: Option<&str>,
        unix_ms: u64,
        horizon_ms: u64,
    ) -> Option<ReuseEstimate> {
        let u = self.apps.get(app)?;
        let rates = self.rates_of(u, unix_ms);
        let (mut p0, mut e0) = poisson_reuse(&rates, unix_ms, horizon_ms);
        if let Some((pg, eg, n)) = gap_reuse(u, unix_ms, horizon_ms) {
            let w = n / (n + 1.0);
            p0 = w * pg + (1.0 - w) * p0;
            e0 = w * eg + (1.0 - w) * e0;
        }
        let p = self.p_next(fg, app);
        let (p_reuse, expected_idle_ms) = if p > 0.0 {
            let g = self
                .mean_successor_gap_ms()
                .unwrap_or(0.0)
                .min(horizon_ms as f64);
            (p + (1.0 - p) * p0, p * g + (1.0 - p) * e0)
        } else {
            (p0, e0)
        };
        Some(ReuseEstimate {
            p_reuse,
            expected_idle_ms,
            horizon_ms,
        })
    }

    /// Checks the bounds of a loaded model (successors per app, format).
    pub fn validate(&self) -> Result<(), UsageError> {
        if self.format != USAGE_FORMAT || self.version != USAGE_VERSION {
            return Err(UsageError::Foreign {
                format: self.format.clone(),
                version: self.version,
            });
        }
        for (name, u) in &self.apps {
            if u.successors.len() > MAX_SUCCESSORS || u.visit_gaps_min.len() > MAX_GAPS {
                return Err(UsageError::Invalid(format!(
                    "app {name:?} has {} successors and {} gaps, at most {MAX_SUCCESSORS} and {MAX_GAPS}",
                    u.successors.len(),
                    u.visit_gaps_min.len()
                )));
            }
        }
        Ok(())
    }

    /// Parses and checks a saved model.
    pub fn from_json(text: &str) -> Result<Self, UsageError> {
        let m: Self =
            serde_json::from_str(text).map_err(|e| UsageError::Malformed(e.to_string()))?;
        m.validate()?;
        Ok(m)
    }
}

/// The hour of the day of a Unix time (UTC).
pub fn hour_of(unix_ms: u64) -> usize {
    ((unix_ms % DAY_MS) / HOUR_MS) as usize
}

/// Counts `app` as a successor; a new one replaces the least counted when
/// the list is full (and starts from its count, space-saving style, so an
/// app that keeps coming climbs).
fn count_successor(list: &mut Vec<Successor>, app: &str) {
    if let Some(s) = list.iter_mut().find(|s| s.app == app) {
        s.count = s.count.saturating_add(1);
    } else if list.len() < MAX_SUCCESSORS {
        list.push(Successor {
            app: app.to_string(),
            count: 1,
        });
    } else if let Some(min) = list.iter_mut().min_by_key(|s| s.count) {
        min.app = app.to_string();
        min.count = min.count.saturating_add(1);
    }
    list.sort_by(|a, b| b.count.cmp(&a.count).then(a.app.cmp(&b.app)));
}

/// From the app's visit gaps longer than its idle time x: (the share ending
/// within x + H, their mean remaining time capped at H in ms, their
/// number); None when no gap is that long.
fn gap_reuse(u: &AppUsage, unix_ms: u64, horizon_ms: u64) -> Option<(f64, f64, f64)> {
    let idle = unix_ms.saturating_sub(u.last_visit_unix_ms?);
    let (mut n, mut within, mut rest) = (0u32, 0u32, 0.0f64);
    for &g in &u.visit_gaps_min {
        let g = u64::from(g) * 60_000;
        if g <= idle {
            continue;
        }
        n += 1;
        let left = g - idle;
        if left <= horizon_ms {
            within += 1;
        }
        rest += left.min(horizon_ms) as f64;
    }
    (n > 0).then(|| {
        let n = f64::from(n);
        (f64::from(within) / n, rest / n, n)
    })
}

/// e^−x for x ≥ 0: a Taylor series below 1/32 (most hours of most apps
/// see a small fraction of a visit; the error is below x⁷/5040 < 1e-14),
/// the library's exp above.
fn exp_neg(x: f64) -> f64 {
    if x < 1.0 / 32.0 {
        1.0 - x
            * (1.0
                - x / 2.0 * (1.0 - x / 3.0 * (1.0 - x / 4.0 * (1.0 - x / 5.0 * (1.0 - x / 6.0)))))
    } else {
        (-x).exp()
    }
}

/// (P(reuse within H), E[min(T, H)] in ms) for a Poisson process whose
/// rate per hour repeats daily (`rates`), starting at `unix_ms`.
fn poisson_reuse(rates: &[f64; HOURS], unix_ms: u64, horizon_ms: u64) -> (f64, f64) {
    if horizon_ms == 0 {
        return (0.0, 0.0);
    }
    // Survival through each whole hour of the day, once (the only
    // exponentials but two: a decision prices every app).
    let hour_surv: [f64; HOURS] = std::array::from_fn(|h| exp_neg(rates[h]));
    // An hour segment of `len` ms at hour h: (survival factor, time alive
    // per unit of survival at its start), ms.
    let segment = |h: usize, len: u64, surv_len: f64| -> f64 {
        let r = rates[h] * len as f64 / HOUR_MS as f64;
        if r > 1e-12 {
            (1.0 - surv_len) / r * len as f64
        } else {
            len as f64
        }
    };
    // Walk hour segments from now: the rest of this hour, the next 23,
    // and the start of this hour tomorrow (one day in all), then repeat.
    let day = DAY_MS.min(horizon_ms);
    let mut t = 0u64;
    let mut surv = 1.0f64;
    let mut alive_ms = 0.0f64;
    let h0 = hour_of(unix_ms);
    let into = unix_ms % HOUR_MS;
    let mut h = h0;
    let mut seg = HOUR_MS - into;
    while t < day {
        let len = seg.min(day - t);
        let f = if len == HOUR_MS {
            hour_surv[h]
        } else {
            exp_neg(rates[h] * len as f64 / HOUR_MS as f64)
        };
        alive_ms += surv * segment(h, len, f);
        surv *= f;
        t += len;
        h = (h + 1) % HOURS;
        seg = HOUR_MS;
    }
    if horizon_ms <= DAY_MS {
        return (1.0 - surv, alive_ms);
    }
    // Whole days repeat the first; a partial last day is taken at the
    // day's mean rate (its share of the day's hazard).
    let days = horizon_ms / DAY_MS;
    let rest = (horizon_ms % DAY_MS) as f64 / DAY_MS as f64;
    let (mut total_alive, mut s) = (0.0, 1.0);
    for _ in 0..days {
        total_alive += s * alive_ms;
        s *= surv;
    }
    if rest > 0.0 {
        let r = -surv.ln() * rest;
        let len = rest * DAY_MS as f64;
        total_alive += if r > 1e-12 {
            s * (1.0 - (-r).exp()) / r * len
        } else {
            s * len
        };
        s *= (-r).exp();
    }
    (1.0 - s, total_alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIN: u64 = 30 * 60 * 1000;

    #[test]
    fn visits_count_by_hour_and_reopens_within_the_window_are_one_visit() {
        let mut m = UsageModel::new();
        let t0 = 10 * DAY_MS + 20 * HOUR_MS;
        m.record_open("a", t0, WIN);
        m.record_open("a", t0 + 10 * 60_000, WIN);
        m.record_open("a", t0 + DAY_MS, WIN);
        let u = &m.apps["a"];
        assert_eq!(u.visits_by_hour[20], 2);
        assert_eq!(u.opens, 3);
        assert_eq!(u.visits(), 2);
    }

    #[test]
    fn an_evening_app_is_likelier_in_the_evening_than_at_dawn() {
        let mut m = UsageModel::new();
        for d in 0..14 {
            m.record_open("eve", d * DAY_MS + 20 * HOUR_MS, WIN);
        }
        let now = 14 * DAY_MS;
        let r = m.hourly_rates("eve", now);
        assert!(r[20] > 10.0 * r[5], "{r:?}");
        // Within 6 h from 15:00 (the evening is in it) vs from 02:00.
        let pm = m
            .estimate("eve", None, now + 15 * HOUR_MS, 6 * HOUR_MS)
            .unwrap();
        let am = m
            .estimate("eve", None, now + 2 * HOUR_MS, 6 * HOUR_MS)
            .unwrap();
        assert!(pm.p_reuse > 0.5 && am.p_reuse < 0.2, "{pm:?} {am:?}");
        // Over a week both are near certain; expected idle stays under a day.
        let w = m
            .estimate("eve", None, now + 15 * HOUR_MS, 7 * DAY_MS)
            .unwrap();
        assert!(
            w.p_reuse > 0.99 && w.expected_idle_ms < DAY_MS as f64,
            "{w:?}"
        );
    }

    #[test]
    fn poisson_reuse_matches_the_closed_form_for_a_constant_rate() {
        let rates = [0.1; HOURS];
        for h in [HOUR_MS / 2, 5 * HOUR_MS, DAY_MS, 3 * DAY_MS + 7 * HOUR_MS] {
            let (p, e) = poisson_reuse(&rates, 12_345_678, h);
            let hh = h as f64 / HOUR_MS as f64;
            let p_exact = 1.0 - (-0.1 * hh).exp();
            let e_exact = p_exact / 0.1 * HOUR_MS as f64;
            assert!((p - p_exact).abs() < 1e-9, "{h}: {p} vs {p_exact}");
            assert!(
                (e - e_exact).abs() / e_exact < 1e-9,
                "{h}: {e} vs {e_exact}"
            );
        }
        let (p, e) = poisson_reuse(&[0.0; HOURS], 0, DAY_MS);
        assert_eq!((p, e), (0.0, DAY_MS as f64));
    }

    #[test]
    fn exp_neg_is_exp() {
        for i in 0..2000 {
            let x = i as f64 / 4000.0;
            assert!((exp_neg(x) - (-x).exp()).abs() < 1e-12, "{x}");
        }
    }

    #[test]
    fn successors_are_bounded_and_the_next_app_is_likely() {
        let mut m = UsageModel::new();
        let mut t = 0;
        for i in 0..40 {
            m.record_open("mail", t, WIN);
            t += 60_000;
            // "docs" follows mail three times in four.
            let next = if i % 4 == 3 {
                format!("x{i}")
            } else {
                "docs".to_string()
            };
            m.record_open(&next, t, WIN);
            t += 60_000;
        }
        let s = &m.apps["mail"].successors;
        assert!(s.len() <= MAX_SUCCESSORS);
        assert_eq!(s[0].app, "docs");
        assert!(m.p_next(Some("mail"), "docs") > 0.6);
        assert_eq!(m.p_next(Some("mail"), "nope"), 0.0);
        assert_eq!(m.p_next(None, "docs"), 0.0);
    }

    #[test]
    fn predictions_are_deterministic_and_survive_a_round_trip() {
        let mut a = UsageModel::new();
        let mut b = UsageModel::new();
        let mut r = crate::rng::SplitMix::new(7);
        for _ in 0..500 {
            let app = format!("app{}", r.next_u64() % 9);
            let t = r.next_u64() % (30 * DAY_MS);
            a.record_open(&app, t, WIN);
            b.record_open(&app, t, WIN);
        }
        let json = serde_json::to_string(&a).unwrap();
        let c = UsageModel::from_json(&json).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        let now = 31 * DAY_MS;
        for i in 0..9 {
            let app = format!("app{i}");
            let x = a.estimate(&app, Some("app1"), now, 7 * DAY_MS).unwrap();
            let y = c.estimate(&app, Some("app1"), now, 7 * DAY_MS).unwrap();
            assert_eq!(x.p_reuse.to_bits(), y.p_reuse.to_bits());
            assert_eq!(x.expected_idle_ms.to_bits(), y.expected_idle_ms.to_bits());
        }
        assert!(UsageModel::from_json("{\"format\":\"other\",\"version\":1}").is_err());
        assert!(UsageModel::from_json("not json").is_err());
    }

    #[test]
    fn a_regular_app_is_certain_where_a_poisson_one_is_not() {
        let mut m = UsageModel::new();
        for d in 0..20 {
            m.record_open("eve", d * DAY_MS + 20 * HOUR_MS, WIN);
        }
        assert_eq!(m.apps["eve"].visit_gaps_min.len(), 19);
        // 15:00 the next day: every gap (24 h) ends within 5 h from now.
        let e = m
            .estimate("eve", None, 20 * DAY_MS + 15 * HOUR_MS, 6 * HOUR_MS)
            .unwrap();
        assert!(e.p_reuse > 0.9, "{e:?}");
        let mean_h = e.expected_idle_ms / HOUR_MS as f64;
        assert!((4.5..5.5).contains(&mean_h), "{e:?}");
        // Gaps kept are bounded.
        for d in 20..100 {
            m.record_open("eve", d * DAY_MS + 20 * HOUR_MS, WIN);
        }
        assert_eq!(m.apps["eve"].visit_gaps_min.len(), MAX_GAPS);
    }

    #[test]
    fn bound_drops_the_apps_opened_longest_ago() {
        let mut m = UsageModel::new();
        for i in 0..10u64 {
            m.record_open(&format!("a{i}"), i * 1000, WIN);
        }
        m.bound(4);
        let names: Vec<&String> = m.apps.keys().collect();
        assert_eq!(names, ["a6", "a7", "a8", "a9"]);
    }
}
