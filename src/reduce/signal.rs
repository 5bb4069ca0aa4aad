//! The agent's own word on a session ([`Signal`]: Claude Code's registry, its
//! background jobs, the hooks), applied to the session with that id. The transcript
//! stays the source of the turn, the message and the line: a signal only says *when*
//! the agent waits or is done, and its events carry the turn's last transcript line.
//!
//! - `Waiting` makes the open turn wait (`needs_input`, reason from the signal) unless
//!   it already does: one wait is one event, whether the transcript (a pending
//!   question), the registry or a hook saw it first. Activity of the turn in the
//!   transcript, or a `Busy` signal, resolves it.
//! - `Idle` decides a pending answer at once (evidence `registry_idle`, `job_done` or
//!   `hook_stop`); with no answer read yet, the next one is decided as it arrives. Such
//!   a completion is a guess like quiet: activity of the same turn in the transcript
//!   takes it back (`turn_resumed`).
//! - A signal never reopens a decided turn. `Busy` after a turn the transcript ended
//!   (an end marker), followed by `Idle` with no new prompt in between, is a
//!   disagreement: counted, nothing else.

use super::session::{Session, confirm, draft, set_state, wait, with_tasks};
use super::{Reducer, views::mark};
use crate::clock::Now;
use crate::model::{Event, EventKind, SessionKey, SessionState};
use crate::provider::signal::{Signal, SignalKind};
use crate::provider::{Evidence, ObsKind};

/// What signals did, for the logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SignalStats {
    /// Signals that matched at least one session.
    pub applied: u64,
    /// Signals for a session baton does not know (yet).
    pub unmatched: u64,
    /// A busy-then-idle the transcript's ended turn does not explain.
    pub disagreements: u64,
}

/// Per-session memory of signals (not saved: a restart reads the registry again).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Heard {
    /// The session's wait was made by a signal: the transcript's own record of the same
    /// wait (a pending question read later) is the same wait, not a second one.
    pub(super) wait: bool,
    /// The agent said idle while the open turn had no answer yet: decide the next one.
    pub(super) idle: Option<Evidence>,
    /// The agent said busy after the transcript ended the turn.
    pub(super) busy_after_end: bool,
}

/// Whether an end of this evidence is a guess that later activity may take back.
pub(super) fn is_guess(ev: Evidence) -> bool {
    matches!(
        ev,
        Evidence::Quiet | Evidence::RegistryIdle | Evidence::JobDone | Evidence::HookStop
    )
}

impl Reducer {
    /// The live main sessions `sig` names.
    fn named_by(&self, sig: &Signal) -> Vec<SessionKey> {
        self.sessions
            .keys()
            .filter(|k| k.provider == sig.provider && k.agent.is_none())
            .filter(|k| sig.session.matches(&k.session))
            .cloned()
            .collect()
    }

    /// Applies `sig` to the main session(s) it names; returns how many it matched.
    pub fn signal(&mut self, sig: &Signal, now: Now, out: &mut Vec<Event>) -> usize {
        let mut keys = self.named_by(sig);
        if keys.is_empty() {
            // A parked (cold) session wakes up for it: by its key's hash, or, for a
            // prefix of an id, among the parked ones on an open turn.
            match &sig.session {
                crate::provider::signal::SessionRef::Id(id) => {
                    let key = SessionKey {
                        provider: sig.provider,
                        session: id.clone(),
                        agent: None,
                    };
                    self.unpark_for(&key, "", now);
                }
                crate::provider::signal::SessionRef::Prefix(p) => {
                    self.unpark_prefixed(sig.provider, p, now);
                }
            }
            keys = self.named_by(sig);
        }
        if keys.is_empty() {
            self.signal_stats.unmatched += 1;
            return 0;
        }
        self.signal_stats.applied += 1;
        keys.sort();
        for key in &keys {
            let Some(sess) = self.sessions.get_mut(key) else {
                continue;
            };
            if let Some(name) = sig
                .name
                .as_deref()
                .map(|n| crate::text::cut(&crate::text::one_line(n), 60))
                && !name.is_empty()
                && sess.job.as_deref() != Some(name.as_str())
            {
                // The agent's name for the session (a background job's): its events
                // carry it from now on.
                sess.job = Some(name);
                mark(&mut self.changed, key);
            }
            let mut disagreed = false;
            let drafts = heard(sess, sig, now, &mut disagreed);
            if disagreed {
                self.signal_stats.disagreements += 1;
                tracing::debug!(session = %key.session, source = sig.source.as_str(), "The agent said busy after the transcript ended the turn; the turn stays decided.");
            }
            if drafts.is_empty() {
                continue;
            }
            let drafts = with_tasks(drafts, &sess.bg);
            let path = sess.path.clone();
            mark(&mut self.changed, key);
            for d in drafts {
                out.extend(self.finish(key, &path, d));
            }
        }
        keys.len()
    }

