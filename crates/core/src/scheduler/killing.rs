//! The Context-Aware Process Killer's part of the scheduler (the AppFlow paper §4.3):
//! when to kill, which apps are candidates, and the victim.
//!
//! * The trigger is the core's [`killer::should_kill`]: memory low and
//!   reclaim unable to keep up (memory mostly anonymous, and swap nearly full or a
//!   memory stall), never twice within the settle time.
//! * Candidates are apps with processes in the domain, one per app; the
//!   foreground app, protected names, the daemon's own processes and PID 1
//!   are excluded.
//! * Recently used apps are deferred. When only they remain, a kill of one
//!   (the *last resort*) happens only when the kernel is about to run out:
//!   memory low, anonymous memory dominant and swap full
//!   ([`killer::last_resort_allowed`]); a stall alone is not enough.
//! * The other apps are priced ([`killer::kill_value`]): their reuse
//!   predicted by the scheduler's [`UsageModel`] (fed by the app events),
//!   their relaunch cost from their profiles on the storage curve.
//! * Reclaim, not kill: with swap room for what is missing, the victim's
//!   resident anonymous memory is paged out first; it is killed only when
//!   the page-out cannot keep up (`killer.page_out_before_kill`).
//! * Every kill is logged with why the victim won and the candidates it
//!   was ranked against ([`killer::KillExplanation`]).

use super::{DomainSample, Mark, Mechanisms, ProcId, ProcInfo, Scheduler};
use crate::killer::{self, Candidate, PressureState};
use crate::mechanism::MechError;
use crate::policy::KillerStrategy;
use crate::reason::Reason;
use crate::reuse::UsageModel;
use crate::PAGE_BYTES;

impl Scheduler {
    fn pressure(&self, s: &DomainSample) -> PressureState {
        PressureState {
            now_ms: s.now_ms,
            avail_bytes: s.avail_bytes,
            total_bytes: s.total_bytes,
            anon_bytes: s.anon_bytes,
            file_bytes: s.file_bytes,
            swap_total_bytes: s.swap_total_bytes,
            swap_free_bytes: s.swap_free_bytes,
            psi_some_avg10: s.psi_some_avg10.unwrap_or(0.0),
            psi_some_window: self.psi_some_window(s),
            last_kill_ms: self.last_kill_ms,
            reaped_settle_until_below: self.reaped_settle_until_below,
            // Read only where the trigger looks at it (swap at its bound,
            // a launch on): it walks every app's profile.
            launch_need_bytes: if self.any_launching()
                && self
                    .cfg
                    .killer
                    .swap_at_bound(s.swap_total_bytes, s.swap_free_bytes)
            {
                self.launches_remaining_bytes()
            } else {
                0
            },
            relaunch_need_bytes: if self.headroom_watch(s) {
                self.relaunch_need
            } else {
                0
            },
        }
    }

    /// Whether the relaunch headroom is watched at `s`: the Context-Aware
    /// killer, swap at its bound and memory mostly anonymous (where a
    /// relaunch's swap-in can be met only by a kill), and an app the user
    /// opened before (the predictor has successors to go by).
    pub(super) fn headroom_watch(&self, s: &DomainSample) -> bool {
        let k = &self.cfg.killer;
        self.cfg.killer_strategy() == KillerStrategy::NetFreed
            && k.relaunch_min_p_next < 1.0
            && self.usage.last_app.is_some()
            && k.swap_at_bound(s.swap_total_bytes, s.swap_free_bytes)
            && k.anon_bound(s.anon_bytes, s.file_bytes)
    }

    /// Whether the relaunch headroom wants the footprints read at `s`: it
    /// is watched, and its need was last read a killer window
    /// (`killer.capacity_stall_window_ms`) ago or more. Reading every
    /// background app's footprint walks its page tables; once a window
    /// bounds that cost while swap is full.
    pub(super) fn headroom_due(&self, s: &DomainSample) -> bool {
        self.headroom_watch(s)
            && self.relaunch_need_at_ms.is_none_or(|t| {
                s.now_ms.saturating_sub(t) >= self.cfg.killer.capacity_stall_window_ms
            })
    }

    /// Whether the driver should read the processes' footprints for this
    /// tick: a kill is considered, or the relaunch headroom is due to weigh
    /// the background apps' swapped memory again.
    pub fn wants_footprints(&self, s: &DomainSample) -> bool {
        self.kill_wanted(s).is_ok() || self.headroom_due(s)
    }

    /// Notes what relaunching the likely next app would bring back, from
    /// the processes' footprints when the driver read them (kept until the
    /// next reading otherwise): each background app's swapped memory and
    /// its chance of being opened next after the foreground app.
    pub(super) fn note_relaunch_need(&mut self, now_ms: u64, procs: &[ProcInfo]) {
        if !procs.iter().any(|p| p.swap_bytes.is_some()) {
            return;
        }
        self.relaunch_need_at_ms = Some(now_ms);
        // At the home screen, the app the user left last is the one whose
        // successors say what comes next.
        let fg = self.foreground.as_deref();
        let prev = fg.or(self.usage.last_app.as_deref());
        let min_p = self.cfg.killer.relaunch_min_p_next;
        let likely: Vec<(String, f64, u64)> = self
            .usage
            .next_shares(prev)
            .into_iter()
            .filter(|&(app, p)| p > min_p && Some(app) != fg)
            .filter_map(|(app, p)| {
                // Only a running app relaunches (a cold launch is the
                // launch rule's); its swapped memory as read.
                let mut read = procs
                    .iter()
                    .filter(|q| q.app.as_deref() == Some(app))
                    .filter_map(|q| q.swap_bytes)
                    .peekable();
                read.peek()?;
                Some((app.to_string(), p, read.sum()))
            })
            .collect();
        let likely: Vec<killer::LikelyRelaunch> = likely
            .into_iter()
            .map(|(app, p_next, swapped_bytes)| killer::LikelyRelaunch {
                p_next,
                swapped_bytes,
                file_bytes: self.profile_file_bytes(&app),
            })
            .collect();
        self.relaunch_need = killer::relaunch_need_bytes(&self.cfg.killer, &likely);
    }

    /// The memory stall over the killer's window, percent: from the newest
    /// earlier tick at least `killer.capacity_stall_window_ms` before `s`
    /// to `s` (the cumulative PSI counter), None until the history spans
    /// the window or without PSI. A pure function of the recorded ticks and
    /// `s`, so asking before the tick ([`Self::kill_wanted`]) and within it
    /// gives the same answer.
    fn psi_some_window(&self, s: &DomainSample) -> Option<f64> {
        let now_total = s.psi_some_total_us?;
        let window = self.cfg.killer.capacity_stall_window_ms;
        let &(t, total) = self
            .psi_history
            .iter()
            .rev()
            .find(|(t, _)| s.now_ms.saturating_sub(*t) >= window)?;
        killer::stall_percent(total, now_total, s.now_ms - t)
    }

