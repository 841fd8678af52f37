//! The journal of changed settings (SPEC §9): every sysctl or cgroup file the
//! daemon changes is recorded with its original value in
//! `<state_dir>/journal.json` (atomic write) BEFORE the change, and written
//! back on exit. A journal left behind by a crashed daemon is replayed (every
//! original value restored) and removed when the next daemon starts.
//!
//! Files that vanished in between (a cgroup removed by its owner) are not an
//! error on restore: there is nothing left to restore.

use crate::store::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The `format` tag of the journal file.
pub const JOURNAL_FORMAT: &str = "appflow-journal";
/// Journal schema version.
pub const JOURNAL_VERSION: u32 = 1;

/// A journal failure.
#[derive(Debug, Error)]
pub enum JournalError {
    /// Reading or writing a setting or the journal failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The journal file is not a journal.
    #[error("journal {path} is corrupt: {msg}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
}

/// One changed setting and its original value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The sysctl or cgroup file.
    pub path: PathBuf,
    /// Its content before the first change (trimmed).
    pub original: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct JournalFile {
    format: String,
    version: u32,
    /// PID of the daemon that wrote it.
    pid: u32,
    entries: Vec<Entry>,
}

/// What replaying a left-behind journal did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Replay {
    /// Settings written back.
    pub restored: Vec<Entry>,
    /// Settings whose file no longer exists.
    pub vanished: Vec<PathBuf>,
    /// Settings that could not be written back (path, error).
    pub failed: Vec<(PathBuf, String)>,
}

