//! One session's turn state machine: the state a session keeps between records (its turn,
//! the completion candidate, what it last decided) and the transition one observation
//! makes to it. Pure functions of a session, a record and `now`; the reducer in `mod.rs`
//! owns the sessions, the seen-set and the timers, and turns the drafts made here into
//! events. Nothing here knows about other sessions, files or durable state.

use super::{background, retract};
use crate::clock::Now;
use crate::model::{EventKind, SessionState};
use crate::provider::{Evidence, ObsKind, Origin};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Candidate {
    pub(super) line: u64,
    pub(super) record_ts: Option<i64>,
    pub(super) key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<String>,
    /// Monotonic ms in memory; Unix ms in a [`SavedSession`](super::SavedSession)
    /// (monotonic time does not survive a restart).
    pub(super) deadline: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Turn {
    pub(super) id: String,
    pub(super) open: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) outcome: Option<SessionState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cand: Option<Candidate>,
    pub(super) last_line: u64,
    pub(super) last_ts: Option<i64>,
    /// Set while the turn's outcome is a guess (a completion by quiet alone, or an
    /// interrupt because no writer was left): the deciding record's key,
    /// from which the completion's id is derived (see [`retract`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) quiet: Option<String>,
    /// Where the turn came from, if its start said; stamped on each of its events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) origin: Option<Origin>,
    /// How many of its outcomes were taken back: each retraction allows one more. Not
    /// saved: it only tells the event-level guard (in `finish`) one outcome from the next
    /// within a run, and a restored turn's own state still says whether it is decided.
    #[serde(skip)]
    pub(super) retracted: u8,
    /// The outcome event's kind and deciding record's key, once one was sent: what a
    /// rewind that drops the turn takes back (see [`retract::taken_back`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) decided_by: Option<(EventKind, String)>,
}

impl Turn {
    /// Closed with an outcome that only a `turn_resumed` may take back.
    pub(super) fn decided(&self) -> bool {
        !self.open && self.outcome.is_some()
    }

