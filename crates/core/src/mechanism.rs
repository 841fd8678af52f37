//! The mechanisms the policies drive, as small traits. Each has a live Linux
//! implementation (`appflow-linux`), a simulated one (`appflow-sim`) and the
//! recording fakes below (for tests). Every live implementation also has a
//! dry-run mode that decides and logs but changes nothing.

use crate::preload::FileSpan;
use crate::prepage::{PrepagePlan, SwitchObservation};
use crate::reason::Reason;
use crate::reclaim::ReclaimMode;
use crate::refault::StepRange;
use crate::scheduler::ProcId;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A mechanism's failure. Never fatal to the caller: it logs and degrades.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum MechError {
    /// The kernel lacks a feature; the string names it.
    #[error("kernel feature missing: {0}")]
    Unsupported(String),
    /// The process went away (normal; not an error to report loudly).
    #[error("process {0} vanished")]
    Vanished(u32),
    /// Any other failure, with what was being done.
    #[error("{what}: {detail}")]
    Failed {
        /// What was being done.
        what: String,
        /// The error.
        detail: String,
    },
}

/// How preloaded spans are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hold {
    /// Before launch: kept alive by periodic touching (§4.2.2), reclaimable.
    Touch,
    /// During launch: protected from reclaim until the launch completes.
    Protect,
}

/// Loads file spans into memory and holds them.
pub trait PreloadMechanism {
    /// Reads `spans` (in order) for `app` and holds them as `hold` says.
    /// Returns the bytes read.
    fn load(&mut self, app: &str, spans: &[FileSpan], hold: Hold) -> Result<u64, MechError>;
    /// Stops holding everything held for `app`.
    fn release(&mut self, app: &str) -> Result<(), MechError>;
    /// Stops holding `app`'s spans of one kind only (the pages stay cached).
    fn release_hold(&mut self, app: &str, hold: Hold) -> Result<(), MechError>;
    /// Stops (true) or resumes (false) re-reading the standby spans kept
    /// with `Hold::Touch`; they stay held.
    fn pause_touch(&mut self, paused: bool) -> Result<(), MechError>;
    /// Bytes currently held, all apps.
    fn held_bytes(&self) -> u64;
    /// Sets the readahead of the storage devices holding `paths` to `bytes`
    /// while a launch streams them (the AppFlow paper §4.1: during launch, large
    /// files are read with a large block size); `None` restores every
    /// device's own value. The app's own page-cache misses on those files
    /// then reach the device as large requests too; files the launching
    /// processes `procs` opened already get the new value as well. Returns
    /// the devices changed (0 when none could be, e.g. a file system
    /// without one).
    fn set_launch_readahead(
        &mut self,
        paths: &[&str],
        procs: &[ProcId],
        bytes: Option<u64>,
    ) -> Result<u32, MechError> {
        let _ = (paths, procs, bytes);
        Err(MechError::Unsupported("launch readahead".into()))
    }
    /// A foreground window of `app` begins (its launch, or a switch back to
    /// it), in its processes `procs` (identities: a mechanism acts on a
    /// process only while that PID still has that start time). A mechanism
    /// that observes windows notes what of them is out of memory now (ASAP's
    /// feedback, the ASAP paper). Called before [`Self::prepage`].
    fn start_window(&mut self, app: &str, procs: &[ProcId]) -> Result<(), MechError> {
        let _ = (app, procs);
        Ok(())
    }
    /// Prepages `app`'s switch footprint at idle priority (ASAP, the ASAP paper):
    /// up to `plan.anon_bytes` of its processes' (`procs`) swapped-out
    /// anonymous pages and `plan.file_bytes` of the evicted pages of files it
    /// used, from the mechanism's page-level candidate table. Returns the
    /// bytes requested.
    fn prepage(
        &mut self,
        app: &str,
        procs: &[ProcId],
        plan: &PrepagePlan,
    ) -> Result<u64, MechError> {
        let _ = (app, procs, plan);
        Err(MechError::Unsupported("switch prepaging".into()))
    }
    /// What `app`'s last foreground window (its switch, or the cold launch
    /// before its first switch) brought back, once, in its processes `procs`
    /// at the window's end; None when nothing was observed.
    fn switch_observation(
        &mut self,
        app: &str,
        procs: &[ProcId],
    ) -> Result<Option<SwitchObservation>, MechError> {
        let _ = (app, procs);
        Ok(None)
    }
    /// Marks `app`'s anonymous data that its last foreground window did not
    /// bring back (the window's hot set, as [`Self::switch_observation`]
    /// observed it) as cold, in its processes `procs`, so the kernel's
    /// reclaim takes it before the hot set (Ariadne's user-space half, the
    /// Ariadne paper §4.2). A hint, no I/O by itself: the pages stay where
    /// they are until reclaim wants memory. Called once per window, after
    /// its end, and never while the app is in the foreground; without an
    /// observed window it marks nothing. Returns the bytes asked to be
    /// marked.
    fn mark_cold(&mut self, app: &str, procs: &[ProcId]) -> Result<u64, MechError> {
        let _ = (app, procs);
        Err(MechError::Unsupported("cold marking".into()))
    }
}

