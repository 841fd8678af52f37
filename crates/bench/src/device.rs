//! Device presets: the phone-like memory and storage the testbed emulates.
//!
//! A preset gives the memory the apps may use (the domain's memory cgroup
//! limit), the zram swap, the storage device (one shared device with a
//! per-request latency and a bus bandwidth: [`crate::flash`]; throughput
//! rises with block size as in the AppFlow paper §2.2.1, Fig. 6) and the domain's CPU
//! budget (cpu cgroup bandwidth), each with its source. `--scale F`
//! multiplies every *size* (memory, swap, app files, anonymous allocations,
//! CPU work, preload budget) by F so the testbed fits small machines and
//! short runs; throughput is a property of the device and is not scaled, so
//! latencies shrink roughly by F too.

use crate::flash::FlashParams;
use appflow_core::{GIB, MIB};
use serde::Serialize;

/// A device to emulate, at scale 1.0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preset {
    /// Preset name.
    pub name: &'static str,
    /// What it stands for.
    pub about: &'static str,
    /// Physical DRAM of the device, bytes (for the report).
    pub dram_bytes: u64,
    /// Memory left to apps after the system's own use: the domain's memory
    /// cgroup limit, bytes.
    pub app_memory_bytes: u64,
    /// zram disk size (uncompressed swap capacity), bytes. The AppFlow paper §4.2.2:
    /// swap is bounded (2 GB on Pixel 8, zram 25-30 % of DRAM).
    pub zram_disksize_bytes: u64,
    /// Cap of zram's compressed pool (zram's own mem_limit), bytes; the pool
    /// is not charged to the memory cgroup, so it is capped here and reported.
    pub zram_mem_limit_bytes: u64,
    /// The storage device every process of the domain reads through.
    pub flash: FlashParams,
    /// One phone core at most, in cores of this host (cpu.cfs_quota_us /
    /// cpu.cfs_period_us): the CPU each leaf of the domain gets (each app;
    /// the daemon with its preload worker), and with it the reclaim and
    /// zram compression done in their context. The testbed lowers it until
    /// the domain reclaims no faster than [`Preset::reclaim_bytes_per_sec`]
    /// ([`Device::cpu_cores`]).
    pub cpu_cores: f64,
    /// The device's kernel reclaim throughput, bytes/s: the domain's
    /// anonymous reclaim is held to at most this by its CPU budget, so that
    /// reclaim costs, beside the storage, what it costs on the device.
    pub reclaim_bytes_per_sec: f64,
    /// Readahead of the emulated storage, KiB (the loop device's read_ahead_kb).
    pub read_ahead_kib: u64,
    /// Preload budget M_p, bytes (the AppFlow paper §4.1: 100 MB).
    pub preload_budget_bytes: u64,
}

/// UFS 3.1, the storage of the Pixel 7 and Pixel 8 (the AppFlow paper §6.1).
/// Bandwidth: 2,100 MB/s, the sequential read that UFS 3.1 parts are
/// specified for (e.g. Samsung's UFS 3.1 "up to 2,100 MB/s"); the HS-G4 x2
/// link carries 2.9 GB/s. Latency: 100 µs per request, the order of a QD1
/// 4 KiB random read on UFS 3.x (about 40 MB/s; an assumption, not a
/// measured figure), and at least 1 MiB / (6 × bandwidth) = 83 µs, the
/// point from which 1 MiB reads stream at least twice as fast as 128 KiB
/// ones (the spread the testbed must show). Queue depth 1: requests do not
/// overlap, so concurrent readers share the bandwidth of one reader.
pub const UFS31: FlashParams = FlashParams {
    latency_us: 100.0,
    bytes_per_sec: 2.1e9,
    queue_depth: 1,
};

