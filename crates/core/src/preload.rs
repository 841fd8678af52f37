//! Selective File Preloader planning (the AppFlow paper §4.1, §4.2.2).
//!
//! * [`plan_cutoffs`] picks one cutoff per app with the exact knapsack
//!   (minimise Σ w_i T_i(s_i) subject to Σ P_i(s_i) ≤ M_p).
//! * [`standby_set`] lists what to keep resident before launch
//!   (frequency first): every selected app's small files, then hot segments
//!   (first-accessed parts) of its large files while the budget lasts.
//! * [`launch_stream`] lists the reads to issue when the app launches
//!   (throughput first): large files in first-access order, in large reads.

use crate::cutoff::{candidate_cutoffs, cutoff_options, CutoffOption};
use crate::knapsack::{self, Item, KnapsackError};
use crate::profile::LaunchProfile;
use crate::reason::Reason;
use crate::storage::ThroughputCurve;
use crate::{KIB, MIB};
use serde::{Deserialize, Serialize};

/// Preloader parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PreloadConfig {
    /// M_p: bytes kept resident before launch, all apps together (§4.1, §6.5.2: 100 MB).
    pub budget_bytes: u64,
    /// The knapsack counts the budget in units of this many bytes, each
    /// app's P_i(s) rounded up (so the real budget is never exceeded). The
    /// solver is exact on that instance. 256 KiB keeps 60 apps × 13 options
    /// in tens of µs where finer units can take milliseconds on degenerate
    /// instances (README, `cargo bench -p appflow-core`); the rounding costs
    /// under 256 KiB of budget per app.
    pub budget_unit_bytes: u64,
    /// Number of power-of-two cutoffs from 4 KiB (12 → 4 KiB … 8 MiB).
    pub cutoff_count: usize,
    /// Largest read the launch stream issues (the AppFlow paper §4.1 and Fig. 6:
    /// large blocks, well above the 128 KiB small/large split, stream fastest).
    pub max_read_bytes: u64,
    /// Size of the hot segment of a large file kept before launch.
    pub hot_segment_bytes: u64,
    /// Touch the standby set this often, ms (§4.2.2: every 10 s).
    pub touch_interval_ms: u64,
    /// Weight apps by launch likelihood from their history instead of w_i = 1 (paper default).
    pub weight_by_likelihood: bool,
    /// Window for launch likelihood, ms.
    pub likelihood_window_ms: u64,
}

impl Default for PreloadConfig {
    fn default() -> Self {
        Self {
            budget_bytes: 100 * MIB,
            budget_unit_bytes: 256 * KIB,
            cutoff_count: 12,
            max_read_bytes: 2 * MIB,
            hot_segment_bytes: 128 * KIB,
            touch_interval_ms: 10_000,
            weight_by_likelihood: false,
            likelihood_window_ms: 7 * 24 * 3600 * 1000,
        }
    }
}

impl PreloadConfig {
    /// Checks the fields (positive where zero breaks the planner, bounded);
    /// the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        use crate::{GIB, MIB};
        if self.budget_bytes > 1024 * GIB {
            return Err("preload.budget_bytes must be at most 1 TiB (1099511627776)".into());
        }
        if !(1..=GIB).contains(&self.budget_unit_bytes) {
            return Err("preload.budget_unit_bytes must be in 1..=1073741824".into());
        }
        if !(1..=30).contains(&self.cutoff_count) {
            return Err("preload.cutoff_count must be in 1..=30".into());
        }
        if !(4096..=64 * MIB).contains(&self.max_read_bytes) {
            return Err("preload.max_read_bytes must be in 4096..=67108864".into());
        }
        if self.hot_segment_bytes > GIB {
            return Err("preload.hot_segment_bytes must be at most 1073741824".into());
        }
        if !(100..=86_400_000).contains(&self.touch_interval_ms) {
            return Err("preload.touch_interval_ms must be in 100..=86400000".into());
        }
        if !(1..=365 * 86_400_000).contains(&self.likelihood_window_ms) {
            return Err("preload.likelihood_window_ms must be in 1..=31536000000".into());
        }
        Ok(())
    }
}

/// The cutoff chosen for one app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppCutoff {
    /// App name.
    pub app: String,
    /// Weight w_i used.
    pub weight: f64,
    /// The chosen option.
    pub chosen: CutoffOption,
}

