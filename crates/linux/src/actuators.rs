//! The live mechanisms behind the core's traits (`appflow_core::mechanism`), each
//! with a dry-run mode that decides and logs but changes nothing:
//!
//! | module | trait | how |
//! |---|---|---|
//! | [`reclaim`] | `ReclaimMechanism` | domain swappiness through the [`crate::journal`], `process_madvise(MADV_PAGEOUT)` of private anonymous ranges, `posix_fadvise(DONTNEED)` |
//! | [`kill`] | `KillMechanism` | `pidfd_open`, identity check, optional v1 freezer, `pidfd_send_signal(SIGKILL)`, `process_mrelease` |
//! | [`readahead`] | `PreloadMechanism::set_launch_readahead` (held by the worker client) | the devices' `read_ahead_kb` through a journal of its own |
//! | [`switching`] | `PreloadMechanism` (switch prepaging, cold marking) | ASAP's windows from `/proc/PID/pagemap`; the worker prepages with `process_madvise(MADV_WILLNEED)` and marks Ariadne's cold sets with `process_madvise(MADV_COLD)` |
//! | [`preload`] | `PreloadMechanism` | a separate worker process (`appflow preload-worker`) inside the domain's cgroups, idle I/O class, nice 19: protected spans mapped over 2 MiB windows, brought in with `MADV_POPULATE_READ` on a huge-page mapping (1 MiB device requests) and `mlock`ed, periodic touching for standby spans |
//!
//! This module holds the raw syscalls the others share and the probe of the
//! kernel features they need ([`Features`]).

pub mod kill;
pub mod preload;
pub mod readahead;
pub mod reclaim;
pub mod switching;

use std::os::fd::{FromRawFd, OwnedFd};

