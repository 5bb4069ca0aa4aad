//! The fanout: everything that receives events besides the JSON Lines stream (the
//! delivery sinks, the socket's followers, the `ready` signal, the metrics). Each only
//! `try_send`s into its own bounded queue, so the core calls it directly
//! ([`super::outbox`]) before handing the batch to the event writer's thread
//! ([`super::writer`]). A stalled reader of `--events`, or a full disk under it, delays
//! neither notifications nor `tail` (until the writer's queue is full and the core
//! waits for it).

use crate::metrics::Metrics;
use crate::model::{Event, EventKind};
use crate::sink::Sink;
use crate::sink::delivery::Counting;
use crate::socket::Hub;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// A delivery sink, closed with a grace period at the end.
pub struct Delivery(Box<dyn Counting>);

impl From<Box<dyn Counting>> for Delivery {
    fn from(s: Box<dyn Counting>) -> Self {
        Delivery(s)
    }
}

impl Delivery {
    fn sink(&mut self) -> &mut dyn Sink {
        self.0.as_mut()
    }

    /// The sink's name and its counters, for the metrics' [`crate::diag::Readout`].
    pub fn counters(&self) -> (&'static str, Arc<dyn crate::diag::Deliveries>) {
        (self.0.name(), self.0.deliveries())
    }

    /// Lets the sink finish its queue for up to `grace`, and logs what it did.
    pub fn close(self, grace: Duration) {
        let name = self.0.name();
        let sink: Box<dyn Sink> = self.0;
        let closed = sink.close(grace);
        let stats = format!("{:?}", closed.stats);
        if closed.done {
            tracing::info!(sink = name, stats = %stats, "Sink closed.");
        } else {
            tracing::warn!(sink = name, stats = %stats, "Sink still busy at shutdown; abandoned.");
        }
    }
}

/// Everything that receives events besides the JSON Lines stream.
pub struct Fanout {
    pub sinks: Vec<Delivery>,
    pub hub: Option<Arc<Hub>>,
    /// Fired once, when `daemon_ready` goes out.
    pub ready: Option<oneshot::Sender<()>>,
    /// Counts turns and anomalies (`/metrics` reads the sinks' deliveries from `diag`).
    pub metrics: Option<Arc<Metrics>>,
}

impl Fanout {
    pub(super) fn deliver(&mut self, batch: &[Event]) {
        for ev in batch {
            if let Some(m) = &self.metrics {
                m.count_event(ev);
            }
            for s in &mut self.sinks {
                s.sink().deliver(ev);
            }
            if let Some(hub) = &self.hub {
                hub.publish(ev);
            }
            if ev.event == EventKind::DaemonReady
                && let Some(r) = self.ready.take()
            {
                let _ = r.send(());
            }
        }
        for s in &mut self.sinks {
            s.sink().flush();
        }
    }

    /// Sends the pages that fell due (held for background tasks); returns when the
    /// next one is due.
    pub(super) fn tick(&mut self) -> Option<std::time::Instant> {
        let now = std::time::Instant::now();
        let mut next = None;
        for s in &mut self.sinks {
            let sink = s.sink();
            if let Some(at) = sink.tick(now) {
                next = Some(next.map_or(at, |n: std::time::Instant| n.min(at)));
            }
            sink.flush();
        }
        next
    }
}
