//! Kernel counters of the domain, sampled as raw values; deltas are computed
//! by a pure function of two samples (STYLE §3).
//!
//! Sources: /proc/vmstat (reclaim scans/steals by type, swap in/out, global
//! allocation stalls, OOM kills), the domain's memory cgroup (memory.stat
//! `total_*` re-faults and sizes, memory.failcnt = times the limit was hit,
//! which is when the cgroup reclaims in the allocating task: the cgroup's
//! "direct reclaim"), memory.oom_control (kernel OOM kills in the domain),
//! the blkio root (bytes and I/Os read from the loop device by all leaves),
//! and zram's mm_stat.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Raw counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// /proc/vmstat.
    pub vmstat: BTreeMap<String, u64>,
    /// Domain memory.stat.
    pub memstat: BTreeMap<String, u64>,
    /// memory.failcnt.
    pub failcnt: u64,
    /// oom_kill of memory.oom_control.
    pub oom_kill: u64,
    /// Bytes read from the loop device by the domain.
    pub read_bytes: u64,
    /// Read I/Os to the loop device by the domain.
    pub read_ios: u64,
}

/// Parses "name value" lines.
pub fn parse_kv(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// Sums the `Read` lines of a v1 blkio throttle file for device `majmin`.
pub fn parse_blkio_reads(text: &str, majmin: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (d, op, v) = (it.next()?, it.next()?, it.next()?);
            (d == majmin && op == "Read").then(|| v.parse::<u64>().ok())?
        })
        .sum()
}

/// Reads a sample. Missing files read as zero (and show as zero deltas).
pub fn sample(proc_root: &Path, mem_root: &Path, blkio_root: &Path, majmin: &str) -> Sample {
    let rd = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let one = |p: &Path| rd(p).trim().parse::<u64>().unwrap_or(0);
    Sample {
        vmstat: parse_kv(&rd(&proc_root.join("vmstat"))),
        memstat: parse_kv(&rd(&mem_root.join("memory.stat"))),
        failcnt: one(&mem_root.join("memory.failcnt")),
        oom_kill: parse_kv(&rd(&mem_root.join("memory.oom_control")))
            .get("oom_kill")
            .copied()
            .unwrap_or(0),
        read_bytes: parse_blkio_reads(
            &rd(&blkio_root.join("blkio.throttle.io_service_bytes_recursive")),
            majmin,
        ),
        read_ios: parse_blkio_reads(
            &rd(&blkio_root.join("blkio.throttle.io_serviced_recursive")),
            majmin,
        ),
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
    let v = |k: &str| {
        b.vmstat
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(a.vmstat.get(k).copied().unwrap_or(0))
    };
    let vsum = |prefix: &str| {
        let s = |m: &BTreeMap<String, u64>| -> u64 {
            m.iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(_, v)| v)
                .sum()
        };
        s(&b.vmstat).saturating_sub(s(&a.vmstat))
    };
    let m = |k: &str| {
        b.memstat
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(a.memstat.get(k).copied().unwrap_or(0))
    };
    Delta {
        pgscan_anon: v("pgscan_anon"),
        pgscan_file: v("pgscan_file"),
        pgsteal_anon: v("pgsteal_anon"),
        pgsteal_file: v("pgsteal_file"),
        pgscan_kswapd: v("pgscan_kswapd"),
        pgscan_direct: v("pgscan_direct"),
        pswpin: v("pswpin"),
        pswpout: v("pswpout"),
        refault_anon: m("total_workingset_refault_anon"),
        refault_file: m("total_workingset_refault_file"),
        allocstalls: vsum("allocstall_"),
        limit_hits: b.failcnt.saturating_sub(a.failcnt),
        oom_kills: b.oom_kill.saturating_sub(a.oom_kill),
        pgmajfault: m("total_pgmajfault"),
        read_bytes: b.read_bytes.saturating_sub(a.read_bytes),
        read_ios: b.read_ios.saturating_sub(a.read_ios),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_of_real_kernel_text() {
        // Lines as this kernel (6.18) prints them.
        let a = Sample {
            vmstat: parse_kv("pgscan_anon 10\npgscan_file 100\npgsteal_file 90\nallocstall_normal 1\nallocstall_movable 0\npswpout 5\n"),
            memstat: parse_kv("total_workingset_refault_file 7\ntotal_pgmajfault 3\n"),
            failcnt: 2,
            oom_kill: 0,
            read_bytes: parse_blkio_reads("7:3 Read 4096\n7:3 Write 0\n7:4 Read 99\nTotal 4195\n", "7:3"),
            read_ios: 1,
        };
        assert_eq!(a.read_bytes, 4096);
        let mut b = a.clone();
        b.vmstat.insert("pgscan_file".into(), 300);
        b.vmstat.insert("pgsteal_file".into(), 290);
        b.vmstat.insert("allocstall_movable".into(), 4);
        b.memstat.insert("total_workingset_refault_file".into(), 57);
        b.failcnt = 12;
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
}
