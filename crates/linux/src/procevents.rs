//! Process events from the kernel's process connector (`cn_proc`): fork,
//! exec and exit of every process on the machine, pushed by the kernel over
//! a `NETLINK_CONNECTOR` socket subscribed to the `CN_IDX_PROC` group.
//!
//! This is how the daemon sees a launch the moment it happens without a
//! launcher telling it (the exec event carries the kernel's monotonic
//! timestamp), and sees short-lived children that a periodic /proc scan
//! would miss. Cost and the comparison with polling /proc: docs/daemon.md
//! ("Launch detection").
//!
//! * [`parse_datagram`] is a pure parser of what one `recv` returns
//!   (`nlmsghdr` + `cn_msg` + `proc_event`, layouts of
//!   `include/uapi/linux/{netlink,connector,cn_proc}.h`), unit-tested on
//!   captured bytes.
//! * [`ProcEvents`] is the non-blocking listener the daemon polls once per
//!   tick with [`ProcEvents::drain`]. When the socket's receive buffer
//!   overflowed (`ENOBUFS`) events were lost and [`ProcEvent::Overrun`] tells
//!   the caller to rescan /proc.
//!
//! Subscribing needs `CAP_NET_ADMIN` on kernels before 6.6 (`cn_proc`'s
//! `cn_proc_mcast_ctl`); since 6.6 a listener may also ask the kernel to
//! filter by event type (`struct proc_input`), which [`ProcEvents::open`]
//! asks for after the acknowledged legacy subscription.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `CN_IDX_PROC` / `CN_VAL_PROC` (connector.h).
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
/// `enum proc_cn_mcast_op`.
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;
/// `enum what` of `struct proc_event`.
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXEC: u32 = 2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
/// `nlmsghdr` is 16 bytes, `cn_msg` 20 (`cb_id` 8, seq 4, ack 4, len 2, flags 2).
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
/// `proc_event`: what 4, cpu 4, timestamp_ns 8, then the event union.
const EV_DATA: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;

/// Receive buffer asked for (`SO_RCVBUFFORCE` as root, else `SO_RCVBUF`,
/// capped by `net.core.rmem_max`). One event occupies one skb of about
/// 768 bytes of truesize; 2,000 processes per second make ~6,000 events per
/// second (fork, exec, exit), ~600 per 100 ms tick, ~0.5 MiB. 4 MiB holds
/// eight ticks of that before the kernel drops events.
pub const RCVBUF_BYTES: usize = 4 << 20;

/// One event of the process connector. `pid` is the thread id, `tgid` the
/// process id (they are equal for a process's main thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcEvent {
    /// `fork`/`clone` (a new thread when `child_pid != child_tgid`).
    Fork {
        parent_pid: u32,
        parent_tgid: u32,
        child_pid: u32,
        child_tgid: u32,
        /// Kernel monotonic clock (`CLOCK_MONOTONIC`), ns.
        time_ns: u64,
    },
    /// `execve` completed: the process now runs a new program.
    Exec {
        pid: u32,
        tgid: u32,
        /// Kernel monotonic clock (`CLOCK_MONOTONIC`), ns: the launch's start.
        time_ns: u64,
    },
    /// A thread exited (the whole process when `pid == tgid`).
    Exit {
        pid: u32,
        tgid: u32,
        exit_code: u32,
        time_ns: u64,
    },
    /// Events were lost (the receive buffer overflowed): rescan /proc.
    Overrun,
}

impl ProcEvent {
    /// True for events about a process (main thread), not a secondary thread.
    pub fn is_process(&self) -> bool {
        match *self {
            ProcEvent::Fork {
                child_pid,
                child_tgid,
                ..
            } => child_pid == child_tgid,
            ProcEvent::Exec { pid, tgid, .. } | ProcEvent::Exit { pid, tgid, .. } => pid == tgid,
            ProcEvent::Overrun => true,
        }
    }
}

