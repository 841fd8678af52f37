//! Kernel variants of other systems: what a policy changes in the kernel
//! itself rather than in user space (docs/sim.md, "policies";
//! docs/peers.md). Each constant names the paper and section it comes from.
//!
//! * Acclaim (the AppFlow paper §6.1 baseline): foreground-aware eviction (the
//!   kernel model already evicts background apps first) and larger kswapd
//!   batches: kswapd reclaims to [`ACCLAIM_BATCH_SCALE`] × the high watermark.
//! * PMR (the PMR paper §4.2-§4.3): `kshrinkd` shrinks δ = [`PMR_VICTIM_BYTES`]
//!   ahead of time on its own core, so reclaim that takes pages from the
//!   victim list pays only the writeback share of the per-page cost
//!   ([`PMR_WRITEBACK_SHARE`]); writeback to flash swap goes in batches of
//!   the unmap unit at the device's bulk write rate.
//! * Ariadne (the Ariadne paper §4.2-§4.4): each app's anonymous memory is split hot
//!   (its last relaunch's working set), warm (what the relaunch used beyond
//!   the hot list) and cold; eviction takes cold, then warm, then hot;
//!   zram chunks are 1K/2K/16K by hotness, which changes decompression cost
//!   and compression ratio; the page after each faulted page is
//!   pre-decompressed.
//! * Re-fault (the re-fault study §5): kswapd reclaims a batch above the low
//!   watermark instead of up to the high one: the step the policy's
//!   controller sets as `vm.watermark_scale_factor` ([`refault_batch_pages`]),
//!   or a fixed `--kswapd-batch-kib`.

use crate::engine::Sim;
use crate::launch::RELAUNCH_WS_FRACTION;
use appflow_core::policy::KernelVariant;
use appflow_core::refault::StepRange;
use appflow_core::{MIB, PAGE_BYTES};

/// Acclaim: kswapd reclaims to this multiple of the high watermark (larger batches, the AppFlow paper §6.1).
pub const ACCLAIM_BATCH_SCALE: u64 = 3;

/// PMR: δ = `nr_ideal_victim_page`, the victim list kshrinkd keeps ready
/// (the PMR paper §4.2.2 and §5.5: 462 MB).
pub const PMR_VICTIM_BYTES: u64 = appflow_core::proactive::READY_BYTES;

/// PMR: share of a reclaim round spent shrinking (isolating victims),
/// which kshrinkd does ahead of time (the PMR paper §3.2.1: 4.48 ms of
/// 4.48 + 3.66 ms, 54.8 %).
pub const PMR_SHRINK_SHARE: f64 = 0.548;

/// PMR: the share left on the reclaimer's path for pages already in the
/// victim list: writeback (the PMR paper §3.2.1: 45.2 %).
pub const PMR_WRITEBACK_SHARE: f64 = 1.0 - PMR_SHRINK_SHARE;

/// PMR: bulk write throughput of the batched writeback (the PMR paper §4.3.2:
/// 10 MB writes reach 1261 MB/s on the Pixel 6 pro), capped by the
/// device's own large-block rate.
pub const PMR_BATCH_WRITE_BYTES_PER_SEC: f64 = 1261.0 * MIB as f64;

/// Ariadne: compression chunk sizes for hot, warm and cold data (the Ariadne paper
/// §6.1's 1K-2K-16K configuration, within Table 5's ranges).
pub const ARIADNE_CHUNKS: [u64; 3] = [1024, 2048, 16 * 1024];

/// Ariadne: the zram baseline compresses one page at a time (the Ariadne paper §5).
const ZRAM_CHUNK: u64 = 4096;

/// Ariadne: compression at 128 B is 59.2× faster than at 128 KB (LZ4,
/// the Ariadne paper §3 Insight 2, Fig. 6), over 10 doublings of the chunk size;
/// we interpolate per doubling and apply it to decompression too (the
/// figure's two endpoints are all the text gives; assumption).
const ARIADNE_SPEED_SPAN: f64 = 59.2;

/// Ariadne: compression ratio rises from 1.7 at 128 B to 3.9 at 128 KB
/// (the Ariadne paper §3, Fig. 6); interpolated linearly per doubling.
const ARIADNE_RATIO_128B: f64 = 1.7;
const ARIADNE_RATIO_128K: f64 = 3.9;

