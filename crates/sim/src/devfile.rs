//! Device and app files: the simulator configured as any device (docs/simdev.md),
//! in particular as the real-kernel testbed's memory domain, so simulated
//! and measured numbers can be compared on the same workload
//! (`appflow bench --emit-sim-device FILE` writes such a file).
//!
//! Parsing and validation are pure (`parse` takes the text and a name for
//! messages); errors are [`InputError`]s naming the file and the field.
//! The same types serialise (`toml::to_string`), so a writer of these files
//! (the testbed) emits exactly what this reader reads.
//!
//! ```toml
//! [device]                      # required with --device-file
//! name = "bench-phone-6gb"      # shown in reports
//! description = "..."           # optional
//! base = "pixel8-6gb"           # preset giving every omitted field (default pixel8-6gb)
//! dram_mib = 1024               # required: memory of the apps' domain (DRAM)
//! reserved_mib = 0              # kernel + system share of it, never reclaimed
//! zram_disksize_mib = 512       # zram capacity (uncompressed)
//! zram_pool_cap_mib = 384       # zram's mem_limit: caps stored data at cap × ratio
//! zram_ratio = 3.0              # compression ratio (uncompressed / compressed)
//! zram_pool_in_dram = false     # false: the pool is not charged to dram_mib (testbed)
//! swap_mib = 0                  # flash swap behind zram
//! swap_write_mib_per_sec = 80
//! cpu_scale = 1.0               # multiplier on the apps' CPU times
//! file_drop_ms_per_mib = 2.5    # reclaim cost of clean file pages
//! anon_zram_ms_per_mib = 12.5   # reclaim cost of compressing anon into zram
//! lru_anon_ms_per_mib = 20.0    # the kernel's LRU reclaim's anon cost, if it differs (default: the above)
//! anon_fault_ms_per_mib = 2.0   # a launch's new anonymous pages (fault, zeroing, first write), on its core (default 0)
//! worker_read_mib_per_sec = 600 # the preload worker's page-cache fill on its own core (default: the storage bounds it)
//! zram_decomp_ms_per_mib = 1.0  # fault cost of decompressing
//! wmark_min_mib = 0             # watermarks (kswapd wakes below low, stops at high;
//! wmark_low_mib = 0             #  an allocation below min reclaims directly);
//! wmark_high_mib = 0            #  all 0 = no kswapd, like a memory cgroup's limit
//! direct_reclaim_threads = 2.0  # threads of a launching app reclaiming at once
//! kswapd_threads = 2.2          # kswapd's rate in reclaiming threads
//! platform = "linux"            # "android15" (lmkd + ActivityManager, the presets) | "linux" (the testbed)
//! readahead_kib = 128           # readahead of the apps' own large-file reads
//! readahead_mib_per_sec = 770   # their rate, if not the curve's at readahead_kib
//! reclaim_cache_first = true    # reclaim drops page cache before anon (default false: proportional)
//! cpu_budget_cores = 1.0        # cores the launch shares with the daemon's page-out (default: none shared)
//! serial_io = true              # one request in service at a time; the worker's idle-class reads wait
//!                               #  for the app's (default false: the large-block rate is shared)
//! preload_budget_mib = 25       # M_p (default: the core's 100 MB; --preload-budget-mb wins)
//! [device.storage]              # optional: either bandwidth + IOPS caps ...
//! read_mib_per_sec = 400
//! read_iops = 3000
//! # ... or a measured curve: points = [{ block_kib = 4, mib_per_sec = 12.4 }, ...]
//!
//! [[app]]                       # optional: replaces the app catalogue
//! name = "llm"                  # unique; no spaces, commas or tabs (trace format)
//! class = "gb"                  # "gb" (GB-scale: targets) | "low" (background load) | "tail"
//! anon_mib = 76.75              # anonymous allocation during launch (M_sum)
//! file_mib = 409.3              # file bytes read during launch (M_file)
//! small_files = 150             # files under 128 KiB read during launch (default from a 3 % / 6 % share)
//! small_mib = 4.6               # their bytes (default 3 % of file_mib for gb, 6 % otherwise)
//! large_files = 4               # default: 7.47× fewer than small files (§2.2.1)
//! cpu_init_ms = 200             # CPU time of a cold launch
//! resume_ms = 20                # CPU time of a switch to a live app (default 250 gb / 120 other)
//! background_growth = 0.3       # anon growth after launch (default: 0.3-0.5 drawn, §4.3)
//! growth_ms = 2000              # over this long (default 30 min)
//!
//! [workload]                    # optional: lists and times of the workloads
//! targets = ["llm"]             # default targets of low/medium/high (default: every gb app)
//! high = ["video", "game", "chat"]   # explicit background lists (launch order) of
//! # low = [...], medium = [...]        #  low/medium/high; default: the §6.1 rule by class
//! multitask = ["chat", "llm"]   # multitask order (default: low apps, two gb apps among them)
//! use_ms = 0                    # use time after each background launch (default 5000)
//! settle_ms = 1500              # settling before the target launch (default 30000)
//! multitask_use_ms = 0          # use time after each multitask launch (default 10000)
//! ```

use crate::catalog::{AppClass, AppModel, AppSpec, GB_SMALL_SHARE, LOW_SMALL_SHARE};
use crate::catalog::{MEAN_SMALL_FILE_KIB, SMALL_FILE_BYTES};
use crate::device::{self, Device, Platform};
use crate::workload::Setup;
use appflow_core::storage::{CurvePoint, ThroughputCurve};
use appflow_core::{InputError, KIB, MIB};
use serde::{Deserialize, Serialize};

