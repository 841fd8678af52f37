//! The Selective File Preloader's part of the scheduler (the AppFlow paper §4.1,
//! §4.2.2): when to re-solve the cutoffs, which standby sets to hold, what
//! to stream when an app launches, and when a launch is over.
//!
//! Rules kept here, for every driver alike:
//! * Standby sets are (re)loaded only while no app is launching and the
//!   reclaimer is in its normal mode, and only when the domain has room for
//!   them; while an app launches the worker's touching is paused, so it
//!   reads nothing but the launching app's stream (the launch owns the
//!   device's I/O and memory).
//! * A launch stream is bounded by the room at that moment.
//! * While it is held, a launch's protection yields to pressure: once the
//!   memory available falls below the floor (the app's own allocations
//!   compete with the locked pages), the locks are released (the pages stay
//!   cached, reclaimable) and the rest of the stream is dropped. Leaving the
//!   app's recorded anonymous launch memory out of the room up front was
//!   tried: it made no difference to safety beside this release, and in the
//!   simulator it cut the stream of GB-scale apps enough to slow AppFlow's
//!   launches (docs/sim.md).
//!
//! *Room* is the memory available (free plus reclaimable page cache) above
//! the killer's trigger level (`killer.trigger_avail_fraction` of the
//! domain): what preloading locks or keeps can never, by itself, bring the
//! domain to the point where the killer has to act.

