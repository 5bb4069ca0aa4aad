//! The daemon's Unix socket: `status` and `tail` for local clients.
//!
//! Protocol: the client sends one JSON request line; the daemon answers with JSON lines.
//!
//! - `{"cmd":"status"}` → one object per session, in key order (agent, session id, then
//!   subagent: a session's row comes just before its subagents', which clients that
//!   read the rows as they come rely on), written as they are formatted, then
//!   `{"end":true,"sessions":N}`; while
//!   the event stream cannot be written, the end line also has
//!   `"stream":{"state":"blocked",…}`; while a root named with `--watch` (or `watch` in
//!   the config) does not exist, it has `"waiting":[{"provider":"claude","path":…}]`; with `[[remote]]`s,
//!   `"remotes":[{"name":…,"state":"connected"|"retrying","retry_in_s":N,"why":…}]`;
//!   where a click on a notification cannot raise the terminal, `"no_raise":WHY`.
//!   With `"frames":true` the same rows come in frames: `{"frame":BYTES,"rows":N}`, then
//!   exactly BYTES bytes of N whole row lines, as the answer's buffer fills; then the end
//!   line. `status --json` asks for them and copies each frame unread.
//! - `{"cmd":"tail","since_ms":N}` → the events of the last N ms still in the ring
//!   buffer, then live events until either side closes.
//! - `{"cmd":"tail","since_id":ID}` → the ring's events after the event ID, then live
//!   ones. An ID the ring does not hold (it came from an earlier daemon, or has aged out)
//!   gets the whole ring after `{"notice":"since_id …","since_id_missing":true,"gap":G}`,
//!   where `gap` says whether the ring has let events go since this daemon started (so
//!   some after ID may be missing). A client that keeps the ids it printed drops what it
//!   already has (`baton tail --follow` does). A client whose queue fills
//!   (it reads too slowly) gets `{"notice":"dropped: …"}` if it can still take it, and is
//!   disconnected. Past the follower cap, a `tail` gets
//!   `{"notice":"refused: too many followers (N)","refused":true}` and is closed.
//!
//! - `{"cmd":"mute","target":"PROJECT|SESSION","for_ms":N}` (no `for_ms`: until
//!   unmuted; `"project":true`: the target is a project name, never a session id) and
//!   `{"cmd":"unmute","target":…}` → `{"ok":true,"mutes":[…]}` (a mute's answer adds
//!   `matched`, how many sessions the target names now): the
//!   desktop sink shows nothing for the target (saved in the state directory). The
//!   `status` end line lists live `mutes` and the pages recently `held` back, when any.
//!
//! Requests (`status`) and followers (`tail`) have slots of their own, so followers can
//! never keep `status` out ([`server`]). The daemon side only `try_send`s into each
//! follower's bounded queue: a stuck client costs it nothing.

mod server;

pub use server::{Options, Server};

use crate::clock::wall_now;
use crate::model::Event;
use crate::reduce::SessionView;
use crate::sink::jsonl::StreamHealth;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Recent events kept for `tail --since` and `--since-id`.
pub const RING: usize = 1024;
/// Events waiting for one client before it counts as too slow and is dropped. The
/// queue holds shared lines, so its cost is pointers; it is sized above the ring and
/// above any one batch, so that a client that keeps up is never dropped by a burst.
pub const CLIENT_QUEUE: usize = 4096;

struct Client {
    /// Given by the server, to let the client go when it hangs up.
    id: u64,
    tx: Sender<Arc<str>>,
    /// Set when the client is dropped for being slow (not at shutdown).
    slow: Arc<AtomicBool>,
}

/// One event in the ring.
struct Held {
    /// Wall time it was published (for `since_ms`).
    at: i64,
    id: Box<str>,
    line: Arc<str>,
}

#[derive(Default)]
struct Inner {
    ring: VecDeque<Held>,
    /// Events pushed out of the full ring since this daemon started.
    evicted: u64,
    clients: Vec<Client>,
    dropped_slow: u64,
}