    /// What signals did so far.
    pub fn signal_stats(&self) -> SignalStats {
        self.signal_stats
    }

    /// Called for each transcript observation of a main session before it is reduced:
    /// what a remembered signal means for it.
    pub(super) fn before_obs(sess: &mut Session, kind: &ObsKind) {
        match kind {
            ObsKind::Final { .. } | ObsKind::StartDir(_) | ObsKind::Background(_) => {}
            ObsKind::TurnStart { .. } => {
                sess.heard.idle = None;
                sess.heard.busy_after_end = false;
            }
            _ => sess.heard.idle = None,
        }
    }
}

/// The drafts `sig` decides for one session.
fn heard(
    sess: &mut Session,
    sig: &Signal,
    now: Now,
    disagreed: &mut bool,
) -> Vec<super::session::Draft> {
    let mut out = Vec::new();
    let ev = sig.source.evidence();
    let Some(t) = sess.turn.as_ref() else {
        return out;
    };
    let (turn, open, line, ts) = (t.id.clone(), t.open, t.last_line, t.last_ts);
    let ended_by_marker = t.decided()
        && sess
            .evidence
            .is_some_and(|e| !is_guess(e) && e != Evidence::NextPrompt);
    match &sig.kind {
        SignalKind::Waiting { reason, message } => {
            if !open || sess.state == SessionState::NeedsInput {
                return out;
            }
            let key = format!("signal-wait:{turn}:{line}");
            let mut d = draft(EventKind::NeedsInput, Some(turn), line, ts, &key, now.wall);
            d.reason = Some(crate::text::cut(&crate::text::one_line(reason), 60));
            d.message = message.as_deref().and_then(crate::model::clip_message);
            out.push(wait(sess, d));
            sess.heard.wait = true;
            sess.heard.idle = None;
        }
        SignalKind::Busy => {
            sess.heard.idle = None;
            if ended_by_marker {
                sess.heard.busy_after_end = true;
            }
            if open && sess.state == SessionState::NeedsInput {
                set_state(sess, SessionState::Working, line, ts, None, None);
                let key = format!("signal-resolved:{turn}:{line}");
                out.push(draft(
                    EventKind::NeedsInputResolved,
                    Some(turn),
                    line,
                    ts,
                    &key,
                    now.wall,
                ));
            }
        }
        SignalKind::Idle => {
            if std::mem::take(&mut sess.heard.busy_after_end) {
                *disagreed = true;
            }
            if !open {
                return out;
            }
            if sess.state == SessionState::NeedsInput && sess.heard.wait {
                // The wait ended without the transcript saying how (a refused prompt):
                // the session is no longer waiting.
                set_state(sess, SessionState::Working, line, ts, None, None);
                let key = format!("signal-resolved:{turn}:{line}");
                out.push(draft(
                    EventKind::NeedsInputResolved,
                    Some(turn.clone()),
                    line,
                    ts,
                    &key,
                    now.wall,
                ));
            }
            match confirm(sess, ev, now.wall) {
                Some(d) => out.push(d),
                None => sess.heard.idle = Some(ev),
            }
        }
    }
    out
}

