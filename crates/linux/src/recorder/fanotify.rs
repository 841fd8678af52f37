//! Which files a process tree opens, and when: a fanotify group with
//! permission events on every storage-backed filesystem.
//!
//! Why permission events (`FAN_OPEN_PERM`, `FAN_OPEN_EXEC_PERM`) rather than
//! plain notifications: the opening process is blocked until we answer, so
//! (1) it is alive and its ancestry can be read from /proc even if it is a
//! short-lived child, (2) the file's page-cache residency can be taken
//! *before* the app reads a byte of it, which makes "ranges brought in by the
//! launch" exact, and (3) with `--cold` the file can be dropped from the page
//! cache before the app's first open proceeds. Optionally, `FAN_ACCESS`
//! notifications catch reads through descriptors opened before the window
//! (rare: inherited descriptors); they are off by default because every read
//! on the machine then produces an event.
//!
//! Every event of a process outside the tree is allowed at once. The thread
//! that answers never opens a path on a marked filesystem (it works on the
//! event's own descriptor, which fanotify opened without notification), so it
//! cannot wait on itself. If the recorder dies, the kernel drops the group and
//! allows every pending open.
//!
//! FUSE filesystems (an app store's or a phone-like flash device's view of
//! the app files) get a second group of plain `FAN_OPEN`/`FAN_OPEN_EXEC`
//! notifications, read by a thread of its own: reading a FUSE event opens the
//! file through the FUSE server, and that server's own opens of its backing
//! files wait for the permission thread's answer. With one thread for both
//! the two would wait on each other; with two, the permission thread never
//! touches a FUSE file. Its open is only notified, so no residency can be
//! taken before the opener reads: every page of it resident at the end of
//! the window counts (a late snapshot).

use super::residency;
use crate::readers::{read_mountinfo, read_ppid};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Filesystem types never marked: no storage behind them. (FUSE is marked
/// by a notification group of its own: see the module doc.)
const SKIP_FS: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "tmpfs",
    "ramfs",
    "cgroup",
    "cgroup2",
    "mqueue",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "autofs",
    "hugetlbfs",
    "configfs",
    "fusectl",
    "binfmt_misc",
    "nsfs",
    "efivarfs",
    "rpc_pipefs",
    "selinuxfs",
];

/// How long [`Watcher::finish`] waits for the FUSE watcher to stop.
const FUSE_JOIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A file the tree opened (or read) during the window.
#[derive(Debug)]
pub(crate) struct SeenFile {
    /// Path at first open (from the event descriptor).
    pub path: String,
    /// The event's descriptor, kept to measure residency after the window
    /// (None when the descriptor cap was reached; the path is reopened then).
    pub fd: Option<OwnedFd>,
    /// Size at first open, bytes.
    pub size_at_open: u64,
    /// Modification time at first open (seconds, nanoseconds).
    pub mtime_at_open: (i64, i64),
    /// When the first event of the tree on this file was handled.
    pub first_access: Instant,
    /// Residency before the tree's first open (one flag per page).
    pub before: Vec<u8>,
    /// True when `before` was taken while the opener was blocked (exact).
    pub before_exact: bool,
}

/// What the watcher saw.
#[derive(Debug, Default)]
pub(crate) struct WatchResult {
    /// Files of the tree, keyed by (device, inode).
    pub files: HashMap<(u64, u64), SeenFile>,
    /// Processes found to belong to the tree.
    pub tree_pids: BTreeSet<u32>,
    /// Events handled (all processes).
    pub events: u64,
    /// The notification queue overflowed (some `FAN_ACCESS` events lost).
    pub overflowed: bool,
    /// Files dropped from the page cache at first open (`--cold`).
    pub dropped: u64,
    /// Events whose file the kernel could not open for us (see
    /// [`lost_to_open`]): left out of the recording.
    pub unopenable: u64,
}

