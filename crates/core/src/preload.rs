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
use crate::profile::{ActiveFile, LaunchProfile};
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
    /// A standby set is loaded only while the room left after it still
    /// holds the likeliest next launch (M_sum + its file bytes): standby
    /// data must not take the memory that launch needs.
    pub reserve_next_launch: bool,
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
            reserve_next_launch: true,
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

/// The kernel's default readahead window, bytes: `VM_READAHEAD_PAGES`
/// (include/linux/mm.h, 128 KiB), which Android keeps for its block devices
/// after boot.
pub const KERNEL_READAHEAD_BYTES: u64 = 128 * KIB;

/// Bytes the kernel's readahead reads beyond a launch's large-file ranges
/// (files of at least `cutoff_bytes`) with a window of `window` bytes: a
/// sequential reader's readahead runs up to a window past the end of what it
/// reads, and a fault's read-around spans a window centred on the fault, so
/// after each range up to `window`, never more than the gap to the next range
/// (or to the end of the file).
pub fn readahead_overread(profile: &LaunchProfile, cutoff_bytes: u64, window: u64) -> u64 {
    overread(&large_files(profile, cutoff_bytes), window)
}

/// A profile's active files of at least `cutoff_bytes` (the streamed ones).
fn large_files(profile: &LaunchProfile, cutoff_bytes: u64) -> Vec<ActiveFile<'_>> {
    let mut files = profile.active_files();
    files.retain(|f| f.size_bytes >= cutoff_bytes);
    files
}

