//! Storage calibration: read throughput as a function of I/O block size on
//! the filesystem that holds the apps (the AppFlow paper §4.1 and Fig. 6: large-block
//! reads are up to 22.8× faster than small-block reads on phone flash; the
//! Selective File Preloader's V_i(s) comes from this curve).
//!
//! A test file is written in the directory, then read at each block size in
//! a shuffled order of block-aligned offsets (launch reads of many small
//! files look like random reads, and readahead must not help small blocks).
//! Reads use O_DIRECT so the page cache is bypassed; where the filesystem
//! refuses O_DIRECT (tmpfs, some FUSE), the fallback drops the file from the
//! cache (POSIX_FADV_DONTNEED) before each block size and reads buffered
//! with POSIX_FADV_RANDOM (no readahead). The method used is reported.

use crate::store::write_atomic;
use appflow_core::storage::{CurveError, CurvePoint, ThroughputCurve};
use appflow_core::{KIB, MIB};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thiserror::Error;

/// The calibration file in the state directory.
pub const CALIBRATION_FILE: &str = "calibration.json";

/// Block sizes measured by default: 4 KiB to 2 MiB, powers of two.
pub fn default_block_sizes() -> Vec<u64> {
    (12..=21).map(|s| 1u64 << s).collect()
}

/// How a calibration reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMethod {
    /// O_DIRECT reads (the page cache is bypassed).
    Direct,
    /// Buffered reads after POSIX_FADV_DONTNEED, with POSIX_FADV_RANDOM (no readahead).
    DroppedBuffered,
}

impl std::fmt::Display for ReadMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReadMethod::Direct => "O_DIRECT",
            ReadMethod::DroppedBuffered => "buffered after fadvise(DONTNEED), readahead off",
        })
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// Directory on the storage to measure (the test file is written there and removed).
    pub dir: PathBuf,
    /// Test file size, bytes.
    pub file_bytes: u64,
    /// Block sizes to measure, bytes.
    pub block_sizes: Vec<u64>,
    /// Time budget per block size; at least [`MIN_READS`] reads are made even if it is exceeded.
    pub budget_per_size: Duration,
}

/// Reads made at each block size at least.
pub const MIN_READS: usize = 16;

/// The measurement.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// Throughput by block size.
    pub curve: ThroughputCurve,
    /// How the reads were made.
    pub method: ReadMethod,
    /// Bytes read at each block size (same order as the curve's points).
    pub bytes_read: Vec<u64>,
}

/// Why a calibration failed.
#[derive(Debug, Error)]
pub enum CalibrateError {
    /// Bad options (the binary exits 2).
    #[error("{0}")]
    Input(String),
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A stored curve is invalid.
    #[error("{}: {what}", path.display())]
    BadCurve {
        /// The calibration file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> CalibrateError + '_ {
    move |source| CalibrateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Removes the test file when dropped (also on error and panic).
struct TestFile(PathBuf);

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A zeroed buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(4096), 4096).expect("layout");
        // SAFETY: non-zero size layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {len} bytes");
        Self { ptr, layout }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new().
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn write_test_file(path: &Path, bytes: u64) -> Result<(), CalibrateError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_at(path))?;
    // Incompressible content, so compressing or deduplicating storage does not flatter reads.
    let mut rng = appflow_core::rng::SplitMix::new(0x00C0_FFEE);
    let mut chunk = vec![0u8; MIB as usize];
    let mut left = bytes;
    while left > 0 {
        for w in chunk.chunks_mut(8) {
            w.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let n = left.min(MIB) as usize;
        f.write_all(&chunk[..n]).map_err(io_at(path))?;
        left -= n as u64;
    }
    f.sync_all().map_err(io_at(path))
}

fn fadvise(fd: &std::fs::File, advice: libc::c_int) {
    // SAFETY: plain syscall on an open file.
    unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, advice) };
}