/// What one netlink message of the connector carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A process event.
    Event(ProcEvent),
    /// The kernel's acknowledgement of a subscription (`PROC_EVENT_NONE`), with its errno.
    Ack { err: u32 },
    /// Another event type (uid, gid, sid, ptrace, comm, coredump), or a
    /// message of another connector: skipped.
    Other,
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Parses one `proc_event` (the `cn_msg` payload).
pub fn parse_proc_event(ev: &[u8]) -> Option<Parsed> {
    let what = u32_at(ev, 0)?;
    let time_ns = u64_at(ev, 8)?;
    let d = |i: usize| u32_at(ev, EV_DATA + 4 * i);
    Some(match what {
        PROC_EVENT_NONE => Parsed::Ack { err: d(0)? },
        PROC_EVENT_FORK => Parsed::Event(ProcEvent::Fork {
            parent_pid: d(0)?,
            parent_tgid: d(1)?,
            child_pid: d(2)?,
            child_tgid: d(3)?,
            time_ns,
        }),
        PROC_EVENT_EXEC => Parsed::Event(ProcEvent::Exec {
            pid: d(0)?,
            tgid: d(1)?,
            time_ns,
        }),
        PROC_EVENT_EXIT => Parsed::Event(ProcEvent::Exit {
            pid: d(0)?,
            tgid: d(1)?,
            exit_code: d(2)?,
            time_ns,
        }),
        _ => Parsed::Other,
    })
}

/// Parses what one `recv` on the connector socket returned: a sequence of
/// netlink messages, each `nlmsghdr` + `cn_msg` + payload. Truncated or
/// malformed messages end the walk (what was parsed before them is kept);
/// `NLMSG_OVERRUN` becomes [`ProcEvent::Overrun`].
pub fn parse_datagram(buf: &[u8]) -> Vec<Parsed> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + NLMSG_HDRLEN <= buf.len() {
        let Some(len) = u32_at(buf, off).map(|l| l as usize) else {
            break;
        };
        let Some(ty) = u16_at(buf, off + 4) else {
            break;
        };
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            break;
        }
        let msg = &buf[off + NLMSG_HDRLEN..off + len];
        match ty {
            NLMSG_OVERRUN => out.push(Parsed::Event(ProcEvent::Overrun)),
            NLMSG_NOOP | NLMSG_ERROR => {}
            _ => {
                // The connector sends NLMSG_DONE-typed messages; accept any
                // data type but check the connector id.
                if let (Some(idx), Some(val), Some(dlen)) =
                    (u32_at(msg, 0), u32_at(msg, 4), u16_at(msg, 16))
                {
                    let data = msg.get(CN_MSG_LEN..CN_MSG_LEN + dlen as usize);
                    match data {
                        Some(d) if idx == CN_IDX_PROC && val == CN_VAL_PROC => {
                            out.push(parse_proc_event(d).unwrap_or(Parsed::Other))
                        }
                        _ => out.push(Parsed::Other),
                    }
                }
            }
        }
        // NLMSG_ALIGN(len)
        off += (len + 3) & !3;
    }
    out
}

/// Builds the subscription message: `nlmsghdr` + `cn_msg` + payload, where
/// the payload is the legacy `enum proc_cn_mcast_op` (4 bytes) or, with
/// `filter`, a `struct proc_input { mcast_op, event_type }` (8 bytes, 6.6+).
fn subscribe_message(op: u32, filter: Option<u32>, portid: u32) -> Vec<u8> {
    let mut payload = op.to_ne_bytes().to_vec();
    if let Some(f) = filter {
        payload.extend_from_slice(&f.to_ne_bytes());
    }
    let total = NLMSG_HDRLEN + CN_MSG_LEN + payload.len();
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&portid.to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // ack
    m.extend_from_slice(&(payload.len() as u16).to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&payload);
    m
}

/// How the kernel filters events for this listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Subscription {
    /// Kernel-side filter to fork, exec and exit (Linux 6.6+, judged from the release).
    Filtered,
    /// Every event type; the others are skipped in user space.
    All,
}

/// `Filtered` when the kernel release (`uname -r`) is 6.6 or later.
pub fn kernel_filters(release: &str) -> Option<Subscription> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = it.next()?.parse().ok()?;
    let minor: u32 = it.next()?.parse().ok()?;
    Some(if (major, minor) >= (6, 6) {
        Subscription::Filtered
    } else {
        Subscription::All
    })
}

