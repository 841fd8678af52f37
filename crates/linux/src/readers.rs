//! Live sensors: parsers and readers of /proc and memory-cgroup files.
//!
//! Every parser is pure and takes the file's text (`&str`), so text captured
//! on any device parses on any host. Every reader takes a root
//! (`proc_root`, e.g. `/proc` or a fixture tree; a cgroup directory) and
//! only joins paths under it. Errors are [`ReadError`]s that name
//! the file and what was wrong with it.
//!
//! The small key/value parsers are written here rather than taken from
//! `procfs-core` because the daemon needs errors that name the file and the
//! field, tolerance of keys that come and go between kernel versions, and
//! one shape for cgroup v1 and v2.
//!
//! Samples are raw counters as the kernel reports them; rates are derived by
//! the caller from two samples and the elapsed time.

mod cpu;
pub mod demand;
mod memcg;
pub mod pagemap;
mod swap;

pub use cpu::{parse_cpu_stat, read_cpu_stat, CpuStat};
pub use memcg::{
    cgroup_available_bytes, parse_memcg_stat_v1, parse_memcg_stat_v2, CgroupVersion, MemCgStat,
    MemCgroup,
};
pub use swap::{
    parse_swaps, parse_zram_mm_stat, read_swap_capacity, swap_capacity, SwapArea, SwapCapacity,
    ZramMmStat,
};

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a kernel file could not be read or understood.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The file could not be read (missing, permission, process gone...).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file was read but its content is not what the kernel writes.
    #[error("{}: {what}", path.display())]
    Parse {
        /// The file (just its kernel name, e.g. `meminfo`, when parsed from text).
        path: PathBuf,
        /// What is wrong, naming the field.
        what: String,
    },
    /// The kernel has no pressure stall information (no CONFIG_PSI, or booted with psi=0).
    #[error("PSI not available: {} (kernel without CONFIG_PSI, or booted with psi=0)", path.display())]
    PsiNotAvailable {
        /// The pressure file that was missing or refused reads.
        path: PathBuf,
    },
    /// The directory is not a memory cgroup of either version.
    #[error(
        "{}: not a memory cgroup (neither memory.limit_in_bytes (v1) nor memory.max (v2) exists)",
        path.display()
    )]
    NotMemCgroup {
        /// The directory given.
        path: PathBuf,
    },
}

impl ReadError {
    /// True when the file does not exist (typically: the process has exited).
    pub fn is_not_found(&self) -> bool {
        match self {
            ReadError::Io { source, .. } => {
                source.kind() == io::ErrorKind::NotFound
                    || source.raw_os_error() == Some(libc::ESRCH)
            }
            _ => false,
        }
    }

    /// Replaces the path of a parse error (parsers only know the file's kernel name).
    fn at(self, path: &Path) -> Self {
        match self {
            ReadError::Parse { what, .. } => ReadError::Parse {
                path: path.to_path_buf(),
                what,
            },
            other => other,
        }
    }
}

fn parse_err(file: &str, what: impl Into<String>) -> ReadError {
    ReadError::Parse {
        path: PathBuf::from(file),
        what: what.into(),
    }
}

/// The buffer a kernel text file is first read into: larger than the
/// daemon's per-tick files (meminfo ≈ 1.5 KiB, a v1 memory.stat ≈ 1.3 KiB,
/// vmstat ≈ 5 KiB) and every per-process file it reads.
const KERNEL_TEXT_BYTES: usize = 8 << 10;

