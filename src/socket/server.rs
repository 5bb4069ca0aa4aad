//! The socket server: one thread that accepts, reads each request, and watches the
//! followers for hang-ups, all in one `poll(2)` loop; one thread per request being
//! answered and per follower.
//!
//! - **Slots.** Followers (`tail`) are capped at `max_followers`; requests (`status`)
//!   have [`REQUEST_SLOTS`] of their own, so any number of followers leaves `status`
//!   answering. A request is read without a thread: a client that connects and says
//!   nothing holds only its descriptor, for [`REQUEST_WITHIN`].
//! - **Hang-ups.** A follower waits on its event queue, where a hang-up cannot be seen;
//!   the loop polls a copy of each follower's socket and lets the follower go the moment
//!   its client hangs up, whether or not an event is ever written again.
//! - **Stop.** The loop also polls the daemon's [`Shutdown`] token, so stopping never
//!   depends on the socket's path (which may be gone).
//! - **A socket file removed** while the daemon runs (or its directory: the runtime
//!   directory goes at logout) is made again at the next check, every `sweep`.
//!
//! This file is the loop and its slots; what a request is answered with is in
//! [`answer`], and the socket file's upkeep (made private, bound, made again) in
//! [`file`]. They are child modules so that they can add methods to the one `Loop`
//! while its fields stay private to the server.

mod answer;
mod file;

use super::{Hub, Since};
use crate::error::Error;
use crate::shutdown::Shutdown;
use answer::{answer_status, follow, reply};
use file::{bind, private_dir};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Requests answered at once (each takes milliseconds); more get a "busy" error.
pub const REQUEST_SLOTS: usize = 16;
/// Connections whose request is still being read; more wait in the listen queue.
const MAX_PENDING: usize = 256;
/// Longest request line.
const MAX_REQUEST: usize = 4096;
/// A client must send its request within this, or it is closed.
const REQUEST_WITHIN: Duration = Duration::from_secs(5);

/// How the server serves.
#[derive(Debug, Clone)]
pub struct Options {
    /// `tail` clients at once.
    pub max_followers: usize,
    /// How often the socket file is checked (and made again if it is gone).
    pub sweep: Duration,
    /// Where a `hook` request's signal goes (the core's hints); `None`: hooks are
    /// answered but not used.
    pub hints: Option<crate::watch::HintTx>,
}

/// A running socket server; dropping it does not stop it, [`Server::stop`] does.
pub struct Server {
    path: PathBuf,
    /// Ends with the identity (device, inode) of the socket file it last bound.
    accept: Option<thread::JoinHandle<(u64, u64)>>,
    hub: Arc<Hub>,
    shutdown: Shutdown,
    /// The socket file's identity as first bound.
    bound: (u64, u64),
    /// Follower threads still running (each holds a [`Slot`]).
    followers: Arc<AtomicUsize>,
}

/// How long a stop waits for the followers to write what their queues still hold (the
/// daemon's last events, `daemon_stopping` among them) before the process exits.
const FOLLOWERS_GRACE: Duration = Duration::from_secs(2);

