//! Holding pages back while a session's background tasks run. Pure: events and `now` in,
//! the pages to send out; every delivery sink (desktop, exec hook, webhook) runs its
//! events through one of these. The event stream is never held, only pages.
//!
//! The policy, per main conversation:
//! - a completion with background tasks still running is held, not paged;
//! - while held, completions that still leave tasks running (the agent answering a
//!   task's notification on its own) are not paged either;
//! - the first completion with no task left pages once, saying how many finished;
//! - a hold that outlives its period pages the held completion, saying how many tasks
//!   still run (a dev server never finishes); the final completion still pages later;
//! - a prompt from the person clears it all: they are at the keyboard.

use crate::model::{Event, EventKind};
use lru::LruCache;
use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// How long a completion waits for background tasks before it pages anyway.
pub const DEFAULT_HOLD_BACKGROUND: Duration = Duration::from_secs(10 * 60);

/// Sessions remembered (least recently active forgotten first, a held page with them).
const SESSIONS: usize = 512;

#[derive(Debug)]
struct Track {
    /// The completion waiting to page, and when it pages anyway.
    held: Option<(Event, Instant)>,
    /// Tasks running at the last completion seen.
    running: u32,
    /// Tasks seen finish since the hold began.
    finished: u32,
}

/// The hold of every session; see the module docs.
#[derive(Debug)]
pub struct Hold {
    period: Duration,
    sessions: LruCache<String, Track>,
}

impl Default for Hold {
    fn default() -> Self {
        Hold::new(DEFAULT_HOLD_BACKGROUND)
    }
}

fn session_key(ev: &Event) -> Option<String> {
    let session = ev.session.as_deref()?;
    let provider = ev.provider.map_or("", |p| p.as_str());
    Some(format!("{provider}:{session}"))
}