/// Reads a whole file as bytes, the way kernel text files are cheapest to
/// read: one `read` into a buffer that holds the whole text, then the one
/// that returns 0. (`std::fs::read` asks for the size first, which /proc
/// and cgroup files report as 0, then reads 32 bytes and doubles from
/// there: ten system calls for a 1.5 KiB meminfo, against four here.)
pub(crate) fn read_bytes(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = Vec::with_capacity(KERNEL_TEXT_BYTES);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Text from bytes (lossy: /proc text is ASCII, cmdlines may not be),
/// without a copy when they are valid UTF-8.
fn text_of(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A kernel text file read again and again (the daemon samples its domain's
/// files every tick): on procfs, sysfs and cgroup file systems the file is
/// opened once and re-read from offset 0 (`pread`), which makes the kernel
/// print it afresh, into the same buffer, saving the path walk, open and
/// close of each read. A read that fails reopens the file once (a cgroup
/// removed and made again under the same path). Any other file (a fixture
/// tree) is opened for each read, so that a file replaced between two
/// reads is seen.
#[derive(Debug)]
pub struct KernelFile {
    path: PathBuf,
    held: Option<std::fs::File>,
    buf: Vec<u8>,
}

/// File systems whose files print their text afresh at each read from 0
/// (statfs(2) magic numbers, linux/magic.h).
const PRINTED_FS: [i64; 4] = [
    0x9fa0,      // PROC_SUPER_MAGIC
    0x6265_6572, // SYSFS_MAGIC
    0x0027_e0eb, // CGROUP_SUPER_MAGIC
    0x6367_7270, // CGROUP2_SUPER_MAGIC
];

impl KernelFile {
    /// A file at `path` (not opened yet).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            held: None,
            buf: Vec::with_capacity(KERNEL_TEXT_BYTES),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's whole text now (lossy UTF-8).
    pub fn read(&mut self) -> Result<std::borrow::Cow<'_, str>, ReadError> {
        let io_err = |source| ReadError::Io {
            path: self.path.clone(),
            source,
        };
        let reread = self
            .held
            .as_ref()
            .is_some_and(|f| Self::read_at_0(f, &mut self.buf).is_ok());
        if !reread {
            self.held = None;
            let f = std::fs::File::open(&self.path).map_err(io_err)?;
            Self::read_at_0(&f, &mut self.buf).map_err(io_err)?;
            if Self::printed(&f) {
                self.held = Some(f);
            }
        }
        Ok(String::from_utf8_lossy(&self.buf))
    }

    // `f_type` is an i64 here and an i32 on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    fn printed(f: &std::fs::File) -> bool {
        use std::os::fd::AsFd;
        nix::sys::statfs::fstatfs(f.as_fd())
            .map(|s| PRINTED_FS.contains(&(s.filesystem_type().0 as i64)))
            .unwrap_or(false)
    }

    /// `pread`s the whole file from offset 0 into `buf`.
    fn read_at_0(f: &std::fs::File, buf: &mut Vec<u8>) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        buf.clear();
        loop {
            if buf.len() == buf.capacity() {
                buf.reserve(buf.capacity().max(KERNEL_TEXT_BYTES));
            }
            let len = buf.len();
            let cap = buf.capacity();
            buf.resize(cap, 0);
            match f.read_at(&mut buf[len..], len as u64) {
                Ok(0) => {
                    buf.truncate(len);
                    return Ok(());
                }
                Ok(n) => buf.truncate(len + n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(len),
                Err(e) => {
                    buf.truncate(len);
                    return Err(e);
                }
            }
        }
    }
}

/// Reads a whole file as UTF-8 (lossy: /proc text is ASCII, cmdlines may not be).
pub(crate) fn read_text(path: &Path) -> Result<String, ReadError> {
    let bytes = read_bytes(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(text_of(bytes))
}

fn parse_u64(file: &str, field: &str, v: &str) -> Result<u64, ReadError> {
    v.trim().parse::<u64>().map_err(|_| {
        parse_err(
            file,
            format!("field {field}: {v:?} is not a non-negative integer"),
        )
    })
}

// ---------------------------------------------------------------- meminfo

/// System memory as reported by `/proc/meminfo` (all values in KiB, as the kernel prints them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemInfo {
    /// MemTotal.
    pub total_kb: u64,
    /// MemFree.
    pub free_kb: u64,
    /// MemAvailable (the kernel's estimate of memory available without swapping).
    pub available_kb: u64,
    /// Buffers.
    pub buffers_kb: u64,
    /// Cached (page cache, excluding swap cache).
    pub cached_kb: u64,
    /// Active(anon).
    pub active_anon_kb: u64,
    /// Inactive(anon).
    pub inactive_anon_kb: u64,
    /// Active(file).
    pub active_file_kb: u64,
    /// Inactive(file).
    pub inactive_file_kb: u64,
    /// SwapTotal.
    pub swap_total_kb: u64,
    /// SwapFree.
    pub swap_free_kb: u64,
    /// Mlocked.
    pub mlocked_kb: u64,
}

/// Parses `/proc/meminfo`. MemTotal, MemFree and MemAvailable are required
/// (MemAvailable exists since Linux 3.14); the other fields default to 0 when
/// a kernel does not print them. A value that is not a number is an error
/// naming the field.
pub fn parse_meminfo(text: &str) -> Result<MemInfo, ReadError> {
    const FILE: &str = "meminfo";
    let mut m = MemInfo::default();
    let (mut total, mut free, mut avail) = (false, false, false);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(parse_err(FILE, format!("line {line:?} has no ':'")));
        };
        let slot = match key {
            "MemTotal" => {
                total = true;
                &mut m.total_kb
            }
            "MemFree" => {
                free = true;
                &mut m.free_kb
            }
            "MemAvailable" => {
                avail = true;
                &mut m.available_kb
            }
            "Buffers" => &mut m.buffers_kb,
            "Cached" => &mut m.cached_kb,
            "Active(anon)" => &mut m.active_anon_kb,
            "Inactive(anon)" => &mut m.inactive_anon_kb,
            "Active(file)" => &mut m.active_file_kb,
            "Inactive(file)" => &mut m.inactive_file_kb,
            "SwapTotal" => &mut m.swap_total_kb,
            "SwapFree" => &mut m.swap_free_kb,
            "Mlocked" => &mut m.mlocked_kb,
            _ => continue,
        };
        let num = rest.trim().trim_end_matches("kB").trim();
        *slot = parse_u64(FILE, key, num)?;
    }
    for (seen, name) in [
        (total, "MemTotal"),
        (free, "MemFree"),
        (avail, "MemAvailable"),
    ] {
        if !seen {
            return Err(parse_err(FILE, format!("field {name} is missing")));
        }
    }
    Ok(m)
}

