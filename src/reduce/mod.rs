//! The reducer: one state machine per (provider, session, agent). Pure: observations and
//! `now` in, events out. A completion is a *candidate* until evidence confirms it, and
//! any later activity supersedes it (seed 004).

mod background;
mod dedup;
mod retract;

pub use dedup::{DEFAULT_SEEN, Seen};

/// How many event ids the seen-set remembers.
pub fn dedup_capacity() -> usize {
    DEFAULT_SEEN
}

use crate::clock::{Now, format_rfc3339};
use crate::model::{Event, EventKind, ProviderKind, SessionKey, SessionState};
use crate::provider::{Evidence, Obs, ObsKind};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// Default quiet period before an unmarked final answer counts as complete. See README
/// ("How completion is decided") for the measurement behind it.
pub const DEFAULT_SETTLE_MS: u64 = 90_000;

/// Where an observation came from.
#[derive(Debug, Clone)]
pub struct Src {
    pub provider: ProviderKind,
    pub path: Arc<str>,
    /// 1-based line number.
    pub line: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Candidate {
    line: u64,
    record_ts: Option<i64>,
    key: String,
    message: Option<String>,
    /// Monotonic ms in memory; Unix ms in a [`SavedSession`] (monotonic time does not
    /// survive a restart).
    deadline: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Turn {
    id: String,
    open: bool,
    outcome: Option<SessionState>,
    cand: Option<Candidate>,
    last_line: u64,
    last_ts: Option<i64>,
    /// Set while the turn's completion was decided by quiet alone: the candidate's key,
    /// from which the completion's id is derived (see [`retract`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quiet: Option<String>,
}

impl Turn {
    fn new(id: String, line: u64, ts: Option<i64>) -> Self {
        Turn {
            id,
            open: true,
            outcome: None,
            cand: None,
            last_line: line,
            last_ts: ts,
            quiet: None,
        }
    }
}

/// What `scan` and `status` show for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub key: SessionKey,
    pub path: Arc<str>,
    pub state: SessionState,
    pub turn: Option<String>,
    pub line: u64,
    pub record_ts: Option<i64>,
    pub message: Option<String>,
    pub evidence: Option<&'static str>,
    /// Background tasks still running or waiting to report back.
    pub background_tasks: u32,
}

/// A working main session that has been quiet long enough to ask whether its writer
/// still lives (see [`Reducer::quiet_working`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quiet {
    pub key: SessionKey,
    pub path: Arc<str>,
    /// The directory the agent process runs in, if the transcript says.
    pub cwd: Option<String>,
}

/// What became of one session since the last [`Reducer::take_changes`].
#[derive(Debug, Clone)]
pub enum SessionChange {
    Updated(SessionView),
    Removed(SessionKey),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Session {
    /// Not saved: a saved session is restored with the file it belongs to.
    #[serde(skip)]
    path: Arc<str>,
    state: SessionState,
    turn: Option<Turn>,
    last_line: u64,
    last_ts: Option<i64>,
    decided_line: u64,
    decided_ts: Option<i64>,
    message: Option<String>,
    evidence: Option<Evidence>,
    #[serde(default, skip_serializing_if = "background::Tasks::is_empty")]
    bg: background::Tasks,
    /// Where the agent process runs, if the transcript says (for the liveness check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    /// When the last record arrived (monotonic ms; not saved: a restored session counts
    /// from its restore).
    #[serde(skip)]
    last_seen: u64,
}

/// The decisive facts of one event, before it becomes a schema line.
#[derive(Debug, Default)]
struct Draft {
    kind: Option<EventKind>,
    turn: Option<String>,
    line: u64,
    record_ts: Option<i64>,
    reason: Option<String>,
    message: Option<String>,
    evidence: Option<Evidence>,
    /// Content key of the decisive record.
    key: String,
    ts: i64,
    resets_at: Option<String>,
    initiator: Option<&'static str>,
    pre_tokens: Option<u64>,
    /// Content key of the `turn_completed` a `turn_resumed` takes back.
    supersedes: Option<String>,
    background_tasks: Option<u32>,
}

fn draft(
    kind: EventKind,
    turn: Option<String>,
    line: u64,
    record_ts: Option<i64>,
    key: &str,
    ts: i64,
) -> Draft {
    Draft {
        kind: Some(kind),
        turn,
        line,
        record_ts,
        key: key.to_owned(),
        ts,
        ..Draft::default()
    }
}

/// One session's state, saved with the checkpoint of the file that feeds it, so the
/// file can be continued from there instead of re-read (see [`Reducer::save_path`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSession {
    key: SessionKey,
    state: Session,
}

