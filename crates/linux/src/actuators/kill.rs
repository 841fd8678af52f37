//! The live `KillMechanism` (the AppFlow paper §4.3; the lmkd reaper's way):
//! `pidfd_open` first, then check that the pidfd still names the process the
//! daemon ranked (its start time, recorded at scan time, must match: no PID
//! reuse race), optionally freeze it (v1 freezer) so it stops allocating,
//! `pidfd_send_signal(SIGKILL)`, thaw, then `process_mrelease` to free its
//! memory at once (degrades to waiting for the exit when the kernel lacks it).

use appflow_core::mechanism::{KillMechanism, KillOutcome, MechError};
use appflow_core::reason::Reason;
use appflow_core::scheduler::ProcId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The live killer.
#[derive(Debug)]
pub struct LiveKiller {
    proc_root: PathBuf,
    dry_run: bool,
    freeze_first: bool,
    /// pid → start time the daemon saw when it ranked the process.
    identity: BTreeMap<u32, u64>,
    mrelease_missing: bool,
    /// Kills performed since start.
    pub kills: u64,
}

fn failed(what: impl Into<String>, errno: i32) -> MechError {
    MechError::Failed {
        what: what.into(),
        detail: std::io::Error::from_raw_os_error(errno).to_string(),
    }
}

impl LiveKiller {
    /// A live killer; `dry_run` only logs.
    pub fn new(proc_root: &Path, dry_run: bool, freeze_first: bool) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            dry_run,
            freeze_first,
            identity: BTreeMap::new(),
            mrelease_missing: false,
            kills: 0,
        }
    }

    /// Records the identity (start time) of a process the daemon may kill.
    /// A pid without a recorded identity is never killed.
    pub fn expect(&mut self, pid: u32, start_time: u64) {
        self.identity.insert(pid, start_time);
    }

    /// Forgets identities of pids not in `alive`.
    pub fn retain(&mut self, alive: &dyn Fn(u32) -> bool) {
        self.identity.retain(|p, _| alive(*p));
    }

    fn freeze(&self, pid: u32) -> Option<PathBuf> {
        let dir = PathBuf::from(format!("/sys/fs/cgroup/freezer/appflow-kill-{pid}"));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok()
            && std::fs::write(dir.join("freezer.state"), "FROZEN").is_ok();
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(dir)
    }

    fn thaw_and_remove(dir: &Path) {
        let _ = std::fs::write(dir.join("freezer.state"), "THAWED");
        // The cgroup can be removed once the killed task has left it.
        for _ in 0..200 {
            if std::fs::remove_dir(dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        tracing::warn!(cgroup = %dir.display(), "freezer cgroup still busy; left behind");
    }
}

impl KillMechanism for LiveKiller {
    fn kill(&mut self, id: ProcId, reason: Reason) -> Result<KillOutcome, MechError> {
        let pid = id.pid;
        let expected = id.start_time;
        if self.identity.get(&pid) != Some(&expected) {
            return Err(MechError::Failed {
                what: format!("kill {pid}"),
                detail: "not a scanned process with this start time; refused".into(),
            });
        }
        if self.dry_run {
            tracing::info!(pid, reason = %reason, code = reason.code(), "dry-run: would kill");
            return Ok(KillOutcome { reaped: false });
        }
        let fd = match super::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(libc::ESRCH) => return Err(MechError::Vanished(pid)),
            Err(libc::ENOSYS) => return Err(MechError::Unsupported("pidfd".into())),
            Err(e) => return Err(failed(format!("pidfd_open({pid})"), e)),
        };
        // The pidfd now pins the process; check it is the one that was ranked.
        match super::read_start_time(&self.proc_root, pid) {
            Some(t) if t == expected => {}
            _ => return Err(MechError::Vanished(pid)),
        }
        let frozen = if self.freeze_first {
            self.freeze(pid)
        } else {
            None
        };
        let sent = super::pidfd_send_signal(&fd, libc::SIGKILL);
        if let Some(dir) = &frozen {
            Self::thaw_and_remove(dir);
        }
        match sent {
            Ok(()) => {}
            Err(libc::ESRCH) => return Err(MechError::Vanished(pid)),
            Err(e) => return Err(failed(format!("pidfd_send_signal({pid}, SIGKILL)"), e)),
        }
        self.kills += 1;
        self.identity.remove(&pid);
        let reaped = if self.mrelease_missing {
            false
        } else {
            // The signal is delivered asynchronously: retry briefly while the
            // task is not yet marked as exiting (EINVAL).
            let mut reaped = false;
            for _ in 0..20 {
                match super::process_mrelease(&fd) {
                    Ok(()) => {
                        reaped = true;
                        break;
                    }
                    Err(libc::ENOSYS) => {
                        tracing::warn!(
                            feature = "process_mrelease",
                            "kernel lacks process_mrelease: memory comes back when the victim exits"
                        );
                        self.mrelease_missing = true;
                        break;
                    }
                    Err(libc::EINVAL) => std::thread::sleep(std::time::Duration::from_millis(1)),
                    // ESRCH: already gone, memory already freed.
                    Err(_) => break,
                }
            }
            reaped
        };
        Ok(KillOutcome { reaped })
    }
}