/// Whether a failed read of the fanotify group lost one event whose file
/// the kernel could not open to hand it to us, rather than the group
/// failing: the read returns that open's error and the event is gone
/// (fanotify(7), "read"). An app that creates and removes a temp file on a
/// FUSE mount makes the FUSE server's open of it fail with ENOENT once the
/// file is gone; a file on a mount we may not open gives EACCES; a full
/// descriptor table EMFILE. The recording goes on without that file.
fn lost_to_open(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENOENT
                | libc::EACCES
                | libc::EPERM
                | libc::ENXIO
                | libc::ENODEV
                | libc::ESTALE
                | libc::EIO
                | libc::EMFILE
                | libc::ENFILE
                | libc::EOVERFLOW
                | libc::ETXTBSY
                | libc::ENOTCONN
        )
    )
}

/// Which processes form the recorded tree.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tree {
    /// Descendants of this process (`appflow record` spawns the app; this
    /// process is made a child subreaper, so orphans stay descendants).
    Children,
    /// The process `pid` and its descendants (the daemon records an app it
    /// did not start; this process and its other children are never in it).
    Of(u32),
}

/// The running watcher threads: one answering permission events, and one
/// reading FUSE notifications when a FUSE filesystem is mounted.
pub(crate) struct Watcher {
    stop: Arc<AtomicBool>,
    /// Processes of the tree found so far (shared with the memory sampler).
    pub tree: Arc<Mutex<BTreeSet<u32>>>,
    handles: Vec<JoinHandle<io::Result<WatchResult>>>,
    /// Mount points whose filesystems are marked.
    pub marked: Vec<PathBuf>,
}

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
fn raise_nofile() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 1024;
        }
        if rl.rlim_cur < rl.rlim_max {
            let want = libc::rlimit {
                rlim_cur: rl.rlim_max,
                rlim_max: rl.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                rl.rlim_cur = rl.rlim_max;
            }
        }
    }
    rl.rlim_cur
}