impl Hold {
    pub fn new(period: Duration) -> Self {
        Hold {
            period,
            sessions: LruCache::new(NonZeroUsize::new(SESSIONS).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// What to page for `ev` at `now`: the event itself, a changed copy, or nothing
    /// (held or swallowed).
    pub fn offer<'e>(&mut self, ev: &'e Event, now: Instant) -> Option<Cow<'e, Event>> {
        if ev.agent.is_some() {
            return Some(Cow::Borrowed(ev));
        }
        let Some(key) = session_key(ev) else {
            return Some(Cow::Borrowed(ev));
        };
        match ev.event {
            EventKind::TurnStarted => {
                if ev.initiator != Some("system") {
                    // The person is back (or who began it is unknown): nothing to wait for.
                    self.sessions.pop(&key);
                }
                Some(Cow::Borrowed(ev))
            }
            EventKind::TurnResumed => {
                // The held completion was taken back (its turn went on): nothing waits
                // for it any more; the turn's real end decides afresh.
                let held = self.sessions.peek(&key).and_then(|t| t.held.as_ref());
                if held.is_some_and(|(h, _)| ev.supersedes.as_deref() == Some(h.id.as_str())) {
                    self.sessions.pop(&key);
                }
                Some(Cow::Borrowed(ev))
            }
            // The person already typed the next prompt.
            EventKind::TurnCompleted if ev.evidence.as_deref() == Some("next_prompt") => {
                Some(Cow::Borrowed(ev))
            }
            EventKind::TurnCompleted => {
                let running = ev.background_tasks.unwrap_or(0);
                match self.sessions.get_mut(&key) {
                    Some(t) => {
                        t.finished = t.finished.saturating_add(t.running.saturating_sub(running));
                        t.running = running;
                        if running > 0 {
                            if let Some((held, _)) = t.held.as_mut() {
                                held.background_tasks = Some(running);
                            }
                            return None;
                        }
                        let finished = t.finished.max(1);
                        self.sessions.pop(&key);
                        let mut page = ev.clone();
                        page.background_finished = Some(finished);
                        Some(Cow::Owned(page))
                    }
                    None if running > 0 => {
                        self.sessions.put(
                            key,
                            Track {
                                held: Some((ev.clone(), now + self.period)),
                                running,
                                finished: 0,
                            },
                        );
                        None
                    }
                    None => Some(Cow::Borrowed(ev)),
                }
            }
            _ => Some(Cow::Borrowed(ev)),
        }
    }

    /// The held completions whose period ran out by `now`, oldest first, marked with the
    /// tasks still running. Their sessions keep waiting for the last task.
    pub fn due(&mut self, now: Instant) -> Vec<Event> {
        let mut out: Vec<(Instant, Event)> = Vec::new();
        for (_, t) in self.sessions.iter_mut() {
            if t.held.as_ref().is_some_and(|(_, at)| *at <= now)
                && let Some((mut ev, at)) = t.held.take()
            {
                ev.background_tasks = Some(t.running);
                out.push((at, ev));
            }
        }
        out.sort_by_key(|(at, _)| *at);
        out.into_iter().map(|(_, ev)| ev).collect()
    }

    /// When the next held completion pages anyway, if one is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.sessions
            .iter()
            .filter_map(|(_, t)| t.held.as_ref().map(|(_, at)| *at))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProviderKind;
    use crate::sink::tests::event;

    const P: &str = "/h/.claude/projects/-h-app/s.jsonl";

    fn completed(line: u64, tasks: u32) -> Event {
        let mut ev = event(EventKind::TurnCompleted, ProviderKind::Claude, P);
        ev.line = Some(line);
        ev.background_tasks = (tasks > 0).then_some(tasks);
        ev
    }

    fn started(initiator: &'static str) -> Event {
        let mut ev = event(EventKind::TurnStarted, ProviderKind::Claude, P);
        ev.initiator = Some(initiator);
        ev
    }

    fn paged(h: &mut Hold, ev: &Event, now: Instant) -> Option<Event> {
        h.offer(ev, now).map(Cow::into_owned)
    }

    #[test]
    fn held_until_the_last_task_reports_back() {
        let t0 = Instant::now();
        let mut h = Hold::new(Duration::from_secs(600));
        assert_eq!(paged(&mut h, &completed(10, 3), t0), None);
        assert_eq!(h.next_due(), Some(t0 + Duration::from_secs(600)));
        // The agent answers two notifications on its own; one task still runs.
        assert!(paged(&mut h, &started("system"), t0).is_some());
        assert_eq!(paged(&mut h, &completed(20, 1), t0), None);
        let last = paged(&mut h, &completed(30, 0), t0).expect("pages");
        assert_eq!(last.line, Some(30));
        assert_eq!(last.background_finished, Some(3));
        assert_eq!(h.next_due(), None);
        // Nothing held any more: the next completion pages as usual.
        let again = paged(&mut h, &completed(40, 0), t0).expect("pages");
        assert_eq!(again.background_finished, None);
    }

    #[test]
    fn the_period_pages_the_held_completion_then_the_last_task_pages_once() {
        let t0 = Instant::now();
        let mut h = Hold::new(Duration::from_secs(600));
        assert_eq!(paged(&mut h, &completed(10, 2), t0), None);
        assert!(h.due(t0 + Duration::from_secs(599)).is_empty());
        assert_eq!(paged(&mut h, &completed(20, 1), t0), None);
        let due = h.due(t0 + Duration::from_secs(600));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].line, Some(10));
        assert_eq!(due[0].background_tasks, Some(1));
        assert!(h.due(t0 + Duration::from_secs(6000)).is_empty());
        assert_eq!(h.next_due(), None);
        let last = paged(&mut h, &completed(30, 0), t0).expect("pages");
        assert_eq!(last.background_finished, Some(2));
    }

    #[test]
    fn a_prompt_from_the_person_clears_the_hold() {
        let t0 = Instant::now();
        let mut h = Hold::new(Duration::from_secs(600));
        assert_eq!(paged(&mut h, &completed(10, 1), t0), None);
        assert!(paged(&mut h, &started("human"), t0).is_some());
        assert!(h.due(t0 + Duration::from_secs(601)).is_empty());
        let ev = paged(&mut h, &completed(20, 0), t0).expect("pages");
        assert_eq!(ev.background_finished, None);
    }

    #[test]
    fn a_taken_back_completion_is_no_longer_held() {
        let t0 = Instant::now();
        let mut h = Hold::new(Duration::from_secs(600));
        let mut quiet = completed(10, 1);
        quiet.id = "quiet1".to_owned();
        assert_eq!(paged(&mut h, &quiet, t0), None);
        let mut resumed = event(EventKind::TurnResumed, ProviderKind::Claude, P);
        resumed.supersedes = Some("other".to_owned());
        assert!(paged(&mut h, &resumed, t0).is_some());
        assert_eq!(h.next_due(), Some(t0 + Duration::from_secs(600)));
        resumed.supersedes = Some("quiet1".to_owned());
        assert!(paged(&mut h, &resumed, t0).is_some());
        assert_eq!(h.next_due(), None);
        // The real end, tasks still running: held afresh.
        assert_eq!(paged(&mut h, &completed(20, 1), t0), None);
        assert_eq!(h.next_due(), Some(t0 + Duration::from_secs(600)));
    }

    #[test]
    fn subagents_and_other_kinds_pass() {
        let t0 = Instant::now();
        let mut h = Hold::new(Duration::from_secs(600));
        let mut sub = completed(10, 1);
        sub.agent = Some("a1".to_owned());
        assert!(paged(&mut h, &sub, t0).is_some());
        assert_eq!(paged(&mut h, &completed(11, 1), t0), None);
        let failed = event(EventKind::TurnFailed, ProviderKind::Claude, P);
        assert!(paged(&mut h, &failed, t0).is_some());
        let mut next = completed(12, 1);
        next.evidence = Some("next_prompt".to_owned());
        assert!(paged(&mut h, &next, t0).is_some());
    }
}
