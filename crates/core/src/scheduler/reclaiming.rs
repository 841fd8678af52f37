//! The Adaptive Memory Reclaimer's part of the scheduler (the AppFlow paper §4.2,
//! Algorithm 1): the 100 ms mode tick, the mode applied through the
//! reclaim mechanism, page-out of background apps while rebalancing, and
//! the optional drop of cold files in efficiency-first.

use super::{AppState, DomainSample, Mark, ProcInfo, Scheduler, IDLE_BACKGROUND_MS};
use crate::mechanism::{MechError, ReclaimMechanism};
use crate::reason::Reason;
use crate::reclaim::{alloc_pages_per_tick, ReclaimConfig, ReclaimMode, ReclaimSample};
use crate::sizing::{alloc_floor_pages, checks, derive, launch_need, Check, LaunchNeed, Sizing};
use std::collections::{BTreeMap, BTreeSet};

/// Whether a process looks background by itself, where no event places its
/// app: Android's background classes (`oom_score_adj` above 0: perceptible,
/// service, cached), or no CPU used for [`IDLE_BACKGROUND_MS`] (a driver
/// that measures activity, e.g. the daemon on a desktop Linux machine where
/// every process has adj 0).
pub(super) fn looks_background(p: &ProcInfo) -> bool {
    p.oom_score_adj > 0 || p.idle_ms.is_some_and(|i| i >= IDLE_BACKGROUND_MS)
}

/// The reclaimer's part of a tick as planned, before it acts.
pub(super) struct ReclaimPlan {
    /// n_alloc of the tick, pages per tick.
    alloc_pages: u64,
    /// The controller's step, when the adaptive reclaimer runs.
    step: Option<ReclaimStep>,
}

impl ReclaimPlan {
    /// The tick pages anonymous memory out (when the mechanism can).
    pub(super) fn pages_out(&self) -> bool {
        self.step
            .as_ref()
            .is_some_and(|st| st.d.anon_reclaim_bytes > 0)
    }

    /// Whether the mechanism can page out any of what the tick asks.
    pub(super) fn page_out_possible(&self, reclaim: &mut dyn ReclaimMechanism) -> bool {
        self.step
            .as_ref()
            .is_some_and(|st| reclaim.page_out_possible(st.d.anon_reclaim_bytes))
    }
}

/// The adaptive reclaimer's step of a tick.
pub(super) struct ReclaimStep {
    /// The controller after the step.
    controller: crate::reclaim::ReclaimController,
    /// What it decided.
    d: crate::reclaim::ReclaimDecision,
    /// Efficiency-first yields to the kernel's balance after the tick.
    ef_yielded: bool,
}

impl Scheduler {
    pub(super) fn is_foreground_proc(&self, p: &ProcInfo) -> bool {
        let state = p.app.as_ref().and_then(|a| self.apps.get(a));
        self.is_foreground_with(p, state)
    }

    /// [`Self::is_foreground_proc`] with the state of the process's app
    /// already looked up (`None` for an unknown app or no app). The
    /// killer's test: a launching app is foreground; an app a `background`
    /// event named is not; once a launcher (or launch detection) has named
    /// the foreground app, only that app is; otherwise, Android's
    /// visible/foreground adj (≤ 0). Activity alone never makes a process a
    /// kill candidate (an app the user reads without typing is idle).
    pub(super) fn is_foreground_with(&self, p: &ProcInfo, state: Option<&AppState>) -> bool {
        match &p.app {
            Some(_) if state.is_some_and(|s| s.launching_since.is_some()) => true,
            Some(_) if state.is_some_and(|s| s.background_notified) => false,
            Some(a) if self.fg_notified => self.foreground.as_deref() == Some(a.as_str()),
            _ => p.oom_score_adj <= 0,
        }
    }

    /// Whether rebalancing may page the process out (reversible, unlike a
    /// kill): as the killer's test, except that where no event places the
    /// process (no launcher has spoken, or a process of no app) it is
    /// pageable when it looks background by its class or its activity
    /// ([`looks_background`]).
    pub(super) fn is_pageable_with(&self, p: &ProcInfo, state: Option<&AppState>) -> bool {
        match &p.app {
            Some(_) if state.is_some_and(|s| s.launching_since.is_some()) => false,
            Some(_) if state.is_some_and(|s| s.background_notified) => true,
            Some(a) if self.fg_notified => self.foreground.as_deref() != Some(a.as_str()),
            _ => looks_background(p),
        }
    }