    /// Keeps the tick's PSI counter for the stall window: what is older
    /// than the newest sample a full window back is dropped.
    pub(super) fn record_psi(&mut self, s: &DomainSample) {
        let Some(total) = s.psi_some_total_us else {
            self.psi_history.clear();
            return;
        };
        if self.psi_history.back().is_some_and(|&(t, _)| t >= s.now_ms) {
            return;
        }
        self.psi_history.push_back((s.now_ms, total));
        let window = self.cfg.killer.capacity_stall_window_ms;
        while self.psi_history.len() > 1 && s.now_ms.saturating_sub(self.psi_history[1].0) >= window
        {
            self.psi_history.pop_front();
        }
    }

    /// Whether the killer should act now (the core's trigger).
    pub fn kill_wanted(&self, s: &DomainSample) -> Result<Reason, Reason> {
        if self.cfg.killer_strategy() == KillerStrategy::Kernel {
            return Err(Reason::KillNotNeeded);
        }
        killer::should_kill(&self.cfg.killer, &self.pressure(s))
    }

    /// The wall clock of a monotonic time, Unix ms (the latest tick's
    /// offset; the monotonic time itself before the first tick).
    pub(super) fn unix_ms(&self, now_ms: u64) -> u64 {
        match self.unix_offset_ms {
            Some(off) => (now_ms as i64 + off).max(0) as u64,
            None => now_ms,
        }
    }

    /// Feeds the predictor: `app` came to the foreground (a launch, or a
    /// switch to it). The model is bounded by the app table.
    pub(super) fn record_open(&mut self, app: &str, now_ms: u64) {
        let at = self.unix_ms(now_ms);
        self.usage
            .record_open(app, at, self.cfg.killer.recency_window_ms);
        self.usage
            .bound(self.declared.len() + self.cfg.max_undeclared_apps);
    }

    /// The reuse predictor (what the daemon saves).
    pub fn usage_model(&self) -> &UsageModel {
        &self.usage
    }

    /// Replaces the reuse predictor (the daemon's saved one, at start).
    pub fn set_usage_model(&mut self, mut m: UsageModel) {
        m.bound(self.declared.len() + self.cfg.max_undeclared_apps);
        self.usage = m;
    }

    /// The latest kill's explanation.
    pub fn last_kill_explained(&self) -> Option<&killer::KillExplanation> {
        self.last_kill_explained.as_deref()
    }

    /// The killer's view at `now_ms` for `status`: every candidate priced
    /// (reuse within the horizon, expected time until reuse, relaunch cost,
    /// memory a kill frees, why it is not eligible), the victim a kill would
    /// take now and why it wins (the ranking of [`Self::kill_step`] outside
    /// a launch; during one, a kill must also cover what is missing), and
    /// the latest kill with why its victim won.
    pub fn kill_outlook(&self, procs: &[ProcInfo], now_ms: u64) -> KillOutlook {
        let (mut cands, _) = self.candidates(procs);
        self.predict(&mut cands, now_ms);
        let ranked = killer::rank(&self.cfg.killer, self.killer_now_ms(now_ms), &cands);
        let mut priced: Vec<Option<OutlookEntry>> = vec![None; cands.len()];
        for r in &ranked {
            priced[r.index] = Some(OutlookEntry {
                priced: killer::priced(&cands[r.index], r),
                excluded: None,
            });
        }
        let candidates = cands
            .iter()
            .zip(priced)
            .map(|(c, p)| {
                p.unwrap_or_else(|| OutlookEntry {
                    priced: killer::PricedCandidate {
                        app: c.app.clone(),
                        freed_bytes: killer::freed_bytes(c),
                        p_reuse: c.reuse.map(|e| e.p_reuse),
                        expected_idle_s: c.reuse.map(|e| e.expected_idle_ms / 1000.0),
                        relaunch_cost_ms: c.relaunch_cost_ms,
                        value_mib_h_per_s: None,
                        recent: false,
                    },
                    excluded: killer::exclusion(c).map(Reason::name),
                })
            })
            .collect();
        let next = match self.cfg.killer_strategy() {
            KillerStrategy::Lru => None,
            _ => killer::explain(&cands, &ranked, killer::decide(&ranked).reason),
        };
        let last = self.last_kill_explained().cloned();
        KillOutlook {
            horizon_ms: self.cfg.killer.reuse_horizon_ms,
            candidates,
            next_victim_why: next.as_ref().map(why_it_won),
            next_victim: next,
            last_kill_why: last.as_ref().map(why_it_won),
            last_kill: last,
            kills_avoided_by_page_out: self.stats.kills_avoided_by_page_out,
        }
    }

    /// Recomputes every profiled app's relaunch cost on the curve.
    pub(super) fn refresh_relaunch_costs(&mut self) {
        self.relaunch_costs = self
            .profiles
            .iter()
            .map(|(a, p)| (a.clone(), killer::relaunch_cost_ms(p, &self.curve)))
            .collect();
    }

    /// The relaunch cost of `app`, ms: its profile's launch set on the
    /// curve; without a profile, `bytes` (its relaunch footprint, or what
    /// it holds) read in readahead windows.
    fn relaunch_cost_of(&self, app: &str, bytes: u64) -> f64 {
        match self.relaunch_costs.get(app) {
            Some(&ms) => ms,
            None => self.curve.read_secs(bytes, killer::READAHEAD_BYTES) * 1000.0,
        }
    }

    /// Prices the candidates' reuse at `now_ms` (the foreground app's
    /// successors count).
    pub fn predict(&self, cands: &mut [Candidate], now_ms: u64) {
        let at = self.unix_ms(now_ms);
        let fg = self.foreground.as_deref();
        let horizon = self.cfg.killer.reuse_horizon_ms;
        for c in cands.iter_mut() {
            c.reuse = self.usage.estimate(&c.app, fg, at, horizon);
        }
    }

    /// The killer's clock: the scheduler's ms clock shifted by one recency
    /// window, so "never used" (0) is always outside the window.
    pub fn killer_now_ms(&self, now_ms: u64) -> u64 {
        now_ms + self.cfg.killer.recency_window_ms
    }

