//! Calibration on a real directory: completes, stores a valid curve, cleans up.
//! No timing thresholds (the machine is shared).

use appflow_linux::calibrate::{
    calibrate, default_block_sizes, load_curve, save_curve, CalibrateError, CalibrateOptions,
    CALIBRATION_FILE,
};
use std::time::Duration;

fn opts(dir: &std::path::Path, file_bytes: u64) -> CalibrateOptions {
    CalibrateOptions {
        dir: dir.to_path_buf(),
        file_bytes,
        block_sizes: default_block_sizes(),
        budget_per_size: Duration::from_millis(30),
    }
}

#[test]
fn calibrates_stores_and_cleans_up() {
    let base = tempfile::Builder::new()
        .prefix("calibrate")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let data = base.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let cal = calibrate(&opts(&data, 16 << 20)).unwrap();
    let pts = cal.curve.points();
    assert_eq!(pts.len(), 10);
    assert_eq!(pts[0].block_bytes, 4096);
    assert_eq!(pts[9].block_bytes, 2 << 20);
    assert!(pts.iter().all(|p| p.bytes_per_sec > 0.0));
    assert!(cal
        .bytes_read
        .iter()
        .zip(pts)
        .all(|(b, p)| *b >= (16 * p.block_bytes).min(16 << 20)));
    eprintln!(
        "method {}, speedup 4K->512K {:.1}",
        cal.method,
        cal.curve.speedup(4096, 512 << 10)
    );
    // The test file is gone.
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0);

    let state = base.path().join("state");
    let path = save_curve(&state, &cal.curve).unwrap();
    assert_eq!(path, state.join(CALIBRATION_FILE));
    let back = load_curve(&state).unwrap().unwrap();
    // serde_json's default float parsing may differ in the last bit.
    for (a, b) in back.points().iter().zip(cal.curve.points()) {
        assert_eq!(a.block_bytes, b.block_bytes);
        assert!((a.bytes_per_sec - b.bytes_per_sec).abs() <= 1e-9 * b.bytes_per_sec);
    }
    assert_eq!(back.points().len(), 10);
}

#[test]
fn bad_inputs_and_bad_files() {
    let base = tempfile::tempdir().unwrap();
    assert!(matches!(
        calibrate(&opts(base.path(), 1 << 20)),
        Err(CalibrateError::Input(_))
    ));
    let mut o = opts(base.path(), 16 << 20);
    o.block_sizes = vec![1000];
    assert!(matches!(calibrate(&o), Err(CalibrateError::Input(_))));
    assert!(calibrate(&opts(&base.path().join("missing"), 16 << 20)).is_err());

    assert!(load_curve(base.path()).unwrap().is_none());
    std::fs::write(base.path().join(CALIBRATION_FILE), r#"{"points":[]}"#).unwrap();
    let e = load_curve(base.path()).unwrap_err();
    assert!(
        e.to_string().contains(CALIBRATION_FILE) && e.to_string().contains("no points"),
        "{e}"
    );
    std::fs::write(
        base.path().join(CALIBRATION_FILE),
        r#"{"points":[{"block_bytes":4096,"bytes_per_sec":-1}]}"#,
    )
    .unwrap();
    assert!(load_curve(base.path()).is_err());
}
