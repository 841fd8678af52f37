//! Launch profiles: what an app reads and allocates when it launches.
//!
//! A profile is recorded on real launches (the daemon's recorder, or the
//! simulator's app model) and merged over several launches: a byte range
//! counts if it was seen in most of the recent launches (docs/recording.md). Each
//! segment keeps a bitmask of the last [`HISTORY_LAUNCHES`] launches in which
//! it was seen, so the merge is exact and order-independent of wall time.
//!
//! Profiles are versioned; [`LaunchProfile::from_json`] refuses foreign and
//! future files with an error that says which. Storage (atomic writes) is the
//! caller's business: this module does no I/O.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The `format` tag every profile file carries.
pub const PROFILE_FORMAT: &str = "appflow-profile";
/// The profile schema version this build reads and writes.
pub const PROFILE_VERSION: u32 = 1;
/// How many recent launches the majority rule looks at.
pub const HISTORY_LAUNCHES: u32 = 8;
/// How many launch timestamps are kept for launch likelihood.
pub const HISTORY_TIMESTAMPS: usize = 64;
/// A recorded launch that read within this share of its profile's active
/// bytes, per mille (bytes it read outside them plus active bytes it did
/// not read), leaves the profile *settled*. Measured on the ML app
/// (testbed flash device, 4-6 learned launches of the unchanged app):
/// each launch differed from its profile by 0-1.8 %; an update that
/// replaces a library or a model moves far more. Recording a launch costs
/// that launch more than streaming a 5 % stale profile does: the fanotify
/// watch made the ML app 1.6 s slower, 8.7 s against 7.1 s
/// (docs/daemon.md, "Learning stops once the profile settles").
pub const SETTLED_CHANGE_PERMILLE: u64 = 50;

/// A half-open byte range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl ByteRange {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
    /// True when the range holds no byte.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// A merged segment of a file with the launches it was seen in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Byte range.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Bit k set: seen in the k-th most recent launch (bit 0 = latest).
    pub seen_mask: u32,
}

/// One file an app touched during its launch window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileProfile {
    /// Absolute path.
    pub path: String,
    /// File size in bytes when last seen.
    pub size_bytes: u64,
    /// Microseconds from launch start to the first access (latest launch it was seen in).
    pub first_access_us: u64,
    /// Touched segments, sorted, non-overlapping.
    pub segments: Vec<Segment>,
}

/// What one launch showed (input to [`LaunchProfile::merge_launch`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchObservation {
    /// Files touched, with their ranges (any order, may overlap).
    pub files: Vec<ObservedFile>,
    /// Anonymous memory allocated during the launch window, bytes (M_sum).
    pub anon_launch_bytes: u64,
    /// Footprint (resident + swapped) right after launch, bytes: the relaunch baseline.
    pub footprint_after_launch_bytes: u64,
    /// Launch latency observed, milliseconds.
    pub launch_ms: u64,
    /// Wall-clock time of the launch, Unix milliseconds (given by the caller).
    pub at_unix_ms: u64,
}

/// One file as seen in one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedFile {
    /// Absolute path.
    pub path: String,
    /// File size in bytes.
    pub size_bytes: u64,
    /// Microseconds from launch start to first access.
    pub first_access_us: u64,
    /// Byte ranges brought into the page cache.
    pub ranges: Vec<ByteRange>,
}

/// An app's merged launch profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchProfile {
    /// Always [`PROFILE_FORMAT`].
    pub format: String,
    /// Schema version ([`PROFILE_VERSION`]).
    pub version: u32,
    /// App name.
    pub app: String,
    /// Launches merged into this profile.
    pub launches: u32,
    /// Recent launch times, Unix ms, oldest first (at most [`HISTORY_TIMESTAMPS`]).
    pub launch_times_unix_ms: Vec<u64>,
    /// Anonymous allocation during launch (M_sum), bytes, from the latest launch.
    pub anon_launch_bytes: u64,
    /// Footprint right after launch (the relaunch baseline M_relaunch), bytes.
    pub relaunch_footprint_bytes: u64,
    /// Latest observed launch latency, ms.
    pub last_launch_ms: u64,
    /// Files, in first-access order.
    pub files: Vec<FileProfile>,
    /// The latest recorded launch read what the profile held before it,
    /// within [`SETTLED_CHANGE_PERMILLE`] of its bytes: launches need not be
    /// recorded every time ([`Self::records_next_launch`]).
    #[serde(default)]
    pub settled: bool,
    /// Launches since the latest recording that were not recorded.
    #[serde(default)]
    pub unrecorded_launches: u32,
}

/// A file as the policies see it: only segments that pass the majority rule.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveFile<'a> {
    /// Path.
    pub path: &'a str,
    /// File size.
    pub size_bytes: u64,
    /// First access time since launch start, µs.
    pub first_access_us: u64,
    /// Ranges that count (seen in most recent launches), sorted.
    pub ranges: Vec<ByteRange>,
}