    /// Builds the killer's candidates: one per app with processes in the
    /// domain (pid = its lowest pid), with the identities of its processes.
    /// Processes of no app are never candidates. `last_used_ms` is on the
    /// [`Self::killer_now_ms`] clock.
    pub fn candidates(&self, procs: &[ProcInfo]) -> (Vec<Candidate>, Vec<Vec<ProcId>>) {
        // Group by app name (sorted, as a map would; processes in list order).
        let mut order: Vec<(&str, usize)> = procs
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.app.as_deref().map(|a| (a, i)))
            .collect();
        order.sort_unstable();
        let window = self.cfg.killer.recency_window_ms;
        let mut cands = Vec::new();
        let mut ids = Vec::new();
        for group in order.chunk_by(|x, y| x.0 == y.0) {
            let app = group[0].0;
            let ps = || group.iter().map(|&(_, i)| &procs[i]);
            let relaunch = self
                .profiles
                .get(app)
                .map(|p| p.relaunch_footprint_bytes)
                .filter(|&b| b > 0);
            let state = self.apps.get(app);
            let last_used = state.and_then(|a| a.last_used_ms).map_or(0, |t| t + window);
            let current: u64 = ps().filter_map(|p| p.footprint_bytes).sum();
            let resident_anon = ps()
                .any(|p| p.anon_bytes.is_some())
                .then(|| ps().filter_map(|p| p.anon_bytes).sum::<u64>());
            let anon = resident_anon.map(|r| r + ps().filter_map(|p| p.swap_bytes).sum::<u64>());
            let unknown_relaunch =
                (current as f64 * self.cfg.killer.unknown_relaunch_fraction) as u64;
            cands.push(Candidate {
                pid: ps().map(|p| p.pid).min().unwrap_or(0),
                app: app.to_string(),
                current_bytes: current,
                relaunch_bytes: relaunch,
                last_used_ms: last_used,
                foreground: ps().any(|p| self.is_foreground_with(p, state)),
                protected: ps().any(|p| p.protected || self.cfg.protected_comms.contains(&p.comm)),
                is_self: ps().any(|p| p.pid <= 1 || self.self_pids.contains(&p.pid)),
                oom_score_adj: ps().map(|p| p.oom_score_adj).max().unwrap_or(0),
                anon_bytes: anon,
                resident_anon_bytes: resident_anon,
                reuse: None,
                relaunch_cost_ms: Some(
                    self.relaunch_cost_of(app, relaunch.unwrap_or(unknown_relaunch)),
                ),
            });
            ids.push(ps().map(ProcInfo::id).collect());
        }
        (cands, ids)
    }

    /// Whether a process's footprint is of no use to the killer: it belongs
    /// to no app, or it is a foreground process by the rule
    /// [`Self::candidates`] applies (which makes its whole app no victim).
    /// Drivers skip measuring those: reading a footprint
    /// (`/proc/PID/smaps_rollup`) walks the process's page tables under its
    /// mmap lock, which the launching app needs for every fault and mapping.
    pub fn footprint_unneeded(&self, p: &ProcInfo) -> bool {
        p.app.is_none() || self.is_foreground_proc(p)
    }

    /// The killer's part of a tick, once [`Self::kill_wanted`] said yes and
    /// the processes' footprints were read. Returns the victim app (None
    /// when nothing was killed: no candidate, or its memory was paged out
    /// instead).
    pub fn kill_step(
        &mut self,
        s: &DomainSample,
        procs: &[ProcInfo],
        m: &mut dyn Mechanisms,
    ) -> Option<String> {
        let (mut cands, ids) = self.candidates(procs);
        let now_k = self.killer_now_ms(s.now_ms);
        let (mut d, explained) = match self.cfg.killer_strategy() {
            KillerStrategy::Lru => (killer::choose_victim_lru(&self.cfg.killer, &cands), None),
            _ => {
                self.predict(&mut cands, s.now_ms);
                let mut ranked = killer::rank(&self.cfg.killer, now_k, &cands);
                self.cover_the_launch(s, &cands, &mut ranked);
                let d = killer::decide(&ranked);
                let e = killer::explain(&cands, &ranked, d.reason);
                (d, e)
            }
        };
        let kcfg = &self.cfg.killer;
        if d.reason == Reason::KillRecentLastResort
            && !killer::last_resort_allowed(kcfg, &self.pressure(s))
        {
            d.victim = None;
            d.reason = Reason::KillDeferredRecent;
        }
        let Some(i) = d.victim else {
            if self.last_kill_reason != Some(d.reason) {
                let detail = format!(
                    "no kill: {} candidates, none eligible{}",
                    cands.len(),
                    if d.reason == Reason::KillDeferredRecent {
                        " (only recently used apps, and the domain is not about to run out)"
                    } else {
                        ""
                    }
                );
                self.log(s.now_ms, "kill", Some(d.reason), detail);
                self.last_kill_reason = Some(d.reason);
            }
            return None;
        };
        if self.page_out_instead(s, &cands[i], &ids[i], m) {
            return None;
        }
        let c = &cands[i];
        let recency = (c.last_used_ms > 0).then(|| now_k.saturating_sub(c.last_used_ms) / 1000);
        let mut killed = 0;
        let mut reaped = false;
        let mut failures = Vec::new();
        for &id in &ids[i] {
            match m.kill().kill(id, d.reason) {
                Ok(o) => {
                    killed += 1;
                    reaped |= o.reaped;
                }
                Err(MechError::Vanished(_)) => {}
                Err(e) => failures.push(format!("pid {}: {e}", id.pid)),
            }
        }
        let p = self.pressure(s);
        let why = explained
            .as_ref()
            .map_or(String::new(), |e| format!("; {}", why_it_won(e)));
        let detail = format!(
            "killed {} ({} of {} processes, pid {}): ΔM {} bytes, footprint {} bytes, frees {} bytes ({} back now), relaunch {}, last used {}, reaped {reaped}{why}; \
             trigger: available {} of {} bytes, anon {} / file {} bytes, swap free {} of {} bytes, PSI some avg10 {:.1} %, over the window {}, relaunch room {} bytes",
            c.app,
            killed,
            ids[i].len(),
            c.pid,
            d.net_freed_bytes,
            c.current_bytes,
            killer::freed_bytes(c),
            killer::returned_bytes(c, s.swapped_ram_share),
            c.relaunch_bytes
                .map_or("unknown".to_string(), |b| format!("{b} bytes")),
            recency.map_or("never".to_string(), |r| format!("{r} s ago")),
            p.avail_bytes,
            p.total_bytes,
            p.anon_bytes,
            p.file_bytes,
            p.swap_free_bytes,
            p.swap_total_bytes,
            p.psi_some_avg10,
            p.psi_some_window
                .map_or("unknown".to_string(), |w| format!("{w:.1} %")),
            p.relaunch_need_bytes,
        );
        self.last_kill_ms = Some(s.now_ms);
        let missing = self
            .floor_bytes(s.total_bytes)
            .saturating_sub(s.avail_bytes);
        self.reaped_settle_until_below = reaped.then(|| {
            if killer::freed_bytes(c) < missing {
                u64::MAX
            } else {
                s.avail_bytes
            }
        });
        self.last_kill_reason = Some(d.reason);
        self.stats.count_kill(d.reason, c.current_bytes);
        let app = c.app.clone();
        let mark = Mark::Kill {
            app: app.clone(),
            pid: c.pid,
            net_freed_bytes: d.net_freed_bytes,
        };
        self.log_marked(s.now_ms, "kill", Some(d.reason), detail, Some(mark));
        if let Some(e) = explained {
            let e = Box::new(e);
            if let Some(last) = self.recent.back_mut() {
                last.explain = Some(e.clone());
            }
            if let Some(last) = self.pending.last_mut() {
                last.explain = Some(e.clone());
            }
            self.last_kill_explained = Some(e);
        }
        for f in failures {
            self.log(
                s.now_ms,
                "error",
                None,
                format!("kill of {app} failed: {f}"),
            );
        }
        if killed > 0 {
            self.clear_announced(&app);
            self.end_launching(&app);
        }
        Some(app)
    }

    /// Reclaim, not kill: when no app is launching and swap has room for
    /// what is missing (memory below the trigger level) beyond its capacity
    /// bound, pages the victim's resident anonymous memory out to swap. True when that kept up (moved what was missing,
    /// or at least what the domain allocated in the last tick), so no kill
    /// is needed now; the trigger is asked again at the next tick, after
    /// the settle time. False when a kill is still needed.
    /// During a launch, the apps whose kill covers what is missing (the
    /// memory below the trigger level plus what the domain allocated in
    /// the last tick) go first, each group in its order. A launch
    /// allocates faster than reclaim frees (the AppFlow paper §4.2); a
    /// cheaper victim that frees less is followed by a second kill within
    /// the settle time, or by the kernel's OOM killer (simulated on
    /// pixel7-6gb, the 48-user fleet and the 100-day seed 3: 7 OOM kills,
    /// each after small kills within a second of a GB-scale launch; 1
    /// with this rule).
    ///
    /// Among the recently used apps (the last resort), the kill–relaunch
    /// loop of the AppFlow paper §4.3 (Fig. 12a) is broken by one victim
    /// that covers what the launches still need (their profiles' M_sum
    /// and files less what they allocated so far) on top of what is
    /// missing now: the smallest app that covers it, else the largest
    /// (§6.4.2: fewer LMK events "by prioritizing the termination of
    /// memory-intensive apps"). Ordered by ΔM instead, the recent apps went
    /// in series of small kills: on `high` (Pixel 8 6 GB, seeds 1-5) 21-23
    /// kills against lmkd's 16; 10-12 with the launch's need alone (a
    /// victim that covered it left the floor short, and a second kill
    /// followed), 9 with what is missing added (docs/killer.md).
    ///
    /// The apps past the recency window keep their priced order, the
    /// ones that cover what is missing first; but the second kill of a
    /// launch must cover what the launches still need. Small kills one
    /// after another during a GB-scale launch let page cache and swap run
    /// out before the launch ended: one OOM kill of a simulated user (the
    /// 48-user fleet, u0006-work on the Pixel 7 6 GB: two kills in a
    /// second of a Roblox launch, then the OOM killer's), none with it.
    ///
    /// The apps past the window are counted at what they free, swapped
    /// memory whole: freed swap gives anonymous reclaim its room back (a
    /// kill comes with swap at its bound), and the cold apps in swap are
    /// the ones whose relaunch costs least. Counted at what they give back
    /// now, the GB-scale apps still resident covered first, and the
    /// simulated 1,000-user fleet lost more of them (Pixel 7: users worse
    /// on GB-scale cold relaunches 70 → 101, docs/results-log-bench.md).
    /// The recent apps are the last resort: each kill is a relaunch the
    /// user is about to make, so each covers with what it gives back now
    /// ([`killer::returned_bytes`]). Counted whole, apps mostly in zram
    /// covered on paper, gave a memory cgroup a few MB, and the next
    /// launch killed again (the testbed's heavier multitask: 27 apps lost
    /// in 3 repetitions, 19 and 20 after in two runs; the kernel's OOM
    /// killer 16).
    fn cover_the_launch(
        &self,
        s: &DomainSample,
        cands: &[killer::Candidate],
        ranked: &mut [killer::Ranked],
    ) {
        if !self.any_launching() {
            return;
        }
        let missing = self
            .floor_bytes(s.total_bytes)
            .saturating_sub(s.avail_bytes)
            .saturating_add(self.last_alloc_pages.saturating_mul(PAGE_BYTES));
        let need = self.launches_remaining_bytes().saturating_add(missing);
        // A kill already made during a launch on now: the next is the
        // second of a series, and it too covers what the launches still
        // need, whichever tier it comes from.
        let series = self.last_kill_ms.is_some_and(|k| {
            self.apps
                .values()
                .any(|a| a.launching_since.is_some_and(|t| k >= t))
        });
        // Stable: each group keeps the rank order.
        ranked.sort_by_key(|r| {
            if r.recent {
                // What its kill gives back to M_aval now.
                let back = killer::returned_bytes(&cands[r.index], s.swapped_ram_share);
                let covers = back >= need;
                let size = if covers { back } else { u64::MAX - back };
                (true, !covers, size)
            } else {
                (
                    false,
                    r.freed_bytes < if series { need } else { missing },
                    0,
                )
            }
        });
    }

    /// What the apps launching now still need: each profile's M_sum and
    /// launch files less what the domain allocated during its launch.
    fn launches_remaining_bytes(&self) -> u64 {
        self.apps
            .iter()
            .filter(|(_, a)| a.launching_since.is_some())
            .map(|(name, a)| {
                let need = self
                    .profiles
                    .get(name)
                    .map_or(0, |p| p.anon_launch_bytes.saturating_add(p.file_bytes()));
                let allocated: u64 = a.launch_alloc.iter().map(|&t| u64::from(t)).sum();
                need.saturating_sub(allocated.saturating_mul(PAGE_BYTES))
            })
            .sum()
    }

    fn page_out_instead(
        &mut self,
        s: &DomainSample,
        c: &Candidate,
        ids: &[ProcId],
        m: &mut dyn Mechanisms,
    ) -> bool {
        let k = &self.cfg.killer;
        // During a launch anonymous writeback is what the AppFlow paper
        // §4.2 keeps out of the way (file pages first, anonymous pages after
        // the burst): a page-out at 5× the cost of a file drop would hold
        // up the launch that a kill frees memory for at once.
        if !k.page_out_before_kill || self.page_out_unsupported || self.any_launching() {
            return false;
        }
        let floor = self.floor_bytes(s.total_bytes);
        let missing = floor.saturating_sub(s.avail_bytes);
        let resident = c.resident_anon_bytes.unwrap_or(0);
        // Swap at its capacity bound (free below the trigger's share) is
        // what makes a kill necessary (§4.3: anonymous reclaim "is bounded
        // ... by zRAM capacity"); a page-out needs room beyond that bound.
        let bound = (k.trigger_swap_free_fraction * s.swap_total_bytes as f64) as u64;
        if missing == 0 || resident == 0 || s.swap_free_bytes.saturating_sub(bound) < missing {
            return false;
        }
        let mut moved = 0;
        let mut want = missing.min(resident);
        for id in ids {
            if want == 0 {
                break;
            }
            match m.reclaim().page_out_anon(id.pid, want) {
                Ok(b) => {
                    moved += b;
                    want = want.saturating_sub(b);
                }
                Err(MechError::Unsupported(what)) => {
                    self.page_out_unsupported = true;
                    self.log(
                        s.now_ms,
                        "error",
                        None,
                        format!("page-out before a kill is off: kernel feature missing: {what}"),
                    );
                    break;
                }
                Err(_) => {}
            }
        }
        let allocated = self.last_alloc_pages.saturating_mul(PAGE_BYTES);
        let kept_up = moved > 0 && moved >= missing.min(allocated.max(1));
        let detail = format!(
            "{} {}: paged out {moved} of its {resident} resident anonymous bytes, {missing} bytes below the trigger level, {allocated} bytes allocated in the last tick, swap free {} bytes",
            if kept_up { "no kill of" } else { "page-out could not keep up, killing" },
            c.app,
            s.swap_free_bytes
        );
        if kept_up {
            // The memory moved is coming back: wait the settle time before
            // the trigger is asked again, as after a kill.
            self.last_kill_ms = Some(s.now_ms);
            self.reaped_settle_until_below = None;
            self.last_kill_reason = Some(Reason::KillAvoidedByPageOut);
            self.stats.kills_avoided_by_page_out += 1;
            self.log(s.now_ms, "kill", Some(Reason::KillAvoidedByPageOut), detail);
        } else if moved > 0 {
            self.log(s.now_ms, "reclaim", None, detail);
        }
        kept_up
    }
}

