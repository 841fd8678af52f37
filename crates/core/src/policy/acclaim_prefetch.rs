//! Acclaim with Paralfetch-like prefetching, the strongest baseline of
//! the AppFlow paper §6.1 (simulator only: Acclaim is a kernel patch).

use super::*;

/// `acclaim+prefetch` (= `acclaim+paralfetch`).
pub const POLICY: Policy = Policy {
    name: "acclaim+prefetch",
    aliases: &["acclaim+paralfetch", "paralfetch+acclaim", "prefetch+acclaim"],
    summary: "Acclaim kernel reclaim plus whole-profile prefetch (simulator only)",
    preload: PreloadStrategy::WholeProfile,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Acclaim,
};