/// Cutoffs for every app, with the reason and solver effort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CutoffPlan {
    /// Per app, in the input order.
    pub apps: Vec<AppCutoff>,
    /// Σ P_i(s_i), bytes (never above the budget).
    pub preload_bytes: u64,
    /// Σ w_i T_i(s_i), seconds.
    pub weighted_stream_secs: f64,
    /// Why this plan.
    pub reason: Reason,
    /// Knapsack nodes visited.
    pub nodes: u64,
}

/// Launch-likelihood weights: launches in the window, normalised to mean 1
/// (an app never launched in the window gets a small floor weight).
pub fn likelihood_weights(
    profiles: &[&LaunchProfile],
    now_unix_ms: u64,
    window_ms: u64,
) -> Vec<f64> {
    let counts: Vec<f64> = profiles
        .iter()
        .map(|p| p.launches_within(now_unix_ms, window_ms) as f64)
        .collect();
    let total: f64 = counts.iter().sum();
    if total == 0.0 {
        return vec![1.0; profiles.len()];
    }
    let mean = total / counts.len() as f64;
    counts.iter().map(|c| (c / mean).max(0.01)).collect()
}

/// Chooses every app's cutoff with the exact knapsack. `weights` must have
/// one entry per profile (use `vec![1.0; n]` for the paper's default).
pub fn plan_cutoffs(
    profiles: &[&LaunchProfile],
    weights: &[f64],
    curve: &ThroughputCurve,
    cfg: &PreloadConfig,
) -> Result<CutoffPlan, KnapsackError> {
    assert_eq!(profiles.len(), weights.len(), "one weight per profile");
    let cutoffs = candidate_cutoffs(cfg.cutoff_count);
    let options: Vec<Vec<CutoffOption>> = profiles
        .iter()
        .map(|p| cutoff_options(p, curve, &cutoffs, cfg.max_read_bytes))
        .collect();
    let classes: Vec<Vec<Item>> = options
        .iter()
        .zip(weights)
        .map(|(opts, &w)| {
            opts.iter()
                .map(|o| Item {
                    weight: o.preload_bytes,
                    cost: w * o.stream_secs,
                })
                .collect()
        })
        .collect();
    let sol = knapsack::solve(&classes, cfg.budget_bytes)?;
    let apps = profiles
        .iter()
        .zip(weights)
        .zip(&sol.choice)
        .zip(&options)
        .map(|(((p, &w), &j), opts)| AppCutoff {
            app: p.app.clone(),
            weight: w,
            chosen: opts[j],
        })
        .collect();
    Ok(CutoffPlan {
        apps,
        preload_bytes: sol.total_weight,
        weighted_stream_secs: sol.total_cost,
        reason: if sol.budget_slack {
            Reason::CutoffsBudgetSlack
        } else {
            Reason::CutoffsSolved
        },
        nodes: sol.nodes,
    })
}

/// A byte range of a file to keep resident or to read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSpan {
    /// App the span belongs to.
    pub app: String,
    /// File path.
    pub path: String,
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Why it is listed.
    pub reason: Reason,
}

/// What to keep resident before launch, within the budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StandbySet {
    /// Spans in the order to load them.
    pub spans: Vec<FileSpan>,
    /// Σ span lengths; never above the budget.
    pub bytes: u64,
}

