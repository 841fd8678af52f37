//! The live `ReclaimMechanism` (the AppFlow paper §4.2 realised from user space):
//!
//! * **efficiency-first**: swappiness 0 for the domain, so reclaim takes file
//!   pages only — v1: `memory.swappiness` of the domain cgroup *and every
//!   cgroup below it* (v1 reclaim reads the swappiness of the cgroup whose LRU
//!   it scans); system: `/proc/sys/vm/swappiness`; v2 has no per-cgroup
//!   swappiness: the mode degrades to the worker's protected ranges alone and
//!   the log says so. Every change goes through the [`Journal`] first.
//! * **rebalancing**: original swappiness back, and `process_madvise(MADV_PAGEOUT)`
//!   of background apps' private anonymous ranges (from /proc/PID/smaps).
//!   The kernel refuses the *whole* call with EINVAL when one range starts
//!   off a page boundary (`madvise` requires a page-aligned start) or lies in
//!   a mapping it cannot page out (`madvise_pageout`: `can_madv_lru_vma`
//!   rejects VM_LOCKED, VM_PFNMAP and VM_HUGETLB; VM_IO comes with PFN maps).
//!   So budgets are cut to whole pages (the resume cursor stays aligned), and
//!   mappings whose `VmFlags` show `lo`, `pf`, `io` or `ht` are left out
//!   before the call. Every failure other than a vanished process is counted
//!   by errno ([`LiveReclaim::page_out_errors`]), shown in `status` and the
//!   metrics.
//! * **normal**: every original setting restored exactly.
//! * **kswapd's reclaim step** (the re-fault policy, the re-fault study §5):
//!   `/proc/sys/vm/watermark_scale_factor`, through the [`Journal`] like
//!   swappiness (restored on exit, and after a crash by the next start). Only
//!   in a system domain ([`StepTarget::Sysctl`]): a memory cgroup has no
//!   kswapd of its own — on cgroup v1 (and v2) a cgroup at its limit is
//!   reclaimed by the charging task, in batches sized by the charge
//!   (`try_to_free_mem_cgroup_pages`, at least SWAP_CLUSTER_MAX pages), and
//!   the global watermarks matter only when the whole machine runs short.
//!   There the step is [`StepTarget::None`] and the policy measures only.
//!   The mode switches restore swappiness only, never the step.

use crate::journal::Journal;
use crate::readers::{read_smaps_vmas, Vma};
use appflow_core::mechanism::{MechError, ReclaimMechanism};
use appflow_core::reclaim::ReclaimMode;
use appflow_core::refault::StepRange;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the domain's swappiness lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwappinessTarget {
    /// A sysctl file (system domain): `/proc/sys/vm/swappiness`.
    Sysctl(PathBuf),
    /// A cgroup v1 memory cgroup: its `memory.swappiness` and its descendants'.
    CgroupV1(PathBuf),
    /// cgroup v2: no per-cgroup swappiness.
    None,
}

/// Where kswapd's reclaim step lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepTarget {
    /// The system domain: `<proc_root>/sys/vm/watermark_scale_factor`.
    Sysctl,
    /// Nothing to tune in this domain; the text says why.
    None(String),
}

impl StepTarget {
    /// Why a memory cgroup domain has no step to tune.
    pub fn memory_cgroup() -> Self {
        StepTarget::None(
            "a memory cgroup has no kswapd of its own: at its limit the charging task reclaims \
             charge-sized batches, and vm.watermark_scale_factor acts only when the whole \
             machine runs short"
                .into(),
        )
    }
}

/// A private anonymous mapping of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnonRange {
    /// Start address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// Resident anonymous bytes in it (smaps `Anonymous:`).
    pub anon_bytes: u64,
}

/// `VmFlags` mnemonics of mappings that `MADV_PAGEOUT` refuses with EINVAL:
/// `lo` VM_LOCKED, `pf` VM_PFNMAP, `io` VM_IO, `ht` VM_HUGETLB.
pub const PAGEOUT_REFUSED_FLAGS: [&str; 4] = ["lo", "pf", "io", "ht"];

