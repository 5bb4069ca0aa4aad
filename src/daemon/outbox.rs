//! The core's way out: each batch goes to the fanout (the delivery sinks, the socket,
//! `ready`: [`Fanout`], which only `try_send`s), then, with the state deltas, in order,
//! on one bounded channel to the event writer's thread ([`super::writer`]), or, for one
//! event that nothing waits before, to the stream at once ([`Direct`]). It waits for
//! room rather than drop anything.

use super::deliver::Fanout;
pub use super::stage::Out;
use super::writer::Direct;
use crate::state::Suspect;
use crossbeam_channel::{Receiver, SendTimeoutError, Sender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// While the core waits for the event writer, how often it feeds the watchdog and looks
/// whether the wait was given up.
const WAIT_BEAT: Duration = Duration::from_millis(50);

/// The way out: the fanout, then the event writer (events and deltas, in order).
pub(super) struct Outbox {
    events: Sender<Out>,
    /// The stage without the writer's thread, where that is safe.
    direct: Option<Direct>,
    fan: Fanout,
    /// After the last run's outage: what comes out again says `replay` to every sink.
    suspect: Option<Suspect>,
    /// When a page held back for background tasks falls due.
    held_due: Option<Instant>,
    /// Disconnects when the daemon gives up on a stream blocked at the stop.
    abandon: Receiver<()>,
    /// The event writer is gone (the daemon is stopping).
    pub gone: bool,
    /// How often the writer's queue was full.
    waits: u64,
    heartbeat: Arc<AtomicU64>,
}

impl Outbox {
    pub fn new(
        events: Sender<Out>,
        direct: Option<Direct>,
        fan: Fanout,
        suspect: Option<Suspect>,
        abandon: Receiver<()>,
    ) -> Self {
        Outbox {
            events,
            direct,
            fan,
            suspect,
            held_due: None,
            abandon,
            gone: false,
            waits: 0,
            heartbeat: Arc::default(),
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

    /// When the next held page falls due (the core wakes up for it).
    pub fn held_due(&self) -> Option<Instant> {
        self.held_due
    }

    /// Sends the held pages that fell due.
    pub fn tick(&mut self) {
        if self.held_due.is_some_and(|t| t <= Instant::now()) {
            self.held_due = self.fan.tick();
        }
    }

    /// The fanout, for closing its sinks at the end.
    pub fn into_fan(self) -> Fanout {
        self.fan
    }

    /// Hands a batch to the fanout (flagged `replay` first if it may have gone out
    /// before an outage), then waits for room in the writer's queue rather than drop
    /// anything: the stream is the product, and durable state must never run ahead of
    /// it.
    pub fn send(&mut self, mut msg: Out) {
        if self.gone {
            return;
        }
        if let Out::Batch(batch) = &mut msg {
            crate::state::flag_replays(&mut self.suspect, batch);
            self.fan.deliver(batch);
            self.held_due = self.fan.tick();
        }
        let msg = match &self.direct {
            Some(d) => match d.try_write(msg) {
                Ok(()) => return,
                Err(msg) => {
                    d.queued();
                    msg
                }
            },
            None => msg,
        };
        let msg = match self.events.try_send(msg) {
            Ok(()) => return,
            Err(TrySendError::Disconnected(_)) => {
                self.gone = true;
                return;
            }
            Err(TrySendError::Full(msg)) => msg,
        };
        self.waits += 1;
        if self.waits.is_power_of_two() {
            tracing::warn!(
                waits = self.waits,
                "Event stream is not keeping up; waiting for it."
            );
        }
        // Waiting on the writer is not being hung: keep the watchdog fed meanwhile.
        let mut msg = msg;
        loop {
            match self.events.send_timeout(msg, WAIT_BEAT) {
                Ok(()) => return,
                Err(SendTimeoutError::Disconnected(_)) => {
                    self.gone = true;
                    return;
                }
                Err(SendTimeoutError::Timeout(m)) => msg = m,
            }
            self.beat();
            if self.abandon.try_recv() == Err(TryRecvError::Disconnected) {
                self.gone = true;
                return;
            }
        }
    }
}
