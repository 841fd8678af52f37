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
use appflow_bench::fusefs::{FlashMount, Writes};
use appflow_bench::live::is_root;
use appflow_linux::cli::{run_record, RecordArgs};
use appflow_linux::store::ProfileStore;
use clap::Parser;
use std::path::{Path, PathBuf};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    record: RecordArgs,
}

/// One recording at a time: two recordings at once in one test process
/// interfere (seen: an app killed before its readiness). `appflow record`
/// records one launch per process.
static ONE_RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the one-recording lock, or says why the test skips and gives none.
fn begin(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    let one = ONE_RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip() {
        eprintln!("SKIPPED {test}: {why}");
        return None;
    }
    Some(one)
}

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

/// A FUSE device's folders under /var/tmp: the backing files (`f0`, `f1`,
/// … of 16 KiB each), the mount point and the profile store.
struct Dirs {
    _dir: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
    state: PathBuf,
}

fn dirs(prefix: &str, small_files: usize) -> Dirs {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    let [backing, mnt, state] = ["backing", "mnt", "state"].map(|d| dir.path().join(d));
    for d in [&backing, &mnt, &state] {
        std::fs::create_dir(d).unwrap();
    }
    for i in 0..small_files {
        std::fs::write(backing.join(format!("f{i}")), vec![i as u8; 16 * 1024]).unwrap();
    }
    Dirs {
        _dir: dir,
        backing,
        mnt,
        state,
    }
}

/// Serves `d.backing` at `d.mnt` through the testbed's phone flash device.
fn mount(d: &Dirs, writes: Writes) -> FlashMount {
    let p = preset("phone-6gb").expect("preset");
    appflow_bench::fusefs::mount_with(
        &d.backing,
        &d.mnt,
        p.flash,
        (p.read_ahead_kib * 1024) as u32,
        writes,
    )
    .expect("FUSE mount")
}

/// `appflow record` of `sh -c script` as `app` (ready at a `ready` line),
/// waiting at most 120 s: a deadlock between the recorder and the FUSE
/// server would hang here. Unmounts either way; returns the profile's
/// files on the mount.
fn record(d: &Dirs, mut mount: FlashMount, app: &str, cold: bool, script: &str) -> Vec<String> {
    let state = d.state.to_str().unwrap();
    let mut argv = vec!["record", "--app", app, "--state-dir", state];
    if cold {
        argv.push("--cold");
    }
    argv.extend(["--ready-line", "^ready$", "--", "sh", "-c", script]);
    let args = Cli::parse_from(argv);
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
        panic!("recording an app on a FUSE mount did not finish within 120 s");
    }
    let r = t.join().unwrap();
    mount.unmount();
    r.expect("appflow record");
    let profile = ProfileStore::open(&d.state)
        .load(app)
        .unwrap()
        .expect("a profile");
    let mnt = d.mnt.to_str().unwrap();
    profile
        .files
        .iter()
        .map(|f| f.path.clone())
        .filter(|p| p.starts_with(mnt))
        .collect()
}

#[test]
fn files_read_on_a_fuse_device_are_recorded() {
    let Some(_one) = begin("files_read_on_a_fuse_device_are_recorded") else {
        return;
    };
    // 12 small files and one 4 MiB asset, read with plain read(2) (`cat`):
    // nothing is mapped, so only the open events can find them.
    let d = dirs("appflow-record-fuse-", 12);
    std::fs::write(d.backing.join("asset.bin"), vec![7u8; 4 << 20]).unwrap();
    let m = mount(&d, Writes::Refused);
    let script = format!(
        "cat {0}/f* {0}/asset.bin > /dev/null; echo ready",
        d.mnt.display()
    );
    let on_mount = record(&d, m, "fuseapp", true, &script);
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
    // (office's lock files on the flash device of docs/deploy.md). At the
    // end of the window the recorder reads back the status of every file
    // the tree opened; the FUSE server can no longer stat a removed one
    // (ENOENT), and before the fix that error ended the whole recording.
    let Some(_one) = begin("temp_files_removed_on_a_fuse_device_do_not_end_the_recording") else {
        return;
    };
    let d = dirs("appflow-record-fuse-tmp-", 4);
    let m = mount(&d, Writes::NewFiles);
    let script = format!(
        "for i in $(seq 1 200); do echo x > {0}/lock$i; rm -f {0}/lock$i; done; cat {0}/f* > /dev/null; echo ready",
        d.mnt.display()
    );
    let read: Vec<String> = record(&d, m, "tmpapp", false, &script)
        .into_iter()
        .filter(|p| !p.contains("/lock"))
        .collect();
    assert!(
        read.len() >= 4,
        "the files read after the temp files are missing: {read:?}"
    );
}
