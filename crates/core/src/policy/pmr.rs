//! PMR (the PMR paper, USENIX ATC '25): parallel memory reclaim. In the kernel,
//! proactive page shrinking keeps a victim list of δ = 462 MB ready
//! (§4.2) and storage-friendly writeback unmaps per application and writes
//! in device-sized batches (§4.3): the simulator's `KernelVariant::Pmr`.
//! In user space, the same idea as batched per-app anonymous page-out
//! ahead of bursts (`ReclaimStrategy::Proactive`), which the daemon runs
//! with `process_madvise(MADV_PAGEOUT)`.

use super::*;

/// `pmr`.
pub const POLICY: Policy = Policy {
    name: "pmr",
    aliases: &[],
    summary: "PMR: victim list kept ready + batched per-app writeback (kernel half simulator only), batched per-app page-out ahead of bursts (the PMR paper)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Proactive,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Pmr,
};