/// Reads `<proc_root>/meminfo`.
pub fn read_meminfo(proc_root: &Path) -> Result<MemInfo, ReadError> {
    let path = proc_root.join("meminfo");
    parse_meminfo(&read_text(&path)?).map_err(|e| e.at(&path))
}

// ---------------------------------------------------------------- vmstat

/// Every counter of `/proc/vmstat`, as sampled.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VmStat {
    /// Counter name → value.
    pub counters: BTreeMap<String, u64>,
}

impl VmStat {
    /// A counter, 0 when this kernel does not have it.
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    fn sum_prefix(&self, prefix: &str) -> u64 {
        self.counters
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| *v)
            .fold(0u64, u64::wrapping_add)
    }

    /// Pages allocated: the sum of every `pgalloc_*` zone counter (the AppFlow paper
    /// Algorithm 1 samples this every 100 ms to get n_alloc).
    pub fn pgalloc_total(&self) -> u64 {
        self.sum_prefix("pgalloc_")
    }

    /// Refaults: `workingset_refault_anon + workingset_refault_file` (Linux ≥ 5.9),
    /// or `workingset_refault` on older kernels.
    pub fn refaults(&self) -> u64 {
        if self.counters.contains_key("workingset_refault_file")
            || self.counters.contains_key("workingset_refault_anon")
        {
            // Kernel counters wrap; so does their sum (as in `sum_prefix`).
            self.get("workingset_refault_anon")
                .wrapping_add(self.get("workingset_refault_file"))
        } else {
            self.get("workingset_refault")
        }
    }

    /// Pages reclaimed by anyone: `pgsteal_anon + pgsteal_file` (Linux ≥
    /// 5.8; they count every reclaim, a memory cgroup's at its limit too),
    /// else every `pgsteal_kswapd*` and `pgsteal_direct*` counter (older
    /// kernels, per zone before 4.8).
    pub fn steals(&self) -> u64 {
        if self.counters.contains_key("pgsteal_anon") || self.counters.contains_key("pgsteal_file")
        {
            self.get("pgsteal_anon")
                .wrapping_add(self.get("pgsteal_file"))
        } else {
            self.sum_prefix("pgsteal_kswapd")
                .wrapping_add(self.sum_prefix("pgsteal_direct"))
        }
    }

    /// Pages reclaimed by kswapd: `pgsteal_kswapd` (per zone before 4.8).
    /// A memory cgroup's reclaim at its limit is not in it (nor in
    /// `pgsteal_direct`): the kernel counts those only per cgroup.
    pub fn steals_kswapd(&self) -> u64 {
        self.sum_prefix("pgsteal_kswapd")
    }

    /// Direct-reclaim stalls: the sum of every `allocstall_*` zone counter.
    pub fn allocstalls(&self) -> u64 {
        self.sum_prefix("allocstall_")
    }

    /// Pages swapped in.
    pub fn pswpin(&self) -> u64 {
        self.get("pswpin")
    }

    /// Pages swapped out.
    pub fn pswpout(&self) -> u64 {
        self.get("pswpout")
    }
}

