//! Diagnostics in one place: the counters of the delivery sinks and the watcher, and the
//! log line each internal event writes (Vector's `internal_events` style).
//!
//! A reader or sink owns one counter set per instance ([`ExecCounters`],
//! [`WebhookCounters`], [`DesktopCounters`], [`WatchCounters`]), because several sinks
//! run in one process and each reports its own stats. It never counts or logs a
//! diagnostic itself: it calls `emit` on one of the event types here, which adds to the
//! right counter and writes the log line at its level. [`Counter::add`] is private to
//! this module, so an event is the only way to count. The sinks' stats, and through
//! them `status`, the stop summary and the metrics endpoint, read the sets with
//! [`Counter::get`].
//!
//! Each log line keeps the target of the module that used to write it (`target:`), so
//! `BATON_LOG` filters and the log text are what they were.
//!
//! This module sits low in the layers: it imports nothing from the crate.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};

const EXEC: &str = "baton::sink::exec";
const WEBHOOK: &str = "baton::sink::webhook";
const NOTIFIER: &str = "baton::sink::notifier";
const NATIVE: &str = "baton::watch::native";

/// A monotonic count, read by stats and metrics; only events here add to it.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one; returns the new value.
    fn add(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One exec hook's counts (`[on_event]`).
#[derive(Debug, Default)]
pub struct ExecCounters {
    /// Runs that exited 0.
    pub ok: Counter,
    /// Runs that could not start, exited non-zero or were ended at shutdown.
    pub failed: Counter,
    /// Runs killed at the timeout.
    pub timed_out: Counter,
    /// Runs skipped: the session was in front of the person.
    pub focused: Counter,
    /// Events dropped because the queue was full.
    pub dropped: Counter,
}

/// One `[[webhook]]` section's counts (all its endpoints).
#[derive(Debug, Default)]
pub struct WebhookCounters {
    pub delivered: Counter,
    pub retried: Counter,
    pub failed: Counter,
    pub focused: Counter,
    /// Events dropped from a full queue (the oldest first).
    pub dropped: Counter,
}

/// The desktop notifier's counts.
#[derive(Debug, Default)]
pub struct DesktopCounters {
    pub shown: Counter,
    pub failed: Counter,
    /// Not shown: the session was in front of the person.
    pub focused: Counter,
    pub clicked: Counter,
    /// `ActivationToken`s dropped for not being a token (`notifier::valid_token`).
    pub tokens_dropped: Counter,
}

/// The hint channel's counts, shared by the hint senders and the core.
#[derive(Debug, Default)]
pub struct WatchCounters {
    /// Hints that did not fit in the channel (each turned into a full rescan).
    pub overflow: Counter,
    /// Rescans requested by the watcher (queue overflow, errors).
    pub rescans: Counter,
    /// Native events dropped on purpose by the test hook.
    pub dropped_by_hook: Counter,
}

// ---- exec hook ----

/// A run was skipped: the session was in front of the person.
pub struct ExecFocused;

impl ExecFocused {
    pub fn emit(self, c: &ExecCounters) {
        c.focused.add();
    }
}

/// A run exited 0.
pub struct ExecSucceeded;

impl ExecSucceeded {
    pub fn emit(self, c: &ExecCounters) {
        c.ok.add();
    }
}

/// The queue was full: the event is dropped. Logged at warn on the 1st, 2nd, 4th, 8th
/// ... drop, at debug otherwise: a flood of drops must not become a flood of log lines.
pub struct ExecDropped;

impl ExecDropped {
    pub fn emit(self, c: &ExecCounters) {
        let dropped = c.dropped.add();
        let msg = "Exec hook busy; event dropped (raise its queue or concurrency).";
        if dropped.is_power_of_two() {
            tracing::warn!(target: EXEC, dropped, "{msg}");
        } else {
            tracing::debug!(target: EXEC, dropped, "{msg}");
        }
    }
}

/// The program could not be started.
pub struct ExecCannotStart<'a, E> {
    pub program: &'a str,
    pub error: &'a E,
}

impl<E: Display> ExecCannotStart<'_, E> {
    pub fn emit(self, c: &ExecCounters) {
        c.failed.add();
        let (program, e) = (self.program, self.error);
        tracing::warn!(target: EXEC, program = %program, error = %e, "Cannot start the exec hook.");
    }
}

/// The program exited non-zero.
pub struct ExecFailed<'a, S> {
    pub program: &'a str,
    pub status: &'a S,
}

impl<S: Display> ExecFailed<'_, S> {
    pub fn emit(self, c: &ExecCounters) {
        c.failed.add();
        let (program, status) = (self.program, self.status);
        tracing::warn!(target: EXEC, program = %program, %status, "Exec hook failed.");
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

/// A run passed its timeout and was ended with its process group.
pub struct ExecTimedOut<'a> {
    pub program: &'a str,
    pub timeout_ms: u64,
}

