//! The daemon's cgroup v2 path on a real kernel: the memory-cgroup readers
//! and the daemon itself on a v2 domain.
//!
//! Needs root and a cgroup2 mount offering the `memory` controller. The
//! development machine binds memory to v1, so this runs inside a small KVM
//! guest booted from Debian's kernel with cgroup2 mounted at /sys/fs/cgroup
//! (`scripts/v2-vm-test.sh`, see docs/daemon.md "cgroup v2"). Elsewhere it
//! skips, printing why.
//!
//! The test creates `<v2 root>/appflow-v2-test-<tag>` (removed by a guard,
//! its processes killed first), never touches another cgroup, and only adds
//! `+memory` to the root's `cgroup.subtree_control` when it is not there.

mod support;
use support::spawn_in_with;

use appflow_core::detect::{cgroup_relative, in_memory_cgroup};
use appflow_linux::readers::read_mountinfo;
use appflow_linux::readers::{CgroupVersion, MemCgroup};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// The cgroup2 mount point offering `memory`, or why there is none.
fn v2_memory_root() -> Result<PathBuf, String> {
    if nix::unistd::geteuid().as_raw() != 0 {
        return Err("not root".into());
    }
    let mounts = read_mountinfo(Path::new("/proc")).map_err(|e| e.to_string())?;
    let v2: Vec<PathBuf> = mounts
        .into_iter()
        .filter(|m| m.fs_type == "cgroup2")
        .map(|m| m.mount_point)
        .collect();
    v2.iter()
        .find(|p| {
            std::fs::read_to_string(p.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        })
        .cloned()
        .ok_or_else(|| {
            format!("no cgroup2 mount offers the memory controller (cgroup2 mounts: {v2:?})")
        })
}

struct TempCg(PathBuf);

impl Drop for TempCg {
    fn drop(&mut self) {
        if let Ok(t) = std::fs::read_to_string(self.0.join("cgroup.procs")) {
            for p in t.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("could not remove {}", self.0.display());
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Not a test of its own: allocates and holds 64 MiB when APPFLOW_V2_HELPER is set.
#[test]
fn v2_helper() {
    if std::env::var("APPFLOW_V2_HELPER").is_err() {
        return;
    }
    let held = vec![1u8; 64 << 20];
    println!("helper-ready");
    std::io::stdout().flush().unwrap();
    std::hint::black_box(&held);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn wait_line(c: &mut Child, marker: &str) {
    let out = c.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let marker = marker.to_string();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if l.trim_end().ends_with(&marker) {
                let _ = tx.send(());
                break;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("helper never ready");
}

fn request(socket: &Path, req: &str) -> serde_json::Value {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    writeln!(s, "{req}").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

#[test]
fn v2_domain_readers_and_daemon() {
    let root = match v2_memory_root() {
        Ok(r) => r,
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let sub = root.join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&sub).unwrap_or_default();
    if !enabled.split_whitespace().any(|c| c == "memory") {
        std::fs::write(&sub, "+memory").unwrap();
    }
    let tag = format!(
        "{}-{:x}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    );
    let cg = TempCg(root.join(format!("appflow-v2-test-{tag}")));
    std::fs::create_dir(&cg.0).unwrap();
    std::fs::write(cg.0.join("memory.max"), (256 * MIB).to_string()).unwrap();

    // A process holding 64 MiB of anonymous memory in the domain.
    let me = std::env::current_exe().unwrap();
    let mut h = spawn_in_with(
        &cg.0,
        &me,
        &["--exact", "v2_helper", "--nocapture", "--test-threads=1"],
        &[("APPFLOW_V2_HELPER", "1".to_string())],
        None,
        Stdio::piped(),
    );
    wait_line(&mut h, "helper-ready");
    let helper = Killed(h);
    let hpid = helper.0.id();

    // The readers.
    let m = MemCgroup::open(&cg.0).unwrap();
    assert_eq!(m.version, CgroupVersion::V2);
    assert_eq!(m.limit_bytes().unwrap(), Some(256 * MIB));
    let usage = m.usage_bytes().unwrap();
    let st = m.stat().unwrap();
    eprintln!("v2 usage {usage} B, stat {st:?}");
    assert!(usage >= 64 * MIB, "usage {usage}");
    assert!(st.anon_bytes >= 60 * MIB, "anon {}", st.anon_bytes);
    // One fault per page, or per huge page where THP backs the allocation
    // (the guest's Debian kernel: 64 MiB faulted in ~130 faults).
    assert!(st.pgfault >= 32, "pgfault {}", st.pgfault);
    let avail = m.available_bytes().unwrap().unwrap();
    assert!(avail <= 256 * MIB - 60 * MIB, "available {avail}");
    assert!(m.pressure().unwrap().is_some(), "v2 has memory.pressure");
    assert_eq!(
        m.swappiness().unwrap(),
        None,
        "v2 has no per-cgroup swappiness"
    );
    assert!(m.procs().unwrap().contains(&hpid));

    // App matching by cgroup on this kernel's /proc/PID/cgroup ("0::/...").
    let text = std::fs::read_to_string(format!("/proc/{hpid}/cgroup")).unwrap();
    let mounts = [root.to_str().unwrap()];
    let rel = cgroup_relative(cg.0.to_str().unwrap(), &mounts);
    assert!(in_memory_cgroup(&text, &rel), "{text:?} vs {rel}");

    // The daemon on the v2 domain (dry run: it decides, changes nothing).
    let Some(appflowd) = option_env!("CARGO_BIN_EXE_appflowd") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("appflow.sock");
    let config = dir.path().join("appflow.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nsocket = \"{}\"\nstate_dir = \"{}\"\ndry_run = true\n\n\
             [domain]\nkind = \"cgroup\"\nmemory_cgroup = \"{}\"\n\n\
             [[app]]\nname = \"hog\"\ncmdline = \"v2_helper\"\n",
            socket.display(),
            dir.path().join("state").display(),
            cg.0.display()
        ),
    )
    .unwrap();
    let mut d = Command::new(appflowd);
    d.args(["daemon", "--config", config.to_str().unwrap()]);
    let daemon = Killed(d.spawn().unwrap());
    let t0 = Instant::now();
    while UnixStream::connect(&socket).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no daemon socket");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let it scan the domain (scan_interval_ms 1000).
    std::thread::sleep(Duration::from_millis(2500));
    let v = request(&socket, r#"{"cmd":"status"}"#);
    eprintln!("status: {}", serde_json::to_string(&v["domain"]).unwrap());
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["domain"]["total_bytes"], 256 * MIB);
    assert!(v["domain"]["anon_bytes"].as_u64().unwrap() >= 60 * MIB);
    assert!(v["domain"]["psi_some_avg10"].is_number(), "{}", v["domain"]);
    let apps = v["apps"].as_array().unwrap();
    let hog = apps
        .iter()
        .find(|a| a["name"] == "hog")
        .expect("hog listed");
    eprintln!("hog: {hog}");
    assert!(
        hog["pids"]
            .as_array()
            .is_some_and(|p| p.iter().any(|x| x == hpid)),
        "{hog}"
    );
    drop(daemon);
}
