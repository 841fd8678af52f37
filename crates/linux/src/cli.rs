//! Command-line entry points of the live parts (composed by the `appflow`
//! binary), and the output and exit-code path every command of it shares.

pub use crate::cli_daemon::{
    run_daemon, run_notify, run_preload_worker, run_status, DaemonArgs, NotifyArgs,
    PreloadWorkerArgs, StatusArgs,
};
pub use crate::cli_doctor::{run_doctor, DoctorArgs};
pub use crate::cli_profiles::{
    run_apps, run_calibrate, run_record, AppsArgs, CalibrateArgs, RecordArgs,
};
use appflow_core::InputError;

/// Appends a line to an output buffer (printed at once by [`emit`]).
macro_rules! out {
    ($o:expr, $($t:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($t)*);
    }};
}
pub(crate) use out;

/// Prints command output in one write; a closed pipe (`appflow apps | head`)
/// is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// The exit code of a command's result, its error printed once on stderr
/// as `PROGRAM: error: ...`: 0 on success and when the reader of stdout went
/// away (a closed pipe, `appflow status | head`, is a normal end), 2 on bad
/// input ([`InputError`] anywhere in the chain), 1 otherwise.
pub fn exit_code(program: &str, result: anyhow::Result<()>) -> std::process::ExitCode {
    use std::process::ExitCode;
    let Err(e) = result else {
        return ExitCode::SUCCESS;
    };
    let closed_pipe = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if closed_pipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("{program}: error: {e:#}");
    if e.chain().any(|c| c.downcast_ref::<InputError>().is_some()) {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
