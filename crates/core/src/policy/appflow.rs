//! AppFlow (the AppFlow paper): the three modules scheduled together.

use super::*;

/// `appflow`.
pub const POLICY: Policy = Policy {
    name: "appflow",
    aliases: &[],
    summary: "AppFlow: selective preloader, adaptive reclaimer and context-aware killer (the AppFlow paper)",
    preload: PreloadStrategy::Selective,
    reclaim: ReclaimStrategy::Adaptive,
    killer: KillerStrategy::NetFreed,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