/// One candidate in [`KillOutlook`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OutlookEntry {
    /// As priced (no value for an excluded one).
    #[serde(flatten)]
    pub priced: killer::PricedCandidate,
    /// Why it is not eligible (a reason name), if it is not.
    pub excluded: Option<&'static str>,
}

/// The killer's view for `status` ([`Scheduler::kill_outlook`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KillOutlook {
    /// The horizon of the reuse prediction, ms.
    pub horizon_ms: u64,
    /// Every app with processes, priced.
    pub candidates: Vec<OutlookEntry>,
    /// The victim a kill would take now, and the candidates it beats.
    pub next_victim: Option<killer::KillExplanation>,
    /// Why it would win, in words.
    pub next_victim_why: Option<String>,
    /// The latest kill's explanation.
    pub last_kill: Option<killer::KillExplanation>,
    /// Why its victim won, in words.
    pub last_kill_why: Option<String>,
    /// Kills avoided by paging the victim out instead, so far.
    pub kills_avoided_by_page_out: u64,
}

/// The victim's reason in words, with the runner-up.
fn why_it_won(e: &killer::KillExplanation) -> String {
    let v = &e.ranked[0];
    let pct =
        |p: Option<f64>| p.map_or("no history".to_string(), |p| format!("{:.0} %", p * 100.0));
    let hours = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{:.1} h", s / 3600.0));
    let ms = |c: Option<f64>| c.map_or("-".to_string(), |c| format!("{c:.0} ms"));
    let value = |x: Option<f64>| x.map_or("∞".to_string(), |x| format!("{x:.3}"));
    let mut out = format!(
        "won by {}: reuse {} within the horizon, back in {}, relaunch {}, frees {} MiB, {} MiB·h per s of expected relaunch",
        e.reason.name(),
        pct(v.p_reuse),
        hours(v.expected_idle_s),
        ms(v.relaunch_cost_ms),
        v.freed_bytes / crate::MIB,
        value(v.value_mib_h_per_s),
    );
    if let Some(r) = e.ranked.get(1) {
        out.push_str(&format!(
            "; next {}: reuse {}, back in {}, relaunch {}, frees {} MiB, {}",
            r.app,
            pct(r.p_reuse),
            hours(r.expected_idle_s),
            ms(r.relaunch_cost_ms),
            r.freed_bytes / crate::MIB,
            value(r.value_mib_h_per_s),
        ));
    }
    out.push_str(&format!(" ({} eligible)", e.eligible));
    out
}

