//! The internal events: one type per thing that happened, whose `emit` adds to its
//! counter in one of [`super`]'s sets and writes its log line. Apart from the counters
//! because they are most of the diagnostics' text and the part that grows; still inside
//! `diag`, so `Counter::add` stays private to it and an event is the only way to count.

use super::{DesktopCounters, ExecCounters, WatchCounters, WebhookCounters};
use std::fmt::Display;

const EXEC: &str = "baton::sink::exec";
const WEBHOOK: &str = "baton::sink::webhook";
const DESKTOP: &str = "baton::sink::desktop";
const NOTIFIER: &str = "baton::sink::notifier";
const NATIVE: &str = "baton::watch::native";

/// Events that only count: `Event => Set.field`.
macro_rules! count_events {
    ($($(#[$m:meta])* $event:ident => $set:ident . $field:ident;)*) => {$(
        $(#[$m])*
        pub struct $event;

        impl $event {
            pub fn emit(self, c: &$set) {
                c.$field.add();
            }
        }
    )*};
}

/// Events that count a failure and warn with what failed (`who`) and why (`what`):
/// `Event { who, what } => Set, TARGET, "message";`.
macro_rules! failure_events {
    ($($(#[$m:meta])* $event:ident { $who:ident, $what:ident } => $set:ident, $target:ident, $msg:literal;)*) => {$(
        $(#[$m])*
        pub struct $event<'a, E> {
            pub $who: &'a str,
            pub $what: &'a E,
        }

        impl<E: Display> $event<'_, E> {
            pub fn emit(self, c: &$set) {
                c.failed.add();
                let ($who, $what) = (self.$who, self.$what);
                tracing::warn!(target: $target, $who = %$who, $what = %$what, $msg);
            }
        }
    )*};
}

/// Events that count and log, at their level, what (`who`) and one fact (`what`):
/// `Event { who, what: Type } => Set.field, TARGET, LEVEL, "message";`.
macro_rules! fact_events {
    ($($(#[$m:meta])* $event:ident { $who:ident, $what:ident: $ty:ty } => $set:ident . $field:ident, $target:ident, $level:ident, $msg:literal;)*) => {$(
        $(#[$m])*
        pub struct $event<'a> {
            pub $who: &'a str,
            pub $what: $ty,
        }

        impl $event<'_> {
            pub fn emit(self, c: &$set) {
                c.$field.add();
                let ($who, $what) = (self.$who, self.$what);
                tracing::event!(target: $target, tracing::Level::$level, $who = %$who, $what, $msg);
            }
        }
    )*};
}

/// Logs at warn on the 1st, 2nd, 4th, 8th ... time (`n`), at debug otherwise: a flood of
/// drops must not become a flood of log lines.
macro_rules! at_doublings {
    ($n:expr, $($arg:tt)+) => {
        if $n.is_power_of_two() {
            tracing::warn!($($arg)+);
        } else {
            tracing::debug!($($arg)+);
        }
    };
}

count_events! {
    /// A run was skipped: the session was in front of the person.
    ExecFocused => ExecCounters.focused;
    /// A run exited 0.
    ExecSucceeded => ExecCounters.ok;
    /// A post was skipped: the session was in front of the person.
    WebhookFocused => WebhookCounters.focused;
    /// A failed try is tried again after the backoff.
    WebhookRetried => WebhookCounters.retried;
    /// A notification was not shown: the session was in front of the person.
    DesktopFocused => DesktopCounters.focused;
    /// A notification was clicked (counted; the notifier logs the click with what it did).
    NotificationClicked => DesktopCounters.clicked;
    /// A notification was not sent: the bus is known to be down and the next try is not
    /// due yet.
    NotificationSkippedNoBus => DesktopCounters.skipped_no_bus;
    /// A hint did not fit in the channel; a full rescan replaces it.
    HintOverflowed => WatchCounters.overflow;
    /// A native event was dropped by the test hook (`drop_events`).
    NativeEventDropped => WatchCounters.dropped_by_hook;
}

failure_events! {
    /// The program could not be started.
    ExecCannotStart { program, error } => ExecCounters, EXEC, "Cannot start the exec hook.";
    /// The program exited non-zero.
    ExecFailed { program, status } => ExecCounters, EXEC, "Exec hook failed.";
    /// Waiting for the program failed; the run was ended.
    ExecWaitFailed { program, error } => ExecCounters, EXEC, "Cannot wait for the exec hook.";
    /// The endpoint answered with a final status: the event is given up at once.
    WebhookRefused { endpoint, error } => WebhookCounters, WEBHOOK, "Webhook refused the event; not retrying.";
}

fact_events! {
    /// A run passed its timeout and was ended with its process group.
    ExecTimedOut { program, timeout_ms: u64 } => ExecCounters.timed_out, EXEC, WARN,
        "Exec hook timed out; ended it and its process group.";
    /// Out of attempts (or the sink is closing): the event is given up.
    WebhookGaveUp { endpoint, attempt: u32 } => WebhookCounters.failed, WEBHOOK, DEBUG,
        "Webhook event given up.";
    /// A notification was held back by a mute or quiet hours (`reason`).
    NotificationHeld { session, reason: &'static str } => DesktopCounters.muted, DESKTOP, DEBUG,
        "Notification not shown.";
}

// ---- exec hook ----

/// The queue was full: the event is dropped (logged [`at_doublings`]).
pub struct ExecDropped;

impl ExecDropped {
    pub fn emit(self, c: &ExecCounters) {
        let dropped = c.dropped.add();
        let msg = "Exec hook busy; event dropped (raise its queue or concurrency).";
        at_doublings!(dropped, target: EXEC, dropped, "{msg}");
    }
}

/// A run still going at shutdown was ended with its process group.
pub struct ExecEndedAtShutdown<'a> {
    pub program: &'a str,
}

impl ExecEndedAtShutdown<'_> {
    pub fn emit(self, c: &ExecCounters) {
        c.failed.add();
        let program = self.program;
        tracing::warn!(target: EXEC, program = %program, "Exec hook still running at shutdown; ended it and its process group.");
    }
}

// ---- webhook ----

/// An endpoint's queue was full: its oldest event is dropped (logged [`at_doublings`]:
/// a long outage must not become a flood of log lines).
pub struct WebhookDropped<'a> {
    pub endpoint: &'a str,
}