fn read_release() -> String {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    // SAFETY: the kernel NUL-terminates release.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// A non-blocking `cn_proc` listener.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
    portid: u32,
    subscription: Subscription,
    buf: Vec<u8>,
    /// Events received and skipped (other types, other connectors), for metrics.
    pub skipped: u64,
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl ProcEvents {
    /// Opens the socket, subscribes, and waits (≤ 250 ms) for the kernel's
    /// acknowledgement. Fails with the kernel's error (`EPERM` without
    /// `CAP_NET_ADMIN` on kernels before 6.6, `EPROTONOSUPPORT` without
    /// `CONFIG_PROC_EVENTS`).
    pub fn open() -> io::Result<Self> {
        // SAFETY: plain socket(2) call; a non-negative result is a new fd we own.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh descriptor returned by the kernel.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = RCVBUF_BYTES as libc::c_int;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: valid fd, pointer to a c_int of the given length.
            let r = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&size as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
        }
        // SAFETY: sockaddr_nl is plain old data; zeroed is a valid value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: addr is a valid sockaddr_nl of the given length.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: addr/len are valid out-parameters.
        let r = unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                (&mut addr as *mut libc::sockaddr_nl).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut me = Self {
            fd,
            portid: addr.nl_pid,
            subscription: Subscription::Filtered,
            buf: vec![0u8; 64 << 10],
            skipped: 0,
        };
        // The legacy request (every event type) is acknowledged by the
        // kernel, which tells us the subscription took (or why not). A
        // filtered request would not be: the kernel's own filter drops the
        // acknowledgement (`PROC_EVENT_NONE` matches no filter bit).
        me.send(&subscribe_message(PROC_CN_MCAST_LISTEN, None, me.portid))?;
        match me.wait_ack()? {
            Some(0) => {}
            Some(e) => return Err(io::Error::from_raw_os_error(e as i32)),
            None => return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        }
        // Then narrow it to fork/exec/exit. Kernels before 6.6 ignore an
        // 8-byte request, leaving the subscription to every event (skipped
        // here, counted in `skipped`).
        let filter = PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT;
        me.send(&subscribe_message(
            PROC_CN_MCAST_LISTEN,
            Some(filter),
            me.portid,
        ))?;
        me.subscription = kernel_filters(&read_release()).unwrap_or(Subscription::All);
        Ok(me)
    }

    /// Asks the kernel to drop, before they reach this socket, the events
    /// of threads (a fork that makes a thread, a thread's exec or exit):
    /// a classic BPF socket filter keeps fork events whose child is a
    /// process (`child_pid == child_tgid`), exec and exit events of a
    /// process's main thread (`pid == tgid`), and every other message
    /// (acknowledgements). A multi-threaded build makes hundreds of thread
    /// events per second; received and discarded one by one, they cost the
    /// daemon's listener 0.19 % of a core on this machine.
    pub fn drop_thread_events(&self) -> io::Result<()> {
        // Offsets in the datagram: nlmsghdr (16) + cn_msg (20), then
        // proc_event: what (4), cpu (4), timestamp (8), the event's data.
        const WHAT: u32 = (NLMSG_HDRLEN + CN_MSG_LEN) as u32;
        const DATA: u32 = WHAT + EV_DATA as u32;
        // Absolute loads read big-endian; the fields are in host order.
        let k = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
        let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const ST: u16 = 0x02; // BPF_ST (M[k] = A)
        const LDX_MEM: u16 = 0x61; // BPF_LDX | BPF_W | BPF_MEM
        const JA: u16 = 0x05; // BPF_JMP | BPF_JA
        const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
        const JEQ_X: u16 = 0x1d; // BPF_JMP | BPF_JEQ | BPF_X
        const RET: u16 = 0x06; // BPF_RET | BPF_K
        let mut prog = [
            op(LD_ABS, 0, 0, WHAT),              // 0: A = what
            op(JEQ_K, 0, 4, k(PROC_EVENT_FORK)), // 1: fork? else 6
            op(LD_ABS, 0, 0, DATA + 12),         // 2: child_tgid
            op(ST, 0, 0, 0),                     // 3
            op(LD_ABS, 0, 0, DATA + 8),          // 4: child_pid
            op(JA, 0, 0, 5),                     // 5: to 11
            op(JEQ_K, 1, 0, k(PROC_EVENT_EXEC)), // 6: exec? to 8
            op(JEQ_K, 0, 5, k(PROC_EVENT_EXIT)), // 7: exit? else 13
            op(LD_ABS, 0, 0, DATA + 4),          // 8: tgid
            op(ST, 0, 0, 0),                     // 9
            op(LD_ABS, 0, 0, DATA),              // 10: pid
            op(LDX_MEM, 0, 0, 0),                // 11: X = M[0]
            op(JEQ_X, 0, 1, 0),                  // 12: pid == tgid?
            op(RET, 0, 0, u32::MAX),             // 13: keep
            op(RET, 0, 0, 0),                    // 14: drop
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: valid fd; fprog points at `prog`, alive for the call (the
        // kernel copies the program).
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&fprog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// How the kernel filters for this listener.
    pub fn subscription(&self) -> Subscription {
        self.subscription
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: sockaddr_nl is plain old data.
        let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: msg and to are valid for the given lengths.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Waits up to 250 ms for a subscription acknowledgement; `Some(errno)`.
    fn wait_ack(&mut self) -> io::Result<Option<u32>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(250);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as libc::c_int) };
            if r < 0 && errno() != libc::EINTR {
                return Err(io::Error::last_os_error());
            }
            while let Some(n) = self.recv_once()? {
                for p in parse_datagram(&self.buf[..n]) {
                    if let Parsed::Ack { err } = p {
                        return Ok(Some(err));
                    }
                }
            }
        }
    }

    /// One non-blocking `recv`: `Ok(None)` when nothing is pending.
    /// `ENOBUFS` is returned as an error kind the caller maps to an overrun.
    fn recv_once(&mut self) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: buf is valid for writes of its length.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r >= 0 {
                return Ok(Some(r as usize));
            }
            match errno() {
                libc::EINTR => continue,
                libc::EAGAIN => return Ok(None),
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }

    /// Everything pending, without blocking: fork, exec and exit events in
    /// kernel order, and one [`ProcEvent::Overrun`] (first) if the kernel
    /// dropped events since the last call. Other errors end the drain
    /// (logged by the caller through the next call's result, never a panic).
    pub fn drain(&mut self) -> Vec<ProcEvent> {
        let mut out = Vec::new();
        let mut overrun = false;
        loop {
            match self.recv_once() {
                Ok(Some(n)) => {
                    for p in parse_datagram(&self.buf[..n]) {
                        match p {
                            Parsed::Event(ProcEvent::Overrun) => overrun = true,
                            Parsed::Event(e) => out.push(e),
                            Parsed::Ack { .. } | Parsed::Other => self.skipped += 1,
                        }
                    }
                }
                Ok(None) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => overrun = true,
                Err(_) => break,
            }
        }
        if overrun {
            out.insert(0, ProcEvent::Overrun);
        }
        out
    }
}

