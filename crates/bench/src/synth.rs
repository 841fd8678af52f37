//! Synthetic apps: a deterministic file tree and launch pattern derived from
//! a [`SyntheticSpec`] and the scale, the process that performs it
//! (`appflow bench-app`), and the launch profile it implies.
//!
//! Launch pattern (one thread, like an app's main thread): 16 phases; small
//! files are read whole (one `read`) in the first half, large files' launch
//! extents in the second three quarters, through `pread` of `read_block_kib`
//! or through page faults on an mmap of the file; the anonymous allocation
//! and the CPU work are spread evenly over all phases. Readiness is the line
//! `appflow-ready` on stdout. Afterwards the app grows its anonymous memory
//! by `background_growth` (the AppFlow paper §4.3: 30-50 %) and serves `switch`
//! commands on stdin (re-touch its working set, print `appflow-ready`: a
//! warm/hot relaunch) until stdin closes.

use crate::spec::SyntheticSpec;
use anyhow::{Context, Result};
use appflow_core::profile::{ByteRange, LaunchObservation, ObservedFile};
use appflow_core::rng::{fnv1a, SplitMix};
use appflow_linux::recorder::residency;
use std::io::{BufRead, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The readiness line of synthetic apps.
pub const READY_LINE: &str = "appflow-ready";
const PHASES: usize = 16;
const EXTENTS_PER_FILE: u64 = 8;
const PAGE: u64 = 4096;

/// A file of the app.
#[derive(Debug, Clone, PartialEq)]
pub struct FileDef {
    /// Path relative to the app's directory.
    pub rel: String,
    /// Size, bytes.
    pub size: u64,
}

/// One step of the launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// Read small file `i` whole with one read().
    ReadSmall(usize),
    /// pread a range of large file `file` in read-block chunks.
    Read {
        /// Large file index.
        file: usize,
        /// Offset.
        off: u64,
        /// Length.
        len: u64,
    },
    /// Touch a range of large file `file` through its mmap (page faults).
    Touch {
        /// Large file index.
        file: usize,
        /// Offset.
        off: u64,
        /// Length.
        len: u64,
    },
    /// Allocate and write anonymous memory.
    Anon(u64),
    /// Burn CPU time, µs.
    Cpu(u64),
}

/// A synthetic app at a scale: files, launch ops, memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// App name.
    pub app: String,
    /// Its directory (absolute).
    pub dir: PathBuf,
    /// Small files.
    pub small: Vec<FileDef>,
    /// Large files.
    pub large: Vec<FileDef>,
    /// Launch steps in order.
    pub ops: Vec<Op>,
    /// Read block for large-file preads, bytes.
    pub read_block_bytes: u64,
    /// Background growth, bytes.
    pub growth_bytes: u64,
    /// Growth duration, ms.
    pub growth_ms: u64,
}

impl Layout {
    /// Multiplies the CPU work of the launch by `share` (the domain's share
    /// of the preset's CPU budget, [`crate::device::Device::cpu_share`]).
    pub fn scale_cpu(&mut self, share: f64) {
        for op in &mut self.ops {
            if let Op::Cpu(us) = op {
                *us = (*us as f64 * share) as u64;
            }
        }
    }

