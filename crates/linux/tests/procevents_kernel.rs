//! Real-kernel tests of the process-connector listener: a spawned
//! `/bin/true` is seen forking, exec'ing and exiting, and an overflowed
//! receive buffer is reported as an overrun.
//!
//! Skipped, with the reason printed, when the connector cannot be opened
//! (no `CONFIG_PROC_EVENTS`, or not privileged on kernels before 6.6).

use appflow_linux::procevents::{ProcEvent, ProcEvents};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

// The tests listen to the whole machine; run them one at a time so the
// overrun test's burst cannot overflow the other's buffer.
static SERIAL: Mutex<()> = Mutex::new(());

fn open_or_skip() -> Option<ProcEvents> {
    match ProcEvents::open() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: cannot subscribe to the process connector: {e}");
            None
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) },
        0
    );
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[test]
fn sees_exec_and_exit_of_bin_true() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut ev) = open_or_skip() else { return };
    let before = monotonic_ns();
    let child = Command::new("/bin/true").spawn().unwrap();
    let pid = child.id();
    let status = child.wait_with_output().unwrap().status;
    assert!(status.success());
    let after = monotonic_ns();

    let (mut fork, mut exec, mut exit) = (None, None, None);
    let deadline = Instant::now() + Duration::from_secs(5);
    while (exec.is_none() || exit.is_none()) && Instant::now() < deadline {
        for e in ev.drain() {
            match e {
                ProcEvent::Fork { child_tgid, .. } if child_tgid == pid => fork = Some(e),
                ProcEvent::Exec { tgid, .. } if tgid == pid => exec = Some(e),
                ProcEvent::Exit { pid: p, tgid, .. } if tgid == pid && p == pid => exit = Some(e),
                ProcEvent::Overrun => eprintln!("overrun while waiting (machine busy)"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("subscription {:?}", ev.subscription());
    eprintln!("fork {fork:?}\nexec {exec:?}\nexit {exit:?}");
    let Some(ProcEvent::Fork { parent_tgid, .. }) = fork else {
        panic!("no fork event for {pid}")
    };
    assert_eq!(parent_tgid, std::process::id());
    let Some(ProcEvent::Exec { time_ns, .. }) = exec else {
        panic!("no exec event for {pid}")
    };
    // The exec timestamp is the kernel's monotonic clock, inside our window.
    assert!(
        before <= time_ns && time_ns <= after,
        "{before} <= {time_ns} <= {after}"
    );
    let Some(ProcEvent::Exit {
        exit_code,
        time_ns: exit_ns,
        ..
    }) = exit
    else {
        panic!("no exit event for {pid}")
    };
    assert_eq!(exit_code, 0);
    assert!(exit_ns >= time_ns);
}

#[test]
fn overflow_is_reported_as_overrun() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut ev) = open_or_skip() else { return };
    // Shrink the receive buffer to its minimum so a burst overflows it.
    use std::os::fd::AsRawFd;
    let set_rcvbuf = |ev: &ProcEvents, bytes: libc::c_int| {
        // SAFETY: valid fd and option value.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsFd::as_fd(ev).as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set_rcvbuf(&ev, 0) != 0 {
        eprintln!("SKIPPED: cannot shrink the receive buffer (needs CAP_NET_ADMIN)");
        return;
    }
    let _ = ev.drain();
    for _ in 0..200 {
        let _ = Command::new("/bin/true").status();
    }
    let events = ev.drain();
    eprintln!("{} events after the burst", events.len());
    assert_eq!(events.first(), Some(&ProcEvent::Overrun));
    assert_eq!(
        events.iter().filter(|e| **e == ProcEvent::Overrun).count(),
        1
    );
    // After the drain (and with its buffer back) the socket works again.
    assert_eq!(set_rcvbuf(&ev, 4 << 20), 0);
    let _ = ev.drain();
    let child = Command::new("/bin/true").spawn().unwrap();
    let pid = child.id();
    let _ = child.wait_with_output();
    std::thread::sleep(Duration::from_millis(50));
    assert!(ev
        .drain()
        .iter()
        .any(|e| matches!(e, ProcEvent::Exit { tgid, .. } if *tgid == pid)));
}

/// The pieces together, as the daemon loop will use them: connector events
/// feed the core's detector, /proc is read for each exec, demand counters
/// drive readiness. A declared app (`sleep`, matched by exe) is launched,
/// inferred ready while it sleeps (no reads, no faults), and exits.
#[test]
fn detector_sees_a_launch_ready_and_exit() {
    use appflow_core::detect::{
        demand_pages, Detected, Detector, LaunchEnd, MatcherSpec, Matchers, ProcObservation,
        ReadinessConfig,
    };
    use appflow_linux::readers::{demand::read_demand, read_cmdline, read_exe, read_ppid};
    use std::collections::BTreeMap;
    use std::path::Path;

    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut ev) = open_or_skip() else { return };
    let proc_root = Path::new("/proc");
    // A private copy of sleep: any other `sleep` on the machine would match
    // a /bin/sleep matcher too and keep the app alive after ours exits.
    let dir = tempfile::tempdir().unwrap();
    let sleep_exe = dir.path().join("napper");
    std::fs::copy("/bin/sleep", &sleep_exe).unwrap();
    let matchers = Matchers::new(
        &[MatcherSpec {
            name: "napper".into(),
            exe: sleep_exe.to_string_lossy().into_owned(),
            ..Default::default()
        }],
        &[],
    )
    .unwrap();
    let cfg = ReadinessConfig {
        quiet_floor_pages_per_s: 2441,
        quiet_cpu_permille: appflow_core::detect::DEFAULT_QUIET_CPU_PERMILLE,
        quiet_ms: 300,
        timeout_ms: 10_000,
    };
    let mut det = Detector::new(matchers, cfg).unwrap();
    // One clock for everything: the kernel's monotonic clock of the events.
    let ms = || monotonic_ns() / 1_000_000;
    let t0 = ms();

    let child = Command::new(&sleep_exe).arg("1.5").spawn().unwrap();
    let pid = child.id();
    let mut seen: Vec<Detected> = Vec::new();
    let mut prev: BTreeMap<u32, appflow_core::detect::DemandCounters> = BTreeMap::new();
    let mut child = Some(child);
    while ms() - t0 < 5000 && !seen.iter().any(|d| matches!(d, Detected::AppExited { .. })) {
        std::thread::sleep(Duration::from_millis(100));
        if ms() - t0 > 1700 {
            if let Some(mut c) = child.take() {
                let _ = c.wait();
            }
        }
        for e in ev.drain() {
            if !e.is_process() {
                continue;
            }
            match e {
                ProcEvent::Exec { tgid, time_ns, .. } => {
                    let exe = read_exe(proc_root, tgid).ok();
                    let cmd = read_cmdline(proc_root, tgid).ok().map(|v| v.join(" "));
                    let obs = ProcObservation {
                        exe: exe.as_deref().and_then(|p| p.to_str()),
                        cmdline: cmd.as_deref(),
                        cgroup: None,
                    };
                    let start = appflow_linux::actuators::read_start_time(proc_root, tgid);
                    let ppid = read_ppid(proc_root, tgid).unwrap_or(0);
                    seen.extend(det.on_exec(
                        tgid,
                        start.unwrap_or(0),
                        ppid,
                        &obs,
                        time_ns / 1_000_000,
                    ));
                }
                ProcEvent::Fork {
                    parent_tgid,
                    child_tgid,
                    ..
                } => det.on_fork(parent_tgid, child_tgid, 0),
                ProcEvent::Exit { tgid, time_ns, .. } => {
                    seen.extend(det.on_exit(tgid, time_ns / 1_000_000))
                }
                ProcEvent::Overrun => {
                    // Events were lost (a busy machine: every exec and exit
                    // of the system goes through this socket). As the
                    // daemon does, keep only the processes still alive.
                    let live: Vec<(u32, u64)> = det
                        .pids_of("napper")
                        .into_iter()
                        .filter_map(|p| {
                            appflow_linux::actuators::read_start_time(proc_root, p).map(|s| (p, s))
                        })
                        .collect();
                    seen.extend(det.retain_live(&live, ms()));
                }
            }
        }
        // Demand of the launching app since the last tick.
        let cur: BTreeMap<u32, _> = det
            .pids_of("napper")
            .into_iter()
            .filter_map(|p| read_demand(proc_root, p).ok().map(|d| (p, d)))
            .collect();
        let d = appflow_core::detect::Demand {
            pages: demand_pages(&prev, &cur),
            cpu_ms: Some(appflow_core::detect::demand_cpu_ms(&prev, &cur)),
        };
        prev = cur;
        seen.extend(det.tick(&BTreeMap::from([("napper".to_string(), d)]), ms()));
    }
    eprintln!("{seen:#?}");
    let launch = seen.iter().position(
        |d| matches!(d, Detected::Launch { app, pid: p, .. } if app == "napper" && *p == pid),
    );
    let ready = seen.iter().position(|d| {
        matches!(d, Detected::LaunchEnded { app, how: LaunchEnd::Inferred, .. } if app == "napper")
    });
    let exited = seen
        .iter()
        .position(|d| matches!(d, Detected::AppExited { app } if app == "napper"));
    assert!(
        launch.is_some() && ready.is_some() && exited.is_some(),
        "{seen:?}"
    );
    assert!(launch < ready && ready < exited);
    // The launch starts at the exec's kernel time, within our window.
    let Some(Detected::Launch { at_ms, .. }) = launch.map(|i| &seen[i]) else {
        unreachable!()
    };
    assert!(*at_ms >= t0 && *at_ms < t0 + 1000, "{at_ms} vs {t0}");
    assert_eq!(det.counters("napper").unwrap().launches_detected, 1);
}
