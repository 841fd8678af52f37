//! ASAP's Switch Footprint Estimator (the ASAP paper, "Switch Footprint
//! Estimator" and "Prepaging Manager" slides): how much of an app to
//! prepage when it is switched back to the foreground, learnt from what its
//! previous switches brought back.
//!
//! ASAP logs the page faults and I/O of a switch into a candidate table and
//! corrects it with feedback: pages it prepaged that the switch did not use
//! lower the precision and leave the table; pages the app still faulted on
//! lower the recall and join it. Pages are the mechanism's business (page
//! tables, pagemap, the page cache): the mechanism keeps the page-level
//! table and reports each switch as a [`SwitchObservation`]; this module
//! keeps the per-app amounts and the precision/recall record, and decides
//! the [`PrepagePlan`] of the next switch. Pure: no I/O, no clock.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Anonymous pages a prepaging thread brings in per batch (the ASAP paper,
/// "Optimizing Prepaging Threads": 16 pages for anonymous pages; all
/// target pages of one file for file-backed pages).
pub const ANON_BATCH_PAGES: u64 = 16;

/// Share of the file-backed pages a switch touches that its next switch
/// touches again (the ASAP paper, "Optimized SFE for Each Type of Pages": about
/// 75 % are invariant across switches).
pub const FILE_INVARIANT_SHARE: f64 = 0.75;

/// Share of the anonymous pages a switch touches that its next switch
/// touches again (the ASAP paper, same slide: only 44 % are invariant).
pub const ANON_INVARIANT_SHARE: f64 = 0.44;

/// What one foreground window of an app (a switch, or the cold launch that
/// preceded its first switch) brought back into memory, as the mechanism
/// observed it. Bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SwitchObservation {
    /// Anonymous bytes prepaged for the switch.
    pub prepaged_anon: u64,
    /// File bytes prepaged for the switch.
    pub prepaged_file: u64,
    /// Of the prepaged anonymous bytes, those the app used.
    pub used_anon: u64,
    /// Of the prepaged file bytes, those the app used.
    pub used_file: u64,
    /// Anonymous bytes the app faulted in itself (swap-ins not prepaged).
    pub demand_anon: u64,
    /// File bytes the app read itself (page-cache misses not prepaged).
    pub demand_file: u64,
}

impl SwitchObservation {
    /// The switch footprint: every page the window needed that was not resident.
    pub fn footprint(&self) -> (u64, u64) {
        (
            self.used_anon + self.demand_anon,
            self.used_file + self.demand_file,
        )
    }

    /// Precision of the prepaging (used / prepaged), if anything was prepaged.
    pub fn precision(&self) -> Option<f64> {
        let p = self.prepaged_anon + self.prepaged_file;
        (p > 0).then(|| (self.used_anon + self.used_file) as f64 / p as f64)
    }

    /// Recall of the prepaging (used / footprint), if the window needed anything.
    pub fn recall(&self) -> Option<f64> {
        let (a, f) = self.footprint();
        (a + f > 0).then(|| (self.used_anon + self.used_file) as f64 / (a + f) as f64)
    }
}

/// What to prepage at a switch, bytes of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PrepagePlan {
    /// Anonymous bytes (swapped-out pages of the app's processes).
    pub anon_bytes: u64,
    /// File bytes (evicted pages of the files the app used).
    pub file_bytes: u64,
}

impl PrepagePlan {
    /// Nothing to prepage.
    pub fn is_empty(&self) -> bool {
        self.anon_bytes == 0 && self.file_bytes == 0
    }

    /// The plan cut to at most `room` bytes in all, both kinds scaled by
    /// the same factor (the estimator's mix of anonymous and file pages is
    /// kept): [`Self::bounded_waste`] with no precision measured.
    pub fn bounded(&self, room: u64) -> PrepagePlan {
        self.bounded_waste(room, Precision::default())
    }

    /// The memory the plan is expected to waste: its pages the switch will
    /// not use, `(1 − precision) × bytes` of each kind (all of it for a
    /// kind whose precision is not measured yet).
    pub fn expected_waste(&self, p: Precision) -> u64 {
        self.waste_ppm(p).div_ceil(PPM).min(u64::MAX as u128) as u64
    }

    /// The expected waste in millionths of a byte (exact integer arithmetic).
    fn waste_ppm(&self, p: Precision) -> u128 {
        let keep = |p: Option<f64>| {
            let unused = 1.0 - p.unwrap_or(0.0).clamp(0.0, 1.0);
            (unused * PPM as f64).round() as u128
        };
        self.anon_bytes as u128 * keep(p.anon) + self.file_bytes as u128 * keep(p.file)
    }

