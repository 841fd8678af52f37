//! Building the device domain on the live kernel (see [`crate::domain`] for
//! what is built and how it is torn down).

use crate::device::Device;
use crate::domain::{self, Ledger, LiveOps, Resource, Roots, PREFIX};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Installs the SIGINT/SIGTERM handler (sets a flag; the run stops at the
/// next check and tears the domain down).
pub fn install_signal_handlers() -> Result<()> {
    appflow_linux::signals::install().context("installing SIGINT/SIGTERM handlers")?;
    Ok(())
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    appflow_linux::signals::stop_requested()
}

/// Fails with "interrupted" if a signal arrived.
pub fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted by a signal; tearing the domain down");
    }
    Ok(())
}

/// Sleeps in small steps, stopping early on a signal.
pub fn sleep_checked(d: Duration) -> Result<()> {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < d {
        check_interrupted()?;
        std::thread::sleep(
            d.saturating_sub(t0.elapsed())
                .min(Duration::from_millis(20)),
        );
    }
    check_interrupted()
}

/// A leaf: its memory and blkio cgroups, and the domain's cpu cgroup (one
/// CPU budget for the whole domain).
#[derive(Debug, Clone)]
pub struct Leaf {
    /// Leaf name.
    pub name: String,
    /// Memory cgroup directory.
    pub mem: PathBuf,
    /// blkio cgroup directory.
    pub blkio: PathBuf,
    /// Its cpu cgroup directory (one phone core: [`Domain::set_cpu_budget`]).
    pub cpu: PathBuf,
}

/// cpu.shares of the domain: 16× the default 1024, so on a host busy with
/// other work the domain still gets its CPU (each leaf's quota caps it).
pub const CPU_SHARES: u64 = 16 * 1024;

/// cpu.cfs_period_us of every leaf: 4 ms. A budget is a host core that
/// runs part of each period, not a slower core: within a period a leaf
/// runs until its quota is spent and then waits, and an app that waits for
/// a read in that part of the period loses no CPU time, so reads hide in
/// the waits of a long period as they cannot on a phone core, which is
/// slower all the time. Measured at 20 ms (16 read/compute phases a launch):
/// stock's cold `video` launch took 53-75 ms longer than the same launch
/// with its files cached, for about 190 ms of device time; at 4 ms, 154 ms.
/// The period is as short as the kernel's 1 ms least quota allows for a
/// budget of a quarter core ([`crate::prepare`] sets no less); it is under
/// the kernel's 5 ms bandwidth slice, so a leaf's quota goes to one CPU at
/// a time: a phone core.
pub const CPU_PERIOD_US: u64 = 4_000;

/// cpu.cfs_quota_us of a budget of `cores` over [`CPU_PERIOD_US`] (at least
/// the kernel's minimum of 1 ms).
pub fn cpu_quota_us(cores: f64) -> u64 {
    ((cores * CPU_PERIOD_US as f64).round() as u64).max(1000)
}

/// Writes a budget of `cores` into the cpu cgroup `dir` (its quota over
/// [`CPU_PERIOD_US`]).
fn write_quota(dir: &Path, cores: f64) -> Result<()> {
    write(
        &dir.join("cpu.cfs_quota_us"),
        &cpu_quota_us(cores).to_string(),
    )
}

/// zram's `mm_stat`: what is stored and what it takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ZramStats {
    /// Uncompressed bytes stored (orig_data_size).
    pub orig_data_bytes: u64,
    /// Memory the compressed pool takes (mem_used_total).
    pub pool_bytes: u64,
}

/// The built domain. Dropping it tears everything down.
pub struct Domain {
    /// Where things are.
    pub roots: Roots,
    /// The device emulated.
    pub device: Device,
    /// The app file system as the domain sees it (through the flash device).
    pub mnt: PathBuf,
    /// The same files, written here by the testbed (not through the device).
    pub backing: PathBuf,
    /// The loop device.
    pub loop_dev: PathBuf,
    /// major:minor of the loop device.
    pub loop_majmin: String,
    /// zram index.
    pub zram_index: u32,
    /// The image size, bytes.
    pub image_bytes: u64,
    ledger: Ledger<LiveOps>,
    // After the ledger: dropped without `teardown`, the ledger unmounts
    // the device first.
    flash: crate::fusefs::FlashMount,
    leaves: Vec<Leaf>,
}

