//! Desktop notifications over the freedesktop D-Bus session bus (zbus, in
//! [`super::notifier`]).
//!
//! Only the main conversation's hand-backs notify: `turn_completed`, `turn_failed`
//! (critical urgency) and `needs_input`. Subagents and anomalies never do, nor does a
//! completion whose evidence is `next_prompt` — the person already typed the next prompt.
//! A session's new notification replaces its previous one, and a per-session cooldown
//! keeps a flapping session from flooding the screen. A `turn_resumed` closes the
//! notification its superseded completion showed, if that one is still up.
//!
//! Each kind has its look and sound ([`super::kinds`]); muted projects and sessions,
//! quiet hours ([`super::quiet`]) and a session in front of the person ([`crate::focus`])
//! show nothing, while the event still goes everywhere else. A click goes back to the
//! agent ([`super::notifier`]).
//!
//! The D-Bus call runs on a dedicated thread fed by a bounded queue. Without a session bus
//! (or a notification server) the failure is logged once, events keep streaming, and
//! `deliver` lets one event through every `retry_after` to notice when it works again.

use super::SinkError;
use super::delivery::{Courier, Delivered, Drain, Workers};
use super::kinds::Styles;
use super::notifier::{self, Setup, Shared};
// What the D-Bus thread is given lives with it; named here too, as before.
pub use super::notifier::{Job, Note, SESSIONS_REMEMBERED};
use super::quiet::{HeldLog, HeldPage, Rules, local_minute};
use crate::diag::{self, Deliveries};
use crate::focus::click;
use crate::model::{Event, EventKind};
use crate::naming::{HANDBACK_KINDS, escape_markup, plain_message, project_name, title};
use crate::state::mutes::Mutes;
use crossbeam_channel::TrySendError;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Settings of the desktop sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesktopConfig {
    /// Which kinds notify. Only `turn_completed`, `turn_failed` and `needs_input` ever
    /// can; other kinds listed here are ignored.
    pub kinds: Vec<EventKind>,
    /// Shortest time between two notifications of one session; those in between are
    /// dropped (counted, logged at debug).
    pub cooldown: Duration,
    /// Notifications waiting for the D-Bus thread; more are dropped and counted.
    pub queue: usize,
    /// While there is no bus, how often one event is let through to try again.
    pub retry_after: Duration,
    /// Each kind's urgency, sound, timeout (and webhook priority).
    pub styles: Styles,
    /// `mute` and `quiet_hours`.
    pub rules: Rules,
    /// No notification while the session is in front of the person.
    pub suppress_when_focused: bool,
    /// Run on a click (argv, no shell), besides going back to the agent.
    pub on_click: Vec<String>,
}

impl Default for DesktopConfig {
    fn default() -> Self {
        DesktopConfig {
            kinds: HANDBACK_KINDS.to_vec(),
            cooldown: Duration::from_secs(10),
            queue: 16,
            retry_after: Duration::from_secs(30),
            styles: Styles::default(),
            rules: Rules::default(),
            suppress_when_focused: true,
            on_click: Vec::new(),
        }
    }
}

/// Whether `ev` notifies under `kinds`, and what it says, styled by `styles`. Pure.
pub fn compose_styled(kinds: &[EventKind], styles: &Styles, ev: &Event) -> Option<Note> {
    let next_prompt =
        ev.event == EventKind::TurnCompleted && ev.evidence.as_deref() == Some("next_prompt");
    let session = ev.session.as_deref()?;
    let style = styles.get(ev.event)?;
    if next_prompt || ev.agent.is_some() || !kinds.contains(&ev.event) {
        return None;
    }
    let provider = ev.provider.map_or("", |p| p.as_str());
    Some(Note {
        key: format!("{provider}:{session}"),
        event: ev.id.clone(),
        summary: title(ev),
        body: escape_markup(&plain_message(ev)),
        style: style.clone(),
        click: click::Session {
            provider: provider.to_owned(),
            session: session.to_owned(),
            project: project_name(ev),
            path: ev.path.clone().unwrap_or_default(),
            remote: ev.remote.clone(),
        },
        branch: ev.branch.clone(),
    })
}

/// [`compose_styled`] with the default styles.
pub fn compose(kinds: &[EventKind], ev: &Event) -> Option<Note> {
    compose_styled(kinds, &Styles::default(), ev)
}