impl ActiveFile<'_> {
    /// Bytes in the active ranges.
    pub fn touched_bytes(&self) -> u64 {
        self.ranges.iter().map(ByteRange::len).sum()
    }
}

/// Why a profile could not be read.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// Not JSON, or not the profile shape.
    #[error("not a profile: {0}")]
    Malformed(String),
    /// JSON of another format.
    #[error("foreign file: format is {found:?}, expected {PROFILE_FORMAT:?}")]
    Foreign {
        /// The format tag found.
        found: String,
    },
    /// A newer schema than this build knows.
    #[error(
        "profile version {found} is not supported (this build reads version {PROFILE_VERSION})"
    )]
    Version {
        /// The version found, as written in the file (`missing` when absent).
        found: String,
    },
    /// The content breaks an invariant.
    #[error("invalid profile for app {app:?}: {what}")]
    Invalid {
        /// App name.
        app: String,
        /// What is wrong.
        what: String,
    },
}

impl LaunchProfile {
    /// An empty profile for `app`.
    pub fn new(app: &str) -> Self {
        Self {
            format: PROFILE_FORMAT.to_string(),
            version: PROFILE_VERSION,
            app: app.to_string(),
            launches: 0,
            launch_times_unix_ms: Vec::new(),
            anon_launch_bytes: 0,
            relaunch_footprint_bytes: 0,
            last_launch_ms: 0,
            files: Vec::new(),
            settled: false,
            unrecorded_launches: 0,
        }
    }

    /// Whether the app's next launch should be recorded into this profile:
    /// every launch until the profile settles, then one launch in
    /// `relearn_every` (0 or 1: every launch). A recorded launch that strays
    /// from the profile unsettles it, so an updated app is learned launch by
    /// launch again.
    pub fn records_next_launch(&self, relearn_every: u32) -> bool {
        !self.settled || self.unrecorded_launches.saturating_add(1) >= relearn_every
    }

    /// The active ranges by path (page-aligned, coalesced).
    fn active_ranges(&self) -> std::collections::BTreeMap<String, Vec<ByteRange>> {
        ranges_by_path(self.active_files().into_iter().map(|f| (f.path, f.ranges)))
    }