    /// Derives the layout of `app` with `spec` at `scale`, rooted at `dir`.
    pub fn new(app: &str, spec: &SyntheticSpec, scale: f64, dir: &Path) -> Self {
        let mut rng = SplitMix::new(fnv1a(app.as_bytes()));
        let n_small = if spec.small_files == 0 {
            0
        } else {
            ((spec.small_files as f64 * scale).round() as usize).max(1)
        };
        let (lo, hi) = (
            spec.small_file_min_kib as f64,
            spec.small_file_max_kib as f64,
        );
        let small: Vec<FileDef> = (0..n_small)
            .map(|i| {
                // Log-uniform sizes: most small files are tiny (the AppFlow paper Fig. 5/7).
                let kib = lo * (hi / lo).powf(rng.unit());
                FileDef {
                    rel: format!("small/{:02}/s{i:05}.dat", i % 64),
                    size: ((kib * 1024.0) as u64).max(1),
                }
            })
            .collect();
        let mib = 1024.0 * 1024.0;
        let total = spec.large_total_mib * mib * scale;
        let n_large = spec.large_files as usize;
        let weights: Vec<f64> = (0..n_large).map(|_| 0.5 + rng.unit()).collect();
        let wsum: f64 = weights.iter().sum();
        let large: Vec<FileDef> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| FileDef {
                rel: format!("assets/L{i:02}.bin"),
                size: (((total * w / wsum) as u64).div_ceil(PAGE) * PAGE).max(PAGE),
            })
            .collect();
        let frac = if spec.large_total_mib > 0.0 {
            spec.large_read_mib / spec.large_total_mib
        } else {
            0.0
        };
        let mmap_extents = (EXTENTS_PER_FILE as f64 * spec.mmap_share).round() as u64;
        let mut large_ops: Vec<Op> = Vec::new();
        for (i, f) in large.iter().enumerate() {
            let seg = f.size / EXTENTS_PER_FILE;
            for j in 0..EXTENTS_PER_FILE {
                let len = ((seg as f64 * frac) as u64 / PAGE) * PAGE;
                if len == 0 {
                    continue;
                }
                let off = (j * seg / PAGE) * PAGE;
                large_ops.push(if j < mmap_extents {
                    Op::Touch { file: i, off, len }
                } else {
                    Op::Read { file: i, off, len }
                });
            }
        }
        let anon = (spec.anon_mib * mib * scale) as u64;
        let cpu_us = (spec.cpu_ms as f64 * 1000.0 * scale) as u64;
        let mut ops = Vec::new();
        let chunk = |n: usize, p: usize, of: usize| (n * p / of, n * (p + 1) / of);
        for p in 0..PHASES {
            let (a, b) = chunk(n_small, p.min(PHASES / 2), PHASES / 2);
            if p < PHASES / 2 {
                ops.extend((a..b).map(Op::ReadSmall));
            }
            if p >= PHASES / 4 {
                let (a, b) = chunk(large_ops.len(), p - PHASES / 4, PHASES - PHASES / 4);
                ops.extend_from_slice(&large_ops[a..b]);
            }
            let anon_p = anon / PHASES as u64;
            if anon_p > 0 {
                ops.push(Op::Anon(anon_p));
            }
            let cpu_p = cpu_us / PHASES as u64;
            if cpu_p > 0 {
                ops.push(Op::Cpu(cpu_p));
            }
        }
        Self {
            app: app.to_string(),
            dir: dir.to_path_buf(),
            small,
            large,
            ops,
            read_block_bytes: spec.read_block_kib * 1024,
            growth_bytes: (anon as f64 * spec.background_growth) as u64,
            growth_ms: spec.growth_ms,
        }
    }

    /// Bytes on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.small.iter().chain(&self.large).map(|f| f.size).sum()
    }

    /// Bytes the launch reads from files (M_file).
    pub fn launch_file_bytes(&self) -> u64 {
        self.ops
            .iter()
            .map(|o| match *o {
                Op::ReadSmall(i) => self.small[i].size,
                Op::Read { len, .. } | Op::Touch { len, .. } => len,
                _ => 0,
            })
            .sum()
    }

    /// Anonymous bytes allocated during launch (M_sum).
    pub fn anon_bytes(&self) -> u64 {
        self.ops
            .iter()
            .map(|o| if let Op::Anon(b) = o { *b } else { 0 })
            .sum()
    }

    /// Every file's absolute path.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.small
            .iter()
            .chain(&self.large)
            .map(|f| self.dir.join(&f.rel))
            .collect()
    }

    /// The launch observation this layout implies (what `appflow record`
    /// would see): files in first-access order with the ranges read,
    /// the anonymous allocation, and the post-launch footprint.
    pub fn observation(&self, at_unix_ms: u64) -> LaunchObservation {
        let mut files: Vec<ObservedFile> = Vec::new();
        let mut mapped = 0;
        for (k, o) in self.ops.iter().enumerate() {
            let (f, r) = match *o {
                Op::ReadSmall(i) => (
                    &self.small[i],
                    ByteRange {
                        start: 0,
                        end: self.small[i].size,
                    },
                ),
                Op::Read { file, off, len } => (
                    &self.large[file],
                    ByteRange {
                        start: off,
                        end: off + len,
                    },
                ),
                Op::Touch { file, off, len } => {
                    mapped += len;
                    (
                        &self.large[file],
                        ByteRange {
                            start: off,
                            end: off + len,
                        },
                    )
                }
                _ => continue,
            };
            let path = self.dir.join(&f.rel).to_string_lossy().to_string();
            match files.iter_mut().find(|x| x.path == path) {
                Some(x) => x.ranges.push(r),
                None => files.push(ObservedFile {
                    path,
                    size_bytes: f.size,
                    first_access_us: k as u64 * 1000,
                    ranges: vec![r],
                }),
            }
        }
        LaunchObservation {
            files,
            anon_launch_bytes: self.anon_bytes(),
            footprint_after_launch_bytes: self.anon_bytes() + mapped,
            launch_ms: 0,
            at_unix_ms,
        }
    }

    /// Writes the app's files (deterministic content), syncs, and drops them
    /// from the page cache.
    /// Writes the files under `dir` (the backing store of the app's directory).
    pub fn generate(&self, dir: &Path) -> Result<u64> {
        let mut rng = SplitMix::new(fnv1a(self.app.as_bytes()) ^ 0x5eed);
        let mut buf = vec![0u8; 1 << 20];
        let mut written = 0;
        for f in self.small.iter().chain(&self.large) {
            let path = dir.join(&f.rel);
            if let Some(d) = path.parent() {
                std::fs::create_dir_all(d).with_context(|| format!("mkdir {}", d.display()))?;
            }
            let mut out = std::io::BufWriter::with_capacity(
                1 << 20,
                std::fs::File::create(&path)
                    .with_context(|| format!("creating {}", path.display()))?,
            );
            fill(&mut rng, &mut buf);
            let mut left = f.size;
            let mut k = 0u64;
            while left > 0 {
                let n = left.min(buf.len() as u64) as usize;
                // Vary blocks cheaply so files do not deduplicate.
                buf[..8].copy_from_slice(&k.to_le_bytes());
                out.write_all(&buf[..n])?;
                left -= n as u64;
                k += 1;
            }
            out.flush()?;
            written += f.size;
        }
        Ok(written)
    }
}

