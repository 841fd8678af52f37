//! The preload worker and its client (the AppFlow paper §4.1: the preloader
//! runs as a separate low-priority process; see docs/daemon.md).
//!
//! The daemon spawns `appflow preload-worker` as a separate process, writes
//! its pid into the domain's memory cgroup (and blkio cgroup) BEFORE sending
//! any work — page-cache charges land in the cgroup of the task that brings
//! the page in, so a thread of the daemon would be charged to the daemon's
//! cgroup, a free lunch — and puts it in the idle I/O class at nice 19.
//!
//! Protocol: one JSON [`WorkerCmd`] per line on the worker's stdin, one JSON
//! [`WorkerReply`] per line on its stdout. `Hold::Protect` spans are read
//! exactly (no readahead past them, requests of twice the device's window:
//! see [`open_exact`]), mapped and `mlock`ed until released (protected from
//! reclaim during the launch); `Hold::Touch` spans are read and re-read
//! every `touch_interval_ms` (kept warm, reclaimable). The worker exits
//! when its stdin closes (the daemon died): the kernel drops its mlocks
//! with it.

use super::switching::{AdviceJob, SwitchTracker, TrackerStats};
use appflow_core::mechanism::{Hold, MechError, PreloadMechanism};
use appflow_core::preload::FileSpan;
use appflow_core::prepage::{PrepagePlan, SwitchObservation};
use appflow_core::scheduler::ProcId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A byte range of a file, as sent to the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkSpan {
    /// File path.
    pub path: String,
    /// First byte.
    pub offset: u64,
    /// Length.
    pub len: u64,
}

/// A command to the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WorkerCmd {
    /// Read `spans` in order for `app` and hold them.
    Load {
        /// App.
        app: String,
        /// How to hold.
        hold: Hold,
        /// Spans in order.
        spans: Vec<WorkSpan>,
    },
    /// Stop holding everything held for `app` (of the given hold, or all).
    Release {
        /// App.
        app: String,
        /// Only this kind of hold (None = both).
        #[serde(default)]
        hold: Option<Hold>,
    },
    /// Stop (true) or resume (false) re-reading the standby spans: a launch
    /// is in progress and owns the device's I/O.
    PauseTouch {
        /// Paused or not.
        paused: bool,
    },
    /// Prepage (ASAP's switch prepaging): `process_madvise(MADV_WILLNEED)`
    /// of the job's ranges, in calls of [`PREPAGE_CALL_RANGES`] ranges,
    /// reporting progress after each.
    Prepage(AdviceArgs),
    /// The app's switch window is over: stop prepaging for it.
    EndPrepage {
        /// App.
        app: String,
    },
    /// Mark cold (Ariadne's user-space half): `process_madvise(MADV_COLD)`
    /// of the job's ranges, in calls of [`PREPAGE_CALL_RANGES`] ranges,
    /// reporting progress after each.
    MarkCold(AdviceArgs),
    /// The app is back in the foreground: stop marking it cold.
    StopCold {
        /// App.
        app: String,
    },
    /// Exit.
    Quit,
}

/// One `process_madvise` job of the worker: ranges of one process instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdviceArgs {
    /// The app the job is for.
    pub app: String,
    /// Job number (progress is reported under it).
    pub job: u64,
    /// Process id.
    pub pid: u32,
    /// Its start time (the pidfd is checked against it).
    pub start_time: u64,
    /// Page-aligned (address, length) ranges in the process.
    pub ranges: Vec<(u64, u64)>,
}

/// Ranges (of at most 16 pages each) per prepaging call: 64 × 16 pages =
/// 4 MiB, after which the worker reports progress and looks at its queue.
pub const PREPAGE_CALL_RANGES: usize = 64;

/// What a `process_madvise` job of the worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AdviceKind {
    /// ASAP's switch prepaging: `MADV_WILLNEED`.
    Prepage,
    /// Ariadne's cold marking: `MADV_COLD`.
    Cold,
}

impl AdviceKind {
    /// (progress reply, final reply, advice).
    fn ops(self) -> (&'static str, &'static str, i32) {
        match self {
            AdviceKind::Prepage => ("prepaged", "prepage_done", super::MADV_WILLNEED),
            AdviceKind::Cold => ("cold_marked", "cold_done", super::MADV_COLD),
        }
    }

    /// Whether the queued command `c` ends a job of this kind for `app`.
    fn stopped_by(self, c: &WorkerCmd, app: &str) -> bool {
        match (self, c) {
            (_, WorkerCmd::Quit) => true,
            (_, WorkerCmd::Release { app: a, .. }) => a == app,
            (AdviceKind::Prepage, WorkerCmd::EndPrepage { app: a }) => a == app,
            (AdviceKind::Cold, WorkerCmd::StopCold { app: a }) => a == app,
            _ => false,
        }
    }
}

/// A reply from the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WorkerReply {
    /// "ready", "loaded", "released", "touched" or "error".
    pub op: String,
    /// App concerned ("" for ready/touched).
    #[serde(default)]
    pub app: String,
    /// Bytes read by this operation.
    #[serde(default)]
    pub bytes_read: u64,
    /// Bytes held locked (mlock), all apps.
    #[serde(default)]
    pub protected_bytes: u64,
    /// Bytes in touched standby spans, all apps.
    #[serde(default)]
    pub standby_bytes: u64,
    /// Milliseconds the operation took.
    #[serde(default)]
    pub ms: u64,
    /// Spans that failed (missing file, permission), counted.
    #[serde(default)]
    pub errors: u64,
    /// True when a load was cut short by a release or quit.
    #[serde(default)]
    pub aborted: bool,
    /// The worker's pid (ready).
    #[serde(default)]
    pub pid: u32,
    /// How a load's spans are held (loaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Prepaging job (prepaged; `bytes_read` is then the job's bytes
    /// advised so far, in the order asked).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub job: u64,
    /// A load's first byte read from storage (the first span that read
    /// anything), CLOCK_MONOTONIC ns; 0 when it read nothing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_byte_mono_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

// ---------------------------------------------------------------- worker side

