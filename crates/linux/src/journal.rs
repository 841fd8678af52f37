//! The journal of changed settings: every sysctl or cgroup file the daemon
//! changes is recorded with its original value in `<state_dir>/journal.json`
//! BEFORE the change, and written back on exit. A journal left behind by a
//! crashed daemon is replayed (every original value restored) and removed
//! when the next daemon starts. It is a [`Ledger`] of [`Entry`]s, the same
//! undo ledger the testbed keeps of what it builds.
//!
//! Files that vanished in between (a cgroup removed by its owner) are not an
//! error on restore: there is nothing left to restore.

use crate::ledger::{Ledger, LedgerError, LedgerFile, Undo, Undone};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The `format` tag of the journal file.
pub const JOURNAL_FORMAT: &str = "appflow-journal";

/// A journal failure.
#[derive(Debug, Error)]
pub enum JournalError {
    /// Reading or writing a setting failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The journal file itself could not be read, written or parsed.
    #[error("journal {0}")]
    Ledger(#[from] LedgerError),
}

/// One changed setting and its original value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The sysctl or cgroup file.
    pub path: PathBuf,
    /// Its content before the first change (trimmed).
    pub original: String,
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

/// Writes original values back.
#[derive(Debug, Default)]
pub struct RestoreSetting;

impl Undo<Entry> for RestoreSetting {
    type Error = JournalError;
    fn undo(&mut self, e: &Entry) -> Result<Undone, JournalError> {
        match write_setting(&e.path, &e.original) {
            Ok(()) => Ok(Undone::Done),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Undone::Gone),
            Err(err) => Err(io("restoring setting", &e.path)(err)),
        }
    }
}

/// The live journal.
#[derive(Debug)]
pub struct Journal {
    ledger: Ledger<Entry, RestoreSetting>,
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
        if !dry_run {
            replay = Self::replay(path)?;
        }
        let ledger = Ledger::new(path.to_path_buf(), JOURNAL_FORMAT, RestoreSetting);
        Ok((Self { ledger, dry_run }, replay))
    }

    /// Restores every setting of the journal file at `path` (latest change
    /// first). The file is removed once nothing is left to restore; what
    /// could not be restored stays in it.
    pub fn replay(path: &Path) -> Result<Replay, JournalError> {
        let Some(file) = LedgerFile::<Entry>::read(path, JOURNAL_FORMAT)? else {
            return Ok(Replay::default());
        };
        let mut left = Ledger::resume(
            path.to_path_buf(),
            JOURNAL_FORMAT,
            file.entries,
            RestoreSetting,
        );
        let r = left.undo_all();
        Ok(Replay {
            restored: r.done,
            vanished: r.gone.into_iter().map(|e| e.path).collect(),
            failed: r
                .failed
                .into_iter()
                .map(|(e, err)| (e.path, err.to_string()))
                .collect(),
        })
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        self.ledger.path()
    }

    /// Settings changed and not yet restored.
    pub fn entries(&self) -> &[Entry] {
        self.ledger.entries()
    }

    /// Whether `file` has been changed and not restored.
    pub fn is_changed(&self, file: &Path) -> bool {
        self.entries().iter().any(|e| e.path == file)
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
            if let Some(dir) = self.path().parent() {
                crate::store::create_private_dir(dir).map_err(io("creating", dir))?;
            }
            let entry = Entry {
                path: file.to_path_buf(),
                original: original.trim().to_string(),
            };
            if let Err(e) = self.ledger.record(entry.clone()) {
                // Not journaled, so not changed.
                let _ = self.ledger.forget(&entry);
                return Err(e.into());
            }
        }
        write_setting(file, value).map_err(io("writing setting", file))?;
        tracing::debug!(file = %file.display(), value, "setting changed");
        Ok(true)
    }

    /// Writes `file`'s original value back and forgets it. A file that no
    /// longer exists counts as restored.
    pub fn restore(&mut self, file: &Path) -> Result<(), JournalError> {
        let Some(e) = self.entries().iter().find(|e| e.path == file).cloned() else {
            return Ok(());
        };
        self.ledger.undo(&e).map(|_| ())
    }

    /// Restores every changed setting (latest first). Returns the failures;
    /// the journal file stays behind if any (the next start replays it).
    pub fn restore_all(&mut self) -> Vec<JournalError> {
        self.ledger
            .undo_all()
            .failed
            .into_iter()
            .map(|(_, e)| e)
            .collect()
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