/// The notification `ev` takes back: (session key, event id), for a `turn_resumed` of the
/// main conversation. Pure.
pub fn retraction(ev: &Event) -> Option<(String, String)> {
    if !matches!(ev.event, EventKind::TurnResumed | EventKind::TurnRetracted) || ev.agent.is_some()
    {
        return None;
    }
    let session = ev.session.as_deref()?;
    let provider = ev.provider.map_or("", |p| p.as_str());
    Some((format!("{provider}:{session}"), ev.supersedes.clone()?))
}

/// The session key whose `needs_input` wait `ev` ends: answered
/// (`needs_input_resolved`), superseded (the next prompt, the turn's end) or taken back,
/// in the main conversation. Pure.
pub fn ends_wait(ev: &Event) -> Option<String> {
    if !ev.event.ends_wait() || ev.agent.is_some() {
        return None;
    }
    let provider = ev.provider.map_or("", |p| p.as_str());
    Some(format!("{provider}:{}", ev.session.as_deref()?))
}

/// The per-session cooldown. Pure: time is an argument.
#[derive(Debug)]
pub struct Cooldown {
    period: Duration,
    last: LruCache<String, Instant>,
}

impl Cooldown {
    pub fn new(period: Duration) -> Self {
        Cooldown {
            period,
            last: LruCache::new(
                NonZeroUsize::new(SESSIONS_REMEMBERED).unwrap_or(NonZeroUsize::MIN),
            ),
        }
    }

    /// True (and the session's clock restarts) when `key` may notify at `now`.
    pub fn admit(&mut self, key: &str, now: Instant) -> bool {
        if let Some(last) = self.last.get(key)
            && now.saturating_duration_since(*last) < self.period
        {
            return false;
        }
        self.last.put(key.to_owned(), now);
        true
    }
}

/// What the desktop sink has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DesktopStats {
    /// Notifications the server accepted.
    pub shown: u64,
    /// Notify calls that failed (no bus, no server, an error reply).
    pub failed: u64,
    /// Dropped by the per-session cooldown.
    pub suppressed: u64,
    /// Dropped because the D-Bus thread's queue was full.
    pub dropped: u64,
    /// Dropped while the bus was known to be unreachable.
    pub skipped_no_bus: u64,
    /// Not shown: muted (config or `baton mute`) or in quiet hours.
    pub muted: u64,
    /// Not shown: the session was in front of the person.
    pub focused: u64,
    /// Clicks acted on.
    pub clicked: u64,
    /// Activation tokens dropped for not being tokens.
    pub tokens_dropped: u64,
}

/// Where the sink reads the time: the wall clock, or a test's.
pub type WallClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Shows desktop notifications; see the module docs.
pub type DesktopSink = Delivered<Desktop>;

/// The desktop sink's formatting and IO (see [`Courier`]).
pub struct Desktop {
    kinds: Vec<EventKind>,
    styles: Styles,
    rules: Rules,
    mutes: Arc<Mutes>,
    held: Arc<HeldLog>,
    wall: WallClock,
    tz: jiff::tz::TimeZone,
    cooldown: Cooldown,
    retry_after: Duration,
    next_probe: Option<Instant>,
    workers: Workers<Job>,
    shared: Arc<Shared>,
    /// The `needs_input` page each session last had queued (session key → event id),
    /// so that the wait's end closes it (see [`ends_wait`]).
    waits: LruCache<String, String>,
}

/// What the sinks share with the rest of the daemon: the mutes `baton mute` sets (the
/// desktop's), the log of pages held back and whether a click can raise the terminal
/// (all read by `status`).
#[derive(Clone, Default)]
pub struct Board {
    pub mutes: Arc<Mutes>,
    pub held: Arc<HeldLog>,
    pub raise: Arc<crate::focus::click::RaiseCheck>,
}

impl DesktopSink {
    /// Starts the D-Bus thread. The bus itself is first tried on the first notification.
    pub fn new(cfg: DesktopConfig) -> Result<Self, SinkError> {
        Self::with_board(cfg, Board::default())
    }

    /// [`DesktopSink::new`] sharing `board` with `status` and `baton mute`.
    pub fn with_board(cfg: DesktopConfig, board: Board) -> Result<Self, SinkError> {
        let shared = Arc::new(Shared::default());
        let setup = Setup {
            shared: Arc::clone(&shared),
            held: Arc::clone(&board.held),
            suppress_when_focused: cfg.suppress_when_focused,
            on_click: cfg.on_click.clone(),
            raise: Arc::clone(&board.raise),
        };
        let mut workers = Workers::new("desktop");
        workers.lane(
            cfg.queue,
            1,
            |_| "baton-desktop".to_owned(),
            move |jobs, _| notifier::work(jobs, &setup),
        )?;
        let clock: WallClock = Arc::new(crate::clock::wall_now);
        Ok(Delivered::with_courier(Desktop::new(
            &cfg, workers, shared, board, clock,
        )))
    }

