//! Shared pieces of the real-kernel daemon tests: a temporary v1 memory
//! cgroup, processes started inside it that die with the test, the daemon
//! binary driven through its socket, a scratch directory on disk, and
//! page-cache eviction. (`daemon_kernel.rs` shares the pieces that are the same
//! in both; its cgroup, daemon and scratch helpers do more.)
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where cgroup v1 mounts the memory controller on this machine.
pub const CG_ROOT: &str = "/sys/fs/cgroup/memory";

/// Why a real-kernel daemon test cannot run here (None: it can).
pub fn skip_reason() -> Option<String> {
    if nix::unistd::geteuid().as_raw() != 0 {
        return Some("not root".into());
    }
    if !Path::new(CG_ROOT).join("memory.limit_in_bytes").exists() {
        return Some(format!("no cgroup v1 memory controller at {CG_ROOT}"));
    }
    None
}

/// Returns from the test, saying why, when the kernel cannot run it.
#[allow(unused_macros)]
macro_rules! require_kernel {
    () => {
        if let Some(r) = $crate::support::skip_reason() {
            eprintln!("SKIPPED: {r}");
            return;
        }
    };
}

/// A tag unique to this run (pid and clock).
pub fn random_tag() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{t:x}", std::process::id())
}

/// A temporary memory cgroup, removed on drop (its processes killed first).
pub struct TempCgroup {
    /// Its directory.
    pub path: PathBuf,
}

impl TempCgroup {
    /// `CG_ROOT/<name>` with an optional limit.
    pub fn new(name: &str, limit_bytes: Option<u64>) -> Self {
        let path = Path::new(CG_ROOT).join(name);
        std::fs::create_dir(&path).unwrap();
        if let Some(l) = limit_bytes {
            std::fs::write(path.join("memory.limit_in_bytes"), l.to_string()).unwrap();
        }
        Self { path }
    }

    /// The pids in it.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILLs every process in it and waits until it is empty.
    pub fn kill_all(&self) {
        for _ in 0..250 {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        self.kill_all();
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Makes `cmd`'s process get `sig` when the thread that spawned it dies.
pub fn die_with_parent(cmd: &mut Command, sig: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, sig);
            Ok(())
        });
    }
}

/// Runs `program args` inside `cgroup` from its first instruction (a
/// shell joins the cgroup, then execs the program: the exec is the launch);
/// it is sent SIGKILL if the test dies, and its stdout is discarded.
pub fn spawn_in(cgroup: &Path, program: &Path, args: &[&str], env: &[(&str, String)]) -> Child {
    spawn_in_with(
        cgroup,
        program,
        args,
        env,
        Some(libc::SIGKILL),
        Stdio::null(),
    )
}

/// [`spawn_in`] with the signal the child gets when the test dies (`None`:
/// none) and what becomes of its stdout.
pub fn spawn_in_with(
    cgroup: &Path,
    program: &Path,
    args: &[&str],
    env: &[(&str, String)],
    death_signal: Option<i32>,
    stdout: Stdio,
) -> Child {
    let mut cmd = Command::new("/bin/sh");
    if let Some(sig) = death_signal {
        die_with_parent(&mut cmd, sig);
    }
    cmd.arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec \"$0\" \"$@\"",
            cgroup.display()
        ))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Runs the test `helper` of this test binary (a function that does its
/// work only when its environment `env` says so) in `cgroup`, killed when
/// the test dies, and waits for it to print a line with `helper-ready`;
/// returns it and what followed `helper-ready ` on that line.
pub fn spawn_helper_test(cgroup: &Path, helper: &str, env: &[(&str, String)]) -> (Proc, String) {
    let me = std::env::current_exe().unwrap();
    // Owned by a `Proc` at once: killed and reaped on every path.
    let mut p = Proc(spawn_in_with(
        cgroup,
        &me,
        &["--exact", helper, "--nocapture", "--test-threads=1"],
        env,
        Some(libc::SIGKILL),
        Stdio::piped(),
    ));
    let out = p.0.stdout.take().unwrap();
    for l in BufReader::new(out).lines() {
        let Ok(l) = l else { break };
        if let Some((_, rest)) = l.trim_end().split_once("helper-ready") {
            return (p, rest.trim().to_string());
        }
    }
    panic!("helper {helper} never became ready");
}

/// The daemon binary of this package (same code as `appflow daemon`).
pub fn daemon_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_appflowd"))
}

/// A running daemon: SIGTERM + wait on drop (SIGKILL after 10 s).
pub struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
}

