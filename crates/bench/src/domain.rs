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
use appflow_linux::ledger::{Undo, Undone};
use appflow_linux::readers::read_start_time;
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
pub type State = appflow_linux::ledger::LedgerFile<Resource>;

/// Records what was created and undoes it, in reverse, exactly once: the
/// undo ledger the daemon's journal also uses, here undoing on drop too
/// (error and panic paths leave nothing behind).
pub type Ledger<O> = appflow_linux::ledger::Ledger<Resource, O>;

/// A ledger writing its state to `state_file` (its directory must be the
/// first recorded resource or exist already).
pub fn ledger<O: Undo<Resource>>(state_file: PathBuf, ops: O) -> Ledger<O> {
    resume(state_file, Vec::new(), ops)
}

/// A ledger resuming a previous run's state (for cleanup).
pub fn resume<O: Undo<Resource>>(state_file: PathBuf, created: Vec<Resource>, ops: O) -> Ledger<O> {
    Ledger::resume(state_file, STATE_FORMAT, created, ops).undo_on_drop(true)
}

/// Undoes everything in reverse creation order, continuing past failures,
/// and returns the failures (resource, error); what failed stays recorded
/// for `--cleanup`.
pub fn teardown<O: Undo<Resource, Error = anyhow::Error>>(
    l: &mut Ledger<O>,
) -> Vec<(Resource, String)> {
    l.undo_all()
        .failed
        .into_iter()
        .map(|(r, e)| (r, format!("{e:#}")))
        .collect()
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
                for r in st.entries {
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
    for mp in mounts_under(&roots.proc_root, &roots.run_dir) {
        push(Resource::Mount { path: mp }, &mut out);
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

/// Mount points at or below `dir` (from /proc/self/mountinfo), deepest first.
pub fn mounts_under(proc_root: &Path, dir: &Path) -> Vec<PathBuf> {
    let mounts = appflow_linux::readers::read_mountinfo(proc_root).unwrap_or_default();
    let mut out: Vec<PathBuf> = mounts
        .into_iter()
        .map(|m| m.mount_point)
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
                if let Some(t) = read_start_time(proc_root, pid) {
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

/// Runs a system tool and returns its trimmed stdout; fails naming the
/// command and its stderr.
pub(crate) fn run_cmd(cmd: &str, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd} (install util-linux / e2fsprogs)"))?;
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

impl Undo<Resource> for LiveOps {
    type Error = anyhow::Error;
    fn undo(&mut self, r: &Resource) -> Result<Undone> {
        self.undo_resource(r).map(|()| Undone::Done)
    }
}

impl LiveOps {
    /// Undoes one resource; idempotent (already gone = Ok).
    fn undo_resource(&mut self, r: &Resource) -> Result<()> {
        use nix::sys::signal::Signal;
        match r {
            Resource::Process {
                pid,
                start_ticks: t,
            } => {
                if read_start_time(&self.proc_root, *pid) != Some(*t) {
                    return Ok(());
                }
                signal(*pid, Signal::SIGTERM);
                let alive = || {
                    read_start_time(&self.proc_root, *pid) == Some(*t)
                        && !is_zombie(&self.proc_root, *pid)
                };
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
                let mounted = || mounts_under(&self.proc_root, path).contains(path);
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

fn is_zombie(proc_root: &Path, pid: u32) -> bool {
    appflow_linux::readers::read_stat(proc_root, pid).map_or(true, |s| s.state == 'Z')
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
    impl Undo<Resource> for Fake {
        type Error = anyhow::Error;
        fn undo(&mut self, r: &Resource) -> Result<Undone> {
            self.log.lock().unwrap().push(r.clone());
            if self.fail.as_ref() == Some(r) {
                bail!("boom");
            }
            Ok(Undone::Done)
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
        let mut l = ledger(d.path().join("state.json"), fake.clone());
        for r in sample() {
            l.record(r).unwrap();
        }
        let st: State =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("state.json")).unwrap())
                .unwrap();
        assert_eq!((st.format.as_str(), st.entries), (STATE_FORMAT, sample()));
        assert!(teardown(&mut l).is_empty());
        let mut want = sample();
        want.reverse();
        assert_eq!(*fake.log.lock().unwrap(), want);
        // Drop does nothing more; nothing is left recorded.
        drop(l);
        assert_eq!(fake.log.lock().unwrap().len(), want.len());
        assert!(!d.path().join("state.json").exists());
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
            let mut l = ledger(d.path().join("state.json"), fake.clone());
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
        assert_eq!(st.entries, vec![failing]);
    }

    #[test]
    fn teardown_runs_on_panic() {
        let d = tempfile::tempdir().unwrap();
        let fake = Fake::default();
        let f2 = fake.clone();
        let path = d.path().join("state.json");
        let r = std::panic::catch_unwind(move || {
            let mut l = ledger(path, f2);
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
            roots.proc_root.join("self/mountinfo"),
            format!(
                "22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                 61 22 7:3 / {} rw,relatime shared:30 - ext4 /dev/loop3 rw\n",
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
        let s = "Filename\tType\tSize\tUsed\tPriority\n/dev/zram1 partition 100 0 32767\n";
        assert_eq!(swap_devices(s), vec![PathBuf::from("/dev/zram1")]);
        assert_eq!(zram_index(Path::new("/dev/zram12")), Some(12));
    }
}