/// Measures read throughput at each block size. Writes and removes
/// `<dir>/.appflow-calibrate.<pid>`.
pub fn calibrate(opts: &CalibrateOptions) -> Result<Calibration, CalibrateError> {
    let mut sizes = opts.block_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let max_block = *sizes
        .last()
        .ok_or_else(|| CalibrateError::Input("no block sizes to measure".into()))?;
    if sizes[0] < 512 || sizes.iter().any(|b| b % 512 != 0) {
        return Err(CalibrateError::Input(
            "block sizes must be multiples of 512 bytes".into(),
        ));
    }
    if opts.file_bytes < max_block * 4 {
        return Err(CalibrateError::Input(format!(
            "test file of {} bytes is too small: it must hold at least 4 blocks of {max_block} bytes",
            opts.file_bytes
        )));
    }
    let meta = std::fs::metadata(&opts.dir).map_err(io_at(&opts.dir))?;
    if !meta.is_dir() {
        return Err(CalibrateError::Input(format!(
            "--dir {} is not a directory",
            opts.dir.display()
        )));
    }
    let path = opts
        .dir
        .join(format!(".appflow-calibrate.{}", std::process::id()));
    let guard = TestFile(path.clone());
    let file_bytes = opts.file_bytes / max_block * max_block;
    write_test_file(&path, file_bytes)?;

    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path);
    let (file, method) = match direct {
        Ok(f) => (f, ReadMethod::Direct),
        Err(e) => {
            tracing::info!(error = %e, "O_DIRECT refused; using buffered reads after dropping the cache");
            (
                std::fs::File::open(&path).map_err(io_at(&path))?,
                ReadMethod::DroppedBuffered,
            )
        }
    };
    let buf = AlignedBuf::new(max_block as usize);
    let mut points = Vec::new();
    let mut bytes_read = Vec::new();
    let mut shuffle = appflow_core::rng::SplitMix::new(0x5EED);
    for &block in &sizes {
        if method == ReadMethod::DroppedBuffered {
            fadvise(&file, libc::POSIX_FADV_DONTNEED);
            fadvise(&file, libc::POSIX_FADV_RANDOM);
        }
        let blocks = file_bytes / block;
        let mut order: Vec<u64> = (0..blocks).collect();
        for i in (1..order.len()).rev() {
            let j = (shuffle.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let t0 = Instant::now();
        let mut done = 0u64;
        for (k, &b) in order.iter().enumerate() {
            // SAFETY: buf holds max_block >= block bytes, aligned to 4096.
            let n = unsafe {
                libc::pread(
                    file.as_raw_fd(),
                    buf.ptr.cast(),
                    block as usize,
                    (b * block) as libc::off_t,
                )
            };
            if n < 0 {
                return Err(io_at(&path)(io::Error::last_os_error()));
            }
            done += n as u64;
            if k + 1 >= MIN_READS && t0.elapsed() >= opts.budget_per_size {
                break;
            }
        }
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        points.push(CurvePoint {
            block_bytes: block,
            bytes_per_sec: done as f64 / secs,
        });
        bytes_read.push(done);
    }
    drop(file);
    drop(guard);
    let curve = ThroughputCurve::new(points).map_err(|e| CalibrateError::BadCurve {
        path: path.clone(),
        what: e.to_string(),
    })?;
    Ok(Calibration {
        curve,
        method,
        bytes_read,
    })
}

/// Writes `<state_dir>/calibration.json` atomically (the directory is created).
pub fn save_curve(state_dir: &Path, curve: &ThroughputCurve) -> Result<PathBuf, CalibrateError> {
    crate::store::create_private_dir(state_dir).map_err(io_at(state_dir))?;
    let path = state_dir.join(CALIBRATION_FILE);
    let text = serde_json::to_string_pretty(curve).expect("curve serialises");
    write_atomic(&path, text.as_bytes()).map_err(io_at(&path))?;
    Ok(path)
}

/// Reads and validates `<state_dir>/calibration.json`; `None` when there is none.
pub fn load_curve(state_dir: &Path) -> Result<Option<ThroughputCurve>, CalibrateError> {
    let path = state_dir.join(CALIBRATION_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at(&path)(e)),
    };
    let bad = |what: String| CalibrateError::BadCurve {
        path: path.clone(),
        what,
    };
    let raw: ThroughputCurve = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    // Deserialising bypasses the constructor's checks: run them.
    ThroughputCurve::new(raw.points().to_vec())
        .map(Some)
        .map_err(|e: CurveError| bad(e.to_string()))
}

/// Default test file size for `appflow calibrate`, bytes.
pub const DEFAULT_FILE_BYTES: u64 = 256 * MIB;
/// The block sizes of the reported speedup (the AppFlow paper Fig. 6 compares 4 KiB with 512 KiB).
pub const SPEEDUP_BLOCKS: (u64, u64) = (4 * KIB, 512 * KIB);
