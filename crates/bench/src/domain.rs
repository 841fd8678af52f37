//! The device domain: a phone-like memory and storage domain built on the
//! local kernel, and its guaranteed teardown.
//!
//! What is built, in order (each step recorded in a state file
//! `<run_dir>/state.json`, written atomically, *before* the next step):
//! the run directory; an ext4 image file under /var/tmp; a loop device over
//! it with direct I/O (so the host page cache is not a second cache); its
//! mount under `<run_dir>/mnt`; a hot-added zram device used as swap at high
//! priority; the v1 memory cgroup `appflow-bench` with the device's limit,
//! the v1 blkio cgroup `appflow-bench`, and leaf cgroups (per app, the
//! preload worker, the calibration) each throttled like the device's
//! storage (v1 blk-throttle is not hierarchical, so every leaf that does I/O
//! carries the limits).
//!
//! Teardown runs every recorded step's undo in reverse order, continues past
//! failures, and keeps in the state file only what could not be undone. It
//! runs from an explicit call, from `Drop` (error and panic paths), and from
//! `appflow bench --cleanup`, which also finds leftovers by the name prefix
//! `appflow-bench` when the state file is gone. Undo steps are idempotent.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The name prefix of everything the testbed creates.
pub const PREFIX: &str = "appflow-bench";
/// The `format` tag of the state file.
pub const STATE_FORMAT: &str = "appflow-bench-state";

/// Something the testbed created and must undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// The run directory (removed with its content).
    RunDir {
        /// Path.
        path: PathBuf,
    },
    /// The ext4 image file.
    Image {
        /// Path.
        path: PathBuf,
    },
    /// A loop device attached to the image.
    Loop {
        /// Device path, e.g. /dev/loop3.
        dev: PathBuf,
    },
    /// A mount point in use.
    Mount {
        /// Mount point.
        path: PathBuf,
    },
    /// A zram device configured (and hot-added) by the testbed.
    Zram {
        /// zram index (N of /dev/zramN).
        index: u32,
        /// Hot-added through /sys/class/zram-control (removed at teardown).
        hot_added: bool,
    },
    /// An active swap device.
    Swap {
        /// Device path.
        dev: PathBuf,
    },
    /// A cgroup directory (its processes are killed, then it is removed).
    Cgroup {
        /// Path.
        path: PathBuf,
    },
    /// A process started outside the cgroups (the daemon): SIGTERM, then SIGKILL.
    Process {
        /// Pid.
        pid: u32,
        /// Its start time (field 22 of /proc/PID/stat), so a reused pid is never signalled.
        start_ticks: u64,
    },
}

/// The state file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Always [`STATE_FORMAT`].
    pub format: String,
    /// Pid of the `appflow bench` that built the domain.
    pub owner_pid: u32,
    /// Resources in creation order.
    pub created: Vec<Resource>,
}

/// Undoes resources. The live implementation acts on the kernel; tests use a fake.
pub trait Ops {
    /// Undoes one resource. Must be idempotent (already gone = Ok).
    fn undo(&mut self, r: &Resource) -> Result<()>;
}

/// Records what was created and undoes it, in reverse, exactly once.
pub struct Ledger<O: Ops> {
    state_file: PathBuf,
    created: Vec<Resource>,
    ops: O,
    done: bool,
}

impl<O: Ops> Ledger<O> {
    /// A ledger writing its state to `state_file` (its directory must be the
    /// first recorded resource or exist already).
    pub fn new(state_file: PathBuf, ops: O) -> Self {
        Self {
            state_file,
            created: Vec::new(),
            ops,
            done: false,
        }
    }

    /// A ledger resuming a previous run's state (for cleanup).
    pub fn resume(state_file: PathBuf, created: Vec<Resource>, ops: O) -> Self {
        Self {
            state_file,
            created,
            ops,
            done: false,
        }
    }

    /// Records a resource just created and persists the state.
    pub fn record(&mut self, r: Resource) -> Result<()> {
        self.created.push(r);
        self.done = false;
        self.persist()
    }

    /// Removes a resource already undone by the caller (e.g. a daemon that exited).
    pub fn forget(&mut self, r: &Resource) -> Result<()> {
        self.created.retain(|x| x != r);
        self.persist()
    }

    /// What is recorded, in creation order.
    pub fn created(&self) -> &[Resource] {
        &self.created
    }

