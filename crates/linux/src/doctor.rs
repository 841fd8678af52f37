//! `appflow doctor`: every kernel interface the daemon (and the recorder)
//! uses, whether this machine has it, and what degrades without it.
//!
//! File-based probes read under a proc root and a sys root (tests point
//! them at fixture trees of real kernel text); syscall probes are
//! [`Features::probe`] (harmless calls on the probing process itself).

use crate::actuators::Features;
use crate::readers::{parse_mountinfo, parse_psi, MountInfo};
use std::path::{Path, PathBuf};

/// Where the probes read.
#[derive(Debug, Clone)]
pub struct Roots {
    /// Root of the proc file system (`/proc`).
    pub proc_root: PathBuf,
    /// Root of sysfs (`/sys`); cgroup mount points under `/sys` are looked
    /// up below it.
    pub sys_root: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
        }
    }
}

/// One interface and its state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// Interface name.
    pub feature: &'static str,
    /// Present and usable by this process.
    pub present: bool,
    /// What was found (paths, values, errors).
    pub detail: String,
    /// What the daemon does with it.
    pub used_for: &'static str,
    /// What degrades without it.
    pub without: &'static str,
}

fn check(
    feature: &'static str,
    present: bool,
    detail: impl Into<String>,
    used_for: &'static str,
    without: &'static str,
) -> Check {
    Check {
        feature,
        present,
        detail: detail.into(),
        used_for,
        without,
    }
}

/// A mount point as seen below the roots (`/sys/...` → `<sys_root>/...`).
fn under_roots(roots: &Roots, mount_point: &Path) -> PathBuf {
    match mount_point.strip_prefix("/sys") {
        Ok(rest) => roots.sys_root.join(rest),
        Err(_) => mount_point.to_path_buf(),
    }
}

fn mounts(roots: &Roots) -> Vec<MountInfo> {
    std::fs::read_to_string(roots.proc_root.join("self/mountinfo"))
        .ok()
        .and_then(|t| parse_mountinfo(&t).ok())
        .unwrap_or_default()
}

/// The hierarchy id of `controller` in /proc/cgroups text (0 = not bound to
/// a v1 hierarchy), None when absent or disabled.
pub fn v1_hierarchy(proc_cgroups: &str, controller: &str) -> Option<u32> {
    proc_cgroups.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 4 && f[0] == controller && f[3] == "1").then(|| f[1].parse().ok())?
    })
}

/// The v1 memory controller's mount (a `cgroup` mount holding
/// `memory.limit_in_bytes`), as a path below the roots.
pub fn v1_memory_mount(roots: &Roots) -> Option<PathBuf> {
    mounts(roots)
        .iter()
        .filter(|m| m.fs_type == "cgroup")
        .map(|m| under_roots(roots, &m.mount_point))
        .find(|p| p.join("memory.limit_in_bytes").exists())
}

/// The cgroup2 mounts and the controllers their root offers.
pub fn v2_mounts(roots: &Roots) -> Vec<(PathBuf, Vec<String>)> {
    mounts(roots)
        .iter()
        .filter(|m| m.fs_type == "cgroup2")
        .map(|m| {
            let p = under_roots(roots, &m.mount_point);
            let ctrls = std::fs::read_to_string(p.join("cgroup.controllers"))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect();
            (p, ctrls)
        })
        .collect()
}

/// CapEff of /proc/self/status text.
pub fn cap_eff(status: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let v = l.strip_prefix("CapEff:")?.trim();
        u64::from_str_radix(v, 16).ok()
    })
}

/// `CAP_IPC_LOCK` (capability.h).
const CAP_IPC_LOCK: u32 = 14;

fn rlimit_memlock() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    (unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } == 0).then_some(rl.rlim_cur)
}