    /// Parses and validates a profile. Foreign or future files are errors.
    pub fn from_json(text: &str) -> Result<Self, ProfileError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ProfileError::Malformed(e.to_string()))?;
        let format = v.get("format").and_then(|f| f.as_str()).unwrap_or("");
        if format != PROFILE_FORMAT {
            return Err(ProfileError::Foreign {
                found: format.to_string(),
            });
        }
        match v.get("version") {
            Some(x) if x.as_u64() == Some(u64::from(PROFILE_VERSION)) => {}
            Some(x) => {
                return Err(ProfileError::Version {
                    found: x.to_string(),
                })
            }
            None => {
                return Err(ProfileError::Version {
                    found: "missing".into(),
                })
            }
        }
        let p: LaunchProfile =
            serde_json::from_value(v).map_err(|e| ProfileError::Malformed(e.to_string()))?;
        p.validate()?;
        Ok(p)
    }

    /// Serialises the profile (pretty JSON, stable field order).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("profile serialises")
    }

    /// Checks the invariants the policies rely on.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let bad = |what: String| ProfileError::Invalid {
            app: self.app.clone(),
            what,
        };
        if self.app.trim().is_empty() {
            return Err(bad("empty app name".into()));
        }
        for f in &self.files {
            if f.path.is_empty() {
                return Err(bad("a file has an empty path".into()));
            }
            let mut prev_end = 0;
            for (i, s) in f.segments.iter().enumerate() {
                if s.end <= s.start {
                    return Err(bad(format!("{}: segment {i} is empty or reversed", f.path)));
                }
                if i > 0 && s.start < prev_end {
                    return Err(bad(format!(
                        "{}: segment {i} overlaps the previous",
                        f.path
                    )));
                }
                prev_end = s.end;
            }
        }
        Ok(())
    }

    /// How many of the recent launches the majority rule counts over.
    pub fn window(&self) -> u32 {
        self.launches.clamp(1, HISTORY_LAUNCHES)
    }

    /// Files with only the segments seen in most recent launches (more
    /// than half of [`Self::window`]), in first-access order. Ranges are
    /// widened to whole pages ([`crate::PAGE_BYTES`]): the page cache holds
    /// whole pages, so that is what preloading them costs in memory; but
    /// never past the end of the file (a file's last page holds only the
    /// bytes up to its size, and a read stops there), so a file never shows
    /// more bytes touched than it holds.
    pub fn active_files(&self) -> Vec<ActiveFile<'_>> {
        let window = self.window();
        let mut out: Vec<ActiveFile<'_>> = self
            .files
            .iter()
            .filter_map(|f| {
                let ranges: Vec<ByteRange> = f
                    .segments
                    .iter()
                    .filter(|s| 2 * s.seen_mask.count_ones() > window)
                    .map(|s| {
                        page_span(
                            ByteRange {
                                start: s.start,
                                end: s.end,
                            },
                            f.size_bytes,
                        )
                    })
                    .collect();
                let ranges = coalesce(ranges);
                (!ranges.is_empty()).then_some(ActiveFile {
                    path: &f.path,
                    size_bytes: f.size_bytes,
                    first_access_us: f.first_access_us,
                    ranges,
                })
            })
            .collect();
        out.sort_by(|a, b| {
            a.first_access_us
                .cmp(&b.first_access_us)
                .then(a.path.cmp(b.path))
        });
        out
    }

    /// Total bytes the launch reads from files (M_i^file), over active ranges.
    pub fn file_bytes(&self) -> u64 {
        self.active_files()
            .iter()
            .map(ActiveFile::touched_bytes)
            .sum()
    }

    /// Merges one launch into the profile.
    pub fn merge_launch(&mut self, obs: &LaunchObservation) {
        let known = self.active_ranges();
        let seen = ranges_by_path(obs.files.iter().map(|f| {
            let ranges = f.ranges.iter().map(|&r| page_span(r, f.size_bytes));
            (f.path.as_str(), ranges.collect())
        }));
        let changed = changed_bytes(&known, &seen);
        let total: u64 = known.values().flatten().map(ByteRange::len).sum();
        self.settled = total > 0
            && changed.saturating_mul(1000) <= total.saturating_mul(SETTLED_CHANGE_PERMILLE);
        self.unrecorded_launches = 0;
        self.merge_files(obs);
    }

    fn merge_files(&mut self, obs: &LaunchObservation) {
        let keep_mask: u32 = if HISTORY_LAUNCHES >= 32 {
            u32::MAX
        } else {
            (1u32 << HISTORY_LAUNCHES) - 1
        };
        let mut by_path: std::collections::BTreeMap<&str, (&ObservedFile, Vec<ByteRange>)> =
            std::collections::BTreeMap::new();
        for f in &obs.files {
            let e = by_path.entry(f.path.as_str()).or_insert((f, Vec::new()));
            e.1.extend(f.ranges.iter().copied().filter(|r| !r.is_empty()));
            if f.first_access_us < e.0.first_access_us {
                e.0 = f;
            }
        }
        // Age every existing segment by one launch.
        for f in &mut self.files {
            for s in &mut f.segments {
                s.seen_mask = (s.seen_mask << 1) & keep_mask;
            }
        }
        // Position of each known path (the first, as a search from the front
        // would find): one lookup per observed file, not a scan of the list.
        let mut index: std::collections::HashMap<String, usize> =
            std::collections::HashMap::with_capacity(self.files.len());
        for (i, f) in self.files.iter().enumerate() {
            index.entry(f.path.clone()).or_insert(i);
        }
        for (path, (of, ranges)) in by_path {
            let ranges = coalesce(ranges);
            match index.get(path).map(|&i| &mut self.files[i]) {
                Some(f) => {
                    f.size_bytes = of.size_bytes;
                    f.first_access_us = of.first_access_us;
                    f.segments = overlay(&f.segments, &ranges);
                }
                None => self.files.push(FileProfile {
                    path: path.to_string(),
                    size_bytes: of.size_bytes,
                    first_access_us: of.first_access_us,
                    segments: ranges
                        .iter()
                        .map(|r| Segment {
                            start: r.start,
                            end: r.end,
                            seen_mask: 1,
                        })
                        .collect(),
                }),
            }
        }
        for f in &mut self.files {
            f.segments.retain(|s| s.seen_mask != 0);
        }
        self.files.retain(|f| !f.segments.is_empty());
        self.files.sort_by(|a, b| {
            a.first_access_us
                .cmp(&b.first_access_us)
                .then(a.path.cmp(&b.path))
        });
        self.launches = self.launches.saturating_add(1);
        self.launch_times_unix_ms.push(obs.at_unix_ms);
        if self.launch_times_unix_ms.len() > HISTORY_TIMESTAMPS {
            let drop = self.launch_times_unix_ms.len() - HISTORY_TIMESTAMPS;
            self.launch_times_unix_ms.drain(..drop);
        }
        // A launch that showed no memory (every process gone before the
        // first sample) or no time keeps what earlier launches showed: a
        // baseline is never 0 once one was seen.
        if obs.anon_launch_bytes > 0 {
            self.anon_launch_bytes = obs.anon_launch_bytes;
        }
        if obs.footprint_after_launch_bytes > 0 {
            self.relaunch_footprint_bytes = obs.footprint_after_launch_bytes;
        }
        if obs.launch_ms > 0 {
            self.last_launch_ms = obs.launch_ms;
        }
    }

    /// Latest launch time, Unix ms.
    pub fn last_used_unix_ms(&self) -> Option<u64> {
        self.launch_times_unix_ms.last().copied()
    }

    /// Launches within `window_ms` before `now_unix_ms` (for launch-likelihood weights).
    pub fn launches_within(&self, now_unix_ms: u64, window_ms: u64) -> usize {
        let from = now_unix_ms.saturating_sub(window_ms);
        self.launch_times_unix_ms
            .iter()
            .filter(|&&t| t >= from && t <= now_unix_ms)
            .count()
    }
}