impl Server {
    /// Binds `path` (mode 0600, in a 0700 directory), replacing a stale socket, and
    /// starts serving until `shutdown`. Fails if another daemon answers on it.
    pub fn start(
        path: &Path,
        hub: Arc<Hub>,
        opts: Options,
        shutdown: Shutdown,
    ) -> Result<Server, Error> {
        let ctx = |what: &str, e: io::Error| {
            Error::Start(format!("the socket {}: {what}: {e}", path.display()))
        };
        if let Some(dir) = path.parent() {
            private_dir(dir).map_err(|e| ctx("cannot create its directory", e))?;
        }
        if std::fs::symlink_metadata(path).is_ok() {
            if UnixStream::connect(path).is_ok() {
                return Err(Error::Start(format!(
                    "another baton daemon is already listening on {}",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(|e| ctx("cannot remove the stale socket", e))?;
            tracing::info!(path = %path.display(), "Removed a stale socket.");
        }
        let (listener, bound) = bind(path).map_err(|e| ctx("cannot listen", e))?;
        let followers = Arc::new(AtomicUsize::new(0));
        let mut l = Loop {
            path: path.to_path_buf(),
            listener,
            bound,
            hub: Arc::clone(&hub),
            shutdown: shutdown.clone(),
            opts: Options {
                max_followers: opts.max_followers.max(1),
                ..opts
            },
            pending: Vec::new(),
            watched: Vec::new(),
            followers: Arc::clone(&followers),
            requests: Arc::new(AtomicUsize::new(0)),
            next_id: 0,
            next_check: Instant::now() + opts.sweep,
            warned_other: false,
        };
        let accept = thread::Builder::new()
            .name("baton-socket".to_owned())
            .spawn(move || {
                l.run();
                l.bound
            })
            .map_err(|e| ctx("cannot start its thread", e))?;
        tracing::info!(path = %path.display(), "Listening for status and tail clients.");
        Ok(Server {
            path: path.to_path_buf(),
            accept: Some(accept),
            hub,
            shutdown,
            bound,
            followers,
        })
    }

    /// Stops serving, disconnects tail clients and removes the socket file (if it is
    /// still the one this server made).
    pub fn stop(mut self) {
        self.shutdown.stop();
        let ours = match self.accept.take().map(thread::JoinHandle::join) {
            Some(Ok(bound)) => bound,
            _ => self.bound,
        };
        self.hub.close();
        // Closing the hub ends each follower's queue after what it holds; the follower
        // writes that out, then ends. Without this wait the process could exit first, and
        // a `tail --follow` would miss the daemon's last events (then, resuming from an
        // earlier id, it would warn of a gap that is not there).
        let deadline = Instant::now() + FOLLOWERS_GRACE;
        while self.followers.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == ours) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A connection whose request line is still coming.
struct Pending {
    stream: UnixStream,
    buf: Vec<u8>,
    deadline: Instant,
}

/// A copy of a follower's socket, polled for its hang-up.
struct Watched {
    stream: UnixStream,
    id: u64,
}

/// Gives a slot back when the thread holding it ends, however it ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Loop {
    path: PathBuf,
    listener: UnixListener,
    /// The socket file's identity (device, inode) as last bound.
    bound: (u64, u64),
    hub: Arc<Hub>,
    shutdown: Shutdown,
    opts: Options,
    pending: Vec<Pending>,
    watched: Vec<Watched>,
    followers: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    next_id: u64,
    next_check: Instant,
    /// Said once that the path now holds someone else's file.
    warned_other: bool,
}

/// What one poll saw.
struct Ready {
    stop: bool,
    listener: bool,
    pending: Vec<bool>,
    watched: Vec<bool>,
}

impl Loop {
    fn run(&mut self) {
        while !self.shutdown.is_stopped() {
            let now = Instant::now();
            if now >= self.next_check {
                self.check_file();
                self.next_check = now + self.opts.sweep;
            }
            self.pending.retain(|p| p.deadline > now);
            let ready = match self.wait() {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "Socket poll failed; trying again.");
                    if self.shutdown.wait_timeout(Duration::from_millis(100)) {
                        break;
                    }
                    continue;
                }
            };
            if ready.stop {
                break;
            }
            self.hang_ups(&ready.watched);
            self.read_requests(&ready.pending);
            if ready.listener {
                self.accept();
            }
        }
    }

    /// Polls the stop token, the listener (while there is room for more pending
    /// connections), pending requests and followers, until something is ready or the
    /// next deadline.
    fn wait(&self) -> io::Result<Ready> {
        let now = Instant::now();
        let deadline = self
            .pending
            .iter()
            .map(|p| p.deadline)
            .min()
            .map_or(self.next_check, |d| d.min(self.next_check));
        let timeout =
            Timespec::try_from(deadline.saturating_duration_since(now)).unwrap_or(Timespec {
                tv_sec: 3600,
                tv_nsec: 0,
            });
        let listen = self.pending.len() < MAX_PENDING;
        let stop = self.shutdown.fd();
        let mut fds = Vec::with_capacity(2 + self.pending.len() + self.watched.len());
        fds.push(PollFd::new(&stop, PollFlags::IN));
        fds.push(PollFd::new(
            &self.listener,
            if listen {
                PollFlags::IN
            } else {
                PollFlags::empty()
            },
        ));
        for p in &self.pending {
            fds.push(PollFd::new(&p.stream, PollFlags::IN));
        }
        for w in &self.watched {
            fds.push(PollFd::new(&w.stream, PollFlags::IN | PollFlags::RDHUP));
        }
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let seen: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        let n = self.pending.len();
        Ok(Ready {
            stop: seen[0],
            listener: seen[1],
            pending: seen[2..2 + n].to_vec(),
            watched: seen[2 + n..].to_vec(),
        })
    }

    fn accept(&mut self) {
        while self.pending.len() < MAX_PENDING {
            match self.listener.accept() {
                Ok((stream, _)) => self.pending.push(Pending {
                    stream,
                    buf: Vec::new(),
                    deadline: Instant::now() + REQUEST_WITHIN,
                }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of descriptors, say: the listener stays readable, so pause
                    // rather than spin.
                    tracing::debug!(error = %e, "Socket accept failed.");
                    self.shutdown.wait_timeout(Duration::from_millis(100));
                    return;
                }
            }
        }
    }

    /// Reads what the ready pending connections sent; a whole line is a request.
    fn read_requests(&mut self, ready: &[bool]) {
        let mut done = Vec::new();
        for (i, p) in self.pending.iter_mut().enumerate() {
            if !ready.get(i).copied().unwrap_or(false) {
                continue;
            }
            let mut chunk = [0u8; 1024];
            // Readable: this read does not wait.
            let finished = match p.stream.read(&mut chunk) {
                Ok(0) => true,
                Ok(n) => {
                    p.buf.extend_from_slice(&chunk[..n]);
                    p.buf.contains(&b'\n') || p.buf.len() >= MAX_REQUEST
                }
                Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            };
            if finished {
                done.push(i);
            }
        }
        // Highest first: each removal moves only an element that is not done.
        for i in done.into_iter().rev() {
            let p = self.pending.swap_remove(i);
            self.request(p);
        }
    }

    fn status(&self, stream: UnixStream, frames: bool) {
        if self.requests.fetch_add(1, Ordering::AcqRel) >= REQUEST_SLOTS {
            self.requests.fetch_sub(1, Ordering::AcqRel);
            reply(
                &stream,
                &format!(
                    "{{\"error\":\"busy: {REQUEST_SLOTS} requests are being answered; try again\"}}"
                ),
            );
            return;
        }
        let slot = Slot(Arc::clone(&self.requests));
        let hub = Arc::clone(&self.hub);
        let spawned = thread::Builder::new()
            .name("baton-status".to_owned())
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = answer_status(&stream, &hub, frames) {
                    tracing::debug!(error = %e, "Status client gone.");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "Cannot start a socket client thread.");
        }
    }

    fn follow(&mut self, stream: UnixStream, since: Since) {
        let cap = self.opts.max_followers;
        if self.followers.load(Ordering::Acquire) >= cap {
            reply(
                &stream,
                &format!("{{\"notice\":\"refused: too many followers ({cap})\",\"refused\":true}}"),
            );
            tracing::debug!(cap, "A tail client was refused: too many followers.");
            return;
        }
        let watch = match stream.try_clone() {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "Cannot watch a tail client; refusing it.");
                return;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        // Subscribed here, before the thread starts, so that a hang-up seen from now on
        // always finds it.
        let (backlog, rx, slow) = self.hub.subscribe(id, &since);
        self.followers.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(Arc::clone(&self.followers));
        let spawned = thread::Builder::new()
            .name("baton-tail".to_owned())
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = follow(&stream, backlog, &rx, &slow) {
                    tracing::debug!(error = %e, "Tail client gone.");
                }
                // The loop's copy sees this as a hang-up and lets go of it.
                let _ = stream.shutdown(std::net::Shutdown::Both);
            });
        match spawned {
            Ok(_) => self.watched.push(Watched { stream: watch, id }),
            Err(e) => {
                self.hub.unsubscribe(id);
                tracing::warn!(error = %e, "Cannot start a socket client thread.");
            }
        }
    }

    /// Lets go of the followers whose client hung up (or whose thread ended).
    fn hang_ups(&mut self, ready: &[bool]) {
        let mut flags = ready.iter();
        let mut gone = Vec::new();
        self.watched.retain_mut(|w| {
            if !flags.next().copied().unwrap_or(false) {
                return true;
            }
            let mut chunk = [0u8; 512];
            match w.stream.read(&mut chunk) {
                // A follower has nothing more to say; whatever it sends is ignored.
                Ok(n) if n > 0 => true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
                _ => {
                    gone.push(w.id);
                    false
                }
            }
        });
        for id in gone {
            self.hub.unsubscribe(id);
        }
    }
}
