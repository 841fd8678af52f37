//! Command-line entry points of the live parts (composed by the `appflow` binary).
pub use crate::cli_daemon::{
    run_daemon, run_notify, run_preload_worker, run_status, DaemonArgs, NotifyArgs,
    PreloadWorkerArgs, StatusArgs,
};
pub use crate::cli_doctor::{run_doctor, DoctorArgs};
pub use crate::cli_profiles::{
    run_apps, run_calibrate, run_record, AppsArgs, CalibrateArgs, RecordArgs,
};