/// The mlock check: unlimited locking with `CAP_IPC_LOCK` (or an infinite
/// RLIMIT_MEMLOCK); otherwise the limit caps what launch protection can hold.
pub fn mlock_check(cap_eff: Option<u64>, memlock_bytes: Option<u64>) -> (bool, String) {
    let cap = cap_eff.map(|c| c >> CAP_IPC_LOCK & 1 == 1);
    let limit = match memlock_bytes {
        Some(libc::RLIM_INFINITY) => "unlimited".to_string(),
        Some(b) => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        None => "unknown".into(),
    };
    let ok = cap == Some(true) || memlock_bytes == Some(libc::RLIM_INFINITY);
    let capword = match cap {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    (
        ok,
        format!("RLIMIT_MEMLOCK {limit}, CAP_IPC_LOCK {capword}"),
    )
}

fn errno_text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Every check, in a fixed order. `features` comes from [`Features::probe`]
/// (passed in so tests can give a fixed one).
pub fn run_checks(roots: &Roots, features: &Features) -> Vec<Check> {
    let mut out = Vec::new();
    let cgroups = std::fs::read_to_string(roots.proc_root.join("cgroups")).unwrap_or_default();
    let v1 = v1_memory_mount(roots);
    let hier = v1_hierarchy(&cgroups, "memory");
    out.push(check(
        "cgroup v1 memory",
        v1.is_some(),
        match (&v1, hier) {
            (Some(p), _) => format!("mounted at {}", p.display()),
            (None, Some(h)) if h > 0 => format!("bound to hierarchy {h} but not mounted"),
            _ => "memory controller not on a v1 hierarchy".into(),
        },
        "a cgroup domain's memory, limit, stat, swappiness",
        "a v1 cgroup domain cannot be used (v2 or kind = \"system\")",
    ));
    let v2 = v2_mounts(roots);
    let v2_mem = v2.iter().find(|(_, c)| c.iter().any(|c| c == "memory"));
    out.push(check(
        "cgroup v2 memory",
        v2_mem.is_some(),
        match (v2_mem, v2.first()) {
            (Some((p, _)), _) => format!("{} offers memory", p.display()),
            (None, Some((p, c))) => format!(
                "{} offers [{}]; memory is bound to v1",
                p.display(),
                c.join(" ")
            ),
            (None, None) => "no cgroup2 mount".into(),
        },
        "a v2 cgroup domain (memory.current/max/stat, memory.pressure)",
        "a v2 cgroup domain cannot be used (v1 or kind = \"system\")",
    ));
    let swp = v1
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p.join("memory.swappiness")).ok());
    out.push(check(
        "per-cgroup swappiness",
        swp.is_some(),
        match &swp {
            Some(s) => format!("v1 memory.swappiness = {}", s.trim()),
            None => "no v1 memory.swappiness (cgroup v2 has none)".into(),
        },
        "efficiency-first mode: swappiness 0 for the domain only",
        "efficiency-first keeps protected ranges only on a cgroup domain (the system domain uses vm.swappiness)",
    ));
    let psi_text = std::fs::read_to_string(roots.proc_root.join("pressure/memory"));
    let psi = psi_text
        .as_deref()
        .map_err(|e| e.to_string())
        .and_then(|t| {
            parse_psi(t)
                .map(|p| format!("some avg10 {:.2}", p.some_avg10))
                .map_err(|e| e.to_string())
        });
    out.push(check(
        "PSI",
        psi.is_ok(),
        match &psi {
            Ok(s) => format!("pressure/memory: {s}"),
            Err(e) => format!("pressure/memory: {e}"),
        },
        "the killer's pressure trigger, metrics",
        "kills trigger on available memory alone",
    ));
    out.push(check(
        "pidfd",
        features.pidfd,
        if features.pidfd {
            "pidfd_open works"
        } else {
            "pidfd_open failed"
        },
        "process identity for kills and page-out (no PID reuse races)",
        "the killer and rebalancing page-out are disabled (never act on a bare PID)",
    ));
    out.push(check(
        "process_madvise",
        features.process_madvise,
        if features.process_madvise {
            "syscall 440 present"
        } else {
            "ENOSYS"
        },
        "rebalancing: MADV_PAGEOUT of background apps' anonymous memory",
        "rebalancing only restores swappiness; no proactive anon page-out",
    ));
    out.push(check(
        "process_mrelease",
        features.process_mrelease,
        if features.process_mrelease {
            "syscall 448 present"
        } else {
            "ENOSYS"
        },
        "freeing a killed app's memory at once",
        "memory of a killed app returns when the kernel reaps it (slower)",
    ));
    out.push(check(
        "fanotify",
        features.fanotify.is_ok(),
        match features.fanotify {
            Ok(()) => "fanotify_init with permission events works".into(),
            Err(e) => format!("fanotify_init: {}", errno_text(e)),
        },
        "appflow record: files opened by the launch, before their first read",
        "profiles cannot be recorded on this machine",
    ));
    out.push(check(
        "cn_proc",
        features.cn_proc.is_ok(),
        match features.cn_proc {
            Ok(()) => "process connector subscription acknowledged".into(),
            Err(e) => format!("subscribe: {}", errno_text(e)),
        },
        "launch detection without a launcher: exec/fork/exit events",
        "launches are found by the periodic /proc scan (up to a scan interval late, short-lived processes missed)",
    ));
    let status = std::fs::read_to_string(roots.proc_root.join("self/status")).unwrap_or_default();
    let (ml_ok, ml_detail) = mlock_check(cap_eff(&status), rlimit_memlock());
    out.push(check(
        "mlock",
        ml_ok,
        ml_detail,
        "protected launch files held resident by the preload worker",
        "protection is capped by RLIMIT_MEMLOCK; spans beyond it stay evictable",
    ));
    let zram = zram_devices(roots);
    let swaps = std::fs::read_to_string(roots.proc_root.join("swaps")).unwrap_or_default();
    let zram_swap = swaps.lines().any(|l| l.starts_with("/dev/zram"));
    let zram_ctl = roots.sys_root.join("class/zram-control").exists();
    out.push(check(
        "zram",
        !zram.is_empty() || zram_ctl,
        if zram.is_empty() && !zram_ctl {
            "no zram devices, no zram-control".to_string()
        } else {
            format!(
                "devices [{}]{}",
                zram.join(" "),
                if zram_swap {
                    ", swap on zram"
                } else {
                    ", not used as swap"
                }
            )
        },
        "compressed swap for rebalancing's anon page-out (as on phones)",
        "page-out goes to disk swap, or nothing is paged out without swap",
    ));
    let damon = roots.sys_root.join("kernel/mm/damon/admin");
    out.push(check(
        "DAMON",
        damon.exists(),
        if damon.exists() {
            "sysfs admin interface present".to_string()
        } else {
            "no /sys/kernel/mm/damon/admin".into()
        },
        "not used yet (candidate source of access hotness for anon reclaim)",
        "nothing today",
    ));
    out.push(check(
        "cachestat",
        features.cachestat,
        if features.cachestat {
            "syscall 451 present"
        } else {
            "ENOSYS"
        },
        "not used yet (cheaper page-cache residency than mmap+mincore)",
        "residency is read with mmap+mincore",
    ));
    out.push(check(
        "freezer (v1)",
        features.freezer_v1,
        if features.freezer_v1 {
            "/sys/fs/cgroup/freezer present"
        } else {
            "no v1 freezer"
        },
        "killer option freeze_first (stop a victim before killing it)",
        "freeze_first is ignored",
    ));
    out
}

