//! Turning measurements into the core's JSON contract
//! (`appflow_core::report::RunReport`, with `oracle` as a policy row) and a
//! table. Pure: no I/O.

use crate::counters::Delta;
use crate::policy::Policy;
use crate::run::{LaunchRecord, Measurement, Scenario};
use appflow_core::report::LaunchKind;
use appflow_core::report::{AppResult, LatencyStats, PolicyResult, RunReport, Summary};
use appflow_core::storage::CurvePoint;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

/// The storage device of the domain.
#[derive(Debug, Clone, Serialize)]
pub struct StorageInfo {
    /// How it is realised.
    pub mechanism: &'static str,
    /// Its model.
    pub flash: crate::flash::FlashParams,
    /// The host's FUSE turnaround, hidden by replying that much before the
    /// model's completion.
    pub host_turnaround: crate::flash::Turnaround,
}

/// The domain's CPU budget (v1 cpu cgroup, CFS bandwidth).
#[derive(Debug, Clone, Serialize)]
pub struct CpuBudget {
    /// Cores of this host each leaf of the domain gets (one phone core: each
    /// app, and the daemon with its preload worker).
    pub cores: f64,
    /// cpu.cfs_quota_us.
    pub quota_us: u64,
    /// cpu.cfs_period_us.
    pub period_us: u64,
    /// cpu.shares (weight against the host's other work).
    pub shares: u64,
    /// How the budget was found: the domain's reclaim held to the device's.
    pub calibration: crate::prepare::CpuCalibration,
}

/// What the report records about the testbed itself (`extra.testbed`).
#[derive(Debug, Clone, Serialize)]
pub struct TestbedInfo {
    /// `--scale`.
    pub scale: f64,
    /// The device preset.
    pub preset: crate::device::Preset,
    /// The domain's memory limit, bytes.
    pub app_memory_bytes: u64,
    /// zram disk size, bytes.
    pub zram_disksize_bytes: u64,
    /// zram's pool cap, bytes.
    pub zram_mem_limit_bytes: u64,
    /// M_p at this scale, bytes.
    pub preload_budget_bytes: u64,
    /// The storage image, bytes.
    pub image_bytes: u64,
    /// The storage device (one for the whole domain) and how it is made.
    pub storage: StorageInfo,
    /// The storage measured inside the domain, one reader.
    pub calibration_bytes_per_sec: Vec<CurvePoint>,
    /// Two readers in different leaves at once.
    pub concurrent_read_bytes_per_sec: Option<crate::prepare::ConcurrentRead>,
    /// Anonymous reclaim measured in the domain, and the N_alloc derived from it.
    pub reclaim_calibration: Option<crate::prepare::ReclaimCalibration>,
    /// The apps' anonymous allocation on the phone core with nothing to
    /// reclaim, bytes/s (the cost of faulting in and filling a launch's heap).
    pub anon_alloc_bytes_per_sec: Option<f64>,
    /// Reading through the page cache on a phone core in the preload
    /// worker's 2 MiB reads, bytes/s (what its stream can fill).
    pub worker_read_bytes_per_sec: Option<f64>,
    /// A foreground reader while an idle-class reader streams: whether
    /// idle-class I/O yields to the foreground.
    pub idle_yield: Option<crate::prepare::IdleYield>,
    /// The domain's CPU budget.
    pub cpu_budget: CpuBudget,
    /// How the profiles were made (`recorded` or `from-spec`).
    pub profiles: &'static str,
    /// When the profiles are not all recorded: how they were made instead
    /// and why (the table prints it).
    pub profiles_note: Option<String>,
    /// Repetitions of each policy.
    pub repetitions: u32,
    /// The target apps.
    pub targets: Vec<String>,
    /// How cold launches are made cold.
    pub cache_drop: &'static str,
    /// The host kernel release.
    pub kernel: String,
    /// CPUs of the host.
    pub cpus: usize,
}