    /// The reclaimer's parameters in force for a domain of `total_bytes`:
    /// the configured ones, with M_F and N_alloc derived from the apps'
    /// launches where the configuration asks for it ([`crate::sizing`]).
    /// The derivation is cached until a profile or a launch rate changes.
    pub fn reclaim_config(&mut self, total_bytes: u64) -> ReclaimConfig {
        if !self.cfg.auto_low_memory && !self.cfg.auto_alloc_threshold {
            return self.cfg.reclaim.clone();
        }
        let sizing = match &self.sizing {
            Some((t, s)) if *t == total_bytes => s.clone(),
            _ => {
                let s = self.sizing_for(total_bytes);
                self.sizing = Some((total_bytes, s.clone()));
                s
            }
        };
        self.reclaim_config_with(&sizing)
    }

    /// The configured parameters with the derived M_F and N_alloc put in
    /// where the configuration asks for them.
    pub fn reclaim_config_with(&self, sizing: &Sizing) -> ReclaimConfig {
        let mut rcfg = self.cfg.reclaim.clone();
        if self.cfg.auto_low_memory {
            rcfg.low_memory_bytes = sizing.low_memory_bytes;
        }
        if self.cfg.auto_alloc_threshold {
            rcfg.alloc_threshold_pages = sizing.alloc_threshold_pages;
        }
        rcfg
    }

    /// M_F and N_alloc derived for a domain of `total_bytes` from the
    /// profiles and the launch rates measured so far ([`crate::sizing`]).
    pub fn sizing_for(&self, total_bytes: u64) -> Sizing {
        derive(
            &self.launch_needs(),
            total_bytes,
            self.cfg.reclaim.low_memory_fraction,
            self.floor_bytes(total_bytes),
            &self.curve,
            self.cfg.reclaim.tick_ms,
        )
    }

    /// The sizing guide as checks of the thresholds in force for a domain
    /// of `total_bytes` (`appflow status`, `appflow doctor --config`).
    pub fn sizing_checks(&self, total_bytes: u64) -> Vec<Check> {
        let rcfg = self.reclaim_config_with(&self.sizing_for(total_bytes));
        checks(
            &self.launch_needs(),
            rcfg.low_memory_threshold(total_bytes),
            rcfg.alloc_threshold_pages,
            total_bytes,
            self.floor_bytes(total_bytes),
            alloc_floor_pages(&self.curve, self.cfg.reclaim.tick_ms),
        )
    }

    /// Every profiled app's launch need and allocation rate (measured in
    /// this domain where a launch was seen, else from its profile).
    pub fn launch_needs(&self) -> BTreeMap<String, LaunchNeed> {
        let tick_ms = self.cfg.reclaim.tick_ms;
        self.profiles
            .iter()
            .map(|(name, p)| {
                let measured = self.apps.get(name).and_then(|a| a.launch_rate_pages);
                (name.clone(), launch_need(p, measured, tick_ms))
            })
            .collect()
    }

    /// Never acted on: the daemon's own processes, protected names and
    /// processes the driver found protected.
    pub(super) fn is_untouchable(&self, p: &ProcInfo) -> bool {
        p.pid <= 1
            || p.protected
            || self.self_pids.contains(&p.pid)
            || self.cfg.protected_comms.contains(&p.comm)
    }

