//! Ariadne's user-space half on a real kernel (the live `PreloadMechanism`'s
//! `start_window` / `switch_observation` / `mark_cold`, docs/peers.md).
//!
//! A child process in a memory cgroup has two anonymous regions of 32 MiB:
//! C (allocated first) and H. Both are made *active* on the kernel's LRU
//! the way a running app's data becomes active: paged out to swap
//! (`process_madvise(MADV_PAGEOUT)`) and touched at once, so the swap-in is
//! a refault the kernel's working-set detection activates. H is paged out
//! before a foreground window and touched in it, so the window brings it
//! back: H is the window's hot set, C (resident all along) is cold. After
//! the window, the real preload worker marks the cold set
//! (`MADV_COLD`), and the kernel's own page flags (`/proc/kpageflags`
//! ACTIVE, found through the PFNs of `/proc/PID/pagemap`) must show C
//! deactivated and H still active. Then the cgroup's limit is lowered by
//! 16 MiB: the kernel's reclaim must take its pages from C, not from H.
//!
//! Needs root, cgroup v1 memory, swap (a zram device of its own when the
//! machine has none) and `/proc/kpageflags`; skipped with the reason
//! printed otherwise.

#[macro_use]
mod support;
use support::{daemon_bin, proc_id, spawn_helper_test, wait_for, Proc, SwapDomain};

use appflow_core::mechanism::PreloadMechanism;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: u64 = 1024 * 1024;
const PAGE: u64 = 4096;
const REGION: usize = 32 << 20;

/// `/proc/kpageflags` bit 6: the page is on an active LRU list.
const KPF_ACTIVE: u64 = 1 << 6;
/// `/proc/kpageflags` bit 5: the page is on an LRU list.
const KPF_LRU: u64 = 1 << 5;

/// The child: allocates region C then region H (every page written with
/// its own bytes), prints `helper-ready <c_addr> <h_addr>`, then for each
/// file `step-N` appearing in `APPFLOW_COLD_DIR` reads every page of the
/// region it names (`c` or `h`) and writes `done-N`.
#[test]
fn helper_process() {
    let Ok(dir) = std::env::var("APPFLOW_COLD_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let fill = |tag: u8| {
        let mut b = vec![0u8; REGION];
        for (i, off) in (0..REGION).step_by(PAGE as usize).enumerate() {
            // Different bytes per page: zram stores no same-filled shortcut.
            b[off] = (i % 251) as u8 + 1;
            b[off + 1] = (i / 251 % 251) as u8;
            b[off + 2] = tag;
        }
        b
    };
    let c = fill(b'c');
    let h = fill(b'h');
    println!(
        "helper-ready {} {}",
        c.as_ptr() as usize,
        h.as_ptr() as usize
    );
    for step in 1.. {
        let f = dir.join(format!("step-{step}"));
        while !f.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let which = std::fs::read_to_string(&f).unwrap();
        let r = if which.trim() == "c" { &c } else { &h };
        let mut sum = 0u64;
        for off in (0..REGION).step_by(PAGE as usize) {
            sum += u64::from(std::hint::black_box(r[off]));
        }
        std::fs::write(dir.join(format!("done-{step}")), sum.to_string()).unwrap();
    }
}

struct Helper {
    proc: Proc,
    dir: PathBuf,
    steps: u32,
    /// Page-aligned (start, length) of region C and region H.
    c: (u64, u64),
    h: (u64, u64),
}

impl Helper {
    fn spawn(cg: &Path, dir: &Path) -> Self {
        let (proc, ready) = spawn_helper_test(
            cg,
            "helper_process",
            &[("APPFLOW_COLD_DIR", dir.display().to_string())],
        );
        let v: Vec<u64> = ready
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let (c, h) = (v[0], v[1]);
        // The whole pages inside each region.
        let inner = |a: u64| {
            let start = a.div_ceil(PAGE) * PAGE;
            (start, (a + REGION as u64 - start) / PAGE * PAGE)
        };
        Helper {
            proc,
            dir: dir.to_path_buf(),
            steps: 0,
            c: inner(c),
            h: inner(h),
        }
    }

    fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    /// The child reads every page of region `which` ("c" or "h").
    fn touch(&mut self, which: &str) {
        self.steps += 1;
        let n = self.steps;
        let tmp = self.dir.join(format!("step-{n}.tmp"));
        std::fs::write(&tmp, which).unwrap();
        std::fs::rename(&tmp, self.dir.join(format!("step-{n}"))).unwrap();
        let done = self.dir.join(format!("done-{n}"));
        wait_for("the helper's step", 30, || done.exists());
    }

    /// Pages `range` of the child out to swap (what reclaim would do).
    fn page_out(&self, range: (u64, u64)) {
        let fd = appflow_linux::actuators::pidfd_open(self.pid()).unwrap();
        let n = appflow_linux::actuators::process_madvise(
            &fd,
            &[range],
            appflow_linux::actuators::MADV_PAGEOUT,
        )
        .unwrap();
        assert_eq!(n, range.1);
    }
}