    /// The undo operations (for the owner's live actions).
    pub fn ops(&mut self) -> &mut O {
        &mut self.ops
    }

    fn persist(&self) -> Result<()> {
        let Some(dir) = self.state_file.parent() else {
            return Ok(());
        };
        if !dir.is_dir() {
            // The run dir itself is gone (torn down): nothing to persist into.
            return Ok(());
        }
        let st = State {
            format: STATE_FORMAT.into(),
            owner_pid: std::process::id(),
            created: self.created.clone(),
        };
        let text = serde_json::to_string_pretty(&st)?;
        write_atomic(&self.state_file, text.as_bytes())
            .with_context(|| format!("writing {}", self.state_file.display()))
    }

    /// Undoes everything in reverse creation order. Continues past failures;
    /// returns them (resource, error). What failed stays recorded.
    pub fn teardown(&mut self) -> Vec<(Resource, String)> {
        if self.done {
            return Vec::new();
        }
        let mut failed: Vec<(Resource, String)> = Vec::new();
        while let Some(r) = self.created.pop() {
            if let Err(e) = self.ops.undo(&r) {
                failed.push((r, format!("{e:#}")));
            }
            // Persist progress (unless the run dir was just removed).
            let _ = self.persist_with(&failed);
        }
        // Keep the failures recorded for `--cleanup`.
        failed.reverse();
        self.created = failed.iter().map(|(r, _)| r.clone()).collect();
        let _ = self.persist();
        self.done = true;
        failed.reverse();
        failed
    }

    fn persist_with(&self, failed: &[(Resource, String)]) -> Result<()> {
        let mut all = self.created.clone();
        all.extend(failed.iter().rev().map(|(r, _)| r.clone()));
        let saved = Ledger {
            state_file: self.state_file.clone(),
            created: all,
            ops: NoOps,
            done: true,
        };
        saved.persist()
    }
}

impl<O: Ops> Drop for Ledger<O> {
    fn drop(&mut self) {
        if !self.done && !self.created.is_empty() {
            for (r, e) in self.teardown() {
                eprintln!("appflow bench: teardown of {r:?} failed: {e}");
            }
        }
    }
}

struct NoOps;
impl Ops for NoOps {
    fn undo(&mut self, _r: &Resource) -> Result<()> {
        Ok(())
    }
}

/// Writes a file atomically (the daemon's helper: temp file, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    appflow_linux::store::write_atomic(path, bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Where the testbed puts things (overridable for tests).
#[derive(Debug, Clone)]
pub struct Roots {
    /// cgroup v1 mount root (controllers below it), e.g. /sys/fs/cgroup.
    pub cgroup_root: PathBuf,
    /// Run directory, e.g. /run/appflow-bench.
    pub run_dir: PathBuf,
    /// Directory of the image file, e.g. /var/tmp.
    pub image_dir: PathBuf,
    /// procfs root.
    pub proc_root: PathBuf,
    /// sysfs root.
    pub sys_root: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Self {
            cgroup_root: "/sys/fs/cgroup".into(),
            run_dir: format!("/run/{PREFIX}").into(),
            image_dir: "/var/tmp".into(),
            proc_root: "/proc".into(),
            sys_root: "/sys".into(),
        }
    }
}

impl Roots {
    /// The state file.
    pub fn state_file(&self) -> PathBuf {
        self.run_dir.join("state.json")
    }
    /// The memory controller's domain cgroup.
    pub fn mem_root(&self) -> PathBuf {
        self.cgroup_root.join("memory").join(PREFIX)
    }
    /// The blkio controller's domain cgroup.
    pub fn blkio_root(&self) -> PathBuf {
        self.cgroup_root.join("blkio").join(PREFIX)
    }
    /// The cpu controller's domain cgroup (the CPU budget).
    pub fn cpu_root(&self) -> PathBuf {
        self.cgroup_root.join("cpu").join(PREFIX)
    }
}

