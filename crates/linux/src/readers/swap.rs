//! Swap capacity: what anonymous reclaim can still put somewhere.
//!
//! `/proc/meminfo`'s `SwapFree` counts free slots of the swap devices. A
//! zram device with a `mem_limit` can refuse writes long before its slots
//! run out: its compressed pool is capped, and once the pool reaches the cap
//! every swap-out fails and the kernel's OOM killer runs while `SwapFree`
//! still shows hundreds of MB. The AppFlow paper §4.3 bounds anonymous
//! reclaim "either by swap partition size or by zRAM capacity"; this module
//! reads both: `/proc/swaps` for the slots, and for each zram device its
//! `mm_stat` (Documentation/admin-guide/blockdev/zram.rst), whose pool room
//! is converted to uncompressed bytes at the device's current ratio.

use super::{parse_err, parse_u64, read_text, ReadError};
use std::path::{Path, PathBuf};

/// One active swap area of `/proc/swaps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapArea {
    /// Device or file path, as the kernel prints it.
    pub path: PathBuf,
    /// Size, KiB.
    pub size_kb: u64,
    /// Used, KiB.
    pub used_kb: u64,
}

/// Parses `/proc/swaps` (a header line, then `Filename Type Size Used
/// Priority` per area). An area whose numbers do not parse is an error
/// naming the field.
pub fn parse_swaps(text: &str) -> Result<Vec<SwapArea>, ReadError> {
    const FILE: &str = "swaps";
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 4 {
            return Err(parse_err(
                FILE,
                format!("line {line:?} has fewer than 4 fields"),
            ));
        }
        out.push(SwapArea {
            path: PathBuf::from(f[0]),
            size_kb: parse_u64(FILE, "Size", f[2])?,
            used_kb: parse_u64(FILE, "Used", f[3])?,
        });
    }
    Ok(out)
}

/// zram's `mm_stat`, the fields used here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZramMmStat {
    /// Uncompressed bytes stored (`orig_data_size`).
    pub orig_data_bytes: u64,
    /// Compressed bytes stored (`compr_data_size`).
    pub compr_data_bytes: u64,
    /// Memory the pool takes, allocator overhead and freed slots included
    /// (`mem_used_total`).
    pub mem_used_bytes: u64,
    /// Cap of the pool, 0 for none (`mem_limit`).
    pub mem_limit_bytes: u64,
}

/// Parses zram's `mm_stat`: at least its first four numbers
/// (`orig_data_size compr_data_size mem_used_total mem_limit`; kernels add
/// more after them).
pub fn parse_zram_mm_stat(text: &str) -> Result<ZramMmStat, ReadError> {
    const FILE: &str = "mm_stat";
    let names = [
        "orig_data_size",
        "compr_data_size",
        "mem_used_total",
        "mem_limit",
    ];
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() < names.len() {
        return Err(parse_err(
            FILE,
            format!("{} fields, at least 4 expected", f.len()),
        ));
    }
    let v = |i: usize| parse_u64(FILE, names[i], f[i]);
    Ok(ZramMmStat {
        orig_data_bytes: v(0)?,
        compr_data_bytes: v(1)?,
        mem_used_bytes: v(2)?,
        mem_limit_bytes: v(3)?,
    })
}

impl ZramMmStat {
    /// Uncompressed bytes the pool can still take before its cap, at the
    /// device's current ratio (stored bytes per compressed byte; 1 while
    /// nothing is stored). `None` when the pool has no cap.
    ///
    /// The room is the cap less the compressed data, not less
    /// `mem_used_total`: when stored pages are freed (an app exits or is
    /// killed), zsmalloc keeps the partly used pages it allocated, so
    /// `mem_used_total` stays up while new writes fill the freed slots
    /// (zram checks its cap against the pool's pages, which those writes
    /// do not grow). Counting the pool's pages instead read a pool that had
    /// just been given 70 MB back as still full, and the daemon killed a
    /// second app where the kernel's OOM killer took one.
    pub fn room_bytes(&self) -> Option<u64> {
        if self.mem_limit_bytes == 0 {
            return None;
        }
        let room = self.mem_limit_bytes.saturating_sub(self.compr_data_bytes);
        let ratio = if self.orig_data_bytes > 0 && self.compr_data_bytes > 0 {
            (self.orig_data_bytes as f64 / self.compr_data_bytes as f64).max(1.0)
        } else {
            1.0
        };
        Some((room as f64 * ratio) as u64)
    }
}

