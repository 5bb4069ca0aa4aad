//! The event writer: it writes the JSON Lines stream and owns the state directory's
//! writes, so they happen in the order the core produced them.
//!
//! Emission protocol (durable state): a batch's transcript events are journaled as
//! pending, then each is written and journaled as done. A state delta from the core goes
//! to the state writer only after every event sent before it was written.
//!
//! When the stream cannot be written (a full disk, `/dev/full`, a file baton may not
//! write), nothing is dropped and nothing stops: what cannot be written waits here, in
//! order, and is tried again with backoff. The deltas that come behind it wait too,
//! merged into one, so the saved state never runs ahead of the stream, and the core
//! (which waits for the state writer to take its deltas) does not wait for this. A
//! warning goes out at once and then at most once a minute, and `status` shows the
//! stream as blocked. The delivery sinks got every event before it reached this writer,
//! so they keep delivering. Past [`HELD_MAX`] waiting events the writer stops taking
//! more, and the daemon waits for it, as it does for a stalled reader of stdout.

use crate::clock::{format_rfc3339, wall_now};
use crate::model::Event;
use crate::sink::jsonl::{Blocked, LineOut, StreamHealth};
use crate::state::{Delta, Persist};
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the core sends: to the event writer's queue, or to the stage itself
/// ([`super::writer::Direct`]).
pub enum Out {
    Batch(Vec<Event>),
    Save(Box<Delta>),
}

/// Events that may wait for a blocked stream before the daemon waits for it.
pub const HELD_MAX: usize = 16_384;
/// First retry after a failed write; doubled after each failure, up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// While the stream stays blocked, a warning at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The deltas that came behind held events, merged into one (a delta may always wait
/// longer, never go sooner): handed to the state writer once the events before it are
/// written.
struct HeldDelta {
    /// The newest number of those merged (see `Persist::hold`).
    seq: u64,
    delta: Box<Delta>,
    /// How many of the held events come before it.
    after: usize,
}

/// A spell of failed writes.
struct Spell {
    since: i64,
    started: Instant,
    error: String,
    backoff: Duration,
    next_try: Instant,
    warned_at: Instant,
    failures: u64,
}

pub(super) struct Stage {
    out: Box<dyn LineOut>,
    persist: Persist,
    /// Events not written yet, in order; journaled as pending already.
    held: VecDeque<Box<Event>>,
    held_delta: Option<HeldDelta>,
    spell: Option<Spell>,
    health: Arc<StreamHealth>,
    /// The stream's reader is gone for good (see `LineOut::gone`).
    gone: Option<io::Error>,
}

/// An event's line in the stream, its newline included.
fn line_of(ev: &Event) -> String {
    let mut line = ev.to_json();
    line.push('\n');
    line
}

impl Stage {
    pub fn new(out: Box<dyn LineOut>, persist: Persist, health: Arc<StreamHealth>) -> Stage {
        Stage {
            out,
            persist,
            held: VecDeque::new(),
            held_delta: None,
            spell: None,
            health,
            gone: None,
        }
    }

    /// Writes a batch of one event now, on the caller's thread, if nothing waits to be
    /// written before it and the stream takes its line without waiting
    /// ([`LineOut::ready`]); hands it back otherwise. As [`Stage::handle`] for it.
    pub fn try_direct(&mut self, batch: Vec<Event>) -> Result<io::Result<()>, Vec<Event>> {
        let line = match batch.as_slice() {
            [ev] if self.idle() => line_of(ev),
            _ => return Err(batch),
        };
        if !self.out.ready(line.len()) {
            return Err(batch);
        }
        Ok(self.handle_made(vec![Out::Batch(batch)], Some(line)))
    }

    /// Nothing waits to be written, and nothing is to be tried again.
    pub fn idle(&self) -> bool {
        self.held.is_empty()
            && self.held_delta.is_none()
            && self.spell.is_none()
            && self.gone.is_none()
    }

    /// Whether the writer has all it may hold.
    pub fn full(&self) -> bool {
        self.held.len() >= HELD_MAX
    }

    /// When the held messages are due to be tried again.
    pub fn retry_at(&self) -> Option<Instant> {
        self.spell.as_ref().map(|s| s.next_try)
    }

    /// Handles messages, after trying what waits if that is due. Fails only when the
    /// stream's reader is gone for good: a daemon nobody can hear should stop.
    pub fn handle(&mut self, msgs: Vec<Out>) -> io::Result<()> {
        self.handle_made(msgs, None)
    }

