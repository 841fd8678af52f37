//! Launch readahead: the readahead of the storage devices that hold a
//! launching app's streamed files, raised to the stream's read size while
//! the launch lasts (the AppFlow paper §4.1: during launch, large files are read
//! "with large I/O block size"), through a journal of its own so that a
//! crashed daemon's change is undone at the next start.
//!
//! A file's device is its file system's `st_dev`. Its readahead is the
//! backing device's `read_ahead_kb` in sysfs: `/sys/class/bdi/MAJ:MIN/`
//! for a whole disk, a loop or FUSE device; for a partition, the disk it
//! belongs to (`/sys/dev/block/MAJ:MIN/partition` present, the parent
//! directory's `dev`). File systems without a backing device of their own
//! (tmpfs, overlay, btrfs' anonymous devices) have none: nothing is changed.
//!
//! The kernel gives an open file its readahead window when it is opened
//! (`file_ra_state_init`): an app that opened its files before the daemon
//! saw the launch would keep the device's old window. So the launching
//! processes' open files among the streamed ones are refreshed: each is
//! duplicated with `pidfd_getfd` (the same open file description; the
//! process is pinned by pidfd and start time) and advised
//! `POSIX_FADV_NORMAL`, which sets its window to the device's value of the
//! moment. The same is done when the value is restored. A file the app
//! only maps (its descriptor closed) cannot be reached: it keeps its window.

use crate::journal::{Entry, Journal, JournalError};
use appflow_core::scheduler::ProcId;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The journal file of the launch readahead in the daemon's state directory.
pub const READAHEAD_JOURNAL: &str = "readahead-journal.json";

/// The `read_ahead_kb` file of the device with number `dev`, if it has one.
pub fn readahead_file(sys_root: &Path, dev: u64) -> Option<PathBuf> {
    let (maj, min) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let bdi = |majmin: &str| {
        let f = sys_root.join(format!("class/bdi/{majmin}/read_ahead_kb"));
        f.is_file().then_some(f)
    };
    if let Some(f) = bdi(&format!("{maj}:{min}")) {
        return Some(f);
    }
    // A partition: the readahead is its disk's.
    let node = sys_root.join(format!("dev/block/{maj}:{min}"));
    if !node.join("partition").is_file() {
        return None;
    }
    let disk = std::fs::canonicalize(&node).ok()?.parent()?.to_path_buf();
    let majmin = std::fs::read_to_string(disk.join("dev")).ok()?;
    bdi(majmin.trim())
}

/// A `read_ahead_kb` value (KiB, as sysfs and the journal write it) in bytes.
pub fn kib_bytes(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().map(|k| k * 1024)
}

/// The readahead a `read_ahead_kb` file holds now, bytes.
pub fn read_window_bytes(read_ahead_kb: &Path) -> Option<u64> {
    kib_bytes(&std::fs::read_to_string(read_ahead_kb).ok()?)
}

/// The devices' readahead while launches stream, and its restore.
#[derive(Debug)]
pub struct LaunchReadahead {
    proc_root: PathBuf,
    sys_root: PathBuf,
    journal: Journal,
    /// The processes and files refreshed with the raised value (refreshed
    /// again at the restore).
    refreshed: Vec<(ProcId, BTreeSet<PathBuf>)>,
    dry_run: bool,
}

impl LaunchReadahead {
    /// Opens the journal in `state_dir`, restoring what a crashed daemon
    /// left raised. Returns the settings restored that way.
    pub fn open(
        state_dir: &Path,
        proc_root: &Path,
        sys_root: &Path,
        dry_run: bool,
    ) -> Result<(Self, Vec<PathBuf>), JournalError> {
        let (journal, replay) = Journal::open(&state_dir.join(READAHEAD_JOURNAL), dry_run)?;
        let restored = replay.restored.into_iter().map(|e| e.path).collect();
        Ok((
            Self {
                proc_root: proc_root.to_path_buf(),
                sys_root: sys_root.to_path_buf(),
                journal,
                refreshed: Vec::new(),
                dry_run,
            },
            restored,
        ))
    }

