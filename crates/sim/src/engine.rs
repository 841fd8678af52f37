//! The simulated phone: kernel memory model, storage, launch model and the
//! policies' control loops.
//!
//! Granularity (chosen for speed, SPEC §6): memory is counted in pages but
//! held in per-app *extents* — for each app, its launch files in
//! [`CHUNKS`] × {small, large} cells for each holder (the app itself, the
//! before-launch standby set, the launch-time prefetch), its other file
//! cache, and its anonymous memory (resident, in zram, on flash swap). The
//! LRU is ordered at app granularity by last use. Time advances in 5 ms
//! steps during launches and in coarse steps (≤ 10 s) while idle; idle
//! periods where nothing changes are skipped in one jump.
//!
//! Kernel model: free memory = DRAM − reserve − anon − page cache − zram
//! pool. kswapd wakes below the low watermark and reclaims to the high one
//! (on its own core); an allocation that would cross the min watermark
//! reclaims synchronously (direct reclaim, counted per 32-page batch like
//! `allocstall`). Stock reclaim scans anon and file in proportion to the
//! list sizes (swappiness 100, Android's init.rc value); anonymous pages go to zram, then to
//! flash swap; file pages are dropped. The killer is lmkd-like (PSI and
//! swap triggers, adj then LRU) or AppFlow's CPK.

// Cells are parallel [chunk][bucket] arrays of several holders; index loops read clearer.
#![allow(clippy::needless_range_loop)]

use crate::catalog::{AppModel, Cells, CHUNKS, LARGE, SMALL};
use crate::device::Device;
use crate::policy::{Killer, Policy, Preloader, Reclaimer};
use crate::rng;
use appflow_core::killer::{self, Candidate, KillerConfig, PressureState};
use appflow_core::mechanism::{
    Hold, KillMechanism, KillOutcome, MechError, PreloadMechanism, ReclaimMechanism,
};
use appflow_core::preload::{self, CutoffPlan, FileSpan, PreloadConfig};
use appflow_core::profile::LaunchProfile;
use appflow_core::reason::Reason;
use appflow_core::reclaim::{ReclaimConfig, ReclaimController, ReclaimMode, ReclaimSample};
use appflow_core::{KIB, MIB, PAGE_BYTES};
use std::collections::BTreeMap;

/// Launch step, µs.
pub const STEP_US: u64 = 5_000;
const STEP_MS: f64 = STEP_US as f64 / 1000.0;
/// Longest idle step, µs.
pub const IDLE_STEP_US: u64 = 10_000_000;
/// Background footprints grow 30-50 % over baseline (seed 000 §4.3) over this long (assumption).
pub const GROWTH_US: u64 = 30 * 60 * 1_000_000;
/// SWAP_CLUSTER_MAX: pages per direct-reclaim batch (one `allocstall`).
pub const RECLAIM_BATCH_PAGES: u64 = 32;
/// Paralfetch merges launch reads into requests of this size (seed 000 §6.1: "merge small blocks into larger ones").
pub const PARALFETCH_READ_BYTES: u64 = 512 * KIB;
/// Share of an app's memory touched on a warm/hot relaunch (assumption).
pub const RELAUNCH_WS_FRACTION: f64 = 0.5;
/// lmkd: PSI "some" over 1 s that counts as medium pressure (ro.lmk.psi_partial_stall_ms = 70).
pub const LMKD_PSI_SOME: f64 = 0.07;
/// lmkd: PSI "full" over 1 s that counts as critical (ro.lmk.psi_complete_stall_ms = 700).
pub const LMKD_PSI_FULL: f64 = 0.70;
/// lmkd: medium pressure kills only when free swap is below this share (ro.lmk.swap_free_low_percentage = 10).
pub const LMKD_SWAP_FREE_LOW: f64 = 0.10;
/// lmkd: wait for a victim's memory before the next kill (ro.lmk.kill_timeout_ms = 100).
pub const LMKD_KILL_TIMEOUT_US: u64 = 100_000;
/// Acclaim: kswapd reclaims to this multiple of the high watermark (larger batches, seed 000 §6.1).
pub const ACCLAIM_BATCH_SCALE: u64 = 3;
const PSI_BUCKET_US: u64 = 100_000;
const PSI_BUCKETS: usize = 100;

/// Simulation parameters (the core's configs, at their defaults unless set).
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Run seed.
    pub seed: u64,
    /// Selective File Preloader parameters (M_p etc.).
    pub preload: PreloadConfig,
    /// Adaptive Memory Reclaimer parameters.
    pub reclaim: ReclaimConfig,
    /// Context-Aware Process Killer parameters.
    pub killer: KillerConfig,
}

impl SimConfig {
    /// Defaults of the core with a seed.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            preload: PreloadConfig::default(),
            reclaim: ReclaimConfig::default(),
            killer: KillerConfig::default(),
        }
    }
}

/// How an app came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchKind {
    /// No process alive.
    Cold,
    /// Process alive, much of its memory gone.
    Warm,
    /// Process and pages resident.
    Hot,
}

/// One measured launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchRecord {
    /// App index in the model list.
    pub app: usize,
    /// Cold, warm or hot.
    pub kind: LaunchKind,
    /// Cold launch of an app that had been running and was killed.
    pub relaunch_after_kill: bool,
    /// Launch latency, ms.
    pub latency_ms: f64,
    /// When it started, µs of simulated time.
    pub at_us: u64,
}

/// Counters over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Direct reclaim batches (allocstall-like).
    pub direct_reclaims: u64,
    /// Processes killed.
    pub kills: u64,
    /// File pages evicted.
    pub evicted_file_pages: u64,
    /// Anonymous pages swapped out.
    pub evicted_anon_pages: u64,
    /// Evicted file pages read again.
    pub refault_file_pages: u64,
    /// Swapped pages faulted back.
    pub refault_anon_pages: u64,
    /// Peak pages of the before-launch standby set (bounded by M_p).
    pub preload_peak_pages: u64,
    /// Peak pages of a launch-time stream held for the launching app.
    pub stream_peak_pages: u64,
    /// Pages read by the preloader / prefetcher.
    pub preload_read_pages: u64,
    /// Pages read by the apps themselves.
    pub app_read_pages: u64,
    /// AMR mode switches.
    pub amr_switches: u64,
    /// Time spent in direct reclaim by launching apps, ms.
    pub direct_reclaim_ms: f64,
    /// Launches cut off by the safety limit (should stay 0).
    pub stuck_launches: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Own,
    Held,
    Stream,
}

#[derive(Debug, Clone, Default)]
struct AppState {
    alive: bool,
    ran_before: bool,
    killed: bool,
    pid: u32,
    launches: u64,
    last_used_us: u64,
    own: Cells,
    held: Cells,
    stream: Cells,
    /// Page sums of own, held, stream.
    sum: [u64; 3],
    other_file: u64,
    anon_res: u64,
    anon_zram: u64,
    anon_swap: u64,
    grow_target: u64,
    grown: u64,
    grow_start_us: u64,
    evicted_outstanding: u64,
}

impl AppState {
    fn cells_mut(&mut self, h: Holder) -> &mut Cells {
        match h {
            Holder::Own => &mut self.own,
            Holder::Held => &mut self.held,
            Holder::Stream => &mut self.stream,
        }
    }
    fn cached(&self, k: usize, b: usize) -> u64 {
        self.own[k][b] + self.held[k][b] + self.stream[k][b]
    }
    fn anon_total(&self) -> u64 {
        self.anon_res + self.anon_zram + self.anon_swap
    }
    fn fix_sums(&mut self) {
        self.sum = [
            cells_sum(&self.own),
            cells_sum(&self.held),
            cells_sum(&self.stream),
        ];
    }
}

