//! Per-app cutoff candidates for the Selective File Preloader (the AppFlow paper §4.1).
//!
//! Files smaller than an app's cutoff s_i are "small": preloaded before the
//! launch, costing P_i(s_i) bytes of the budget. Files at or above it are
//! "large": streamed during the launch with large reads. The launch's file
//! I/O time with cutoff s is T_i(s) = (M_i^file − P_i(s)) / V_i(s), where
//! V_i(s) is the throughput of streaming the large remainder; we compute the
//! time directly, range by range, from the storage curve. Candidates are
//! powers of two from 4 KiB (§4.1: "I/O block sizes are powers of two"),
//! plus cutoff 0 ("preload nothing before launch"), which keeps every
//! instance feasible.

use crate::profile::LaunchProfile;
use crate::storage::ThroughputCurve;
use crate::KIB;
use serde::{Deserialize, Serialize};

/// The smallest candidate cutoff (§4.1: 4 KiB, the page size).
pub const MIN_CUTOFF_BYTES: u64 = 4 * KIB;

/// Candidate cutoffs: 0, then `count` powers of two from 4 KiB.
pub fn candidate_cutoffs(count: usize) -> Vec<u64> {
    std::iter::once(0)
        .chain((0..count).map(|k| MIN_CUTOFF_BYTES << k))
        .collect()
}

/// One candidate cutoff for one app, evaluated on its profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CutoffOption {
    /// The cutoff s in bytes (0 = nothing preloaded before launch).
    pub cutoff_bytes: u64,
    /// P_i(s): bytes of small files kept resident before launch.
    pub preload_bytes: u64,
    /// Bytes left to stream during launch (M_i^file − P_i(s)).
    pub stream_bytes: u64,
    /// Seconds to stream them with large reads (the T_i^{I/O} of Eq. 3).
    pub stream_secs: f64,
}

impl CutoffOption {
    /// V_i(s): effective streaming throughput, bytes/s (0 when nothing is streamed).
    pub fn stream_throughput(&self) -> f64 {
        if self.stream_secs > 0.0 {
            self.stream_bytes as f64 / self.stream_secs
        } else {
            0.0
        }
    }
}

/// Evaluates every candidate cutoff on a profile. Large files are streamed
/// range by range in reads of `min(range, max_block_bytes)`, so V_i(s)
/// grows with s as short ranges of small files leave the stream.
pub fn cutoff_options(
    profile: &LaunchProfile,
    curve: &ThroughputCurve,
    cutoffs: &[u64],
    max_block_bytes: u64,
) -> Vec<CutoffOption> {
    let files = profile.active_files();
    // Per file: (size, touched bytes, seconds to stream it).
    let per_file: Vec<(u64, u64, f64)> = files
        .iter()
        .map(|f| {
            let secs = f
                .ranges
                .iter()
                .map(|r| curve.read_secs(r.len(), r.len().min(max_block_bytes)))
                .sum();
            (f.size_bytes, f.touched_bytes(), secs)
        })
        .collect();
    cutoffs
        .iter()
        .map(|&s| {
            let mut opt = CutoffOption {
                cutoff_bytes: s,
                preload_bytes: 0,
                stream_bytes: 0,
                stream_secs: 0.0,
            };
            for &(size, touched, secs) in &per_file {
                if size < s {
                    opt.preload_bytes += touched;
                } else {
                    opt.stream_bytes += touched;
                    opt.stream_secs += secs;
                }
            }
            opt
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{ByteRange, LaunchObservation, ObservedFile};
    use crate::storage::CurvePoint;

    #[test]
    fn preload_grows_and_stream_time_falls_with_cutoff() {
        let curve = ThroughputCurve::new(vec![
            CurvePoint {
                block_bytes: 4096,
                bytes_per_sec: 10e6,
            },
            CurvePoint {
                block_bytes: 2 << 20,
                bytes_per_sec: 200e6,
            },
        ])
        .unwrap();
        let mut p = LaunchProfile::new("a");
        let files = (0..20)
            .map(|i| {
                let size = 1024u64 << i;
                ObservedFile {
                    path: format!("/f{i}"),
                    size_bytes: size,
                    first_access_us: i,
                    ranges: vec![ByteRange {
                        start: 0,
                        end: size,
                    }],
                }
            })
            .collect();
        p.merge_launch(&LaunchObservation {
            files,
            ..Default::default()
        });
        let opts = cutoff_options(&p, &curve, &candidate_cutoffs(12), 2 << 20);
        assert_eq!(opts.len(), 13);
        assert_eq!(opts[0].preload_bytes, 0);
        for w in opts.windows(2) {
            assert!(w[1].preload_bytes >= w[0].preload_bytes);
            assert!(w[1].stream_secs <= w[0].stream_secs);
            assert_eq!(w[1].preload_bytes + w[1].stream_bytes, p.file_bytes());
        }
        // 4 KiB cutoff: files of 1 and 2 KiB are small, counted up to EOF.
        assert_eq!(opts[1].preload_bytes, 1024 + 2048);
        assert!(opts[12].stream_throughput() > opts[0].stream_throughput());
    }
}
