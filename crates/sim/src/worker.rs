//! The simulated device's mechanisms: what the scheduler's calls do on the
//! phone. The preload worker (an idle-class process charged to the device's
//! memory, like the daemon's) keeps standby sets warm by touching them every
//! `touch_interval_ms` and streams launch sets in the flash capacity the
//! foreground leaves idle; streamed pages are locked until released.
//! Reclaim modes are kernel settings; page-out is `process_madvise`'s
//! effect within the rebalancing worker's CPU budget; kills end a process.

// Cells are parallel [chunk][bucket] arrays of several holders; index loops read clearer.
#![allow(clippy::needless_range_loop)]

use crate::catalog::{Cells, CHUNKS};
use crate::engine::{Holder, Sim, StreamQueue};
use appflow_core::mechanism::{
    Hold, KillMechanism, KillOutcome, MechError, PreloadMechanism, ReclaimMechanism,
};
use appflow_core::policy::KernelVariant;
use appflow_core::preload::FileSpan;
use appflow_core::prepage::{
    PrepagePlan, SwitchObservation, ANON_BATCH_PAGES, ANON_INVARIANT_SHARE, FILE_INVARIANT_SHARE,
};
use appflow_core::reason::Reason;
use appflow_core::reclaim::ReclaimMode;
use appflow_core::refault::StepRange;
use appflow_core::scheduler::ProcId;
use appflow_core::PAGE_BYTES;

/// ASAP's prepaging of one switch (the ASAP paper, "Prepaging Manager"): the
/// amounts left, and how many of the pages brought back so far are in the
/// switch's real footprint.
#[derive(Debug, Clone, Default)]
pub(crate) struct PrepageJob {
    app: usize,
    anon_left: u64,
    file_left: u64,
    anon_done: u64,
    file_done: u64,
    /// Anonymous hits not yet met by the app's swap-in.
    anon_credit: u64,
    /// Anonymous hits counted so far.
    anon_hits: u64,
}

