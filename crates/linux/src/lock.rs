//! The single-instance lock of a state directory: an exclusive `flock` on
//! `<state_dir>/daemon.lock`, taken before the daemon touches anything
//! (journal replay, settings, socket). A second daemon on the same state
//! directory finds the lock held and stops with a message naming the
//! holder, leaving the first one's settings and journal alone. The kernel
//! drops the lock when its holder exits, however it exits.

use crate::store::create_private_dir;
use appflow_core::InputError;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside the state directory.
pub const LOCK_FILE: &str = "daemon.lock";

/// A held state-directory lock (released on drop or exit).
#[derive(Debug)]
pub struct StateLock {
    path: PathBuf,
    _file: Flock<File>,
}

impl StateLock {
    /// Takes the lock of `state_dir`, creating the directory (mode 0700)
    /// when `create` is set. Held elsewhere: an [`InputError`] naming the
    /// holder's PID (written into the file by the holder).
    pub fn acquire(state_dir: &Path, create: bool) -> anyhow::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        if create {
            create_private_dir(state_dir)
                .map_err(|e| anyhow::anyhow!("daemon.state_dir {}: {e}", state_dir.display()))?;
        }
        let path = state_dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("lock file {}: {e}", path.display()))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => f,
            Err((mut f, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = f.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(InputError::new(format!(
                    "another appflow daemon{} holds {}; refusing to start (nothing was changed)",
                    if holder.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {holder})")
                    },
                    path.display()
                ))
                .into());
            }
            Err((_, e)) => anyhow::bail!("locking {}: {e}", path.display()),
        };
        // The holder's PID, for the message of the next one.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(*file, "{}", std::process::id());
        Ok(Self { path, _file: file })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_until_the_first_goes() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let first = StateLock::acquire(&state, true).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // flock locks belong to the open file description: a second open
        // in the same process conflicts like another process would.
        let e = StateLock::acquire(&state, true).unwrap_err();
        assert!(e.downcast_ref::<InputError>().is_some(), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())) && msg.contains(LOCK_FILE),
            "{msg}"
        );
        drop(first);
        StateLock::acquire(&state, true).unwrap();
    }

    #[test]
    fn missing_state_dir_without_create_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(StateLock::acquire(&dir.path().join("none"), false).is_err());
    }
}
