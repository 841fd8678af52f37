//! The reclaimer's thresholds derived from the domain's own apps, so that a
//! daemon needs no sizing by hand (docs/daemon.md, "Sizing").
//!
//! Algorithm 1 of the AppFlow paper (§4.2.1) switches to efficiency-first
//! when M_aval < M_F and n_alloc > N_alloc. The paper sets N_alloc for its
//! phones (12,800 pages per 100 ms, §6.5.2) and calls M_F "system-specific".
//! Both depend on the apps the domain must absorb:
//!
//! * **M_F** — the largest launch the domain must absorb: an app's anonymous
//!   allocation during launch (M_sum) plus the file bytes its launch reads,
//!   from its profile, above the killer's floor. Rebalancing pages
//!   background apps out while M_aval is below M_F, so that the next launch
//!   finds that much free instead of paying for the reclaim itself; and a
//!   launch has only what is above the floor (the stream's room is M_aval
//!   less the floor, efficiency-first yields and the killer wakes at it),
//!   so M_F is the need plus the floor. With the need alone, a GB-scale
//!   app's launch on the deployment harness began with its stream's room
//!   exactly a floor short of its need, and every launch yielded at the
//!   floor with its stream cut. At least `low_memory_fraction` of the
//!   domain; at most the domain less the floor.
//! * **N_alloc** — half the slowest launch's allocation rate, so that
//!   every profiled launch is seen as the burst it is: the rate the
//!   scheduler measured over the app's last launch in this domain (pages
//!   allocated per tick over the busiest half of its ticks,
//!   [`launch_alloc_rate`], the daemon's own worker's faults left out),
//!   else its profile's (M_sum + file bytes over its recorded launch time).
//!   The mean over every tick of the launch counted its CPU-only phases (a
//!   model's first token, a JVM's JIT) as allocation at rate zero: on the
//!   deployment harness it put N_alloc at 866-1,911 pages per tick, under
//!   what the domain's background faulted while nothing launched. Never above the paper's
//!   12,800 (§6.5.2, Fig. 18b: larger thresholds delay reclaim and slow the
//!   launch by up to 19.9 %), never below the demand floor of readiness
//!   (half the device's 4 KiB read rate, [`crate::detect::ReadinessConfig`]):
//!   a rate the slowest storage read outpaces is no burst.
//!
//! Pure: the caller passes the profiles, the measurements and the device.

use crate::detect::ReadinessConfig;
use crate::profile::LaunchProfile;
use crate::storage::ThroughputCurve;
use crate::PAGE_BYTES;
use serde::Serialize;
use std::collections::BTreeMap;

/// Ticks of a launch whose allocation is kept for its rate: 25.6 s of
/// 100 ms ticks (the deployment harness's longest launch, the ML app on
/// flash, takes about 13 s), 1 KiB an app. Each launching app keeps its
/// own list: at 6,000 ticks, 256 apps held launching (the socket soak)
/// took the daemon past its `20 MiB` budget.
pub const LAUNCH_TICKS_KEPT: usize = 256;

/// A launch's allocation rate, pages per tick, from the pages allocated in
/// each of its ticks: the mean over its busiest half of ticks (the rate
/// while it allocates; a launch's CPU-only and I/O-wait phases are not
/// allocation). None for no ticks or no allocation.
pub fn launch_alloc_rate(ticks: &[u32]) -> Option<f64> {
    if ticks.is_empty() {
        return None;
    }
    let mut v = ticks.to_vec();
    v.sort_unstable_by(|a, b| b.cmp(a));
    let half = v.len().div_ceil(2);
    let sum: u64 = v[..half].iter().map(|&t| u64::from(t)).sum();
    (sum > 0).then(|| sum as f64 / half as f64)
}

/// The paper's N_alloc (§6.5.2), the upper bound of the derived one.
pub const PAPER_ALLOC_THRESHOLD_PAGES: u64 = 12_800;

/// One app's launch as the sizing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LaunchNeed {
    /// M_sum + the file bytes of its launch, bytes.
    pub need_bytes: u64,
    /// Mean pages allocated per tick over its launch, if known.
    pub rate_pages_per_tick: Option<f64>,
    /// Whether the rate was measured in this domain (else from the profile).
    pub measured: bool,
}

