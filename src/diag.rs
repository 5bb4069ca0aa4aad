//! Diagnostics in one place: the counters of the delivery sinks and the watcher, the
//! gauges the metrics endpoint reads, and the log line each internal event writes
//! (Vector's `internal_events` style).
//!
//! A reader or sink owns one counter set per instance ([`ExecCounters`],
//! [`WebhookCounters`], [`DesktopCounters`], [`WatchCounters`]), because several sinks
//! run in one process and each reports its own stats. It never counts or logs a
//! diagnostic itself: it calls `emit` on one of the event types here, which adds to the
//! right counter and writes the log line at its level. [`Counter::add`] is private to
//! this module, so an event is the only way to count. The sinks' stats, and through
//! them `status` and the stop summary, read the sets with [`Counter::get`]; the metrics
//! endpoint reads them, and the daemon's gauges, through one [`Readout`] at each scrape.
//!
//! Each log line keeps the target of the module that used to write it (`target:`), so
//! `BATON_LOG` filters and the log text are what they were.
//!
//! The events themselves, each with its log line, are in [`events`] and re-exported
//! here, so a caller names `diag::ExecDropped` as it always has.
//!
//! This module sits low in the layers: it imports nothing from the crate.

mod events;

pub use events::*;

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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

/// A level its one owner sets (files tracked, remotes connected), read by metrics.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    pub fn set(&self, n: usize) {
        self.0
            .store(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Declares a counter set: a struct of [`Counter`]s, one per field.
macro_rules! counter_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident,)* }) => {
        $(#[$m])*
        #[derive(Debug, Default)]
        pub struct $name {
            $($(#[$fm])* pub $field: Counter,)*
        }
    };
}

counter_set! {
    /// One exec hook's counts (`[on_event]`).
    ExecCounters {
        /// Runs that exited 0.
        ok,
        /// Runs that could not start, exited non-zero or were ended at shutdown.
        failed,
        /// Runs killed at the timeout.
        timed_out,
        /// Runs skipped: the session was in front of the person.
        focused,
        /// Events dropped because the queue was full.
        dropped,
    }
}

counter_set! {
    /// One `[[webhook]]` section's counts (all its endpoints).
    WebhookCounters {
        delivered,
        retried,
        failed,
        focused,
        /// Events dropped from a full queue (the oldest first).
        dropped,
    }
}

counter_set! {
    /// The desktop sink's counts: the sink's own decisions and its D-Bus thread's.
    DesktopCounters {
        /// Notifications the server accepted.
        shown,
        /// Notify calls that failed (no bus, no server, an error reply).
        failed,
        /// Not shown: the session was in front of the person.
        focused,
        /// Clicks acted on.
        clicked,
        /// `ActivationToken`s dropped for not being a token (`notifier::valid_token`).
        tokens_dropped,
        /// Dropped by the per-session cooldown.
        suppressed,
        /// Dropped because the D-Bus thread's queue was full (or gone).
        dropped,
        /// Dropped while the bus was known to be unreachable.
        skipped_no_bus,
        /// Not shown: muted (config or `baton mute`) or in quiet hours.
        muted,
    }
}

counter_set! {
    /// The hint channel's counts, shared by the hint senders and the core.
    WatchCounters {
        /// Hints that did not fit in the channel (each turned into a full rescan).
        overflow,
        /// Rescans requested by the watcher (queue overflow, errors).
        rescans,
        /// Native events dropped on purpose by the test hook.
        dropped_by_hook,
    }
}

/// What a delivery sink's counters say in the two numbers `baton_deliveries_total` and
/// `baton_delivery_failures_total` count, read at scrape time from any thread.
pub trait Deliveries: Debug + Send + Sync {
    /// Pages that reached their target.
    fn delivered(&self) -> u64;
    /// Pages given up on: failed, timed out, or dropped from a full queue. (Skipped on
    /// purpose, as by a cooldown or a mute, is neither.)
    fn failed(&self) -> u64;
}

impl Deliveries for ExecCounters {
    fn delivered(&self) -> u64 {
        self.ok.get()
    }
    fn failed(&self) -> u64 {
        self.failed.get() + self.timed_out.get() + self.dropped.get()
    }
}

impl Deliveries for WebhookCounters {
    fn delivered(&self) -> u64 {
        self.delivered.get()
    }
    fn failed(&self) -> u64 {
        self.failed.get() + self.dropped.get()
    }
}

impl Deliveries for DesktopCounters {
    fn delivered(&self) -> u64 {
        self.shown.get()
    }
    fn failed(&self) -> u64 {
        self.failed.get() + self.dropped.get() + self.skipped_no_bus.get()
    }
}

/// What the metrics endpoint reads at each scrape: every delivery sink's counters, by
/// the sink's name, and the daemon's gauges. One per daemon; each owner updates its own
/// part (the sinks count through events, the core sets `files_tracked`, the remotes'
/// links `remotes_connected`).
#[derive(Debug, Default)]
pub struct Readout {
    sinks: Mutex<Vec<(&'static str, Arc<dyn Deliveries>)>>,
    /// Transcript files the daemon follows (the core's file table).
    pub files_tracked: Gauge,
    /// Remote machines whose event stream is connected.
    pub remotes_connected: Gauge,
}

impl Readout {
    /// Adds a sink's counters under `name` (several sinks may share one, as webhooks do).
    pub fn add_sink(&self, name: &'static str, counters: Arc<dyn Deliveries>) {
        let mut sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        sinks.push((name, counters));
    }

    /// Each sink name's (delivered, failed), summed over the sinks of that name, in the
    /// order the names were first added.
    pub fn deliveries(&self) -> Vec<(&'static str, u64, u64)> {
        let sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<(&'static str, u64, u64)> = Vec::new();
        for (name, c) in sinks.iter() {
            let (d, f) = (c.delivered(), c.failed());
            match out.iter_mut().find(|(n, _, _)| n == name) {
                Some(row) => (row.1, row.2) = (row.1 + d, row.2 + f),
                None => out.push((name, d, f)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readout_adds_up_sinks_of_one_name_in_the_order_first_added() {
        let r = Readout::default();
        let (a, b, x) = (
            Arc::new(WebhookCounters::default()),
            Arc::new(WebhookCounters::default()),
            Arc::new(ExecCounters::default()),
        );
        r.add_sink("webhook", a.clone());
        r.add_sink("on_event", x.clone());
        r.add_sink("webhook", b.clone());
        WebhookRetried.emit(&a);
        WebhookDropped { endpoint: "h" }.emit(&a);
        WebhookGaveUp {
            endpoint: "h",
            attempt: 3,
        }
        .emit(&b);
        ExecSucceeded.emit(&x);
        assert_eq!(r.deliveries(), [("webhook", 0, 2), ("on_event", 1, 0)]);
    }
}