/// A device/app file as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceFile {
    /// The device (required with `--device-file`).
    pub device: Option<DeviceSection>,
    /// Apps replacing the catalogue (`[[app]]`).
    #[serde(default)]
    pub app: Vec<AppEntry>,
    /// Workload lists and times.
    pub workload: Option<WorkloadSection>,
}

/// `[device]`: every field but `name` and `dram_mib` defaults to the `base` preset.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSection {
    /// Name shown in reports.
    pub name: String,
    /// What it models.
    pub description: Option<String>,
    /// Preset supplying the omitted fields (default `pixel8-6gb`).
    pub base: Option<String>,
    /// Memory of the apps' domain, MiB.
    pub dram_mib: f64,
    /// Part of it the system keeps (never reclaimed), MiB.
    pub reserved_mib: Option<f64>,
    /// zram capacity (uncompressed), MiB.
    pub zram_disksize_mib: Option<f64>,
    /// zram's own memory limit on its compressed pool, MiB.
    pub zram_pool_cap_mib: Option<f64>,
    /// zram compression ratio (uncompressed / compressed), ≥ 1.
    pub zram_ratio: Option<f64>,
    /// Whether the compressed pool takes memory from `dram_mib`.
    pub zram_pool_in_dram: Option<bool>,
    /// Flash swap behind zram, MiB.
    pub swap_mib: Option<f64>,
    /// Swap write throughput, MiB/s.
    pub swap_write_mib_per_sec: Option<f64>,
    /// Multiplier on the apps' CPU times.
    pub cpu_scale: Option<f64>,
    /// Reclaim cost of clean file pages, ms per MiB.
    pub file_drop_ms_per_mib: Option<f64>,
    /// Reclaim cost of compressing anonymous pages, ms per MiB.
    pub anon_zram_ms_per_mib: Option<f64>,
    /// The kernel's LRU reclaim's cost per MiB of anonymous pages, when it
    /// differs from `anon_zram_ms_per_mib`.
    pub lru_anon_ms_per_mib: Option<f64>,
    /// CPU cost of a launch's new anonymous pages, ms per MiB.
    pub anon_fault_ms_per_mib: Option<f64>,
    /// The most the preload worker reads into the page cache, MiB/s.
    pub worker_read_mib_per_sec: Option<f64>,
    /// Fault cost of decompressing from zram, ms per MiB.
    pub zram_decomp_ms_per_mib: Option<f64>,
    /// Min watermark, MiB of free memory.
    pub wmark_min_mib: Option<f64>,
    /// Low watermark, MiB.
    pub wmark_low_mib: Option<f64>,
    /// High watermark, MiB.
    pub wmark_high_mib: Option<f64>,
    /// Threads of a launching app that reclaim at once.
    pub direct_reclaim_threads: Option<f64>,
    /// kswapd's reclaim rate, in reclaiming threads.
    pub kswapd_threads: Option<f64>,
    /// "android15" or "linux".
    pub platform: Option<String>,
    /// Readahead of the apps' large-file reads, KiB.
    pub readahead_kib: Option<u64>,
    /// The apps' large-file reads through the readahead, MiB/s (default:
    /// the storage curve's at `readahead_kib`).
    pub readahead_mib_per_sec: Option<f64>,
    /// Reclaim drops page cache before anonymous memory while it lasts.
    pub reclaim_cache_first: Option<bool>,
    /// Cores the launching app shares with the daemon's own work.
    pub cpu_budget_cores: Option<f64>,
    /// The storage serves one request at a time and idle-class reads wait
    /// for the foreground's (default false: capacity shared).
    pub serial_io: Option<bool>,
    /// Preload budget M_p, MiB.
    pub preload_budget_mib: Option<f64>,
    /// Storage read curve.
    pub storage: Option<StorageSection>,
}

/// `[device.storage]`: bandwidth + IOPS caps, or measured points.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSection {
    /// Read bandwidth cap, MiB/s.
    pub read_mib_per_sec: Option<f64>,
    /// Read IOPS cap.
    pub read_iops: Option<f64>,
    /// Measured throughput by block size.
    pub points: Option<Vec<PointEntry>>,
}

/// One point of a read curve.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PointEntry {
    /// Block size, KiB.
    pub block_kib: f64,
    /// Throughput, MiB/s.
    pub mib_per_sec: f64,
}

/// `[[app]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppEntry {
    /// Unique name.
    pub name: String,
    /// "gb", "low" or "tail".
    pub class: String,
    /// Anonymous allocation during launch, MiB.
    pub anon_mib: f64,
    /// File bytes read during launch, MiB.
    pub file_mib: f64,
    /// Number of small files read during launch.
    pub small_files: Option<u32>,
    /// Their bytes, MiB.
    pub small_mib: Option<f64>,
    /// Number of large files.
    pub large_files: Option<u32>,
    /// CPU time of a cold launch, ms.
    pub cpu_init_ms: f64,
    /// CPU time of a switch to the live app, ms.
    pub resume_ms: Option<f64>,
    /// Anonymous growth after launch, share of anon.
    pub background_growth: Option<f64>,
    /// Duration of that growth, ms.
    pub growth_ms: Option<u64>,
}

