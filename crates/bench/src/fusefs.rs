//! The domain's storage as a FUSE file system: a read-only view of a
//! backing directory whose every read request is served through one
//! [`FlashModel`] (see [`crate::flash`]): one device shared by every
//! process of the domain, with a per-request cost and idle-class I/O that
//! yields to the foreground.
//!
//! The kernel keeps the files' pages in its page cache (charged to the
//! memory cgroup of the process that reads them, as for any file system;
//! `FOPEN_KEEP_CACHE`, so an open does not drop them), so only misses reach
//! the device. Reads are at most 1 MiB (`max_pages` 256); the kernel's
//! readahead window is the preset's. A request's class comes from the
//! reading thread's I/O priority (`ioprio_get`): class IDLE is idle.
//!
//! The server runs as threads of the testbed process (outside the domain's
//! cgroups: the device is not the phone's CPU). When the process dies, the
//! kernel aborts the connection and readers get ENOTCONN: nothing hangs.

use crate::flash::{FlashModel, FlashParams, IoClass, Turnaround};
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, MountOption, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyEntry, ReplyOpen, Request,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the kernel may cache names and attributes (the tree never
/// changes while mounted).
const TTL: Duration = Duration::from_secs(24 * 3600);
/// Largest read request: 1 MiB (256 pages).
pub const MAX_REQUEST_BYTES: u32 = 1 << 20;
/// The host's FUSE turnaround per request, measured on the project's VM
/// (2 vCPUs): the in-domain calibration of the phone device gave 4 KiB
/// reads about 165 µs apart against the model's 102 µs (60 µs fixed), and
/// 1 MiB reads 900-1,000 µs apart against 599 µs (about 290 µs more per
/// MiB: two copies at 3.6 GB/s). The server replies that much before the
/// model's completion (see [`Turnaround::reply_ns`]).
pub const HOST_FUSE_TURNAROUND: Turnaround = Turnaround {
    fixed_us: 60.0,
    copy_bytes_per_sec: 3.6e9,
};
/// ioprio class IDLE (linux/ioprio.h).
const IOPRIO_CLASS_IDLE: i64 = 3;

/// Bytes and requests the device has served, shared with the testbed.
#[derive(Debug, Default)]
pub struct DeviceStats {
    /// Bytes read by normal-class requests.
    pub normal_bytes: AtomicU64,
    /// Bytes read by idle-class requests.
    pub idle_bytes: AtomicU64,
    /// Requests served.
    pub requests: AtomicU64,
}

impl DeviceStats {
    /// Bytes served, all classes.
    pub fn bytes(&self) -> u64 {
        self.normal_bytes.load(Ordering::Relaxed) + self.idle_bytes.load(Ordering::Relaxed)
    }
}

struct ReadReq {
    file: Arc<File>,
    offset: u64,
    size: u32,
    class: IoClass,
    reply: ReplyData,
}

/// The mounted file system; unmounted by [`FlashMount::unmount`] or when
/// dropped.
pub struct FlashMount {
    session: Option<fuser::BackgroundSession>,
    /// What the device served.
    pub stats: Arc<DeviceStats>,
}

impl FlashMount {
    /// Unmounts now, through the session that serves it, while the mount
    /// point still exists. Dropping the session after something else took
    /// the mount away (the testbed's ledger removes the mount point) makes
    /// the FUSE library try again and log a spurious error.
    pub fn unmount(&mut self) {
        drop(self.session.take());
    }
}

/// Mounts `backing` read-only at `mnt`, served through a device of `params`
/// with the kernel readahead `readahead_bytes`.
pub fn mount(
    backing: &Path,
    mnt: &Path,
    params: FlashParams,
    readahead_bytes: u32,
) -> std::io::Result<FlashMount> {
    mount_with(backing, mnt, params, readahead_bytes, Writes::Refused)
}

/// Whether the mount takes new files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Read-only (the testbed's device: its files are installed before).
    Refused,
    /// New regular files may be created, written and removed in existing
    /// directories (`appflow calibrate` writes its test file on the storage
    /// it measures). Writes go straight to the backing directory, outside
    /// the flash model: only reads are modelled. Existing files stay
    /// read-only.
    NewFiles,
}

