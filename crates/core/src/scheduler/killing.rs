//! The Context-Aware Process Killer's part of the scheduler (the AppFlow paper §4.3):
//! when to kill, which apps are candidates, and the victim.
//!
//! * The trigger is the core's [`killer::should_kill`]: memory low and
//!   reclaim unable to keep up (memory mostly anonymous, and swap nearly full or a
//!   memory stall), never twice within the settle time.
//! * Candidates are apps with processes in the domain, one per app; the
//!   foreground app, protected names, the daemon's own processes and PID 1
//!   are excluded.
//! * Recently used apps are deferred. When only they remain, a kill of one
//!   (the *last resort*) happens only when the kernel is about to run out:
//!   memory low, anonymous memory dominant and swap full
//!   ([`killer::last_resort_allowed`]); a stall alone is not enough.

use super::{DomainSample, Mark, ProcId, ProcInfo, Scheduler};
use crate::killer::{self, Candidate, PressureState};
use crate::mechanism::{KillMechanism, MechError};
use crate::policy::KillerStrategy;
use crate::reason::Reason;
use std::collections::BTreeMap;

impl Scheduler {
    fn pressure(&self, s: &DomainSample) -> PressureState {
        PressureState {
            now_ms: s.now_ms,
            avail_bytes: s.avail_bytes,
            total_bytes: s.total_bytes,
            anon_bytes: s.anon_bytes,
            file_bytes: s.file_bytes,
            swap_total_bytes: s.swap_total_bytes,
            swap_free_bytes: s.swap_free_bytes,
            psi_some_avg10: s.psi_some_avg10.unwrap_or(0.0),
            psi_some_window: self.psi_some_window(s),
            last_kill_ms: self.last_kill_ms,
        }
    }

    /// The memory stall over the killer's window, percent: from the newest
    /// earlier tick at least `killer.capacity_stall_window_ms` before `s`
    /// to `s` (the cumulative PSI counter), None until the history spans
    /// the window or without PSI. A pure function of the recorded ticks and
    /// `s`, so asking before the tick ([`Self::kill_wanted`]) and within it
    /// gives the same answer.
    fn psi_some_window(&self, s: &DomainSample) -> Option<f64> {
        let now_total = s.psi_some_total_us?;
        let window = self.cfg.killer.capacity_stall_window_ms;
        let &(t, total) = self
            .psi_history
            .iter()
            .rev()
            .find(|(t, _)| s.now_ms.saturating_sub(*t) >= window)?;
        killer::stall_percent(total, now_total, s.now_ms - t)
    }

    /// Keeps the tick's PSI counter for the stall window: what is older
    /// than the newest sample a full window back is dropped.
    pub(super) fn record_psi(&mut self, s: &DomainSample) {
        let Some(total) = s.psi_some_total_us else {
            self.psi_history.clear();
            return;
        };
        if self.psi_history.back().is_some_and(|&(t, _)| t >= s.now_ms) {
            return;
        }
        self.psi_history.push_back((s.now_ms, total));
        let window = self.cfg.killer.capacity_stall_window_ms;
        while self.psi_history.len() > 1 && s.now_ms.saturating_sub(self.psi_history[1].0) >= window
        {
            self.psi_history.pop_front();
        }
    }

    /// Whether the killer should act now (the core's trigger).
    pub fn kill_wanted(&self, s: &DomainSample) -> Result<Reason, Reason> {
        if self.cfg.killer_strategy() == KillerStrategy::Kernel {
            return Err(Reason::KillNotNeeded);
        }
        killer::should_kill(&self.cfg.killer, &self.pressure(s))
    }

    /// The killer's clock: the scheduler's ms clock shifted by one recency
    /// window, so "never used" (0) is always outside the window.
    pub fn killer_now_ms(&self, now_ms: u64) -> u64 {
        now_ms + self.cfg.killer.recency_window_ms
    }

    /// Builds the killer's candidates: one per app with processes in the
    /// domain (pid = its lowest pid), with the identities of its processes.
    /// Processes of no app are never candidates. `last_used_ms` is on the
    /// [`Self::killer_now_ms`] clock.
    pub fn candidates(&self, procs: &[ProcInfo]) -> (Vec<Candidate>, Vec<Vec<ProcId>>) {
        let mut groups: BTreeMap<&str, Vec<&ProcInfo>> = BTreeMap::new();
        for p in procs {
            if let Some(a) = &p.app {
                groups.entry(a.as_str()).or_default().push(p);
            }
        }
        let window = self.cfg.killer.recency_window_ms;
        let mut cands = Vec::new();
        let mut ids = Vec::new();
        for (app, ps) in groups {
            let relaunch = self
                .profiles
                .get(app)
                .map(|p| p.relaunch_footprint_bytes)
                .filter(|&b| b > 0);
            let last_used = self
                .apps
                .get(app)
                .and_then(|a| a.last_used_ms)
                .map_or(0, |t| t + window);
            cands.push(Candidate {
                pid: ps.iter().map(|p| p.pid).min().unwrap_or(0),
                app: app.to_string(),
                current_bytes: ps.iter().filter_map(|p| p.footprint_bytes).sum(),
                relaunch_bytes: relaunch,
                last_used_ms: last_used,
                foreground: ps.iter().any(|p| self.is_foreground_proc(p)),
                protected: ps
                    .iter()
                    .any(|p| p.protected || self.cfg.protected_comms.contains(&p.comm)),
                is_self: ps
                    .iter()
                    .any(|p| p.pid <= 1 || self.self_pids.contains(&p.pid)),
                oom_score_adj: ps.iter().map(|p| p.oom_score_adj).max().unwrap_or(0),
            });
            ids.push(ps.iter().map(|p| p.id()).collect());
        }
        (cands, ids)
    }