/// `[workload]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Default targets of low/medium/high.
    pub targets: Option<Vec<String>>,
    /// Background list of `low`.
    pub low: Option<Vec<String>>,
    /// Background list of `medium`.
    pub medium: Option<Vec<String>>,
    /// Background list of `high`.
    pub high: Option<Vec<String>>,
    /// Multitask order.
    pub multitask: Option<Vec<String>>,
    /// Use time after each background launch, ms.
    pub use_ms: Option<u64>,
    /// Settling before the target launch, ms.
    pub settle_ms: Option<u64>,
    /// Use time after each multitask launch, ms.
    pub multitask_use_ms: Option<u64>,
}

/// A device built from a file.
#[derive(Debug, Clone)]
pub struct LoadedDevice {
    /// The device.
    pub device: Device,
    /// Its preload budget M_p, bytes, when the file gives one.
    pub preload_budget_bytes: Option<u64>,
}

/// A catalogue built from a file, with its workload lists.
#[derive(Debug, Clone)]
pub struct LoadedApps {
    /// The apps, in file order.
    pub apps: Vec<AppSpec>,
    /// Workload lists and times.
    pub setup: Setup,
}

fn err(file: &str, field: &str, what: impl std::fmt::Display) -> InputError {
    InputError::new(format!("{file}: field `{field}`: {what}"))
}

/// Parses a device/app file's text; `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<DeviceFile, InputError> {
    toml::from_str(text).map_err(|e| {
        // toml's message names the field (missing, wrong type, unknown).
        let span = e
            .span()
            .map(|s| {
                // The line (with its key) names the field for type errors.
                let at = s.start.min(text.len());
                let line = text[..at].matches('\n').count() + 1;
                let src = text.lines().nth(line - 1).unwrap_or("").trim();
                format!(" (line {line}: `{src}`)")
            })
            .unwrap_or_default();
        InputError::new(format!("{file}{span}: {}", e.message().trim()))
    })
}

/// Reads and parses a file.
pub fn read(path: &std::path::Path) -> Result<DeviceFile, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::new(format!("{}: cannot read: {e}", path.display())))?;
    parse(&text, &path.display().to_string())
}

fn mib(v: f64) -> u64 {
    (v * MIB as f64).round() as u64
}

/// Largest size, rate or duration a file may give (1 TiB in MiB, 2^20):
/// far above any phone or testbed, and small enough that every byte count
/// and time the model derives from it stays far from u64 overflow.
pub const MAX_QUANTITY: f64 = (1u64 << 20) as f64;

/// Longest `use_ms`/`settle_ms`/`growth_ms`: one day, in milliseconds.
pub const MAX_WAIT_MS: u64 = 86_400_000;

/// Checks a size in MiB (or a rate, or a duration): finite, ≥ 0 (or > 0
/// when `positive`) and at most [`MAX_QUANTITY`].
fn size(file: &str, field: &str, v: f64, positive: bool) -> Result<f64, InputError> {
    if !v.is_finite() || v < 0.0 || (positive && v == 0.0) || v > MAX_QUANTITY {
        let low = if positive { "(0" } else { "[0" };
        return Err(err(
            file,
            field,
            format!("must be a number in {low}, {MAX_QUANTITY}], got {v}"),
        ));
    }
    Ok(v)
}

