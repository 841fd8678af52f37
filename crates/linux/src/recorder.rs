//! The launch recorder: runs a command and records what its launch reads
//! and allocates, as an [`appflow_core::profile::LaunchObservation`]
//! (docs/recording.md; the AppFlow paper §4.1 uses the files of the launch window, their
//! sizes and first-access order; §4.3 uses M_sum and the relaunch footprint).
//!
//! The launch window runs from just before exec to readiness: the process
//! exiting, a file appearing, or a line on its stdout matching a regex.
//!
//! | what | how |
//! |---|---|
//! | files and first-access time | fanotify permission events (`FAN_OPEN_PERM`, `FAN_OPEN_EXEC_PERM`; optionally `FAN_ACCESS`) on every storage filesystem, filtered to descendants of the recorder (`fanotify` submodule) |
//! | ranges brought into the page cache, including by mmap faults and readahead | `mincore` residency of each file taken while its first opener is blocked, diffed with residency at the end of the window ([`residency`]) |
//! | files reached only through mappings | `/proc/PID/maps` of the tree sampled during the window; their resident pages within the mapped ranges |
//! | M_sum (anonymous allocation of the launch) | peak over the window of Σ (RssAnon + VmSwap) of the tree's `/proc/PID/status`, sampled every `sample_ms` |
//! | relaunch baseline | Σ (VmRSS + VmSwap) of the tree at readiness (the last sample when readiness is exit) |
//!
//! **Cost.** The memory samples read `/proc/PID/status`, whose counters the
//! kernel keeps per mm: `smaps_rollup` (used before) walks every page table
//! of the process under its mmap lock, which for a process with a large
//! mapped model took milliseconds per sample and stalled the app's own page
//! faults. The rescans of /proc for descendants and the reads of mappings
//! run at the start, then at intervals doubling from 50 ms to
//! [`FULL_SCAN_MAX_MS`] (a launch's processes and mappings appear early), and
//! once more at readiness, which sees every mapping still alive.
//!
//! With `cold`, each file is dropped from the page cache (POSIX_FADV_DONTNEED)
//! when the tree first opens it, before the open proceeds, so the recording
//! sees the launch as a cold launch. Without it, pages already cached are
//! not counted as brought in: a warm recording under-reports. Dirty or
//! mapped pages (e.g. a shared library used by other processes) cannot be
//! dropped and stay out of the ranges; they are resident anyway.
//!
//! Files the tree wrote (size or mtime changed during the window) and files
//! deleted before the end are left out: they are not launch reads.
//!
//! Not implemented: the tracefs `filemap:mm_filemap_add_to_page_cache`
//! source (exact per-page insertion time). Per-page times are not needed by
//! the policies, which use per-file first access.

mod fanotify;
pub mod residency;

use crate::readers::{descendants, read_maps, read_status_memory, FileMapping};
use appflow_core::profile::{
    coalesce, discount_readaround, ByteRange, LaunchObservation, LaunchProfile, ObservedFile,
    Readaround,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// When the launch is over.
#[derive(Debug, Clone)]
pub enum Readiness {
    /// When the launched process exits.
    Exit,
    /// When this file exists.
    File(PathBuf),
    /// When a line of the process's stdout matches.
    Line(regex::Regex),
}

/// How to record one launch.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// End of the launch window.
    pub readiness: Readiness,
    /// Give up (and kill the app) when not ready after this long, ms.
    pub timeout_ms: u64,
    /// Drop each file from the page cache at its first open by the app.
    pub cold: bool,
    /// Leave the app running after the window (default: SIGTERM, then SIGKILL after 2 s).
    pub keep_running: bool,
    /// Also watch reads (`FAN_ACCESS`), to catch files read through
    /// descriptors opened before the launch. Costs one event per read on the machine.
    pub watch_reads: bool,
    /// Interval of the memory and mapping samples, ms.
    pub sample_ms: u64,
    /// The /proc to read (a fixture root in tests).
    pub proc_root: PathBuf,
}