/// An event id the reducer decided (emitted, or absorbed as history): what the daemon's
/// durable ledger remembers.
#[derive(Debug, Clone)]
pub struct Decided {
    pub id: String,
    pub session: SessionKey,
    pub record_ts: Option<i64>,
}

pub struct Reducer {
    settle_ms: u64,
    sessions: HashMap<SessionKey, Session>,
    /// Settle deadlines of pending candidates (monotonic ms), earliest first, so finding
    /// the next one costs O(log n) instead of a walk over every session. Entries are
    /// checked against the session when they come up; stale ones are dropped then.
    deadlines: BinaryHeap<Reverse<(u64, SessionKey)>>,
    /// The sessions last fed from each file, so a file's sessions are found (saved,
    /// forgotten) without a walk over every session.
    by_path: HashMap<Arc<str>, Vec<SessionKey>>,
    seen: Seen,
    /// `Some` when the caller wants every decided id (see [`Reducer::take_decided`]).
    decided: Option<Vec<Decided>>,
    /// Events about records older than this (Unix ms) are history: absorbed, not emitted.
    history_before: Option<i64>,
    /// `Some` when the caller wants the sessions changed since it last asked (see
    /// [`Reducer::take_changes`]), so it never has to look at the unchanged ones.
    changed: Option<HashSet<SessionKey>>,
}

/// Notes that `key` changed, if changes are tracked.
fn mark(changed: &mut Option<HashSet<SessionKey>>, key: &SessionKey) {
    if let Some(set) = changed
        && !set.contains(key)
    {
        set.insert(key.clone());
    }
}

fn view(key: &SessionKey, s: &Session) -> SessionView {
    let working = s.state == SessionState::Working;
    SessionView {
        key: key.clone(),
        path: s.path.clone(),
        state: s.state,
        turn: s.turn.as_ref().map(|t| t.id.clone()),
        line: if working { s.last_line } else { s.decided_line },
        record_ts: if working { s.last_ts } else { s.decided_ts },
        message: s.message.clone(),
        evidence: s.evidence.map(Evidence::as_str),
        background_tasks: s.bg.count(),
    }
}

impl Reducer {
    pub fn new(settle_ms: u64, seen_capacity: usize) -> Self {
        Reducer {
            settle_ms,
            sessions: HashMap::new(),
            deadlines: BinaryHeap::new(),
            by_path: HashMap::new(),
            seen: Seen::new(seen_capacity),
            decided: None,
            history_before: None,
            changed: None,
        }
    }

    /// From now on, keep track of which sessions change, for [`Reducer::take_changes`];
    /// every session there is counts as changed.
    pub fn track_changes(&mut self) {
        if self.changed.is_none() {
            self.changed = Some(self.sessions.keys().cloned().collect());
        }
    }