/// Parses `/proc/vmstat` (`name value` per line). Some counters are signed
/// in the kernel (per-cpu drift can make e.g. `nr_*` briefly negative); a
/// negative value is stored as 0.
pub fn parse_vmstat(text: &str) -> Result<VmStat, ReadError> {
    const FILE: &str = "vmstat";
    let mut counters = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(name), Some(value), None) = (it.next(), it.next(), it.next()) else {
            return Err(parse_err(
                FILE,
                format!("line {line:?} is not `name value`"),
            ));
        };
        let v = match value.parse::<u64>() {
            Ok(v) => v,
            Err(_) if value.parse::<i64>().is_ok() => 0,
            Err(_) => {
                return Err(parse_err(
                    FILE,
                    format!("field {name}: {value:?} is not an integer"),
                ))
            }
        };
        counters.insert(name.to_string(), v);
    }
    if counters.is_empty() {
        return Err(parse_err(FILE, "no counters"));
    }
    Ok(VmStat { counters })
}

/// Reads `<proc_root>/vmstat`.
pub fn read_vmstat(proc_root: &Path) -> Result<VmStat, ReadError> {
    let path = proc_root.join("vmstat");
    parse_vmstat(&read_text(&path)?).map_err(|e| e.at(&path))
}

// ---------------------------------------------------------------- PSI

/// Pressure stall information of one resource (`/proc/pressure/memory`, or a
/// v2 cgroup's `memory.pressure`). Averages are percentages of wall time;
/// totals are cumulative stall time in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Psi {
    /// `some` average over 10 s, percent.
    pub some_avg10: f64,
    /// `some` average over 60 s, percent.
    pub some_avg60: f64,
    /// `some` average over 300 s, percent.
    pub some_avg300: f64,
    /// `some` cumulative stall time, µs.
    pub some_total_us: u64,
    /// `full` average over 10 s, percent.
    pub full_avg10: f64,
    /// `full` average over 60 s, percent.
    pub full_avg60: f64,
    /// `full` average over 300 s, percent.
    pub full_avg300: f64,
    /// `full` cumulative stall time, µs.
    pub full_total_us: u64,
}

/// Parses a PSI file: a `some` line (required) and a `full` line (zeros when
/// absent, as for CPU pressure on kernels before 5.13).
pub fn parse_psi(text: &str) -> Result<Psi, ReadError> {
    const FILE: &str = "pressure";
    let mut p = Psi::default();
    let mut some_seen = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let kind = it.next().unwrap_or("");
        let (a10, a60, a300, total) = match kind {
            "some" => {
                some_seen = true;
                (
                    &mut p.some_avg10,
                    &mut p.some_avg60,
                    &mut p.some_avg300,
                    &mut p.some_total_us,
                )
            }
            "full" => (
                &mut p.full_avg10,
                &mut p.full_avg60,
                &mut p.full_avg300,
                &mut p.full_total_us,
            ),
            _ => {
                return Err(parse_err(
                    FILE,
                    format!("line {line:?} is neither `some` nor `full`"),
                ))
            }
        };
        let mut got = [false; 4];
        for kv in it {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(parse_err(FILE, format!("{kind}: {kv:?} is not key=value")));
            };
            let field = format!("{kind} {k}");
            let f = |v: &str| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        parse_err(FILE, format!("field {field}: {v:?} is not a percentage"))
                    })
            };
            match k {
                "avg10" => (*a10, got[0]) = (f(v)?, true),
                "avg60" => (*a60, got[1]) = (f(v)?, true),
                "avg300" => (*a300, got[2]) = (f(v)?, true),
                "total" => (*total, got[3]) = (parse_u64(FILE, &field, v)?, true),
                _ => {}
            }
        }
        for (ok, k) in got.iter().zip(["avg10", "avg60", "avg300", "total"]) {
            if !ok {
                return Err(parse_err(FILE, format!("field {kind} {k} is missing")));
            }
        }
    }
    if !some_seen {
        return Err(parse_err(FILE, "the `some` line is missing"));
    }
    Ok(p)
}

