//! Taking back a guessed outcome: a quiet completion, or a `writer_gone` interrupt (the
//! writer was only slow). These are the only outcomes a turn may lose: every other one is
//! final (one outcome per turn). Quiet first: Quiet is a guess: a response can go silent for longer
//! than the settle period and then go on (a long tool call being generated). When the
//! same turn shows activity after a `quiet` completion, the completion was wrong: the
//! turn is working again, and a `turn_resumed` event names the completion it takes back,
//! so a consumer can withdraw what it showed.

use super::session::{Draft, Session, draft, set_state};
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
    // The outcome it named is taken back by this event: a rewind of the reopened turn
    // has nothing to retract until it is decided again (and a restart that begins
    // after the outcome, tail-first, must reach the same state).
    t.decided_by = None;
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

/// The `turn_retracted` draft when the agent dropped the session's current turn `turn`
/// from its conversation (a rewind) after an outcome was sent for it; a turn still open
/// just ends, its pending answer dropped, with nothing to take back. An earlier turn is
/// not held here: a later prompt already followed its outcome.
pub(super) fn taken_back(
    sess: &mut Session,
    turn: &str,
    reason: String,
    line: u64,
    ts: Option<i64>,
    key: &str,
    at: i64,
) -> Option<Draft> {
    let t = sess.turn.as_mut().filter(|t| t.id == turn)?;
    if t.open {
        t.open = false;
        t.cand = None;
        t.outcome = Some(SessionState::Interrupted);
        set_state(sess, SessionState::Interrupted, line, ts, None, None);
        return None;
    }
    let (kind, decided) = t.decided_by.take()?;
    // The outcome stays as the turn's (it is over either way), so the same records read
    // again decide nothing: the seen-set still holds its outcome.
    t.quiet = None;
    sess.message = None;
    let mut d = draft(
        EventKind::TurnRetracted,
        Some(turn.to_owned()),
        line,
        ts,
        key,
        at,
    );
    d.reason = Some(reason);
    d.supersedes = Some(decided);
    d.supersedes_kind = Some(kind);
    Some(d)
}

#[cfg(test)]
mod tests {
    use crate::clock::Now;
    use crate::model::{Event, ProviderKind};
    use crate::provider::{Evidence, Initiator, Obs, ObsKind};
    use crate::reduce::{Reducer, Src};

    fn feed(r: &mut Reducer, steps: Vec<(&str, ObsKind)>) -> Vec<Event> {
        let src = Src {
            provider: ProviderKind::Claude,
            path: "/t.jsonl".into(),
            line: 1,
        };
        let mut out = Vec::new();
        for (i, (key, kind)) in steps.into_iter().enumerate() {
            let now = Now::virtual_at(1_000 + i as i64);
            r.apply(
                &src,
                Obs::new("s", None, None, key.to_owned(), kind),
                now,
                &mut out,
            );
        }
        out
    }

    fn start(turn: &str) -> ObsKind {
        ObsKind::TurnStart {
            turn: turn.to_owned(),
            initiator: Initiator::Human,
            origin: None,
        }
    }

    fn retract(turn: &str) -> ObsKind {
        ObsKind::Retract {
            turn: turn.to_owned(),
            reason: "rewound".to_owned(),
        }
    }

    #[test]
    fn a_decided_turn_is_retracted_once_naming_its_outcome() {
        let mut r = Reducer::new(90_000, 64);
        let final_answer = ObsKind::Final {
            message: Some("done".to_owned()),
            confirm: Some(Evidence::StopReason),
        };
        let evs = feed(
            &mut r,
            vec![
                ("k1", start("t1")),
                ("k2", final_answer),
                ("k3", retract("t1")),
                ("k4", retract("t1")),
            ],
        );
        let kinds: Vec<_> = evs.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(kinds, ["turn_started", "turn_completed", "turn_retracted"]);
        assert_eq!(evs[2].supersedes.as_deref(), Some(evs[1].id.as_str()));
    }

    #[test]
    fn an_open_turn_just_ends_and_another_turn_is_left_alone() {
        let mut r = Reducer::new(90_000, 64);
        let pending = ObsKind::Final {
            message: Some("maybe".to_owned()),
            confirm: None,
        };
        let evs = feed(
            &mut r,
            vec![
                ("k1", start("t1")),
                ("k2", pending),
                ("k3", retract("t0")),
                ("k4", retract("t1")),
            ],
        );
        let kinds: Vec<_> = evs.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(kinds, ["turn_started"]);
        // The dropped answer is never completed by quiet.
        let mut later = Vec::new();
        r.tick(Now::virtual_at(1_000_000), &mut later);
        assert!(later.is_empty(), "{later:?}");
    }
}
