//! The policies compared in one run, and the daemon that realises the
//! daemon-backed ones (driven only through its config file, its control
//! socket and SIGTERM: contracts B, C and E).

use anyhow::{bail, Context, Result};
use appflow_core::policy::{self as core_policy, Policy as CorePolicy};
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A row of the comparison: a registered policy (`appflow_core::policy`),
/// or the `oracle` floor (the same launch with its files cached and no
/// background load), which is a testbed measurement, not a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// A policy of the core's registry.
    Run(&'static CorePolicy),
    /// The floor: files already cached, no background load.
    Oracle,
}

impl Serialize for Policy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The policies of a run without `--policies`: the AppFlow paper §6.1's
/// comparison (Android, Paralfetch, Acclaim+Paralfetch, AppFlow and the
/// ablations of its three modules), then the oracle. The other policies
/// (the peers, preload-all, lru-killer) run with `--policies all` or by
/// name; on the calibrated CPU budget a loaded session takes about 14 s,
/// and every policy at 3 repetitions would take 10 minutes.
pub const DEFAULT_POLICIES: &[&str] = &[
    "stock",
    "prefetch",
    "acclaim+prefetch",
    "appflow",
    "appflow-sfp",
    "appflow-amr",
    "appflow-cpk",
];

/// The default rows, in report order ([`DEFAULT_POLICIES`], then the oracle).
pub fn default_set() -> Vec<Policy> {
    DEFAULT_POLICIES
        .iter()
        .map(|n| Policy::named(n))
        .chain(std::iter::once(Policy::Oracle))
        .collect()
}

/// Every row the testbed can run (`--policies all`), in report order: each
/// registered policy a stock kernel can run, then the oracle.
pub fn all() -> Vec<Policy> {
    core_policy::REGISTRY
        .iter()
        .filter(|p| p.needs_kernel_change().is_none())
        .map(|p| Policy::Run(p))
        .chain(std::iter::once(Policy::Oracle))
        .collect()
}

impl Policy {
    /// A registered policy by name or alias, or `oracle`; the error lists
    /// the valid names, and says why a kernel-patch policy cannot run here.
    pub fn parse(s: &str) -> std::result::Result<Policy, String> {
        if s == "oracle" {
            return Ok(Policy::Oracle);
        }
        let p = core_policy::lookup(s).map_err(|e| format!("{e}, oracle"))?;
        match p.needs_kernel_change() {
            Some(why) => Err(format!("{why}: the testbed runs a stock kernel")),
            None => Ok(Policy::Run(p)),
        }
    }

    /// A registered policy by its name (panics on a name not registered:
    /// for names written in this crate).
    pub fn named(name: &str) -> Policy {
        Policy::parse(name).expect("a registered policy")
    }

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Run(p) => p.name,
            Policy::Oracle => "oracle",
        }
    }

    /// True when the policy runs the daemon (anything but stock and oracle).
    pub fn needs_daemon(self) -> bool {
        matches!(self, Policy::Run(p) if !p.is_stock())
    }

    /// True for the stock kernel row.
    pub fn is_stock(self) -> bool {
        matches!(self, Policy::Run(p) if p.is_stock())
    }
}

/// Where the daemon of a run lives.
#[derive(Debug, Clone)]
pub struct DaemonSetup {
    /// The `appflow` binary.
    pub binary: PathBuf,
    /// Run directory (configs, socket, state, logs).
    pub dir: PathBuf,
    /// Domain memory cgroup.
    pub memory_cgroup: PathBuf,
    /// blkio cgroup for the preload worker (a throttled leaf).
    pub blkio_cgroup: PathBuf,
    /// cpu cgroup of the daemon and its preload worker (the worker leaf's:
    /// one phone core for the two).
    pub cpu_cgroup: PathBuf,
    /// Preload budget M_p, bytes.
    pub budget_bytes: u64,
    /// Apps: (name, memory cgroup of its processes).
    pub apps: Vec<(String, PathBuf)>,
    /// N_alloc for the reclaimer, pages per 100 ms, derived from the
    /// domain's measured anonymous reclaim throughput (None: the daemon's
    /// default).
    pub alloc_threshold_pages: Option<u64>,
}

