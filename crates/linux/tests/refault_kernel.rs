//! The re-fault policy (`refault`, the re-fault study §5) in the real daemon.
//!
//! * In a memory cgroup domain (how the testbed runs it) there is no kswapd
//!   step to tune: the daemon measures the domain's re-fault ratio from real
//!   reclaim and changes nothing (root, cgroup v1).
//! * In the system domain it reads the machine's real
//!   `vm.watermark_scale_factor` and `min_free_kbytes`, and a journal left
//!   by a crashed daemon that had changed the real knob is replayed at the
//!   next start (root; the knob is changed for well under a second).
//! * The whole path from counters to a written knob and back — the
//!   controller lowering the step, the journal restoring it after SIGTERM,
//!   and after SIGKILL plus a restart — runs against a proc tree whose
//!   counters the test writes (this machine's reclaim is all in memory
//!   cgroups, which never makes kswapd's share high enough for the rule to
//!   lower the real knob, and making the whole machine short of memory on a
//!   shared host is not an option). That tree is real kernel text with the
//!   reclaim counters moved forward.
//!
//! Skipped, with the reason printed, when not root or without cgroup v1
//! memory (the fake-tree test runs anywhere).

#[macro_use]
mod support;
use support::{daemon_bin, random_tag, wait_for, Daemon, Scratch, TempCgroup};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
/// The real knob is global: one test at a time touches it.
static SERIAL: Mutex<()> = Mutex::new(());

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn config(dir: &Path, domain: &str, extra_daemon: &str) -> (PathBuf, PathBuf) {
    let socket = dir.join("appflow.sock");
    let text = format!(
        "[daemon]\nsocket = \"{}\"\nstate_dir = \"{}\"\npolicy = \"refault\"\n{extra_daemon}\n\
         [preload]\nenabled = false\n[killer]\nenabled = false\n\
         [reclaim]\nrefault_regime_ms = 0\n{domain}\n",
        socket.display(),
        dir.join("state").display(),
    );
    let path = dir.join("appflow.toml");
    std::fs::write(&path, text).unwrap();
    (path, socket)
}

