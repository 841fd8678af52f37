//! Acclaim (the AppFlow paper §6.1 baseline): foreground-aware eviction and larger
//! kswapd batches, a kernel patch, so a variant of the simulator's kernel
//! model only.

use super::*;

/// `acclaim`.
pub const POLICY: Policy = Policy {
    name: "acclaim",
    aliases: &[],
    summary: "foreground-aware kernel reclaim with larger kswapd batches (kernel patch; simulator only)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Acclaim,
};
