//! ASAP's switch prepaging on a real kernel (the live `PreloadMechanism`'s
//! `start_window` / `prepage` / `switch_observation`, docs/peers.md).
//!
//! A child process in a memory cgroup allocates 64 MiB of anonymous memory,
//! which the live reclaim pages out (`process_madvise(MADV_PAGEOUT)`) to
//! swap. A first window, in which the child touches all of it, teaches the
//! mechanism the footprint (all demand). After a second page-out, the
//! second window prepages the footprint through the real preload worker
//! (`MADV_WILLNEED` from the worker process in the cgroup), the child
//! touches half of it, and the observation must say about half used and
//! half prepaged but unused.
//!
//! Needs root, cgroup v1 memory and swap (a zram device of its own when the
//! machine has none); skipped with the reason printed otherwise.

#[macro_use]
mod support;
use support::{daemon_bin, proc_id, random_tag, spawn_helper_test, wait_for, Proc, SwapDomain};

use appflow_core::mechanism::{PreloadMechanism, ReclaimMechanism};
use appflow_core::prepage::PrepagePlan;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: u64 = 1024 * 1024;
const PAGE: usize = 4096;

/// The child: allocates `APPFLOW_PREPAGE_HELPER` MiB (every page written),
/// prints `helper-ready`, then for each file `step-N` appearing in
/// `APPFLOW_PREPAGE_DIR` reads every page of the fraction it names ("1" or
/// "0.5", from the start) and writes `done-N`.
#[test]
fn helper_process() {
    let Ok(mib) = std::env::var("APPFLOW_PREPAGE_HELPER") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("APPFLOW_PREPAGE_DIR").unwrap());
    let n = mib.parse::<usize>().unwrap() << 20;
    let mut b = vec![0u8; n];
    for (i, off) in (0..n).step_by(PAGE).enumerate() {
        // Different bytes per page: zram stores no same-filled shortcut.
        b[off] = (i % 251) as u8 + 1;
        b[off + 1] = (i / 251 % 251) as u8;
    }
    println!("helper-ready");
    for step in 1.. {
        let f = dir.join(format!("step-{step}"));
        while !f.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let frac: f64 = std::fs::read_to_string(&f).unwrap().trim().parse().unwrap();
        let upto = ((n as f64 * frac) as usize) / PAGE * PAGE;
        let mut sum = 0u64;
        for off in (0..upto).step_by(PAGE) {
            sum += u64::from(std::hint::black_box(b[off]));
        }
        std::fs::write(dir.join(format!("done-{step}")), sum.to_string()).unwrap();
    }
}

fn spawn_helper(cg: &Path, dir: &Path, mib: u64) -> Proc {
    spawn_helper_test(
        cg,
        "helper_process",
        &[
            ("APPFLOW_PREPAGE_HELPER", mib.to_string()),
            ("APPFLOW_PREPAGE_DIR", dir.display().to_string()),
        ],
    )
    .0
}

fn step(dir: &Path, n: u32, frac: &str) {
    std::fs::write(dir.join(format!("step-{n}.tmp")), frac).unwrap();
    std::fs::rename(
        dir.join(format!("step-{n}.tmp")),
        dir.join(format!("step-{n}")),
    )
    .unwrap();
    let done = dir.join(format!("done-{n}"));
    wait_for("the helper's step", 30, || done.exists());
}

fn vm_swap_kib(pid: u32) -> u64 {
    appflow_linux::readers::read_smaps_rollup(Path::new("/proc"), pid)
        .unwrap()
        .swap_kb
}

fn page_out_all(pid: u32) -> u64 {
    let (j, _) = appflow_linux::journal::Journal::open(
        &std::env::temp_dir().join(format!("appflow-prepage-journal-{}", random_tag())),
        false,
    )
    .unwrap();
    let mut r = appflow_linux::actuators::reclaim::LiveReclaim::new(
        j,
        appflow_linux::actuators::reclaim::SwappinessTarget::None,
        Path::new("/proc"),
        false,
    );
    let n = r.page_out_anon(pid, 1024 * MIB).unwrap();
    assert!(r.page_out_errors.is_empty(), "{:?}", r.page_out_errors);
    n
}

#[test]
fn a_prepaged_switch_that_touches_half_is_half_precise() {
    use appflow_linux::actuators::preload::{WorkerClient, WorkerPlacement};
    require_kernel!();
    let d = match SwapDomain::new("appflow-prepage", 512 * MIB, 512 * MIB) {
        Ok(d) => d,
        Err(r) => {
            eprintln!("SKIPPED: {r}");
            return;
        }
    };
    let (cg, dir) = (&d.cg, &d.dir);
    let h = spawn_helper(&cg.path, dir, 64);
    let pid = h.0.id();
    let id = proc_id(pid);
    let worker = WorkerClient::spawn(
        &daemon_bin(),
        &["preload-worker".to_string()],
        &WorkerPlacement {
            memory_cgroup: Some(cg.path.clone()),
            blkio_cgroup: None,
        },
    );
    let mut w = worker.unwrap();

    // Window 1: everything swapped at its start, all touched: all demand.
    page_out_all(pid);
    let swapped = vm_swap_kib(pid) * 1024;
    assert!(swapped >= 60 * MIB, "only {swapped} bytes went to swap");
    w.start_window("a", &[id]).unwrap();
    step(dir, 1, "1");
    let o1 = w.switch_observation("a", &[id]).unwrap().unwrap();
    eprintln!("window 1 (swapped {} MiB): {o1:?}", swapped / MIB);
    assert_eq!(o1.prepaged_anon, 0);
    assert!(
        o1.demand_anon >= 60 * MIB && o1.demand_anon <= 72 * MIB,
        "demand {} MiB",
        o1.demand_anon / MIB
    );

    // Window 2: paged out again, the footprint prepaged by the worker,
    // half of it touched.
    page_out_all(pid);
    let swapped = vm_swap_kib(pid) * 1024;
    w.start_window("a", &[id]).unwrap();
    let asked = w
        .prepage(
            "a",
            &[id],
            &PrepagePlan {
                anon_bytes: o1.demand_anon,
                file_bytes: 0,
            },
        )
        .unwrap();
    assert!(asked >= 60 * MIB, "asked {asked}");
    wait_for("the worker's prepaging", 30, || w.stats().prepage_jobs >= 1);
    let ws = w.stats();
    eprintln!(
        "prepaged: asked {} MiB, advised {} MiB",
        asked / MIB,
        ws.prepaged_bytes / MIB
    );
    assert_eq!(ws.prepaged_bytes, asked, "{ws:?}");
    // WILLNEED maps nothing: the pages stay swap entries until touched.
    assert!(vm_swap_kib(pid) * 1024 >= swapped - 4 * MIB);
    step(dir, 2, "0.5");
    let o2 = w.switch_observation("a", &[id]).unwrap().unwrap();
    eprintln!("window 2: {o2:?}, precision {:?}", o2.precision());
    assert_eq!(o2.prepaged_anon, asked);
    let half = asked / 2;
    assert!(
        o2.used_anon.abs_diff(half) <= 4 * MIB,
        "used {} MiB of {} MiB prepaged",
        o2.used_anon / MIB,
        asked / MIB
    );
    assert!(o2.demand_anon <= 4 * MIB, "demand {}", o2.demand_anon);
    let p = o2.precision().unwrap();
    assert!((0.4..=0.6).contains(&p), "precision {p}");
    // The next plan: what the window used (and faulted), not what it left.
    assert!(o2.footprint().0 <= half + 8 * MIB);
    drop(w);
    drop(h);
}
