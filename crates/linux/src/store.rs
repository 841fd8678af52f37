//! The launch-profile store: one JSON file per app under
//! `<state_dir>/profiles/<app>.json`, written atomically (format in docs/recording.md).
//!
//! A corrupt, foreign or future-version file is reported and skipped by
//! [`ProfileStore::load_all`], never fatal: the daemon keeps working with
//! the profiles it can read. [`write_atomic`] is the one atomic-write helper
//! of the crate (temp file in the same directory, fsync, rename, fsync of the
//! directory), so a crash leaves either the old or the new file, never half.

use appflow_core::profile::{LaunchObservation, LaunchProfile, ProfileError};
use appflow_core::reuse::{UsageError, UsageModel};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// The profiles' subdirectory of the state directory.
pub const PROFILES_DIR: &str = "profiles";
/// The killer's reuse predictor in the state directory (beside the
/// profiles, not among them).
pub const USAGE_FILE: &str = "usage.json";
pub use appflow_core::MAX_APP_NAME_BYTES;

/// Why a profile could not be stored or loaded.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The app name cannot be a profile file name.
    #[error("bad app name {name:?}: {why}")]
    BadAppName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A profile file could not be understood.
    #[error("{}: {source}", path.display())]
    Profile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ProfileError,
    },
    /// A profile file, or the profiles directory, cannot be read: not a
    /// regular file (a directory, a FIFO), not UTF-8 text, or refused by
    /// the system (permissions, an I/O error).
    #[error("{}: cannot read: {source}", path.display())]
    Unreadable {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The saved reuse predictor cannot be used.
    #[error("{}: {source}", path.display())]
    Usage {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: UsageError,
    },
    /// A profile file holds another app's profile.
    #[error("{}: holds the profile of app {found:?}, not {expected:?}", path.display())]
    WrongApp {
        /// The file.
        path: PathBuf,
        /// App expected from the file name.
        expected: String,
        /// App found inside.
        found: String,
    },
}

impl StoreError {
    /// True when the error is the user's input (a bad app name, or a
    /// profile file or directory that is unreadable, malformed, foreign,
    /// of another version or of another app), so the binary exits 2.
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            StoreError::BadAppName { .. }
                | StoreError::Unreadable { .. }
                | StoreError::Profile { .. }
                | StoreError::Usage { .. }
                | StoreError::WrongApp { .. }
        )
    }
}

fn unreadable(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Unreadable {
        path: path.to_path_buf(),
        source,
    }
}