/// Swap capacity of the system, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwapCapacity {
    /// Size of every area.
    pub total_bytes: u64,
    /// What can still be swapped out: free slots, and for a zram area with
    /// a capped pool no more than the pool's room.
    pub free_bytes: u64,
    /// Swapped out now, every area.
    pub used_bytes: u64,
    /// Of which held in memory: zram's compressed data (`compr_data_size`);
    /// None when a zram area's `mm_stat` could not be read.
    pub zram_data_bytes: Option<u64>,
}

impl Default for SwapCapacity {
    fn default() -> Self {
        SwapCapacity {
            total_bytes: 0,
            free_bytes: 0,
            used_bytes: 0,
            zram_data_bytes: Some(0),
        }
    }
}

impl SwapCapacity {
    /// Memory per byte swapped (zram's compressed data over all swapped
    /// bytes; 0 with nothing swapped): what a swapped byte gives back to a
    /// whole machine's memory when its process exits. Freed zram slots
    /// can leave zsmalloc's pages allocated for a while (see
    /// [`ZramMmStat::room_bytes`]), so this is the most it gives back.
    /// None when a zram area's pool could not be read.
    pub fn swapped_ram_share(&self) -> Option<f64> {
        let data = self.zram_data_bytes?;
        Some(appflow_core::killer::swapped_ram_share(
            data,
            self.used_bytes,
        ))
    }
}

/// The zram index of a swap area's path (`/dev/zramN`).
fn zram_index(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_prefix("zram")?
        .parse()
        .ok()
}

/// Adds up the areas of `swaps`; `mm_stat(N)` gives zram device N's stats
/// (None when unreadable: the area counts its free slots only).
pub fn swap_capacity(
    swaps: &[SwapArea],
    mut mm_stat: impl FnMut(u32) -> Option<ZramMmStat>,
) -> SwapCapacity {
    let mut c = SwapCapacity::default();
    for a in swaps {
        let size = a.size_kb.saturating_mul(1024);
        let mut free = a.size_kb.saturating_sub(a.used_kb).saturating_mul(1024);
        if let Some(n) = zram_index(&a.path) {
            let st = mm_stat(n);
            if let Some(room) = st.and_then(|s| s.room_bytes()) {
                free = free.min(room);
            }
            c.zram_data_bytes = match (c.zram_data_bytes, st) {
                (Some(d), Some(s)) => Some(d.saturating_add(s.compr_data_bytes)),
                _ => None,
            };
        }
        c.total_bytes = c.total_bytes.saturating_add(size);
        c.free_bytes = c.free_bytes.saturating_add(free);
        c.used_bytes = c.used_bytes.saturating_add(a.used_kb.saturating_mul(1024));
    }
    c
}

/// Reads the system's swap capacity from `proc_root/swaps` and, for zram
/// areas, `sys_root/block/zramN/mm_stat`.
pub fn read_swap_capacity(proc_root: &Path, sys_root: &Path) -> Result<SwapCapacity, ReadError> {
    let p = proc_root.join("swaps");
    let areas = parse_swaps(&read_text(&p)?).map_err(|e| e.at(&p))?;
    Ok(swap_capacity(&areas, |n| {
        let f = sys_root.join(format!("block/zram{n}/mm_stat"));
        read_text(&f).ok().and_then(|t| parse_zram_mm_stat(&t).ok())
    }))
}
