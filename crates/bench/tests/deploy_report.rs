//! The deployment harness's report (`scripts/deploy/harness report`,
//! docs/deploy.md) on a fixture run: three interleaved repetitions of every
//! arm with known times. No root needed; skips without python3.

use std::path::PathBuf;
use std::process::Command;

fn harness() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/deploy/harness")
}

fn python() -> bool {
    Command::new("python3").arg("--version").output().is_ok()
}

#[test]
fn report_gives_medians_ratios_gap_and_readiness_errors() {
    if !python() {
        eprintln!("SKIP deploy_report: no python3");
        return;
    }
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deploy");
    let out = Command::new(harness())
        .arg("report")
        .arg(&fixture)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arms = &v["units"][0]["arms"];
    // Stock 10/12/11 s, notified 9/9/10 s, cold alone 6/7/6.5 s; the
    // warm-up and the rep-0 cold launch are not counted.
    assert_eq!(arms["stock"]["median_ms"], 11000.0);
    assert_eq!(arms["stock"]["n"], 3);
    assert_eq!(arms["cold"]["n"], 3);
    assert_eq!(arms["notified"]["ratio_to_stock"], 0.818);
    assert_eq!(
        arms["notified"]["paired_ratios"],
        serde_json::json!([0.9, 0.75, 0.909])
    );
    // (11000 - 9000) / (11000 - 6500) of the gap to the cold launch alone.
    assert_eq!(arms["detect"]["gap_closed"], 0.444);
    assert_eq!(arms["stock"]["bg_killed"], 3);
    // The detect arm's rep 2 had no inferred readiness: 2 of 3, each 250 ms early.
    assert_eq!(arms["detect"]["readiness_inferred"], 2);
    assert_eq!(arms["detect"]["readiness_error_ms"]["median"], -250.0);
    assert_eq!(arms["notified"]["readiness_error_ms"]["median_abs"], 500.0);
}

#[test]
fn report_of_a_folder_without_a_run_exits_2() {
    if !python() {
        eprintln!("SKIP deploy_report: no python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(harness())
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no launches.jsonl"), "{err}");
    let bad = Command::new(harness())
        .args(["run", "--apps", "nosuchapp"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown app"));
}
