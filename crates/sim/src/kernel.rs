//! The simulated kernel: memory accounting, the LRU, kswapd and direct
//! reclaim, zram and flash swap, PSI, Android's lmkd and the kernel's OOM
//! killer. Nothing of a user-space policy lives here: the reclaim mode the
//! scheduler sets is a setting (swappiness 0 in efficiency-first), like on
//! a real kernel, and pages the preload worker locks are unevictable.
//!
//! Free memory = DRAM − reserve − anon − page cache − zram pool. kswapd wakes
//! below the low watermark and reclaims to the high one (on its own core);
//! an allocation that would cross the min watermark reclaims synchronously
//! (direct reclaim, counted per 32-page batch like `allocstall`). Stock
//! reclaim scans anon and file in proportion to the list sizes (swappiness
//! 100, Android's init.rc value), or drops page cache first while it lasts
//! on a device that says so (`Device::reclaim_cache_first`, the testbed's
//! Linux memory cgroup); anonymous pages go to zram, then to flash
//! swap; file pages are dropped. lmkd (PSI and swap triggers, adj then LRU)
//! runs when the policy leaves the killing to the platform; an allocation
//! that nothing can satisfy is the OOM killer's.

// Cells are parallel [chunk][bucket] arrays of several holders; index loops read clearer.
#![allow(clippy::needless_range_loop)]

use crate::android;
use crate::catalog::{Cells, CHUNKS};
use crate::device::Platform;
use crate::engine::{cells_sum, Holder, Sim, PSI_BUCKETS};
use crate::peers::{COLD, HOT, WARM};
use appflow_core::killer::{self, Candidate};
use appflow_core::mechanism::KillMechanism;
use appflow_core::policy::{KernelVariant, KillerStrategy};
use appflow_core::reason::Reason;
use appflow_core::reclaim::ReclaimMode;
use appflow_core::scheduler::ProcId;
use appflow_core::PAGE_BYTES;

/// SWAP_CLUSTER_MAX: pages per direct-reclaim batch (one `allocstall`).
pub const RECLAIM_BATCH_PAGES: u64 = 32;
/// lmkd: PSI "some" over 1 s that counts as medium pressure (ro.lmk.psi_partial_stall_ms = 70).
pub const LMKD_PSI_SOME: f64 = 0.07;
/// lmkd: PSI "full" over 1 s that counts as critical (ro.lmk.psi_complete_stall_ms = 700).
pub const LMKD_PSI_FULL: f64 = 0.70;
/// lmkd: medium pressure kills only when free swap is below this share (ro.lmk.swap_free_low_percentage = 10).
pub const LMKD_SWAP_FREE_LOW: f64 = 0.10;
/// lmkd: wait for a victim's memory before the next kill (ro.lmk.kill_timeout_ms = 100).
pub const LMKD_KILL_TIMEOUT_US: u64 = 100_000;
const PSI_BUCKET_US: u64 = 100_000;

/// `x.ceil() as u64`, exactly (NaN and negatives give 0, beyond `u64::MAX`
/// saturates), without the float library call: the x86-64 baseline has no
/// rounding instruction, and the page counts of every reclaim and read step
/// go through here.
#[inline]
pub(crate) fn ceil_u64(x: f64) -> u64 {
    let t = x as u64; // truncates toward zero, saturating
    if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
}

/// `x.round() as u64` (halves away from zero), exactly, without the float
/// library call (see [`ceil_u64`]).
#[inline]
pub(crate) fn round_u64(x: f64) -> u64 {
    let t = x as u64;
    // Below 2^52 the fraction `x - t` is exact; from 2^52 on every float is
    // a whole number, so the fraction is 0 (and `t` saturates past u64).
    if x - t as f64 >= 0.5 {
        t.saturating_add(1)
    } else {
        t
    }
}

/// Removes up to `n` pages from cells, proportionally; returns pages removed.
pub(crate) fn take_cells(c: &mut Cells, n: u64) -> u64 {
    let total = cells_sum(c);
    if total == 0 || n == 0 {
        return 0;
    }
    if n >= total {
        *c = [[0; 2]; CHUNKS];
        return total;
    }
    let mut taken = 0;
    for cell in c.iter_mut() {
        for v in cell.iter_mut().filter(|v| **v > 0) {
            // v·n/total in u64 when the product fits (it nearly always
            // does), else in u128: the same quotient either way.
            let t = match v.checked_mul(n) {
                Some(p) => p / total,
                None => (*v as u128 * n as u128 / total as u128) as u64,
            };
            *v -= t;
            taken += t;
        }
    }
    // Remainder from the last chunks first (latest-accessed pages).
    'outer: for cell in c.iter_mut().rev() {
        for v in cell.iter_mut().rev() {
            if taken >= n {
                break 'outer;
            }
            let t = (*v).min(n - taken);
            *v -= t;
            taken += t;
        }
    }
    taken
}

/// How often CachedAppOptimizer's model reads the adj classes, µs of
/// simulated time (the scheduler's tick).
const COMPACT_SCAN_US: u64 = 100_000;