    /// A sink whose notifications go to the returned receiver instead of D-Bus: every
    /// decision (hold, kinds, cooldown, queue) is the real sink's. For tests.
    pub fn capture(cfg: DesktopConfig) -> (Self, crossbeam_channel::Receiver<Job>) {
        Self::capture_at(
            cfg,
            Board::default(),
            Arc::new(crate::clock::wall_now),
            jiff::tz::TimeZone::system(),
        )
    }

    /// [`DesktopSink::capture`] on a given wall clock and time zone (mutes and quiet
    /// hours are judged on them).
    pub fn capture_at(
        cfg: DesktopConfig,
        board: Board,
        wall: WallClock,
        tz: jiff::tz::TimeZone,
    ) -> (Self, crossbeam_channel::Receiver<Job>) {
        let mut workers = Workers::new("desktop");
        let rx = workers.capture(cfg.queue);
        let mut courier = Desktop::new(&cfg, workers, Arc::new(Shared::default()), board, wall);
        courier.tz = tz;
        (Delivered::with_courier(courier), rx)
    }
}

impl Desktop {
    fn new(
        cfg: &DesktopConfig,
        workers: Workers<Job>,
        shared: Arc<Shared>,
        board: Board,
        wall: WallClock,
    ) -> Self {
        Desktop {
            kinds: cfg.kinds.clone(),
            styles: cfg.styles.clone(),
            rules: cfg.rules.clone(),
            mutes: board.mutes,
            held: board.held,
            wall,
            tz: jiff::tz::TimeZone::system(),
            cooldown: Cooldown::new(cfg.cooldown),
            retry_after: cfg.retry_after,
            next_probe: None,
            workers,
            shared,
            waits: LruCache::new(
                NonZeroUsize::new(SESSIONS_REMEMBERED).unwrap_or(NonZeroUsize::MIN),
            ),
        }
    }

    /// Whether the page is held back by a mute or quiet hours (and noted for `status`).
    fn held_back(&mut self, note: &Note) -> bool {
        let now = (self.wall)();
        let live = self.mutes.live(now);
        let minute = local_minute(&self.tz, now);
        let c = &note.click;
        let by_branch = live.iter().any(|m| m.covers_branch(note.branch.as_deref()));
        let held = if by_branch {
            Some(super::quiet::Held::MutedFor)
        } else {
            self.rules.hold(&c.project, &c.session, minute, &live)
        };
        match held {
            Some(why) => {
                let page = HeldPage::new("desktop", why, &c.session, &c.project, &note.event, now);
                self.held.record(page);
                let (session, reason) = (&note.key, why.as_str());
                diag::NotificationHeld { session, reason }.emit(&self.shared.counts);
                true
            }
            None => false,
        }
    }

    /// Asks the D-Bus thread to close the session's popup if it still shows `event`.
    fn close(&mut self, key: String, event: String) {
        if !self.shared.down.load(Ordering::Acquire)
            && self.workers.offer(0, Job::Close { key, event }).is_err()
        {
            diag::NotificationDropped { queue_full: false }.emit(&self.shared.counts);
        }
    }

    /// Queues `ev`'s notification unless a rule holds it back; the session key when
    /// one was queued.
    fn offer(&mut self, ev: &Event, now: Instant) -> Option<String> {
        if retraction(ev).is_some() {
            return None;
        }
        let note = compose_styled(&self.kinds, &self.styles, ev)?;
        if self.held_back(&note) {
            return None;
        }
        if self.shared.down.load(Ordering::Acquire) {
            match self.next_probe {
                Some(t) if now < t => {
                    diag::NotificationSkippedNoBus.emit(&self.shared.counts);
                    return None;
                }
                _ => self.next_probe = Some(now + self.retry_after),
            }
        }
        if !self.cooldown.admit(&note.key, now) {
            let session = &note.key;
            diag::NotificationSuppressed { session }.emit(&self.shared.counts);
            return None;
        }
        let key = note.key.clone();
        let session = note.click.session.clone();
        match self.workers.offer(0, Job::Show(note)) {
            Ok(()) => {
                // A newer page goes out: the session's "Not shown" entry is over (the
                // D-Bus thread notes it again if it holds this one back).
                self.held.shown(&session);
                return Some(key);
            }
            Err(e) => {
                // The worker only ends when the queue is gone.
                let queue_full = matches!(e, TrySendError::Full(_));
                diag::NotificationDropped { queue_full }.emit(&self.shared.counts);
            }
        }
        None
    }
}