    /// Background processes to page out ([`Self::is_pageable_with`]), in
    /// order: those of apps, least recently used first; then processes of
    /// no app, longest idle first.
    pub(super) fn background_app_pids(&self, procs: &[ProcInfo]) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = Vec::with_capacity(procs.len());
        let mut others: Vec<(std::cmp::Reverse<u64>, u32)> = Vec::new();
        for p in procs {
            if self.is_untouchable(p) {
                continue;
            }
            let Some(app) = &p.app else {
                if looks_background(p) {
                    others.push((std::cmp::Reverse(p.idle_ms.unwrap_or(0)), p.pid));
                }
                continue;
            };
            // One lookup serves the launch test and the last use (this runs
            // every rebalancing tick, over every process).
            let state = self.apps.get(app);
            if !self.is_pageable_with(p, state) {
                continue;
            }
            let used = state.and_then(|a| a.last_used_ms).unwrap_or(0);
            v.push((used, p.pid));
        }
        v.sort();
        others.sort();
        v.into_iter()
            .map(|(_, p)| p)
            .chain(others.into_iter().map(|(_, p)| p))
            .collect()
    }

    /// [`Self::background_app_pids`], remembered: a rebalancing pages out
    /// at every tick, and between events the processes and the apps'
    /// states it is made of stay the same (a driver lists the same
    /// processes, only their footprints change).
    fn background_app_pids_memo(&mut self, procs: &[ProcInfo]) -> Vec<u32> {
        let same = |a: &ProcInfo, b: &ProcInfo| {
            a.pid == b.pid
                && a.start_time == b.start_time
                && a.oom_score_adj == b.oom_score_adj
                && a.protected == b.protected
                && a.app == b.app
                && a.comm == b.comm
                && a.idle_ms == b.idle_ms
        };
        if let Some(m) = &self.background_memo {
            if m.apps_epoch == self.apps_epoch
                && m.procs.len() == procs.len()
                && m.procs.iter().zip(procs).all(|(a, b)| same(a, b))
            {
                return m.pids.clone();
            }
        }
        let pids = self.background_app_pids(procs);
        self.background_memo = Some(super::BackgroundMemo {
            apps_epoch: self.apps_epoch,
            procs: procs
                .iter()
                .map(|p| ProcInfo {
                    footprint_bytes: None,
                    ..p.clone()
                })
                .collect(),
            pids: pids.clone(),
        });
        pids
    }

    /// What the reclaimer's part of a tick with sample `s` decides, before
    /// it acts (a function of the scheduler's state and `s`; it changes
    /// nothing but the cache of derived thresholds, [`Self::reclaim_config`]).
    pub(super) fn plan_reclaim(&mut self, s: &DomainSample) -> ReclaimPlan {
        // The configured parameters are read in place (every tick plans).
        let derived = (self.cfg.auto_low_memory || self.cfg.auto_alloc_threshold)
            .then(|| self.reclaim_config(s.total_bytes));
        let rcfg = derived.as_ref().unwrap_or(&self.cfg.reclaim);
        let alloc_pages = match self.prev_alloc {
            Some((c, t)) => {
                alloc_pages_per_tick(c, s.alloc_counter, s.now_ms.saturating_sub(t), rcfg.tick_ms)
            }
            None => 0,
        };
        if !self.cfg.reclaim_active() {
            return ReclaimPlan {
                alloc_pages,
                step: None,
            };
        }
        let mut controller = self.controller.clone();
        let d = controller.step(
            rcfg,
            &ReclaimSample {
                now_ms: s.now_ms,
                alloc_pages,
                avail_bytes: s.avail_bytes,
                total_bytes: s.total_bytes,
                anon_bytes: s.anon_bytes,
                file_bytes: s.file_bytes,
                launching: self.any_launching(),
            },
        );
        // File-only reclaim needs page cache to reclaim: below the floor it
        // yields to the kernel's own balance (swappiness restored, so the
        // kernel may page anonymous memory out instead of running out), and
        // comes back once memory is twice the floor (hysteresis).
        let floor = self.floor_bytes(s.total_bytes);
        let ef_yielded = d.mode == ReclaimMode::EfficiencyFirst
            && if self.ef_yielded {
                s.avail_bytes < floor.saturating_mul(2)
            } else {
                s.avail_bytes < floor
            };
        ReclaimPlan {
            alloc_pages,
            step: Some(ReclaimStep {
                controller,
                d,
                ef_yielded,
            }),
        }
    }

    /// Whether the reclaimer's part of a tick planned as `p` acts: switches
    /// the mode, logs, applies a mode, drops files, or asks for a page-out
    /// the mechanism can carry out.
    pub(super) fn reclaim_acts(
        &self,
        p: &ReclaimPlan,
        now_ms: u64,
        reclaim: &mut dyn ReclaimMechanism,
    ) -> bool {
        let Some(st) = &p.step else {
            return false;
        };
        let d = &st.d;
        let in_force = if st.ef_yielded {
            ReclaimMode::Normal
        } else {
            d.mode
        };
        d.switched()
            || st.ef_yielded != self.ef_yielded
            || (in_force == ReclaimMode::EfficiencyFirst && now_ms >= self.ef_reapply_at_ms)
            || (d.mode == ReclaimMode::EfficiencyFirst
                && self.cfg.drop_cold_files
                && !self.dropped_cold)
            || (d.anon_reclaim_bytes > 0
                && !self.page_out_unsupported
                && reclaim.page_out_possible(d.anon_reclaim_bytes))
    }

    /// Takes the planned state of a reclaim tick (the sample, the
    /// allocation counter, the controller's step and its count).
    pub(super) fn commit_reclaim(&mut self, s: &DomainSample, p: &ReclaimPlan) {
        // The launches' allocation, for sizing (`launch_rate_pages`).
        if self.prev_alloc.is_some() && self.launching_count > 0 {
            for a in self.apps.values_mut() {
                if a.launching_since.is_some()
                    && a.launch_alloc.len() < crate::sizing::LAUNCH_TICKS_KEPT
                {
                    a.launch_alloc
                        .push(u32::try_from(p.alloc_pages).unwrap_or(u32::MAX));
                }
            }
        }
        self.prev_alloc = Some((s.alloc_counter, s.now_ms));
        self.last_alloc_pages = p.alloc_pages;
        self.last_sample = Some(*s);
        if let Some(st) = &p.step {
            self.controller = st.controller.clone();
            self.stats.count_reclaim_reason(st.d.reason);
            self.ef_yielded = st.ef_yielded;
        }
    }

    /// The reclaimer's part of a tick (Algorithm 1). Also records the sample.
    pub fn reclaim_step(
        &mut self,
        s: &DomainSample,
        procs: &[ProcInfo],
        reclaim: &mut dyn ReclaimMechanism,
    ) -> ReclaimMode {
        let plan = self.plan_reclaim(s);
        self.reclaim_planned(s, plan, procs, reclaim)
    }

    /// [`Self::reclaim_step`] once planned.
    pub(super) fn reclaim_planned(
        &mut self,
        s: &DomainSample,
        plan: ReclaimPlan,
        procs: &[ProcInfo],
        reclaim: &mut dyn ReclaimMechanism,
    ) -> ReclaimMode {
        let was_yielded = self.ef_yielded;
        self.commit_reclaim(s, &plan);
        let Some(ReclaimStep { d, .. }) = plan.step else {
            return self.controller.mode();
        };
        let alloc_pages = plan.alloc_pages;
        let floor = self.floor_bytes(s.total_bytes);
        let in_force = if self.ef_yielded {
            ReclaimMode::Normal
        } else {
            d.mode
        };
        if self.ef_yielded && !was_yielded {
            self.stats.efficiency_first_yields += 1;
            self.log(
                s.now_ms,
                "reclaim",
                Some(Reason::ReclaimFileExhausted),
                format!(
                    "efficiency-first yields to the kernel's balance: M_aval {} below the floor {floor}",
                    s.avail_bytes
                ),
            );
        }
        if d.switched() {
            let rcfg = self.reclaim_config(s.total_bytes);
            let detail = format!(
                "{} -> {}: n_alloc {alloc_pages} pages/tick (N_alloc {}), M_aval {} (M_F {}), anon {} file {}",
                d.prev_mode.name(),
                d.mode.name(),
                rcfg.alloc_threshold_pages,
                s.avail_bytes,
                rcfg.low_memory_threshold(s.total_bytes),
                s.anon_bytes,
                s.file_bytes
            );
            self.log_marked(
                s.now_ms,
                "reclaim",
                Some(d.reason),
                detail,
                Some(Mark::ModeSwitch {
                    from: d.prev_mode,
                    to: d.mode,
                }),
            );
            self.stats.count_switch(d.prev_mode, d.mode);
            if d.mode == ReclaimMode::EfficiencyFirst {
                self.dropped_cold = false;
            }
            if d.mode == ReclaimMode::Normal {
                // Standby sets may have been left unloaded during the pressure.
                self.standby_dirty = true;
            }
            self.apply_mode(in_force, s.now_ms, reclaim);
        } else if self.ef_yielded != was_yielded
            || (in_force == ReclaimMode::EfficiencyFirst && s.now_ms >= self.ef_reapply_at_ms)
        {
            // A yield begins or ends; or cgroups created during the burst
            // get the mode too.
            self.apply_mode(in_force, s.now_ms, reclaim);
        }
        if d.mode == ReclaimMode::EfficiencyFirst && self.cfg.drop_cold_files && !self.dropped_cold
        {
            self.dropped_cold = true;
            self.drop_cold_files(s.now_ms, reclaim);
        }
        if d.anon_reclaim_bytes > 0 && !self.page_out_unsupported {
            let step = self.page_out_step(s.total_bytes, reclaim);
            let out = self.page_out(d.anon_reclaim_bytes.min(step), s.now_ms, procs, reclaim);
            self.controller.paged_out(out, s.avail_bytes);
        }
        d.mode
    }

    /// The most one rebalancing tick pages out: the configured step; with
    /// none (0), one tick of page-out at the rate the mechanism has
    /// measured, so that rebalancing frees memory as fast as the device
    /// compresses it without holding the tick longer than a tick; before
    /// any rate is known, N_alloc pages (the rate at which the device's
    /// reclaim supplies memory, the AppFlow paper §4.2.1).
    fn page_out_step(&mut self, total_bytes: u64, reclaim: &dyn ReclaimMechanism) -> u64 {
        let rcfg = self.reclaim_config(total_bytes);
        if rcfg.rebalance_step_bytes > 0 {
            return rcfg.rebalance_step_bytes;
        }
        let rate = reclaim
            .page_out_bytes_per_sec()
            .filter(|r| r.is_finite() && *r > 0.0)
            .unwrap_or_else(|| rcfg.reclaim_bytes_per_sec());
        ((rate * rcfg.tick_ms as f64 / 1000.0) as u64).max(crate::PAGE_BYTES)
    }

    fn apply_mode(&mut self, mode: ReclaimMode, now_ms: u64, reclaim: &mut dyn ReclaimMechanism) {
        self.ef_reapply_at_ms = now_ms + 1000;
        match reclaim.apply_mode(mode) {
            Ok(()) | Err(MechError::Unsupported(_)) => {}
            Err(e) => self.mech_error(now_ms, &format!("applying {}", mode.name()), &e),
        }
    }

    /// Pages out up to `budget` bytes of the background apps' anonymous
    /// memory; returns the bytes paged out.
    pub(super) fn page_out(
        &mut self,
        budget: u64,
        now_ms: u64,
        procs: &[ProcInfo],
        reclaim: &mut dyn ReclaimMechanism,
    ) -> u64 {
        let mut left = budget;
        let mut done = 0;
        if !reclaim.page_out_possible(left) {
            return 0;
        }
        for pid in self.background_app_pids_memo(procs) {
            if left == 0 || !reclaim.page_out_possible(left) {
                break;
            }
            match reclaim.page_out_anon(pid, left) {
                Ok(n) => {
                    self.stats.reclaimed_anon_bytes += n;
                    done += n;
                    left = left.saturating_sub(n.max(1));
                }
                Err(MechError::Vanished(_)) => {}
                Err(MechError::Unsupported(f)) => {
                    self.log(
                        now_ms,
                        "error",
                        None,
                        format!("anonymous page-out unavailable ({f}); rebalancing only restores the kernel's balance"),
                    );
                    self.page_out_unsupported = true;
                    break;
                }
                Err(e) => {
                    self.stats.page_out_failures += 1;
                    self.mech_error(now_ms, &format!("page-out of pid {pid}"), &e);
                }
            }
        }
        done
    }

    /// Drops profiled files of background apps that are neither held in the
    /// standby set nor protected by a launch.
    fn drop_cold_files(&mut self, now_ms: u64, reclaim: &mut dyn ReclaimMechanism) {
        let active = self.active_apps();
        let held: BTreeSet<&str> = self
            .standby
            .values()
            .flat_map(|v| v.iter())
            .map(|s| s.path.as_str())
            .collect();
        let mut protected: BTreeSet<&str> = BTreeSet::new();
        for a in &active {
            if let Some(p) = self.profiles.get(a) {
                protected.extend(p.files.iter().map(|f| f.path.as_str()));
            }
        }
        let mut targets: Vec<String> = Vec::new();
        for (app, p) in &self.profiles {
            if active.contains(app) {
                continue;
            }
            for f in &p.files {
                if !held.contains(f.path.as_str()) && !protected.contains(f.path.as_str()) {
                    targets.push(f.path.clone());
                }
            }
        }
        targets.sort();
        targets.dedup();
        let mut files = 0u64;
        for path in targets {
            if reclaim.drop_file(&path, 0, 0).is_ok() {
                files += 1;
            }
        }
        self.stats.dropped_files += files;
        self.log(
            now_ms,
            "reclaim",
            Some(Reason::ReclaimBurstDetected),
            format!("efficiency-first: dropped {files} cold unprotected files of background apps"),
        );
    }
}