/// A synthetic profile for tests and examples: `small` files of 16 KiB read
/// whole, then `large` files of 64 MiB of which the first 8 MiB is read,
/// with the given relaunch footprint.
pub fn synthetic(name: &str, small: usize, large: usize, relaunch_bytes: u64) -> LaunchProfile {
    let (kib, mib) = (crate::KIB, crate::MIB);
    let file = |path: String, size_bytes: u64, first_access_us: u64, end: u64| ObservedFile {
        path,
        size_bytes,
        first_access_us,
        ranges: vec![ByteRange { start: 0, end }],
    };
    let files = (0..small)
        .map(|i| file(format!("/{name}/s{i}"), 16 * kib, i as u64, 16 * kib))
        .chain(
            (0..large).map(|i| file(format!("/{name}/L{i}"), 64 * mib, 1000 + i as u64, 8 * mib)),
        )
        .collect();
    let mut p = LaunchProfile::new(name);
    p.merge_launch(&LaunchObservation {
        files,
        footprint_after_launch_bytes: relaunch_bytes,
        ..Default::default()
    });
    p
}

/// Widens a range to whole pages.
pub fn page_align(r: ByteRange) -> ByteRange {
    let p = crate::PAGE_BYTES;
    ByteRange {
        start: r.start / p * p,
        end: r.end.div_ceil(p) * p,
    }
}

/// `r` widened to whole pages, but never past the end of a file of `size`
/// bytes (its last page holds only the bytes up to its size).
fn page_span(r: ByteRange, size: u64) -> ByteRange {
    let r = page_align(r);
    ByteRange {
        start: r.start,
        end: r.end.min(size.max(r.start)),
    }
}

/// Ranges gathered by path, each path's coalesced (a path may come more
/// than once).
fn ranges_by_path<'a>(
    files: impl Iterator<Item = (&'a str, Vec<ByteRange>)>,
) -> std::collections::BTreeMap<String, Vec<ByteRange>> {
    let mut out: std::collections::BTreeMap<String, Vec<ByteRange>> = Default::default();
    for (path, ranges) in files {
        out.entry(path.to_string()).or_default().extend(ranges);
    }
    for v in out.values_mut() {
        *v = coalesce(std::mem::take(v));
    }
    out
}

/// Bytes in one of two sets of active ranges and not the other (by path;
/// each file's ranges sorted and disjoint).
fn changed_bytes(
    a: &std::collections::BTreeMap<String, Vec<ByteRange>>,
    b: &std::collections::BTreeMap<String, Vec<ByteRange>>,
) -> u64 {
    let len = |v: &[ByteRange]| v.iter().map(ByteRange::len).sum::<u64>();
    let mut changed = 0;
    for (path, ra) in a {
        match b.get(path) {
            Some(rb) => changed += len(ra) + len(rb) - 2 * overlap_bytes(ra, rb),
            None => changed += len(ra),
        }
    }
    for (path, rb) in b {
        if !a.contains_key(path) {
            changed += len(rb);
        }
    }
    changed
}

/// Bytes two sorted, disjoint range lists share.
fn overlap_bytes(a: &[ByteRange], b: &[ByteRange]) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].start.max(b[j].start);
        let hi = a[i].end.min(b[j].end);
        n += hi.saturating_sub(lo);
        if a[i].end <= b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
}

/// Sorts and merges overlapping or touching ranges.
pub fn coalesce(mut ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    ranges.retain(|r| !r.is_empty());
    ranges.sort();
    let mut out: Vec<ByteRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The readahead window a file was read with in a learned launch, and the
/// device's own (what `appflow record` reads with), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Readaround {
    /// The window in force during the launch (raised or the device's own).
    pub window: u64,
    /// The device's own window.
    pub own: u64,
}