impl Courier for Desktop {
    type Stats = DesktopStats;
    const NAME: &'static str = "desktop";

    /// Cooldowns and bus retries are measured on `now`. A question's popup stays until
    /// the wait ends: then a page of the session replaces it, or, when none is shown,
    /// it is closed (`CloseNotification`).
    fn page(&mut self, ev: &Event, now: Instant) {
        if let Some((key, event)) = retraction(ev) {
            self.close(key, event);
        }
        let queued = self.offer(ev, now);
        if ev.event == EventKind::NeedsInput && ev.agent.is_none() {
            if let Some(key) = queued {
                self.waits.put(key, ev.id.clone());
            }
        } else if let Some(key) = ends_wait(ev)
            && let Some(event) = self.waits.pop(&key)
            && queued.is_none()
        {
            self.close(key, event);
        }
    }

    fn stats(&self) -> DesktopStats {
        let c = &self.shared.counts;
        DesktopStats {
            shown: c.shown.get(),
            failed: c.failed.get(),
            suppressed: c.suppressed.get(),
            dropped: c.dropped.get(),
            skipped_no_bus: c.skipped_no_bus.get(),
            muted: c.muted.get(),
            focused: c.focused.get(),
            clicked: c.clicked.get(),
            tokens_dropped: c.tokens_dropped.get(),
        }
    }

    fn counters(&self) -> Arc<dyn Deliveries> {
        self.shared.counts.clone()
    }

    /// Lets the D-Bus thread finish the queue until `deadline`.
    fn finish(mut self, deadline: Instant) -> (DesktopStats, bool) {
        let workers = std::mem::replace(&mut self.workers, Workers::new("desktop"));
        let done = workers.close(deadline, None) == Drain::InTime;
        (self.stats(), done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProviderKind;
    use crate::naming::tests::event;
    use crate::sink::kinds::Urgency;

    const CLAUDE: &str = "/h/.claude/projects/-h-src-myproject/s.jsonl";

    #[test]
    fn composes_only_main_handbacks() {
        let kinds = HANDBACK_KINDS;
        let mut ev = event(EventKind::TurnCompleted, ProviderKind::Claude, CLAUDE);
        ev.project = Some("myproject".to_owned());
        ev.message = Some("<b>bold</b> & \u{1b}[31mred".to_owned());
        let note = compose(&kinds, &ev).expect("notifies");
        assert_eq!(note.summary, "Claude Code · myproject: your turn");
        assert_eq!(note.body, "&lt;b&gt;bold&lt;/b&gt; &amp; red");
        assert_eq!(note.style.urgency, Urgency::Normal);

        ev.evidence = Some("next_prompt".to_owned());
        assert_eq!(compose(&kinds, &ev), None);
        ev.evidence = None;
        ev.agent = Some("a1".to_owned());
        assert_eq!(compose(&kinds, &ev), None);

        let failed = event(EventKind::TurnFailed, ProviderKind::Claude, CLAUDE);
        assert_eq!(
            compose(&kinds, &failed).expect("notifies").style.urgency,
            Urgency::Critical
        );
        for k in [
            EventKind::Anomaly,
            EventKind::TurnStarted,
            EventKind::TurnInterrupted,
            EventKind::ContextCompacted,
        ] {
            let ev = event(k, ProviderKind::Claude, CLAUDE);
            assert_eq!(compose(&kinds, &ev), None, "{k:?}");
        }
        // Configurable: only failures.
        let ev = event(EventKind::TurnCompleted, ProviderKind::Claude, CLAUDE);
        assert_eq!(compose(&[EventKind::TurnFailed], &ev), None);
        // Kinds that never notify stay silent even when listed.
        let ev = event(EventKind::Anomaly, ProviderKind::Claude, CLAUDE);
        assert_eq!(compose(&[EventKind::Anomaly], &ev), None);
    }

    #[test]
    fn cooldown_is_per_session() {
        let t0 = Instant::now();
        let mut c = Cooldown::new(Duration::from_secs(10));
        assert!(c.admit("a", t0));
        assert!(!c.admit("a", t0 + Duration::from_secs(9)));
        assert!(c.admit("b", t0 + Duration::from_secs(9)));
        assert!(c.admit("a", t0 + Duration::from_secs(10)));
        // A suppressed one does not extend the window.
        assert!(!c.admit("a", t0 + Duration::from_secs(15)));
        assert!(c.admit("a", t0 + Duration::from_secs(20)));
    }
}