#[cfg(test)]
mod tests {
    use crate::mechanism::{Call, Recorder};
    use crate::reason::Reason;
    use crate::reuse::{DAY_MS, HOUR_MS};
    use crate::scheduler::tests::{ev, sched_of};
    use crate::scheduler::{DomainSample, EventKind, ProcInfo, Scheduler};
    use crate::MIB;

    /// A process of `app` holding `anon_mib` of anonymous memory (a third
    /// of it swapped) and nothing else.
    fn proc_of(pid: u32, app: &str, anon_mib: u64) -> ProcInfo {
        ProcInfo {
            pid,
            start_time: u64::from(pid),
            comm: app.into(),
            app: Some(app.into()),
            oom_score_adj: 900,
            footprint_bytes: Some(anon_mib * MIB),
            anon_bytes: Some(anon_mib * MIB - anon_mib * MIB / 3),
            swap_bytes: Some(anon_mib * MIB / 3),
            ..Default::default()
        }
    }

    /// Memory low, mostly anonymous, no swap: the trigger fires.
    fn low(now_ms: u64) -> DomainSample {
        DomainSample {
            now_ms,
            total_bytes: 6144 * MIB,
            avail_bytes: 100 * MIB,
            anon_bytes: 5000 * MIB,
            file_bytes: 300 * MIB,
            ..Default::default()
        }
    }

    /// Opens `app` at `t` for `mins` minutes, then goes home.
    fn session(s: &mut Scheduler, r: &mut Recorder, app: &str, t: u64, mins: u64) {
        ev(s, r, EventKind::Foreground, app, t);
        ev(s, r, EventKind::Background, app, t + mins * 60_000);
    }