impl Sim<'_> {
    /// The app's swap-in of `need` zram pages meets prepaged pages first:
    /// takes up to `need` of the job's anonymous hits. Returns them.
    pub(crate) fn take_prepage_credit(&mut self, a: usize, need: u64) -> u64 {
        let Some(j) = self.prepage_job.as_mut().filter(|j| j.app == a) else {
            return 0;
        };
        let c = j.anon_credit.min(need);
        j.anon_credit -= c;
        self.st[a].window.used_anon += c;
        c
    }

    /// The prepaging threads during one step of `dt_ms` (SCHED_IDLE, on a
    /// core the switching app leaves idle; the ASAP paper: the CPU is 34 % busy
    /// and the disk 15 % during a switch): anonymous pages decompressed in
    /// batches of 16, file pages read in the flash capacity left
    /// (`idle_pages`, large reads: one file at a time). Of what is brought
    /// back, the footprint's invariant share is what the switch uses (75 %
    /// of file pages, 44 % of anonymous ones, the ASAP paper); the rest only takes
    /// memory. Returns the file pages read.
    pub(crate) fn run_prepager(&mut self, a: usize, idle_pages: f64, dt_ms: f64) -> u64 {
        let Some(mut j) = self.prepage_job.take().filter(|j| j.app == a) else {
            return 0;
        };
        // Anonymous: decompress from zram on the prepager's core.
        let per_page = self.dev.zram_decomp_ms_per_mib / 256.0;
        let batches = (dt_ms / per_page) as u64 / ANON_BATCH_PAGES;
        let n = (batches * ANON_BATCH_PAGES)
            .min(j.anon_left)
            .min(self.st[a].anon_zram);
        let mut t = dt_ms;
        let got = if n > 0 {
            self.alloc(n, &mut t, false)
        } else {
            0
        };
        if got > 0 {
            if self.ariadne() {
                self.ariadne_take(a, crate::peers::HOT, got);
            }
            let s = &mut self.st[a];
            s.anon_zram -= got;
            s.anon_res += got;
            s.window.prepaged_anon += got;
            self.zram_stored -= got;
            self.anon_total += got;
            self.gain_anon(a);
            self.counters.refault_anon_pages += got;
            j.anon_left -= got;
            j.anon_done += got;
            let hits = (j.anon_done as f64 * ANON_INVARIANT_SHARE) as u64;
            j.anon_credit += hits - j.anon_hits;
            j.anon_hits = hits;
        }
        // File: evicted pages of the app's launch files, in profile order.
        let mut read = 0;
        let n = (idle_pages as u64).min(j.file_left);
        let mut t = dt_ms;
        let got = if n > 0 {
            self.alloc(n, &mut t, false)
        } else {
            0
        };
        if got > 0 {
            let before = (j.file_done as f64 * FILE_INVARIANT_SHARE) as u64;
            j.file_done += got;
            j.file_left -= got;
            let mut hits = (j.file_done as f64 * FILE_INVARIANT_SHARE) as u64 - before;
            let mut placed = 0;
            'cells: for k in 0..CHUNKS {
                for b in 0..2 {
                    if hits == 0 {
                        break 'cells;
                    }
                    let chunk = self.models[a].chunk_pages[k][b];
                    let want = (chunk as f64 * crate::launch::RELAUNCH_WS_FRACTION).ceil() as u64;
                    let room = want.saturating_sub(self.st[a].cached(k, b));
                    let m = room.min(hits);
                    if m > 0 {
                        self.add_file(a, Holder::Own, k, b, m);
                        // add_file counts the pages as allocated; alloc did already.
                        self.alloc_counter -= m;
                        hits -= m;
                        placed += m;
                    }
                }
            }
            // The rest are pages of the app's files the switch does not use.
            let wasted = got - placed;
            self.prepage_leftovers |= wasted > 0;
            self.st[a].other_file += wasted;
            self.file_total += wasted;
            self.gain_file(a);
            let w = &mut self.st[a].window;
            w.prepaged_file += got;
            w.used_file += placed;
            self.counters.preload_read_pages += got;
            read = got;
        }
        self.prepage_job = Some(j);
        read
    }

    /// The switch of `a` is over, and its prepaging with it: the anonymous
    /// pages it brought back that the switch did not use stay resident,
    /// never referenced (the kernel's reclaim takes them first).
    pub(crate) fn end_prepage(&mut self, a: usize) {
        self.prepage_job = None;
        let w = self.st[a].window;
        let unused = w.prepaged_anon.saturating_sub(w.used_anon);
        if unused > 0 {
            self.prepage_leftovers = true;
            let s = &mut self.st[a];
            s.unused_anon = (s.unused_anon + unused).min(s.anon_res);
        }
    }

    /// Pages held by the preloader before launch (the standby sets).
    pub fn standby_pages(&self) -> u64 {
        self.held_total
    }

    /// Pages held by the preloader: standby sets + launch streams.
    pub fn preload_held_pages(&self) -> u64 {
        self.standby_pages()
            + self
                .st
                .iter()
                .map(|s| s.sum[Holder::Stream as usize])
                .sum::<u64>()
    }

    pub(crate) fn note_preload_peak(&mut self) {
        let standby = self.standby_pages();
        self.counters.preload_peak_pages = self.counters.preload_peak_pages.max(standby);
        if let Some(a) = self.launching {
            let st = self.st[a].sum[Holder::Stream as usize];
            self.counters.stream_peak_pages = self.counters.stream_peak_pages.max(st);
        }
    }

    /// The live app with process `pid` (and start time `start_ms`, when
    /// given).
    fn app_of_pid(&self, pid: u32, start_ms: Option<u64>) -> Option<usize> {
        let a = *self
            .pid_apps
            .get(pid.checked_sub(self.pid_base)? as usize)?;
        let s = &self.st[a];
        (s.alive && s.pid == pid && start_ms.is_none_or(|t| s.start_ms == t)).then_some(a)
    }

    fn app_index(&self, app: &str) -> Result<usize, MechError> {
        self.name_idx
            .get(app)
            .copied()
            .ok_or_else(|| MechError::Failed {
                what: "preload".into(),
                detail: format!("unknown app {app}"),
            })
    }

    /// Pages per cell that `spans` cover (clamped to the app's files).
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

    /// The worker's queue for a launch stream: (chunk, bucket, pages) in
    /// the spans' order, consecutive spans of one cell merged.
    fn stream_queue(&self, a: usize, spans: &[FileSpan]) -> StreamQueue {
        let mut q: StreamQueue = Vec::new();
        for sp in spans {
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

    /// Moves pages of `a` from holder `from` to the app's own page cache.
    fn give_to_app(&mut self, a: usize, from: Holder) {
        let s = &mut self.st[a];
        let src = *s.cells_mut(from);
        for k in 0..CHUNKS {
            for b in 0..2 {
                s.own[k][b] += src[k][b];
            }
        }
        *s.cells_mut(from) = [[0; 2]; CHUNKS];
        self.fix_sums(a);
    }

    /// The worker stops streaming for `a`; what it read is the app's now.
    pub(crate) fn release_stream(&mut self, a: usize) {
        self.st[a].stream_q.clear();
        self.give_to_app(a, Holder::Stream);
    }

    /// The worker stops touching `a`'s standby set.
    fn release_standby(&mut self, a: usize) {
        self.st[a].standby_target = None;
        self.give_to_app(a, Holder::Held);
    }

    /// Keeps the standby sets resident: cached pages of the set become
    /// "held"; evicted ones are re-read (idle I/O). `flash_ms` bounds the
    /// reads (None = unbounded, for idle periods); the worker never pushes
    /// memory below the low watermark. Returns flash ms used.
    pub(crate) fn touch_standby(&mut self, flash_ms: Option<f64>) -> f64 {
        let mut used = 0.0;
        if self.touch_paused {
            return used;
        }
        // Only the apps whose held pages may differ from their target; the
        // others are skipped as the walk of every app skipped them (every
        // wanted page held). They stay listed until they are.
        let mut pending = std::mem::take(&mut self.touch_pending);
        let mut kept = 0;
        for i in 0..pending.len() {
            let a = pending[i];
            let Some(target) = self.st[a].standby_target else {
                continue;
            };
            let s = &self.st[a];
            if s.held == target {
                continue;
            }
            pending[kept] = a;
            kept += 1;
            let idle = self.free_pages() <= self.low_pages()
                && s.own.iter().all(|c| c[0] == 0 && c[1] == 0)
                && s.held
                    .iter()
                    .zip(&target)
                    .all(|(h, w)| h[0] <= w[0] && h[1] <= w[1]);
            if idle {
                // Nothing can change: no page held beyond the target, none
                // of the app's own pages to take over, and no free page to
                // read into.
                continue;
            }
            // Free pages above the low watermark, kept as the reads below
            // take them (nothing else here changes free memory).
            let mut free_above_low = self.free_pages().saturating_sub(self.low_pages());
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
                    // Bounded by the free pages above the low watermark
                    // first: the throughput lookup below is the costly part.
                    let mut n = missing.min(room).min(free_above_low);
                    if n == 0 {
                        continue;
                    }
                    let rate = self.rates.touch(a, k, b);
                    if let Some(limit) = flash_ms {
                        let left = limit - used;
                        if left <= 0.0 {
                            continue;
                        }
                        n = n.min((left * rate) as u64);
                    }
                    if n == 0 {
                        continue;
                    }
                    self.add_file(a, Holder::Held, k, b, n);
                    free_above_low -= n;
                    self.counters.preload_read_pages += n;
                    used += n as f64 / rate;
                }
            }
            self.fix_sums(a);
            if self.st[a].held == target {
                kept -= 1;
            }
        }
        pending.truncate(kept);
        for a in std::mem::replace(&mut self.touch_pending, pending) {
            self.touch_pending_add(a);
        }
        self.note_preload_peak();
        used
    }

    /// App `a`'s held pages may now differ from its standby target.
    pub(crate) fn touch_pending_add(&mut self, a: usize) {
        if let Err(p) = self.touch_pending.binary_search(&a) {
            self.touch_pending.insert(p, a);
        }
    }

    /// The worker streams up to `max_pages` of the queued launch sets, in
    /// order, with large reads, within `t_ms` of its own time: its page-cache
    /// allocations reclaim like any task's (on its own core, so its stalls
    /// are not the app's). Returns pages read.
    pub(crate) fn run_streams(&mut self, max_pages: u64, mut t_ms: f64) -> u64 {
        let mut read = 0;
        // Apps without a queue are skipped; queues emptied here or released
        // since leave the list (the order is the apps' order either way).
        let mut i = 0;
        while i < self.stream_apps.len() {
            let a = self.stream_apps[i];
            i += 1;
            while read < max_pages && !self.st[a].stream_q.is_empty() {
                let (k, b, pages) = self.st[a].stream_q[0];
                let room = self.models[a].chunk_pages[k][b].saturating_sub(self.st[a].cached(k, b));
                let need = pages.min(room);
                if need == 0 {
                    self.st[a].stream_q.remove(0);
                    continue;
                }
                let n = self.alloc(need.min(max_pages - read), &mut t_ms, false);
                if n == 0 {
                    self.prune_stream_apps();
                    return read;
                }
                self.add_file(a, Holder::Stream, k, b, n);
                self.counters.preload_read_pages += n;
                read += n;
                self.st[a].stream_q[0].2 -= n;
            }
        }
        self.prune_stream_apps();
        read
    }

    fn prune_stream_apps(&mut self) {
        let st = &self.st;
        self.stream_apps.retain(|&a| !st[a].stream_q.is_empty());
    }
}