    /// Whether a session changed since the last [`Reducer::take_changes`].
    pub fn has_changes(&self) -> bool {
        self.changed.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// The current view of each session changed since the last call (or its removal),
    /// sorted by key. Costs what changed, not what there is.
    pub fn take_changes(&mut self) -> Vec<SessionChange> {
        let Some(changed) = self.changed.as_mut() else {
            return Vec::new();
        };
        let mut keys: Vec<SessionKey> = changed.drain().collect();
        keys.sort();
        keys.into_iter()
            .map(|k| match self.sessions.get(&k) {
                Some(s) => SessionChange::Updated(view(&k, s)),
                None => SessionChange::Removed(k),
            })
            .collect()
    }

    /// How many sessions there are.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// From now on, keep every decided id for [`Reducer::take_decided`].
    pub fn record_decided(&mut self) {
        self.decided.get_or_insert_with(Vec::new);
    }

    /// The ids decided since the last call.
    pub fn take_decided(&mut self) -> Vec<Decided> {
        self.decided
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Treats `id` as already decided (restored from durable state).
    pub fn mark_seen(&mut self, id: &str) {
        self.seen.insert(id);
    }

    /// Records older than `wall` (Unix ms) update state silently from now on.
    pub fn set_history_before(&mut self, wall: Option<i64>) {
        self.history_before = wall;
    }

    /// Applies one observation.
    pub fn apply(&mut self, src: &Src, obs: Obs, now: Now, out: &mut Vec<Event>) {
        let key = SessionKey {
            provider: src.provider,
            session: obs.session,
            agent: obs.agent,
        };
        if let ObsKind::Anomaly { reason, message } = obs.kind {
            // About the file, not the conversation: no session state is touched.
            let mut d = draft(
                EventKind::Anomaly,
                None,
                src.line,
                obs.record_ts,
                &obs.key,
                now.wall,
            );
            d.reason = Some(reason);
            d.message = Some(message);
            out.extend(self.finish(&key, &src.path, d));
            return;
        }
        let moved = match self.sessions.get(&key) {
            None => {
                self.by_path
                    .entry(src.path.clone())
                    .or_default()
                    .push(key.clone());
                None
            }
            Some(s) if s.path != src.path => Some(s.path.clone()),
            Some(_) => None,
        };
        if let Some(old) = moved {
            self.unindex(&old, &key);
            self.by_path
                .entry(src.path.clone())
                .or_default()
                .push(key.clone());
        }
        let sess = self.sessions.entry(key.clone()).or_insert_with(|| Session {
            path: src.path.clone(),
            state: SessionState::Working,
            turn: None,
            last_line: src.line,
            last_ts: obs.record_ts,
            decided_line: src.line,
            decided_ts: obs.record_ts,
            message: None,
            evidence: None,
            bg: background::Tasks::default(),
            cwd: None,
            last_seen: now.mono,
        });
        mark(&mut self.changed, &key);
        sess.last_seen = now.mono;
        if sess.path != src.path {
            sess.path = src.path.clone();
        }
        sess.last_line = src.line;
        if obs.record_ts.is_some() {
            sess.last_ts = obs.record_ts;
        }
        let candidate = matches!(obs.kind, ObsKind::Final { .. });
        let drafts = step(
            sess,
            src.line,
            obs.record_ts,
            &obs.key,
            obs.kind,
            now,
            self.settle_ms,
        );
        let path = sess.path.clone();
        let drafts = with_tasks(drafts, &sess.bg);
        if candidate {
            self.schedule(&key);
        }
        for d in drafts {
            out.extend(self.finish(&key, &path, d));
        }
    }

    /// Fires due settle timers.
    pub fn tick(&mut self, now: Now, out: &mut Vec<Event>) {
        let mut due: Vec<(u64, SessionKey)> = Vec::new();
        while let Some(Reverse((deadline, _))) = self.deadlines.peek()
            && *deadline <= now.mono
        {
            if let Some(Reverse(entry)) = self.deadlines.pop()
                && self.is_due_at(&entry)
            {
                due.push(entry);
            }
        }
        // Oldest deadline first, so events stay in time order.
        due.sort();
        due.dedup();
        for (_, key) in due {
            let Some(sess) = self.sessions.get_mut(&key) else {
                continue;
            };
            let Some(deadline) = pending(sess).map(|c| c.deadline) else {
                continue;
            };
            // Stamp the event with when the timer was due, not when we noticed.
            let at = now.wall - i64::try_from(now.mono.saturating_sub(deadline)).unwrap_or(0);
            let drafts: Vec<Draft> = confirm(sess, Evidence::Quiet, at).into_iter().collect();
            let drafts = with_tasks(drafts, &sess.bg);
            let path = sess.path.clone();
            mark(&mut self.changed, &key);
            for d in drafts {
                out.extend(self.finish(&key, &path, d));
            }
        }
    }

    /// The earliest pending settle deadline (monotonic ms).
    pub fn next_deadline(&mut self) -> Option<u64> {
        // Entries whose candidate was superseded, confirmed or forgotten go lazily.
        while let Some(Reverse(entry)) = self.deadlines.peek() {
            if self.is_due_at(entry) {
                return Some(entry.0);
            }
            self.deadlines.pop();
        }
        None
    }

    /// Whether `key` still has a pending candidate due at `deadline`.
    fn is_due_at(&self, (deadline, key): &(u64, SessionKey)) -> bool {
        self.sessions
            .get(key)
            .and_then(pending)
            .is_some_and(|c| c.deadline == *deadline)
    }

    /// Remembers `key`'s pending deadline, if it has one.
    fn schedule(&mut self, key: &SessionKey) {
        if let Some(c) = self.sessions.get(key).and_then(pending) {
            self.deadlines.push(Reverse((c.deadline, key.clone())));
        }
    }

    /// Every session's current state, sorted by key.
    pub fn sessions(&self) -> Vec<SessionView> {
        let mut v: Vec<SessionView> = self.sessions.iter().map(|(k, s)| view(k, s)).collect();
        v.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }

    /// Forgets a session (its file is gone).
    pub fn forget(&mut self, key: &SessionKey) {
        if let Some(s) = self.sessions.remove(key) {
            mark(&mut self.changed, key);
            self.unindex(&s.path, key);
        }
    }

    fn unindex(&mut self, path: &str, key: &SessionKey) {
        if let Some(keys) = self.by_path.get_mut(path) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.by_path.remove(path);
            }
        }
    }

