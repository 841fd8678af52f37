//! Device presets: the phone-like memory and storage the testbed emulates.
//!
//! A preset gives the memory the apps may use (the domain's memory cgroup
//! limit), the zram swap, and a storage curve made by blkio throttling: a
//! bandwidth cap and an IOPS cap, so that 4 KiB reads are IOPS-bound and far
//! slower than 512 KiB reads (seed 000 §2.2.1, Fig. 6). `--scale F`
//! multiplies every *size* (memory, swap, app files, anonymous allocations,
//! CPU work, preload budget) by F so the testbed fits small machines and
//! short runs; throughput is a property of the device and is not scaled, so
//! latencies shrink roughly by F too.

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
    /// zram disk size (uncompressed swap capacity), bytes. Seed 000 §4.2.2:
    /// swap is bounded (2 GB on Pixel 8, zram 25-30 % of DRAM).
    pub zram_disksize_bytes: u64,
    /// Cap of zram's compressed pool (zram's own mem_limit), bytes; the pool
    /// is not charged to the memory cgroup, so it is capped here and reported.
    pub zram_mem_limit_bytes: u64,
    /// Read bandwidth cap of the storage, bytes/s (blkio read_bps_device).
    pub read_bps: u64,
    /// Read IOPS cap of the storage (blkio read_iops_device).
    pub read_iops: u64,
    /// Readahead of the emulated storage, KiB (the loop device's read_ahead_kb).
    pub read_ahead_kib: u64,
    /// Preload budget M_p, bytes (seed 000 §4.1: 100 MB).
    pub preload_budget_bytes: u64,
}

/// The presets.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "phone-6gb",
        about: "Pixel 8 limited to 6 GB (seed 000 §6.1), UFS-class storage",
        dram_bytes: 6 * GIB,
        app_memory_bytes: 4 * GIB,
        zram_disksize_bytes: 2 * GIB,
        zram_mem_limit_bytes: 1536 * MIB,
        read_bps: 400 * MIB,
        read_iops: 3000,
        read_ahead_kib: 128,
        preload_budget_bytes: 100 * MIB,
    },
    Preset {
        name: "phone-8gb",
        about: "Pixel 8 with 8 GB (seed 000 §6.1), UFS-class storage",
        dram_bytes: 8 * GIB,
        app_memory_bytes: 5632 * MIB,
        zram_disksize_bytes: 2 * GIB,
        zram_mem_limit_bytes: 2 * GIB,
        read_bps: 400 * MIB,
        read_iops: 3000,
        read_ahead_kib: 128,
        preload_budget_bytes: 100 * MIB,
    },
    Preset {
        name: "headunit-4gb",
        about: "Raspberry Pi 4B head unit with 4 GB (seed 000 §6.6), eMMC/SD-class storage",
        dram_bytes: 4 * GIB,
        app_memory_bytes: 2560 * MIB,
        zram_disksize_bytes: GIB,
        zram_mem_limit_bytes: GIB,
        read_bps: 90 * MIB,
        read_iops: 1500,
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
        })
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
        assert!(Device::new(p, 0.0).is_err());
        assert!(Device::new(p, f64::NAN).is_err());
        assert!(preset("phone-3gb").is_none());
        assert_eq!(preset_names().len(), 3);
    }

    #[test]
    fn small_blocks_are_iops_bound() {
        for p in PRESETS {
            let small = (p.read_iops * 4096).min(p.read_bps);
            let large = (p.read_iops * 512 * 1024).min(p.read_bps);
            assert!(large >= 5 * small, "{}", p.name);
        }
    }
}