impl PreloadMechanism for Sim<'_> {
    /// Touch: the worker keeps these spans resident from its next touch on.
    /// Protect: the worker streams them (idle class) and locks what it read
    /// until released.
    fn load(&mut self, app: &str, spans: &[FileSpan], hold: Hold) -> Result<u64, MechError> {
        let a = self.app_index(app)?;
        self.mark_touched(a);
        let bytes = spans.iter().map(|s| s.len).sum();
        match hold {
            Hold::Touch => {
                let cells = match &self.touch_memo[a] {
                    Some((memo, cells)) if memo.as_slice() == spans => *cells,
                    _ => {
                        let cells = self.spans_to_cells(a, spans);
                        self.touch_memo[a] = Some((spans.to_vec(), cells));
                        cells
                    }
                };
                self.st[a].standby_target = Some(cells);
                self.touch_pending_add(a);
                self.next_touch_us = self.now_us;
            }
            Hold::Protect => {
                let q = match &self.stream_memo[a] {
                    Some((memo, q)) if memo.as_slice() == spans => q.clone(),
                    _ => {
                        let q = self.stream_queue(a, spans);
                        self.stream_memo[a] = Some((spans.to_vec(), q.clone()));
                        q
                    }
                };
                if !q.is_empty() {
                    if let Err(p) = self.stream_apps.binary_search(&a) {
                        self.stream_apps.insert(p, a);
                    }
                }
                self.st[a].stream_q = q;
            }
        }
        Ok(bytes)
    }

    fn release(&mut self, app: &str) -> Result<(), MechError> {
        let a = self.app_index(app)?;
        self.release_stream(a);
        self.release_standby(a);
        Ok(())
    }

    fn release_hold(&mut self, app: &str, hold: Hold) -> Result<(), MechError> {
        let a = self.app_index(app)?;
        match hold {
            Hold::Touch => self.release_standby(a),
            Hold::Protect => self.release_stream(a),
        }
        Ok(())
    }

    fn pause_touch(&mut self, paused: bool) -> Result<(), MechError> {
        self.touch_paused = paused;
        Ok(())
    }

    fn held_bytes(&self) -> u64 {
        self.preload_held_pages() * PAGE_BYTES
    }

    /// The launch readahead, as the daemon realises it (docs/daemon.md,
    /// "Launch readahead"): while raised, the app's own misses on its large
    /// files reach the device in requests of the raised window, so they
    /// run at the curve's rate for it (never slower than the device's own
    /// readahead). The kernel's window is the device's, so every app's
    /// large-file reads get it; the device is the simulated phone's one.
    fn set_launch_readahead(
        &mut self,
        _paths: &[&str],
        _procs: &[ProcId],
        bytes: Option<u64>,
    ) -> Result<u32, MechError> {
        self.rates.raised = bytes.map(|b| crate::launch::rate_ppm(self.dev, b));
        Ok(1)
    }

    /// ASAP: the switch's prepaging job, bounded by what of the app is out
    /// of memory (its zram pages, its evicted launch-file pages).
    /// (The simulated phone knows each app's pages without its processes;
    /// its window starts with the launch or switch itself.)
    fn prepage(
        &mut self,
        app: &str,
        _procs: &[ProcId],
        plan: &PrepagePlan,
    ) -> Result<u64, MechError> {
        let a = self.app_index(app)?;
        self.mark_touched(a);
        let s = &self.st[a];
        let cached: u64 = (0..CHUNKS).map(|k| s.cached(k, 0) + s.cached(k, 1)).sum();
        let evicted = self.models[a].file_pages().saturating_sub(cached);
        let job = PrepageJob {
            app: a,
            anon_left: (plan.anon_bytes / PAGE_BYTES).min(s.anon_zram),
            file_left: (plan.file_bytes / PAGE_BYTES).min(evicted),
            ..PrepageJob::default()
        };
        let bytes = (job.anon_left + job.file_left) * PAGE_BYTES;
        self.prepage_job = Some(job);
        Ok(bytes)
    }

    fn switch_observation(
        &mut self,
        app: &str,
        _procs: &[ProcId],
    ) -> Result<Option<SwitchObservation>, MechError> {
        let a = self.app_index(app)?;
        let w = std::mem::take(&mut self.st[a].window);
        let b = |p: u64| p * PAGE_BYTES;
        let o = SwitchObservation {
            prepaged_anon: b(w.prepaged_anon),
            prepaged_file: b(w.prepaged_file),
            used_anon: b(w.used_anon),
            used_file: b(w.used_file),
            demand_anon: b(w.demand_anon),
            demand_file: b(w.demand_file),
        };
        Ok((o != SwitchObservation::default()).then_some(o))
    }

    /// Ariadne's user-space half, recorded only: the Ariadne kernel
    /// variant already keeps each app's anonymous memory in hotness classes
    /// (hot = its relaunch working set) and evicts the cold class first
    /// (`Sim::evict_anon`), which is what marking the pages outside the hot
    /// set cold asks of a real kernel. Acting on it again here would count
    /// the same ordering twice; the call reports the app's resident bytes
    /// outside its hot class (what a real kernel would be asked to mark).
    fn mark_cold(&mut self, app: &str, _procs: &[ProcId]) -> Result<u64, MechError> {
        if !self.ariadne() {
            return Err(MechError::Unsupported(
                "cold marking (modelled by the Ariadne kernel variant's eviction order only)"
                    .into(),
            ));
        }
        let a = self.app_index(app)?;
        let pages = self.ariadne_resident(a, crate::peers::WARM)
            + self.ariadne_resident(a, crate::peers::COLD);
        Ok(pages * PAGE_BYTES)
    }
}

