//! Real-kernel, black-box test of launch detection and on-the-fly profiles:
//! the daemon (`appflowd`) schedules a throwaway memory cgroup where a
//! declared app is launched twice, and nothing ever calls `notify`.
//!
//! The app is this test binary in a helper mode (`reader_app`): it reads
//! 120 small files, then a 48 MiB asset in 4 KiB reads in a scattered order
//! (as a model loader or a database does; the kernel's readahead does not
//! help it), reports how long that took, and idles. Before each launch every
//! file of the app is dropped from the page cache (POSIX_FADV_DONTNEED), so
//! both launches are cold: the second one is faster only if the daemon
//! learned the first one and streams the files ahead of the app.
//!
//! Skipped, with the reason printed, without root, cgroup v1 memory, the
//! process connector or fanotify.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

const MIB: u64 = 1 << 20;
const SMALL_FILES: usize = 120;
const SMALL_BYTES: usize = 16 << 10;
const ASSET_BYTES: u64 = 48 * MIB;

fn skip() -> Option<String> {
    if let Some(r) = skip_reason() {
        return Some(r);
    }
    if let Err(e) = appflow_linux::procevents::ProcEvents::open() {
        return Some(format!("process connector unavailable: {e}"));
    }
    let f = appflow_linux::actuators::Features::probe(Path::new("/proc"));
    if let Err(errno) = f.fanotify {
        return Some(format!(
            "fanotify permission events unavailable (errno {errno})"
        ));
    }
    None
}

/// The app's files: `small/f000…`, then `asset.bin`.
fn app_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = (0..SMALL_FILES)
        .map(|i| dir.join("small").join(format!("f{i:03}")))
        .collect();
    v.push(dir.join("asset.bin"));
    v
}

fn make_app(dir: &Path) {
    std::fs::create_dir_all(dir.join("small")).unwrap();
    // Incompressible, distinct content (a SplitMix64 stream).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut fill = |buf: &mut [u8]| {
        for c in buf.chunks_mut(8) {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            c.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes()[..c.len()]);
        }
    };
    let files = app_files(dir);
    let mut buf = vec![0u8; SMALL_BYTES];
    for f in &files[..SMALL_FILES] {
        fill(&mut buf);
        std::fs::write(f, &buf).unwrap();
    }
    let mut out = std::fs::File::create(&files[SMALL_FILES]).unwrap();
    let mut chunk = vec![0u8; MIB as usize];
    for _ in 0..ASSET_BYTES / MIB {
        fill(&mut chunk);
        out.write_all(&chunk).unwrap();
    }
    out.sync_all().unwrap();
}