/// Builds the device of a file; `file` names it in messages.
pub fn device(f: &DeviceFile, file: &str) -> Result<LoadedDevice, InputError> {
    let s = f.device.as_ref().ok_or_else(|| {
        InputError::new(format!(
            "{file}: missing [device] section (name, dram_mib, ...; see docs/sim.md)"
        ))
    })?;
    let base_name = s.base.as_deref().unwrap_or("pixel8-6gb");
    let base = device::device(base_name).map_err(|e| err(file, "device.base", e))?;
    let name = s.name.trim();
    if name.is_empty() || name.len() > 64 {
        return Err(err(file, "device.name", "must be 1-64 characters"));
    }
    let opt = |field: &str, v: Option<f64>, dflt: u64| -> Result<u64, InputError> {
        match v {
            Some(x) => Ok(mib(size(file, field, x, false)?)),
            None => Ok(dflt),
        }
    };
    let dram_bytes = mib(size(file, "device.dram_mib", s.dram_mib, true)?);
    let reserved_bytes = opt("device.reserved_mib", s.reserved_mib, base.reserved_bytes)?;
    if reserved_bytes >= dram_bytes {
        return Err(err(
            file,
            "device.reserved_mib",
            format!(
                "must be below device.dram_mib ({} MiB){}",
                dram_bytes / MIB,
                if s.reserved_mib.is_none() {
                    format!(
                        "; the default comes from base preset {base_name} ({} MiB)",
                        base.reserved_bytes / MIB
                    )
                } else {
                    String::new()
                }
            ),
        ));
    }
    let ratio = s.zram_ratio.unwrap_or(base.zram_ratio);
    if !(ratio.is_finite() && (1.0..=20.0).contains(&ratio)) {
        return Err(err(
            file,
            "device.zram_ratio",
            format!("must be in [1, 20], got {ratio}"),
        ));
    }
    let mut zram = opt(
        "device.zram_disksize_mib",
        s.zram_disksize_mib,
        base.zram_disksize_bytes,
    )?;
    if let Some(cap) = s.zram_pool_cap_mib {
        // The model's pool is stored / ratio; a cap on the pool is a cap on
        // the data it can hold.
        let cap_bytes = mib(size(file, "device.zram_pool_cap_mib", cap, false)?);
        zram = zram.min((cap_bytes as f64 * ratio) as u64);
    }
    let pos = |field: &str, v: Option<f64>, dflt: f64, max: f64| -> Result<f64, InputError> {
        let x = v.unwrap_or(dflt);
        if !(x.is_finite() && x > 0.0 && x <= max) {
            return Err(err(file, field, format!("must be in (0, {max}], got {x}")));
        }
        Ok(x)
    };
    let swap_write = pos(
        "device.swap_write_mib_per_sec",
        s.swap_write_mib_per_sec,
        base.swap_write_bytes_per_sec / MIB as f64,
        1e6,
    )?;
    // An optional rate in MiB/s, as bytes/s; the base's when not given.
    let mib_rate = |field: &str, v: Option<f64>, dflt: Option<f64>| match v {
        None => Ok(dflt),
        Some(x) => pos(field, Some(x), 1.0, 1e6).map(|x| Some(x * MIB as f64)),
    };
    let nonneg = |field: &str, v: Option<f64>, dflt: f64| -> Result<f64, InputError> {
        match v {
            Some(x) => size(file, field, x, false),
            None => Ok(dflt),
        }
    };
    let wmin = opt(
        "device.wmark_min_mib",
        s.wmark_min_mib,
        base.wmark_min_bytes,
    )?;
    let wlow = opt(
        "device.wmark_low_mib",
        s.wmark_low_mib,
        base.wmark_low_bytes,
    )?;
    let whigh = opt(
        "device.wmark_high_mib",
        s.wmark_high_mib,
        base.wmark_high_bytes,
    )?;
    if wmin > wlow {
        return Err(err(
            file,
            "device.wmark_low_mib",
            "must be >= device.wmark_min_mib",
        ));
    }
    if wlow > whigh {
        return Err(err(
            file,
            "device.wmark_high_mib",
            "must be >= device.wmark_low_mib",
        ));
    }
    if whigh >= dram_bytes - reserved_bytes {
        return Err(err(
            file,
            "device.wmark_high_mib",
            "must be below the memory left to apps (dram_mib - reserved_mib)",
        ));
    }
    let readahead = s
        .readahead_kib
        .map_or(base.readahead_bytes, |k| k.saturating_mul(KIB));
    if readahead == 0 || readahead > 64 * MIB {
        return Err(err(file, "device.readahead_kib", "must be in [1, 65536]"));
    }
    let read_curve = match &s.storage {
        None => base.read_curve.clone(),
        Some(st) => storage_curve(st, file)?,
    };
    let budget = match s.preload_budget_mib {
        None => None,
        Some(b) => {
            let b = mib(size(file, "device.preload_budget_mib", b, true)?);
            if b >= dram_bytes - reserved_bytes {
                return Err(err(
                    file,
                    "device.preload_budget_mib",
                    "must be below the memory left to apps (dram_mib - reserved_mib)",
                ));
            }
            Some(b)
        }
    };
    let device = Device {
        name: name.to_string(),
        description: s
            .description
            .clone()
            .unwrap_or_else(|| format!("device file {file} (defaults from {base_name})")),
        dram_bytes,
        reserved_bytes,
        zram_disksize_bytes: zram,
        zram_ratio: ratio,
        zram_pool_in_dram: s.zram_pool_in_dram.unwrap_or(base.zram_pool_in_dram),
        swap_bytes: opt("device.swap_mib", s.swap_mib, base.swap_bytes)?,
        read_curve,
        swap_write_bytes_per_sec: swap_write * MIB as f64,
        cpu_scale: pos("device.cpu_scale", s.cpu_scale, base.cpu_scale, 100.0)?,
        file_drop_ms_per_mib: nonneg(
            "device.file_drop_ms_per_mib",
            s.file_drop_ms_per_mib,
            base.file_drop_ms_per_mib,
        )?,
        anon_zram_ms_per_mib: nonneg(
            "device.anon_zram_ms_per_mib",
            s.anon_zram_ms_per_mib,
            base.anon_zram_ms_per_mib,
        )?,
        lru_anon_ms_per_mib: match s.lru_anon_ms_per_mib {
            None => base.lru_anon_ms_per_mib,
            Some(x) => Some(size(file, "device.lru_anon_ms_per_mib", x, false)?),
        },
        worker_read_bytes_per_sec: mib_rate(
            "device.worker_read_mib_per_sec",
            s.worker_read_mib_per_sec,
            base.worker_read_bytes_per_sec,
        )?,
        anon_fault_ms_per_mib: nonneg(
            "device.anon_fault_ms_per_mib",
            s.anon_fault_ms_per_mib,
            base.anon_fault_ms_per_mib,
        )?,
        zram_decomp_ms_per_mib: nonneg(
            "device.zram_decomp_ms_per_mib",
            s.zram_decomp_ms_per_mib,
            base.zram_decomp_ms_per_mib,
        )?,
        wmark_min_bytes: wmin,
        wmark_low_bytes: wlow,
        wmark_high_bytes: whigh,
        direct_reclaim_threads: pos(
            "device.direct_reclaim_threads",
            s.direct_reclaim_threads,
            base.direct_reclaim_threads,
            64.0,
        )?,
        kswapd_threads: pos(
            "device.kswapd_threads",
            s.kswapd_threads,
            base.kswapd_threads,
            64.0,
        )?,
        platform: match &s.platform {
            None => base.platform,
            Some(p) => Platform::parse(p).ok_or_else(|| {
                err(
                    file,
                    "device.platform",
                    format!("{p:?}: valid platforms: {}", Platform::NAMES.join(", ")),
                )
            })?,
        },
        readahead_bytes: readahead,
        readahead_read_bytes_per_sec: mib_rate(
            "device.readahead_mib_per_sec",
            s.readahead_mib_per_sec,
            base.readahead_read_bytes_per_sec,
        )?,
        reclaim_cache_first: s.reclaim_cache_first.unwrap_or(base.reclaim_cache_first),
        cpu_budget_cores: match s.cpu_budget_cores {
            None => base.cpu_budget_cores,
            Some(c) => Some(pos("device.cpu_budget_cores", Some(c), 1.0, 64.0)?),
        },
        serial_io: s.serial_io.unwrap_or(base.serial_io),
    };
    Ok(LoadedDevice {
        device,
        preload_budget_bytes: budget,
    })
}

