//! The stock system: no user-space scheduling at all. In the simulator the
//! kernel model reclaims and the device's platform kills: on the phone
//! presets Android 15's lmkd and ActivityManager, as the AppFlow paper's
//! phones ran them (§6.1); on Linux the kernel's own reclaim and OOM killer
//! act (the AppFlow paper §6.1 "Android").

use super::*;

/// `stock` (= `android`).
pub const POLICY: Policy = Policy {
    name: "stock",
    aliases: &["android", "android15", "android-15"],
    summary: "the stock kernel and killer, no scheduler (the AppFlow paper §6.1 Android baseline)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
