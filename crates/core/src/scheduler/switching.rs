//! ASAP's part of the scheduler (seed 002): prepage an app's switch
//! footprint when it is switched back to the foreground, and learn the
//! footprint from what each foreground window brought back
//! ([`crate::prepage`]). PMR's user-space part (seed 001): page out
//! background apps' anonymous memory in per-app batches ahead of bursts
//! ([`crate::proactive`]).

use super::{DomainSample, ProcInfo, Scheduler};
use crate::mechanism::{MechError, PreloadMechanism, ReclaimMechanism};
use crate::policy::{ReclaimStrategy, SwitchStrategy};
use crate::prepage::Feedback;
use crate::proactive;

impl Scheduler {
    fn prepaging(&self) -> bool {
        self.cfg.preload_enabled && self.cfg.policy.switch == SwitchStrategy::Prepage
    }

    pub(super) fn proactive_active(&self) -> bool {
        self.cfg.reclaim_enabled && self.cfg.policy.reclaim == ReclaimStrategy::Proactive
    }

    /// Precision and recall of the switch prepaging so far.
    pub fn switch_feedback(&self) -> Feedback {
        self.footprints.feedback
    }

    /// A running app came back to the foreground: prepage its footprint.
    pub(super) fn start_switch(
        &mut self,
        app: &str,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        if !self.prepaging() || self.prepage_unsupported {
            return;
        }
        let plan = self.footprints.plan(app);
        if plan.is_empty() {
            return;
        }
        match preload.prepage(app, &plan) {
            Ok(n) => {
                self.stats.prepage_calls += 1;
                self.stats.prepage_requested_bytes += n;
                self.log(
                    now_ms,
                    "prepage",
                    None,
                    format!(
                        "{app}: prepaging {} anonymous + {} file bytes of its switch footprint",
                        plan.anon_bytes, plan.file_bytes
                    ),
                );
            }
            Err(MechError::Unsupported(f)) => {
                self.prepage_unsupported = true;
                self.log(
                    now_ms,
                    "error",
                    None,
                    format!("switch prepaging unavailable ({f}); switches page on demand"),
                );
            }
            Err(e) => self.mech_error(now_ms, &format!("prepaging {app}"), &e),
        }
    }

    /// An app left the foreground (or exited): record what its window brought back.
    pub(super) fn end_window(
        &mut self,
        app: &str,
        exited: bool,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        if !self.prepaging() {
            return;
        }
        match preload.switch_observation(app) {
            Ok(Some(o)) if !exited => self.footprints.observe(app, &o),
            Ok(_) => {}
            Err(e) => self.mech_error(now_ms, &format!("switch footprint of {app}"), &e),
        }
        if exited {
            self.footprints.forget(app);
        }
    }

    /// Whether the proactive reclaimer wants the processes this tick.
    pub(super) fn proactive_wants_procs(&self, s: &DomainSample) -> bool {
        self.proactive_active()
            && !self.page_out_unsupported
            && proactive::page_out_budget(s.avail_bytes) > 0
    }

    /// PMR's tick: while less than δ is available, page out background
    /// apps (least recently used first) one unmap unit per call.
    pub(super) fn proactive_step(
        &mut self,
        s: &DomainSample,
        procs: &[ProcInfo],
        reclaim: &mut dyn ReclaimMechanism,
    ) {
        if !self.proactive_wants_procs(s) {
            return;
        }
        let mut left = proactive::page_out_budget(s.avail_bytes);
        for _ in 0..proactive::units(left) {
            let before = self.stats.reclaimed_anon_bytes;
            self.page_out(
                left.min(proactive::UNMAP_UNIT_BYTES),
                s.now_ms,
                procs,
                reclaim,
            );
            let got = self.stats.reclaimed_anon_bytes - before;
            if got == 0 || self.page_out_unsupported {
                break;
            }
            self.stats.proactive_bytes += got;
            left = left.saturating_sub(got);
        }
    }
}

impl Scheduler {
    /// Whether the next tick will look at the processes (rebalancing, a
    /// kill considered, or a proactive page-out due): drivers read the
    /// process list, and footprints, only then.
    pub fn wants_procs(&self, s: &DomainSample) -> bool {
        self.mode() != crate::reclaim::ReclaimMode::Normal
            || self.kill_wanted(s).is_ok()
            || self.proactive_wants_procs(s)
    }
}