    pub(super) fn new(id: String, line: u64, ts: Option<i64>) -> Self {
        Turn {
            id,
            open: true,
            outcome: None,
            cand: None,
            last_line: line,
            last_ts: ts,
            quiet: None,
            origin: None,
            retracted: 0,
            decided_by: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Session {
    /// Not saved: a saved session is restored with the file it belongs to.
    #[serde(skip)]
    pub(super) path: Arc<str>,
    pub(super) state: SessionState,
    pub(super) turn: Option<Turn>,
    pub(super) last_line: u64,
    pub(super) last_ts: Option<i64>,
    pub(super) decided_line: u64,
    pub(super) decided_ts: Option<i64>,
    /// Shared with the views made of it (`status` holds one per live session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) evidence: Option<Evidence>,
    #[serde(default, skip_serializing_if = "background::Tasks::is_empty")]
    pub(super) bg: background::Tasks,
    /// Where the agent process runs, if the transcript says (for the liveness check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cwd: Option<String>,
    /// The agent's own name for the session (a Claude Code background job's `name`),
    /// once it said one (events carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) job: Option<String>,
    /// The git branch, as the agent last said (events carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) branch: Option<String>,
    /// When the last record arrived (monotonic ms; not saved: a restored session counts
    /// from its restore).
    #[serde(skip)]
    pub(super) last_seen: u64,
    /// What the agent's own signals said (registry, jobs, hooks; see `signal.rs`).
    #[serde(skip)]
    pub(super) heard: super::signal::Heard,
}

/// The decisive facts of one event, before it becomes a schema line.
#[derive(Debug, Default)]
pub(super) struct Draft {
    pub(super) kind: Option<EventKind>,
    pub(super) turn: Option<String>,
    pub(super) line: u64,
    pub(super) record_ts: Option<i64>,
    pub(super) reason: Option<String>,
    pub(super) message: Option<String>,
    pub(super) evidence: Option<Evidence>,
    /// Content key of the decisive record.
    pub(super) key: String,
    pub(super) ts: i64,
    pub(super) resets_at: Option<String>,
    pub(super) initiator: Option<&'static str>,
    pub(super) origin: Option<&'static str>,
    /// The turn's retraction count when the draft was made (see [`Turn::retracted`]).
    pub(super) retracted: Option<u8>,
    pub(super) pre_tokens: Option<u64>,
    /// Content key of the `turn_completed` a `turn_resumed` takes back.
    pub(super) supersedes: Option<String>,
    /// The kind of the event `supersedes` names (a completion unless said).
    pub(super) supersedes_kind: Option<EventKind>,
    pub(super) background_tasks: Option<u32>,
}

pub(super) fn draft(
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

/// Stamps the drafts of the session's current turn with where that turn came from and
/// how often its outcome was taken back. Called before a turn gives way to the next, and
/// on every draft before it becomes an event.
pub(super) fn stamp(sess: &Session, drafts: &mut [Draft]) {
    let Some(t) = sess.turn.as_ref() else { return };
    for d in drafts {
        if d.turn.as_deref() == Some(t.id.as_str()) {
            d.origin = d.origin.or(t.origin.map(Origin::as_str));
            d.retracted = d.retracted.or(Some(t.retracted));
        }
    }
}

/// Marks the completions among `drafts` with the session's background tasks, if any.
pub(super) fn with_tasks(mut drafts: Vec<Draft>, bg: &background::Tasks) -> Vec<Draft> {
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

pub(super) fn pending(s: &Session) -> Option<&Candidate> {
    s.turn
        .as_ref()
        .filter(|t| t.open)
        .and_then(|t| t.cand.as_ref())
}

/// The state transition for one observation; returns the events it decides.
pub(super) fn step(
    sess: &mut Session,
    line: u64,
    ts: Option<i64>,
    key: &str,
    kind: ObsKind,
    now: Now,
    settle: u64,
) -> Vec<Draft> {
    let mut out = Vec::new();
    // An event this record decides, about `turn`.
    let drafted = |kind, turn| draft(kind, turn, line, ts, key, now.wall);
    out.extend(retract::contradicted(sess, &kind, line, ts, key, now.wall));
    // The turn that waits for the person, if one does: activity in it ends the wait.
    let waiting = (sess.state == SessionState::NeedsInput)
        .then(|| sess.turn.as_ref().filter(|t| t.open).map(|t| t.id.clone()))
        .flatten();
    let resolves = matches!(
        kind,
        ObsKind::Work
            | ObsKind::ToolResult { .. }
            | ObsKind::Final { .. }
            | ObsKind::ToolCall { .. }
    );
    match kind {
        ObsKind::TurnStart {
            turn,
            initiator,
            origin,
        } => {
            if let Some(t) = sess.turn.as_ref().filter(|t| t.open) {
                if t.id == turn {
                    // The same prompt again (a resumed copy): nothing new.
                    return out;
                }
                out.extend(close_previous(sess, now.wall));
            }
            stamp(sess, &mut out);
            let mut t = Turn::new(turn.clone(), line, ts);
            t.origin = origin;
            sess.turn = Some(t);
            set_state(sess, SessionState::Working, line, ts, None, None);
            let mut d = drafted(EventKind::TurnStarted, Some(turn));
            d.initiator = Some(initiator.as_str());
            d.origin = origin.map(Origin::as_str);
            out.push(d);
        }
        ObsKind::Work => {
            let t = ensure_open(sess, key, line, ts, now.wall, &mut out);
            t.cand = None;
            set_state(sess, SessionState::Working, line, ts, None, None);
        }
        ObsKind::ToolCall {
            needs_input,
            message,
            ..
        } => {
            let t = ensure_open(sess, key, line, ts, now.wall, &mut out);
            t.cand = None;
            let turn = t.id.clone();
            if needs_input.is_some() && sess.state == SessionState::NeedsInput && sess.heard.wait {
                // The agent already said it waits (registry, hook): the transcript's
                // record of the same wait is the same wait, not a second page.
                sess.heard.wait = false;
                set_state(
                    sess,
                    SessionState::NeedsInput,
                    line,
                    ts,
                    message.map(Arc::from),
                    None,
                );
            } else if needs_input.is_some() {
                let mut d = drafted(EventKind::NeedsInput, Some(turn));
                d.message = message;
                d.reason = needs_input;
                out.push(wait(sess, d));
            } else {
                set_state(sess, SessionState::Working, line, ts, None, None);
            }
        }
        ObsKind::ToolResult { .. } => {
            let t = ensure_open(sess, key, line, ts, now.wall, &mut out);
            t.cand = None;
            set_state(sess, SessionState::Working, line, ts, None, None);
        }
        ObsKind::Final {
            message,
            confirm: evidence,
        } => {
            let t = ensure_open(sess, key, line, ts, now.wall, &mut out);
            t.cand = Some(Candidate {
                line,
                record_ts: ts,
                key: key.to_owned(),
                message: message.clone(),
                deadline: now.mono.saturating_add(settle),
            });
            set_state(
                sess,
                SessionState::Working,
                line,
                ts,
                message.map(Arc::from),
                None,
            );
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
                if t.decided() {
                    // One outcome per turn: a `task_complete` after the turn's error,
                    // or a second end marker, closes it silently.
                    return out;
                }
                let message = message.or_else(|| t.cand.take().and_then(|c| c.message));
                let turn = t.id.clone();
                let mut d = drafted(EventKind::TurnCompleted, Some(turn));
                d.message = message;
                d.evidence = Some(evidence);
                out.push(close(sess, SessionState::Completed, d));
            }
        }
        ObsKind::Failed {
            turn,
            reason,
            message,
            resets_at,
        } => {
            if let Some(t) = resolve_turn(sess, turn.as_deref(), key, line, ts) {
                if t.decided() {
                    return out;
                }
                let turn = t.id.clone();
                let mut d = drafted(EventKind::TurnFailed, Some(turn));
                d.message = message;
                d.reason = Some(reason);
                d.resets_at = resets_at;
                out.push(close(sess, SessionState::Failed, d));
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
                let mut d = drafted(EventKind::TurnInterrupted, Some(turn));
                d.message = message;
                d.reason = Some(reason);
                out.push(close(sess, SessionState::Interrupted, d));
            }
        }
        ObsKind::Compacted { pre_tokens } => {
            let turn = sess.turn.as_ref().map(|t| t.id.clone());
            let mut d = drafted(EventKind::ContextCompacted, turn);
            d.pre_tokens = pre_tokens;
            out.push(d);
        }
        ObsKind::Retract { turn, reason } => {
            out.extend(retract::taken_back(
                sess, &turn, reason, line, ts, key, now.wall,
            ));
        }
        ObsKind::Background(op) => sess.bg.apply(op),
        ObsKind::StartDir(dir) => {
            sess.cwd.get_or_insert(dir);
        }
        ObsKind::Branch(b) => sess.branch = Some(b),
        ObsKind::Anomaly { .. } => {}
    }
    if let Some(turn) = waiting
        && resolves
        && sess.state != SessionState::NeedsInput
        && sess.turn.as_ref().is_some_and(|t| t.open && t.id == turn)
    {
        // Said after the events the record itself decided (none, or a new wait's).
        out.insert(0, drafted(EventKind::NeedsInputResolved, Some(turn)));
    }
    out
}

pub(super) fn set_state(
    sess: &mut Session,
    state: SessionState,
    line: u64,
    ts: Option<i64>,
    message: Option<Arc<str>>,
    evidence: Option<Evidence>,
) {
    if state != SessionState::NeedsInput {
        sess.heard.wait = false;
    }
    sess.state = state;
    sess.decided_line = line;
    sess.decided_ts = ts;
    if message.is_some() || state != SessionState::Working {
        sess.message = message;
    }
    sess.evidence = evidence;
}

/// The session waits for the person inside its turn, as the `needs_input` draft `d`
/// says (its record, message and evidence); returns `d`.
pub(super) fn wait(sess: &mut Session, d: Draft) -> Draft {
    let message = d.message.as_deref().map(Arc::from);
    set_state(
        sess,
        SessionState::NeedsInput,
        d.line,
        d.record_ts,
        message,
        d.evidence,
    );
    d
}

/// Closes the session's turn as `state`, decided by the record that the draft `d` is
/// about (its line and time), with `d`'s message and evidence; returns `d`, the event
/// that says so.
pub(super) fn close(sess: &mut Session, state: SessionState, d: Draft) -> Draft {
    if let Some(t) = sess.turn.as_mut() {
        t.open = false;
        t.outcome = Some(state);
        t.cand = None;
    }
    set_state(
        sess,
        state,
        d.line,
        d.record_ts,
        d.message.as_deref().map(Arc::from),
        d.evidence,
    );
    d
}

/// The open turn, or an implicit one: when the file began mid-turn (no start to key it
/// by), or when the agent works again after its turn was decided. A decided turn is never
/// reopened here (one outcome per turn; only a retraction reopens one): whatever set the
/// agent going again went unrecognised, so the work is a turn of its own, keyed by its
/// first record and started by the system.
pub(super) fn ensure_open<'s>(
    sess: &'s mut Session,
    key: &str,
    line: u64,
    ts: Option<i64>,
    at: i64,
    out: &mut Vec<Draft>,
) -> &'s mut Turn {
    if sess.turn.as_ref().is_some_and(|t| !t.open) {
        let continued = sess.turn.as_ref().is_some_and(Turn::decided);
        sess.turn = Some(Turn::new(key.to_owned(), line, ts));
        if continued {
            let mut d = draft(
                EventKind::TurnStarted,
                Some(key.to_owned()),
                line,
                ts,
                key,
                at,
            );
            d.initiator = Some(crate::provider::Initiator::System.as_str());
            out.push(d);
        }
    }
    let t = sess
        .turn
        .get_or_insert_with(|| Turn::new(key.to_owned(), line, ts));
    t.last_line = line;
    t.last_ts = ts;
    t
}

/// The turn an explicit end names. An end naming another turn than the open one is stale
/// (that turn was abandoned); with no open turn, the named turn becomes an implicit one.
pub(super) fn resolve_turn<'s>(
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
pub(super) fn confirm(sess: &mut Session, ev: Evidence, at: i64) -> Option<Draft> {
    let t = sess.turn.as_mut().filter(|t| t.open)?;
    let c = t.cand.take()?;
    let turn = t.id.clone();
    retract::note_quiet(sess, ev, &c.key);
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
    Some(close(sess, SessionState::Completed, d))
}

/// A new prompt arrived while a turn was open: a pending candidate was the answer (the
/// person read it and replied); otherwise the turn was abandoned.
pub(super) fn close_previous(sess: &mut Session, at: i64) -> Option<Draft> {
    if let Some(d) = confirm(sess, Evidence::NextPrompt, at) {
        return Some(d);
    }
    let t = sess.turn.as_ref()?;
    let (turn, line, ts) = (t.id.clone(), t.last_line, t.last_ts);
    let mut d = draft(
        EventKind::TurnInterrupted,
        Some(turn.clone()),
        line,
        ts,
        &format!("abandoned:{turn}"),
        at,
    );
    d.reason = Some("abandoned".to_owned());
    Some(close(sess, SessionState::Interrupted, d))
}