impl RecordOptions {
    /// Options with the defaults: exit readiness, 60 s timeout, warm, 10 ms samples.
    pub fn new(command: Vec<String>) -> Self {
        Self {
            command,
            readiness: Readiness::Exit,
            timeout_ms: 60_000,
            cold: false,
            keep_running: false,
            watch_reads: false,
            sample_ms: 10,
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// Why a recording failed.
#[derive(Debug, Error)]
pub enum RecordError {
    /// Nothing to run.
    #[error("no command given")]
    NoCommand,
    /// The ready file exists before the launch, so readiness could not be seen.
    #[error("ready file {} exists before the launch; remove it first", .0.display())]
    ReadyFileExists(PathBuf),
    /// fanotify could not be set up.
    #[error("{0}")]
    Fanotify(std::io::Error),
    /// The command could not be started.
    #[error("cannot start {cmd:?}: {source}")]
    Spawn {
        /// The program.
        cmd: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The app was not ready in time (it was killed; nothing was recorded).
    #[error("app not ready within {timeout_ms} ms (killed; nothing recorded)")]
    Timeout {
        /// The timeout.
        timeout_ms: u64,
    },
    /// The process exited before the ready file or line appeared.
    #[error("app exited ({status}) before it was ready; nothing recorded")]
    ExitedEarly {
        /// Its exit status.
        status: ExitStatus,
    },
    /// Another OS error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A file's outcome in a recording, for the summary.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RecordSummary {
    /// Files the tree opened or read on watched filesystems.
    pub files_seen: usize,
    /// Files with at least one range brought in (in the observation).
    pub files_recorded: usize,
    /// Files already fully cached (nothing brought in; left out).
    pub files_already_cached: usize,
    /// Files written by the tree during the window (left out).
    pub files_written: usize,
    /// Files reached only through mappings (not seen opening).
    pub files_mapped_only: usize,
    /// Files dropped from the page cache at first open (`cold`).
    pub files_dropped: u64,
    /// Recorded files whose "before" residency was taken late (first seen
    /// through a read notification, not an open): their ranges may be short.
    pub files_late_snapshot: usize,
    /// Bytes brought into the page cache by the launch.
    pub bytes_brought_in: u64,
    /// Processes of the tree seen.
    pub processes: usize,
    /// Memory samples taken.
    pub samples: u64,
    /// Exit code of the app when readiness was exit (None: killed by a signal).
    pub exit_code: Option<i32>,
    /// Mount points watched.
    pub watched_mounts: Vec<String>,
    /// Some access notifications were lost (queue overflow).
    pub overflowed: bool,
    /// Opened files the kernel could not hand over, or whose status could
    /// not be read back at the end (removed since): left out.
    pub files_unopenable: u64,
}

/// The result of [`record_launch`].
#[derive(Debug, Clone)]
pub struct Recording {
    /// What the launch showed (merge it with `LaunchProfile::merge_launch`).
    pub observation: LaunchObservation,
    /// Counts for the user.
    pub summary: RecordSummary,
}

#[derive(Default)]
struct Samples {
    /// The tree's root: its descendants are the tree.
    root: u32,
    /// Whether the root itself is in the tree (it is the app, not the
    /// recorder); the caller then names the tree's processes
    /// ([`LaunchWatch::sample`]) and /proc is never scanned for descendants.
    root_in_tree: bool,
    peak_anon_kb: u64,
    last_footprint_kb: u64,
    count: u64,
    /// Living processes of the tree.
    pids: BTreeSet<u32>,
    /// Processes of the tree that have exited.
    exited: BTreeSet<u32>,
    /// path → mapped file ranges (offsets in the file) seen in the tree's maps.
    maps: BTreeMap<String, Vec<ByteRange>>,
}

impl Samples {
    /// One sample of the tree's memory. `full` rescans /proc for
    /// descendants (processes that never opened a file are found this way)
    /// and reads mappings; otherwise the pids known so far are used.
    fn take(&mut self, proc_root: &Path, known: &BTreeSet<u32>, full: bool) {
        let me = std::process::id();
        let root = (!self.root_in_tree).then_some(self.root);
        let outside = |p: &u32| *p == me || Some(*p) == root;
        if full && !self.root_in_tree {
            if let Ok(tree) = descendants(proc_root, self.root) {
                self.pids.extend(tree.into_iter().filter(|p| !outside(p)));
            }
        }
        self.pids
            .extend(known.iter().copied().filter(|p| !outside(p)));
        let (mut anon, mut foot, mut any) = (0u64, 0u64, false);
        let mut gone = Vec::new();
        let pids: Vec<u32> = self.pids.iter().copied().collect();
        for pid in pids {
            match read_status_memory(proc_root, pid) {
                Ok(s) => {
                    anon += s.anon_kb + s.swap_kb;
                    foot += s.rss_kb + s.swap_kb;
                    any = true;
                }
                Err(e) if e.is_not_found() => gone.push(pid),
                Err(_) => {}
            }
            if full {
                if let Ok(maps) = read_maps(proc_root, pid) {
                    for m in &maps {
                        self.add_map(m);
                    }
                }
            }
        }
        for pid in gone {
            self.pids.remove(&pid);
            self.exited.insert(pid);
        }
        // A tree whose processes have all exited reads as zombies (no
        // memory lines): that is no footprint, so the last live one stays.
        if any && foot > 0 {
            self.count += 1;
            self.peak_anon_kb = self.peak_anon_kb.max(anon);
            self.last_footprint_kb = foot;
        }
    }

    fn add_map(&mut self, m: &FileMapping) {
        let len = m.end_addr.saturating_sub(m.start_addr);
        self.maps
            .entry(m.path.clone())
            .or_default()
            .push(ByteRange {
                start: m.offset_bytes,
                end: m.offset_bytes + len,
            });
    }
}

/// Longest interval between two rescans of /proc and of the tree's mappings, ms.
pub const FULL_SCAN_MAX_MS: u64 = 1000;
/// First interval between rescans, ms (doubles after each).
const FULL_SCAN_FIRST_MS: u64 = 50;

/// When the costly samples (a /proc rescan for descendants, the mappings)
/// are due: at the start, then after 50, 100, 200, … ms up to
/// [`FULL_SCAN_MAX_MS`].
struct FullScans {
    next: Instant,
    interval: Duration,
}

impl FullScans {
    fn new(start: Instant) -> Self {
        Self {
            next: start,
            interval: Duration::from_millis(FULL_SCAN_FIRST_MS),
        }
    }

    /// Whether a full scan is due at `now`; if so, schedules the next one.
    fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + self.interval;
        self.interval = (self.interval * 2).min(Duration::from_millis(FULL_SCAN_MAX_MS));
        true
    }
}

/// Ignores SIGTSTP, SIGTTIN and SIGTTOU until dropped, then restores them.
struct IgnoreStops([(libc::c_int, libc::sighandler_t); 3]);

impl IgnoreStops {
    fn new() -> Self {
        let sigs = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];
        // SAFETY: installing SIG_IGN; the previous disposition is kept to restore.
        Self(sigs.map(|s| (s, unsafe { libc::signal(s, libc::SIG_IGN) })))
    }
}

impl Drop for IgnoreStops {
    fn drop(&mut self) {
        for (s, old) in self.0 {
            if old != libc::SIG_ERR {
                // SAFETY: restoring the disposition saved in new().
                unsafe { libc::signal(s, old) };
            }
        }
    }
}

fn kill_tree(child: &mut Child, pids: &BTreeSet<u32>, keep_running: bool) {
    if keep_running {
        return;
    }
    let pgid = child.id() as i32;
    let signal_all = |sig| {
        // SAFETY: kill(2) on the app's process group and on its known pids.
        unsafe {
            libc::kill(-pgid, sig);
            for &p in pids {
                libc::kill(p as i32, sig);
            }
        }
    };
    if let Ok(Some(_)) = child.try_wait() {
        // Already gone; children in the group may remain.
        signal_all(libc::SIGKILL);
    } else {
        signal_all(libc::SIGTERM);
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        signal_all(libc::SIGKILL);
        let _ = child.wait();
    }
    // Reap orphans re-parented to us (we are a child subreaper), only those of the tree.
    for &p in pids {
        // SAFETY: non-blocking waitpid on a pid of the tree.
        unsafe {
            libc::waitpid(p as i32, std::ptr::null_mut(), libc::WNOHANG);
        }
    }
}

/// Runs `opts.command` and records its launch. Needs root (fanotify
/// permission events on whole filesystems).
pub fn record_launch(opts: &RecordOptions) -> Result<Recording, RecordError> {
    let (prog, args) = opts.command.split_first().ok_or(RecordError::NoCommand)?;
    if let Readiness::File(f) = &opts.readiness {
        if f.exists() {
            return Err(RecordError::ReadyFileExists(f.clone()));
        }
    }
    let watcher = fanotify::Watcher::start(
        &opts.proc_root,
        fanotify::Tree::Children,
        opts.cold,
        opts.watch_reads,
    )
    .map_err(RecordError::Fanotify)?;
    let watched: Vec<String> = watcher
        .marked
        .iter()
        .map(|p| p.display().to_string())
        .collect();

    let mut cmd = Command::new(prog);
    cmd.args(args).process_group(0);
    if matches!(opts.readiness, Readiness::Line(_)) {
        cmd.stdout(Stdio::piped());
    }
    let at_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(source) => {
            let _ = watcher.finish();
            return Err(RecordError::Spawn {
                cmd: prog.clone(),
                source,
            });
        }
    };
    // While recording, every open on the watched filesystems waits for the
    // watcher thread: a stopped recorder (Ctrl-Z) would stall the machine.
    // Job-control stops are ignored until the watcher is closed (set after
    // the spawn so the app does not inherit the ignored dispositions).
    let _no_stop = IgnoreStops::new();
    let (line_tx, line_rx) = mpsc::channel::<()>();
    if let (Readiness::Line(re), Some(out)) = (&opts.readiness, child.stdout.take()) {
        let re = re.clone();
        std::thread::spawn(move || {
            let mut tx = Some(line_tx);
            let mut stdout = std::io::stdout();
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(stdout, "{line}");
                if re.is_match(&line) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });
    }

    let mut samples = Samples {
        root: std::process::id(),
        ..Default::default()
    };
    let sample_every = Duration::from_millis(opts.sample_ms.max(1));
    // Readiness is polled at a finer tick than memory is sampled, so the
    // measured launch time does not depend on the sample interval.
    let tick = Duration::from_millis(1);
    let timeout = Duration::from_millis(opts.timeout_ms);
    let mut exit_status: Option<ExitStatus> = None;
    let mut next_sample = start;
    let mut full_scans = FullScans::new(start);
    let outcome: Result<(), RecordError> = loop {
        let now = Instant::now();
        if now >= next_sample {
            let known = watcher.tree_now();
            samples.take(&opts.proc_root, &known, full_scans.due(now));
            next_sample += sample_every;
        }
        let exited = child.try_wait()?;
        let ready = match &opts.readiness {
            Readiness::Exit => {
                exit_status = exited;
                exited.is_some()
            }
            Readiness::File(f) => f.exists(),
            // An app that prints its ready line and exits at once (a
            // synthetic app whose stdin is closed) is ready: once it has
            // exited, its line may still be in the pipe or in the reader
            // thread, so wait for the reader to reach the end of the pipe
            // (it drops the sender there), within the timeout, before
            // calling the exit early. Polling 1 ms here lost the line on a
            // loaded host (`appflow bench` then fell back to profiles from
            // the specs; issue 30).
            Readiness::Line(_) if exited.is_some() => line_rx
                .recv_timeout(timeout.saturating_sub(start.elapsed()))
                .is_ok(),
            Readiness::Line(_) => line_rx.recv_timeout(tick).is_ok(),
        };
        if ready {
            break Ok(());
        }
        if let Some(status) = exited {
            break Err(RecordError::ExitedEarly { status });
        }
        if start.elapsed() >= timeout {
            break Err(RecordError::Timeout {
                timeout_ms: opts.timeout_ms,
            });
        }
        if !matches!(opts.readiness, Readiness::Line(_)) {
            std::thread::sleep(tick);
        }
    };
    let launch_ms = start.elapsed().as_millis() as u64;
    if outcome.is_ok() && exit_status.is_none() {
        let known = watcher.tree_now();
        samples.take(&opts.proc_root, &known, true);
    }
    let seen = watcher.finish();
    drop(_no_stop);
    let mut pids = samples.pids.clone();
    pids.extend(&samples.exited);
    if let Ok(s) = &seen {
        pids.extend(&s.tree_pids);
    }
    kill_tree(&mut child, &pids, opts.keep_running && outcome.is_ok());
    outcome?;
    let seen = seen?;
    let summary = RecordSummary {
        processes: pids.len(),
        exit_code: exit_status.and_then(|s| s.code()),
        watched_mounts: watched,
        ..Default::default()
    };
    observe(seen, samples, start, launch_ms, at_unix_ms, summary, None)
}

/// What a learned launch is credited with ([`observe`]).
struct Learned<'a> {
    profile: &'a LaunchProfile,
    readaround: &'a dyn Fn(u64) -> Readaround,
}