fn overread(files: &[ActiveFile<'_>], window: u64) -> u64 {
    let mut extra = 0;
    for f in files {
        for (i, r) in f.ranges.iter().enumerate() {
            let next = f.ranges.get(i + 1).map_or(f.size_bytes, |n| n.start);
            extra += next.saturating_sub(r.end).min(window);
        }
    }
    extra
}

/// The readahead window for a launch that streams its large files (the
/// AppFlow paper §4.1: large files read "with large I/O block size"), or
/// None to leave the device's own. Each power of two from twice the
/// kernel's default up to `max_bytes` is weighed by the time the launch's
/// large-file reads take on the device's curve: the bytes it needs plus what
/// that window reads beyond them ([`readahead_overread`]), at that window's
/// throughput. A larger window is faster per byte but reads further past
/// every range an app reads only in part; the fastest window wins, if it is
/// faster than the kernel's default.
///
/// What is read past the ranges is page cache the launch never uses, and
/// it takes memory like everything the launch reads. Whatever does not fit
/// in the memory free at that moment (`room_bytes`) is first reclaimed from
/// other apps, at the rate reclaim supplies memory (`reclaim_bytes_per_sec`;
/// the AppFlow paper §4.2.1 calls an allocation faster than that a burst).
/// So each window's time also counts reclaiming the launch's bytes and its
/// overread beyond the room: under memory pressure a window that reads far
/// past the ranges can cost more in reclaim than it gains on the curve.
pub fn launch_readahead_window(
    profile: &LaunchProfile,
    cutoff_bytes: u64,
    curve: &ThroughputCurve,
    max_bytes: u64,
    room_bytes: u64,
    reclaim_bytes_per_sec: f64,
) -> Option<u64> {
    let files = large_files(profile, cutoff_bytes);
    let needed: u64 = files.iter().map(ActiveFile::touched_bytes).sum();
    if needed == 0 {
        return None;
    }
    let secs = |w: u64| {
        let bytes = needed + overread(&files, w);
        let reclaim = bytes.saturating_sub(room_bytes) as f64 / reclaim_bytes_per_sec.max(1.0);
        bytes as f64 / curve.throughput(w) + reclaim
    };
    let default = secs(KERNEL_READAHEAD_BYTES);
    let mut best: Option<(u64, f64)> = None;
    let mut w = 2 * KERNEL_READAHEAD_BYTES;
    while w <= max_bytes {
        let t = secs(w);
        if t < default && best.is_none_or(|(_, b)| t < b) {
            best = Some((w, t));
        }
        w *= 2;
    }
    best.map(|(w, _)| w)
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

    /// The curve the testbed's domain measured (2026-11-25), bytes/s.
    fn measured() -> ThroughputCurve {
        let p = |kib: u64, mbs: f64| crate::storage::CurvePoint {
            block_bytes: kib * KIB,
            bytes_per_sec: mbs * 1e6,
        };
        ThroughputCurve::new(vec![
            p(4, 30.0),
            p(128, 690.0),
            p(512, 1330.0),
            p(1024, 1640.0),
            p(2048, 1650.0),
        ])
        .unwrap()
    }

    /// An app that read `extents` ranges of `read` bytes, one every `every`
    /// bytes, of one file of `extents * every` bytes.
    fn extents(extents: u64, every: u64, read: u64) -> LaunchProfile {
        let mut p = LaunchProfile::new("x");
        p.merge_launch(&crate::profile::LaunchObservation {
            files: vec![crate::profile::ObservedFile {
                path: "/x/L0".into(),
                size_bytes: extents * every,
                first_access_us: 0,
                ranges: (0..extents)
                    .map(|i| crate::profile::ByteRange {
                        start: i * every,
                        end: i * every + read,
                    })
                    .collect(),
            }],
            ..Default::default()
        });
        p
    }

    #[test]
    fn readahead_reads_past_each_range_up_to_the_gap() {
        let p = extents(48, 3688 * KIB, 1948 * KIB);
        let gap = (3688 - 1948) * KIB;
        assert_eq!(readahead_overread(&p, MIB, 2 * MIB), 48 * gap);
        assert_eq!(readahead_overread(&p, MIB, MIB), 48 * MIB);
        assert_eq!(readahead_overread(&p, MIB, 128 * KIB), 48 * 128 * KIB);
        // Below the cutoff a file is not streamed: not counted.
        assert_eq!(readahead_overread(&p, 1 << 40, 2 * MIB), 0);
        // A file read whole leaves nothing past it.
        assert_eq!(
            readahead_overread(&extents(1, 64 * MIB, 64 * MIB), MIB, 2 * MIB),
            0
        );
    }

    #[test]
    fn the_launch_readahead_window_weighs_throughput_against_reading_past_the_ranges() {
        let c = measured();
        // Read whole: the largest window.
        let whole = extents(1, 400 * MIB, 400 * MIB);
        assert_eq!(
            launch_readahead_window(&whole, MIB, &c, 2 * MIB, u64::MAX, 1e9),
            Some(2 * MIB)
        );
        // Half of every 3.6 MiB: 2 MiB would read 1.7 MiB past each range;
        // 1 MiB is nearly as fast per byte and reads 1 MiB past.
        let half = extents(48, 3688 * KIB, 1948 * KIB);
        assert_eq!(
            launch_readahead_window(&half, MIB, &c, 2 * MIB, u64::MAX, 1e9),
            Some(MIB)
        );
        // Scattered 16 KiB reads: every larger window only reads more.
        let sparse = extents(64, 4 * MIB, 16 * KIB);
        assert_eq!(
            launch_readahead_window(&sparse, MIB, &c, 2 * MIB, u64::MAX, 1e9),
            None
        );
        // No large file: nothing to weigh.
        assert_eq!(
            launch_readahead_window(&whole, 1 << 40, &c, 2 * MIB, u64::MAX, 1e9),
            None
        );
        // Never above the stream's read size.
        assert_eq!(
            launch_readahead_window(&whole, MIB, &c, 512 * KIB, u64::MAX, 1e9),
            Some(512 * KIB)
        );
    }

    #[test]
    fn under_memory_pressure_the_launch_readahead_window_counts_the_reclaim_of_its_overread() {
        let c = measured();
        let half = extents(48, 3688 * KIB, 1948 * KIB);
        let needed = 48 * 1948 * KIB;
        let fast = 1e12;
        // Memory for everything, or reclaim for free: the curve decides.
        assert_eq!(
            launch_readahead_window(&half, MIB, &c, 2 * MIB, u64::MAX, 1.0),
            Some(MIB)
        );
        assert_eq!(
            launch_readahead_window(&half, MIB, &c, 2 * MIB, 0, fast),
            Some(MIB)
        );
        // Full memory, reclaim at 100 MB/s: every byte read past the ranges
        // costs more to reclaim than a larger window gains on the curve.
        assert_eq!(
            launch_readahead_window(&half, MIB, &c, 2 * MIB, 0, 100e6),
            None
        );
        assert_eq!(
            launch_readahead_window(&half, MIB, &c, 2 * MIB, needed, 100e6),
            None
        );
        // Read whole: nothing is read past, so pressure changes nothing.
        let whole = extents(1, 400 * MIB, 400 * MIB);
        assert_eq!(
            launch_readahead_window(&whole, MIB, &c, 2 * MIB, 0, 100e6),
            Some(2 * MIB)
        );
    }
}
