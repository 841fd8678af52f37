//! Launch detection on the testbed's device: a declared app whose files sit
//! on the testbed's flash device (the FUSE file system with the phone's
//! service-time model, docs/bench-design.md "Storage") is launched cold twice by a
//! daemon that is never notified: launch 1 has no profile (the daemon
//! detects and records it), launch 2 is preloaded from what it learned.
//! Both launches are cold (every file of the app dropped from the page
//! cache before each), so launch 2 can be faster only because the daemon
//! streamed the app's files ahead of it, through the same device. Both
//! times are reported with the warm floor (the app with every file cached).
//!
//! The app is the testbed's synthetic `llm` (`crates/bench/apps/llm.toml`,
//! `appflow bench-app`) at scale [`SCALE`]; the device is the `phone-6gb`
//! preset (UFS 3.1 model, 128 KiB readahead), its memory limit and preload
//! budget M_p scaled like `appflow bench --scale`. The daemon's storage
//! curve is the device model's own (`calibration.json`, as `appflow bench`
//! writes after measuring it). Unlike `appflow bench`, the domain has no
//! zram and no CPU budget: nothing else runs in it, so neither matters.
//!
//! `APPFLOW_DEVICE_PAIRS` sets the number of pairs (default 5): each pair
//! starts a daemon with no profile. `APPFLOW_DEVICE_PRELOAD=off` is the
//! control: the same pairs with the daemon's preloader off. Needs root, v1 memory cgroups, FUSE,
//! the process connector, fanotify and the `appflow` binary in
//! `target/{debug,release}`; skips with the reason otherwise.

use appflow_bench::device::{preset, Device};
use appflow_bench::launch::{self, Outcome, Readiness};
use appflow_bench::live::{is_root, Leaf};
use appflow_bench::spec::AppSpec;
use appflow_bench::synth::{drop_file_cache, resident_bytes, Layout};
use appflow_core::storage::{CurvePoint, ThroughputCurve};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
mod common;
use common::appflow_binary;

/// The `llm` app at this scale: 60 small files, 200 MiB of weights of which
/// 164 MiB are read at launch, 31 MiB anonymous; a 410 MiB domain.
const SCALE: f64 = 0.1;
const MEM_V1: &str = "/sys/fs/cgroup/memory";