/// Finds leftovers of earlier runs by the state file and by name prefix.
/// Returned in creation order (so a [`Ledger`] undoes them in reverse).
pub fn find_leftovers(roots: &Roots) -> Vec<Resource> {
    let mut out: Vec<Resource> = Vec::new();
    let push = |r: Resource, out: &mut Vec<Resource>| {
        if !out.contains(&r) {
            out.push(r);
        }
    };
    if let Ok(text) = std::fs::read_to_string(roots.state_file()) {
        if let Ok(st) = serde_json::from_str::<State>(&text) {
            if st.format == STATE_FORMAT {
                for r in st.created {
                    push(r, &mut out);
                }
            }
        }
    }
    // By prefix: run dir, images, loop devices, mounts, zram swaps, cgroups, daemons.
    if roots.run_dir.exists() {
        push(
            Resource::RunDir {
                path: roots.run_dir.clone(),
            },
            &mut out,
        );
    }
    if let Ok(rd) = std::fs::read_dir(&roots.image_dir) {
        let mut imgs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(".img"))
            })
            .collect();
        imgs.sort();
        for path in imgs {
            push(Resource::Image { path }, &mut out);
        }
    }
    let image_prefix = roots.image_dir.join(PREFIX);
    for (dev, backing) in loop_devices(&roots.sys_root) {
        if backing.starts_with(image_prefix.to_string_lossy().as_ref()) {
            push(Resource::Loop { dev }, &mut out);
        }
    }
    if let Ok(m) = std::fs::read_to_string(roots.proc_root.join("self/mounts")) {
        for mp in mounts_under(&m, &roots.run_dir) {
            push(Resource::Mount { path: mp }, &mut out);
        }
    }
    if let Ok(sw) = std::fs::read_to_string(roots.proc_root.join("swaps")) {
        for dev in swap_devices(&sw) {
            if swap_label(&dev).as_deref() == Some(PREFIX) {
                if let Some(index) = zram_index(&dev) {
                    push(
                        Resource::Zram {
                            index,
                            hot_added: index != 0,
                        },
                        &mut out,
                    );
                }
                push(Resource::Swap { dev }, &mut out);
            }
        }
    }
    for ctrl in ["memory", "blkio", "cpu"] {
        let base = roots.cgroup_root.join(ctrl);
        if let Ok(rd) = std::fs::read_dir(&base) {
            let mut tops: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_dir()
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(PREFIX))
                })
                .collect();
            tops.sort();
            for top in tops {
                for path in dirs_parent_first(&top) {
                    push(Resource::Cgroup { path }, &mut out);
                }
            }
        }
    }
    for (pid, start_ticks) in leftover_daemons(&roots.proc_root, &roots.run_dir) {
        push(Resource::Process { pid, start_ticks }, &mut out);
    }
    order_for_teardown(out)
}

/// Orders resources so that undoing them in reverse is safe: run dir and
/// image first (undone last), then loop, mount, zram, swap, cgroups (parents
/// before children) and processes (undone first).
pub fn order_for_teardown(mut rs: Vec<Resource>) -> Vec<Resource> {
    fn rank(r: &Resource) -> u8 {
        match r {
            Resource::RunDir { .. } => 0,
            Resource::Image { .. } => 1,
            Resource::Loop { .. } => 2,
            Resource::Mount { .. } => 3,
            Resource::Zram { .. } => 4,
            Resource::Swap { .. } => 5,
            Resource::Cgroup { .. } => 6,
            Resource::Process { .. } => 7,
        }
    }
    rs.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
            (Resource::Cgroup { path: x }, Resource::Cgroup { path: y }) => {
                x.components().count().cmp(&y.components().count())
            }
            _ => std::cmp::Ordering::Equal,
        })
    });
    rs
}

fn dirs_parent_first(top: &Path) -> Vec<PathBuf> {
    let mut out = vec![top.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            let mut kids: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            kids.sort();
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// (device, backing file) of every attached loop device.
pub fn loop_devices(sys_root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(sys_root.join("block")) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.starts_with("loop") {
                continue;
            }
            if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
                out.push((PathBuf::from("/dev").join(&name), b.trim().to_string()));
            }
        }
    }
    out.sort();
    out
}

/// Mount points at or below `dir` in /proc/self/mounts text, deepest first.
pub fn mounts_under(mounts: &str, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|m| PathBuf::from(m.replace("\\040", " ")))
        .filter(|m| m.starts_with(dir))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

/// Device paths listed in /proc/swaps text.
pub fn swap_devices(swaps: &str) -> Vec<PathBuf> {
    swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(PathBuf::from)
        .collect()
}

fn zram_index(dev: &Path) -> Option<u32> {
    dev.file_name()?
        .to_str()?
        .strip_prefix("zram")?
        .parse()
        .ok()
}

