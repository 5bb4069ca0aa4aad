//! The reducer: one state machine per (provider, session, agent). Pure: observations and
//! `now` in, events out. A completion is a *candidate* until evidence confirms it, and
//! any later activity supersedes it (seed 004).
//!
//! This file holds the reducer's API and its bookkeeping across sessions: where an
//! observation goes ([`Reducer::apply`]), the settle timers ([`Reducer::tick`],
//! [`Reducer::next_deadline`]) and how a decided draft becomes an event line (the
//! seen-set, history). What one session does with one record lives in `session.rs`; the
//! views (`views.rs`), the saved state (`saved.rs`) and the writer-liveness question
//! (`liveness.rs`) sit beside it, each over the same sessions. Only this file turns a
//! draft into an event, so the seen-set and history decide every event in one place.

mod background;
mod dedup;
mod key_slots;
mod liveness;
mod park;
mod park_index;
mod repeat;
mod retract;
mod saved;
mod session;
mod signal;
mod views;

pub use dedup::{DEFAULT_SEEN, Seen};
pub use liveness::Quiet;
pub use park::{Kept, Shared, Spill, SpillAt, Spilled};
pub use saved::{Decided, SavedSession};
pub use signal::SignalStats;
pub use views::{ParkedView, STALE, SessionChange, SessionView};

/// How many event ids the seen-set remembers.
pub fn dedup_capacity() -> usize {
    DEFAULT_SEEN
}