impl Daemon {
    /// Starts the daemon with `config` (log to `log`) and waits for its socket.
    pub fn start(config: &Path, socket: &Path, log: &Path) -> Self {
        let _ = std::fs::remove_file(socket);
        let mut cmd = Command::new(daemon_bin());
        die_with_parent(&mut cmd, libc::SIGTERM);
        cmd.args([
            "--log",
            "info",
            "daemon",
            "--config",
            config.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
        let d = Daemon {
            child: Some(cmd.spawn().unwrap()),
            socket: socket.to_path_buf(),
        };
        wait_for("the daemon's socket", 20, || {
            UnixStream::connect(socket).is_ok()
        });
        d
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// One request line, one reply.
    pub fn request(&self, req: &str) -> Value {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        writeln!(s, "{req}").unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// `status`.
    pub fn status(&self) -> Value {
        let v = self.request(r#"{"cmd":"status"}"#);
        assert_eq!(v["ok"], true, "{v}");
        v
    }

    /// SIGTERM, then waits (SIGKILL after 10 s).
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t0 = Instant::now();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return Some(st);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = c.kill();
                return c.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `f` every 50 ms; panics naming `what` after `secs`.
pub fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scratch directory on a disk file system (tmpfs pages are not page
/// cache that can be evicted and read back), removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `/var/tmp/<name>`.
    pub fn new(name: &str) -> Self {
        let p = PathBuf::from(format!("/var/tmp/{name}"));
        std::fs::create_dir_all(p.join("state/profiles")).unwrap();
        Self(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Drops `path` from the page cache (POSIX_FADV_DONTNEED after a sync).
pub fn evict(path: &Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: valid fd; advice only.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "fadvise {}", path.display());
}

/// Fraction of `path`'s pages resident in the page cache (mincore).
pub fn residency(path: &Path) -> f64 {
    use std::os::fd::AsFd;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let pages = appflow_linux::recorder::residency::residency(f.as_fd(), len).unwrap();
    if pages.is_empty() {
        return 1.0;
    }
    pages.iter().filter(|&&b| b == 1).count() as f64 / pages.len() as f64
}

/// Swap for a test: the machine's when it has some, else a zram device of
/// our own (hot-added, removed on drop). `Err` is the reason to skip.
pub struct TestSwap {
    /// The zram device hot-added for the test, if any.
    pub zram: Option<u32>,
}

impl TestSwap {
    pub fn ensure(bytes: u64) -> Result<Self, String> {
        let swaps =
            std::fs::read_to_string("/proc/swaps").map_err(|e| format!("/proc/swaps: {e}"))?;
        if swaps.lines().count() > 1 {
            return Ok(Self { zram: None });
        }
        Self::own(bytes)
    }

    /// A zram swap device of the test's own, whatever the machine has
    /// (another tool's swap may come and go during the test).
    pub fn own(bytes: u64) -> Result<Self, String> {
        let n: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
            .map_err(|e| format!("no zram to hot-add: {e}"))?
            .trim()
            .parse()
            .map_err(|e| format!("zram hot_add: {e}"))?;
        let me = Self { zram: Some(n) };
        let dev = format!("/dev/zram{n}");
        std::fs::write(format!("/sys/block/zram{n}/disksize"), bytes.to_string())
            .map_err(|e| format!("zram{n} disksize: {e}"))?;
        for (prog, args) in [
            ("mkswap", vec![dev.as_str()]),
            ("swapon", vec![dev.as_str()]),
        ] {
            let st = Command::new(prog)
                .args(&args)
                .stdout(Stdio::null())
                .status()
                .map_err(|e| format!("{prog}: {e}"))?;
            if !st.success() {
                return Err(format!("{prog} {dev} failed: {st}"));
            }
        }
        Ok(me)
    }
}

impl Drop for TestSwap {
    fn drop(&mut self) {
        if let Some(n) = self.zram {
            let dev = format!("/dev/zram{n}");
            let _ = Command::new("swapoff").arg(&dev).status();
            let _ = std::fs::write("/sys/class/zram-control/hot_remove", n.to_string());
        }
    }
}

/// A memory cgroup with swap and a scratch directory, for tests of
/// anonymous memory. Dropped in that order: the cgroup's processes die
/// before the scratch directory goes, the swap last.
pub struct SwapDomain {
    /// The cgroup.
    pub cg: TempCgroup,
    /// The scratch directory.
    pub dir: PathBuf,
    _swap: TestSwap,
}

impl SwapDomain {
    /// `CG_ROOT/<prefix>-<tag>` limited to `limit_bytes`, a scratch
    /// directory of the same name, and swap of `swap_bytes` when the
    /// machine has none. `Err` is the reason to skip.
    pub fn new(prefix: &str, swap_bytes: u64, limit_bytes: u64) -> Result<Self, String> {
        let swap = TestSwap::ensure(swap_bytes).map_err(|r| format!("no swap: {r}"))?;
        let name = format!("{prefix}-{}", random_tag());
        let cg = TempCgroup::new(&name, Some(limit_bytes));
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Ok(Self {
            cg,
            dir,
            _swap: swap,
        })
    }
}

impl Drop for SwapDomain {
    fn drop(&mut self) {
        self.cg.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The identity (pid + start time) of a live process.
pub fn proc_id(pid: u32) -> appflow_core::scheduler::ProcId {
    appflow_core::scheduler::ProcId {
        pid,
        start_time: appflow_linux::readers::read_start_time(Path::new("/proc"), pid).unwrap(),
    }
}
