//! ASAP's page-level half on a real kernel (the ASAP paper, "Switch
//! Footprint Estimator" and "Prepaging Manager"): which anonymous pages a
//! foreground window of an app brought back, which of them to prepage at
//! its next switch, and how precise that prepaging was.
//!
//! A window starts at the app's launch or at a switch back to it and ends
//! when it goes to the background (or exits). At its start the tracker
//! reads, for each of the app's processes (identities: pid + start time),
//! the pagemap of its private anonymous mappings (the ones page-out can
//! ask for, [`page_out_ranges`]): which pages are present and which are
//! swapped. At its end it reads them again. The kernel's `MADV_WILLNEED` on
//! swapped anonymous memory reads the pages into the swap cache *without*
//! mapping them (`madvise_willneed`), so of the pages prepaged:
//!
//! * present at the end: the app touched them — **used**;
//! * still swapped at the end: prepaged, not used (ASAP's precision);
//! * every other page present at the end but not at the start was brought
//!   in by the app itself — **demand** (a swap-in or a fresh allocation:
//!   the simulator counts a launch's allocation the same way).
//!
//! The window's footprint (used + demand pages, by process) becomes the
//! app's candidate table: at its next switch the candidates still swapped
//! are prepaged (in address order, at most the plan's bytes, which the core
//! bounds by the room above the killer's trigger level). Pages prepaged but
//! unused leave the table; pages faulted on join it (precision and recall
//! feedback). The amounts per app and the plan are the core's
//! (`appflow_core::prepage`); only pages live here.
//!
//! The same window gives Ariadne's hot set (the Ariadne paper §4.2: the data
//! of the last relaunch): the window's footprint. What else of the app's
//! private anonymous memory is present at the window's end — pages that
//! were resident at its start and that it did not bring back — is the
//! app's *cold* set, which [`SwitchTracker::cold_jobs`] hands to the worker
//! to mark with `process_madvise(MADV_COLD)` once the app is in the
//! background (the kernel then reclaims them before the hot set). A
//! resident page the window used cannot be told from one it did not use
//! (no per-page accessed bit is readable from user space without
//! `CONFIG_IDLE_PAGE_TRACKING`); such a page marked cold that the app
//! touches again before reclaim reaches it gets its accessed bit back and
//! the kernel's reclaim keeps it (a second chance), so the error costs
//! order, not data. After a cold launch (nothing present at its start)
//! the cold set is empty.
//!
//! File pages are not tracked: the page cache is shared between processes,
//! so a file page's return cannot be told to be this app's (a `mincore`
//! delta of every file the app maps would count other apps' reads). The
//! observation's file fields stay zero, so the core never plans file
//! prepaging on a real kernel.

use super::reclaim::page_out_ranges;
use crate::readers::pagemap::{PageState, Pagemap};
use crate::readers::{read_smaps_vmas, read_start_time, ReadError};
use appflow_core::prepage::SwitchObservation;
use appflow_core::scheduler::ProcId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Anonymous pages of one process at a moment, as sorted page addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Present pages.
    pub present: Vec<u64>,
    /// Swapped pages (including those in the swap cache but not mapped).
    pub swapped: Vec<u64>,
}

/// Reads the snapshot of `id`'s private anonymous mappings; `None` when the
/// process is gone or its pid is another process's now (checked before and
/// after the read).
pub fn snapshot(
    proc_root: &Path,
    id: ProcId,
    page_bytes: u64,
) -> Result<Option<Snapshot>, ReadError> {
    if read_start_time(proc_root, id.pid) != Some(id.start_time) {
        return Ok(None);
    }
    let vmas = match read_smaps_vmas(proc_root, id.pid) {
        Ok(v) => v,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut pm = match Pagemap::open(proc_root, id.pid, page_bytes) {
        Ok(p) => p,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut s = Snapshot::default();
    for r in page_out_ranges(&vmas) {
        pm.for_each(r.start, r.len, |a, st| match st {
            PageState::Present => s.present.push(a),
            PageState::Swapped => s.swapped.push(a),
            PageState::Absent => {}
        })?;
    }
    if read_start_time(proc_root, id.pid) != Some(id.start_time) {
        return Ok(None);
    }
    // Mappings come in address order; keep the vectors sorted regardless.
    s.present.sort_unstable();
    s.swapped.sort_unstable();
    Ok(Some(s))
}

/// Elements of sorted `a` also in sorted `b`.
fn intersect(a: &[u64], b: &[u64]) -> Vec<u64> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Elements of sorted `a` not in sorted `b`.
fn minus(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut j = 0;
    let mut out = Vec::new();
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j >= b.len() || b[j] != x {
            out.push(x);
        }
    }
    out
}

/// One process's window, in pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowPages {
    /// Pages prepaged.
    pub prepaged: u64,
    /// Of which present at the end (the app used them).
    pub used: u64,
    /// Pages present at the end, absent or swapped at the start, not
    /// prepaged (the app brought them in itself).
    pub demand: u64,
}

