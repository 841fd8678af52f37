//! Recording an app whose files sit on a FUSE file system: the testbed's
//! flash device (`appflow flash-serve` serves the same one to deployments,
//! docs/deploy.md), here served by this very process, as `appflow bench`
//! serves it beside its recorder.
//!
//! The recorder's permission events never cover FUSE (reading such an
//! event opens the file through the FUSE server, whose own opens of its
//! backing files wait for the permission thread's answer). FUSE files were
//! therefore not recorded at all unless the app mapped them: a profile
//! learned on the device held only its mapped files. They are now watched
//! by a notification group with a thread of its own
//! (`appflow_linux::recorder::fanotify`); this test fails without it (no
//! file of the mount in the profile) and would hang if the two groups
//! shared a thread.
//!
//! Needs root, FUSE and fanotify permission events; skips with the reason
//! otherwise.

use appflow_bench::device::preset;
use appflow_bench::live::is_root;
use appflow_linux::cli::{run_record, RecordArgs};
use appflow_linux::store::ProfileStore;
use clap::Parser;
use std::path::Path;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    record: RecordArgs,
}

/// One recording at a time: two recordings at once in one test process
/// interfere (seen: an app killed before its readiness). `appflow record`
/// records one launch per process.
static ONE_RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn skip() -> Option<String> {
    if !is_root() {
        return Some("needs root (FUSE mount, fanotify)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("needs FUSE (/dev/fuse)".into());
    }
    if let Err(errno) = appflow_linux::actuators::Features::probe(Path::new("/proc")).fanotify {
        return Some(format!(
            "fanotify permission events unavailable (errno {errno})"
        ));
    }
    None
}

#[test]
fn files_read_on_a_fuse_device_are_recorded() {
    let _one = ONE_RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip() {
        eprintln!("SKIPPED files_read_on_a_fuse_device_are_recorded: {why}");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("appflow-record-fuse-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    let state = dir.path().join("state");
    for d in [&backing, &mnt, &state] {
        std::fs::create_dir(d).unwrap();
    }
    // 12 small files and one 4 MiB asset, read with plain read(2) (`cat`):
    // nothing is mapped, so only the open events can find them.
    for i in 0..12 {
        std::fs::write(backing.join(format!("f{i}")), vec![i as u8; 16 * 1024]).unwrap();
    }
    std::fs::write(backing.join("asset.bin"), vec![7u8; 4 << 20]).unwrap();
    let p = preset("phone-6gb").expect("preset");
    let mut mount =
        appflow_bench::fusefs::mount(&backing, &mnt, p.flash, (p.read_ahead_kib * 1024) as u32)
            .expect("FUSE mount");
    let script = format!(
        "cat {0}/f* {0}/asset.bin > /dev/null; echo ready",
        mnt.display()
    );
    let args = Cli::parse_from([
        "record",
        "--app",
        "fuseapp",
        "--state-dir",
        state.to_str().unwrap(),
        "--cold",
        "--ready-line",
        "^ready$",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let done = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = run_record(args.record);
        let _ = done.0.send(());
        r
    });
    // A deadlock between the recorder and the FUSE server would hang here.
    let finished = done
        .1
        .recv_timeout(std::time::Duration::from_secs(120))
        .is_ok();
    if !finished {
        mount.unmount();
        panic!("recording an app on a FUSE mount did not finish within 120 s");
    }
    t.join().unwrap().expect("appflow record");
    mount.unmount();
    let profile = ProfileStore::open(&state)
        .load("fuseapp")
        .unwrap()
        .expect("a profile");
    let on_mount: Vec<&str> = profile
        .files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| p.starts_with(mnt.to_str().unwrap()))
        .collect();
    eprintln!(
        "recorded {} files on the FUSE mount: {on_mount:?}",
        on_mount.len()
    );
    assert!(
        on_mount.iter().any(|p| p.ends_with("/asset.bin")),
        "the asset read through the FUSE mount is not in the profile: {on_mount:?}"
    );
    assert!(
        on_mount.len() >= 12,
        "only {} of the 13 files read through the FUSE mount were recorded: {on_mount:?}",
        on_mount.len()
    );
}

#[test]
fn temp_files_removed_on_a_fuse_device_do_not_end_the_recording() {
    // An app that creates and removes temp files on a writable FUSE mount
    // (office's lock files on the flash device of docs/deploy.md): by the
    // time the recorder reads such a file's open event, the FUSE server can
    // no longer open it, and the kernel's read of the event fails with
    // ENOENT. That lost one event; it ended the whole recording ("No such
    // file or directory") before the fix.
    let _one = ONE_RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip() {
        eprintln!("SKIPPED temp_files_removed_on_a_fuse_device_do_not_end_the_recording: {why}");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("appflow-record-fuse-tmp-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    let state = dir.path().join("state");
    for d in [&backing, &mnt, &state] {
        std::fs::create_dir(d).unwrap();
    }
    for i in 0..4 {
        std::fs::write(backing.join(format!("f{i}")), vec![i as u8; 16 * 1024]).unwrap();
    }
    let p = preset("phone-6gb").expect("preset");
    let mut mount = appflow_bench::fusefs::mount_with(
        &backing,
        &mnt,
        p.flash,
        (p.read_ahead_kib * 1024) as u32,
        appflow_bench::fusefs::Writes::NewFiles,
    )
    .expect("FUSE mount");
    let script = format!(
        "for i in $(seq 1 200); do echo x > {0}/lock$i; rm -f {0}/lock$i; done; cat {0}/f* > /dev/null; echo ready",
        mnt.display()
    );
    let args = Cli::parse_from([
        "record",
        "--app",
        "tmpapp",
        "--state-dir",
        state.to_str().unwrap(),
        "--ready-line",
        "^ready$",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let done = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = run_record(args.record);
        let _ = done.0.send(());
        r
    });
    let finished = done
        .1
        .recv_timeout(std::time::Duration::from_secs(120))
        .is_ok();
    if !finished {
        mount.unmount();
        panic!("recording did not finish within 120 s");
    }
    let r = t.join().unwrap();
    mount.unmount();
    r.expect("appflow record of an app that removes its temp files");
    let profile = ProfileStore::open(&state)
        .load("tmpapp")
        .unwrap()
        .expect("a profile");
    let read: Vec<&str> = profile
        .files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| p.starts_with(mnt.to_str().unwrap()) && !p.contains("/lock"))
        .collect();
    assert!(
        read.len() >= 4,
        "the files read after the temp files are missing: {read:?}"
    );
}
