//! AppFlow's Adaptive Memory Reclaimer alone (the AppFlow paper §6.5.1 ablation).

use super::*;

/// `appflow-amr`.
pub const POLICY: Policy = Policy {
    name: "appflow-amr",
    aliases: &[],
    summary: "AppFlow's Adaptive Memory Reclaimer alone (the AppFlow paper §6.5.1 ablation)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Adaptive,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