/// After a transcript answer was read: decided at once if the agent already said idle.
pub(super) fn idle_decides(sess: &mut Session, now: Now) -> Option<super::session::Draft> {
    let ev = sess.heard.idle.take()?;
    confirm(sess, ev, now.wall)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProviderKind;
    use crate::provider::signal::{SessionRef, SignalSource};
    use crate::provider::{Initiator, Obs};
    use crate::reduce::Src;
    use std::sync::Arc;

    struct T {
        r: Reducer,
        line: u64,
        out: Vec<Event>,
    }

    impl T {
        fn new() -> T {
            T {
                r: Reducer::new(90_000, 1024),
                line: 0,
                out: Vec::new(),
            }
        }
        fn obs(&mut self, key: &str, kind: ObsKind) {
            self.line += 1;
            let src = Src {
                provider: ProviderKind::Claude,
                path: Arc::from("/p/s1.jsonl"),
                line: self.line,
            };
            let o = Obs::new("s1", None, Some(1_000), key.to_owned(), kind);
            self.r.apply(
                &src,
                o,
                Now::virtual_at(2_000 + self.line as i64),
                &mut self.out,
            );
        }
        fn sig(&mut self, kind: SignalKind) {
            let s = Signal {
                provider: ProviderKind::Claude,
                session: SessionRef::Id("s1".into()),
                kind,
                source: SignalSource::Registry,
                name: None,
            };
            self.r.signal(&s, Now::virtual_at(3_000), &mut self.out);
        }
        fn kinds(&mut self) -> Vec<&'static str> {
            self.out.drain(..).map(|e| e.event.as_str()).collect()
        }
        fn prompt(&mut self, key: &str) {
            self.obs(
                key,
                ObsKind::TurnStart {
                    turn: key.to_owned(),
                    initiator: Initiator::Human,
                    origin: None,
                },
            );
        }
        fn answer(&mut self, key: &str, confirm: Option<Evidence>) {
            self.obs(
                key,
                ObsKind::Final {
                    message: Some("done".into()),
                    confirm,
                },
            );
        }
    }

    #[test]
    fn an_idle_decided_turn_that_goes_on_is_taken_back() {
        let mut t = T::new();
        t.prompt("u1");
        t.answer("a1", None);
        t.sig(SignalKind::Idle);
        assert_eq!(t.kinds(), ["turn_started", "turn_completed"]);
        t.sig(SignalKind::Busy);
        // Busy alone reopens nothing: a new prompt may explain it.
        assert!(t.kinds().is_empty());
        t.obs("a2", ObsKind::Work);
        assert_eq!(t.kinds(), ["turn_resumed"]);
    }

    #[test]
    fn busy_after_an_end_marker_is_counted_and_reopens_nothing() {
        let mut t = T::new();
        t.prompt("u1");
        t.answer("a1", Some(Evidence::StopReason));
        assert_eq!(t.kinds(), ["turn_started", "turn_completed"]);
        t.sig(SignalKind::Busy);
        t.sig(SignalKind::Idle);
        assert!(t.kinds().is_empty());
        assert_eq!(t.r.signal_stats().disagreements, 1);
        // The next prompt explains a busy: no disagreement.
        t.sig(SignalKind::Busy);
        t.prompt("u2");
        t.answer("a2", Some(Evidence::StopReason));
        t.sig(SignalKind::Idle);
        assert_eq!(t.r.signal_stats().disagreements, 1);
        assert_eq!(t.kinds(), ["turn_started", "turn_completed"]);
    }

    #[test]
    fn a_wait_is_one_event_whoever_says_it() {
        let mut t = T::new();
        t.prompt("u1");
        t.sig(SignalKind::Waiting {
            reason: "permission prompt".into(),
            message: None,
        });
        // The registry again, a hook: the same wait.
        t.sig(SignalKind::Waiting {
            reason: "permission prompt".into(),
            message: None,
        });
        assert_eq!(t.kinds(), ["turn_started", "needs_input"]);
        t.obs(
            "r1",
            ObsKind::ToolResult {
                id: "toolu_1".into(),
            },
        );
        assert_eq!(t.kinds(), ["needs_input_resolved"]);
        // For a session nobody knows: nothing, counted.
        let s = Signal {
            provider: ProviderKind::Claude,
            session: SessionRef::Id("other".into()),
            kind: SignalKind::Idle,
            source: SignalSource::Hook,
            name: None,
        };
        assert_eq!(t.r.signal(&s, Now::virtual_at(4_000), &mut t.out), 0);
        assert_eq!(t.r.signal_stats().unmatched, 1);
    }
}
