//! The live daemon: builds the domain, the mechanisms and the socket from a
//! validated [`Config`], then runs the loop until SIGTERM/SIGINT, and
//! restores every changed setting on the way out.
//!
//! Per tick (`tick_ms`): one sample of the domain (memory.stat or
//! meminfo+vmstat, PSI), the preloader's and reclaimer's steps, and — only
//! when the core's trigger says so — a footprint read of the app processes
//! (smaps_rollup) and the killer's step. The process scan (cgroup.procs or
//! /proc, plus comm/exe/cmdline of new pids) runs every `scan_interval_ms`;
//! with launch detection on the process connector, only when the kernel's
//! process events say the domain changed (and every 10 s regardless).
//! Requests from the socket are served between ticks on the loop thread.

use super::detection::{self, Action, DetectSetup, Detection};
use super::metrics::{self, Gauges, Metrics, Trace};
use super::{Decision, DomainSample, Mechs, ProcId, ProcInfo, Record, Scheduler};
use crate::actuators::kill::LiveKiller;
use crate::actuators::preload::{WorkerClient, WorkerPlacement};
use crate::actuators::readahead::LaunchReadahead;
use crate::actuators::reclaim::{LiveReclaim, StepTarget, SwappinessTarget};
use crate::actuators::{pidfds_exited, pin_instance, read_start_time, Features, Pinned};
use crate::config::{Config, DomainKind};
use crate::journal::Journal;
use crate::lock::StateLock;
use crate::readers::{self, CgroupVersion, MemCgroup};
use crate::socket::{error_reply, ControlServer, Incoming, Request};
use crate::store::{remove_stale_temp_files, write_atomic, ProfileStore, PROFILES_DIR};
use appflow_core::detect::{Matchers, Notice, ProcObservation};
use appflow_core::mechanism::PreloadMechanism;
use appflow_core::reclaim::ReclaimMode;
use appflow_core::storage::ThroughputCurve;
use appflow_core::InputError;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The domain the daemon schedules.
#[derive(Debug, Clone)]
pub enum Domain {
    /// The whole machine.
    System,
    /// One memory cgroup.
    Cgroup(MemCgroup),
}

/// How to start the preload worker: program and the arguments that precede
/// the worker's own (`preload-worker` for the `appflow` binary).
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The program (normally the running binary).
    pub program: PathBuf,
    /// Leading arguments (the subcommand).
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// `current_exe() preload-worker`.
    pub fn current_exe() -> anyhow::Result<Self> {
        Ok(Self {
            program: std::env::current_exe()?,
            args: vec!["preload-worker".into()],
        })
    }
}

/// How often the killer's reuse predictor is saved (and at shutdown).
const USAGE_SAVE_EVERY: Duration = Duration::from_secs(60);

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// sysfs beside `proc_root` (`/proc` → `/sys`; a fixture tree's `proc` → `sys`).
fn sys_root_of(proc_root: &Path) -> PathBuf {
    proc_root
        .parent()
        .map_or_else(|| PathBuf::from("/sys"), |p| p.join("sys"))
}

/// Reads one domain sample.
pub fn sample_domain(
    domain: &Domain,
    proc_root: &Path,
    now_ms: u64,
) -> anyhow::Result<DomainSample> {
    let psi_sys = readers::read_psi_memory(proc_root).ok();
    let psi = psi_sys.map(|p| p.some_avg10);
    let psi_total = psi_sys.map(|p| p.some_total_us);
    // Swap is the system's in both modes (the domain pages out to it): its
    // areas' free slots, a zram pool's cap counted (the pool can refuse
    // writes while slots are free); /proc/meminfo's SwapFree when
    // /proc/swaps cannot be read. sysfs is the sibling of `proc_root`
    // (`/proc` → `/sys`; a fixture tree's `proc` → `sys`).
    let m = readers::read_meminfo(proc_root)?;
    let sys_root = sys_root_of(proc_root);
    let swap = readers::read_swap_capacity(proc_root, &sys_root).ok();
    let (swap_total_bytes, swap_free_bytes) = match swap {
        Some(c) => (c.total_bytes, c.free_bytes),
        None => (m.swap_total_kb * 1024, m.swap_free_kb * 1024),
    };
    match domain {
        Domain::System => {
            let v = readers::read_vmstat(proc_root)?;
            Ok(DomainSample {
                now_ms,
                total_bytes: m.total_kb * 1024,
                avail_bytes: m.available_kb * 1024,
                anon_bytes: (m.active_anon_kb + m.inactive_anon_kb) * 1024,
                file_bytes: (m.active_file_kb + m.inactive_file_kb) * 1024,
                alloc_counter: v.pgalloc_total(),
                swap_total_bytes,
                swap_free_bytes,
                psi_some_avg10: psi,
                psi_some_total_us: psi_total,
                refault_pages: v.refaults(),
                steal_pages: v.steals(),
                steal_kswapd_pages: v.steals_kswapd(),
                // The machine holds zram's pool.
                swapped_ram_share: swap.and_then(|c| c.swapped_ram_share()),
            })
        }
        Domain::Cgroup(cg) => {
            let st = cg.stat()?;
            let usage = cg.usage_bytes()?;
            let (total, avail) = match cg.limit_bytes()? {
                Some(limit) => (limit, readers::cgroup_available_bytes(limit, usage, &st)),
                None => (m.total_kb * 1024, m.available_kb * 1024),
            };
            // v2 has per-cgroup PSI; v1 uses the system's.
            let (psi, psi_total) = match cg.pressure() {
                Ok(Some(p)) => (Some(p.some_avg10), Some(p.some_total_us)),
                _ => (psi, psi_total),
            };
            // Reclaim counters: the cgroup's re-faults; its reclaimed pages
            // on v2 (`pgsteal`), the system's on v1 (not reported per
            // cgroup; on a machine whose pressure is the domain's, they are
            // the domain's); kswapd's share is the system's either way.
            let v = readers::read_vmstat(proc_root).ok();
            let steal_pages = if st.pgsteal > 0 {
                st.pgsteal
            } else {
                v.as_ref().map_or(0, |v| v.steals())
            };
            Ok(DomainSample {
                now_ms,
                total_bytes: total,
                avail_bytes: avail,
                anon_bytes: st.anon_bytes,
                file_bytes: st.file_bytes,
                alloc_counter: st.pgfault,
                swap_total_bytes,
                swap_free_bytes,
                psi_some_avg10: psi,
                psi_some_total_us: psi_total,
                refault_pages: st.workingset_refault,
                steal_pages,
                steal_kswapd_pages: v.as_ref().map_or(0, |v| v.steals_kswapd()),
                // zram's pool is charged to no cgroup; zswap's is (v2).
                swapped_ram_share: Some(st.swapped_ram_share()),
            })
        }
    }
}

