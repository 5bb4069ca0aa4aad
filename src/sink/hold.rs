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
//!
//! Two more rules, for every session (subagents too):
//! - a `needs_input` waits `needs_input_grace` before it pages: one answered inside it
//!   (a rule approving a tool in 0.2 s) was no question for the person, and never pages;
//! - a scheduled turn's completion (`origin: scheduled`, a `/loop` or cron job nobody
//!   typed) pages only with `page_scheduled`.

use crate::model::{Event, EventKind};
use lru::LruCache;
use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// How long a completion waits for background tasks before it pages anyway.
pub const DEFAULT_HOLD_BACKGROUND: Duration = Duration::from_secs(10 * 60);

/// How long a `needs_input` waits to see whether it is answered at once. Below the fastest
/// answer a person gave in the waits seen (1.9 s, Copilot; the corpus's are 22 s to 18
/// min), well above a rule's approval (0.2 s).
pub const DEFAULT_NEEDS_INPUT_GRACE: Duration = Duration::from_millis(1500);

/// The page policy besides the background hold (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pages {
    pub needs_input_grace: Duration,
    pub page_scheduled: bool,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            needs_input_grace: DEFAULT_NEEDS_INPUT_GRACE,
            page_scheduled: false,
        }
    }
}

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
    /// A `needs_input` in its grace, and when it pages.
    wait: Option<(Event, Instant)>,
}

impl Track {
    /// Whether a completion is held, or was paged for the period while tasks still run.
    fn holding(&self) -> bool {
        self.held.is_some() || self.running > 0
    }

    fn new() -> Self {
        Track {
            held: None,
            running: 0,
            finished: 0,
            wait: None,
        }
    }
}

/// The hold of every session; see the module docs.
#[derive(Debug)]
pub struct Hold {
    period: Duration,
    pages: Pages,
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
    let agent = ev.agent.as_deref().unwrap_or_default();
    Some(format!("{provider}:{session}:{agent}"))
}

impl Hold {
    pub fn new(period: Duration) -> Self {
        Hold {
            period,
            pages: Pages::default(),
            sessions: LruCache::new(NonZeroUsize::new(SESSIONS).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// Sets how long a completion waits for background tasks.
    pub fn set_period(&mut self, period: Duration) {
        self.period = period;
    }

    /// Sets the grace of questions and whether scheduled turns page.
    pub fn set_pages(&mut self, pages: Pages) {
        self.pages = pages;
    }

    /// The grace rule: a question waits; anything else of its turn ends the wait.
    /// `None` when `ev` is the question itself (held), else go on with `ev`.
    fn grace(&mut self, key: &str, ev: &Event, now: Instant) -> Option<()> {
        if ev.event == EventKind::NeedsInput && !self.pages.needs_input_grace.is_zero() {
            let at = now + self.pages.needs_input_grace;
            match self.sessions.get_mut(key) {
                Some(t) => t.wait = Some((ev.clone(), at)),
                None => {
                    let mut t = Track::new();
                    t.wait = Some((ev.clone(), at));
                    self.sessions.put(key.to_owned(), t);
                }
            }
            return None;
        }
        let ends_wait = ev.event.ends_wait() || ev.event == EventKind::TurnRetracted;
        if ends_wait && let Some(t) = self.sessions.get_mut(key) {
            // Answered (or over) inside its grace: nobody was asked.
            t.wait = None;
        }
        Some(())
    }

    /// What to page for `ev` at `now`: the event itself, a changed copy, or nothing
    /// (held or swallowed).
    pub fn offer<'e>(&mut self, ev: &'e Event, now: Instant) -> Option<Cow<'e, Event>> {
        let Some(key) = session_key(ev) else {
            return Some(Cow::Borrowed(ev));
        };
        self.grace(&key, ev, now)?;
        if ev.event == EventKind::TurnCompleted
            && ev.origin == Some("scheduled")
            && !self.pages.page_scheduled
        {
            return None;
        }
        if ev.agent.is_some() {
            return Some(Cow::Borrowed(ev));
        }
        match ev.event {
            EventKind::TurnStarted => {
                if ev.initiator != Some("system") {
                    // The person is back (or who began it is unknown): nothing to wait for.
                    self.sessions.pop(&key);
                }
                Some(Cow::Borrowed(ev))
            }
            EventKind::TurnResumed | EventKind::TurnRetracted => {
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
                match self.sessions.get_mut(&key).filter(|t| t.holding()) {
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
                        // Any wait was ended by this completion (see `grace`).
                        let mut t = Track::new();
                        t.held = Some((ev.clone(), now + self.period));
                        t.running = running;
                        self.sessions.put(key, t);
                        None
                    }
                    None => Some(Cow::Borrowed(ev)),
                }
            }
            _ => Some(Cow::Borrowed(ev)),
        }
    }