impl Watcher {
    /// The processes of the watched tree known now (a copy).
    pub fn tree_now(&self) -> BTreeSet<u32> {
        self.tree.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Creates the fanotify groups, marks every storage-backed filesystem and
    /// starts answering events. `watch_reads` adds `FAN_ACCESS` notifications
    /// (one per read syscall of every process on the machine while recording).
    /// `tree` says which processes are recorded.
    pub fn start(proc_root: &Path, tree: Tree, cold: bool, watch_reads: bool) -> io::Result<Self> {
        let fan = init_group(libc::FAN_CLASS_CONTENT).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "fanotify not available (fanotify_init with permission events needs root and \
                     CONFIG_FANOTIFY_ACCESS_PERMISSIONS): {e}"
                ),
            )
        })?;
        let mut mask = libc::FAN_OPEN_PERM | libc::FAN_OPEN_EXEC_PERM;
        if watch_reads {
            mask |= libc::FAN_ACCESS;
        }
        let mounts = read_mountinfo(proc_root).map_err(io::Error::other)?;
        let mut devs = BTreeSet::new();
        let mut marked = Vec::new();
        let mut fuse_group: Option<OwnedFd> = None;
        for m in mounts {
            if SKIP_FS.contains(&m.fs_type.as_str()) {
                continue;
            }
            if !devs.insert(m.dev.clone()) {
                continue;
            }
            let fuse = m.fs_type.starts_with("fuse");
            let (group, mask) = if fuse {
                if fuse_group.is_none() {
                    match init_group(libc::FAN_CLASS_NOTIF) {
                        Ok(g) => fuse_group = Some(g),
                        Err(e) => {
                            tracing::warn!(error = %e, "no fanotify group for FUSE filesystems; files on them will not be recorded");
                            continue;
                        }
                    }
                }
                let g = fuse_group.as_ref().expect("created above");
                (g.as_raw_fd(), libc::FAN_OPEN | libc::FAN_OPEN_EXEC)
            } else {
                (fan.as_raw_fd(), mask)
            };
            let Ok(c) = std::ffi::CString::new(m.mount_point.as_os_str().as_encoded_bytes()) else {
                continue;
            };
            // SAFETY: valid fanotify fd and NUL-terminated path.
            let rc = unsafe {
                libc::fanotify_mark(
                    group,
                    libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
                    mask,
                    libc::AT_FDCWD,
                    c.as_ptr(),
                )
            };
            if rc == 0 {
                marked.push(m.mount_point);
            } else {
                tracing::warn!(
                    mount = %m.mount_point.display(),
                    fs = %m.fs_type,
                    error = %io::Error::last_os_error(),
                    "cannot watch this filesystem; files on it will not be recorded"
                );
            }
        }
        if marked.is_empty() {
            return Err(io::Error::other(
                "fanotify: no filesystem could be marked (FAN_MARK_FILESYSTEM needs CAP_SYS_ADMIN)",
            ));
        }
        if matches!(tree, Tree::Children) {
            // SAFETY: prctl with documented arguments.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        }
        let keep_cap = raise_nofile().saturating_sub(256) as usize;
        let stop = Arc::new(AtomicBool::new(false));
        let members = Membership::new(tree);
        let shared = members.shared.clone();
        let mut groups = vec![("appflow-fanotify", fan, members, false)];
        if let Some(g) = fuse_group {
            let fuse_members = Membership::with_shared(tree, shared.clone());
            groups.push(("appflow-fanotify-fuse", g, fuse_members, true));
        }
        // Each thread may keep its share of the descriptors.
        let keep_cap = keep_cap / groups.len();
        let mut handles = Vec::new();
        for (name, fan, members, fuse) in groups {
            let stop2 = stop.clone();
            let proc_root = proc_root.to_path_buf();
            let spawned = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    event_loop(
                        fan,
                        &proc_root,
                        cold && !fuse,
                        keep_cap,
                        &stop2,
                        members,
                        fuse,
                    )
                });
            // A thread already started stops (and drops its group) when a
            // later one cannot be.
            let spawned = spawned.inspect_err(|_| stop.store(true, Ordering::SeqCst))?;
            handles.push(spawned);
        }
        Ok(Self {
            stop,
            tree: shared,
            handles,
            marked,
        })
    }

    /// Stops answering (after draining pending events) and returns what was seen.
    pub fn finish(self) -> io::Result<WatchResult> {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = WatchResult::default();
        // Join every thread before the first error is returned. The FUSE
        // thread (the second) may be blocked in a read that waits on a hung
        // FUSE server: it is given FUSE_JOIN_WAIT, then left behind (it ends
        // with the server's answer) and what the first thread saw is kept.
        let mut results = Vec::new();
        for (i, h) in self.handles.into_iter().enumerate() {
            if i > 0 {
                let t0 = Instant::now();
                while !h.is_finished() && t0.elapsed() < FUSE_JOIN_WAIT {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                if !h.is_finished() {
                    tracing::warn!(
                        "the FUSE watcher did not stop within {FUSE_JOIN_WAIT:?} (a FUSE server not answering?); its files are left out"
                    );
                    continue;
                }
            }
            results.push(
                h.join()
                    .map_err(|_| io::Error::other("fanotify thread panicked"))
                    .and_then(|r| r),
            );
        }
        for r in results {
            let r = r?;
            for (k, f) in r.files {
                all.files.entry(k).or_insert(f);
            }
            all.tree_pids.extend(r.tree_pids);
            all.events += r.events;
            all.overflowed |= r.overflowed;
            all.dropped += r.dropped;
            all.unopenable += r.unopenable;
        }
        Ok(all)
    }
}