/// Block sizes at which a bandwidth + IOPS cap is sampled into a curve.
const CAP_BLOCKS_KIB: [u64; 11] = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

fn storage_curve(st: &StorageSection, file: &str) -> Result<ThroughputCurve, InputError> {
    let points = match (&st.points, st.read_mib_per_sec, st.read_iops) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(err(
                file,
                "device.storage.points",
                "give either points or read_mib_per_sec + read_iops, not both",
            ))
        }
        (Some(pts), None, None) => {
            if pts.is_empty() {
                return Err(err(file, "device.storage.points", "must not be empty"));
            }
            let mut v = Vec::new();
            for (i, p) in pts.iter().enumerate() {
                let field = format!("device.storage.points[{i}]");
                if !(p.block_kib.is_finite() && (0.5..=MAX_QUANTITY).contains(&p.block_kib)) {
                    return Err(err(
                        file,
                        &format!("{field}.block_kib"),
                        format!("must be in [0.5, {MAX_QUANTITY}]"),
                    ));
                }
                size(file, &format!("{field}.mib_per_sec"), p.mib_per_sec, true)?;
                v.push(CurvePoint {
                    block_bytes: (p.block_kib * KIB as f64).round() as u64,
                    bytes_per_sec: p.mib_per_sec * MIB as f64,
                });
            }
            v
        }
        (None, Some(bw), Some(iops)) => {
            size(file, "device.storage.read_mib_per_sec", bw, true)?;
            size(file, "device.storage.read_iops", iops, true)?;
            // blk-throttle: each request is bounded by both caps.
            CAP_BLOCKS_KIB
                .iter()
                .map(|&k| CurvePoint {
                    block_bytes: k * KIB,
                    bytes_per_sec: (bw * MIB as f64).min(iops * (k * KIB) as f64),
                })
                .collect()
        }
        (None, None, _) => {
            return Err(err(
                file,
                "device.storage.read_mib_per_sec",
                "missing (give read_mib_per_sec + read_iops, or points)",
            ))
        }
        (None, Some(_), None) => {
            return Err(err(
                file,
                "device.storage.read_iops",
                "missing (give read_mib_per_sec + read_iops, or points)",
            ))
        }
    };
    ThroughputCurve::new(points).map_err(|e| err(file, "device.storage.points", e))
}

