//! Bad input ends the `appflow` binary quickly with exit 2 and one message
//! (issue 30's probe): absurd time spans in a trace or a device file, and
//! profile files that are not profiles. Each run has a wall-clock bound, so
//! a hang fails the test instead of stalling it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `appflow ARGS`; kills it after `limit`. Returns the exit code
/// (None when killed), the wall time and stderr.
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, Duration, String) {
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_appflow"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        e.read_to_string(&mut err).unwrap();
    }
    (status.and_then(|s| s.code()), t0.elapsed(), err)
}

/// Asserts exit 2 with one message line containing `needle`, within `limit`.
fn assert_refused(args: &[&str], limit: Duration, needle: &str) {
    let (code, took, err) = run_bounded(args, limit);
    assert!(
        code.is_some(),
        "appflow {args:?} still running after {took:?} (killed): {err}"
    );
    assert_eq!(code, Some(2), "appflow {args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "appflow {args:?}: {err}");
    assert!(err.contains(needle), "appflow {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `appflow sim` replaying the trace `p` under `policies`.
fn sim_trace<'a>(p: &'a Path, policies: &'a str) -> [&'a str; 7] {
    [
        "sim",
        "--workload",
        "trace",
        "--trace",
        path_str(p),
        "--policy",
        policies,
    ]
}

/// Defect 1: a trace whose last timestamp is u64::MAX ran until killed
/// (the replay's µs clock overflowed); one ending at 2^62 ms "finished"
/// on a wrapped clock. Both are refused now, in constant time.
#[test]
fn trace_spans_beyond_the_clock_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (name, last) in [
        ("max.csv", u64::MAX),
        ("p62.csv", 1u64 << 62),
        ("half.csv", u64::MAX / 2000 + 1),
    ] {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!("user,timestamp,app,event\nu1,0,TikTok,open\nu1,{last},TikTok,close\n"),
        )
        .unwrap();
        assert_refused(
            &sim_trace(&p, "android"),
            Duration::from_secs(20),
            "simulator's clock",
        );
    }
    // Several users whose spans fit one by one but not together.
    let p = dir.path().join("sum.csv");
    let big = u64::MAX / 2000 / 2 + 1;
    std::fs::write(
        &p,
        format!(
            "u1,0,TikTok,open\nu1,{big},TikTok,close\nu2,0,TikTok,open\nu2,{big},TikTok,close\n"
        ),
    )
    .unwrap();
    assert_refused(
        &["sim", "--workload", "trace", "--trace", path_str(&p)],
        Duration::from_secs(20),
        "u2",
    );
}

/// The bound is not a refusal of long traces: a gap of 10,000 years
/// between two events (within the clock) replays in constant time.
#[test]
fn a_long_idle_gap_replays_in_constant_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("gap.csv");
    let gap_ms = 10_000u64 * 365 * 86_400_000;
    std::fs::write(
        &p,
        format!("u1,0,TikTok,open\nu1,60000,TikTok,close\nu1,{gap_ms},YouTube,open\n"),
    )
    .unwrap();
    let (code, took, err) = run_bounded(&sim_trace(&p, "android,appflow"), Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

/// The same class in the device file: a storage rate so low that a lone
/// launch outlasts the simulator's 600 s launch limit made every launch of
/// a trace run 120,000 steps to be cut off (a 5-day trace: minutes). Such
/// a device is refused before the run, naming the app and the rate.
#[test]
fn a_device_too_slow_to_launch_any_app_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let mut t = String::from("user,timestamp,app,event\n");
    for i in 0..200u64 {
        let app = if i % 2 == 0 { "TikTok" } else { "YouTube" };
        t.push_str(&format!("u1,{},{app},open\n", i * 60_000));
    }
    std::fs::write(&trace, t).unwrap();
    let cases = [
        (
            "storage.toml",
            "[device.storage]\nread_mib_per_sec = 1e-9\nread_iops = 1e-9\n",
            "MiB/s",
        ),
        ("cpu.toml", "cpu_scale = 100\n", "cpu_scale"),
    ];
    for (name, extra, needle) in cases {
        let dev = dir.path().join(name);
        std::fs::write(
            &dev,
            format!("[device]\nname = \"slow\"\ndram_mib = 6144\n{extra}"),
        )
        .unwrap();
        let apps = dir.path().join(format!("apps-{name}"));
        // cpu_scale 100 needs an app whose CPU time is long enough.
        std::fs::write(
            &apps,
            "[[app]]\nname = \"TikTok\"\nclass = \"gb\"\nanon_mib = 100\nfile_mib = 200\ncpu_init_ms = 9000\n\
             [[app]]\nname = \"YouTube\"\nclass = \"low\"\nanon_mib = 50\nfile_mib = 50\ncpu_init_ms = 300\n",
        )
        .unwrap();
        for workload in ["trace", "high", "multitask"] {
            let mut args = vec![
                "sim",
                "--device-file",
                path_str(&dev),
                "--apps-file",
                path_str(&apps),
                "--workload",
                workload,
                "--policy",
                "android,appflow",
            ];
            if workload == "trace" {
                args.extend(["--trace", path_str(&trace)]);
            }
            assert_refused(&args, Duration::from_secs(20), needle);
        }
    }
}

/// Defect 2: `appflow apps` exited 1 on a profile that is not UTF-8 or is a
/// directory; a FIFO named like a profile blocked it for ever. All are bad
/// input: exit 2, one message naming the file.
#[test]
fn apps_exits_2_on_every_unreadable_profile() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let profiles = state.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(profiles.join("bytes.json"), b"{\"app\": \"bytes\xff\xfe\"}").unwrap();
    std::fs::create_dir(profiles.join("dir.json")).unwrap();
    let fifo = profiles.join("fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let have_fifo = made.is_ok_and(|s| s.success());
    if !have_fifo {
        eprintln!("skipping the FIFO case: mkfifo unavailable");
    }
    let limit = Duration::from_secs(20);
    let st = path_str(state);
    assert_refused(
        &["apps", "--state-dir", st, "show", "bytes"],
        limit,
        "UTF-8",
    );
    assert_refused(
        &["apps", "--state-dir", st, "show", "dir"],
        limit,
        "a directory",
    );
    if have_fifo {
        assert_refused(
            &["apps", "--state-dir", st, "show", "fifo"],
            limit,
            "not a regular file",
        );
    }
    // Listing skips them with a warning and exits 0, as for corrupt files.
    let (code, _, err) = run_bounded(&["apps", "--state-dir", st], limit);
    assert_eq!(code, Some(0), "{err}");
    // A state directory whose profiles/ is not a directory: bad input.
    let file_state = state.join("not-a-dir");
    std::fs::create_dir(&file_state).unwrap();
    std::fs::write(file_state.join("profiles"), "x").unwrap();
    assert_refused(
        &["apps", "--state-dir", path_str(&file_state)],
        limit,
        "cannot read",
    );
    assert_refused(
        &["apps", "--state-dir", path_str(&file_state), "show", "x"],
        limit,
        "cannot read",
    );
}