/// The live journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    entries: Vec<Entry>,
    dry_run: bool,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> JournalError + 'a {
    move |source| JournalError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Writes a value into a sysctl/cgroup file (O_TRUNC is harmless on kernel
/// files and needed on the plain files of tests; one write sets the value).
fn write_setting(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(value.as_bytes())
}

impl Journal {
    /// Opens the journal at `path`. A journal left behind by a crashed daemon
    /// is replayed first (its original values written back) and removed.
    /// In dry-run mode nothing is replayed, written or changed.
    pub fn open(path: &Path, dry_run: bool) -> Result<(Self, Replay), JournalError> {
        let mut replay = Replay::default();
        if !dry_run && path.exists() {
            replay = Self::replay(path)?;
        }
        Ok((
            Self {
                path: path.to_path_buf(),
                entries: Vec::new(),
                dry_run,
            },
            replay,
        ))
    }

    /// Restores every setting of the journal file at `path` (latest change
    /// first) and removes the file.
    pub fn replay(path: &Path) -> Result<Replay, JournalError> {
        let text = std::fs::read_to_string(path).map_err(io("reading journal", path))?;
        let corrupt = |msg: String| JournalError::Corrupt {
            path: path.to_path_buf(),
            msg,
        };
        let file: JournalFile = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if file.format != JOURNAL_FORMAT || file.version != JOURNAL_VERSION {
            return Err(corrupt(format!(
                "format {:?} version {} (expected {JOURNAL_FORMAT:?} {JOURNAL_VERSION})",
                file.format, file.version
            )));
        }
        let mut replay = Replay::default();
        for e in file.entries.iter().rev() {
            match write_setting(&e.path, &e.original) {
                Ok(()) => replay.restored.push(e.clone()),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    replay.vanished.push(e.path.clone())
                }
                Err(err) => replay.failed.push((e.path.clone(), err.to_string())),
            }
        }
        if replay.failed.is_empty() {
            std::fs::remove_file(path).map_err(io("removing journal", path))?;
        }
        Ok(replay)
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Settings changed and not yet restored.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether `file` has been changed and not restored.
    pub fn is_changed(&self, file: &Path) -> bool {
        self.entries.iter().any(|e| e.path == file)
    }

    fn persist(&self) -> Result<(), JournalError> {
        if self.entries.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(io("removing journal", &self.path)(e))
                }
                _ => Ok(()),
            };
        }
        if let Some(dir) = self.path.parent() {
            crate::store::create_private_dir(dir).map_err(io("creating", dir))?;
        }
        let file = JournalFile {
            format: JOURNAL_FORMAT.into(),
            version: JOURNAL_VERSION,
            pid: std::process::id(),
            entries: self.entries.clone(),
        };
        let text = serde_json::to_string_pretty(&file).expect("journal serialises");
        write_atomic(&self.path, text.as_bytes()).map_err(io("writing journal", &self.path))
    }

    /// Sets `file` to `value`, recording its original value in the journal
    /// first (only the first change of a file records it). Returns false in
    /// dry-run mode (nothing changed).
    pub fn set(&mut self, file: &Path, value: &str) -> Result<bool, JournalError> {
        if self.dry_run {
            tracing::info!(file = %file.display(), value, "dry-run: would set");
            return Ok(false);
        }
        if !self.is_changed(file) {
            let original = std::fs::read_to_string(file).map_err(io("reading setting", file))?;
            self.entries.push(Entry {
                path: file.to_path_buf(),
                original: original.trim().to_string(),
            });
            if let Err(e) = self.persist() {
                self.entries.pop();
                return Err(e);
            }
        }
        write_setting(file, value).map_err(io("writing setting", file))?;
        tracing::debug!(file = %file.display(), value, "setting changed");
        Ok(true)
    }

    /// Writes `file`'s original value back and forgets it. A file that no
    /// longer exists counts as restored.
    pub fn restore(&mut self, file: &Path) -> Result<(), JournalError> {
        let Some(i) = self.entries.iter().position(|e| e.path == file) else {
            return Ok(());
        };
        let e = self.entries[i].clone();
        match write_setting(&e.path, &e.original) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("restoring setting", &e.path)(err));
            }
            _ => {}
        }
        self.entries.remove(i);
        self.persist()
    }

    /// Restores every changed setting (latest first). Returns the failures;
    /// the journal file stays behind if any (the next start replays it).
    pub fn restore_all(&mut self) -> Vec<JournalError> {
        let mut errors = Vec::new();
        let paths: Vec<PathBuf> = self.entries.iter().rev().map(|e| e.path.clone()).collect();
        for p in paths {
            if let Err(e) = self.restore(&p) {
                errors.push(e);
            }
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "appflow-journal-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn set_records_before_change_and_restore_all_puts_back() {
        let d = tmpdir();
        let a = d.join("swappiness");
        std::fs::write(&a, "60\n").unwrap();
        let jp = d.join("state/journal.json");
        let (mut j, replay) = Journal::open(&jp, false).unwrap();
        assert_eq!(replay, Replay::default());
        assert!(j.set(&a, "0").unwrap());
        assert!(j.set(&a, "10").unwrap());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "10");
        // The journal holds the value from before the first change.
        let text = std::fs::read_to_string(&jp).unwrap();
        assert!(text.contains("\"original\": \"60\""), "{text}");
        assert!(j.restore_all().is_empty());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "60");
        assert!(!jp.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_journal_left_behind_is_replayed_on_open() {
        let d = tmpdir();
        let a = d.join("a");
        let b = d.join("gone");
        std::fs::write(&a, "60").unwrap();
        std::fs::write(&b, "1").unwrap();
        let jp = d.join("journal.json");
        {
            let (mut j, _) = Journal::open(&jp, false).unwrap();
            j.set(&a, "0").unwrap();
            j.set(&b, "0").unwrap();
            // Crash: the journal is dropped without restore.
        }
        std::fs::remove_file(&b).unwrap();
        let (j, replay) = Journal::open(&jp, false).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "60");
        assert_eq!(replay.restored.len(), 1);
        assert_eq!(replay.vanished, vec![b]);
        assert!(j.entries().is_empty());
        assert!(!jp.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dry_run_changes_nothing_and_corrupt_journal_is_an_error() {
        let d = tmpdir();
        let a = d.join("a");
        std::fs::write(&a, "60").unwrap();
        let jp = d.join("journal.json");
        let (mut j, _) = Journal::open(&jp, true).unwrap();
        assert!(!j.set(&a, "0").unwrap());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "60");
        assert!(!jp.exists());
        std::fs::write(&jp, "{\"format\":\"other\"}").unwrap();
        let e = Journal::open(&jp, false).unwrap_err().to_string();
        assert!(e.contains("journal.json"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
