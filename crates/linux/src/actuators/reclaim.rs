//! The live `ReclaimMechanism` (seed 000 §4.2 realised from user space):
//!
//! * **efficiency-first**: swappiness 0 for the domain, so reclaim takes file
//!   pages only — v1: `memory.swappiness` of the domain cgroup *and every
//!   cgroup below it* (v1 reclaim reads the swappiness of the cgroup whose LRU
//!   it scans); system: `/proc/sys/vm/swappiness`; v2 has no per-cgroup
//!   swappiness: the mode degrades to the worker's protected ranges alone and
//!   the log says so. Every change goes through the [`Journal`] first.
//! * **rebalancing**: original swappiness back, and `process_madvise(MADV_PAGEOUT)`
//!   of background apps' private anonymous ranges (from /proc/PID/maps).
//! * **normal**: every original setting restored exactly.

use crate::journal::Journal;
use appflow_core::mechanism::{MechError, ReclaimMechanism};
use appflow_core::reclaim::ReclaimMode;
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

/// A private anonymous mapping of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnonRange {
    /// Start address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Parses /proc/PID/maps text into its private anonymous, writable ranges
/// (heap, stack, `[anon:…]` and unnamed mappings; not vdso/vvar/vsyscall).
/// Malformed lines are skipped.
pub fn parse_anon_ranges(maps: &str) -> Vec<AnonRange> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms), Some(_off), Some(_dev), Some(inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let name: String = it.collect::<Vec<_>>().join(" ");
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let perms = perms.as_bytes();
        let private_rw =
            perms.len() >= 4 && perms[0] == b'r' && perms[1] == b'w' && perms[3] == b'p';
        let anon_name = name.is_empty()
            || name == "[heap]"
            || name == "[stack]"
            || name.starts_with("[anon:")
            || name.starts_with("[stack:");
        if private_rw && inode == "0" && anon_name && b > a {
            out.push(AnonRange {
                start: a,
                len: b - a,
            });
        }
    }
    out
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
        }
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

    fn forget_vanished_pids(&mut self) {
        let root = self.proc_root.clone();
        self.cursor
            .retain(|pid, _| root.join(pid.to_string()).exists());
    }
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
                let errors = self.restore_all();
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(failed("restoring settings", errors.join("; ")))
                }
            }
        }
    }

    fn page_out_anon(&mut self, pid: u32, max_bytes: u64) -> Result<u64, MechError> {
        let maps = match std::fs::read_to_string(self.proc_root.join(pid.to_string()).join("maps"))
        {
            Ok(m) => m,
            Err(_) => return Err(MechError::Vanished(pid)),
        };
        let ranges = parse_anon_ranges(&maps);
        let from = self.cursor.get(&pid).copied().unwrap_or(0);
        // Continue after the cursor, then wrap around.
        let mut ordered: Vec<AnonRange> = ranges
            .iter()
            .copied()
            .filter(|r| r.start + r.len > from)
            .collect();
        ordered.extend(ranges.iter().copied().filter(|r| r.start + r.len <= from));
        let mut batch = Vec::new();
        let mut asked = 0u64;
        let mut next = 0u64;
        for r in ordered {
            if asked >= max_bytes || batch.len() >= 1024 {
                break;
            }
            let start = if r.start < from && from < r.start + r.len {
                from
            } else {
                r.start
            };
            let len = (r.start + r.len - start).min(max_bytes - asked);
            batch.push((start, len));
            asked += len;
            next = start + len;
        }
        if batch.is_empty() {
            return Ok(0);
        }
        if self.dry_run {
            tracing::info!(
                pid,
                bytes = asked,
                ranges = batch.len(),
                "dry-run: would page out anon"
            );
            return Ok(asked);
        }
        let fd = match super::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(libc::ESRCH) => return Err(MechError::Vanished(pid)),
            Err(libc::ENOSYS) => return Err(MechError::Unsupported("pidfd".into())),
            Err(e) => {
                return Err(failed(
                    format!("pidfd_open({pid})"),
                    std::io::Error::from_raw_os_error(e),
                ))
            }
        };
        match super::process_madvise(&fd, &batch, super::MADV_PAGEOUT) {
            Ok(n) => {
                self.cursor.insert(pid, next);
                self.paged_out_bytes += n;
                Ok(n)
            }
            Err(libc::ESRCH) => Err(MechError::Vanished(pid)),
            Err(libc::ENOSYS) => Err(MechError::Unsupported("process_madvise".into())),
            // A range unmapped since we read maps: restart from the beginning next time.
            Err(libc::ENOMEM) | Err(libc::EFAULT) => {
                self.cursor.remove(&pid);
                Ok(0)
            }
            Err(e) => Err(failed(
                format!("process_madvise(MADV_PAGEOUT, {pid})"),
                std::io::Error::from_raw_os_error(e),
            )),
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines of a real /proc/PID/maps (x86_64, kernel 6.x).
    const MAPS: &str = "\
55d4c8a00000-55d4c8a02000 r--p 00000000 fd:01 1311234                    /usr/bin/cat
55d4c8a02000-55d4c8a07000 r-xp 00002000 fd:01 1311234                    /usr/bin/cat
55d4c8a0c000-55d4c8a0d000 rw-p 0000b000 fd:01 1311234                    /usr/bin/cat
55d4ca3e1000-55d4ca402000 rw-p 00000000 00:00 0                          [heap]
7f0b3c000000-7f0b3c021000 rw-p 00000000 00:00 0 
7f0b40a00000-7f0b40a22000 r--p 00000000 fd:01 1315093                    /usr/lib/x86_64-linux-gnu/libc.so.6
7f0b40c1f000-7f0b40c2c000 rw-p 00000000 00:00 0 
7f0b40d00000-7f0b40d10000 rw-s 00000000 00:01 4242                       /dev/zero (deleted)
7ffd1c9d4000-7ffd1c9f5000 rw-p 00000000 00:00 0                          [stack]
7ffd1c9f9000-7ffd1c9fd000 r--p 00000000 00:00 0                          [vvar]
7ffd1c9fd000-7ffd1c9ff000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
garbage line
";

    #[test]
    fn anon_ranges_are_private_writable_unnamed() {
        let r = parse_anon_ranges(MAPS);
        let starts: Vec<u64> = r.iter().map(|r| r.start).collect();
        assert_eq!(
            starts,
            vec![
                0x55d4ca3e1000,
                0x7f0b3c000000,
                0x7f0b40c1f000,
                0x7ffd1c9d4000
            ]
        );
        assert_eq!(r[0].len, 0x21000);
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
}