    /// Two weeks: the big app every evening at 20:00 for an hour, a chat
    /// app every morning, a 300 MB app every third day around midday.
    fn evenings(s: &mut Scheduler, r: &mut Recorder) {
        for d in 0..14 {
            let day = d * DAY_MS;
            session(s, r, "chat", day + 8 * HOUR_MS, 5);
            if d % 3 == 0 {
                session(s, r, "rare", day + (11 + d % 4) * HOUR_MS, 10);
            }
            session(s, r, "evening", day + 20 * HOUR_MS, 60);
        }
    }

    #[test]
    fn a_big_app_used_every_evening_survives_the_afternoon() {
        let mut s = sched_of("appflow", &["evening", "rare", "chat"]);
        let mut r = Recorder::default();
        evenings(&mut s, &mut r);
        // Day 15, 15:00: memory runs out while chat is in front.
        let now = 14 * DAY_MS + 15 * HOUR_MS;
        session(&mut s, &mut r, "chat", now - 10 * 60_000, 5);
        ev(&mut s, &mut r, EventKind::Foreground, "chat", now - 60_000);
        let procs = [
            proc_of(10, "evening", 2000),
            proc_of(11, "rare", 300),
            proc_of(12, "chat", 150),
        ];
        r.calls.clear();
        // The big app, idle 18 h, frees 2000 MB × 18 h against 300 MB ×
        // 48 h: the memory-time since last use (the order before) took it;
        // it is opened again in 5 h, and its relaunch is dear.
        assert_eq!(
            s.kill_step(&low(now), &procs, &mut r).as_deref(),
            Some("rare")
        );
        assert_eq!(
            r.calls,
            vec![Call::Kill {
                pid: 11,
                reason: Reason::KillLeastExpectedCost
            }]
        );
        // The decision says why, with the candidates' reuse, cost and memory.
        let d = s.recent_decisions().last().unwrap();
        let e = d.explain.as_ref().expect("explained");
        assert_eq!(e.victim, "rare");
        assert_eq!(e.ranked[0].app, "rare");
        assert_eq!(e.ranked[1].app, "evening");
        let (v, b) = (&e.ranked[0], &e.ranked[1]);
        assert!(
            b.p_reuse.unwrap() > 0.99 && b.expected_idle_s.unwrap() < 8.0 * 3600.0,
            "{e:?}"
        );
        assert!(v.p_reuse.unwrap() < b.p_reuse.unwrap());
        assert!(b.relaunch_cost_ms.unwrap() > v.relaunch_cost_ms.unwrap());
        assert_eq!(b.freed_bytes, 2000 * MIB);
        assert!(
            d.detail.contains("won by kill_least_expected_cost"),
            "{}",
            d.detail
        );
        assert_eq!(s.last_kill_explained().unwrap().victim, "rare");
    }

    #[test]
    fn the_outlook_prices_every_candidate_and_says_why_the_victim_wins() {
        let mut s = sched_of("appflow", &["evening", "rare", "chat"]);
        let mut r = Recorder::default();
        evenings(&mut s, &mut r);
        let now = 14 * DAY_MS + 15 * HOUR_MS;
        ev(&mut s, &mut r, EventKind::Foreground, "chat", now - 60_000);
        let procs = [
            proc_of(10, "evening", 2000),
            proc_of(11, "rare", 300),
            proc_of(12, "chat", 150),
        ];
        let o = s.kill_outlook(&procs, now);
        assert_eq!(o.candidates.len(), 3);
        let by = |a: &str| o.candidates.iter().find(|c| c.priced.app == a).unwrap();
        // Each candidate: reuse, relaunch cost, memory freed; the foreground
        // app says why it is not eligible.
        for a in ["evening", "rare"] {
            let c = by(a);
            assert!(c.priced.p_reuse.is_some() && c.priced.relaunch_cost_ms.is_some());
            assert!(c.priced.value_mib_h_per_s.is_some() && c.excluded.is_none());
        }
        assert_eq!(by("evening").priced.freed_bytes, 2000 * MIB);
        assert_eq!(by("chat").excluded, Some("excluded_foreground"));
        assert_eq!(o.next_victim.as_ref().unwrap().victim, "rare");
        let why = o.next_victim_why.as_deref().unwrap();
        assert!(
            why.starts_with("won by kill_least_expected_cost") && why.contains("next evening"),
            "{why}"
        );
        assert!(o.last_kill.is_none() && o.last_kill_why.is_none());
        // A kill is then the latest, with the same words; the outlook is
        // plain JSON for `status`.
        assert_eq!(
            s.kill_step(&low(now), &procs, &mut r).as_deref(),
            Some("rare")
        );
        let o = s.kill_outlook(&procs[..1], now + 1000);
        assert_eq!(o.last_kill.as_ref().unwrap().victim, "rare");
        assert!(o.last_kill_why.unwrap().contains("reuse"));
        let j = serde_json::to_value(s.kill_outlook(&procs, now)).unwrap();
        assert!(j["candidates"][0]["p_reuse"].is_number(), "{j}");
        assert!(j["candidates"][0]["relaunch_cost_ms"].is_number(), "{j}");
        assert!(j["candidates"][0]["freed_bytes"].is_number(), "{j}");
    }

    #[test]
    fn during_a_launch_the_victim_covers_what_is_missing() {
        let mut s = sched_of("appflow", &["evening", "rare", "chat"]);
        let mut r = Recorder::default();
        evenings(&mut s, &mut r);
        let now = 14 * DAY_MS + 15 * HOUR_MS;
        let procs = [
            proc_of(10, "evening", 2000),
            proc_of(11, "rare", 300),
            proc_of(12, "chat", 150),
        ];
        // chat launches with 10 MiB available: 297 MiB below the trigger
        // level (5 % of 6 GiB). rare frees 300 MiB, a hair more: it goes.
        ev(&mut s, &mut r, EventKind::Launch, "chat", now - 1000);
        let mut low10 = low(now);
        low10.avail_bytes = 10 * MIB;
        // Counted at what it frees, its swapped third whole, even where
        // swap gives the domain nothing back (apps past the recency
        // window: see cover_the_launch).
        low10.swapped_ram_share = Some(0.0);
        assert_eq!(s.kill_step(&low10, &procs, &mut r).as_deref(), Some("rare"));
        // With nothing available the launch is short of 307 MiB: a kill of
        // rare would not cover it, so the big app goes, though dearer.
        let mut s2 = sched_of("appflow", &["evening", "rare", "chat"]);
        evenings(&mut s2, &mut r);
        ev(&mut s2, &mut r, EventKind::Launch, "chat", now - 1000);
        let mut empty = low(now);
        empty.avail_bytes = 0;
        assert_eq!(
            s2.kill_step(&empty, &procs, &mut r).as_deref(),
            Some("evening")
        );
        // Without a launch the same shortage takes the cheaper app.
        let mut s3 = sched_of("appflow", &["evening", "rare", "chat"]);
        evenings(&mut s3, &mut r);
        ev(&mut s3, &mut r, EventKind::Foreground, "chat", now - 60_000);
        assert_eq!(
            s3.kill_step(&empty, &procs, &mut r).as_deref(),
            Some("rare")
        );
    }

