//! The launch-profile store: one JSON file per app under
//! `<state_dir>/profiles/<app>.json`, written atomically (format in docs/recording.md).
//!
//! A corrupt, foreign or future-version file is reported and skipped by
//! [`ProfileStore::load_all`], never fatal: the daemon keeps working with
//! the profiles it can read. [`write_atomic`] is the one atomic-write helper
//! of the crate (temp file in the same directory, fsync, rename, fsync of the
//! directory), so a crash leaves either the old or the new file, never half.

use appflow_core::profile::{LaunchObservation, LaunchProfile, ProfileError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// The profiles' subdirectory of the state directory.
pub const PROFILES_DIR: &str = "profiles";
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
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
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
}