struct Locked {
    addr: *mut libc::c_void,
    len: usize,
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: addr/len come from a successful mmap of ours.
        unsafe {
            libc::munlock(self.addr, self.len);
            libc::munmap(self.addr, self.len);
        }
    }
}

#[derive(Default)]
struct AppHold {
    locked: Vec<Locked>,
    locked_bytes: u64,
    touch: Vec<WorkSpan>,
    touch_bytes: u64,
}

struct Worker {
    apps: BTreeMap<String, AppHold>,
    buf: Vec<u8>,
}

/// Reads `[offset, offset+len)` of `f` with reads of at most the buffer size.
fn read_range(f: &std::fs::File, buf: &mut [u8], offset: u64, len: u64) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        let got = f.read_at(&mut buf[..n], offset + done)?;
        if got == 0 {
            break;
        }
        done += got as u64;
    }
    Ok(done)
}

/// The pages of `[offset, offset+len)` of `f` in pieces of at most
/// `piece` bytes, each split into runs of pages that are resident in the
/// page cache and runs that are not, asked (`mincore`) just before the
/// piece is handled. `each(from, to, resident)` gets the runs in order,
/// clamped to the range. A piece whose residency cannot be asked is one
/// missing run.
fn residency_runs(
    f: &std::fs::File,
    offset: u64,
    len: u64,
    piece: u64,
    mut each: impl FnMut(u64, u64, bool) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use crate::recorder::residency;
    use std::os::fd::AsFd;
    let page = residency::page_bytes();
    let end = offset.saturating_add(len);
    let piece = piece.max(page) / page * page;
    let mut at = offset / page * page;
    while at < end {
        let to = (at + piece).min(end.div_ceil(page) * page);
        let flags = residency::residency_of(f.as_fd(), at, to - at)
            .unwrap_or_else(|_| vec![0; ((to - at) / page) as usize]);
        let mut i = 0;
        while i < flags.len() {
            let resident = flags[i] & 1 == 1;
            let j = flags[i..]
                .iter()
                .position(|&v| (v & 1 == 1) != resident)
                .map_or(flags.len(), |k| i + k);
            let (a, b) = (
                (at + i as u64 * page).max(offset),
                (at + j as u64 * page).min(end),
            );
            if a < b {
                each(a, b, resident)?;
            }
            i = j;
        }
        at = to;
    }
    Ok(())
}

/// Reads the pages of `[offset, offset+len)` of `f` that are not in the
/// page cache (reads of at most the buffer size); returns the bytes read.
///
/// A page already resident is not read again. Besides the copy saved, a
/// read that reaches a page the app's own readahead marked (`PG_readahead`,
/// the kernel's cue that its reader is about to need the next window)
/// starts that asynchronous readahead on the worker's descriptor: a
/// random-access descriptor reads only what it asks for on a miss, but the
/// readahead at a marked page goes ahead all the same, a window of the
/// descriptor's (twice the device's) past the span, and the app loses its
/// cue. Traced on the deploy harness (`mm_filemap_add_to_page_cache` with
/// stacks, the ML app's learned launches): the worker brought in 15-28 MB
/// past the end of profile ranges in its shared libraries through
/// `filemap_readahead` from its `pread`s, 149 MB per launch, which the
/// learned launch then counted as the app's and streamed next time (the
/// learned profile grew to 1.13× a 3-launch recording; docs/results-log.md).
/// Residency is asked piece by piece just before each read, so a page the
/// app marks meanwhile is not read either.
fn read_missing(f: &std::fs::File, buf: &mut [u8], offset: u64, len: u64) -> std::io::Result<u64> {
    let mut done = 0;
    residency_runs(f, offset, len, buf.len() as u64, |a, b, resident| {
        if !resident {
            done += read_range(f, buf, a, b - a)?;
        }
        Ok(())
    })?;
    Ok(done)
}

/// Keeps `[offset, offset+len)` of `f` warm: pages evicted since are read
/// again ([`read_missing`]), and resident ones are marked accessed through
/// a `MADV_RANDOM` mapping that `MADV_POPULATE_READ` (Linux 5.14) faults
/// in as a read of each page would (the kernel's page walk touches each
/// page it finds: marked accessed), not by reading them, which would start
/// the readahead at a page the app's readahead marked (see
/// [`read_missing`]); a fault in a `MADV_RANDOM` mapping starts none. A
/// page past the end of a file cut short meanwhile fails the advice, where
/// a load from the mapping would raise `SIGBUS`. Where the advice is not
/// known (before 5.14), resident pages are left as they are. Returns the
/// bytes read.
fn keep_warm(
    f: &std::fs::File,
    buf: &mut [u8],
    offset: u64,
    len: u64,
    file_size: u64,
) -> std::io::Result<u64> {
    let mut done = 0;
    residency_runs(f, offset, len, buf.len() as u64, |a, b, resident| {
        if !resident {
            done += read_range(f, buf, a, b - a)?;
            return Ok(());
        }
        if let Ok(m) = map_window(f, a, b - a, file_size) {
            // SAFETY: advice on our own mapping, m.len long.
            unsafe { libc::madvise(m.addr, m.len, libc::MADV_POPULATE_READ) };
        }
        Ok(())
    })?;
    Ok(done)
}

/// Opens a file for the worker's reads. Its descriptor reads exactly the
/// bytes asked for (`POSIX_FADV_RANDOM`: no readahead past them, no
/// readahead marks that would make the app's later hits read further), in
/// pieces of twice the device's readahead window (`POSIX_FADV_SEQUENTIAL`
/// first sets the descriptor's window to twice the device's, and a
/// random-access read goes to the device in pieces of that window). While a
/// launch streams, the scheduler has set the device's window for it, so the
/// stream's requests are twice that (at most what the file system takes,
/// 1 MiB through FUSE). `cargo run --release -p appflow-bench --example
/// read_methods` measures each way of reading (docs/daemon.md, "On the
/// testbed's device").
fn open_exact(path: &str) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    // SAFETY: advice on a descriptor we hold open; a failure only leaves
    // the kernel's default readahead.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
    }
    Ok(f)
}