use super::StandbySets;
use super::{Mark, Scheduler};
use crate::mechanism::{Hold, MechError, PreloadMechanism};
use crate::policy::PreloadStrategy;
use crate::preload::{self, FileSpan};
use crate::profile::LaunchProfile;
use crate::reason::Reason;
use crate::reclaim::ReclaimMode;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Scheduler {
    /// Apps whose standby set is not kept: launching ones and the foreground.
    pub(super) fn active_apps(&self) -> Vec<String> {
        let mut v: Vec<String> = if self.any_launching() {
            self.apps
                .iter()
                .filter(|(_, a)| a.launching_since.is_some())
                .map(|(n, _)| n.clone())
                .collect()
        } else {
            Vec::new()
        };
        if let Some(f) = &self.foreground {
            if !v.contains(f) {
                v.push(f.clone());
            }
        }
        v.sort();
        v
    }

    fn replan(&mut self, now_ms: u64, now_unix_ms: u64) {
        self.plan_dirty = false;
        self.standby_dirty = true;
        self.standby_memo = None;
        if self.cfg.preload_strategy() != PreloadStrategy::Selective {
            self.plan = None;
            return;
        }
        let profs: Vec<&LaunchProfile> = self.profiles.values().collect();
        let pcfg = &self.cfg.preload;
        let weights = if pcfg.weight_by_likelihood {
            preload::likelihood_weights(&profs, now_unix_ms, pcfg.likelihood_window_ms)
        } else {
            vec![1.0; profs.len()]
        };
        match preload::plan_cutoffs(&profs, &weights, &self.curve, pcfg) {
            Ok(plan) => {
                let detail = format!(
                    "{} apps, preload {} of budget {} bytes, weighted stream {:.3} s, {} nodes",
                    plan.apps.len(),
                    plan.preload_bytes,
                    pcfg.budget_bytes,
                    plan.weighted_stream_secs,
                    plan.nodes
                );
                self.log(now_ms, "preload", Some(plan.reason), detail);
                self.stats.plan_bytes = plan.preload_bytes;
                self.stats.plans_solved += 1;
                self.plan = Some(plan);
            }
            Err(e) => {
                self.log(
                    now_ms,
                    "error",
                    None,
                    format!("cutoff plan failed: {e}; preloading before launch is off"),
                );
                self.plan = None;
            }
        }
    }

    /// Every app's standby set under the current plan (computed once per
    /// plan). An active app's set is not held, and its share of the budget
    /// is not handed to the others: the AppFlow paper §4.2.2 stops touching the set of
    /// an app once it is active, and a set that changed with every switch
    /// would make the worker re-read all of them at each one.
    fn standby_sets(&mut self) -> StandbySets {
        if let Some(m) = &self.standby_memo {
            return Arc::clone(m);
        }
        let mut out: BTreeMap<String, Vec<FileSpan>> = BTreeMap::new();
        let cfg = &self.cfg.preload;
        match self.cfg.preload_strategy() {
            PreloadStrategy::None | PreloadStrategy::WholeProfile => {}
            PreloadStrategy::KeepAll => {
                for p in self.profiles.values() {
                    for s in preload::launch_stream(p, 0, cfg, false) {
                        out.entry(s.app.clone()).or_default().push(s);
                    }
                }
            }
            PreloadStrategy::Selective => {
                if let Some(plan) = &self.plan {
                    let profs: Vec<&LaunchProfile> = self.profiles.values().collect();
                    for s in preload::standby_set(&profs, plan, cfg, &[]).spans {
                        out.entry(s.app.clone()).or_default().push(s);
                    }
                }
            }
        }
        let out: StandbySets = Arc::new(out.into_iter().map(|(a, v)| (a, Arc::new(v))).collect());
        self.standby_memo = Some(Arc::clone(&out));
        out
    }

    /// Whether standby sets may be (re)loaded now: no launch in progress,
    /// the reclaimer in its normal mode.
    pub(super) fn standby_allowed(&self) -> bool {
        !self.any_launching() && self.controller.mode() == ReclaimMode::Normal
    }

    /// Room for preloading (and switch prepaging) now: the memory
    /// available above the killer's trigger level at the latest sample
    /// (unbounded before the first sample).
    pub fn room(&self) -> u64 {
        match &self.last_sample {
            Some(s) => s
                .avail_bytes
                .saturating_sub(self.floor_bytes(s.total_bytes)),
            None => u64::MAX,
        }
    }

    /// Releases the protection of launching apps when the memory available
    /// is below the floor; returns whether any was released. Their pages stay
    /// cached but become reclaimable, and the rest of their streams is not
    /// read (the worker stops a load that is released).
    pub(super) fn yield_launch_protection(
        &mut self,
        s: &super::DomainSample,
        preload: &mut dyn PreloadMechanism,
    ) -> bool {
        if self.protecting.is_empty() || s.avail_bytes >= self.floor_bytes(s.total_bytes) {
            return false;
        }
        let apps: Vec<String> = std::mem::take(&mut self.protecting).into_iter().collect();
        for app in apps {
            if let Err(e) = preload.release_hold(&app, Hold::Protect) {
                self.mech_error(s.now_ms, &format!("early release of {app}"), &e);
            }
            self.stats.launch_protect_yields += 1;
            let detail = format!(
                "{app}: launch protection released early: M_aval {} below the floor {}",
                s.avail_bytes,
                self.floor_bytes(s.total_bytes)
            );
            self.log(
                s.now_ms,
                "preload",
                Some(Reason::PreloadYieldPressure),
                detail,
            );
        }
        true
    }

    /// Stops holding `app`'s standby set (its pages stay cached, untouched).
    fn drop_standby(&mut self, app: &str, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        if self.standby.remove(app).is_some() {
            if let Err(e) = preload.release_hold(app, Hold::Touch) {
                self.mech_error(now_ms, &format!("release of {app}'s standby set"), &e);
            }
        }
    }

    /// Brings the standby holds in line with the plan and the active apps.
    fn sync_standby(&mut self, now_ms: u64, now_unix_ms: u64, preload: &mut dyn PreloadMechanism) {
        if !self.standby_allowed() {
            return;
        }
        let room_for_one = self.standby_need.is_some_and(|n| self.room() >= n);
        if !self.standby_dirty && !room_for_one {
            return;
        }
        self.standby_dirty = false;
        self.standby_need = None;
        let sets = self.standby_sets();
        let active = self.active_apps();
        // Every app with a set under the plan or held now whose hold must
        // change, in name order: the plan and the holds are both maps by
        // name, walked side by side. (Each app's change touches only its
        // own hold, so they are found before any is made.)
        let mut changed: Vec<String> = Vec::new();
        let mut planned = sets.iter().peekable();
        let mut held = self.standby.iter().peekable();
        loop {
            let (app, want, have) = match (planned.peek(), held.peek()) {
                (None, None) => break,
                (Some(&(p, w)), Some(&(h, v))) => match p.cmp(h) {
                    std::cmp::Ordering::Less => (p, Some(w), None),
                    std::cmp::Ordering::Greater => (h, None, Some(v)),
                    std::cmp::Ordering::Equal => (p, Some(w), Some(v)),
                },
                (Some(&(p, w)), None) => (p, Some(w), None),
                (None, Some(&(h, v))) => (h, None, Some(v)),
            };
            if want.is_some() {
                planned.next();
            }
            if have.is_some() {
                held.next();
            }
            let want = want.filter(|_| !active.iter().any(|a| a == app));
            let same = match (want, have) {
                (Some(w), Some(h)) => Arc::ptr_eq(w, h) || w == h,
                (None, None) => true,
                _ => false,
            };
            if !same {
                changed.push(app.clone());
            }
        }
        // The likeliest next launch, found when a set is first weighed (it
        // reads the clock, the profiles and the active apps, which loading
        // a set leaves as they are; most ticks weigh none).
        let mut next: Option<Option<(String, u64)>> = None;
        for app in &changed {
            let app = app.as_str();
            let want = sets.get(app).filter(|_| !active.iter().any(|a| a == app));
            self.drop_standby(app, now_ms, preload);
            let Some(spans) = want else {
                continue;
            };
            let set_bytes: u64 = spans.iter().map(|s| s.len).sum();
            let next = next.get_or_insert_with(|| {
                if self.cfg.preload.reserve_next_launch {
                    self.likeliest_next_launch(now_unix_ms)
                } else {
                    None
                }
            });
            // What must stay free for the likeliest next launch besides
            // this set (the set is part of that launch's need when it is
            // that app's own).
            let reserve = match next {
                Some((n, need)) if n == app => need.saturating_sub(set_bytes),
                Some((_, need)) => *need,
                None => 0,
            };
            if set_bytes.saturating_add(reserve) > self.room() {
                // Try again on a later tick, once there is room.
                self.standby_need = Some(self.standby_need.map_or(set_bytes, |n| n.min(set_bytes)));
                continue;
            }
            match preload.load(app, spans, Hold::Touch) {
                Ok(bytes) => {
                    let small = spans
                        .iter()
                        .filter(|s| s.reason == Reason::PreloadSmallFile)
                        .count();
                    let detail = format!(
                        "standby {app}: {} spans ({small} small-file, {} hot-segment), {bytes} bytes, touched every {} ms",
                        spans.len(),
                        spans.len() - small,
                        self.cfg.preload.touch_interval_ms
                    );
                    let reason = if small > 0 {
                        Reason::PreloadSmallFile
                    } else {
                        Reason::PreloadHotSegment
                    };
                    self.log(now_ms, "preload", Some(reason), detail);
                    self.stats.preload_queued_bytes_touch += bytes;
                    self.standby.insert(app.to_string(), Arc::clone(spans));
                }
                Err(e) => self.mech_error(now_ms, &format!("standby load of {app}"), &e),
            }
        }
    }

    pub(super) fn mech_error(&mut self, now_ms: u64, what: &str, e: &MechError) {
        self.log(now_ms, "error", None, format!("{what} failed: {e}"));
    }

    /// A launch begins: every standby hold is dropped (the worker reads
    /// nothing but this launch's stream), then the stream is queued.
    pub(super) fn start_launch(
        &mut self,
        app: &str,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) -> String {
        self.log_marked(
            now_ms,
            "preload",
            None,
            format!("{app} launching"),
            Some(Mark::LaunchBegin {
                app: app.to_string(),
            }),
        );
        let strategy = self.cfg.preload_strategy();
        if strategy == PreloadStrategy::None {
            return format!("{app} launching (no preloader)");
        }
        let had_hot = self
            .standby
            .get(app)
            .is_some_and(|v| v.iter().any(|s| s.reason == Reason::PreloadHotSegment));
        // The app's own set is its own now; the others wait, untouched.
        self.drop_standby(app, now_ms, preload);
        if !self.standby.is_empty() {
            self.set_touch_paused(true, now_ms, preload);
        }
        // Reclaim supplies memory at N_alloc pages per tick (the one in force).
        let reclaim_rate = match self.last_sample.map(|s| s.total_bytes) {
            Some(total) => self.reclaim_config(total).reclaim_bytes_per_sec(),
            None => self.cfg.reclaim.reclaim_bytes_per_sec(),
        };
        let Some(profile) = self.profiles.get(app) else {
            let d = format!("{app} launching: no profile, nothing to preload");
            self.log(now_ms, "preload", None, d.clone());
            return d;
        };
        let cfg = &self.cfg.preload;
        let cutoff = self.cutoff_of(app);
        let key = match strategy {
            PreloadStrategy::Selective => Some((app.to_string(), cutoff, had_hot)),
            PreloadStrategy::WholeProfile => Some((app.to_string(), 0, false)),
            // Everything is resident already (or nothing is preloaded).
            PreloadStrategy::KeepAll | PreloadStrategy::None => None,
        };
        let full: Arc<Vec<FileSpan>> =
            match key {
                None => Arc::new(Vec::new()),
                Some(k) => Arc::clone(self.stream_memo.entry(k).or_insert_with_key(|k| {
                    Arc::new(preload::launch_stream(profile, k.1, cfg, k.2))
                })),
            };
        let wanted: u64 = full.iter().map(|s| s.len).sum();
        let cap = self.room();
        // One raise covers overlapping launches; a mechanism without it is
        // not asked again; nothing streamed, nothing to read ahead of.
        if strategy == PreloadStrategy::Selective
            && !self.readahead_raised
            && !self.readahead_unsupported
            && !full.is_empty()
        {
            let window = preload::launch_readahead_window(
                profile,
                cutoff,
                &self.curve,
                self.cfg.preload.max_read_bytes,
                cap,
                reclaim_rate,
            );
            self.raise_readahead(app, &full, window, now_ms, preload);
        }
        let capped: Vec<FileSpan>;
        let spans: &[FileSpan] = if wanted > cap {
            let mut kept = 0;
            capped = full
                .iter()
                .filter(|s| {
                    let ok = kept + s.len <= cap;
                    if ok {
                        kept += s.len;
                    }
                    ok
                })
                .cloned()
                .collect();
            &capped
        } else {
            &full
        };
        if spans.is_empty() {
            let d = format!(
                "{app} launching: nothing to stream (profile {wanted} bytes, room {cap} bytes)"
            );
            self.log(now_ms, "preload", None, d.clone());
            return d;
        }
        match preload.load(app, spans, Hold::Protect) {
            Ok(bytes) => {
                self.stats.preload_queued_bytes_protect += bytes;
                self.protecting.insert(app.to_string());
                let detail = format!(
                    "{app} launching: streaming {} reads, {bytes} of {wanted} bytes (room {cap}), cutoff {cutoff} bytes, protected until launched ({})",
                    spans.len(),
                    Reason::ReclaimLaunchProtect
                );
                self.log(
                    now_ms,
                    "preload",
                    Some(Reason::PreloadStreamLarge),
                    detail.clone(),
                );
                detail
            }
            Err(e) => {
                self.mech_error(now_ms, &format!("launch stream of {app}"), &e);
                format!("{app} launching: stream failed: {e}")
            }
        }
    }

    /// A launch ended with readiness: its protection is released.
    pub(super) fn end_launch(
        &mut self,
        app: &str,
        now_ms: u64,
        since: Option<u64>,
        preload: &mut dyn PreloadMechanism,
    ) -> String {
        self.release_launch(app, now_ms, preload);
        let detail = match since {
            Some(s) => format!(
                "{app} launched after {} ms: protection released",
                now_ms.saturating_sub(s)
            ),
            None => format!("{app} launched (no launch was in progress)"),
        };
        self.log_marked(
            now_ms,
            "preload",
            Some(Reason::PreloadAppActive),
            detail.clone(),
            Some(Mark::LaunchEnd {
                app: app.to_string(),
            }),
        );
        detail
    }

    /// A launch ended without readiness (exit, timeout).
    pub(super) fn abandon_launch(
        &mut self,
        app: &str,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        self.release_launch(app, now_ms, preload);
        self.log_marked(
            now_ms,
            "preload",
            None,
            format!("{app}: launch ended without readiness; protection released"),
            Some(Mark::LaunchEnd {
                app: app.to_string(),
            }),
        );
    }

    /// The AppFlow paper §4.1 reads large files "during launch with large
    /// I/O block size". The stream does so, but it holds only what the room
    /// allows and, at idle priority, yields to the app; the app's own misses
    /// on the same files go to the device in readahead-sized requests (128
    /// KiB by default on Linux and Android), where the throughput curve is
    /// far from its large-block rate. So while a launch streams large files,
    /// the readahead of the devices holding them is raised, and it is
    /// restored when no launch is in progress. Readahead pages are ordinary
    /// page cache: nothing is locked. The window is the one
    /// [`preload::launch_readahead_window`] finds fastest for this app's
    /// profile on the device's curve and the free memory (at most the
    /// stream's read size): an app that reads its large files only in part
    /// would otherwise have the kernel read far past every range it reads.
    /// The caller asks only while nothing is raised, the mechanism has not
    /// refused it, and the stream is not empty.
    fn raise_readahead(
        &mut self,
        app: &str,
        stream: &[FileSpan],
        window: Option<u64>,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        let Some(bytes) = window else {
            self.log(
                now_ms,
                "preload",
                None,
                format!(
                    "{app} launching: the device's own readahead is the fastest for its profile and the free memory"
                ),
            );
            return;
        };
        let mut paths: Vec<&str> = stream.iter().map(|s| s.path.as_str()).collect();
        paths.sort_unstable();
        paths.dedup();
        let procs = self.app_proc_ids(app);
        match preload.set_launch_readahead(&paths, &procs, Some(bytes)) {
            Ok(_) => {
                // (How many devices changed is the mechanism's to log: a
                // device already reading ahead that much is left alone.)
                self.readahead_raised = true;
                self.stats.readahead_raises += 1;
                self.log(
                    now_ms,
                    "preload",
                    Some(Reason::PreloadStreamLarge),
                    format!(
                        "{app} launching: readahead {bytes} bytes on the devices holding its {} streamed files",
                        paths.len()
                    ),
                );
            }
            Err(MechError::Unsupported(f)) => {
                self.readahead_unsupported = true;
                self.log(
                    now_ms,
                    "preload",
                    None,
                    format!(
                        "launch readahead unavailable ({f}); the app reads with the device's own"
                    ),
                );
            }
            Err(e) => self.mech_error(now_ms, &format!("launch readahead for {app}"), &e),
        }
    }

    /// Restores the devices' readahead once no launch is in progress.
    fn restore_readahead(&mut self, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        if !self.readahead_raised || self.any_launching() {
            return;
        }
        self.readahead_raised = false;
        if let Err(e) = preload.set_launch_readahead(&[], &[], None) {
            self.mech_error(now_ms, "restoring the readahead", &e);
        }
    }

    fn release_launch(&mut self, app: &str, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        self.restore_readahead(now_ms, preload);
        self.protecting.remove(app);
        if self.cfg.preload_strategy() != PreloadStrategy::None {
            if let Err(e) = preload.release(app) {
                self.mech_error(now_ms, &format!("release of {app}"), &e);
            }
        }
        self.standby.remove(app);
        self.standby_dirty = true;
        if !self.any_launching() {
            self.set_touch_paused(false, now_ms, preload);
        }
    }

    /// Pauses or resumes the worker's touching of standby sets.
    fn set_touch_paused(&mut self, paused: bool, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        if self.touch_paused == paused {
            return;
        }
        self.touch_paused = paused;
        if let Err(e) = preload.pause_touch(paused) {
            self.mech_error(now_ms, "pausing the standby touch", &e);
        }
    }

    /// Ends launches that never announced readiness.
    fn expire_launches(&mut self, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        if !self.any_launching() {
            return;
        }
        let base = self.cfg.launch_timeout_ms;
        let expired: Vec<(String, u64)> = self
            .apps
            .iter()
            .filter_map(|(n, a)| {
                let t = a.launching_since?;
                let timeout = crate::detect::launch_timeout_ms(base, self.profiles.get(n.as_str()));
                (now_ms.saturating_sub(t) >= timeout).then(|| (n.clone(), timeout))
            })
            .collect();
        for (app, timeout) in expired {
            self.end_launching(&app);
            self.log(
                now_ms,
                "preload",
                None,
                format!("{app}: no launched event within {timeout} ms"),
            );
            self.abandon_launch(&app, now_ms, preload);
        }
    }

    /// Solves the cutoff plan now if it is out of date (drivers that want
    /// the plan before the first tick).
    pub fn ensure_plan(&mut self, now_ms: u64, now_unix_ms: u64) {
        if self.plan_dirty && self.cfg.preload_strategy() != PreloadStrategy::None {
            self.replan(now_ms, now_unix_ms);
        }
    }

    /// The preloader's part of a tick: expire launches, re-solve the plan if
    /// needed, keep the standby holds in line.
    pub fn preload_step(
        &mut self,
        now_ms: u64,
        now_unix_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        self.expire_launches(now_ms, preload);
        if self.cfg.preload_strategy() == PreloadStrategy::None {
            return;
        }
        if self.plan_dirty {
            self.replan(now_ms, now_unix_ms);
        }
        self.sync_standby(now_ms, now_unix_ms, preload);
    }

    /// The likeliest next launch among the apps not active now: the most
    /// launches within the likelihood window, then the latest, then the
    /// name; and what it needs (M_sum + its file bytes).
    fn likeliest_next_launch(&mut self, now_unix_ms: u64) -> Option<(String, u64)> {
        let active = self.active_apps();
        let window = self.cfg.preload.likelihood_window_ms;
        let best = self
            .profiles
            .iter()
            .filter(|(name, _)| !active.contains(name))
            .max_by_key(|(name, p)| {
                (
                    p.launches_within(now_unix_ms, window),
                    p.last_used_unix_ms(),
                    std::cmp::Reverse(name.as_str()),
                )
            })
            .map(|(name, _)| name.clone())?;
        let need = self.launch_need_bytes(&best);
        Some((best, need))
    }

    /// M_sum + file bytes of an app's profile.
    fn launch_need_bytes(&mut self, app: &str) -> u64 {
        let anon = self.profiles.get(app).map_or(0, |p| p.anon_launch_bytes);
        anon.saturating_add(self.profile_file_bytes(app))
    }

    /// The launch files' bytes of an app's profile, 0 without one (cached
    /// until the profiles change: the sum walks every range).
    pub(super) fn profile_file_bytes(&mut self, app: &str) -> u64 {
        if let Some(n) = self.file_bytes_memo.get(app) {
            return *n;
        }
        let n = self.profiles.get(app).map_or(0, |p| p.file_bytes());
        self.file_bytes_memo.insert(app.to_string(), n);
        n
    }
}
