//! AppFlow's Context-Aware Process Killer alone (the AppFlow paper §6.5.1 ablation).

use super::*;

/// `appflow-cpk`.
pub const POLICY: Policy = Policy {
    name: "appflow-cpk",
    aliases: &[],
    summary: "AppFlow's Context-Aware Process Killer alone (the AppFlow paper §6.5.1 ablation)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::NetFreed,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
