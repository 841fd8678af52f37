//! The launch readahead on this machine's real storage: the device holding
//! a file on disk gets the raised `read_ahead_kb`, a launching process that
//! has the file open already is refreshed through `pidfd_getfd`, and the
//! device's own value comes back at the restore and, after a crash, at the
//! next start (the journal). The disk's value is changed for well under a
//! second. Skipped, with the reason printed, when not root.

#[macro_use]
mod support;
use support::{random_tag, wait_for, Scratch};

use appflow_core::scheduler::ProcId;
use appflow_linux::actuators::readahead::{readahead_file, LaunchReadahead};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

fn read_kb(f: &Path) -> u64 {
    std::fs::read_to_string(f).unwrap().trim().parse().unwrap()
}

#[test]
fn launch_readahead_raises_refreshes_and_restores_the_real_device() {
    require_kernel!();
    let scratch = Scratch::new(&format!("appflow-readahead-{}", random_tag()));
    let file = scratch.0.join("weights.bin");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let dev = std::fs::metadata(&file).unwrap().dev();
    let Some(knob) = readahead_file(Path::new("/sys"), dev) else {
        eprintln!("SKIPPED: the scratch directory's file system has no backing device");
        return;
    };
    let own = read_kb(&knob);
    // A device whose own readahead is at least the stream's read size is
    // left alone; ask for more than it has.
    let want = (own + 1024) * 1024;
    // A launching process that opened the file before the launch was seen.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("exec 3<\"$0\"; exec sleep 30")
        .arg(&file)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for("the child holding the file open", 5, || {
        std::fs::read_link(format!("/proc/{pid}/fd/3"))
            .ok()
            .as_deref()
            == Some(file.as_path())
            && std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e.ends_with("sleep"))
    });
    let start_time = appflow_linux::actuators::read_start_time(Path::new("/proc"), pid).unwrap();
    let id = ProcId { pid, start_time };
    let state = scratch.0.join("state");
    let path = file.to_str().unwrap();

    let (mut ra, replayed) =
        LaunchReadahead::open(&state, Path::new("/proc"), Path::new("/sys"), false).unwrap();
    assert!(replayed.is_empty());
    let n = ra.raise(&[path], &[id], want).unwrap();
    let raised = read_kb(&knob);
    let refreshed = ra.refreshed().to_vec();
    let restore_errors = ra.restore();
    let after = read_kb(&knob);
    assert_eq!((n, raised), (1, want / 1024));
    assert_eq!(refreshed.len(), 1, "the launching process's open file");
    assert!(refreshed[0].1.contains(&file));
    assert!(restore_errors.is_empty());
    assert_eq!(after, own, "the device's own readahead is back");

    // A daemon that dies with the value raised: the next start restores it.
    let (mut ra, _) =
        LaunchReadahead::open(&state, Path::new("/proc"), Path::new("/sys"), false).unwrap();
    ra.raise(&[path], &[], want).unwrap();
    let raised = read_kb(&knob);
    drop(ra);
    let (_, replayed) =
        LaunchReadahead::open(&state, Path::new("/proc"), Path::new("/sys"), false).unwrap();
    let after = read_kb(&knob);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(raised, want / 1024);
    assert_eq!(replayed, vec![knob.clone()]);
    assert_eq!(after, own);
}
