//! Re-fault-aware reclaim (the re-fault study §5): kswapd's reclaim size is far larger
//! than the allocations it serves, which evicts pages that are used again;
//! the preliminary idea is a smaller kswapd reclaim, traded against more
//! direct reclaim. A kernel setting: the simulator's `KernelVariant::Refault`.

use super::*;

/// `refault`.
pub const POLICY: Policy = Policy {
    name: "refault",
    aliases: &[],
    summary: "re-fault-aware reclaim: small kswapd batches above the low watermark (kernel change; simulator only) (the re-fault study)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Refault,
};