impl ExecTimedOut<'_> {
    pub fn emit(self, c: &ExecCounters) {
        c.timed_out.add();
        let program = self.program;
        tracing::warn!(
            target: EXEC,
            program = %program,
            timeout_ms = self.timeout_ms,
            "Exec hook timed out; ended it and its process group."
        );
    }
}

/// Waiting for the program failed; the run was ended.
pub struct ExecWaitFailed<'a, E> {
    pub program: &'a str,
    pub error: &'a E,
}

impl<E: Display> ExecWaitFailed<'_, E> {
    pub fn emit(self, c: &ExecCounters) {
        c.failed.add();
        let (program, e) = (self.program, self.error);
        tracing::warn!(target: EXEC, program = %program, error = %e, "Cannot wait for the exec hook.");
    }
}

// ---- webhook ----

/// A post was skipped: the session was in front of the person.
pub struct WebhookFocused;

impl WebhookFocused {
    pub fn emit(self, c: &WebhookCounters) {
        c.focused.add();
    }
}

/// An endpoint's queue was full: its oldest event is dropped. Logarithmic, as
/// [`ExecDropped`]: a long outage must not become a flood of log lines.
pub struct WebhookDropped<'a> {
    pub endpoint: &'a str,
}

impl WebhookDropped<'_> {
    pub fn emit(self, c: &WebhookCounters) {
        let dropped = c.dropped.add();
        let (label, msg) = (self.endpoint, "Webhook queue full; oldest event dropped.");
        if dropped.is_power_of_two() {
            tracing::warn!(target: WEBHOOK, endpoint = %label, dropped, "{msg}");
        } else {
            tracing::debug!(target: WEBHOOK, endpoint = %label, dropped, "{msg}");
        }
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

/// The endpoint answered with a final status: the event is given up at once.
pub struct WebhookRefused<'a, E> {
    pub endpoint: &'a str,
    pub error: &'a E,
}

impl<E: Display> WebhookRefused<'_, E> {
    pub fn emit(self, c: &WebhookCounters) {
        c.failed.add();
        let (label, why) = (self.endpoint, self.error);
        tracing::warn!(target: WEBHOOK, endpoint = %label, error = %why, "Webhook refused the event; not retrying.");
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

/// Out of attempts (or the sink is closing): the event is given up.
pub struct WebhookGaveUp<'a> {
    pub endpoint: &'a str,
    pub attempt: u32,
}

impl WebhookGaveUp<'_> {
    pub fn emit(self, c: &WebhookCounters) {
        c.failed.add();
        let (label, attempt) = (self.endpoint, self.attempt);
        tracing::debug!(target: WEBHOOK, endpoint = %label, attempt, "Webhook event given up.");
    }
}

/// A failed try is tried again after the backoff.
pub struct WebhookRetried;

impl WebhookRetried {
    pub fn emit(self, c: &WebhookCounters) {
        c.retried.add();
    }
}

// ---- desktop notifier ----

/// A notification was not shown: the session was in front of the person.
pub struct DesktopFocused;

impl DesktopFocused {
    pub fn emit(self, c: &DesktopCounters) {
        c.focused.add();
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

/// A notification was clicked (counted; the notifier logs the click with what it did).
pub struct NotificationClicked;

impl NotificationClicked {
    pub fn emit(self, c: &DesktopCounters) {
        c.clicked.add();
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
            target: "baton::sink::notifier",
            id = self.id,
            bytes = self.bytes,
            dropped_total = n,
            "A notification server's activation token is not one (not printable ASCII, or too long); the click goes on without it."
        );
    }
}

// ---- watcher ----

/// A hint did not fit in the channel; a full rescan replaces it.
pub struct HintOverflowed;

impl HintOverflowed {
    pub fn emit(self, c: &WatchCounters) {
        c.overflow.add();
    }
}

/// A native event was dropped by the test hook (`drop_events`).
pub struct NativeEventDropped;

impl NativeEventDropped {
    pub fn emit(self, c: &WatchCounters) {
        c.dropped_by_hook.add();
    }
}

/// Why the watcher asks for a full rescan.
pub enum Rescan<'a> {
    /// The native watcher reported an error.
    WatcherError(&'a notify::Error),
    /// The native watcher's queue overflowed (events were lost).
    QueueOverflowed,
}

impl Rescan<'_> {
    pub fn emit(self, c: &WatchCounters) {
        match self {
            Rescan::WatcherError(e) => {
                tracing::warn!(target: NATIVE, error = %e, paths = ?e.paths, "File watcher error; rescanning everything.");
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