impl DaemonSetup {
    /// The control socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("appflow.sock")
    }
    /// The state dir (profiles/ below it).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }
    /// The config file of `policy`.
    pub fn config_path(&self, p: Policy) -> PathBuf {
        self.dir.join(format!("daemon-{}.toml", p.name()))
    }

    /// The daemon config (docs/daemon.md) for `policy`.
    pub fn config(&self, p: Policy, trace_file: &Path) -> String {
        let q = |p: &Path| toml_str(&p.to_string_lossy());
        let mut s = format!(
            "# Generated by appflow bench for policy {name}.\n\
             [daemon]\npolicy = {name_q}\nsocket = {sock}\nstate_dir = {state}\ntrace_file = {trace}\n\n\
             [domain]\nkind = \"cgroup\"\nmemory_cgroup = {mem}\nblkio_cgroup = {blk}\n\n\
             [preload]\nbudget_bytes = {budget}\n\n\
             # The testbed announces every launch (as a launcher would); the\n\
             # daemon's own detection and on-the-fly learning would be a second\n\
             # source of the same events and would rewrite between repetitions\n\
             # the profiles recorded before the run.\n\
             [detect]\nenabled = false\n",
            name = p.name(),
            name_q = toml_str(p.name()),
            sock = q(&self.socket()),
            state = q(&self.state_dir()),
            trace = q(trace_file),
            mem = q(&self.memory_cgroup),
            blk = q(&self.blkio_cgroup),
            budget = self.budget_bytes,
        );
        // The testbed pins the thresholds its simulator twin models (M_F
        // 15 % of the domain, N_alloc from the calibrated reclaim rate or
        // the paper's), so that measured and simulated runs compare; a
        // deployed daemon sizes them itself (docs/daemon.md "Sizing").
        let n = self
            .alloc_threshold_pages
            .unwrap_or(appflow_core::sizing::PAPER_ALLOC_THRESHOLD_PAGES);
        s.push_str(&format!(
            "\n[reclaim]\nalloc_threshold_pages = {n}\nlow_memory_bytes = 0\n"
        ));
        for (name, cg) in &self.apps {
            s.push_str(&format!(
                "\n[[app]]\nname = {}\ncgroup = {}\n",
                toml_str(name),
                q(cg)
            ));
        }
        s
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Checks a config with `appflow daemon --config F --check-config`; Err with
/// the daemon's message when it is refused or the daemon is not available.
pub fn check_config(binary: &Path, config: &Path) -> Result<()> {
    let out = Command::new(binary)
        .arg("daemon")
        .arg("--config")
        .arg(config)
        .arg("--check-config")
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!(
            "`appflow daemon --check-config` exited with {}: {last}",
            out.status
        );
    }
    Ok(())
}