impl Sim<'_> {
    // ------------------------------------------------------------------
    // Accounting
    // ------------------------------------------------------------------

    /// DRAM per page in swap (zram's pool over the pages in zram and on
    /// flash): what a killed app's swapped pages give back.
    pub(crate) fn swapped_ram_share(&self) -> f64 {
        killer::swapped_ram_share(self.zram_pool(), self.zram_stored + self.swap_used)
    }

    /// zram's compressed pool where it takes DRAM (0 when the device's pool
    /// lies outside the apps' memory, like the testbed's uncharged zram).
    pub(crate) fn zram_pool(&self) -> u64 {
        if !self.dev.zram_pool_in_dram || (self.zram_stored == 0 && !self.ariadne()) {
            return 0;
        }
        if self.ariadne() {
            return self.ariadne_pool();
        }
        // The same stored pages as at the last call: the same pool (free
        // memory is asked for at every step of every walk).
        let (stored, pool) = self.zram_pool_memo.get();
        if stored == self.zram_stored {
            return pool;
        }
        let pool = ceil_u64(self.zram_stored as f64 / self.dev.zram_ratio);
        self.zram_pool_memo.set((self.zram_stored, pool));
        pool
    }

    /// Free pages.
    pub fn free_pages(&self) -> u64 {
        let used = self.reserved_pages + self.anon_total + self.file_total + self.zram_pool();
        self.dram_pages.saturating_sub(used)
    }

    /// M_aval as the scheduler sees it: free memory plus page cache that
    /// reclaim may drop (like MemAvailable; the same value the daemon reads).
    pub fn avail_pages(&self) -> u64 {
        self.free_pages() + self.reclaimable_file()
    }

    pub(crate) fn min_pages(&self) -> u64 {
        self.dev.wmark_min_bytes / PAGE_BYTES
    }

    pub(crate) fn low_pages(&self) -> u64 {
        self.dev.wmark_low_bytes / PAGE_BYTES
    }

    /// Checks that per-app state adds up to the totals and to DRAM.
    /// Returns a description of the first mismatch.
    pub fn check_accounting(&self) -> Result<(), String> {
        let mut anon = 0;
        let mut file = 0;
        let mut zram = 0;
        let mut swap = 0;
        let mut held = 0;
        let mut stream = 0;
        // Apps untouched since the reset hold nothing (debug builds check
        // it at the next reset); a page one of them held anyway would show
        // as a drift of the totals below.
        for (i, s) in self.st.iter().enumerate() {
            if !self.touched[i] {
                continue;
            }
            if !s.alive && s.anon_total() > 0 {
                return Err(format!("dead app {i} holds anonymous memory"));
            }
            let sums = s.cell_sums();
            // An app without a cached page (the sums of its cells are 0,
            // so every cell is) cannot cache more than its files.
            if sums != [0; 3] {
                for k in 0..CHUNKS {
                    for b in 0..2 {
                        if s.cached(k, b) > self.models[i].chunk_pages[k][b] {
                            return Err(format!(
                                "app {i} chunk {k}/{b} caches more than its files"
                            ));
                        }
                    }
                }
            }
            if self.ariadne() && s.zcls.iter().sum::<u64>() != s.anon_zram {
                return Err(format!("app {i} hotness classes drift from its zram pages"));
            }
            if s.unused_anon > s.anon_res {
                return Err(format!(
                    "app {i} has more unused prepaged pages than resident ones"
                ));
            }
            anon += s.anon_res;
            zram += s.anon_zram;
            swap += s.anon_swap;
            if sums != s.sum {
                return Err(format!(
                    "app {i} holder sums drift: {sums:?} vs {:?}",
                    s.sum
                ));
            }
            file += sums.iter().sum::<u64>() + s.other_file;
            held += sums[Holder::Held as usize];
            stream += sums[Holder::Stream as usize];
        }
        if held != self.held_total {
            return Err(format!("held total drifts: {held} vs {}", self.held_total));
        }
        if stream != self.stream_total {
            return Err(format!(
                "stream total drifts: {stream} vs {}",
                self.stream_total
            ));
        }
        if anon != self.anon_total || file != self.file_total {
            return Err(format!(
                "totals drift: anon {anon} vs {}, file {file} vs {}",
                self.anon_total, self.file_total
            ));
        }
        if self.ariadne() && self.zram_cls.iter().sum::<u64>() != self.zram_stored {
            return Err("hotness class totals drift".into());
        }
        if zram != self.zram_stored || swap != self.swap_used {
            return Err("swap totals drift".into());
        }
        if zram > self.zram_cap || swap > self.swap_cap {
            return Err("swap over capacity".into());
        }
        let used = self.reserved_pages + anon + file + self.zram_pool();
        if used > self.dram_pages {
            return Err(format!(
                "memory overcommitted: {used} > {}",
                self.dram_pages
            ));
        }
        Ok(())
    }

    /// Adds `n` pages of app `a`'s launch files to the page cache for `h`.
    pub(crate) fn add_file(&mut self, a: usize, h: Holder, k: usize, b: usize, n: u64) {
        self.gain_file(a);
        self.st[a].cells_mut(h)[k][b] += n;
        self.st[a].sum[h as usize] += n;
        match h {
            Holder::Held => self.held_total += n,
            Holder::Stream => self.stream_total += n,
            Holder::Own => {}
        }
        self.file_total += n;
        self.alloc_counter += n;
        // Re-reading evicted pages is a refault.
        let r = n.min(self.st[a].evicted_outstanding);
        self.st[a].evicted_outstanding -= r;
        self.counters.refault_file_pages += r;
    }

    // ------------------------------------------------------------------
    // Reclaim
    // ------------------------------------------------------------------

    /// Pages the worker streamed for a launch are locked (mlock) until the
    /// launch ends: unevictable.
    pub(crate) fn file_protected(&self, a: usize, h: Holder) -> bool {
        h == Holder::Stream && self.launching == Some(a)
    }

    pub(crate) fn reclaimable_file(&self) -> u64 {
        let locked = self
            .launching
            .map(|a| self.st[a].sum[Holder::Stream as usize])
            .unwrap_or(0);
        self.file_total.saturating_sub(locked)
    }

    pub(crate) fn swap_room(&self) -> u64 {
        (self.zram_cap - self.zram_stored) + (self.swap_cap - self.swap_used)
    }

    /// Free swap (zram and flash) below lmkd's `swap_free_low_percentage`
    /// of its size (a device with none is always low).
    pub(crate) fn swap_low(&self) -> bool {
        let cap = (self.zram_cap + self.swap_cap).max(1);
        (self.swap_room() as f64 / cap as f64) < LMKD_SWAP_FREE_LOW
    }

    pub(crate) fn reclaimable_anon(&self) -> u64 {
        if self.swap_room() == 0 {
            return 0;
        }
        let fg = self.fg.map(|a| self.st[a].anon_res).unwrap_or(0);
        (self.anon_total - fg).min(self.swap_room())
    }

    /// Evicts up to `n` file pages in LRU order; returns pages evicted.
    pub(crate) fn evict_file(&mut self, n: u64) -> u64 {
        // The walk neither reads nor changes the LRU through `self`: it is
        // taken out for the walk and put back, rather than copied at every
        // call. The apps of the cleared prefix hold no page cache: every
        // pass starts past them.
        self.debug_check_lru();
        let order = std::mem::take(&mut self.lru);
        let start = self.clear_file;
        let fg = self.fg;
        let launching = self.launching.filter(|&l| Some(l) != fg);
        let front_apps = [fg, launching];
        let is_front = |a: usize| Some(a) == fg || Some(a) == launching;
        let mut got = 0;
        // 0. Pages never referenced (a switch's prepaging read them and the
        //    switch did not use them): the inactive list's tail, whichever
        //    app they belong to.
        for &a in &order[start.min(order.len())..] {
            if got >= n || !self.prepage_leftovers {
                break;
            }
            let t = self.st[a].other_file.min(n - got);
            self.st[a].other_file -= t;
            got += t;
        }
        // 1. Background apps' own pages, oldest first, until none is left
        //    (the rest of the walk would take nothing; short of `n`, step 0
        //    took every never-referenced page); the walk extends the
        //    cleared prefix over the apps it empties.
        let front: u64 = front_apps
            .into_iter()
            .flatten()
            .map(|a| self.st[a].sum[Holder::Own as usize])
            .sum();
        let mut left = if got < n {
            self.file_total - got - self.held_total - self.stream_total - front
        } else {
            0
        };
        let mut extending = true;
        for (i, &a) in order.iter().enumerate().skip(start) {
            if got >= n || left == 0 {
                break;
            }
            if !is_front(a) {
                let t = self.take_file(a, Holder::Own, n - got);
                got += t;
                left -= t;
            }
            if extending {
                let s = &self.st[a];
                if s.sum == [0; 3] && s.other_file == 0 {
                    self.clear_file = i + 1;
                } else {
                    extending = false;
                }
            }
        }
        // 2. The standby sets held, 3. launch streams (not a launch's
        //    locked pages), oldest app first.
        for h in [Holder::Held, Holder::Stream] {
            let mut left = match h {
                Holder::Held => self.held_total,
                _ => self.stream_total,
            };
            for &a in &order[start.min(order.len())..] {
                if got >= n || left == 0 {
                    break;
                }
                if !self.file_protected(a, h) {
                    let t = self.take_file(a, h, n - got);
                    got += t;
                    left -= t;
                }
            }
        }
        // 4. The foreground and launching apps' own pages, in LRU order (in
        //    the cleared prefix they hold none).
        let mut front_order = front_apps.map(|a| a.filter(|&a| self.lru_pos[a] >= start));
        if let [Some(x), Some(y)] = front_order {
            if self.lru_pos[y] < self.lru_pos[x] {
                front_order = [Some(y), Some(x)];
            }
        }
        for a in front_order.into_iter().flatten() {
            if got >= n {
                break;
            }
            got += self.take_file(a, Holder::Own, n - got);
        }
        self.lru = order;
        self.file_total -= got;
        self.counters.evicted_file_pages += got;
        got
    }

    /// Evicts up to `n` of app `a`'s launch-file pages held by `h` (in
    /// proportion over its cells); returns how many.
    fn take_file(&mut self, a: usize, h: Holder, n: u64) -> u64 {
        if self.st[a].sum[h as usize] == 0 || n == 0 {
            return 0;
        }
        let t = take_cells(self.st[a].cells_mut(h), n);
        self.st[a].sum[h as usize] -= t;
        match h {
            Holder::Held => {
                self.held_total -= t;
                self.touch_pending_add(a);
            }
            Holder::Stream => self.stream_total -= t,
            Holder::Own => {}
        }
        self.st[a].evicted_outstanding += t;
        t
    }

    /// The kernel's LRU reclaim's CPU cost per anonymous page.
    pub(crate) fn lru_anon_ms_per_page(&self) -> f64 {
        self.dev
            .lru_anon_ms_per_mib
            .unwrap_or(self.dev.anon_zram_ms_per_mib)
            / 256.0
    }

    /// Swaps out up to `n` anonymous pages of background apps (oldest
    /// first), or of `only` when given, at `ms_per_page` of CPU per page
    /// compressed. Returns (pages, cpu ms, flash ms).
    pub(crate) fn evict_anon(
        &mut self,
        n: u64,
        only: Option<usize>,
        ms_per_page: f64,
    ) -> (u64, f64, f64) {
        let mut got = 0;
        let (mut cpu, mut flash) = (0.0, 0.0);
        // The walk neither reads nor changes the LRU through `self`: it is
        // taken out for the walk and put back, rather than copied (or a
        // one-app list allocated) at every call; the rebalancing page-out
        // calls this for every background app, many times a tick.
        if only.is_none() {
            self.debug_check_lru();
        }
        let lru = std::mem::take(&mut self.lru);
        let only_one = only.map(|a| [a]);
        let order: &[usize] = match &only_one {
            Some(one) => one,
            None => &lru,
        };
        // Ariadne evicts by hotness class across apps (cold first); the
        // stock kernel takes each app's anonymous memory in LRU order.
        let passes: &[Option<usize>] = if self.ariadne() {
            &[Some(COLD), Some(WARM), Some(HOT)]
        } else {
            &[None]
        };
        // The LRU walk starts past the apps with nothing resident, and
        // extends that prefix over those it finds or leaves so.
        let start = if only.is_none() { self.clear_anon } else { 0 };
        let mut extending = only.is_none();
        // Pages never referenced (a switch's prepaging brought them back
        // and the switch did not use them) go first, whichever app they
        // belong to: they are the inactive list's tail. (No policy prepages
        // under the Ariadne variant, whose classes hold every page.) The
        // apps of the cleared prefix have none (never more than resident).
        if !self.ariadne() && self.prepage_leftovers {
            for &a in order.iter().skip(start) {
                if got >= n {
                    break;
                }
                if only.is_none() && (Some(a) == self.fg || Some(a) == self.launching) {
                    continue;
                }
                let (z, f) = self.swap_out(a, self.st[a].unused_anon.min(n - got));
                self.st[a].unused_anon -= z + f;
                cpu += z as f64 * ms_per_page;
                flash += f as f64 * PAGE_BYTES as f64 / self.swap_write_rate() * 1000.0;
                got += z + f;
            }
        }
        'classes: for &class in passes {
            for (i, &a) in order.iter().enumerate().skip(start) {
                if got >= n {
                    break;
                }
                if self.swap_room() == 0 {
                    // Nothing more can go anywhere: every app left would
                    // page out nothing.
                    break 'classes;
                }
                let front = only.is_none() && (Some(a) == self.fg || Some(a) == self.launching);
                let avail = match class {
                    _ if front => 0,
                    Some(c) => self.ariadne_resident(a, c),
                    None => self.st[a].anon_res,
                };
                if !front {
                    let (z, f) = self.swap_out(a, avail.min(n - got));
                    let s = &mut self.st[a];
                    s.unused_anon = s.unused_anon.min(s.anon_res);
                    if let Some(c) = class {
                        self.ariadne_stored(a, c, z);
                    }
                    cpu += z as f64 * ms_per_page;
                    flash += f as f64 * PAGE_BYTES as f64 / self.swap_write_rate() * 1000.0;
                    got += z + f;
                }
                if extending {
                    if self.st[a].anon_res == 0 {
                        self.clear_anon = i + 1;
                    } else {
                        extending = false;
                    }
                }
            }
            extending = false;
        }
        self.lru = lru;
        self.anon_total -= got;
        self.counters.evicted_anon_pages += got;
        (got, cpu, flash)
    }

    /// Moves up to `n` resident anonymous pages of `a` to zram, then to
    /// flash swap, as far as they have room. Returns (to zram, to flash).
    fn swap_out(&mut self, a: usize, n: u64) -> (u64, u64) {
        let z = n.min(self.zram_cap - self.zram_stored);
        let f = (n - z).min(self.swap_cap - self.swap_used);
        let s = &mut self.st[a];
        s.anon_res -= z + f;
        s.anon_zram += z;
        s.anon_swap += f;
        self.zram_stored += z;
        self.swap_used += f;
        (z, f)
    }

    /// Reclaims until `want` pages are free (net) or `budget_ms` of work is
    /// spent. Returns (net pages freed, ms used).
    pub(crate) fn reclaim(&mut self, want: u64, budget_ms: f64) -> (u64, f64) {
        let mut freed = 0u64;
        let mut used = 0.0;
        let file_ms = self.dev.file_drop_ms_per_mib / 256.0;
        let anon_ms = self.lru_anon_ms_per_page();
        // Work in rounds so the anon/file mix follows the list sizes.
        let mut rounds = 0;
        while freed < want && used < budget_ms && rounds < 64 {
            rounds += 1;
            let file_avail = self.reclaimable_file();
            let anon_avail = self.reclaimable_anon();
            if file_avail == 0 && anon_avail == 0 {
                break;
            }
            let high = self.dev.wmark_high_bytes / PAGE_BYTES;
            let anon_frac = if self.mode == ReclaimMode::EfficiencyFirst {
                // Swappiness 0: file only; anon only when file is nearly
                // gone (the kernel's "file is tiny" rule in get_scan_count
                // scans anon at swappiness 0 once file + free is below the
                // high watermark).
                if file_avail + self.free_pages() < high || file_avail == 0 {
                    1.0
                } else {
                    0.0
                }
            } else if self.dev.reclaim_cache_first && file_avail > 0 {
                // The kernel's cache trim mode: page cache first while it lasts.
                0.0
            } else {
                anon_avail as f64 / (anon_avail + file_avail) as f64
            };
            let zr = if self.dev.zram_pool_in_dram {
                1.0 - 1.0 / self.dev.zram_ratio
            } else {
                1.0
            };
            let net_per_scan = anon_frac * zr + (1.0 - anon_frac);
            let ms_per_scan = anon_frac * anon_ms + (1.0 - anon_frac) * file_ms;
            let need = (want - freed) as f64 / net_per_scan.max(1e-9);
            let afford = (budget_ms - used) / ms_per_scan.max(1e-9);
            let scan = ceil_u64(need.min(afford)).max(RECLAIM_BATCH_PAGES);
            let a_want = round_u64(scan as f64 * anon_frac);
            let f_want = scan - a_want;
            let f_got = if f_want > 0 {
                self.evict_file(f_want)
            } else {
                0
            };
            let f_ms = f_got as f64 * file_ms;
            let pool_before = self.zram_pool();
            let (a_got, cpu, flash) = if a_want > 0 {
                self.evict_anon(a_want, None, anon_ms)
            } else {
                (0, 0.0, 0.0)
            };
            if self.pol.def.kernel == KernelVariant::Pmr {
                used += self.pmr_discount(f_got + a_got, f_ms + cpu + flash);
            } else {
                used += f_ms;
                used += cpu + flash;
            }
            let pool_growth = self.zram_pool() - pool_before;
            let net = (f_got + a_got).saturating_sub(pool_growth);
            freed += net;
            if f_got + a_got == 0 {
                break;
            }
        }
        (freed, used)
    }

    /// Allocates up to `n` pages for a task with `t_ms` of time left;
    /// reclaims directly when the min watermark would be crossed. Returns
    /// pages obtained; `t_ms` is reduced by the time spent stalled.
    pub(crate) fn alloc(&mut self, n: u64, t_ms: &mut f64, stall_counts: bool) -> u64 {
        let min = self.min_pages();
        let free = self.free_pages();
        if free < self.low_pages() + n {
            self.kswapd_on = true;
        }
        if free >= min + n {
            self.alloc_counter += n;
            return n;
        }
        let mut got = free.saturating_sub(min).min(n);
        // Direct reclaim: the task's threads reclaim in parallel.
        while got < n && *t_ms > 1e-9 {
            let threads = self.dev.direct_reclaim_threads;
            let want = n - got;
            let (freed, used) = self.reclaim(want, *t_ms * threads);
            let wall = used / threads;
            *t_ms -= wall.min(*t_ms);
            if stall_counts {
                self.counters.direct_reclaims += freed.div_ceil(RECLAIM_BATCH_PAGES).max(1);
                self.counters.direct_reclaim_ms += wall;
                self.add_psi(wall, 0.0);
            }
            if freed == 0 {
                // Nothing reclaimable: the task is blocked until a kill.
                self.blocked = true;
                if stall_counts {
                    self.add_psi(*t_ms, *t_ms);
                }
                *t_ms = 0.0;
                break;
            }
            // Nothing is committed until the caller takes the pages.
            got = self.free_pages().saturating_sub(min).min(n);
        }
        self.alloc_counter += got;
        got
    }

    pub(crate) fn run_kswapd(&mut self, budget_ms: f64) {
        self.run_kshrinkd(budget_ms);
        if !self.kswapd_on {
            return;
        }
        let target = self.kswapd_target();
        let free = self.free_pages();
        if free >= target {
            self.kswapd_on = false;
            return;
        }
        let evicted = self.counters.evicted_file_pages + self.counters.evicted_anon_pages;
        let (freed, _) = self.reclaim(target - free, budget_ms * self.dev.kswapd_threads);
        self.counters.kswapd_steal_pages +=
            self.counters.evicted_file_pages + self.counters.evicted_anon_pages - evicted;
        if freed == 0 || self.free_pages() >= target {
            self.kswapd_on = false;
        }
    }

    // ------------------------------------------------------------------
    // PSI
    // ------------------------------------------------------------------

    pub(crate) fn roll_psi(&mut self) {
        let b = self.now_us / PSI_BUCKET_US;
        if b == self.psi_bucket {
            return;
        }
        let gap = if self.psi_last_bucket.is_some() {
            (b - self.psi_bucket).min(PSI_BUCKETS as u64)
        } else {
            0
        };
        for i in 1..=gap {
            let idx = ((self.psi_bucket + i) % PSI_BUCKETS as u64) as usize;
            self.psi_some[idx] = 0.0;
            self.psi_full[idx] = 0.0;
        }
        self.psi_bucket = b;
        self.psi_version += 1;
    }

    pub(crate) fn add_psi(&mut self, some_ms: f64, full_ms: f64) {
        self.roll_psi();
        self.psi_last_bucket = Some(self.psi_bucket);
        self.psi_version += 1;
        let idx = (self.psi_bucket % PSI_BUCKETS as u64) as usize;
        self.psi_some[idx] += some_ms;
        self.psi_full[idx] += full_ms;
        self.psi_some_total_us += (some_ms * 1000.0) as u64;
    }

    /// (some, full) stall share over the last `buckets` × 100 ms.
    pub(crate) fn psi(&self, buckets: usize) -> (f64, f64) {
        // No stall in the window: every bucket of it is zero (exactly the
        // sum below, without the walk).
        match self.psi_last_bucket {
            Some(last) if self.psi_bucket - last < buckets as u64 => {}
            _ => return (0.0, 0.0),
        }
        // The same buckets as at the last call for this window: the same sum.
        let slot = usize::from(buckets != PSI_BUCKETS);
        let mut memo = self.psi_memo.get();
        let (v, b, s, f) = memo[slot];
        if v == self.psi_version && b == buckets {
            return (s, f);
        }
        let mut s = 0.0;
        let mut f = 0.0;
        for i in 0..buckets as u64 {
            if i > self.psi_bucket {
                break;
            }
            let idx = ((self.psi_bucket - i) % PSI_BUCKETS as u64) as usize;
            s += self.psi_some[idx];
            f += self.psi_full[idx];
        }
        let span = buckets as f64 * PSI_BUCKET_US as f64 / 1000.0;
        let share = ((s / span).min(1.0), (f / span).min(1.0));
        memo[slot] = (self.psi_version, buckets, share.0, share.1);
        self.psi_memo.set(memo);
        share
    }

    // ------------------------------------------------------------------
    // lmkd and the OOM killer
    // ------------------------------------------------------------------

    /// oom_score_adj of every alive app, most recently used first, as
    /// Android 15's ActivityManager gives them (`crate::android`): the
    /// foreground (and launching) app 0; the previous app 700 for a minute
    /// after it left the foreground; the other cached apps 900 + their LRU
    /// rank. Under the simplified platform (`android-simple`, or a Linux device) the
    /// previous app keeps 700 however long (it left the foreground "0 ms ago").
    pub(crate) fn oom_adjs(&self) -> impl Iterator<Item = (usize, i32)> + '_ {
        let simple = !self.android15();
        // The previous app left the foreground when the foreground app
        // came to it.
        let left_ms = if simple {
            0
        } else {
            self.fg
                .or(self.launching)
                .map(|f| self.now_us.saturating_sub(self.st[f].last_used_us) / 1000)
                .unwrap_or(u64::MAX)
        };
        let am = &self.am_props;
        let mut rank = 0;
        self.lru
            .iter()
            .rev()
            .filter(|&&a| self.st[a].alive)
            .map(move |&a| {
                let fg = Some(a) == self.fg || Some(a) == self.launching;
                let adj = if fg {
                    android::FOREGROUND_APP_ADJ
                } else {
                    let r = rank;
                    rank += 1;
                    android::background_adj(r, left_ms, am)
                };
                (a, adj)
            })
    }

    /// Whether the platform's killer may act without an allocation
    /// blocking: lmkd polling or a PSI monitor about to fire (Android 15),
    /// or the simplified lmkd's pressure.
    pub(crate) fn lmkd_pressure(&self) -> bool {
        let (some, full) = self.psi(10);
        if !self.android15() {
            return (some >= LMKD_PSI_SOME && self.swap_low()) || full >= LMKD_PSI_FULL;
        }
        let p = &self.lmkd_props;
        self.lmkd.polling()
            || some * 1000.0 >= p.psi_partial_stall_ms as f64
            || full * 1000.0 >= p.psi_complete_stall_ms as f64
    }

    /// What lmkd reads at a wakeup (meminfo, vmstat, PSI), from the model.
    fn lmkd_sample(&self) -> android::Sample {
        let file = self.file_total;
        // mm/vmscan.c `inactive_is_low`: the file LRU keeps inactive ×
        // int_sqrt(10 × GiB) ≈ active (ratio 1 below 1 GiB).
        let gib = (file * PAGE_BYTES) >> 30;
        let ratio = if gib > 0 { (10 * gib).isqrt() } else { 1 };
        android::Sample {
            now_ms: self.now_us / 1000,
            free: self.free_pages(),
            wmark_min: self.min_pages(),
            wmark_low: self.low_pages(),
            wmark_high: self.dev.wmark_high_bytes / PAGE_BYTES,
            swap_total: self.zram_cap + self.swap_cap,
            swap_free: self.swap_room(),
            inactive_file: file / (1 + ratio),
            file_lru: file,
            workingset_refault_file: self.counters.refault_file_pages,
            pgscan_direct: self.counters.direct_reclaims,
            pgscan_kswapd: self.counters.kswapd_steal_pages,
            psi_full_avg10: self.psi(PSI_BUCKETS).1 * 100.0,
        }
    }

    /// The background apps as lmkd sees them, with the app of each.
    fn platform_procs(&self) -> (Vec<usize>, Vec<android::Proc>) {
        self.oom_adjs()
            .filter(|&(_, adj)| adj > android::FOREGROUND_APP_ADJ)
            .map(|(a, adj)| {
                let s = &self.st[a];
                let p = android::Proc {
                    adj,
                    last_used_ms: s.last_used_us / 1000,
                    rss: s.anon_res + s.sum[0] + s.other_file,
                };
                (a, p)
            })
            .unzip()
    }

    /// Kills app `a` for the platform (lmkd or ActivityManager) with no
    /// allocation blocked; returns whether it died.
    fn platform_kill(&mut self, a: usize, why: android::KillReason) -> bool {
        let id = ProcId {
            pid: self.st[a].pid,
            start_time: self.st[a].start_ms,
        };
        if self.kill(id, Reason::KillLruByAdj).is_err() {
            return false;
        }
        self.counters.kills_pressure += 1;
        self.counters.kills_by_reason[why.index()] += 1;
        true
    }

    /// Android 15's killers without a blocked allocation:
    /// ActivityManager's cached-process limit, then one lmkd wakeup if one
    /// is due (a PSI event, or a poll while polling).
    fn android_kill_check(&mut self) {
        // Fewer apps alive than the limit: nothing to trim (every step
        // asks, and 1024 is never reached on a phone's 60 apps).
        if self.st.iter().filter(|s| s.alive).count() > self.am_props.max_cached_processes {
            let (apps, procs) = self.platform_procs();
            for i in android::am_trim(&procs, &self.am_props) {
                self.platform_kill(apps[i], android::KillReason::AmCachedLimit);
            }
        }
        let now_ms = self.now_us / 1000;
        let (some, full) = self.psi(10);
        let props = self.lmkd_props.clone();
        let level = self
            .lmkd
            .psi_event(&props, now_ms, some * 1000.0, full * 1000.0);
        if !self.lmkd.due(level, now_ms) {
            return;
        }
        let sample = self.lmkd_sample();
        let order = self.lmkd.wakeup(&props, &sample, level);
        let Some(order) = order else {
            return;
        };
        let (apps, procs) = self.platform_procs();
        if let Some(v) = android::find_victim(&procs, order.min_score_adj) {
            if self.platform_kill(apps[v], order.reason) {
                self.lmkd.killed(&props, order, now_ms);
            }
        }
    }

    /// Whether the device's platform is Android 15 (lmkd's `mp_event_psi`,
    /// ActivityManager) under this policy: the phone presets, but for
    /// `android-simple`, which keeps the simplified model.
    pub(crate) fn android15(&self) -> bool {
        self.dev.platform == Platform::Android15 && self.pol.def.kernel != KernelVariant::SimpleLmkd
    }

    /// Android 15's CachedAppOptimizer: each app that has stayed cached
    /// (adj 900 or more) past the freezer's debounce is frozen, and its
    /// anonymous memory paged out to zram once per stay
    /// ([`android::compaction_pages`]). One thread of system_server does
    /// it, an app at a time, at the device's page-out cost per page (not
    /// the launching app's CPU); an app that leaves the cached range has
    /// its compaction cancelled (`cancelCompactionForProcess`,
    /// OOM_IMPROVEMENT), and a page-out stops where zram is full.
    ///
    /// The adj classes are read at most once per [`COMPACT_SCAN_US`] of
    /// simulated time (a cached app's freeze is then late by less than
    /// that, against a 10 s debounce), unless `scan` asks for it.
    pub(crate) fn cached_app_optimizer(&mut self, scan: bool) {
        let now = self.now_us;
        let ms_per_page = self.lru_anon_ms_per_page();
        let elapsed_ms = now.saturating_sub(self.compact_clock_us) as f64 / 1000.0;
        self.compact_clock_us = now;
        let adjs: Vec<(usize, i32)> = if scan || now >= self.compact_scan_us {
            self.compact_scan_us = now + COMPACT_SCAN_US;
            self.oom_adjs().collect()
        } else {
            Vec::new()
        };
        for (a, adj) in adjs {
            if adj < android::CACHED_APP_MIN_ADJ {
                if self.st[a].cached_since_us.is_some() || self.st[a].compacted {
                    self.st[a].cached_since_us = None;
                    self.st[a].compacted = false;
                }
                continue;
            }
            let since = match self.st[a].cached_since_us {
                Some(t) => t,
                None => {
                    self.mark_touched(a);
                    self.st[a].cached_since_us = Some(now);
                    now
                }
            };
            let cached_ms = (now - since) / 1000;
            if self.st[a].compacted || cached_ms < self.am_props.freezer_debounce_ms {
                continue;
            }
            // Frozen: compacted now or never in this stay.
            self.st[a].compacted = true;
            let n = android::compaction_pages(
                cached_ms,
                self.st[a].anon_res,
                self.swap_room(),
                self.zram_cap + self.swap_cap,
                &self.am_props,
            );
            if n > 0 {
                self.compacting.push_back((a, n));
            }
        }
        // The thread's work since it last ran, oldest request first.
        let mut budget = (elapsed_ms / ms_per_page.max(1e-9)) as u64;
        while let Some(&(a, left)) = self.compacting.front() {
            let s = &self.st[a];
            if !s.alive || s.cached_since_us.is_none() || self.swap_room() == 0 {
                self.compacting.pop_front();
                continue;
            }
            if budget == 0 {
                break;
            }
            let want = left.min(budget).min(s.anon_res);
            let (got, _, _) = self.evict_anon(want, Some(a), ms_per_page);
            self.counters.compacted_pages += got;
            budget -= want;
            if got < want || want == left || self.st[a].anon_res == 0 {
                self.compacting.pop_front();
            } else if let Some(front) = self.compacting.front_mut() {
                front.1 = left - want;
            }
        }
    }

    /// When CachedAppOptimizer next has work, µs (Android 15 only): the
    /// end of the page-out in progress, or the next cached app's freeze.
    /// A quiet stretch may not be skipped past it.
    pub(crate) fn next_compaction_us(&self) -> Option<u64> {
        if !self.android15() || !self.am_props.use_compaction {
            return None;
        }
        if let Some(&(_, left)) = self.compacting.front() {
            let ms = left as f64 * self.lru_anon_ms_per_page();
            return Some(self.now_us + (ms * 1000.0).ceil().max(1.0) as u64);
        }
        self.st
            .iter()
            .filter(|s| s.alive && !s.compacted)
            .filter_map(|s| s.cached_since_us)
            .map(|t| t + self.am_props.freezer_debounce_ms * 1000)
            .min()
    }

    /// The platform's killer: lmkd when the policy leaves killing to it,
    /// and the kernel's OOM killer when an allocation could not be met.
    pub(crate) fn kernel_kill_check(&mut self) {
        let forced = std::mem::take(&mut self.blocked) && self.last_kill_us != Some(self.now_us);
        let lmkd = self.pol.def.killer == KillerStrategy::Kernel;
        let simple = !self.android15();
        if !simple {
            self.cached_app_optimizer(false);
        }
        let reason = if lmkd {
            if !forced && !simple {
                self.android_kill_check();
                return;
            }
            let settled = self
                .last_kill_us
                .is_none_or(|t| self.now_us.saturating_sub(t) >= LMKD_KILL_TIMEOUT_US);
            if !(forced || settled && self.lmkd_pressure()) {
                return;
            }
            Reason::KillLruByAdj
        } else if forced {
            Reason::KillKernelOom
        } else {
            return;
        };
        let cands: Vec<(usize, Candidate)> = self
            .oom_adjs()
            .map(|(a, adj)| {
                let s = &self.st[a];
                let fg = Some(a) == self.fg || Some(a) == self.launching;
                let c = Candidate {
                    pid: s.pid,
                    app: self.models[a].spec.name.clone(),
                    current_bytes: (s.anon_total() + s.sum[0] + s.other_file) * PAGE_BYTES,
                    relaunch_bytes: Some(self.models[a].profile.relaunch_footprint_bytes),
                    last_used_ms: s.last_used_us / 1000,
                    foreground: fg,
                    protected: false,
                    is_self: false,
                    oom_score_adj: adj,
                    anon_bytes: None,
                    resident_anon_bytes: None,
                    reuse: None,
                    relaunch_cost_ms: None,
                };
                (a, c)
            })
            .collect();
        let list: Vec<Candidate> = cands.iter().map(|(_, c)| c.clone()).collect();
        let d = killer::choose_victim_lru(&self.cfg.killer, &list);
        if let Some(v) = d.victim {
            let a = cands[v].0;
            let id = ProcId {
                pid: self.st[a].pid,
                start_time: self.st[a].start_ms,
            };
            if reason == Reason::KillKernelOom {
                self.counters.oom_kills += 1;
            }
            if self.kill(id, reason).is_ok() {
                if forced {
                    self.counters.kills_blocked += 1;
                } else {
                    self.counters.kills_pressure += 1;
                }
            }
        }
    }

    pub(crate) fn kill_app(&mut self, a: usize) {
        self.ariadne_drop(a);
        let s = &mut self.st[a];
        self.anon_total -= s.anon_res;
        self.zram_stored -= s.anon_zram;
        self.swap_used -= s.anon_swap;
        s.anon_res = 0;
        s.unused_anon = 0;
        s.anon_zram = 0;
        s.anon_swap = 0;
        s.alive = false;
        s.killed = true;
        self.procs_ids_changed = true;
        s.grow_target = 0;
        s.grown = 0;
        self.counters.kills += 1;
        self.last_kill_us = Some(self.now_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{catalogue, model};
    use crate::engine::SimConfig;
    use crate::policy::Policy;

    /// Two background apps with page cache and anonymous memory; `reclaim`
    /// of 64 MiB. Returns (file pages evicted, anonymous pages swapped).
    fn reclaim_split(cache_first: bool) -> (u64, u64) {
        let mut dev = crate::device::device("pixel8-6gb").unwrap();
        dev.reclaim_cache_first = cache_first;
        let cfg = SimConfig::with_seed(1);
        let models: Vec<_> = catalogue().iter().take(2).map(model).collect();
        let pol = Policy::by_name("android").unwrap();
        let mut sim = Sim::new(&dev, pol, &cfg, &models, &[true, true]);
        for a in 0..2 {
            sim.mark_touched(a);
            sim.st[a].alive = true;
            sim.add_file(a, Holder::Own, 0, 1, 25_600); // 100 MiB cached
            sim.st[a].anon_res += 51_200; // 200 MiB anonymous
            sim.anon_total += 51_200;
        }
        sim.lru = vec![0, 1];
        let (f0, a0) = (
            sim.counters.evicted_file_pages,
            sim.counters.evicted_anon_pages,
        );
        sim.reclaim(16_384, 1e9);
        sim.check_accounting().unwrap();
        (
            sim.counters.evicted_file_pages - f0,
            sim.counters.evicted_anon_pages - a0,
        )
    }

    #[test]
    fn cache_first_reclaim_drops_page_cache_before_anonymous_memory() {
        // Proportional (Android's swappiness 100): both kinds go.
        let (file, anon) = reclaim_split(false);
        assert!(file > 0 && anon > 0, "file {file} anon {anon}");
        // Cache first (the testbed's kernel): 64 MiB of the 200 MiB of
        // page cache, no anonymous page.
        let (file, anon) = reclaim_split(true);
        assert_eq!(anon, 0);
        assert!(file >= 16_384, "file {file}");
    }

    #[test]
    fn integer_ceil_and_round_match_the_float_library() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            0.49999999999999994,
            1.5,
            2.5,
            -0.5,
            -1.5,
            1e-300,
            31.000000000000004,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            1.8446744073709552e19,
            1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
        ];
        // Random bit patterns and random page-scale values.
        let mut r = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            xs.push(f64::from_bits(r));
            xs.push((r >> 11) as f64 / (1u64 << 53) as f64 * 1e7);
        }
        for x in xs {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "ceil {x:e}");
            assert_eq!(round_u64(x), x.round() as u64, "round {x:e}");
        }
    }

    #[test]
    fn take_cells_removes_exactly_what_it_reports() {
        let mut c: Cells = [[0; 2]; CHUNKS];
        for (k, cell) in c.iter_mut().enumerate() {
            *cell = [k as u64 * 3 + 1, k as u64 * 7];
        }
        let total = cells_sum(&c);
        for n in [0, 1, 5, 97, total - 1, total, total + 10] {
            let mut d = c;
            let got = take_cells(&mut d, n);
            assert_eq!(got, n.min(total));
            assert_eq!(cells_sum(&d), total - got);
            assert!(d
                .iter()
                .zip(c.iter())
                .all(|(x, y)| x[0] <= y[0] && x[1] <= y[1]));
        }
    }
}