fn read_trim(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

fn decisions(st: &Value) -> Vec<String> {
    st["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["detail"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A cgroup domain: real reclaim and re-faults are measured, nothing is tuned.
#[test]
fn in_a_memory_cgroup_it_measures_refaults_and_tunes_nothing() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let wsf_file = Path::new("/proc/sys/vm/watermark_scale_factor");
    let wsf_before = read_trim(wsf_file);
    let scratch = Scratch::new(&format!("appflow-refault-{}", random_tag()));
    let domain = TempCgroup::new(&format!("appflow-refault-{}", random_tag()), Some(64 * MIB));
    // A file twice the limit, read over and over inside the domain: the
    // cgroup's own reclaim evicts it and every pass re-faults it.
    let big = scratch.0.join("big.bin");
    let chunk = vec![0xa5u8; MIB as usize];
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&big).unwrap();
        for _ in 0..128 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    // Out of the cache, so that the domain's reads charge the domain.
    support::evict(&big);
    let (cfg, sock) = config(
        &scratch.0,
        &format!(
            "[domain]\nkind = \"cgroup\"\nmemory_cgroup = \"{}\"\n",
            domain.path.display()
        ),
        "",
    );
    let d = Daemon::start(&cfg, &sock, &scratch.0.join("daemon.log"));
    let mut reader = support::spawn_in(
        &domain.path,
        Path::new("/bin/sh"),
        &[
            "-c",
            &format!("while :; do cat {} > /dev/null; done", big.display()),
        ],
        &[],
    );
    wait_for("a judged re-fault window", 60, || {
        d.status()["reclaim"]["kswapd_step"]["windows"].as_u64() >= Some(1)
    });
    let st = d.status();
    let k = &st["reclaim"]["kswapd_step"];
    let _ = reader.kill();
    let _ = reader.wait();
    eprintln!("cgroup domain: {k}");
    assert_eq!(st["policy"], "refault");
    assert!(k["watermark_scale_factor"].is_null(), "{k}");
    assert_eq!(k["changes"], 0);
    let refaults = k["window_pages"]["refault_pages"].as_u64().unwrap();
    let evicted = k["window_pages"]["evicted_pages"].as_u64().unwrap();
    assert!(refaults > 0 && evicted >= 650, "{k}");
    assert!(k["refault_ratio"].as_f64().unwrap() > 0.0);
    let ds = decisions(&st);
    assert!(
        ds.iter()
            .any(|d| d.contains("nothing to tune") && d.contains("no kswapd of its own")),
        "{ds:?}"
    );
    assert!(
        ds.iter()
            .any(|d| d.contains("no step to tune: re-fault ratio")),
        "{ds:?}"
    );
    assert!(st["changed_settings"].as_array().unwrap().is_empty());
    assert_eq!(read_trim(wsf_file), wsf_before, "the global knob untouched");
}

/// The system domain: the real knob is read, and a change left behind by a
/// crashed daemon is restored at the next start before anything else.
#[test]
fn in_the_system_domain_it_reads_the_real_knob_and_a_crash_is_undone() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let wsf_file = Path::new("/proc/sys/vm/watermark_scale_factor");
    let original = read_trim(wsf_file);
    let scratch = Scratch::new(&format!("appflow-refault-{}", random_tag()));
    let (cfg, sock) = config(&scratch.0, "[domain]\nkind = \"system\"\n", "");
    let journal = scratch.0.join("state/journal.json");

    let mut d = Daemon::start(&cfg, &sock, &scratch.0.join("daemon.log"));
    wait_for("the kswapd step read", 10, || {
        !d.status()["reclaim"]["kswapd_step"]["watermark_scale_factor"].is_null()
    });
    let st = d.status();
    assert_eq!(
        st["reclaim"]["kswapd_step"]["watermark_scale_factor"]
            .as_u64()
            .unwrap()
            .to_string(),
        original
    );
    let ds = decisions(&st);
    assert!(
        ds.iter()
            .any(|d| d.contains("kswapd step: watermark_scale_factor")),
        "{ds:?}"
    );
    assert!(d.stop().unwrap().success());
    assert_eq!(read_trim(wsf_file), original);
    assert!(!journal.exists());

    // A crashed daemon's journal: the real knob changed (one step down, as
    // the controller would), the journal written first, no restore.
    let lowered = (original.parse::<u64>().unwrap() / 2).max(1).to_string();
    let t0 = Instant::now();
    {
        let (mut j, _) = appflow_linux::journal::Journal::open(&journal, false).unwrap();
        j.set(wsf_file, &lowered).unwrap();
    }
    assert_eq!(read_trim(wsf_file), lowered);
    assert!(journal.exists());
    let mut d = Daemon::start(&cfg, &sock, &scratch.0.join("daemon2.log"));
    let restored_after = t0.elapsed();
    assert_eq!(read_trim(wsf_file), original, "replayed at start");
    assert!(!journal.exists());
    eprintln!("knob changed for {restored_after:?} before the restart restored it");
    assert!(d.stop().unwrap().success());
    assert_eq!(read_trim(wsf_file), original);
}

