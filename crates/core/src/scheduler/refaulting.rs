//! The re-fault study's part of the scheduler (the re-fault study §5): every
//! tick feeds the domain's reclaim counters to the re-fault controller
//! ([`crate::refault`]); a complete window may move kswapd's reclaim step
//! (`vm.watermark_scale_factor`) through the reclaim mechanism. A domain
//! without a step to tune (a memory cgroup) is measured and reported only.

use super::{DomainSample, Scheduler};
use crate::mechanism::{MechError, ReclaimMechanism};
use crate::policy::ReclaimStrategy;
use crate::reason::Reason;

/// Whether the domain's kswapd step is known yet.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) enum StepKnob {
    /// Not asked yet.
    #[default]
    Unknown,
    /// The range the controller moves the knob in.
    Known(crate::refault::StepRange),
    /// Nothing to tune here, or the knob could not be read (logged once).
    Absent,
}

impl Scheduler {
    pub(super) fn refault_active(&self) -> bool {
        self.cfg.reclaim_enabled && self.cfg.policy.reclaim == ReclaimStrategy::RefaultAware
    }

    /// The re-fault controller's tick.
    pub(super) fn refault_step(&mut self, s: &DomainSample, reclaim: &mut dyn ReclaimMechanism) {
        if !self.refault_active() {
            return;
        }
        if self.step_knob == StepKnob::Unknown {
            match reclaim.reclaim_step_range() {
                Ok(r) => {
                    self.step_knob = StepKnob::Known(r);
                    self.refault.set_step(r.stock);
                    self.stats.reclaim_step = Some(r.stock);
                    let what = if r.can_lower() {
                        format!(
                            "kswapd step: watermark_scale_factor {} (stock), may go down to {}",
                            r.stock,
                            r.lowest()
                        )
                    } else {
                        format!(
                            "kswapd step: watermark_scale_factor {} is already at its floor {} (min_free_kbytes / 4 sets the gap): nothing to lower, re-faults measured only",
                            r.stock, r.floor
                        )
                    };
                    self.log(s.now_ms, "reclaim", Some(Reason::ReclaimStepHeld), what);
                }
                Err(e) => {
                    // Unsupported says why there is nothing to tune; any
                    // other failure (the knob unreadable) is not retried
                    // every tick either: the policy measures only.
                    self.step_knob = StepKnob::Absent;
                    let why = match e {
                        MechError::Unsupported(why) => why,
                        e => format!("reading kswapd's step failed: {e}"),
                    };
                    self.log(
                        s.now_ms,
                        "reclaim",
                        Some(Reason::ReclaimStepNoKnob),
                        format!("nothing to tune ({why}); the re-fault ratio is measured and reported only"),
                    );
                }
            }
        }
        let range = match self.step_knob {
            StepKnob::Known(r) => Some(r),
            _ => None,
        };
        let Some(d) = self.refault.observe(s.now_ms, s.refault_counters(), range) else {
            return;
        };
        self.stats.refault_windows += 1;
        self.stats.refault_total = self.refault.total();
        let w = d.window;
        let mut reason = d.reason();
        if d.changes() {
            match reclaim.set_reclaim_step(d.to) {
                Ok(()) => {
                    self.refault.set_step(d.to);
                    self.stats.reclaim_step = Some(d.to);
                    self.stats.reclaim_step_changes += 1;
                }
                Err(e) => {
                    self.mech_error(s.now_ms, "setting kswapd's step", &e);
                    reason = Reason::ReclaimStepHeld;
                }
            }
        }
        self.stats.count_reclaim_reason(reason);
        let step = match range {
            Some(_) => format!(
                "watermark_scale_factor {} -> {}",
                d.from,
                self.refault.step().unwrap_or(d.from)
            ),
            None => "no step to tune".to_string(),
        };
        self.log(
            s.now_ms,
            "reclaim",
            Some(reason),
            format!(
                "{step}: re-fault ratio {:.3} ({} of {} evicted), direct share {:.3} ({} direct, {} kswapd) over {} ms",
                w.refault_ratio(),
                w.refault_pages,
                w.evicted_pages,
                w.direct_share(),
                w.direct_pages,
                w.kswapd_pages,
                w.ms
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::mechanism::{Call, Recorder};
    use crate::reason::Reason;
    use crate::refault::StepRange;
    use crate::scheduler::{DomainSample, Scheduler};
    use crate::MIB;

    fn sched(name: &str) -> Scheduler {
        crate::scheduler::tests::sched_of(name, &[])
    }

    fn sample(now_ms: u64, refault: u64, steal: u64, kswapd: u64) -> DomainSample {
        DomainSample {
            now_ms,
            total_bytes: 6144 * MIB,
            avail_bytes: 3000 * MIB,
            refault_pages: refault,
            steal_pages: steal,
            steal_kswapd_pages: kswapd,
            ..Default::default()
        }
    }

    fn steps(r: &Recorder) -> Vec<u32> {
        r.calls
            .iter()
            .filter_map(|c| match c {
                Call::ReclaimStep(w) => Some(*w),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_step_goes_down_with_refaults_and_back_up_with_direct_reclaim() {
        let mut s = sched("refault");
        let mut r = Recorder::default();
        r.step_range = Some(StepRange::new(62, 6144 * MIB, 77 * MIB));
        s.tick(&sample(0, 0, 0, 0), 0, &[], &mut r);
        assert_eq!(s.stats.reclaim_step, Some(62));
        // Every 10 s: 40 % of 10,000 evicted pages re-faulted, all by
        // kswapd; lowered once three minutes of it are behind the rule.
        for i in 1..=17u64 {
            s.tick(
                &sample(i * 10_000, i * 4_000, i * 10_000, i * 10_000),
                0,
                &[],
                &mut r,
            );
        }
        assert!(steps(&r).is_empty());
        s.tick(&sample(180_000, 72_000, 180_000, 180_000), 0, &[], &mut r);
        assert_eq!(steps(&r), vec![32]);
        // Already at the floor: held.
        s.tick(&sample(190_000, 76_000, 190_000, 190_000), 0, &[], &mut r);
        assert_eq!(steps(&r), vec![32]);
        // Direct reclaim now 30 % of the evictions: back to stock.
        s.tick(&sample(200_000, 77_000, 200_000, 197_000), 0, &[], &mut r);
        assert_eq!(steps(&r), vec![32, 62]);
        assert_eq!(s.stats.reclaim_step, Some(62));
        assert_eq!(s.stats.reclaim_step_changes, 2);
        assert_eq!(s.stats.refault_windows, 20);
        assert_eq!(s.stats.refault_total.evicted_pages, 200_000);
        let codes: Vec<_> = s.take_decisions().iter().filter_map(|d| d.reason).collect();
        assert!(codes.contains(&Reason::ReclaimStepLowered), "{codes:?}");
        assert!(codes.contains(&Reason::ReclaimStepRaised), "{codes:?}");
    }

    #[test]
    fn without_a_knob_it_measures_and_changes_nothing() {
        let mut s = sched("refault");
        let mut r = Recorder::default();
        s.tick(&sample(0, 0, 0, 0), 0, &[], &mut r);
        s.tick(&sample(10_000, 4_000, 10_000, 0), 0, &[], &mut r);
        assert!(r.calls.is_empty(), "{:?}", r.calls);
        assert_eq!(s.stats.refault_windows, 1);
        assert_eq!(s.stats.reclaim_step, None);
        let d = s.take_decisions();
        assert!(d
            .iter()
            .any(|d| d.reason == Some(Reason::ReclaimStepNoKnob)
                && d.detail.contains("nothing to tune")));
        assert!(
            d.iter().any(|d| d.detail.contains("re-fault ratio 0.400")),
            "{d:?}"
        );
    }

    #[test]
    fn other_policies_never_touch_the_step() {
        for name in ["stock", "appflow", "pmr"] {
            let mut s = sched(name);
            let mut r = Recorder::default();
            r.step_range = Some(StepRange::new(62, 6144 * MIB, 77 * MIB));
            s.tick(&sample(0, 0, 0, 0), 0, &[], &mut r);
            s.tick(&sample(10_000, 4_000, 10_000, 10_000), 0, &[], &mut r);
            assert!(steps(&r).is_empty(), "{name}");
            assert_eq!(s.stats.refault_windows, 0, "{name}");
        }
    }
}