/// The lower median (0 for none).
pub(crate) fn median_u64(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// The latencies that count for a scenario's summary: the target's cold
/// launches (low/medium/high), the round-2 cold relaunches (multitask), the
/// cold launches (trace); always the oracle launches for `oracle`.
fn counted(m: &Measurement, scenario: Scenario) -> Vec<f64> {
    m.launches
        .iter()
        .filter(|l| l.ready)
        .filter(|l| match scenario {
            _ if l.oracle => true,
            Scenario::Multitask => is_cold_relaunch(l),
            _ => l.kind == LaunchKind::Cold,
        })
        .map(|l| l.ms)
        .collect()
}

fn is_cold_relaunch(l: &LaunchRecord) -> bool {
    l.kind == LaunchKind::Cold && l.after_kill
}

/// Builds the report of one scenario. `policies` gives the row order;
/// `skipped` lists policies that could not run, with why.
pub fn build(
    device: &str,
    scenario: Scenario,
    policies: &[Policy],
    ms: &[Measurement],
    skipped: &BTreeMap<String, String>,
    run_extra: BTreeMap<String, serde_json::Value>,
) -> RunReport {
    let mut results = Vec::new();
    for &p in policies {
        if skipped.contains_key(p.name()) {
            continue;
        }
        let mine: Vec<&Measurement> = ms.iter().filter(|m| m.policy == p).collect();
        if mine.is_empty() {
            continue;
        }
        let ok: Vec<&&Measurement> = mine.iter().filter(|m| m.error.is_none()).collect();
        let samples: Vec<f64> = ok.iter().flat_map(|m| counted(m, scenario)).collect();
        let all: Vec<&LaunchRecord> = ok.iter().flat_map(|m| &m.launches).collect();
        let under_1s = if samples.is_empty() {
            0.0
        } else {
            samples.iter().filter(|&&x| x < 1000.0).count() as f64 / samples.len() as f64
        };
        let mut total = Delta::default();
        for m in &ok {
            total.add(&m.delta);
        }
        let n = ok.len().max(1) as u64;
        let cold_relaunches = median_u64(
            ok.iter()
                .map(|m| m.launches.iter().filter(|l| is_cold_relaunch(l)).count() as u64)
                .collect(),
        );
        let mut per_app: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for m in &ok {
            for l in m.launches.iter().filter(|l| l.ready) {
                if l.kind == LaunchKind::Cold || scenario == Scenario::Multitask {
                    per_app.entry(l.app.as_str()).or_default().push(l.ms);
                }
            }
        }
        let apps = per_app
            .iter()
            .map(|(a, v)| AppResult {
                app: a.to_string(),
                launches: v.len() as u64,
                cold_launch_ms: LatencyStats::from_samples(v),
            })
            .collect();
        let switches: Vec<f64> = all
            .iter()
            .filter(|l| l.ready && l.kind != LaunchKind::Cold)
            .map(|l| l.ms)
            .collect();
        let relaunch_all: Vec<f64> = all.iter().filter(|l| l.ready).map(|l| l.ms).collect();
        let mut extra = BTreeMap::new();
        extra.insert("repetitions".into(), json!(ok.len()));
        extra.insert(
            "failed_sessions".into(),
            json!(mine
                .iter()
                .filter_map(|m| m.error.as_ref().map(|e| json!({"rep": m.rep, "error": e})))
                .collect::<Vec<_>>()),
        );
        extra.insert(
            "timeouts".into(),
            json!(all.iter().filter(|l| l.timed_out).count()),
        );
        extra.insert(
            "died_before_ready".into(),
            json!(all.iter().filter(|l| l.died.is_some()).count()),
        );
        let at: Vec<crate::run::AtLaunch> = ok.iter().filter_map(|m| m.at_launch).collect();
        if !at.is_empty() {
            extra.insert(
                "at_target_launch".into(),
                json!({
                    "free_bytes_median": median_u64(at.iter().map(|a| a.free_bytes).collect()),
                    "own_file_refault_pages_median": median_u64(at.iter().map(|a| a.own_file_refault_pages).collect()),
                    "read_bytes_median": median_u64(at.iter().map(|a| a.read_bytes).collect()),
                    "stolen_anon_pages_median": median_u64(at.iter().map(|a| a.kernel.pgsteal_anon).collect()),
                    "stolen_file_pages_median": median_u64(at.iter().map(|a| a.kernel.pgsteal_file).collect()),
                    "cpu_throttled_ms_median": median_u64(at.iter().map(|a| a.cpu_throttled_ms.round() as u64).collect()),
                    "per_rep": at,
                }),
            );
        }
        extra.insert(
            "foreground_killed".into(),
            json!(ok.iter().filter(|m| m.foreground_killed).count()),
        );
        // Totals over the repetitions (the per-session means below round
        // a rare kill down to 0).
        extra.insert(
            "oom_kills_total".into(),
            json!(ok.iter().map(|m| m.delta.oom_kills).sum::<u64>()),
        );
        extra.insert(
            "killed_per_rep".into(),
            json!(ok.iter().map(|m| m.killed.clone()).collect::<Vec<_>>()),
        );
        extra.insert(
            "kernel_counters_per_session".into(),
            json!({
                "pgscan_anon": total.pgscan_anon / n,
                "pgscan_file": total.pgscan_file / n,
                "pgsteal_anon": total.pgsteal_anon / n,
                "pgsteal_file": total.pgsteal_file / n,
                "pgscan_kswapd": total.pgscan_kswapd / n,
                "pgscan_direct": total.pgscan_direct / n,
                "pswpin": total.pswpin / n,
                "pswpout": total.pswpout / n,
                "refault_anon": total.refault_anon / n,
                "refault_file": total.refault_file / n,
                "allocstalls_global": total.allocstalls / n,
                "memcg_limit_hits": total.limit_hits / n,
                "oom_kills": total.oom_kills / n,
                "pgmajfault": total.pgmajfault / n,
                "read_bytes": total.read_bytes / n,
                "read_ios": total.read_ios / n,
            }),
        );
        let dpeak: Vec<u64> = ok
            .iter()
            .filter_map(|m| m.daemon_standby_peak_bytes)
            .collect();
        if !dpeak.is_empty() {
            extra.insert(
                "daemon_standby_bytes_peak".into(),
                json!(dpeak.iter().max().copied().unwrap_or(0)),
            );
        }
        let prepage: Vec<&serde_json::Value> = ok
            .iter()
            .filter_map(|m| m.daemon_prepage.as_ref())
            .collect();
        if !prepage.is_empty() {
            // The daemon's switch prepaging per repetition (status `prepage`).
            extra.insert("prepage_per_rep".into(), json!(prepage));
        }
        let cold: Vec<&serde_json::Value> =
            ok.iter().filter_map(|m| m.daemon_cold.as_ref()).collect();
        if !cold.is_empty() {
            // The daemon's cold marking per repetition (status `cold`).
            extra.insert("cold_per_rep".into(), json!(cold));
        }
        extra.insert(
            "zram_orig_bytes_max".into(),
            json!(ok.iter().map(|m| m.zram.orig_data_bytes).max().unwrap_or(0)),
        );
        extra.insert(
            "zram_pool_bytes_max".into(),
            json!(ok.iter().map(|m| m.zram.pool_bytes).max().unwrap_or(0)),
        );
        if !switches.is_empty() {
            extra.insert(
                "switch_ms".into(),
                json!(LatencyStats::from_samples(&switches)),
            );
        }
        if scenario == Scenario::Multitask {
            extra.insert(
                "relaunch_ms_all".into(),
                json!(LatencyStats::from_samples(&relaunch_all)),
            );
        }
        let load: Vec<f64> = ok
            .iter()
            .flat_map(|m| &m.load_launches)
            .filter(|l| l.ready)
            .map(|l| l.ms)
            .collect();
        if !load.is_empty() {
            extra.insert(
                "load_launch_ms".into(),
                json!(LatencyStats::from_samples(&load)),
            );
        }
        results.push(PolicyResult {
            policy: p.name().to_string(),
            summary: Summary {
                launches: samples.len() as u64,
                cold_launch_ms: LatencyStats::from_samples(&samples),
                under_1s_share: appflow_core::report::round3(under_1s),
                cold_relaunches,
                survivors: median_u64(ok.iter().map(|m| m.survivors).collect()),
                kills: median_u64(ok.iter().map(|m| m.killed.len() as u64).collect()),
                direct_reclaims: total.limit_hits / n,
                refault_ratio: appflow_core::report::round3(total.refault_ratio()),
                preload_bytes_peak: ok.iter().map(|m| m.preload_peak_bytes).max().unwrap_or(0),
            },
            apps,
            extra,
        });
    }
    // Ratios within the run.
    let p50 = |name: &str| {
        results
            .iter()
            .find(|r| r.policy == name)
            .map(|r| r.summary.cold_launch_ms.p50)
            .filter(|&x| x > 0.0)
    };
    let (stock, oracle) = (p50("stock"), p50("oracle"));
    for r in &mut results {
        let me = r.summary.cold_launch_ms.p50;
        if let Some(s) = stock {
            r.extra.insert(
                "p50_ratio_to_stock".into(),
                json!(appflow_core::report::round3(me / s)),
            );
        }
        if let Some(o) = oracle {
            r.extra.insert(
                "p50_ratio_to_oracle".into(),
                json!(appflow_core::report::round3(me / o)),
            );
        }
    }
    let mut extra = run_extra;
    if !skipped.is_empty() {
        extra.insert("skipped_policies".into(), json!(skipped));
    }
    RunReport {
        device: device.to_string(),
        workload: scenario.name().to_string(),
        seed: 0,
        results,
        extra,
    }
}

/// A text table of a report.
pub fn table(r: &RunReport) -> String {
    let mut s = format!(
        "scenario {} on {}: cold launch of the measured app(s), ms\n",
        r.workload, r.device
    );
    s.push_str(&format!(
        "{:<12} {:>4} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6} {:>6} {:>7} {:>9} {:>9}\n",
        "policy",
        "n",
        "p50",
        "p90",
        "mean",
        "xstock",
        "xoracle",
        "kills",
        "alive",
        "tmout",
        "swapout",
        "preload"
    ));
    for p in &r.results {
        let x = |k: &str| {
            p.extra
                .get(k)
                .and_then(|v| v.as_f64())
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "-".into())
        };
        let swapout = p
            .extra
            .get("kernel_counters_per_session")
            .and_then(|c| c.get("pswpout"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
            * 4096;
        s.push_str(&format!(
            "{:<12} {:>4} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8} {:>6} {:>6} {:>7} {:>8.1}M {:>8.1}M\n",
            p.policy,
            p.summary.launches,
            p.summary.cold_launch_ms.p50,
            p.summary.cold_launch_ms.p90,
            p.summary.cold_launch_ms.mean,
            x("p50_ratio_to_stock"),
            x("p50_ratio_to_oracle"),
            p.summary.kills,
            p.summary.survivors,
            p.extra.get("timeouts").and_then(|v| v.as_u64()).unwrap_or(0),
            swapout as f64 / 1048576.0,
            p.summary.preload_bytes_peak as f64 / 1048576.0,
        ));
    }
    if let Some(sk) = r.extra.get("skipped_policies").and_then(|v| v.as_object()) {
        for (k, v) in sk {
            s.push_str(&format!("{k:<12} skipped: {}\n", v.as_str().unwrap_or("")));
        }
    }
    if let Some(note) = r
        .extra
        .get("testbed")
        .and_then(|t| t.get("profiles_note"))
        .and_then(|v| v.as_str())
    {
        s.push_str(&format!("launch profiles: {note}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a test launch came about.
    #[derive(Clone, Copy)]
    enum How {
        Cold,
        ColdRelaunch,
        Switch,
        Oracle,
    }

    fn rec(app: &str, ms: f64, how: How) -> LaunchRecord {
        LaunchRecord {
            app: app.into(),
            ms,
            kind: match how {
                How::Switch => LaunchKind::Warm,
                _ => LaunchKind::Cold,
            },
            after_kill: matches!(how, How::ColdRelaunch),
            oracle: matches!(how, How::Oracle),
            ready: true,
            timed_out: false,
            died: None,
        }
    }

    fn m(p: Policy, rep: u32, ms: f64, how: How) -> Measurement {
        Measurement {
            scenario: Scenario::High,
            policy: p,
            rep,
            launches: vec![rec("llm", ms, how)],
            load_launches: vec![rec("chat", 10.0, How::Cold)],
            delta: Delta::default(),
            killed: vec!["chat".into()],
            foreground_killed: false,
            survivors: 4,
            preload_peak_bytes: 7,
            daemon_standby_peak_bytes: None,
            daemon_prepage: None,
            daemon_cold: None,
            zram: crate::live::ZramStats {
                orig_data_bytes: 1,
                pool_bytes: 2,
            },
            at_launch: None,
            timeline: vec![],
            error: None,
        }
    }

    #[test]
    fn report_has_oracle_row_ratios_and_stats() {
        let ms = vec![
            m(Policy::named("stock"), 0, 2000.0, How::Cold),
            m(Policy::Oracle, 0, 500.0, How::Oracle),
            m(Policy::named("stock"), 1, 3000.0, How::Cold),
            m(Policy::Oracle, 1, 600.0, How::Oracle),
        ];
        let mut skipped = BTreeMap::new();
        skipped.insert("appflow".to_string(), "daemon missing".to_string());
        let r = build(
            "phone-6gb",
            Scenario::High,
            &[
                Policy::named("stock"),
                Policy::named("appflow"),
                Policy::Oracle,
            ],
            &ms,
            &skipped,
            BTreeMap::new(),
        );
        assert_eq!(r.results.len(), 2);
        let stock = &r.results[0];
        assert_eq!(stock.summary.launches, 2);
        assert_eq!(stock.summary.cold_launch_ms.p50, 2000.0);
        assert_eq!(stock.summary.cold_launch_ms.mean, 2500.0);
        assert_eq!(stock.summary.kills, 1);
        assert_eq!(stock.summary.under_1s_share, 0.0);
        assert_eq!(stock.extra["p50_ratio_to_oracle"], json!(4.0));
        assert_eq!(r.results[1].policy, "oracle");
        assert_eq!(r.results[1].summary.under_1s_share, 1.0);
        let t = table(&r);
        assert!(
            t.contains("oracle") && t.contains("skipped: daemon missing"),
            "{t}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["extra"]["skipped_policies"]["appflow"].is_string());
    }

    #[test]
    fn multitask_counts_cold_relaunches_only() {
        let mut a = m(Policy::named("stock"), 0, 900.0, How::ColdRelaunch);
        a.launches.push(rec("chat", 50.0, How::Switch));
        let r = build(
            "d",
            Scenario::Multitask,
            &[Policy::named("stock")],
            &[a],
            &BTreeMap::new(),
            BTreeMap::new(),
        );
        let s = &r.results[0];
        assert_eq!(s.summary.launches, 1);
        assert_eq!(s.summary.cold_relaunches, 1);
        assert!(s.extra.contains_key("switch_ms"));
        assert!(s.extra.contains_key("relaunch_ms_all"));
    }

    /// Issue 30, defect 3: a run whose recording failed fell back to
    /// profiles from the specs, and the table the user reads said nothing.
    #[test]
    fn the_table_says_when_profiles_were_not_recorded() {
        use crate::prepare::ProfileSource;
        let report = |src: &ProfileSource| RunReport {
            device: "d".into(),
            workload: "high".into(),
            seed: 0,
            results: vec![],
            extra: [(
                "testbed".to_string(),
                serde_json::json!({"profiles": src.name(), "profiles_note": src.note()}),
            )]
            .into_iter()
            .collect(),
        };
        let failed = ProfileSource::FromSpec {
            failed: Some("the recorded profile of music has no files".into()),
        };
        let t = table(&report(&failed));
        assert!(
            t.contains("launch profiles: NOT RECORDED")
                && t.contains("the recorded profile of music has no files"),
            "{t}"
        );
        let t = table(&report(&ProfileSource::FromSpec { failed: None }));
        assert!(
            t.contains("launch profiles: written from the synthetic apps' specs (--profiles spec)"),
            "{t}"
        );
        assert!(!table(&report(&ProfileSource::Recorded)).contains("launch profiles"));
    }
}