/// The mappings page-out may ask for: private, writable, anonymous (heap,
/// stack, `[anon:…]` and unnamed mappings; not vdso/vvar/vsyscall, not
/// shared memory, not files) and none of [`PAGEOUT_REFUSED_FLAGS`]. Each
/// carries its resident anonymous memory; [`plan_page_out`] skips those
/// with none (all swapped out or never touched), while a switch's snapshot
/// reads them all (their swapped pages are what it prepages).
pub fn page_out_ranges(vmas: &[Vma]) -> Vec<AnonRange> {
    vmas.iter()
        .filter(|v| {
            let p = v.perms.as_bytes();
            let private_rw = p.len() >= 4 && p[0] == b'r' && p[1] == b'w' && p[3] == b'p';
            let anon_name = v.name.is_empty()
                || v.name == "[heap]"
                || v.name == "[stack]"
                || v.name.starts_with("[anon:")
                || v.name.starts_with("[stack:");
            private_rw
                && v.inode == 0
                && anon_name
                && v.end_addr > v.start_addr
                && !PAGEOUT_REFUSED_FLAGS.iter().any(|f| v.has_flag(f))
        })
        .map(|v| AnonRange {
            start: v.start_addr,
            len: v.end_addr - v.start_addr,
            anon_bytes: v.anon_bytes,
        })
        .collect()
}

/// At most this many ranges per call (the kernel's UIO_MAXIOV).
pub const MAX_IOV: usize = 1024;

/// One page-out call's ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageOutBatch {
    /// (address, length) pairs, page-aligned.
    pub ranges: Vec<(u64, u64)>,
    /// Sum of the lengths.
    pub asked_bytes: u64,
    /// The resident anonymous bytes in them: each range's share of its
    /// mapping's resident memory, taken as spread evenly over the mapping.
    pub resident_bytes: u64,
    /// Where the next batch continues (page-aligned).
    pub next_cursor: u64,
}

/// Plans one page-out call: `ranges` from the cursor `from` on, then wrapping
/// around, until the resident anonymous memory asked reaches `budget_bytes`
/// cut down to whole pages (at least one page), in at most [`MAX_IOV`]
/// ranges. A mapping's resident pages are taken as spread evenly over it,
/// so a part of a half-resident mapping twice the budget long is asked. A
/// budget counted in address space instead would be spent again and again
/// on what an earlier call already swapped out. Every start and length is a
/// multiple of `page_bytes`, so the cursor never lands off a page boundary.
pub fn plan_page_out(
    ranges: &[AnonRange],
    from: u64,
    budget_bytes: u64,
    page_bytes: u64,
) -> PageOutBatch {
    let page = page_bytes.max(1);
    let budget = (budget_bytes / page * page).max(page);
    let from = from / page * page;
    let ordered = ranges
        .iter()
        .filter(|r| r.start + r.len > from)
        .chain(ranges.iter().filter(|r| r.start + r.len <= from));
    let mut b = PageOutBatch {
        ranges: Vec::new(),
        asked_bytes: 0,
        resident_bytes: 0,
        next_cursor: from,
    };
    for r in ordered {
        if b.resident_bytes >= budget || b.ranges.len() >= MAX_IOV {
            break;
        }
        let anon = r.anon_bytes.min(r.len) as u128;
        if anon == 0 {
            continue;
        }
        let start = if r.start < from && from < r.start + r.len {
            from
        } else {
            r.start
        };
        // The length whose share of the mapping's resident memory is what
        // is left of the budget, cut down to whole pages (the first range
        // gets at least one).
        let left = (budget - b.resident_bytes) as u128;
        let want = u64::try_from(left * r.len as u128 / anon).unwrap_or(u64::MAX);
        let rest = (r.start + r.len - start) / page * page;
        let mut len = want.min(rest) / page * page;
        if len == 0 && b.ranges.is_empty() {
            len = page.min(rest);
        }
        if len == 0 {
            continue;
        }
        b.ranges.push((start, len));
        b.asked_bytes += len;
        b.resident_bytes += (len as u128 * anon / r.len as u128) as u64;
        b.next_cursor = start + len;
    }
    b
}

