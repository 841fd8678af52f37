//! SIGINT and SIGTERM as a stop request: the one signal handling of the
//! daemon and the testbed. The handler only sets a flag; each long-running
//! loop checks it and stops cleanly (the daemon restores its journal, the
//! testbed tears its domain down). `SA_RESTART` keeps blocking reads and
//! writes from failing with EINTR in the middle of an operation.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT/SIGTERM handlers. Returns the flag they set.
pub fn install() -> std::io::Result<&'static AtomicBool> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(s, &act) }.map_err(std::io::Error::from)?;
    }
    Ok(&STOP)
}

/// True once SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_signal_sets_the_flag() {
        let flag = super::install().unwrap();
        assert!(!super::stop_requested());
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
        assert!(flag.load(std::sync::atomic::Ordering::SeqCst));
        assert!(super::stop_requested());
    }
}