/// Reads a PSI file, mapping "missing" and "refused" (psi=0 makes reads fail
/// with EOPNOTSUPP) to [`ReadError::PsiNotAvailable`].
pub fn read_psi_file(path: &Path) -> Result<Psi, ReadError> {
    match read_bytes(path) {
        Ok(bytes) => parse_psi(&text_of(bytes)).map_err(|e| e.at(path)),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::EOPNOTSUPP) =>
        {
            Err(ReadError::PsiNotAvailable {
                path: path.to_path_buf(),
            })
        }
        Err(source) => Err(ReadError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads `<proc_root>/pressure/memory`.
pub fn read_psi_memory(proc_root: &Path) -> Result<Psi, ReadError> {
    read_psi_file(&proc_root.join("pressure").join("memory"))
}

// ---------------------------------------------------------------- per process

/// A process's memory summary from `/proc/PID/smaps_rollup` (KiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SmapsRollup {
    /// Rss: resident pages (anon + file + shmem).
    pub rss_kb: u64,
    /// Pss: proportional share of resident pages.
    pub pss_kb: u64,
    /// Anonymous: resident anonymous pages.
    pub anon_kb: u64,
    /// Swap: anonymous pages swapped out (including to zram).
    pub swap_kb: u64,
    /// SwapPss: proportional share of swapped pages.
    pub swap_pss_kb: u64,
}

impl SmapsRollup {
    /// Footprint as the killer counts it: (Rss + Swap) in bytes (the AppFlow paper §4.3, M_current).
    pub fn footprint_bytes(&self) -> u64 {
        // Saturating: a malformed file must not overflow (the fuzz target found it).
        self.rss_kb
            .saturating_add(self.swap_kb)
            .saturating_mul(1024)
    }
}

/// Parses `/proc/PID/smaps_rollup`. The first line (the `[rollup]` range) is
/// skipped. An empty file (kernel threads have no mm) gives all zeros. Rss is
/// required otherwise.
pub fn parse_smaps_rollup(text: &str) -> Result<SmapsRollup, ReadError> {
    const FILE: &str = "smaps_rollup";
    let mut s = SmapsRollup::default();
    if text.trim().is_empty() {
        return Ok(s);
    }
    let mut rss_seen = false;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        // The header line "5600-7ffe ---p 00000000 00:00 0  [rollup]" has ':' in the device.
        if key.contains(' ') {
            continue;
        }
        let slot = match key {
            "Rss" => {
                rss_seen = true;
                &mut s.rss_kb
            }
            "Pss" => &mut s.pss_kb,
            "Anonymous" => &mut s.anon_kb,
            "Swap" => &mut s.swap_kb,
            "SwapPss" => &mut s.swap_pss_kb,
            _ => continue,
        };
        *slot = parse_u64(FILE, key, rest.trim().trim_end_matches("kB").trim())?;
    }
    if !rss_seen {
        return Err(parse_err(FILE, "field Rss is missing"));
    }
    Ok(s)
}

/// A process's memory from the counters of `/proc/PID/status` (KiB).
/// Unlike `smaps_rollup`, the kernel reads these from per-mm counters: no
/// page-table walk and no mmap lock, so reading them often does not slow
/// the process down (the recorder samples the launch with it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatusMemory {
    /// VmRSS: resident pages (anon + file + shmem).
    pub rss_kb: u64,
    /// RssAnon: resident anonymous pages.
    pub anon_kb: u64,
    /// VmSwap: anonymous pages swapped out.
    pub swap_kb: u64,
}

/// Parses the memory lines of `/proc/PID/status`. A process without an mm
/// (kernel thread, zombie) has none of them: all zeros.
pub fn parse_status_memory(text: &str) -> Result<StatusMemory, ReadError> {
    const FILE: &str = "status";
    let mut m = StatusMemory::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "VmRSS" => &mut m.rss_kb,
            "RssAnon" => &mut m.anon_kb,
            "VmSwap" => &mut m.swap_kb,
            _ => continue,
        };
        *slot = parse_u64(FILE, key, rest.trim().trim_end_matches("kB").trim())?;
    }
    Ok(m)
}

/// Reads the memory counters of `<proc_root>/<pid>/status`.
pub fn read_status_memory(proc_root: &Path, pid: u32) -> Result<StatusMemory, ReadError> {
    let path = pid_path(proc_root, pid, "status");
    parse_status_memory(&read_text(&path)?).map_err(|e| e.at(&path))
}

fn pid_path(proc_root: &Path, pid: u32, file: &str) -> PathBuf {
    proc_root.join(pid.to_string()).join(file)
}

/// Reads `<proc_root>/<pid>/smaps_rollup`.
pub fn read_smaps_rollup(proc_root: &Path, pid: u32) -> Result<SmapsRollup, ReadError> {
    let path = pid_path(proc_root, pid, "smaps_rollup");
    parse_smaps_rollup(&read_text(&path)?).map_err(|e| e.at(&path))
}

