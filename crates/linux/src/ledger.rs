//! The undo ledger shared by the daemon and the testbed: every change either
//! makes to the kernel is recorded in a JSON file (atomic write) so that it
//! can be undone — in reverse order, exactly once — by the same process on
//! exit, or by the next one after a crash.
//!
//! The daemon's [`crate::journal::Journal`] records a setting's original
//! value *before* changing it; the testbed's domain records a resource (loop
//! device, mount, cgroup, …) right *after* creating it. Both are a
//! `Ledger<E, U>` with their own entry type `E` and undo operation `U`.
//!
//! The file is `{"format": F, "version": 1, "pid": P, "entries": [...]}`;
//! it is removed when nothing is left to undo. Undo continues past failures
//! and keeps only what failed recorded, so a later run can retry it.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Ledger file schema version.
pub const LEDGER_VERSION: u32 = 1;

/// A failure to read or write the ledger file itself.
#[derive(Debug, Error)]
pub enum LedgerError {
    /// Reading, writing or removing the file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a ledger of the expected format.
    #[error("{path} is corrupt: {msg}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
}

/// What undoing one entry found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undone {
    /// The change was undone.
    Done,
    /// There was nothing left to undo (the file, device or process is gone).
    Gone,
}

/// Undoes entries of type `E`. Must be idempotent: undoing an entry twice
/// (a crash between the undo and the ledger write) is harmless.
pub trait Undo<E> {
    /// Why an undo failed.
    type Error: fmt::Display;
    /// Undoes one entry.
    fn undo(&mut self, entry: &E) -> Result<Undone, Self::Error>;
}

/// The ledger file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerFile<E> {
    /// The owner's format tag (e.g. `appflow-journal`).
    pub format: String,
    /// [`LEDGER_VERSION`].
    pub version: u32,
    /// PID of the process that wrote it.
    pub pid: u32,
    /// What is to be undone, in the order it was done.
    pub entries: Vec<E>,
}

impl<E: DeserializeOwned> LedgerFile<E> {
    /// Reads the ledger at `path`; `Ok(None)` when there is none.
    pub fn read(path: &Path, format: &str) -> Result<Option<Self>, LedgerError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("reading", path)(e)),
        };
        let corrupt = |msg: String| LedgerError::Corrupt {
            path: path.to_path_buf(),
            msg,
        };
        let file: Self = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if file.format != format || file.version != LEDGER_VERSION {
            return Err(corrupt(format!(
                "format {:?} version {} (expected {format:?} {LEDGER_VERSION})",
                file.format, file.version
            )));
        }
        Ok(Some(file))
    }
}

/// What [`Ledger::undo_all`] did.
#[derive(Debug)]
pub struct UndoReport<E, Err> {
    /// Entries undone, latest first.
    pub done: Vec<E>,
    /// Entries with nothing left to undo.
    pub gone: Vec<E>,
    /// Entries that could not be undone (they stay recorded).
    pub failed: Vec<(E, Err)>,
}

impl<E, Err> Default for UndoReport<E, Err> {
    fn default() -> Self {
        Self {
            done: Vec::new(),
            gone: Vec::new(),
            failed: Vec::new(),
        }
    }
}

/// The live ledger.
pub struct Ledger<E, U>
where
    E: Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug,
    U: Undo<E>,
{
    path: PathBuf,
    format: &'static str,
    entries: Vec<E>,
    undoer: U,
    undo_on_drop: bool,
}

impl<E, U> fmt::Debug for Ledger<E, U>
where
    E: Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug,
    U: Undo<E>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("entries", &self.entries)
            .finish()
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LedgerError + 'a {
    move |source| LedgerError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl<E, U> Ledger<E, U>
where
    E: Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug,
    U: Undo<E>,
{
    /// An empty ledger persisted at `path` under the tag `format`. Nothing
    /// is written until the first [`Ledger::record`].
    pub fn new(path: PathBuf, format: &'static str, undoer: U) -> Self {
        Self::resume(path, format, Vec::new(), undoer)
    }

    /// A ledger holding `entries` left by an earlier run (to undo them).
    pub fn resume(path: PathBuf, format: &'static str, entries: Vec<E>, undoer: U) -> Self {
        Self {
            path,
            format,
            entries,
            undoer,
            undo_on_drop: false,
        }
    }

    /// Undo everything left when the ledger is dropped (error and panic
    /// paths of a process that must leave nothing behind). Off by default:
    /// the daemon's journal stays on disk after a crash for the next start.
    pub fn undo_on_drop(mut self, on: bool) -> Self {
        self.undo_on_drop = on;
        self
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is recorded, in the order it was done.
    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    /// The undo operation (for its owner's own use).
    pub fn undoer(&mut self) -> &mut U {
        &mut self.undoer
    }

    /// Records `entry` and persists the ledger. On a write failure the
    /// entry stays recorded in memory (so it is still undone on exit) and
    /// the error is returned.
    pub fn record(&mut self, entry: E) -> Result<(), LedgerError> {
        self.entries.push(entry);
        self.persist()
    }

    /// Forgets an entry undone by the caller (or never made) and persists.
    pub fn forget(&mut self, entry: &E) -> Result<(), LedgerError> {
        self.entries.retain(|x| x != entry);
        self.persist()
    }

    /// Undoes one recorded entry and forgets it. An entry that cannot be
    /// undone stays recorded.
    pub fn undo(&mut self, entry: &E) -> Result<Undone, U::Error> {
        let u = self.undoer.undo(entry)?;
        self.entries.retain(|x| x != entry);
        if let Err(e) = self.persist() {
            tracing::warn!(error = %e, "ledger write after an undo failed");
        }
        Ok(u)
    }

    /// Undoes everything, latest first, continuing past failures. What
    /// failed stays recorded (in its original order) for a later retry.
    pub fn undo_all(&mut self) -> UndoReport<E, U::Error> {
        let mut report = UndoReport::default();
        while let Some(e) = self.entries.pop() {
            match self.undoer.undo(&e) {
                Ok(Undone::Done) => report.done.push(e),
                Ok(Undone::Gone) => report.gone.push(e),
                Err(err) => report.failed.push((e, err)),
            }
            // Persist progress: a crash mid-undo retries only what is left.
            let left: Vec<E> = self
                .entries
                .iter()
                .cloned()
                .chain(report.failed.iter().rev().map(|(e, _)| e.clone()))
                .collect();
            if let Err(e) = self.write(&left) {
                tracing::warn!(error = %e, "ledger write during undo failed");
            }
        }
        self.entries = report.failed.iter().rev().map(|(e, _)| e.clone()).collect();
        report
    }

    fn persist(&self) -> Result<(), LedgerError> {
        self.write(&self.entries)
    }

    /// Writes `entries` (or removes the file when there are none). When the
    /// file's directory is gone (the testbed's run directory, torn down as
    /// its first recorded resource), there is nothing to persist into.
    fn write(&self, entries: &[E]) -> Result<(), LedgerError> {
        if entries.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(io("removing", &self.path)(e))
                }
                _ => Ok(()),
            };
        }
        if !self.path.parent().is_some_and(Path::is_dir) {
            return Ok(());
        }
        let file = LedgerFile {
            format: self.format.to_string(),
            version: LEDGER_VERSION,
            pid: std::process::id(),
            entries: entries.to_vec(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| LedgerError::Corrupt {
            path: self.path.clone(),
            msg: e.to_string(),
        })?;
        crate::store::write_atomic(&self.path, text.as_bytes()).map_err(io("writing", &self.path))
    }
}

