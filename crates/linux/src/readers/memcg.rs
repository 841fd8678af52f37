//! Memory cgroups, v1 and v2, behind one shape.
//!
//! | quantity | v1 file / key | v2 file / key |
//! |---|---|---|
//! | usage | `memory.usage_in_bytes` | `memory.current` |
//! | limit | `memory.limit_in_bytes` (≥ 2^62 = unlimited) | `memory.max` (`max` = unlimited) |
//! | anon / file | `total_rss` / `total_cache` | `anon` / `file` |
//! | LRU lists | `total_{in,}active_{anon,file}` | `{in,}active_{anon,file}` |
//! | mapped page cache | `total_mapped_file` | `file_mapped` |
//! | faults | `total_pgfault`, `total_pgmajfault` | `pgfault`, `pgmajfault` |
//! | refaults | `total_workingset_refault_{anon,file}` (or `total_workingset_refault`) | `workingset_refault_{anon,file}` (or `workingset_refault`) |
//! | scan / steal | not reported by v1 (0) | `pgscan`, `pgsteal` |
//! | swap | `total_swap` (only with swap accounting) | `memory.swap.current` |
//! | swappiness | `memory.swappiness` | none (global `vm.swappiness`) |
//! | limit hits | `memory.failcnt` | `max` of `memory.events` |
//! | OOM kills | `oom_kill` of `memory.oom_control` | `oom_kill` of `memory.events` |
//! | pressure | none | `memory.pressure` |
//!
//! v1's hierarchical `total_*` keys are used so that a domain cgroup with
//! children reports the whole domain; the local key is the fallback.
//!
//! **M_aval of a cgroup domain** (the AppFlow paper Algorithm 1's available memory,
//! [`cgroup_available_bytes`]) counts only what the domain can get without
//! costly reclaim: `limit − usage + reclaimable file`, where reclaimable file
//! = inactive file pages minus mapped file pages (v1 `total_inactive_file −
//! total_mapped_file`, v2 `inactive_file − file_mapped`, clamped at 0).
//! Active file pages are not counted (reclaim deactivates them first), nor
//! mapped ones: the kernel unmaps a mapped page from every process before it
//! can drop it, and a page referenced through a page table is re-activated
//! instead of dropped (mm/vmscan.c `folio_check_references`), so a process
//! that maps a large model keeps its pages out of reach of cheap reclaim.
//! The kernel does not say how many mapped pages sit on the inactive list, so
//! all of them are subtracted: M_aval errs low, which makes efficiency-first
//! come sooner, never later.

use super::{parse_err, parse_u64, read_psi_file, read_text, KernelFile, Psi, ReadError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Which cgroup interface a memory cgroup speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CgroupVersion {
    /// Legacy hierarchy (`/sys/fs/cgroup/memory/...`).
    V1,
    /// Unified hierarchy.
    V2,
}

/// The memory counters of a cgroup that the policies use, in one shape for both versions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemCgStat {
    /// Anonymous memory (v1 `total_rss`, v2 `anon`), bytes.
    pub anon_bytes: u64,
    /// Page cache (v1 `total_cache`, v2 `file`), bytes.
    pub file_bytes: u64,
    /// Active file LRU, bytes.
    pub active_file_bytes: u64,
    /// Inactive file LRU, bytes.
    pub inactive_file_bytes: u64,
    /// Page cache mapped into some process's page tables (v1
    /// `total_mapped_file`, v2 `file_mapped`), bytes.
    pub mapped_file_bytes: u64,
    /// Active anon LRU, bytes.
    pub active_anon_bytes: u64,
    /// Inactive anon LRU, bytes.
    pub inactive_anon_bytes: u64,
    /// Page faults (count).
    pub pgfault: u64,
    /// Major page faults (count).
    pub pgmajfault: u64,
    /// Refaults of evicted pages, anon + file (count).
    pub workingset_refault: u64,
    /// Refaults of evicted anonymous pages (count; 0 on kernels before 5.9,
    /// which report only the sum).
    #[serde(default)]
    pub refault_anon: u64,
    /// Refaults of evicted file pages (count; the sum on kernels before 5.9).
    #[serde(default)]
    pub refault_file: u64,
    /// Pages scanned by reclaim (count; always 0 on v1, which does not report it).
    pub pgscan: u64,
    /// Pages reclaimed (count; always 0 on v1).
    pub pgsteal: u64,
    /// Swapped-out anonymous memory, bytes (v1 `total_swap` when swap
    /// accounting is on, else 0; v2 `memory.swap.current`, filled by [`MemCgroup::stat`]).
    pub swap_bytes: u64,
    /// zswap's compressed pool charged to the cgroup, bytes (v2 `zswap`;
    /// 0 on v1 and without zswap). zram's pool is charged to no cgroup.
    #[serde(default)]
    pub zswap_bytes: u64,
}