/// The observation of a finished window: ranges each file of the tree
/// brought into the page cache (residency after the window against the
/// residency before the tree's first open), files reached only through
/// mappings, and the memory samples.
///
/// `learned.profile` (a learned launch, see [`LaunchWatch`]): the app's profile
/// before this launch. A learned launch does not start cold: the daemon
/// preloaded the profile, or the pages were cached by an earlier run, so
/// what it *brings in* is only part of what it reads. For every file the
/// tree opened, the profile's ranges of that file count as seen (the app
/// still opens it; under memory pressure some of them may even have been
/// reclaimed again by the end of the window), and for a file the profile
/// does not know yet, its pages resident at the end count too. So a
/// learned profile never shrinks below what the app still opens, and a
/// file leaves it only by the majority rule, after launches that no longer
/// open it (docs/daemon.md, "What a recording holds").
///
/// `learned.readaround`: by a file's device number (`st_dev`), the
/// readahead window its reads had during the launch and the device's own.
/// A learned launch's runs outside the profile lose the kernel's
/// read-around that is not evidence of the app's reach
/// ([`discount_readaround`]), so that the profile converges to what a
/// recording shows instead of growing half a window at every edge.
fn observe(
    seen: fanotify::WatchResult,
    samples: Samples,
    start: Instant,
    launch_ms: u64,
    at_unix_ms: u64,
    mut summary: RecordSummary,
    learned: Option<Learned<'_>>,
) -> Result<Recording, RecordError> {
    let credit = learned.as_ref().map(|l| l.profile);
    let readaround = |dev: u64| {
        learned
            .as_ref()
            .map_or(Readaround::default(), |l| (l.readaround)(dev))
    };
    // Residency after the window, for every file the tree opened.
    let page = residency::page_bytes();
    summary.files_seen = seen.files.len();
    summary.files_dropped = seen.dropped;
    summary.samples = samples.count;
    summary.overflowed = seen.overflowed;
    summary.files_unopenable = seen.unopenable;
    let credited: BTreeMap<&str, Vec<ByteRange>> = credit
        .map(|p| {
            p.active_files()
                .into_iter()
                .map(|f| (f.path, f.ranges))
                .collect()
        })
        .unwrap_or_default();
    let mut files: Vec<ObservedFile> = Vec::new();
    let mut seen_paths: BTreeSet<String> = BTreeSet::new();
    for f in seen.files.into_values() {
        seen_paths.insert(f.path.clone());
        if f.path.is_empty() || f.path.ends_with(" (deleted)") {
            continue;
        }
        let reopened;
        let fd = match &f.fd {
            Some(fd) => fd.as_fd(),
            None => match std::fs::File::open(&f.path) {
                Ok(file) => {
                    reopened = file;
                    reopened.as_fd()
                }
                Err(_) => continue,
            },
        };
        // A file removed since its open (a temp file) may no longer answer
        // fstat: on FUSE the server looks it up by its path, now gone.
        let Ok(meta) = std::fs::File::from(fd.try_clone_to_owned()?).metadata() else {
            summary.files_unopenable += 1;
            continue;
        };
        if meta.len() != f.size_at_open || (meta.mtime(), meta.mtime_nsec()) != f.mtime_at_open {
            summary.files_written += 1;
            continue;
        }
        let after = residency::residency(fd, f.size_at_open).unwrap_or_default();
        let mut ranges = residency::newly_resident_ranges(&f.before, &after, page, f.size_at_open);
        if credit.is_some() {
            let known = credited.get(f.path.as_str());
            if known.is_none() {
                ranges = residency::resident_ranges(&after, page, f.size_at_open);
            }
            let known = known.map_or(&[][..], Vec::as_slice);
            let mut all =
                discount_readaround(&ranges, known, f.size_at_open, readaround(meta.dev()));
            all.extend(known.iter().copied());
            ranges = coalesce(all);
        }
        if ranges.is_empty() {
            summary.files_already_cached += 1;
            continue;
        }
        if !f.before_exact {
            summary.files_late_snapshot += 1;
        }
        let first_access_us = f.first_access.saturating_duration_since(start).as_micros() as u64;
        files.push(ObservedFile {
            path: f.path,
            size_bytes: f.size_at_open,
            first_access_us,
            ranges,
        });
    }
    // Files reached only through mappings: their resident pages within the mapped ranges.
    for (path, mapped) in samples.maps {
        if seen_paths.contains(&path) || path.ends_with(" (deleted)") {
            continue;
        }
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let size = meta.len();
        let resident = residency::resident_ranges(
            &residency::residency(file.as_fd(), size).unwrap_or_default(),
            page,
            size,
        );
        let ranges = residency::intersect(&resident, &coalesce(mapped));
        let known = credited.get(path.as_str()).map_or(&[][..], Vec::as_slice);
        let ranges = discount_readaround(&ranges, known, size, readaround(meta.dev()));
        if ranges.is_empty() {
            continue;
        }
        summary.files_mapped_only += 1;
        files.push(ObservedFile {
            path,
            size_bytes: size,
            first_access_us: launch_ms * 1000,
            ranges,
        });
    }
    files.sort_by(|a, b| {
        a.first_access_us
            .cmp(&b.first_access_us)
            .then(a.path.cmp(&b.path))
    });
    summary.files_recorded = files.len();
    summary.bytes_brought_in = files
        .iter()
        .flat_map(|f| f.ranges.iter())
        .map(ByteRange::len)
        .sum();
    Ok(Recording {
        observation: LaunchObservation {
            files,
            anon_launch_bytes: samples.peak_anon_kb * 1024,
            footprint_after_launch_bytes: samples.last_footprint_kb * 1024,
            launch_ms,
            at_unix_ms,
        },
        summary,
    })
}

