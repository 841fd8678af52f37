//! The result contract shared by `appflow sim`, `appflow bench` and the
//! daemon's reports (issue #2): one object per run with one entry per policy.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How an app came to the foreground (one definition for the simulator and
/// the testbed): **cold**, no process alive; **warm**, the process is alive
/// but much of its memory is gone (swapped out or its launch files evicted);
/// **hot**, the process and its pages are resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchKind {
    /// No process alive.
    Cold,
    /// Process alive, much of its memory gone.
    Warm,
    /// Process and pages resident.
    Hot,
}

impl LaunchKind {
    /// Share of an app's memory that may be gone while a relaunch still
    /// counts as hot (a tenth, of its anonymous memory or of its launch files).
    pub const HOT_MAX_GONE_SHARE: f64 = 0.1;

    /// The kind of a relaunch: cold when no process is alive; otherwise warm
    /// when more than [`Self::HOT_MAX_GONE_SHARE`] of its anonymous memory
    /// is swapped out or of its launch files is no longer cached, else hot.
    pub fn classify(alive: bool, anon_swapped_share: f64, file_gone_share: f64) -> LaunchKind {
        if !alive {
            LaunchKind::Cold
        } else if anon_swapped_share > Self::HOT_MAX_GONE_SHARE
            || file_gone_share > Self::HOT_MAX_GONE_SHARE
        {
            LaunchKind::Warm
        } else {
            LaunchKind::Hot
        }
    }
}

/// A run's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Device preset name.
    pub device: String,
    /// Workload name.
    pub workload: String,
    /// Seed of the run.
    pub seed: u64,
    /// One entry per policy, in the order requested.
    pub results: Vec<PolicyResult>,
    /// Extra run-level fields (calibration, machine, paper figures).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// One policy's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Summary over the workload's target launches.
    pub summary: Summary,
    /// Per app.
    pub apps: Vec<AppResult>,
    /// Extra per-policy fields (kernel counters, ratios to the baseline).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The summary every policy row has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Target launches measured.
    pub launches: u64,
    /// Cold-launch latency over the target launches, ms.
    pub cold_launch_ms: LatencyStats,
    /// Share of launches under 1 s (the usability cliff, the AppFlow paper §2.1).
    pub under_1s_share: f64,
    /// Launches of apps that had been running and were killed.
    pub cold_relaunches: u64,
    /// Background apps alive at the end.
    pub survivors: u64,
    /// Processes killed.
    pub kills: u64,
    /// Direct reclaims (or reclaim stalls in a cgroup).
    pub direct_reclaims: u64,
    /// Re-faulted pages / evicted pages.
    pub refault_ratio: f64,
    /// Peak bytes held by the preloader.
    pub preload_bytes_peak: u64,
}

/// One app's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppResult {
    /// App name.
    pub app: String,
    /// Launches of the app.
    pub launches: u64,
    /// Its cold-launch latency, ms.
    pub cold_launch_ms: LatencyStats,
}

/// Mean, median and 90th percentile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
}

impl LatencyStats {
    /// Stats of `samples` (all zero when empty). Values are rounded to 0.001
    /// so that reports are byte-stable across platforms' float printing.
    pub fn from_samples(samples: &[f64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        Self {
            mean: round3(mean),
            p50: round3(percentile(&v, 50.0)),
            p90: round3(percentile(&v, 90.0)),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[f64], pct: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Rounds to three decimals.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_use_nearest_rank() {
        let s = LatencyStats::from_samples(&[5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(s.p50, 5.0);
        assert_eq!(s.p90, 9.0);
        assert_eq!(s.mean, 5.5);
        assert_eq!(LatencyStats::from_samples(&[]), LatencyStats::default());
    }

    #[test]
    fn launch_kind_by_what_is_gone() {
        assert_eq!(LaunchKind::classify(false, 0.0, 0.0), LaunchKind::Cold);
        assert_eq!(LaunchKind::classify(true, 0.05, 0.1), LaunchKind::Hot);
        assert_eq!(LaunchKind::classify(true, 0.2, 0.0), LaunchKind::Warm);
        assert_eq!(LaunchKind::classify(true, 0.0, 0.5), LaunchKind::Warm);
        assert_eq!(
            serde_json::to_string(&LaunchKind::Warm).unwrap(),
            "\"warm\""
        );
    }

    #[test]
    fn contract_field_names() {
        let r = RunReport {
            device: "d".into(),
            workload: "w".into(),
            seed: 1,
            results: vec![PolicyResult {
                policy: "android".into(),
                summary: Summary {
                    launches: 1,
                    cold_launch_ms: LatencyStats::from_samples(&[1.0]),
                    under_1s_share: 1.0,
                    cold_relaunches: 0,
                    survivors: 0,
                    kills: 0,
                    direct_reclaims: 0,
                    refault_ratio: 0.0,
                    preload_bytes_peak: 0,
                },
                apps: vec![],
                extra: BTreeMap::new(),
            }],
            extra: BTreeMap::new(),
        };
        let v = serde_json::to_value(&r).unwrap();
        for k in ["device", "workload", "seed", "results"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        let s = &v["results"][0]["summary"];
        for k in [
            "launches",
            "cold_launch_ms",
            "under_1s_share",
            "cold_relaunches",
            "survivors",
            "kills",
            "direct_reclaims",
            "refault_ratio",
            "preload_bytes_peak",
        ] {
            assert!(s.get(k).is_some(), "{k}");
        }
        assert!(s["cold_launch_ms"].get("p90").is_some());
    }
}
