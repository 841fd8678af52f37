//! CPU bandwidth of a cpu cgroup: `cpu.stat`.
//!
//! | quantity | v1 key | v2 key |
//! |---|---|---|
//! | CFS periods with runnable tasks | `nr_periods` | `nr_periods` |
//! | periods the quota ran out | `nr_throttled` | `nr_throttled` |
//! | time throttled | `throttled_time` (ns) | `throttled_usec` (µs) |
//!
//! A cgroup with no quota reads as all zeros (v1 prints the keys as 0; v2
//! prints only its usage keys until the cpu controller is enabled).

use super::memcg::kv_map;
use super::{read_text, ReadError};
use std::path::Path;

/// CFS bandwidth counters of one cpu cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuStat {
    /// Enforcement periods in which the cgroup had runnable tasks.
    pub nr_periods: u64,
    /// Periods in which it ran out of quota.
    pub nr_throttled: u64,
    /// Time its tasks waited for the next period, ns.
    pub throttled_ns: u64,
}

/// Parses a cpu cgroup's `cpu.stat` (v1 or v2).
pub fn parse_cpu_stat(text: &str) -> Result<CpuStat, ReadError> {
    let m = kv_map("cpu.stat", text)?;
    let get = |k: &str| m.get(k).copied();
    Ok(CpuStat {
        nr_periods: get("nr_periods").unwrap_or(0),
        nr_throttled: get("nr_throttled").unwrap_or(0),
        throttled_ns: get("throttled_time")
            .or_else(|| get("throttled_usec").map(|us| us.saturating_mul(1000)))
            .unwrap_or(0),
    })
}

/// Reads `<cgroup_dir>/cpu.stat`.
pub fn read_cpu_stat(cgroup_dir: &Path) -> Result<CpuStat, ReadError> {
    let path = cgroup_dir.join("cpu.stat");
    parse_cpu_stat(&read_text(&path)?).map_err(|e| e.at(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_keys() {
        // The v2 layout (Documentation/admin-guide/cgroup-v2.rst, "CPU Interface Files").
        let s = parse_cpu_stat(
            "usage_usec 10\nuser_usec 6\nsystem_usec 4\nnr_periods 7\nnr_throttled 3\nthrottled_usec 1500\nnr_bursts 0\nburst_usec 0\n",
        )
        .unwrap();
        assert_eq!(
            s,
            CpuStat {
                nr_periods: 7,
                nr_throttled: 3,
                throttled_ns: 1_500_000
            }
        );
        // Usage keys only (no cpu controller): no bandwidth, all zero.
        assert_eq!(
            parse_cpu_stat("usage_usec 0\nuser_usec 0\n").unwrap(),
            CpuStat::default()
        );
        assert!(parse_cpu_stat("").is_err());
        assert!(parse_cpu_stat("nr_periods x\n").is_err());
    }
}
