//! lmkd's victim order (highest oom_score_adj, then least recently used)
//! from user space, on the Context-Aware killer's trigger: isolates what the
//! ΔM order and the recency deferment of the AppFlow paper §4.3 add.

use super::*;

/// `lru-killer`.
pub const POLICY: Policy = Policy {
    name: "lru-killer",
    aliases: &[],
    summary: "user-space killer in lmkd's order (adj, then least recently used)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Lru,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