    /// Sets the readahead of every device holding one of `paths` to
    /// `bytes` (rounded up to whole KiB). Returns the devices changed; a
    /// file that cannot be read or has no device is skipped.
    pub fn raise(
        &mut self,
        paths: &[&str],
        procs: &[ProcId],
        bytes: u64,
    ) -> Result<u32, JournalError> {
        let files: BTreeSet<PathBuf> = paths
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .filter_map(|m| readahead_file(&self.sys_root, m.dev()))
            .collect();
        let kib = bytes.div_ceil(1024).max(4).to_string();
        let mut n = 0;
        for f in files {
            // Never lower a device whose own readahead is larger already.
            let own = read_window_bytes(&f);
            if !self.journal.is_changed(&f) && own.is_some_and(|b| b >= bytes) {
                continue;
            }
            if self.journal.set(&f, &kib)? {
                n += 1;
            }
        }
        if n > 0 {
            tracing::info!(devices = n, kib = kib.as_str(), "launch readahead raised");
        } else {
            tracing::debug!(
                kib = kib.as_str(),
                "launch readahead left alone: every device reads ahead as much already"
            );
        }
        if n > 0 && !self.dry_run {
            let wanted: BTreeSet<PathBuf> = paths.iter().map(PathBuf::from).collect();
            for &id in procs {
                let done = refresh_open_files(&self.proc_root, id, &wanted);
                if !done.is_empty() {
                    tracing::debug!(
                        pid = id.pid,
                        files = done.len(),
                        "open files' readahead refreshed"
                    );
                    self.refreshed.push((id, done));
                }
            }
        }
        Ok(n)
    }

    /// Restores every device's own readahead (and the window of the files
    /// refreshed when it was raised). Returns the failures (the journal
    /// keeps them; the next start retries).
    pub fn restore(&mut self) -> Vec<JournalError> {
        let errors = self.journal.restore_all();
        for (id, files) in std::mem::take(&mut self.refreshed) {
            refresh_open_files(&self.proc_root, id, &files);
        }
        errors
    }

    /// Devices raised and not yet restored, with their own values.
    pub fn entries(&self) -> &[Entry] {
        self.journal.entries()
    }

    /// The open files refreshed with the raised value, by process.
    pub fn refreshed(&self) -> &[(ProcId, BTreeSet<PathBuf>)] {
        &self.refreshed
    }
}

/// Advises `POSIX_FADV_NORMAL` on every open file of process `id` whose
/// path is in `wanted` (its window becomes its device's readahead of the
/// moment). Returns the paths refreshed; a process that is gone, or whose
/// files cannot be read, refreshes nothing.
fn refresh_open_files(
    proc_root: &Path,
    id: ProcId,
    wanted: &BTreeSet<PathBuf>,
) -> BTreeSet<PathBuf> {
    use std::os::fd::AsRawFd;
    let mut done = BTreeSet::new();
    let super::Pinned::Fd(pidfd) = super::pin_instance(proc_root, id.pid, id.start_time) else {
        return done;
    };
    let Ok(dir) = std::fs::read_dir(proc_root.join(format!("{}/fd", id.pid))) else {
        return done;
    };
    for e in dir.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if !wanted.contains(&target) {
            continue;
        }
        let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(dup) = super::pidfd_getfd(&pidfd, fd) else {
            continue;
        };
        // SAFETY: plain syscall on a descriptor we own.
        let r = unsafe { libc::posix_fadvise(dup.as_raw_fd(), 0, 0, libc::POSIX_FADV_NORMAL) };
        if r == 0 {
            done.insert(target);
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs tree as this kernel has it: a FUSE bdi (0:39), a disk sda
    /// (8:0) with a partition sda1 (8:1), and a tmpfs device (0:25) with none.
    fn sys_tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let w = |p: &str, s: &str| {
            let p = r.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("class/bdi/0:39/read_ahead_kb", "128\n");
        w("class/bdi/8:0/read_ahead_kb", "128\n");
        w("devices/pci0000:00/host0/block/sda/dev", "8:0\n");
        w("devices/pci0000:00/host0/block/sda/sda1/dev", "8:1\n");
        w("devices/pci0000:00/host0/block/sda/sda1/partition", "1\n");
        std::fs::create_dir_all(r.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/host0/block/sda/sda1",
            r.join("dev/block/8:1"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/host0/block/sda",
            r.join("dev/block/8:0"),
        )
        .unwrap();
        t
    }

    #[test]
    fn devices_resolve_to_their_readahead_file() {
        let t = sys_tree();
        let r = t.path();
        let dev = |maj, min| nix::sys::stat::makedev(maj, min);
        assert_eq!(
            readahead_file(r, dev(0, 39)),
            Some(r.join("class/bdi/0:39/read_ahead_kb"))
        );
        assert_eq!(
            readahead_file(r, dev(8, 0)),
            Some(r.join("class/bdi/8:0/read_ahead_kb"))
        );
        // The partition's readahead is its disk's.
        assert_eq!(
            readahead_file(r, dev(8, 1)),
            Some(r.join("class/bdi/8:0/read_ahead_kb"))
        );
        assert_eq!(readahead_file(r, dev(0, 25)), None);
    }
}
