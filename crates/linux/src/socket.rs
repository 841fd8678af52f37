//! The control socket (contract C): a Unix stream socket, mode 0600, one JSON
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

use crate::daemon::EventKind;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Longest request line accepted.
pub const MAX_LINE_BYTES: u64 = 64 * 1024;
/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 32;

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

fn serve(stream: UnixStream, tx: mpsc::Sender<Incoming>, errors: Arc<AtomicU64>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut write = |v: &Value| writeln!(out, "{v}").and_then(|_| out.flush()).is_ok();
    if let Err(e) = peer_allowed(&stream) {
        errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %e, "control socket: peer refused");
        write(&error_reply(e));
        return;
    }
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        let n = match (&mut reader).take(MAX_LINE_BYTES).read_line(&mut line) {
            Ok(n) => n,
            Err(e) => {
                errors.fetch_add(1, Ordering::Relaxed);
                write(&error_reply(format!("bad request: {e}")));
                return;
            }
        };
        if n == 0 {
            return;
        }
        if !line.ends_with('\n') && n as u64 >= MAX_LINE_BYTES {
            errors.fetch_add(1, Ordering::Relaxed);
            write(&error_reply(format!(
                "request longer than {MAX_LINE_BYTES} bytes"
            )));
            return;
        }
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Request>(line.trim()) {
            Err(e) => {
                errors.fetch_add(1, Ordering::Relaxed);
                error_reply(format!("bad request: {e}"))
            }
            Ok(req) => {
                let (rtx, rrx) = mpsc::channel();
                if tx.send(Incoming { req, reply: rtx }).is_err() {
                    error_reply("daemon is shutting down")
                } else {
                    rrx.recv_timeout(Duration::from_secs(10))
                        .unwrap_or_else(|_| error_reply("daemon did not answer in time"))
                }
            }
        };
        if !write(&reply) {
            return;
        }
    }
}

impl ControlServer {
    /// Binds `path` (mode 0600; parent created with 0755), refusing when
    /// another daemon answers there, and starts the accept thread.
    pub fn bind(path: &Path, tx: mpsc::Sender<Incoming>) -> anyhow::Result<Self> {
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
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                anyhow::bail!("another daemon is listening on {}", path.display());
            }
            std::fs::remove_file(path)
                .map_err(|e| anyhow::anyhow!("removing stale socket {}: {e}", path.display()))?;
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| anyhow::anyhow!("binding control socket {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| anyhow::anyhow!("chmod 0600 {}: {e}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(AtomicU64::new(0));
        let active = Arc::new(AtomicUsize::new(0));
        let (st, er) = (Arc::clone(&stop), Arc::clone(&errors));
        std::thread::Builder::new()
            .name("appflow-socket".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if st.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        er.fetch_add(1, Ordering::Relaxed);
                        let mut s = stream;
                        let _ = writeln!(s, "{}", error_reply("too many connections"));
                        continue;
                    }
                    active.fetch_add(1, Ordering::Relaxed);
                    let (tx, er, active) = (tx.clone(), Arc::clone(&er), Arc::clone(&active));
                    let spawned = std::thread::Builder::new()
                        .name("appflow-conn".into())
                        .spawn(move || {
                            serve(stream, tx, er);
                            active.fetch_sub(1, Ordering::Relaxed);
                        });
                    if spawned.is_err() {
                        tracing::warn!("control socket: cannot spawn a connection thread");
                    }
                }
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            stop,
            errors,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting and removes the socket file.
    pub fn shutdown(&self) {
        if !self.stop.swap(true, Ordering::Relaxed) {
            // Wake the accept loop so it sees the flag.
            let _ = UnixStream::connect(&self.path);
            let _ = std::fs::remove_file(&self.path);
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
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    writeln!(s, "{}", serde_json::to_string(req)?)?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
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