    /// Forgets every session last fed from `path`: the file is gone, or is about to be
    /// re-read from its first byte (the seen-set keeps that re-read silent).
    pub fn forget_path(&mut self, path: &str) {
        for key in self.by_path.remove(path).unwrap_or_default() {
            if self.sessions.remove(&key).is_some() {
                mark(&mut self.changed, &key);
            }
        }
    }

    /// The state of every session last fed from `path`, as of `now`.
    pub fn save_path(&self, path: &str, now: Now) -> Vec<SavedSession> {
        let keys = self.by_path.get(path).map_or(&[][..], Vec::as_slice);
        let mut out: Vec<SavedSession> = keys
            .iter()
            .filter_map(|k| Some((k, self.sessions.get(k)?)))
            .map(|(k, s)| {
                let mut state = s.clone();
                if let Some(c) = state.turn.as_mut().and_then(|t| t.cand.as_mut()) {
                    let left = i64::try_from(c.deadline.saturating_sub(now.mono)).unwrap_or(0);
                    c.deadline = u64::try_from(now.wall.saturating_add(left)).unwrap_or(0);
                }
                SavedSession {
                    key: k.clone(),
                    state,
                }
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Takes back sessions [`Reducer::save_path`] gave for `path`. A pending completion
    /// keeps its deadline on the wall clock: one that fell due while nobody was
    /// watching fires on the next tick.
    pub fn restore_path(&mut self, path: &Arc<str>, saved: Vec<SavedSession>, now: Now) {
        for SavedSession { key, mut state } in saved {
            state.path = path.clone();
            state.last_seen = now.mono;
            if let Some(c) = state.turn.as_mut().and_then(|t| t.cand.as_mut()) {
                let due = i64::try_from(c.deadline).unwrap_or(i64::MAX);
                // Never longer than a whole settle period: the wall clock may have been
                // set back while nobody was watching.
                let left = u64::try_from(due.saturating_sub(now.wall))
                    .unwrap_or(0)
                    .min(self.settle_ms);
                c.deadline = now.mono.saturating_add(left);
            }
            self.forget(&key);
            self.by_path
                .entry(path.clone())
                .or_default()
                .push(key.clone());
            mark(&mut self.changed, &key);
            self.sessions.insert(key.clone(), state);
            self.schedule(&key);
        }
    }

    /// After `path` was read at start: if the file has been idle (`idle_ms`, from its
    /// modification time) for at least the settle period, every answer it left pending
    /// is complete — the quiet period passed while nobody watched. Events about records
    /// older than `live_before` are absorbed as history, like the read itself.
    pub fn settle_idle(
        &mut self,
        path: &str,
        idle_ms: i64,
        live_before: i64,
        now: Now,
        out: &mut Vec<Event>,
    ) {
        if idle_ms < i64::try_from(self.settle_ms).unwrap_or(i64::MAX) {
            return;
        }
        let keys = self.by_path.get(path).cloned().unwrap_or_default();
        let keep = self.history_before;
        self.history_before = Some(live_before);
        for key in keys {
            let Some(sess) = self.sessions.get_mut(&key) else {
                continue;
            };
            let Some(d) = confirm(sess, Evidence::Quiet, now.wall) else {
                continue;
            };
            let path = sess.path.clone();
            mark(&mut self.changed, &key);
            out.extend(self.finish(&key, &path, d));
        }
        self.history_before = keep;
    }

    /// The main sessions working on an open turn (no answer pending) and quiet for at
    /// least `after_ms` at `now`: the ones whose writer should be looked for.
    pub fn quiet_working(&self, now: Now, after_ms: u64) -> Vec<Quiet> {
        let mut v: Vec<Quiet> = self
            .sessions
            .iter()
            .filter(|(k, s)| k.agent.is_none() && writer_check_due(s, now, after_ms))
            .map(|(k, s)| Quiet {
                key: k.clone(),
                path: s.path.clone(),
                cwd: s.cwd.clone(),
            })
            .collect();
        v.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }

    /// The answer for one [`Quiet`] session: nothing lives that could still write it, so
    /// its turn ends as interrupted (`writer_gone`). Checked again against `now`: a
    /// record that came in since the question keeps the turn open.
    pub fn writer_gone(&mut self, key: &SessionKey, now: Now, after_ms: u64, out: &mut Vec<Event>) {
        let Some(sess) = self.sessions.get_mut(key) else {
            return;
        };
        if key.agent.is_some() || !writer_check_due(sess, now, after_ms) {
            return;
        }
        let Some(t) = sess.turn.as_ref() else { return };
        let (turn, line, ts) = (t.id.clone(), t.last_line, t.last_ts);
        close(sess, SessionState::Interrupted, line, ts, None, None);
        let mut d = draft(
            EventKind::TurnInterrupted,
            Some(turn.clone()),
            line,
            ts,
            &format!("writer_gone:{turn}:{line}"),
            now.wall,
        );
        d.reason = Some("writer_gone".to_owned());
        let path = sess.path.clone();
        mark(&mut self.changed, key);
        out.extend(self.finish(key, &path, d));
    }

    /// Paths of the sessions whose turn is still open (working or waiting for input).
    pub fn open_paths(&self) -> impl Iterator<Item = &Arc<str>> {
        self.sessions
            .values()
            .filter(|s| s.turn.as_ref().is_some_and(|t| t.open))
            .map(|s| &s.path)
    }

    fn finish(&mut self, key: &SessionKey, path: &Arc<str>, d: Draft) -> Option<Event> {
        let kind = d.kind?;
        let turn = d.turn.as_deref().unwrap_or_default();
        let id = event_id(key, kind, turn, &d.key);
        let supersedes = d
            .supersedes
            .as_deref()
            .map(|k| event_id(key, EventKind::TurnCompleted, turn, k));
        if !self.seen.insert(&id) {
            return None;
        }
        if let Some(decided) = self.decided.as_mut() {
            decided.push(Decided {
                id: id.clone(),
                session: key.clone(),
                record_ts: d.record_ts,
            });
        }
        if let (Some(before), Some(rts)) = (self.history_before, d.record_ts)
            && rts < before
        {
            return None;
        }
        Some(Event {
            v: 1,
            event: kind,
            provider: Some(key.provider),
            session: Some(key.session.clone()),
            agent: key.agent.clone(),
            turn: d.turn,
            path: Some(path.to_string()),
            line: Some(d.line),
            ts: format_rfc3339(d.ts),
            record_ts: d.record_ts.map(format_rfc3339),
            reason: d.reason,
            message: d.message,
            evidence: d.evidence.map(|e| e.as_str().to_owned()),
            id,
            resets_at: d.resets_at,
            initiator: d.initiator,
            pre_tokens: d.pre_tokens,
            supersedes,
            background_tasks: d.background_tasks,
            background_finished: None,
            replay: false,
        })
    }
}

/// The id of an event: derived from content only, so it is the same on every read.
fn event_id(key: &SessionKey, kind: EventKind, turn: &str, record: &str) -> String {
    crate::provider::content_hash(&[
        key.provider.as_str().as_bytes(),
        kind.as_str().as_bytes(),
        turn.as_bytes(),
        record.as_bytes(),
    ])
}

/// Marks the completions among `drafts` with the session's background tasks, if any.
fn with_tasks(mut drafts: Vec<Draft>, bg: &background::Tasks) -> Vec<Draft> {
    let n = bg.count();
    if n > 0 {
        for d in &mut drafts {
            if d.kind == Some(EventKind::TurnCompleted) {
                d.background_tasks = Some(n);
            }
        }
    }
    drafts
}

/// Working on an open turn with no answer pending, and quiet for `after_ms`.
fn writer_check_due(s: &Session, now: Now, after_ms: u64) -> bool {
    s.state == SessionState::Working
        && s.turn.as_ref().is_some_and(|t| t.open && t.cand.is_none())
        && background::liveness_due(s.last_seen, now.mono, after_ms)
}

fn pending(s: &Session) -> Option<&Candidate> {
    s.turn
        .as_ref()
        .filter(|t| t.open)
        .and_then(|t| t.cand.as_ref())
}

/// The state transition for one observation; returns the events it decides.
fn step(
    sess: &mut Session,
    line: u64,
    ts: Option<i64>,
    key: &str,
    kind: ObsKind,
    now: Now,
    settle: u64,
) -> Vec<Draft> {
    let mut out = Vec::new();
    out.extend(retract::contradicted(sess, &kind, line, ts, key, now.wall));
    match kind {
        ObsKind::TurnStart { turn, initiator } => {
            if let Some(t) = sess.turn.as_ref().filter(|t| t.open) {
                if t.id == turn {
                    // The same prompt again (a resumed copy): nothing new.
                    return out;
                }
                out.extend(close_previous(sess, now.wall));
            }
            sess.turn = Some(Turn::new(turn.clone(), line, ts));
            set_state(sess, SessionState::Working, line, ts, None, None);
            let mut d = draft(EventKind::TurnStarted, Some(turn), line, ts, key, now.wall);
            d.initiator = Some(initiator.as_str());
            out.push(d);
        }
        ObsKind::Work => {
            let t = ensure_open(sess, key, line, ts);
            t.cand = None;
            set_state(sess, SessionState::Working, line, ts, None, None);
        }
        ObsKind::ToolCall {
            needs_input,
            message,
            ..
        } => {
            let t = ensure_open(sess, key, line, ts);
            t.cand = None;
            let turn = t.id.clone();
            if needs_input.is_some() {
                set_state(
                    sess,
                    SessionState::NeedsInput,
                    line,
                    ts,
                    message.clone(),
                    None,
                );
                let mut d = draft(EventKind::NeedsInput, Some(turn), line, ts, key, now.wall);
                d.message = message;
                d.reason = needs_input;
                out.push(d);
            } else {
                set_state(sess, SessionState::Working, line, ts, None, None);
            }
        }
        ObsKind::ToolResult { .. } => {
            let t = ensure_open(sess, key, line, ts);
            t.cand = None;
            set_state(sess, SessionState::Working, line, ts, None, None);
        }
        ObsKind::Final {
            message,
            confirm: evidence,
        } => {
            let t = ensure_open(sess, key, line, ts);
            t.cand = Some(Candidate {
                line,
                record_ts: ts,
                key: key.to_owned(),
                message: message.clone(),
                deadline: now.mono.saturating_add(settle),
            });
            set_state(sess, SessionState::Working, line, ts, message, None);
            if let Some(ev) = evidence {
                out.extend(confirm(sess, ev, now.wall));
            }
        }
        ObsKind::Confirm(ev) => out.extend(confirm(sess, ev, now.wall)),
        ObsKind::Completed {
            turn,
            message,
            evidence,
        } => {
            if let Some(t) = resolve_turn(sess, turn.as_deref(), key, line, ts) {
                if t.outcome == Some(SessionState::Completed) {
                    return out;
                }
                let message = message.or_else(|| t.cand.take().and_then(|c| c.message));
                let turn = t.id.clone();
                close(
                    sess,
                    SessionState::Completed,
                    line,
                    ts,
                    message.clone(),
                    Some(evidence),
                );
                let mut d = draft(
                    EventKind::TurnCompleted,
                    Some(turn),
                    line,
                    ts,
                    key,
                    now.wall,
                );
                d.message = message;
                d.evidence = Some(evidence);
                out.push(d);
            }
        }
        ObsKind::Failed {
            turn,
            reason,
            message,
            resets_at,
        } => {
            if let Some(t) = resolve_turn(sess, turn.as_deref(), key, line, ts) {
                if t.outcome == Some(SessionState::Failed) {
                    return out;
                }
                let turn = t.id.clone();
                close(sess, SessionState::Failed, line, ts, message.clone(), None);
                let mut d = draft(EventKind::TurnFailed, Some(turn), line, ts, key, now.wall);
                d.message = message;
                d.reason = Some(reason);
                d.resets_at = resets_at;
                out.push(d);
            }
        }
        ObsKind::Interrupted {
            turn,
            reason,
            message,
        } => {
            let open = sess
                .turn
                .as_ref()
                .filter(|t| t.open && turn.as_deref().is_none_or(|id| id == t.id));
            if let Some(t) = open {
                let turn = t.id.clone();
                close(
                    sess,
                    SessionState::Interrupted,
                    line,
                    ts,
                    message.clone(),
                    None,
                );
                let mut d = draft(
                    EventKind::TurnInterrupted,
                    Some(turn),
                    line,
                    ts,
                    key,
                    now.wall,
                );
                d.message = message;
                d.reason = Some(reason);
                out.push(d);
            }
        }
        ObsKind::Compacted { pre_tokens } => {
            let turn = sess.turn.as_ref().map(|t| t.id.clone());
            let mut d = draft(EventKind::ContextCompacted, turn, line, ts, key, now.wall);
            d.pre_tokens = pre_tokens;
            out.push(d);
        }
        ObsKind::Background(op) => sess.bg.apply(op),
        ObsKind::StartDir(dir) => {
            sess.cwd.get_or_insert(dir);
        }
        ObsKind::Anomaly { .. } => {}
    }
    out
}

fn set_state(
    sess: &mut Session,
    state: SessionState,
    line: u64,
    ts: Option<i64>,
    message: Option<String>,
    evidence: Option<Evidence>,
) {
    sess.state = state;
    sess.decided_line = line;
    sess.decided_ts = ts;
    if message.is_some() || state != SessionState::Working {
        sess.message = message;
    }
    sess.evidence = evidence;
}

fn close(
    sess: &mut Session,
    state: SessionState,
    line: u64,
    ts: Option<i64>,
    message: Option<String>,
    evidence: Option<Evidence>,
) {
    if let Some(t) = sess.turn.as_mut() {
        t.open = false;
        t.outcome = Some(state);
        t.cand = None;
    }
    set_state(sess, state, line, ts, message, evidence);
}

/// The open turn, reopening a finished one (later activity supersedes its end) or starting
/// an implicit one when the file began mid-turn.
fn ensure_open<'s>(sess: &'s mut Session, key: &str, line: u64, ts: Option<i64>) -> &'s mut Turn {
    let t = sess
        .turn
        .get_or_insert_with(|| Turn::new(key.to_owned(), line, ts));
    if !t.open {
        t.open = true;
        t.outcome = None;
    }
    t.last_line = line;
    t.last_ts = ts;
    t
}

/// The turn an explicit end names. An end naming another turn than the open one is stale
/// (that turn was abandoned); with no open turn, the named turn becomes an implicit one.
fn resolve_turn<'s>(
    sess: &'s mut Session,
    id: Option<&str>,
    key: &str,
    line: u64,
    ts: Option<i64>,
) -> Option<&'s mut Turn> {
    let named_other = match (sess.turn.as_ref(), id) {
        (Some(t), Some(id)) if t.id != id => {
            if t.open {
                return None;
            }
            true
        }
        (None, Some(_)) => true,
        _ => false,
    };
    if named_other {
        sess.turn = Some(Turn::new(id.unwrap_or(key).to_owned(), line, ts));
    }
    let t = sess
        .turn
        .get_or_insert_with(|| Turn::new(key.to_owned(), line, ts));
    t.last_line = line;
    t.last_ts = ts;
    Some(t)
}