fn swap_label(dev: &Path) -> Option<String> {
    let out = std::process::Command::new("blkid")
        .args(["-o", "value", "-s", "LABEL"])
        .arg(dev)
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Start time (ticks since boot, field 22) of a process.
pub fn start_ticks(proc_root: &Path, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Daemons started by a testbed (their command line names a config in the run dir).
fn leftover_daemons(proc_root: &Path, run_dir: &Path) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let needle = run_dir.to_string_lossy().to_string();
    let me = std::process::id();
    if let Ok(rd) = std::fs::read_dir(proc_root) {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<String> = cmd
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).to_string())
                .collect();
            let is_daemon = args.iter().any(|a| a == "daemon" || a == "preload-worker");
            if is_daemon && args.iter().any(|a| a.contains(&needle)) {
                if let Some(t) = start_ticks(proc_root, pid) {
                    out.push((pid, t));
                }
            }
        }
    }
    out
}

/// The live undo operations.
#[derive(Debug, Clone, Default)]
pub struct LiveOps {
    /// procfs root.
    pub proc_root: PathBuf,
    /// sysfs root.
    pub sys_root: PathBuf,
}

impl LiveOps {
    /// Live ops on the given roots.
    pub fn new(roots: &Roots) -> Self {
        Self {
            proc_root: roots.proc_root.clone(),
            sys_root: roots.sys_root.clone(),
        }
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// Kills every process of a cgroup (SIGKILL) and waits until it is empty.
pub fn kill_cgroup_procs(path: &Path, timeout: Duration) -> bool {
    wait_until(timeout, || {
        let procs = std::fs::read_to_string(path.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<u32> = procs
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        for &p in &pids {
            signal(p, nix::sys::signal::Signal::SIGKILL);
        }
        pids.is_empty()
    })
}

fn run_cmd(cmd: &str, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd} (is it installed?)"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn is_swap_active(proc_root: &Path, dev: &Path) -> bool {
    std::fs::read_to_string(proc_root.join("swaps"))
        .map(|s| swap_devices(&s).iter().any(|d| d == dev))
        .unwrap_or(false)
}

impl Ops for LiveOps {
    fn undo(&mut self, r: &Resource) -> Result<()> {
        use nix::sys::signal::Signal;
        match r {
            Resource::Process {
                pid,
                start_ticks: t,
            } => {
                if start_ticks(&self.proc_root, *pid) != Some(*t) {
                    return Ok(());
                }
                signal(*pid, Signal::SIGTERM);
                let alive = || start_ticks(&self.proc_root, *pid) == Some(*t) && !is_zombie(*pid);
                if !wait_until(Duration::from_secs(10), || !alive()) {
                    signal(*pid, Signal::SIGKILL);
                    wait_until(Duration::from_secs(2), || !alive());
                }
                Ok(())
            }
            Resource::Cgroup { path } => {
                if !path.exists() {
                    return Ok(());
                }
                if !kill_cgroup_procs(path, Duration::from_secs(10)) {
                    bail!("processes of {} would not die", path.display());
                }
                let mut last = None;
                let ok = wait_until(Duration::from_secs(5), || match std::fs::remove_dir(path) {
                    Ok(()) => true,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                    Err(e) => {
                        last = Some(e);
                        false
                    }
                });
                if !ok {
                    bail!("rmdir {}: {:?}", path.display(), last);
                }
                Ok(())
            }
            Resource::Swap { dev } => {
                if !is_swap_active(&self.proc_root, dev) {
                    return Ok(());
                }
                let c = std::ffi::CString::new(dev.as_os_str().as_encoded_bytes())?;
                // SAFETY: a valid NUL-terminated path.
                let rc = unsafe { libc::swapoff(c.as_ptr()) };
                if rc != 0 {
                    bail!(
                        "swapoff {}: {}",
                        dev.display(),
                        std::io::Error::last_os_error()
                    );
                }
                Ok(())
            }
            Resource::Zram { index, hot_added } => {
                let dir = self.sys_root.join(format!("block/zram{index}"));
                if !dir.exists() {
                    return Ok(());
                }
                std::fs::write(dir.join("reset"), "1")
                    .with_context(|| format!("resetting zram{index}"))?;
                if *hot_added {
                    std::fs::write(
                        self.sys_root.join("class/zram-control/hot_remove"),
                        index.to_string(),
                    )
                    .with_context(|| format!("hot_remove zram{index}"))?;
                }
                Ok(())
            }
            Resource::Mount { path } => {
                let mounted = || {
                    std::fs::read_to_string(self.proc_root.join("self/mounts"))
                        .map(|m| mounts_under(&m, path).iter().any(|p| p == path))
                        .unwrap_or(false)
                };
                if !mounted() {
                    return Ok(());
                }
                let ok = wait_until(Duration::from_secs(5), || {
                    nix::mount::umount(path.as_path()).is_ok() || !mounted()
                });
                if !ok {
                    nix::mount::umount2(path.as_path(), nix::mount::MntFlags::MNT_DETACH)
                        .with_context(|| format!("umount {}", path.display()))?;
                }
                Ok(())
            }
            Resource::Loop { dev } => {
                let name = dev.file_name().unwrap_or_default().to_string_lossy();
                let bf = self
                    .sys_root
                    .join(format!("block/{name}/loop/backing_file"));
                if !bf.exists() {
                    return Ok(());
                }
                let d = dev.to_string_lossy();
                let ok = wait_until(Duration::from_secs(5), || {
                    run_cmd("losetup", &["-d", &d]).is_ok() || !bf.exists()
                });
                if !ok {
                    bail!("losetup -d {d} failed");
                }
                Ok(())
            }
            Resource::Image { path } => match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", path.display()))
                }
                _ => Ok(()),
            },
            Resource::RunDir { path } => match std::fs::remove_dir_all(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", path.display()))
                }
                _ => Ok(()),
            },
        }
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Fake {
        log: Arc<Mutex<Vec<Resource>>>,
        fail: Option<Resource>,
    }
    impl Ops for Fake {
        fn undo(&mut self, r: &Resource) -> Result<()> {
            self.log.lock().unwrap().push(r.clone());
            if self.fail.as_ref() == Some(r) {
                bail!("boom");
            }
            Ok(())
        }
    }