/// `MADV_PAGEOUT` (Linux 5.4).
pub const MADV_PAGEOUT: i32 = 21;
/// `MADV_WILLNEED`: on swapped anonymous memory, reads the pages into the
/// swap cache without mapping them (process_madvise accepts it since 5.10).
pub const MADV_WILLNEED: i32 = libc::MADV_WILLNEED;
/// `MADV_COLD` (Linux 5.4): deactivates the pages (inactive LRU, accessed
/// bits cleared) so reclaim takes them first; no I/O by itself.
pub const MADV_COLD: i32 = libc::MADV_COLD;
/// `IOPRIO_CLASS_IDLE`.
pub const IOPRIO_CLASS_IDLE: i32 = 3;
const IOPRIO_CLASS_SHIFT: i32 = 13;
const IOPRIO_WHO_PROCESS: i32 = 1;

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `pidfd_open(pid, 0)` (syscall 434). Errors are raw errno values.
pub fn pidfd_open(pid: u32) -> Result<OwnedFd, i32> {
    // SAFETY: plain syscall with integer arguments; a non-negative result is a new fd we own.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    if r < 0 {
        Err(last_errno())
    } else {
        // SAFETY: r is a fresh file descriptor returned by the kernel.
        Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
    }
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)` (syscall 424).
pub fn pidfd_send_signal(pidfd: &OwnedFd, sig: i32) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: valid fd, null siginfo is allowed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// `process_mrelease(pidfd, 0)` (syscall 448, Linux 5.15).
pub fn process_mrelease(pidfd: &OwnedFd) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: integer arguments only.
    let r = unsafe { libc::syscall(libc::SYS_process_mrelease, pidfd.as_raw_fd(), 0u32) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// `process_madvise(pidfd, iov, n, advice, 0)` (syscall 440, Linux 5.10).
/// `ranges` are (address, length) in the target's address space. Returns the
/// bytes advised.
pub fn process_madvise(pidfd: &OwnedFd, ranges: &[(u64, u64)], advice: i32) -> Result<u64, i32> {
    use std::os::fd::AsRawFd;
    let iov: Vec<libc::iovec> = ranges
        .iter()
        .map(|&(a, l)| libc::iovec {
            iov_base: a as usize as *mut libc::c_void,
            iov_len: l as usize,
        })
        .collect();
    // SAFETY: the iovec array is valid for the call; the kernel only reads it
    // (the addresses are in the *target* process and are not dereferenced here).
    let r = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd.as_raw_fd(),
            iov.as_ptr(),
            iov.len(),
            advice,
            0u32,
        )
    };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(r as u64)
    }
}

/// Puts `pid` (0 = the caller) in the idle I/O class.
pub fn set_idle_io_priority(pid: u32) -> Result<(), i32> {
    let prio = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT;
    // SAFETY: integer arguments only.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, pid as i32, prio) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// Reads `pid`'s I/O priority class (for checks and tests).
pub fn io_priority_class(pid: u32) -> Result<i32, i32> {
    // SAFETY: integer arguments only.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, pid as i32) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok((r as i32) >> IOPRIO_CLASS_SHIFT)
    }
}

/// Sets the nice value of `pid` (0 = the caller).
pub fn set_nice(pid: u32, nice: i32) -> Result<(), i32> {
    // SAFETY: integer arguments only.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, nice) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

pub use crate::readers::read_start_time;

/// A pidfd pinned to one process instance, or why there is none.
#[derive(Debug)]
pub enum Pinned {
    /// A pidfd of exactly the instance asked for.
    Fd(OwnedFd),
    /// The instance is gone (exited, or its pid is another process's now).
    Gone,
    /// No pidfd could be opened (kernel without pidfd, fd limit): the caller
    /// re-reads the start time instead.
    Unavailable,
}

/// Opens a pidfd of the process instance (`pid`, `start_time`). The pidfd is
/// opened first, then the start time read through `proc_root`, then the
/// pidfd checked still running: the process the pidfd pins held the pid for
/// the whole read, so the start time read is its own.
pub fn pin_instance(proc_root: &std::path::Path, pid: u32, start_time: u64) -> Pinned {
    let fd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(libc::ESRCH) => return Pinned::Gone,
        Err(_) => return Pinned::Unavailable,
    };
    if read_start_time(proc_root, pid) != Some(start_time) {
        return Pinned::Gone;
    }
    if pidfds_exited(&[&fd])[0] {
        return Pinned::Gone;
    }
    Pinned::Fd(fd)
}

/// `pidfd_getfd(pidfd, fd, 0)` (syscall 438, Linux 5.6): a duplicate of
/// another process's file descriptor, sharing its open file description.
/// Errors are raw errno values.
pub fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall with integer arguments; a non-negative result is a new fd we own.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0u32) };
    if r < 0 {
        Err(last_errno())
    } else {
        // SAFETY: r is a fresh file descriptor returned by the kernel.
        Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
    }
}

/// Which of `fds` name processes that have exited (a pidfd polls readable
/// once its process exits), in one `poll` call that never blocks. When
/// `poll` itself fails every one is reported exited: the caller then
/// re-reads them, which is always safe.
pub fn pidfds_exited(fds: &[&OwnedFd]) -> Vec<bool> {
    use std::os::fd::AsRawFd;
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if polled.is_empty() {
        return Vec::new();
    }
    // SAFETY: `polled` is a valid array of pollfd of the given length; a
    // zero timeout never blocks.
    let r = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 0) };
    if r < 0 {
        return vec![true; fds.len()];
    }
    polled.iter().map(|p| p.revents != 0).collect()
}

/// fanotify_init with the flags the recorder uses; the group is closed at once.
fn probe_fanotify() -> Result<(), i32> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let r = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
            (libc::O_RDONLY | libc::O_CLOEXEC) as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(last_errno());
    }
    // SAFETY: r is a fresh descriptor we own.
    drop(unsafe { OwnedFd::from_raw_fd(r) });
    Ok(())
}

/// `cachestat` (Linux 6.5) on our own executable: ENOSYS when missing.
fn probe_cachestat() -> bool {
    use std::os::fd::AsFd;
    let Ok(f) = std::fs::File::open("/proc/self/exe") else {
        return false;
    };
    match crate::recorder::residency::cached_pages(f.as_fd(), 0, 0) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() != Some(libc::ENOSYS),
    }
}

/// Which kernel features the mechanisms found. Each missing one is named in
/// the log and the mechanism that needs it degrades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Features {
    /// pidfd_open (5.3).
    pub pidfd: bool,
    /// process_madvise (5.10).
    pub process_madvise: bool,
    /// process_mrelease (5.15).
    pub process_mrelease: bool,
    /// /proc/pressure/memory.
    pub psi: bool,
    /// cgroup v1 freezer at /sys/fs/cgroup/freezer.
    pub freezer_v1: bool,
    /// fanotify_init with permission events, as the recorder asks for it
    /// (errno when refused).
    pub fanotify: Result<(), i32>,
    /// Process connector subscription (errno when refused).
    pub cn_proc: Result<(), i32>,
    /// cachestat (6.5).
    pub cachestat: bool,
}

impl Features {
    /// Probes the running kernel (harmless calls on the daemon itself).
    pub fn probe(proc_root: &std::path::Path) -> Self {
        let me = std::process::id();
        let pidfd = pidfd_open(me);
        let (pidfd_ok, madv, mrel) = match &pidfd {
            Ok(fd) => {
                // A zero-length vector: ENOSYS when missing, else success/EINVAL.
                let madv = !matches!(process_madvise(fd, &[], libc::MADV_COLD), Err(libc::ENOSYS));
                // Our own, live process: EINVAL when supported, ENOSYS when not.
                let mrel = !matches!(process_mrelease(fd), Err(libc::ENOSYS));
                (true, madv, mrel)
            }
            Err(_) => (false, false, false),
        };
        Self {
            pidfd: pidfd_ok,
            process_madvise: madv,
            process_mrelease: mrel,
            psi: proc_root.join("pressure/memory").exists(),
            freezer_v1: std::path::Path::new("/sys/fs/cgroup/freezer/cgroup.procs").exists(),
            fanotify: probe_fanotify(),
            cn_proc: crate::procevents::ProcEvents::open()
                .map(drop)
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO)),
            cachestat: probe_cachestat(),
        }
    }

    /// Names of the missing features.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut m = Vec::new();
        for (ok, name) in [
            (self.pidfd, "pidfd"),
            (self.process_madvise, "process_madvise"),
            (self.process_mrelease, "process_mrelease"),
            (self.psi, "PSI"),
            (self.freezer_v1, "freezer"),
            (self.fanotify.is_ok(), "fanotify"),
            (self.cn_proc.is_ok(), "cn_proc"),
        ] {
            if !ok {
                m.push(name);
            }
        }
        m
    }
}

/// CLOCK_MONOTONIC now, ns (the clock of the process connector's event
/// times; the preload worker reports its stream's first byte on it).
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_finds_this_kernels_features() {
        let f = Features::probe(std::path::Path::new("/proc"));
        // The machine this project targets has all of them (see the brief);
        // on others the probe must simply not crash.
        if f.pidfd {
            assert!(pidfd_open(u32::MAX / 2).is_err());
        }
        let _ = f.missing();
    }
}
