//! Exit codes of the `appflow` binary: a closed stdout (`appflow … | true`)
//! is a normal end for every command that prints (exit 0, no panic, no
//! message); bad input exits 2 with one message.

use appflow_linux::socket::{ControlServer, Incoming, Request};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;

/// Runs `appflow ARGS` with its stdout a pipe whose reader is already gone.
fn run_with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_appflow"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_normal_end(args: &[&str]) {
    let (code, err) = run_with_closed_stdout(args);
    assert_eq!(code, Some(0), "appflow {args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("error"),
        "appflow {args:?}: {err}"
    );
}

#[test]
fn sim_output_to_a_closed_pipe() {
    assert_normal_end(&["sim", "--list"]);
    assert_normal_end(&[
        "sim",
        "--device",
        "pixel8-6gb",
        "--workload",
        "low",
        "--policy",
        "android",
        "--seed",
        "1",
    ]);
}

/// A stand-in daemon answering status and metrics with large replies.
fn fake_daemon(path: &Path) -> ControlServer {
    let (tx, rx) = mpsc::channel::<Incoming>();
    let server = ControlServer::bind(path, tx).unwrap();
    std::thread::spawn(move || {
        for inc in rx.iter() {
            let apps: Vec<_> = (0..2000)
                .map(|i| json!({"name": format!("app{i}"), "pids": [i], "profile": true}))
                .collect();
            let v = match inc.req {
                Request::Metrics {} => json!({"ok": true, "text": "appflow_x 1\n".repeat(20_000)}),
                _ => {
                    json!({"ok": true, "mode": "normal", "apps": apps, "domain": {}, "preload": {}, "loop": {}})
                }
            };
            let _ = inc.reply.send(v);
        }
    });
    server
}

#[test]
fn status_output_to_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("d.sock");
    let _d = fake_daemon(&sock);
    let s = sock.to_str().unwrap();
    assert_normal_end(&["status", "--socket", s]);
    assert_normal_end(&["status", "--socket", s, "--format", "json"]);
    assert_normal_end(&["status", "--socket", s, "--metrics"]);
}

#[test]
fn apps_output_to_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    assert_normal_end(&["apps", "--state-dir", state]);
}

#[test]
fn malformed_profile_exits_2_with_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(profiles.join("app.json"), "{ not json").unwrap();
    std::fs::write(
        profiles.join("future.json"),
        r#"{"format":"appflow-profile","version":18446744073709551616}"#,
    )
    .unwrap();
    let show = |app: &str| {
        Command::new(env!("CARGO_BIN_EXE_appflow"))
            .args([
                "apps",
                "--state-dir",
                dir.path().to_str().unwrap(),
                "show",
                app,
            ])
            .output()
            .unwrap()
    };
    let out = show("app");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("not a profile").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = show("future");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        !err.contains("version 0") && err.contains("not supported"),
        "{err}"
    );
}