/// zram block devices under `<sys_root>/block`.
pub fn zram_devices(roots: &Roots) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(roots.sys_root.join("block"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("zram"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The checks as an aligned text table.
pub fn render_table(checks: &[Check]) -> String {
    use std::fmt::Write as _;
    let w = checks.iter().map(|c| c.feature.len()).max().unwrap_or(0);
    let mut o = String::new();
    let _ = writeln!(o, "{:w$}  {:7}  detail", "feature", "status");
    for c in checks {
        let _ = writeln!(
            o,
            "{:w$}  {:7}  {}",
            c.feature,
            if c.present { "present" } else { "MISSING" },
            c.detail
        );
        if !c.present {
            let _ = writeln!(o, "{:w$}  {:7}  without it: {}", "", "", c.without);
        }
    }
    let missing = checks.iter().filter(|c| !c.present).count();
    let _ = writeln!(
        o,
        "\n{} of {} present{}",
        checks.len() - missing,
        checks.len(),
        if missing == 0 {
            String::new()
        } else {
            format!("; {missing} missing (the daemon runs and degrades as shown)")
        }
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> (tempfile::TempDir, Roots) {
        let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor");
        let t = tempfile::tempdir().unwrap();
        let copy = |from: &str, to: &str| {
            let dst = t.path().join(to);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(fx.join(from), dst).unwrap();
        };
        copy("proc_cgroups", "proc/cgroups");
        copy("proc_self_status", "proc/self/status");
        copy("proc_swaps", "proc/swaps");
        copy("proc_pressure_memory", "proc/pressure/memory");
        copy(
            "sys_fs_cgroup_unified_cgroup.controllers",
            "sys/fs/cgroup/unified/cgroup.controllers",
        );
        std::fs::write(t.path().join("sys/fs/cgroup/unified/cgroup.procs"), "1\n").unwrap();
        let mem = t.path().join("sys/fs/cgroup/memory");
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::write(mem.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(mem.join("memory.swappiness"), "60\n").unwrap();
        std::fs::create_dir_all(t.path().join("sys/block/zram0")).unwrap();
        std::fs::create_dir_all(t.path().join("sys/block/vda")).unwrap();
        std::fs::create_dir_all(t.path().join("sys/kernel/mm/damon/admin")).unwrap();
        copy("proc_self_mountinfo", "proc/self/mountinfo");
        let roots = Roots {
            proc_root: t.path().join("proc"),
            sys_root: t.path().join("sys"),
        };
        (t, roots)
    }

    fn all_features() -> Features {
        Features {
            pidfd: true,
            process_madvise: true,
            process_mrelease: true,
            psi: true,
            freezer_v1: true,
            fanotify: Ok(()),
            cn_proc: Ok(()),
            cachestat: true,
        }
    }

    fn find<'a>(c: &'a [Check], f: &str) -> &'a Check {
        c.iter().find(|c| c.feature == f).unwrap()
    }

    #[test]
    fn this_machines_tree_reads_as_v1_memory() {
        // Fixture files are copies of this machine's kernel files (Linux 6.18,
        // memory bound to cgroup v1, cgroup2 at /sys/fs/cgroup/unified with hugetlb only).
        let (_t, roots) = fixture();
        let c = run_checks(&roots, &all_features());
        assert_eq!(c.len(), 14);
        let v1 = find(&c, "cgroup v1 memory");
        assert!(v1.present, "{v1:?}");
        assert!(v1.detail.ends_with("sys/fs/cgroup/memory"), "{}", v1.detail);
        let v2 = find(&c, "cgroup v2 memory");
        assert!(!v2.present);
        assert!(
            v2.detail.contains("[hugetlb]; memory is bound to v1"),
            "{}",
            v2.detail
        );
        assert_eq!(
            find(&c, "per-cgroup swappiness").detail,
            "v1 memory.swappiness = 60"
        );
        assert!(find(&c, "PSI").present);
        let z = find(&c, "zram");
        assert!(
            z.present && z.detail == "devices [zram0], not used as swap",
            "{z:?}"
        );
        assert!(find(&c, "DAMON").present);
        let m = find(&c, "mlock");
        assert!(m.present, "{m:?}");
        assert!(m.detail.contains("CAP_IPC_LOCK yes"));
        let t = render_table(&c);
        assert!(
            t.lines()
                .any(|l| l.starts_with("cgroup v2 memory ") && l.contains(" MISSING ")),
            "{t}"
        );
        assert!(t.contains("without it: a v2 cgroup domain cannot be used"));
        assert!(t.contains("13 of 14 present; 1 missing"), "{t}");
    }

    #[test]
    fn missing_everything_degrades_without_error() {
        let t = tempfile::tempdir().unwrap();
        let roots = Roots {
            proc_root: t.path().join("proc"),
            sys_root: t.path().join("sys"),
        };
        let f = Features {
            pidfd: false,
            process_madvise: false,
            process_mrelease: false,
            psi: false,
            freezer_v1: false,
            fanotify: Err(libc::EPERM),
            cn_proc: Err(libc::EPROTONOSUPPORT),
            cachestat: false,
        };
        let c = run_checks(&roots, &f);
        let present: Vec<&str> = c.iter().filter(|c| c.present).map(|c| c.feature).collect();
        // mlock depends on this process's real limit and CapEff (unreadable here: unknown).
        assert!(present.iter().all(|p| *p == "mlock"), "{present:?}");
        assert!(find(&c, "cn_proc").detail.contains("subscribe:"));
        assert_eq!(find(&c, "cgroup v2 memory").detail, "no cgroup2 mount");
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j[0]["feature"], "cgroup v1 memory");
        assert_eq!(j[0]["present"], false);
    }

    #[test]
    fn v2_with_memory_and_small_parsers() {
        let (t, roots) = fixture();
        std::fs::write(
            t.path().join("sys/fs/cgroup/unified/cgroup.controllers"),
            "cpuset cpu io memory hugetlb pids rdma misc\n",
        )
        .unwrap();
        let c = run_checks(&roots, &all_features());
        assert!(find(&c, "cgroup v2 memory").present);
        let cg =
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\nmemory\t4\t50\t1\nhugetlb\t0\t1\t1\n";
        assert_eq!(v1_hierarchy(cg, "memory"), Some(4));
        assert_eq!(v1_hierarchy(cg, "hugetlb"), Some(0));
        assert_eq!(v1_hierarchy(cg, "io"), None);
        assert_eq!(cap_eff("CapEff:\t000001fffeffffff\n"), Some(0x1fffeffffff));
        let (ok, d) = mlock_check(Some(0), Some(8 << 20));
        assert!(!ok);
        assert_eq!(d, "RLIMIT_MEMLOCK 8.0 MiB, CAP_IPC_LOCK no");
        assert!(mlock_check(Some(0), Some(libc::RLIM_INFINITY)).0);
    }
}
