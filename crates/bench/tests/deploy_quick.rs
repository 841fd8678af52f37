//! The deployment harness's quick mode (`scripts/deploy/harness run
//! --quick`, docs/deploy.md) on the real kernel: LibreOffice on this
//! machine's disk, one repetition of every arm, the daemon deployed as
//! docs/daemon.md says. It asserts what must hold whatever the noise: every
//! launch reaches its own ready marker, no daemon exits with an error or logs
//! one, the daemon causes no OOM kill and kills no more background processes
//! than stock, and the harness leaves no cgroup, swap, zram device, mount or
//! process behind.
//!
//! Skips with the reason when not root, when the office app is not installed
//! (`sudo scripts/deploy/install office`: Debian's LibreOffice, not part of
//! CI's install), or when no `appflow` binary is built.

use std::path::{Path, PathBuf};
use std::process::Command;
mod common;
use common::appflow_binary;

fn deploy_root() -> PathBuf {
    std::env::var_os("APPFLOW_DEPLOY_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/appflow-deploy"))
}

#[test]
fn quick_deployment_runs_every_arm_and_tears_down() {
    if !appflow_bench::live::is_root() {
        eprintln!("SKIP deploy_quick: needs root (memory cgroup, zram swap, the daemon)");
        return;
    }
    let office = deploy_root().join("apps/office/libreoffice/program/soffice");
    if !office.exists() {
        eprintln!(
            "SKIP deploy_quick: the office app is not installed at {} \
             (sudo scripts/deploy/install office)",
            office.display()
        );
        return;
    }
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
        || !Path::new("/sys/class/zram-control/hot_add").exists()
    {
        eprintln!("SKIP deploy_quick: needs cgroup v1 memory and the zram module");
        return;
    }
    let Some(bin) = appflow_binary() else {
        eprintln!("SKIP deploy_quick: no appflow binary in target/debug or target/release");
        return;
    };
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().unwrap();
    // The test command takes the machine's kernel lock for all its tests
    // (docs/tutorial.md): the harness must not wait for it again.
    let run = Command::new(repo.join("scripts/deploy/harness"))
        .env("APPFLOW_KERNEL_LOCK", "")
        .args(["run", "--quick", "--appflow"])
        .arg(&bin)
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("running scripts/deploy/harness");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "harness failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).expect("harness JSON");
    let unit = &v["units"][0];
    assert_eq!(unit["app"], "office", "{v}");
    let arms = &unit["arms"];
    for arm in ["stock", "notified", "detect", "cold", "warm"] {
        let a = &arms[arm];
        assert_eq!(a["n"], 1, "{arm}: {a}");
        assert_eq!(
            a["ready"], 1,
            "{arm} did not reach its ready marker: {a}\n{stderr}"
        );
    }
    let stock_bg = arms["stock"]["bg_killed"].as_u64().unwrap();
    for arm in ["notified", "detect"] {
        let a = &arms[arm];
        assert_eq!(a["daemon_errors"], 0, "{arm}: {a}");
        assert!(
            a["oom_kills"].as_u64().unwrap() <= arms["stock"]["oom_kills"].as_u64().unwrap(),
            "{arm} OOM-killed more than stock: {a}"
        );
        assert!(
            a["bg_killed"].as_u64().unwrap() <= stock_bg,
            "{arm} killed more background processes than stock: {a}"
        );
    }
    // Every daemon stopped cleanly (exit 0: settings restored).
    let launches = std::fs::read_to_string(out.path().join("disk/office/launches.jsonl")).unwrap();
    for l in launches.lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        if let Some(code) = r.get("daemon_exit") {
            assert_eq!(code, 0, "daemon exit: {r}");
        }
    }
    // The convergence phase learned a profile.
    let learned = &unit["converge"]["learned"];
    assert!(learned.as_array().is_some_and(|l| !l.is_empty()), "{unit}");
    // Nothing left behind. (The state file is shared with any other run of
    // the harness, which may hold the kernel lock as soon as this one
    // releases it: the harness says what its own teardown left.)
    assert!(!stderr.contains("teardown left"), "{stderr}");
    assert!(!Path::new("/sys/fs/cgroup/memory/appflow-deploy-office").exists());
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains("/appflow-deploy/flash"), "{mounts}");
    eprintln!("swaps after: {swaps}");
}
