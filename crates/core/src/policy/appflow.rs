//! AppFlow (seed 000): the three modules scheduled together.

use super::*;

/// `appflow`.
pub const POLICY: Policy = Policy {
    name: "appflow",
    aliases: &[],
    summary: "AppFlow: selective preloader, adaptive reclaimer and context-aware killer (seed 000)",
    preload: PreloadStrategy::Selective,
    reclaim: ReclaimStrategy::Adaptive,
    killer: KillerStrategy::NetFreed,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