/// What a learned launch read, less the kernel's read-around that is not
/// evidence of the app's reach: the part of `found` (sorted, disjoint)
/// outside `known` (the app's profile ranges of the file, sorted,
/// disjoint) is shrunk at its free ends (those touching neither a known
/// range nor the file's bounds, `size_bytes`); known ranges in `found`
/// stay as they are.
///
/// A page fault on a mapped file reads a window centred on the faulting
/// page, and a read runs its readahead a window past what it asked for;
/// pages already cached are not read again. In a learned launch the
/// daemon has streamed the profile's ranges, so the app's first miss past
/// one lands at its edge, and the window centred there brings in half a
/// window beyond the page the app reached: that half is not the app's.
/// Counted as seen, it is streamed next time, the app's next miss lands
/// half a window further, and the profile grows launch after launch. So a
/// run that starts or ends at a known range loses half a window at its
/// free end. (On the deploy harness the ML app's learned profile reached
/// 1.15× a 3-launch recording in 10 launches, all of it in shared
/// libraries read with the disk's 8 MiB window; with this rule 1.13×. The
/// rest was the preload worker's own reads reaching pages the app's
/// readahead had marked, fixed in the worker: then 1.05×, flat from the
/// first launch; docs/results-log.md.) A run away from every known range is what a
/// cold launch would show too (`appflow record` counts it whole), less
/// what the daemon's raised launch readahead added to it (the AppFlow
/// paper §4.1 reads large files in large blocks during launch): half the
/// difference between the window in force and the device's own, at each
/// free end. A run shorter than what is taken keeps one page: the page
/// the app reached is at its pinned end, or about its middle.
pub fn discount_readaround(
    found: &[ByteRange],
    known: &[ByteRange],
    size_bytes: u64,
    ra: Readaround,
) -> Vec<ByteRange> {
    let page = crate::PAGE_BYTES;
    let half = |b: u64| b / 2 / page * page;
    let (edge, raised) = (half(ra.window), half(ra.window.saturating_sub(ra.own)));
    if edge == 0 {
        return found.to_vec();
    }
    let touches_known = |at: u64| known.iter().any(|k| k.start <= at && at <= k.end);
    let mut out = Vec::with_capacity(found.len());
    let mut piece = |start: u64, end: u64| {
        let pinned_start = touches_known(start);
        let pinned_end = touches_known(end);
        let extra = if pinned_start || pinned_end {
            edge
        } else {
            raised
        };
        out.push(shrink(
            start,
            end,
            extra,
            pinned_start || start == 0,
            pinned_end || end >= size_bytes,
        ));
    };
    let mut kept = Vec::new();
    for f in found {
        // The pieces of `f` outside the known ranges, and those inside.
        let mut at = f.start;
        for k in known.iter().filter(|k| k.end > f.start && k.start < f.end) {
            if k.start > at {
                piece(at, k.start);
            }
            kept.push(ByteRange {
                start: k.start.max(f.start),
                end: k.end.min(f.end),
            });
            at = at.max(k.end);
        }
        if at < f.end {
            piece(at, f.end);
        }
    }
    out.extend(kept);
    coalesce(out)
}

/// One run of [`discount_readaround`]: `[start, end)` less `extra` at each
/// end that is not fixed.
fn shrink(start: u64, end: u64, extra: u64, fixed_start: bool, fixed_end: bool) -> ByteRange {
    let page = crate::PAGE_BYTES;
    let s = if fixed_start { start } else { start + extra };
    let e = if fixed_end {
        end
    } else {
        end.saturating_sub(extra)
    };
    if s < e {
        return ByteRange { start: s, end: e };
    }
    let mid = match (fixed_start, fixed_end) {
        (true, false) => start,
        (false, true) => end.saturating_sub(1) / page * page,
        _ => (start + (end - start) / 2) / page * page,
    }
    .max(start);
    ByteRange {
        start: mid,
        end: (mid + page).min(end),
    }
}