/// A new fanotify group of `class` (non-blocking, unlimited queue, events'
/// descriptors read-only).
fn init_group(class: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; result checked.
    let raw = unsafe {
        libc::fanotify_init(
            class | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK | libc::FAN_UNLIMITED_QUEUE,
            (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC) as libc::c_uint,
        )
    };
    if raw < 0 {
        return Err(last_err("fanotify_init"));
    }
    // SAFETY: raw is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn allow(fan: RawFd, fd: RawFd) {
    let resp = libc::fanotify_response {
        fd,
        response: libc::FAN_ALLOW,
    };
    // SAFETY: writes a fanotify_response to the fanotify descriptor.
    unsafe {
        libc::write(
            fan,
            &resp as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::fanotify_response>(),
        );
    }
}

/// Tree membership, cached. Positive answers are final (a pid of the tree
/// stays in it for the window). Negative answers are cached only for read
/// notifications, which come in floods from every process on the machine;
/// opens (permission events) are always checked afresh, so a pid reused by
/// a new child of the tree is still recognised when it opens a file.
struct Membership {
    self_pid: u32,
    /// A process whose children are in the tree (this one, `Tree::Children`).
    anchor: Option<u32>,
    known: BTreeSet<u32>,
    outside: BTreeSet<u32>,
    shared: Arc<Mutex<BTreeSet<u32>>>,
}

impl Membership {
    fn new(tree: Tree) -> Self {
        let known = match tree {
            Tree::Children => BTreeSet::new(),
            Tree::Of(root) => BTreeSet::from([root]),
        };
        Self::with_shared(tree, Arc::new(Mutex::new(known)))
    }

    /// A second view of the same tree (another group's thread): what either
    /// finds is shared.
    fn with_shared(tree: Tree, shared: Arc<Mutex<BTreeSet<u32>>>) -> Self {
        let self_pid = std::process::id();
        let (anchor, known) = match tree {
            Tree::Children => (Some(self_pid), BTreeSet::new()),
            Tree::Of(root) => (None, BTreeSet::from([root])),
        };
        Self {
            self_pid,
            anchor,
            shared,
            known,
            outside: BTreeSet::new(),
        }
    }

    fn check(&mut self, proc_root: &Path, pid: u32, perm: bool) -> bool {
        if pid == self.self_pid || pid == 0 {
            return false;
        }
        if self.known.contains(&pid) {
            return true;
        }
        // `Tree::Of`: the caller adds the tree's new processes (from the
        // kernel's fork events) to the shared set, so it is checked first,
        // and a process found outside stays outside: without this every
        // open on the machine walked its parent chain through /proc while
        // the daemon recorded (a loaded machine queued the app's own opens
        // behind thousands of others'). A pid reused by a new child of the
        // tree is recognised once the caller has added it.
        let of_tree = self.anchor.is_none();
        if of_tree {
            if let Ok(s) = self.shared.lock() {
                if s.contains(&pid) {
                    self.known.extend(s.iter().copied());
                    return true;
                }
            }
        }
        if (!perm || of_tree) && self.outside.contains(&pid) {
            return false;
        }
        let mut chain = vec![pid];
        let mut cur = pid;
        let mut inside = false;
        for _ in 0..128 {
            let Ok(ppid) = read_ppid(proc_root, cur) else {
                break;
            };
            if Some(ppid) == self.anchor || self.known.contains(&ppid) {
                inside = true;
                break;
            }
            if ppid <= 1 {
                break;
            }
            chain.push(ppid);
            cur = ppid;
        }
        if inside {
            if let Ok(mut s) = self.shared.lock() {
                s.extend(chain.iter().copied());
            }
            self.known.extend(chain);
        } else {
            self.outside.insert(pid);
        }
        inside
    }
}

