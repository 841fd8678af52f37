//! Preload everything: every profiled range of every app kept resident
//! before launch, with no budget — what the Selective File Preloader's
//! budget M_p protects the device from (the AppFlow paper §3.2).

use super::*;

/// `preload-all`.
pub const POLICY: Policy = Policy {
    name: "preload-all",
    aliases: &[],
    summary: "every profiled file of every app kept resident, no budget",
    preload: PreloadStrategy::KeepAll,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