impl Sim<'_> {
    /// What compressing one page into zram costs the rebalancing worker, ms.
    fn page_out_ms_per_page(&self) -> f64 {
        self.dev.anon_zram_ms_per_mib / 256.0
    }

    /// Pages the rebalancing worker's CPU budget left in this tick can
    /// page out (compressing into zram).
    fn page_out_afford(&self) -> u64 {
        (self.rebalance_budget_ms / self.page_out_ms_per_page()).max(0.0) as u64
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
        let a = self.app_of_pid(pid, None).ok_or(MechError::Vanished(pid))?;
        if self.st[a].anon_res == 0 {
            // All of it is out already (the walk below would find nothing).
            return Ok(0);
        }
        let afford = self.page_out_afford();
        let n = (max_bytes / PAGE_BYTES).min(afford);
        let (got, cpu, flash) = self.evict_anon(n, Some(a), self.page_out_ms_per_page());
        self.rebalance_budget_ms -= cpu + flash;
        if self.dev.cpu_budget_cores.is_some() {
            // The daemon compresses in its own context, on the domain's cores.
            self.daemon_cpu_debt_ms += cpu;
        }
        Ok(got * PAGE_BYTES)
    }

    /// Nothing can be paged out with less than a page asked, the swap
    /// full, the tick's CPU budget spent, or no background app's memory
    /// resident: `page_out_anon` would page out 0 pages of any background
    /// app. (The scheduler's foreground and launching apps are the
    /// simulator's: it sends their events.)
    fn page_out_possible(&mut self, max_bytes: u64) -> bool {
        let front = |a: Option<usize>| a.map_or(0, |a| self.st[a].anon_res);
        let launching = self.launching.filter(|&l| Some(l) != self.fg);
        let background = self.anon_total - front(self.fg) - front(launching);
        max_bytes >= PAGE_BYTES
            && background > 0
            && self.swap_room() > 0
            && self.page_out_afford() > 0
    }

    /// The device's modelled page-out rate: compressing into zram at
    /// `anon_zram_ms_per_mib` (one tick of it is what the rebalancing
    /// worker's budget affords, [`Sim::page_out_afford`]).
    fn page_out_bytes_per_sec(&self) -> Option<f64> {
        let per_page = self.page_out_ms_per_page();
        (per_page > 0.0).then(|| PAGE_BYTES as f64 * 1000.0 / per_page)
    }

    fn drop_file(&mut self, path: &str, _offset: u64, len: u64) -> Result<u64, MechError> {
        for a in 0..self.models.len() {
            if let Some(&(k, b)) = self.models[a].cell_of.get(path) {
                let n = if len == 0 {
                    self.st[a].own[k][b]
                } else {
                    (len / PAGE_BYTES).min(self.st[a].own[k][b])
                };
                self.st[a].own[k][b] -= n;
                self.st[a].sum[0] -= n;
                self.file_total -= n;
                return Ok(n * PAGE_BYTES);
            }
        }
        Ok(0)
    }

    /// The re-fault kernel variant's kswapd batch, as the knob a real
    /// kernel has for it (`vm.watermark_scale_factor`).
    fn reclaim_step_range(&mut self) -> Result<StepRange, MechError> {
        if self.pol.def.kernel != KernelVariant::Refault {
            return Err(MechError::Unsupported(
                "kswapd's step is modelled for the re-fault kernel variant only".into(),
            ));
        }
        if self.cfg.refault_batch_pages.is_some() {
            return Err(MechError::Unsupported(
                "the kswapd batch is fixed by --kswapd-batch-kib".into(),
            ));
        }
        Ok(crate::peers::refault_step_range(self.dev))
    }

    fn set_reclaim_step(&mut self, wsf: u32) -> Result<(), MechError> {
        self.reclaim_step_range()?;
        self.kswapd_batch_pages = crate::peers::refault_batch_pages(self.dev, wsf);
        Ok(())
    }
}