impl AsFd for ProcEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for ProcEvents {
    fn drop(&mut self) {
        // Lets the kernel stop building events when we were the last listener.
        let _ = self.send(&subscribe_message(PROC_CN_MCAST_IGNORE, None, self.portid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a datagram the way the kernel does (`cn_netlink_send_mult`:
    /// `nlmsghdr` type NLMSG_DONE, `cn_msg` {idx 1, val 1}, `proc_event`
    /// of 40 bytes: what, cpu, timestamp, 24-byte union).
    fn kernel_msg(what: u32, ts: u64, data: &[u32]) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&1u32.to_ne_bytes()); // cpu
        ev.extend_from_slice(&ts.to_ne_bytes());
        for d in data {
            ev.extend_from_slice(&d.to_ne_bytes());
        }
        ev.resize(40, 0);
        let total = NLMSG_HDRLEN + CN_MSG_LEN + ev.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(total as u32).to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m.extend_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&(ev.len() as u16).to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&ev);
        m
    }

    /// Datagrams captured on this machine (Linux 6.18, x86-64) by `recv` on
    /// a subscribed socket while a Python process (pid 15442) ran
    /// `/bin/true` (pid 15501): fork, exec, exit, in that order.
    const CAPTURED_FORK: &str = "4c000000030000000300000000000000010000000100000003000000000000002800000001000000000000\
                                 00b785c91a79000000523c0000523c00008d3c00008d3c00000000000000000000";
    const CAPTURED_EXEC: &str = "4c000000030000000000000000000000010000000100000000000000000000002800000002000000010000\
                                 0078d0e61a790000008d3c00008d3c000000000000000000000000000000000000";
    const CAPTURED_EXIT: &str = "4c000000030000000100000000000000010000000100000001000000000000002800000000000080010000\
                                 005b54f11a790000008d3c00008d3c00000000000011000000523c0000523c0000";

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn parses_captured_fork_exec_exit() {
        let mut d = hex(CAPTURED_FORK);
        d.extend(hex(CAPTURED_EXEC));
        d.extend(hex(CAPTURED_EXIT));
        assert_eq!(
            parse_datagram(&d),
            vec![
                Parsed::Event(ProcEvent::Fork {
                    parent_pid: 15442,
                    parent_tgid: 15442,
                    child_pid: 15501,
                    child_tgid: 15501,
                    time_ns: 0x79_1ac9_85b7,
                }),
                Parsed::Event(ProcEvent::Exec {
                    pid: 15501,
                    tgid: 15501,
                    time_ns: 0x79_1ae6_d078,
                }),
                Parsed::Event(ProcEvent::Exit {
                    pid: 15501,
                    tgid: 15501,
                    exit_code: 0,
                    time_ns: 0x79_1af1_545b,
                }),
            ]
        );
    }

    #[test]
    fn parses_fork_exit_ack_and_skips_others() {
        let mut d = kernel_msg(PROC_EVENT_FORK, 10, &[100, 100, 101, 101]);
        d.extend(kernel_msg(0x200, 11, &[101, 101])); // comm event: skipped
        d.extend(kernel_msg(
            PROC_EVENT_EXIT,
            12,
            &[101, 101, 256, 17, 100, 100],
        ));
        d.extend(kernel_msg(PROC_EVENT_NONE, 0, &[0]));
        let p = parse_datagram(&d);
        assert_eq!(
            p,
            vec![
                Parsed::Event(ProcEvent::Fork {
                    parent_pid: 100,
                    parent_tgid: 100,
                    child_pid: 101,
                    child_tgid: 101,
                    time_ns: 10
                }),
                Parsed::Other,
                Parsed::Event(ProcEvent::Exit {
                    pid: 101,
                    tgid: 101,
                    exit_code: 256,
                    time_ns: 12
                }),
                Parsed::Ack { err: 0 },
            ]
        );
        assert!(!ProcEvent::Fork {
            parent_pid: 1,
            parent_tgid: 1,
            child_pid: 3,
            child_tgid: 1,
            time_ns: 0
        }
        .is_process());
    }

    #[test]
    fn truncated_and_garbage_input_never_panics() {
        let full = kernel_msg(PROC_EVENT_EXEC, 5, &[7, 7]);
        for n in 0..full.len() {
            let p = parse_datagram(&full[..n]);
            assert!(p.is_empty(), "prefix {n} parsed as {p:?}");
        }
        // A length field pointing past the end, and one below the header size.
        let mut bad = full.clone();
        bad[0] = 0xff;
        assert!(parse_datagram(&bad).is_empty());
        bad[0] = 4;
        bad[1..4].fill(0);
        assert!(parse_datagram(&bad).is_empty());
        // cn_msg.len larger than the message: skipped, not read out of bounds.
        let mut long = full.clone();
        long[NLMSG_HDRLEN + 16] = 0xff;
        assert_eq!(parse_datagram(&long), vec![Parsed::Other]);
        // Another connector's message.
        let mut other = full;
        other[NLMSG_HDRLEN] = 9;
        assert_eq!(parse_datagram(&other), vec![Parsed::Other]);
        // Pseudo-random bytes.
        let mut x: u32 = 0x1234_5678;
        for _ in 0..200 {
            let b: Vec<u8> = (0..97)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = parse_datagram(&b);
        }
    }

    #[test]
    fn overrun_message_is_reported() {
        let mut m = vec![0u8; NLMSG_HDRLEN];
        m[0] = NLMSG_HDRLEN as u8;
        m[4] = NLMSG_OVERRUN as u8;
        assert_eq!(parse_datagram(&m), vec![Parsed::Event(ProcEvent::Overrun)]);
    }

    #[test]
    fn kernel_filter_support_by_release() {
        assert_eq!(
            kernel_filters("6.18.44-fc-v782"),
            Some(Subscription::Filtered)
        );
        assert_eq!(kernel_filters("6.6.0"), Some(Subscription::Filtered));
        assert_eq!(kernel_filters("6.1.0-13-amd64"), Some(Subscription::All));
        assert_eq!(kernel_filters("5.10.0"), Some(Subscription::All));
        assert_eq!(kernel_filters("garbage"), None);
    }

    #[test]
    fn subscription_message_layout() {
        let m = subscribe_message(PROC_CN_MCAST_LISTEN, None, 77);
        assert_eq!(m.len(), 40);
        assert_eq!(u32_at(&m, 0), Some(40));
        assert_eq!(u32_at(&m, 12), Some(77));
        assert_eq!(u16_at(&m, NLMSG_HDRLEN + 16), Some(4));
        assert_eq!(u32_at(&m, NLMSG_HDRLEN + CN_MSG_LEN), Some(1));
        let f = subscribe_message(PROC_CN_MCAST_LISTEN, Some(3), 77);
        assert_eq!(f.len(), 44);
        assert_eq!(u32_at(&f, NLMSG_HDRLEN + CN_MSG_LEN + 4), Some(3));
    }
}