/// Where a `tail` client starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// Live events only.
    Now,
    /// The ring's events published at or after this wall time (ms).
    Time(i64),
    /// The ring's events after this event id.
    Id(String),
}

impl Since {
    /// From a request's `since_id` (which wins) and `since_ms`.
    pub fn from_request(since_ms: Option<u64>, since_id: Option<String>, now: i64) -> Since {
        match (since_id, since_ms) {
            (Some(id), _) => Since::Id(id),
            (None, Some(ms)) => {
                Since::Time(now.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)))
            }
            (None, None) => Since::Now,
        }
    }
}

/// The ring's lines for a client starting at `since`, with a notice line first when the
/// id asked for is not held.
fn backlog(inner: &Inner, since: &Since) -> Vec<Arc<str>> {
    let ring = &inner.ring;
    match since {
        Since::Now => Vec::new(),
        Since::Time(t) => ring
            .iter()
            .filter(|h| h.at >= *t)
            .map(|h| Arc::clone(&h.line))
            .collect(),
        Since::Id(id) => match ring.iter().rposition(|h| *h.id == **id) {
            Some(i) => ring
                .iter()
                .skip(i + 1)
                .map(|h| Arc::clone(&h.line))
                .collect(),
            None => {
                let gap = inner.evicted > 0;
                let notice = serde_json::json!({
                    "notice": format!(
                        "since_id not held: sending all {} events this daemon holds{}",
                        ring.len(),
                        if gap { "; older ones are gone, so some may be missing" } else { "" }
                    ),
                    "since_id_missing": true,
                    "gap": gap,
                });
                std::iter::once(Arc::from(notice.to_string()))
                    .chain(ring.iter().map(|h| Arc::clone(&h.line)))
                    .collect()
            }
        },
    }
}

/// Shared between the core's fanout (which publishes) and the client threads.
pub struct Hub {
    inner: Mutex<Inner>,
    /// Every session's view, kept up to date off the core thread (for `status`).
    views: crate::views::Client,
    queue: usize,
    /// Whether the event stream is being written (for `status`).
    stream: Arc<StreamHealth>,
    /// Roots the person named (`--watch`, `watch` in the config): `status` shows those
    /// that do not exist as "waiting for …".
    named_roots: std::sync::OnceLock<Vec<crate::watch::Root>>,
    /// The mutes and the pages held back, shared with the desktop sink.
    board: crate::sink::desktop::Board,
    /// How each `[[remote]]`'s link stands (for `status`).
    remotes: Arc<crate::remote::Links>,
    /// `liveness_after`: how long a working session may be silent before `status`
    /// shows it `stale` where the liveness check cannot judge it.
    stale_after_ms: std::sync::atomic::AtomicU64,
}

impl Hub {
    /// The hub, sharing `board` (mutes, pages held back) with the desktop sink.
    pub fn new(
        views: crate::views::Client,
        queue: usize,
        board: crate::sink::desktop::Board,
    ) -> Arc<Hub> {
        Arc::new(Hub {
            inner: Mutex::new(Inner::default()),
            views,
            queue: queue.max(1),
            stream: Arc::default(),
            named_roots: std::sync::OnceLock::new(),
            board,
            remotes: Arc::default(),
            stale_after_ms: crate::config::DEFAULT_LIVENESS_AFTER_MS.into(),
        })
    }

    /// Sets the roots the person named (once, at start; later calls are ignored).
    pub fn set_named_roots(&self, roots: Vec<crate::watch::Root>) {
        let _ = self.named_roots.set(roots);
    }

    /// Where the remotes' threads say how their links stand.
    pub fn remote_links(&self) -> Arc<crate::remote::Links> {
        Arc::clone(&self.remotes)
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
            g.evicted += 1;
        }
        g.ring.push_back(Held {
            at: wall_now(),
            id: ev.id.as_str().into(),
            line: Arc::clone(&line),
        });
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

