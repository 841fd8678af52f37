//! Ariadne's user-space part of the scheduler (the Ariadne paper §4.2,
//! HotnessOrg): when an app leaves the foreground, the anonymous data its
//! last foreground window did not bring back is marked cold, so the
//! kernel's reclaim evicts it before the window's hot set.
//!
//! The paper classifies an app's data at its relaunch ("after relaunching
//! an application, the system moves all old data in the hot list to the
//! warm list and adds the data from this relaunch to the hot list") and
//! lets eviction take the cold list first whenever reclaim runs; every one
//! of its steps is an LRU list operation, no data moves (§4.2, §6.4). So
//! the scheduler marks at the end of each foreground window (the
//! `background` event), when that window's hot set is known, and not when
//! memory runs low: marking is a list operation the kernel's own reclaim
//! then acts on whenever it runs, as HotnessOrg's lists are. The foreground
//! app is never marked (§4.2 "Across applications": main memory goes to
//! the foreground app first). Which pages were hot is the mechanism's
//! business (page tables on a real kernel, the hotness classes of the
//! simulator's Ariadne kernel variant).

use super::Scheduler;
use crate::mechanism::{MechError, PreloadMechanism};
use crate::policy::ReclaimStrategy;
use crate::reason::Reason;

impl Scheduler {
    /// Whether this policy marks background apps' cold data (Ariadne).
    pub(super) fn cold_marking(&self) -> bool {
        self.cfg.reclaim_enabled && self.cfg.policy.reclaim == ReclaimStrategy::HotnessAware
    }