/// Applies reclaim modes and reclaims.
pub trait ReclaimMechanism {
    /// Puts the domain in `mode` (Normal restores the original settings).
    fn apply_mode(&mut self, mode: ReclaimMode) -> Result<(), MechError>;
    /// Pages out up to `max_bytes` of `pid`'s resident anonymous memory.
    /// Returns the resident anonymous bytes asked out (address space already
    /// swapped out or never touched does not count).
    fn page_out_anon(&mut self, pid: u32, max_bytes: u64) -> Result<u64, MechError>;
    /// False when the mechanism knows that a [`Self::page_out_anon`] call
    /// of at most `max_bytes` now would page out nothing for any background
    /// app's process (not the foreground or launching app's, which the
    /// scheduler never pages out): less than a page asked, no swap room
    /// left, no CPU left for it in this tick, nothing of a background app
    /// resident. The caller skips the calls, which would each return 0.
    /// The default, true, asks every process.
    fn page_out_possible(&mut self, max_bytes: u64) -> bool {
        let _ = max_bytes;
        true
    }
    /// The rate [`Self::page_out_anon`] pages anonymous memory out at,
    /// bytes/s: measured on the mechanism's own calls (a live kernel), or
    /// the device's modelled rate (a simulator); None while unknown.
    /// Rebalancing with no configured step asks one tick's worth of it per
    /// tick ([`crate::reclaim::ReclaimConfig::rebalance_step_bytes`] 0).
    fn page_out_bytes_per_sec(&self) -> Option<f64> {
        None
    }
    /// Drops a file range from the page cache. Returns bytes dropped (as far as known).
    fn drop_file(&mut self, path: &str, offset: u64, len: u64) -> Result<u64, MechError>;
    /// kswapd's reclaim step of the domain as `vm.watermark_scale_factor`
    /// (the re-fault study §5): the value before any change (stock) and the
    /// lowest value that still changes the step. Unsupported when the
    /// domain has no kswapd step to tune (a memory cgroup), with why.
    fn reclaim_step_range(&mut self) -> Result<StepRange, MechError> {
        Err(MechError::Unsupported("a kswapd reclaim step".into()))
    }
    /// Sets kswapd's reclaim step (`vm.watermark_scale_factor`, within the
    /// range above; the stock value restores the original setting).
    fn set_reclaim_step(&mut self, wsf: u32) -> Result<(), MechError> {
        let _ = wsf;
        Err(MechError::Unsupported("a kswapd reclaim step".into()))
    }
}

/// What a kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillOutcome {
    /// The process's memory was reaped at once (process_mrelease or equivalent).
    pub reaped: bool,
}

/// Kills processes.
pub trait KillMechanism {
    /// Kills the process instance `id` for `reason`. An implementation acts
    /// only when the process with that PID still has that start time (a
    /// pidfd taken when it was seen), never on a reused PID.
    fn kill(&mut self, id: ProcId, reason: Reason) -> Result<KillOutcome, MechError>;
}

/// One recorded call on a fake.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `load`.
    Load {
        app: String,
        spans: usize,
        bytes: u64,
        hold: Hold,
    },
    /// `release`.
    Release { app: String },
    /// `release_hold`.
    ReleaseHold { app: String, hold: Hold },
    /// `pause_touch`.
    PauseTouch(bool),
    /// `apply_mode`.
    Mode(ReclaimMode),
    /// `page_out_anon`.
    PageOut { pid: u32, bytes: u64 },
    /// `drop_file`.
    Drop { path: String, offset: u64, len: u64 },
    /// `kill`.
    Kill { pid: u32, reason: Reason },
    /// `start_window`.
    Window { app: String, procs: Vec<ProcId> },
    /// `prepage`.
    Prepage {
        app: String,
        procs: Vec<ProcId>,
        plan: PrepagePlan,
    },
    /// `mark_cold`.
    MarkCold { app: String, procs: Vec<ProcId> },
    /// `set_reclaim_step`.
    ReclaimStep(u32),
    /// `set_launch_readahead`: the files' paths and the readahead (None: restored).
    Readahead {
        paths: Vec<String>,
        bytes: Option<u64>,
    },
}

/// A recording fake of every mechanism, for tests of the loops that drive them.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    /// Calls in order.
    pub calls: Vec<Call>,
    held: std::collections::BTreeMap<String, u64>,
    /// PIDs that behave as vanished.
    pub vanished: Vec<u32>,
    /// What `switch_observation` reports, per app (taken once).
    pub observations: std::collections::BTreeMap<String, SwitchObservation>,
    /// What `reclaim_step_range` reports (None: unsupported).
    pub step_range: Option<StepRange>,
    /// What `mark_cold` reports marked, per call.
    pub cold_bytes: u64,
    /// Nothing can be paged out (swap full): `page_out_possible` says so
    /// and `page_out_anon` pages out 0 bytes.
    pub page_out_full: bool,
    /// What `page_out_bytes_per_sec` reports.
    pub page_out_rate: Option<f64>,
}