fn event_loop(
    fan: OwnedFd,
    proc_root: &Path,
    cold: bool,
    keep_cap: usize,
    stop: &AtomicBool,
    mut members: Membership,
    fuse: bool,
) -> io::Result<WatchResult> {
    // Every open on the machine waits for this thread while it records:
    // run it ahead of ordinary work (nice -10) to keep that wait short.
    // SAFETY: setpriority on this thread's id.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10);
    }
    let mut res = WatchResult::default();
    let mut kept = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let meta_len = std::mem::size_of::<libc::fanotify_event_metadata>();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let mut pfd = libc::pollfd {
            fd: fan.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, if stopping { 0 } else { 10 }) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            if stopping {
                res.tree_pids = std::mem::take(&mut members.known);
                return Ok(res);
            }
            continue;
        }
        // SAFETY: reading into our buffer.
        let len = unsafe { libc::read(fan.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if len < 0 {
            let e = io::Error::last_os_error();
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) {
                continue;
            }
            if lost_to_open(&e) {
                res.unopenable += 1;
                tracing::debug!(error = %e, "a fanotify event's file could not be opened; left out");
                continue;
            }
            return Err(e);
        }
        let len = len as usize;
        let mut off = 0usize;
        while off + meta_len <= len {
            // SAFETY: the kernel wrote a whole fanotify_event_metadata at `off`
            // (event_len checked below); read_unaligned copes with alignment.
            let m: libc::fanotify_event_metadata =
                unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
            if m.event_len as usize == 0 || off + m.event_len as usize > len {
                break;
            }
            off += m.event_len as usize;
            res.events += 1;
            if m.vers != libc::FANOTIFY_METADATA_VERSION {
                return Err(io::Error::other(format!(
                    "fanotify metadata version {} (expected {})",
                    m.vers,
                    libc::FANOTIFY_METADATA_VERSION
                )));
            }
            if m.mask & libc::FAN_Q_OVERFLOW != 0 {
                res.overflowed = true;
                continue;
            }
            if m.fd < 0 {
                continue;
            }
            // SAFETY: the kernel gave us this descriptor; we own it now.
            let efd = unsafe { OwnedFd::from_raw_fd(m.fd) };
            let perm = m.mask & (libc::FAN_OPEN_PERM | libc::FAN_OPEN_EXEC_PERM) != 0;
            let pid = m.pid as u32;
            if !members.check(proc_root, pid, perm) {
                if perm {
                    allow(fan.as_raw_fd(), m.fd);
                }
                continue;
            }
            let keep =
                handle_tree_event(&mut res, &efd, proc_root, cold, perm, fuse, kept < keep_cap);
            if perm {
                allow(fan.as_raw_fd(), m.fd);
            }
            if let Some((key, true)) = keep {
                kept += 1;
                if let Some(f) = res.files.get_mut(&key) {
                    f.fd = Some(efd);
                }
            }
        }
    }
}

/// Registers the file of a tree event the first time it is seen: takes its
/// residency (after dropping it when `cold`). A FUSE file's open is only
/// notified, after the opener went on: a snapshot then would hide what the
/// opener read meanwhile (a small file is often read whole by then), so no
/// "before" is taken and every page resident at the end of the window
/// counts as the launch's. Returns the file key and whether the descriptor
/// should be kept.
fn handle_tree_event(
    res: &mut WatchResult,
    efd: &OwnedFd,
    proc_root: &Path,
    cold: bool,
    perm: bool,
    fuse: bool,
    may_keep: bool,
) -> Option<((u64, u64), bool)> {
    let now = Instant::now();
    // SAFETY: fstat into a zeroed struct on a valid descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(efd.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let key = (st.st_dev, st.st_ino);
    if res.files.contains_key(&key) {
        return None;
    }
    let link = proc_root
        .join("self")
        .join("fd")
        .join(efd.as_raw_fd().to_string());
    let path = std::fs::read_link(&link)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let size = st.st_size.max(0) as u64;
    if cold && perm && size > 0 && residency::drop_from_cache(efd.as_fd()).is_ok() {
        res.dropped += 1;
    }
    let before = if fuse {
        Vec::new()
    } else {
        residency::residency(efd.as_fd(), size).unwrap_or_default()
    };
    res.files.insert(
        key,
        SeenFile {
            path,
            fd: None,
            size_at_open: size,
            mtime_at_open: (st.st_mtime, st.st_mtime_nsec),
            first_access: now,
            before,
            before_exact: perm,
        },
    );
    Some((key, may_keep))
}