/// Reads `<proc_root>/<pid>/oom_score_adj` (-1000..=1000).
pub fn read_oom_score_adj(proc_root: &Path, pid: u32) -> Result<i32, ReadError> {
    let path = pid_path(proc_root, pid, "oom_score_adj");
    let text = read_text(&path)?;
    text.trim()
        .parse::<i32>()
        .ok()
        .filter(|v| (-1000..=1000).contains(v))
        .ok_or_else(|| ReadError::Parse {
            path: path.clone(),
            what: format!("{:?} is not an integer in -1000..=1000", text.trim()),
        })
}

/// Reads a numeric sysctl, `<proc_root>/sys/<name>` (e.g. `vm/watermark_scale_factor`).
pub fn read_sysctl_u64(proc_root: &Path, name: &str) -> Result<u64, ReadError> {
    let path = proc_root.join("sys").join(name);
    let text = read_text(&path)?;
    parse_u64(name, name, &text).map_err(|e| e.at(&path))
}

/// Lists the numeric entries of `proc_root` (process ids), sorted.
pub fn list_pids(proc_root: &Path) -> Result<Vec<u32>, ReadError> {
    let io_err = |source| ReadError::Io {
        path: proc_root.to_path_buf(),
        source,
    };
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(proc_root).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        if let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

/// Reads `<proc_root>/<pid>/cmdline` split at NULs (empty for kernel threads and zombies).
pub fn read_cmdline(proc_root: &Path, pid: u32) -> Result<Vec<String>, ReadError> {
    let text = read_text(&pid_path(proc_root, pid, "cmdline"))?;
    let mut args: Vec<String> = text.split('\0').map(str::to_string).collect();
    if args.last().is_some_and(String::is_empty) {
        args.pop();
    }
    Ok(args)
}

/// Reads the `<proc_root>/<pid>/exe` link (fails for kernel threads).
pub fn read_exe(proc_root: &Path, pid: u32) -> Result<PathBuf, ReadError> {
    let path = pid_path(proc_root, pid, "exe");
    std::fs::read_link(&path).map_err(|source| ReadError::Io { path, source })
}

/// Reads `<proc_root>/<pid>/comm` (the kernel's 15-character task name).
pub fn read_comm(proc_root: &Path, pid: u32) -> Result<String, ReadError> {
    let text = read_text(&pid_path(proc_root, pid, "comm"))?;
    Ok(text.trim_end_matches('\n').to_string())
}

/// The fields of `/proc/PID/stat` this project uses (proc(5) numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: state (`R`, `S`, `D`, `Z`, …).
    pub state: char,
    /// Field 4: parent pid.
    pub ppid: u32,
    /// Field 10: minor faults.
    pub minflt: u64,
    /// Field 12: major faults.
    pub majflt: u64,
    /// Fields 14 + 15: user + system CPU time, clock ticks.
    pub cpu_ticks: u64,
    /// Field 22: start time, clock ticks after boot. With the pid it
    /// identifies a process across PID reuse.
    pub start_time: u64,
}

/// Parses `/proc/PID/stat`. The comm (field 2) may hold spaces and
/// parentheses, so fields are counted after the last ')'.
pub fn parse_stat(text: &str) -> Result<ProcStat, ReadError> {
    const FILE: &str = "stat";
    let after = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| parse_err(FILE, "no ')' closing the comm field"))?;
    // After ')': field 3 (state) is index 0, so field N is index N - 3.
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize, name: &str| {
        f.get(n - 3)
            .copied()
            .ok_or_else(|| parse_err(FILE, format!("field {name} is missing")))
    };
    let num = |n: usize, name: &str| field(n, name).and_then(|v| parse_u64(FILE, name, v));
    let ppid = field(4, "ppid")?;
    Ok(ProcStat {
        state: field(3, "state")?.chars().next().unwrap_or('?'),
        ppid: ppid
            .parse()
            .map_err(|_| parse_err(FILE, format!("field ppid: {ppid:?} is not a pid")))?,
        minflt: num(10, "minflt")?,
        majflt: num(12, "majflt")?,
        cpu_ticks: num(14, "utime")?.saturating_add(num(15, "stime")?),
        start_time: num(22, "starttime")?,
    })
}

/// Reads `<proc_root>/<pid>/stat`.
pub fn read_stat(proc_root: &Path, pid: u32) -> Result<ProcStat, ReadError> {
    let path = pid_path(proc_root, pid, "stat");
    parse_stat(&read_text(&path)?).map_err(|e| e.at(&path))
}