/// A profile file's text. Only a regular file is opened (a FIFO would
/// block the reader for ever, a directory cannot be read), and its bytes
/// must be UTF-8; every failure is [`StoreError::Unreadable`].
fn read_text(path: &Path) -> Result<String, StoreError> {
    let meta = std::fs::metadata(path).map_err(unreadable(path))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(unreadable(path)(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{kind}, not a profile"),
        )));
    }
    let bytes = std::fs::read(path).map_err(unreadable(path))?;
    String::from_utf8(bytes).map_err(|e| {
        unreadable(path)(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {}), not a profile",
                e.utf8_error().valid_up_to()
            ),
        ))
    })
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks that `name` can be used as a profile file name (the shared rule,
/// [`appflow_core::valid_app_name`]).
pub fn validate_app_name(name: &str) -> Result<(), StoreError> {
    appflow_core::valid_app_name(name).map_err(|why| StoreError::BadAppName {
        name: name.to_string(),
        why,
    })
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically: a temp file in the same directory is
/// written, fsynced, renamed over `path`, and the directory is fsynced so the
/// rename itself is durable. On error the temp file is removed and `path` is
/// untouched. The parent directory must exist.
///
/// The file is private (mode 0600): launch profiles, metrics, traces and the
/// journal say which apps a user runs and when.
///
/// A `path` that exists and is not a regular file (`/dev/null`, a FIFO, a
/// terminal) is written in place: a rename would replace the device node
/// with a file, and as root that breaks every later reader of `/dev/null`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return std::fs::write(path, bytes);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `dir` (and missing parents) private to its owner, mode 0700; an
/// existing `dir` is set to 0700.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Removes the temp files [`write_atomic`] left in `dir` when its writer
/// was killed mid-write (`.NAME.tmp.PID.N` of a process that no longer
/// exists); a live writer's temp file is kept. Returns how many went.
pub fn remove_stale_temp_files(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = temp_file_writer(&name.to_string_lossy()) else {
            continue;
        };
        let alive = pid == std::process::id()
            || nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None)
                != Err(nix::errno::Errno::ESRCH);
        if !alive && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The writer's PID of a [`write_atomic`] temp file name (`.NAME.tmp.PID.N`).
fn temp_file_writer(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let (_, tail) = rest.rsplit_once(".tmp.")?;
    let (pid, n) = tail.split_once('.')?;
    n.parse::<u64>().ok()?;
    pid.parse::<u32>()
        .ok()
        .filter(|&p| p > 0 && p <= i32::MAX as u32)
}

/// The profiles of one state directory.
#[derive(Debug, Clone)]
pub struct ProfileStore {
    dir: PathBuf,
}

/// What [`ProfileStore::load_all`] found: the readable profiles (sorted by
/// app) and the files it skipped with the reason.
pub type Loaded = (Vec<LaunchProfile>, Vec<(PathBuf, StoreError)>);

impl ProfileStore {
    /// The store of `<state_dir>/profiles`. Nothing is created until the first save.
    pub fn open(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join(PROFILES_DIR),
        }
    }

    /// The profiles directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `app`'s profile (the name is validated).
    pub fn path_of(&self, app: &str) -> Result<PathBuf, StoreError> {
        validate_app_name(app)?;
        Ok(self.dir.join(format!("{app}.json")))
    }

    fn read_file(path: &Path, expected_app: &str) -> Result<LaunchProfile, StoreError> {
        let text = read_text(path)?;
        let p = LaunchProfile::from_json(&text).map_err(|source| StoreError::Profile {
            path: path.to_path_buf(),
            source,
        })?;
        if p.app != expected_app {
            return Err(StoreError::WrongApp {
                path: path.to_path_buf(),
                expected: expected_app.to_string(),
                found: p.app,
            });
        }
        Ok(p)
    }

    /// Loads `app`'s profile; `None` when it has none yet. A corrupt file is an error here.
    pub fn load(&self, app: &str) -> Result<Option<LaunchProfile>, StoreError> {
        let path = self.path_of(app)?;
        if !path.try_exists().map_err(unreadable(&path))? {
            return Ok(None);
        }
        Self::read_file(&path, app).map(Some)
    }

    /// Loads every `*.json` profile. Unreadable, corrupt, foreign,
    /// future-version and misnamed files are skipped (with a warning) and
    /// listed; only an unreadable directory is an error. A missing directory
    /// is an empty store.
    pub fn load_all(&self) -> Result<Loaded, StoreError> {
        let mut profiles = Vec::new();
        let mut skipped = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((profiles, skipped)),
            Err(e) => return Err(unreadable(&self.dir)(e)),
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(unreadable(&self.dir))?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue; // temp files of write_atomic, editor leftovers
            }
            paths.push(path);
        }
        paths.sort();
        for path in paths {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            match Self::read_file(&path, &stem) {
                Ok(p) => profiles.push(p),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "skipping profile file");
                    skipped.push((path, e));
                }
            }
        }
        Ok((profiles, skipped))
    }

    /// Saves a profile atomically, creating the directory when needed. Returns its path.
    pub fn save(&self, profile: &LaunchProfile) -> Result<PathBuf, StoreError> {
        let path = self.path_of(&profile.app)?;
        profile.validate().map_err(|source| StoreError::Profile {
            path: path.clone(),
            source,
        })?;
        create_private_dir(&self.dir).map_err(io_err(&self.dir))?;
        write_atomic(&path, profile.to_json().as_bytes()).map_err(io_err(&path))?;
        Ok(path)
    }

    /// Merges one observed launch into `app`'s profile (a new one when it has
    /// none) and saves it. A corrupt existing file is an error, not replaced.
    pub fn record(&self, app: &str, obs: &LaunchObservation) -> Result<LaunchProfile, StoreError> {
        let mut p = self.load(app)?.unwrap_or_else(|| LaunchProfile::new(app));
        p.merge_launch(obs);
        self.save(&p)?;
        Ok(p)
    }

    /// Counts a launch of `app` that was not recorded (its profile is
    /// settled; `LaunchProfile::records_next_launch`). No profile: nothing
    /// to count.
    pub fn note_unrecorded(&self, app: &str) -> Result<Option<LaunchProfile>, StoreError> {
        let Some(mut p) = self.load(app)? else {
            return Ok(None);
        };
        p.unrecorded_launches = p.unrecorded_launches.saturating_add(1);
        self.save(&p)?;
        Ok(Some(p))
    }
}

