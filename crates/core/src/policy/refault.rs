//! Re-fault-aware reclaim (the re-fault study §5): kswapd's reclaim size is far larger
//! than the allocations it serves, which evicts pages that are used again;
//! the preliminary idea is a smaller kswapd reclaim, traded against more
//! direct reclaim. The step is a stock kernel setting: the gap between the
//! watermarks, `vm.watermark_scale_factor`, which the controller
//! (`crate::refault`, `ReclaimStrategy::RefaultAware`) lowers and raises
//! from the measured re-fault ratio and direct-reclaim share; the daemon
//! writes the knob (system domain only: a memory cgroup has no kswapd of
//! its own), the simulator maps it to its kswapd batch
//! (`KernelVariant::Refault`).

use super::*;

/// `refault`.
pub const POLICY: Policy = Policy {
    name: "refault",
    aliases: &[],
    summary: "re-fault-aware reclaim: kswapd's step (vm.watermark_scale_factor) lowered while re-faults are high and direct reclaim low (the re-fault study)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::RefaultAware,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Refault,
};