/// The window [`map_window`] maps for `[offset, offset+len)`: its pages,
/// clamped to the file's last page. The worker's reads bring pages in as
/// single-page folios (a random-access read does not build large ones), so
/// locking exactly these pages locks every byte of the span.
fn lock_window(offset: u64, len: u64, file_size: u64) -> (u64, u64) {
    let page = 4096u64;
    let start = offset & !(page - 1);
    let end = offset
        .saturating_add(len)
        .div_ceil(page)
        .saturating_mul(page)
        .min(file_size.div_ceil(page) * page);
    (start, end.max(start))
}

/// Maps the [`lock_window`] of `[offset, offset+len)` of `f` read-only.
/// The mapping is advised `MADV_RANDOM`: should a page be reclaimed between
/// the read and the lock, the lock's fault brings in that page alone, not
/// a readahead window around it.
fn map_window(f: &std::fs::File, offset: u64, len: u64, file_size: u64) -> std::io::Result<Locked> {
    use std::os::fd::AsRawFd;
    let (start, end) = lock_window(offset, len, file_size);
    let map_len = (end - start) as usize;
    if map_len == 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: a read-only shared mapping of a file we hold open; checked below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            start as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: advice on our own mapping.
    unsafe { libc::madvise(addr, map_len, libc::MADV_RANDOM) };
    Ok(Locked { addr, len: map_len })
}