/// [`mount`], choosing whether new files may be written.
pub fn mount_with(
    backing: &Path,
    mnt: &Path,
    params: FlashParams,
    readahead_bytes: u32,
    writes: Writes,
) -> std::io::Result<FlashMount> {
    let stats = Arc::new(DeviceStats::default());
    let (tx, rx) = channel();
    let st = stats.clone();
    std::thread::Builder::new()
        .name("appflow-flash".into())
        .spawn(move || device_loop(rx, params, &st))?;
    let mut fs = Passthrough::new(backing, tx, readahead_bytes)?;
    fs.writes = writes;
    let mut options = vec![
        MountOption::FSName("appflow-bench".into()),
        MountOption::AllowOther,
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    if writes == Writes::Refused {
        options.push(MountOption::RO);
    }
    let session = fuser::spawn_mount2(fs, mnt, &options)?;
    Ok(FlashMount {
        session: Some(session),
        stats,
    })
}

/// The device: admits requests into the model, reads the data, and replies
/// the host's turnaround before the model completes the request (so the
/// reader sees it at the completion).
fn device_loop(rx: Receiver<ReadReq>, params: FlashParams, stats: &DeviceStats) {
    like_hardware();
    let t0 = Instant::now();
    let now = || t0.elapsed().as_nanos() as u64;
    let mut model: FlashModel<ReadReq> =
        FlashModel::new(params).with_round_trip(HOST_FUSE_TURNAROUND);
    let mut inside: Vec<(u64, ReplyData, std::io::Result<Vec<u8>>)> = Vec::new();
    let mut open = true;
    loop {
        let admitted = now();
        for (r, done) in model.admit(admitted) {
            let mut buf = vec![0u8; r.size as usize];
            let res = read_full(&r.file, &mut buf, r.offset).map(|n| {
                buf.truncate(n);
                buf
            });
            let n = res.as_ref().map(|b| b.len() as u64).unwrap_or(0);
            match r.class {
                IoClass::Normal => stats.normal_bytes.fetch_add(n, Ordering::Relaxed),
                IoClass::Idle => stats.idle_bytes.fetch_add(n, Ordering::Relaxed),
            };
            stats.requests.fetch_add(1, Ordering::Relaxed);
            let reply_at = HOST_FUSE_TURNAROUND.reply_ns(r.size as u64, admitted, done);
            inside.push((reply_at, r.reply, res));
        }
        let t = now();
        let mut i = 0;
        while i < inside.len() {
            if inside[i].0 <= t {
                let (_, reply, res) = inside.swap_remove(i);
                match res {
                    Ok(b) => reply.data(&b),
                    Err(e) => reply.error(e.raw_os_error().unwrap_or(libc::EIO)),
                }
            } else {
                i += 1;
            }
        }
        let next = inside
            .iter()
            .map(|x| x.0)
            .chain(model.next_event_ns())
            .min();
        if !open && next.is_none() && !model.has_queued() {
            return;
        }
        let wait = next.map(|n| Duration::from_nanos(n.saturating_sub(now())));
        let got = match (open, wait) {
            (true, Some(w)) => rx.recv_timeout(w),
            (true, None) => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            (false, Some(w)) => {
                std::thread::sleep(w);
                Err(RecvTimeoutError::Timeout)
            }
            (false, None) => Err(RecvTimeoutError::Timeout),
        };
        match got {
            Ok(r) => {
                model.submit(r.size as u64, r.class, r);
                // Take everything already waiting, so they queue together.
                while let Ok(r) = rx.try_recv() {
                    model.submit(r.size as u64, r.class, r);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
    }
}

/// Makes the calling thread behave like a device rather than a task: it
/// sleeps precisely (the default 50 µs timer slack is half a 4 KiB request)
/// and runs as soon as it wakes (SCHED_FIFO, a low real-time priority), so
/// host load does not stretch the modelled service times. The server's
/// threads block on I/O and sleep between requests; the kernel's real-time
/// throttling bounds them in any case.
fn like_hardware() {
    // SAFETY: prctl and sched_setscheduler on the calling thread, with
    // plain integer / struct arguments.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64);
        let p = libc::sched_param { sched_priority: 10 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
    }
}

fn read_full(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The I/O priority class of a thread.
fn io_class(tid: u32) -> IoClass {
    // SAFETY: ioprio_get(IOPRIO_WHO_PROCESS = 1, tid) reads a value.
    let v = unsafe { libc::syscall(libc::SYS_ioprio_get, 1, tid as libc::c_int) };
    if v >= 0 && (v >> 13) == IOPRIO_CLASS_IDLE {
        IoClass::Idle
    } else {
        IoClass::Normal
    }
}

struct Passthrough {
    root: PathBuf,
    paths: HashMap<u64, PathBuf>,
    files: HashMap<u64, Arc<File>>,
    next_fh: u64,
    device: Sender<ReadReq>,
    readahead_bytes: u32,
    writes: Writes,
    /// Handles of files this mount created, open for writing.
    created: HashMap<u64, File>,
    /// Inodes of files this mount created (the only ones it writes or removes).
    created_inos: std::collections::HashSet<u64>,
}

impl Passthrough {
    fn new(root: &Path, device: Sender<ReadReq>, readahead_bytes: u32) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let mut paths = HashMap::new();
        paths.insert(fuser::FUSE_ROOT_ID, root.clone());
        Ok(Self {
            root,
            paths,
            files: HashMap::new(),
            next_fh: 1,
            device,
            readahead_bytes,
            writes: Writes::Refused,
            created: HashMap::new(),
            created_inos: Default::default(),
        })
    }

    fn ino_of(&self, path: &Path, m: &std::fs::Metadata) -> u64 {
        if path == self.root {
            fuser::FUSE_ROOT_ID
        } else {
            m.ino()
        }
    }

    fn attr(&self, path: &Path) -> std::io::Result<FileAttr> {
        let m = std::fs::symlink_metadata(path)?;
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            FileType::Directory
        } else if ft.is_symlink() {
            FileType::Symlink
        } else {
            FileType::RegularFile
        };
        let t = |s: i64, ns: i64| {
            std::time::UNIX_EPOCH + Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32)
        };
        Ok(FileAttr {
            ino: self.ino_of(path, &m),
            size: m.size(),
            blocks: m.blocks(),
            atime: t(m.atime(), m.atime_nsec()),
            mtime: t(m.mtime(), m.mtime_nsec()),
            ctime: t(m.ctime(), m.ctime_nsec()),
            crtime: t(m.mtime(), m.mtime_nsec()),
            kind,
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: m.rdev() as u32,
            blksize: 4096,
            flags: 0,
        })
    }
}

impl Passthrough {
    /// Registers a file this mount created, for reading (through the
    /// device) and writing (straight to the backing file).
    fn add_writable(&mut self, f: File) -> std::io::Result<u64> {
        let reader = f.try_clone()?;
        let fh = self.next_fh;
        self.next_fh += 1;
        self.files.insert(fh, Arc::new(reader));
        self.created.insert(fh, f);
        Ok(fh)
    }

    /// Opens a file this mount created for writing.
    fn open_created(&mut self, ino: u64, flags: i32, reply: ReplyOpen) {
        let Some(p) = self.paths.get(&ino) else {
            return reply.error(libc::ENOENT);
        };
        let opened = std::fs::OpenOptions::new().read(true).write(true).open(p);
        match opened.and_then(|f| self.add_writable(f)) {
            Ok(fh) => {
                reply.opened(fh, direct_io(flags));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// FOPEN_DIRECT_IO for an O_DIRECT open of a file this mount created.
fn direct_io(flags: i32) -> u32 {
    if flags & libc::O_DIRECT != 0 {
        fuser::consts::FOPEN_DIRECT_IO
    } else {
        0
    }
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Filesystem for Passthrough {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        // init runs on the session thread, which carries every request.
        like_hardware();
        let _ = config.set_max_readahead(self.readahead_bytes.max(4096));
        // max_pages follows max_write: 256 pages, 1 MiB requests.
        let _ = config.set_max_write(MAX_REQUEST_BYTES);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let Some(dir) = self.paths.get(&parent) else {
            return reply.error(libc::ENOENT);
        };
        let path = dir.join(name);
        match self.attr(&path) {
            Ok(a) => {
                self.paths.insert(a.ino, path);
                reply.entry(&TTL, &a, 0);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.paths.get(&ino).map(|p| self.attr(p)) {
            Some(Ok(a)) => reply.attr(&TTL, &a),
            Some(Err(e)) => reply.error(errno(&e)),
            None => reply.error(libc::ENOENT),
        }
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        match self.paths.get(&ino).map(std::fs::read_link) {
            Some(Ok(t)) => reply.data(t.as_os_str().as_bytes()),
            Some(Err(e)) => reply.error(errno(&e)),
            None => reply.error(libc::ENOENT),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if flags & libc::O_ACCMODE != libc::O_RDONLY {
            if self.created_inos.contains(&ino) {
                return self.open_created(ino, flags, reply);
            }
            return reply.error(libc::EROFS);
        }
        let Some(p) = self.paths.get(&ino) else {
            return reply.error(libc::ENOENT);
        };
        match File::open(p) {
            Ok(f) => {
                let fh = self.next_fh;
                self.next_fh += 1;
                self.files.insert(fh, Arc::new(f));
                // Keep the page cache across opens; O_DIRECT opens bypass it.
                let mut open_flags = fuser::consts::FOPEN_KEEP_CACHE;
                if flags & libc::O_DIRECT != 0 {
                    open_flags = fuser::consts::FOPEN_DIRECT_IO;
                }
                reply.opened(fh, open_flags);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: fuser::ReplyEmpty,
    ) {
        self.files.remove(&fh);
        self.created.remove(&fh);
        reply.ok();
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        if self.writes == Writes::Refused {
            return reply.error(libc::EROFS);
        }
        let Some(dir) = self.paths.get(&parent) else {
            return reply.error(libc::ENOENT);
        };
        let path = dir.join(name);
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode & 0o777)
            .open(&path)
            .and_then(|f| Ok((self.attr(&path)?, f)));
        match made {
            Ok((a, f)) => {
                self.paths.insert(a.ino, path);
                self.created_inos.insert(a.ino);
                let fh = match self.add_writable(f) {
                    Ok(fh) => fh,
                    Err(e) => return reply.error(errno(&e)),
                };
                reply.created(&TTL, &a, 0, fh, direct_io(flags));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: fuser::ReplyWrite,
    ) {
        let Some(f) = self.created.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        match f.write_all_at(data, offset.max(0) as u64) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let Some(p) = self.paths.get(&ino).cloned() else {
            return reply.error(libc::ENOENT);
        };
        if let Some(len) = size {
            if !self.created_inos.contains(&ino) {
                return reply.error(libc::EROFS);
            }
            let res = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .and_then(|f| f.set_len(len));
            if let Err(e) = res {
                return reply.error(errno(&e));
            }
        }
        match self.attr(&p) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: fuser::ReplyEmpty) {
        let Some(dir) = self.paths.get(&parent) else {
            return reply.error(libc::ENOENT);
        };
        let path = dir.join(name);
        let ino = match std::fs::symlink_metadata(&path) {
            Ok(m) => m.ino(),
            Err(e) => return reply.error(errno(&e)),
        };
        if !self.created_inos.contains(&ino) {
            return reply.error(libc::EROFS);
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {
                self.created_inos.remove(&ino);
                self.paths.remove(&ino);
                reply.ok();
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _datasync: bool,
        reply: fuser::ReplyEmpty,
    ) {
        match self.created.get(&fh).map(|f| f.sync_data()) {
            Some(Err(e)) => reply.error(errno(&e)),
            _ => reply.ok(),
        }
    }

    fn read(
        &mut self,
        req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let Some(file) = self.files.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        let r = ReadReq {
            file,
            offset: offset.max(0) as u64,
            size,
            class: io_class(req.pid()),
            reply,
        };
        if let Err(e) = self.device.send(r) {
            e.0.reply.error(libc::EIO);
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let Some(dir) = self.paths.get(&ino).cloned() else {
            return reply.error(libc::ENOENT);
        };
        let mut entries: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (ino, FileType::Directory, ".".into()),
            (ino, FileType::Directory, "..".into()),
        ];
        let rd = match std::fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) => return reply.error(errno(&e)),
        };
        let mut names: Vec<_> = rd.filter_map(|e| e.ok()).collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let Ok(m) = e.metadata() else { continue };
            let kind = if m.is_dir() {
                FileType::Directory
            } else if m.file_type().is_symlink() {
                FileType::Symlink
            } else {
                FileType::RegularFile
            };
            self.paths.insert(m.ino(), e.path());
            entries.push((m.ino(), kind, e.file_name()));
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(ino, (i + 1) as i64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}
