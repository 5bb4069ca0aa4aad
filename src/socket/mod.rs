//! The daemon's Unix socket: `status` and `tail` for local clients.
//!
//! Protocol: the client sends one JSON request line; the daemon answers with JSON lines.
//!
//! - `{"cmd":"status"}` → one object per session, then `{"end":true,"sessions":N}`; while
//!   the event stream cannot be written, the end line also has
//!   `"stream":{"state":"blocked",…}`.
//! - `{"cmd":"tail","since_ms":N}` → the events of the last N ms still in the ring
//!   buffer, then live events until either side closes. A client whose queue fills
//!   (it reads too slowly) gets `{"notice":"dropped: …"}` if it can still take it, and is
//!   disconnected. Past the follower cap, a `tail` gets
//!   `{"notice":"refused: too many followers (N)","refused":true}` and is closed.
//!
//! Requests (`status`) and followers (`tail`) have slots of their own, so followers can
//! never keep `status` out ([`server`]). The daemon side only `try_send`s into each
//! follower's bounded queue: a stuck client costs it nothing.

mod server;

pub use server::{Options, Server};

use crate::clock::{format_rfc3339, wall_now};
use crate::model::Event;
use crate::reduce::SessionView;
use crate::sink::jsonl::StreamHealth;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Recent events kept for `tail --since`.
pub const RING: usize = 1024;
/// Events waiting for one client before it counts as too slow and is dropped. The
/// queue holds shared lines, so its cost is pointers; it is sized above the ring and
/// above any one batch, so that a client that keeps up is never dropped by a burst.
pub const CLIENT_QUEUE: usize = 4096;
/// `tail` clients served at once by default (`max_followers`); more are refused.
pub const DEFAULT_MAX_FOLLOWERS: usize = 64;

struct Client {
    /// Given by the server, to let the client go when it hangs up.
    id: u64,
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
    /// Whether the event stream is being written (for `status`).
    stream: Arc<StreamHealth>,
    /// `liveness_after`: how long a working session may be silent before `status`
    /// shows it `stale` where the liveness check cannot judge it.
    stale_after_ms: std::sync::atomic::AtomicU64,
}

impl Hub {
    pub fn new(views: crate::views::Client, queue: usize) -> Arc<Hub> {
        Arc::new(Hub {
            inner: Mutex::new(Inner::default()),
            views,
            queue: queue.max(1),
            stream: Arc::default(),
            stale_after_ms: crate::config::DEFAULT_LIVENESS_AFTER_MS.into(),
        })
    }

    /// Sets `liveness_after` (see [`SessionView::shown_state`]).
    pub fn set_stale_after(&self, ms: u64) {
        self.stale_after_ms.store(ms, Ordering::Relaxed);
    }

    fn stale_after(&self) -> u64 {
        self.stale_after_ms.load(Ordering::Relaxed)
    }

    /// Where the event writer says whether it is blocked.
    pub fn stream_health(&self) -> Arc<StreamHealth> {
        Arc::clone(&self.stream)
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
        id: u64,
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
            id,
            tx,
            slow: Arc::clone(&slow),
        });
        (backlog, rx, slow)
    }

    /// Lets a tail client go (it hung up): its queue's receiver sees the end at once.
    fn unsubscribe(&self, id: u64) {
        self.lock().clients.retain(|c| c.id != id);
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
    /// Why the turn ended, where the state alone does not say (`writer_gone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// Background tasks still running or waiting to report back (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    background_tasks: Option<u32>,
}

/// One `status` row as of `now` (Unix ms); a working session silent for `after_ms` that
/// the liveness check cannot judge is `stale`.
fn status_line(v: &SessionView, now: i64, after_ms: u64) -> String {
    let row = StatusRow {
        provider: v.key.provider.as_str(),
        session: &v.key.session,
        agent: v.key.agent.as_deref(),
        project: crate::sink::view_project(v, 1),
        path: &v.path,
        state: v.shown_state(now, after_ms),
        turn: v.turn.as_deref(),
        line: v.line,
        since: v.record_ts.map(format_rfc3339),
        message: v.message.as_deref(),
        evidence: v.evidence,
        reason: v.reason,
        background_tasks: (v.background_tasks > 0).then_some(v.background_tasks),
    };
    serde_json::to_string(&row).unwrap_or_default()
}

/// The line that ends a `status` answer; it says so when the event stream is blocked.
fn end_line(sessions: usize, stream: Option<&crate::sink::jsonl::Blocked>) -> String {
    match stream {
        None => format!("{{\"end\":true,\"sessions\":{sessions}}}"),
        Some(b) => serde_json::json!({"end": true, "sessions": sessions, "stream": b}).to_string(),
    }
}
