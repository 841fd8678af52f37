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
    /// kept). Prepaged pages are memory the switch takes at once, so like a
    /// launch stream they never exceed the room above the killer's trigger
    /// level (the scheduler's rule for everything it brings in).
    pub fn bounded(&self, room: u64) -> PrepagePlan {
        let total = self.anon_bytes as u128 + self.file_bytes as u128;
        if total <= room as u128 {
            return *self;
        }
        let scale = |b: u64| (b as u128 * room as u128 / total) as u64;
        PrepagePlan {
            anon_bytes: scale(self.anon_bytes),
            file_bytes: scale(self.file_bytes),
        }
    }
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
}

impl Feedback {
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
        // First window (the cold launch): everything on demand.
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
}