/// Ariadne: share of a relaunch's anonymous working set that the hot list
/// covers (the Ariadne paper §6.2, Fig. 14: coverage ≈ 70 %). The rest is warm.
pub const ARIADNE_HOT_COVERAGE: f64 = 0.70;

/// Ariadne: probability that the page after a faulted page in zpool is
/// used next (the Ariadne paper Table 3, mean of its five apps: 0.86, 0.81, 0.69,
/// 0.77, 0.61); PreDecomp decompresses that one page ahead (§4.4).
pub const ARIADNE_NEXT_PAGE_HIT: f64 = (0.86 + 0.81 + 0.69 + 0.77 + 0.61) / 5.0;

/// Re-fault: the device's kswapd step as `vm.watermark_scale_factor` —
/// its watermark gap (high − low) over its memory, × 10000, rounded — and
/// the range the controller may move it in (floor: the kernel's `min / 4`).
pub fn refault_step_range(dev: &crate::device::Device) -> StepRange {
    let gap = dev.wmark_high_bytes - dev.wmark_low_bytes;
    let stock = ((gap as u128 * 10_000 + dev.dram_bytes as u128 / 2)
        / dev.dram_bytes.max(1) as u128)
        .min(u32::MAX as u128) as u32;
    StepRange::new(stock, dev.dram_bytes, dev.wmark_min_bytes)
}

/// Re-fault: kswapd's batch above the low watermark for a scale factor,
/// pages. The kernel's gap is linear in the factor above its `min / 4`
/// floor (mm/page_alloc.c `__setup_per_zone_wmarks`), so the device's gap
/// is scaled by `wsf / stock` and floored at `min / 4`: the stock factor
/// gives the device's own gap back exactly. (Only kswapd's reclaim target
/// moves in the model; the kernel also lowers the low watermark, the wake
/// point, with the gap.)
pub fn refault_batch_pages(dev: &crate::device::Device, wsf: u32) -> u64 {
    let gap = (dev.wmark_high_bytes - dev.wmark_low_bytes) / PAGE_BYTES;
    let stock = refault_step_range(dev).stock.max(1) as u64;
    (gap * wsf as u64 / stock).max(dev.wmark_min_bytes / 4 / PAGE_BYTES)
}

/// Ariadne's hotness classes.
pub(crate) const HOT: usize = 0;
pub(crate) const WARM: usize = 1;
pub(crate) const COLD: usize = 2;

/// Ariadne: decompression (and compression) time of a chunk size relative
/// to the one-page chunk of zram.
pub fn ariadne_speed_factor(chunk: u64) -> f64 {
    let doublings = (chunk as f64 / ZRAM_CHUNK as f64).log2();
    ARIADNE_SPEED_SPAN.powf(doublings / 10.0)
}

/// Ariadne: compression ratio of a chunk size relative to one-page chunks.
pub fn ariadne_ratio_factor(chunk: u64) -> f64 {
    let at = |c: u64| {
        ARIADNE_RATIO_128B
            + (ARIADNE_RATIO_128K - ARIADNE_RATIO_128B) * (c as f64 / 128.0).log2() / 10.0
    };
    at(chunk) / at(ZRAM_CHUNK)
}

/// Ariadne: an app's class sizes (hot, warm, cold) for `anon` pages: hot =
/// the relaunch working set, warm = the part of it the hot list misses.
pub(crate) fn ariadne_sizes(anon: u64) -> [u64; 3] {
    let ws = (anon as f64 * RELAUNCH_WS_FRACTION) as u64;
    let warm = ((ws as f64) * (1.0 - ARIADNE_HOT_COVERAGE) / ARIADNE_HOT_COVERAGE) as u64;
    let warm = warm.min(anon - ws);
    [ws, warm, anon - ws - warm]
}