fn fill(rng: &mut SplitMix, buf: &mut [u8]) {
    for c in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// Drops a file from the page cache (POSIX_FADV_DONTNEED). Pages still
/// mapped or locked by a process stay; that is the point for preloaded ones.
pub fn drop_file_cache(path: &Path) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    residency::drop_from_cache(f.as_fd())
}

/// Bytes of `path` resident in the page cache (mincore, the recorder's reader).
pub fn resident_bytes(path: &Path) -> u64 {
    let Ok(f) = std::fs::File::open(path) else {
        return 0;
    };
    let Ok(meta) = f.metadata() else { return 0 };
    residency::residency(f.as_fd(), meta.len())
        .map(|v| v.iter().map(|&b| u64::from(b)).sum::<u64>() * residency::page_bytes())
        .unwrap_or(0)
}

fn thread_cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// Burns `us` of this thread's CPU time (not wall time, so contention slows it like an app).
pub fn burn_cpu(us: u64) -> u64 {
    let end = thread_cpu_us() + us;
    let mut x: u64 = 0x1234_5678;
    while thread_cpu_us() < end {
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
    x
}

struct Mapped {
    ptr: *const u8,
    len: usize,
}

/// The running synthetic app's memory.
struct AppState {
    anon: Vec<Vec<u8>>,
    maps: Vec<Option<Mapped>>,
    touched: Vec<(usize, u64, u64)>,
    sum: u64,
    rng: SplitMix,
    pool: Vec<u8>,
    pattern: Vec<u8>,
}

impl AppState {
    fn alloc_anon(&mut self, bytes: u64) {
        let mut v = vec![0u8; bytes as usize];
        // Each page: a quarter random (a slice of a random pool at a random
        // offset), the rest a repeating pattern, so that zram compresses it
        // ~3:1 like app heaps (not the zero-page shortcut). Page-wise copies
        // keep this cheap even in a debug build.
        let q = PAGE as usize / 4;
        for page in v.chunks_mut(PAGE as usize) {
            let off = (self.rng.next_u64() as usize) % (self.pool.len() - q);
            let n = page.len().min(q);
            page[..n].copy_from_slice(&self.pool[off..off + n]);
            if page.len() > q {
                let l = page.len();
                page[q..].copy_from_slice(&self.pattern[q..l]);
            }
        }
        self.anon.push(v);
    }

    fn touch_map(&mut self, file: usize, off: u64, len: u64) {
        if let Some(m) = &self.maps[file] {
            let end = ((off + len) as usize).min(m.len);
            let mut p = off as usize;
            while p < end {
                // SAFETY: p < m.len, within the live read-only mapping.
                self.sum = self
                    .sum
                    .wrapping_add(unsafe { std::ptr::read_volatile(m.ptr.add(p)) } as u64);
                p += PAGE as usize;
            }
        }
    }

    /// Reads back every anonymous page and mapped range (a switch to the app).
    fn retouch(&mut self) {
        let mut s = 0u64;
        for v in &self.anon {
            for i in (0..v.len()).step_by(PAGE as usize) {
                // SAFETY: i < v.len().
                s = s.wrapping_add(unsafe { std::ptr::read_volatile(v.as_ptr().add(i)) } as u64);
            }
        }
        self.sum = self.sum.wrapping_add(s);
        for (f, off, len) in self.touched.clone() {
            self.touch_map(f, off, len);
        }
    }
}

impl AppState {
    fn new(seed: u64) -> Self {
        let mut st = AppState {
            anon: Vec::new(),
            maps: Vec::new(),
            touched: Vec::new(),
            sum: 0,
            rng: SplitMix::new(seed),
            pool: vec![0u8; 64 * 1024],
            pattern: (0..PAGE as usize).map(|i| (i % 251) as u8).collect(),
        };
        let mut pool = std::mem::take(&mut st.pool);
        fill(&mut st.rng, &mut pool);
        st.pool = pool;
        st
    }
}

/// Writes `bytes` of app-like anonymous memory (the synthetic apps' content,
/// so zram compresses it as theirs) in 1 MiB allocations; returns bytes/s.
/// Run in a leaf whose limit is below `bytes`, it measures the domain's
/// anonymous reclaim throughput: what an allocation burst can get when the
/// kernel must page anonymous memory out to make room.
pub fn alloc_test(bytes: u64) -> f64 {
    let mut st = AppState::new(std::process::id() as u64);
    let t0 = Instant::now();
    let mut done = 0;
    while done < bytes {
        let n = (1 << 20).min(bytes - done);
        st.alloc_anon(n);
        done += n;
    }
    std::hint::black_box(&st.anon);
    done as f64 / t0.elapsed().as_secs_f64().max(1e-9)
}

/// Runs the synthetic app: the launch, the readiness line, then the background life.
pub fn run_app(layout: &Layout, cpu_switch_us: u64) -> Result<()> {
    let mut st = AppState::new(fnv1a(layout.app.as_bytes()) ^ std::process::id() as u64);
    let mut large_files: Vec<std::fs::File> = Vec::new();
    for f in &layout.large {
        let p = layout.dir.join(&f.rel);
        let file = std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))?;
        // SAFETY: read-only private mapping of an open file; lives until exit.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                f.size as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        st.maps.push((ptr != libc::MAP_FAILED).then_some(Mapped {
            ptr: ptr as *const u8,
            len: f.size as usize,
        }));
        large_files.push(file);
    }
    let mut buf = vec![0u8; (layout.read_block_bytes as usize).max(1 << 20)];
    for op in &layout.ops {
        match *op {
            Op::ReadSmall(i) => {
                let p = layout.dir.join(&layout.small[i].rel);
                let mut f =
                    std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))?;
                let n = f.read(&mut buf)?;
                st.sum = st
                    .sum
                    .wrapping_add(buf[..n.min(64)].iter().map(|&b| b as u64).sum());
            }
            Op::Read { file, off, len } => {
                let mut o = off;
                while o < off + len {
                    let n = (off + len - o).min(layout.read_block_bytes) as usize;
                    let got = large_files[file].read_at(&mut buf[..n], o)?;
                    if got == 0 {
                        break;
                    }
                    st.sum = st.sum.wrapping_add(buf[0] as u64);
                    o += got as u64;
                }
            }
            Op::Touch { file, off, len } => {
                st.touch_map(file, off, len);
                st.touched.push((file, off, len));
            }
            Op::Anon(b) => st.alloc_anon(b),
            Op::Cpu(us) => st.sum = st.sum.wrapping_add(burn_cpu(us)),
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{READY_LINE}")?;
    out.flush()?;
    drop(out);
    // Background life: commands on stdin, growth meanwhile.
    let (tx, rx) = std::sync::mpsc::channel::<Option<String>>();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            match line {
                Ok(l) => {
                    if tx.send(Some(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(None);
    });
    let steps = 10u64;
    let mut grown = 0u64;
    let t0 = Instant::now();
    loop {
        let due = if grown < steps {
            Duration::from_millis(layout.growth_ms * (grown + 1) / steps)
                .saturating_sub(t0.elapsed())
        } else {
            Duration::from_secs(3600)
        };
        match rx.recv_timeout(due) {
            Ok(Some(cmd)) if cmd.trim() == "switch" => {
                st.retouch();
                st.sum = st.sum.wrapping_add(burn_cpu(cpu_switch_us));
                let mut out = std::io::stdout().lock();
                writeln!(out, "{READY_LINE}")?;
                out.flush()?;
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if grown < steps {
                    let b = layout.growth_bytes / steps;
                    if b > 0 {
                        st.alloc_anon(b);
                    }
                    grown += 1;
                }
            }
        }
    }
    std::hint::black_box(st.sum);
    Ok(())
}

/// Reads `total_bytes` of `file` with O_DIRECT in `block_bytes` blocks;
/// returns bytes/s.
pub fn io_test(file: &Path, block_bytes: u64, total_bytes: u64) -> Result<f64> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(file)
        .with_context(|| format!("opening {} with O_DIRECT", file.display()))?;
    let size = f.metadata()?.len();
    let bs = block_bytes.max(PAGE) as usize;
    let mut raw = vec![0u8; bs + PAGE as usize];
    let shift = raw.as_ptr().align_offset(PAGE as usize);
    let buf = &mut raw[shift..shift + bs];
    let blocks = (size / bs as u64).max(1);
    let mut rng = SplitMix::new(7);
    let t0 = Instant::now();
    let mut done = 0u64;
    while done < total_bytes {
        // Random block-aligned offsets: no device-side sequential advantage.
        let off = (rng.next_u64() % blocks) * bs as u64;
        let n = f
            .read_at(buf, off)
            .with_context(|| format!("O_DIRECT read of {}", file.display()))?;
        if n == 0 {
            break;
        }
        done += n as u64;
    }
    Ok(done as f64 / t0.elapsed().as_secs_f64().max(1e-9))
}