/// The arithmetic of one process's window: from the pages present at its
/// start, the pages prepaged (a subset of those swapped at its start) and
/// the pages present at its end, the counts and the footprint (the pages
/// the window brought in: used + demand, sorted).
pub fn window_pages(
    present_at_start: &[u64],
    prepaged: &[u64],
    present_at_end: &[u64],
) -> (WindowPages, Vec<u64>) {
    let footprint = minus(present_at_end, present_at_start);
    let used = intersect(prepaged, &footprint).len() as u64;
    (
        WindowPages {
            prepaged: prepaged.len() as u64,
            used,
            demand: footprint.len() as u64 - used,
        },
        footprint,
    )
}

/// Sorted page addresses as (address, length) ranges of at most
/// `max_pages` pages each (contiguous pages merged).
pub fn page_ranges(pages: &[u64], page_bytes: u64, max_pages: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in pages {
        match out.last_mut() {
            Some((a, l)) if *a + *l == p && *l < max_pages * page_bytes => *l += page_bytes,
            _ => out.push((p, page_bytes)),
        }
    }
    out
}

/// One process's part of a window.
#[derive(Debug, Clone, Default)]
struct ProcWindow {
    present: Vec<u64>,
    swapped: Vec<u64>,
    /// Pages handed to the prepager, in the order it advises them.
    asked: Vec<u64>,
    /// The prepager's job for them, if any.
    job: Option<u64>,
}

/// A job for the worker's `process_madvise`: one process's ranges, to
/// prepage (`MADV_WILLNEED`) or to mark cold (`MADV_COLD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdviceJob {
    /// Job number (the worker reports its progress under it).
    pub job: u64,
    /// The process.
    pub id: ProcId,
    /// Page-aligned (address, length) ranges, in address order.
    pub ranges: Vec<(u64, u64)>,
}

/// Counters of the tracker, since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TrackerStats {
    /// Windows started.
    pub windows: u64,
    /// Windows observed to their end.
    pub observed: u64,
    /// Process snapshots that failed (unreadable smaps or pagemap).
    pub read_errors: u64,
    /// Prepaging jobs handed out.
    pub jobs: u64,
    /// Bytes handed out to prepage.
    pub asked_bytes: u64,
    /// Cold-marking jobs handed out (Ariadne).
    pub cold_jobs: u64,
    /// Bytes handed out to mark cold.
    pub cold_asked_bytes: u64,
}

/// The per-app windows and candidate tables.
#[derive(Debug)]
pub struct SwitchTracker {
    proc_root: PathBuf,
    page_bytes: u64,
    open: BTreeMap<String, BTreeMap<ProcId, ProcWindow>>,
    candidates: BTreeMap<String, BTreeMap<ProcId, Vec<u64>>>,
    /// Per app, its last window's cold set (present at the end, not
    /// brought back by it), until handed out.
    cold: BTreeMap<String, BTreeMap<ProcId, Vec<u64>>>,
    next_job: u64,
    /// Counters.
    pub stats: TrackerStats,
}

/// Anonymous pages per iovec element of a prepaging call (the ASAP paper,
/// "Optimizing Prepaging Threads": anonymous pages in batches of 16).
pub const BATCH_PAGES: u64 = appflow_core::prepage::ANON_BATCH_PAGES;

