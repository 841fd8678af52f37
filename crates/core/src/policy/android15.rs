//! Stock Android 15 as the AppFlow paper's phones ran it (§6.1): the
//! kernel model with lmkd's `mp_event_psi` (its kill reasons, per-reason
//! adj floors, the free-swap rule, the Pixel's properties) and
//! ActivityManager's adj classes and cached-process limit, each rule cited
//! from AOSP at `android-15.0.0_r1` (the simulator's `android` module,
//! docs/sim.md "The Android 15 baseline"). Beside `android`, the
//! simulator's simplified lmkd, until the device is calibrated to the
//! paper's stock figures under it.

use super::*;

/// `android15`.
pub const POLICY: Policy = Policy {
    name: "android15",
    aliases: &["android-15"],
    summary: "stock with Android 15's lmkd kill reasons and ActivityManager (simulator only)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Android15,
};
