//! The launch model: a launch is a list of phases (read a chunk of the
//! launch files, CPU work, anonymous allocation, swap-in), run in 5 ms steps
//! against the kernel model, with the preload worker using the flash
//! capacity the app leaves idle.
//!
//! Storage model: a reader of block size b gets at most curve(b) (one
//! request in flight); the device's capacity is its large-block rate,
//! shared by all readers. Small reads therefore leave capacity idle
//! (the AppFlow paper §2.2.1: 79 % of the bandwidth unused during app switches),
//! which the idle-class preload worker may use.

use crate::catalog::AppModel;
use crate::catalog::{CHUNKS, LARGE, SMALL};
use crate::device::Device;
use crate::engine::{Holder, Sim};
use crate::peers::{HOT, WARM};
use crate::rng;
use appflow_core::KIB;

/// Launch step, µs.
pub const STEP_US: u64 = 5_000;
const STEP_MS: f64 = STEP_US as f64 / 1000.0;
/// Share of an app's memory touched on a warm/hot relaunch (assumption).
pub const RELAUNCH_WS_FRACTION: f64 = 0.5;
/// A launch running longer than this is cut off and counted as stuck, µs.
const LAUNCH_LIMIT_US: u64 = 600_000_000;

pub use appflow_core::report::LaunchKind;

/// The least a lone cold launch of `m` takes on `dev`, ms, and what bounds
/// it: the longest of its CPU time (at the launch's least jitter, 0.9), its
/// launch files at the device's best read rate, and the fault cost of its
/// anonymous pages. The model may overlap these, never beat any one, so a
/// floor above the launch limit means every launch of the app is cut off.
pub fn cold_launch_floor_ms(dev: &Device, m: &AppModel) -> (f64, String) {
    let best_read = dev
        .read_curve
        .points()
        .iter()
        .map(|p| p.bytes_per_sec)
        .chain(dev.readahead_read_bytes_per_sec)
        .fold(0.0_f64, f64::max);
    let file_bytes = m.file_pages() * appflow_core::PAGE_BYTES;
    let mib = |b: u64| b as f64 / appflow_core::MIB as f64;
    [
        (
            m.spec.cpu_init_ms * dev.cpu_scale * 0.9,
            format!(
                "its CPU time (cpu_init_ms {} × the device's cpu_scale {})",
                m.spec.cpu_init_ms, dev.cpu_scale
            ),
        ),
        (
            file_bytes as f64 / best_read * 1000.0,
            format!(
                "its {:.1} MiB of launch files at the storage's best rate ({} MiB/s)",
                mib(file_bytes),
                short(best_read / appflow_core::MIB as f64)
            ),
        ),
        (
            mib(m.anon_pages * appflow_core::PAGE_BYTES) * dev.anon_fault_ms_per_mib,
            format!(
                "faulting its {:.1} MiB of anonymous memory ({} ms per MiB)",
                mib(m.anon_pages * appflow_core::PAGE_BYTES),
                dev.anon_fault_ms_per_mib
            ),
        ),
    ]
    .into_iter()
    .max_by(|a, b| a.0.total_cmp(&b.0))
    .expect("three bounds")
}

/// `x` for a message: one decimal, or scientific notation below 0.1.
fn short(x: f64) -> String {
    if x >= 0.1 {
        format!("{x:.1}")
    } else {
        format!("{x:.3e}")
    }
}

/// Refuses a device and app set on which a used app's lone cold launch
/// would outlast the launch limit ([`LAUNCH_LIMIT_US`], 10 simulated
/// minutes): every such launch would run its 120,000 steps to be cut off,
/// so a long trace would take hours to say nothing. Constant time per app.
pub fn check_launchable(
    dev: &Device,
    models: &[AppModel],
    used: &[bool],
) -> Result<(), appflow_core::InputError> {
    let limit_ms = (LAUNCH_LIMIT_US / 1000) as f64;
    for (m, _) in models.iter().zip(used).filter(|(_, &u)| u) {
        let (floor_ms, why) = cold_launch_floor_ms(dev, m);
        if floor_ms > limit_ms {
            return Err(appflow_core::InputError::new(format!(
                "app {:?} cannot launch on device {:?}: {why} takes at least {:.0} s, beyond the \
                 simulator's {:.0} s launch limit; a rate or size in the device or app file is out of range",
                m.spec.name,
                dev.name,
                floor_ms / 1000.0,
                limit_ms / 1000.0
            )));
        }
    }
    Ok(())
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
    /// Swap-in of `zram` + `flash` pages; under Ariadne, `hot` of the
    /// zram pages are hot-class pages (the rest warm).
    SwapIn {
        zram: u64,
        flash: u64,
        hot: u64,
    },
}

