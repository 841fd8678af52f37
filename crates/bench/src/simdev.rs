//! The testbed's workload described to the simulator, so that the
//! simulator can be configured as the testbed's device (docs/simdev.md).
//!
//! [`sim_device_toml`] writes an `appflow sim --device-file` file (format:
//! docs/sim.md, `appflow_sim::devfile`) for the domain a run builds at its
//! preset and scale: the memory cgroup limit as the device's memory, no
//! system reserve and no watermarks (a memory cgroup reclaims directly at
//! its limit), zram with its disk size and pool cap (the pool is not charged
//! to the cgroup), the blkio bandwidth and IOPS caps, the scaled preload
//! budget, and the synthetic apps at the run's scale with the scenario lists
//! and waits the testbed uses, serialised with the simulator's own
//! `appflow_sim::devfile` types. Pure: the caller writes the text.

use crate::options::BenchOptions;
use crate::run::{background_of, multitask_order_of, Scenario};
use crate::spec::{AppClass, AppSpec, SyntheticSpec};
use crate::synth::{Layout, Op};
use appflow_core::report::LatencyStats;
use appflow_core::storage::CurvePoint;
use appflow_core::MIB;
use appflow_sim::devfile::{
    AppEntry, DeviceFile, DeviceSection, PointEntry, StorageSection, WorkloadSection,
};
use std::collections::BTreeMap;
use std::path::Path;

/// Files at or above this size are "large" in the simulator (its small
/// files hold at most 31 pages).
const SIM_SMALL_MAX_BYTES: u64 = 124 * 1024;

/// Block sizes of the emitted storage curve, KiB: the flash model's
/// throughput for one reader at each (what the simulator's curve means).
const SIM_CURVE_BLOCKS_KIB: &[u64] = &[4, 16, 64, 128, 256, 512, 1024, 2048];

/// zram compression cost on the testbed host, ms per MiB (1 ms/MiB ≈ 1 GB/s,
/// lzo-rle on one x86 core; a phone's is 12.5, the PMR paper's < 80 MB/s).
/// Emitted only when the run measured no anonymous reclaim throughput in
/// the domain (see [`reclaim_costs`]).
pub const HOST_ANON_ZRAM_MS_PER_MIB: f64 = 1.0;
/// Cost of dropping clean file pages on the host, ms per MiB (a fifth of
/// the anonymous cost, the AppFlow paper §4.3).
pub const HOST_FILE_DROP_MS_PER_MIB: f64 = 0.2;

/// What a finished run measured that the device file records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// The in-domain O_DIRECT calibration.
    pub calibration: Vec<CurvePoint>,
    /// zram compression ratio measured under `stock` (original / pool
    /// bytes after the load), if any session swapped.
    pub stock_zram_ratio: Option<f64>,
    /// Share of file pages in what reclaim freed under `stock`
    /// (pgsteal_file / pgsteal), if any session reclaimed.
    pub stock_file_reclaim_share: Option<f64>,
    /// The domain's anonymous reclaim throughput (`extra.testbed
    /// .reclaim_calibration`), bytes/s, if the run measured it.
    pub anon_reclaim_bytes_per_sec: Option<f64>,
    /// The calibrated phone core (`extra.testbed.cpu_budget.cores`), host
    /// cores, if the run has one.
    pub cpu_budget_cores: Option<f64>,
    /// Stock's launch of the first target, idle and loaded, if the run has
    /// both (the loaded launch's reclaim cost, [`lru_anon_cost`]).
    pub stock_launch: Option<StockLaunch>,
    /// The apps' anonymous allocation on the phone core with nothing to
    /// reclaim (`extra.testbed.anon_alloc_bytes_per_sec`), bytes/s.
    pub anon_alloc_bytes_per_sec: Option<f64>,
    /// The preload worker's stream on a phone core
    /// (`extra.testbed.worker_read_bytes_per_sec`), bytes/s.
    pub worker_read_bytes_per_sec: Option<f64>,
    /// Per app, the median oracle launch, ms ([`oracle_launches`]).
    pub oracle_ms: BTreeMap<String, f64>,
}

/// Per app, the median of its oracle launches (its files cached, nothing
/// else running; the same in every scenario), ms.
pub fn oracle_launches(ms: &[crate::run::Measurement]) -> BTreeMap<String, f64> {
    let mut by_app: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for l in ms
        .iter()
        .filter(|m| m.error.is_none())
        .flat_map(|m| &m.launches)
        .filter(|l| l.oracle && l.ready)
    {
        by_app.entry(l.app.clone()).or_default().push(l.ms);
    }
    by_app
        .into_iter()
        .map(|(a, v)| (a, LatencyStats::from_samples(&v).p50))
        .collect()
}

/// The cold launch CPU of an app in the emitted file, ms: its spec's, or,
/// when the run measured its oracle launch (`oracle_ms`), what that launch
/// took beyond its heap at `anon_fault_ms_per_mib` (the simulator's cached
/// launch is its CPU plus its heap). On the testbed the launch also starts
/// the process, opens its files and copies their cached pages on its phone
/// core, beside the spec's CPU: measured, `video`'s spec CPU is 150 ms and
/// its cached launch 499-527 ms, of which its heap took about 250.
fn launch_cpu_ms(spec_ms: f64, anon_mib: f64, oracle_ms: Option<f64>, anon_fault: f64) -> f64 {
    match oracle_ms.filter(|x| x.is_finite()) {
        Some(o) => spec_ms.max(o - anon_mib * anon_fault),
        None => spec_ms,
    }
}

/// Stock's cold launch of one target without and with the background load.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StockLaunch {
    /// Median launch under `idle`, ms.
    pub idle_ms: f64,
    /// Median launch under `high`, ms.
    pub high_ms: f64,
    /// Anonymous pages reclaimed during the loaded launch (median).
    pub stolen_anon_pages: u64,
    /// File pages reclaimed during the loaded launch (median).
    pub stolen_file_pages: u64,
}