    fn sample() -> Vec<Resource> {
        vec![
            Resource::Image {
                path: "/var/tmp/appflow-bench-1.img".into(),
            },
            Resource::Loop {
                dev: "/dev/loop7".into(),
            },
            Resource::Mount {
                path: "/run/appflow-bench/mnt".into(),
            },
            Resource::Cgroup {
                path: "/sys/fs/cgroup/memory/appflow-bench".into(),
            },
            Resource::Cgroup {
                path: "/sys/fs/cgroup/memory/appflow-bench/app-x".into(),
            },
        ]
    }

    #[test]
    fn teardown_is_reverse_order_and_once() {
        let d = tempfile::tempdir().unwrap();
        let fake = Fake::default();
        let mut l = Ledger::new(d.path().join("state.json"), fake.clone());
        for r in sample() {
            l.record(r).unwrap();
        }
        let st: State =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("state.json")).unwrap())
                .unwrap();
        assert_eq!(st.created, sample());
        assert!(l.teardown().is_empty());
        let mut want = sample();
        want.reverse();
        assert_eq!(*fake.log.lock().unwrap(), want);
        // Second teardown and drop do nothing more.
        assert!(l.teardown().is_empty());
        drop(l);
        assert_eq!(fake.log.lock().unwrap().len(), want.len());
        let st: State =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("state.json")).unwrap())
                .unwrap();
        assert!(st.created.is_empty());
    }

    #[test]
    fn drop_tears_down_and_failures_stay_recorded() {
        let d = tempfile::tempdir().unwrap();
        let failing = Resource::Loop {
            dev: "/dev/loop7".into(),
        };
        let fake = Fake {
            fail: Some(failing.clone()),
            ..Default::default()
        };
        {
            let mut l = Ledger::new(d.path().join("state.json"), fake.clone());
            for r in sample() {
                l.record(r).unwrap();
            }
            // Dropped without an explicit teardown (an error or panic path).
        }
        // Every resource was attempted, despite the failure in the middle.
        assert_eq!(fake.log.lock().unwrap().len(), sample().len());
        let st: State =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("state.json")).unwrap())
                .unwrap();
        assert_eq!(st.created, vec![failing]);
    }

    #[test]
    fn teardown_runs_on_panic() {
        let d = tempfile::tempdir().unwrap();
        let fake = Fake::default();
        let f2 = fake.clone();
        let path = d.path().join("state.json");
        let r = std::panic::catch_unwind(move || {
            let mut l = Ledger::new(path, f2);
            l.record(sample()[0].clone()).unwrap();
            panic!("mid-run failure");
        });
        assert!(r.is_err());
        assert_eq!(fake.log.lock().unwrap().len(), 1);
    }

    #[test]
    fn leftovers_are_found_by_state_and_prefix() {
        let d = tempfile::tempdir().unwrap();
        let roots = Roots {
            cgroup_root: d.path().join("cg"),
            run_dir: d.path().join("run/appflow-bench"),
            image_dir: d.path().join("vartmp"),
            proc_root: d.path().join("proc"),
            sys_root: d.path().join("sys"),
        };
        for p in [
            roots.cgroup_root.join("memory/appflow-bench/app-a"),
            roots.cgroup_root.join("memory/other"),
            roots.cgroup_root.join("blkio/appflow-bench/worker"),
            roots.run_dir.clone(),
            roots.image_dir.clone(),
            roots.proc_root.join("self"),
            roots.sys_root.join("block/loop3/loop"),
            roots.sys_root.join("block/loop4/loop"),
        ] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(roots.image_dir.join("appflow-bench-9.img"), "").unwrap();
        std::fs::write(roots.image_dir.join("unrelated.img"), "").unwrap();
        let img = roots.image_dir.join("appflow-bench-9.img");
        std::fs::write(
            roots.sys_root.join("block/loop3/loop/backing_file"),
            format!("{}\n", img.display()),
        )
        .unwrap();
        std::fs::write(
            roots.sys_root.join("block/loop4/loop/backing_file"),
            "/home/x.img\n",
        )
        .unwrap();
        let mnt = roots.run_dir.join("mnt");
        std::fs::write(
            roots.proc_root.join("self/mounts"),
            format!(
                "/dev/vda / ext4 rw 0 0\n/dev/loop3 {} ext4 rw 0 0\n",
                mnt.display()
            ),
        )
        .unwrap();
        std::fs::write(
            roots.proc_root.join("swaps"),
            "Filename Type Size Used Priority\n",
        )
        .unwrap();
        let found = find_leftovers(&roots);
        let has = |r: Resource| found.contains(&r);
        assert!(has(Resource::RunDir {
            path: roots.run_dir.clone()
        }));
        assert!(has(Resource::Image { path: img.clone() }));
        assert!(!found
            .iter()
            .any(|r| matches!(r, Resource::Image { path } if path.ends_with("unrelated.img"))));
        assert!(has(Resource::Loop {
            dev: "/dev/loop3".into()
        }));
        assert!(!has(Resource::Loop {
            dev: "/dev/loop4".into()
        }));
        assert!(has(Resource::Mount { path: mnt }));
        assert!(has(Resource::Cgroup {
            path: roots.cgroup_root.join("memory/appflow-bench/app-a")
        }));
        assert!(!found
            .iter()
            .any(|r| matches!(r, Resource::Cgroup { path } if path.ends_with("other"))));
        // Reverse of the returned order: children before parents, mounts before loops,
        // loops before images, the run dir last.
        let pos = |p: &dyn Fn(&Resource) -> bool| found.iter().position(p).unwrap();
        let parent = pos(
            &|r| matches!(r, Resource::Cgroup { path } if path.ends_with("memory/appflow-bench")),
        );
        let child = pos(&|r| matches!(r, Resource::Cgroup { path } if path.ends_with("app-a")));
        assert!(parent < child);
        let m = pos(&|r| matches!(r, Resource::Mount { .. }));
        let l = pos(&|r| matches!(r, Resource::Loop { .. }));
        let i = pos(&|r| matches!(r, Resource::Image { .. }));
        let rd = pos(&|r| matches!(r, Resource::RunDir { .. }));
        assert!(rd < i && i < l && l < m && m < parent);
    }

    #[test]
    fn proc_text_parsers() {
        let m = "a /run/appflow-bench/mnt ext4 rw 0 0\nb /run/other x rw 0 0\n";
        assert_eq!(
            mounts_under(m, Path::new("/run/appflow-bench")),
            vec![PathBuf::from("/run/appflow-bench/mnt")]
        );
        let s = "Filename\tType\tSize\tUsed\tPriority\n/dev/zram1 partition 100 0 32767\n";
        assert_eq!(swap_devices(s), vec![PathBuf::from("/dev/zram1")]);
        assert_eq!(zram_index(Path::new("/dev/zram12")), Some(12));
    }
}
