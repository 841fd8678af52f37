//! Read throughput as a function of I/O block size.
//!
//! The AppFlow paper Fig. 6 / §4.1: on phone flash, large-block reads are up to 22.8×
//! faster than small-block reads. The daemon fills a [`ThroughputCurve`] with
//! `appflow calibrate`; the simulator uses a device preset's curve.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A measured point: reads of `block_bytes` achieve `bytes_per_sec`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// I/O block size in bytes.
    pub block_bytes: u64,
    /// Sustained read throughput at that block size, bytes per second.
    pub bytes_per_sec: f64,
}

/// Throughput by block size, interpolated linearly in log2(block size) and
/// clamped at both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputCurve {
    points: Vec<CurvePoint>,
}

/// What is wrong with a curve.
#[derive(Debug, Error, PartialEq)]
pub enum CurveError {
    /// No points.
    #[error("throughput curve has no points")]
    Empty,
    /// A point with zero block size, or a non-positive or non-finite throughput.
    #[error(
        "throughput curve point {index}: block_bytes must be > 0 and bytes_per_sec finite and > 0"
    )]
    BadPoint {
        /// Index of the point.
        index: usize,
    },
    /// Two points with the same block size.
    #[error("throughput curve has two points for block size {block_bytes}")]
    Duplicate {
        /// The repeated block size.
        block_bytes: u64,
    },
}

impl ThroughputCurve {
    /// The curve used when no calibration is stored: the shape of phone UFS
    /// flash in the AppFlow paper Fig. 6 (4 KiB reads ~20× slower than 512 KiB).
    pub fn phone_default() -> Self {
        Self::new(vec![
            CurvePoint {
                block_bytes: 4 * crate::KIB,
                bytes_per_sec: 20e6,
            },
            CurvePoint {
                block_bytes: 512 * crate::KIB,
                bytes_per_sec: 450e6,
            },
        ])
        .expect("valid default curve")
    }

    /// Builds a curve, sorting points by block size.
    pub fn new(mut points: Vec<CurvePoint>) -> Result<Self, CurveError> {
        if points.is_empty() {
            return Err(CurveError::Empty);
        }
        for (index, p) in points.iter().enumerate() {
            if p.block_bytes == 0 || !(p.bytes_per_sec.is_finite() && p.bytes_per_sec > 0.0) {
                return Err(CurveError::BadPoint { index });
            }
        }
        points.sort_by_key(|p| p.block_bytes);
        for w in points.windows(2) {
            if w[0].block_bytes == w[1].block_bytes {
                return Err(CurveError::Duplicate {
                    block_bytes: w[0].block_bytes,
                });
            }
        }
        Ok(Self { points })
    }

    /// The points, sorted by block size.
    pub fn points(&self) -> &[CurvePoint] {
        &self.points
    }

    /// Throughput (bytes/s) for reads of `block_bytes`.
    pub fn throughput(&self, block_bytes: u64) -> f64 {
        let b = block_bytes.max(1);
        let first = self.points[0];
        let last = self.points[self.points.len() - 1];
        if b <= first.block_bytes {
            return first.bytes_per_sec;
        }
        if b >= last.block_bytes {
            return last.bytes_per_sec;
        }
        let i = self.points.partition_point(|p| p.block_bytes <= b);
        let (lo, hi) = (self.points[i - 1], self.points[i]);
        let x = (b as f64).log2();
        let (x0, x1) = (
            (lo.block_bytes as f64).log2(),
            (hi.block_bytes as f64).log2(),
        );
        let t = (x - x0) / (x1 - x0);
        lo.bytes_per_sec + t * (hi.bytes_per_sec - lo.bytes_per_sec)
    }

    /// Seconds to read `bytes` in blocks of `block_bytes`.
    pub fn read_secs(&self, bytes: u64, block_bytes: u64) -> f64 {
        if bytes == 0 {
            return 0.0;
        }
        bytes as f64 / self.throughput(block_bytes.min(bytes).max(1))
    }

    /// Ratio of the throughput at `large` to that at `small` block size.
    pub fn speedup(&self, small: u64, large: u64) -> f64 {
        self.throughput(large) / self.throughput(small)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> ThroughputCurve {
        ThroughputCurve::new(vec![
            CurvePoint {
                block_bytes: 512 * 1024,
                bytes_per_sec: 1000.0,
            },
            CurvePoint {
                block_bytes: 4096,
                bytes_per_sec: 100.0,
            },
        ])
        .unwrap()
    }

    #[test]
    fn interpolates_in_log_space_and_clamps() {
        let c = curve();
        assert_eq!(c.throughput(1024), 100.0);
        assert_eq!(c.throughput(4096), 100.0);
        assert_eq!(c.throughput(1 << 30), 1000.0);
        // 4 KiB .. 512 KiB is 7 doublings; 32 KiB is 3 of them.
        let mid = c.throughput(32 * 1024);
        assert!((mid - (100.0 + 900.0 * 3.0 / 7.0)).abs() < 1e-9);
        assert!((c.speedup(4096, 512 * 1024) - 10.0).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_curves() {
        assert_eq!(ThroughputCurve::new(vec![]), Err(CurveError::Empty));
        let bad = vec![CurvePoint {
            block_bytes: 4096,
            bytes_per_sec: -1.0,
        }];
        assert_eq!(
            ThroughputCurve::new(bad),
            Err(CurveError::BadPoint { index: 0 })
        );
        let dup = vec![
            CurvePoint {
                block_bytes: 4096,
                bytes_per_sec: 1.0,
            },
            CurvePoint {
                block_bytes: 4096,
                bytes_per_sec: 2.0,
            },
        ];
        assert_eq!(
            ThroughputCurve::new(dup),
            Err(CurveError::Duplicate { block_bytes: 4096 })
        );
    }
}