fn skip() -> Option<String> {
    if !is_root() {
        return Some("needs root (cgroups, FUSE mount)".into());
    }
    if !Path::new(MEM_V1).join("memory.limit_in_bytes").exists() {
        return Some("needs the v1 memory controller at /sys/fs/cgroup/memory".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("needs FUSE (/dev/fuse)".into());
    }
    if let Err(e) = appflow_linux::procevents::ProcEvents::open() {
        return Some(format!("process connector unavailable: {e}"));
    }
    if let Err(errno) = appflow_linux::actuators::Features::probe(Path::new("/proc")).fanotify {
        return Some(format!(
            "fanotify permission events unavailable (errno {errno})"
        ));
    }
    if appflow_binary().is_none() {
        return Some(
            "no appflow binary in target/debug or target/release (run `cargo build -p appflow` first)"
                .into(),
        );
    }
    None
}

/// Everything the test made; removed on drop (also on a failed assertion).
struct Bed {
    dir: PathBuf,
    cgroup: PathBuf,
    mount: Option<appflow_bench::fusefs::FlashMount>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        appflow_bench::domain::kill_cgroup_procs(&self.cgroup, Duration::from_secs(5));
        for _ in 0..50 {
            if std::fs::remove_dir(&self.cgroup).is_ok() || !self.cgroup.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.mount = None; // unmounts
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The daemon (`appflow daemon`), stopped with SIGTERM on drop.
struct Daemon {
    bin: PathBuf,
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(bin: &Path, config: &Path, socket: &Path, log: &Path) -> Self {
        let _ = std::fs::remove_file(socket);
        let child = Command::new(bin)
            .args(["--log", "info", "daemon", "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let d = Self {
            bin: bin.to_path_buf(),
            child,
            socket: socket.to_path_buf(),
        };
        wait_for("the daemon's socket", 20, || d.socket.exists());
        d
    }

    /// `status --format json`, the app's entry.
    fn app(&self) -> serde_json::Value {
        let out = Command::new(&self.bin)
            .args(["status", "--format", "json", "--socket"])
            .arg(&self.socket)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("status: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        v["apps"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == "llm").cloned())
            .unwrap_or_else(|| panic!("no app llm in {v}"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t0 = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[test]
fn detected_launches_on_the_device_are_learned_and_streamed() {
    if let Some(r) = skip() {
        eprintln!("SKIPPED detect_device: {r}");
        return;
    }
    let bin = appflow_binary().expect("checked");
    let pairs: usize = std::env::var("APPFLOW_DEVICE_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    // The control: `APPFLOW_DEVICE_PRELOAD=off` runs the same pairs with the
    // daemon's preloader switched off (detection and recording stay on).
    let preload = std::env::var("APPFLOW_DEVICE_PRELOAD").as_deref() != Ok("off");
    let tag = format!("detdev-{}", std::process::id());
    let dir = PathBuf::from(format!("/var/tmp/appflow-{tag}"));
    let device = Device::new(preset("phone-6gb").expect("preset"), SCALE).unwrap();
    let cgroup = Path::new(MEM_V1).join(format!("appflow-{tag}"));
    std::fs::create_dir_all(dir.join("backing")).unwrap();
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::create_dir(&cgroup).unwrap();
    let mut bed = Bed {
        dir: dir.clone(),
        cgroup: cgroup.clone(),
        mount: None,
    };
    std::fs::write(
        cgroup.join("memory.limit_in_bytes"),
        device.app_memory_bytes.to_string(),
    )
    .unwrap();

    // The app's files on the backing store, read only through the device.
    let spec_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/llm.toml");
    let spec = AppSpec::load(&spec_file).unwrap();
    let syn = spec.synthetic().expect("llm is synthetic");
    Layout::new("llm", syn, SCALE, &dir.join("backing/apps/llm"))
        .generate(&dir.join("backing/apps/llm"))
        .unwrap();
    bed.mount = Some(
        appflow_bench::fusefs::mount(
            &dir.join("backing"),
            &dir.join("root"),
            device.preset.flash,
            (device.preset.read_ahead_kib * 1024) as u32,
        )
        .unwrap(),
    );
    let layout = Layout::new("llm", syn, SCALE, &dir.join("root/apps/llm"));
    wait_for("the device mounted", 10, || {
        layout.paths().iter().all(|p| p.exists())
    });

    // The daemon's storage curve: the device model's, at the testbed's blocks.
    let curve = ThroughputCurve::new(
        [4u64 << 10, 128 << 10, 512 << 10, 1 << 20, 2 << 20]
            .iter()
            .map(|&b| CurvePoint {
                block_bytes: b,
                bytes_per_sec: device.preset.flash.single_reader_bytes_per_sec(b),
            })
            .collect(),
    )
    .unwrap();
    let state = dir.join("state");
    appflow_linux::calibrate::save_curve(&state, &curve).unwrap();
    let root_arg = dir.join("root");
    let config = dir.join("appflow.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nsocket = \"{d}/appflow.sock\"\nstate_dir = \"{d}/state\"\n\
             [domain]\nkind = \"cgroup\"\nmemory_cgroup = \"{cg}\"\n\
             [preload]\nenabled = {pre}\nbudget_bytes = {budget}\n\
             [[app]]\nname = \"llm\"\ncmdline = '{re}'\n",
            d = dir.display(),
            cg = cgroup.display(),
            budget = device.preload_budget_bytes,
            pre = preload,
            re = regex::escape(&format!("--root {}", root_arg.display())),
        ),
    )
    .unwrap();
    let leaf = Leaf {
        name: "llm".into(),
        mem: cgroup.clone(),
        blkio: "/sys/fs/cgroup/blkio".into(),
        cpu: "/sys/fs/cgroup/cpu".into(),
    };
    let argv: Vec<String> = [
        bin.to_string_lossy().as_ref(),
        "bench-app",
        "--spec",
        spec_file.to_string_lossy().as_ref(),
        "--scale",
        &SCALE.to_string(),
        "--root",
        root_arg.to_string_lossy().as_ref(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ready = Readiness::Line(regex::Regex::new("^appflow-ready$").unwrap());
    let stats = std::sync::Arc::clone(&bed.mount.as_ref().expect("mounted").stats);
    // What the device served from exec to readiness: the app's (normal-class)
    // bytes and the stream's (idle-class) bytes, MB.
    let served = move || {
        use std::sync::atomic::Ordering::Relaxed;
        (
            stats.normal_bytes.load(Relaxed),
            stats.idle_bytes.load(Relaxed),
        )
    };
    // One launch, exec to readiness line; cold: every file dropped first.
    let launch_as = |n: &str, cold: bool| -> (f64, launch::Proc) {
        if cold {
            for p in layout.paths() {
                drop_file_cache(&p).unwrap();
            }
            let left: u64 = layout.paths().iter().map(|p| resident_bytes(p)).sum();
            assert!(left < 1 << 20, "{left} bytes still cached before {n}");
        }
        let before = served();
        let (mut p, t0) =
            launch::spawn("llm", &argv, &leaf, 0, &dir.join(format!("{n}.log"))).unwrap();
        let (out, ms) = p.wait_ready(&ready, t0, Duration::from_secs(120));
        assert_eq!(out, Outcome::Ready, "{n}");
        let after = served();
        eprintln!(
            "  {n}: {ms:.0} ms; the device served the app {:.1} MB and the stream {:.1} MB until ready",
            (after.0 - before.0) as f64 / 1e6,
            (after.1 - before.1) as f64 / 1e6
        );
        (ms, p)
    };
    let launch = |n: &str| launch_as(n, true);
    // The floor: the same launch with every file already cached, no daemon.
    let (_, mut p) = launch("fill");
    p.stop();
    let (warm, mut p) = launch_as("warm", false);
    p.stop();

    let (mut first, mut second) = (Vec::new(), Vec::new());
    let mut streamed = Vec::new();
    for i in 0..pairs {
        let _ = std::fs::remove_dir_all(state.join("profiles"));
        let d = Daemon::start(
            &bin,
            &config,
            &dir.join("appflow.sock"),
            &dir.join(format!("daemon-{i}.log")),
        );
        let (ms1, mut p1) = launch(&format!("pair{i}-launch1"));
        wait_for("launch 1 recorded into the profile", 60, || {
            d.app()["profile_launches"].as_u64() >= Some(1)
        });
        let a1 = d.app();
        assert_eq!(a1["last_launch_stream_bytes"], 0, "{a1}");
        p1.stop();
        wait_for("the app's exit", 20, || {
            let a = d.app();
            a["pids"].as_array().is_some_and(Vec::is_empty) && a["launching"] == false
        });
        let (ms2, mut p2) = launch(&format!("pair{i}-launch2"));
        wait_for("launch 2 detected, recorded and streamed", 60, || {
            let a = d.app();
            a["launches_detected"].as_u64() >= Some(2)
                && a["profile_launches"].as_u64() >= Some(2)
                && (!preload || a["last_launch_stream_bytes"].as_u64() > Some(0))
        });
        let a2 = d.app();
        p2.stop();
        drop(d);
        let log = std::fs::read_to_string(dir.join(format!("daemon-{i}.log"))).unwrap_or_default();
        assert!(
            !log.contains("notify"),
            "a notification reached the daemon: {log}"
        );
        eprintln!(
            "pair {i}: launch 1 (cold, unprofiled) {ms1:.0} ms, launch 2 (cold, preloaded) {ms2:.0} ms \
             ({:.2}x); streamed {} bytes",
            ms2 / ms1,
            a2["last_launch_stream_bytes"]
        );
        first.push(ms1);
        second.push(ms2);
        streamed.push(a2["last_launch_stream_bytes"].as_u64().unwrap_or(0));
    }
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{lo:.0}-{hi:.0}")
    };
    let ratios: Vec<f64> = first.iter().zip(&second).map(|(a, b)| b / a).collect();
    let dev = device.preset.flash;
    eprintln!(
        "device phone-6gb (UFS 3.1 model: {:.0} MB/s, {:.0} µs per request; 4 KiB {:.1} MB/s, 1 MiB {:.0} MB/s), \
         llm at scale {SCALE}, {pairs} pairs",
        dev.bytes_per_sec / 1e6,
        dev.latency_us,
        dev.single_reader_bytes_per_sec(4096) / 1e6,
        dev.single_reader_bytes_per_sec(1 << 20) / 1e6,
    );
    eprintln!(
        "launch 1 median {:.0} ms (range {}), launch 2 median {:.0} ms (range {}); \
         median of paired ratios {:.2}; streamed {:?} bytes; warm floor (all cached, no daemon) {warm:.0} ms",
        median(&first),
        spread(&first),
        median(&second),
        spread(&second),
        median(&ratios),
        streamed
    );
    // Launch 2 faster than launch 1 is what the stream is for; it is a
    // timing, so it is reported above (docs/daemon.md "On the testbed's
    // device"), not asserted. What must hold is asserted above.
    drop(bed);
}