    /// The plan cut so that its expected waste is at most `room` bytes,
    /// both kinds scaled by the same factor (the estimator's mix is kept).
    /// The used share of a plan replaces faults the switch takes anyway,
    /// with memory it would take anyway; only the pages it will not use
    /// are extra memory, and those must fit the room above the killer's
    /// trigger level (the scheduler's rule for everything it brings in;
    /// the ASAP paper has no such bound). With nothing measured the whole
    /// plan counts as waste: the plan is cut to the room itself.
    pub fn bounded_waste(&self, room: u64, p: Precision) -> PrepagePlan {
        let waste = self.waste_ppm(p).div_ceil(PPM);
        if waste <= room as u128 {
            return *self;
        }
        // b × room fits in u128 (both below 2^64); the scaled plan's waste
        // is at most room × (its waste / the rounded-up waste) ≤ room.
        let scale = |b: u64| (b as u128 * room as u128 / waste) as u64;
        PrepagePlan {
            anon_bytes: scale(self.anon_bytes),
            file_bytes: scale(self.file_bytes),
        }
    }
}

/// Millionths: the resolution of a precision in the waste bound.
const PPM: u128 = 1_000_000;

/// Measured precision of the switch prepaging, per kind of page (None: that
/// kind was never prepaged).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Precision {
    /// Anonymous pages: used / prepaged.
    pub anon: Option<f64>,
    /// File pages: used / prepaged.
    pub file: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Entry {
    anon: u64,
    file: u64,
    windows: u64,
}

/// Precision and recall over every observed switch that prepaged.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Feedback {
    /// Bytes prepaged.
    pub prepaged: u64,
    /// Of which used.
    pub used: u64,
    /// Footprint bytes of the switches that prepaged.
    pub footprint: u64,
    /// Of the bytes prepaged, the anonymous ones (the rest are file bytes).
    pub prepaged_anon: u64,
    /// Of the bytes used, the anonymous ones.
    pub used_anon: u64,
}

impl Feedback {
    /// The measured precision of each kind of page.
    pub fn precision_by_kind(&self) -> Precision {
        let p = |used: u64, prepaged: u64| (prepaged > 0).then(|| used as f64 / prepaged as f64);
        Precision {
            anon: p(self.used_anon, self.prepaged_anon),
            file: p(
                self.used - self.used_anon,
                self.prepaged - self.prepaged_anon,
            ),
        }
    }

    /// used / prepaged.
    pub fn precision(&self) -> Option<f64> {
        (self.prepaged > 0).then(|| self.used as f64 / self.prepaged as f64)
    }
    /// used / footprint.
    pub fn recall(&self) -> Option<f64> {
        (self.footprint > 0).then(|| self.used as f64 / self.footprint as f64)
    }
}

/// The per-app candidate amounts with their feedback.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FootprintTable {
    apps: BTreeMap<String, Entry>,
    /// Precision/recall over all switches that prepaged.
    pub feedback: Feedback,
}