/// Locks a mapped window: its pages stay resident until it is dropped.
fn lock(l: &Locked) -> std::io::Result<()> {
    // SAFETY: the mapping is ours and l.len long.
    if unsafe { libc::mlock(l.addr, l.len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Worker {
    fn totals(&self) -> (u64, u64) {
        self.apps
            .values()
            .fold((0, 0), |(p, s), a| (p + a.locked_bytes, s + a.touch_bytes))
    }

    fn reply(&self, mut r: WorkerReply, out: &mut impl Write) {
        let (p, s) = self.totals();
        r.protected_bytes = p;
        r.standby_bytes = s;
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&r).expect("reply serialises")
        );
        let _ = out.flush();
    }

    /// Loads spans; between spans it looks at queued commands and stops when
    /// the app is released or the worker told to quit.
    fn load(
        &mut self,
        app: &str,
        hold: Hold,
        spans: &[WorkSpan],
        rx: &mpsc::Receiver<WorkerCmd>,
        queue: &mut VecDeque<WorkerCmd>,
    ) -> WorkerReply {
        let t0 = Instant::now();
        let mut r = WorkerReply {
            op: "loaded".into(),
            app: app.into(),
            hold: Some(hold),
            ..Default::default()
        };
        // Per file: the open file, its size and the last contiguous byte
        // range this load read of it.
        type Open = (std::fs::File, u64, std::ops::Range<u64>);
        let mut files: BTreeMap<&str, Option<Open>> = BTreeMap::new();
        for s in spans {
            while let Ok(c) = rx.try_recv() {
                queue.push_back(c);
            }
            if queue.iter().any(|c| {
                matches!(c, WorkerCmd::Quit)
                    || matches!(c, WorkerCmd::Release { app: a, .. } if a == app)
            }) {
                r.aborted = true;
                break;
            }
            let entry = files.entry(s.path.as_str()).or_insert_with(|| {
                let f = open_exact(&s.path).ok()?;
                let size = f.metadata().ok()?.len();
                Some((f, size, 0..0))
            });
            let Some((f, size, done)) = entry else {
                r.errors += 1;
                continue;
            };
            if s.offset >= *size {
                continue;
            }
            let len = s.len.min(*size - s.offset);
            // A protected span is read over the pages it will lock, less
            // what this load just read of them (a stream's spans follow each
            // other in the file): every byte comes in the stream's reads,
            // none in the lock's faults.
            let (mut from, to) = match hold {
                Hold::Protect => lock_window(s.offset, len, *size),
                Hold::Touch => (s.offset, s.offset + len),
            };
            if done.contains(&from) {
                from = done.end;
            }
            let h = self.apps.entry(app.to_string()).or_default();
            match hold {
                Hold::Protect => {
                    let buf = &mut self.buf;
                    let locked = (if to > from {
                        read_missing(f, buf, from, to - from)
                    } else {
                        Ok(0)
                    })
                    .and_then(|n| {
                        let l = map_window(f, s.offset, len, *size)?;
                        lock(&l)?;
                        Ok((l, n))
                    });
                    match locked {
                        Ok((l, n)) => {
                            if n > 0 && r.first_byte_mono_ns == 0 {
                                r.first_byte_mono_ns = crate::actuators::monotonic_ns();
                            }
                            r.bytes_read += n;
                            if to > from {
                                *done = if done.end == from {
                                    done.start..to
                                } else {
                                    from..to
                                };
                            }
                            // Span bytes (the widened mappings overlap).
                            h.locked_bytes += len;
                            h.locked.push(l);
                        }
                        Err(_) => r.errors += 1,
                    }
                }
                Hold::Touch => {
                    if to > from {
                        match read_missing(f, &mut self.buf, from, to - from) {
                            Ok(n) => {
                                r.bytes_read += n;
                                *done = if done.end == from {
                                    done.start..to
                                } else {
                                    from..to
                                };
                            }
                            Err(_) => {
                                r.errors += 1;
                                continue;
                            }
                        }
                    }
                    h.touch_bytes += len;
                    h.touch.push(WorkSpan {
                        path: s.path.clone(),
                        offset: s.offset,
                        len,
                    });
                }
            }
        }
        r.ms = t0.elapsed().as_millis() as u64;
        r
    }

    /// One `process_madvise` job (a prepaging or a cold-marking job). The
    /// process is pinned by a pidfd checked against its start time (never a
    /// bare pid); the ranges are advised in calls of
    /// [`PREPAGE_CALL_RANGES`], with a progress report after each. Between
    /// calls it stops when `stops` says a queued command ends the job (the
    /// app's window changed, the app is released, the worker told to quit).
    /// A prepaging job stops at the first call that fails or advises less
    /// than asked, so its progress is always a prefix of what was asked; a
    /// cold-marking job goes on past a failed call (a range unmapped since
    /// the window ended) and reports what the kernel accepted.
    fn advise(
        &mut self,
        kind: AdviceKind,
        a: &AdviceArgs,
        rx: &mpsc::Receiver<WorkerCmd>,
        queue: &mut VecDeque<WorkerCmd>,
        out: &mut impl Write,
    ) {
        let (progress_op, done_op, advice) = kind.ops();
        let app = a.app.as_str();
        let t0 = Instant::now();
        let mut r = WorkerReply {
            op: progress_op.into(),
            app: app.into(),
            job: a.job,
            ..Default::default()
        };
        let fd = match super::pin_instance(Path::new("/proc"), a.pid, a.start_time) {
            super::Pinned::Fd(fd) => fd,
            super::Pinned::Gone => {
                r.op = done_op.into();
                r.aborted = true;
                return self.reply(r, out);
            }
            super::Pinned::Unavailable => {
                r.op = done_op.into();
                r.errors += 1;
                return self.reply(r, out);
            }
        };
        for chunk in a.ranges.chunks(PREPAGE_CALL_RANGES) {
            while let Ok(c) = rx.try_recv() {
                queue.push_back(c);
            }
            if queue.iter().any(|c| kind.stopped_by(c, app)) {
                r.aborted = true;
                break;
            }
            let asked: u64 = chunk.iter().map(|&(_, l)| l).sum();
            match super::process_madvise(&fd, chunk, advice) {
                Ok(n) => {
                    r.bytes_read += n;
                    r.ms = t0.elapsed().as_millis() as u64;
                    if n < asked {
                        r.errors += 1;
                        if kind == AdviceKind::Prepage {
                            break;
                        }
                    }
                    self.reply(r.clone(), out);
                }
                Err(libc::ESRCH) => {
                    r.aborted = true;
                    break;
                }
                Err(_) => {
                    r.errors += 1;
                    if kind == AdviceKind::Prepage {
                        break;
                    }
                }
            }
        }
        r.ms = t0.elapsed().as_millis() as u64;
        r.op = done_op.into();
        self.reply(r, out);
    }

    fn release(&mut self, app: &str, hold: Option<Hold>) {
        if let Some(h) = self.apps.get_mut(app) {
            if hold != Some(Hold::Touch) {
                h.locked.clear();
                h.locked_bytes = 0;
            }
            if hold != Some(Hold::Protect) {
                h.touch.clear();
                h.touch_bytes = 0;
            }
            if h.locked.is_empty() && h.touch.is_empty() {
                self.apps.remove(app);
            }
        }
    }

    fn touch_all(&mut self) -> WorkerReply {
        let t0 = Instant::now();
        let mut r = WorkerReply {
            op: "touched".into(),
            ..Default::default()
        };
        let spans: Vec<WorkSpan> = self
            .apps
            .values()
            .flat_map(|a| a.touch.iter().cloned())
            .collect();
        for s in spans {
            let kept = open_exact(&s.path).and_then(|f| {
                let size = f.metadata()?.len();
                let len = s.len.min(size.saturating_sub(s.offset));
                keep_warm(&f, &mut self.buf, s.offset, len, size)
            });
            match kept {
                Ok(n) => r.bytes_read += n,
                Err(_) => r.errors += 1,
            }
        }
        r.ms = t0.elapsed().as_millis() as u64;
        r
    }
}

/// The worker process's main loop: reads commands from `input`, writes
/// replies to `output`, touches standby spans every `touch_interval_ms`.
pub fn worker_main(
    input: impl BufRead + Send + 'static,
    output: &mut impl Write,
    max_read_bytes: u64,
    touch_interval_ms: u64,
) -> anyhow::Result<()> {
    let (tx, rx) = mpsc::channel::<WorkerCmd>();
    std::thread::spawn(move || {
        for line in input.lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<WorkerCmd>(&line) {
                Ok(c) => {
                    if tx.send(c).is_err() {
                        break;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "preload worker: bad command ignored"),
            }
        }
        let _ = tx.send(WorkerCmd::Quit);
    });
    let mut w = Worker {
        apps: BTreeMap::new(),
        buf: vec![0u8; max_read_bytes.clamp(4096, 64 << 20) as usize],
    };
    w.reply(
        WorkerReply {
            op: "ready".into(),
            pid: std::process::id(),
            ..Default::default()
        },
        output,
    );
    let touch = Duration::from_millis(touch_interval_ms.max(100));
    let mut next_touch = Instant::now() + touch;
    let mut paused = false;
    let mut queue: VecDeque<WorkerCmd> = VecDeque::new();
    loop {
        let cmd = match queue.pop_front() {
            Some(c) => c,
            None => {
                let wait = next_touch.saturating_duration_since(Instant::now());
                match rx.recv_timeout(wait) {
                    Ok(c) => c,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if !paused && w.apps.values().any(|a| !a.touch.is_empty()) {
                            let r = w.touch_all();
                            w.reply(r, output);
                        }
                        next_touch = Instant::now() + touch;
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => WorkerCmd::Quit,
                }
            }
        };
        match cmd {
            WorkerCmd::Load { app, hold, spans } => {
                let r = w.load(&app, hold, &spans, &rx, &mut queue);
                w.reply(r, output);
            }
            WorkerCmd::Release { app, hold } => {
                w.release(&app, hold);
                w.reply(
                    WorkerReply {
                        op: "released".into(),
                        app,
                        ..Default::default()
                    },
                    output,
                );
            }
            WorkerCmd::PauseTouch { paused: p } => paused = p,
            WorkerCmd::Prepage(a) => w.advise(AdviceKind::Prepage, &a, &rx, &mut queue, output),
            WorkerCmd::MarkCold(a) => w.advise(AdviceKind::Cold, &a, &rx, &mut queue, output),
            // A window that changed after its job ended: nothing to stop.
            WorkerCmd::EndPrepage { .. } | WorkerCmd::StopCold { .. } => {}
            WorkerCmd::Quit => return Ok(()),
        }
    }
}

// ---------------------------------------------------------------- client side

/// What the client knows of the worker, updated from its replies.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkerStats {
    /// The worker's pid (0 before it is ready or in dry-run).
    pub pid: u32,
    /// Bytes locked by the worker (as it last reported).
    pub protected_bytes: u64,
    /// Bytes of touched standby spans (as it last reported).
    pub standby_bytes: u64,
    /// Bytes read by loads, since start.
    pub loaded_bytes: u64,
    /// Bytes read by touches, since start.
    pub touched_bytes: u64,
    /// Loads completed.
    pub loads: u64,
    /// Loads cut short by a release.
    pub aborted_loads: u64,
    /// Spans that failed.
    pub errors: u64,
    /// Last completed load: (app, bytes read, ms).
    pub last_load: Option<(String, u64, u64)>,
    /// Per app, its last completed launch stream (`Hold::Protect` load):
    /// (the value of `loads` once it completed, bytes read).
    pub last_stream: BTreeMap<String, (u64, u64)>,
    /// Per app, when its last launch stream read its first byte
    /// (CLOCK_MONOTONIC ns; absent when it read nothing).
    pub last_stream_first_ns: BTreeMap<String, u64>,
    /// Bytes advised by switch prepaging (`MADV_WILLNEED`), since start.
    pub prepaged_bytes: u64,
    /// Prepaging jobs the worker ended (done, stopped or failed).
    pub prepage_jobs: u64,
    /// Per open prepaging job: bytes advised so far.
    #[serde(skip)]
    pub prepage_progress: BTreeMap<u64, u64>,
    /// Bytes marked cold (`MADV_COLD`, Ariadne), since start.
    pub cold_marked_bytes: u64,
    /// Cold-marking jobs the worker ended (done, stopped or failed).
    pub cold_jobs: u64,
    /// Cold-marking jobs stopped because the app came back to the
    /// foreground (or its process went away).
    pub cold_jobs_stopped: u64,
    /// Per open cold-marking job: bytes marked so far.
    #[serde(skip)]
    pub cold_progress: BTreeMap<u64, u64>,
    /// False once the worker has exited.
    pub alive: bool,
}

