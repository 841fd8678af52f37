//! The control socket (protocol in docs/daemon.md): a Unix stream socket, mode 0600, one JSON
//! request per line and one JSON reply per line.
//!
//! Requests: `{"cmd":"status"}`, `{"cmd":"metrics"}`,
//! `{"cmd":"notify","event":"launch"|"launched"|"foreground"|"background"|"exit","app":"NAME","pid":1234}`.
//! Replies: `{"ok":true,...}` or `{"ok":false,"error":"..."}`.
//!
//! Peers are checked with SO_PEERCRED: only uid 0 and the daemon's own uid
//! are served. Lines longer than [`MAX_LINE_BYTES`], malformed JSON and
//! unknown commands get an error reply; the daemon keeps running. The
//! accept loop runs on its own thread and hands each valid request to the
//! main loop through a channel, so every decision stays on the loop thread.
//!
//! Limits, so that a stuck or hostile client cannot starve `status`:
//! - a whole request must arrive within [`REQUEST_DEADLINE`] of the
//!   connection (or of the previous reply), however it trickles in;
//! - at most [`MAX_CONNECTIONS`] are served at once; when all are taken, the
//!   connection waiting longest for its request is closed to make room
//!   (or, when every one has a request with the main loop, the oldest of
//!   those: its reply is lost, a new client is always served);
//! - a reply is serialised first and written in one `write` (within
//!   [`REPLY_DEADLINE`]); one above [`MAX_REPLY_BYTES`] becomes an error.

use crate::daemon::EventKind;
use appflow_core::InputError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest request line accepted.
pub const MAX_LINE_BYTES: u64 = 64 * 1024;
/// Most connections served at once (one small thread each): room for a
/// launcher, `status` pollers and a few hundred concurrent clients.
pub const MAX_CONNECTIONS: usize = 256;
/// Stack of a connection thread (it parses one line and writes one reply).
const CONN_STACK_BYTES: usize = 256 << 10;
/// Time a client has to send a whole request line (`appflow status` and
/// `notify` send theirs at once).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Time a client has to take a whole reply.
pub const REPLY_DEADLINE: Duration = Duration::from_secs(5);
/// Largest reply sent (a `status` with every app table entry is far below).
pub const MAX_REPLY_BYTES: usize = 4 << 20;
/// Longest wait for the main loop's answer to one request.
const LOOP_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A control request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The daemon's state.
    Status {},
    /// Prometheus text metrics (in the reply's "text").
    Metrics {},
    /// A launch or foreground notification.
    Notify {
        /// What happened.
        event: EventKind,
        /// The app.
        app: String,
        /// Its process, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
}

/// Parses one request line (without its newline): JSON of a known command,
/// no unknown field, and for `notify` an app name that passes
/// [`appflow_core::valid_app_name`]. `Err` is the message of the error reply.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let req: Request =
        serde_json::from_str(line.trim()).map_err(|e| format!("bad request: {e}"))?;
    if let Request::Notify { app, .. } = &req {
        appflow_core::valid_app_name(app)
            .map_err(|why| format!("bad request: invalid app name {app:?}: {why}"))?;
    }
    Ok(req)
}

/// A request waiting for the main loop's reply.
#[derive(Debug)]
pub struct Incoming {
    /// The request.
    pub req: Request,
    /// Where the reply goes.
    pub reply: mpsc::Sender<Value>,
}

/// The listening socket and its accept thread.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    ident: Option<(u64, u64)>,
    stop: Arc<AtomicBool>,
    /// Requests refused (malformed, unauthorised, too long).
    pub errors: Arc<AtomicU64>,
}

/// An error reply.
pub fn error_reply(msg: impl std::fmt::Display) -> Value {
    json!({"ok": false, "error": msg.to_string()})
}

fn peer_allowed(stream: &UnixStream) -> Result<(), String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials).map_err(|e| format!("SO_PEERCRED: {e}"))?;
    let me = nix::unistd::geteuid().as_raw();
    if cred.uid() == 0 || cred.uid() == me {
        Ok(())
    } else {
        Err(format!(
            "uid {} is not allowed (only root and uid {me})",
            cred.uid()
        ))
    }
}

