//! The daemon's Unix socket: `status` and `tail` for local clients.
//!
//! Protocol: the client sends one JSON request line; the daemon answers with JSON lines.
//!
//! - `{"cmd":"status"}` → one object per session, then `{"end":true,"sessions":N}`.
//! - `{"cmd":"tail","since_ms":N}` → the events of the last N ms still in the ring
//!   buffer, then live events until either side closes. A client whose queue fills
//!   (it reads too slowly) gets `{"notice":"dropped: …"}` if it can still take it, and is
//!   disconnected.
//!
//! One accept thread and one thread per client (at most [`MAX_CLIENTS`]), so a client
//! never holds up another. The daemon side only `try_send`s into each client's bounded
//! queue: a stuck client costs it nothing.

use crate::clock::{format_rfc3339, wall_now};
use crate::error::Error;
use crate::model::Event;
use crate::reduce::SessionView;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde::Serialize;
use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

/// Recent events kept for `tail --since`.
pub const RING: usize = 1024;
/// Events waiting for one client before it counts as too slow and is dropped. The
/// queue holds shared lines, so its cost is pointers; it is sized above the ring and
/// above any one batch, so that a client that keeps up is never dropped by a burst.
pub const CLIENT_QUEUE: usize = 4096;
/// Clients served at once; more are refused with a notice.
pub const MAX_CLIENTS: usize = 64;
/// Longest request line.
const MAX_REQUEST: u64 = 4096;
/// A client must send its request within this, and accept each write within
/// [`WRITE_TIMEOUT`], or it is disconnected (its thread must not live forever).
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

struct Client {
    tx: Sender<Arc<str>>,
    /// Set when the client is dropped for being slow (not at shutdown).
    slow: Arc<AtomicBool>,
}

#[derive(Default)]
struct Inner {
    ring: VecDeque<(i64, Arc<str>)>,
    clients: Vec<Client>,
    dropped_slow: u64,
}

/// Shared between the event sink (which publishes) and the client threads.
pub struct Hub {
    inner: Mutex<Inner>,
    /// Every session's view, kept up to date off the core thread (for `status`).
    views: crate::views::Client,
    queue: usize,
}

impl Hub {
    pub fn new(views: crate::views::Client, queue: usize) -> Arc<Hub> {
        Arc::new(Hub {
            inner: Mutex::new(Inner::default()),
            views,
            queue: queue.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicked client thread leaves consistent data behind (each update is one push).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an event to the ring and to every tail client's queue. Never blocks.
    pub fn publish(&self, ev: &Event) {
        let line: Arc<str> = ev.to_json().into();
        let mut g = self.lock();
        if g.ring.len() == RING {
            g.ring.pop_front();
        }
        g.ring.push_back((wall_now(), Arc::clone(&line)));
        let mut dropped = 0;
        g.clients
            .retain(|c| match c.tx.try_send(Arc::clone(&line)) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    c.slow.store(true, Ordering::Release);
                    dropped += 1;
                    false
                }
                Err(TrySendError::Disconnected(_)) => false,
            });
        if dropped > 0 {
            g.dropped_slow += dropped;
            tracing::info!(
                dropped_total = g.dropped_slow,
                "A socket client fell behind and was dropped."
            );
        }
    }

    /// Registers a tail client: the ring's events since `since` (wall ms), and a queue
    /// for what follows — taken under one lock, so nothing is missed or repeated.
    fn subscribe(
        &self,
        since: Option<i64>,
    ) -> (Vec<Arc<str>>, Receiver<Arc<str>>, Arc<AtomicBool>) {
        let (tx, rx) = crossbeam_channel::bounded(self.queue);
        let slow = Arc::new(AtomicBool::new(false));
        let mut g = self.lock();
        let backlog = match since {
            Some(t) => g
                .ring
                .iter()
                .filter(|(at, _)| *at >= t)
                .map(|(_, l)| Arc::clone(l))
                .collect(),
            None => Vec::new(),
        };
        g.clients.push(Client {
            tx,
            slow: Arc::clone(&slow),
        });
        (backlog, rx, slow)
    }

    /// Disconnects every tail client (shutdown).
    pub fn close(&self) {
        self.lock().clients.clear();
    }
}

/// One row of `status`: what a person needs to find the session, never record-derived
/// paths.
#[derive(Serialize)]
struct StatusRow<'a> {
    provider: &'a str,
    session: &'a str,
    agent: Option<&'a str>,
    /// From the transcript's path (see `sink::project_name`).
    project: String,
    path: &'a str,
    state: &'a str,
    turn: Option<&'a str>,
    line: u64,
    since: Option<String>,
    message: Option<&'a str>,
    evidence: Option<&'a str>,
    /// Background tasks still running or waiting to report back (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    background_tasks: Option<u32>,
}

