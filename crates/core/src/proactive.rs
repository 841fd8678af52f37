//! PMR's reclaim ahead of bursts, from user space (the PMR paper §4.2-§4.3).
//!
//! In the kernel, PMR's `kshrinkd` keeps a victim list of δ pages shrunk
//! ahead of memory bursts, refilled in batches of `nr_to_reclaim` = δ / 3,
//! and writeback unmaps pages application by application and writes them
//! in device-sized batches. A user-space daemon cannot add a victim list to
//! the kernel's LRU, but it can do the same work ahead of the burst: keep δ
//! of memory available by paging out background apps' anonymous memory,
//! least recently used app first, in per-app batches of the unmap unit
//! (`process_madvise(MADV_PAGEOUT)` on a real kernel). Pure: the scheduler
//! calls it with the domain's sample and acts through the reclaim
//! mechanism.

use crate::MIB;

/// δ = `nr_ideal_victim_page`: memory kept ready (the PMR paper §4.2.2: "an
/// empirical setting of 462 MB", three times kswapd's per-round 154 MB).
pub const READY_BYTES: u64 = 462 * MIB;

/// Shrinking batch = `nr_to_reclaim`, one third of δ (the PMR paper §4.2.2).
pub const BATCH_BYTES: u64 = READY_BYTES / 3;

/// Application-aware unmap unit (`mem_unmap_unit`): 10 MB, the Pixel 6
/// pro's optimum (the PMR paper §4.3.2 and §5.5; the Pixel 5's is 1 MB).
pub const UNMAP_UNIT_BYTES: u64 = 10 * MIB;

/// Bytes to page out this tick: nothing while δ is available; otherwise
/// what is missing, at most one shrinking batch.
pub fn page_out_budget(avail_bytes: u64) -> u64 {
    READY_BYTES.saturating_sub(avail_bytes).min(BATCH_BYTES)
}

/// Number of unmap units a budget is split into (the last one may be short).
pub fn units(budget: u64) -> u64 {
    budget.div_ceil(UNMAP_UNIT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_fills_up_to_delta_one_batch_at_a_time() {
        assert_eq!(page_out_budget(READY_BYTES), 0);
        assert_eq!(page_out_budget(u64::MAX), 0);
        assert_eq!(page_out_budget(READY_BYTES - MIB), MIB);
        assert_eq!(page_out_budget(0), BATCH_BYTES);
        assert_eq!(BATCH_BYTES, 154 * MIB);
        assert_eq!(units(0), 0);
        assert_eq!(units(MIB), 1);
        assert_eq!(units(BATCH_BYTES), 16);
    }
}