impl Sim<'_> {
    /// The free-page target kswapd reclaims to.
    pub(crate) fn kswapd_target(&self) -> u64 {
        let high = self.dev.wmark_high_bytes / PAGE_BYTES;
        match self.pol.def.kernel {
            KernelVariant::Acclaim => high * ACCLAIM_BATCH_SCALE,
            KernelVariant::Refault => self.low_pages() + self.kswapd_batch_pages,
            KernelVariant::Stock
            | KernelVariant::SimpleLmkd
            | KernelVariant::Pmr
            | KernelVariant::Ariadne => high,
        }
    }

    pub(crate) fn ariadne(&self) -> bool {
        self.pol.def.kernel == KernelVariant::Ariadne
    }

    fn pmr(&self) -> bool {
        self.pol.def.kernel == KernelVariant::Pmr
    }

    /// Write throughput of anonymous pages to flash swap, bytes/s.
    pub(crate) fn swap_write_rate(&self) -> f64 {
        if self.pmr() {
            let bulk = self
                .dev
                .read_curve
                .points()
                .last()
                .map_or(0.0, |p| p.bytes_per_sec);
            PMR_BATCH_WRITE_BYTES_PER_SEC
                .min(bulk)
                .max(self.dev.swap_write_bytes_per_sec)
        } else {
            self.dev.swap_write_bytes_per_sec
        }
    }

    /// PMR's kshrinkd, on its own core for `budget_ms`: refills the victim
    /// list towards δ at the shrinking share of the reclaim cost. (The PMR paper
    /// Algorithm 1 fills the list at start and again whenever reclaim runs;
    /// the list only shrinks when reclaim runs, so "whenever it is short".)
    pub(crate) fn run_kshrinkd(&mut self, budget_ms: f64) {
        if !self.pmr() {
            return;
        }
        let target = PMR_VICTIM_BYTES / PAGE_BYTES;
        let ready = self.reclaimable_file() + self.reclaimable_anon();
        self.pmr_victims = self.pmr_victims.min(ready);
        let want = target.min(ready).saturating_sub(self.pmr_victims);
        if want == 0 {
            return;
        }
        let per_page = PMR_SHRINK_SHARE * self.mix_cost_per_page();
        let n = ((budget_ms / per_page.max(1e-9)) as u64).min(want);
        self.pmr_victims += n;
    }

    /// Average reclaim cost per page for the current anon/file mix, ms.
    fn mix_cost_per_page(&self) -> f64 {
        let f = self.reclaimable_file() as f64;
        let a = self.reclaimable_anon() as f64;
        if f + a == 0.0 {
            return self.dev.file_drop_ms_per_mib / 256.0;
        }
        (f * self.dev.file_drop_ms_per_mib + a * self.dev.anon_zram_ms_per_mib) / (f + a) / 256.0
    }

    /// PMR: reclaim took `pages` at a cost of `cost_ms`; the pages that came
    /// from the victim list were already shrunk. Returns the cost left.
    pub(crate) fn pmr_discount(&mut self, pages: u64, cost_ms: f64) -> f64 {
        if !self.pmr() || pages == 0 {
            return cost_ms;
        }
        let covered = pages.min(self.pmr_victims);
        self.pmr_victims -= covered;
        cost_ms * (1.0 - PMR_SHRINK_SHARE * covered as f64 / pages as f64)
    }

    /// Ariadne: the zram pool, each class at its chunk size's ratio.
    pub(crate) fn ariadne_pool(&self) -> u64 {
        (0..3)
            .map(|c| {
                let r = self.dev.zram_ratio * ariadne_ratio_factor(ARIADNE_CHUNKS[c]);
                self.zram_cls[c] as f64 / r
            })
            .sum::<f64>()
            .ceil() as u64
    }

    /// Ariadne: decompression cost of one page of class `c`, ms, on the
    /// faulting path (PreDecomp takes the next page off it when it hits).
    pub(crate) fn ariadne_decomp_ms(&self, c: usize) -> f64 {
        self.dev.zram_decomp_ms_per_mib / 256.0 * ariadne_speed_factor(ARIADNE_CHUNKS[c])
            / (1.0 + ARIADNE_NEXT_PAGE_HIT)
    }

    /// Ariadne: resident pages of app `a` in class `c`.
    pub(crate) fn ariadne_resident(&self, a: usize, c: usize) -> u64 {
        let s = &self.st[a];
        let size = ariadne_sizes(s.anon_total())[c];
        size.saturating_sub(s.zcls[c] + self.flash_share(a, c))
            .min(s.anon_res)
    }

    /// Pages of class `c` of `a` on flash swap (not tracked by class: the
    /// flash-swapped pages count against the coldest classes first).
    fn flash_share(&self, a: usize, c: usize) -> u64 {
        let s = &self.st[a];
        let sizes = ariadne_sizes(s.anon_total());
        let mut left = s.anon_swap;
        for cc in [COLD, WARM, HOT] {
            let room = sizes[cc].saturating_sub(s.zcls[cc]);
            let t = left.min(room);
            if cc == c {
                return t;
            }
            left -= t;
        }
        0
    }

    /// Ariadne: records that `z` pages of class `c` of `a` went to zram.
    pub(crate) fn ariadne_stored(&mut self, a: usize, c: usize, z: u64) {
        self.st[a].zcls[c] += z;
        self.zram_cls[c] += z;
    }

    /// Ariadne: removes `n` zram pages of `a`, from `c` first, then the
    /// other classes hottest first. Returns how many came from each class.
    pub(crate) fn ariadne_take(&mut self, a: usize, c: usize, n: u64) -> [u64; 3] {
        let mut got = [0; 3];
        let mut left = n;
        for cc in std::iter::once(c).chain([HOT, WARM, COLD]) {
            let t = left.min(self.st[a].zcls[cc]);
            self.st[a].zcls[cc] -= t;
            self.zram_cls[cc] -= t;
            got[cc] += t;
            left -= t;
        }
        got
    }

    /// Ariadne: an app's compressed pages are gone (it was killed).
    pub(crate) fn ariadne_drop(&mut self, a: usize) {
        for c in 0..3 {
            self.zram_cls[c] -= self.st[a].zcls[c];
            self.st[a].zcls[c] = 0;
        }
    }

    /// Ariadne's relaunch need in zram: the covered share of the hot list's
    /// compressed pages and all of the warm ones (cold data is not used).
    pub(crate) fn ariadne_relaunch_need(&self, a: usize) -> (u64, u64) {
        let s = &self.st[a];
        (
            (s.zcls[HOT] as f64 * ARIADNE_HOT_COVERAGE) as u64,
            s.zcls[WARM],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ariadne_factors_follow_the_papers_endpoints() {
        assert!((ariadne_speed_factor(4096) - 1.0).abs() < 1e-12);
        // 128 B → 128 KB: 59.2× over ten doublings.
        let span = ariadne_speed_factor(128 * 1024) / ariadne_speed_factor(128);
        assert!((span - 59.2).abs() < 1e-9);
        assert!(ariadne_speed_factor(1024) < ariadne_speed_factor(2048));
        assert!((ariadne_ratio_factor(4096) - 1.0).abs() < 1e-12);
        assert!(ariadne_ratio_factor(16 * 1024) > 1.0 && ariadne_ratio_factor(1024) < 1.0);
        let s = ariadne_sizes(1000);
        assert_eq!(s.iter().sum::<u64>(), 1000);
        assert_eq!(s[HOT], 500);
        assert!(s[WARM] > 0 && s[COLD] > 0);
        assert!((PMR_SHRINK_SHARE + PMR_WRITEBACK_SHARE - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_refault_step_maps_to_the_devices_kswapd_batch() {
        for name in crate::device::DEVICE_NAMES {
            let dev = crate::device::device(name).unwrap();
            let r = refault_step_range(&dev);
            let gap = (dev.wmark_high_bytes - dev.wmark_low_bytes) / PAGE_BYTES;
            let floor = dev.wmark_min_bytes / 4 / PAGE_BYTES;
            // Stock gives the device's own gap back; the floor is min / 4.
            assert_eq!(refault_batch_pages(&dev, r.stock), gap.max(floor), "{name}");
            assert_eq!(refault_batch_pages(&dev, 1), floor, "{name}");
            assert!(refault_batch_pages(&dev, r.lowest()) >= floor, "{name}");
            // Monotone in the factor.
            let mut last = 0;
            for w in 1..=r.stock {
                let b = refault_batch_pages(&dev, w);
                assert!(b >= last, "{name} {w}");
                last = b;
            }
        }
        let p7 = crate::device::device("pixel7-6gb").unwrap();
        assert_eq!(
            refault_step_range(&p7),
            StepRange {
                stock: 62,
                floor: 32
            }
        );
    }
}