/// Pages per iovec element of a cold-marking call: 512 pages (2 MiB, one
/// huge page). `MADV_COLD` only moves pages between LRU lists, so no batch
/// size comes from a paper; the bound keeps one call (of the worker's 64
/// elements) at 128 MiB, so a switch back to the app stops the job soon.
pub const COLD_RANGE_PAGES: u64 = 512;

impl SwitchTracker {
    /// A tracker reading under `proc_root`.
    pub fn new(proc_root: &Path, page_bytes: u64) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            page_bytes: page_bytes.max(1),
            open: BTreeMap::new(),
            candidates: BTreeMap::new(),
            cold: BTreeMap::new(),
            next_job: 1,
            stats: TrackerStats::default(),
        }
    }

    fn read(&mut self, id: ProcId) -> Option<Snapshot> {
        match snapshot(&self.proc_root, id, self.page_bytes) {
            Ok(s) => s,
            Err(e) => {
                self.stats.read_errors += 1;
                tracing::debug!(pid = id.pid, error = %e, "switch window: snapshot failed");
                None
            }
        }
    }

    /// A window of `app` starts in `procs`: snapshots them.
    pub fn start(&mut self, app: &str, procs: &[ProcId]) {
        let mut w = BTreeMap::new();
        for &id in procs {
            if let Some(s) = self.read(id) {
                w.insert(
                    id,
                    ProcWindow {
                        present: s.present,
                        swapped: s.swapped,
                        ..Default::default()
                    },
                );
            }
        }
        self.stats.windows += 1;
        // Back in the foreground: a cold set not yet handed out is stale.
        self.cold.remove(app);
        self.open.insert(app.to_string(), w);
    }

    /// The open window's candidates still swapped, at most `max_bytes` in
    /// all (processes in identity order, pages in address order), as jobs
    /// for the prepager; the pages are noted as asked.
    pub fn prepage(&mut self, app: &str, max_bytes: u64) -> Vec<AdviceJob> {
        let Some(w) = self.open.get_mut(app) else {
            return Vec::new();
        };
        let Some(cands) = self.candidates.get(app) else {
            return Vec::new();
        };
        let mut left = max_bytes / self.page_bytes;
        let mut jobs = Vec::new();
        for (id, pw) in w.iter_mut() {
            if left == 0 {
                break;
            }
            let Some(c) = cands.get(id) else { continue };
            let mut pages = intersect(c, &pw.swapped);
            pages.truncate(left as usize);
            if pages.is_empty() {
                continue;
            }
            left -= pages.len() as u64;
            let job = self.next_job;
            self.next_job += 1;
            self.stats.jobs += 1;
            self.stats.asked_bytes += pages.len() as u64 * self.page_bytes;
            jobs.push(AdviceJob {
                job,
                id: *id,
                ranges: page_ranges(&pages, self.page_bytes, BATCH_PAGES),
            });
            pw.asked = pages;
            pw.job = Some(job);
        }
        jobs
    }

    /// The jobs of `app`'s open window.
    pub fn open_jobs(&self, app: &str) -> Vec<u64> {
        self.open
            .get(app)
            .map(|w| w.values().filter_map(|p| p.job).collect())
            .unwrap_or_default()
    }

    /// The window of `app` ends with its processes `procs`: reads them
    /// again and returns what the window brought back, in bytes. `done`
    /// gives, per job, the bytes the prepager advised (in the order it was
    /// asked; pages past that were never prepaged). The footprint becomes
    /// the app's candidate table. None without an open window.
    pub fn finish(
        &mut self,
        app: &str,
        procs: &[ProcId],
        done: &dyn Fn(u64) -> u64,
    ) -> Option<SwitchObservation> {
        let mut w = self.open.remove(app)?;
        // Processes that started during the window had nothing at its start.
        for &id in procs {
            w.entry(id).or_default();
        }
        let mut total = WindowPages::default();
        let mut table = BTreeMap::new();
        let mut cold = BTreeMap::new();
        for (id, pw) in w {
            let Some(end) = self.read(id) else { continue };
            let advised = pw.job.map_or(0, |j| done(j) / self.page_bytes) as usize;
            let prepaged = {
                let mut p = pw.asked[..advised.min(pw.asked.len())].to_vec();
                p.sort_unstable();
                p
            };
            let (n, footprint) = window_pages(&pw.present, &prepaged, &end.present);
            total.prepaged += n.prepaged;
            total.used += n.used;
            total.demand += n.demand;
            let c = minus(&end.present, &footprint);
            if !c.is_empty() {
                cold.insert(id, c);
            }
            if !footprint.is_empty() {
                table.insert(id, footprint);
            }
        }
        self.candidates.insert(app.to_string(), table);
        self.cold.insert(app.to_string(), cold);
        self.stats.observed += 1;
        let b = |p: u64| p * self.page_bytes;
        Some(SwitchObservation {
            prepaged_anon: b(total.prepaged),
            used_anon: b(total.used),
            demand_anon: b(total.demand),
            ..Default::default()
        })
    }

    /// The cold set of `app`'s last observed window (Ariadne's user-space
    /// half), once: per process, its pages present at the window's end that
    /// the window did not bring back, as ranges of at most
    /// [`COLD_RANGE_PAGES`]. Empty without an observed window, for an app
    /// whose window is open (it is in the foreground), and the second
    /// time.
    pub fn cold_jobs(&mut self, app: &str) -> Vec<AdviceJob> {
        if self.open.contains_key(app) {
            return Vec::new();
        }
        let Some(sets) = self.cold.remove(app) else {
            return Vec::new();
        };
        let mut jobs = Vec::new();
        for (id, pages) in sets {
            let job = self.next_job;
            self.next_job += 1;
            self.stats.cold_jobs += 1;
            self.stats.cold_asked_bytes += pages.len() as u64 * self.page_bytes;
            jobs.push(AdviceJob {
                job,
                id,
                ranges: page_ranges(&pages, self.page_bytes, COLD_RANGE_PAGES),
            });
        }
        jobs
    }

    /// Forgets `app` (it exited).
    pub fn forget(&mut self, app: &str) {
        self.open.remove(app);
        self.candidates.remove(app);
        self.cold.remove(app);
    }

    /// Candidate pages of `app`, all processes.
    pub fn candidate_pages(&self, app: &str) -> u64 {
        self.candidates
            .get(app)
            .map_or(0, |t| t.values().map(|v| v.len() as u64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_used_unused_and_demand_pages() {
        // Start: 1-3 present, 10-15 swapped. Prepaged 10-13. End: the app
        // touched 10, 11 (prepaged), 14 (not prepaged), allocated 20, and
        // 2 was swapped out meanwhile.
        let (n, fp) = window_pages(&[1, 2, 3], &[10, 11, 12, 13], &[1, 3, 10, 11, 14, 20]);
        assert_eq!(
            n,
            WindowPages {
                prepaged: 4,
                used: 2,
                demand: 2
            }
        );
        assert_eq!(fp, vec![10, 11, 14, 20]);
        // Nothing prepaged: everything brought in is demand.
        let (n, _) = window_pages(&[], &[], &[5, 6]);
        assert_eq!((n.used, n.demand), (0, 2));
    }

    #[test]
    fn pages_become_ranges_of_at_most_a_batch() {
        let p = 4096;
        let pages: Vec<u64> = (0..20).map(|i| i * p).chain([100 * p, 101 * p]).collect();
        assert_eq!(
            page_ranges(&pages, p, 16),
            vec![(0, 16 * p), (16 * p, 4 * p), (100 * p, 2 * p)]
        );
        assert!(page_ranges(&[], p, 16).is_empty());
        assert_eq!(minus(&[1, 2, 3, 4], &[2, 4, 9]), vec![1, 3]);
        assert_eq!(intersect(&[1, 2, 3, 4], &[0, 2, 4, 9]), vec![2, 4]);
    }

    /// The fixture tree (tests/fixtures/pagemap_anon) and its process.
    fn fixture() -> (&'static Path, ProcId) {
        let root = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pagemap_anon/proc"
        ));
        let id = ProcId {
            pid: 5151,
            start_time: 83011,
        };
        (root, id)
    }

    #[test]
    fn the_fixture_process_is_read_by_identity() {
        let (root, id) = fixture();
        let s = snapshot(root, id, 4096).unwrap().unwrap();
        assert_eq!(
            s.present,
            (0..8).map(|i| 0x10000 + i * 4096).collect::<Vec<_>>()
        );
        assert_eq!(
            s.swapped,
            (8..12).map(|i| 0x10000 + i * 4096).collect::<Vec<_>>()
        );
        // Another instance with the same pid: not read.
        let other = ProcId {
            start_time: 1,
            ..id
        };
        assert_eq!(snapshot(root, other, 4096).unwrap(), None);
        // The tracker's arithmetic over the fixture: a window that starts
        // and ends in the same state brings nothing back; its candidates
        // are then empty and nothing is prepaged.
        let mut t = SwitchTracker::new(root, 4096);
        t.start("a", &[id, other]);
        assert!(t.prepage("a", u64::MAX).is_empty());
        let o = t.finish("a", &[id], &|_| 0).unwrap();
        assert_eq!(o, SwitchObservation::default());
        assert_eq!(t.stats.windows, 1);
        assert_eq!(t.stats.observed, 1);
    }

    #[test]
    fn the_cold_set_is_what_the_last_window_did_not_bring_back() {
        let (root, id) = fixture();
        let mut t = SwitchTracker::new(root, 4096);
        // No window observed yet: nothing to mark.
        assert!(t.cold_jobs("a").is_empty());
        // A window in which nothing changed (the fixture's 8 present pages
        // were present at its start): all 8 are cold, none hot.
        t.start("a", &[id]);
        let o = t.finish("a", &[id], &|_| 0).unwrap();
        assert_eq!(o.demand_anon, 0);
        let jobs = t.cold_jobs("a");
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, id);
        assert_eq!(jobs[0].ranges, vec![(0x10000, 8 * 4096)]);
        assert_eq!(t.stats.cold_asked_bytes, 8 * 4096);
        // Handed out once.
        assert!(t.cold_jobs("a").is_empty());
        // A window that starts again (the app is back in front) drops a
        // cold set not handed out, and an open window gives none.
        t.start("a", &[id]);
        assert!(t.cold_jobs("a").is_empty());
        t.finish("a", &[id], &|_| 0).unwrap();
        t.start("a", &[id]);
        assert!(t.cold_jobs("a").is_empty());
        // Another instance with the same pid is never read, so never marked.
        let other = ProcId {
            start_time: 1,
            ..id
        };
        let mut t = SwitchTracker::new(root, 4096);
        t.start("b", &[other]);
        t.finish("b", &[other], &|_| 0).unwrap();
        assert!(t.cold_jobs("b").is_empty());
    }

    #[test]
    fn the_hot_set_is_left_out_of_the_cold_set() {
        // Start: 1-3 present. The window brought back 10, 11 (swapped at
        // its start) and allocated 20; 2 stayed present and was not
        // brought back.
        let start = [1u64, 2, 3];
        let end = [1u64, 2, 3, 10, 11, 20];
        let (_, footprint) = window_pages(&start, &[], &end);
        assert_eq!(footprint, vec![10, 11, 20]);
        assert_eq!(minus(&end, &footprint), vec![1, 2, 3]);
    }

    #[test]
    fn candidates_still_swapped_are_prepaged_within_the_plan() {
        let (root, id) = fixture();
        let mut t = SwitchTracker::new(root, 4096);
        // A previous window brought in pages 6-11 (by hand).
        let pages: Vec<u64> = (6..12).map(|i| 0x10000 + i * 4096).collect();
        t.candidates
            .insert("a".into(), BTreeMap::from([(id, pages.clone())]));
        t.start("a", &[id]);
        // 6, 7 are present; 8-11 swapped: at most 3 pages asked.
        let jobs = t.prepage("a", 3 * 4096 + 100);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, id);
        assert_eq!(jobs[0].ranges, vec![(0x18000, 3 * 4096)]);
        assert_eq!(t.open_jobs("a"), vec![jobs[0].job]);
        // The prepager advised two pages before the window ended; nothing
        // changed in the fixture: both are prepaged and unused.
        let j = jobs[0].job;
        let o = t
            .finish("a", &[id], &|k| if k == j { 2 * 4096 } else { 0 })
            .unwrap();
        assert_eq!(o.prepaged_anon, 2 * 4096);
        assert_eq!(o.used_anon, 0);
        assert_eq!(o.precision(), Some(0.0));
        t.forget("a");
        assert_eq!(t.candidate_pages("a"), 0);
    }
}