/// Stock's launch of `target` in the run's measurements, when it has
/// ready launches of it under both `idle` and `high`.
pub fn stock_launch(ms: &[crate::run::Measurement], target: &str) -> Option<StockLaunch> {
    let of = |sc: Scenario| -> Vec<&crate::run::Measurement> {
        ms.iter()
            .filter(|m| m.policy.is_stock() && m.scenario == sc && m.error.is_none())
            .filter(|m| {
                m.launches
                    .first()
                    .is_some_and(|l| l.app == target && l.ready)
            })
            .collect()
    };
    let (idle, high) = (of(Scenario::Idle), of(Scenario::High));
    let at: Vec<_> = high.iter().filter_map(|m| m.at_launch).collect();
    if idle.is_empty() || at.is_empty() {
        return None;
    }
    // The report's own p50 (nearest rank) and median.
    let p50 = |v: &[&crate::run::Measurement]| {
        LatencyStats::from_samples(&v.iter().map(|m| m.launches[0].ms).collect::<Vec<_>>()).p50
    };
    let stolen = |f: fn(&crate::counters::Delta) -> u64| {
        crate::report::median_u64(at.iter().map(|a| f(&a.kernel)).collect())
    };
    Some(StockLaunch {
        idle_ms: p50(&idle),
        high_ms: p50(&high),
        stolen_anon_pages: stolen(|k| k.pgsteal_anon),
        stolen_file_pages: stolen(|k| k.pgsteal_file),
    })
}

/// Anonymous pages a loaded launch must have reclaimed for its reclaim
/// cost to be derived from it (1 MiB).
const MIN_STOLEN_ANON_PAGES: u64 = 256;

/// The kernel's LRU reclaim cost per MiB of anonymous pages, as stock's
/// loaded launch paid it: what the load added to the launch (high − idle)
/// less its file pages at `file_ms` per MiB, over the anonymous MiB it
/// reclaimed. At least `anon_ms` (a targeted page-out's cost: the LRU path
/// does that work and more: it also scans, ages the active list and walks
/// every cgroup of the domain). None when the launch reclaimed too little
/// anonymous memory to say.
pub fn lru_anon_cost(s: &StockLaunch, anon_ms: f64, file_ms: f64) -> Option<f64> {
    if s.stolen_anon_pages < MIN_STOLEN_ANON_PAGES {
        return None;
    }
    let page_mib = appflow_core::PAGE_BYTES as f64 / MIB as f64;
    let added = s.high_ms - s.idle_ms - s.stolen_file_pages as f64 * page_mib * file_ms;
    let cost = added / (s.stolen_anon_pages as f64 * page_mib);
    cost.is_finite().then(|| round_to(cost.max(anon_ms), 4))
}

/// A measured quantity when it is a usable one (finite and positive).
fn usable(x: Option<f64>) -> Option<f64> {
    x.filter(|x| x.is_finite() && *x > 0.0)
}

impl Measured {
    /// The measured anonymous reclaim throughput, when it is a usable one.
    fn anon_rate(&self) -> Option<f64> {
        usable(self.anon_reclaim_bytes_per_sec)
    }

    /// The phone core: the calibrated one, else the preset's.
    fn budget(&self, o: &BenchOptions) -> f64 {
        usable(self.cpu_budget_cores).unwrap_or(o.device.cpu_cores)
    }
}

/// The reclaim costs of the emitted device, ms per MiB of domain time:
/// anonymous (zram) and clean file pages. From the domain's measured
/// anonymous reclaim throughput when the run has one (a MiB paged out to
/// zram costs the time that throughput takes for it, on the domain's CPU
/// budget); else this host's zram cost divided by the CPU budget. File
/// pages cost a fifth (the AppFlow paper §4.3).
fn reclaim_costs(o: &BenchOptions, measured: &Measured) -> (f64, f64) {
    let anon = match measured.anon_rate() {
        Some(r) => 1000.0 * MIB as f64 / r,
        None => HOST_ANON_ZRAM_MS_PER_MIB / measured.budget(o),
    };
    (
        round_to(anon, 4),
        round_to(
            anon * HOST_FILE_DROP_MS_PER_MIB / HOST_ANON_ZRAM_MS_PER_MIB,
            4,
        ),
    )
}

fn mib(b: u64) -> f64 {
    b as f64 / MIB as f64
}

