//! Real-kernel integration tests of the daemon (root, cgroup v1 memory).
//!
//! Each test builds a temporary v1 memory cgroup
//! `/sys/fs/cgroup/memory/appflow-test-<random>` (removed by a Drop guard,
//! also on failure), runs the real daemon binary (`appflowd`, this crate's
//! slim binary with the same code as `appflow daemon`; cargo hands tests the
//! path of their own package's binaries only) and drives it through its
//! control socket. Memory is allocated by re-running this test binary in a
//! helper mode (`helper_process`), so no external tool is needed.
//!
//! Skipped, with the reason printed, when not root or without cgroup v1 memory.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
const CG_ROOT: &str = "/sys/fs/cgroup/memory";
static SERIAL: Mutex<()> = Mutex::new(());

fn skip_reason() -> Option<String> {
    if nix::unistd::geteuid().as_raw() != 0 {
        return Some("not root".into());
    }
    if !Path::new(CG_ROOT).join("memory.limit_in_bytes").exists() {
        return Some(format!("no cgroup v1 memory controller at {CG_ROOT}"));
    }
    None
}

macro_rules! require_kernel {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("SKIPPED: {r}");
            return;
        }
    };
}

fn random_tag() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{t:x}", std::process::id())
}

/// A temporary memory cgroup tree, removed on drop (its processes killed first).
struct TempCgroup {
    path: PathBuf,
}

impl TempCgroup {
    fn new(suffix: &str, limit_bytes: Option<u64>) -> Self {
        let path = Path::new(CG_ROOT).join(format!("appflow-test-{}-{suffix}", random_tag()));
        std::fs::create_dir(&path).unwrap();
        if let Some(l) = limit_bytes {
            std::fs::write(path.join("memory.limit_in_bytes"), l.to_string()).unwrap();
        }
        Self { path }
    }

    fn child(&self, name: &str) -> PathBuf {
        let p = self.path.join(name);
        std::fs::create_dir(&p).unwrap();
        p
    }

    fn stat(&self, key: &str) -> u64 {
        stat_of(&self.path, key)
    }
}

fn stat_of(cg: &Path, key: &str) -> u64 {
    let t = std::fs::read_to_string(cg.join("memory.stat")).unwrap();
    t.lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{key} "))
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("{key} not in memory.stat"))
}

fn tree(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        // Only processes this test started live in its cgroups.
        for _ in 0..100 {
            let mut any = false;
            for d in tree(&self.path) {
                if let Ok(t) = std::fs::read_to_string(d.join("cgroup.procs")) {
                    for pid in t.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                        any = true;
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
            }
            if !any {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for d in tree(&self.path).into_iter().rev() {
            for _ in 0..100 {
                if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Makes `cmd`'s process get `sig` when the test thread that spawned it dies
/// (so an aborted test run leaves no daemon or helper behind).
fn die_with_parent(cmd: &mut Command, sig: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, sig);
            Ok(())
        });
    }
}

/// Runs `program args` inside `cgroup` from its first instruction.
fn spawn_in(cgroup: &Path, program: &Path, args: &[&str], env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new("/bin/sh");
    let daemon = program == daemon_bin();
    die_with_parent(&mut cmd, if daemon { libc::SIGTERM } else { libc::SIGKILL });
    cmd.arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec \"$0\" \"$@\"",
            cgroup.display()
        ))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Starts a helper (this test binary in helper mode) in `cgroup`, waits until it says ready.
fn helper(cgroup: &Path, mode: &str) -> Proc {
    let me = std::env::current_exe().unwrap();
    let mut c = spawn_in(
        cgroup,
        &me,
        &[
            "--exact",
            "helper_process",
            "--nocapture",
            "--test-threads=1",
        ],
        &[("APPFLOW_TEST_HELPER", mode.to_string())],
    );
    let out = c.stdout.take().unwrap();
    // libtest prints "test helper_process ... " without a newline, so the
    // marker may end a line rather than fill it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if l.trim_end().ends_with("helper-ready") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = c.kill();
        panic!("helper {mode} did not become ready");
    }
    Proc(c)
}