fn cells_sum(c: &Cells) -> u64 {
    c.iter().map(|x| x[0] + x[1]).sum()
}

/// Removes up to `n` pages from cells, proportionally; returns pages removed.
fn take_cells(c: &mut Cells, n: u64) -> u64 {
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
        for v in cell.iter_mut() {
            let t = (*v as u128 * n as u128 / total as u128) as u64;
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

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Read chunk `k` (a share `frac` of it); `left` is what remains to
    /// read of each bucket since the phase began (set on first visit), so
    /// pages evicted after use are not read twice within the phase.
    Read {
        k: usize,
        frac: f64,
        left: Option<[u64; 2]>,
    },
    Cpu {
        ms: f64,
    },
    Alloc {
        pages: u64,
    },
    SwapIn {
        zram: u64,
        flash: u64,
    },
}

struct Launch {
    app: usize,
    phases: Vec<Phase>,
    pos: usize,
    /// Prefetch cursor over cells (chunk*2 + bucket) for Paralfetch.
    pf_cell: usize,
    /// SFP stream queue: (chunk, bucket, pages), and cursor.
    stream: Vec<(usize, usize, u64)>,
    stream_pos: usize,
}

struct Sfp {
    plan: CutoffPlan,
    /// Cutoff per app index (apps not installed: none).
    cutoff: Vec<Option<u64>>,
    /// Standby targets per app, memoised by the active (foreground) app.
    targets: BTreeMap<Option<usize>, Vec<Cells>>,
    next_touch_us: u64,
}

/// The simulated phone running one policy.
pub struct Sim<'a> {
    dev: &'a Device,
    pol: Policy,
    cfg: &'a SimConfig,
    models: &'a [AppModel],
    st: Vec<AppState>,
    installed: Vec<bool>,
    now_us: u64,
    fg: Option<usize>,
    launching: Option<usize>,
    lru: Vec<usize>,
    // memory totals, pages
    dram_pages: u64,
    reserved_pages: u64,
    anon_total: u64,
    file_total: u64,
    zram_stored: u64,
    swap_used: u64,
    zram_cap: u64,
    swap_cap: u64,
    // kernel
    kswapd_on: bool,
    mode: ReclaimMode,
    ctl: ReclaimController,
    next_tick_us: u64,
    alloc_in_tick: u64,
    rebalance_budget_ms: f64,
    blocked: bool,
    last_kill_us: Option<u64>,
    psi_some: [f64; PSI_BUCKETS],
    psi_full: [f64; PSI_BUCKETS],
    psi_bucket: u64,
    sfp: Option<Sfp>,
    next_pid: u32,
    name_idx: BTreeMap<String, usize>,
    /// Counters of the run.
    pub counters: Counters,
    /// Kill log: (time µs, app, reason).
    pub kill_log: Vec<(u64, usize, Reason)>,
}

impl<'a> Sim<'a> {
    /// A fresh device with nothing running. `installed` marks the apps the
    /// workload uses (the preloader plans over their profiles).
    pub fn new(
        dev: &'a Device,
        pol: Policy,
        cfg: &'a SimConfig,
        models: &'a [AppModel],
        installed: &[bool],
    ) -> Self {
        let n = models.len();
        let mut s = Sim {
            dev,
            pol,
            cfg,
            models,
            st: vec![AppState::default(); n],
            installed: installed.to_vec(),
            now_us: 0,
            fg: None,
            launching: None,
            lru: (0..n).collect(),
            dram_pages: dev.dram_bytes / PAGE_BYTES,
            reserved_pages: dev.reserved_bytes / PAGE_BYTES,
            anon_total: 0,
            file_total: 0,
            zram_stored: 0,
            swap_used: 0,
            zram_cap: dev.zram_disksize_bytes / PAGE_BYTES,
            swap_cap: dev.swap_bytes / PAGE_BYTES,
            kswapd_on: false,
            mode: ReclaimMode::Normal,
            ctl: ReclaimController::new(),
            next_tick_us: 0,
            alloc_in_tick: 0,
            rebalance_budget_ms: 0.0,
            blocked: false,
            last_kill_us: None,
            psi_some: [0.0; PSI_BUCKETS],
            psi_full: [0.0; PSI_BUCKETS],
            psi_bucket: 0,
            sfp: None,
            next_pid: 1000,
            name_idx: models
                .iter()
                .enumerate()
                .map(|(i, m)| (m.spec.name.clone(), i))
                .collect(),
            counters: Counters::default(),
            kill_log: Vec::new(),
        };
        if pol.preloader == Preloader::Sfp {
            s.plan_sfp();
        }
        s
    }

    // ------------------------------------------------------------------
    // Accounting
    // ------------------------------------------------------------------

    /// Current simulated time, µs.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// zram's compressed pool where it takes DRAM (0 when the device's pool
    /// lies outside the apps' memory, like the testbed's uncharged zram).
    fn zram_pool(&self) -> u64 {
        if !self.dev.zram_pool_in_dram {
            return 0;
        }
        (self.zram_stored as f64 / self.dev.zram_ratio).ceil() as u64
    }

    /// Free pages.
    pub fn free_pages(&self) -> u64 {
        let used = self.reserved_pages + self.anon_total + self.file_total + self.zram_pool();
        self.dram_pages.saturating_sub(used)
    }

    /// M_aval as the policies see it: free memory plus page cache that
    /// reclaim may drop (like MemAvailable; the same value the daemon reads).
    pub fn avail_pages(&self) -> u64 {
        self.free_pages() + self.reclaimable_file()
    }

    fn min_pages(&self) -> u64 {
        self.dev.wmark_min_bytes / PAGE_BYTES
    }