impl PreloadMechanism for Recorder {
    fn load(&mut self, app: &str, spans: &[FileSpan], hold: Hold) -> Result<u64, MechError> {
        let bytes = spans.iter().map(|s| s.len).sum();
        *self.held.entry(app.to_string()).or_default() += bytes;
        self.calls.push(Call::Load {
            app: app.into(),
            spans: spans.len(),
            bytes,
            hold,
        });
        Ok(bytes)
    }
    fn release(&mut self, app: &str) -> Result<(), MechError> {
        self.held.remove(app);
        self.calls.push(Call::Release { app: app.into() });
        Ok(())
    }
    fn release_hold(&mut self, app: &str, hold: Hold) -> Result<(), MechError> {
        self.calls.push(Call::ReleaseHold {
            app: app.into(),
            hold,
        });
        Ok(())
    }
    fn pause_touch(&mut self, paused: bool) -> Result<(), MechError> {
        self.calls.push(Call::PauseTouch(paused));
        Ok(())
    }
    fn held_bytes(&self) -> u64 {
        self.held.values().sum()
    }
    fn start_window(&mut self, app: &str, procs: &[ProcId]) -> Result<(), MechError> {
        self.calls.push(Call::Window {
            app: app.into(),
            procs: procs.to_vec(),
        });
        Ok(())
    }
    fn prepage(
        &mut self,
        app: &str,
        procs: &[ProcId],
        plan: &PrepagePlan,
    ) -> Result<u64, MechError> {
        self.calls.push(Call::Prepage {
            app: app.into(),
            procs: procs.to_vec(),
            plan: *plan,
        });
        Ok(plan.anon_bytes + plan.file_bytes)
    }
    fn switch_observation(
        &mut self,
        app: &str,
        procs: &[ProcId],
    ) -> Result<Option<SwitchObservation>, MechError> {
        let _ = procs;
        Ok(self.observations.remove(app))
    }
    fn mark_cold(&mut self, app: &str, procs: &[ProcId]) -> Result<u64, MechError> {
        self.calls.push(Call::MarkCold {
            app: app.into(),
            procs: procs.to_vec(),
        });
        Ok(self.cold_bytes)
    }
    fn set_launch_readahead(
        &mut self,
        paths: &[&str],
        procs: &[ProcId],
        bytes: Option<u64>,
    ) -> Result<u32, MechError> {
        let _ = procs;
        self.calls.push(Call::Readahead {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            bytes,
        });
        Ok(1)
    }
}

impl ReclaimMechanism for Recorder {
    fn apply_mode(&mut self, mode: ReclaimMode) -> Result<(), MechError> {
        self.calls.push(Call::Mode(mode));
        Ok(())
    }
    fn page_out_anon(&mut self, pid: u32, max_bytes: u64) -> Result<u64, MechError> {
        if self.vanished.contains(&pid) {
            return Err(MechError::Vanished(pid));
        }
        self.calls.push(Call::PageOut {
            pid,
            bytes: max_bytes,
        });
        Ok(if self.page_out_full { 0 } else { max_bytes })
    }
    fn page_out_possible(&mut self, _max_bytes: u64) -> bool {
        !self.page_out_full
    }
    fn page_out_bytes_per_sec(&self) -> Option<f64> {
        self.page_out_rate
    }
    fn drop_file(&mut self, path: &str, offset: u64, len: u64) -> Result<u64, MechError> {
        self.calls.push(Call::Drop {
            path: path.into(),
            offset,
            len,
        });
        Ok(len)
    }
    fn reclaim_step_range(&mut self) -> Result<StepRange, MechError> {
        self.step_range
            .ok_or_else(|| MechError::Unsupported("no kswapd step in this fake".into()))
    }
    fn set_reclaim_step(&mut self, wsf: u32) -> Result<(), MechError> {
        if self.step_range.is_none() {
            return Err(MechError::Unsupported("no kswapd step in this fake".into()));
        }
        self.calls.push(Call::ReclaimStep(wsf));
        Ok(())
    }
}

impl KillMechanism for Recorder {
    fn kill(&mut self, id: ProcId, reason: Reason) -> Result<KillOutcome, MechError> {
        let pid = id.pid;
        if self.vanished.contains(&pid) {
            return Err(MechError::Vanished(pid));
        }
        self.calls.push(Call::Kill { pid, reason });
        Ok(KillOutcome { reaped: true })
    }
}

impl crate::scheduler::Mechanisms for Recorder {
    fn preload(&mut self) -> &mut dyn PreloadMechanism {
        self
    }
    fn reclaim(&mut self) -> &mut dyn ReclaimMechanism {
        self
    }
    fn kill(&mut self) -> &mut dyn KillMechanism {
        self
    }
}