/// A running daemon.
pub struct Daemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// Starts `appflow daemon --config F` and waits until its socket answers `status`.
    /// Starts the daemon inside its CPU budget (`cpu_cgroup`): its preload
    /// worker inherits that cgroup, and the daemon's config places it in
    /// the domain's memory and blkio cgroups.
    pub fn start(
        binary: &Path,
        config: &Path,
        socket: &Path,
        log: &Path,
        cpu_cgroup: &Path,
    ) -> Result<Daemon> {
        let _ = std::fs::remove_file(socket);
        let cpu_procs = std::ffi::CString::new(
            cpu_cgroup
                .join("cgroup.procs")
                .to_string_lossy()
                .into_owned(),
        )?;
        let errlog = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let mut cmd = Command::new(binary);
        cmd.arg("daemon")
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::from(errlog.try_clone()?))
            .stderr(Stdio::from(errlog))
            .process_group(0);
        // SAFETY: only async-signal-safe calls (open/write/close) on a string
        // prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(cpu_procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, c"0".as_ptr().cast(), 1);
                libc::close(fd);
                if n < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} daemon", binary.display()))?;
        let mut d = Daemon {
            child,
            socket: socket.to_path_buf(),
            log: log.to_path_buf(),
        };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = d.child.try_wait() {
                bail!(
                    "the daemon exited with {st} at start: {}",
                    last_line(&d.log)
                );
            }
            if d.request(r#"{"cmd":"status"}"#).is_ok() {
                return Ok(d);
            }
            if t0.elapsed() > Duration::from_secs(15) {
                d.stop();
                bail!(
                    "the daemon's socket did not answer within 15 s: {}",
                    last_line(log)
                );
            }
            crate::live::sleep_checked(Duration::from_millis(20))?;
        }
    }

    /// The daemon's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one request line, returns the reply object (Err when `ok` is false).
    pub fn request(&self, line: &str) -> Result<serde_json::Value> {
        let mut s = UnixStream::connect(&self.socket)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(line.as_bytes())?;
        s.write_all(b"\n")?;
        let mut reply = String::new();
        BufReader::new(&s).read_line(&mut reply)?;
        let v: serde_json::Value =
            serde_json::from_str(reply.trim()).context("daemon reply is not JSON")?;
        if v.get("ok").and_then(|x| x.as_bool()) != Some(true) {
            bail!("daemon refused {line}: {reply}");
        }
        Ok(v)
    }

    /// `notify` (the control socket). Failures are logged, not fatal.
    pub fn notify(&self, event: &str, app: &str, pid: Option<u32>) {
        let mut v = serde_json::json!({"cmd": "notify", "event": event, "app": app});
        if let Some(p) = pid {
            v["pid"] = p.into();
        }
        if let Err(e) = self.request(&v.to_string()) {
            tracing::warn!("notify {event} {app}: {e:#}");
        }
    }

    /// True while it runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM (the daemon restores what it changed), then wait; SIGKILL after 10 s.
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let t0 = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) {
                if t0.elapsed() > Duration::from_secs(10) {
                    tracing::warn!("daemon ignored SIGTERM for 10 s; killing it");
                    let _ = self.child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last non-empty line of a log file.
pub fn last_line(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(empty log)")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in all() {
            assert_eq!(Policy::parse(p.name()), Ok(p));
        }
        assert_eq!(Policy::parse("android"), Ok(Policy::named("stock")));
        assert!(Policy::parse("acclaim")
            .unwrap_err()
            .contains("stock kernel"));
        assert!(Policy::parse("nope").unwrap_err().contains("oracle"));
        assert!(!Policy::named("stock").needs_daemon() && !Policy::Oracle.needs_daemon());
        assert!(Policy::named("lru-killer").needs_daemon());
    }

    #[test]
    fn config_names_the_policy() {
        let s = DaemonSetup {
            binary: "/x/appflow".into(),
            dir: "/run/appflow-bench".into(),
            memory_cgroup: "/sys/fs/cgroup/memory/appflow-bench".into(),
            blkio_cgroup: "/sys/fs/cgroup/blkio/appflow-bench/worker".into(),
            cpu_cgroup: "/sys/fs/cgroup/cpu/appflow-bench/worker".into(),
            budget_bytes: 1000,
            alloc_threshold_pages: Some(2000),
            apps: vec![(
                "llm".into(),
                "/sys/fs/cgroup/memory/appflow-bench/app-llm".into(),
            )],
        };
        let t: toml::Table = s
            .config(Policy::named("appflow-amr"), Path::new("/t.json"))
            .parse()
            .unwrap();
        assert_eq!(t["daemon"]["policy"].as_str(), Some("appflow-amr"));
        assert_eq!(t["domain"]["kind"].as_str(), Some("cgroup"));
        assert_eq!(t["preload"]["budget_bytes"].as_integer(), Some(1000));
        assert_eq!(
            t["reclaim"]["alloc_threshold_pages"].as_integer(),
            Some(2000)
        );
        assert_eq!(t["app"][0]["name"].as_str(), Some("llm"));
    }
}