    #[test]
    fn among_recent_apps_one_victim_covers_what_the_launch_still_needs() {
        // Three apps used in the last minutes (all deferred), then a
        // launch of `game` whose profile needs `need_mib` (M_sum, no
        // files) on top of the 207 MiB missing below the floor (5 % of
        // 6 GiB, 100 MiB available): the smallest app that covers both
        // goes, else the largest, not the one with the largest ΔM (the
        // AppFlow paper §4.3 Fig. 12a).
        let victim = |need_mib: u64, share: Option<f64>| {
            let mut s = sched_of("appflow", &["big", "mid", "small", "game"]);
            let mut p = crate::profile::synthetic("game", 0, 0, 100 * MIB);
            p.anon_launch_bytes = need_mib * MIB;
            s.set_profiles(vec![p]);
            let mut r = Recorder::default();
            let now = 3 * HOUR_MS;
            for (i, app) in ["big", "mid", "small"].iter().enumerate() {
                let t = now - (10 - i as u64) * 60_000;
                ev(&mut s, &mut r, EventKind::Foreground, app, t);
                ev(&mut s, &mut r, EventKind::Background, app, t + 30_000);
            }
            ev(&mut s, &mut r, EventKind::Launch, "game", now - 500);
            let procs = [
                proc_of(10, "big", 1500),
                proc_of(11, "mid", 1100),
                proc_of(12, "small", 300),
            ];
            let sample = DomainSample {
                swapped_ram_share: share,
                ..low(now)
            };
            s.kill_step(&sample, &procs, &mut r)
        };
        assert_eq!(victim(800, None).as_deref(), Some("mid"));
        assert_eq!(victim(50, None).as_deref(), Some("small"));
        assert_eq!(victim(1000, None).as_deref(), Some("big"));
        assert_eq!(victim(2000, None).as_deref(), Some("big"));
        // A third of each app is in swap. Where swap takes none of the
        // domain's memory (a memory cgroup; zram's pool is charged to no
        // cgroup), `mid` gives back 733 MiB, short of 800 + 207; `big`
        // (1,000 MiB back) is the largest, and it goes.
        assert_eq!(victim(800, Some(0.0)).as_deref(), Some("big"));
        assert_eq!(victim(400, Some(0.0)).as_deref(), Some("mid"));
        // Swap that costs its whole size gives back what the app holds.
        assert_eq!(victim(800, Some(1.0)).as_deref(), Some("mid"));
    }

