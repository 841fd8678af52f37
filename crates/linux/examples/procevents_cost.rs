//! Cost of seeing new processes: the process connector listener
//! (`appflow_linux::procevents`) against polling /proc every tick.
//!
//! ```sh
//! cargo build --release -p appflow-linux --example procevents_cost
//! E=target/release/examples/procevents_cost
//! $E spawn --rate 2000 --seconds 30 &        # load: 2,000 short-lived processes per second
//! $E listen --seconds 20                       # or: $E poll --seconds 20
//! ```
//! Each watcher wakes every `--tick-ms` (the daemon's 100 ms tick) and, for
//! every new process it learns of, reads /proc/PID/cmdline and exe as app
//! matching would (`--no-identify`: skip that, to see the bare cost). It prints its own CPU time (utime + stime from
//! getrusage) as a share of one core over the window.

use appflow_linux::procevents::{ProcEvent, ProcEvents};
use appflow_linux::readers;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

fn cpu_secs() -> f64 {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(r.ru_utime) + tv(r.ru_stime)
}

fn arg(args: &[String], name: &str, default: f64) -> f64 {
    args.windows(2)
        .find(|w| w[0] == name)
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(default)
}

/// What matching a new process costs: its command line and executable.
fn read_identity(proc_root: &Path, pid: u32) -> bool {
    let a = readers::read_cmdline(proc_root, pid).is_ok();
    let b = readers::read_exe(proc_root, pid).is_ok();
    a && b
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let secs = arg(&args, "--seconds", 20.0);
    let tick = Duration::from_millis(arg(&args, "--tick-ms", 100.0) as u64);
    let proc_root = Path::new("/proc");
    let identify = !args.iter().any(|a| a == "--no-identify");
    match mode {
        "spawn" => {
            let rate = arg(&args, "--rate", 2000.0);
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed().as_secs_f64() < secs {
                let due = (start.elapsed().as_secs_f64() * rate) as u64;
                let mut batch = Vec::new();
                while n < due {
                    if let Ok(c) = std::process::Command::new("/bin/true").spawn() {
                        batch.push(c);
                    }
                    n += 1;
                }
                for mut c in batch {
                    let _ = c.wait();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            println!(
                "spawned {n} processes in {:.1} s ({:.0}/s)",
                start.elapsed().as_secs_f64(),
                n as f64 / start.elapsed().as_secs_f64()
            );
        }
        "listen" | "poll" => {
            let mut ev = if mode == "listen" {
                Some(ProcEvents::open().expect("process connector"))
            } else {
                None
            };
            let (mut execs, mut forks, mut exits, mut overruns, mut identified) =
                (0u64, 0u64, 0u64, 0u64, 0u64);
            let mut known: BTreeSet<u32> = BTreeSet::new();
            let (cpu0, t0) = (cpu_secs(), Instant::now());
            let mut next = t0 + tick;
            while t0.elapsed().as_secs_f64() < secs {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += tick;
                if let Some(ev) = ev.as_mut() {
                    for e in ev.drain() {
                        match e {
                            ProcEvent::Exec { tgid, .. } => {
                                execs += 1;
                                identified += u64::from(identify && read_identity(proc_root, tgid));
                            }
                            ProcEvent::Fork { .. } => forks += 1,
                            ProcEvent::Exit { .. } => exits += 1,
                            ProcEvent::Overrun => overruns += 1,
                        }
                    }
                } else {
                    let pids: BTreeSet<u32> = readers::list_pids(proc_root)
                        .unwrap_or_default()
                        .into_iter()
                        .collect();
                    for &p in pids.difference(&known) {
                        execs += 1;
                        let _ = appflow_linux::actuators::read_start_time(proc_root, p);
                        identified += u64::from(identify && read_identity(proc_root, p));
                    }
                    known = pids;
                }
            }
            let (cpu, wall) = (cpu_secs() - cpu0, t0.elapsed().as_secs_f64());
            println!(
                "{mode}: window {wall:.1} s, tick {} ms, CPU {:.3} s = {:.3} % of one core",
                tick.as_millis(),
                cpu,
                100.0 * cpu / wall
            );
            if mode == "listen" {
                println!(
                    "  events/s: exec {:.0}, fork {:.0}, exit {:.0}; overruns {overruns}; identified {identified} of {execs} execs (others had exited)",
                    execs as f64 / wall,
                    forks as f64 / wall,
                    exits as f64 / wall
                );
            } else {
                println!(
                    "  new pids seen {execs} ({:.0}/s), identified {identified}",
                    execs as f64 / wall
                );
            }
        }
        _ => {
            eprintln!(
                "usage: procevents_cost spawn|listen|poll [--seconds S] [--rate R] [--tick-ms T] [--no-identify]"
            );
            std::process::exit(2);
        }
    }
}
