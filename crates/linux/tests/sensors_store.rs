//! The profile store: atomic saves, corrupt and foreign files skipped, bad names refused.

use appflow_core::profile::{ByteRange, LaunchObservation, LaunchProfile, ObservedFile};
use appflow_linux::store::{validate_app_name, write_atomic, ProfileStore, StoreError};

fn obs(path: &str, end: u64) -> LaunchObservation {
    LaunchObservation {
        files: vec![ObservedFile {
            path: path.into(),
            size_bytes: 1 << 20,
            first_access_us: 5,
            ranges: vec![ByteRange { start: 0, end }],
        }],
        anon_launch_bytes: 7 << 20,
        footprint_after_launch_bytes: 9 << 20,
        launch_ms: 321,
        at_unix_ms: 1_700_000_000_000,
    }
}

#[test]
fn save_load_and_record_merge() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(dir.path());
    assert!(store.load("cam").unwrap().is_none());
    assert!(store.load_all().unwrap().0.is_empty());
    let p = store.record("cam", &obs("/a", 4096)).unwrap();
    assert_eq!(p.launches, 1);
    let p = store.record("cam", &obs("/a", 8192)).unwrap();
    assert_eq!(p.launches, 2);
    let back = store.load("cam").unwrap().unwrap();
    assert_eq!(back, p);
    assert_eq!(back.anon_launch_bytes, 7 << 20);
    assert_eq!(back.relaunch_footprint_bytes, 9 << 20);
    assert_eq!(
        store.path_of("cam").unwrap(),
        dir.path().join("profiles/cam.json")
    );
    // No temp files left behind.
    let names: Vec<String> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["cam.json".to_string()]);
}

#[test]
fn corrupt_and_foreign_files_are_skipped_others_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(dir.path());
    store.record("good", &obs("/g", 100)).unwrap();
    store.record("also-good", &obs("/h", 100)).unwrap();
    let d = store.dir();
    std::fs::write(d.join("corrupt.json"), "{ not json").unwrap();
    std::fs::write(d.join("foreign.json"), r#"{"format":"other","version":1}"#).unwrap();
    std::fs::write(
        d.join("future.json"),
        r#"{"format":"appflow-profile","version":99}"#,
    )
    .unwrap();
    // A valid profile of another app under the wrong file name.
    let mut other = LaunchProfile::new("other");
    other.merge_launch(&obs("/o", 10));
    std::fs::write(d.join("misnamed.json"), other.to_json()).unwrap();
    // Ignored entirely: temp files and non-json files.
    std::fs::write(d.join(".good.json.tmp.1.0"), "partial").unwrap();
    std::fs::write(d.join("notes.txt"), "hello").unwrap();

    let (profiles, skipped) = store.load_all().unwrap();
    let apps: Vec<&str> = profiles.iter().map(|p| p.app.as_str()).collect();
    assert_eq!(apps, vec!["also-good", "good"]);
    let mut skipped_names: Vec<String> = skipped
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    skipped_names.sort();
    assert_eq!(
        skipped_names,
        vec![
            "corrupt.json",
            "foreign.json",
            "future.json",
            "misnamed.json"
        ]
    );
    for (path, e) in &skipped {
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
    let foreign = skipped
        .iter()
        .find(|(p, _)| p.ends_with("foreign.json"))
        .unwrap();
    assert!(foreign.1.to_string().contains("foreign"), "{}", foreign.1);
    // A corrupt file is not silently replaced by record().
    assert!(store.record("corrupt", &obs("/c", 1)).is_err());
    assert_eq!(
        std::fs::read_to_string(d.join("corrupt.json")).unwrap(),
        "{ not json"
    );
}

#[test]
fn bad_app_names_are_refused() {
    for bad in [
        "",
        "  ",
        "a/b",
        "..",
        "x..y",
        ".hidden",
        "tab\there",
        &"x".repeat(201),
    ] {
        let e = validate_app_name(bad).unwrap_err();
        assert!(e.is_input_error());
        assert!(e.to_string().contains("bad app name"), "{e}");
    }
    for good in ["tiktok", "com.example.app", "my app", "a-b_c.1"] {
        validate_app_name(good).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(dir.path());
    let e = store.record("../escape", &obs("/a", 1)).unwrap_err();
    assert!(matches!(e, StoreError::BadAppName { .. }));
    assert!(!dir.path().join("escape.json").exists());
}

#[test]
fn write_atomic_writes_into_a_fifo_and_keeps_it() {
    // `--out /dev/null` must not turn the device node into a file: a path
    // that is not a regular file is written in place. A FIFO stands in for
    // the device here (same rule, no root needed). Its read end is opened
    // first, non-blocking, so a write_atomic that renamed over the FIFO
    // fails the test instead of hanging it.
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pipe");
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&p)
        .unwrap();
    write_atomic(&p, b"through the pipe").unwrap();
    let mut got = Vec::new();
    let _ = reader.read_to_end(&mut got);
    assert_eq!(got, b"through the pipe");
    assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn write_atomic_replaces_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.json");
    write_atomic(&p, b"first version, longer").unwrap();
    write_atomic(&p, b"second").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"second");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // Missing parent directory: error, nothing created.
    let e = write_atomic(&dir.path().join("no/such/dir.json"), b"x").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
}

/// Profiles are private (0600 in a 0700 directory), and the temp file of a
/// write killed midway (its writer gone) is removed, a live writer's kept.
#[test]
fn profiles_are_private_and_stale_temp_files_go() {
    use appflow_linux::store::remove_stale_temp_files;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(dir.path());
    store.record("app", &obs("/a", 1)).unwrap();
    let path = store.path_of("app").unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(store.dir()), 0o700);
    // A dead writer: a pid that cannot exist (above pid_max's ceiling 2^22).
    let dead = store.dir().join(".app.json.tmp.4194305.0");
    let live = store
        .dir()
        .join(format!(".app.json.tmp.{}.7", std::process::id()));
    std::fs::write(&dead, vec![0u8; 512 * 1024]).unwrap();
    std::fs::write(&live, b"x").unwrap();
    assert_eq!(remove_stale_temp_files(store.dir()), 1);
    assert!(!dead.exists() && live.exists() && path.exists());
}