struct Launch {
    app: usize,
    phases: Vec<Phase>,
    pos: usize,
    /// Time owed by work a step started but could not hold, ms (see [`spend`]).
    owed_ms: f64,
}

/// Spends `ms` of a step's time `t`. What the step cannot hold is owed to
/// the next steps: a read sized to the step takes its time even when direct
/// reclaim for its pages used part of the step, because on a launch thread
/// the kernel reclaims first and then reads (both synchronous in the
/// allocating task's context), so neither hides under the other.
fn spend(t: &mut f64, owed_ms: &mut f64, ms: f64) {
    if ms > *t {
        *owed_ms += ms - *t;
        *t = 0.0;
    } else {
        *t -= ms;
    }
}

/// The pages of a read phase: a share `frac` of `pages`, rounded up. The
/// whole of it (a cold launch) is `pages` itself, without the float round
/// trip, which gives the same value for any count a float holds exactly.
fn share_pages(pages: u64, frac: f64) -> u64 {
    if frac == 1.0 && pages <= 1 << 53 {
        pages
    } else {
        crate::kernel::ceil_u64(pages as f64 * frac)
    }
}

/// Chunk `k`'s share of `n` pages spread over the launch's chunks (the
/// remainder in the last one).
fn chunk_share(n: u64, k: usize) -> u64 {
    let base = n / CHUNKS as u64;
    if k == CHUNKS - 1 {
        n - base * (CHUNKS as u64 - 1)
    } else {
        base
    }
}

/// One step of `dt` ms shared by the launching app and a page-out owing
/// `debt_ms` (wall time on the whole budget of `c` cores): the app's time
/// and the debt left ([`Sim::app_time_beside_daemon`]).
fn beside_daemon(dt: f64, c: f64, debt_ms: f64) -> (f64, f64) {
    if debt_ms <= 0.0 {
        return (dt, 0.0);
    }
    let alone = c.min(1.0);
    let shared = (c / 2.0).min(1.0);
    // Core-ms the page-out gets this step, and the debt it pays.
    let daemon = (debt_ms * c).min(dt * shared);
    let debt = (debt_ms - daemon / c).max(0.0);
    // While it runs the app goes at shared/alone of its speed.
    (dt - daemon / shared * (1.0 - shared / alone), debt)
}

/// A rate in bytes/s as pages per ms.
fn ppm(bytes_per_sec: f64) -> f64 {
    bytes_per_sec / appflow_core::PAGE_BYTES as f64 / 1000.0
}

/// Read rate at a block size on `dev`, pages per ms.
pub(crate) fn rate_ppm(dev: &Device, block_bytes: u64) -> f64 {
    ppm(dev.read_curve.throughput(block_bytes))
}

/// The read rates the launch loop and the worker use at every step, looked
/// up on the device's curve once per run (the same values `rate_ppm` gives).
#[derive(Debug, Clone)]
pub(crate) struct Rates {
    /// Per app and chunk: small-file reads at the chunk's mean small-file
    /// size (the app's and the worker's alike).
    small: Vec<[f64; CHUNKS]>,
    /// The app's reads of large files (the device's readahead).
    readahead: f64,
    /// The worker's large reads (the core's hot-segment size).
    pub hot_segment: f64,
    /// Swap-in from flash (32 KiB swap readahead).
    pub swap_in: f64,
    /// The flash's full rate (its largest-block throughput).
    pub device: f64,
    /// The most the preload worker fills per ms, when its own core bounds
    /// it (`Device::worker_read_bytes_per_sec`).
    worker: Option<f64>,
    /// The apps' large-file reads while the scheduler has raised the
    /// launch readahead (`set_launch_readahead`): the curve's rate at the
    /// raised window, never below [`Rates::readahead`].
    pub(crate) raised: Option<f64>,
}

impl Rates {
    pub(crate) fn new(dev: &Device, models: &[AppModel], hot_segment_bytes: u64) -> Self {
        let last = dev.read_curve.points().last().expect("curve has points");
        Self {
            small: models
                .iter()
                .map(|m| m.small_block_bytes.map(|b| rate_ppm(dev, b)))
                .collect(),
            readahead: match dev.readahead_read_bytes_per_sec {
                Some(r) => ppm(r),
                None => rate_ppm(dev, dev.readahead_bytes),
            },
            hot_segment: rate_ppm(dev, hot_segment_bytes),
            swap_in: rate_ppm(dev, 32 * KIB),
            device: ppm(last.bytes_per_sec),
            worker: dev.worker_read_bytes_per_sec.map(ppm),
            raised: None,
        }
    }