    /// [`Stage::handle`], with the line of the first batch's first event already made
    /// ([`Stage::try_direct`] made it to see whether it fits).
    fn handle_made(&mut self, msgs: Vec<Out>, mut made: Option<String>) -> io::Result<()> {
        if self.retry_at().is_some_and(|t| t <= Instant::now()) {
            self.retry();
        }
        self.repaired();
        for m in msgs {
            match m {
                Out::Batch(b) => self.deliver(b, made.take()),
                Out::Save(d) => self.save(d),
            }
        }
        self.persist.tidy();
        // A state_unwritable anomaly from the state writer.
        if let Some(a) = self.persist.health.take_anomaly() {
            self.deliver(vec![a], None);
        }
        self.repaired();
        self.publish();
        match self.gone.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Journals `batch` as pending, then writes each event (the first as `made`, if
    /// given) and journals it as done, or holds it. Each event's line is made once, for
    /// the journal and the stream.
    fn deliver(&mut self, batch: Vec<Event>, mut made: Option<String>) {
        let lines: Vec<String> = batch
            .iter()
            .map(|ev| made.take().unwrap_or_else(|| line_of(ev)))
            .collect();
        self.persist.pending(&batch, &lines);
        for (ev, line) in batch.into_iter().zip(lines) {
            if !self.held.is_empty() {
                self.held.push_back(Box::new(ev));
                continue;
            }
            match self.write_line(&line) {
                Ok(()) => self.persist.done(&ev),
                Err(e) => {
                    self.failed(&e);
                    self.held.push_back(Box::new(ev));
                }
            }
        }
    }

    fn save(&mut self, d: Box<Delta>) {
        if self.held.is_empty() && self.held_delta.is_none() {
            self.persist.save(d);
            return;
        }
        let seq = self.persist.hold();
        let after = self.held.len();
        match &mut self.held_delta {
            Some(h) => {
                h.delta.merge(*d);
                h.seq = seq;
                h.after = after;
            }
            None => {
                self.held_delta = Some(HeldDelta {
                    seq,
                    delta: d,
                    after,
                });
            }
        }
    }

    fn write_line(&mut self, line: &str) -> io::Result<()> {
        self.out.append(line.as_bytes())?;
        self.out.flush()
    }

    /// Writes what waits, in order, until a write fails again.
    pub fn retry(&mut self) {
        loop {
            if self.held_delta.as_ref().is_some_and(|h| h.after == 0)
                && let Some(h) = self.held_delta.take()
            {
                self.persist.save_held(h.seq, h.delta);
            }
            let Some(ev) = self.held.pop_front() else {
                break;
            };
            match self.write_line(&line_of(&ev)) {
                Ok(()) => {
                    self.persist.done(&ev);
                    if let Some(h) = &mut self.held_delta {
                        h.after -= 1;
                    }
                }
                Err(e) => {
                    self.held.push_front(ev);
                    self.failed(&e);
                    self.publish();
                    return;
                }
            }
        }
        if let Some(s) = self.spell.take() {
            tracing::warn!(
                target_name = %self.out.name(),
                blocked_s = s.started.elapsed().as_secs(),
                failed_writes = s.failures,
                "The event stream is written again; what waited was written, in order."
            );
        }
        self.publish();
    }

    fn failed(&mut self, e: &io::Error) {
        if self.out.gone(e) {
            self.gone = Some(io::Error::new(e.kind(), e.to_string()));
            return;
        }
        let now = Instant::now();
        let waiting = self.held.len() + 1;
        let target = self.out.name();
        match &mut self.spell {
            None => {
                tracing::warn!(error = %e, "Cannot write the event stream ({target}): {e}; events wait, journaled, and are written in order once it can be (retrying with backoff).");
                self.spell = Some(Spell {
                    since: wall_now(),
                    started: now,
                    error: e.to_string(),
                    backoff: RETRY_FIRST,
                    next_try: now + RETRY_FIRST,
                    warned_at: now,
                    failures: 1,
                });
            }
            Some(s) => {
                s.failures += 1;
                s.error = e.to_string();
                s.backoff = (s.backoff * 2).min(RETRY_MAX);
                s.next_try = now + s.backoff;
                if now.duration_since(s.warned_at) >= WARN_EVERY {
                    s.warned_at = now;
                    tracing::warn!(error = %e, waiting, blocked_s = s.started.elapsed().as_secs(), "Still cannot write the event stream ({target}); events wait.");
                } else {
                    tracing::debug!(error = %e, waiting, "Cannot write the event stream yet.");
                }
            }
        }
    }

    /// A torn last line the event file was found with: counted as an anomaly, which is
    /// then the first line appended after the cut.
    fn repaired(&mut self) {
        if let Some(bytes) = self.out.take_repaired() {
            let target = self.out.name();
            tracing::warn!(bytes, "Cut a torn last line off {target} before appending.");
            let ev = crate::state::anomaly(
                "torn_event_line",
                format!(
                    "{target} ended in {bytes} bytes of a line whose write never finished; they \
                     were cut off before anything was appended"
                ),
                &target,
            );
            self.deliver(vec![ev], None);
        }
    }

    fn publish(&self) {
        self.health.set(self.spell.as_ref().map(|s| Blocked {
            state: "blocked",
            since: format_rfc3339(s.since),
            target: self.out.name(),
            error: s.error.clone(),
            waiting: self.held.len(),
        }));
    }

    /// At the stop: one last try, then says what could not be written. The saved state
    /// stays behind it (the held delta is not written), so a restart reads those
    /// transcripts again from there.
    pub fn finish(&mut self) {
        if !self.held.is_empty() {
            self.retry();
        }
        if !self.held.is_empty() {
            tracing::warn!(
                waiting = self.held.len(),
                "Stopping with events the event stream ({}) could not take: the agents' events \
                 are journaled and come out at the next start, flagged replay.",
                self.out.name()
            );
        }
        self.held.clear();
        self.held_delta = None;
        self.persist.finish();
    }
}