/// Not a test of its own: the app (does nothing unless
/// `APPFLOW_DETECT_APP=DIR:OUT` is set). Reads the small files whole, then
/// the asset in 4 KiB reads in a scattered order (page i·7919 mod n, a
/// permutation since 7919 is a prime not dividing n), writes the time that
/// took (ms) to OUT, and idles.
#[test]
fn reader_app() {
    let Ok(spec) = std::env::var("APPFLOW_DETECT_APP") else {
        return;
    };
    let (dir, out) = spec.split_once(':').unwrap();
    let t0 = Instant::now();
    let files = app_files(Path::new(dir));
    let mut sum = 0u64;
    for f in &files[..SMALL_FILES] {
        sum += std::fs::read(f)
            .unwrap()
            .iter()
            .map(|b| *b as u64)
            .sum::<u64>();
    }
    use std::os::unix::fs::FileExt;
    let asset = std::fs::File::open(&files[SMALL_FILES]).unwrap();
    let pages = ASSET_BYTES / 4096;
    let mut page = [0u8; 4096];
    for i in 0..pages {
        let p = (i * 7919) % pages;
        asset.read_exact_at(&mut page, p * 4096).unwrap();
        sum += page[0] as u64;
    }
    let ms = t0.elapsed().as_millis();
    std::hint::black_box(sum);
    let tmp = format!("{out}.tmp");
    std::fs::write(&tmp, ms.to_string()).unwrap();
    std::fs::rename(&tmp, out).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

struct Bed {
    scratch: Scratch,
    cg: TempCgroup,
    marker: String,
}

impl Bed {
    /// `daemon_extra`: more `[daemon]` keys; `extra_config`: more tables.
    fn new(daemon_extra: &str, extra_config: &str) -> (Self, Daemon) {
        let tag = format!("detect2-{}", random_tag());
        let scratch = Scratch::new(&tag);
        make_app(&scratch.0.join("app"));
        let cg = TempCgroup::new(&tag, Some(1 << 30));
        // Only the app's command line carries this (a libtest filter that
        // matches no test).
        let marker = format!("detect2app{}", tag.replace('-', ""));
        let s = &scratch.0;
        let config = format!(
            "[daemon]\nsocket = \"{s}/appflow.sock\"\nstate_dir = \"{s}/state\"\n{daemon_extra}\n\
             [domain]\nkind = \"cgroup\"\nmemory_cgroup = \"{cg}\"\n{extra_config}\n\
             [[app]]\nname = \"reader\"\ncmdline = '{marker}'\n",
            s = s.display(),
            cg = cg.path.display(),
        );
        std::fs::write(s.join("appflow.toml"), config).unwrap();
        let d = Daemon::start(
            &s.join("appflow.toml"),
            &s.join("appflow.sock"),
            &s.join("daemon.log"),
        );
        (
            Self {
                scratch,
                cg,
                marker,
            },
            d,
        )
    }

    /// A bed whose app's files are all cached, the preloader off and
    /// `relearn_every` as given (what the learning tests launch warm).
    fn warm(relearn_every: u32) -> (Self, Daemon) {
        let (bed, d) = Self::new(
            "",
            &format!("[preload]\nenabled = false\n[detect]\nrelearn_every = {relearn_every}\n"),
        );
        for f in app_files(&bed.scratch.0.join("app")) {
            std::fs::read(&f).unwrap();
        }
        (bed, d)
    }

    /// The app's stored profile.
    fn profile(&self) -> appflow_core::profile::LaunchProfile {
        let path = self.scratch.0.join("state/profiles/reader.json");
        appflow_core::profile::LaunchProfile::from_json(&std::fs::read_to_string(path).unwrap())
            .unwrap()
    }

    /// One cold launch of the app in the cgroup; returns the app's own
    /// reading time (ms) and the running app.
    fn launch(&self, n: usize) -> (u64, Proc) {
        let app = self.scratch.0.join("app");
        for f in app_files(&app) {
            evict(&f);
        }
        assert!(
            residency(&app.join("asset.bin")) < 0.01,
            "asset not evicted"
        );
        self.launch_as_is(n)
    }

    /// One launch with the page cache as it is (warm once a launch ran).
    fn launch_as_is(&self, n: usize) -> (u64, Proc) {
        let app = self.scratch.0.join("app");
        let out = self.scratch.0.join(format!("launch-{n}.ms"));
        let me = std::env::current_exe().unwrap();
        let child = spawn_in(
            &self.cg.path,
            &me,
            &[
                "--exact",
                "reader_app",
                &self.marker,
                "--nocapture",
                "--test-threads=1",
            ],
            &[(
                "APPFLOW_DETECT_APP",
                format!("{}:{}", app.display(), out.display()),
            )],
        );
        let p = Proc(child);
        wait_for("the app's launch", 120, || out.exists());
        let ms = std::fs::read_to_string(&out)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (ms, p)
    }

    /// Waits until the daemon has seen the app exit (no process, no launch on).
    fn wait_for_exit(d: &Daemon) {
        wait_for("the app's exit", 10, || {
            let a = Bed::app_status(d);
            a["pids"].as_array().is_some_and(Vec::is_empty) && a["launching"] == false
        });
    }

    fn app_status(d: &Daemon) -> serde_json::Value {
        let s = d.status();
        s["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "reader")
            .cloned()
            .unwrap_or_else(|| panic!("no app reader in {s}"))
    }

    fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.scratch.0.join("daemon.log")).unwrap_or_default()
    }
}