fn write(path: &Path, v: &str) -> Result<()> {
    std::fs::write(path, v).with_context(|| format!("writing {v:?} to {}", path.display()))
}

/// Removes leftovers of earlier runs. Refuses when another live testbed owns them.
/// Returns what was removed.
pub fn cleanup(roots: &Roots) -> Result<Vec<Resource>> {
    if let Ok(text) = std::fs::read_to_string(roots.state_file()) {
        if let Ok(st) = serde_json::from_str::<domain::State>(&text) {
            let pid = st.pid;
            if pid != std::process::id() && roots.proc_root.join(pid.to_string()).exists() {
                let cmd = std::fs::read(roots.proc_root.join(format!("{pid}/cmdline")))
                    .unwrap_or_default();
                if String::from_utf8_lossy(&cmd).contains("bench") {
                    bail!(appflow_core::InputError::new(format!(
                        "another appflow bench (pid {pid}) owns {}; wait for it or stop it first",
                        roots.run_dir.display()
                    )));
                }
            }
        }
    }
    let found = domain::find_leftovers(roots);
    if found.is_empty() {
        return Ok(found);
    }
    let mut l = domain::resume(roots.state_file(), found.clone(), LiveOps::new(roots));
    let failed = domain::teardown(&mut l);
    if !failed.is_empty() {
        let msg: Vec<String> = failed.iter().map(|(r, e)| format!("{r:?}: {e}")).collect();
        bail!("cleanup left things behind:\n  {}", msg.join("\n  "));
    }
    Ok(found)
}