/// Where the worker runs.
#[derive(Debug, Clone, Default)]
pub struct WorkerPlacement {
    /// Memory cgroup directory to join (its `cgroup.procs`), if any.
    pub memory_cgroup: Option<PathBuf>,
    /// v1 blkio cgroup directory to join, if any.
    pub blkio_cgroup: Option<PathBuf>,
}

/// The client side: a `PreloadMechanism` driving the worker process.
///
/// `load` queues the work and returns the bytes *queued* (the worker reads
/// them asynchronously so the daemon loop never blocks on I/O); the bytes
/// actually read arrive in [`WorkerStats`].
pub struct WorkerClient {
    child: Option<std::process::Child>,
    stdin: Option<std::process::ChildStdin>,
    stats: Arc<Mutex<WorkerStats>>,
    held: BTreeMap<(String, bool), u64>,
    dry_run: bool,
    /// The devices' readahead during launches (None: not offered).
    readahead: Option<super::readahead::LaunchReadahead>,
    /// ASAP's windows and candidate tables (switch prepaging), and
    /// Ariadne's cold sets.
    switching: SwitchTracker,
    /// Apps with cold-marking jobs sent since their last window started.
    cold_sent: std::collections::BTreeSet<String>,
}

impl std::fmt::Debug for WorkerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerClient")
            .field("dry_run", &self.dry_run)
            .field("stats", &self.stats())
            .finish()
    }
}

fn join_cgroup(dir: &Path, pid: u32) -> anyhow::Result<()> {
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, pid.to_string())
        .map_err(|e| anyhow::anyhow!("moving preload worker {pid} into {}: {e}", procs.display()))
}

fn default_tracker() -> SwitchTracker {
    SwitchTracker::new(Path::new("/proc"), crate::recorder::residency::page_bytes())
}

impl WorkerClient {
    /// Reads the app processes' pagemaps for switch prepaging under
    /// `proc_root` (default `/proc`).
    pub fn set_proc_root(&mut self, proc_root: &Path) {
        self.switching = SwitchTracker::new(proc_root, crate::recorder::residency::page_bytes());
    }

    /// The switch tracker's counters.
    pub fn switch_stats(&self) -> TrackerStats {
        self.switching.stats
    }

    /// A client that only logs (dry-run): no worker process.
    pub fn dry_run() -> Self {
        Self {
            child: None,
            stdin: None,
            stats: Arc::default(),
            held: BTreeMap::new(),
            dry_run: true,
            readahead: None,
            switching: default_tracker(),
            cold_sent: Default::default(),
        }
    }

    /// Gives the client the launch readahead to drive (it moves to a
    /// respawned worker's client with [`WorkerClient::take_readahead`]).
    pub fn with_readahead(mut self, r: Option<super::readahead::LaunchReadahead>) -> Self {
        self.readahead = r;
        self
    }

    /// Devices whose readahead is raised now, with their own values.
    pub fn readahead_entries(&self) -> &[crate::journal::Entry] {
        self.readahead.as_ref().map_or(&[], |r| r.entries())
    }

    /// Takes the launch readahead out (a respawned worker's client gets it).
    pub fn take_readahead(&mut self) -> Option<super::readahead::LaunchReadahead> {
        self.readahead.take()
    }