/// The header of an emitted file: what it is, how to run it, and where its
/// values come from (the TOML body carries no comments).
fn header(o: &BenchOptions, measured: &Measured) -> String {
    let d = &o.device;
    let mut t = format!(
        "# appflow sim device file: the appflow bench domain `{}` at --scale {}.\n\
         # Written by `appflow bench --emit-sim-device`; run it with\n\
         #   appflow sim --device-file THIS.toml --workload high --policy android,paralfetch,appflow,appflow-sfp,appflow-amr,appflow-cpk\n\
         # Bench policy -> sim policy: stock -> android, prefetch -> paralfetch, appflow -> appflow,\n\
         # appflow-sfp/-amr/-cpk -> appflow-sfp/-amr/-cpk (preload-all, lru-killer, oracle have no sim row).\n\
         # Format: docs/simdev.md (\"Device and app files\").\n\
         #\n\
         # dram_mib is the domain's memory.limit_in_bytes; reserved_mib 0 (the cgroup holds only the\n\
         # apps and the preload worker); zram_pool_cap_mib is zram's mem_limit; the pool is not charged\n\
         # to the memory cgroup (zram_pool_in_dram = false); zram_ratio is {}.\n\
         # No watermarks: a memory cgroup has no kswapd, every allocation at the limit reclaims directly.\n\
         # One direct-reclaim thread: a synthetic app launches on one thread. The synthetic apps burn\n\
         # cpu_ms x (budget / the preset's budget) of thread CPU time on the domain's calibrated budget,\n\
         # so cpu_scale is 1 / the preset's budget in cores.\n\
         # Reclaim costs: {}; file pages cost a fifth (the AppFlow paper §4.3).\n\
         # lru_anon_ms_per_mib: {}.\n\
         # anon_fault_ms_per_mib: {}.\n\
         # worker_read_mib_per_sec: {}.\n\
         # The storage curve is the flash device's as the domain measured it (one reader; the model's\n\
         # latency + size / bandwidth when the run has not measured yet); resume_ms is a tenth of the launch CPU\n\
         # (a switch re-touches the working set). cpu_init_ms: {}.\n\
         # The workload lists are what the testbed launches\n\
         # (back to back: use_ms 0; settle_ms is --settle-ms).\n\
         # reclaim_cache_first: the domain's kernel drops page cache before anonymous memory while\n\
         # page cache lasts (cache trim mode of mm/vmscan.c at swappiness 60); {}.\n\
         # CPU: every leaf of the domain (each app, the daemon with its preload worker) runs on one phone\n\
         # core, a CPU budget calibrated so that anonymous reclaim runs no faster than the device's\n\
         # (extra.testbed.cpu_budget); so no cpu_budget_cores: the daemon's page-out (PMR, rebalancing)\n\
         # does not share the launch's core.\n\
         # serial_io: the flash model serves one request at a time (queue depth {}) and the preload\n\
         # worker's idle-class requests wait while a foreground one is in service, so the worker\n\
         # streams only while the launching app has no read on the device (docs/bench-design.md).\n",
        d.preset.name,
        d.scale,
        if measured.stock_zram_ratio.is_some() {
            "measured under stock (original / pool bytes after the load)"
        } else {
            "the synthetic anon's (1/4 of each page random, about 3:1)"
        },
        match measured.anon_rate() {
            Some(r) => format!(
                "anonymous reclaim as the domain measured it ({:.0} MB/s, extra.testbed.reclaim_calibration)",
                r / 1e6
            ),
            None => "this host's zram cost (x86, lzo-rle) divided by the CPU budget (the run measured no reclaim)".into(),
        },
        match measured.stock_launch {
            Some(s) => {
                let (anon, file) = reclaim_costs(o, measured);
                match lru_anon_cost(&s, anon, file) {
                    Some(c) => format!(
                        "the kernel's LRU reclaim of anonymous pages as stock's loaded launch paid for it:\n\
                         #   (high {:.0} ms - idle {:.0} ms - {:.0} MiB of file pages x {file}) / {:.0} MiB of anonymous pages = {c} ms/MiB\n\
                         #   (median launch of the first target; pages reclaimed during it). anon_zram_ms_per_mib stays the\n\
                         #   targeted page-out's cost (the daemon's process_madvise), which does not scan",
                        s.high_ms,
                        s.idle_ms,
                        mib(s.stolen_file_pages * appflow_core::PAGE_BYTES),
                        mib(s.stolen_anon_pages * appflow_core::PAGE_BYTES),
                    ),
                    None => "not set: stock's loaded launch reclaimed under 1 MiB of anonymous pages".into(),
                }
            }
            None => "not set: the run has no stock launch of the first target under both idle and high".into(),
        },
        match usable(measured.anon_alloc_bytes_per_sec) {
            Some(r) => format!(
                "a launch's new anonymous pages cost its core what the apps' allocation took in the domain\n\
                 #   with nothing to reclaim ({:.0} MB/s, extra.testbed.anon_alloc_bytes_per_sec)",
                r / 1e6
            ),
            None => "not set (0): the run did not measure the apps' allocation".into(),
        },
        match usable(measured.worker_read_bytes_per_sec) {
            Some(_) => "the preload worker's stream on its phone core as the domain measured it (2 MiB reads\n\
                 #   through the page cache, extra.testbed.worker_read_bytes_per_sec): filling the cache costs its CPU".to_string(),
            None => "not set: the worker streams at the storage curve's rate".into(),
        },
        if measured.oracle_ms.is_empty() {
            "the spec's cpu_ms at this scale (the run has no oracle launch)".to_string()
        } else {
            format!(
                "the spec's cpu_ms at this scale, except for {}: its oracle launch (files cached,\n\
                 #   nothing else running) less its heap at anon_fault_ms_per_mib, when more. The testbed's launch\n\
                 #   also starts its process, opens its files and copies their cached pages on its phone core",
                measured.oracle_ms.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        },
        match measured.stock_file_reclaim_share {
            Some(s) => format!(
                "this run's stock sessions freed {:.0} % file pages (pgsteal_file / pgsteal)",
                s * 100.0
            ),
            None => "no stock session measured it; the kernel's behaviour is assumed".into(),
        },
        d.preset.flash.queue_depth,
    );
    if !measured.calibration.is_empty() {
        t.push_str(
            "# Measured in the domain by this run (O_DIRECT, random offsets), the storage curve below:\n",
        );
        for c in &measured.calibration {
            t.push_str(&format!(
                "#   {:>5} KiB  {:.1} MiB/s\n",
                c.block_bytes / 1024,
                c.bytes_per_sec / MIB as f64
            ));
        }
    }
    for s in o.apps.iter().filter(|s| s.synthetic().is_none()) {
        t.push_str(&format!(
            "# App {:?} is a command line: the simulator cannot model it; left out.\n",
            s.name
        ));
    }
    t
}

fn device_section(o: &BenchOptions, measured: &Measured) -> DeviceSection {
    let (anon_ms_per_mib, file_ms_per_mib) = reclaim_costs(o, measured);
    let lru_anon_ms_per_mib = measured
        .stock_launch
        .and_then(|s| lru_anon_cost(&s, anon_ms_per_mib, file_ms_per_mib));
    let d = &o.device;
    let p = &d.preset;
    DeviceSection {
        name: format!("bench-{}-x{}", p.name, d.scale),
        description: Some(format!(
            "appflow bench domain: {} at scale {} (memory cgroup {:.0} MiB, zram {:.0} MiB, flash {:.0} MB/s + {:.0} us/request, one phone core = {} core(s) of this host)",
            p.about,
            d.scale,
            mib(d.app_memory_bytes),
            mib(d.zram_disksize_bytes),
            p.flash.bytes_per_sec / 1e6,
            p.flash.latency_us,
            round_to(measured.budget(o), 3)
        )),
        // Reclaim and zram CPU costs not given here come from this preset.
        base: Some(
            if p.name.starts_with("headunit") {
                "headunit-4gb"
            } else {
                "pixel8-6gb"
            }
            .into(),
        ),
        dram_mib: mib(d.app_memory_bytes),
        reserved_mib: Some(0.0),
        zram_disksize_mib: Some(mib(d.zram_disksize_bytes)),
        zram_pool_cap_mib: Some(mib(d.zram_mem_limit_bytes)),
        zram_ratio: Some(round_to(measured.stock_zram_ratio.unwrap_or(3.0), 2)),
        zram_pool_in_dram: Some(false),
        swap_mib: Some(0.0),
        cpu_scale: Some(round_to(1.0 / p.cpu_cores, 4)),
        wmark_min_mib: Some(0.0),
        wmark_low_mib: Some(0.0),
        wmark_high_mib: Some(0.0),
        direct_reclaim_threads: Some(1.0),
        // No kswapd in a memory cgroup (the watermarks are 0).
        kswapd_threads: Some(1.0),
        // The testbed is plain Linux: the kernel's OOM killer, no lmkd and
        // no ActivityManager.
        platform: Some("linux".into()),
        anon_zram_ms_per_mib: Some(anon_ms_per_mib),
        lru_anon_ms_per_mib,
        // A MiB of a launch's heap costs the app's core the time the
        // domain's allocation test took for it.
        anon_fault_ms_per_mib: usable(measured.anon_alloc_bytes_per_sec)
            .map(|r| round_to(1000.0 * MIB as f64 / r, 4)),
        // The worker fills the page cache on a phone core of its own.
        worker_read_mib_per_sec: usable(measured.worker_read_bytes_per_sec)
            .map(|r| round_to(r / MIB as f64, 1)),
        file_drop_ms_per_mib: Some(file_ms_per_mib),
        readahead_kib: Some(p.read_ahead_kib),
        // The flash model's rate at the readahead size: the kernel queues
        // the next window before the app reaches it, so the device serves
        // readahead back to back, without the host's round trip a lone
        // O_DIRECT reader of the measured curve pays.
        readahead_mib_per_sec: Some(round_to(
            p.flash.single_reader_bytes_per_sec(p.read_ahead_kib * 1024) / MIB as f64,
            1,
        )),
        // Page cache first, unless this run's stock sessions freed mostly
        // anonymous pages.
        reclaim_cache_first: Some(measured.stock_file_reclaim_share.is_none_or(|s| s >= 0.5)),
        // The daemon runs on a phone core of its own (its own cpu leaf), so
        // its page-out does not share the launch's.
        cpu_budget_cores: None,
        // The flash model serves one request at a time, and the worker's
        // idle-class requests enter it only while no foreground request
        // waits or is in service (docs/bench-design.md, "Storage"): the
        // worker streams only while the app is off the device.
        serial_io: Some(p.flash.queue_depth <= 1),
        preload_budget_mib: Some(mib(d.preload_budget_bytes)),
        storage: Some(StorageSection {
            read_mib_per_sec: None,
            read_iops: None,
            points: Some(storage_points(p, measured)),
        }),
        ..DeviceSection::default()
    }
}

/// The storage curve: what the domain measured, one reader (the device
/// model plus the host's FUSE round trip per request), when the run
/// measured it; otherwise the model's own one-reader curve.
fn storage_points(p: &crate::device::Preset, measured: &Measured) -> Vec<PointEntry> {
    if measured.calibration.is_empty() {
        SIM_CURVE_BLOCKS_KIB
            .iter()
            .map(|&kib| PointEntry {
                block_kib: kib as f64,
                mib_per_sec: round_to(
                    p.flash.single_reader_bytes_per_sec(kib * 1024) / MIB as f64,
                    1,
                ),
            })
            .collect()
    } else {
        measured
            .calibration
            .iter()
            .map(|c| PointEntry {
                block_kib: c.block_bytes as f64 / 1024.0,
                mib_per_sec: round_to(c.bytes_per_sec / MIB as f64, 1),
            })
            .collect()
    }
}

/// `x` rounded to `digits` decimals (keeps the emitted file readable).
fn round_to(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

fn app_entry(
    s: &AppSpec,
    syn: &SyntheticSpec,
    scale: f64,
    measured: &Measured,
    anon_fault: f64,
) -> AppEntry {
    let l = Layout::new(&s.name, syn, scale, Path::new("/"));
    let small: Vec<u64> = l
        .small
        .iter()
        .map(|f| f.size)
        .filter(|&b| b < SIM_SMALL_MAX_BYTES)
        .collect();
    let big_small = l.small.len() - small.len();
    let cpu_us: u64 = l
        .ops
        .iter()
        .map(|o| if let Op::Cpu(u) = o { *u } else { 0 })
        .sum();
    // The simulator needs at least one small file: a 4 KiB one.
    let (small_files, small_mib) = if small.is_empty() {
        (1, 0.0039)
    } else {
        (small.len() as u32, round_to(mib(small.iter().sum()), 4))
    };
    let anon_mib = round_to(mib(l.anon_bytes()), 4);
    let cpu_ms = launch_cpu_ms(
        (cpu_us as f64 / 1000.0).max(1.0),
        anon_mib,
        measured.oracle_ms.get(&s.name).copied(),
        anon_fault,
    );
    AppEntry {
        name: s.name.clone(),
        class: if s.class == AppClass::Gb { "gb" } else { "low" }.into(),
        anon_mib,
        file_mib: round_to(mib(l.launch_file_bytes()), 4),
        small_files: Some(small_files),
        small_mib: Some(small_mib),
        large_files: Some((l.large.len() + big_small).max(1) as u32),
        cpu_init_ms: round_to(cpu_ms, 3),
        // A switch re-runs a tenth of the launch CPU.
        resume_ms: Some(round_to(cpu_us as f64 / 10_000.0, 3)),
        background_growth: Some(syn.background_growth),
        growth_ms: Some(syn.growth_ms),
    }
}

fn workload_section(o: &BenchOptions, synthetic: &[(&str, AppClass)]) -> WorkloadSection {
    // What run_target and run_multitask launch.
    let targets: Vec<String> = o
        .targets
        .iter()
        .filter(|x| synthetic.iter().any(|s| s.0 == x.as_str()))
        .cloned()
        .collect();
    // The testbed's load may differ for other targets; the file gives the first's.
    let bg = |sc: Scenario| targets.first().map(|t| background_of(synthetic, sc, t));
    WorkloadSection {
        low: bg(Scenario::Low),
        medium: bg(Scenario::Medium),
        high: bg(Scenario::High),
        targets: Some(targets),
        multitask: Some(multitask_order_of(synthetic)),
        use_ms: Some(0),
        settle_ms: Some(o.settle.as_millis() as u64),
        multitask_use_ms: Some(0),
    }
}

/// A value of the emitted file that the run could not derive from a
/// measurement, so the file carries a default or an assumption instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Underived {
    /// The field, as in the file (`lru_anon_ms_per_mib`, `app.llm.cpu_init_ms`).
    pub field: String,
    /// Why it is not derived, and what the file holds instead.
    pub why: String,
    /// Scenarios the run must add to derive it.
    pub scenarios: Vec<Scenario>,
    /// Policies the run must add to derive it.
    pub policies: Vec<&'static str>,
}

/// Every field of the file [`sim_device_toml`] writes for `measured` that
/// is not derived from a measurement of the run, with the runs to add. A
/// file with such fields may predict far from the testbed: without `idle`
/// beside `high` for stock, the kernel's LRU reclaim costs what a targeted
/// page-out costs and stock's loaded launch comes out about twice as fast
/// as measured (issue 30: 2,072 vs 4,166 ms).
pub fn underived(o: &BenchOptions, measured: &Measured) -> Vec<Underived> {
    let mut out = Vec::new();
    let mut add = |field: &str, why: String, scenarios: Vec<Scenario>, policies| {
        out.push(Underived {
            field: field.to_string(),
            why,
            scenarios,
            policies,
        })
    };
    let stock = o.policies.iter().any(|p| p.is_stock());
    let target = o
        .targets
        .first()
        .map(String::as_str)
        .unwrap_or("the target");
    let with_stock = |mut p: Vec<&'static str>| {
        if !stock {
            p.insert(0, "stock");
        }
        p
    };
    if measured.calibration.is_empty() {
        add(
            "device.storage",
            "the run measured no storage curve in the domain; the flash model's latency + size / bandwidth is written".into(),
            vec![],
            vec![],
        );
    }
    if measured.stock_zram_ratio.is_none() {
        add(
            "device.zram_ratio",
            "no stock session swapped to zram; the synthetic pages' ratio (about 3:1) is assumed"
                .into(),
            vec![Scenario::High],
            with_stock(vec![]),
        );
    }
    if measured.stock_file_reclaim_share.is_none() {
        add(
            "device.reclaim_cache_first",
            "no stock session reclaimed; the kernel's order (page cache first) is assumed".into(),
            vec![Scenario::High],
            with_stock(vec![]),
        );
    }
    if measured.anon_rate().is_none() {
        add(
            "device.anon_zram_ms_per_mib",
            "the run measured no anonymous reclaim throughput (extra.testbed.reclaim_calibration); \
             this host's zram cost over the CPU budget is written, and file_drop_ms_per_mib follows it"
                .into(),
            vec![],
            vec![],
        );
    }
    match measured.stock_launch {
        None => {
            let have = |sc: Scenario| o.scenarios.contains(&sc);
            let mut missing = Vec::new();
            if !stock {
                missing.push("stock in --policies".to_string());
            }
            for sc in [Scenario::Idle, Scenario::High] {
                if !have(sc) {
                    missing.push(format!("{} in --scenario", sc.name()));
                }
            }
            let why = if missing.is_empty() {
                format!("no ready stock launch of {target} under both idle and high")
            } else {
                format!(
                    "the run has no stock launch of {target} under both idle and high (it lacks {})",
                    missing.join(" and ")
                )
            };
            add(
                "device.lru_anon_ms_per_mib",
                format!(
                    "{why}; the kernel's LRU reclaim is charged a targeted page-out's cost, so stock's loaded \
                     launches come out too fast"
                ),
                vec![Scenario::Idle, Scenario::High],
                with_stock(vec![]),
            );
        }
        Some(s) => {
            let (anon, file) = reclaim_costs(o, measured);
            if lru_anon_cost(&s, anon, file).is_none() {
                add(
                    "device.lru_anon_ms_per_mib",
                    format!(
                        "stock's loaded launch of {target} reclaimed under 1 MiB of anonymous pages; \
                         a run whose load reaches the launch (a larger --scale, or --scenario high) derives it"
                    ),
                    vec![Scenario::High],
                    vec![],
                );
            }
        }
    }
    if usable(measured.anon_alloc_bytes_per_sec).is_none() {
        add(
            "device.anon_fault_ms_per_mib",
            "the run did not measure the apps' allocation (extra.testbed.anon_alloc_bytes_per_sec); 0 is written".into(),
            vec![],
            vec![],
        );
    }
    if usable(measured.worker_read_bytes_per_sec).is_none() {
        add(
            "device.worker_read_mib_per_sec",
            "the run did not measure the preload worker's stream (extra.testbed.worker_read_bytes_per_sec); \
             the worker streams at the storage curve's rate"
                .into(),
            vec![],
            vec![],
        );
    }
    for t in &o.targets {
        let synthetic = o
            .apps
            .iter()
            .any(|a| &a.name == t && a.synthetic().is_some());
        if synthetic && !measured.oracle_ms.contains_key(t) {
            add(
                &format!("app.{t}.cpu_init_ms"),
                format!(
                    "no oracle launch of {t}; the spec's CPU time is written, without what the testbed's \
                     launch spends starting the process and opening and copying its files"
                ),
                vec![],
                vec!["oracle"],
            );
        }
    }
    out
}

