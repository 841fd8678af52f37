//! Kernel variants of other systems: what a policy changes in the kernel
//! itself rather than in user space (docs/sim.md, "policies").
//!
//! * Acclaim (the AppFlow paper §6.1 baseline): foreground-aware eviction (the
//!   kernel model already evicts background apps first) and larger kswapd
//!   batches: kswapd reclaims to [`ACCLAIM_BATCH_SCALE`] × the high watermark.

use crate::engine::Sim;
use appflow_core::policy::KernelVariant;
use appflow_core::PAGE_BYTES;

/// Acclaim: kswapd reclaims to this multiple of the high watermark (larger batches, the AppFlow paper §6.1).
pub const ACCLAIM_BATCH_SCALE: u64 = 3;

impl Sim<'_> {
    /// The free-page target kswapd reclaims to.
    pub(crate) fn kswapd_target(&self) -> u64 {
        let high = self.dev.wmark_high_bytes / PAGE_BYTES;
        match self.pol.def.kernel {
            KernelVariant::Acclaim => high * ACCLAIM_BATCH_SCALE,
            KernelVariant::Stock => high,
        }
    }
}