    /// Spawns `program args…` as the worker, moves it into its cgroups, sets
    /// it to idle I/O priority and nice 19, and waits for its "ready" line.
    pub fn spawn(
        program: &Path,
        args: &[String],
        placement: &WorkerPlacement,
    ) -> anyhow::Result<Self> {
        use std::process::{Command, Stdio};
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| anyhow::anyhow!("spawning preload worker {}: {e}", program.display()))?;
        let pid = child.id();
        let placed = (|| -> anyhow::Result<()> {
            if let Some(d) = &placement.memory_cgroup {
                join_cgroup(d, pid)?;
            }
            if let Some(d) = &placement.blkio_cgroup {
                join_cgroup(d, pid)?;
            }
            Ok(())
        })();
        if let Err(e) = placed {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        if let Err(e) = super::set_idle_io_priority(pid) {
            tracing::warn!(pid, errno = e, "preload worker: ioprio_set(IDLE) failed");
        }
        if let Err(e) = super::set_nice(pid, 19) {
            tracing::warn!(pid, errno = e, "preload worker: setpriority(19) failed");
        }
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let stats = Arc::new(Mutex::new(WorkerStats {
            pid,
            alive: true,
            ..Default::default()
        }));
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let st = Arc::clone(&stats);
        std::thread::spawn(move || {
            let mut ready = Some(ready_tx);
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(r) = serde_json::from_str::<WorkerReply>(&line) else {
                    tracing::warn!(line, "preload worker: unreadable reply");
                    continue;
                };
                let mut s = st.lock().expect("stats lock");
                s.protected_bytes = r.protected_bytes;
                s.standby_bytes = r.standby_bytes;
                s.errors += r.errors;
                match r.op.as_str() {
                    "ready" => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    "loaded" => {
                        s.loads += 1;
                        s.loaded_bytes += r.bytes_read;
                        if r.aborted {
                            s.aborted_loads += 1;
                        }
                        s.last_load = Some((r.app.clone(), r.bytes_read, r.ms));
                        if r.hold == Some(Hold::Protect) {
                            let n = s.loads;
                            s.last_stream.insert(r.app.clone(), (n, r.bytes_read));
                            if r.first_byte_mono_ns > 0 {
                                s.last_stream_first_ns
                                    .insert(r.app.clone(), r.first_byte_mono_ns);
                            } else {
                                s.last_stream_first_ns.remove(&r.app);
                            }
                        }
                        tracing::info!(app = %r.app, bytes = r.bytes_read, ms = r.ms,
                            aborted = r.aborted, errors = r.errors, "preload worker: load done");
                    }
                    "touched" => s.touched_bytes += r.bytes_read,
                    "prepaged" | "prepage_done" => {
                        let before = s.prepage_progress.insert(r.job, r.bytes_read);
                        s.prepaged_bytes += r.bytes_read.saturating_sub(before.unwrap_or(0));
                        if r.op == "prepage_done" {
                            s.prepage_jobs += 1;
                        }
                        // Reports arriving after their window ended are
                        // never taken: keep the most recent jobs only.
                        while s.prepage_progress.len() > 256 {
                            s.prepage_progress.pop_first();
                        }
                    }
                    "cold_marked" | "cold_done" => {
                        let before = if r.op == "cold_done" {
                            s.cold_progress.remove(&r.job)
                        } else {
                            s.cold_progress.insert(r.job, r.bytes_read)
                        };
                        s.cold_marked_bytes += r.bytes_read.saturating_sub(before.unwrap_or(0));
                        if r.op == "cold_done" {
                            s.cold_jobs += 1;
                            if r.aborted {
                                s.cold_jobs_stopped += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
            st.lock().expect("stats lock").alive = false;
        });
        if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("preload worker {} did not become ready", program.display());
        }
        Ok(Self {
            child: Some(child),
            stdin,
            stats,
            held: BTreeMap::new(),
            dry_run: false,
            readahead: None,
            switching: default_tracker(),
            cold_sent: Default::default(),
        })
    }

    /// Hands `app`'s `jobs` to the worker as `kind` commands (in dry-run
    /// only logs them); returns their bytes.
    fn send_jobs(
        &mut self,
        app: &str,
        jobs: Vec<AdviceJob>,
        kind: AdviceKind,
    ) -> Result<u64, MechError> {
        let bytes: u64 = jobs
            .iter()
            .flat_map(|j| j.ranges.iter())
            .map(|&(_, l)| l)
            .sum();
        if self.dry_run {
            if bytes > 0 {
                tracing::info!(
                    app,
                    bytes,
                    jobs = jobs.len(),
                    ?kind,
                    "dry-run: would advise"
                );
            }
            return Ok(bytes);
        }
        for j in jobs {
            let a = AdviceArgs {
                app: app.to_string(),
                job: j.job,
                pid: j.id.pid,
                start_time: j.id.start_time,
                ranges: j.ranges,
            };
            self.send(&match kind {
                AdviceKind::Prepage => WorkerCmd::Prepage(a),
                AdviceKind::Cold => WorkerCmd::MarkCold(a),
            })?;
        }
        Ok(bytes)
    }

    /// The worker's statistics as last reported.
    pub fn stats(&self) -> WorkerStats {
        self.stats.lock().expect("stats lock").clone()
    }

    /// The worker's pid, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    fn send(&mut self, cmd: &WorkerCmd) -> Result<(), MechError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(MechError::Failed {
                what: "preload worker".into(),
                detail: "not running".into(),
            });
        };
        let line = serde_json::to_string(cmd).expect("command serialises");
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .map_err(|e| MechError::Failed {
                what: "sending to preload worker".into(),
                detail: e.to_string(),
            })
    }

    /// Tells the worker to quit and waits for it (up to 2 s, then kills it),
    /// and restores the devices' readahead.
    pub fn shutdown(&mut self) {
        if let Some(r) = self.readahead.as_mut() {
            for e in r.restore() {
                tracing::error!(error = %e, "readahead not restored (the journal stays; the next start retries)");
            }
        }
        if self.stdin.is_some() {
            let _ = self.send(&WorkerCmd::Quit);
        }
        self.stdin = None;
        if let Some(mut c) = self.child.take() {
            let t0 = Instant::now();
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if t0.elapsed() < Duration::from_secs(2) => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
    }
}

impl Drop for WorkerClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl PreloadMechanism for WorkerClient {
    fn load(&mut self, app: &str, spans: &[FileSpan], hold: Hold) -> Result<u64, MechError> {
        let bytes: u64 = spans.iter().map(|s| s.len).sum();
        *self
            .held
            .entry((app.to_string(), hold == Hold::Protect))
            .or_default() += bytes;
        if self.dry_run {
            tracing::info!(
                app,
                ?hold,
                spans = spans.len(),
                bytes,
                "dry-run: would preload"
            );
            return Ok(bytes);
        }
        self.send(&WorkerCmd::Load {
            app: app.into(),
            hold,
            spans: spans
                .iter()
                .map(|s| WorkSpan {
                    path: s.path.clone(),
                    offset: s.offset,
                    len: s.len,
                })
                .collect(),
        })?;
        Ok(bytes)
    }