/// Records a launch the caller did not start (the daemon's on-the-fly
/// learning): the same fanotify watcher and residency diff as
/// [`record_launch`], on the tree of an already running process `root`
/// (the exec'ed app; its descendants join as they open files), never
/// dropping anything from the page cache. The caller decides when the
/// launch window ends (readiness inferred or notified) and calls
/// [`LaunchWatch::sample`] on its own tick for M_sum.
///
/// What it sees differs from `appflow record --cold` in two ways, both
/// documented in docs/daemon.md: opens the app made between its exec and
/// the watch's start are missed (the watch starts when the exec event is
/// handled, typically within a millisecond); and a range the daemon's
/// preloader brought in before the app's first open of the file is not
/// *brought in by the app*. Ranges of the app's current profile in a file
/// the app opened again, resident at the end of the window, are therefore
/// counted as seen; a file the app stops opening ages out of the profile by
/// the majority rule.
pub struct LaunchWatch {
    watcher: fanotify::Watcher,
    proc_root: PathBuf,
    root: u32,
    start: Instant,
    at_unix_ms: u64,
    samples: Samples,
    full_scans: FullScans,
    /// Devices whose readahead was raised during the window, by
    /// `read_ahead_kb` file: their own window and the largest raised one,
    /// bytes ([`LaunchWatch::note_readahead`]).
    raised: BTreeMap<PathBuf, (u64, u64)>,
    sys_root: PathBuf,
}