/// Every pid in the cgroup `root` and its descendants.
pub fn cgroup_tree_pids(root: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(t) = readers::read_text(&d.join("cgroup.procs")) {
            out.extend(t.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    stack.push(e.path());
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[derive(Debug)]
struct ProcEntry {
    start_time: u64,
    comm: String,
    ppid: u32,
    config_app: Option<String>,
    oom_score_adj: i32,
    /// In a protected cgroup (`[killer] protected_cgroups`).
    protected: bool,
    /// The app it was attributed to in the latest scan.
    app: Option<String>,
    /// A pidfd of this instance, held while it is an app's process: when it
    /// polls readable the instance is gone and its pid may be another's.
    pidfd: Option<std::os::fd::OwnedFd>,
    /// CPU time (user + system, clock ticks) at the latest activity sample.
    cpu_ticks: Option<u64>,
    /// When the CPU time was last seen to grow (or the process first seen), ms.
    active_ms: u64,
}

impl ProcEntry {
    /// How long the process has used no CPU, as far as the activity samples
    /// tell (None before its CPU time was read).
    fn idle_ms(&self, now_ms: u64) -> Option<u64> {
        self.cpu_ticks
            .map(|_| now_ms.saturating_sub(self.active_ms))
    }
}

/// Scans the domain's processes and recognises apps.
struct Scanner {
    proc_root: PathBuf,
    matchers: Matchers,
    /// Some declared app is matched by its cgroup.
    by_cgroup: bool,
    /// `[killer] protected_cgroups`, relative to the controller's mount.
    protected_cgroups: Vec<String>,
    cache: BTreeMap<u32, ProcEntry>,
    /// When every process's CPU time was last read, ms.
    activity_at_ms: Option<u64>,
    /// A process using more CPU than this, per mille of one core, between
    /// two activity samples was active (`detect.quiet_cpu_permille`, the
    /// readiness rule's quiet share).
    quiet_cpu_permille: u32,
    /// `sysconf(_SC_CLK_TCK)`.
    ticks_per_sec: u64,
}

impl Scanner {
    fn read_cgroups(&self, pid: u32) -> Option<String> {
        readers::read_text(&self.proc_root.join(pid.to_string()).join("cgroup")).ok()
    }

    /// Is `pid` in a protected cgroup? Unreadable counts as protected: a
    /// process the daemon cannot place is not one it may kill.
    fn is_protected(&self, cgroups: Option<&str>) -> bool {
        if self.protected_cgroups.is_empty() {
            return false;
        }
        match cgroups {
            Some(t) => self
                .protected_cgroups
                .iter()
                .any(|w| appflow_core::detect::in_memory_cgroup(t, w)),
            None => true,
        }
    }

    fn identify(&self, pid: u32, cgroups: Option<&str>) -> Option<String> {
        if self.matchers.is_empty() {
            return None;
        }
        let exe = readers::read_exe(&self.proc_root, pid)
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let cmd = readers::read_cmdline(&self.proc_root, pid)
            .ok()
            .map(|v| v.join(" "));
        let obs = ProcObservation {
            exe: exe.as_deref(),
            cmdline: cmd.as_deref(),
            cgroup: if self.by_cgroup { cgroups } else { None },
        };
        self.matchers
            .match_process(&obs)
            .map(|i| self.matchers.name(i).to_string())
    }

    /// The /proc/PID/cgroup text, when a matcher or the protection needs it.
    fn cgroups_if_needed(&self, pid: u32) -> Option<String> {
        let needed = !self.protected_cgroups.is_empty() || self.by_cgroup;
        needed.then(|| self.read_cgroups(pid)).flatten()
    }

    /// Forgets app processes whose instance is gone: those pinned by a
    /// pidfd that polls readable (exited), and those without a pidfd whose
    /// start time changed or cannot be read. A pid that was an app's is
    /// therefore never taken for the same process again once it has been
    /// reused, however fast the reuse (`ns_last_pid`, pid wrap-around).
    fn forget_gone_app_processes(&mut self) {
        let pinned: Vec<(u32, &std::os::fd::OwnedFd)> = self
            .cache
            .iter()
            .filter_map(|(&p, e)| e.pidfd.as_ref().map(|fd| (p, fd)))
            .collect();
        let fds: Vec<&std::os::fd::OwnedFd> = pinned.iter().map(|(_, fd)| *fd).collect();
        let exited = pidfds_exited(&fds);
        let mut gone: Vec<u32> = pinned
            .iter()
            .zip(exited)
            .filter_map(|((p, _), x)| x.then_some(*p))
            .collect();
        gone.extend(
            self.cache
                .iter()
                .filter(|(_, e)| e.app.is_some() && e.pidfd.is_none())
                .filter(|(&p, e)| read_start_time(&self.proc_root, p) != Some(e.start_time))
                .map(|(&p, _)| p),
        );
        for p in gone {
            self.cache.remove(&p);
        }
    }

    /// Reads every process's CPU time, at most once per
    /// [`ACTIVITY_SAMPLE_MS`]: a process that used more than the quiet
    /// share of a core since the previous sample (the readiness rule's
    /// `quiet_cpu_permille`) was active now; one that did not keeps the
    /// time it was last active (its `idle_ms`, background by activity past
    /// the core's `IDLE_BACKGROUND_MS`).
    fn sample_activity(&mut self, now_ms: u64) {
        let prev = self.activity_at_ms;
        if prev.is_some_and(|t| now_ms.saturating_sub(t) < ACTIVITY_SAMPLE_MS) {
            return;
        }
        self.activity_at_ms = Some(now_ms);
        let elapsed_ms = prev.map_or(0, |t| now_ms.saturating_sub(t));
        for (&pid, e) in self.cache.iter_mut() {
            let Ok(st) = readers::read_stat(&self.proc_root, pid) else {
                continue;
            };
            if st.start_time != e.start_time {
                continue;
            }
            if let Some(c) = e.cpu_ticks {
                let used_ms = crate::readers::demand::ticks_to_ms(
                    st.cpu_ticks.saturating_sub(c),
                    self.ticks_per_sec,
                );
                if busy(used_ms, elapsed_ms, self.quiet_cpu_permille) {
                    e.active_ms = now_ms;
                }
            }
            e.cpu_ticks = Some(st.cpu_ticks);
        }
    }

    /// Re-scans `pids`; returns the processes with their apps.
    ///
    /// A light scan (`full = false`) reads only pids it does not hold: new
    /// ones, and app processes whose instance is gone
    /// ([`Self::forget_gone_app_processes`]; an app process is pinned by a
    /// pidfd, so this costs one `poll`). A pid that was no app's and is
    /// reused between two light scans keeps its old entry until the next
    /// full scan; it stays no app's meanwhile, never a candidate. A full
    /// scan re-reads every start time and the oom_score_adj of app
    /// processes (before a kill decision and while rebalancing).
    fn scan(&mut self, pids: &[u32], sched: &Scheduler, full: bool, now_ms: u64) -> Vec<ProcInfo> {
        let live: BTreeSet<u32> = pids.iter().copied().collect();
        self.cache.retain(|p, _| live.contains(p));
        self.forget_gone_app_processes();
        for &pid in pids {
            if !full && self.cache.contains_key(&pid) {
                continue;
            }
            let Some(start) = read_start_time(&self.proc_root, pid) else {
                self.cache.remove(&pid);
                continue;
            };
            let fresh = self.cache.get(&pid).is_none_or(|e| e.start_time != start);
            if fresh {
                let comm = readers::read_comm(&self.proc_root, pid).unwrap_or_default();
                let ppid = readers::read_ppid(&self.proc_root, pid).unwrap_or(0);
                let cgroups = self.cgroups_if_needed(pid);
                let config_app = self.identify(pid, cgroups.as_deref());
                let protected = self.is_protected(cgroups.as_deref());
                self.cache.insert(
                    pid,
                    ProcEntry {
                        start_time: start,
                        comm,
                        ppid,
                        config_app,
                        oom_score_adj: UNREAD_ADJ,
                        app: None,
                        pidfd: None,
                        protected,
                        cpu_ticks: None,
                        active_ms: now_ms,
                    },
                );
            }
        }
        self.sample_activity(now_ms);
        // Announced processes and their descendants (through the parent
        // chain), matched by instance (pid and start time), never by number.
        let app_of = |pid: u32| -> Option<String> {
            let mut p = pid;
            for _ in 0..16 {
                let e = self.cache.get(&p)?;
                let id = ProcId {
                    pid: p,
                    start_time: e.start_time,
                };
                if let Some(a) = sched.app_of_announced(id) {
                    return Some(a.to_string());
                }
                p = e.ppid;
                if p <= 1 {
                    return None;
                }
            }
            None
        };
        let apps: Vec<(u32, Option<String>)> = self
            .cache
            .iter()
            .map(|(&pid, e)| (pid, app_of(pid).or_else(|| e.config_app.clone())))
            .collect();
        let mut out = Vec::with_capacity(apps.len());
        let mut pinned = self.cache.values().filter(|e| e.pidfd.is_some()).count();
        for (pid, app) in apps {
            let e = self.cache.get_mut(&pid).expect("present");
            if app.is_none() {
                pinned -= usize::from(e.pidfd.take().is_some());
            } else if e.pidfd.is_none() && pinned < MAX_PINNED {
                match pin_instance(&self.proc_root, pid, e.start_time) {
                    Pinned::Fd(fd) => {
                        e.pidfd = Some(fd);
                        pinned += 1;
                    }
                    // Reused since it was read: re-read at the next scan.
                    Pinned::Gone => {
                        self.cache.remove(&pid);
                        continue;
                    }
                    // Re-checked by start time at every scan instead.
                    Pinned::Unavailable => {}
                }
            }
            e.app = app.clone();
            if app.is_some() && (full || e.oom_score_adj == UNREAD_ADJ) {
                e.oom_score_adj =
                    readers::read_oom_score_adj(&self.proc_root, pid).unwrap_or(e.oom_score_adj);
                // A process may have moved into a protected cgroup since.
                if full && !self.protected_cgroups.is_empty() {
                    let t = self.read_cgroups(pid);
                    let protected = self.is_protected(t.as_deref());
                    self.cache.get_mut(&pid).expect("present").protected = protected;
                }
            }
            let e = self.cache.get(&pid).expect("present");
            out.push(ProcInfo {
                pid,
                start_time: e.start_time,
                comm: e.comm.clone(),
                app,
                // Unknown (a process of no app): Android's "foreground" value,
                // the conservative choice.
                oom_score_adj: if e.oom_score_adj == UNREAD_ADJ {
                    0
                } else {
                    e.oom_score_adj
                },
                footprint_bytes: None,
                anon_bytes: None,
                swap_bytes: None,
                protected: e.protected,
                idle_ms: e.idle_ms(now_ms),
            });
        }
        out
    }
}

/// The preload worker's page faults (minor + major, /proc/PID/stat),
/// summed over the workers the daemon has run: the domain's fault counter
/// less these is the apps' allocation. The worker's mlock of a launch
/// stream and its standby touches fault in the domain too; on the
/// deployment harness a touch of the standby set every 10 s crossed N_alloc
/// in one tick with nothing launching.
#[derive(Debug, Default)]
struct OwnFaults {
    /// The worker read last, and its count then.
    last: Option<(u32, u64)>,
    /// Faults of workers counted so far.
    total: u64,
}

impl OwnFaults {
    /// Reads the worker's count (`pid` 0: none) and returns the total.
    fn update(&mut self, proc_root: &Path, pid: u32) -> u64 {
        if pid == 0 {
            return self.total;
        }
        let Ok(st) = readers::read_stat(proc_root, pid) else {
            return self.total;
        };
        let now = st.minflt + st.majflt;
        let before = match self.last {
            Some((p, c)) if p == pid => c,
            _ => 0, // a new worker counts from its start
        };
        self.total += now.saturating_sub(before);
        self.last = Some((pid, now));
        self.total
    }
}

/// Whether `used_ms` of CPU over `elapsed_ms` is more than `permille` of
/// one core (a process at or below it is quiet, as launch detection's
/// readiness rule has it; any CPU at all over no interval is activity).
fn busy(used_ms: u64, elapsed_ms: u64, permille: u32) -> bool {
    used_ms.saturating_mul(1000) > elapsed_ms.saturating_mul(u64::from(permille))
}

/// `pid` and its ancestors up to (not including) PID 1.
fn ancestors(proc_root: &Path, pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut p = pid;
    while let Ok(pp) = readers::read_ppid(proc_root, p) {
        if pp <= 1 || out.contains(&pp) || out.len() > 64 {
            break;
        }
        out.push(pp);
        p = pp;
    }
    out
}

/// Logs a scheduler decision at its level.
fn log_decision(d: &Decision) {
    let reason = d.reason.map(|r| r.to_string()).unwrap_or_default();
    match d.kind {
        "kill" if d.mark.is_some() => {
            tracing::warn!(reason = %reason, kind = d.kind, "{}", d.detail)
        }
        "error" => tracing::warn!(kind = d.kind, "{}", d.detail),
        "event" => tracing::debug!(kind = d.kind, "{}", d.detail),
        _ => tracing::info!(reason = %reason, kind = d.kind, "{}", d.detail),
    }
}

/// At most this many app processes are pinned by a pidfd (the rest have
/// their start time re-read at every scan): the descriptors must leave room
/// under the usual soft limit of 1,024 open files for the control socket's
/// 256 connections, the worker's pipes and the files the loop reads.
const MAX_PINNED: usize = 512;

/// What wakes the daemon's loop between ticks.
#[derive(Debug)]
pub(crate) enum LoopMsg {
    /// A control request.
    Request(Incoming),
    /// The detection thread passed on the exec of a declared app.
    AppExec,
}

impl From<Incoming> for LoopMsg {
    fn from(inc: Incoming) -> Self {
        LoopMsg::Request(inc)
    }
}

/// With launch detection on the process connector, the domain's processes
/// are listed when an exec, fork or exit says they changed, and at least
/// this often: a process written into the domain's cgroup without an exec
/// makes no event. Ten times the default `scan_interval_ms`; a kill decision
/// and rebalancing list the domain at once regardless.
const LIST_SAFETY_NET_MS: u64 = 10_000;

/// The processes' CPU time is read at most this often, ms (the daemon's
/// default `scan_interval_ms` is 1 s; half of it): idleness is judged over the core's
/// `IDLE_BACKGROUND_MS` (1 s), so two samples make the judgement.
const ACTIVITY_SAMPLE_MS: u64 = 500;

/// Marks an oom_score_adj not read yet.
const UNREAD_ADJ: i32 = i32::MIN;

/// The M_F (bytes) and N_alloc (pages per tick) a daemon started with `cfg`
/// would use now, and their checks (`appflow doctor --config`): the
/// config's thresholds (or "auto"), the profiles and calibration in its
/// `state_dir`, the domain's size today.
pub fn sizing_checks(
    cfg: &Config,
    proc_root: &Path,
) -> anyhow::Result<(u64, u64, Vec<appflow_core::sizing::Check>)> {
    let domain = open_domain(cfg)?;
    let total = sample_domain(&domain, proc_root, 0)?.total_bytes;
    let declared: Vec<String> = cfg.apps.iter().map(|a| a.name.clone()).collect();
    let mut sched = Scheduler::new(
        cfg.scheduler_config(),
        load_curve(&cfg.daemon.state_dir),
        &declared,
        &[],
    );
    let (profiles, _skipped) = ProfileStore::open(&cfg.daemon.state_dir)
        .load_all()
        .map_err(|e| anyhow::anyhow!("profiles in {}: {e}", cfg.daemon.state_dir.display()))?;
    sched.set_profiles(profiles);
    let rcfg = sched.reclaim_config_with(&sched.sizing_for(total));
    Ok((
        rcfg.low_memory_threshold(total),
        rcfg.alloc_threshold_pages,
        sched.sizing_checks(total),
    ))
}

/// Opens the configured domain; errors are bad input naming the field.
pub fn open_domain(cfg: &Config) -> anyhow::Result<Domain> {
    match cfg.domain.kind {
        DomainKind::System => Ok(Domain::System),
        DomainKind::Cgroup => {
            let cg = MemCgroup::open(&cfg.domain.memory_cgroup)
                .map_err(|e| InputError::new(format!("domain.memory_cgroup: {e}")))?;
            Ok(Domain::Cgroup(cg))
        }
    }
}

fn load_curve(state_dir: &Path) -> ThroughputCurve {
    let p = state_dir.join("calibration.json");
    match std::fs::read_to_string(&p) {
        Ok(t) => match serde_json::from_str::<ThroughputCurve>(&t)
            .map_err(|e| e.to_string())
            .and_then(|c| ThroughputCurve::new(c.points().to_vec()).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(path = %p.display(), error = %e, "calibration unreadable; using the default phone-flash curve");
                super::default_curve()
            }
        },
        Err(_) => {
            tracing::info!(path = %p.display(), "no calibration stored (appflow calibrate); using the default phone-flash curve");
            super::default_curve()
        }
    }
}

/// Everything the live loop owns.
pub struct Runtime {
    cfg: Config,
    domain: Domain,
    sched: Scheduler,
    metrics: Metrics,
    trace: Trace,
    record_log: Option<std::io::BufWriter<std::fs::File>>,
    /// Apps killed by the last record (their processes leave the list).
    killed_apps: Vec<String>,
    reclaim: LiveReclaim,
    killer: LiveKiller,
    worker: WorkerClient,
    features: Features,
    scanner: Scanner,
    store: ProfileStore,
    server: Option<ControlServer>,
    rx: mpsc::Receiver<LoopMsg>,
    procs: Vec<ProcInfo>,
    start: Instant,
    /// Launch detection and on-the-fly profiles (`[detect]`), when enabled
    /// and apps are declared.
    detection: Option<Detection>,
    profiles_stamp: Option<Option<(SystemTime, usize)>>,
    sample_errors: u64,
    /// The preload worker's own page faults, counted since start.
    own_faults: OwnFaults,
    /// Process events since the last listing say the domain changed.
    domain_changed: bool,
    /// How to (re)start the worker: program, arguments, placement.
    worker_spawn: (PathBuf, Vec<String>, WorkerPlacement),
    last_respawn: Option<Instant>,
    /// The state directory's single-instance lock, held until the settings
    /// are restored (none in a dry run without a state directory).
    _lock: Option<StateLock>,
}

fn dir_stamp(dir: &Path) -> Option<(SystemTime, usize)> {
    let m = std::fs::metadata(dir).ok()?.modified().ok()?;
    let n = std::fs::read_dir(dir).ok()?.count();
    Some((m, n))
}

impl Runtime {
    /// Builds the daemon: takes the state directory's lock (before anything
    /// else: a second daemon stops here), replays a left-behind journal,
    /// spawns the preload worker inside the domain, binds the socket.
    pub fn new(cfg: Config, worker_cmd: &WorkerCommand) -> anyhow::Result<Self> {
        let dry = cfg.daemon.dry_run;
        // A dry run creates nothing; it locks a state directory that exists.
        let lock = if !dry || cfg.daemon.state_dir.is_dir() {
            Some(StateLock::acquire(&cfg.daemon.state_dir, !dry)?)
        } else {
            None
        };
        if !dry {
            for dir in [
                cfg.daemon.state_dir.clone(),
                cfg.daemon.state_dir.join(PROFILES_DIR),
            ] {
                let n = remove_stale_temp_files(&dir);
                if n > 0 {
                    tracing::info!(dir = %dir.display(), files = n, "removed temp files of interrupted writes");
                }
            }
        }
        let proc_root = cfg.daemon.proc_root.clone();
        let domain = open_domain(&cfg)?;
        let features = Features::probe(&proc_root);
        for f in features.missing() {
            tracing::warn!(feature = f, "kernel feature missing; the daemon degrades");
        }
        let jpath = cfg.daemon.state_dir.join("journal.json");
        let journal = match Journal::open(&jpath, dry) {
            Ok((j, replay)) => {
                for e in &replay.restored {
                    tracing::warn!(file = %e.path.display(), value = %e.original,
                        "restored a setting left changed by a previous daemon (crash recovery)");
                }
                for p in &replay.vanished {
                    tracing::info!(file = %p.display(), "journaled setting no longer exists");
                }
                for (p, e) in &replay.failed {
                    tracing::error!(file = %p.display(), error = %e, "could not restore a journaled setting");
                }
                if !replay.failed.is_empty() {
                    anyhow::bail!(
                        "journal {}: some settings could not be restored; fix and restart",
                        jpath.display()
                    );
                }
                j
            }
            Err(e) => {
                let aside = jpath.with_extension(format!("corrupt-{}", now_unix_ms()));
                tracing::error!(error = %e, moved_to = %aside.display(), "journal unreadable; moved aside");
                std::fs::rename(&jpath, &aside)?;
                Journal::open(&jpath, dry)?.0
            }
        };
        let target = match &domain {
            Domain::System => SwappinessTarget::Sysctl(proc_root.join("sys/vm/swappiness")),
            Domain::Cgroup(cg) if cg.version == CgroupVersion::V1 => {
                SwappinessTarget::CgroupV1(cg.path.clone())
            }
            Domain::Cgroup(_) => {
                tracing::warn!(feature = "per-cgroup swappiness",
                    "cgroup v2 domain: no per-cgroup swappiness; efficiency-first keeps protected ranges only");
                SwappinessTarget::None
            }
        };
        let step_target = match &domain {
            Domain::System => StepTarget::Sysctl,
            Domain::Cgroup(_) => StepTarget::memory_cgroup(),
        };
        let reclaim =
            LiveReclaim::new(journal, target, &proc_root, dry).with_step_target(step_target);
        let killer = LiveKiller::new(
            &proc_root,
            dry,
            cfg.killer.freeze_first && features.freezer_v1,
        );
        let placement = WorkerPlacement {
            memory_cgroup: match &domain {
                Domain::Cgroup(cg) => Some(cg.path.clone()),
                Domain::System => None,
            },
            blkio_cgroup: (!cfg.domain.blkio_cgroup.as_os_str().is_empty())
                .then(|| cfg.domain.blkio_cgroup.clone()),
        };
        let mut worker_args = worker_cmd.args.clone();
        worker_args.extend([
            "--max-read-bytes".to_string(),
            cfg.preload.core.max_read_bytes.to_string(),
            "--touch-interval-ms".to_string(),
            cfg.preload.core.touch_interval_ms.to_string(),
        ]);
        let worker_spawn = (worker_cmd.program.clone(), worker_args, placement);
        let sys_root = sys_root_of(&proc_root);
        let readahead = match LaunchReadahead::open(
            &cfg.daemon.state_dir,
            &proc_root,
            &sys_root,
            dry,
        ) {
            Ok((r, restored)) => {
                for p in restored {
                    tracing::warn!(file = %p.display(),
                        "restored a readahead left raised by a previous daemon (crash recovery)");
                }
                Some(r)
            }
            Err(e) => {
                tracing::error!(error = %e, "readahead journal unusable: launches keep the devices' readahead");
                None
            }
        };
        let mut worker = if cfg.preload_active() && !dry {
            WorkerClient::spawn(&worker_spawn.0, &worker_spawn.1, &worker_spawn.2)?
        } else {
            WorkerClient::dry_run()
        }
        .with_readahead(readahead);
        worker.set_proc_root(&proc_root);
        // Never app processes: the daemon, its ancestors (a system domain
        // holds them too), and below the worker.
        let mut self_pids = ancestors(&proc_root, std::process::id());
        if let Some(p) = worker.pid() {
            self_pids.push(p);
            tracing::info!(
                pid = p,
                "preload worker started (idle I/O class, nice 19, in the domain)"
            );
        }
        if let Some(k) = cfg.policy().kernel_part() {
            tracing::warn!(
                policy = cfg.policy().name,
                "the policy's kernel half ({k}) needs a kernel patch: not possible on a stock kernel; \
                 running its user-space half only"
            );
        }
        let curve = load_curve(&cfg.daemon.state_dir);
        let declared: Vec<String> = cfg.apps.iter().map(|a| a.name.clone()).collect();
        let curve_for_detection = curve.clone();
        let mut sched = Scheduler::new(cfg.scheduler_config(), curve, &declared, &self_pids);
        // The killer's reuse predictor learned before this start (bounded;
        // a bad file is reported and learning starts anew).
        if let Some(m) = crate::store::restore_usage(&cfg.daemon.state_dir, dry, now_unix_ms()) {
            tracing::info!(apps = m.apps.len(), "reuse predictor restored");
            sched.set_usage_model(m);
        }
        let trace = Trace::new(!cfg.daemon.trace_file.as_os_str().is_empty());
        let record_log = if cfg.daemon.record_file.as_os_str().is_empty() || dry {
            None
        } else {
            let f = std::fs::File::create(&cfg.daemon.record_file).map_err(|e| {
                anyhow::anyhow!(
                    "daemon.record_file {}: {e}",
                    cfg.daemon.record_file.display()
                )
            })?;
            Some(std::io::BufWriter::new(f))
        };
        let (tx, rx) = mpsc::channel::<LoopMsg>();
        let on_app_exec: std::sync::Arc<dyn Fn() + Send + Sync> = {
            let tx = tx.clone();
            std::sync::Arc::new(move || {
                let _ = tx.send(LoopMsg::AppExec);
            })
        };
        let server = ControlServer::bind_with(&cfg.daemon.socket, tx, dry)?;
        let specs = detection::specs(&cfg.apps);
        let scanner = Scanner {
            proc_root: proc_root.clone(),
            matchers: detection::compile_matchers(&specs, &proc_root)?,
            by_cgroup: cfg.apps.iter().any(|a| !a.cgroup.is_empty()),
            protected_cgroups: detection::cgroups_relative(
                &cfg.killer.protected_cgroups,
                &proc_root,
            ),
            cache: BTreeMap::new(),
            activity_at_ms: None,
            quiet_cpu_permille: cfg.detect.quiet_cpu_permille,
            ticks_per_sec: crate::readers::demand::clock_ticks_per_sec(),
        };
        let store = ProfileStore::open(&cfg.daemon.state_dir);
        let start = Instant::now();
        let detection = if cfg.detect.enabled && !cfg.apps.is_empty() {
            let d = Detection::new(&DetectSetup {
                apps: &specs,
                proc_root: &proc_root,
                domain_cgroup: match &domain {
                    Domain::Cgroup(cg) => Some(cg.path.as_path()),
                    Domain::System => None,
                },
                quiet_floor_pages_per_s: cfg.detect.quiet_floor_pages_per_s,
                quiet_cpu_permille: cfg.detect.quiet_cpu_permille,
                quiet_ms: cfg.detect.quiet_ms,
                launch_timeout_ms: cfg.daemon.launch_timeout_ms,
                tick_ms: cfg.daemon.tick_ms,
                learn: cfg.detect.learn_profiles && !dry,
                relearn_every: cfg.detect.relearn_every,
                curve: &curve_for_detection,
                origin: start,
                on_app_exec,
            })?;
            let r = d.readiness();
            tracing::info!(
                source = d.stats.source,
                quiet_floor_pages_per_s = r.quiet_floor_pages_per_s,
                quiet_ms = r.quiet_ms,
                learn = cfg.detect.learn_profiles && !dry,
                relearn_every = cfg.detect.relearn_every,
                "launch detection on"
            );
            Some(d)
        } else {
            None
        };
        Ok(Self {
            cfg,
            domain,
            sched,
            metrics: Metrics::default(),
            trace,
            record_log,
            killed_apps: Vec::new(),
            reclaim,
            killer,
            worker,
            features,
            scanner,
            store,
            server: Some(server),
            rx,
            procs: Vec::new(),
            start,
            detection,
            profiles_stamp: None,
            sample_errors: 0,
            own_faults: OwnFaults::default(),
            domain_changed: false,
            worker_spawn,
            last_respawn: None,
            _lock: lock,
        })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn reload_profiles(&mut self) {
        let stamp = dir_stamp(self.store.dir());
        if self.profiles_stamp == Some(stamp) {
            return;
        }
        self.profiles_stamp = Some(stamp);
        match self.store.load_all() {
            Ok((profiles, skipped)) => {
                tracing::info!(
                    profiles = profiles.len(),
                    skipped = skipped.len(),
                    "profiles loaded"
                );
                if let Some(d) = self.detection.as_mut() {
                    d.set_profiles(&profiles);
                }
                self.sched.set_profiles(profiles);
            }
            Err(e) => {
                tracing::warn!(error = %e, "profile store unreadable; keeping the profiles loaded before")
            }
        }
    }

    /// Between listings: the processes' activity sampled again, so that a
    /// process that went quiet becomes background by activity within
    /// `IDLE_BACKGROUND_MS` (and not at the next listing, up to
    /// `LIST_SAFETY_NET_MS` later).
    fn refresh_activity(&mut self) {
        let now_ms = self.now_ms();
        self.scanner.sample_activity(now_ms);
        for p in self.procs.iter_mut() {
            p.idle_ms = self
                .scanner
                .cache
                .get(&p.pid)
                .filter(|e| e.start_time == p.start_time)
                .and_then(|e| e.idle_ms(now_ms));
        }
    }

    fn scan(&mut self, full: bool) {
        let pids = match &self.domain {
            Domain::System => readers::list_pids(&self.cfg.daemon.proc_root).unwrap_or_default(),
            Domain::Cgroup(cg) => cgroup_tree_pids(&cg.path),
        };
        let now_ms = self.now_ms();
        self.procs = self.scanner.scan(&pids, &self.sched, full, now_ms);
        if let Some(d) = &self.detection {
            // Processes the detector attributed (children of a detected
            // launch that run another program), by identity.
            for p in self.procs.iter_mut().filter(|p| p.app.is_none()) {
                p.app = d.app_of(p.pid, p.start_time).map(str::to_string);
            }
        }
        for p in &self.procs {
            if p.app.is_some() {
                self.killer.expect(p.pid, p.start_time);
            }
        }
        let live: BTreeSet<u32> = self.procs.iter().map(|p| p.pid).collect();
        self.killer.retain(&|p| live.contains(&p));
    }

    /// Restarts a preload worker that died (e.g. chosen by the domain's OOM
    /// killer: it holds the mlocked launch files), at most every 5 s. Its
    /// holds are gone with it; the standby set is queued again.
    fn respawn_worker_if_dead(&mut self) {
        if !self.cfg.preload_active() || self.cfg.daemon.dry_run || self.worker.stats().alive {
            return;
        }
        if self
            .last_respawn
            .is_some_and(|t| t.elapsed() < Duration::from_secs(5))
        {
            return;
        }
        self.last_respawn = Some(Instant::now());
        let (prog, args, placement) = &self.worker_spawn;
        match WorkerClient::spawn(prog, args, placement) {
            Ok(w) => {
                let pid = w.pid().unwrap_or(0);
                tracing::warn!(pid, "preload worker had exited; restarted");
                self.sched.add_self_pid(pid);
                self.sched.worker_restarted();
                let readahead = self.worker.take_readahead();
                self.worker.shutdown();
                self.worker = w.with_readahead(readahead);
                self.worker.set_proc_root(&self.cfg.daemon.proc_root);
            }
            Err(e) => tracing::error!(error = %e, "preload worker exited and cannot be restarted"),
        }
    }

    fn tick(&mut self) {
        self.respawn_worker_if_dead();
        self.detect_step(false);
        let now = self.now_ms();
        let s = match sample_domain(&self.domain, &self.cfg.daemon.proc_root, now) {
            Ok(mut s) => {
                // The worker's own faults (its standby touches, its launch
                // stream's locks) are the daemon's, not the apps'
                // allocation: n_alloc leaves them out.
                let ws = self.worker.stats();
                let own = self.own_faults.update(&self.cfg.daemon.proc_root, ws.pid);
                s.alloc_counter = s.alloc_counter.saturating_sub(own);
                s
            }
            Err(e) => {
                self.sample_errors += 1;
                if self.sample_errors.is_power_of_two() {
                    tracing::warn!(error = %e, count = self.sample_errors, "domain sample failed; tick skipped");
                }
                return;
            }
        };
        if self.sched.wants_footprints(&s) {
            // Fresh process list and footprints only when a kill is
            // considered or the relaunch headroom weighs them.
            self.scan(true);
            let root = self.cfg.daemon.proc_root.clone();
            // Not the launching or foreground app's: never a victim, and
            // reading its footprint would hold up its page faults.
            let sched = &self.sched;
            for p in self
                .procs
                .iter_mut()
                .filter(|p| !sched.footprint_unneeded(p))
            {
                let r = readers::read_smaps_rollup(&root, p.pid).ok();
                p.footprint_bytes = r.map(|r| r.footprint_bytes());
                // What a kill frees (resident and swapped anonymous memory)
                // and what a page-out could move (resident).
                p.anon_bytes = r.map(|r| r.anon_kb.saturating_mul(1024));
                p.swap_bytes = r.map(|r| r.swap_kb.saturating_mul(1024));
            }
        }
        let rec = Record::Tick {
            sample: s,
            now_unix_ms: now_unix_ms(),
            procs: std::mem::take(&mut self.procs),
        };
        let _ = self.apply(&rec);
        if let Record::Tick { procs, .. } = rec {
            self.procs = procs;
        }
        self.trace.counters(&s, self.sched.last_alloc_pages);
        let killed: Vec<String> = self.killed_apps.drain(..).collect();
        self.procs
            .retain(|p| p.app.as_ref().is_none_or(|a| !killed.contains(a)));
    }

    /// The domain's processes now (cgroup.procs of the tree, or /proc).
    fn domain_pids(&self) -> Vec<u32> {
        match &self.domain {
            Domain::System => readers::list_pids(&self.cfg.daemon.proc_root).unwrap_or_default(),
            Domain::Cgroup(cg) => cgroup_tree_pids(&cg.path),
        }
    }

    /// Launch detection's part of a tick (`between_ticks` false), or of an
    /// app's exec between ticks (true: only the kernel events, so that a
    /// launch acts at once): kernel events to the detector, its conclusions
    /// to the scheduler as the events `notify` would send.
    fn detect_step(&mut self, between_ticks: bool) {
        let Some(mut d) = self.detection.take() else {
            return;
        };
        let now = self.now_ms();
        let ws = self.worker.stats();
        d.note_readahead(self.worker.readahead_entries());
        let actions = {
            let pids = || self.domain_pids();
            let store = &self.store;
            let profile_of = |a: &str| store.load(a).ok().flatten();
            d.step(now, &pids, &ws, &profile_of, !between_ticks)
        };
        let ch = d.take_changes();
        // The list is sorted by pid (the scanner's order).
        let listed = |p: &u32| self.procs.binary_search_by_key(p, |x| x.pid).is_ok();
        if ch.exec || ch.lost || ch.pids.iter().any(listed) {
            self.domain_changed = true;
        }
        self.detection = Some(d);
        self.act_on_detection(actions);
    }

    fn act_on_detection(&mut self, actions: Vec<Action>) {
        for a in actions {
            let now_ms = self.now_ms();
            let (event, app, proc_id) = match a {
                Action::Launch {
                    app,
                    pid,
                    start_time,
                } => {
                    if self.sched.is_launching(&app) {
                        continue; // a launcher announced it already
                    }
                    (
                        super::EventKind::Launch,
                        app,
                        Some(ProcId { pid, start_time }),
                    )
                }
                Action::Launched { app } => {
                    if !self.sched.is_launching(&app) {
                        continue; // a launcher said so already
                    }
                    (super::EventKind::Launched, app, None)
                }
                Action::Exited { app } => (super::EventKind::Exit, app, None),
                Action::NotRecorded { app } => {
                    // Counted once the launch is over (off its path), so
                    // that a settled profile is recorded again in time.
                    match self.store.note_unrecorded(&app) {
                        Ok(Some(p)) => {
                            tracing::info!(
                                app,
                                unrecorded = p.unrecorded_launches,
                                relearn_every = self.cfg.detect.relearn_every,
                                "launch not recorded: the profile is settled"
                            );
                            self.profiles_stamp = None;
                            self.reload_profiles();
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(app, error = %e, "unrecorded launch not counted"),
                    }
                    continue;
                }
                Action::Recorded { app, recording } => {
                    let s = &recording.summary;
                    match self.store.record(&app, &recording.observation) {
                        Ok(p) => {
                            tracing::info!(
                                app,
                                launches = p.launches,
                                files = s.files_recorded,
                                bytes = s.bytes_brought_in,
                                launch_ms = recording.observation.launch_ms,
                                "launch recorded into the profile"
                            );
                            if let Some(d) = self.detection.as_mut() {
                                d.note_recorded();
                            }
                            // Reload now: the plan is re-solved with it.
                            self.profiles_stamp = None;
                            self.reload_profiles();
                        }
                        Err(e) => {
                            tracing::warn!(app, error = %e, "recorded launch not stored")
                        }
                    }
                    continue;
                }
            };
            let rec = Record::Event {
                now_ms,
                event,
                app,
                proc_id,
            };
            if let Err(e) = self.apply(&rec) {
                tracing::warn!(error = %e, "detected event refused");
            }
            if event == super::EventKind::Launch {
                self.scan(false);
            }
        }
    }

    /// Applies one record to the scheduler with the live mechanisms, logs it
    /// (when a record file is set) and handles the decisions it made.
    fn apply(&mut self, rec: &Record) -> Result<String, super::EventError> {
        if let Some(w) = self.record_log.as_mut() {
            use std::io::Write;
            let line = serde_json::to_string(rec).expect("records serialise");
            if let Err(e) = writeln!(w, "{line}") {
                tracing::warn!(error = %e, "record file not written; recording stops");
                self.record_log = None;
            }
        }
        let out = self.sched.apply(
            rec,
            &mut Mechs {
                preload: &mut self.worker,
                reclaim: &mut self.reclaim,
                kill: &mut self.killer,
            },
        );
        for d in self.sched.take_decisions() {
            if let Some(w) = self.record_log.as_mut() {
                use std::io::Write;
                let line = json!({ "decision": &d });
                if writeln!(w, "{line}").is_err() {
                    self.record_log = None;
                }
            }
            log_decision(&d);
            self.trace.decision(&d);
            if let Some(super::Mark::Kill { app, .. }) = &d.mark {
                self.killed_apps.push(app.clone());
            }
        }
        out
    }

    fn gauges(&self) -> Gauges {
        let ws = self.worker.stats();
        Gauges {
            mode: Some(self.sched.mode()),
            sample: self.sched.last_sample,
            alloc_pages: self.sched.last_alloc_pages,
            budget_bytes: self.cfg.preload.core.budget_bytes,
            protected_bytes: ws.protected_bytes,
            standby_bytes: ws.standby_bytes,
            preload_read_bytes: ws.loaded_bytes,
            touch_read_bytes: ws.touched_bytes,
            dropped_bytes: self.reclaim.dropped_bytes,
            processes: self.procs.len() as u64,
            apps: self.sched.app_names().len() as u64,
            features: vec![
                ("pidfd", self.features.pidfd),
                ("process_madvise", self.features.process_madvise),
                ("process_mrelease", self.features.process_mrelease),
                ("psi", self.features.psi),
                ("freezer", self.features.freezer_v1),
            ],
            changed_settings: (self.reclaim.journal().entries().len()
                + self.worker.readahead_entries().len()) as u64,
            page_out_calls: self.reclaim.page_out_calls,
            page_out_errors: self.reclaim.page_out_errors.clone(),
            prepaged_bytes: ws.prepaged_bytes,
            cold_marked_bytes: ws.cold_marked_bytes,
            prepage_precision: self.sched.switch_feedback().precision(),
            prepage_recall: self.sched.switch_feedback().recall(),
        }
    }

    fn metrics_text(&mut self) -> String {
        if let Some(s) = &self.server {
            self.metrics.socket_errors = s.errors.load(Ordering::Relaxed);
        }
        self.metrics.sched = self.sched.stats.clone();
        metrics::render(&self.metrics, &self.gauges())
    }

    /// The `status` reply.
    pub fn status(&self) -> Value {
        let ws = self.worker.stats();
        let s = self.sched.last_sample.unwrap_or_default();
        let sizing = self.sched.sizing_for(s.total_bytes);
        let rcfg = self.sched.reclaim_config_with(&sizing);
        let m = &self.metrics;
        let st = &self.sched.stats;
        let ms = |h: &metrics::Histogram, q: f64| (h.quantile(q) * 1e6).round() / 1e3;
        let apps: Vec<Value> = self
            .sched
            .app_names()
            .iter()
            .map(|a| {
                let pids: Vec<u32> = self
                    .procs
                    .iter()
                    .filter(|p| p.app.as_deref() == Some(a))
                    .map(|p| p.pid)
                    .collect();
                let cutoff = self
                    .sched
                    .plan()
                    .and_then(|p| p.apps.iter().find(|x| &x.app == a))
                    .map(|x| x.chosen);
                let det = self
                    .detection
                    .as_ref()
                    .map(|d| d.report(a))
                    .unwrap_or_default();
                json!({
                    "name": a,
                    "launches_detected": det.launches_detected,
                    "profile_launches": self.sched.profile(a).map_or(0, |p| p.launches),
                    "last_launch_ms": det.last_launch_ms,
                    "last_launch_stream_bytes": det.last_launch_stream_bytes,
                    "last_launch_detect_ms": det.last_launch_detect_ms,
                    "last_launch_first_byte_ms": det.last_launch_first_byte_ms,
                    "pids": pids,
                    "foreground": self.sched.foreground() == Some(a.as_str()),
                    "launching": self.sched.is_launching(a),
                    "profile": self.sched.has_profile(a),
                    "cutoff_bytes": cutoff.map(|c| c.cutoff_bytes),
                    "preload_bytes": cutoff.map(|c| c.preload_bytes),
                })
            })
            .collect();
        json!({
            "ok": true,
            "pid": std::process::id(),
            "dry_run": self.cfg.daemon.dry_run,
            "uptime_ms": self.now_ms(),
            "policy": self.sched.config().policy.name,
            // The policy's kernel half, not possible on a stock kernel (the
            // daemon runs the user-space half only); null when it has none.
            "kernel_half_not_run": self.sched.config().policy.kernel_part(),
            "mode": self.sched.mode().name(),
            "domain": {
                "kind": match &self.domain { Domain::System => "system".to_string(), Domain::Cgroup(c) => format!("cgroup {}", c.path.display()) },
                "total_bytes": s.total_bytes,
                "available_bytes": s.avail_bytes,
                "anon_bytes": s.anon_bytes,
                "file_bytes": s.file_bytes,
                "low_memory_bytes": rcfg.low_memory_threshold(s.total_bytes),
                "alloc_threshold_pages": rcfg.alloc_threshold_pages,
                "sizing": {
                    "low_memory": if self.cfg.reclaim.auto_low_memory { "auto" } else { "configured" },
                    "alloc_threshold": if self.cfg.reclaim.auto_alloc_threshold { "auto" } else { "configured" },
                    "derived": &sizing,
                    "checks": self.sched.sizing_checks(s.total_bytes),
                },
                "alloc_pages_per_tick": self.sched.last_alloc_pages,
                "psi_some_avg10": s.psi_some_avg10,
            },
            "preload": {
                "enabled": self.cfg.preload_active(),
                "strategy": self.cfg.scheduler_config().preload_strategy(),
                "budget_bytes": self.cfg.preload.core.budget_bytes,
                "plan_bytes": st.plan_bytes,
                "standby_requested_bytes": self.sched.standby_bytes(),
                "held_bytes": self.worker.held_bytes(),
                "standby_bytes": ws.standby_bytes,
                "protected_bytes": ws.protected_bytes,
                "loaded_bytes": ws.loaded_bytes,
                "loads": ws.loads,
                "last_load": ws.last_load,
                "worker_pid": ws.pid,
                "worker_alive": ws.alive,
            },
            "prepage": {
                "switches_prepaged": st.prepage_calls,
                "requested_bytes": st.prepage_requested_bytes,
                "bounded_by_room": st.prepage_bounded,
                "bounded_out_bytes": st.prepage_bounded_bytes,
                "room_bytes": self.sched.room(),
                "advised_bytes": ws.prepaged_bytes,
                "jobs_done": ws.prepage_jobs,
                "precision": self.sched.switch_feedback().precision(),
                "recall": self.sched.switch_feedback().recall(),
                "feedback_bytes": {
                    "prepaged": self.sched.switch_feedback().prepaged,
                    "used": self.sched.switch_feedback().used,
                    "footprint": self.sched.switch_feedback().footprint,
                },
                "windows": self.worker.switch_stats(),
            },
            "cold": {
                "apps_marked": st.cold_mark_calls,
                "requested_bytes": st.cold_marked_bytes,
                "marked_bytes": ws.cold_marked_bytes,
                "jobs_done": ws.cold_jobs,
                "jobs_stopped": ws.cold_jobs_stopped,
            },
            "foreground": self.sched.foreground(),
            "detect": self.detection.as_ref().map(|d| {
                let r = d.readiness();
                json!({
                    "stats": d.stats,
                    "quiet_floor_pages_per_s": r.quiet_floor_pages_per_s,
                    "quiet_cpu_permille": r.quiet_cpu_permille,
                    "quiet_ms": r.quiet_ms,
                })
            }),
            "apps": apps,
            "processes": self.procs.len(),
            "reclaim": {
                "paged_out_bytes": self.reclaim.paged_out_bytes,
                "page_out_calls": self.reclaim.page_out_calls,
                "page_out_errors": self.reclaim.page_out_errors.iter()
                    .map(|(e, n)| json!({"errno": e, "name": metrics::errno_name(*e), "count": n}))
                    .collect::<Vec<_>>(),
                "smaps_errors": self.reclaim.smaps_errors,
                "kswapd_step": {
                    "watermark_scale_factor": st.reclaim_step,
                    "changes": st.reclaim_step_changes,
                    "windows": st.refault_windows,
                    "refault_ratio": st.refault_total.refault_ratio(),
                    "direct_share": st.refault_total.direct_share(),
                    "window_pages": st.refault_total,
                },
            },
            "kills": st.kills_total(),
            "killer": self.killer_status(),
            "mode_switches": st.switches_total(),
            "changed_settings": self.reclaim.journal().entries().iter().chain(self.worker.readahead_entries()).map(|e| json!({"path": e.path, "original": e.original})).collect::<Vec<_>>(),
            "features": self.features,
            "loop": {
                "ticks": m.loop_work.count(),
                "jitter_p50_ms": ms(&m.loop_jitter, 0.5),
                "jitter_p99_ms": ms(&m.loop_jitter, 0.99),
                "work_p50_ms": ms(&m.loop_work, 0.5),
                "work_p99_ms": ms(&m.loop_work, 0.99),
            },
            "decisions": self.sched.recent_decisions().rev().take(20).collect::<Vec<_>>(),
        })
    }

    /// The killer's view ([`Scheduler::kill_outlook`]): each running
    /// app's price now (predicted reuse within the horizon, expected time
    /// until reuse, relaunch cost, memory a kill frees), the victim a kill
    /// would take now and the latest kill, each with why it wins.
    fn killer_status(&self) -> Value {
        serde_json::to_value(self.sched.kill_outlook(&self.procs, self.now_ms()))
            .unwrap_or(Value::Null)
    }

    /// Whether a notified name may enter the app table (bounded, see
    /// [`appflow_core::admit_app`]).
    fn admit(&self, app: &str, with_pid: bool) -> Result<(), String> {
        let declared = |a: &str| self.cfg.apps.iter().any(|d| d.name == a);
        let names = self.sched.app_names();
        let known = declared(app) || names.iter().any(|n| n == app);
        let undeclared = names
            .iter()
            .filter(|n| !declared(n) && !self.sched.has_profile(n))
            .count();
        let d = &self.cfg.daemon;
        appflow_core::admit_app(
            app,
            known,
            undeclared,
            d.allow_undeclared_apps || with_pid,
            d.max_undeclared_apps,
        )
    }

    fn handle(&mut self, inc: Incoming) {
        let reply = match inc.req {
            Request::Status {} => self.status(),
            Request::Metrics {} => json!({"ok": true, "text": self.metrics_text()}),
            Request::Notify { event, app, pid } => {
                let now_ms = self.now_ms();
                // A name is accepted when declared, profiled or known; a new
                // one when announced with its pid, or when the configuration
                // allows undeclared apps, up to daemon.max_undeclared_apps.
                let result = self.admit(&app, pid.is_some()).and_then(|()| {
                    match pid {
                        None => Ok(None),
                        Some(p) => match read_start_time(&self.cfg.daemon.proc_root, p) {
                            Some(start_time) => Ok(Some(ProcId { pid: p, start_time })),
                            None if event == super::EventKind::Exit => Ok(None),
                            None => Err(format!("pid {p} is not running")),
                        },
                    }
                    .and_then(|proc_id| {
                        let detected = self
                            .detection
                            .as_ref()
                            .is_some_and(|d| d.is_launching(&app));
                        let rec = Record::Event {
                            now_ms,
                            event,
                            app: app.clone(),
                            proc_id,
                        };
                        let msg = if event == super::EventKind::Launch
                            && detected
                            && self.sched.is_launching(&app)
                        {
                            // Detected at its exec: streaming already.
                            format!("{app} launching (detected at its exec)")
                        } else {
                            self.apply(&rec).map_err(|e| e.to_string())?
                        };
                        self.notify_detection(event, &app, proc_id, now_ms);
                        Ok(msg)
                    })
                });
                match result {
                    Ok(msg) => {
                        if pid.is_some() {
                            // Recognise the announced process at once.
                            self.scan(false);
                        }
                        json!({"ok": true, "message": msg})
                    }
                    Err(e) => {
                        if let Some(s) = &self.server {
                            s.errors.fetch_add(1, Ordering::Relaxed);
                        }
                        // Every refused notification names a bad app: the
                        // client exits 2 (bad input) on this mark.
                        let mut r = error_reply(e);
                        r["bad_input"] = json!(true);
                        r
                    }
                }
            }
        };
        let _ = inc.reply.send(reply);
    }

    /// A launcher's notification overrides inference: the detector learns
    /// it (a notified `launched` ends an inferred launch and its recording).
    fn notify_detection(
        &mut self,
        event: super::EventKind,
        app: &str,
        proc_id: Option<ProcId>,
        now_ms: u64,
    ) {
        use super::EventKind as E;
        let notice = match event {
            E::Launch => Notice::Launch,
            E::Launched => Notice::Launched,
            E::Foreground => Notice::Foreground,
            E::Background => Notice::Background,
            E::Exit => return, // exits come from the kernel
        };
        let Some(mut d) = self.detection.take() else {
            return;
        };
        let loads = self.worker.stats().loads;
        let actions = {
            let store = &self.store;
            let profile_of = |a: &str| store.load(a).ok().flatten();
            d.notify(
                app,
                notice,
                proc_id.map(|p| (p.pid, p.start_time)),
                now_ms,
                loads,
                &profile_of,
            )
        };
        self.detection = Some(d);
        self.act_on_detection(actions);
    }

    /// Saves the killer's reuse predictor (not in a dry run, which writes
    /// no state; a failure is a warning, the predictor stays in memory).
    fn save_usage(&self) {
        if self.cfg.daemon.dry_run {
            return;
        }
        if let Err(e) =
            crate::store::save_usage(&self.cfg.daemon.state_dir, self.sched.usage_model())
        {
            tracing::warn!(error = %e, "reuse predictor not saved");
        }
    }

    fn write_outputs(&mut self, final_write: bool, last_trace: &mut Instant) {
        if !self.cfg.daemon.metrics_file.as_os_str().is_empty() {
            let text = self.metrics_text();
            if let Err(e) = write_atomic(&self.cfg.daemon.metrics_file, text.as_bytes()) {
                tracing::warn!(error = %e, file = %self.cfg.daemon.metrics_file.display(), "metrics file not written");
            }
        }
        if self.trace.enabled() && (final_write || last_trace.elapsed() >= Duration::from_secs(10))
        {
            *last_trace = Instant::now();
            if let Err(e) =
                write_atomic(&self.cfg.daemon.trace_file, self.trace.to_json().as_bytes())
            {
                tracing::warn!(error = %e, file = %self.cfg.daemon.trace_file.display(), "trace file not written");
            }
        }
    }

    /// Runs until `stop` is set, then shuts down and restores every setting.
    pub fn run(mut self, stop: &AtomicBool) -> anyhow::Result<()> {
        let tick = Duration::from_millis(self.cfg.daemon.tick_ms);
        let scan_every = self.cfg.daemon.scan_interval_ms;
        self.reload_profiles();
        self.scan(true);
        if let Some(mut d) = self.detection.take() {
            d.adopt_running(&self.domain_pids());
            self.detection = Some(d);
        }
        let mut last_scan = 0u64;
        let mut last_listed = 0u64;
        let mut last_out = Instant::now();
        let mut last_trace = Instant::now();
        let mut last_usage_save = Instant::now();
        let mut k: u32 = 0;
        let origin = Instant::now();
        tracing::info!(socket = %self.cfg.daemon.socket.display(), dry_run = self.cfg.daemon.dry_run,
            tick_ms = self.cfg.daemon.tick_ms, "appflow daemon running");
        while !stop.load(Ordering::SeqCst) {
            let scheduled = origin + tick * k;
            // Serve requests until the tick is due. A tick already due (the
            // last one's work filled its period: a rebalancing tick pages
            // out one tick's worth at the measured rate) first serves what
            // is pending, for at most a tick, so no request waits on a run
            // of busy ticks.
            loop {
                let now = Instant::now();
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let msg = if now < scheduled {
                    match self.rx.recv_timeout(scheduled - now) {
                        Ok(m) => m,
                        Err(mpsc::RecvTimeoutError::Timeout) => break,
                        Err(mpsc::RecvTimeoutError::Disconnected) => {
                            std::thread::sleep(scheduled - now);
                            break;
                        }
                    }
                } else if now < scheduled + tick {
                    match self.rx.try_recv() {
                        Ok(m) => m,
                        Err(_) => break,
                    }
                } else {
                    break;
                };
                match msg {
                    LoopMsg::Request(inc) => self.handle(inc),
                    LoopMsg::AppExec => self.detect_step(true),
                }
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let t0 = Instant::now();
            self.metrics
                .loop_jitter
                .observe(t0.saturating_duration_since(scheduled).as_secs_f64());
            let now_ms = self.now_ms();
            if now_ms >= last_scan + scan_every {
                last_scan = now_ms;
                // Full while rebalancing: page-out targets need fresh adj values.
                let full = self.sched.mode() == ReclaimMode::Rebalancing;
                // With the process connector, the domain is listed again
                // only when its processes' events say it changed, and every
                // LIST_SAFETY_NET_MS for what no event shows (a process
                // moved into the domain's cgroup without an exec).
                let follows = self
                    .detection
                    .as_ref()
                    .is_some_and(Detection::follows_processes);
                if full
                    || !follows
                    || self.domain_changed
                    || now_ms >= last_listed + LIST_SAFETY_NET_MS
                {
                    self.domain_changed = false;
                    last_listed = now_ms;
                    self.scan(full);
                } else {
                    self.refresh_activity();
                }
                self.reload_profiles();
            }
            self.tick();
            self.metrics.loop_work.observe(t0.elapsed().as_secs_f64());
            if last_out.elapsed() >= Duration::from_secs(1) {
                last_out = Instant::now();
                self.write_outputs(false, &mut last_trace);
            }
            if last_usage_save.elapsed() >= USAGE_SAVE_EVERY {
                last_usage_save = Instant::now();
                self.save_usage();
            }
            k += 1;
            // After an overrun the next tick runs at once, and the ticks
            // missed before it are skipped instead of run in a burst.
            let behind = (origin.elapsed().as_nanos() / tick.as_nanos()) as u32;
            if behind > k {
                k = behind;
            }
        }
        self.shutdown(&mut last_trace)
    }

    fn shutdown(&mut self, last_trace: &mut Instant) -> anyhow::Result<()> {
        tracing::info!("appflow daemon stopping: releasing preloads, restoring settings");
        self.detection = None;
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        self.worker.shutdown();
        if let Some(mut w) = self.record_log.take() {
            use std::io::Write;
            let _ = w.flush();
        }
        self.save_usage();
        let errors = self.reclaim.restore_all();
        let now = self.now_ms();
        self.trace.close_open_spans(now);
        self.write_outputs(true, last_trace);
        if errors.is_empty() {
            tracing::info!("every changed setting restored");
            Ok(())
        } else {
            for e in &errors {
                tracing::error!(error = %e, "restore failed (the journal stays; the next start retries)");
            }
            anyhow::bail!("{} settings could not be restored", errors.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `appflow doctor --config`: a 512 MiB cgroup domain (the v1 fixture)
    /// whose state holds a profile of a 200 MiB launch (150 MiB anonymous +
    /// 50 MiB read) gets M_F from that launch, not 15 % of the domain, and
    /// its checks pass; with M_F set by hand to 64 MiB, the check fails.
    #[test]
    fn doctor_sizes_a_configured_domain_from_its_profiles() {
        use appflow_core::profile::{ByteRange, LaunchObservation, ObservedFile};
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        ProfileStore::open(&state)
            .record(
                "big",
                &LaunchObservation {
                    files: vec![ObservedFile {
                        path: "/opt/big/model.bin".into(),
                        size_bytes: 50 << 20,
                        first_access_us: 1,
                        ranges: vec![ByteRange {
                            start: 0,
                            end: 50 << 20,
                        }],
                    }],
                    anon_launch_bytes: 150 << 20,
                    footprint_after_launch_bytes: 200 << 20,
                    launch_ms: 2000,
                    ..Default::default()
                },
            )
            .unwrap();
        let cg = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcg_v1");
        let text = |reclaim: &str| {
            format!(
                "[daemon]\nsocket = \"{0}/s.sock\"\nstate_dir = \"{1}\"\n\
                 [domain]\nkind = \"cgroup\"\nmemory_cgroup = \"{2}\"\n{reclaim}",
                dir.path().display(),
                state.display(),
                cg.display()
            )
        };
        let cfg = Config::from_toml(&text(""), "auto.toml").unwrap();
        let (m_f, n_alloc, checks) = sizing_checks(&cfg, Path::new("/proc")).unwrap();
        assert!(m_f >= 200 << 20, "M_F {m_f}");
        assert!(n_alloc > 0);
        assert!(checks.iter().all(|c| c.ok), "{checks:?}");
        let cfg = Config::from_toml(
            &text("[reclaim]\nlow_memory_bytes = 67108864\n"),
            "hand.toml",
        )
        .unwrap();
        let (m_f, _, checks) = sizing_checks(&cfg, Path::new("/proc")).unwrap();
        assert_eq!(m_f, 64 << 20);
        assert!(
            checks.iter().any(|c| !c.ok && c.what.contains("M_F")),
            "{checks:?}"
        );
    }

    /// A whole machine holds zram's pool: a swapped byte gives back its
    /// compressed size (this kernel's `meminfo`, `vmstat`, `swaps` and
    /// `mm_stat`); a memory cgroup (v1, no zswap) holds none of it.
    #[test]
    fn the_sample_says_what_swapped_memory_holds_of_the_domain() {
        let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let tree = tempfile::tempdir().unwrap();
        let proc_root = tree.path().join("proc");
        std::fs::create_dir_all(tree.path().join("sys/block/zram1")).unwrap();
        std::fs::create_dir_all(proc_root.join("pressure")).unwrap();
        for f in ["meminfo", "vmstat", "pressure/memory"] {
            std::fs::copy(fx.join("vm6/proc").join(f), proc_root.join(f)).unwrap();
        }
        std::fs::copy(fx.join("swap_zram/proc/swaps"), proc_root.join("swaps")).unwrap();
        std::fs::copy(
            fx.join("swap_zram/sys/block/zram1/mm_stat"),
            tree.path().join("sys/block/zram1/mm_stat"),
        )
        .unwrap();
        let s = sample_domain(&Domain::System, &proc_root, 5).unwrap();
        assert_eq!(s.swapped_ram_share, Some(14_467.0 / 24_576.0));
        let cg = Domain::Cgroup(MemCgroup::open(&fx.join("memcg_v1")).unwrap());
        let s = sample_domain(&cg, &proc_root, 5).unwrap();
        assert_eq!(s.swapped_ram_share, Some(0.0));
    }

    #[test]
    fn system_sample_reads_this_machine() {
        let s = sample_domain(&Domain::System, Path::new("/proc"), 5).unwrap();
        assert!(s.total_bytes > 0 && s.avail_bytes <= s.total_bytes);
        assert!(s.alloc_counter > 0);
    }
}