impl MemCgStat {
    /// The cgroup's memory per byte it has in swap (its zswap pool over
    /// its swapped bytes; 0 with nothing swapped).
    pub fn swapped_ram_share(&self) -> f64 {
        appflow_core::killer::swapped_ram_share(self.zswap_bytes, self.swap_bytes)
    }

    /// Page cache that reclaim can free soon: inactive file pages that are
    /// not mapped (`inactive_file − mapped_file`, clamped at 0; see the
    /// module doc).
    pub fn reclaimable_file_bytes(&self) -> u64 {
        self.inactive_file_bytes
            .saturating_sub(self.mapped_file_bytes)
    }
}

/// M_aval of a cgroup domain with a limit: `limit − usage` plus the page
/// cache reclaim can free soon (at most `usage`). See the module doc.
pub fn cgroup_available_bytes(limit_bytes: u64, usage_bytes: u64, st: &MemCgStat) -> u64 {
    limit_bytes
        .saturating_sub(usage_bytes)
        .saturating_add(st.reclaimable_file_bytes().min(usage_bytes))
}

pub(super) fn kv_map(file: &str, text: &str) -> Result<BTreeMap<String, u64>, ReadError> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
            return Err(parse_err(file, format!("line {line:?} is not `key value`")));
        };
        m.insert(k.to_string(), parse_u64(file, k, v)?);
    }
    if m.is_empty() {
        return Err(parse_err(file, "no counters"));
    }
    Ok(m)
}

fn require(file: &str, m: &BTreeMap<String, u64>, keys: &[&str]) -> Result<u64, ReadError> {
    keys.iter()
        .find_map(|k| m.get(*k).copied())
        .ok_or_else(|| parse_err(file, format!("field {} is missing", keys.join(" / "))))
}

fn refault_sum(m: &BTreeMap<String, u64>, prefix: &str) -> u64 {
    let a = m.get(&format!("{prefix}workingset_refault_anon"));
    let f = m.get(&format!("{prefix}workingset_refault_file"));
    if a.is_some() || f.is_some() {
        // Kernel counters wrap; so does their sum.
        a.copied()
            .unwrap_or(0)
            .wrapping_add(f.copied().unwrap_or(0))
    } else {
        m.get(&format!("{prefix}workingset_refault"))
            .copied()
            .unwrap_or(0)
    }
}

/// One kind of refault (`anon` or `file`); a pre-5.9 kernel's single
/// `workingset_refault` counts as file (its anon pages never refaulted
/// through the workingset code).
fn refault_one(m: &BTreeMap<String, u64>, prefix: &str, kind: &str) -> u64 {
    match m.get(&format!("{prefix}workingset_refault_{kind}")) {
        Some(v) => *v,
        None if kind == "file" => refault_sum(m, prefix),
        None => 0,
    }
}

/// Parses a v1 `memory.stat` (hierarchical `total_*` keys preferred, local keys as fallback).
pub fn parse_memcg_stat_v1(text: &str) -> Result<MemCgStat, ReadError> {
    const FILE: &str = "memory.stat";
    let m = kv_map(FILE, text)?;
    let get = |k: &str| require(FILE, &m, &[&format!("total_{k}"), k]);
    let prefix = if m.keys().any(|k| k.starts_with("total_")) {
        "total_"
    } else {
        ""
    };
    Ok(MemCgStat {
        anon_bytes: get("rss")?,
        file_bytes: get("cache")?,
        active_file_bytes: get("active_file")?,
        inactive_file_bytes: get("inactive_file")?,
        mapped_file_bytes: get("mapped_file")?,
        active_anon_bytes: get("active_anon")?,
        inactive_anon_bytes: get("inactive_anon")?,
        pgfault: get("pgfault")?,
        pgmajfault: get("pgmajfault")?,
        workingset_refault: refault_sum(&m, prefix),
        refault_anon: refault_one(&m, prefix, "anon"),
        refault_file: refault_one(&m, prefix, "file"),
        pgscan: 0,
        pgsteal: 0,
        swap_bytes: get("swap").unwrap_or(0),
        zswap_bytes: 0,
    })
}