/// Reads the parent pid from `<proc_root>/<pid>/stat`.
pub fn read_ppid(proc_root: &Path, pid: u32) -> Result<u32, ReadError> {
    read_stat(proc_root, pid).map(|s| s.ppid)
}

/// The process's start time ([`ProcStat::start_time`]); `None` when it is gone.
pub fn read_start_time(proc_root: &Path, pid: u32) -> Option<u64> {
    read_stat(proc_root, pid).ok().map(|s| s.start_time)
}

/// `pid` and all its living descendants, found through every process's
/// parent pid (processes that vanish while scanning are skipped).
pub fn descendants(proc_root: &Path, pid: u32) -> Result<Vec<u32>, ReadError> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for p in list_pids(proc_root)? {
        if let Ok(ppid) = read_ppid(proc_root, p) {
            children.entry(ppid).or_default().push(p);
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied().filter(|c| *c != pid));
        }
        i += 1;
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// One file-backed mapping of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping {
    /// First virtual address.
    pub start_addr: u64,
    /// One past the last virtual address.
    pub end_addr: u64,
    /// Permissions, e.g. `r-xp`.
    pub perms: String,
    /// Offset in the file of `start_addr`, bytes.
    pub offset_bytes: u64,
    /// Device `major:minor` (hex, as printed).
    pub dev: String,
    /// Inode number.
    pub inode: u64,
    /// Path of the mapped file.
    pub path: String,
}

/// The fields of one `/proc/PID/maps` line (also the header line of each
/// `/proc/PID/smaps` entry).
struct MapsLine<'a> {
    start_addr: u64,
    end_addr: u64,
    perms: &'a str,
    offset_bytes: u64,
    dev: &'a str,
    inode: u64,
    /// Path or pseudo-name (`[heap]`, `[anon:…]`); empty for an unnamed mapping.
    name: &'a str,
}

fn parse_maps_line<'a>(file: &str, line: &'a str) -> Result<MapsLine<'a>, ReadError> {
    let bad = |what: &str| parse_err(file, format!("{what} in line {line:?}"));
    let mut it = line.splitn(6, ' ');
    let range = it.next().ok_or_else(|| bad("no address range"))?;
    let perms = it.next().ok_or_else(|| bad("no permissions"))?;
    let offset = it.next().ok_or_else(|| bad("no offset"))?;
    let dev = it.next().ok_or_else(|| bad("no device"))?;
    let inode = it.next().ok_or_else(|| bad("no inode"))?;
    let name = it.next().unwrap_or("").trim();
    let (s, e) = range
        .split_once('-')
        .ok_or_else(|| bad("bad address range"))?;
    let hex = |v: &str, what: &str| u64::from_str_radix(v, 16).map_err(|_| bad(what));
    Ok(MapsLine {
        start_addr: hex(s, "bad start address")?,
        end_addr: hex(e, "bad end address")?,
        perms,
        offset_bytes: hex(offset, "bad offset")?,
        dev,
        inode: inode.parse().map_err(|_| bad("bad inode"))?,
        name,
    })
}

/// Parses `/proc/PID/maps`, keeping only mappings of files (inode ≠ 0 and an
/// absolute path; anonymous, `[heap]`, `[stack]`, `[vdso]` are skipped).
/// A deleted file's ` (deleted)` suffix is kept in the path.
pub fn parse_maps(text: &str) -> Result<Vec<FileMapping>, ReadError> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let m = parse_maps_line("maps", line)?;
        if m.inode == 0 || !m.name.starts_with('/') {
            continue;
        }
        out.push(FileMapping {
            start_addr: m.start_addr,
            end_addr: m.end_addr,
            perms: m.perms.to_string(),
            offset_bytes: m.offset_bytes,
            dev: m.dev.to_string(),
            inode: m.inode,
            path: m.name.to_string(),
        });
    }
    Ok(out)
}

/// One mapping of `/proc/PID/smaps` with the kernel's flags for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vma {
    /// First virtual address.
    pub start_addr: u64,
    /// One past the last virtual address.
    pub end_addr: u64,
    /// Permissions, e.g. `rw-p`.
    pub perms: String,
    /// Inode number (0 for anonymous memory).
    pub inode: u64,
    /// Path or pseudo-name (`[heap]`, `[anon:…]`), empty for an unnamed mapping.
    pub name: String,
    /// The `VmFlags` mnemonics (`rd wr … lo ac`; see proc(5)): e.g. `lo`
    /// VM_LOCKED, `pf` VM_PFNMAP, `io` VM_IO, `ht` VM_HUGETLB.
    pub vm_flags: Vec<String>,
    /// Resident anonymous memory of the mapping, bytes (`Anonymous:`; pages
    /// swapped out are not counted).
    pub anon_bytes: u64,
}