/// The connections being served, so the accept loop can close the one
/// waiting longest for its request when all slots are taken.
#[derive(Debug, Default)]
struct Conns {
    next_id: u64,
    open: BTreeMap<u64, Conn>,
}

#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    /// Since when it has been waiting for (or reading) its request.
    since: Instant,
    /// Its request is with the main loop (never closed then).
    busy: bool,
}

type Registry = Arc<Mutex<Conns>>;

fn lock(r: &Registry) -> std::sync::MutexGuard<'_, Conns> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

impl Conns {
    fn set(&mut self, id: u64, busy: bool) {
        if let Some(c) = self.open.get_mut(&id) {
            c.busy = busy;
            c.since = Instant::now();
        }
    }

    /// Makes room for one more connection: closes the one waiting longest
    /// for its request, or else the oldest waiting for the main loop.
    fn make_room(&mut self) {
        if self.open.len() < MAX_CONNECTIONS {
            return;
        }
        let victim = self
            .open
            .iter()
            .min_by_key(|(_, c)| (c.busy, c.since))
            .map(|(&id, _)| id);
        if let Some(c) = victim.and_then(|id| self.open.remove(&id)) {
            // Its thread's read or write fails at once and it ends.
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// What reading one request line gave.
enum LineRead {
    Line(String),
    Eof,
    TooLong,
    Late,
    Failed(std::io::Error),
}

/// Reads one line from `stream` (bytes past it stay in `pending`), all of
/// it before `deadline`.
fn read_line_by(
    stream: &mut UnixStream,
    pending: &mut Vec<u8>,
    deadline: Instant,
    max_bytes: u64,
) -> LineRead {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            return LineRead::Line(String::from_utf8_lossy(&line).into_owned());
        }
        if pending.len() as u64 >= max_bytes {
            return LineRead::TooLong;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return LineRead::Late;
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) if pending.is_empty() => return LineRead::Eof,
            // A last request without its newline.
            Ok(0) => {
                let line = std::mem::take(pending);
                return LineRead::Line(String::from_utf8_lossy(&line).into_owned());
            }
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return LineRead::Late
            }
            Err(e) => return LineRead::Failed(e),
        }
    }
}

/// One reply as bytes (a line), or an error reply when it is too large.
fn reply_bytes(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    if b.len() >= MAX_REPLY_BYTES {
        b = serde_json::to_vec(&error_reply(format!(
            "reply of {} bytes is above the limit of {MAX_REPLY_BYTES}",
            b.len()
        )))
        .unwrap_or_default();
    }
    b.push(b'\n');
    b
}