/// Parses a v2 `memory.stat`. `swap_bytes` is left 0: v2 reports swap in
/// `memory.swap.current`, which [`MemCgroup::stat`] reads.
pub fn parse_memcg_stat_v2(text: &str) -> Result<MemCgStat, ReadError> {
    const FILE: &str = "memory.stat";
    let m = kv_map(FILE, text)?;
    let get = |k: &str| require(FILE, &m, &[k]);
    Ok(MemCgStat {
        anon_bytes: get("anon")?,
        file_bytes: get("file")?,
        active_file_bytes: get("active_file")?,
        inactive_file_bytes: get("inactive_file")?,
        mapped_file_bytes: get("file_mapped")?,
        active_anon_bytes: get("active_anon")?,
        inactive_anon_bytes: get("inactive_anon")?,
        pgfault: get("pgfault")?,
        pgmajfault: get("pgmajfault")?,
        workingset_refault: refault_sum(&m, ""),
        refault_anon: refault_one(&m, "", "anon"),
        refault_file: refault_one(&m, "", "file"),
        pgscan: m.get("pgscan").copied().unwrap_or(0),
        pgsteal: m.get("pgsteal").copied().unwrap_or(0),
        swap_bytes: 0,
        zswap_bytes: m.get("zswap").copied().unwrap_or(0),
    })
}

/// v1 prints "no limit" as LONG_MAX rounded down to a page
/// (9223372036854771712); anything at or above 2^62 is treated as unlimited.
const V1_UNLIMITED_FROM: u64 = 1 << 62;

/// A memory cgroup directory, v1 or v2. The files sampled every tick
/// (usage, limit, memory.stat) stay open between reads ([`KernelFile`]);
/// clones share them.
#[derive(Debug, Clone)]
pub struct MemCgroup {
    /// The cgroup directory.
    pub path: PathBuf,
    /// Its interface version.
    pub version: CgroupVersion,
    files: Arc<Mutex<Vec<KernelFile>>>,
}

impl PartialEq for MemCgroup {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.version == other.version
    }
}

impl Eq for MemCgroup {}

/// Sum of v1 `oom_kill` counts of every cgroup below `dir` (not `dir` itself).
fn v1_subtree_oom_kills(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut sum = 0u64;
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let child = e.path();
        let file = child.join("memory.oom_control");
        let own = read_text(&file)
            .ok()
            .and_then(|t| kv_map("memory.oom_control", &t).ok())
            .and_then(|m| m.get("oom_kill").copied())
            .unwrap_or(0);
        sum = sum
            .saturating_add(own)
            .saturating_add(v1_subtree_oom_kills(&child));
    }
    sum
}