impl Domain {
    /// Builds the domain. `image_bytes` sizes the ext4 image.
    pub fn build(roots: Roots, device: Device, image_bytes: u64) -> Result<Self> {
        let mut ledger = domain::ledger(roots.state_file(), LiveOps::new(&roots));
        std::fs::create_dir_all(&roots.run_dir)
            .with_context(|| format!("creating {}", roots.run_dir.display()))?;
        ledger.record(Resource::RunDir {
            path: roots.run_dir.clone(),
        })?;
        // The image.
        std::fs::create_dir_all(&roots.image_dir)?;
        let image = roots
            .image_dir
            .join(format!("{PREFIX}-{}.img", std::process::id()));
        ledger.record(Resource::Image {
            path: image.clone(),
        })?;
        let f = std::fs::File::create(&image)
            .with_context(|| format!("creating {}", image.display()))?;
        f.set_len(image_bytes)?;
        drop(f);
        let img = image.to_string_lossy().to_string();
        domain::run_cmd(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-L",
                PREFIX,
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &img,
            ],
        )?;
        // The loop device with direct I/O (no host page cache under it).
        let dev = domain::run_cmd("losetup", &["-f", "--show", "--direct-io=on", &img])?;
        let loop_dev = PathBuf::from(&dev);
        ledger.record(Resource::Loop {
            dev: loop_dev.clone(),
        })?;
        let lname = loop_dev
            .file_name()
            .context("loop device name")?
            .to_string_lossy()
            .to_string();
        let qdir = roots.sys_root.join(format!("block/{lname}"));
        let loop_majmin = std::fs::read_to_string(qdir.join("dev"))?
            .trim()
            .to_string();
        write(
            &qdir.join("queue/read_ahead_kb"),
            &device.preset.read_ahead_kib.to_string(),
        )?;
        // The image holds the files; the domain reads them only through the
        // flash device at `mnt` (docs/bench-design.md, "Storage").
        let backing = roots.run_dir.join("backing");
        std::fs::create_dir_all(&backing)?;
        nix::mount::mount(
            Some(loop_dev.as_path()),
            backing.as_path(),
            Some("ext4"),
            nix::mount::MsFlags::MS_NOATIME,
            None::<&str>,
        )
        .with_context(|| format!("mounting {} on {}", loop_dev.display(), backing.display()))?;
        ledger.record(Resource::Mount {
            path: backing.clone(),
        })?;
        let mnt = roots.run_dir.join("mnt");
        std::fs::create_dir_all(&mnt)?;
        ledger.record(Resource::Mount { path: mnt.clone() })?;
        let flash = crate::fusefs::mount(
            &backing,
            &mnt,
            device.preset.flash,
            (device.preset.read_ahead_kib * 1024) as u32,
        )
        .with_context(|| format!("mounting the flash device on {}", mnt.display()))?;
        // zram swap, hot-added so the machine's own zram devices are left alone.
        let hot_add = roots.sys_root.join("class/zram-control/hot_add");
        let idx: u32 = std::fs::read_to_string(&hot_add)
            .with_context(|| {
                format!(
                    "reading {} (is the zram module loaded? `modprobe zram`)",
                    hot_add.display()
                )
            })?
            .trim()
            .parse()
            .context("zram hot_add answer")?;
        ledger.record(Resource::Zram {
            index: idx,
            hot_added: true,
        })?;
        let zdir = roots.sys_root.join(format!("block/zram{idx}"));
        let algos = std::fs::read_to_string(zdir.join("comp_algorithm")).unwrap_or_default();
        if algos
            .split_whitespace()
            .any(|a| a.trim_matches(['[', ']']) == "lz4")
        {
            write(&zdir.join("comp_algorithm"), "lz4")?;
        }
        write(
            &zdir.join("disksize"),
            &device.zram_disksize_bytes.to_string(),
        )?;
        write(
            &zdir.join("mem_limit"),
            &device.zram_mem_limit_bytes.to_string(),
        )?;
        let zdev = PathBuf::from(format!("/dev/zram{idx}"));
        let zd = zdev.to_string_lossy().to_string();
        domain::run_cmd("mkswap", &["-L", PREFIX, &zd])?;
        let c = std::ffi::CString::new(zd.as_bytes())?;
        // SWAP_FLAG_PREFER | priority 32767 (preferred over any other swap).
        let flags = 0x8000 | 32767;
        // SAFETY: valid NUL-terminated path.
        if unsafe { libc::swapon(c.as_ptr(), flags) } != 0 {
            bail!("swapon {zd}: {}", std::io::Error::last_os_error());
        }
        ledger.record(Resource::Swap { dev: zdev })?;
        // Cgroups.
        let mem = roots.mem_root();
        let blk = roots.blkio_root();
        let cpu = roots.cpu_root();
        for (ctrl, p) in [("memory", &mem), ("blkio", &blk), ("cpu", &cpu)] {
            if !p.parent().is_some_and(|d| d.is_dir()) {
                bail!(
                    "cgroup v1 {ctrl} controller not mounted at {} (the testbed needs cgroup v1 memory, blkio and cpu)",
                    p.parent().unwrap_or(Path::new("")).display()
                );
            }
            std::fs::create_dir(p).with_context(|| format!("mkdir {}", p.display()))?;
            ledger.record(Resource::Cgroup { path: p.clone() })?;
        }
        write(
            &mem.join("memory.limit_in_bytes"),
            &device.app_memory_bytes.to_string(),
        )?;
        // The CPU: a weight high enough that the domain gets its budget on a
        // busy host (the phone's CPU is the domain's, not shared with the
        // host's work). The budget itself is per leaf, one phone core each
        // (`Domain::leaf`); the domain as a whole is not capped, as a
        // phone's nine cores at that speed would exceed this host's.
        write(&cpu.join("cpu.shares"), &CPU_SHARES.to_string())?;
        Ok(Self {
            roots,
            device,
            mnt,
            backing,
            loop_dev,
            loop_majmin,
            zram_index: idx,
            image_bytes,
            ledger,
            flash,
            leaves: Vec::new(),
        })
    }

    /// Sets every leaf's CPU budget (one phone core) to `cores` host cores.
    pub fn set_cpu_budget(&mut self, cores: f64) -> Result<()> {
        for l in &self.leaves {
            write_quota(&l.cpu, cores)?;
        }
        self.device.cpu_cores = cores;
        Ok(())
    }

    /// The leaf `name`, created on first use.
    pub fn leaf(&mut self, name: &str) -> Result<Leaf> {
        if let Some(l) = self.leaves.iter().find(|l| l.name == name) {
            return Ok(l.clone());
        }
        let mem = self.roots.mem_root().join(name);
        let blkio = self.roots.blkio_root().join(name);
        let cpu = self.roots.cpu_root().join(name);
        for p in [&mem, &blkio, &cpu] {
            std::fs::create_dir(p).with_context(|| format!("mkdir {}", p.display()))?;
            self.ledger.record(Resource::Cgroup { path: p.clone() })?;
        }
        // One phone core: CFS bandwidth over the domain's period.
        write(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
        write_quota(&cpu, self.device.cpu_cores)?;
        let l = Leaf {
            name: name.to_string(),
            mem,
            blkio,
            cpu,
        };
        self.leaves.push(l.clone());
        Ok(l)
    }

    /// What the flash device has served so far.
    pub fn flash_stats(&self) -> std::sync::Arc<crate::fusefs::DeviceStats> {
        self.flash.stats.clone()
    }

    /// Where the testbed writes a file the domain reads at `path` (under `mnt`).
    pub fn backing_path(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.mnt) {
            Ok(rel) => self.backing.join(rel),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Every leaf created so far.
    pub fn leaves(&self) -> &[Leaf] {
        &self.leaves
    }

    /// Records a process started outside the cgroups (the daemon).
    pub fn track_process(&mut self, pid: u32) -> Result<Option<Resource>> {
        let Some(t) = appflow_linux::readers::read_start_time(&self.roots.proc_root, pid) else {
            return Ok(None);
        };
        let r = Resource::Process {
            pid,
            start_ticks: t,
        };
        self.ledger.record(r.clone())?;
        Ok(Some(r))
    }

    /// Forgets a tracked process that the caller stopped.
    pub fn untrack(&mut self, r: &Resource) -> Result<()> {
        Ok(self.ledger.forget(r)?)
    }

    /// zram's statistics: (original data bytes, compressed pool bytes).
    pub fn zram_stats(&self) -> ZramStats {
        let p = self
            .roots
            .sys_root
            .join(format!("block/zram{}/mm_stat", self.zram_index));
        let s = std::fs::read_to_string(p)
            .ok()
            .and_then(|t| appflow_linux::readers::parse_zram_mm_stat(&t).ok())
            .unwrap_or_default();
        ZramStats {
            orig_data_bytes: s.orig_data_bytes,
            pool_bytes: s.mem_used_bytes,
        }
    }

    /// Tears everything down now. Errors list what could not be undone.
    pub fn teardown(&mut self) -> Result<()> {
        // The device first, by its own session (nothing in the domain runs
        // any more); the ledger's record of the mount is the fallback that
        // waits out a busy mount point and detaches it.
        self.flash.unmount();
        let failed = domain::teardown(&mut self.ledger);
        if failed.is_empty() {
            Ok(())
        } else {
            let msg: Vec<String> = failed.iter().map(|(r, e)| format!("{r:?}: {e}")).collect();
            bail!(
                "teardown left things behind (run `appflow bench --cleanup`):\n  {}",
                msg.join("\n  ")
            )
        }
    }
}

/// True when running as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What a machine must have; the first thing missing, if any.
pub fn missing_feature(roots: &Roots) -> Option<String> {
    let need = [
        (
            roots.cgroup_root.join("memory/memory.limit_in_bytes"),
            "cgroup v1 memory controller",
        ),
        (
            roots.cgroup_root.join("blkio/cgroup.procs"),
            "cgroup v1 blkio controller",
        ),
        (
            roots.cgroup_root.join("cpu/cpu.cfs_quota_us"),
            "cgroup v1 cpu controller with CFS bandwidth",
        ),
        ("/dev/fuse".into(), "FUSE (modprobe fuse)"),
        (
            roots.sys_root.join("class/zram-control/hot_add"),
            "zram (modprobe zram)",
        ),
        ("/dev/loop-control".into(), "loop devices (modprobe loop)"),
    ];
    for (p, what) in need {
        if !p.exists() {
            return Some(format!("{what}: {} is missing", p.display()));
        }
    }
    for tool in ["mkfs.ext4", "losetup", "mkswap", "blkid"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
            .unwrap_or(false);
        if !found {
            return Some(format!("the `{tool}` command (util-linux / e2fsprogs)"));
        }
    }
    None
}