/// The live reclaim mechanism.
#[derive(Debug)]
pub struct LiveReclaim {
    journal: Journal,
    target: SwappinessTarget,
    proc_root: PathBuf,
    dry_run: bool,
    /// Per pid: the address to continue paging out from next time.
    cursor: BTreeMap<u32, u64>,
    warned_v2: bool,
    /// Bytes the kernel accepted for page-out, since start.
    pub paged_out_bytes: u64,
    /// Bytes dropped from the page cache, since start.
    pub dropped_bytes: u64,
    /// `process_madvise(MADV_PAGEOUT)` calls made, since start.
    pub page_out_calls: u64,
    /// Failed page-out requests by errno (a vanished process is not a failure).
    pub page_out_errors: BTreeMap<i32, u64>,
    /// /proc/PID/smaps of a live process that could not be read or parsed.
    pub smaps_errors: u64,
    page_bytes: u64,
    step_target: StepTarget,
    /// The step before any change (the stock value), once read.
    step_stock: Option<u32>,
    /// Page-out measured on this mechanism's calls: bytes and seconds,
    /// each an exponentially weighted mean over the calls that paged
    /// something out ([`PageOutRate`]).
    rate: PageOutRate,
}

/// The rate of `process_madvise(MADV_PAGEOUT)`, measured on whole calls
/// (the smaps read included: the tick spends that too). Bytes and seconds
/// are averaged apart, weight [`PageOutRate::WEIGHT`] on the newest call,
/// so a call of many bytes counts for more than a call of a few, and a
/// change in the device's load shows within a few calls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PageOutRate {
    bytes: f64,
    secs: f64,
}

impl PageOutRate {
    /// The newest call's weight: a quarter, so about the last four calls
    /// (one rebalancing tick asks one to a few processes) make the rate.
    pub const WEIGHT: f64 = 0.25;

    /// Adds one call that paged `bytes` out in `secs`.
    pub fn observe(&mut self, bytes: u64, secs: f64) {
        if bytes == 0 || !(secs > 0.0 && secs.is_finite()) {
            return;
        }
        if self.secs == 0.0 {
            (self.bytes, self.secs) = (bytes as f64, secs);
        } else {
            self.bytes += Self::WEIGHT * (bytes as f64 - self.bytes);
            self.secs += Self::WEIGHT * (secs - self.secs);
        }
    }

    /// Bytes per second; None before any call paged something out.
    pub fn bytes_per_sec(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.bytes / self.secs)
    }
}

impl LiveReclaim {
    /// A live mechanism; `dry_run` only logs.
    pub fn new(
        journal: Journal,
        target: SwappinessTarget,
        proc_root: &Path,
        dry_run: bool,
    ) -> Self {
        Self {
            journal,
            target,
            proc_root: proc_root.to_path_buf(),
            dry_run,
            cursor: BTreeMap::new(),
            warned_v2: false,
            paged_out_bytes: 0,
            dropped_bytes: 0,
            page_out_calls: 0,
            page_out_errors: BTreeMap::new(),
            smaps_errors: 0,
            page_bytes: crate::recorder::residency::page_bytes(),
            step_target: StepTarget::None("not configured".into()),
            step_stock: None,
            rate: PageOutRate::default(),
        }
    }

    /// Sets where kswapd's reclaim step lives (default: nowhere).
    pub fn with_step_target(mut self, t: StepTarget) -> Self {
        self.step_target = t;
        self
    }

    /// `vm.watermark_scale_factor` under the proc root.
    pub fn step_file(&self) -> PathBuf {
        self.proc_root.join("sys/vm/watermark_scale_factor")
    }

    /// Restores every changed setting but kswapd's step (the reclaim
    /// modes' settings); returns the failures as text.
    fn restore_modes(&mut self) -> Vec<String> {
        let step = self.step_file();
        let files: Vec<PathBuf> = self
            .journal
            .entries()
            .iter()
            .rev()
            .map(|e| e.path.clone())
            .filter(|p| *p != step)
            .collect();
        files
            .iter()
            .filter_map(|f| self.journal.restore(f).err())
            .map(|e| e.to_string())
            .collect()
    }