/// The Raspberry Pi 4B's microSD (the head unit of the AppFlow paper §6.6): the Pi 4B
/// SD interface runs DDR50 (50 MB/s bus; 45 MB/s taken for protocol
/// overhead, an assumption), and an A1-class card is specified for at least
/// 1,500 random 4 KiB read IOPS (SD Association, Application Performance
/// Class 1): 667 µs per 4 KiB request, of which 91 µs is transfer.
pub const SD_A1_DDR50: FlashParams = FlashParams {
    latency_us: 576.0,
    bytes_per_sec: 45e6,
    queue_depth: 1,
};

/// A phone core at most, in host cores: one. The synthetic apps' `cpu_ms`
/// are phone CPU times on the core a launch runs on; each app runs on a
/// core of its own (a phone has eight or nine), and so does the daemon with
/// its preload worker, as system services run beside the launch on a
/// phone; reclaim and zram compression run in the context that needs the
/// memory, so they cost that app's time as on a phone.
pub const PHONE_CPU_CORES: f64 = 1.0;

/// A phone's kernel reclaim throughput: 150 MB/s, the highest the PMR paper
/// §2.2.2 (Fig. 3a) measured on phones (Pixel 5 with UFS 2.1, Pixel 6 Pro
/// with UFS 3.1: "below 80 MB/s most of the time", "less than 150 MB/s at
/// most"). On one core of this host the domain's anonymous reclaim runs at
/// 390-530 MB/s, so at one core reclaim would cost a third of what it costs
/// on a phone beside the same storage; the testbed lowers the budget until
/// the domain reclaims no faster than this (`extra.testbed.cpu_budget`).
/// The highest figure is taken, not the typical one, so the testbed errs
/// towards cheaper reclaim.
pub const PHONE_RECLAIM_BYTES_PER_SEC: f64 = 150e6;

/// A head unit core at most: half a host core, a Cortex-A72 at 1.5 GHz
/// being about half an x86 server core per thread (an assumption). No
/// paper measured a Raspberry Pi's reclaim; its reclaim is held to the
/// phone's ([`PHONE_RECLAIM_BYTES_PER_SEC`]), which its slower cores do not
/// beat.
pub const HEADUNIT_CPU_CORES: f64 = 0.5;

/// The presets.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "phone-6gb",
        about: "Pixel 8 limited to 6 GB (the AppFlow paper §6.1), UFS-class storage",
        dram_bytes: 6 * GIB,
        app_memory_bytes: 4 * GIB,
        zram_disksize_bytes: 2 * GIB,
        zram_mem_limit_bytes: 1536 * MIB,
        flash: UFS31,
        cpu_cores: PHONE_CPU_CORES,
        reclaim_bytes_per_sec: PHONE_RECLAIM_BYTES_PER_SEC,
        read_ahead_kib: 128,
        preload_budget_bytes: 100 * MIB,
    },
    Preset {
        name: "phone-8gb",
        about: "Pixel 8 with 8 GB (the AppFlow paper §6.1), UFS-class storage",
        dram_bytes: 8 * GIB,
        app_memory_bytes: 5632 * MIB,
        zram_disksize_bytes: 2 * GIB,
        zram_mem_limit_bytes: 2 * GIB,
        flash: UFS31,
        cpu_cores: PHONE_CPU_CORES,
        reclaim_bytes_per_sec: PHONE_RECLAIM_BYTES_PER_SEC,
        read_ahead_kib: 128,
        preload_budget_bytes: 100 * MIB,
    },
    Preset {
        name: "headunit-4gb",
        about:
            "Raspberry Pi 4B head unit with 4 GB (the AppFlow paper §6.6), eMMC/SD-class storage",
        dram_bytes: 4 * GIB,
        app_memory_bytes: 2560 * MIB,
        zram_disksize_bytes: GIB,
        zram_mem_limit_bytes: GIB,
        flash: SD_A1_DDR50,
        cpu_cores: HEADUNIT_CPU_CORES,
        reclaim_bytes_per_sec: PHONE_RECLAIM_BYTES_PER_SEC,
        read_ahead_kib: 128,
        preload_budget_bytes: 100 * MIB,
    },
];

