//! Taking back a guessed outcome: a quiet completion, or a `writer_gone` interrupt (the
//! writer was only slow). These are the only outcomes a turn may lose: every other one is
//! final (one outcome per turn). Quiet first: Quiet is a guess: a response can go silent for longer
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
        t.quiet = super::signal::is_guess(ev).then(|| key.to_owned());
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
    // The two guesses: a completion by quiet, an interrupt because no writer was left.
    let guessed = match t.outcome {
        Some(SessionState::Completed) => EventKind::TurnCompleted,
        Some(SessionState::Interrupted) => EventKind::TurnInterrupted,
        _ => return None,
    };
    if t.open || !is_activity(kind, &t.id) {
        return None;
    }
    let quiet = t.quiet.take()?;
    t.open = true;
    t.outcome = None;
    t.retracted = t.retracted.saturating_add(1);
    // A later retraction of the same turn by a copy of the same record must not pass for
    // a repeat of the first one (the seen-set would drop it while the turn reopened).
    let key = match t.retracted {
        0 | 1 => key.to_owned(),
        n => format!("{key}#{n}"),
    };
    let mut d = draft(
        EventKind::TurnResumed,
        Some(t.id.clone()),
        line,
        ts,
        &key,
        at,
    );
    d.supersedes = Some(quiet);
    d.supersedes_kind = Some(guessed);
    Some(d)
}