/// Not a test of its own: the body of helper processes (does nothing unless
/// APPFLOW_TEST_HELPER is set). Modes: `alloc:MIB` (allocate and hold),
/// `burst:MIB` (allocate fast in 8 MiB steps, then hold), `churn` (allocate
/// and free 16 MiB every 20 ms forever).
#[test]
fn helper_process() {
    let Ok(mode) = std::env::var("APPFLOW_TEST_HELPER") else {
        return;
    };
    let mut held: Vec<Vec<u8>> = Vec::new();
    let (kind, arg) = mode.split_once(':').unwrap_or((mode.as_str(), "0"));
    let mib: usize = arg.parse().unwrap_or(0);
    match kind {
        "alloc" => {
            held.push(vec![1u8; mib << 20]);
            println!("helper-ready");
        }
        "burst" => {
            println!("helper-ready");
            for _ in 0..mib / 8 {
                held.push(vec![1u8; 8 << 20]);
                std::thread::sleep(Duration::from_millis(10));
            }
            println!("helper-burst-done");
        }
        "churn" => {
            println!("helper-ready");
            // Explicit mmap/munmap: malloc would keep and reuse freed memory
            // after the first round and stop faulting.
            let len = 16usize << 20;
            loop {
                // SAFETY: a private anonymous mapping, touched and unmapped here.
                unsafe {
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    assert_ne!(p, libc::MAP_FAILED);
                    for off in (0..len).step_by(4096) {
                        *(p as *mut u8).add(off) = 1;
                    }
                    libc::munmap(p, len);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        _ => panic!("unknown helper mode {mode}"),
    }
    std::io::stdout().flush().unwrap();
    std::hint::black_box(&held);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A running daemon: SIGTERM + wait on drop (SIGKILL after 10 s).
struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
}

fn daemon_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_appflowd"))
}

impl Daemon {
    /// Starts the daemon (inside `home` cgroup when given) and waits for its socket.
    fn start(config: &Path, socket: &Path, home: Option<&Path>) -> Self {
        let _ = std::fs::remove_file(socket);
        let args = [
            "--log",
            "info",
            "daemon",
            "--config",
            config.to_str().unwrap(),
        ];
        let child = match home {
            Some(h) => {
                let mut c = spawn_in(h, &daemon_bin(), &args, &[]);
                c.stdout.take();
                c
            }
            None => {
                let mut cmd = Command::new(daemon_bin());
                die_with_parent(&mut cmd, libc::SIGTERM);
                cmd.args(args).spawn().unwrap()
            }
        };
        let d = Daemon {
            child: Some(child),
            socket: socket.to_path_buf(),
        };
        let t0 = Instant::now();
        while UnixStream::connect(socket).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "daemon socket never appeared"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn request(&self, req: &str) -> Value {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        // An oversized request is cut at the daemon's line limit and answered
        // at once; the daemon may close while we still write (EPIPE). The
        // reply is in our receive buffer all the same.
        if let Err(e) = writeln!(s, "{req}") {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn status(&self) -> Value {
        let v = self.request(r#"{"cmd":"status"}"#);
        assert_eq!(v["ok"], true, "{v}");
        v
    }

    fn notify(&self, event: &str, app: &str) {
        let v = self.request(&format!(
            r#"{{"cmd":"notify","event":"{event}","app":"{app}"}}"#
        ));
        assert_eq!(v["ok"], true, "{v}");
    }

    fn signal_and_wait(&mut self, sig: nix::sys::signal::Signal) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), sig);
        let t0 = Instant::now();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = c.kill();
                return c.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal_and_wait(nix::sys::signal::Signal::SIGTERM);
        }
    }
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scratch directory on a disk file system (not tmpfs: its pages are not page cache).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let p = PathBuf::from(format!("/var/tmp/appflow-test-{}", random_tag()));
        std::fs::create_dir_all(p.join("state/profiles")).unwrap();
        Self(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a file of `bytes` and drops it from the page cache.
fn cold_file(path: &Path, bytes: u64) {
    use std::os::fd::AsRawFd;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5au8; MIB as usize];
    for _ in 0..bytes / MIB {
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
    // SAFETY: valid fd.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Fraction of `path`'s pages resident in the page cache (mincore).
fn residency(path: &Path) -> f64 {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: read-only shared mapping of an open file, unmapped below.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        let pages = len.div_ceil(4096);
        let mut vec = vec![0u8; pages];
        assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
        libc::munmap(addr, len);
        vec.iter().filter(|b| **b & 1 == 1).count() as f64 / pages as f64
    }
}

/// Writes a launch profile: every file fully read at launch.
fn write_profile(state: &Path, app: &str, files: &[(&Path, u64)]) {
    use appflow_core::profile::{ByteRange, LaunchObservation, LaunchProfile, ObservedFile};
    let mut p = LaunchProfile::new(app);
    p.merge_launch(&LaunchObservation {
        files: files
            .iter()
            .enumerate()
            .map(|(i, (f, size))| ObservedFile {
                path: f.display().to_string(),
                size_bytes: *size,
                first_access_us: i as u64 * 1000,
                ranges: vec![ByteRange {
                    start: 0,
                    end: *size,
                }],
            })
            .collect(),
        footprint_after_launch_bytes: 10 * MIB,
        ..Default::default()
    });
    appflow_linux::store::ProfileStore::open(state)
        .save(&p)
        .unwrap();
}

fn config(dir: &Path, domain: &Path, extra: &str) -> (PathBuf, PathBuf) {
    let socket = dir.join("appflow.sock");
    let text = format!(
        "[daemon]\nsocket = \"{}\"\nstate_dir = \"{}\"\nmetrics_file = \"{}\"\n{extra}\n",
        socket.display(),
        dir.join("state").display(),
        dir.join("metrics.prom").display(),
    );
    // `extra` may open other sections; [domain] goes last so it cannot be shadowed.
    let text = format!(
        "{text}\n[domain]\nkind = \"cgroup\"\nmemory_cgroup = \"{}\"\n",
        domain.display()
    );
    let path = dir.join("appflow.toml");
    std::fs::write(&path, text).unwrap();
    (path, socket)
}

/// (1) A launch triggers preloading charged to the domain's cgroup, not the daemon's.
#[test]
fn launch_preload_is_charged_to_the_domain() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let domain = TempCgroup::new("domain", Some(1024 * MIB));
    let home = TempCgroup::new("home", None);
    let big = scratch.0.join("big.bin");
    cold_file(&big, 48 * MIB);
    assert!(residency(&big) < 0.05, "file should start cold");
    write_profile(&scratch.0.join("state"), "big", &[(&big, 48 * MIB)]);
    let (cfg, sock) = config(&scratch.0, &domain.path, "[killer]\nenabled = false\n");
    let d = Daemon::start(&cfg, &sock, Some(&home.path));
    let st = d.status();
    let worker = st["preload"]["worker_pid"].as_u64().unwrap() as u32;
    // The worker lives in the domain, at idle I/O priority; the daemon does not.
    let procs = std::fs::read_to_string(domain.path.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|l| l.trim() == worker.to_string()),
        "worker {worker} not in {procs}"
    );
    let home_procs = std::fs::read_to_string(home.path.join("cgroup.procs")).unwrap();
    assert!(home_procs.lines().any(|l| l.trim() == d.pid().to_string()));
    assert_eq!(appflow_linux::actuators::io_priority_class(worker), Ok(3));
    // Let the standby set (the hot segment) settle before measuring the launch.
    wait_for("standby load", 20, || {
        d.status()["preload"]["loads"].as_u64() >= Some(1)
    });
    let cache0 = domain.stat("total_cache");
    let home0 = home.stat("total_cache");
    d.notify("launch", "big");
    wait_for("launch stream", 60, || {
        d.status()["preload"]["loads"].as_u64() >= Some(2)
    });
    let st = d.status();
    let cache1 = domain.stat("total_cache");
    let home1 = home.stat("total_cache");
    let streamed = 48 * MIB - 128 * 1024;
    let grew = cache1.saturating_sub(cache0);
    eprintln!(
        "domain cache +{:.1} MiB (streamed {:.1} MiB), daemon cgroup cache +{:.1} MiB, protected {} bytes",
        grew as f64 / MIB as f64,
        streamed as f64 / MIB as f64,
        home1.saturating_sub(home0) as f64 / MIB as f64,
        st["preload"]["protected_bytes"]
    );
    assert!(
        grew as f64 >= 0.9 * streamed as f64,
        "domain cache grew only {grew}"
    );
    assert!(
        grew as f64 <= 1.25 * streamed as f64 + 4.0 * MIB as f64,
        "domain cache grew {grew}"
    );
    assert!(
        home1.saturating_sub(home0) < 2 * MIB,
        "daemon's cgroup was charged"
    );
    assert!(residency(&big) > 0.99);
    // Held with mlock until `launched`.
    assert!(st["preload"]["protected_bytes"].as_u64().unwrap() >= streamed);
    let unevictable = domain.stat("total_unevictable");
    eprintln!("domain unevictable {unevictable} bytes");
    assert!(
        unevictable as f64 >= 0.9 * streamed as f64,
        "unevictable {unevictable}"
    );
    d.notify("launched", "big");
    wait_for("release", 10, || {
        d.status()["preload"]["protected_bytes"] == 0
    });
    d.notify("background", "big");
    // A worker that dies (e.g. picked by the domain's OOM killer) is
    // restarted inside the domain and its standby set queued again.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let mut new_worker = 0;
    wait_for("worker restart", 20, || {
        let st = d.status();
        new_worker = st["preload"]["worker_pid"].as_u64().unwrap_or(0) as u32;
        new_worker != worker
            && st["preload"]["worker_alive"] == true
            && st["preload"]["loads"].as_u64() >= Some(1)
    });
    let procs = std::fs::read_to_string(domain.path.join("cgroup.procs")).unwrap();
    assert!(procs.lines().any(|l| l.trim() == new_worker.to_string()));
}

/// (2) An allocation burst switches to efficiency-first and back; protected ranges survive.
#[test]
fn burst_switches_mode_and_protected_ranges_survive() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let domain = TempCgroup::new("domain", Some(256 * MIB));
    std::fs::write(domain.path.join("memory.swappiness"), "37").unwrap();
    let prot = scratch.0.join("protected.bin");
    let other = scratch.0.join("other.bin");
    cold_file(&prot, 32 * MIB);
    cold_file(&other, 96 * MIB);
    write_profile(&scratch.0.join("state"), "prot", &[(&prot, 32 * MIB)]);
    let (cfg, sock) = config(
        &scratch.0,
        &domain.path,
        "[preload]\nbudget_bytes = 0\n[killer]\nenabled = false\n\
         [reclaim]\nlow_memory_bytes = 134217728\nalloc_threshold_pages = 2000\n\
         calm_ticks = 5\nrebalance_max_ms = 1000\n",
    );
    let d = Daemon::start(&cfg, &sock, None);
    d.notify("launch", "prot");
    wait_for("protect load", 30, || {
        d.status()["preload"]["protected_bytes"].as_u64() >= Some(32 * MIB)
    });
    // Unprotected page cache in the domain, read by a process inside it.
    let mut cat = spawn_in(
        &domain.path,
        Path::new("/bin/cat"),
        &[other.to_str().unwrap()],
        &[],
    );
    std::io::copy(&mut cat.stdout.take().unwrap(), &mut std::io::sink()).unwrap();
    cat.wait().unwrap();
    let other_before = residency(&other);
    assert_eq!(d.status()["mode"], "normal");
    let _burst = helper(&domain.path, "burst:176");
    let mut saw_ef = false;
    let mut swappiness_in_ef = None;
    wait_for("efficiency-first and back to normal", 60, || {
        let st = d.status();
        if st["mode"] == "efficiency_first" {
            saw_ef = true;
            swappiness_in_ef = Some(
                std::fs::read_to_string(domain.path.join("memory.swappiness"))
                    .unwrap()
                    .trim()
                    .to_string(),
            );
        }
        saw_ef && st["mode"] == "normal"
    });
    let st = d.status();
    let prot_res = residency(&prot);
    let other_res = residency(&other);
    eprintln!(
        "swappiness in efficiency-first: {swappiness_in_ef:?}; protected file resident {:.1} %, unprotected {:.1} % (was {:.1} %); switches {}",
        prot_res * 100.0,
        other_res * 100.0,
        other_before * 100.0,
        st["mode_switches"]
    );
    assert_eq!(swappiness_in_ef.as_deref(), Some("0"));
    assert!(st["mode_switches"].as_u64().unwrap() >= 3, "{st}");
    // Protected (mlocked) ranges survived the burst; unprotected cache did not.
    assert!(prot_res > 0.999, "protected file only {prot_res} resident");
    assert!(
        other_res < other_before * 0.5,
        "the burst did not pressure the page cache"
    );
    // Normal mode restores the original swappiness exactly.
    assert_eq!(
        std::fs::read_to_string(domain.path.join("memory.swappiness"))
            .unwrap()
            .trim(),
        "37"
    );
    let reasons: Vec<String> = st["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["reason"].as_str().map(String::from))
        .collect();
    assert!(
        reasons.iter().any(|r| r == "reclaim_burst_detected"),
        "{reasons:?}"
    );
    d.notify("launched", "prot");
}

/// (3) A kill picks the highest-ΔM background app, never the foreground one.
#[test]
fn kill_picks_highest_net_freed_background_never_foreground() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let domain = TempCgroup::new("domain", Some(400 * MIB));
    let sizes = [("a", 40u64), ("b", 100), ("c", 60), ("fg", 120)];
    let mut apps = String::new();
    let mut procs = Vec::new();
    for (name, mib) in sizes {
        let cg = domain.child(name);
        apps += &format!(
            "[[app]]\nname = \"{name}\"\ncgroup = \"{}\"\n",
            cg.display()
        );
        procs.push((name, helper(&cg, &format!("alloc:{mib}"))));
    }
    let (cfg, sock) = config(
        &scratch.0,
        &domain.path,
        &format!(
            "scan_interval_ms = 200\n[preload]\nenabled = false\n[reclaim]\nenabled = false\n\
             [killer]\ntrigger_avail_fraction = 0.25\ntrigger_anon_share = 0.5\nsettle_ms = 1000\n{apps}"
        ),
    );
    let d = Daemon::start(&cfg, &sock, None);
    // Without notifications every helper has oom_score_adj 0 (foreground on
    // Android's scale): nothing is killed yet.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(d.status()["kills"], 0);
    d.notify("foreground", "fg");
    wait_for("a kill", 20, || d.status()["kills"].as_u64() >= Some(1));
    std::thread::sleep(Duration::from_millis(2500));
    let st = d.status();
    let mut dead = Vec::new();
    for (name, p) in procs.iter_mut() {
        if p.0.try_wait().unwrap().is_some() {
            dead.push(*name);
        }
    }
    let kill = st["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["kind"] == "kill" && x["reason"] == "kill_highest_net_freed")
        .cloned();
    eprintln!("dead: {dead:?}; kill decision: {kill:?}");
    assert_eq!(
        dead,
        vec!["b"],
        "the 100 MiB background app is the highest-ΔM victim"
    );
    assert_eq!(st["kills"], 1, "memory came back: no second kill");
    assert!(kill.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("killed b"));
}

fn swappiness(p: &Path) -> String {
    std::fs::read_to_string(p.join("memory.swappiness"))
        .unwrap()
        .trim()
        .to_string()
}

/// (4) After SIGTERM, and after SIGKILL plus restart, every changed setting is back.
#[test]
fn settings_restored_after_sigterm_and_after_crash() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let domain = TempCgroup::new("domain", Some(512 * MIB));
    let leaf = domain.child("app");
    std::fs::write(domain.path.join("memory.swappiness"), "37").unwrap();
    std::fs::write(leaf.join("memory.swappiness"), "41").unwrap();
    let global = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let (cfg, sock) = config(
        &scratch.0,
        &domain.path,
        "[preload]\nenabled = false\n[killer]\nenabled = false\n\
         [reclaim]\nlow_memory_bytes = 1099511627776\nalloc_threshold_pages = 50\ncalm_ticks = 100000\n",
    );
    let journal = scratch.0.join("state/journal.json");
    let in_ef = |d: &Daemon| d.status()["mode"] == "efficiency_first";
    let changed = || swappiness(&domain.path) == "0" && swappiness(&leaf) == "0";

    // Graceful stop.
    let churn = helper(&leaf, "churn");
    let mut d = Daemon::start(&cfg, &sock, None);
    wait_for("efficiency-first", 20, || in_ef(&d));
    wait_for("swappiness 0", 10, changed);
    assert!(journal.exists());
    let st = d.signal_and_wait(nix::sys::signal::Signal::SIGTERM);
    assert!(st.success(), "daemon exit {st:?}");
    assert_eq!(
        (swappiness(&domain.path), swappiness(&leaf)),
        ("37".into(), "41".into())
    );
    assert!(!journal.exists());

    // Crash: SIGKILL leaves the settings changed and the journal behind ...
    let mut d = Daemon::start(&cfg, &sock, None);
    wait_for("efficiency-first", 20, || in_ef(&d));
    wait_for("swappiness 0", 10, changed);
    d.signal_and_wait(nix::sys::signal::Signal::SIGKILL);
    assert!(changed(), "SIGKILL cannot restore");
    assert!(journal.exists());
    drop(churn);
    // ... and the next start replays it before anything else.
    let mut d = Daemon::start(&cfg, &sock, None);
    assert_eq!(
        (swappiness(&domain.path), swappiness(&leaf)),
        ("37".into(), "41".into())
    );
    assert!(!journal.exists());
    assert_eq!(d.status()["mode"], "normal");
    assert!(d
        .signal_and_wait(nix::sys::signal::Signal::SIGTERM)
        .success());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        global,
        "global swappiness untouched"
    );
}