fn status_line(v: &SessionView) -> String {
    let row = StatusRow {
        provider: v.key.provider.as_str(),
        session: &v.key.session,
        agent: v.key.agent.as_deref(),
        project: crate::sink::view_project(v, 1),
        path: &v.path,
        state: v.state.as_str(),
        turn: v.turn.as_deref(),
        line: v.line,
        since: v.record_ts.map(format_rfc3339),
        message: v.message.as_deref(),
        evidence: v.evidence,
        background_tasks: (v.background_tasks > 0).then_some(v.background_tasks),
    };
    serde_json::to_string(&row).unwrap_or_default()
}

/// A running socket server; dropping it does not stop it, [`Server::stop`] does.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<thread::JoinHandle<()>>,
    hub: Arc<Hub>,
}

/// Creates `dir` (and parents) and makes it 0700.
fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

impl Server {
    /// Binds `path` (mode 0600, in a 0700 directory), replacing a stale socket, and
    /// starts accepting. Fails if another daemon answers on it.
    pub fn start(path: &Path, hub: Arc<Hub>) -> Result<Server, Error> {
        let ctx = |what: &str, e: io::Error| {
            Error::Usage(format!("socket {}: {what}: {e}", path.display()))
        };
        if let Some(dir) = path.parent() {
            private_dir(dir).map_err(|e| ctx("cannot create its directory", e))?;
        }
        if std::fs::symlink_metadata(path).is_ok() {
            if UnixStream::connect(path).is_ok() {
                return Err(Error::Usage(format!(
                    "another baton daemon is already listening on {}",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(|e| ctx("cannot remove the stale socket", e))?;
            tracing::info!(path = %path.display(), "Removed a stale socket.");
        }
        let listener = UnixListener::bind(path).map_err(|e| ctx("cannot listen", e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| ctx("cannot set its mode", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let stop = Arc::clone(&stop);
            let hub = Arc::clone(&hub);
            thread::Builder::new()
                .name("baton-socket".to_owned())
                .spawn(move || accept_loop(&listener, &hub, &stop))
                .map_err(|e| ctx("cannot start its thread", e))?
        };
        tracing::info!(path = %path.display(), "Listening for status and tail clients.");
        Ok(Server {
            path: path.to_path_buf(),
            stop,
            accept: Some(accept),
            hub,
        })
    }

    /// Stops accepting, disconnects tail clients and removes the socket file.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.hub.close();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(listener: &UnixListener, hub: &Arc<Hub>, stop: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let mut stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "Socket accept failed.");
                continue;
            }
        };
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        if active.load(Ordering::Acquire) >= MAX_CLIENTS {
            let _ = stream.write_all(b"{\"notice\":\"refused: too many clients\"}\n");
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let hub = Arc::clone(hub);
        let guard = Active(Arc::clone(&active));
        let spawned = thread::Builder::new()
            .name("baton-client".to_owned())
            .spawn(move || {
                let _guard = guard;
                if let Err(e) = serve(stream, &hub) {
                    tracing::debug!(error = %e, "Socket client gone.");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "Cannot start a socket client thread.");
        }
    }
}

/// Decrements the client count when a client thread ends, however it ends.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(serde::Deserialize)]
struct Request {
    cmd: String,
    since_ms: Option<u64>,
}

fn serve(stream: UnixStream, hub: &Hub) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line)?;
    let mut out = io::BufWriter::new(&stream);
    let req: Request = match serde_json::from_str(line.trim()) {
        Ok(r) => r,
        Err(e) => {
            let msg = serde_json::json!({"error": format!("bad request: {e}")});
            writeln!(out, "{msg}")?;
            return out.flush();
        }
    };
    match req.cmd.as_str() {
        "status" => {
            let views = hub.views.snapshot();
            for v in views.iter() {
                writeln!(out, "{}", status_line(v))?;
            }
            writeln!(out, "{{\"end\":true,\"sessions\":{}}}", views.len())?;
            out.flush()
        }
        "tail" => {
            let since = req
                .since_ms
                .map(|ms| wall_now().saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)));
            let (backlog, rx, slow) = hub.subscribe(since);
            for l in backlog {
                writeln!(out, "{l}")?;
            }
            out.flush()?;
            // Wait for events; a client that hangs up is noticed on the next write.
            for l in rx {
                writeln!(out, "{l}")?;
                out.flush()?;
            }
            if slow.load(Ordering::Acquire) {
                writeln!(
                    out,
                    "{{\"notice\":\"dropped: this client fell behind the event stream\"}}"
                )?;
                out.flush()?;
            }
            Ok(())
        }
        other => {
            let msg =
                serde_json::json!({"error": format!("unknown command `{other}` (status, tail)")});
            writeln!(out, "{msg}")?;
            out.flush()
        }
    }
}