    /// The held completions whose period ran out by `now`, marked with the tasks still
    /// running (their sessions keep waiting for the last task), and the questions whose
    /// grace ran out unanswered; oldest first.
    pub fn due(&mut self, now: Instant) -> Vec<Event> {
        let mut out: Vec<(Instant, Event)> = Vec::new();
        for (_, t) in self.sessions.iter_mut() {
            if t.held.as_ref().is_some_and(|(_, at)| *at <= now)
                && let Some((mut ev, at)) = t.held.take()
            {
                ev.background_tasks = Some(t.running);
                out.push((at, ev));
            }
            if t.wait.as_ref().is_some_and(|(_, at)| *at <= now)
                && let Some((ev, at)) = t.wait.take()
            {
                out.push((at, ev));
            }
        }
        out.sort_by_key(|(at, _)| *at);
        out.into_iter().map(|(_, ev)| ev).collect()
    }

    /// The questions still in their grace, oldest first (at shutdown: they page now).
    pub fn take_waits(&mut self) -> Vec<Event> {
        let mut out: Vec<(Instant, Event)> = self
            .sessions
            .iter_mut()
            .filter_map(|(_, t)| t.wait.take())
            .map(|(ev, at)| (at, ev))
            .collect();
        out.sort_by_key(|(at, _)| *at);
        out.into_iter().map(|(_, ev)| ev).collect()
    }

    /// When the next held page goes out anyway, if one is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.sessions
            .iter()
            .flat_map(|(_, t)| [t.held.as_ref(), t.wait.as_ref()])
            .filter_map(|h| h.map(|(_, at)| *at))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProviderKind;
    use crate::naming::tests::event;

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

    fn question(line: u64) -> Event {
        let mut ev = event(EventKind::NeedsInput, ProviderKind::Copilot, P);
        ev.line = Some(line);
        ev.reason = Some("permission".to_owned());
        ev
    }

    const GRACE: Duration = Duration::from_millis(1500);

    #[test]
    fn a_question_answered_inside_its_grace_never_pages() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        assert_eq!(paged(&mut h, &question(3), t0), None);
        assert_eq!(h.next_due(), Some(t0 + GRACE));
        let answered = event(EventKind::NeedsInputResolved, ProviderKind::Copilot, P);
        assert!(paged(&mut h, &answered, t0 + Duration::from_millis(200)).is_some());
        assert_eq!(h.next_due(), None);
        assert!(h.due(t0 + Duration::from_secs(60)).is_empty());
        // The turn's completion later pages as usual, with no background count.
        let done = paged(&mut h, &completed(9, 0), t0 + Duration::from_secs(90)).expect("pages");
        assert_eq!(done.background_finished, None);
    }

    #[test]
    fn an_unanswered_question_pages_once_its_grace_ends() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        assert_eq!(paged(&mut h, &question(3), t0), None);
        assert!(h.due(t0 + Duration::from_millis(1000)).is_empty());
        let due = h.due(t0 + GRACE);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].event, EventKind::NeedsInput);
        assert_eq!(due[0].line, Some(3));
        assert!(h.due(t0 + Duration::from_secs(60)).is_empty(), "once");
        // Answered after it paged: nothing more to say.
        let answered = event(EventKind::NeedsInputResolved, ProviderKind::Copilot, P);
        assert!(paged(&mut h, &answered, t0 + Duration::from_secs(30)).is_some());
        assert!(h.due(t0 + Duration::from_secs(90)).is_empty());
    }

    #[test]
    fn with_no_grace_a_question_pages_at_once() {
        let t0 = Instant::now();
        let mut h = Hold::default();
        h.set_pages(Pages {
            needs_input_grace: Duration::ZERO,
            page_scheduled: false,
        });
        assert!(paged(&mut h, &question(3), t0).is_some());
    }

    #[test]
    fn a_scheduled_turn_pages_only_when_asked_to() {
        let t0 = Instant::now();
        let mut scheduled = completed(5, 0);
        scheduled.origin = Some("scheduled");
        let mut h = Hold::default();
        assert_eq!(paged(&mut h, &scheduled, t0), None);
        let mut human = completed(9, 0);
        human.origin = Some("human");
        assert!(paged(&mut h, &human, t0).is_some());
        h.set_pages(Pages {
            page_scheduled: true,
            ..Pages::default()
        });
        assert!(paged(&mut h, &scheduled, t0).is_some());
        // Failures and questions of a scheduled turn page whatever the setting.
        let mut h = Hold::default();
        let mut failed = event(EventKind::TurnFailed, ProviderKind::Claude, P);
        failed.origin = Some("scheduled");
        assert!(paged(&mut h, &failed, t0).is_some());
    }
}