/// Builds the before-launch standby set: small files of every app at its
/// cutoff (these fit by construction), then hot segments of large files,
/// earliest-accessed first, across apps, while the budget lasts. Apps in
/// `active` (currently launched) are left out: their set is no longer touched.
pub fn standby_set(
    profiles: &[&LaunchProfile],
    plan: &CutoffPlan,
    cfg: &PreloadConfig,
    active: &[&str],
) -> StandbySet {
    let mut set = StandbySet::default();
    let mut hot: Vec<(u64, FileSpan)> = Vec::new();
    for (p, c) in profiles.iter().zip(&plan.apps) {
        if active.contains(&p.app.as_str()) {
            continue;
        }
        let s = c.chosen.cutoff_bytes;
        for f in p.active_files() {
            if f.size_bytes < s {
                for r in &f.ranges {
                    set.bytes += r.len();
                    set.spans.push(FileSpan {
                        app: p.app.clone(),
                        path: f.path.to_string(),
                        offset: r.start,
                        len: r.len(),
                        reason: Reason::PreloadSmallFile,
                    });
                }
            } else if let Some(r) = f.ranges.first() {
                let len = r.len().min(cfg.hot_segment_bytes);
                hot.push((
                    f.first_access_us,
                    FileSpan {
                        app: p.app.clone(),
                        path: f.path.to_string(),
                        offset: r.start,
                        len,
                        reason: Reason::PreloadHotSegment,
                    },
                ));
            }
        }
    }
    // Small files can exceed the budget only if the plan was made for another budget.
    if set.bytes > cfg.budget_bytes {
        let mut kept = 0;
        set.spans.retain(|s| {
            let ok = kept + s.len <= cfg.budget_bytes;
            if ok {
                kept += s.len;
            }
            ok
        });
        set.bytes = kept;
        return set;
    }
    hot.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.path.cmp(&b.1.path)));
    for (_, span) in hot {
        if set.bytes + span.len <= cfg.budget_bytes {
            set.bytes += span.len;
            set.spans.push(span);
        }
    }
    set
}

/// The reads to issue at launch: ranges of the app's large files (size ≥
/// the cutoff) in first-access order, split into reads of at most
/// `cfg.max_read_bytes`. Parts already in the standby set (hot segments)
/// are skipped when `skip_hot` is set.
pub fn launch_stream(
    profile: &LaunchProfile,
    cutoff_bytes: u64,
    cfg: &PreloadConfig,
    skip_hot: bool,
) -> Vec<FileSpan> {
    let mut out = Vec::new();
    for f in profile.active_files() {
        if f.size_bytes < cutoff_bytes {
            continue;
        }
        for (i, r) in f.ranges.iter().enumerate() {
            let mut off = r.start;
            if skip_hot && i == 0 {
                off += r.len().min(cfg.hot_segment_bytes);
            }
            while off < r.end {
                let len = (r.end - off).min(cfg.max_read_bytes.max(1));
                out.push(FileSpan {
                    app: profile.app.clone(),
                    path: f.path.to_string(),
                    offset: off,
                    len,
                    reason: Reason::PreloadStreamLarge,
                });
                off += len;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> ThroughputCurve {
        ThroughputCurve::phone_default()
    }

    fn app(name: &str, small: usize, large: usize) -> LaunchProfile {
        crate::profile::synthetic(name, small, large, 0)
    }

    #[test]
    fn plan_respects_budget_and_prefers_small_files() {
        let a = app("a", 1000, 4);
        let b = app("b", 2000, 2);
        let cfg = PreloadConfig {
            budget_bytes: 40 * MIB,
            ..Default::default()
        };
        let plan = plan_cutoffs(&[&a, &b], &[1.0, 1.0], &curve(), &cfg).unwrap();
        assert!(plan.preload_bytes <= cfg.budget_bytes);
        // a's small files (15.6 MiB) and b's (31 MiB) do not both fit: the
        // solver keeps b's, the larger saving.
        assert_eq!(plan.apps[1].chosen.preload_bytes, 2000 * 16 * KIB);
        let set = standby_set(&[&a, &b], &plan, &cfg, &[]);
        assert!(set.bytes <= cfg.budget_bytes);
        assert!(set
            .spans
            .iter()
            .any(|s| s.reason == Reason::PreloadHotSegment));
        // An active app's set is not kept.
        let set_b_active = standby_set(&[&a, &b], &plan, &cfg, &["b"]);
        assert!(set_b_active.spans.iter().all(|s| s.app == "a"));
    }

    #[test]
    fn stream_reads_large_files_in_order_with_large_reads() {
        let a = app("a", 10, 2);
        let cfg = PreloadConfig::default();
        let reads = launch_stream(&a, MIB, &cfg, true);
        assert_eq!(reads.first().unwrap().path, "/a/L0");
        assert_eq!(reads.first().unwrap().offset, cfg.hot_segment_bytes);
        assert!(reads.iter().all(|r| r.len <= cfg.max_read_bytes));
        let total: u64 = reads.iter().map(|r| r.len).sum();
        assert_eq!(total, 2 * (8 * MIB - cfg.hot_segment_bytes));
    }
}