/// Looks a preset up by name.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The names of all presets, for messages.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

/// A preset at a scale: the sizes the domain is built with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    /// The preset.
    pub preset: Preset,
    /// The scale applied to sizes.
    pub scale: f64,
    /// Memory cgroup limit, bytes.
    pub app_memory_bytes: u64,
    /// zram disk size, bytes.
    pub zram_disksize_bytes: u64,
    /// zram pool cap, bytes.
    pub zram_mem_limit_bytes: u64,
    /// Preload budget M_p, bytes.
    pub preload_budget_bytes: u64,
    /// The phone core in effect (each leaf's CPU budget), host cores: the
    /// preset's `cpu_cores` until the testbed calibrates it against the
    /// preset's reclaim throughput.
    pub cpu_cores: f64,
}

impl Device {
    /// Scales a preset. `scale` must be in (0, 4].
    pub fn new(preset: &Preset, scale: f64) -> Result<Self, String> {
        if !(scale.is_finite() && scale > 0.0 && scale <= 4.0) {
            return Err(format!("--scale must be in (0, 4], got {scale}"));
        }
        let s = |b: u64| page_round((b as f64 * scale) as u64);
        Ok(Self {
            preset: preset.clone(),
            scale,
            app_memory_bytes: s(preset.app_memory_bytes),
            zram_disksize_bytes: s(preset.zram_disksize_bytes),
            zram_mem_limit_bytes: s(preset.zram_mem_limit_bytes),
            preload_budget_bytes: s(preset.preload_budget_bytes),
            cpu_cores: preset.cpu_cores,
        })
    }

    /// The share of the preset's core each leaf has: the synthetic apps
    /// burn `cpu_ms` × this of host CPU time, so their own work takes the
    /// preset's time while the kernel's work in their context (faults,
    /// reclaim, compression) runs on the calibrated budget.
    pub fn cpu_share(&self) -> f64 {
        (self.cpu_cores / self.preset.cpu_cores).clamp(0.0, 1.0)
    }
}

/// Rounds up to a multiple of 4 KiB.
pub fn page_round(b: u64) -> u64 {
    b.div_ceil(4096) * 4096
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_scale_every_size() {
        let p = preset("phone-6gb").unwrap();
        let d = Device::new(p, 0.25).unwrap();
        assert_eq!(d.app_memory_bytes, GIB);
        assert_eq!(d.zram_disksize_bytes, 512 * MIB);
        assert_eq!(d.preload_budget_bytes, page_round(25 * MIB));
        assert_eq!(d.cpu_cores, p.cpu_cores);
        assert_eq!(d.cpu_share(), 1.0);
        assert!(Device::new(p, 0.0).is_err());
        assert!(Device::new(p, f64::NAN).is_err());
        assert!(preset("phone-3gb").is_none());
        assert_eq!(preset_names().len(), 3);
    }

    #[test]
    fn small_blocks_are_far_slower_than_large_ones() {
        for p in PRESETS {
            let t = |b| p.flash.single_reader_bytes_per_sec(b);
            assert!(t(512 << 10) >= 5.0 * t(4096), "{}", p.name);
            assert!(p.cpu_cores > 0.0 && p.cpu_cores <= 1.0);
            assert!(p.reclaim_bytes_per_sec > 0.0);
        }
        let t = |b| UFS31.single_reader_bytes_per_sec(b);
        assert!(t(1 << 20) >= 2.0 * t(128 << 10));
        assert!(t(4096) <= t(1 << 20) / 15.0);
        // A1 class: at least 1,500 random 4 KiB reads per second.
        assert!((SD_A1_DDR50.single_reader_bytes_per_sec(4096) / 4096.0 - 1500.0).abs() < 5.0);
    }
}