/// The lines `appflow bench --emit-sim-device FILE` prints on stderr for
/// the fields it could not derive: one per field, then the scenarios and
/// policies to run to derive them. Empty when every field is derived.
pub fn underived_message(o: &BenchOptions, measured: &Measured, file: &Path) -> String {
    let u = underived(o, measured);
    if u.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "appflow bench: {}: {} field(s) not derived from this run's measurements (the simulator will \
         predict from defaults there):\n",
        file.display(),
        u.len()
    );
    for x in &u {
        t.push_str(&format!("  {}: {}\n", x.field, x.why));
    }
    let mut scenarios: Vec<Scenario> = o.scenarios.clone();
    let mut policies: Vec<String> = o.policies.iter().map(|p| p.name().to_string()).collect();
    for x in &u {
        for sc in &x.scenarios {
            if !scenarios.contains(sc) {
                scenarios.push(*sc);
            }
        }
        for p in &x.policies {
            if !policies.iter().any(|q| q == p) {
                policies.push(p.to_string());
            }
        }
    }
    scenarios.sort_by_key(|sc| Scenario::ALL.iter().position(|x| x == sc));
    let added = scenarios.len() > o.scenarios.len() || policies.len() > o.policies.len();
    if added {
        t.push_str(&format!(
            "appflow bench: to derive them, run with --scenario {} --policies {} (the other flags as before)\n",
            scenarios.iter().map(|s| s.name()).collect::<Vec<_>>().join(","),
            policies.join(",")
        ));
    } else {
        t.push_str(
            "appflow bench: no added scenario or policy derives them: the run's own calibration did not measure them\n",
        );
    }
    t
}

