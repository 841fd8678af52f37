//! AppFlow's Selective File Preloader alone (the AppFlow paper §6.5.1 ablation).

use super::*;

/// `appflow-sfp`.
pub const POLICY: Policy = Policy {
    name: "appflow-sfp",
    aliases: &[],
    summary: "AppFlow's Selective File Preloader alone (the AppFlow paper §6.5.1 ablation)",
    preload: PreloadStrategy::Selective,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
