//! ASAP's part of the scheduler (the ASAP paper): prepage an app's switch
//! footprint when it is switched back to the foreground, and learn the
//! footprint from what each foreground window brought back
//! ([`crate::prepage`]). PMR's user-space part (the PMR paper): page out
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

    /// Whether the foreground windows are observed: ASAP learns its
    /// footprints from them, Ariadne its hot sets.
    fn tracks_windows(&self) -> bool {
        self.prepaging() || self.cold_marking()
    }

    pub(super) fn proactive_active(&self) -> bool {
        self.cfg.reclaim_enabled && self.cfg.policy.reclaim == ReclaimStrategy::Proactive
    }

    /// Precision and recall of the switch prepaging so far.
    pub fn switch_feedback(&self) -> Feedback {
        self.footprints.feedback
    }

    /// Remembers which processes the driver attributed to each app this
    /// tick (the processes a window of the app is observed in).
    pub(super) fn note_app_procs(&mut self, procs: &[ProcInfo]) {
        if !self.tracks_windows() {
            return;
        }
        // The same processes (identities and apps, in the same order) as at
        // the latest noting, with no app's state changed since: the
        // processes seen are those already (their stamps are older, which
        // only the next change reads, through the retain below).
        let same = self.noted_epoch == Some(self.apps_epoch)
            && self.noted.len() == procs.len()
            && self
                .noted
                .iter()
                .zip(procs)
                .all(|((id, app), p)| *id == p.id() && *app == p.app);
        if same {
            return;
        }
        self.noted_epoch = Some(self.apps_epoch);
        self.noted.clear();
        self.noted
            .extend(procs.iter().map(|p| (p.id(), p.app.clone())));
        // Updated in place rather than emptied and refilled: an app's
        // processes are mostly those of the previous tick, and this runs at
        // every tick that lists processes. Each is stamped with this tick;
        // those left with an older stamp are no longer the app's.
        self.procs_noted += 1;
        let tick = self.procs_noted;
        for p in procs {
            if let Some(a) = p.app.as_ref().and_then(|a| self.apps.get_mut(a)) {
                a.seen.insert(p.id(), tick);
            }
        }
        for a in self.apps.values_mut() {
            a.seen.retain(|_, t| *t == tick);
        }
    }

    /// A foreground window of `app` begins (its launch, or a `switch`):
    /// the mechanism notes what of its processes is out of memory now
    /// (ASAP's footprint, Ariadne's hot set).
    pub(super) fn start_window(
        &mut self,
        app: &str,
        switch: bool,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        if !self.tracks_windows() {
            return;
        }
        if let Some(a) = self.apps.get_mut(app) {
            a.switch_window = switch;
        }
        let ids = self.app_proc_ids(app);
        if let Err(e) = preload.start_window(app, &ids) {
            self.mech_error(now_ms, &format!("switch window of {app}"), &e);
        }
    }

    /// A running app came back to the foreground: prepage its predicted
    /// switch footprint (the candidate table's amounts), cut so that what
    /// it is expected to waste, at the precision measured so far, fits the
    /// room above the killer's trigger level.
    pub(super) fn start_switch(
        &mut self,
        app: &str,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        self.start_window(app, true, now_ms, preload);
        if !self.prepaging() || self.prepage_unsupported {
            return;
        }
        let wanted = self.footprints.plan(app);
        if wanted.is_empty() {
            return;
        }
        let precision = self.footprints.feedback.precision_by_kind();
        let plan = wanted.bounded_waste(self.room(), precision);
        if plan != wanted {
            self.stats.prepage_bounded += 1;
            self.stats.prepage_bounded_bytes +=
                (wanted.anon_bytes + wanted.file_bytes) - (plan.anon_bytes + plan.file_bytes);
        }
        if plan.is_empty() {
            self.log(
                now_ms,
                "prepage",
                None,
                format!(
                    "{app}: no room to prepage its switch footprint ({} bytes)",
                    wanted.anon_bytes + wanted.file_bytes
                ),
            );
            return;
        }
        let ids = self.app_proc_ids(app);
        match preload.prepage(app, &ids, &plan) {
            Ok(n) => {
                self.stats.prepage_calls += 1;
                self.stats.prepage_requested_bytes += n;
                self.log(
                    now_ms,
                    "prepage",
                    None,
                    format!(
                        "{app}: prepaging {} anonymous + {} file bytes of its switch footprint ({} wanted)",
                        plan.anon_bytes,
                        plan.file_bytes,
                        wanted.anon_bytes + wanted.file_bytes
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

    /// An app left the foreground (or exited): record what its window
    /// brought back. Only a switch's window is a switch footprint: ASAP's
    /// estimator logs the page faults of switches (the ASAP paper, "Switch
    /// Footprint Estimator"), and a launch's window (a new process's
    /// allocation and its whole launch set) predicts no switch; an app's
    /// first switch after its launch therefore prepages nothing.
    pub(super) fn end_window(
        &mut self,
        app: &str,
        exited: bool,
        now_ms: u64,
        preload: &mut dyn PreloadMechanism,
    ) {
        if !self.tracks_windows() {
            return;
        }
        let switch = self
            .apps
            .get_mut(app)
            .is_some_and(|a| std::mem::take(&mut a.switch_window));
        let ids = self.app_proc_ids(app);
        match preload.switch_observation(app, &ids) {
            Ok(Some(o)) if !exited && switch && self.prepaging() => {
                self.footprints.observe(app, &o)
            }
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
            let got = self.page_out(
                left.min(proactive::UNMAP_UNIT_BYTES),
                s.now_ms,
                procs,
                reclaim,
            );
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
            || self.wants_footprints(s)
            || self.proactive_wants_procs(s)
    }
}

#[cfg(test)]
mod tests {
    use crate::mechanism::{Call, Recorder};
    use crate::prepage::{PrepagePlan, SwitchObservation};
    use crate::scheduler::{DomainSample, EventKind, ProcId, ProcInfo, Scheduler};
    use crate::MIB;

    fn sched(name: &str) -> Scheduler {
        crate::scheduler::tests::sched_of(name, &["a", "b"])
    }

    use crate::scheduler::tests::ev;

    #[test]
    fn asap_prepages_the_last_footprint_at_the_next_switch() {
        let mut s = sched("asap");
        let mut r = Recorder::default();
        let a = ProcId {
            pid: 4242,
            start_time: 77,
        };
        s.notify(EventKind::Launch, "a", Some(a), 0, &mut r)
            .unwrap();
        // The launch is the app's first window, observed in its process.
        assert_eq!(
            r.calls.last(),
            Some(&Call::Window {
                app: "a".into(),
                procs: vec![a]
            })
        );
        ev(&mut s, &mut r, EventKind::Launched, "a", 500);
        // A launcher's "foreground" after the launch continues its window.
        let n = r.calls.len();
        ev(&mut s, &mut r, EventKind::Foreground, "a", 600);
        assert_eq!(r.calls.len(), n, "{:?}", &r.calls[n..]);
        // The launch's window (its allocation, its launch set) is no
        // switch footprint: it teaches the estimator nothing.
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                demand_anon: 300 * MIB,
                demand_file: 90 * MIB,
                ..Default::default()
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 1000);
        ev(&mut s, &mut r, EventKind::Foreground, "a", 1500);
        assert!(!r.calls.iter().any(|c| matches!(c, Call::Prepage { .. })));
        assert_eq!(
            r.calls.last(),
            Some(&Call::Window {
                app: "a".into(),
                procs: vec![a]
            })
        );
        // The first switch faulted 80 MiB anon + 20 MiB file: the next
        // switch prepages that.
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                demand_anon: 80 * MIB,
                demand_file: 20 * MIB,
                ..Default::default()
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 1800);
        ev(&mut s, &mut r, EventKind::Foreground, "a", 2000);
        let plan = PrepagePlan {
            anon_bytes: 80 * MIB,
            file_bytes: 20 * MIB,
        };
        assert_eq!(
            r.calls.last(),
            Some(&Call::Prepage {
                app: "a".into(),
                procs: vec![a],
                plan
            })
        );
        // Feedback: half of it used, 10 MiB more faulted: the next plan shrinks.
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                prepaged_anon: 80 * MIB,
                prepaged_file: 20 * MIB,
                used_anon: 40 * MIB,
                used_file: 10 * MIB,
                demand_anon: 10 * MIB,
                demand_file: 0,
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 3000);
        assert_eq!(s.switch_feedback().precision(), Some(0.5));
        ev(&mut s, &mut r, EventKind::Foreground, "a", 4000);
        assert_eq!(
            r.calls.last(),
            Some(&Call::Prepage {
                app: "a".into(),
                procs: vec![a],
                plan: PrepagePlan {
                    anon_bytes: 50 * MIB,
                    file_bytes: 10 * MIB
                }
            })
        );
        assert_eq!(s.stats.prepage_calls, 2);
        // An exit forgets the app: a relaunch is cold, nothing to prepage.
        ev(&mut s, &mut r, EventKind::Exit, "a", 5000);
        let n = r.calls.len();
        ev(&mut s, &mut r, EventKind::Foreground, "a", 6000);
        assert!(
            !r.calls[n..]
                .iter()
                .any(|c| matches!(c, Call::Prepage { .. })),
            "{:?}",
            &r.calls[n..]
        );
    }

    #[test]
    fn a_switch_prepages_what_its_expected_waste_leaves_room_for() {
        let mut s = sched("asap");
        let mut r = Recorder::default();
        ev(&mut s, &mut r, EventKind::Launch, "a", 0);
        ev(&mut s, &mut r, EventKind::Background, "a", 500);
        ev(&mut s, &mut r, EventKind::Foreground, "a", 600);
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                demand_anon: 300 * MIB,
                demand_file: 100 * MIB,
                ..Default::default()
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 1000);
        // The processes the driver attributes to the app in a tick are
        // the ones its windows are observed in.
        let floor = (s.config().killer.trigger_avail_fraction * (6144 * MIB) as f64) as u64;
        let mut t = sample(0);
        t.avail_bytes = floor + 200 * MIB;
        s.tick(&t, 0, &procs(), &mut r);
        ev(&mut s, &mut r, EventKind::Foreground, "a", 2000);
        let last = r.calls.last().unwrap().clone();
        let Call::Prepage { procs: p, plan, .. } = last else {
            panic!("{last:?}")
        };
        assert_eq!(p, vec![procs()[0].id()]);
        // No precision measured yet: all of it counts as waste.
        assert_eq!(
            plan,
            PrepagePlan {
                anon_bytes: 150 * MIB,
                file_bytes: 50 * MIB
            }
        );
        // Half the anonymous pages used, all the file pages: the same
        // footprint wastes 150 MiB, which the same room holds whole.
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                prepaged_anon: 150 * MIB,
                prepaged_file: 50 * MIB,
                used_anon: 75 * MIB,
                used_file: 50 * MIB,
                demand_anon: 225 * MIB,
                demand_file: 50 * MIB,
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 2500);
        s.tick(&t, 0, &procs(), &mut r);
        ev(&mut s, &mut r, EventKind::Foreground, "a", 2600);
        let last = r.calls.last().unwrap().clone();
        let Call::Prepage { plan, .. } = last else {
            panic!("{last:?}")
        };
        assert_eq!(
            plan,
            PrepagePlan {
                anon_bytes: 300 * MIB,
                file_bytes: 100 * MIB
            }
        );
        // No room at all: no prepaging, the window is still observed.
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                demand_anon: 300 * MIB,
                ..Default::default()
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 3000);
        t.avail_bytes = floor / 2;
        s.tick(&t, 0, &procs(), &mut r);
        let n = r.calls.len();
        ev(&mut s, &mut r, EventKind::Foreground, "a", 4000);
        assert!(
            matches!(&r.calls[n..], [Call::Window { .. }]),
            "{:?}",
            &r.calls[n..]
        );
        assert_eq!(s.stats.prepage_calls, 2);
    }

    #[test]
    fn policies_without_prepaging_never_prepage() {
        for name in ["stock", "appflow", "pmr"] {
            let mut s = sched(name);
            let mut r = Recorder::default();
            r.observations.insert(
                "a".into(),
                SwitchObservation {
                    demand_anon: MIB,
                    ..Default::default()
                },
            );
            ev(&mut s, &mut r, EventKind::Background, "a", 0);
            ev(&mut s, &mut r, EventKind::Foreground, "a", 10);
            assert!(
                !r.calls
                    .iter()
                    .any(|c| matches!(c, Call::Prepage { .. } | Call::Window { .. })),
                "{name}"
            );
        }
    }

    fn sample(avail_mib: u64) -> DomainSample {
        DomainSample {
            now_ms: 100,
            total_bytes: 6144 * MIB,
            avail_bytes: avail_mib * MIB,
            anon_bytes: 3000 * MIB,
            file_bytes: 1000 * MIB,
            ..Default::default()
        }
    }

    fn procs() -> Vec<ProcInfo> {
        ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, app)| ProcInfo {
                pid: 100 + i as u32,
                start_time: 1,
                comm: app.to_string(),
                app: Some(app.to_string()),
                oom_score_adj: 900,
                footprint_bytes: None,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn pmr_pages_out_background_apps_in_unit_batches_below_delta() {
        let mut s = sched("pmr");
        let mut r = Recorder::default();
        // Plenty available: nothing to do, the processes are not wanted.
        assert!(!s.wants_procs(&sample(2000)));
        s.tick(&sample(2000), 0, &procs(), &mut r);
        assert!(r.calls.is_empty());
        // 40 MiB short of δ: four 10 MiB batches, oldest app first.
        let short = crate::proactive::READY_BYTES / MIB - 40;
        assert!(s.wants_procs(&sample(short)));
        s.tick(&sample(short), 0, &procs(), &mut r);
        let outs: Vec<(u32, u64)> = r
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::PageOut { pid, bytes } => Some((*pid, *bytes)),
                _ => None,
            })
            .collect();
        assert_eq!(outs, vec![(100, 10 * MIB); 4]);
        assert_eq!(s.stats.proactive_bytes, 40 * MIB);
        // The foreground app is never paged out.
        let mut r = Recorder::default();
        ev(&mut s, &mut r, EventKind::Foreground, "a", 150);
        s.tick(&sample(short), 0, &procs(), &mut r);
        assert!(r
            .calls
            .iter()
            .all(|c| !matches!(c, Call::PageOut { pid: 100, .. })));
        // Other policies never page out proactively.
        let mut s = sched("stock");
        let mut r = Recorder::default();
        s.tick(&sample(0), 0, &procs(), &mut r);
        assert!(r.calls.is_empty());
    }
}