    /// Registers a tail client: the ring's events from `since`, and a queue for what
    /// follows — taken under one lock, so nothing is missed or repeated.
    fn subscribe(
        &self,
        id: u64,
        since: &Since,
    ) -> (Vec<Arc<str>>, Receiver<Arc<str>>, Arc<AtomicBool>) {
        let (tx, rx) = crossbeam_channel::bounded(self.queue);
        let slow = Arc::new(AtomicBool::new(false));
        let mut g = self.lock();
        let backlog = backlog(&g, since);
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

/// One `status` row as of `now` (Unix ms), with its newline: what a person needs to
/// find the session, never record-derived paths; the row is `scan`'s too
/// ([`crate::session_row`]), with `since` for its time and `project_long`.
fn write_status_line(
    v: &SessionView,
    now: i64,
    after_ms: u64,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    crate::session_row::write_line(v, now, after_ms, crate::session_row::Command::Status, out)
}

/// A parked session's `status` row, formatted once when it is parked (see
/// [`crate::views::ParkedRows`]): the bytes [`write_status_line`] writes for it at `now`
/// with `after_ms` as the liveness check's quiet period. A parked session's row changes
/// at most once, when a working one the check cannot judge turns stale: the table keeps
/// it both ways, formatted before and after (`ParkedRows`).
pub fn parked_row(v: &SessionView, now: i64, after_ms: u64) -> Vec<u8> {
    let mut row = Vec::with_capacity(512);
    // Into a Vec: cannot fail.
    let _ = write_status_line(v, now, after_ms, &mut row);
    if row.last() == Some(&b'\n') {
        row.pop();
    }
    row
}

/// The line that ends a `status` answer; it says so when the event stream is blocked,
/// and lists the named roots that do not exist (yet) as `waiting`, the live mutes, the
/// pages recently held back and how each remote's link stands, when there are any.
fn end_line(sessions: usize, hub: &Hub) -> String {
    let mut end = serde_json::json!({"end": true, "sessions": sessions});
    if let Some(b) = hub.stream.get() {
        end["stream"] = serde_json::json!(b);
    }
    let waiting: Vec<serde_json::Value> = hub
        .named_roots
        .get()
        .into_iter()
        .flatten()
        .filter(|r| !r.path.exists())
        .map(|r| {
            serde_json::json!({
                "provider": r.provider.map(crate::model::ProviderKind::as_str),
                "path": r.path.to_string_lossy(),
            })
        })
        .collect();
    if !waiting.is_empty() {
        end["waiting"] = waiting.into();
    }
    let mutes = hub.board.mutes.live(wall_now());
    if !mutes.is_empty() {
        end["mutes"] = serde_json::json!(mutes);
    }
    let held = hub.board.held.recent();
    if !held.is_empty() {
        end["held"] = serde_json::json!(held);
    }
    if let Some(why) = hub.board.raise.why_not() {
        end["no_raise"] = why.into();
    }
    let remotes = hub.remotes.rows(std::time::Instant::now());
    if !remotes.is_empty() {
        end["remotes"] = serde_json::Value::Array(remotes);
    }
    end.to_string()
}

/// What a `mute` target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MuteBy {
    /// A session id or a project name.
    Any,
    /// A project name (`--project`).
    Project,
    /// A git branch (`--branch`).
    Branch,
}

/// Every session's names, as `status` shows them: a parked session's from the row kept
/// for it (its view is not kept), any other's from its view.
fn session_names(hub: &Hub) -> Vec<crate::session_row::Names> {
    let mut reads = crate::views::RowReads::default();
    let mut row = Vec::new();
    let mut names = Vec::new();
    for r in hub.views.rows().flatten() {
        row.clear();
        let n = if r.row_via(&mut reads, &mut row) {
            crate::session_row::Names::from_row(&row)
        } else {
            Some(crate::session_row::Names::of(&r.view()))
        };
        names.extend(n);
    }
    names
}

/// The answer to a `mute` or `unmute` request. A mute's target is read as `status`
/// names sessions (a session id, a project, a longer project name; `project_only`:
/// projects alone), and the answer says how many sessions it names now (`matched`).
fn mute_reply(
    hub: &Hub,
    cmd: &str,
    target: Option<&str>,
    for_ms: Option<u64>,
    by: MuteBy,
) -> String {
    let board = &hub.board;
    let Some(target) = target else {
        return serde_json::json!({"error": format!("`{cmd}` needs a target (a project or a session)")}).to_string();
    };
    let now = wall_now();
    let mut matched = None;
    let done = if cmd == "mute" {
        let until = for_ms.map(|ms| now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)));
        let names = session_names(hub);
        if by == MuteBy::Branch {
            let t = target.trim();
            let n = names
                .iter()
                .filter(|n| n.agent.is_none() && n.branch.as_deref() == Some(t))
                .count();
            return match board.mutes.set_branch(t, until, now) {
                Ok(_) => serde_json::json!({"ok": true, "changed": true, "matched": n,
                    "mutes": board.mutes.live(now)})
                .to_string(),
                Err(e) => serde_json::json!({"error": e.to_string()}).to_string(),
            };
        }
        let known: Vec<crate::state::mutes::Named<'_>> = names
            .iter()
            .map(|n| crate::state::mutes::Named {
                session: &n.session,
                project: &n.project,
                project_long: n.project_long(),
            })
            .collect();
        let r = crate::state::mutes::resolve(target, by == MuteBy::Project, &known);
        matched = Some(r.matched);
        board
            .mutes
            .set_covering(&r.target, r.sessions, until, now)
            .map(|_| true)
    } else {
        board.mutes.unset(target, now)
    };
    match done {
        Ok(changed) => {
            let mut v =
                serde_json::json!({"ok": true, "changed": changed, "mutes": board.mutes.live(now)});
            if let Some(n) = matched {
                v["matched"] = serde_json::json!(n);
            }
            v.to_string()
        }
        Err(e) => serde_json::json!({"error": e.to_string()}).to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ring(ids: &[&str], evicted: u64) -> Inner {
        Inner {
            ring: ids
                .iter()
                .enumerate()
                .map(|(i, id)| Held {
                    at: i as i64 * 10,
                    id: (*id).into(),
                    line: Arc::from(format!("{{\"id\":\"{id}\"}}")),
                })
                .collect(),
            evicted,
            ..Inner::default()
        }
    }

    fn lines(v: &[Arc<str>]) -> Vec<String> {
        v.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn since_id_sends_what_follows_it() {
        let g = ring(&["a", "b", "c"], 0);
        assert_eq!(
            lines(&backlog(&g, &Since::Id("a".into()))),
            ["{\"id\":\"b\"}", "{\"id\":\"c\"}"]
        );
        assert!(backlog(&g, &Since::Id("c".into())).is_empty());
        assert!(backlog(&g, &Since::Now).is_empty());
        assert_eq!(backlog(&g, &Since::Time(10)).len(), 2);
    }

    #[test]
    fn an_id_not_held_gets_the_whole_ring_and_says_whether_some_may_be_gone() {
        for evicted in [0, 3] {
            let g = ring(&["a", "b"], evicted);
            let got = lines(&backlog(&g, &Since::Id("old".into())));
            assert_eq!(got.len(), 3);
            let notice: serde_json::Value = serde_json::from_str(&got[0]).unwrap();
            assert_eq!(notice["since_id_missing"], true);
            assert_eq!(notice["gap"], evicted > 0);
            assert_eq!(got[1..], ["{\"id\":\"a\"}", "{\"id\":\"b\"}"]);
        }
    }

    #[test]
    fn since_id_wins_over_since_ms() {
        assert_eq!(
            Since::from_request(Some(5), Some("x".into()), 100),
            Since::Id("x".into())
        );
        assert_eq!(Since::from_request(Some(5), None, 100), Since::Time(95));
        assert_eq!(Since::from_request(None, None, 100), Since::Now);
    }
}
