//! Kernel counters of the domain, sampled as raw values; deltas are computed
//! by a pure function of two samples.
//!
//! Read with the daemon's readers (`appflow_linux::readers`): /proc/vmstat
//! (reclaim scans/steals by type, swap in/out, global allocation stalls),
//! the domain's memory cgroup (memory.stat re-faults and major faults; the
//! limit hits, i.e. reclaim in the allocating task, the cgroup's "direct
//! reclaim"; kernel OOM kills in the domain). Bytes and requests read from
//! storage come from the flash device's own counters.

use appflow_linux::readers::{read_vmstat, MemCgStat, MemCgroup, VmStat};
use serde::Serialize;
use std::path::Path;

/// Raw counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// /proc/vmstat.
    pub vmstat: VmStat,
    /// Domain memory.stat.
    pub memstat: MemCgStat,
    /// Times the domain hit its limit.
    pub limit_hits: u64,
    /// Kernel OOM kills in the domain.
    pub oom_kill: u64,
    /// Bytes read from storage by the domain.
    pub read_bytes: u64,
    /// Read requests to storage by the domain.
    pub read_ios: u64,
}

/// Reads a sample (storage counters left 0 for the caller). A file that
/// cannot be read reads as zero (and shows as a zero delta).
pub fn sample(proc_root: &Path, mem_root: &Path) -> Sample {
    let cg = MemCgroup::open(mem_root).ok();
    let cg = cg.as_ref();
    Sample {
        vmstat: read_vmstat(proc_root).unwrap_or_default(),
        memstat: cg.and_then(|c| c.stat().ok()).unwrap_or_default(),
        limit_hits: cg.and_then(|c| c.limit_hits().ok()).unwrap_or(0),
        oom_kill: cg.and_then(|c| c.oom_kills().ok()).unwrap_or(0),
        read_bytes: 0,
        read_ios: 0,
    }
}

/// What changed between two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Delta {
    /// Pages scanned for reclaim, anonymous (vmstat pgscan_anon).
    pub pgscan_anon: u64,
    /// Pages scanned for reclaim, file (vmstat pgscan_file).
    pub pgscan_file: u64,
    /// Pages reclaimed, anonymous (vmstat pgsteal_anon).
    pub pgsteal_anon: u64,
    /// Pages reclaimed, file (vmstat pgsteal_file).
    pub pgsteal_file: u64,
    /// Pages scanned by kswapd / by direct (incl. memcg limit) reclaim.
    pub pgscan_kswapd: u64,
    /// Pages scanned in the allocating task (global direct and memcg limit reclaim).
    pub pgscan_direct: u64,
    /// Pages swapped in.
    pub pswpin: u64,
    /// Pages swapped out.
    pub pswpout: u64,
    /// Re-faulted anonymous pages in the domain.
    pub refault_anon: u64,
    /// Re-faulted file pages in the domain.
    pub refault_file: u64,
    /// Global allocation stalls (allocstall_*).
    pub allocstalls: u64,
    /// Times the domain hit its limit (memory.failcnt): cgroup reclaim in the allocating task.
    pub limit_hits: u64,
    /// Kernel OOM kills in the domain.
    pub oom_kills: u64,
    /// Major faults in the domain.
    pub pgmajfault: u64,
    /// Bytes read from storage by the domain.
    pub read_bytes: u64,
    /// Read I/Os issued by the domain.
    pub read_ios: u64,
}

impl Delta {
    /// Re-faulted pages / reclaimed pages (0 when nothing was reclaimed).
    pub fn refault_ratio(&self) -> f64 {
        let ev = self.pgsteal_anon + self.pgsteal_file;
        if ev == 0 {
            0.0
        } else {
            (self.refault_anon + self.refault_file) as f64 / ev as f64
        }
    }