impl LaunchWatch {
    /// Starts watching `root` and its descendants (the launch began at
    /// `start`). Needs root (fanotify permission events).
    pub fn start(proc_root: &Path, root: u32, start: Instant) -> Result<Self, RecordError> {
        let watcher = fanotify::Watcher::start(proc_root, fanotify::Tree::Of(root), false, false)
            .map_err(RecordError::Fanotify)?;
        let at_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
            .saturating_sub(start.elapsed().as_millis() as u64);
        let w = Self {
            watcher,
            proc_root: proc_root.to_path_buf(),
            root,
            start,
            at_unix_ms,
            samples: Samples {
                root,
                root_in_tree: true,
                ..Default::default()
            },
            full_scans: FullScans::new(Instant::now()),
            raised: BTreeMap::new(),
            // sysfs beside `proc_root` (a fixture tree's `proc` → `sys`).
            sys_root: proc_root
                .parent()
                .map_or_else(|| PathBuf::from("/sys"), |p| p.join("sys")),
        };
        Ok(w)
    }

    /// Notes that the device whose readahead is `read_ahead_kb` reads
    /// ahead `now_bytes` during this launch against its own `own_bytes`:
    /// what the app's faults and reads bring in from it carries the larger
    /// window's read-around, which [`Self::finish`] takes off again.
    pub fn note_readahead(&mut self, read_ahead_kb: &Path, own_bytes: u64, now_bytes: u64) {
        let e = self
            .raised
            .entry(read_ahead_kb.to_path_buf())
            .or_insert((own_bytes, now_bytes));
        e.1 = e.1.max(now_bytes);
    }