/// What the launch of one profiled app needs and how fast it allocates.
/// `measured`: mean pages per tick the scheduler saw over its last launch.
pub fn launch_need(p: &LaunchProfile, measured: Option<f64>, tick_ms: u64) -> LaunchNeed {
    let need_bytes = p.anon_launch_bytes.saturating_add(p.file_bytes());
    let from_profile = (p.last_launch_ms > 0 && need_bytes > 0).then(|| {
        let ticks = p.last_launch_ms as f64 / tick_ms.max(1) as f64;
        need_bytes as f64 / PAGE_BYTES as f64 / ticks.max(1.0)
    });
    let rate = measured.filter(|r| *r > 0.0).or(from_profile);
    LaunchNeed {
        need_bytes,
        rate_pages_per_tick: rate,
        measured: measured.is_some_and(|r| r > 0.0),
    }
}

/// The derived thresholds and where each came from (for `status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sizing {
    /// M_F, bytes.
    pub low_memory_bytes: u64,
    /// The app whose launch set M_F (None: the fraction of the domain).
    pub low_memory_app: Option<String>,
    /// N_alloc, pages per tick.
    pub alloc_threshold_pages: u64,
    /// The app whose launch rate set N_alloc (None: a bound).
    pub alloc_app: Option<String>,
    /// Whether that rate was measured in this domain.
    pub alloc_measured: bool,
}

/// N_alloc's least value, pages per tick: what reading alone makes at the
/// readiness rule's demand floor (half the storage's 4 KiB throughput), so
/// that an app reading its files is never taken for an allocation burst.
pub fn alloc_floor_pages(curve: &ThroughputCurve, tick_ms: u64) -> u64 {
    (ReadinessConfig::for_device(curve).quiet_floor_pages_per_s as f64 * tick_ms as f64 / 1000.0)
        .ceil()
        .max(1.0) as u64
}

/// Derives M_F and N_alloc for a domain of `total_bytes` from the apps'
/// launches ([`launch_need`], by app). `fraction`: M_F's least share of the
/// domain; `floor_bytes`: the killer's trigger level (M_F is the largest
/// need above it, never above the domain less it).
pub fn derive(
    needs: &BTreeMap<String, LaunchNeed>,
    total_bytes: u64,
    fraction: f64,
    floor_bytes: u64,
    curve: &ThroughputCurve,
    tick_ms: u64,
) -> Sizing {
    let least = (total_bytes as f64 * fraction) as u64;
    let most = total_bytes.saturating_sub(floor_bytes).max(least);
    let largest = needs
        .iter()
        .max_by_key(|(name, n)| (n.need_bytes, std::cmp::Reverse(*name)));
    let above_floor = |n: &LaunchNeed| n.need_bytes.saturating_add(floor_bytes);
    let (low_memory_bytes, low_memory_app) = match largest {
        Some((name, n)) if above_floor(n) > least => (above_floor(n).min(most), Some(name.clone())),
        _ => (least, None),
    };
    let floor_pages = alloc_floor_pages(curve, tick_ms);
    let slowest = needs
        .iter()
        .filter_map(|(name, n)| n.rate_pages_per_tick.map(|r| (name, n, r)))
        .min_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(b.0)));
    let (alloc_threshold_pages, alloc_app, alloc_measured) = match slowest {
        Some((name, n, rate)) => {
            let half = (rate / 2.0).floor() as u64;
            let bounded = half.clamp(floor_pages, PAPER_ALLOC_THRESHOLD_PAGES.max(floor_pages));
            let from_app = bounded == half;
            (
                bounded,
                from_app.then(|| name.clone()),
                from_app && n.measured,
            )
        }
        None => (PAPER_ALLOC_THRESHOLD_PAGES.max(floor_pages), None, false),
    };
    Sizing {
        low_memory_bytes,
        low_memory_app,
        alloc_threshold_pages,
        alloc_app,
        alloc_measured,
    }
}

/// One finding of [`checks`]: the sizing guide as a test of the thresholds
/// in force (`appflow status`, `appflow doctor --config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The thresholds hold for this finding.
    pub ok: bool,
    /// What was checked, with the numbers.
    pub what: String,
}

