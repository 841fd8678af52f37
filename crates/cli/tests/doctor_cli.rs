//! `appflow doctor` as a user runs it: exit 0 whatever is missing, 2 on bad
//! arguments, JSON that parses, every interface listed.

use std::process::Command;

fn appflow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_appflow"))
}

#[test]
fn doctor_reports_and_exits_zero() {
    let out = appflow()
        .args(["doctor", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["feature"].as_str().unwrap())
        .collect();
    for f in [
        "cgroup v1 memory",
        "cgroup v2 memory",
        "per-cgroup swappiness",
        "PSI",
        "pidfd",
        "process_madvise",
        "process_mrelease",
        "fanotify",
        "cn_proc",
        "mlock",
        "zram",
        "DAMON",
        "cachestat",
    ] {
        assert!(names.contains(&f), "{f} missing from {names:?}");
    }
    // An empty tree: everything file-based is missing, and it still exits 0.
    let t = tempfile::tempdir().unwrap();
    let out = appflow()
        .args(["doctor", "--proc-root"])
        .arg(t.path())
        .arg("--sys-root")
        .arg(t.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("MISSING"), "{text}");
    assert!(text.contains("without it:"), "{text}");
}

#[test]
fn doctor_bad_arguments_exit_two() {
    let out = appflow()
        .args(["doctor", "--format", "xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format"));
    let out = appflow().args(["doctor", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
