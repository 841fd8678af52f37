//! Ariadne (the Ariadne paper, HPCA '25): hotness-aware, size-adaptive compressed
//! swap. Anonymous data is split hot/warm/cold by the last relaunch and
//! evicted cold first (§4.2), compressed in chunks sized by hotness (§4.3)
//! and the next page is pre-decompressed on a swap-in (§4.4).
//!
//! Two halves. The user-space half (`ReclaimStrategy::HotnessAware`): when
//! an app leaves the foreground, the scheduler asks the mechanism to mark
//! its anonymous data that its last foreground window did not bring back
//! as cold, so the kernel's reclaim takes it before that hot set (the
//! daemon with `process_madvise(MADV_COLD)`). The in-zram half (chunk sizes,
//! pre-decompression, and the three hotness lists themselves) is a zram
//! change: the simulator's `KernelVariant::Ariadne` only.

use super::*;

/// `ariadne`.
pub const POLICY: Policy = Policy {
    name: "ariadne",
    aliases: &[],
    summary: "Ariadne: cold-first eviction of what the last foreground window did not use (user space); hot/warm/cold zram with 1K/2K/16K chunks and pre-decompression (kernel half simulator only) (the Ariadne paper)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::HotnessAware,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Ariadne,
};
