//! The simulator's simplified stock platform, kept beside `android` so the
//! move to Android 15 can be seen side by side: a single lmkd rule (kill the
//! least recently used background app while PSI `some` stalls with swap
//! low, or `full` stalls) and no ActivityManager (the previous app keeps
//! adj 700 however long, no cached-app compaction). `android` on the phone
//! presets is Android 15 as the AppFlow paper's phones ran it (§6.1; the
//! simulator's `android` module, docs/sim.md "The Android 15 baseline").

use super::*;

/// `android-simple`.
pub const POLICY: Policy = Policy {
    name: "android-simple",
    aliases: &[],
    summary: "stock with the simulator's simplified lmkd and no ActivityManager (the model before Android 15; simulator only)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::SimpleLmkd,
};