/// Of the pages of `range` in `pid`: (present, on an active LRU list,
/// swapped), from the pagemap's PFNs and `/proc/kpageflags`.
fn lru_state(pid: u32, range: (u64, u64)) -> (u64, u64, u64) {
    let pm = std::fs::File::open(format!("/proc/{pid}/pagemap")).unwrap();
    let kf = std::fs::File::open("/proc/kpageflags").unwrap();
    let pages = range.1 / PAGE;
    let mut buf = vec![0u8; pages as usize * 8];
    pm.read_exact_at(&mut buf, range.0 / PAGE * 8).unwrap();
    let (mut present, mut active, mut swapped) = (0, 0, 0);
    for e in buf.chunks_exact(8) {
        let e = u64::from_le_bytes(e.try_into().unwrap());
        if e & (1 << 63) != 0 {
            present += 1;
            let pfn = e & ((1 << 55) - 1);
            let mut f = [0u8; 8];
            kf.read_exact_at(&mut f, pfn * 8).unwrap();
            let flags = u64::from_le_bytes(f);
            if flags & KPF_LRU != 0 && flags & KPF_ACTIVE != 0 {
                active += 1;
            }
        } else if e & (1 << 62) != 0 {
            swapped += 1;
        }
    }
    (present, active, swapped)
}

fn cg_read(cg: &Path, file: &str) -> u64 {
    std::fs::read_to_string(cg.join(file))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_last_windows_cold_set_is_deactivated_and_reclaimed_first() {
    use appflow_linux::actuators::preload::{WorkerClient, WorkerPlacement};
    require_kernel!();
    if std::fs::File::open("/proc/kpageflags").is_err() {
        eprintln!("SKIPPED: /proc/kpageflags is not readable");
        return;
    }
    if Path::new("/sys/kernel/mm/lru_gen/enabled").exists()
        && std::fs::read_to_string("/sys/kernel/mm/lru_gen/enabled")
            .is_ok_and(|s| s.trim() != "0x0000")
    {
        eprintln!("SKIPPED: the multi-gen LRU is on (no active/inactive lists to look at)");
        return;
    }
    let d = match SwapDomain::new("appflow-cold", 512 * MIB, 512 * MIB) {
        Ok(d) => d,
        Err(r) => {
            eprintln!("SKIPPED: {r}");
            return;
        }
    };
    let cg = &d.cg;
    let mut h = Helper::spawn(&cg.path, &d.dir);
    let pid = h.pid();
    let id = proc_id(pid);
    let mut w = WorkerClient::spawn(
        &daemon_bin(),
        &["preload-worker".to_string()],
        &WorkerPlacement::default(),
    )
    .unwrap();
    let region_pages = h.c.1 / PAGE;

    // C becomes active data of the app: paged out and refaulted at once.
    h.page_out(h.c);
    h.touch("c");
    // H: paged out before the window, brought back by it (the hot set).
    h.page_out(h.h);
    w.start_window("a", &[id]).unwrap();
    h.touch("h");
    let o = w.switch_observation("a", &[id]).unwrap().unwrap();
    eprintln!("window: {o:?}");
    assert!(
        o.demand_anon >= h.h.1 && o.demand_anon <= h.h.1 + 4 * MIB,
        "the window brought back {} MiB",
        o.demand_anon / MIB
    );
    let before = (lru_state(pid, h.c), lru_state(pid, h.h));
    eprintln!(
        "before marking (present, active, swapped): C {:?}, H {:?}",
        before.0, before.1
    );
    // The premise: both regions resident and active (otherwise there is
    // nothing for the marking to change).
    for (name, (present, active, _)) in [("C", before.0), ("H", before.1)] {
        assert_eq!(present, region_pages, "{name} not all present");
        assert!(
            active * 10 >= region_pages * 9,
            "{name}: only {active} of {region_pages} pages active before marking"
        );
    }

    let asked = w.mark_cold("a", &[id]).unwrap();
    eprintln!("asked to mark {} MiB cold", asked / MIB);
    assert!(asked >= h.c.1, "asked {asked}");
    // The hot set is not in what was asked: C and the process's small
    // other mappings only.
    assert!(asked <= h.c.1 + 8 * MIB, "asked {} MiB", asked / MIB);
    wait_for("the worker's cold marking", 30, || w.stats().cold_jobs >= 1);
    let ws = w.stats();
    eprintln!(
        "worker: marked {} bytes in {} jobs",
        ws.cold_marked_bytes, ws.cold_jobs
    );
    assert_eq!(ws.cold_marked_bytes, asked, "{ws:?}");
    // Once per window: a second call marks nothing.
    assert_eq!(w.mark_cold("a", &[id]).unwrap(), 0);

    let after = (lru_state(pid, h.c), lru_state(pid, h.h));
    eprintln!("after marking: C {:?}, H {:?}", after.0, after.1);
    assert_eq!(
        after.0 .0, region_pages,
        "MADV_COLD evicts nothing by itself"
    );
    assert!(
        after.0 .1 * 20 <= region_pages,
        "C still has {} of {region_pages} pages active",
        after.0 .1
    );
    assert!(
        after.1 .1 * 10 >= region_pages * 9,
        "H lost its active pages: {} of {region_pages}",
        after.1 .1
    );

    // Memory pressure: the cgroup's limit 16 MiB below its usage. The
    // kernel's reclaim takes the cold set, not the hot one.
    let usage = cg_read(&cg.path, "memory.usage_in_bytes");
    std::fs::write(
        cg.path.join("memory.limit_in_bytes"),
        (usage - 16 * MIB).to_string(),
    )
    .unwrap();
    let pressed = (lru_state(pid, h.c), lru_state(pid, h.h));
    eprintln!(
        "after the limit fell by 16 MiB: C {:?}, H {:?}",
        pressed.0, pressed.1
    );
    let (c_out, h_out) = (pressed.0 .2 * PAGE, pressed.1 .2 * PAGE);
    assert!(c_out >= 8 * MIB, "only {} KiB of C reclaimed", c_out / 1024);
    assert!(
        h_out * 8 <= c_out,
        "H lost {} KiB against C's {} KiB",
        h_out / 1024,
        c_out / 1024
    );
    drop(w);
    drop(h);
}
