//! The simulator's random numbers: the core's deterministic generators
//! (`appflow_core::rng`), shared with the testbed so one SplitMix64 exists.

pub use appflow_core::rng::*;