    /// The journal of changed settings.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Restores every changed setting; returns the failures as text.
    pub fn restore_all(&mut self) -> Vec<String> {
        self.journal
            .restore_all()
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    /// Every swappiness file of the domain (v1: the cgroup and its descendants).
    pub fn swappiness_files(&self) -> Vec<PathBuf> {
        match &self.target {
            SwappinessTarget::Sysctl(p) => vec![p.clone()],
            SwappinessTarget::CgroupV1(root) => {
                let mut out = Vec::new();
                let mut stack = vec![root.clone()];
                while let Some(d) = stack.pop() {
                    let f = d.join("memory.swappiness");
                    if f.exists() {
                        out.push(f);
                    }
                    if let Ok(rd) = std::fs::read_dir(&d) {
                        for e in rd.flatten() {
                            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                                stack.push(e.path());
                            }
                        }
                    }
                }
                out.sort();
                out
            }
            SwappinessTarget::None => Vec::new(),
        }
    }

    /// Counts a failed page-out request; a vanished process or a kernel
    /// without the syscall ends the page-out of this process instead.
    fn page_out_error(&mut self, pid: u32, errno: i32) -> Result<(), MechError> {
        match errno {
            libc::ESRCH => Err(MechError::Vanished(pid)),
            libc::ENOSYS => Err(MechError::Unsupported("process_madvise".into())),
            e => {
                *self.page_out_errors.entry(e).or_default() += 1;
                Ok(())
            }
        }
    }

    fn forget_vanished_pids(&mut self) {
        let root = self.proc_root.clone();
        self.cursor
            .retain(|pid, _| root.join(pid.to_string()).exists());
    }
}

/// Index of the range at which a call that advised `advised_bytes` of
/// `ranges` stopped; `None` when it advised them all.
fn ranges_before(ranges: &[(u64, u64)], advised_bytes: u64) -> Option<usize> {
    let mut sum = 0u64;
    for (i, &(_, len)) in ranges.iter().enumerate() {
        sum += len;
        if sum > advised_bytes {
            return Some(i);
        }
    }
    None
}

fn failed(what: impl Into<String>, detail: impl ToString) -> MechError {
    MechError::Failed {
        what: what.into(),
        detail: detail.to_string(),
    }
}