/// A domain whose swappiness the daemon sets to 0 at once (efficiency-first
/// on any allocation), with the originals 37 (domain) and 41 (leaf).
fn swappiness_domain(scratch: &Scratch) -> (TempCgroup, PathBuf, PathBuf, PathBuf) {
    let domain = TempCgroup::new("harden-domain", Some(512 * MIB));
    let leaf = domain.child("app");
    std::fs::write(domain.path.join("memory.swappiness"), "37").unwrap();
    std::fs::write(leaf.join("memory.swappiness"), "41").unwrap();
    let (cfg, sock) = config(
        &scratch.0,
        &domain.path,
        "[preload]\nenabled = false\n[killer]\nenabled = false\n\
         [reclaim]\nlow_memory_bytes = 1099511627776\nalloc_threshold_pages = 50\ncalm_ticks = 100000\n",
    );
    (domain, leaf, cfg, sock)
}

/// A second daemon on the same state directory stops before touching
/// anything (exit 2): the first one's settings and journal stay as they are,
/// whether it would bind the same socket or another one.
#[test]
fn second_daemon_leaves_the_first_ones_settings_and_journal() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let (domain, leaf, cfg, sock) = swappiness_domain(&scratch);
    let journal = scratch.0.join("state/journal.json");
    let churn = helper(&leaf, "churn");
    let mut d = Daemon::start(&cfg, &sock, None);
    wait_for("efficiency-first", 20, || {
        d.status()["mode"] == "efficiency_first"
    });
    wait_for("swappiness 0", 10, || swappiness(&domain.path) == "0");
    let journal_before = std::fs::read(&journal).unwrap();
    let other_sock = scratch.0.join("other.sock");
    for extra in [vec![], vec!["--socket", other_sock.to_str().unwrap()]] {
        let out = Command::new(daemon_bin())
            .args(["daemon", "--config", cfg.to_str().unwrap()])
            .args(&extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains("another appflow daemon") && err.contains(&d.pid().to_string()),
            "{err}"
        );
        assert_eq!(
            (swappiness(&domain.path), swappiness(&leaf)),
            ("0".into(), "0".into())
        );
        assert_eq!(std::fs::read(&journal).unwrap(), journal_before);
        assert!(!other_sock.exists());
        // The first one still serves, in the same mode.
        assert_eq!(d.status()["mode"], "efficiency_first");
    }
    drop(churn);
    assert!(d
        .signal_and_wait(nix::sys::signal::Signal::SIGTERM)
        .success());
    assert_eq!(
        (swappiness(&domain.path), swappiness(&leaf)),
        ("37".into(), "41".into())
    );
    assert!(!journal.exists());
}