/// Checks the thresholds in force against the apps' launches: M_F covers
/// the largest launch above the killer's floor, `floor_bytes` (else
/// rebalancing stops short of what that launch needs free), and N_alloc is at most half of every launch's allocation
/// rate (else that app's launches never switch the reclaimer).
pub fn checks(
    needs: &BTreeMap<String, LaunchNeed>,
    low_memory_bytes: u64,
    alloc_threshold_pages: u64,
    total_bytes: u64,
    floor_bytes: u64,
    floor_pages: u64,
) -> Vec<Check> {
    if needs.is_empty() {
        return vec![Check {
            ok: false,
            what: "no app profile yet: M_F and N_alloc are defaults, not sized to any launch \
                   (record one with `appflow record`, or let [detect] learn one)"
                .into(),
        }];
    }
    let mib = |b: u64| b as f64 / crate::MIB as f64;
    let mut out = Vec::new();
    if let Some((name, n)) = needs.iter().max_by_key(|(_, n)| n.need_bytes) {
        let most = total_bytes.saturating_sub(floor_bytes);
        let want = n.need_bytes.saturating_add(floor_bytes);
        out.push(Check {
            ok: low_memory_bytes >= want.min(most),
            what: format!(
                "M_F {:.0} MiB against the largest launch, {name}'s {:.0} MiB (M_sum + files) \
                 above the floor of {:.0} MiB{}",
                mib(low_memory_bytes),
                mib(n.need_bytes),
                mib(floor_bytes),
                if want <= most {
                    ""
                } else {
                    ", larger than the domain"
                }
            ),
        });
    }
    for (name, n) in needs {
        let Some(rate) = n.rate_pages_per_tick else {
            continue;
        };
        // Below the floor, reading alone would pass for a burst: a launch
        // that allocates that slowly is held by the floor.
        let at_floor = rate / 2.0 < floor_pages as f64;
        out.push(Check {
            ok: (alloc_threshold_pages as f64) <= (rate / 2.0).max(floor_pages as f64) + 1.0,
            what: format!(
                "N_alloc {alloc_threshold_pages} pages/tick against half of {name}'s launch rate, \
                 {:.0} pages/tick ({}){}",
                rate / 2.0,
                if n.measured {
                    "measured here"
                } else {
                    "from its profile"
                },
                if at_floor {
                    format!(", under the storage's floor of {floor_pages}")
                } else {
                    String::new()
                }
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_launchs_rate_is_its_busiest_half() {
        assert_eq!(super::launch_alloc_rate(&[]), None);
        assert_eq!(super::launch_alloc_rate(&[0, 0, 0]), None);
        // 2 s of loading at 10,000 pages per tick, 8 s of computing: the
        // mean over all ticks would be 2,000.
        let mut t = vec![10_000u32; 20];
        t.extend([0; 80]);
        assert_eq!(super::launch_alloc_rate(&t), Some(4_000.0));
        let t = [5u32, 1, 9];
        assert_eq!(super::launch_alloc_rate(&t), Some(7.0));
    }

    use super::*;
    use crate::{GIB, MIB};

    fn need(bytes: u64, rate: Option<f64>) -> LaunchNeed {
        LaunchNeed {
            need_bytes: bytes,
            rate_pages_per_tick: rate,
            measured: false,
        }
    }

    #[test]
    fn m_f_is_the_largest_launch_within_bounds() {
        let curve = ThroughputCurve::phone_default();
        let mut needs = BTreeMap::new();
        needs.insert("small".to_string(), need(50 * MIB, Some(3000.0)));
        needs.insert("ml".to_string(), need(2700 * MIB, Some(20_000.0)));
        let s = derive(&needs, 4 * GIB, 0.15, 200 * MIB, &curve, 100);
        // The need above the floor: what the launch can use before
        // efficiency-first yields and the killer wakes.
        assert_eq!(s.low_memory_bytes, 2700 * MIB + 200 * MIB);
        assert_eq!(s.low_memory_app.as_deref(), Some("ml"));
        // The slowest launch sets N_alloc: half its rate.
        assert_eq!(s.alloc_threshold_pages, 1500);
        assert_eq!(s.alloc_app.as_deref(), Some("small"));
        // A launch larger than the domain: the domain less the floor.
        needs.insert("huge".to_string(), need(8 * GIB, None));
        let s = derive(&needs, 4 * GIB, 0.15, 200 * MIB, &curve, 100);
        assert_eq!(s.low_memory_bytes, 4 * GIB - 200 * MIB);
        // No profile: the fraction and the paper's N_alloc.
        let s = derive(&BTreeMap::new(), 4 * GIB, 0.15, 200 * MIB, &curve, 100);
        assert_eq!(s.low_memory_bytes, (4.0 * GIB as f64 * 0.15) as u64);
        assert_eq!(s.low_memory_app, None);
        assert_eq!(s.alloc_threshold_pages, PAPER_ALLOC_THRESHOLD_PAGES);
    }

    #[test]
    fn n_alloc_is_bounded_by_the_paper_and_the_storage_floor() {
        let curve = ThroughputCurve::phone_default();
        let floor = (ReadinessConfig::for_device(&curve).quiet_floor_pages_per_s as f64 / 10.0)
            .ceil() as u64;
        let mut needs = BTreeMap::new();
        needs.insert("fast".to_string(), need(GIB, Some(100_000.0)));
        let s = derive(&needs, 8 * GIB, 0.15, 0, &curve, 100);
        assert_eq!(s.alloc_threshold_pages, PAPER_ALLOC_THRESHOLD_PAGES);
        assert_eq!(s.alloc_app, None);
        needs.insert("trickle".to_string(), need(MIB, Some(2.0)));
        let s = derive(&needs, 8 * GIB, 0.15, 0, &curve, 100);
        assert_eq!(s.alloc_threshold_pages, floor);
    }

    #[test]
    fn checks_flag_a_hand_sized_n_alloc_above_a_launch_rate() {
        let mut needs = BTreeMap::new();
        needs.insert("ml".to_string(), need(2700 * MIB, Some(17_000.0)));
        needs.insert("office".to_string(), need(300 * MIB, Some(4_000.0)));
        // The hand sizing: N_alloc 12,800, M_F 3.2 GiB.
        let c = checks(&needs, 3277 * MIB, 12_800, 4 * GIB, 200 * MIB, 784);
        assert!(c[0].ok, "{c:?}");
        assert_eq!(c.iter().filter(|c| !c.ok).count(), 2, "{c:?}");
        let c = checks(&needs, 3277 * MIB, 2000, 4 * GIB, 200 * MIB, 784);
        assert!(c.iter().all(|c| c.ok), "{c:?}");
        let c = checks(&needs, 600 * MIB, 2000, 4 * GIB, 200 * MIB, 784);
        assert!(!c[0].ok);
        // The need itself, with no room for the floor, falls short.
        let c = checks(&needs, 2700 * MIB, 2000, 4 * GIB, 200 * MIB, 784);
        assert!(!c[0].ok, "{c:?}");
        assert!(!checks(&BTreeMap::new(), 0, 1, 1, 0, 1)[0].ok);
    }

    /// The docs' demo app reads 68 MiB and allocates next to nothing: half
    /// its measured rate (119 pages per tick) is under the storage's floor,
    /// where `derive` holds N_alloc. The check agrees with `derive` (it
    /// warned about the derived value before).
    #[test]
    fn checks_accept_the_floor_derive_holds_a_slow_launch_at() {
        let curve = ThroughputCurve::phone_default();
        let mut needs = BTreeMap::new();
        needs.insert("demo".to_string(), need(68 * MIB, Some(119.0)));
        let s = derive(&needs, 512 * MIB, 0.15, 25 * MIB, &curve, 100);
        let floor = alloc_floor_pages(&curve, 100);
        assert_eq!(s.alloc_threshold_pages, floor);
        let c = checks(
            &needs,
            s.low_memory_bytes,
            s.alloc_threshold_pages,
            512 * MIB,
            25 * MIB,
            floor,
        );
        assert!(c.iter().all(|c| c.ok), "{c:?}");
        let c = checks(
            &needs,
            s.low_memory_bytes,
            floor * 2,
            512 * MIB,
            25 * MIB,
            floor,
        );
        assert!(c.iter().any(|c| !c.ok), "{c:?}");
    }

    #[test]
    fn a_measured_rate_wins_over_the_profile() {
        let mut p = crate::profile::synthetic("a", 10, 1, 100 * MIB);
        p.anon_launch_bytes = 100 * MIB;
        p.last_launch_ms = 1000;
        let from_profile = launch_need(&p, None, 100);
        let want = (100 * MIB + p.file_bytes()) as f64 / 4096.0 / 10.0;
        assert!((from_profile.rate_pages_per_tick.unwrap() - want).abs() < 1e-6);
        assert!(!from_profile.measured);
        let measured = launch_need(&p, Some(777.0), 100);
        assert_eq!(measured.rate_pages_per_tick, Some(777.0));
        assert!(measured.measured);
        // A profile with no launch time and nothing measured has no rate.
        p.last_launch_ms = 0;
        assert_eq!(launch_need(&p, None, 100).rate_pages_per_tick, None);
    }
}