/// The device file of a run (`appflow bench --emit-sim-device`), written
/// with the simulator's own types.
pub fn sim_device_toml(o: &BenchOptions, measured: &Measured) -> anyhow::Result<String> {
    let mut synthetic: Vec<(&str, AppClass)> = Vec::new();
    let mut apps = Vec::new();
    let device = device_section(o, measured);
    let anon_fault = device.anon_fault_ms_per_mib.unwrap_or(0.0);
    for s in &o.apps {
        if let Some(syn) = s.synthetic() {
            synthetic.push((s.name.as_str(), s.class));
            apps.push(app_entry(s, syn, o.device.scale, measured, anon_fault));
        }
    }
    let file = DeviceFile {
        device: Some(device),
        app: apps,
        workload: Some(workload_section(o, &synthetic)),
    };
    Ok(header(o, measured) + "\n" + &toml::to_string(&file)?)
}

/// Share of file pages in the pages reclaim freed over the `stock`
/// sessions (pgsteal_file / (pgsteal_file + pgsteal_anon)), if they freed any.
pub fn stock_file_reclaim_share(ms: &[crate::run::Measurement]) -> Option<f64> {
    let (file, anon) = ms
        .iter()
        .filter(|m| m.policy.is_stock() && m.error.is_none())
        .fold((0u64, 0u64), |(f, a), m| {
            (f + m.delta.pgsteal_file, a + m.delta.pgsteal_anon)
        });
    (file + anon > 0).then(|| file as f64 / (file + anon) as f64)
}