    fn release(&mut self, app: &str) -> Result<(), MechError> {
        self.held.retain(|(a, _), _| a != app);
        if self.dry_run {
            tracing::info!(app, "dry-run: would release");
            return Ok(());
        }
        self.send(&WorkerCmd::Release {
            app: app.into(),
            hold: None,
        })
    }

    fn release_hold(&mut self, app: &str, hold: Hold) -> Result<(), MechError> {
        self.held.remove(&(app.to_string(), hold == Hold::Protect));
        if self.dry_run {
            tracing::info!(app, ?hold, "dry-run: would release");
            return Ok(());
        }
        self.send(&WorkerCmd::Release {
            app: app.into(),
            hold: Some(hold),
        })
    }

    fn pause_touch(&mut self, paused: bool) -> Result<(), MechError> {
        if self.dry_run {
            return Ok(());
        }
        self.send(&WorkerCmd::PauseTouch { paused })
    }

    fn held_bytes(&self) -> u64 {
        self.held.values().sum()
    }

    fn set_launch_readahead(
        &mut self,
        paths: &[&str],
        procs: &[appflow_core::scheduler::ProcId],
        bytes: Option<u64>,
    ) -> Result<u32, MechError> {
        let Some(r) = self.readahead.as_mut() else {
            return Err(MechError::Unsupported(
                "launch readahead (no state directory for its journal)".into(),
            ));
        };
        match bytes {
            Some(b) => r.raise(paths, procs, b).map_err(|e| MechError::Failed {
                what: "raising the readahead".into(),
                detail: e.to_string(),
            }),
            None => match r.restore().into_iter().next() {
                None => Ok(0),
                Some(e) => Err(MechError::Failed {
                    what: "restoring the readahead".into(),
                    detail: e.to_string(),
                }),
            },
        }
    }

    fn start_window(&mut self, app: &str, procs: &[ProcId]) -> Result<(), MechError> {
        // Back in the foreground: a cold-marking job still running for it stops.
        if self.cold_sent.remove(app) && !self.dry_run {
            self.send(&WorkerCmd::StopCold { app: app.into() })?;
        }
        self.switching.start(app, procs);
        Ok(())
    }

    /// Hands the cold set of `app`'s last window (its present private
    /// anonymous pages the window did not bring back, see
    /// [`super::switching`]) to the worker, which marks them with
    /// `process_madvise(MADV_COLD)`; only processes in `procs` (the app's
    /// own, by identity) are marked. Returns the bytes handed out (0
    /// without an observed window).
    fn mark_cold(&mut self, app: &str, procs: &[ProcId]) -> Result<u64, MechError> {
        let jobs: Vec<_> = self
            .switching
            .cold_jobs(app)
            .into_iter()
            .filter(|j| procs.contains(&j.id))
            .collect();
        if !jobs.is_empty() && !self.dry_run {
            self.cold_sent.insert(app.to_string());
        }
        self.send_jobs(app, jobs, AdviceKind::Cold)
    }

    /// Hands the candidates still swapped (at most the plan's anonymous
    /// bytes) to the worker, which advises them in the domain at idle
    /// priority; returns the bytes handed out. File pages are not tracked
    /// live (see [`super::switching`]).
    fn prepage(
        &mut self,
        app: &str,
        procs: &[ProcId],
        plan: &PrepagePlan,
    ) -> Result<u64, MechError> {
        let _ = procs;
        let jobs = self.switching.prepage(app, plan.anon_bytes);
        self.send_jobs(app, jobs, AdviceKind::Prepage)
    }