/// Lays the newly seen `ranges` (sorted, disjoint) over aged `segments`:
/// bit 0 is set wherever a range covers; segments are split at boundaries
/// and equal neighbours re-joined.
fn overlay(segments: &[Segment], ranges: &[ByteRange]) -> Vec<Segment> {
    let mut cuts: Vec<u64> = Vec::with_capacity(2 * (segments.len() + ranges.len()));
    for s in segments {
        cuts.push(s.start);
        cuts.push(s.end);
    }
    for r in ranges {
        cuts.push(r.start);
        cuts.push(r.end);
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<Segment> = Vec::new();
    let (mut si, mut ri) = (0usize, 0usize);
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        while si < segments.len() && segments[si].end <= a {
            si += 1;
        }
        while ri < ranges.len() && ranges[ri].end <= a {
            ri += 1;
        }
        let mut mask = 0u32;
        if si < segments.len() && segments[si].start <= a {
            mask |= segments[si].seen_mask;
        }
        if ri < ranges.len() && ranges[ri].start <= a {
            mask |= 1;
        }
        if mask == 0 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.end == a && last.seen_mask == mask => last.end = b,
            _ => out.push(Segment {
                start: a,
                end: b,
                seen_mask: mask,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type FileSpec<'a> = (&'a str, u64, &'a [(u64, u64)]);

    fn obs(files: &[FileSpec<'_>], t: u64) -> LaunchObservation {
        LaunchObservation {
            files: files
                .iter()
                .enumerate()
                .map(|(i, (p, size, rs))| ObservedFile {
                    path: p.to_string(),
                    size_bytes: *size,
                    first_access_us: i as u64 * 10,
                    ranges: rs
                        .iter()
                        .map(|&(start, end)| ByteRange { start, end })
                        .collect(),
                })
                .collect(),
            anon_launch_bytes: 100,
            footprint_after_launch_bytes: 200,
            launch_ms: 900,
            at_unix_ms: t,
        }
    }

    fn runs(v: &[(u64, u64)]) -> Vec<ByteRange> {
        v.iter()
            .map(|&(start, end)| ByteRange { start, end })
            .collect()
    }

    #[test]
    fn a_profile_settles_when_a_recorded_launch_reads_what_it_holds() {
        const MIB: u64 = 1 << 20;
        let lib: FileSpec<'_> = ("/a/lib.so", 100 * MIB, &[(0, 100 * MIB)]);
        let mut p = LaunchProfile::new("a");
        assert!(p.records_next_launch(8), "no recording yet: record");
        p.merge_launch(&obs(&[lib], 1));
        assert!(
            !p.settled,
            "nothing to agree with before the first recording"
        );
        p.merge_launch(&obs(&[lib], 2));
        assert!(p.settled, "the same launch again");
        // Settled: one launch in 8 is recorded.
        for skipped in 0..7 {
            p.unrecorded_launches = skipped;
            assert!(!p.records_next_launch(8), "{skipped} skipped");
        }
        p.unrecorded_launches = 7;
        assert!(p.records_next_launch(8));
        assert!(p.records_next_launch(1) && p.records_next_launch(0));
        // A launch 5 % of the bytes away keeps it settled; one page more
        // does not, though the majority rule keeps the active ranges.
        let mut q = p.clone();
        q.merge_launch(&obs(&[lib, ("/a/new.bin", 10 * MIB, &[(0, 5 * MIB)])], 3));
        assert!(q.settled, "5 MiB more than 100 MiB");
        assert_eq!(q.unrecorded_launches, 0, "a recording resets the count");
        let mut r = p.clone();
        let updated = ("/a/lib.so", 100 * MIB, &[(0, 95 * MIB - 4096)][..]);
        r.merge_launch(&obs(&[updated], 3));
        assert!(
            !r.settled,
            "just over 5 % not read: learned launch by launch again"
        );
        assert_eq!(r.file_bytes(), 100 * MIB, "the profile itself is unchanged");
        assert!(r.records_next_launch(8));
    }

    #[test]
    fn changed_bytes_is_the_symmetric_difference() {
        let m = |v: &[(&str, &[(u64, u64)])]| {
            v.iter()
                .map(|(p, r)| (p.to_string(), runs(r)))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let a = m(&[("x", &[(0, 10), (20, 30)]), ("y", &[(0, 5)])]);
        let b = m(&[("x", &[(5, 25)]), ("z", &[(0, 7)])]);
        // x: a 20, b 20, shared 10 -> 20; y gone 5; z new 7.
        assert_eq!(changed_bytes(&a, &b), 32);
        assert_eq!(changed_bytes(&b, &a), 32);
        assert_eq!(changed_bytes(&a, &a), 0);
    }

    #[test]
    fn profiles_written_before_settling_read_as_unsettled() {
        let mut p = LaunchProfile::new("a");
        p.merge_launch(&obs(&[("/a/f", 8192, &[(0, 8192)])], 1));
        let mut v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("settled");
        o.remove("unrecorded_launches");
        let q = LaunchProfile::from_json(&v.to_string()).unwrap();
        assert!(!q.settled && q.unrecorded_launches == 0);
    }

    #[test]
    fn raised_read_around_shrinks_to_the_devices_own_window() {
        const K: u64 = 1024;
        // A fault at 10 MiB read 1 MiB around it (the raised window); the
        // device's own 128 KiB window would have read 128 KiB around it.
        let mib = 1024 * K;
        let found = runs(&[(10 * mib - 512 * K, 10 * mib + 512 * K)]);
        let raised = Readaround {
            window: mib,
            own: 128 * K,
        };
        let out = discount_readaround(&found, &[], 100 * mib, raised);
        assert_eq!(out, runs(&[(10 * mib - 64 * K, 10 * mib + 64 * K)]));
        // Nothing raised: a cold launch would show the run whole.
        let own = Readaround {
            window: 128 * K,
            own: 128 * K,
        };
        assert_eq!(discount_readaround(&found, &[], 100 * mib, own), found);
    }

    #[test]
    fn read_around_past_a_known_range_loses_half_a_window() {
        const P: u64 = crate::PAGE_BYTES;
        let known = runs(&[(100 * P, 200 * P)]);
        // A 64-page window, 16 of them added by a raise.
        let ra = Readaround {
            window: 64 * P,
            own: 32 * P,
        };
        // The known range plus 40 pages read past its end (a miss at page
        // 208: the window's far half is the kernel's), a run at the file's
        // start and one at its end (raised read-around at the free end),
        // and a gap between known ranges filled (nothing taken).
        let found = runs(&[(0, 40 * P), (100 * P, 240 * P), (470 * P, 500 * P)]);
        let out = discount_readaround(&found, &known, 500 * P, ra);
        assert_eq!(
            out,
            runs(&[(0, 24 * P), (100 * P, 208 * P), (486 * P, 500 * P)])
        );
        let two = runs(&[(100 * P, 200 * P), (300 * P, 400 * P)]);
        let gap = runs(&[(100 * P, 400 * P)]);
        assert_eq!(discount_readaround(&gap, &two, 500 * P, ra), gap);
        // A run shorter than what is taken keeps one page: at the known
        // range it starts from, or in its middle.
        let out = discount_readaround(&runs(&[(200 * P, 210 * P)]), &known, 500 * P, ra);
        assert_eq!(out, runs(&[(200 * P, 201 * P)]));
        let out = discount_readaround(&runs(&[(300 * P, 310 * P)]), &known, 500 * P, ra);
        assert_eq!(out, runs(&[(305 * P, 306 * P)]));
    }

    proptest::proptest! {
        #[test]
        fn read_around_discount_keeps_within_what_was_found(
            found in proptest::collection::vec((0u64..512, 1u64..64), 0..12),
            known in proptest::collection::vec((0u64..512, 1u64..64), 0..6),
            window in 0u64..80,
            own in 0u64..80,
        ) {
            const P: u64 = crate::PAGE_BYTES;
            let size = 600 * P;
            let mk = |v: &[(u64, u64)]| {
                coalesce(v.iter().map(|&(s, l)| ByteRange { start: s * P, end: (s + l) * P }).collect())
            };
            let (found, known) = (mk(&found), mk(&known));
            let ra = Readaround { window: window * P, own: own * P };
            let out = discount_readaround(&found, &known, size, ra);
            let bytes = |v: &[ByteRange]| v.iter().map(ByteRange::len).sum::<u64>();
            // Never more than was found, never less than the known part of
            // it, and every run found leaves at least a page.
            proptest::prop_assert_eq!(crate::profile::coalesce(out.clone()), out.clone());
            let inter = |a: &[ByteRange], b: &[ByteRange]| {
                let mut n = 0;
                for x in a {
                    for y in b {
                        n += x.end.min(y.end).saturating_sub(x.start.max(y.start));
                    }
                }
                n
            };
            proptest::prop_assert_eq!(inter(&out, &found), bytes(&out));
            proptest::prop_assert_eq!(inter(&out, &known), inter(&found, &known));
            for f in &found {
                proptest::prop_assert!(inter(&out, std::slice::from_ref(f)) >= P);
            }
        }
    }

    #[test]
    fn majority_rule_over_recent_launches() {
        let mut p = LaunchProfile::new("app");
        const P: u64 = crate::PAGE_BYTES;
        p.merge_launch(&obs(
            &[("/a", 100 * P, &[(0, 50 * P)]), ("/b", 10, &[(0, 10)])],
            1,
        ));
        // /b's 10 bytes are all it holds: its page is not counted past EOF.
        assert_eq!(p.file_bytes(), 50 * P + 10);
        // Second launch sees /a 0..100 but not /b.
        p.merge_launch(&obs(&[("/a", 100 * P, &[(0, 100 * P)])], 2));
        // Window 2: a range must be seen in both. /a 0..50 seen twice, 50..100 once, /b once.
        let act = p.active_files();
        assert_eq!(act.len(), 1);
        assert_eq!(
            act[0].ranges,
            vec![ByteRange {
                start: 0,
                end: 50 * P
            }]
        );
        // Third launch again 0..100: 50..100 now seen 2 of 3 -> counts.
        p.merge_launch(&obs(&[("/a", 100 * P, &[(0, 100 * P)])], 3));
        let all = vec![ByteRange {
            start: 0,
            end: 100 * P,
        }];
        assert_eq!(p.active_files()[0].ranges, all);
        assert_eq!(p.launches, 3);
        assert_eq!(p.launch_times_unix_ms, vec![1, 2, 3]);
    }

    #[test]
    fn a_launch_that_showed_no_memory_keeps_the_baseline() {
        // The deployed daemon learned three apps' baselines as 0 B: a batch
        // app's last sample came after its processes had exited.
        let mut p = LaunchProfile::new("app");
        p.merge_launch(&obs(&[("/a", 10, &[(0, 10)])], 1));
        let mut empty = obs(&[("/a", 10, &[(0, 10)])], 2);
        empty.anon_launch_bytes = 0;
        empty.footprint_after_launch_bytes = 0;
        empty.launch_ms = 0;
        p.merge_launch(&empty);
        assert_eq!(
            (
                p.anon_launch_bytes,
                p.relaunch_footprint_bytes,
                p.last_launch_ms
            ),
            (100, 200, 900)
        );
        assert_eq!(p.launches, 2);
    }

    #[test]
    fn stale_ranges_are_forgotten() {
        let mut p = LaunchProfile::new("app");
        p.merge_launch(&obs(&[("/old", 10, &[(0, 10)])], 0));
        for t in 1..=HISTORY_LAUNCHES as u64 {
            p.merge_launch(&obs(&[("/new", 10, &[(0, 10)])], t));
        }
        assert!(p.files.iter().all(|f| f.path != "/old"));
    }

    #[test]
    fn json_round_trip_and_foreign_files() {
        let mut p = LaunchProfile::new("app");
        p.merge_launch(&obs(&[("/a", 100, &[(0, 50), (40, 60)])], 1));
        assert_eq!(p.files[0].segments.len(), 1);
        let back = LaunchProfile::from_json(&p.to_json()).unwrap();
        assert_eq!(back, p);
        assert!(matches!(
            LaunchProfile::from_json(r#"{"format":"other","version":1}"#),
            Err(ProfileError::Foreign { .. })
        ));
        assert!(matches!(
            LaunchProfile::from_json(r#"{"format":"appflow-profile","version":9}"#),
            Err(ProfileError::Version { found }) if found == "9"
        ));
        // Above u64 and above u32: reported as written, never as "version 0"
        // (or truncated to a supported one).
        for big in ["18446744073709551616", "4294967297"] {
            let text = format!(r#"{{"format":"appflow-profile","version":{big}}}"#);
            let e = LaunchProfile::from_json(&text).unwrap_err().to_string();
            assert!(!e.contains("version 0") && !e.contains("version 1 "), "{e}");
            assert!(e.contains("not supported"), "{e}");
        }
        assert!(matches!(
            LaunchProfile::from_json("{"),
            Err(ProfileError::Malformed(_))
        ));
        let mut bad = p.clone();
        bad.files[0].segments[0].end = 0;
        assert!(matches!(
            LaunchProfile::from_json(&bad.to_json()),
            Err(ProfileError::Invalid { .. })
        ));
    }

    #[test]
    fn active_ranges_are_page_aligned_and_merged() {
        let mut p = LaunchProfile::new("app");
        // Two ranges in the same page, one crossing a page boundary.
        p.merge_launch(&obs(
            &[("/a", 20_000, &[(10, 20), (100, 200), (8000, 8200)])],
            1,
        ));
        // Pages 0 and 1..3 touch, so they merge into one range.
        assert_eq!(
            p.active_files()[0].ranges,
            vec![ByteRange {
                start: 0,
                end: 12288
            }]
        );
        assert_eq!(p.file_bytes(), 12288);
    }

    #[test]
    fn touched_bytes_never_exceed_the_file() {
        // The 33.0 KiB file `apps show` reported as 36.0 KiB touched.
        let mut p = LaunchProfile::new("app");
        p.merge_launch(&obs(
            &[
                ("/etc/ld.so.cache", 33_792, &[(0, 33_792)]),
                ("/x", 5000, &[(4200, 4300)]),
            ],
            1,
        ));
        let act = p.active_files();
        let cache = act.iter().find(|f| f.path == "/etc/ld.so.cache").unwrap();
        assert_eq!(cache.touched_bytes(), 33_792);
        // A range in the last page: from its page start up to EOF.
        let x = act.iter().find(|f| f.path == "/x").unwrap();
        assert_eq!(
            x.ranges,
            vec![ByteRange {
                start: 4096,
                end: 5000
            }]
        );
        for f in &act {
            assert!(f.touched_bytes() <= f.size_bytes, "{}", f.path);
        }
    }

    #[test]
    fn coalesce_merges_touching() {
        let r = |s, e| ByteRange { start: s, end: e };
        assert_eq!(
            coalesce(vec![r(10, 20), r(0, 10), r(30, 30), r(15, 25)]),
            vec![r(0, 25)]
        );
    }

    /// Fuzzing found a device file whose app of 29,895 small files took
    /// 551 s to build (a linear search per merged file); 60,000 files merge
    /// twice in well under a second now.
    #[test]
    fn merging_many_files_is_not_quadratic() {
        let obs = LaunchObservation {
            files: (0..60_000u64)
                .map(|i| ObservedFile {
                    path: format!("/data/app/many/s{i:06}"),
                    size_bytes: 8192,
                    first_access_us: i,
                    ranges: vec![ByteRange {
                        start: 0,
                        end: 8192,
                    }],
                })
                .collect(),
            ..Default::default()
        };
        let t0 = std::time::Instant::now();
        let mut p = LaunchProfile::new("many");
        p.merge_launch(&obs);
        p.merge_launch(&obs);
        assert_eq!(p.files.len(), 60_000);
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            t0.elapsed()
        );
    }
}