    /// The app's own read of chunk `k`, bucket `b`.
    pub(crate) fn read(&self, a: usize, k: usize, b: usize) -> f64 {
        if b == SMALL {
            self.small[a][k]
        } else {
            self.raised
                .map_or(self.readahead, |r| r.max(self.readahead))
        }
    }

    /// The worker's touch of chunk `k`, bucket `b` of app `a`.
    pub(crate) fn touch(&self, a: usize, k: usize, b: usize) -> f64 {
        if b == SMALL {
            self.small[a][k]
        } else {
            self.hot_segment
        }
    }
}

impl Sim<'_> {
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
                // A switch faults its pages as it runs: its swap-ins, its
                // file reads and its CPU work alternate, chunk by chunk,
                // rather than all swap-ins first. The ASAP paper ("Limitation
                // of Demand-Paging") measures a switch leaving 66 % of the
                // CPU and 85 % of the disk bandwidth idle, because each
                // decompression and each read waits for the fault that
                // needs it.
                let f = RELAUNCH_WS_FRACTION;
                let (zram, hot) = if self.ariadne() {
                    let (hot, warm) = self.ariadne_relaunch_need(a);
                    (hot + warm, hot)
                } else {
                    ((s.anon_zram as f64 * f) as u64, 0)
                };
                let flash = (s.anon_swap as f64 * f) as u64;
                let cpu = m.spec.resume_ms * self.dev.cpu_scale * j / CHUNKS as f64;
                for k in 0..CHUNKS {
                    v.push(Phase::SwapIn {
                        zram: chunk_share(zram, k),
                        flash: chunk_share(flash, k),
                        hot: chunk_share(hot, k),
                    });
                    v.push(Phase::Read {
                        k,
                        frac: f,
                        left: None,
                    });
                    v.push(Phase::Cpu { ms: cpu });
                }
            }
        }
        v
    }

    /// Cold, warm or hot, from the app's state now (the one rule the
    /// testbed uses too: `LaunchKind::classify`).
    pub(crate) fn classify(&self, a: usize) -> LaunchKind {
        let s = &self.st[a];
        let m = &self.models[a];
        let swapped = (s.anon_zram + s.anon_swap) as f64 / s.anon_total().max(1) as f64;
        let cached: u64 = (0..CHUNKS).map(|k| s.cached(k, 0) + s.cached(k, 1)).sum();
        let file_gone = 1.0 - cached as f64 / m.file_pages().max(1) as f64;
        LaunchKind::classify(s.alive, swapped, file_gone)
    }

    /// Runs the launch of `a` in steps until it is ready; returns the time
    /// it became ready, µs.
    pub(crate) fn run_launch(&mut self, a: usize, kind: LaunchKind, start: u64) -> u64 {
        let mut l = Launch {
            app: a,
            phases: self.phases(a, kind),
            pos: 0,
            owed_ms: 0.0,
        };
        let limit = start + LAUNCH_LIMIT_US;
        loop {
            if let Some(done_at) = self.step_launch(&mut l) {
                return done_at;
            }
            if self.now_us >= limit {
                self.counters.stuck_launches += 1;
                return self.now_us;
            }
        }
    }

    /// Bookkeeping once a launch is over: counts, and background growth of
    /// 30-50 % over the post-launch baseline after a cold launch (§4.3),
    /// unless the app gives its own.
    pub(crate) fn finish_launch(&mut self, a: usize, kind: LaunchKind) {
        let s = &mut self.st[a];
        s.launches += 1;
        s.ran_before = true;
        if kind == LaunchKind::Cold {
            let g = match self.models[a].spec.growth_fraction {
                Some(g) => g,
                None => 0.3 + 0.2 * rng::unit(self.cfg.seed, "growth", a as u64, s.launches),
            };
            s.grow_target = (s.anon_total() as f64 * g) as u64;
            s.grown = 0;
            s.grow_start_us = self.now_us;
            if let Err(p) = self.growing.binary_search(&a) {
                self.growing.insert(p, a);
            }
        }
    }

    /// The flash's full rate (its largest-block throughput), pages per ms.
    pub(crate) fn device_ppm(&self) -> f64 {
        self.rates.device
    }

    /// The read rate of the app's current read, pages per ms, if it is reading.
    fn app_rate(&self, l: &Launch) -> Option<f64> {
        let m = &self.models[l.app];
        match l.phases.get(l.pos) {
            Some(Phase::Read { k, frac, left }) => {
                for b in [SMALL, LARGE] {
                    let want = share_pages(m.chunk_pages[*k][b], *frac);
                    let need = want.saturating_sub(self.st[l.app].cached(*k, b));
                    if left.map_or(need, |l| l[b].min(need)) > 0 {
                        return Some(self.rates.read(l.app, *k, b));
                    }
                }
                None
            }
            Some(Phase::SwapIn { flash, .. }) if *flash > 0 => Some(self.rates.swap_in),
            _ => None,
        }
    }

    /// The app's time in a step of `dt` ms on a device whose launch shares
    /// its CPU budget of `c` cores with the scheduler's page-out
    /// (`Device::cpu_budget_cores`): while page-out work is pending the two
    /// runnable threads share the budget fairly (CFS, both at nice 0), each
    /// on at most one core. Costs in the device's units are wall time on the
    /// whole budget (the testbed's reclaim costs are divided by `c`).
    fn app_time_beside_daemon(&mut self, dt: f64) -> f64 {
        let Some(c) = self.dev.cpu_budget_cores else {
            return dt;
        };
        let (t, debt) = beside_daemon(dt, c, self.daemon_cpu_debt_ms);
        self.daemon_cpu_debt_ms = debt;
        t
    }

    /// One 5 ms step of a launch. Returns the completion time when the
    /// launch finished within the step.
    fn step_launch(&mut self, l: &mut Launch) -> Option<u64> {
        let a = l.app;
        let dt = STEP_MS;
        let dev_ppm = self.device_ppm();
        let demand = self.app_rate(l).unwrap_or(0.0);
        let scale = if demand > dev_ppm {
            dev_ppm / demand
        } else {
            1.0
        };
        // Capacity used this step, in pages at the device's full rate.
        let mut cap_used = 0.0;
        // Time the app had a read in service this step, ms.
        let mut read_ms = 0.0;

        // 1. kswapd (own core).
        self.run_kswapd(dt);

        // 2. The app (less of the step while the scheduler's page-out
        //    shares its cores, see `app_time_beside_daemon`).
        let mut t = self.app_time_beside_daemon(dt);
        let paid = l.owed_ms.min(t);
        t -= paid;
        l.owed_ms -= paid;
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
                    self.gain_anon(a);
                    self.st[a].window.demand_anon += got;
                    self.anon_total += got;
                    // Faulting in and filling each new page, on the app's core.
                    spend(
                        &mut t,
                        &mut l.owed_ms,
                        got as f64 * self.dev.anon_fault_ms_per_mib / 256.0,
                    );
                    if got >= pages {
                        l.pos += 1;
                    } else {
                        l.phases[l.pos] = Phase::Alloc { pages: pages - got };
                    }
                }
                Phase::SwapIn { zram, flash, hot } => {
                    // zram: decompression on the CPU; flash: 32 KiB swap readahead.
                    // Pages a switch prepager already brought back are not faulted.
                    let credit = self.take_prepage_credit(a, zram);
                    let zram = zram - credit;
                    let hot = hot.min(zram);
                    let s = &self.st[a];
                    let zram = zram.min(s.anon_zram);
                    let flash = flash.min(s.anon_swap);
                    if zram + flash == 0 {
                        l.pos += 1;
                        continue;
                    }
                    let from_zram = zram > 0;
                    let class = if hot > 0 { HOT } else { WARM };
                    let ms_per_page = if from_zram && self.ariadne() {
                        self.ariadne_decomp_ms(class)
                    } else if from_zram {
                        self.dev.zram_decomp_ms_per_mib / 256.0
                    } else {
                        1.0 / (self.rates.swap_in * scale)
                    };
                    let want = match (from_zram, self.ariadne()) {
                        (true, true) if hot > 0 => hot,
                        (true, _) => zram,
                        (false, _) => flash,
                    };
                    let n = ((t / ms_per_page) as u64).clamp(1, want);
                    let got = self.alloc(n, &mut t, true);
                    if got == 0 {
                        break;
                    }
                    if from_zram && self.ariadne() {
                        self.ariadne_take(a, class, got);
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
                    s.window.demand_anon += got;
                    self.anon_total += got;
                    self.gain_anon(a);
                    self.counters.refault_anon_pages += got;
                    spend(&mut t, &mut l.owed_ms, got as f64 * ms_per_page);
                    if !from_zram {
                        read_ms += got as f64 * ms_per_page;
                    }
                    let hot_got = if from_zram && class == HOT { got } else { 0 };
                    l.phases[l.pos] = Phase::SwapIn {
                        zram: if from_zram { zram - got } else { zram },
                        flash: if from_zram { flash } else { flash - got },
                        hot: hot - hot_got,
                    };
                }
                Phase::Read { k, frac, left } => {
                    let mut progressed = false;
                    let mut need_any = false;
                    let mut left = left.unwrap_or_else(|| {
                        let m = &self.models[a];
                        [SMALL, LARGE].map(|b| {
                            let want = share_pages(m.chunk_pages[k][b], frac);
                            want.saturating_sub(self.st[a].cached(k, b))
                        })
                    });
                    for b in [SMALL, LARGE] {
                        let m = &self.models[a];
                        let want = share_pages(m.chunk_pages[k][b], frac);
                        let need = want.saturating_sub(self.st[a].cached(k, b)).min(left[b]);
                        if need == 0 {
                            continue;
                        }
                        need_any = true;
                        if t <= 1e-9 {
                            break;
                        }
                        let rate = self.rates.read(a, k, b) * scale;
                        let n = need.min(crate::kernel::ceil_u64(t * rate)).max(1);
                        let got = self.alloc(n, &mut t, true);
                        if got == 0 {
                            break;
                        }
                        self.add_file(a, Holder::Own, k, b, got);
                        self.st[a].window.demand_file += got;
                        left[b] -= got;
                        self.counters.app_read_pages += got;
                        spend(&mut t, &mut l.owed_ms, got as f64 / rate);
                        read_ms += got as f64 / rate;
                        cap_used += got as f64;
                        progressed = true;
                    }
                    if !need_any {
                        // The app has used this chunk: streamed pages of it
                        // are now its own (no longer protected, §4.2.2).
                        let st = &mut self.st[a];
                        for b in [SMALL, LARGE] {
                            st.own[k][b] += st.stream[k][b];
                            st.stream[k][b] = 0;
                        }
                        self.fix_sums(a);
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

        // 3. The preload worker (idle I/O class): launch streams, then the
        //    standby touch when due, in the capacity the app left.
        //    On a device that serves one request at a time, an idle-class
        //    read waits while the app has one in service: the worker gets
        //    the step's time the app spent off the device.
        let mut idle_pages = if self.dev.serial_io {
            (dt - read_ms).max(0.0) * dev_ppm
        } else {
            (dt * dev_ppm - cap_used).max(0.0)
        };
        if let Some(w) = self.rates.worker {
            // The worker's own core bounds what it fills in a step.
            idle_pages = idle_pages.min(dt * w);
        }
        if idle_pages >= 1.0 {
            idle_pages -= self.run_streams(idle_pages as u64, dt) as f64;
        }
        if self.prepage_job.is_some() {
            idle_pages -= self.run_prepager(a, idle_pages, dt) as f64;
        }
        if self.now_us >= self.next_touch_us {
            self.touch_standby(Some(idle_pages / dev_ppm));
            self.next_touch_us = self.now_us + self.cfg.preload.touch_interval_ms * 1000;
        }
        self.note_preload_peak();

        // 4. Scheduler ticks, the platform's killer, the clock.
        self.now_us += STEP_US;
        self.sched_ticks();
        self.kernel_kill_check();
        done_at
    }
}

#[cfg(test)]
mod tests {
    use super::beside_daemon;

    #[test]
    fn the_launch_shares_its_cpu_budget_with_pending_page_out() {
        // Nothing pending: the whole step is the app's.
        assert_eq!(beside_daemon(5.0, 1.0, 0.0), (5.0, 0.0));
        // One core: half each while work is pending; the debt pays 2.5 ms.
        assert_eq!(beside_daemon(5.0, 1.0, 100.0), (2.5, 97.5));
        // A little debt: the app loses only what the page-out ran.
        assert_eq!(beside_daemon(5.0, 1.0, 1.0), (4.0, 0.0));
        // Half a core: the app at half its (already halved) speed; in the
        // budget's wall time the page-out's half pays 2.5 ms of its debt.
        assert_eq!(beside_daemon(5.0, 0.5, 100.0), (2.5, 97.5));
        // Two cores: one each, the launch does not slow down.
        let (t, debt) = beside_daemon(5.0, 2.0, 100.0);
        assert_eq!(t, 5.0);
        assert_eq!(debt, 97.5);
    }
}