/// The zram ratio measured under `stock`: median of original / pool bytes
/// over the sessions whose pool held at least 1 MiB.
pub fn stock_zram_ratio(ms: &[crate::run::Measurement]) -> Option<f64> {
    let mut r: Vec<f64> = ms
        .iter()
        .filter(|m| m.policy.is_stock() && m.zram.pool_bytes >= MIB)
        .map(|m| m.zram.orig_data_bytes as f64 / m.zram.pool_bytes as f64)
        .filter(|x| x.is_finite() && *x >= 1.0)
        .collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    Some(r[(r.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{options, BenchArgs};

    fn emitted(a: &BenchArgs) -> String {
        sim_device_toml(&options(a).unwrap(), &Measured::default()).unwrap()
    }

    fn full_measurement() -> Measured {
        Measured {
            calibration: vec![CurvePoint {
                block_bytes: 4096,
                bytes_per_sec: 13.0e6,
            }],
            stock_zram_ratio: Some(2.5),
            stock_file_reclaim_share: Some(0.83),
            anon_reclaim_bytes_per_sec: Some(150.0 * MIB as f64),
            cpu_budget_cores: Some(0.3),
            stock_launch: Some(StockLaunch {
                idle_ms: 1000.0,
                high_ms: 3500.0,
                stolen_anon_pages: 88 * 256,
                stolen_file_pages: 414 * 256,
            }),
            anon_alloc_bytes_per_sec: Some(512.0 * MIB as f64),
            worker_read_bytes_per_sec: Some(600.0 * MIB as f64),
            oracle_ms: [("llm".to_string(), 430.0)].into(),
        }
    }

    /// Issue 30, defect 4: the run of the issue (high only, no oracle)
    /// wrote a device whose stock prediction was half the measured one, and
    /// said nothing. Each field it cannot derive is named, with the runs
    /// to add; a run that measured everything says nothing.
    #[test]
    fn underived_fields_are_named_with_the_runs_to_add() {
        let args = |scenario: &str, policies: &str| BenchArgs {
            scenario: scenario.split(',').map(String::from).collect(),
            policies: policies.split(',').map(String::from).collect(),
            ..BenchArgs::default()
        };
        let o = options(&args("high", "stock,appflow,appflow-sfp,prefetch")).unwrap();
        let m = Measured {
            stock_launch: None,
            oracle_ms: BTreeMap::new(),
            ..full_measurement()
        };
        let fields: Vec<String> = underived(&o, &m).into_iter().map(|u| u.field).collect();
        assert_eq!(
            fields,
            ["device.lru_anon_ms_per_mib", "app.llm.cpu_init_ms"],
            "{fields:?}"
        );
        let msg = underived_message(&o, &m, Path::new("dev.toml"));
        assert!(msg.contains("dev.toml: 2 field(s) not derived"), "{msg}");
        assert!(msg.contains("it lacks idle in --scenario"), "{msg}");
        assert!(msg.contains("no oracle launch of llm"), "{msg}");
        assert!(
            msg.contains(
                "run with --scenario idle,high --policies stock,appflow,appflow-sfp,prefetch,oracle"
            ),
            "{msg}"
        );
        // Everything measured: nothing to say.
        let o = options(&args("idle,high", "stock,appflow,oracle")).unwrap();
        assert_eq!(underived(&o, &full_measurement()), vec![]);
        assert_eq!(
            underived_message(&o, &full_measurement(), Path::new("d")),
            ""
        );
        // Nothing measured (no stock at all, the calibration missing).
        let o = options(&args("high", "appflow")).unwrap();
        let u = underived(&o, &Measured::default());
        let names: Vec<&str> = u.iter().map(|u| u.field.as_str()).collect();
        for f in [
            "device.storage",
            "device.zram_ratio",
            "device.anon_zram_ms_per_mib",
            "device.lru_anon_ms_per_mib",
            "device.anon_fault_ms_per_mib",
            "device.worker_read_mib_per_sec",
            "app.llm.cpu_init_ms",
        ] {
            assert!(names.contains(&f), "{f} missing from {names:?}");
        }
        let msg = underived_message(&o, &Measured::default(), Path::new("d"));
        assert!(
            msg.contains("--scenario idle,high --policies appflow,stock,oracle"),
            "{msg}"
        );
    }

    #[test]
    fn emitted_file_parses_in_the_simulator_and_matches_the_domain() {
        let text = emitted(&BenchArgs::default());
        let f = appflow_sim::devfile::parse(&text, "emitted.toml").unwrap();
        let d = appflow_sim::devfile::device(&f, "emitted.toml").unwrap();
        assert_eq!(d.device.dram_bytes, 1024 * MIB);
        assert!(!d.device.zram_pool_in_dram);
        // 512 MiB disk; pool cap 384 MiB × 3 does not bind.
        assert_eq!(d.device.zram_disksize_bytes, 512 * MIB);
        let c = &d.device.read_curve;
        // The flash model's one-reader curve (0.05 MiB/s rounding).
        let flash = crate::device::UFS31;
        for b in [4096u64, 128 << 10, 2 << 20] {
            let want = flash.single_reader_bytes_per_sec(b);
            assert!((c.throughput(b) - want).abs() < 0.06 * MIB as f64, "{b}");
        }
        assert_eq!(
            d.preload_budget_bytes,
            Some(crate::device::page_round(25 * MIB))
        );
        let apps = appflow_sim::devfile::apps(&f, "emitted.toml")
            .unwrap()
            .unwrap();
        assert_eq!(apps.apps.len(), 17);
        let llm = apps.apps.iter().find(|a| a.name == "llm").unwrap();
        // llm at 0.25: 307 MiB anon → 76.75 MiB; ~1637/4 MiB of large reads.
        assert!((llm.anon_mib - 76.75).abs() < 0.01, "{}", llm.anon_mib);
        assert!((395.0..425.0).contains(&llm.file_mib), "{}", llm.file_mib);
        assert_eq!(llm.small_files, 150);
        assert_eq!(llm.growth_fraction, Some(0.3));
        assert_eq!(apps.setup.targets, vec!["llm".to_string()]);
        let high = apps.setup.background[2].as_ref().unwrap();
        assert_eq!(&high[..2], &["video".to_string(), "game".to_string()]);
        assert_eq!(high.len(), 16); // 2 GB-scale + the 14 small apps
        assert_eq!(apps.setup.settle_us, 1_500_000);
        assert_eq!(apps.setup.use_us, 0);
        assert_eq!(apps.setup.multitask.len(), 17);
    }

    #[test]
    fn emitted_file_runs_in_the_simulator_deterministically() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("dev.toml");
        std::fs::write(&f, emitted(&BenchArgs::default())).unwrap();
        let run = || {
            use clap::Parser;
            #[derive(clap::Parser)]
            struct W {
                #[command(flatten)]
                a: appflow_sim::cli::SimArgs,
            }
            let a = W::parse_from([
                "sim",
                "--device-file",
                f.to_str().unwrap(),
                "--workload",
                "high",
                "--policy",
                "android,appflow",
            ])
            .a;
            let (cat, setup) = appflow_sim::cli::catalogue_of(&a).unwrap();
            let r = appflow_sim::cli::simulate_with(&a, &cat, &setup).unwrap();
            serde_json::to_string(&r).unwrap()
        };
        let (x, y) = (run(), run());
        assert_eq!(x, y);
        assert!(x.contains("bench-phone-6gb-x0.25"), "{x}");
    }

    #[test]
    fn measured_ratio_and_calibration_are_recorded() {
        let o = options(&BenchArgs::default()).unwrap();
        let m = Measured {
            calibration: vec![
                CurvePoint {
                    block_bytes: 4096,
                    bytes_per_sec: 13.0e6,
                },
                CurvePoint {
                    block_bytes: 512 << 10,
                    bytes_per_sec: 815.0e6,
                },
            ],
            stock_zram_ratio: Some(2.5),
            stock_file_reclaim_share: Some(0.83),
            anon_reclaim_bytes_per_sec: Some(500.0 * MIB as f64),
            cpu_budget_cores: Some(0.3),
            stock_launch: None,
            anon_alloc_bytes_per_sec: Some(512.0 * MIB as f64),
            worker_read_bytes_per_sec: Some(600.0 * MIB as f64),
            oracle_ms: BTreeMap::new(),
        };
        let text = sim_device_toml(&o, &m).unwrap();
        assert!(text.contains("zram_ratio = 2.5"), "{text}");
        assert!(
            text.contains("cpu_init_ms: the spec's cpu_ms at this scale (the run has no oracle")
        );
        let spec_cpu = |text: &str| {
            let f = appflow_sim::devfile::parse(text, "e").unwrap();
            let a = f.app.iter().find(|a| a.name == "llm").unwrap();
            (a.cpu_init_ms, a.anon_mib)
        };
        let (llm_spec, llm_anon) = spec_cpu(&text);
        // An oracle launch of llm sets its launch CPU: what that launch took
        // beyond its heap (1.9531 ms per MiB); never less than the spec's.
        let with_oracle = |ms: f64| Measured {
            oracle_ms: [("llm".to_string(), ms)].into(),
            ..m.clone()
        };
        let text = sim_device_toml(&o, &with_oracle(llm_spec + llm_anon * 1.9531 + 120.0)).unwrap();
        assert!(text.contains("except for llm: its oracle launch"), "{text}");
        assert!(
            (spec_cpu(&text).0 - (llm_spec + 120.0)).abs() < 0.01,
            "{text}"
        );
        let text = sim_device_toml(&o, &with_oracle(1.0)).unwrap();
        assert_eq!(spec_cpu(&text).0, llm_spec);
        assert!(
            text.contains("lru_anon_ms_per_mib: not set: the run has no stock launch"),
            "{text}"
        );
        assert!(text.contains("anon_fault_ms_per_mib = 1.9531"), "{text}");
        assert!(text.contains("worker_read_mib_per_sec = 600.0"), "{text}");
        // The apps' readahead at the flash model's rate for 128 KiB:
        // 128 KiB / (100 µs + 128 KiB / 2.1 GB/s) = 769.6 MiB/s.
        assert!(text.contains("readahead_mib_per_sec = 769.6"), "{text}");
        assert!(text.contains("freed 83 % file pages"), "{text}");
        assert!(text.contains("reclaim_cache_first = true"), "{text}");
        assert!(text.contains("  512 KiB  777.2 MiB/s"), "{text}");
        let f = appflow_sim::devfile::parse(&text, "e").unwrap();
        let d = appflow_sim::devfile::device(&f, "e").unwrap();
        assert_eq!(d.device.zram_ratio, 2.5);
        // The daemon has a core of its own; the apps' CPU times are the
        // preset's (they burn cpu_ms × their share of the calibrated budget).
        assert_eq!(d.device.cpu_budget_cores, None);
        assert!(text.contains("one phone core = 0.3 core(s)"), "{text}");
        assert_eq!(d.device.cpu_scale, 1.0);
        // The measured curve is the curve.
        let c = &d.device.read_curve;
        assert!((c.throughput(4096) - 13.0e6).abs() < 0.06 * MIB as f64);
        // Reclaim at the domain's measured 500 MiB/s: 2 ms per MiB, file a fifth.
        assert_eq!(d.device.anon_zram_ms_per_mib, 2.0);
        assert_eq!(d.device.file_drop_ms_per_mib, 0.4);
        assert!(
            text.contains("(524 MB/s, extra.testbed.reclaim_calibration)"),
            "{text}"
        );
        // Pool cap 384 MiB × 2.5 = 960 MiB > 512 MiB disk: the disk binds.
        assert_eq!(d.device.zram_disksize_bytes, 512 * MIB);
        assert!(d.device.reclaim_cache_first);
        // A run whose stock sessions freed mostly anonymous pages says so.
        let m = Measured {
            stock_file_reclaim_share: Some(0.3),
            ..m
        };
        let text = sim_device_toml(&o, &m).unwrap();
        let f = appflow_sim::devfile::parse(&text, "e").unwrap();
        assert!(
            !appflow_sim::devfile::device(&f, "e")
                .unwrap()
                .device
                .reclaim_cache_first
        );
        // Stock's loaded launch: (2936 − 961 − 411 MiB × 0.4) / 92 MiB.
        let s = StockLaunch {
            idle_ms: 961.0,
            high_ms: 2936.0,
            stolen_anon_pages: 92 * 256,
            stolen_file_pages: 411 * 256,
        };
        let m = Measured {
            stock_launch: Some(s),
            ..m
        };
        let text = sim_device_toml(&o, &m).unwrap();
        let f = appflow_sim::devfile::parse(&text, "e").unwrap();
        let d = appflow_sim::devfile::device(&f, "e").unwrap().device;
        let want = (2936.0 - 961.0 - 411.0 * 0.4) / 92.0;
        assert!(
            (d.lru_anon_ms_per_mib.unwrap() - want).abs() < 1e-3,
            "{text}"
        );
        assert_eq!(d.anon_zram_ms_per_mib, 2.0);
        assert!(
            text.contains("high 2936 ms - idle 961 ms - 411 MiB"),
            "{text}"
        );
    }

    #[test]
    fn lru_cost_needs_anonymous_reclaim_and_is_never_below_page_out() {
        let s = StockLaunch {
            idle_ms: 900.0,
            high_ms: 1000.0,
            stolen_anon_pages: 100 * 256,
            stolen_file_pages: 0,
        };
        // 100 ms over 100 MiB is 1 ms/MiB, below the page-out's 5.
        assert_eq!(lru_anon_cost(&s, 5.0, 1.0), Some(5.0));
        assert_eq!(lru_anon_cost(&s, 0.5, 1.0), Some(1.0));
        let little = StockLaunch {
            stolen_anon_pages: MIN_STOLEN_ANON_PAGES - 1,
            ..s
        };
        assert_eq!(lru_anon_cost(&little, 0.5, 1.0), None);
    }

    #[test]
    fn stock_launch_takes_the_first_targets_idle_and_high_medians() {
        use crate::policy::Policy;
        use crate::run::{measurement, AtLaunch, LaunchRecord};
        use appflow_core::report::LaunchKind;
        let rec = |app: &str, ms: f64| LaunchRecord {
            app: app.into(),
            ms,
            kind: LaunchKind::Cold,
            after_kill: false,
            oracle: false,
            ready: true,
            timed_out: false,
            died: None,
        };
        let stock = Policy::named("stock");
        let mut ms = Vec::new();
        for (sc, app, t, anon) in [
            (Scenario::Idle, "llm", 950.0, 0),
            (Scenario::Idle, "llm", 970.0, 0),
            (Scenario::High, "llm", 3000.0, 300),
            (Scenario::High, "llm", 2900.0, 500),
            (Scenario::High, "llm", 3100.0, 400),
            (Scenario::High, "video", 9000.0, 9000),
        ] {
            let mut m = measurement(stock, sc, 0);
            m.launches.push(rec(app, t));
            let mut at = AtLaunch::default();
            at.kernel.pgsteal_anon = anon;
            m.at_launch = (sc == Scenario::High).then_some(at);
            ms.push(m);
        }
        let mut other = measurement(Policy::named("appflow"), Scenario::High, 0);
        other.launches.push(rec("llm", 1.0));
        ms.push(other);
        let s = stock_launch(&ms, "llm").unwrap();
        assert_eq!(
            (s.idle_ms, s.high_ms, s.stolen_anon_pages),
            (950.0, 3000.0, 400)
        );
        assert!(stock_launch(&ms[2..], "llm").is_none(), "no idle launch");
    }
}