/// 20 crashes (SIGKILL while the settings are changed), each followed by a
/// restart: every restart finds the originals back before it serves, and
/// no setting is left changed at the end.
#[test]
fn twenty_sigkill_restarts_leave_no_setting_changed() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let (domain, leaf, cfg, sock) = swappiness_domain(&scratch);
    let journal = scratch.0.join("state/journal.json");
    let original = || (swappiness(&domain.path), swappiness(&leaf)) == ("37".into(), "41".into());
    let mut left_changed = 0;
    for trial in 0..20 {
        let mut d = Daemon::start(&cfg, &sock, None);
        if !original() || journal.exists() {
            left_changed += 1;
            eprintln!("trial {trial}: settings not restored at restart");
        }
        let churn = helper(&leaf, "churn");
        wait_for("efficiency-first", 20, || {
            d.status()["mode"] == "efficiency_first"
        });
        wait_for("swappiness 0", 10, || swappiness(&leaf) == "0");
        d.signal_and_wait(nix::sys::signal::Signal::SIGKILL);
        drop(churn);
        assert!(
            journal.exists(),
            "trial {trial}: the crash leaves the journal"
        );
    }
    let mut d = Daemon::start(&cfg, &sock, None);
    assert!(original(), "the last restart restores");
    assert!(d
        .signal_and_wait(nix::sys::signal::Signal::SIGTERM)
        .success());
    if !original() || journal.exists() {
        left_changed += 1;
    }
    eprintln!("20 SIGKILL/restart trials: {left_changed} settings left changed");
    assert_eq!(left_changed, 0);
}