    #[test]
    fn room_is_kept_for_the_app_likely_next_and_another_app_is_the_victim() {
        let mut s = sched_of("appflow", &["evening", "rare", "chat"]);
        let mut r = Recorder::default();
        // Two weeks: chat at 19:50, then the big app at 20:00; a 300 MB
        // app every third day at 11:00.
        for d in 0..14 {
            let day = d * DAY_MS;
            if d % 3 == 0 {
                session(&mut s, &mut r, "rare", day + 11 * HOUR_MS, 10);
            }
            session(&mut s, &mut r, "chat", day + 19 * HOUR_MS + 50 * 60_000, 5);
            session(&mut s, &mut r, "evening", day + 20 * HOUR_MS, 60);
        }
        let now = 14 * DAY_MS + 19 * HOUR_MS + 50 * 60_000;
        ev(&mut s, &mut r, EventKind::Foreground, "chat", now);
        // The big app holds 6000 MB, a third of it (2000 MB) in swap.
        let procs = [
            proc_of(10, "evening", 6000),
            proc_of(11, "rare", 300),
            proc_of(12, "chat", 150),
        ];
        // Swap at its bound, memory mostly anonymous, 1.5 GB available:
        // not low, and more than its relaunch brings back (44 % of 2000 MB).
        let sample = |now_ms, avail_mib| DomainSample {
            now_ms,
            total_bytes: 6144 * MIB,
            avail_bytes: avail_mib * MIB,
            anon_bytes: 5000 * MIB,
            file_bytes: 300 * MIB,
            swap_total_bytes: 1700 * MIB,
            swap_free_bytes: 85 * MIB,
            ..Default::default()
        };
        let st = sample(now + 100, 1536);
        assert!(
            s.wants_footprints(&st),
            "the headroom weighs the footprints"
        );
        r.calls.clear();
        s.tick(&st, now + 100, &procs, &mut r);
        assert!(
            r.calls.iter().all(|c| !matches!(c, Call::Kill { .. })),
            "{:?}",
            r.calls
        );
        // A second later 600 MB: the relaunch would fault back more than
        // that, on the user's time. Another app goes now.
        let st = sample(now + 1100, 600);
        assert_eq!(s.kill_wanted(&st), Ok(Reason::KillRelaunchHeadroom));
        s.tick(&st, now + 1100, &procs, &mut r);
        let kills: Vec<_> = r
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Kill { pid, .. } => Some(*pid),
                _ => None,
            })
            .collect();
        assert_eq!(kills, vec![11], "{:?}", r.calls);
        // Off (the same history): no room is kept.
        let mut cfg = s.config().clone();
        cfg.killer.relaunch_min_p_next = 1.0;
        let apps = ["evening", "rare", "chat"].map(String::from);
        let mut off = Scheduler::new(cfg, crate::scheduler::tests::curve(), &apps, &[]);
        off.set_usage_model(s.usage_model().clone());
        ev(&mut off, &mut r, EventKind::Foreground, "chat", now);
        assert!(!off.wants_footprints(&st));
        off.tick(&st, now + 1100, &procs, &mut r);
        assert_eq!(off.kill_wanted(&st), Err(Reason::KillNotNeeded));
    }

    #[test]
    fn the_second_kill_of_a_launch_covers_what_it_still_needs() {
        let mut s = sched_of("appflow", &["evening", "rare", "chat"]);
        let mut p = crate::profile::synthetic("chat", 0, 0, 100 * MIB);
        p.anon_launch_bytes = 1500 * MIB;
        s.set_profiles(vec![p]);
        let mut r = Recorder::default();
        evenings(&mut s, &mut r);
        let now = 14 * DAY_MS + 15 * HOUR_MS;
        ev(&mut s, &mut r, EventKind::Launch, "chat", now - 1000);
        let mut low10 = low(now);
        low10.avail_bytes = 10 * MIB;
        // The first kill covers what is missing (297 MiB): rare, cheaper.
        let procs = [proc_of(10, "evening", 2000), proc_of(11, "rare", 300)];
        assert_eq!(s.kill_step(&low10, &procs, &mut r).as_deref(), Some("rare"));
        // Half a second later, the same launch, a 300 MiB app again: the
        // second kill covers the launch's 1.5 GB still to come, so the
        // big app goes rather than a second small one.
        let procs = [proc_of(10, "evening", 2000), proc_of(13, "rare", 300)];
        let mut later = low10;
        later.now_ms = now + 500;
        assert_eq!(
            s.kill_step(&later, &procs, &mut r).as_deref(),
            Some("evening")
        );
    }

    #[test]
    fn a_big_app_not_used_for_a_week_goes_before_a_small_daily_one() {
        let mut s = sched_of("appflow", &["big", "daily", "home"]);
        let mut r = Recorder::default();
        // The big app every other evening in week two; then only the daily
        // app, for eight days.
        for d in 0..21 {
            let day = d * DAY_MS;
            if (6..=12).contains(&d) && d % 2 == 0 {
                session(&mut s, &mut r, "big", day + 21 * HOUR_MS, 30);
            }
            session(&mut s, &mut r, "daily", day + 9 * HOUR_MS, 10);
        }
        let now = 21 * DAY_MS + 8 * HOUR_MS;
        ev(&mut s, &mut r, EventKind::Foreground, "home", now - 60_000);
        // After eight idle days the big app is mostly in swap: 30 MiB
        // resident of its 1500 MiB, where the daily app holds 400 MiB. The
        // memory-time since last use (the order before: resident × idle,
        // 30 MiB × 203 h < 400 MiB × 23 h) took the daily app; a kill of
        // the big one frees its swap too, and it is not coming back.
        let mut big = proc_of(10, "big", 1500);
        big.footprint_bytes = Some(30 * MIB);
        big.anon_bytes = Some(20 * MIB);
        big.swap_bytes = Some(1480 * MIB);
        let procs = [big, proc_of(11, "daily", 400)];
        r.calls.clear();
        assert_eq!(
            s.kill_step(&low(now), &procs, &mut r).as_deref(),
            Some("big")
        );
    }

    #[test]
    fn the_predictor_is_deterministic_for_a_seed() {
        let apps = ["a", "b", "c", "d", "e", "f"];
        // One seeded month of opens, replayed into two schedulers; then the
        // same kill decisions, explanations included, bit for bit.
        let run = |seed: u64| {
            let mut s = sched_of("appflow", &apps);
            let mut r = Recorder::default();
            let mut g = crate::rng::SplitMix::new(seed);
            let mut t = 0;
            while t < 30 * DAY_MS {
                let app = apps[g.below(apps.len() as u64) as usize];
                session(&mut s, &mut r, app, t, 1 + g.below(20));
                t += 60_000 + (g.exp(3.0 * HOUR_MS as f64) as u64);
            }
            ev(&mut s, &mut r, EventKind::Foreground, "a", t);
            let procs: Vec<ProcInfo> = apps
                .iter()
                .enumerate()
                .map(|(i, a)| proc_of(10 + i as u32, a, 100 + 50 * i as u64))
                .collect();
            let mut victims = Vec::new();
            let mut left = procs.clone();
            for k in 0..4 {
                let now = t + 45 * 60_000 + k * 1000;
                if let Some(v) = s.kill_step(&low(now), &left, &mut r) {
                    left.retain(|p| p.app.as_deref() != Some(v.as_str()));
                    victims.push(v);
                }
            }
            let json = serde_json::to_string(s.usage_model()).unwrap();
            let explained: Vec<String> = s
                .recent_decisions()
                .filter(|d| d.kind == "kill")
                .map(|d| serde_json::to_string(d).unwrap())
                .collect();
            (victims, json, explained)
        };
        let (a, b) = (run(42), run(42));
        assert_eq!(a, b);
        assert_eq!(a.0.len(), 4);
        assert_ne!(a.1, run(43).1, "another seed, another history");
    }

    #[test]
    fn reclaim_not_kill_when_swap_has_room_and_no_launch_is_on() {
        let mut s = sched_of("appflow", &["idle", "fg"]);
        let mut r = Recorder::default();
        session(&mut s, &mut r, "idle", 0, 5);
        ev(&mut s, &mut r, EventKind::Foreground, "fg", 2 * HOUR_MS);
        let procs = [proc_of(10, "idle", 600), proc_of(11, "fg", 100)];
        let mut smp = low(2 * HOUR_MS + 60_000);
        smp.swap_total_bytes = 2048 * MIB;
        smp.swap_free_bytes = 1500 * MIB;
        smp.psi_some_avg10 = Some(30.0);
        assert!(s.kill_wanted(&smp).is_ok());
        r.calls.clear();
        // Swap has room beyond its bound for the 207 MB missing: the
        // victim's resident anonymous memory is paged out, no kill.
        assert_eq!(s.kill_step(&smp, &procs, &mut r), None);
        assert!(
            matches!(r.calls[..], [Call::PageOut { pid: 10, .. }]),
            "{:?}",
            r.calls
        );
        assert_eq!(s.stats.kills_avoided_by_page_out, 1);
        let d = s.recent_decisions().last().unwrap();
        assert_eq!(d.reason, Some(Reason::KillAvoidedByPageOut));
        // The memory moved is waited for like a kill's.
        assert!(s.kill_wanted(&smp).is_err());
        // While an app launches, the launch gets its memory at once: kill.
        let later = smp.now_ms + 10_000;
        ev(&mut s, &mut r, EventKind::Launch, "fg", later);
        smp.now_ms = later + 100;
        r.calls.clear();
        assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("idle"));
        assert!(
            matches!(r.calls[..], [Call::Kill { pid: 10, .. }]),
            "{:?}",
            r.calls
        );
        // Swap at its bound: nothing to page out to, kill.
        let mut s = sched_of("appflow", &["idle", "fg"]);
        session(&mut s, &mut r, "idle", 0, 5);
        ev(&mut s, &mut r, EventKind::Foreground, "fg", 2 * HOUR_MS);
        smp.now_ms = 2 * HOUR_MS + 60_000;
        smp.swap_free_bytes = 150 * MIB;
        r.calls.clear();
        assert_eq!(s.kill_step(&smp, &procs, &mut r).as_deref(), Some("idle"));
    }
}