impl WebhookDropped<'_> {
    pub fn emit(self, c: &WebhookCounters) {
        let dropped = c.dropped.add();
        let (label, msg) = (self.endpoint, "Webhook queue full; oldest event dropped.");
        at_doublings!(dropped, target: WEBHOOK, endpoint = %label, dropped, "{msg}");
    }
}

/// An event was posted. `recovered`: the endpoint had been failing until now.
pub struct WebhookDelivered<'a> {
    pub endpoint: &'a str,
    pub recovered: bool,
}

impl WebhookDelivered<'_> {
    pub fn emit(self, c: &WebhookCounters) {
        c.delivered.add();
        if self.recovered {
            let label = self.endpoint;
            tracing::info!(target: WEBHOOK, endpoint = %label, "Webhook delivers again.");
        }
    }
}

/// A try failed and may be retried (log only; [`WebhookRetried`] or
/// [`WebhookGaveUp`] counts what follows). `first`: the endpoint was healthy until now.
pub struct WebhookTryFailed<'a, E> {
    pub endpoint: &'a str,
    pub error: &'a E,
    pub attempt: u32,
    pub first: bool,
}

impl<E: Display> WebhookTryFailed<'_, E> {
    pub fn emit(self) {
        let (label, why, attempt) = (self.endpoint, self.error, self.attempt);
        if self.first {
            tracing::warn!(target: WEBHOOK, endpoint = %label, error = %why, "Webhook failed; retrying with backoff.");
        } else {
            tracing::debug!(target: WEBHOOK, endpoint = %label, error = %why, attempt, "Webhook failed again.");
        }
    }
}

// ---- desktop ----

/// A notification was dropped by the session's cooldown.
pub struct NotificationSuppressed<'a> {
    pub session: &'a str,
}

impl NotificationSuppressed<'_> {
    pub fn emit(self, c: &DesktopCounters) {
        let suppressed = c.suppressed.add();
        let session = self.session;
        tracing::debug!(
            target: DESKTOP,
            session = %session,
            suppressed,
            "Notification suppressed by the per-session cooldown."
        );
    }
}

/// A job did not reach the D-Bus thread: its queue was full (`queue_full`, logged at
/// debug), or gone.
pub struct NotificationDropped {
    pub queue_full: bool,
}

impl NotificationDropped {
    pub fn emit(self, c: &DesktopCounters) {
        let dropped = c.dropped.add();
        if self.queue_full {
            tracing::debug!(
                target: DESKTOP,
                dropped,
                "Desktop notification queue full; notification dropped."
            );
        }
    }
}

/// A notification was shown. `recovered`: the bus had been unreachable until now.
pub struct NotificationShown {
    pub recovered: bool,
}

impl NotificationShown {
    pub fn emit(self, c: &DesktopCounters) {
        c.shown.add();
        if self.recovered {
            tracing::info!(target: NOTIFIER, "Desktop notifications work again.");
        }
    }
}

/// A notification could not be shown. `again`: the bus was already known to be down.
pub struct NotificationFailed<'a, E> {
    pub error: &'a E,
    pub again: bool,
}

impl<E: Display> NotificationFailed<'_, E> {
    pub fn emit(self, c: &DesktopCounters) {
        let failed = c.failed.add();
        let e = self.error;
        if self.again {
            tracing::debug!(target: NOTIFIER, error = %e, failed, "Desktop notification failed again.");
        } else {
            tracing::warn!(
                target: NOTIFIER,
                error = %e,
                "No desktop notifications: the D-Bus session bus or its notification \
                 service is unreachable. Events still stream; will retry."
            );
        }
    }
}