/// Bad input: a malformed config exits 2 naming the field and changes nothing.
#[test]
fn bad_config_exits_2_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("appflow-badcfg-{}", random_tag()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "[reclaim]\nalloc_threshold_pagez = 5\n").unwrap();
    let out = Command::new(daemon_bin())
        .args([
            "daemon",
            "--config",
            cfg.to_str().unwrap(),
            "--check-config",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("alloc_threshold_pagez"), "{err}");
    std::fs::write(
        &cfg,
        "[domain]\nkind = \"cgroup\"\nmemory_cgroup = \"/nonexistent/cg\"\n",
    )
    .unwrap();
    let out = Command::new(daemon_bin())
        .args([
            "daemon",
            "--config",
            cfg.to_str().unwrap(),
            "--check-config",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("domain.memory_cgroup"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input on the socket: garbage and unknown apps get error replies; the daemon keeps running.
#[test]
fn socket_garbage_gets_error_replies() {
    require_kernel!();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new();
    let domain = TempCgroup::new("domain", Some(256 * MIB));
    let (cfg, sock) = config(&scratch.0, &domain.path, "");
    let d = Daemon::start(&cfg, &sock, None);
    for bad in [
        "not json",
        r#"{"cmd":"reboot"}"#,
        r#"{"cmd":"notify","event":"launch","app":"../etc"}"#,
        r#"{"cmd":"notify","event":"explode","app":"a"}"#,
        &format!(r#"{{"cmd":"status","pad":"{}"}}"#, "x".repeat(100_000)),
    ] {
        let v = d.request(bad);
        assert_eq!(v["ok"], false, "{bad:.60}: {v}");
    }
    let m = d.request(r#"{"cmd":"metrics"}"#);
    let text = m["text"].as_str().unwrap();
    assert!(text.contains("appflow_socket_errors_total 5"), "{text}");
    assert!(text.contains("appflow_loop_jitter_seconds_count"));
    assert_eq!(d.status()["mode"], "normal");
}