/// Loads the killer's reuse predictor from `<state_dir>/usage.json`
/// (`None` when there is none yet). A corrupt, foreign or future file is
/// an error the caller reports and skips: the killer then starts learning
/// anew, never fatal.
pub fn load_usage(state_dir: &Path) -> Result<Option<UsageModel>, StoreError> {
    let path = state_dir.join(USAGE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    UsageModel::from_json(&text)
        .map(Some)
        .map_err(|source| StoreError::Usage { path, source })
}

/// The saved reuse predictor for a daemon start. A file that cannot be
/// used (corrupt, foreign, another version, out of bounds) is logged with
/// what is wrong and moved aside as `usage.json.bad-<unix ms>` (kept, not
/// lost; a dry run leaves it in place); the daemon then learns anew.
pub fn restore_usage(state_dir: &Path, dry_run: bool, unix_ms: u64) -> Option<UsageModel> {
    match load_usage(state_dir) {
        Ok(m) => m,
        Err(e) => {
            let path = state_dir.join(USAGE_FILE);
            let aside = state_dir.join(format!("{USAGE_FILE}.bad-{unix_ms}"));
            if !dry_run && e.is_input_error() && std::fs::rename(&path, &aside).is_ok() {
                tracing::warn!(error = %e, moved_to = %aside.display(),
                    "reuse predictor not restored; learning anew");
            } else {
                tracing::warn!(error = %e, "reuse predictor not restored; learning anew");
            }
            None
        }
    }
}

/// Saves the killer's reuse predictor atomically. Its size is bounded: per
/// app by the model, in apps by the scheduler's app table.
pub fn save_usage(state_dir: &Path, m: &UsageModel) -> Result<PathBuf, StoreError> {
    let path = state_dir.join(USAGE_FILE);
    create_private_dir(state_dir).map_err(io_err(state_dir))?;
    let text = serde_json::to_string(m).map_err(|e| StoreError::Usage {
        path: path.clone(),
        source: UsageError::Malformed(e.to_string()),
    })?;
    write_atomic(&path, text.as_bytes()).map_err(io_err(&path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reuse_predictor_survives_a_restart_and_a_bad_file_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_usage(dir.path()).unwrap().is_none());
        let mut m = UsageModel::new();
        for d in 0..10u64 {
            m.record_open("chat", d * 86_400_000 + 9 * 3_600_000, 1_800_000);
            m.record_open("game", d * 86_400_000 + 21 * 3_600_000, 1_800_000);
        }
        save_usage(dir.path(), &m).unwrap();
        let back = load_usage(dir.path()).unwrap().unwrap();
        assert_eq!(back, m);
        let now = 10 * 86_400_000 + 15 * 3_600_000;
        let (a, b) = (
            m.estimate("game", Some("chat"), now, 7 * 86_400_000),
            back.estimate("game", Some("chat"), now, 7 * 86_400_000),
        );
        assert_eq!(a, b);
        // A foreign or corrupt file is an error to report, not a panic.
        std::fs::write(
            dir.path().join(USAGE_FILE),
            "{\"format\":\"x\",\"version\":9}",
        )
        .unwrap();
        let e = load_usage(dir.path()).unwrap_err();
        assert!(
            e.is_input_error() && e.to_string().contains("usage.json"),
            "{e}"
        );
        std::fs::write(dir.path().join(USAGE_FILE), "garbage").unwrap();
        let e = load_usage(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("usage.json") && e.contains("not a usage model"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_predictor_file_is_set_aside_and_the_daemon_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(USAGE_FILE);
        // Missing: nothing to restore.
        assert!(restore_usage(dir.path(), false, 7).is_none());
        // A good one comes back whole.
        let mut m = UsageModel::new();
        m.record_open("chat", 9 * 3_600_000, 60_000);
        save_usage(dir.path(), &m).unwrap();
        assert_eq!(restore_usage(dir.path(), false, 7), Some(m.clone()));
        // A foreign one: refused, kept aside, and the next start is fresh.
        let foreign = "{\"format\":\"other\",\"version\":1,\"apps\":{}}";
        std::fs::write(&file, foreign).unwrap();
        let e = load_usage(dir.path()).unwrap_err().to_string();
        assert!(e.contains("usage.json") && e.contains("format"), "{e}");
        assert!(restore_usage(dir.path(), true, 8).is_none());
        assert!(file.exists(), "a dry run moves nothing");
        assert!(restore_usage(dir.path(), false, 8).is_none());
        assert!(!file.exists());
        let aside = dir.path().join(format!("{USAGE_FILE}.bad-8"));
        assert_eq!(std::fs::read_to_string(aside).unwrap(), foreign);
        assert!(load_usage(dir.path()).unwrap().is_none());
        // Truncated mid-write (as no atomic write leaves it, but a disk may).
        let full = serde_json::to_string(&m).unwrap();
        std::fs::write(&file, &full[..full.len() / 2]).unwrap();
        assert!(restore_usage(dir.path(), false, 9).is_none());
        assert!(dir.path().join(format!("{USAGE_FILE}.bad-9")).exists());
        // Saving anew after a fresh start works.
        save_usage(dir.path(), &m).unwrap();
        assert_eq!(restore_usage(dir.path(), false, 10), Some(m));
    }
}