/// A notification server's `ActivationToken` was not fit to pass on; the click goes on
/// without it.
pub struct TokenDropped {
    pub id: u32,
    pub bytes: usize,
}

impl TokenDropped {
    pub fn emit(self, c: &DesktopCounters) {
        let n = c.tokens_dropped.add();
        tracing::warn!(
            target: NOTIFIER,
            id = self.id,
            bytes = self.bytes,
            dropped_total = n,
            "A notification server's activation token is not one (not printable ASCII, or too long); the click goes on without it."
        );
    }
}

// ---- watcher ----

/// Why the watcher asks for a full rescan.
pub enum Rescan<'a> {
    /// The native watcher reported an error.
    WatcherError(&'a std::io::Error),
    /// The native watcher's queue overflowed (events were lost).
    QueueOverflowed,
}

impl Rescan<'_> {
    pub fn emit(self, c: &WatchCounters) {
        match self {
            Rescan::WatcherError(e) => {
                tracing::warn!(target: NATIVE, error = %e, "File watcher error; rescanning everything.");
            }
            Rescan::QueueOverflowed => {
                tracing::warn!(target: NATIVE, "File watcher queue overflowed; rescanning everything.");
            }
        }
        c.rescans.add();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Deliveries;

    fn exec(c: &ExecCounters) -> [u64; 5] {
        [
            c.ok.get(),
            c.failed.get(),
            c.timed_out.get(),
            c.focused.get(),
            c.dropped.get(),
        ]
    }

    fn webhook(c: &WebhookCounters) -> [u64; 5] {
        [
            c.delivered.get(),
            c.retried.get(),
            c.failed.get(),
            c.focused.get(),
            c.dropped.get(),
        ]
    }

    #[test]
    fn an_event_adds_to_its_counter_in_its_own_set_only() {
        let (a, b) = (ExecCounters::default(), ExecCounters::default());
        let hook = WebhookCounters::default();
        ExecTimedOut {
            program: "x",
            timeout_ms: 5,
        }
        .emit(&a);
        ExecFailed {
            program: "x",
            status: &"exit status: 1",
        }
        .emit(&a);
        ExecSucceeded.emit(&b);
        ExecDropped.emit(&b);
        ExecFocused.emit(&b);
        assert_eq!(exec(&a), [0, 1, 1, 0, 0]);
        assert_eq!(exec(&b), [1, 0, 0, 1, 1], "another instance's set");
        assert_eq!(webhook(&hook), [0; 5], "another sink's set is untouched");

        WebhookTryFailed {
            endpoint: "h",
            error: &"503",
            attempt: 1,
            first: true,
        }
        .emit();
        assert_eq!(webhook(&hook), [0; 5], "a failed try alone counts nothing");
        WebhookRetried.emit(&hook);
        WebhookGaveUp {
            endpoint: "h",
            attempt: 2,
        }
        .emit(&hook);
        WebhookDelivered {
            endpoint: "h",
            recovered: true,
        }
        .emit(&hook);
        WebhookFocused.emit(&hook);
        WebhookDropped { endpoint: "h" }.emit(&hook);
        WebhookDropped { endpoint: "h" }.emit(&hook);
        assert_eq!(webhook(&hook), [1, 1, 1, 1, 2]);
        assert_eq!(exec(&a), [0, 1, 1, 0, 0]);
    }

    #[test]
    fn desktop_and_watch_events_count_where_the_stats_read() {
        let d = DesktopCounters::default();
        NotificationFailed {
            error: &"no bus",
            again: false,
        }
        .emit(&d);
        NotificationFailed {
            error: &"no bus",
            again: true,
        }
        .emit(&d);
        NotificationShown { recovered: true }.emit(&d);
        DesktopFocused.emit(&d);
        NotificationClicked.emit(&d);
        assert_eq!(
            [
                d.shown.get(),
                d.failed.get(),
                d.focused.get(),
                d.clicked.get()
            ],
            [1, 2, 1, 1]
        );
        NotificationHeld {
            session: "k",
            reason: "muted",
        }
        .emit(&d);
        NotificationSuppressed { session: "k" }.emit(&d);
        NotificationDropped { queue_full: true }.emit(&d);
        NotificationDropped { queue_full: false }.emit(&d);
        NotificationSkippedNoBus.emit(&d);
        assert_eq!(
            [
                d.muted.get(),
                d.suppressed.get(),
                d.dropped.get(),
                d.skipped_no_bus.get()
            ],
            [1, 1, 2, 1]
        );
        assert_eq!(
            (d.delivered(), d.failed()),
            (1, 2 + 2 + 1),
            "failed, dropped and skipped without a bus are failures; muted and \
             suppressed are not"
        );

        let w = WatchCounters::default();
        Rescan::QueueOverflowed.emit(&w);
        HintOverflowed.emit(&w);
        HintOverflowed.emit(&w);
        NativeEventDropped.emit(&w);
        assert_eq!(
            [w.overflow.get(), w.rescans.get(), w.dropped_by_hook.get()],
            [2, 1, 1]
        );
    }
}