    fn switch_observation(
        &mut self,
        app: &str,
        procs: &[ProcId],
    ) -> Result<Option<SwitchObservation>, MechError> {
        let jobs = self.switching.open_jobs(app);
        if !jobs.is_empty() && !self.dry_run {
            // The window is over: no more prepaging for it. What the worker
            // advised up to now (its last progress report) is what was
            // prepaged.
            let _ = self.send(&WorkerCmd::EndPrepage { app: app.into() });
        }
        let progress: BTreeMap<u64, u64> = {
            let mut s = self.stats.lock().expect("stats lock");
            jobs.iter()
                .filter_map(|j| s.prepage_progress.remove(j).map(|b| (*j, b)))
                .collect()
        };
        let done = |j: u64| progress.get(&j).copied().unwrap_or(0);
        Ok(self.switching.finish(app, procs, &done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::residency;
    use std::os::fd::AsFd;

    /// Writes a file of `len` bytes at `f`, flushed and dropped from the
    /// page cache; returns its path.
    fn cold_file(f: &Path, len: usize) -> String {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        std::fs::write(f, data).unwrap();
        let file = std::fs::File::open(f).unwrap();
        file.sync_all().unwrap();
        residency::drop_from_cache(file.as_fd()).unwrap();
        f.display().to_string()
    }

    /// Resident ranges of the file at `path`.
    fn resident(path: &str) -> Vec<appflow_core::profile::ByteRange> {
        let f = std::fs::File::open(path).unwrap();
        let size = f.metadata().unwrap().len();
        let pages = residency::residency(f.as_fd(), size).unwrap();
        residency::resident_ranges(&pages, residency::page_bytes(), size)
    }

    /// [`resident`] once reads in flight have landed (`mincore` counts a
    /// page once it is read, not while it is under I/O): the same answer
    /// twice 100 ms apart, after at least 200 ms (at most 3 s).
    fn settled(path: &str) -> Vec<appflow_core::profile::ByteRange> {
        let t0 = Instant::now();
        let mut last = resident(path);
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = resident(path);
            if (now == last && t0.elapsed() >= Duration::from_millis(200))
                || t0.elapsed() >= Duration::from_secs(3)
            {
                return now;
            }
            last = now;
        }
    }

    /// What an app's plain read of 64 KiB at the start of a cold file
    /// leaves resident: the kernel's first readahead window, which holds
    /// the page marked for its next one. `None` where the file's device
    /// reads no window around a read (tmpfs, `read_ahead_kb` 0).
    fn app_reads_start(path: &str) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(path).unwrap();
        residency::drop_from_cache(f.as_fd()).unwrap();
        let mut buf = vec![0u8; 64 << 10];
        f.read_exact_at(&mut buf, 0).unwrap();
        match settled(path).as_slice() {
            [r] if r.start == 0 && r.end > 64 << 10 => Some(r.end),
            _ => None,
        }
    }

    /// Issue 31: a learned ML launch streamed its profile's ranges of pages
    /// the app had already read, reached the page the app's readahead had
    /// marked, and read a window past the range that nobody asked for
    /// (docs/results-log.md). A load or a keep-warm touch over what the app
    /// read brings in nothing more.
    #[test]
    fn loads_and_touches_over_what_the_app_read_start_no_readahead_past_it() {
        let d = std::env::temp_dir().join(format!("appflow-marks-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let path = cold_file(&d.join("lib"), 32 << 20);
        let Some(window) = app_reads_start(&path) else {
            eprintln!(
                "skipped: {} reads no readahead window around a read (tmpfs or read_ahead_kb 0)",
                d.display()
            );
            std::fs::remove_dir_all(&d).unwrap();
            return;
        };
        let mut w = Worker {
            apps: BTreeMap::new(),
            buf: vec![0u8; 2 << 20],
        };
        let (_tx, rx) = mpsc::channel();
        let mut queue = VecDeque::new();
        let span = WorkSpan {
            path: path.clone(),
            offset: 0,
            len: window,
        };
        let r = w.load("a", Hold::Touch, &[span], &rx, &mut queue);
        assert_eq!(r.errors, 0);
        let only_window = vec![appflow_core::profile::ByteRange {
            start: 0,
            end: window,
        }];
        assert_eq!(
            settled(&path),
            only_window,
            "the load read past the app's window"
        );
        // The app reads its start again (cold), and the worker keeps the span warm.
        assert_eq!(app_reads_start(&path), Some(window));
        let t = w.touch_all();
        assert_eq!((t.errors, t.bytes_read), (0, 0));
        assert_eq!(
            settled(&path),
            only_window,
            "the touch read past the app's window"
        );
        // A page evicted since is read back by the touch, and only it.
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: advice on our own descriptor.
        unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
                4096,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        let t = w.touch_all();
        assert_eq!((t.errors, t.bytes_read), (0, 4096));
        assert_eq!(settled(&path), only_window);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn worker_loads_locks_touches_and_releases_in_process() {
        let d = std::env::temp_dir().join(format!("appflow-worker-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("big");
        let path = cold_file(&f, 3 << 20);
        let other = cold_file(&d.join("other"), 3 << 20);
        let (cmd_r, mut cmd_w) = std::io::pipe().unwrap();
        let (rep_r, mut rep_w) = std::io::pipe().unwrap();
        let worker = std::thread::spawn(move || {
            worker_main(std::io::BufReader::new(cmd_r), &mut rep_w, 1 << 20, 10_000).unwrap();
        });
        let mut replies = std::io::BufReader::new(rep_r).lines();
        let mut next =
            || -> WorkerReply { serde_json::from_str(&replies.next().unwrap().unwrap()).unwrap() };
        let mut send = |c: WorkerCmd| {
            writeln!(cmd_w, "{}", serde_json::to_string(&c).unwrap()).unwrap();
        };
        assert_eq!(next().op, "ready");
        send(WorkerCmd::Load {
            app: "a".into(),
            hold: Hold::Protect,
            spans: vec![
                WorkSpan {
                    path: path.clone(),
                    offset: 0,
                    len: 1 << 20,
                },
                WorkSpan {
                    path: path.clone(),
                    offset: 1 << 20,
                    len: 4 << 20,
                },
                WorkSpan {
                    path: "/nonexistent/x".into(),
                    offset: 0,
                    len: 10,
                },
            ],
        });
        let load_a = next();
        // The second span is clamped at the end of the file; the missing file counts as an error.
        assert_eq!((load_a.op.as_str(), load_a.app.as_str()), ("loaded", "a"));
        assert_eq!(load_a.bytes_read, 3 << 20);
        assert_eq!(load_a.errors, 1);
        assert_eq!(load_a.protected_bytes, 3 << 20);
        send(WorkerCmd::Load {
            app: "b".into(),
            hold: Hold::Touch,
            spans: vec![WorkSpan {
                path: path.clone(),
                offset: 4096,
                len: 8192,
            }],
        });
        let load_b = next();
        assert_eq!(load_b.standby_bytes, 8192);
        // A protected span is read exactly: its own pages, nothing past them.
        send(WorkerCmd::Load {
            app: "c".into(),
            hold: Hold::Protect,
            spans: vec![WorkSpan {
                path: other.clone(),
                offset: 2 << 20,
                len: 4096,
            }],
        });
        let load_c = next();
        assert_eq!(load_c.bytes_read, 4096, "the span's one page");
        assert_eq!(load_c.protected_bytes, (3 << 20) + 4096);
        // Pages already resident are not read again (they are still locked).
        send(WorkerCmd::Load {
            app: "d".into(),
            hold: Hold::Protect,
            spans: vec![WorkSpan {
                path: path.clone(),
                offset: 0,
                len: 1 << 20,
            }],
        });
        let load_d = next();
        assert_eq!(load_d.bytes_read, 0, "resident pages are not read again");
        assert_eq!(load_d.protected_bytes, (4 << 20) + 4096);
        send(WorkerCmd::Release {
            app: "d".into(),
            hold: None,
        });
        assert_eq!(next().op, "released");
        send(WorkerCmd::Release {
            app: "c".into(),
            hold: None,
        });
        assert_eq!(next().op, "released");
        send(WorkerCmd::Release {
            app: "a".into(),
            hold: None,
        });
        let rel = next();
        assert_eq!(rel.op, "released");
        assert_eq!(rel.protected_bytes, 0);
        assert_eq!(rel.standby_bytes, 8192);
        drop(cmd_w); // EOF: the worker quits.
        worker.join().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
