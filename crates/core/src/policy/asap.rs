//! ASAP (the ASAP paper, USENIX ATC '21): on an app switch, prepage the app's
//! switch footprint (file and anonymous pages it faulted back in during its
//! last switch) at idle priority, from a candidate table corrected by
//! precision/recall feedback. A user-space policy: the daemon and the
//! simulator run the same estimator (`crate::prepage`).

use super::*;

/// `asap`.
pub const POLICY: Policy = Policy {
    name: "asap",
    aliases: &[],
    summary: "ASAP: prepage the switch footprint at switch start, idle priority, with precision/recall feedback (the ASAP paper)",
    preload: PreloadStrategy::None,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Prepage,
    kernel: KernelVariant::Stock,
};