use crate::clock::{Now, format_rfc3339};
use crate::model::{Event, EventKind, ProviderKind, SessionKey, SessionState};
use crate::provider::{Evidence, Obs, ObsKind};
use foldhash::{HashMap, HashSet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use session::{Draft, Session, confirm, draft, pending, step, with_tasks};
use views::mark;

/// Default quiet period before an unmarked final answer counts as complete. See
/// docs/completion.md ("Why 90 s") for the measurement behind it.
pub const DEFAULT_SETTLE_MS: u64 = 90_000;

/// Where an observation came from.
#[derive(Debug, Clone)]
pub struct Src {
    pub provider: ProviderKind,
    pub path: Arc<str>,
    /// 1-based line number.
    pub line: u64,
}

/// The maps below hash a session key or a path on every record (and the file table in
/// `daemon/files.rs` a path on every look): with SipHash, std's default, that was 2-3 %
/// of a first start's samples. They use foldhash instead. Its seed differs per process
/// (from the address-space layout, an allocation's address and the time, not the OS's
/// randomness as std's is), and it does not claim std's resistance to chosen
/// collisions: a transcript written to collide would have to guess the seed, and would
/// only slow a map down, never change what it holds. The maps live in memory only, and
/// nothing depends on their order.
pub struct Reducer {
    settle_ms: u64,
    /// Boxed: the map keeps room for more entries than it holds, and an empty slot should
    /// cost a pointer, not a whole session.
    sessions: HashMap<SessionKey, Box<Session>>,
    /// Settle deadlines of pending candidates (monotonic ms), earliest first, so finding
    /// the next one costs O(log n) instead of a walk over every session. Entries are
    /// checked against the session when they come up; stale ones are dropped then.
    deadlines: BinaryHeap<Reverse<(u64, SessionKey)>>,
    /// The sessions last fed from each file, so a file's sessions are found (saved,
    /// forgotten) without a walk over every session.
    by_path: HashMap<Arc<str>, Vec<SessionKey>>,
    seen: Seen,
    /// Record keys already applied, so a copy of a record changes nothing.
    repeats: repeat::Repeats,
    /// `Some` when the caller wants every decided id (see [`Reducer::take_decided`]).
    decided: Option<Vec<Decided>>,
    /// Events about records older than this (Unix ms) are history: absorbed, not emitted.
    history_before: Option<i64>,
    /// `Some` when the caller wants the sessions changed since it last asked (see
    /// [`Reducer::take_changes`]), so it never has to look at the unchanged ones.
    changed: Option<HashSet<SessionKey>>,
    /// Sessions of cold files, in saved form (see `park.rs`).
    parked: park::Parked,
    /// `Some` (the liveness check's quiet period) when open turns park too (see
    /// [`Reducer::park_open_turns`]).
    open_after: Option<u64>,
    signal_stats: SignalStats,
}

impl Reducer {
    pub fn new(settle_ms: u64, seen_capacity: usize) -> Self {
        Reducer {
            settle_ms,
            sessions: HashMap::default(),
            deadlines: BinaryHeap::new(),
            by_path: HashMap::default(),
            seen: Seen::new(seen_capacity),
            repeats: repeat::Repeats::new(repeat::RECORDS_SEEN),
            decided: None,
            history_before: None,
            changed: None,
            parked: park::Parked::default(),
            open_after: None,
            signal_stats: SignalStats::default(),
        }
    }

    /// How many sessions there are.
    pub fn session_count(&self) -> usize {
        self.sessions.len() + self.parked_count()
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
        if src.provider.descriptor().one_record_a_line()
            && self.repeats.is_repeat(&key, src.line, &obs.key, &obs.kind)
        {
            // A copy of a record this session already had: nothing new happened.
            return;
        }
        self.unpark_for(&key, &src.path, now);
        if self.parked.is_lost(&src.path) {
            // Its sessions could not be read back: the file's re-read brings them, and
            // this record, back in order.
            return;
        }
        let moved = match self.sessions.get(&key) {
            None => {
                self.by_path
                    .entry(src.path.clone())
                    .or_insert_with(|| Vec::with_capacity(1))
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
                .or_insert_with(|| Vec::with_capacity(1))
                .push(key.clone());
        }
        let sess = self.sessions.entry(key.clone()).or_insert_with(|| {
            Box::new(Session {
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
                branch: None,
                job: None,
                last_seen: now.mono,
                heard: signal::Heard::default(),
            })
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
        Self::before_obs(sess, &obs.kind);
        let mut drafts = step(
            sess,
            src.line,
            obs.record_ts,
            &obs.key,
            obs.kind,
            now,
            self.settle_ms,
        );
        if candidate && let Some(d) = signal::idle_decides(sess, now) {
            // The agent said idle before its answer was read.
            drafts.push(d);
        }
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
            .and_then(|s| pending(s))
            .is_some_and(|c| c.deadline == *deadline)
    }

    /// Drops what a burst left behind: deadlines no longer pending (a first history read
    /// leaves one per answer it saw), and the room the maps grew to hold sessions since
    /// parked.
    pub fn compact(&mut self) {
        let deadlines = std::mem::take(&mut self.deadlines);
        self.deadlines = deadlines
            .into_iter()
            .filter(|Reverse(e)| self.is_due_at(e))
            .collect();
        // The collect above reuses the burst's allocation: give its room back.
        self.deadlines.shrink_to_fit();
        self.sessions.shrink_to_fit();
        self.by_path.shrink_to_fit();
    }

    /// Remembers `key`'s pending deadline, if it has one.
    fn schedule(&mut self, key: &SessionKey) {
        if let Some(c) = self.sessions.get(key).and_then(|s| pending(s)) {
            self.deadlines.push(Reverse((c.deadline, key.clone())));
        }
    }

    /// The files whose sessions are held in memory (not parked): few once the history is
    /// read, whatever the number of files.
    pub fn held_paths(&self) -> impl Iterator<Item = &Arc<str>> {
        self.by_path.keys()
    }

    /// Paths of the sessions whose turn is still open (working or waiting for input),
    /// parked ones too.
    pub fn open_paths(&self) -> impl Iterator<Item = &Arc<str>> {
        self.sessions
            .values()
            .filter(|s| s.turn.as_ref().is_some_and(|t| t.open))
            .map(|s| &s.path)
            .chain(self.parked_open_paths())
    }

    fn finish(&mut self, key: &SessionKey, path: &Arc<str>, mut d: Draft) -> Option<Event> {
        let kind = d.kind?;
        let mut project = None;
        let mut branch = None;
        let mut job = None;
        if let Some(sess) = self.sessions.get(key) {
            session::stamp(sess, std::slice::from_mut(&mut d));
            project = sess
                .cwd
                .as_deref()
                .and_then(|c| crate::text::dir_name(c, 1));
            branch.clone_from(&sess.branch);
            job.clone_from(&sess.job);
        }
        // What decided the turn, recorded before the seen-set may drop the event (sent
        // before a restart, or deduped): the state must not depend on which records
        // the reducer saw earlier, so a tail-first restart reaches the state a whole
        // read does, and a rewind after a re-read still names the outcome. The first
        // outcome names it: a late end that the outcome mark drops is no outcome sent.
        if matches!(
            kind,
            EventKind::TurnCompleted | EventKind::TurnFailed | EventKind::TurnInterrupted
        ) && let Some(t) = self
            .sessions
            .get_mut(key)
            .and_then(|s| s.turn.as_mut())
            .filter(|t| Some(t.id.as_str()) == d.turn.as_deref() && t.decided_by.is_none())
        {
            t.decided_by = Some((kind, d.key.clone()));
        }
        if matches!(
            kind,
            EventKind::TurnCompleted | EventKind::TurnFailed | EventKind::TurnInterrupted
        ) {
            // One outcome per turn between retractions, whatever the records say: a
            // replayed copy of a decided turn, or a late end naming one, decides nothing.
            // Turn ids are only unique within a session (Cursor's are ordinals).
            let mark = format!(
                "outcome\0{}\0{}\0{}\0{}",
                key.session,
                key.agent.as_deref().unwrap_or_default(),
                d.turn.as_deref().unwrap_or_default(),
                d.retracted.unwrap_or(0)
            );
            if !self
                .seen
                .insert(&event_id(key, EventKind::TurnCompleted, "", &mark))
            {
                return None;
            }
        }
        let turn = d.turn.as_deref().unwrap_or_default();
        let id = event_id(key, kind, turn, &d.key);
        let supersedes = d.supersedes.as_deref().map(|k| {
            let kind = d.supersedes_kind.unwrap_or(EventKind::TurnCompleted);
            event_id(key, kind, turn, k)
        });
        if !self.seen.insert(&id) {
            return None;
        }
        if let Some(decided) = self.decided.as_mut() {
            decided.push(Decided {
                id: id.clone(),
                session: key.clone(),
                path: path.clone(),
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
            origin: d.origin,
            pre_tokens: d.pre_tokens,
            supersedes,
            background_tasks: d.background_tasks,
            background_finished: None,
            project,
            remote: None,
            branch,
            job,
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
