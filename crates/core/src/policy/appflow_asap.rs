//! AppFlow (the AppFlow paper) with ASAP's switch prepaging (the ASAP paper): AppFlow
//! handles cold launches (preloading, reclaim modes, the killer), ASAP the
//! warm switches. Neither paper combines with the other.

use super::*;

/// `appflow+asap`.
pub const POLICY: Policy = Policy {
    name: "appflow+asap",
    aliases: &["asap+appflow"],
    summary: "AppFlow plus ASAP's switch prepaging (the AppFlow and ASAP papers)",
    preload: PreloadStrategy::Selective,
    reclaim: ReclaimStrategy::Adaptive,
    killer: KillerStrategy::NetFreed,
    switch: SwitchStrategy::Prepage,
    kernel: KernelVariant::Stock,
};