/// The socket filter of the daemon's listener drops thread events in the
/// kernel and lets process events through.
#[test]
fn connector_filter_keeps_process_events_only() {
    use appflow_linux::procevents::{ProcEvent, ProcEvents};
    let Ok(mut ev) = ProcEvents::open() else {
        eprintln!("SKIPPED: process connector unavailable");
        return;
    };
    ev.drop_thread_events().unwrap();
    let _ = ev.drain();
    // A thread of ours starts and ends; a process forks, execs, exits.
    std::thread::spawn(|| std::hint::black_box(1))
        .join()
        .unwrap();
    let child = std::process::Command::new("/bin/true").spawn().unwrap();
    let pid = child.id();
    let _ = child.wait_with_output();
    let (mut exec, mut exit) = (false, false);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut all = Vec::new();
    while !(exec && exit) && Instant::now() < deadline {
        for e in ev.drain() {
            exec |= matches!(e, ProcEvent::Exec { tgid, .. } if tgid == pid);
            exit |= matches!(e, ProcEvent::Exit { tgid, .. } if tgid == pid);
            all.push(e);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(exec && exit, "{all:?}");
    assert!(all.iter().all(ProcEvent::is_process), "{all:?}");
}

/// A declared app's exec is acted on when it arrives, not at the daemon's
/// next tick: with a tick of a minute, the launch is detected (and its
/// stream would start) while the app still runs its launch.
#[test]
fn an_apps_exec_is_acted_on_between_ticks() {
    if let Some(r) = skip() {
        eprintln!("SKIPPED: {r}");
        return;
    }
    let (bed, d) = Bed::new("tick_ms = 60000\nscan_interval_ms = 60000\n", "");
    let t0 = Instant::now();
    let (_, p) = bed.launch(1);
    wait_for("the launch detected before the next tick", 10, || {
        Bed::app_status(&d)["launches_detected"].as_u64() >= Some(1)
    });
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(50),
        "detected only after {took:?}: at a tick, not at the exec"
    );
    drop(p);
    drop(d);
    drop(bed);
}

#[test]
fn detected_launch_is_recorded_and_the_next_one_preloaded() {
    if let Some(r) = skip() {
        eprintln!("SKIPPED: {r}");
        return;
    }
    // M_p scaled to this 1 GiB domain as the AppFlow paper's 100 MB is to a phone's
    // 8-12 GB (about 1 %): most of the app streams at launch.
    let (bed, d) = Bed::new("", "[preload]\nbudget_bytes = 8388608\n");

    // Launch 1: no profile yet.
    let (ms1, p1) = bed.launch(1);
    wait_for("launch 1 recorded into the profile", 30, || {
        Bed::app_status(&d)["profile_launches"].as_u64() >= Some(1)
    });
    let a1 = Bed::app_status(&d);
    eprintln!("after launch 1: {a1}");
    assert_eq!(a1["launches_detected"], 1, "{a1}");
    assert_eq!(a1["last_launch_stream_bytes"], 0, "{a1}");
    let prof = bed.profile();
    let asset = bed.scratch.0.join("app/asset.bin");
    let asset_bytes: u64 = prof
        .active_files()
        .iter()
        .filter(|f| Path::new(f.path) == asset)
        .map(|f| f.touched_bytes())
        .sum();
    let small = prof
        .active_files()
        .iter()
        .filter(|f| f.path.contains("/app/small/"))
        .count();
    eprintln!(
        "profile after launch 1: {} files ({small} small), asset {asset_bytes} bytes",
        prof.files.len()
    );
    assert!(asset_bytes >= ASSET_BYTES * 9 / 10, "{asset_bytes}");
    assert!(small >= SMALL_FILES * 9 / 10, "{small}");

    // The app exits; the daemon sees it.
    drop(p1);
    Bed::wait_for_exit(&d);

    // Launch 2: cold again, preloaded from the learned profile.
    let (ms2, p2) = bed.launch(2);
    wait_for("launch 2 recorded", 30, || {
        let a = Bed::app_status(&d);
        a["profile_launches"].as_u64() >= Some(2) && a["launches_detected"].as_u64() >= Some(2)
    });
    wait_for("launch 2's stream", 10, || {
        Bed::app_status(&d)["last_launch_stream_bytes"].as_u64() > Some(0)
    });
    let a2 = Bed::app_status(&d);
    let status = d.status();
    eprintln!("after launch 2: {a2}");
    eprintln!("detect: {}", status["detect"]);
    eprintln!(
        "launch 1 (cold, unprofiled) {ms1} ms, launch 2 (cold, preloaded) {ms2} ms ({:.2}x)",
        ms1 as f64 / ms2.max(1) as f64
    );
    assert!(a2["launches_detected"].as_u64() >= Some(2), "{a2}");
    assert!(a2["profile_launches"].as_u64() >= Some(1), "{a2}");
    assert!(a2["last_launch_stream_bytes"].as_u64() > Some(0), "{a2}");
    assert!(a2["last_launch_ms"].as_u64().is_some(), "{a2}");
    // The times are printed, not compared: on this shared machine the
    // preloaded launch measured 1.04-1.84x faster over five runs (the same
    // on eb756eb), and once slower (541 against 514 ms). What preloading
    // gains is measured by the benchmarks (docs/daemon.md); here, that the
    // second launch was streamed from the learned profile.
    // Launch 2 kept the profile whole (the preloaded asset still counts).
    let prof = bed.profile();
    assert!(
        prof.file_bytes() >= ASSET_BYTES * 9 / 10,
        "{}",
        prof.file_bytes()
    );
    let log = bed.daemon_log();
    assert!(log.contains("launch detection on"), "{log}");
    assert!(
        !log.contains("notify"),
        "a notification reached the daemon: {log}"
    );
    drop(p2);
}

/// Launches whose files are all cached already (an earlier run left them,
/// or the daemon preloaded them) still teach the profile what the app
/// reads: a learned profile converges to the app's files instead of
/// shrinking. Before, a learned launch counted only what it brought into
/// the page cache, so warm launches recorded nearly nothing and the
/// majority rule then dropped the files (a deployed ML app's profile fell
/// from 4,282 files to 106 over 8 launches).
#[test]
fn warm_launches_teach_the_profile_what_the_app_reads() {
    if let Some(r) = skip() {
        eprintln!("SKIPPED: {r}");
        return;
    }
    // Every file cached before the first launch; every launch recorded
    // (`relearn_every` 1), settled or not.
    let (bed, d) = Bed::warm(1);
    for n in 1..=3u64 {
        let (_, p) = bed.launch_as_is(n as usize);
        wait_for("the launch recorded", 30, || {
            Bed::app_status(&d)["profile_launches"].as_u64() >= Some(n)
        });
        drop(p);
        Bed::wait_for_exit(&d);
    }
    let prof = bed.profile();
    let app = bed.scratch.0.join("app");
    let active = prof.active_files();
    let ours = active
        .iter()
        .filter(|f| Path::new(f.path).starts_with(&app))
        .count();
    let bytes: u64 = active
        .iter()
        .filter(|f| Path::new(f.path).starts_with(&app))
        .map(|f| f.touched_bytes())
        .sum();
    eprintln!("profile after 3 warm launches: {ours} of the app's files, {bytes} bytes");
    assert!(ours >= (SMALL_FILES + 1) * 9 / 10, "{ours} files");
    let want = ASSET_BYTES + (SMALL_FILES * SMALL_BYTES) as u64;
    assert!(bytes >= want * 9 / 10, "{bytes} of {want} bytes");
    assert!(prof.relaunch_footprint_bytes > 0, "baseline 0");
    drop(d);
    drop(bed);
}

/// Once a recorded launch reads what the profile holds, the profile is
/// settled and only one launch in `relearn_every` is recorded: the others
/// are counted (in `detect.stats.settled` and the profile) and pay no
/// fanotify watch.
#[test]
fn a_settled_profile_is_recorded_one_launch_in_relearn_every() {
    if let Some(r) = skip() {
        eprintln!("SKIPPED: {r}");
        return;
    }
    let (bed, d) = Bed::warm(2);
    // (profile launches, unrecorded launches) after each launch: 1 and 2
    // recorded (2 read what 1 did: settled), 3 skipped, 4 recorded.
    let want = [(1, 0), (2, 0), (2, 1), (3, 0)];
    for (n, &(launches, unrecorded)) in want.iter().enumerate() {
        let n = n + 1;
        let (_, p) = bed.launch_as_is(n);
        wait_for("the launch's end counted", 30, || {
            let a = Bed::app_status(&d);
            a["launches_detected"].as_u64() >= Some(n as u64) && a["launching"] == false && {
                let p = bed.profile();
                (p.launches, p.unrecorded_launches) == (launches, unrecorded)
            }
        });
        drop(p);
        Bed::wait_for_exit(&d);
        eprintln!("after launch {n}: {:?}", (launches, unrecorded));
    }
    let st = d.status();
    assert_eq!(st["detect"]["stats"]["settled"], 1, "{}", st["detect"]);
    assert!(bed.profile().settled);
}

/// Cost of detection and on-the-fly recording on a cold launch: the app's
/// cold launch time with no daemon against the same with a daemon that
/// detects and records every launch but preloads nothing (preloader,
/// reclaimer and killer off), interleaved. `APPFLOW_OVERHEAD_PAIRS` sets
/// the number of pairs (default 10). Run:
/// `cargo test --release -p appflow-linux --test detect_learn_kernel -- --ignored --nocapture`.
#[test]
#[ignore = "measurement (about a minute); run with --ignored"]
fn overhead_of_detection_and_recording_on_a_cold_launch() {
    if let Some(r) = skip() {
        eprintln!("SKIPPED: {r}");
        return;
    }
    let pairs: usize = std::env::var("APPFLOW_OVERHEAD_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (bed, mut d) = Bed::new(
        "",
        "[preload]\nenabled = false\n[reclaim]\nenabled = false\n[killer]\nenabled = false\n",
    );
    let config = bed.scratch.0.join("appflow.toml");
    let (mut plain, mut watched) = (Vec::new(), Vec::new());
    let mut ratios = Vec::new();
    d.stop();
    let mut n = 0;
    for i in 0..pairs {
        for with_daemon in [i % 2 == 0, i % 2 != 0] {
            n += 1;
            let daemon = with_daemon.then(|| {
                Daemon::start(
                    &config,
                    &bed.scratch.0.join("appflow.sock"),
                    &bed.scratch.0.join(format!("daemon-{n}.log")),
                )
            });
            let (ms, p) = bed.launch(n);
            if let Some(d) = &daemon {
                wait_for("the launch recorded", 30, || {
                    Bed::app_status(d)["profile_launches"].as_u64() >= Some(1)
                });
                watched.push(ms);
            } else {
                plain.push(ms);
            }
            drop(p);
            bed.cg.kill_all();
            drop(daemon);
            let _ = std::fs::remove_file(bed.scratch.0.join("state/profiles/reader.json"));
        }
        let (w, p) = (watched[i] as f64, plain[i] as f64);
        ratios.push(w / p);
    }
    eprintln!("plain   {plain:?}\nwatched {watched:?} (pair by pair)");
    ratios.sort_by(f64::total_cmp);
    let median_ratio = ratios[ratios.len() / 2];
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (mp, mw) = (median(&mut plain), median(&mut watched));
    eprintln!(
        "fastest: plain {} ms, detected + recorded {} ms",
        plain[0], watched[0]
    );
    eprintln!(
        "median cold launch: plain {mp} ms, detected + recorded {mw} ms ({:+.1} %); \
         median of the {pairs} paired ratios {:+.1} %",
        (mw as f64 / mp as f64 - 1.0) * 100.0,
        (median_ratio - 1.0) * 100.0
    );
}
