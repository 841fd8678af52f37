//! Ariadne (the Ariadne paper, HPCA '25): hotness-aware, size-adaptive compressed
//! swap. Anonymous data is split hot/warm/cold by the last relaunch and
//! evicted cold first (§4.2), compressed in chunks sized by hotness (§4.3)
//! and the next page is pre-decompressed on a swap-in (§4.4). It is a zram
//! change: the simulator's `KernelVariant::Ariadne` only.

use super::*;

/// `ariadne`.
pub const POLICY: Policy = Policy {
    name: "ariadne",
    aliases: &[],
    summary: "Ariadne: hot/warm/cold zram with 1K/2K/16K chunks and pre-decompression (kernel patch; simulator only) (the Ariadne paper)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Ariadne,
};