/// A proc tree of real kernel text (24 GB, wsf 10, min_free_kbytes 67584)
/// whose reclaim counters a thread moves forward: kswapd does all the
/// reclaim and half the evicted pages come back.
struct FakeProc {
    root: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeProc {
    fn new(dir: &Path) -> Self {
        let src = fixture("vm6_memcg_reclaim/proc");
        let root = dir.join("proc");
        std::fs::create_dir_all(root.join("sys/vm")).unwrap();
        std::fs::copy(src.join("meminfo"), root.join("meminfo")).unwrap();
        for f in ["watermark_scale_factor", "min_free_kbytes"] {
            std::fs::copy(src.join("sys/vm").join(f), root.join("sys/vm").join(f)).unwrap();
        }
        std::fs::write(root.join("sys/vm/swappiness"), "60\n").unwrap();
        let text = std::fs::read_to_string(src.join("vmstat")).unwrap();
        let write = {
            let root = root.clone();
            move |secs: f64| {
                let pages = (secs * 2000.0) as u64;
                let out: String = text
                    .lines()
                    .map(|l| {
                        let k = l.split_whitespace().next().unwrap_or("");
                        let v = match k {
                            "workingset_refault_anon" => Some(0),
                            "workingset_refault_file" => Some(pages / 2),
                            "pgsteal_kswapd" | "pgsteal_file" => Some(pages),
                            "pgsteal_direct" | "pgsteal_anon" => Some(0),
                            _ => None,
                        };
                        match v {
                            Some(v) => format!("{k} {v}\n"),
                            None => format!("{l}\n"),
                        }
                    })
                    .collect();
                let tmp = root.join(".vmstat.tmp");
                std::fs::write(&tmp, out).unwrap();
                std::fs::rename(&tmp, root.join("vmstat")).unwrap();
            }
        };
        write(0.0);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let t0 = Instant::now();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    write(t0.elapsed().as_secs_f64());
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            root,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeProc {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The controller lowers the step (10 → 7, the floor of min_free_kbytes/4
/// on 24 GB) through the journal; SIGTERM restores it; SIGKILL leaves it
/// and the journal, and the restart restores it before serving.
#[test]
fn the_lowered_step_is_restored_after_sigterm_and_after_sigkill_and_restart() {
    let dir = Scratch::new(&format!("appflow-refault-fake-{}", random_tag()));
    let fake = FakeProc::new(&dir.0);
    let wsf = fake.root.join("sys/vm/watermark_scale_factor");
    let (cfg, sock) = config(
        &dir.0,
        "[domain]\nkind = \"system\"\n",
        &format!("proc_root = \"{}\"", fake.root.display()),
    );
    let journal = dir.0.join("state/journal.json");
    let lowered = || read_trim(&wsf) == "7";
    for (round, sig) in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGKILL,
    ]
    .into_iter()
    .enumerate()
    {
        let mut d = Daemon::start(&cfg, &sock, &dir.0.join(format!("daemon{round}.log")));
        assert_eq!(read_trim(&wsf), "10", "round {round}: stock at start");
        // One window: 10 s and 650 evicted pages, 50 % re-faults, no direct reclaim.
        wait_for("the step lowered", 40, lowered);
        let st = d.status();
        let k = &st["reclaim"]["kswapd_step"];
        eprintln!("round {round}: {k}");
        assert_eq!(k["watermark_scale_factor"], 7);
        assert_eq!(k["changes"], 1);
        assert!(
            (k["refault_ratio"].as_f64().unwrap() - 0.5).abs() < 0.05,
            "{k}"
        );
        assert_eq!(k["direct_share"].as_f64().unwrap(), 0.0);
        assert!(journal.exists());
        let changed = st["changed_settings"].as_array().unwrap();
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0]["original"], "10");
        let metrics = d.request(r#"{"cmd":"metrics"}"#);
        let text = metrics["text"].as_str().unwrap();
        assert!(text.contains("appflow_reclaim_step 7"), "{text}");
        assert!(
            text.contains("appflow_reclaim_step_changes_total 1"),
            "{text}"
        );
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.pid() as i32), sig);
        let st = d.stop().unwrap();
        if sig == nix::sys::signal::Signal::SIGTERM {
            assert!(st.success(), "{st:?}");
            assert_eq!(read_trim(&wsf), "10", "SIGTERM restores");
            assert!(!journal.exists());
        } else {
            assert!(lowered(), "SIGKILL cannot restore");
            assert!(journal.exists());
            let mut d = Daemon::start(&cfg, &sock, &dir.0.join("daemon-restart.log"));
            assert_eq!(read_trim(&wsf), "10", "the restart restores first");
            assert!(!journal.exists());
            assert!(d.stop().unwrap().success());
            assert_eq!(read_trim(&wsf), "10");
        }
    }
}

/// The daemon's config check accepts the policy (no longer refused).
#[test]
fn the_policy_is_accepted_by_the_daemon() {
    let dir = Scratch::new(&format!("appflow-refault-cfg-{}", random_tag()));
    let (cfg, _) = config(&dir.0, "[domain]\nkind = \"system\"\n", "");
    let out = Command::new(daemon_bin())
        .args([
            "daemon",
            "--check-config",
            "--config",
            cfg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
