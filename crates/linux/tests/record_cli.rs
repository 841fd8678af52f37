//! `record`, `apps` and `calibrate` entry points: bad input is an `InputError`
//! (the binary exits 2), listing survives corrupt files.

use appflow_core::profile::{ByteRange, LaunchObservation, ObservedFile};
use appflow_core::InputError;
use appflow_linux::cli::{
    run_apps, run_calibrate, run_record, AppsArgs, CalibrateArgs, RecordArgs,
};
use appflow_linux::store::ProfileStore;
use clap::Parser;

/// A stand-in for the binary's parser, so arguments go through clap as users type them.
#[derive(Parser)]
enum Cli {
    Record(RecordArgs),
    Apps(AppsArgs),
    Calibrate(CalibrateArgs),
}

fn run(args: &[&str]) -> anyhow::Result<()> {
    match Cli::try_parse_from(std::iter::once("appflow").chain(args.iter().copied()))? {
        Cli::Record(a) => run_record(a),
        Cli::Apps(a) => run_apps(a),
        Cli::Calibrate(a) => run_calibrate(a),
    }
}

fn is_input(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<InputError>().is_some())
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().to_str().unwrap();
    let e = run(&["record", "--app", "../x", "--state-dir", sd, "--", "true"]).unwrap_err();
    assert!(is_input(&e), "{e:#}");
    let e = run(&[
        "record",
        "--app",
        "a",
        "--state-dir",
        sd,
        "--ready-line",
        "(",
        "--",
        "true",
    ])
    .unwrap_err();
    assert!(
        is_input(&e) && e.to_string().contains("--ready-line"),
        "{e:#}"
    );
    let e = run(&["apps", "--state-dir", sd, "show", "nope"]).unwrap_err();
    assert!(
        is_input(&e) && e.to_string().contains("no profile"),
        "{e:#}"
    );
    let e = run(&["calibrate", "--dir", "/nonexistent/dir", "--state-dir", sd]).unwrap_err();
    assert!(is_input(&e), "{e:#}");
    let e = run(&[
        "calibrate",
        "--dir",
        sd,
        "--state-dir",
        sd,
        "--size-mib",
        "0",
    ])
    .unwrap_err();
    assert!(is_input(&e), "{e:#}");
    // Clap refuses both readiness options together.
    assert!(Cli::try_parse_from([
        "appflow",
        "record",
        "--app",
        "a",
        "--ready-file",
        "f",
        "--ready-line",
        "x",
        "--",
        "true"
    ])
    .is_err());
}

#[test]
fn apps_lists_and_shows_despite_corrupt_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(dir.path());
    let obs = LaunchObservation {
        files: vec![ObservedFile {
            path: "/usr/bin/true".into(),
            size_bytes: 10_000,
            first_access_us: 1,
            ranges: vec![ByteRange {
                start: 0,
                end: 8192,
            }],
        }],
        anon_launch_bytes: 1 << 20,
        footprint_after_launch_bytes: 2 << 20,
        launch_ms: 12,
        at_unix_ms: 1_700_000_000_000,
    };
    store.record("ok", &obs).unwrap();
    std::fs::write(store.dir().join("bad.json"), "not json").unwrap();
    let sd = dir.path().to_str().unwrap();
    run(&["apps", "--state-dir", sd]).unwrap();
    run(&["apps", "--state-dir", sd, "--format", "json"]).unwrap();
    run(&["apps", "--state-dir", sd, "show", "ok"]).unwrap();
    run(&["apps", "show", "ok", "--state-dir", sd, "--format", "json"]).unwrap();
    // A corrupt profile of the requested app is an error naming the file.
    let e = run(&["apps", "--state-dir", sd, "show", "bad"]).unwrap_err();
    assert!(e.to_string().contains("bad.json"), "{e:#}");
}