    /// `app` left the foreground and its window was observed: ask the
    /// mechanism to mark what the window did not bring back as cold.
    pub(super) fn mark_cold(&mut self, app: &str, now_ms: u64, preload: &mut dyn PreloadMechanism) {
        if !self.cold_marking()
            || self.cold_mark_unsupported
            || self.foreground.as_deref() == Some(app)
        {
            return;
        }
        let ids = self.app_proc_ids(app);
        if ids.is_empty() {
            return;
        }
        match preload.mark_cold(app, &ids) {
            Ok(0) => {}
            Ok(n) => {
                self.stats.cold_mark_calls += 1;
                self.stats.cold_marked_bytes += n;
                self.log(
                    now_ms,
                    "reclaim",
                    Some(Reason::ReclaimColdMarked),
                    format!(
                        "{app}: {n} bytes of anonymous memory its last window did not bring back marked cold (evicted before its hot set)"
                    ),
                );
            }
            Err(MechError::Unsupported(f)) => {
                self.cold_mark_unsupported = true;
                self.log(
                    now_ms,
                    "error",
                    None,
                    format!("cold marking unavailable ({f}); the kernel's eviction order is left as it is"),
                );
            }
            Err(e) => self.mech_error(now_ms, &format!("marking {app} cold"), &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::mechanism::{Call, MechError, PreloadMechanism, Recorder};
    use crate::prepage::SwitchObservation;
    use crate::scheduler::{EventKind, ProcId, Scheduler};
    use crate::MIB;

    fn sched(name: &str) -> Scheduler {
        crate::scheduler::tests::sched_of(name, &["a", "b"])
    }

    use crate::scheduler::tests::ev;

    fn marks(calls: &[Call]) -> Vec<String> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::MarkCold { app, .. } => Some(app.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ariadne_marks_an_app_cold_when_it_leaves_the_foreground() {
        let mut s = sched("ariadne");
        let mut r = Recorder::default();
        r.cold_bytes = 12 * MIB;
        let a = ProcId {
            pid: 4242,
            start_time: 7,
        };
        s.notify(EventKind::Launch, "a", Some(a), 0, &mut r)
            .unwrap();
        // Its windows are observed (the hot set is the mechanism's).
        assert!(r.calls.contains(&Call::Window {
            app: "a".into(),
            procs: vec![a]
        }));
        ev(&mut s, &mut r, EventKind::Launched, "a", 500);
        assert!(marks(&r.calls).is_empty(), "nothing marked while in front");
        r.observations.insert(
            "a".into(),
            SwitchObservation {
                demand_anon: 80 * MIB,
                ..Default::default()
            },
        );
        ev(&mut s, &mut r, EventKind::Background, "a", 1000);
        assert_eq!(
            r.calls.last(),
            Some(&Call::MarkCold {
                app: "a".into(),
                procs: vec![a]
            })
        );
        assert_eq!(s.stats.cold_mark_calls, 1);
        assert_eq!(s.stats.cold_marked_bytes, 12 * MIB);
        // The observation does not feed ASAP's table: no prepaging at the switch.
        ev(&mut s, &mut r, EventKind::Foreground, "a", 2000);
        assert!(!r.calls.iter().any(|c| matches!(c, Call::Prepage { .. })));
        // An exit marks nothing; an app without known processes neither.
        let n = r.calls.len();
        ev(&mut s, &mut r, EventKind::Exit, "a", 3000);
        ev(&mut s, &mut r, EventKind::Background, "b", 3100);
        assert!(marks(&r.calls[n..]).is_empty());
        // The decision carries its reason.
        assert!(s
            .recent_decisions()
            .any(|d| d.reason == Some(crate::reason::Reason::ReclaimColdMarked)));
    }

    #[test]
    fn only_the_app_leaving_is_marked_in_its_own_processes() {
        let a = ProcId {
            pid: 9,
            start_time: 1,
        };
        let b = ProcId {
            pid: 10,
            start_time: 2,
        };
        let mut s = sched("ariadne");
        let mut r = Recorder::default();
        s.notify(EventKind::Launch, "b", Some(b), 0, &mut r)
            .unwrap();
        // a comes to the front: b leaves it and is marked, in b's process only.
        s.notify(EventKind::Launch, "a", Some(a), 10, &mut r)
            .unwrap();
        s.notify(EventKind::Background, "b", None, 10, &mut r)
            .unwrap();
        let got: Vec<&Call> = r
            .calls
            .iter()
            .filter(|c| matches!(c, Call::MarkCold { .. }))
            .collect();
        assert_eq!(
            got,
            vec![&Call::MarkCold {
                app: "b".into(),
                procs: vec![b]
            }]
        );
        assert_eq!(s.foreground(), Some("a"));
        for name in ["stock", "appflow", "asap", "pmr", "refault"] {
            let mut s = sched(name);
            let mut r = Recorder::default();
            s.notify(EventKind::Launch, "a", Some(a), 0, &mut r)
                .unwrap();
            ev(&mut s, &mut r, EventKind::Background, "a", 10);
            assert!(marks(&r.calls).is_empty(), "{name}");
        }
        // Reclaim turned off in the configuration: no marking either.
        let mut cfg = s.config().clone();
        cfg.reclaim_enabled = false;
        let mut s = Scheduler::new(
            cfg,
            crate::storage::ThroughputCurve::phone_default(),
            &[],
            &[],
        );
        let mut r = Recorder::default();
        s.notify(EventKind::Launch, "a", Some(a), 0, &mut r)
            .unwrap();
        ev(&mut s, &mut r, EventKind::Background, "a", 10);
        assert!(marks(&r.calls).is_empty());
    }

    /// A mechanism without cold marking: asked once, then never again.
    struct NoCold(Recorder);
    impl PreloadMechanism for NoCold {
        fn load(
            &mut self,
            app: &str,
            spans: &[crate::preload::FileSpan],
            hold: crate::mechanism::Hold,
        ) -> Result<u64, MechError> {
            self.0.load(app, spans, hold)
        }
        fn release(&mut self, app: &str) -> Result<(), MechError> {
            self.0.release(app)
        }
        fn release_hold(
            &mut self,
            app: &str,
            hold: crate::mechanism::Hold,
        ) -> Result<(), MechError> {
            self.0.release_hold(app, hold)
        }
        fn pause_touch(&mut self, paused: bool) -> Result<(), MechError> {
            self.0.pause_touch(paused)
        }
        fn held_bytes(&self) -> u64 {
            0
        }
    }

    #[test]
    fn a_mechanism_without_cold_marking_is_asked_once() {
        let mut s = sched("ariadne");
        let mut m = NoCold(Recorder::default());
        let a = ProcId {
            pid: 9,
            start_time: 1,
        };
        for t in 0..3 {
            s.notify(EventKind::Launch, "a", Some(a), t * 100, &mut m)
                .unwrap();
            s.notify(EventKind::Background, "a", None, t * 100 + 50, &mut m)
                .unwrap();
        }
        let errors = s
            .recent_decisions()
            .filter(|d| d.kind == "error" && d.detail.contains("cold marking unavailable"))
            .count();
        assert_eq!(errors, 1);
        assert_eq!(s.stats.cold_mark_calls, 0);
    }
}