impl ReclaimMechanism for LiveReclaim {
    fn apply_mode(&mut self, mode: ReclaimMode) -> Result<(), MechError> {
        match mode {
            ReclaimMode::EfficiencyFirst => {
                if self.target == SwappinessTarget::None {
                    if !self.warned_v2 {
                        tracing::warn!(
                            feature = "per-cgroup swappiness",
                            "cgroup v2 has no memory.swappiness: efficiency-first relies on \
                             the preload worker's protected ranges only"
                        );
                        self.warned_v2 = true;
                    }
                    return Err(MechError::Unsupported("per-cgroup swappiness".into()));
                }
                // Re-applied every efficiency-first tick so that cgroups
                // created during the burst get swappiness 0 too.
                for f in self.swappiness_files() {
                    let already = self.journal.is_changed(&f);
                    if already {
                        continue;
                    }
                    if self.dry_run {
                        tracing::info!(file = %f.display(), "dry-run: would set swappiness 0");
                        continue;
                    }
                    match self.journal.set(&f, "0") {
                        Ok(_) => {}
                        // A cgroup removed meanwhile is not a failure.
                        Err(crate::journal::JournalError::Io { source, .. })
                            if source.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(failed("setting swappiness 0", e)),
                    }
                }
                Ok(())
            }
            ReclaimMode::Rebalancing | ReclaimMode::Normal => {
                self.forget_vanished_pids();
                let errors = self.restore_modes();
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(failed("restoring settings", errors.join("; ")))
                }
            }
        }
    }

    fn page_out_anon(&mut self, pid: u32, max_bytes: u64) -> Result<u64, MechError> {
        let started = std::time::Instant::now();
        let vmas = match read_smaps_vmas(&self.proc_root, pid) {
            Ok(v) => v,
            Err(e) if e.is_not_found() => return Err(MechError::Vanished(pid)),
            Err(e) => {
                self.smaps_errors += 1;
                return Err(failed(format!("reading smaps of {pid}"), e));
            }
        };
        let ranges = page_out_ranges(&vmas);
        let from = self.cursor.get(&pid).copied().unwrap_or(0);
        let batch = plan_page_out(&ranges, from, max_bytes, self.page_bytes);
        if batch.ranges.is_empty() {
            return Ok(0);
        }
        if self.dry_run {
            tracing::info!(
                pid,
                bytes = batch.resident_bytes,
                ranges = batch.ranges.len(),
                "dry-run: would page out anon"
            );
            return Ok(batch.resident_bytes);
        }
        let fd = match super::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(libc::ESRCH) => return Err(MechError::Vanished(pid)),
            Err(libc::ENOSYS) => return Err(MechError::Unsupported("pidfd".into())),
            Err(e) => {
                *self.page_out_errors.entry(e).or_default() += 1;
                return Err(failed(
                    format!("pidfd_open({pid})"),
                    std::io::Error::from_raw_os_error(e),
                ));
            }
        };
        // The kernel advises the ranges in order and stops at the first that
        // fails, returning the bytes of the ranges before it (or the error
        // when there are none). A failed range is asked alone to learn its
        // errno, counted, and skipped; the rest are asked again.
        let mut done = 0u64;
        let mut last_err = None;
        let mut rest: &[(u64, u64)] = &batch.ranges;
        while !rest.is_empty() {
            self.page_out_calls += 1;
            let failed_at = match super::process_madvise(&fd, rest, super::MADV_PAGEOUT) {
                Ok(n) => {
                    done += n;
                    match ranges_before(rest, n) {
                        Some(i) => i,
                        None => break,
                    }
                }
                Err(e) => {
                    self.page_out_error(pid, e)?;
                    last_err = Some(e);
                    rest = &rest[1..];
                    continue;
                }
            };
            self.page_out_calls += 1;
            match super::process_madvise(&fd, &rest[failed_at..=failed_at], super::MADV_PAGEOUT) {
                Ok(n) => done += n,
                Err(e) => {
                    self.page_out_error(pid, e)?;
                    last_err = Some(e);
                }
            }
            rest = &rest[failed_at + 1..];
        }
        self.cursor.insert(pid, batch.next_cursor);
        // The resident share of the ranges the kernel advised.
        let done =
            (done as u128 * batch.resident_bytes as u128 / batch.asked_bytes.max(1) as u128) as u64;
        self.paged_out_bytes += done;
        self.rate.observe(done, started.elapsed().as_secs_f64());
        match last_err {
            Some(e) if done == 0 => Err(failed(
                format!("process_madvise(MADV_PAGEOUT, {pid})"),
                std::io::Error::from_raw_os_error(e),
            )),
            _ => Ok(done),
        }
    }

    fn page_out_bytes_per_sec(&self) -> Option<f64> {
        self.rate.bytes_per_sec()
    }

    fn drop_file(&mut self, path: &str, offset: u64, len: u64) -> Result<u64, MechError> {
        if self.dry_run {
            tracing::info!(path, offset, len, "dry-run: would drop from page cache");
            return Ok(len);
        }
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path).map_err(|e| failed(format!("opening {path}"), e))?;
        // SAFETY: valid fd, integer arguments.
        let r = unsafe {
            libc::posix_fadvise(
                f.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        if r != 0 {
            return Err(failed(
                format!("posix_fadvise(DONTNEED, {path})"),
                std::io::Error::from_raw_os_error(r),
            ));
        }
        self.dropped_bytes += len;
        Ok(len)
    }

    fn reclaim_step_range(&mut self) -> Result<StepRange, MechError> {
        if let StepTarget::None(why) = &self.step_target {
            return Err(MechError::Unsupported(why.clone()));
        }
        let file = self.step_file();
        let read = |name: &str| {
            crate::readers::read_sysctl_u64(&self.proc_root, name)
                .map_err(|e| failed("reading kswapd's step", e))
        };
        // The stock value: the original when this daemon already changed it.
        let stock = match self.journal.entries().iter().find(|e| e.path == file) {
            Some(e) => e
                .original
                .parse::<u64>()
                .map_err(|e| failed("journaled watermark_scale_factor", e))?,
            None => read("vm/watermark_scale_factor")?,
        };
        let min_kb = read("vm/min_free_kbytes")?;
        let total = crate::readers::read_meminfo(&self.proc_root)
            .map_err(|e| failed("reading kswapd's step", e))?
            .total_kb
            * 1024;
        let stock = stock.min(u32::MAX as u64) as u32;
        self.step_stock = Some(stock);
        Ok(StepRange::new(stock, total, min_kb * 1024))
    }

    fn set_reclaim_step(&mut self, wsf: u32) -> Result<(), MechError> {
        if let StepTarget::None(why) = &self.step_target {
            return Err(MechError::Unsupported(why.clone()));
        }
        let file = self.step_file();
        if self.dry_run {
            tracing::info!(file = %file.display(), wsf, "dry-run: would set kswapd's step");
            return Ok(());
        }
        if Some(wsf) == self.step_stock && self.journal.is_changed(&file) {
            // Back to stock: the original written back exactly.
            return self
                .journal
                .restore(&file)
                .map_err(|e| failed("restoring watermark_scale_factor", e));
        }
        self.journal
            .set(&file, &wsf.to_string())
            .map(|_| ())
            .map_err(|e| failed("setting watermark_scale_factor", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real /proc/PID/smaps (tests/fixtures/smaps_mixed/README.md).
    const SMAPS: &str = include_str!("../../tests/fixtures/smaps_mixed/proc/4343/smaps");

    #[test]
    fn page_out_ranges_skip_locked_pfn_and_hugetlb_mappings() {
        let vmas = crate::readers::parse_smaps_vmas(SMAPS).unwrap();
        let r = page_out_ranges(&vmas);
        let starts: Vec<u64> = r.iter().map(|r| r.start).collect();
        // heap, seven unnamed private rw mappings, stack; not the mlocked
        // 3-page range (lo), the MAP_HUGETLB one (ht), vvar (pf io), files.
        assert_eq!(
            starts,
            vec![
                0x55ad14954000,
                0x7f98b22aa000,
                0x7f98b22dd000,
                0x7f98b24dd000,
                0x7f98b29f3000,
                0x7f98b2f78000,
                0x7f98b2fc4000,
                0x7f98b3040000,
                0x7f98b312b000,
                0x7ffcab76d000
            ]
        );
        assert!(!starts.contains(&0x7f98b2fba000), "mlocked range kept");
        assert!(!starts.contains(&0x7f98b2000000), "hugetlb range kept");
        // The odd-sized request (5 pages + 1 byte) is a 6-page mapping.
        assert_eq!(r[1].len, 6 * 4096);
    }

    #[test]
    fn batches_stay_page_aligned_with_any_budget() {
        let ranges = [
            AnonRange {
                start: 0x10000,
                len: 6 * 4096,
                anon_bytes: 6 * 4096,
            },
            AnonRange {
                start: 0x40000,
                len: 3 * 4096,
                anon_bytes: 3 * 4096,
            },
        ];
        // 10000 bytes is 2 pages and 1808 bytes: ask for 2 pages.
        let b = plan_page_out(&ranges, 0, 10_000, 4096);
        assert_eq!(b.ranges, vec![(0x10000, 2 * 4096)]);
        assert_eq!(b.next_cursor, 0x12000);
        // Resumed at the cursor, across the range boundary.
        let b = plan_page_out(&ranges, b.next_cursor, 5 * 4096 + 123, 4096);
        assert_eq!(b.ranges, vec![(0x12000, 4 * 4096), (0x40000, 4096)]);
        assert_eq!(b.next_cursor, 0x41000);
        // A budget under one page still asks for one page; a cursor off a
        // page boundary (from an older daemon) is cut down to one.
        let b = plan_page_out(&ranges, 0x41001, 1, 4096);
        assert_eq!(b.ranges, vec![(0x41000, 4096)]);
        // Past the end: wraps around to the first range.
        let b = plan_page_out(&ranges, 0x43000, 1 << 30, 4096);
        assert_eq!(b.ranges, vec![(0x10000, 6 * 4096), (0x40000, 3 * 4096)]);
        assert_eq!(b.asked_bytes, 9 * 4096);
        for bytes in [1u64, 4095, 4097, 12_345, 999_999] {
            for from in [0u64, 0x10000, 0x12000, 0x41000] {
                let b = plan_page_out(&ranges, from, bytes, 4096);
                assert!(b
                    .ranges
                    .iter()
                    .all(|(a, l)| a % 4096 == 0 && l % 4096 == 0 && *l > 0));
                assert_eq!(b.next_cursor % 4096, 0);
            }
        }
        assert!(plan_page_out(&[], 0, 1 << 20, 4096).ranges.is_empty());
    }

    #[test]
    fn the_budget_counts_resident_anonymous_memory_not_address_space() {
        let mib = 1u64 << 20;
        let ranges = [
            // A 64 MiB heap with 16 MiB resident, a mapping all swapped
            // out, and a 4 MiB one fully resident.
            AnonRange {
                start: 0x1000_0000,
                len: 64 * mib,
                anon_bytes: 16 * mib,
            },
            AnonRange {
                start: 0x2000_0000,
                len: 32 * mib,
                anon_bytes: 0,
            },
            AnonRange {
                start: 0x3000_0000,
                len: 4 * mib,
                anon_bytes: 4 * mib,
            },
        ];
        // 8 MiB of resident memory is half the heap's address space.
        let b = plan_page_out(&ranges, 0, 8 * mib, 4096);
        assert_eq!(b.ranges, vec![(0x1000_0000, 32 * mib)]);
        assert_eq!((b.asked_bytes, b.resident_bytes), (32 * mib, 8 * mib));
        // The rest of the heap, then past the swapped-out mapping.
        let b = plan_page_out(&ranges, b.next_cursor, 10 * mib, 4096);
        assert_eq!(
            b.ranges,
            vec![(0x1000_0000 + 32 * mib, 32 * mib), (0x3000_0000, 2 * mib)]
        );
        assert_eq!(b.resident_bytes, 10 * mib);
        // Only swapped-out memory: nothing to ask.
        let b = plan_page_out(&ranges[1..2], 0, 8 * mib, 4096);
        assert!(b.ranges.is_empty() && b.resident_bytes == 0);
        // A mapping with nothing resident is still listed (a switch's
        // snapshot reads its swapped pages); the page-out plan skips it.
        let vma = Vma {
            start_addr: 0x1000,
            end_addr: 0x3000,
            perms: "rw-p".into(),
            inode: 0,
            name: String::new(),
            vm_flags: vec!["rd".into(), "wr".into()],
            anon_bytes: 0,
        };
        let listed = page_out_ranges(&[vma]);
        assert_eq!(listed.len(), 1);
        assert!(plan_page_out(&listed, 0, 1 << 20, 4096).ranges.is_empty());
    }

    #[test]
    fn a_short_call_names_the_range_it_stopped_at() {
        let r = [(0u64, 4096u64), (8192, 8192), (65536, 4096)];
        assert_eq!(ranges_before(&r, 0), Some(0));
        assert_eq!(ranges_before(&r, 4096), Some(1));
        assert_eq!(ranges_before(&r, 12288), Some(2));
        assert_eq!(ranges_before(&r, 16384), None);
    }

    #[test]
    fn swappiness_files_walk_the_cgroup_tree() {
        let d = std::env::temp_dir().join(format!("appflow-swp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::create_dir_all(d.join("c")).unwrap();
        for p in ["", "a", "a/b"] {
            std::fs::write(d.join(p).join("memory.swappiness"), "60\n").unwrap();
        }
        let (j, _) = Journal::open(&d.join("journal.json"), false).unwrap();
        let mut r = LiveReclaim::new(
            j,
            SwappinessTarget::CgroupV1(d.clone()),
            Path::new("/proc"),
            false,
        );
        assert_eq!(r.swappiness_files().len(), 3);
        r.apply_mode(ReclaimMode::EfficiencyFirst).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("a/b/memory.swappiness")).unwrap(),
            "0"
        );
        assert!(d.join("journal.json").exists());
        r.apply_mode(ReclaimMode::Normal).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("a/b/memory.swappiness")).unwrap(),
            "60"
        );
        assert!(!d.join("journal.json").exists());
        // Paging out a process that does not exist is "vanished", never a hard error.
        assert_eq!(
            r.page_out_anon(u32::MAX - 1, 1 << 20),
            Err(MechError::Vanished(u32::MAX - 1))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn page_out_rate_weighs_calls_by_their_bytes_and_follows_a_change() {
        let mut r = PageOutRate::default();
        assert_eq!(r.bytes_per_sec(), None);
        // Calls that paged nothing, or took no time, say nothing.
        r.observe(0, 0.05);
        r.observe(1 << 20, 0.0);
        r.observe(1 << 20, f64::NAN);
        assert_eq!(r.bytes_per_sec(), None);
        // 32 MiB in 47 ms: what lz4 zram took on the development machine.
        r.observe(32 << 20, 0.047);
        let first = r.bytes_per_sec().unwrap();
        assert!((first - (32 << 20) as f64 / 0.047).abs() < 1.0, "{first}");
        // A small call that is slow per byte (the smaps read dominates)
        // moves the rate less than its own rate would.
        r.observe(64 << 10, 0.01);
        let after = r.bytes_per_sec().unwrap();
        assert!(after < first && after > 0.5 * first, "{first} -> {after}");
        // A device twice as slow shows within a few calls.
        for _ in 0..12 {
            r.observe(32 << 20, 0.094);
        }
        let slow = r.bytes_per_sec().unwrap();
        assert!(
            (slow / ((32 << 20) as f64 / 0.094) - 1.0).abs() < 0.05,
            "{slow}"
        );
    }

    /// A proc tree with this machine kind's real values (24 GB, wsf 10,
    /// min_free_kbytes 67584) and a swappiness file.
    fn step_tree() -> (tempfile::TempDir, LiveReclaim) {
        let d = tempfile::tempdir().unwrap();
        let proc_root = d.path().join("proc");
        std::fs::create_dir_all(proc_root.join("sys/vm")).unwrap();
        std::fs::write(proc_root.join("sys/vm/watermark_scale_factor"), "10\n").unwrap();
        std::fs::write(proc_root.join("sys/vm/min_free_kbytes"), "67584\n").unwrap();
        std::fs::write(proc_root.join("sys/vm/swappiness"), "60\n").unwrap();
        std::fs::write(
            proc_root.join("meminfo"),
            "MemTotal:       24684084 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n",
        )
        .unwrap();
        let (j, _) = Journal::open(&d.path().join("state/journal.json"), false).unwrap();
        let r = LiveReclaim::new(
            j,
            SwappinessTarget::Sysctl(proc_root.join("sys/vm/swappiness")),
            &proc_root,
            false,
        )
        .with_step_target(StepTarget::Sysctl);
        (d, r)
    }

    #[test]
    fn the_step_goes_through_the_journal_and_modes_leave_it_alone() {
        let (d, mut r) = step_tree();
        let wsf = d.path().join("proc/sys/vm/watermark_scale_factor");
        let swp = d.path().join("proc/sys/vm/swappiness");
        let range = r.reclaim_step_range().unwrap();
        assert_eq!(
            range,
            StepRange {
                stock: 10,
                floor: 7
            }
        );
        r.set_reclaim_step(7).unwrap();
        assert_eq!(std::fs::read_to_string(&wsf).unwrap(), "7");
        // The journal holds the original before the change.
        assert!(r.journal().is_changed(&wsf));
        // Asked again, the stock value is the original, not the change.
        assert_eq!(r.reclaim_step_range().unwrap().stock, 10);
        // Efficiency-first and back: swappiness restored, the step kept.
        r.apply_mode(ReclaimMode::EfficiencyFirst).unwrap();
        assert_eq!(std::fs::read_to_string(&swp).unwrap(), "0");
        r.apply_mode(ReclaimMode::Normal).unwrap();
        assert_eq!(std::fs::read_to_string(&swp).unwrap(), "60");
        assert_eq!(std::fs::read_to_string(&wsf).unwrap(), "7");
        // Back to stock restores the original exactly and forgets it.
        r.set_reclaim_step(10).unwrap();
        assert_eq!(std::fs::read_to_string(&wsf).unwrap(), "10");
        assert!(!r.journal().is_changed(&wsf));
        // Exit restores everything.
        r.set_reclaim_step(8).unwrap();
        assert!(r.restore_all().is_empty());
        assert_eq!(std::fs::read_to_string(&wsf).unwrap(), "10");
    }

    #[test]
    fn a_cgroup_domain_has_no_step() {
        let (d, r) = step_tree();
        let mut r = r.with_step_target(StepTarget::memory_cgroup());
        let e = r.reclaim_step_range().unwrap_err();
        assert!(
            matches!(&e, MechError::Unsupported(w) if w.contains("no kswapd of its own")),
            "{e}"
        );
        assert!(matches!(
            r.set_reclaim_step(5),
            Err(MechError::Unsupported(_))
        ));
        let wsf = d.path().join("proc/sys/vm/watermark_scale_factor");
        assert_eq!(std::fs::read_to_string(wsf).unwrap(), "10\n");
    }
}