/// Builds the catalogue and workload setup of a file's `[[app]]` list;
/// `None` when the file has no apps (the built-in catalogue stays).
pub fn apps(f: &DeviceFile, file: &str) -> Result<Option<LoadedApps>, InputError> {
    if f.app.is_empty() {
        if f.workload.is_some() {
            return Err(err(
                file,
                "workload",
                "needs an [[app]] list in the same file (the built-in catalogue has its own lists)",
            ));
        }
        return Ok(None);
    }
    let mut apps: Vec<AppSpec> = Vec::new();
    for (i, a) in f.app.iter().enumerate() {
        let at = |field: &str| format!("app[{i}].{field}");
        let name = a.name.trim();
        if name.is_empty()
            || name.len() > 40
            || name
                .chars()
                .any(|c| c.is_whitespace() || c == ',' || c == '#')
        {
            return Err(err(
                file,
                &at("name"),
                format!(
                    "{:?}: must be 1-40 characters without spaces, commas or '#'",
                    a.name
                ),
            ));
        }
        if apps.iter().any(|x| x.name == name) {
            return Err(err(file, &at("name"), format!("{name:?} is used twice")));
        }
        let class = match a.class.as_str() {
            "gb" => AppClass::GbScale,
            "low" => AppClass::Low,
            "tail" => AppClass::Tail,
            c => {
                return Err(err(
                    file,
                    &at("class"),
                    format!("unknown class {c:?}; valid classes: gb, low, tail"),
                ))
            }
        };
        let anon = size(file, &at("anon_mib"), a.anon_mib, false)?;
        let file_mib = size(file, &at("file_mib"), a.file_mib, true)?;
        let share = if class == AppClass::GbScale {
            GB_SMALL_SHARE
        } else {
            LOW_SMALL_SHARE
        };
        let small_mib = match a.small_mib {
            Some(v) => size(file, &at("small_mib"), v, false)?,
            None => file_mib * share,
        };
        if small_mib >= file_mib {
            return Err(err(file, &at("small_mib"), "must be below file_mib"));
        }
        let small_files = a
            .small_files
            .unwrap_or_else(|| ((small_mib * 1024.0 / MEAN_SMALL_FILE_KIB).round() as u32).max(1));
        if small_files == 0 || small_files > 200_000 {
            return Err(err(file, &at("small_files"), "must be in [1, 200000]"));
        }
        // Small files are under 128 KiB (Fig. 5); the model cannot fit more bytes in them.
        let max_small = small_files as f64 * (SMALL_FILE_BYTES as f64 - 4096.0) / MIB as f64;
        if small_mib > max_small {
            return Err(err(
                file,
                &at("small_mib"),
                format!("{small_mib} MiB does not fit in {small_files} files under 128 KiB"),
            ));
        }
        if let Some(n) = a.large_files {
            if n == 0 || n > 10_000 {
                return Err(err(file, &at("large_files"), "must be in [1, 10000]"));
            }
        }
        if !(a.cpu_init_ms.is_finite() && (1.0..=600_000.0).contains(&a.cpu_init_ms)) {
            return Err(err(file, &at("cpu_init_ms"), "must be in [1, 600000]"));
        }
        let resume_ms = match a.resume_ms {
            Some(v) => size(file, &at("resume_ms"), v, false)?,
            None if class == AppClass::GbScale => 250.0,
            None => 120.0,
        };
        if let Some(g) = a.background_growth {
            if !(g.is_finite() && (0.0..=2.0).contains(&g)) {
                return Err(err(file, &at("background_growth"), "must be in [0, 2]"));
            }
        }
        if a.growth_ms.is_some_and(|m| m > MAX_WAIT_MS) {
            return Err(err(file, &at("growth_ms"), "must be at most one day"));
        }
        apps.push(AppSpec {
            name: name.to_string(),
            class,
            anon_mib: anon,
            file_mib,
            small_mib,
            small_files,
            cpu_init_ms: a.cpu_init_ms,
            resume_ms,
            large_files: a.large_files,
            growth_fraction: a.background_growth,
            growth_ms: a.growth_ms,
        });
    }
    let models: Vec<AppModel> = apps.iter().map(crate::catalog::model).collect();
    let mut setup = Setup::from_classes(&models);
    if let Some(w) = &f.workload {
        let known = |field: &str, list: &[String]| -> Result<Vec<String>, InputError> {
            for (j, n) in list.iter().enumerate() {
                if !apps.iter().any(|a| &a.name == n) {
                    return Err(err(
                        file,
                        &format!("workload.{field}[{j}]"),
                        format!("{n:?} is not an [[app]] of the file"),
                    ));
                }
            }
            Ok(list.to_vec())
        };
        if let Some(t) = &w.targets {
            setup.targets = known("targets", t)?;
            for (j, n) in setup.targets.iter().enumerate() {
                if apps
                    .iter()
                    .any(|a| &a.name == n && a.class != AppClass::GbScale)
                {
                    return Err(err(
                        file,
                        &format!("workload.targets[{j}]"),
                        format!("{n:?} is not a GB-scale app (class = \"gb\")"),
                    ));
                }
            }
        }
        for (slot, (field, list)) in [("low", &w.low), ("medium", &w.medium), ("high", &w.high)]
            .into_iter()
            .enumerate()
        {
            if let Some(l) = list {
                setup.background[slot] = Some(known(field, l)?);
            }
        }
        if let Some(m) = &w.multitask {
            setup.multitask = known("multitask", m)?;
        }
        let wait_us = |field: &str, v: Option<u64>, dflt: u64| -> Result<u64, InputError> {
            match v {
                None => Ok(dflt),
                Some(m) if m <= MAX_WAIT_MS => Ok(m * 1000),
                Some(m) => Err(err(
                    file,
                    &format!("workload.{field}"),
                    format!("{m} is more than one day ({MAX_WAIT_MS} ms)"),
                )),
            }
        };
        setup.use_us = wait_us("use_ms", w.use_ms, setup.use_us)?;
        setup.settle_us = wait_us("settle_ms", w.settle_ms, setup.settle_us)?;
        setup.multitask_use_us = wait_us(
            "multitask_use_ms",
            w.multitask_use_ms,
            setup.multitask_use_us,
        )?;
    }
    Ok(Some(LoadedApps { apps, setup }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[device]
name = "testbed"
base = "pixel8-6gb"
dram_mib = 1024
reserved_mib = 0
zram_disksize_mib = 512
zram_pool_cap_mib = 100
zram_ratio = 3.0
zram_pool_in_dram = false
wmark_min_mib = 0
wmark_low_mib = 0
wmark_high_mib = 0
preload_budget_mib = 25
[device.storage]
read_mib_per_sec = 400
read_iops = 3000

[[app]]
name = "llm"
class = "gb"
anon_mib = 76.75
file_mib = 409.25
small_files = 150
small_mib = 4.5
large_files = 4
cpu_init_ms = 200
background_growth = 0.3
growth_ms = 2000

[[app]]
name = "chat"
class = "low"
anon_mib = 35
file_mib = 11
cpu_init_ms = 62.5

[workload]
high = ["chat"]
settle_ms = 1500
use_ms = 0
"#;

    fn dev_err(text: &str) -> String {
        let f = parse(text, "dev.toml").map_err(|e| e.to_string());
        match f {
            Err(e) => e,
            Ok(f) => device(&f, "dev.toml").unwrap_err().to_string(),
        }
    }

    fn app_err(text: &str) -> String {
        let f = parse(text, "dev.toml").map_err(|e| e.to_string());
        match f {
            Err(e) => e,
            Ok(f) => apps(&f, "dev.toml").unwrap_err().to_string(),
        }
    }

    #[test]
    fn good_file_builds_device_apps_and_lists() {
        let f = parse(GOOD, "dev.toml").unwrap();
        let d = device(&f, "dev.toml").unwrap();
        assert_eq!(d.device.name, "testbed");
        assert_eq!(d.device.dram_bytes, 1024 * MIB);
        assert_eq!(d.device.reserved_bytes, 0);
        // Pool cap 100 MiB at 3:1 caps the stored data at 300 MiB < 512 MiB.
        assert_eq!(d.device.zram_disksize_bytes, 300 * MIB);
        assert!(!d.device.zram_pool_in_dram);
        assert_eq!(d.preload_budget_bytes, Some(25 * MIB));
        // 4 KiB is IOPS-bound (3000 × 4 KiB), 2 MiB bandwidth-bound.
        let c = &d.device.read_curve;
        assert!((c.throughput(4 * KIB) - 3000.0 * 4096.0).abs() < 1.0);
        assert!((c.throughput(2 * MIB) - 400.0 * MIB as f64).abs() < 1.0);
        // Omitted fields come from the base preset.
        let base = device::device("pixel8-6gb").unwrap();
        assert_eq!(d.device.cpu_scale, base.cpu_scale);
        assert_eq!(d.device.readahead_bytes, base.readahead_bytes);
        assert_eq!(d.device.platform, Platform::Android15);
        assert_eq!(d.device.kswapd_threads, base.kswapd_threads);
        let a = apps(&f, "dev.toml").unwrap().unwrap();
        assert_eq!(a.apps.len(), 2);
        assert_eq!(a.apps[0].class, AppClass::GbScale);
        assert_eq!(a.apps[0].large_files, Some(4));
        assert_eq!(a.apps[1].small_mib, 11.0 * LOW_SMALL_SHARE);
        assert_eq!(a.setup.targets, vec!["llm".to_string()]);
        assert_eq!(a.setup.background[2], Some(vec!["chat".to_string()]));
        assert_eq!(a.setup.settle_us, 1_500_000);
        assert_eq!(a.setup.use_us, 0);
    }

    #[test]
    fn the_platform_and_kswapd_rate_are_read_and_checked() {
        let with =
            |extra: &str| GOOD.replace("dram_mib = 1024\n", &format!("dram_mib = 1024\n{extra}\n"));
        let f = parse(
            &with("platform = \"linux\"\nkswapd_threads = 1.0"),
            "dev.toml",
        )
        .unwrap();
        let d = device(&f, "dev.toml").unwrap().device;
        assert_eq!((d.platform, d.kswapd_threads), (Platform::Linux, 1.0));
        let e = dev_err(&with("platform = \"ios\""));
        assert!(
            e.contains("`device.platform`") && e.contains("android15, linux"),
            "{e}"
        );
        let e = dev_err(&with("kswapd_threads = 0"));
        assert!(e.contains("`device.kswapd_threads`"), "{e}");
    }

    #[test]
    fn absurd_sizes_and_waits_are_refused_without_overflow() {
        let e = dev_err(&GOOD.replace("dram_mib = 1024", "dram_mib = 1e300"));
        assert!(e.contains("`device.dram_mib`"), "{e}");
        let e = dev_err(&GOOD.replace(
            "dram_mib = 1024",
            "dram_mib = 1024\nreadahead_kib = 9223372036854775807",
        ));
        assert!(e.contains("`device.readahead_kib`"), "{e}");
        let e = app_err(&GOOD.replace("anon_mib = 76.75", "anon_mib = 1e300"));
        assert!(e.contains("`app[0].anon_mib`"), "{e}");
        let e = app_err(&GOOD.replace("settle_ms = 1500", "settle_ms = 9223372036854775807"));
        assert!(
            e.contains("`workload.settle_ms`") && e.contains("one day"),
            "{e}"
        );
        let e = app_err(&GOOD.replace("use_ms = 0", "use_ms = 9223372036854775806"));
        assert!(e.contains("`workload.use_ms`"), "{e}");
        let f = parse(
            &GOOD.replace("settle_ms = 1500", "settle_ms = 86400000"),
            "d",
        )
        .unwrap();
        assert_eq!(
            apps(&f, "d").unwrap().unwrap().setup.settle_us,
            86_400_000_000
        );
    }

    #[test]
    fn missing_and_bad_fields_are_named_with_the_file() {
        let e = dev_err(&GOOD.replace("dram_mib = 1024\n", ""));
        assert!(e.contains("dev.toml") && e.contains("dram_mib"), "{e}");
        let e = dev_err(&GOOD.replace("dram_mib = 1024", "dram_mib = \"lots\""));
        assert!(e.contains("dev.toml (line 5: `dram_mib"), "{e}");
        let e = dev_err(&GOOD.replace("zram_ratio = 3.0", "zram_ratio = 3.0\nzram_raito = 2.0"));
        assert!(e.contains("zram_raito"), "{e}");
        let e = dev_err(&GOOD.replace("reserved_mib = 0", "reserved_mib = 2048"));
        assert!(e.contains("`device.reserved_mib`"), "{e}");
        // The default reserve of the base (2 GiB) does not fit 1 GiB: say so.
        let e = dev_err(&GOOD.replace("reserved_mib = 0\n", ""));
        assert!(
            e.contains("`device.reserved_mib`") && e.contains("pixel8-6gb"),
            "{e}"
        );
        let e = dev_err(&GOOD.replace("zram_ratio = 3.0", "zram_ratio = 0.5"));
        assert!(e.contains("`device.zram_ratio`"), "{e}");
        let e = dev_err(&GOOD.replace("wmark_low_mib = 0", "wmark_low_mib = 5"));
        assert!(e.contains("`device.wmark_high_mib`"), "{e}");
        let e = dev_err(&GOOD.replace("base = \"pixel8-6gb\"", "base = \"pixel9\""));
        assert!(
            e.contains("`device.base`") && e.contains("pixel8-8gb"),
            "{e}"
        );
        let e = dev_err(&GOOD.replace("read_iops = 3000\n", ""));
        assert!(e.contains("`device.storage.read_iops`"), "{e}");
        let e = dev_err(&GOOD.replace(
            "read_iops = 3000",
            "read_iops = 3000\npoints = [{ block_kib = 4, mib_per_sec = 10 }]",
        ));
        assert!(e.contains("`device.storage.points`"), "{e}");
        let e = dev_err(&GOOD.replace("read_mib_per_sec = 400", "read_mib_per_sec = -1"));
        assert!(e.contains("`device.storage.read_mib_per_sec`"), "{e}");
        for f in [
            "lru_anon_ms_per_mib",
            "anon_fault_ms_per_mib",
            "worker_read_mib_per_sec",
            "readahead_mib_per_sec",
        ] {
            let e =
                dev_err(&GOOD.replace("zram_ratio = 3.0", &format!("zram_ratio = 3.0\n{f} = -2")));
            assert!(e.contains(&format!("`device.{f}`")), "{e}");
        }
        let e = dev_err(
            "[[app]]\nname = \"x\"\nclass = \"gb\"\nanon_mib = 1\nfile_mib = 1\ncpu_init_ms = 1\n",
        );
        assert!(e.contains("[device]"), "{e}");
    }

    #[test]
    fn a_run_from_a_device_file_is_deterministic() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            a: crate::cli::SimArgs,
        }
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("dev.toml");
        std::fs::write(&f, GOOD).unwrap();
        let run = |extra: &[&str]| {
            let mut argv = vec![
                "sim",
                "--device-file",
                f.to_str().unwrap(),
                "--format",
                "json",
            ];
            argv.extend_from_slice(extra);
            let a = W::parse_from(argv).a;
            let (cat, setup) = crate::cli::catalogue_of(&a).unwrap();
            let r = crate::cli::simulate_with(&a, &cat, &setup).unwrap();
            serde_json::to_string(&r).unwrap()
        };
        let args = ["--workload", "high", "--policy", "android,appflow"];
        let (x, y) = (run(&args), run(&args));
        assert_eq!(x, y);
        assert!(x.contains("\"device\":\"testbed\""), "{x}");
        // The file's apps replace the catalogue: the target is llm.
        assert!(x.contains("\"app\":\"llm\""), "{x}");
        // --apps-file with the built-in device is refused without [[app]].
        let e = W::parse_from(["sim", "--apps-file", "/nonexistent.toml"]).a;
        let e = crate::cli::catalogue_of(&e).unwrap_err().to_string();
        assert!(e.contains("/nonexistent.toml"), "{e}");
    }

    #[test]
    fn curve_points_are_accepted_and_checked() {
        let text = GOOD.replace(
            "read_mib_per_sec = 400\nread_iops = 3000",
            "points = [{ block_kib = 4, mib_per_sec = 12.4 }, { block_kib = 512, mib_per_sec = 400 }]",
        );
        let d = device(&parse(&text, "d").unwrap(), "d").unwrap();
        assert!((d.device.read_curve.throughput(4 * KIB) - 12.4 * MIB as f64).abs() < 1.0);
        let bad = text.replace("mib_per_sec = 400 }", "mib_per_sec = 0 }");
        let e = dev_err(&bad);
        assert!(e.contains("`device.storage.points[1].mib_per_sec`"), "{e}");
    }

    #[test]
    fn bad_apps_and_lists_are_named() {
        let e = app_err(&GOOD.replace("class = \"low\"", "class = \"huge\""));
        assert!(
            e.contains("`app[1].class`") && e.contains("gb, low, tail"),
            "{e}"
        );
        let e = app_err(&GOOD.replace("name = \"chat\"", "name = \"llm\""));
        assert!(e.contains("`app[1].name`") && e.contains("twice"), "{e}");
        let e = app_err(&GOOD.replace("name = \"chat\"", "name = \"a,b\""));
        assert!(e.contains("`app[1].name`"), "{e}");
        let e = app_err(&GOOD.replace("anon_mib = 35\n", ""));
        assert!(e.contains("anon_mib") && e.contains("dev.toml"), "{e}");
        let e = app_err(&GOOD.replace("small_mib = 4.5", "small_mib = 500"));
        assert!(e.contains("`app[0].small_mib`"), "{e}");
        let e = app_err(&GOOD.replace("small_mib = 4.5", "small_mib = 100"));
        assert!(
            e.contains("`app[0].small_mib`") && e.contains("128 KiB"),
            "{e}"
        );
        let e = app_err(&GOOD.replace("cpu_init_ms = 62.5", "cpu_init_ms = 0"));
        assert!(e.contains("`app[1].cpu_init_ms`"), "{e}");
        let e = app_err(&GOOD.replace("background_growth = 0.3", "background_growth = 3"));
        assert!(e.contains("`app[0].background_growth`"), "{e}");
        let e = app_err(&GOOD.replace("high = [\"chat\"]", "high = [\"chat\", \"nope\"]"));
        assert!(
            e.contains("`workload.high[1]`") && e.contains("nope"),
            "{e}"
        );
        let e = app_err(&GOOD.replace("high = [\"chat\"]", "targets = [\"chat\"]"));
        assert!(e.contains("`workload.targets[0]`"), "{e}");
        let e = app_err(&GOOD.replace("settle_ms = 1500", "settle_ms = 1500\nsettle = 1"));
        assert!(e.contains("settle"), "{e}");
    }
}
