//! Taking back a quiet completion. Quiet is a guess: a response can go silent for longer
//! than the settle period and then go on (a long tool call being generated). When the
//! same turn shows activity after a `quiet` completion, the completion was wrong: the
//! turn is working again, and a `turn_resumed` event names the completion it takes back,
//! so a consumer can withdraw what it showed.

use super::session::{Draft, Session, draft};
use crate::model::{EventKind, SessionState};
use crate::provider::{Evidence, ObsKind};

/// Whether `kind` is activity of the turn `turn` (not a new turn, not a marker).
fn is_activity(kind: &ObsKind, turn: &str) -> bool {
    match kind {
        ObsKind::Work
        | ObsKind::ToolCall { .. }
        | ObsKind::ToolResult { .. }
        | ObsKind::Final { .. } => true,
        // An error or an interrupt ending the same turn: it was still running (Claude
        // Code writes an interrupt only while the model works).
        ObsKind::Failed { turn: named, .. } | ObsKind::Interrupted { turn: named, .. } => {
            named.as_deref().is_none_or(|n| n == turn)
        }
        _ => false,
    }
}

/// Remembers that the open turn was just completed by quiet, with the candidate keyed
/// `key`: what a contradiction would take back.
pub(super) fn note_quiet(sess: &mut Session, ev: Evidence, key: &str) {
    if let Some(t) = sess.turn.as_mut() {
        t.quiet = (ev == Evidence::Quiet).then(|| key.to_owned());
    }
}

/// The `turn_resumed` draft when `kind` (activity at `line`) contradicts the session's
/// quiet completion; the turn is open again, for `kind` to act on.
pub(super) fn contradicted(
    sess: &mut Session,
    kind: &ObsKind,
    line: u64,
    ts: Option<i64>,
    key: &str,
    at: i64,
) -> Option<Draft> {
    let t = sess.turn.as_mut()?;
    if t.open || t.outcome != Some(SessionState::Completed) || !is_activity(kind, &t.id) {
        return None;
    }
    let quiet = t.quiet.take()?;
    t.open = true;
    t.outcome = None;
    let mut d = draft(
        EventKind::TurnResumed,
        Some(t.id.clone()),
        line,
        ts,
        key,
        at,
    );
    d.supersedes = Some(quiet);
    Some(d)
}