impl MemCgroup {
    /// Opens a memory cgroup directory: v1 when `memory.limit_in_bytes`
    /// exists, v2 when `memory.max` exists, else [`ReadError::NotMemCgroup`]
    /// (an `Io` error when the directory itself is missing).
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        if let Err(source) = std::fs::metadata(path) {
            return Err(ReadError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
        let version = if path.join("memory.limit_in_bytes").exists() {
            CgroupVersion::V1
        } else if path.join("memory.max").exists() {
            CgroupVersion::V2
        } else {
            return Err(ReadError::NotMemCgroup {
                path: path.to_path_buf(),
            });
        };
        Ok(Self {
            path: path.to_path_buf(),
            version,
            files: Arc::default(),
        })
    }

    /// Parses the text of the cgroup's `file`, read through its kept
    /// [`KernelFile`].
    fn with_text<T>(
        &self,
        file: &str,
        parse: impl FnOnce(&str) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        let p = self.path.join(file);
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let i = match files.iter().position(|f| f.path() == p) {
            Some(i) => i,
            None => {
                files.push(KernelFile::new(p.clone()));
                files.len() - 1
            }
        };
        let text = files[i].read()?;
        parse(&text).map_err(|e| e.at(&p))
    }

    fn read_u64(&self, file: &str) -> Result<u64, ReadError> {
        self.with_text(file, |t| parse_u64(file, "value", t))
    }

    /// Memory charged to the cgroup now, bytes (v1 `memory.usage_in_bytes`, v2 `memory.current`).
    pub fn usage_bytes(&self) -> Result<u64, ReadError> {
        match self.version {
            CgroupVersion::V1 => self.read_u64("memory.usage_in_bytes"),
            CgroupVersion::V2 => self.read_u64("memory.current"),
        }
    }

    /// The hard limit in bytes; `None` when unlimited.
    pub fn limit_bytes(&self) -> Result<Option<u64>, ReadError> {
        match self.version {
            CgroupVersion::V1 => {
                let v = self.read_u64("memory.limit_in_bytes")?;
                Ok((v < V1_UNLIMITED_FROM).then_some(v))
            }
            CgroupVersion::V2 => {
                let p = self.path.join("memory.max");
                let t = read_text(&p)?;
                if t.trim() == "max" {
                    Ok(None)
                } else {
                    parse_u64("memory.max", "value", &t)
                        .map(Some)
                        .map_err(|e| e.at(&p))
                }
            }
        }
    }

    /// Times the cgroup hit its limit and reclaimed in the allocating task
    /// (v1 `memory.failcnt`, v2 the `max` event of `memory.events`).
    pub fn limit_hits(&self) -> Result<u64, ReadError> {
        match self.version {
            CgroupVersion::V1 => self.read_u64("memory.failcnt"),
            CgroupVersion::V2 => self.event("memory.events", "max"),
        }
    }

    /// Processes the kernel OOM-killed in this cgroup and every cgroup below
    /// it. v2's `memory.events` counts descendants already. v1's
    /// `memory.oom_control` `oom_kill` is counted only in the victim's own
    /// cgroup (measured on 6.18: a child OOM-killed under its parent's limit
    /// reads 1 in the child and 0 in the parent), so v1 sums the subtree; a
    /// child removed while it is walked is skipped.
    pub fn oom_kills(&self) -> Result<u64, ReadError> {
        match self.version {
            CgroupVersion::V1 => {
                let own = self.event("memory.oom_control", "oom_kill")?;
                Ok(own.saturating_add(v1_subtree_oom_kills(&self.path)))
            }
            CgroupVersion::V2 => self.event("memory.events", "oom_kill"),
        }
    }

    fn event(&self, file: &'static str, key: &str) -> Result<u64, ReadError> {
        let p = self.path.join(file);
        let m = kv_map(file, &read_text(&p)?).map_err(|e| e.at(&p))?;
        require(file, &m, &[key]).map_err(|e| e.at(&p))
    }

    /// The memory counters, in one shape for both versions.
    pub fn stat(&self) -> Result<MemCgStat, ReadError> {
        match self.version {
            CgroupVersion::V1 => self.with_text("memory.stat", parse_memcg_stat_v1),
            CgroupVersion::V2 => {
                let mut s = self.with_text("memory.stat", parse_memcg_stat_v2)?;
                // No swap controller / no swap: the file is absent, swap is 0.
                if self.path.join("memory.swap.current").exists() {
                    s.swap_bytes = self.read_u64("memory.swap.current")?;
                }
                Ok(s)
            }
        }
    }

    /// Memory the domain can still use without reclaiming anything hard
    /// ([`cgroup_available_bytes`]: the domain's M_aval of the AppFlow paper
    /// Algorithm 1). `None` when the cgroup has no limit (use the system's
    /// MemAvailable).
    pub fn available_bytes(&self) -> Result<Option<u64>, ReadError> {
        let Some(limit) = self.limit_bytes()? else {
            return Ok(None);
        };
        let usage = self.usage_bytes()?;
        Ok(Some(cgroup_available_bytes(limit, usage, &self.stat()?)))
    }

    /// Processes in this cgroup (its own `cgroup.procs`, not descendants').
    pub fn procs(&self) -> Result<Vec<u32>, ReadError> {
        let p = self.path.join("cgroup.procs");
        let t = read_text(&p)?;
        t.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.trim().parse::<u32>().map_err(|_| ReadError::Parse {
                    path: p.clone(),
                    what: format!("{l:?} is not a pid"),
                })
            })
            .collect()
    }

    /// v1 `memory.swappiness` (0..=200); `None` on v2, which has no per-cgroup swappiness.
    pub fn swappiness(&self) -> Result<Option<u32>, ReadError> {
        match self.version {
            CgroupVersion::V1 => Ok(Some(self.read_u64("memory.swappiness")? as u32)),
            CgroupVersion::V2 => Ok(None),
        }
    }

    /// v2 `memory.pressure`; `None` on v1 (no per-cgroup PSI in the legacy
    /// hierarchy). A v2 cgroup without the file gives [`ReadError::PsiNotAvailable`].
    pub fn pressure(&self) -> Result<Option<Psi>, ReadError> {
        match self.version {
            CgroupVersion::V1 => Ok(None),
            CgroupVersion::V2 => read_psi_file(&self.path.join("memory.pressure")).map(Some),
        }
    }
}