/// Reads up to `total_bytes` of `file` from its start through the page
/// cache in `block_bytes` reads, its cached pages dropped first; returns
/// bytes/s. What the preload worker's stream costs: the device's reads plus
/// filling the page cache on the reader's own CPU.
pub fn buffered_read_test(file: &Path, block_bytes: u64, total_bytes: u64) -> Result<f64> {
    drop_file_cache(file)
        .with_context(|| format!("dropping {} from the page cache", file.display()))?;
    let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let mut buf = vec![0u8; block_bytes.max(PAGE) as usize];
    let t0 = Instant::now();
    let mut done = 0u64;
    while done < total_bytes {
        let n = f
            .read_at(&mut buf, done)
            .with_context(|| format!("reading {}", file.display()))?;
        if n == 0 {
            break;
        }
        done += n as u64;
    }
    // The pages read stay for nobody: drop them again.
    let _ = drop_file_cache(file);
    Ok(done as f64 / t0.elapsed().as_secs_f64().max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SyntheticSpec {
        SyntheticSpec {
            small_files: 100,
            small_file_min_kib: 4,
            small_file_max_kib: 64,
            large_files: 3,
            large_total_mib: 30.0,
            large_read_mib: 15.0,
            mmap_share: 0.5,
            read_block_kib: 64,
            anon_mib: 16.0,
            cpu_ms: 80,
            background_growth: 0.4,
            growth_ms: 100,
        }
    }

    #[test]
    fn layout_is_deterministic_and_scaled() {
        let a = Layout::new("x", &spec(), 0.5, Path::new("/m/x"));
        let b = Layout::new("x", &spec(), 0.5, Path::new("/m/x"));
        assert_eq!(a, b);
        assert_eq!(a.small.len(), 50);
        assert!(a
            .small
            .iter()
            .all(|f| f.size >= 4096 && f.size <= 64 * 1024));
        let large: u64 = a.large.iter().map(|f| f.size).sum();
        assert!(
            (large as f64 - 15.0 * 1048576.0).abs() < 3.0 * 4096.0,
            "{large}"
        );
        assert_eq!(a.anon_bytes() / 16 * 16, (8.0 * 1048576.0) as u64 / 16 * 16);
        let read_large = a.launch_file_bytes() - a.small.iter().map(|f| f.size).sum::<u64>();
        // Half of the large bytes are read (rounded down to pages per extent).
        assert!(read_large <= large / 2 && read_large + 24 * 4096 >= large / 2);
        assert!(a.ops.iter().any(|o| matches!(o, Op::Touch { .. })));
        assert!(a.ops.iter().any(|o| matches!(o, Op::Read { .. })));
        let c = Layout::new("y", &spec(), 0.5, Path::new("/m/y"));
        assert_ne!(a.small[0].size, c.small[0].size);
    }

    #[test]
    fn observation_matches_layout() {
        let l = Layout::new("x", &spec(), 0.25, Path::new("/m/x"));
        let obs = l.observation(5);
        let bytes: u64 = obs
            .files
            .iter()
            .flat_map(|f| f.ranges.iter().map(|r| r.len()))
            .sum();
        assert_eq!(bytes, l.launch_file_bytes());
        assert_eq!(obs.anon_launch_bytes, l.anon_bytes());
        assert!(obs.files.iter().all(|f| f.path.starts_with("/m/x/")));
        let mut p = appflow_core::profile::LaunchProfile::new("x");
        p.merge_launch(&obs);
        // The profile counts whole pages (what the page cache holds), up to EOF.
        let paged: u64 = obs
            .files
            .iter()
            .map(|f| {
                let rs = f
                    .ranges
                    .iter()
                    .map(|&r| {
                        let a = appflow_core::profile::page_align(r);
                        appflow_core::profile::ByteRange {
                            start: a.start,
                            end: a.end.min(f.size_bytes),
                        }
                    })
                    .collect();
                appflow_core::profile::coalesce(rs)
                    .iter()
                    .map(|r| r.len())
                    .sum::<u64>()
            })
            .sum();
        assert_eq!(p.file_bytes(), paged);
        assert!(paged >= l.launch_file_bytes());
        // Small files come first in first-access order.
        assert!(p.files[0].path.contains("/small/"));
    }

    #[test]
    fn generate_runs_and_resident_bytes_work() {
        let d = tempfile::tempdir().unwrap();
        let mut s = spec();
        s.small_files = 4;
        s.large_total_mib = 1.0;
        s.large_read_mib = 0.5;
        let l = Layout::new("g", &s, 1.0, d.path());
        let n = l.generate(&l.dir).unwrap();
        assert_eq!(n, l.disk_bytes());
        for p in l.paths() {
            assert!(std::fs::metadata(&p).unwrap().len() > 0);
        }
        let big = l.dir.join(&l.large[0].rel);
        let _ = std::fs::read(&big).unwrap();
        assert!(resident_bytes(&big) > 0);
    }
}
