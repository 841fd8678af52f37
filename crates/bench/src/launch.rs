//! Starting app processes inside their leaf cgroups and timing them from
//! exec to readiness (like `am start -W`).
//!
//! The child joins its memory and blkio leaf cgroups and its own process
//! group *before* exec (so every page and every I/O of the launch lands in
//! the domain, and Ctrl-C reaches only the testbed, which tears down).
//! Readiness: a stdout line matching a regex, process exit (status 0), or a
//! file appearing; a launch that does not get there within its timeout is
//! reported as timed out and the run goes on.

use crate::live::{check_interrupted, Leaf};
use anyhow::{Context, Result};
use std::ffi::CString;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How a launch signals readiness.
#[derive(Debug, Clone)]
pub enum Readiness {
    /// A stdout line matches.
    Line(regex::Regex),
    /// The process exits with status 0.
    Exit,
    /// The file appears.
    File(PathBuf),
}

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ready after `ms`.
    Ready,
    /// Not ready within the timeout.
    TimedOut,
    /// The process died before readiness (with how).
    Died(String),
}

/// A running app process.
pub struct Proc {
    /// App name.
    pub app: String,
    /// Pid.
    pub pid: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<(Instant, String)>,
    /// Exit status once reaped.
    pub exit: Option<std::process::ExitStatus>,
    /// The testbed itself stopped it.
    pub stopped_by_us: bool,
}

fn cstr(p: &Path) -> Result<CString> {
    Ok(CString::new(p.as_os_str().as_encoded_bytes())?)
}

/// Spawns `argv` in `leaf` with `oom_score_adj`. Stdout is piped (lines are
/// timestamped by a reader thread), stdin piped, stderr appended to `log`.
/// Returns the process and the instant just before the spawn.
pub fn spawn(
    app: &str,
    argv: &[String],
    leaf: &Leaf,
    oom_score_adj: i32,
    log: &Path,
) -> Result<(Proc, Instant)> {
    let mem_procs = cstr(&leaf.mem.join("cgroup.procs"))?;
    let blk_procs = cstr(&leaf.blkio.join("cgroup.procs"))?;
    let cpu_procs = cstr(&leaf.cpu.join("cgroup.procs"))?;
    let oom = CString::new("/proc/self/oom_score_adj")?;
    let adj = CString::new(oom_score_adj.to_string())?;
    let errlog = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(errlog));
    // SAFETY: only async-signal-safe calls (open/write/close/setpgid) on
    // strings prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for (path, val) in [
                (&mem_procs, c"0"),
                (&blk_procs, c"0"),
                (&cpu_procs, c"0"),
                (&oom, adj.as_c_str()),
            ] {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, val.as_ptr().cast(), val.count_bytes());
                libc::close(fd);
                if n < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {} for app {app}", argv[0]))?;
    let pid = child.id();
    let stdout = child.stdout.take().context("child stdout")?;
    let stdin = child.stdin.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::io::BufReader::new(stdout);
        for line in r.lines() {
            let Ok(l) = line else { break };
            if tx.send((Instant::now(), l)).is_err() {
                break;
            }
        }
    });
    Ok((
        Proc {
            app: app.to_string(),
            pid,
            child,
            stdin,
            lines: rx,
            exit: None,
            stopped_by_us: false,
        },
        t0,
    ))
}

impl Proc {
    /// True while the process runs (reaps it when it has exited).
    pub fn alive(&mut self) -> bool {
        if self.exit.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(st)) => {
                self.exit = Some(st);
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// Died of SIGKILL without the testbed asking (a kill by the daemon or the OOM killer).
    pub fn killed_externally(&mut self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        !self.alive() && !self.stopped_by_us && self.exit.and_then(|e| e.signal()) == Some(9)
    }

    /// Waits for readiness; returns the outcome and ms since `t0`.
    pub fn wait_ready(&mut self, r: &Readiness, t0: Instant, timeout: Duration) -> (Outcome, f64) {
        let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1000.0;
        let deadline = t0 + timeout;
        loop {
            if check_interrupted().is_err() {
                return (Outcome::Died("interrupted".into()), ms(Instant::now()));
            }
            let now = Instant::now();
            if now >= deadline {
                return (Outcome::TimedOut, ms(now));
            }
            match r {
                Readiness::Line(re) => {
                    match self
                        .lines
                        .recv_timeout((deadline - now).min(Duration::from_millis(50)))
                    {
                        Ok((t, l)) if re.is_match(&l) => return (Outcome::Ready, ms(t)),
                        Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => {
                            std::thread::sleep(Duration::from_millis(5));
                            if !self.alive() {
                                return (self.died(), ms(Instant::now()));
                            }
                        }
                    }
                }
                Readiness::Exit => {
                    if !self.alive() {
                        let t = Instant::now();
                        return match self.exit {
                            Some(s) if s.success() => (Outcome::Ready, ms(t)),
                            _ => (self.died(), ms(t)),
                        };
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Readiness::File(f) => {
                    if f.exists() {
                        return (Outcome::Ready, ms(Instant::now()));
                    }
                    if !self.alive() {
                        return (self.died(), ms(Instant::now()));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    fn died(&self) -> Outcome {
        Outcome::Died(match self.exit {
            Some(s) => format!("{s}"),
            None => "stdout closed".into(),
        })
    }

    /// Asks a synthetic app to come to the foreground (re-touch its working
    /// set); waits for its readiness line. Returns outcome and ms.
    pub fn switch_to(&mut self, timeout: Duration) -> Result<(Outcome, f64)> {
        check_interrupted()?;
        while self.lines.try_recv().is_ok() {}
        let t0 = Instant::now();
        let stdin = self.stdin.as_mut().context("app stdin closed")?;
        writeln!(stdin, "switch")?;
        stdin.flush()?;
        let re = regex::Regex::new(&format!("^{}$", crate::synth::READY_LINE))?;
        Ok(self.wait_ready(&Readiness::Line(re), t0, timeout))
    }

    /// Sets the process's oom_score_adj (Android: 0 foreground, 900+ cached).
    pub fn set_oom_score_adj(&self, adj: i32) {
        let _ = std::fs::write(format!("/proc/{}/oom_score_adj", self.pid), adj.to_string());
    }

    /// Kills the process group (SIGKILL) and reaps it.
    pub fn stop(&mut self) {
        if self.alive() {
            self.stopped_by_us = true;
            let pg = nix::unistd::Pid::from_raw(-(self.pid as i32));
            let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.kill();
        }
        self.stdin = None;
        if self.exit.is_none() {
            self.exit = self.child.wait().ok();
        }
    }

    /// Resident + swapped bytes (VmRSS + VmSwap) of the process.
    pub fn footprint_bytes(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        s.lines()
            .filter(|l| l.starts_with("VmRSS:") || l.starts_with("VmSwap:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>()
            * 1024
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}