impl Vma {
    /// Whether the kernel set the VmFlags mnemonic `flag` on this mapping.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }
}

/// Parses `/proc/PID/smaps` into its mappings, their `VmFlags` and their
/// resident anonymous memory (`Anonymous:`; the other per-mapping counters
/// are not kept). A field line before the first
/// mapping, or a malformed header line, is an error naming the line.
pub fn parse_smaps_vmas(text: &str) -> Result<Vec<Vma>, ReadError> {
    const FILE: &str = "smaps";
    let mut out: Vec<Vma> = Vec::new();
    for line in text.lines() {
        let Some(first) = line.split_whitespace().next() else {
            continue;
        };
        if let Some(key) = first.strip_suffix(':') {
            let Some(vma) = out.last_mut() else {
                return Err(parse_err(FILE, format!("field {key} before any mapping")));
            };
            if key == "VmFlags" {
                vma.vm_flags = line
                    .split_whitespace()
                    .skip(1)
                    .map(str::to_string)
                    .collect();
            } else if key == "Anonymous" {
                let kb = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| parse_err(FILE, format!("bad Anonymous line: {line}")))?;
                vma.anon_bytes = kb.saturating_mul(1024);
            }
            continue;
        }
        let m = parse_maps_line(FILE, line)?;
        out.push(Vma {
            start_addr: m.start_addr,
            end_addr: m.end_addr,
            perms: m.perms.to_string(),
            inode: m.inode,
            name: m.name.to_string(),
            vm_flags: Vec::new(),
            anon_bytes: 0,
        });
    }
    Ok(out)
}

/// Reads the mappings and their flags from `<proc_root>/<pid>/smaps`.
pub fn read_smaps_vmas(proc_root: &Path, pid: u32) -> Result<Vec<Vma>, ReadError> {
    let path = pid_path(proc_root, pid, "smaps");
    parse_smaps_vmas(&read_text(&path)?).map_err(|e| e.at(&path))
}

/// Reads the file mappings of `<proc_root>/<pid>/maps`.
pub fn read_maps(proc_root: &Path, pid: u32) -> Result<Vec<FileMapping>, ReadError> {
    let path = pid_path(proc_root, pid, "maps");
    parse_maps(&read_text(&path)?).map_err(|e| e.at(&path))
}

/// One mount of `/proc/PID/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// Device of the filesystem (`major:minor`; one superblock, possibly mounted many times).
    pub dev: String,
    /// Where it is mounted (octal escapes such as `\040` decoded).
    pub mount_point: PathBuf,
    /// Filesystem type (`ext4`, `tmpfs`, `fuse.sshfs`...).
    pub fs_type: String,
    /// Mount source (`/dev/vda`, `tmpfs`...).
    pub source: String,
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Three octal digits of at most \377 (the kernel's `mangle()` escapes
        // a byte); anything larger is not an escape and stays as text.
        if b[i] == b'\\'
            && i + 3 < b.len()
            && (b'0'..=b'3').contains(&b[i + 1])
            && b[i + 2..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `/proc/PID/mountinfo` (fields: id, parent, major:minor, root,
/// mount point, options, optional fields, `-`, type, source, super options).
pub fn parse_mountinfo(text: &str) -> Result<Vec<MountInfo>, ReadError> {
    const FILE: &str = "mountinfo";
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || parse_err(FILE, format!("line {line:?} is not a mountinfo line"));
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-").ok_or_else(bad)?;
        if sep < 6 || fields.len() < sep + 3 {
            return Err(bad());
        }
        out.push(MountInfo {
            dev: fields[2].to_string(),
            mount_point: PathBuf::from(unescape_octal(fields[4])),
            fs_type: fields[sep + 1].to_string(),
            source: unescape_octal(fields[sep + 2]),
        });
    }
    Ok(out)
}

/// Reads `<proc_root>/self/mountinfo`.
pub fn read_mountinfo(proc_root: &Path) -> Result<Vec<MountInfo>, ReadError> {
    let path = proc_root.join("self").join("mountinfo");
    parse_mountinfo(&read_text(&path)?).map_err(|e| e.at(&path))
}