    /// Checks that per-app state adds up to the totals and to DRAM.
    /// Returns a description of the first mismatch.
    pub fn check_accounting(&self) -> Result<(), String> {
        let mut anon = 0;
        let mut file = 0;
        let mut zram = 0;
        let mut swap = 0;
        for (i, s) in self.st.iter().enumerate() {
            if !s.alive && s.anon_total() > 0 {
                return Err(format!("dead app {i} holds anonymous memory"));
            }
            for k in 0..CHUNKS {
                for b in 0..2 {
                    if s.cached(k, b) > self.models[i].chunk_pages[k][b] {
                        return Err(format!("app {i} chunk {k}/{b} caches more than its files"));
                    }
                }
            }
            anon += s.anon_res;
            zram += s.anon_zram;
            swap += s.anon_swap;
            let sums = [cells_sum(&s.own), cells_sum(&s.held), cells_sum(&s.stream)];
            if sums != s.sum {
                return Err(format!(
                    "app {i} holder sums drift: {sums:?} vs {:?}",
                    s.sum
                ));
            }
            file += sums.iter().sum::<u64>() + s.other_file;
        }
        if anon != self.anon_total || file != self.file_total {
            return Err(format!(
                "totals drift: anon {anon} vs {}, file {file} vs {}",
                self.anon_total, self.file_total
            ));
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

    /// Pages held by the preloader before launch (the standby set).
    pub fn standby_pages(&self) -> u64 {
        self.st.iter().map(|s| s.sum[Holder::Held as usize]).sum()
    }

    /// Pages held by the preloader: standby set + the launch stream of the launching app.
    pub fn preload_held_pages(&self) -> u64 {
        let stream = self
            .launching
            .map(|a| self.st[a].sum[Holder::Stream as usize])
            .unwrap_or(0);
        self.standby_pages() + stream
    }

    fn note_preload_peak(&mut self) {
        let standby = self.standby_pages();
        self.counters.preload_peak_pages = self.counters.preload_peak_pages.max(standby);
        if let Some(a) = self.launching {
            let st = self.st[a].sum[Holder::Stream as usize];
            self.counters.stream_peak_pages = self.counters.stream_peak_pages.max(st);
        }
    }

    /// The foreground app, if any.
    pub fn foreground(&self) -> Option<usize> {
        self.fg
    }

    /// Whether an app is alive.
    pub fn alive(&self, app: usize) -> bool {
        self.st[app].alive
    }

    /// Background apps alive (not the foreground one).
    pub fn alive_background(&self) -> u64 {
        self.st
            .iter()
            .enumerate()
            .filter(|(i, s)| s.alive && Some(*i) != self.fg)
            .count() as u64
    }

    /// The preloader's plan, when the policy has SFP.
    pub fn sfp_plan(&self) -> Option<&CutoffPlan> {
        self.sfp.as_ref().map(|s| &s.plan)
    }

    fn add_file(&mut self, a: usize, h: Holder, k: usize, b: usize, n: u64) {
        self.st[a].cells_mut(h)[k][b] += n;
        self.st[a].sum[h as usize] += n;
        self.file_total += n;
        self.alloc_in_tick += n;
        // Re-reading evicted pages is a refault.
        let r = n.min(self.st[a].evicted_outstanding);
        self.st[a].evicted_outstanding -= r;
        self.counters.refault_file_pages += r;
    }

    fn touch_lru(&mut self, a: usize) {
        self.st[a].last_used_us = self.now_us;
        if let Some(p) = self.lru.iter().position(|&x| x == a) {
            self.lru.remove(p);
        }
        self.lru.push(a);
    }

    // ------------------------------------------------------------------
    // Reclaim
    // ------------------------------------------------------------------

    fn file_protected(&self, a: usize, h: Holder) -> bool {
        if self.pol.reclaimer != Reclaimer::Amr {
            return false;
        }
        let launching = self.launching == Some(a);
        match h {
            // Preload-aware retention (§4.2.2): launch-time preloads are
            // skipped by reclaim until the launch completes.
            Holder::Stream => launching,
            // Efficiency-first never takes preloaded or launch-in-progress files (§4.2.1).
            Holder::Held => self.mode == ReclaimMode::EfficiencyFirst,
            // Pages the app has read itself are ordinary page cache.
            Holder::Own => false,
        }
    }

    fn reclaimable_file(&self) -> u64 {
        if self.pol.reclaimer != Reclaimer::Amr {
            return self.file_total;
        }
        let mut protected = 0;
        if self.mode == ReclaimMode::EfficiencyFirst {
            protected += self
                .st
                .iter()
                .map(|s| s.sum[Holder::Held as usize])
                .sum::<u64>();
        }
        if let Some(a) = self.launching {
            let s = &self.st[a];
            if self.file_protected(a, Holder::Stream) {
                protected += s.sum[Holder::Stream as usize];
            }
        }
        self.file_total.saturating_sub(protected)
    }

    fn swap_room(&self) -> u64 {
        (self.zram_cap - self.zram_stored) + (self.swap_cap - self.swap_used)
    }

    fn reclaimable_anon(&self) -> u64 {
        if self.swap_room() == 0 {
            return 0;
        }
        let fg = self.fg.map(|a| self.st[a].anon_res).unwrap_or(0);
        (self.anon_total - fg).min(self.swap_room())
    }

    /// Evicts up to `n` file pages in LRU order; returns pages evicted.
    fn evict_file(&mut self, n: u64) -> u64 {
        let mut got = 0;
        let order: Vec<usize> = self.lru.clone();
        let fg = self.fg;
        // 1. background apps, oldest first: their own pages and other cache.
        'passes: for pass in 0..4 {
            for &a in &order {
                if got >= n {
                    break 'passes;
                }
                let is_fg = Some(a) == fg || Some(a) == self.launching;
                let holders: &[Holder] = match pass {
                    0 if !is_fg => &[Holder::Own],
                    1 => &[Holder::Held],
                    2 => &[Holder::Stream],
                    3 if is_fg => &[Holder::Own],
                    _ => &[],
                };
                for &h in holders {
                    if self.st[a].sum[h as usize] == 0 || self.file_protected(a, h) {
                        continue;
                    }
                    let t = take_cells(self.st[a].cells_mut(h), n - got);
                    self.st[a].sum[h as usize] -= t;
                    self.st[a].evicted_outstanding += t;
                    got += t;
                }
                if (pass == 0 && !is_fg) || (pass == 3 && is_fg) {
                    let t = self.st[a].other_file.min(n - got);
                    self.st[a].other_file -= t;
                    got += t;
                }
            }
        }
        self.file_total -= got;
        self.counters.evicted_file_pages += got;
        got
    }

    /// Swaps out up to `n` anonymous pages of background apps (oldest
    /// first), or of `only` when given. Returns (pages, cpu ms, flash ms).
    fn evict_anon(&mut self, n: u64, only: Option<usize>) -> (u64, f64, f64) {
        let mut got = 0;
        let (mut cpu, mut flash) = (0.0, 0.0);
        let order: Vec<usize> = match only {
            Some(a) => vec![a],
            None => self.lru.clone(),
        };
        for a in order {
            if got >= n {
                break;
            }
            if only.is_none() && (Some(a) == self.fg || Some(a) == self.launching) {
                continue;
            }
            let mut t = self.st[a].anon_res.min(n - got);
            let z = t.min(self.zram_cap - self.zram_stored);
            let f = (t - z).min(self.swap_cap - self.swap_used);
            t = z + f;
            self.st[a].anon_res -= t;
            self.st[a].anon_zram += z;
            self.st[a].anon_swap += f;
            self.zram_stored += z;
            self.swap_used += f;
            cpu += z as f64 * self.dev.anon_zram_ms_per_mib / 256.0;
            flash += f as f64 * PAGE_BYTES as f64 / self.dev.swap_write_bytes_per_sec * 1000.0;
            got += t;
        }
        self.anon_total -= got;
        self.counters.evicted_anon_pages += got;
        (got, cpu, flash)
    }

    /// Reclaims until `want` pages are free (net) or `budget_ms` of work is
    /// spent. Returns (net pages freed, ms used).
    fn reclaim(&mut self, want: u64, budget_ms: f64) -> (u64, f64) {
        let mut freed = 0u64;
        let mut used = 0.0;
        let file_ms = self.dev.file_drop_ms_per_mib / 256.0;
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
                // File only; anon only when file is nearly gone (the
                // kernel's "file is tiny" rule in get_scan_count scans anon
                // at swappiness 0 once file + free is below the high watermark).
                if file_avail + self.free_pages() < high || file_avail == 0 {
                    1.0
                } else {
                    0.0
                }
            } else {
                anon_avail as f64 / (anon_avail + file_avail) as f64
            };
            let zr = if self.dev.zram_pool_in_dram {
                1.0 - 1.0 / self.dev.zram_ratio
            } else {
                1.0
            };
            let net_per_scan = anon_frac * zr + (1.0 - anon_frac);
            let ms_per_scan =
                anon_frac * self.dev.anon_zram_ms_per_mib / 256.0 + (1.0 - anon_frac) * file_ms;
            let need = (want - freed) as f64 / net_per_scan.max(1e-9);
            let afford = (budget_ms - used) / ms_per_scan.max(1e-9);
            let scan = need.min(afford).ceil().max(RECLAIM_BATCH_PAGES as f64) as u64;
            let a_want = (scan as f64 * anon_frac).round() as u64;
            let f_want = scan - a_want;
            let f_got = if f_want > 0 {
                self.evict_file(f_want)
            } else {
                0
            };
            used += f_got as f64 * file_ms;
            let pool_before = self.zram_pool();
            let (a_got, cpu, flash) = if a_want > 0 {
                self.evict_anon(a_want, None)
            } else {
                (0, 0.0, 0.0)
            };
            used += cpu + flash;
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
    fn alloc(&mut self, n: u64, t_ms: &mut f64, stall_counts: bool) -> u64 {
        let min = self.min_pages();
        let free = self.free_pages();
        if free < self.dev.wmark_low_bytes / PAGE_BYTES + n {
            self.kswapd_on = true;
        }
        if free >= min + n {
            self.alloc_in_tick += n;
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
        self.alloc_in_tick += got;
        got
    }

    fn kswapd_target(&self) -> u64 {
        let high = self.dev.wmark_high_bytes / PAGE_BYTES;
        match self.pol.reclaimer {
            Reclaimer::Acclaim => high * ACCLAIM_BATCH_SCALE,
            _ => high,
        }
    }

    fn run_kswapd(&mut self, budget_ms: f64) {
        if !self.kswapd_on {
            return;
        }
        let target = self.kswapd_target();
        let free = self.free_pages();
        if free >= target {
            self.kswapd_on = false;
            return;
        }
        let (freed, _) = self.reclaim(target - free, budget_ms);
        if freed == 0 || self.free_pages() >= target {
            self.kswapd_on = false;
        }
    }

    // ------------------------------------------------------------------
    // PSI
    // ------------------------------------------------------------------

    fn roll_psi(&mut self) {
        let b = self.now_us / PSI_BUCKET_US;
        if b == self.psi_bucket {
            return;
        }
        let gap = (b - self.psi_bucket).min(PSI_BUCKETS as u64);
        for i in 1..=gap {
            let idx = ((self.psi_bucket + i) % PSI_BUCKETS as u64) as usize;
            self.psi_some[idx] = 0.0;
            self.psi_full[idx] = 0.0;
        }
        self.psi_bucket = b;
    }

    fn add_psi(&mut self, some_ms: f64, full_ms: f64) {
        self.roll_psi();
        let idx = (self.psi_bucket % PSI_BUCKETS as u64) as usize;
        self.psi_some[idx] += some_ms;
        self.psi_full[idx] += full_ms;
    }

    /// (some, full) stall share over the last `buckets` × 100 ms.
    fn psi(&self, buckets: usize) -> (f64, f64) {
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
        ((s / span).min(1.0), (f / span).min(1.0))
    }

    // ------------------------------------------------------------------
    // Killer
    // ------------------------------------------------------------------

    fn candidates(&self) -> (Vec<Candidate>, Vec<usize>) {
        let mut cands = Vec::new();
        let mut idx = Vec::new();
        // adj: previous app 700, other cached apps 900 + rank from most recent.
        let mut rank = 0;
        for &a in self.lru.iter().rev() {
            let s = &self.st[a];
            if !s.alive {
                continue;
            }
            let fg = Some(a) == self.fg || Some(a) == self.launching;
            let adj = if fg {
                0
            } else if rank == 0 {
                rank += 1;
                700
            } else {
                rank += 1;
                900 + rank.min(99)
            };
            let own_file = s.sum[0] + s.other_file;
            cands.push(Candidate {
                pid: s.pid,
                app: self.models[a].spec.name.clone(),
                current_bytes: (s.anon_total() + own_file) * PAGE_BYTES,
                relaunch_bytes: Some(self.models[a].profile.relaunch_footprint_bytes),
                last_used_ms: s.last_used_us / 1000,
                foreground: fg,
                protected: false,
                is_self: false,
                oom_score_adj: adj,
            });
            idx.push(a);
        }
        (cands, idx)
    }

    fn kill_check(&mut self) {
        let settle = match self.pol.killer {
            Killer::Lmkd => LMKD_KILL_TIMEOUT_US,
            Killer::Cpk => self.cfg.killer.settle_ms * 1000,
        };
        let settled = match self.last_kill_us {
            None => true,
            Some(t) => self.now_us.saturating_sub(t) >= settle,
        };
        let forced = std::mem::take(&mut self.blocked);
        let trigger = forced && self.last_kill_us != Some(self.now_us)
            || settled
                && match self.pol.killer {
                    Killer::Lmkd => {
                        let (some, full) = self.psi(10);
                        let cap = (self.zram_cap + self.swap_cap).max(1);
                        let swap_free = self.swap_room() as f64 / cap as f64;
                        (some >= LMKD_PSI_SOME && swap_free < LMKD_SWAP_FREE_LOW)
                            || full >= LMKD_PSI_FULL
                    }
                    Killer::Cpk => {
                        let (some10, _) = self.psi(PSI_BUCKETS);
                        let p = PressureState {
                            now_ms: self.now_us / 1000,
                            avail_bytes: self.avail_pages() * PAGE_BYTES,
                            total_bytes: self.dev.dram_bytes,
                            anon_bytes: self.anon_total * PAGE_BYTES,
                            file_bytes: self.file_total * PAGE_BYTES,
                            swap_total_bytes: (self.zram_cap + self.swap_cap) * PAGE_BYTES,
                            swap_free_bytes: self.swap_room() * PAGE_BYTES,
                            psi_some_avg10: some10 * 100.0,
                            last_kill_ms: self.last_kill_us.map(|t| t / 1000),
                        };
                        killer::should_kill(&self.cfg.killer, &p).is_ok()
                    }
                };
        if !trigger {
            return;
        }
        let (cands, idx) = self.candidates();
        let d = match self.pol.killer {
            Killer::Lmkd => killer::choose_victim_lru(&self.cfg.killer, &cands),
            Killer::Cpk => killer::choose_victim(&self.cfg.killer, self.now_us / 1000, &cands),
        };
        if let Some(v) = d.victim {
            let id = appflow_core::scheduler::ProcId {
                pid: cands[v].pid,
                start_time: 0,
            };
            let _ = self.kill(id, d.reason);
            let a = idx[v];
            self.kill_log.push((self.now_us, a, d.reason));
        }
    }

    fn kill_app(&mut self, a: usize) {
        let s = &mut self.st[a];
        self.anon_total -= s.anon_res;
        self.zram_stored -= s.anon_zram;
        self.swap_used -= s.anon_swap;
        s.anon_res = 0;
        s.anon_zram = 0;
        s.anon_swap = 0;
        s.alive = false;
        s.killed = true;
        s.grow_target = 0;
        s.grown = 0;
        self.counters.kills += 1;
        self.last_kill_us = Some(self.now_us);
    }

    // ------------------------------------------------------------------
    // Selective File Preloader
    // ------------------------------------------------------------------

    fn plan_sfp(&mut self) {
        let ids: Vec<usize> = (0..self.models.len())
            .filter(|&i| self.installed[i])
            .collect();
        let profiles: Vec<&LaunchProfile> = ids.iter().map(|&i| &self.models[i].profile).collect();
        let weights = vec![1.0; profiles.len()];
        let plan =
            preload::plan_cutoffs(&profiles, &weights, &self.dev.read_curve, &self.cfg.preload)
                .expect("cutoff 0 keeps every instance feasible");
        let mut cutoff = vec![None; self.models.len()];
        for (c, &i) in plan.apps.iter().zip(&ids) {
            cutoff[i] = Some(c.chosen.cutoff_bytes);
        }
        self.sfp = Some(Sfp {
            plan,
            cutoff,
            targets: BTreeMap::new(),
            next_touch_us: 0,
        });
    }

    fn spans_to_cells(&self, a: usize, spans: &[FileSpan]) -> Cells {
        let mut c = [[0u64; 2]; CHUNKS];
        let m = &self.models[a];
        for sp in spans {
            if let Some(&(k, b)) = m.cell_of.get(&sp.path) {
                c[k][b] = (c[k][b] + sp.len.div_ceil(PAGE_BYTES)).min(m.chunk_pages[k][b]);
            }
        }
        c
    }

    /// Standby targets per app with `active` excluded (memoised).
    fn standby_targets(&mut self, active: Option<usize>) -> Vec<Cells> {
        let sfp = self.sfp.as_ref().expect("sfp");
        if let Some(t) = sfp.targets.get(&active) {
            return t.clone();
        }
        let ids: Vec<usize> = (0..self.models.len())
            .filter(|&i| self.installed[i])
            .collect();
        let profiles: Vec<&LaunchProfile> = ids.iter().map(|&i| &self.models[i].profile).collect();
        let active_names: Vec<&str> = active
            .map(|a| vec![self.models[a].spec.name.as_str()])
            .unwrap_or_default();
        let set = preload::standby_set(&profiles, &sfp.plan, &self.cfg.preload, &active_names);
        debug_assert!(set.bytes <= self.cfg.preload.budget_bytes);
        let mut targets = vec![[[0u64; 2]; CHUNKS]; self.models.len()];
        for sp in &set.spans {
            let Some(&i) = self.name_idx.get(&sp.app) else {
                continue;
            };
            let m = &self.models[i];
            if let Some(&(k, b)) = m.cell_of.get(&sp.path) {
                targets[i][k][b] =
                    (targets[i][k][b] + sp.len.div_ceil(PAGE_BYTES)).min(m.chunk_pages[k][b]);
            }
        }
        self.sfp
            .as_mut()
            .expect("sfp")
            .targets
            .insert(active, targets.clone());
        targets
    }

    /// Keeps the standby set resident: touched pages become "held";
    /// evicted ones are re-read (idle I/O). `flash_ms` bounds the reads
    /// (None = unbounded, for idle periods). Returns flash ms used.
    fn touch_standby(&mut self, flash_ms: Option<f64>) -> f64 {
        if self.sfp.is_none() {
            return 0.0;
        }
        let targets = self.standby_targets(self.fg);
        let mut used = 0.0;
        for (a, target) in targets.iter().enumerate() {
            if Some(a) == self.fg {
                // The active app's set is no longer touched: its pages become its own.
                let held = self.st[a].held;
                for k in 0..CHUNKS {
                    for b in 0..2 {
                        self.st[a].own[k][b] += held[k][b];
                    }
                }
                self.st[a].held = [[0; 2]; CHUNKS];
                self.st[a].fix_sums();
                continue;
            }
            for k in 0..CHUNKS {
                for b in 0..2 {
                    let want = target[k][b];
                    let s = &mut self.st[a];
                    if s.held[k][b] > want {
                        let extra = s.held[k][b] - want;
                        s.held[k][b] -= extra;
                        s.own[k][b] += extra;
                    }
                    let m = (want - s.held[k][b]).min(s.own[k][b]);
                    s.own[k][b] -= m;
                    s.held[k][b] += m;
                    let missing = want - s.held[k][b];
                    let room = self.models[a].chunk_pages[k][b] - s.cached(k, b);
                    let mut n = missing.min(room);
                    if n == 0 {
                        continue;
                    }
                    let block = if b == SMALL {
                        self.models[a].small_block_bytes[k]
                    } else {
                        self.cfg.preload.hot_segment_bytes
                    };
                    let rate = self.dev.read_curve.throughput(block) / PAGE_BYTES as f64 / 1000.0;
                    if let Some(limit) = flash_ms {
                        let left = limit - used;
                        if left <= 0.0 {
                            continue;
                        }
                        n = n.min((left * rate) as u64);
                    }
                    // Preloading never pushes memory below the low watermark.
                    let free = self.free_pages();
                    let low = self.dev.wmark_low_bytes / PAGE_BYTES;
                    n = n.min(free.saturating_sub(low));
                    if n == 0 {
                        continue;
                    }
                    self.add_file(a, Holder::Held, k, b, n);
                    self.counters.preload_read_pages += n;
                    used += n as f64 / rate;
                }
            }
            self.st[a].fix_sums();
        }
        self.note_preload_peak();
        used
    }

    fn stream_queue(&self, a: usize) -> Vec<(usize, usize, u64)> {
        let Some(sfp) = &self.sfp else {
            return Vec::new();
        };
        let Some(cutoff) = sfp.cutoff[a] else {
            return Vec::new();
        };
        let spans =
            preload::launch_stream(&self.models[a].profile, cutoff, &self.cfg.preload, true);
        let mut q: Vec<(usize, usize, u64)> = Vec::new();
        for sp in &spans {
            if let Some(&(k, b)) = self.models[a].cell_of.get(&sp.path) {
                let pages = sp.len.div_ceil(PAGE_BYTES);
                match q.last_mut() {
                    Some(last) if last.0 == k && last.1 == b => last.2 += pages,
                    _ => q.push((k, b, pages)),
                }
            }
        }
        q
    }

    // ------------------------------------------------------------------
    // Launch
    // ------------------------------------------------------------------

    fn jitter(&self, tag: &str, a: usize, n: u64) -> f64 {
        rng::unit(self.cfg.seed, tag, a as u64, n)
    }

    fn phases(&self, a: usize, kind: LaunchKind) -> Vec<Phase> {
        let m = &self.models[a];
        let s = &self.st[a];
        // CPU time varies ±10 % launch to launch (assumption).
        let j = 0.9 + 0.2 * self.jitter("cpu", a, s.launches);
        let mut v = Vec::new();
        match kind {
            LaunchKind::Cold => {
                let cpu = m.spec.cpu_init_ms * self.dev.cpu_scale * j / CHUNKS as f64;
                let anon = m.anon_pages / CHUNKS as u64;
                for k in 0..CHUNKS {
                    v.push(Phase::Read {
                        k,
                        frac: 1.0,
                        left: None,
                    });
                    v.push(Phase::Cpu { ms: cpu });
                    let extra = if k == CHUNKS - 1 {
                        m.anon_pages - anon * CHUNKS as u64
                    } else {
                        0
                    };
                    v.push(Phase::Alloc {
                        pages: anon + extra,
                    });
                }
            }
            LaunchKind::Warm | LaunchKind::Hot => {
                let f = RELAUNCH_WS_FRACTION;
                v.push(Phase::SwapIn {
                    zram: (s.anon_zram as f64 * f) as u64,
                    flash: (s.anon_swap as f64 * f) as u64,
                });
                for k in 0..CHUNKS {
                    v.push(Phase::Read {
                        k,
                        frac: f,
                        left: None,
                    });
                }
                v.push(Phase::Cpu {
                    ms: m.spec.resume_ms * self.dev.cpu_scale * j,
                });
            }
        }
        v
    }

    fn classify(&self, a: usize) -> LaunchKind {
        let s = &self.st[a];
        if !s.alive {
            return LaunchKind::Cold;
        }
        let m = &self.models[a];
        let swapped = (s.anon_zram + s.anon_swap) as f64 / s.anon_total().max(1) as f64;
        let cached: u64 = (0..CHUNKS).map(|k| s.cached(k, 0) + s.cached(k, 1)).sum();
        let file_gone = 1.0 - cached as f64 / m.file_pages().max(1) as f64;
        if swapped > 0.1 || file_gone > 0.1 {
            LaunchKind::Warm
        } else {
            LaunchKind::Hot
        }
    }

    /// Launches `a` (brings it to the foreground) and runs until it is
    /// ready. Returns the record.
    pub fn launch(&mut self, a: usize) -> LaunchRecord {
        let kind = self.classify(a);
        let start = self.now_us;
        let relaunch_after_kill =
            kind == LaunchKind::Cold && self.st[a].ran_before && self.st[a].killed;
        if let Some(prev) = self.fg {
            self.touch_lru(prev);
        }
        self.fg = Some(a);
        self.launching = Some(a);
        self.touch_lru(a);
        if kind == LaunchKind::Cold {
            let pid = self.next_pid;
            self.next_pid += 1;
            let s = &mut self.st[a];
            s.alive = true;
            s.pid = pid;
            s.killed = false;
        }
        // The launching app's standby pages become its own (§4.2.2).
        if self.sfp.is_some() {
            self.touch_standby(Some(0.0));
        }
        let mut l = Launch {
            app: a,
            phases: self.phases(a, kind),
            pos: 0,
            pf_cell: 0,
            stream: Vec::new(),
            stream_pos: 0,
        };
        if self.pol.preloader == Preloader::Sfp && kind == LaunchKind::Cold {
            l.stream = self.stream_queue(a);
        }
        let limit = start + 600_000_000;
        let end_us;
        loop {
            if let Some(done_at) = self.step_launch(&mut l) {
                end_us = done_at;
                break;
            }
            if self.now_us >= limit {
                self.counters.stuck_launches += 1;
                end_us = self.now_us;
                break;
            }
        }
        // Launch complete: protected stream pages are released (become the app's own).
        let _ = self.release(&self.models[a].spec.name.clone());
        self.launching = None;
        let s = &mut self.st[a];
        s.launches += 1;
        s.ran_before = true;
        if kind == LaunchKind::Cold {
            // Background growth of 30-50 % over the post-launch baseline
            // (§4.3), unless the app gives its own.
            let g = match self.models[a].spec.growth_fraction {
                Some(g) => g,
                None => 0.3 + 0.2 * rng::unit(self.cfg.seed, "growth", a as u64, s.launches),
            };
            s.grow_target = (s.anon_total() as f64 * g) as u64;
            s.grown = 0;
            s.grow_start_us = self.now_us;
        }
        LaunchRecord {
            app: a,
            kind,
            relaunch_after_kill,
            latency_ms: (end_us - start) as f64 / 1000.0,
            at_us: start,
        }
    }

    /// Read rate at a block size, pages per ms.
    fn rate_ppm(&self, block_bytes: u64) -> f64 {
        self.dev.read_curve.throughput(block_bytes) / PAGE_BYTES as f64 / 1000.0
    }

    /// The flash's full rate (its largest-block throughput), pages per ms.
    fn device_ppm(&self) -> f64 {
        let last = self
            .dev
            .read_curve
            .points()
            .last()
            .expect("curve has points");
        last.bytes_per_sec / PAGE_BYTES as f64 / 1000.0
    }

    /// The block size of the app's current read, if it is reading.
    fn app_block(&self, l: &Launch) -> Option<u64> {
        let m = &self.models[l.app];
        match l.phases.get(l.pos) {
            Some(Phase::Read { k, frac, left }) => {
                for b in [SMALL, LARGE] {
                    let want = (m.chunk_pages[*k][b] as f64 * frac).ceil() as u64;
                    let need = want.saturating_sub(self.st[l.app].cached(*k, b));
                    if left.map_or(need, |l| l[b].min(need)) > 0 {
                        return Some(if b == SMALL {
                            m.small_block_bytes[*k]
                        } else {
                            self.dev.readahead_bytes
                        });
                    }
                }
                None
            }
            Some(Phase::SwapIn { flash, .. }) if *flash > 0 => Some(32 * KIB),
            _ => None,
        }
    }

    /// One 5 ms step of a launch. Returns the completion time when the
    /// launch finished within the step.
    ///
    /// Storage model: a reader of block size b gets at most curve(b) (one
    /// request in flight); the device's capacity is its large-block rate,
    /// shared by all readers. Small reads therefore leave capacity idle
    /// (§2.2.1: 79 % of the bandwidth unused during app switches), which
    /// the idle-class preload worker may use. Normal-priority readers (the
    /// app, Paralfetch) are scaled down together when they exceed capacity.
    fn step_launch(&mut self, l: &mut Launch) -> Option<u64> {
        let a = l.app;
        let dt = STEP_MS;
        let dev_ppm = self.device_ppm();
        let app_block = self.app_block(l);
        let pf_on = self.pol.preloader == Preloader::Paralfetch && l.pf_cell < CHUNKS * 2;
        let pf_ppm = self.rate_ppm(PARALFETCH_READ_BYTES);
        let demand =
            app_block.map(|b| self.rate_ppm(b)).unwrap_or(0.0) + if pf_on { pf_ppm } else { 0.0 };
        let scale = if demand > dev_ppm {
            dev_ppm / demand
        } else {
            1.0
        };
        // Capacity used this step, in pages at the device's full rate.
        let mut cap_used = 0.0;

        // 1. kswapd (own core).
        self.run_kswapd(dt);

        // 2. The app.
        let mut t = dt;
        let mut done_at = None;
        while t > 1e-9 {
            let Some(ph) = l.phases.get(l.pos).copied() else {
                done_at = Some(self.now_us + ((dt - t) * 1000.0) as u64);
                break;
            };
            match ph {
                Phase::Cpu { ms } => {
                    let u = ms.min(t);
                    t -= u;
                    if ms - u <= 1e-9 {
                        l.pos += 1;
                    } else {
                        l.phases[l.pos] = Phase::Cpu { ms: ms - u };
                    }
                }
                Phase::Alloc { pages } => {
                    let got = self.alloc(pages, &mut t, true);
                    self.st[a].anon_res += got;
                    self.anon_total += got;
                    if got >= pages {
                        l.pos += 1;
                    } else {
                        l.phases[l.pos] = Phase::Alloc { pages: pages - got };
                    }
                }
                Phase::SwapIn { zram, flash } => {
                    // zram: decompression on the CPU; flash: 32 KiB swap readahead.
                    let s = &self.st[a];
                    let zram = zram.min(s.anon_zram);
                    let flash = flash.min(s.anon_swap);
                    if zram + flash == 0 {
                        l.pos += 1;
                        continue;
                    }
                    let from_zram = zram > 0;
                    let ms_per_page = if from_zram {
                        self.dev.zram_decomp_ms_per_mib / 256.0
                    } else {
                        1.0 / (self.rate_ppm(32 * KIB) * scale)
                    };
                    let want = if from_zram { zram } else { flash };
                    let n = ((t / ms_per_page) as u64).clamp(1, want);
                    let got = self.alloc(n, &mut t, true);
                    if got == 0 {
                        break;
                    }
                    let s = &mut self.st[a];
                    if from_zram {
                        s.anon_zram -= got;
                        self.zram_stored -= got;
                    } else {
                        s.anon_swap -= got;
                        self.swap_used -= got;
                        cap_used += got as f64;
                    }
                    s.anon_res += got;
                    self.anon_total += got;
                    self.counters.refault_anon_pages += got;
                    t -= (got as f64 * ms_per_page).min(t);
                    l.phases[l.pos] = Phase::SwapIn {
                        zram: if from_zram { zram - got } else { zram },
                        flash: if from_zram { flash } else { flash - got },
                    };
                }
                Phase::Read { k, frac, left } => {
                    let mut progressed = false;
                    let mut need_any = false;
                    let mut left = left.unwrap_or_else(|| {
                        let m = &self.models[a];
                        [SMALL, LARGE].map(|b| {
                            let want = (m.chunk_pages[k][b] as f64 * frac).ceil() as u64;
                            want.saturating_sub(self.st[a].cached(k, b))
                        })
                    });
                    for b in [SMALL, LARGE] {
                        let m = &self.models[a];
                        let want = (m.chunk_pages[k][b] as f64 * frac).ceil() as u64;
                        let need = want.saturating_sub(self.st[a].cached(k, b)).min(left[b]);
                        if need == 0 {
                            continue;
                        }
                        need_any = true;
                        if t <= 1e-9 {
                            break;
                        }
                        let block = if b == SMALL {
                            m.small_block_bytes[k]
                        } else {
                            self.dev.readahead_bytes
                        };
                        let rate = self.rate_ppm(block) * scale;
                        let n = need.min((t * rate).ceil() as u64).max(1);
                        let got = self.alloc(n, &mut t, true);
                        if got == 0 {
                            break;
                        }
                        self.add_file(a, Holder::Own, k, b, got);
                        left[b] -= got;
                        self.counters.app_read_pages += got;
                        t -= (got as f64 / rate).min(t);
                        cap_used += got as f64;
                        progressed = true;
                    }
                    if !need_any {
                        // The app has used this chunk: preloaded pages of it
                        // are now its own (no longer protected, §4.2.2).
                        let st = &mut self.st[a];
                        for b in [SMALL, LARGE] {
                            st.own[k][b] += st.stream[k][b];
                            st.stream[k][b] = 0;
                        }
                        st.fix_sums();
                        l.pos += 1;
                    } else {
                        l.phases[l.pos] = Phase::Read {
                            k,
                            frac,
                            left: Some(left),
                        };
                        if !progressed {
                            break;
                        }
                    }
                }
            }
        }

        // 3. Paralfetch prefetcher (normal I/O priority).
        if pf_on {
            cap_used += self.run_paralfetch(l, dt * pf_ppm * scale) as f64;
        }

        // 4. Idle I/O class: SFP stream, then the standby touch.
        let mut idle_pages = (dt * dev_ppm - cap_used).max(0.0);
        if !l.stream.is_empty() && idle_pages >= 1.0 {
            idle_pages -= self.run_stream(l, idle_pages as u64) as f64;
        }
        if let Some(sfp) = &self.sfp {
            if self.now_us >= sfp.next_touch_us {
                self.touch_standby(Some(idle_pages / dev_ppm));
                let next = self.now_us + self.cfg.preload.touch_interval_ms * 1000;
                self.sfp.as_mut().expect("sfp").next_touch_us = next;
            }
        }
        self.note_preload_peak();

        // 5. AMR tick, killer, clock.
        self.now_us += STEP_US;
        self.amr_ticks();
        self.kill_check();
        done_at
    }

    /// Paralfetch reads up to `max_pages` of the launch profile, in order.
    /// Returns pages read.
    fn run_paralfetch(&mut self, l: &mut Launch, max_pages: f64) -> u64 {
        let a = l.app;
        let mut read = 0u64;
        let mut t = STEP_MS;
        let max_pages = max_pages.ceil() as u64;
        while l.pf_cell < CHUNKS * 2 && read < max_pages {
            let (k, b) = (l.pf_cell / 2, l.pf_cell % 2);
            let need = self.models[a].chunk_pages[k][b].saturating_sub(self.st[a].cached(k, b));
            if need == 0 {
                l.pf_cell += 1;
                continue;
            }
            let n = need.min(max_pages - read);
            // The prefetcher allocates page cache like any task (it may stall).
            let got = self.alloc(n, &mut t, false);
            if got == 0 {
                break;
            }
            self.add_file(a, Holder::Stream, k, b, got);
            self.counters.preload_read_pages += got;
            read += got;
        }
        read
    }

    /// The SFP launch-stream worker (idle I/O class) reads up to
    /// `max_pages` of its queue. Returns pages read.
    fn run_stream(&mut self, l: &mut Launch, max_pages: u64) -> u64 {
        let a = l.app;
        let mut read = 0;
        while l.stream_pos < l.stream.len() && read < max_pages {
            let (k, b, pages) = l.stream[l.stream_pos];
            let room = self.models[a].chunk_pages[k][b].saturating_sub(self.st[a].cached(k, b));
            let need = pages.min(room);
            if need == 0 {
                l.stream_pos += 1;
                continue;
            }
            let mut n = need.min(max_pages - read);
            // The idle-class worker never pushes memory into direct reclaim.
            let free = self.free_pages();
            n = n.min(free.saturating_sub(self.dev.wmark_low_bytes / PAGE_BYTES));
            if n == 0 {
                self.kswapd_on = true;
                break;
            }
            self.add_file(a, Holder::Stream, k, b, n);
            self.counters.preload_read_pages += n;
            read += n;
            l.stream[l.stream_pos].2 -= n;
        }
        read
    }

    fn amr_ticks(&mut self) {
        let tick_us = self.cfg.reclaim.tick_ms * 1000;
        while self.now_us >= self.next_tick_us {
            self.next_tick_us += tick_us;
            let n_alloc = std::mem::take(&mut self.alloc_in_tick);
            if self.pol.reclaimer != Reclaimer::Amr {
                continue;
            }
            let sample = ReclaimSample {
                now_ms: self.now_us / 1000,
                alloc_pages: n_alloc,
                avail_bytes: self.avail_pages() * PAGE_BYTES,
                total_bytes: self.dev.dram_bytes,
                anon_bytes: self.anon_total * PAGE_BYTES,
                file_bytes: self.file_total * PAGE_BYTES,
            };
            let d = self.ctl.step(&self.cfg.reclaim, &sample);
            if d.switched() {
                self.counters.amr_switches += 1;
                let _ = self.apply_mode(d.mode);
            }
            self.rebalance_budget_ms = self.cfg.reclaim.tick_ms as f64;
            if d.anon_reclaim_bytes > 0 {
                // Rebalancing: page out anonymous memory of background apps, oldest first.
                let mut left = d.anon_reclaim_bytes;
                let order: Vec<usize> = self.lru.clone();
                for v in order {
                    if left == 0 || self.rebalance_budget_ms <= 0.0 {
                        break;
                    }
                    if Some(v) == self.fg || !self.st[v].alive || self.st[v].anon_res == 0 {
                        continue;
                    }
                    let pid = self.st[v].pid;
                    match self.page_out_anon(pid, left) {
                        Ok(b) => left = left.saturating_sub(b),
                        Err(_) => continue,
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------
    // Idle time
    // ------------------------------------------------------------------

    /// Leaves the foreground app in use (or the home screen) for `dur_us`.
    pub fn idle(&mut self, dur_us: u64) {
        let end = self.now_us + dur_us;
        while self.now_us < end {
            let busy = self.mode != ReclaimMode::Normal || self.kswapd_on;
            let step = if busy {
                (100_000).min(end - self.now_us)
            } else {
                IDLE_STEP_US.min(end - self.now_us)
            };
            self.now_us += step;
            let growing = self.grow();
            self.run_kswapd(step as f64 / 1000.0);
            if self.sfp.is_some() {
                let due = self.sfp.as_ref().map(|s| s.next_touch_us).unwrap_or(0);
                if self.now_us >= due {
                    self.touch_standby(None);
                    let next = self.now_us + self.cfg.preload.touch_interval_ms * 1000;
                    self.sfp.as_mut().expect("sfp").next_touch_us = next;
                }
            }
            if busy || self.pol.reclaimer == Reclaimer::Amr {
                // The controller sees the idle allocation rate; skipping
                // ticks while it would stay Normal is exact (no burst).
                if self.mode == ReclaimMode::Normal && !busy {
                    self.next_tick_us = self.now_us;
                    self.alloc_in_tick = 0;
                }
                self.amr_ticks();
            } else {
                self.next_tick_us = self.now_us;
                self.alloc_in_tick = 0;
            }
            self.kill_check();
            let quiet = !growing && !self.kswapd_on && self.mode == ReclaimMode::Normal;
            if quiet && !self.blocked {
                // Nothing changes until `end` (touches would find the
                // standby set resident): jump.
                self.now_us = end;
            }
        }
        self.roll_psi();
    }

    /// Background (and foreground) footprint growth. Returns whether any app still grows.
    fn grow(&mut self) -> bool {
        let mut any = false;
        for a in 0..self.st.len() {
            let s = &self.st[a];
            if !s.alive || s.grow_target == 0 || s.grown >= s.grow_target {
                continue;
            }
            any = true;
            let span_us = match self.models[a].spec.growth_ms {
                Some(ms) => (ms * 1000).max(1),
                None => GROWTH_US,
            };
            let el = self.now_us.saturating_sub(s.grow_start_us).min(span_us);
            let want = (s.grow_target as u128 * el as u128 / span_us as u128) as u64;
            let delta = want.saturating_sub(s.grown);
            if delta == 0 {
                continue;
            }
            let mut t = 10_000.0;
            let got = self.alloc(delta, &mut t, false);
            let s = &mut self.st[a];
            s.anon_res += got;
            s.grown += got;
            self.anon_total += got;
            if got < delta {
                // Could not grow: memory exhausted; lmkd/CPK will act.
                self.blocked = true;
            }
        }
        any
    }

    /// Kills everything, drops every cache and empties swap (§6.1: "terminate
    /// all background apps and clear the file cache"). The clock keeps running.
    pub fn reset(&mut self) {
        for a in 0..self.st.len() {
            let launches = self.st[a].launches;
            self.st[a] = AppState {
                launches,
                ..AppState::default()
            };
        }
        self.anon_total = 0;
        self.file_total = 0;
        self.zram_stored = 0;
        self.swap_used = 0;
        self.fg = None;
        self.launching = None;
        self.kswapd_on = false;
        self.mode = ReclaimMode::Normal;
        self.ctl = ReclaimController::new();
        self.blocked = false;
        self.last_kill_us = None;
        self.psi_some = [0.0; PSI_BUCKETS];
        self.psi_full = [0.0; PSI_BUCKETS];
        if let Some(s) = self.sfp.as_mut() {
            s.next_touch_us = self.now_us;
        }
    }

    /// Sends the foreground app to the background (home screen).
    pub fn go_home(&mut self) {
        if let Some(a) = self.fg.take() {
            self.touch_lru(a);
        }
    }

    /// Simulated memory state in MiB (for reports and debugging).
    pub fn memory_mib(&self) -> BTreeMap<&'static str, f64> {
        let m = |p: u64| (p * PAGE_BYTES) as f64 / MIB as f64;
        let mut out = BTreeMap::new();
        out.insert("free", m(self.free_pages()));
        out.insert("anon", m(self.anon_total));
        out.insert("file", m(self.file_total));
        out.insert("zram_stored", m(self.zram_stored));
        out.insert("swap_used", m(self.swap_used));
        out
    }
}

impl PreloadMechanism for Sim<'_> {
    /// Reads spans into the page cache at once (Touch: standby set; Protect:
    /// launch-time preload held until `release`).
    fn load(&mut self, app: &str, spans: &[FileSpan], hold: Hold) -> Result<u64, MechError> {
        let a = self
            .models
            .iter()
            .position(|m| m.spec.name == app)
            .ok_or_else(|| MechError::Failed {
                what: "load".into(),
                detail: format!("unknown app {app}"),
            })?;
        let cells = self.spans_to_cells(a, spans);
        let h = match hold {
            Hold::Touch => Holder::Held,
            Hold::Protect => Holder::Stream,
        };
        let mut bytes = 0;
        for k in 0..CHUNKS {
            for b in 0..2 {
                let room = self.models[a].chunk_pages[k][b] - self.st[a].cached(k, b);
                let n = cells[k][b]
                    .min(room)
                    .min(self.free_pages().saturating_sub(self.min_pages()));
                if n > 0 {
                    self.add_file(a, h, k, b, n);
                    bytes += n * PAGE_BYTES;
                }
            }
        }
        Ok(bytes)
    }

    fn release(&mut self, app: &str) -> Result<(), MechError> {
        if let Some(a) = self.models.iter().position(|m| m.spec.name == app) {
            let s = &mut self.st[a];
            for k in 0..CHUNKS {
                for b in 0..2 {
                    s.own[k][b] += s.stream[k][b];
                    s.stream[k][b] = 0;
                }
            }
            s.fix_sums();
        }
        Ok(())
    }

    fn release_hold(&mut self, app: &str, _hold: Hold) -> Result<(), MechError> {
        self.release(app)
    }

    fn held_bytes(&self) -> u64 {
        self.preload_held_pages() * PAGE_BYTES
    }
}

impl ReclaimMechanism for Sim<'_> {
    fn apply_mode(&mut self, mode: ReclaimMode) -> Result<(), MechError> {
        self.mode = mode;
        Ok(())
    }

    /// Pages out anonymous memory of one app (process_madvise MADV_PAGEOUT),
    /// within this tick's CPU budget of the rebalancing worker.
    fn page_out_anon(&mut self, pid: u32, max_bytes: u64) -> Result<u64, MechError> {
        let a = self
            .st
            .iter()
            .position(|s| s.alive && s.pid == pid)
            .ok_or(MechError::Vanished(pid))?;
        let per_page = self.dev.anon_zram_ms_per_mib / 256.0;
        let afford = (self.rebalance_budget_ms / per_page).max(0.0) as u64;
        let n = (max_bytes / PAGE_BYTES).min(afford);
        let (got, cpu, flash) = self.evict_anon(n, Some(a));
        self.rebalance_budget_ms -= cpu + flash;
        Ok(got * PAGE_BYTES)
    }

    fn drop_file(&mut self, path: &str, _offset: u64, len: u64) -> Result<u64, MechError> {
        for a in 0..self.models.len() {
            if let Some(&(k, b)) = self.models[a].cell_of.get(path) {
                let n = (len / PAGE_BYTES).min(self.st[a].own[k][b]);
                self.st[a].own[k][b] -= n;
                self.st[a].sum[0] -= n;
                self.file_total -= n;
                return Ok(n * PAGE_BYTES);
            }
        }
        Ok(0)
    }
}

impl KillMechanism for Sim<'_> {
    fn kill(
        &mut self,
        id: appflow_core::scheduler::ProcId,
        reason: Reason,
    ) -> Result<KillOutcome, MechError> {
        let pid = id.pid;
        let a = self
            .st
            .iter()
            .position(|s| s.alive && s.pid == pid)
            .ok_or(MechError::Vanished(pid))?;
        assert!(
            Some(a) != self.fg && Some(a) != self.launching,
            "the killer chose the foreground app ({reason})"
        );
        self.kill_app(a);
        Ok(KillOutcome { reaped: true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