    /// Whether a process's footprint is of no use to the killer: it belongs
    /// to no app, or it is a foreground process by the rule
    /// [`Self::candidates`] applies (which makes its whole app no victim).
    /// Drivers skip measuring those: reading a footprint
    /// (`/proc/PID/smaps_rollup`) walks the process's page tables under its
    /// mmap lock, which the launching app needs for every fault and mapping.
    pub fn footprint_unneeded(&self, p: &ProcInfo) -> bool {
        p.app.is_none() || self.is_foreground_proc(p)
    }

    /// The killer's part of a tick, once [`Self::kill_wanted`] said yes and
    /// the processes' footprints were read. Returns the victim app.
    pub fn kill_step(
        &mut self,
        s: &DomainSample,
        procs: &[ProcInfo],
        kill: &mut dyn KillMechanism,
    ) -> Option<String> {
        let (cands, ids) = self.candidates(procs);
        let now_k = self.killer_now_ms(s.now_ms);
        let kcfg = &self.cfg.killer;
        let mut d = match self.cfg.killer_strategy() {
            KillerStrategy::Lru => killer::choose_victim_lru(kcfg, &cands),
            _ => killer::choose_victim(kcfg, now_k, &cands),
        };
        if d.reason == Reason::KillRecentLastResort
            && !killer::last_resort_allowed(kcfg, &self.pressure(s))
        {
            d.victim = None;
            d.reason = Reason::KillDeferredRecent;
        }
        let Some(i) = d.victim else {
            if self.last_kill_reason != Some(d.reason) {
                let detail = format!(
                    "no kill: {} candidates, none eligible{}",
                    cands.len(),
                    if d.reason == Reason::KillDeferredRecent {
                        " (only recently used apps, and the domain is not about to run out)"
                    } else {
                        ""
                    }
                );
                self.log(s.now_ms, "kill", Some(d.reason), detail);
                self.last_kill_reason = Some(d.reason);
            }
            return None;
        };
        let c = &cands[i];
        let recency = (c.last_used_ms > 0).then(|| now_k.saturating_sub(c.last_used_ms) / 1000);
        let mut killed = 0;
        let mut reaped = false;
        let mut failures = Vec::new();
        for &id in &ids[i] {
            match kill.kill(id, d.reason) {
                Ok(o) => {
                    killed += 1;
                    reaped |= o.reaped;
                }
                Err(MechError::Vanished(_)) => {}
                Err(e) => failures.push(format!("pid {}: {e}", id.pid)),
            }
        }
        let p = self.pressure(s);
        let detail = format!(
            "killed {} ({} of {} processes, pid {}): ΔM {} bytes, footprint {} bytes, relaunch {}, last used {}, reaped {reaped}; \
             trigger: available {} of {} bytes, anon {} / file {} bytes, swap free {} of {} bytes, PSI some avg10 {:.1} %, over the window {}",
            c.app,
            killed,
            ids[i].len(),
            c.pid,
            d.net_freed_bytes,
            c.current_bytes,
            c.relaunch_bytes
                .map_or("unknown".to_string(), |b| format!("{b} bytes")),
            recency.map_or("never".to_string(), |r| format!("{r} s ago")),
            p.avail_bytes,
            p.total_bytes,
            p.anon_bytes,
            p.file_bytes,
            p.swap_free_bytes,
            p.swap_total_bytes,
            p.psi_some_avg10,
            p.psi_some_window
                .map_or("unknown".to_string(), |w| format!("{w:.1} %")),
        );
        self.last_kill_ms = Some(s.now_ms);
        self.last_kill_reason = Some(d.reason);
        self.stats.count_kill(d.reason, c.current_bytes);
        let app = c.app.clone();
        let mark = Mark::Kill {
            app: app.clone(),
            pid: c.pid,
            net_freed_bytes: d.net_freed_bytes,
        };
        self.log_marked(s.now_ms, "kill", Some(d.reason), detail, Some(mark));
        for f in failures {
            self.log(
                s.now_ms,
                "error",
                None,
                format!("kill of {app} failed: {f}"),
            );
        }
        if killed > 0 {
            self.clear_announced(&app);
            self.end_launching(&app);
        }
        Some(app)
    }
}