    /// Adds another delta (for totals over repetitions).
    pub fn add(&mut self, o: &Delta) {
        macro_rules! add {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        add!(
            pgscan_anon,
            pgscan_file,
            pgsteal_anon,
            pgsteal_file,
            pgscan_kswapd,
            pgscan_direct,
            pswpin,
            pswpout,
            refault_anon,
            refault_file,
            allocstalls,
            limit_hits,
            oom_kills,
            pgmajfault,
            read_bytes,
            read_ios
        );
    }
}

/// The delta from `a` to `b` (counter resets read as zero).
pub fn delta(a: &Sample, b: &Sample) -> Delta {
    let v = |k: &str| b.vmstat.get(k).saturating_sub(a.vmstat.get(k));
    let m = |f: fn(&MemCgStat) -> u64| f(&b.memstat).saturating_sub(f(&a.memstat));
    Delta {
        pgscan_anon: v("pgscan_anon"),
        pgscan_file: v("pgscan_file"),
        pgsteal_anon: v("pgsteal_anon"),
        pgsteal_file: v("pgsteal_file"),
        pgscan_kswapd: v("pgscan_kswapd"),
        pgscan_direct: v("pgscan_direct"),
        pswpin: v("pswpin"),
        pswpout: v("pswpout"),
        refault_anon: m(|s| s.refault_anon),
        refault_file: m(|s| s.refault_file),
        allocstalls: b
            .vmstat
            .allocstalls()
            .saturating_sub(a.vmstat.allocstalls()),
        limit_hits: b.limit_hits.saturating_sub(a.limit_hits),
        oom_kills: b.oom_kill.saturating_sub(a.oom_kill),
        pgmajfault: m(|s| s.pgmajfault),
        read_bytes: b.read_bytes.saturating_sub(a.read_bytes),
        read_ios: b.read_ios.saturating_sub(a.read_ios),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use appflow_linux::readers::{parse_memcg_stat_v1, parse_vmstat};

    #[test]
    fn deltas_of_real_kernel_text() {
        // Lines as this kernel (6.18) prints them.
        let a = Sample {
            vmstat: parse_vmstat("pgscan_anon 10\npgscan_file 100\npgsteal_file 90\nallocstall_normal 1\nallocstall_movable 0\npswpout 5\n").unwrap(),
            memstat: MemCgStat {
                refault_file: 7,
                pgmajfault: 3,
                ..Default::default()
            },
            limit_hits: 2,
            oom_kill: 0,
            read_bytes: 4096,
            read_ios: 1,
        };
        let mut b = a.clone();
        b.vmstat.counters.insert("pgscan_file".into(), 300);
        b.vmstat.counters.insert("pgsteal_file".into(), 290);
        b.vmstat.counters.insert("allocstall_movable".into(), 4);
        b.memstat.refault_file = 57;
        b.limit_hits = 12;
        b.read_bytes = 8192;
        let d = delta(&a, &b);
        assert_eq!(d.pgscan_file, 200);
        assert_eq!(d.pgsteal_file, 200);
        assert_eq!(d.allocstalls, 4);
        assert_eq!(d.refault_file, 50);
        assert_eq!(d.limit_hits, 10);
        assert_eq!(d.read_bytes, 4096);
        assert!((d.refault_ratio() - 0.25).abs() < 1e-12);
        // A counter that went backwards (reset) reads as zero.
        let d = delta(&b, &a);
        assert_eq!(d.pgscan_file, 0);
        assert_eq!(Delta::default().refault_ratio(), 0.0);
    }

    #[test]
    fn a_sample_of_a_fixture_cgroup() {
        let fx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../linux/tests/fixtures");
        let s = sample(&fx.join("vm6/proc"), &fx.join("memcg_v1"));
        assert!(s.vmstat.get("pgfault") > 0);
        let text = std::fs::read_to_string(fx.join("memcg_v1/memory.stat")).unwrap();
        assert_eq!(s.memstat, parse_memcg_stat_v1(&text).unwrap());
        assert_eq!((s.limit_hits, s.oom_kill), (78, 1));
        // A missing cgroup reads as zero.
        let s = sample(&fx.join("vm6/proc"), &fx.join("no-such-cgroup"));
        assert_eq!(s.memstat, MemCgStat::default());
    }
}