impl<E, U> Drop for Ledger<E, U>
where
    E: Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug,
    U: Undo<E>,
{
    fn drop(&mut self) {
        if self.undo_on_drop && !self.entries.is_empty() {
            for (e, err) in self.undo_all().failed {
                eprintln!("appflow: undoing {e:?} failed: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Fake {
        log: Arc<Mutex<Vec<u32>>>,
        fail: Option<u32>,
        gone: Option<u32>,
    }
    impl Undo<u32> for Fake {
        type Error = String;
        fn undo(&mut self, e: &u32) -> Result<Undone, String> {
            self.log.lock().unwrap().push(*e);
            if self.fail == Some(*e) {
                return Err("boom".into());
            }
            Ok(if self.gone == Some(*e) {
                Undone::Gone
            } else {
                Undone::Done
            })
        }
    }

    const F: &str = "appflow-test-ledger";

    fn read(p: &Path) -> Vec<u32> {
        LedgerFile::<u32>::read(p, F)
            .unwrap()
            .map(|f| f.entries)
            .unwrap_or_default()
    }

    #[test]
    fn records_persist_and_undo_all_is_reverse_and_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l.json");
        let fake = Fake {
            gone: Some(2),
            ..Default::default()
        };
        let mut l = Ledger::new(p.clone(), F, fake.clone());
        for e in 1..=4 {
            l.record(e).unwrap();
        }
        assert_eq!(read(&p), vec![1, 2, 3, 4]);
        let r = l.undo_all();
        assert_eq!(
            (r.done, r.gone, r.failed.len()),
            (vec![4, 3, 1], vec![2], 0)
        );
        assert_eq!(*fake.log.lock().unwrap(), vec![4, 3, 2, 1]);
        assert!(!p.exists(), "an empty ledger leaves no file");
        assert!(l.undo_all().done.is_empty());
        drop(l);
        assert_eq!(fake.log.lock().unwrap().len(), 4);
    }

    #[test]
    fn failures_stay_recorded_and_drop_undoes_when_asked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l.json");
        let fake = Fake {
            fail: Some(2),
            ..Default::default()
        };
        {
            let mut l = Ledger::new(p.clone(), F, fake.clone()).undo_on_drop(true);
            for e in 1..=3 {
                l.record(e).unwrap();
            }
        }
        // Every entry was attempted despite the failure in the middle.
        assert_eq!(*fake.log.lock().unwrap(), vec![3, 2, 1]);
        assert_eq!(read(&p), vec![2]);
        // Without undo_on_drop, a dropped ledger stays for the next run.
        let mut l = Ledger::resume(p.clone(), F, read(&p), Fake::default());
        l.record(7).unwrap();
        drop(l);
        assert_eq!(read(&p), vec![2, 7]);
    }

    #[test]
    fn undo_one_forget_and_a_foreign_file_is_corrupt() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l.json");
        let mut l = Ledger::new(p.clone(), F, Fake::default());
        l.record(1).unwrap();
        l.record(2).unwrap();
        assert_eq!(l.undo(&1), Ok(Undone::Done));
        l.forget(&2).unwrap();
        assert!(l.entries().is_empty() && !p.exists());
        std::fs::write(&p, r#"{"format":"other","version":1,"pid":1,"entries":[]}"#).unwrap();
        let e = LedgerFile::<u32>::read(&p, F).unwrap_err().to_string();
        assert!(e.contains("l.json") && e.contains("other"), "{e}");
        assert!(LedgerFile::<u32>::read(&d.path().join("none"), F)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_removed_directory_is_not_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run/l.json");
        let mut l = Ledger::new(p.clone(), F, Fake::default());
        l.record(1).unwrap();
        assert!(!p.exists());
    }
}