/// Confirms the open turn's candidate with `ev`, if there is one.
fn confirm(sess: &mut Session, ev: Evidence, at: i64) -> Option<Draft> {
    let t = sess.turn.as_mut().filter(|t| t.open)?;
    let c = t.cand.take()?;
    let turn = t.id.clone();
    retract::note_quiet(sess, ev, &c.key);
    close(
        sess,
        SessionState::Completed,
        c.line,
        c.record_ts,
        c.message.clone(),
        Some(ev),
    );
    let mut d = draft(
        EventKind::TurnCompleted,
        Some(turn),
        c.line,
        c.record_ts,
        &c.key,
        at,
    );
    d.message = c.message;
    d.evidence = Some(ev);
    Some(d)
}

/// A new prompt arrived while a turn was open: a pending candidate was the answer (the
/// person read it and replied); otherwise the turn was abandoned.
fn close_previous(sess: &mut Session, at: i64) -> Option<Draft> {
    if let Some(d) = confirm(sess, Evidence::NextPrompt, at) {
        return Some(d);
    }
    let t = sess.turn.as_ref()?;
    let (turn, line, ts) = (t.id.clone(), t.last_line, t.last_ts);
    close(sess, SessionState::Interrupted, line, ts, None, None);
    let mut d = draft(
        EventKind::TurnInterrupted,
        Some(turn.clone()),
        line,
        ts,
        &format!("abandoned:{turn}"),
        at,
    );
    d.reason = Some("abandoned".to_owned());
    Some(d)
}