impl KillMechanism for Sim<'_> {
    fn kill(&mut self, id: ProcId, reason: Reason) -> Result<KillOutcome, MechError> {
        let a = self
            .app_of_pid(id.pid, Some(id.start_time))
            .ok_or(MechError::Vanished(id.pid))?;
        assert!(
            Some(a) != self.fg && Some(a) != self.launching,
            "the killer chose the foreground app ({reason})"
        );
        // The memory state the kill fired in (docs/killer.md "Why the
        // kills"): which of them a page-out could have replaced, and which
        // the preloader's own pages were part of.
        if self.swap_low() {
            self.counters.kills_swap_low += 1;
        }
        if self.st[a].anon_res > 0 && self.swap_room() >= self.st[a].anon_res {
            self.counters.kills_swap_room_for_victim += 1;
        }
        if self.launching.is_some() {
            self.counters.kills_during_launch += 1;
        }
        if self.held_total > 0 {
            self.counters.kills_with_standby_set += 1;
        }
        // What a switch's prepaging had in memory at the kill (ASAP's
        // safety rule is judged on kills; docs/peers.md).
        if self.prepage_job.is_some() {
            self.counters.kills_during_prepage += 1;
        }
        if self.prepage_leftovers
            && self
                .st
                .iter()
                .any(|s| s.unused_anon > 0 || s.other_file > 0)
        {
            self.counters.kills_with_prepaged_unused += 1;
        }
        self.kill_app(a);
        self.kill_log.push((self.now_us, a, reason));
        Ok(KillOutcome { reaped: true })
    }
}