    /// The watched process.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// Adds processes the caller knows are in the tree (children forked by
    /// it), so their opens count without a walk of their parent chain.
    pub fn add_pids(&self, pids: &[u32]) {
        if let Ok(mut t) = self.watcher.tree.lock() {
            t.extend(pids.iter().copied());
        }
    }

    /// One memory sample of the tree (its /proc/PID/status counters; its
    /// mappings at doubling intervals). `pids`: the tree's processes as the
    /// caller knows them (the daemon's detector follows forks and execs),
    /// so /proc is not scanned for descendants.
    pub fn sample(&mut self, pids: &[u32]) {
        self.add_pids(pids);
        let known = self.watcher.tree_now();
        let full = self.full_scans.due(Instant::now());
        self.samples.take(&self.proc_root, &known, full);
    }

    /// Ends the window after a launch of `launch_ms` and returns what it
    /// showed; `profile` is the app's profile before this launch (see the
    /// type's documentation).
    pub fn finish(
        mut self,
        launch_ms: u64,
        profile: Option<&LaunchProfile>,
    ) -> Result<Recording, RecordError> {
        let known = self.watcher.tree_now();
        self.samples.take(&self.proc_root, &known, true);
        let seen = self.watcher.finish()?;
        let mut pids = self.samples.pids.clone();
        pids.extend(&self.samples.exited);
        pids.extend(&seen.tree_pids);
        let summary = RecordSummary {
            processes: pids.len(),
            ..Default::default()
        };
        // A launch learned with no profile yet is still a learned launch:
        // its files may all be cached already.
        let empty = LaunchProfile::new("");
        // The window a file was read with is its device's: the raised
        // one if the daemon raised it, else the device's own (read once).
        let (sys_root, raised) = (&self.sys_root, &self.raised);
        let by_dev = std::cell::RefCell::new(BTreeMap::new());
        let readaround = |dev: u64| {
            *by_dev.borrow_mut().entry(dev).or_insert_with(|| {
                let Some(f) = crate::actuators::readahead::readahead_file(sys_root, dev) else {
                    return Readaround::default();
                };
                if let Some(&(own, window)) = raised.get(&f) {
                    return Readaround { window, own };
                }
                let own = crate::actuators::readahead::read_window_bytes(&f).unwrap_or(0);
                Readaround { window: own, own }
            })
        };
        observe(
            seen,
            self.samples,
            self.start,
            launch_ms,
            self.at_unix_ms,
            summary,
            Some(Learned {
                profile: profile.unwrap_or(&empty),
                readaround: &readaround,
            }),
        )
    }

    /// Stops watching and discards what was seen.
    pub fn abandon(self) {
        let _ = self.watcher.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_scans_start_at_once_then_back_off_to_a_second() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f = FullScans::new(t0);
        let due_at: Vec<u64> = (0..=3000u64)
            .step_by(10)
            .filter(|&t| f.due(t0 + ms(t)))
            .collect();
        assert_eq!(due_at, [0, 50, 150, 350, 750, 1550, 2550]);
    }
}
