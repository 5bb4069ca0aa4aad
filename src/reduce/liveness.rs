//! The liveness question for a quiet working session: which main sessions have gone
//! quiet on an open turn long enough to ask whether their writer still runs, and the
//! turn's end when nothing does. The reducer only asks and answers; looking for the
//! process is the daemon's job, so nothing here touches the system.

use super::Reducer;
use super::background;
use super::session::{Session, close, draft};
use super::views::mark;
use crate::clock::Now;
use crate::model::{Event, EventKind, ProviderKind, SessionKey, SessionState};
use crate::provider::Writer;
use std::sync::Arc;

/// A working main session that has been quiet long enough to ask whether its writer
/// still lives (see [`Reducer::quiet_working`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quiet {
    pub key: SessionKey,
    pub path: Arc<str>,
    /// The directory the agent process runs in, if the transcript says.
    pub cwd: Option<String>,
}

impl Reducer {
    /// The main sessions working on an open turn (no answer pending) and quiet for at
    /// least `after_ms` at `now`: the ones whose writer should be looked for.
    /// Parked ones fall due too: they are brought back first, and asked about as any.
    pub fn quiet_working(&mut self, now: Now, after_ms: u64) -> Vec<Quiet> {
        self.unpark_due(now, after_ms);
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
        let guess = format!("{WRITER_GONE}{turn}:{line}");
        let mut d = draft(
            EventKind::TurnInterrupted,
            Some(turn.clone()),
            line,
            ts,
            &guess,
            now.wall,
        );
        d.reason = Some("writer_gone".to_owned());
        let d = close(sess, SessionState::Interrupted, d);
        // A guess, like quiet: if the writer was only slow, its next record takes this
        // back (`turn_resumed`) and the turn goes on.
        if let Some(t) = sess.turn.as_mut() {
            t.quiet = Some(guess);
        }
        let path = sess.path.clone();
        mark(&mut self.changed, key);
        out.extend(self.finish(key, &path, d));
    }
}

/// The key prefix of a `writer_gone` verdict (see [`Reducer::writer_gone`]).
const WRITER_GONE: &str = "writer_gone:";

/// Working on an open turn with no answer pending, and quiet for `after_ms`: since the
/// last record arrived, or by the record's own time (a session read at start whose last
/// record is old has been quiet that long, not since the read).
pub(super) fn writer_check_due(s: &Session, now: Now, after_ms: u64) -> bool {
    s.state == SessionState::Working
        && s.turn.as_ref().is_some_and(|t| t.open && t.cand.is_none())
        && quiet_for(s.last_seen, s.last_ts, now, after_ms)
}

/// Quiet for `after_ms` at `now`: since `last_seen` (monotonic ms), or by the last
/// record's own time `last_ts` (Unix ms).
pub(super) fn quiet_for(last_seen: u64, last_ts: Option<i64>, now: Now, after_ms: u64) -> bool {
    background::liveness_due(last_seen, now.mono, after_ms)
        || last_ts.is_some_and(|t| {
            background::liveness_due(
                u64::try_from(t).unwrap_or(u64::MAX),
                u64::try_from(now.wall).unwrap_or(0),
                after_ms,
            )
        })
}

/// Whether the liveness check could judge `s` while it works: its agent has a writer
/// rule the session gives what it needs for, and no answer is pending.
pub(super) fn judged(kind: ProviderKind, s: &Session) -> bool {
    let rule = match kind.descriptor().writer() {
        Some(Writer::HoldsOpen) => true,
        Some(Writer::RunsIn) => s.cwd.is_some(),
        None => false,
    };
    rule && s.turn.as_ref().is_none_or(|t| t.cand.is_none())
}

/// Whether `s` shows a turn ended by a `writer_gone` verdict (kept with the turn, so
/// saved and restored with it).
pub(super) fn writer_gone_shown(s: &Session) -> bool {
    s.state == SessionState::Interrupted
        && s.turn
            .as_ref()
            .and_then(|t| t.quiet.as_deref())
            .is_some_and(|q| q.starts_with(WRITER_GONE))
}