/// Writes a whole reply before `deadline`; false when the client is gone or slow.
fn write_by(stream: &mut UnixStream, mut buf: &[u8], deadline: Instant) -> bool {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = stream.set_write_timeout(Some(left));
        match stream.write(buf) {
            Ok(0) => return false,
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

fn serve<W: From<Incoming>>(
    mut stream: UnixStream,
    id: u64,
    tx: mpsc::Sender<W>,
    errors: &AtomicU64,
    conns: &Registry,
) {
    let reply = |stream: &mut UnixStream, v: &Value| {
        write_by(stream, &reply_bytes(v), Instant::now() + REPLY_DEADLINE)
    };
    if let Err(e) = peer_allowed(&stream) {
        errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %e, "control socket: peer refused");
        reply(&mut stream, &error_reply(e));
        return;
    }
    let mut pending = Vec::new();
    loop {
        lock(conns).set(id, false);
        let line = match read_line_by(
            &mut stream,
            &mut pending,
            Instant::now() + REQUEST_DEADLINE,
            MAX_LINE_BYTES,
        ) {
            LineRead::Line(l) => l,
            LineRead::Eof => return,
            LineRead::TooLong => {
                errors.fetch_add(1, Ordering::Relaxed);
                reply(
                    &mut stream,
                    &error_reply(format!("request longer than {MAX_LINE_BYTES} bytes")),
                );
                return;
            }
            LineRead::Late => {
                errors.fetch_add(1, Ordering::Relaxed);
                reply(
                    &mut stream,
                    &error_reply(format!(
                        "no complete request within {} s",
                        REQUEST_DEADLINE.as_secs()
                    )),
                );
                return;
            }
            LineRead::Failed(e) => {
                errors.fetch_add(1, Ordering::Relaxed);
                reply(&mut stream, &error_reply(format!("bad request: {e}")));
                return;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let answer = match parse_request(&line) {
            Err(e) => {
                errors.fetch_add(1, Ordering::Relaxed);
                error_reply(e)
            }
            Ok(req) => {
                lock(conns).set(id, true);
                let (rtx, rrx) = mpsc::channel();
                if tx.send(W::from(Incoming { req, reply: rtx })).is_err() {
                    error_reply("daemon is shutting down")
                } else {
                    rrx.recv_timeout(LOOP_ANSWER_TIMEOUT)
                        .unwrap_or_else(|_| error_reply("daemon did not answer in time"))
                }
            }
        };
        lock(conns).set(id, false);
        if !reply(&mut stream, &answer) {
            return;
        }
    }
}

/// The socket file that this daemon bound (device and inode), so that
/// shutdown removes it only while it is still ours.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Clears the way for binding `path`: nothing there, or a stale socket of
/// this user that nobody answers on (removed, except in a dry run). Any
/// other file is left alone and refused.
fn clear_stale_socket(path: &Path, dry_run: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => anyhow::bail!("control socket {}: {e}", path.display()),
    };
    if !m.file_type().is_socket() {
        return Err(InputError::new(format!(
            "control socket {}: a file that is not a socket is there; refusing to remove it",
            path.display()
        ))
        .into());
    }
    if UnixStream::connect(path).is_ok() {
        return Err(
            InputError::new(format!("another daemon is listening on {}", path.display())).into(),
        );
    }
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        return Err(InputError::new(format!(
            "control socket {}: a stale socket of uid {} is there, not ours (uid {me}); refusing to remove it",
            path.display(),
            m.uid()
        ))
        .into());
    }
    if dry_run {
        return Err(InputError::new(format!(
            "control socket {}: a stale socket is there and a dry run removes nothing; remove it or choose another --socket",
            path.display()
        ))
        .into());
    }
    std::fs::remove_file(path)
        .map_err(|e| anyhow::anyhow!("removing stale socket {}: {e}", path.display()))
}

impl ControlServer {
    /// [`ControlServer::bind_with`] outside a dry run.
    pub fn bind<W: From<Incoming> + Send + 'static>(
        path: &Path,
        tx: mpsc::Sender<W>,
    ) -> anyhow::Result<Self> {
        Self::bind_with(path, tx, false)
    }

    /// Binds `path` (mode 0600; parent created with 0755) and starts the
    /// accept thread. Refused when another daemon answers there or a file
    /// other than a stale socket of this user is there; a stale socket is
    /// removed, except in a dry run (`dry_run`), which removes nothing.
    /// Requests go to `tx` as `W` (the daemon's loop takes other messages
    /// on the same channel).
    pub fn bind_with<W: From<Incoming> + Send + 'static>(
        path: &Path,
        tx: mpsc::Sender<W>,
        dry_run: bool,
    ) -> anyhow::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
            }
        }
        clear_stale_socket(path, dry_run)?;
        let listener = UnixListener::bind(path)
            .map_err(|e| anyhow::anyhow!("binding control socket {}: {e}", path.display()))?;
        let ident = identity(path);
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| anyhow::anyhow!("chmod 0600 {}: {e}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(AtomicU64::new(0));
        let conns: Registry = Arc::default();
        let (st, er) = (Arc::clone(&stop), Arc::clone(&errors));
        std::thread::Builder::new()
            .name("appflow-socket".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if st.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let id = {
                        let mut c = lock(&conns);
                        let Ok(clone) = stream.try_clone() else {
                            continue;
                        };
                        c.make_room();
                        let id = c.next_id;
                        c.next_id += 1;
                        c.open.insert(
                            id,
                            Conn {
                                stream: clone,
                                since: Instant::now(),
                                busy: false,
                            },
                        );
                        id
                    };
                    let (tx, er, reg) = (tx.clone(), Arc::clone(&er), Arc::clone(&conns));
                    let spawned = std::thread::Builder::new()
                        .name("appflow-conn".into())
                        .stack_size(CONN_STACK_BYTES)
                        .spawn(move || {
                            serve(stream, id, tx, &er, &reg);
                            lock(&reg).open.remove(&id);
                        });
                    if spawned.is_err() {
                        lock(&conns).open.remove(&id);
                        tracing::warn!("control socket: cannot spawn a connection thread");
                    }
                }
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            ident,
            stop,
            errors,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting and removes the socket file (only while it is the
    /// one this server bound).
    pub fn shutdown(&self) {
        if !self.stop.swap(true, Ordering::Relaxed) {
            // Wake the accept loop so it sees the flag.
            let _ = UnixStream::connect(&self.path);
            if self.ident.is_some() && identity(&self.path) == self.ident {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Sends one request and returns the reply (client side of `status`/`notify`).
pub fn request(path: &Path, req: &Request) -> anyhow::Result<Value> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        anyhow::anyhow!(
            "connecting to the daemon at {}: {e} (is `appflow daemon` running?)",
            path.display()
        )
    })?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    s.write_all(&line)?;
    // The daemon's own limits bound the wait: its answer timeout and the
    // reply deadline, plus a margin.
    let deadline = Instant::now() + LOOP_ANSWER_TIMEOUT + REPLY_DEADLINE + Duration::from_secs(1);
    let mut pending = Vec::new();
    let line = match read_line_by(&mut s, &mut pending, deadline, MAX_REPLY_BYTES as u64) {
        LineRead::Line(l) => l,
        LineRead::Eof => String::new(),
        LineRead::TooLong => {
            anyhow::bail!("the daemon's reply is longer than {MAX_REPLY_BYTES} bytes")
        }
        LineRead::Late => anyhow::bail!("the daemon at {} did not answer in time", path.display()),
        LineRead::Failed(e) => return Err(e.into()),
    };
    if line.trim().is_empty() {
        anyhow::bail!(
            "the daemon at {} closed the connection without a reply",
            path.display()
        );
    }
    Ok(serde_json::from_str(line.trim())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// A main loop answering every request with its command.
    fn echo_loop(rx: mpsc::Receiver<Incoming>) {
        std::thread::spawn(move || {
            for inc in rx.iter() {
                let _ = inc
                    .reply
                    .send(json!({"ok": true, "echo": format!("{:?}", inc.req)}));
            }
        });
    }

    fn status_within(path: &Path, limit: Duration) -> Value {
        let t0 = Instant::now();
        let v = request(path, &Request::Status {}).unwrap();
        assert!(t0.elapsed() < limit, "status took {:?}", t0.elapsed());
        v
    }

    #[test]
    fn a_trickling_client_is_cut_at_the_request_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let (tx, rx) = mpsc::channel::<Incoming>();
        let _server = ControlServer::bind(&path, tx).unwrap();
        echo_loop(rx);
        let mut s = UnixStream::connect(&path).unwrap();
        let t0 = Instant::now();
        // One byte every 500 ms: each read succeeds, the request never ends.
        let mut line = String::new();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let writer = std::thread::spawn(move || {
            for _ in 0..40 {
                if s.write_all(b"{").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        r.read_line(&mut line).unwrap();
        let waited = t0.elapsed();
        assert!(line.contains("no complete request"), "{line}");
        assert!(
            waited >= REQUEST_DEADLINE && waited < REQUEST_DEADLINE + Duration::from_secs(2),
            "{waited:?}"
        );
        writer.join().unwrap();
    }

    #[test]
    fn idle_connections_cannot_starve_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let (tx, rx) = mpsc::channel::<Incoming>();
        let server = ControlServer::bind(&path, tx).unwrap();
        echo_loop(rx);
        // More than the connection limit, all silent.
        let idle: Vec<UnixStream> = (0..MAX_CONNECTIONS + 40)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        for _ in 0..5 {
            assert_eq!(status_within(&path, Duration::from_secs(1))["ok"], true);
        }
        assert!(server.errors.load(Ordering::Relaxed) == 0);
        drop(idle);
    }

    #[test]
    fn replies_are_written_whole_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let (tx, rx) = mpsc::channel::<Incoming>();
        let _server = ControlServer::bind(&path, tx).unwrap();
        std::thread::spawn(move || {
            for (i, inc) in rx.iter().enumerate() {
                let n = if i == 0 { 1 << 20 } else { MAX_REPLY_BYTES };
                let _ = inc.reply.send(json!({"ok": true, "text": "x".repeat(n)}));
            }
        });
        let v = request(&path, &Request::Metrics {}).unwrap();
        assert_eq!(v["text"].as_str().unwrap().len(), 1 << 20);
        let v = request(&path, &Request::Metrics {}).unwrap();
        assert_eq!(v["ok"], false);
        assert!(
            v["error"].as_str().unwrap().contains("above the limit"),
            "{v}"
        );
    }

    #[test]
    fn only_a_stale_socket_of_ours_is_removed_and_never_in_a_dry_run() {
        let dir = tempfile::tempdir().unwrap();
        // A regular file at the socket path stays.
        let path = dir.path().join("s.sock");
        std::fs::write(&path, "keep").unwrap();
        let (tx, _rx) = mpsc::channel::<Incoming>();
        let e = ControlServer::bind(&path, tx.clone()).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
        // A stale socket (nobody listens): kept in a dry run, replaced otherwise.
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        let e = ControlServer::bind_with(&stale, tx.clone(), true).unwrap_err();
        assert!(e.to_string().contains("dry run removes nothing"), "{e}");
        assert!(stale.exists());
        let server = ControlServer::bind(&stale, tx).unwrap();
        // Shutdown removes the socket only while it is the one bound.
        std::fs::remove_file(&stale).unwrap();
        std::fs::write(&stale, "someone else's").unwrap();
        server.shutdown();
        assert_eq!(std::fs::read_to_string(&stale).unwrap(), "someone else's");
    }

    #[test]
    fn request_parser_applies_the_app_name_rule() {
        assert!(parse_request(r#"{"cmd":"notify","event":"launch","app":"ok.app"}"#).is_ok());
        for bad in [".x", "a..b", "a/b", ""] {
            let line = format!(r#"{{"cmd":"notify","event":"launch","app":"{bad}"}}"#);
            let e = parse_request(&line).unwrap_err();
            assert!(e.contains("invalid app name"), "{e}");
        }
    }

    #[test]
    fn requests_parse_and_refuse_unknown_fields() {
        let r: Request =
            serde_json::from_str(r#"{"cmd":"notify","event":"launch","app":"a","pid":5}"#).unwrap();
        assert_eq!(
            r,
            Request::Notify {
                event: EventKind::Launch,
                app: "a".into(),
                pid: Some(5)
            }
        );
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"status","x":1}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"reboot"}"#).is_err());
        assert!(
            serde_json::from_str::<Request>(r#"{"cmd":"notify","event":"fly","app":"a"}"#).is_err()
        );
    }

    #[test]
    fn server_answers_and_survives_garbage() {
        let dir = std::env::temp_dir().join(format!("appflow-sock-{}", std::process::id()));
        let path = dir.join("s.sock");
        let (tx, rx) = mpsc::channel::<Incoming>();
        let server = ControlServer::bind(&path, tx).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A second daemon on the same socket is refused.
        let (tx2, _rx2) = mpsc::channel::<Incoming>();
        assert!(ControlServer::bind(&path, tx2).is_err());
        let main = std::thread::spawn(move || {
            for inc in rx.iter().take(1) {
                inc.reply
                    .send(json!({"ok": true, "echo": format!("{:?}", inc.req)}))
                    .unwrap();
            }
        });
        // Garbage first, on a raw connection: error reply, connection stays usable.
        let mut s = UnixStream::connect(&path).unwrap();
        writeln!(s, "{{not json").unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], false);
        assert!(v["error"].as_str().unwrap().contains("bad request"));
        writeln!(s, r#"{{"cmd":"status"}}"#).unwrap();
        line.clear();
        r.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], true);
        main.join().unwrap();
        assert_eq!(server.errors.load(Ordering::Relaxed), 1);
        server.shutdown();
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
