//! The core's way out to the sink task: event batches and state deltas, in order, on
//! one bounded channel. It waits for room rather than drop anything.

use crate::model::Event;
use crate::state::Delta;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// What the core sends.
pub enum Out {
    Batch(Vec<Event>),
    Save(Box<Delta>),
}

/// The way out to the sink task: events and deltas, in order.
pub(super) struct Outbox {
    events: mpsc::Sender<Out>,
    /// The sink task is gone (the daemon is stopping).
    pub gone: bool,
    /// How often the sink's queue was full.
    waits: u64,
    heartbeat: Arc<AtomicU64>,
}

impl Outbox {
    pub fn new(events: mpsc::Sender<Out>, heartbeat: Arc<AtomicU64>) -> Self {
        Outbox {
            events,
            gone: false,
            waits: 0,
            heartbeat,
        }
    }

    pub fn set_heartbeat(&mut self, beat: Arc<AtomicU64>) {
        self.heartbeat = beat;
    }

    pub fn waits(&self) -> u64 {
        self.waits
    }

    pub fn beat(&self) {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits for room in the sink's queue rather than drop anything: the stream is the
    /// product, and durable state must never run ahead of it.
    pub fn send(&mut self, msg: Out) {
        let msg = match self.events.try_send(msg) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.gone = true;
                return;
            }
            Err(mpsc::error::TrySendError::Full(msg)) => msg,
        };
        self.waits += 1;
        if self.waits.is_power_of_two() {
            tracing::warn!(
                waits = self.waits,
                "Event sink is not keeping up; waiting for it."
            );
        }
        // Waiting on the sink is not being hung: keep the watchdog fed meanwhile.
        let mut msg = msg;
        let mut pause = Duration::from_micros(100);
        loop {
            match self.events.try_send(msg) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.gone = true;
                    return;
                }
                Err(mpsc::error::TrySendError::Full(m)) => msg = m,
            }
            self.beat();
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }
}