impl FootprintTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The plan for switching `app` in, from its last observed window
    /// (nothing before the first one).
    pub fn plan(&self, app: &str) -> PrepagePlan {
        self.apps
            .get(app)
            .map(|e| PrepagePlan {
                anon_bytes: e.anon,
                file_bytes: e.file,
            })
            .unwrap_or_default()
    }

    /// Records a window of `app`: the candidates become what it needed
    /// (prepaged-and-used plus demand-faulted; prepaged-but-unused pages
    /// leave the table), and the feedback counts precision and recall.
    pub fn observe(&mut self, app: &str, o: &SwitchObservation) {
        let (anon, file) = o.footprint();
        let e = self.apps.entry(app.to_string()).or_default();
        e.anon = anon;
        e.file = file;
        e.windows += 1;
        let prepaged = o.prepaged_anon + o.prepaged_file;
        if prepaged > 0 {
            self.feedback.prepaged += prepaged;
            self.feedback.used += o.used_anon + o.used_file;
            self.feedback.footprint += anon + file;
            self.feedback.prepaged_anon += o.prepaged_anon;
            self.feedback.used_anon += o.used_anon;
        }
    }

    /// Forgets an app (it was killed: its next start is a cold launch).
    pub fn forget(&mut self, app: &str) {
        self.apps.remove(app);
    }

    /// Windows observed for `app`.
    pub fn windows(&self, app: &str) -> u64 {
        self.apps.get(app).map_or(0, |e| e.windows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_the_last_footprint_and_drops_unused_pages() {
        let mut t = FootprintTable::new();
        assert!(t.plan("A").is_empty());
        // First switch: nothing prepaged, everything on demand.
        t.observe(
            "A",
            &SwitchObservation {
                demand_anon: 100,
                demand_file: 40,
                ..Default::default()
            },
        );
        assert_eq!(
            t.plan("A"),
            PrepagePlan {
                anon_bytes: 100,
                file_bytes: 40
            }
        );
        assert_eq!(t.feedback.precision(), None);
        // A switch prepaged 100 + 40, used 44 + 30, faulted 10 + 5 more.
        let o = SwitchObservation {
            prepaged_anon: 100,
            prepaged_file: 40,
            used_anon: 44,
            used_file: 30,
            demand_anon: 10,
            demand_file: 5,
        };
        t.observe("A", &o);
        assert_eq!(
            t.plan("A"),
            PrepagePlan {
                anon_bytes: 54,
                file_bytes: 35
            }
        );
        assert!((o.precision().unwrap() - 74.0 / 140.0).abs() < 1e-12);
        assert!((o.recall().unwrap() - 74.0 / 89.0).abs() < 1e-12);
        assert_eq!(t.feedback.precision(), o.precision());
        assert_eq!(t.windows("A"), 2);
        t.forget("A");
        assert!(t.plan("A").is_empty());
    }

    #[test]
    fn a_plan_is_bounded_by_the_room_keeping_its_mix() {
        let p = PrepagePlan {
            anon_bytes: 300,
            file_bytes: 100,
        };
        assert_eq!(p.bounded(400), p);
        assert_eq!(p.bounded(u64::MAX), p);
        assert_eq!(
            p.bounded(200),
            PrepagePlan {
                anon_bytes: 150,
                file_bytes: 50
            }
        );
        assert!(p.bounded(0).is_empty());
        let big = PrepagePlan {
            anon_bytes: u64::MAX,
            file_bytes: u64::MAX,
        };
        let b = big.bounded(1000);
        assert!(b.anon_bytes + b.file_bytes <= 1000);
    }

    #[test]
    fn only_the_expected_waste_needs_room() {
        let mut t = FootprintTable::new();
        assert_eq!(t.feedback.precision_by_kind(), Precision::default());
        // Anonymous: 44 of 100 used; file: 30 of 40.
        t.observe(
            "A",
            &SwitchObservation {
                prepaged_anon: 100,
                prepaged_file: 40,
                used_anon: 44,
                used_file: 30,
                ..Default::default()
            },
        );
        let p = t.feedback.precision_by_kind();
        assert_eq!(p.anon, Some(0.44));
        assert_eq!(p.file, Some(0.75));
        let plan = PrepagePlan {
            anon_bytes: 1000,
            file_bytes: 400,
        };
        // Waste: 0.56 × 1000 + 0.25 × 400 = 660.
        assert_eq!(plan.expected_waste(p), 660);
        assert_eq!(plan.bounded_waste(660, p), plan);
        assert_eq!(
            plan.bounded_waste(330, p),
            PrepagePlan {
                anon_bytes: 500,
                file_bytes: 200
            }
        );
        // Nothing measured: the whole plan is waste (the plain room bound).
        assert_eq!(plan.expected_waste(Precision::default()), 1400);
        assert_eq!(
            plan.bounded_waste(700, Precision::default()),
            plan.bounded(700)
        );
        // Only one kind measured: the other counts whole.
        let anon_only = Precision {
            anon: Some(0.5),
            file: None,
        };
        assert_eq!(plan.expected_waste(anon_only), 900);
        // All used: no room needed; no room and nothing used: nothing.
        let all = Precision {
            anon: Some(1.0),
            file: Some(1.0),
        };
        assert_eq!(plan.bounded_waste(0, all), plan);
        assert!(plan.bounded_waste(0, Precision::default()).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn the_bounded_plan_wastes_at_most_the_room(
            anon in proptest::prelude::any::<u64>(),
            file in proptest::prelude::any::<u64>(),
            room in proptest::prelude::any::<u64>(),
            pa in proptest::option::of(0.0f64..=1.0),
            pf in proptest::option::of(0.0f64..=1.0),
        ) {
            let plan = PrepagePlan { anon_bytes: anon, file_bytes: file };
            let p = Precision { anon: pa, file: pf };
            let b = plan.bounded_waste(room, p);
            proptest::prop_assert!(b.anon_bytes <= anon && b.file_bytes <= file);
            if plan.expected_waste(p) <= room {
                proptest::prop_assert_eq!(b, plan);
            } else {
                proptest::prop_assert!(b.expected_waste(p) <= room);
            }
            // More room never gives a smaller plan.
            let more = plan.bounded_waste(room.saturating_add(room / 2 + 1), p);
            proptest::prop_assert!(more.anon_bytes >= b.anon_bytes && more.file_bytes >= b.file_bytes);
        }
    }
}
