//! `appflow flash-serve`: the testbed's phone-like flash device on its own,
//! over a directory of the user's choosing, until stopped.
//!
//! `appflow bench` builds this device inside its domain (a FUSE view of the
//! app files whose every read goes through one [`crate::flash::FlashModel`]:
//! [`crate::fusefs`]) and tears it down with the run. A deployment that is
//! not the testbed (scripts/deploy, docs/deploy.md) needs the same device
//! under apps it installs itself: this command mounts `--backing` at `--mnt`
//! through the preset's flash model and readahead, prints one line once the
//! mount answers, serves until SIGINT or SIGTERM, then unmounts and prints
//! what the device served. If the process dies without unmounting, the
//! kernel aborts the connection (readers get ENOTCONN, nothing hangs) and
//! `umount MNT` removes the stale mount.

use crate::device;
use crate::fusefs::{self, Writes};
use crate::options::input;
use anyhow::{Context, Result};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Arguments of `appflow flash-serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// The directory whose files the device serves (on this machine's disk).
    #[arg(long)]
    pub backing: PathBuf,
    /// An existing empty directory to mount the device on.
    #[arg(long)]
    pub mnt: PathBuf,
    /// The device preset whose flash model and readahead serve the reads.
    #[arg(long, default_value = "phone-6gb")]
    pub preset: String,
    /// Let new files be created, written and removed (not modelled: writes go
    /// straight to the backing directory), so that `appflow calibrate --dir`
    /// can measure the device. Existing files stay read-only.
    #[arg(long)]
    pub writable: bool,
}

/// Serves until a signal; see the module doc.
pub fn run_serve(a: ServeArgs) -> Result<()> {
    let preset = device::preset(&a.preset).ok_or_else(|| {
        input(format!(
            "--preset {:?}: unknown (one of {})",
            a.preset,
            device::preset_names().join(", ")
        ))
    })?;
    if !a.backing.is_dir() {
        return Err(input(format!(
            "--backing {}: not a directory",
            a.backing.display()
        )));
    }
    let empty = std::fs::read_dir(&a.mnt)
        .map(|mut d| d.next().is_none())
        .map_err(|e| input(format!("--mnt {}: {e}", a.mnt.display())))?;
    if !empty {
        return Err(input(format!(
            "--mnt {}: not empty (a mount point must be an empty directory)",
            a.mnt.display()
        )));
    }
    crate::live::install_signal_handlers()?;
    let writes = if a.writable {
        Writes::NewFiles
    } else {
        Writes::Refused
    };
    let readahead = (preset.read_ahead_kib * 1024) as u32;
    let mut mount = fusefs::mount_with(&a.backing, &a.mnt, preset.flash, readahead, writes)
        .with_context(|| format!("mounting the flash device on {}", a.mnt.display()))?;
    let stats = mount.stats.clone();
    // The mount answers once the root can be listed through it.
    let answered = (0..100).any(|_| {
        let ok = std::fs::read_dir(&a.mnt).is_ok_and(|mut d| d.next().is_some());
        if !ok {
            std::thread::sleep(Duration::from_millis(20));
        }
        ok
    });
    if !answered {
        mount.unmount();
        anyhow::bail!(
            "the flash device on {} did not answer within 2 s",
            a.mnt.display()
        );
    }
    writeln!(
        std::io::stdout().lock(),
        "serving {} at {} through the {} flash model (readahead {} KiB, {}); stop with SIGINT or SIGTERM",
        a.backing.display(),
        a.mnt.display(),
        preset.name,
        preset.read_ahead_kib,
        if a.writable { "new files writable" } else { "read-only" }
    )?;
    while !crate::live::interrupted() {
        std::thread::sleep(Duration::from_millis(100));
    }
    mount.unmount();
    let served = format!(
        "flash device stopped: served {} bytes ({} idle-class) in {} requests; {} unmounted",
        stats.bytes(),
        stats.idle_bytes.load(Ordering::Relaxed),
        stats.requests.load(Ordering::Relaxed),
        a.mnt.display()
    );
    eprintln!("{served}");
    Ok(())
}
