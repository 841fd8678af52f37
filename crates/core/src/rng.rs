//! Small deterministic random numbers, shared by the simulator, the testbed
//! and the storage calibration (pure: no I/O, no clock). The simulator draws
//! every random quantity from a hash of (seed, what, which), never from a
//! shared stream, so that every policy sees exactly the same workload
//! randomness; the testbed derives its synthetic file trees and data from
//! [`SplitMix`] streams seeded with [`fnv1a`] of the app's name.

/// FNV-1a hash of bytes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64 finaliser.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in [0, 1) keyed by (seed, tag, a, b).
pub fn unit(seed: u64, tag: &str, a: u64, b: u64) -> f64 {
    let h = mix(mix(mix(seed ^ fnv1a(tag.as_bytes())) ^ a) ^ b);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// A SplitMix64 stream (used where a sequence is natural: profiles, traces,
/// synthetic file trees and their contents).
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A stream from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}
