//! What leaves the core: the events of a batch ([`Core::flush`]), the delta of what
//! changed for the state writer, once it has waited a little ([`Core::save_when_due`]),
//! the sessions changed for `status`, the remote links' batches, the lifecycle events,
//! and everything still to go at the stop.
//!
//! Owns no state of its own: these are the core's methods, on the core's thread.

use super::core::Core;
use super::deliver::Fanout;
use super::outbox::Out;
use crate::clock::{format_rfc3339, wall_now};
use crate::error::Error;
use crate::model::{Event, EventKind};
use crate::provider::content_hash;
use crossbeam_channel::TryRecvError;
use std::time::{Duration, Instant};

/// The sessions changed since the last publish go to the `status` keeper at most this
/// often (a session changing many times in between is sent once); a batch after a quiet
/// spell publishes at once.
const VIEWS_EVERY: Duration = Duration::from_millis(100);
/// At the stop, how long the core waits for the remote links to end (within the
/// daemon's `CORE_GRACE`).
const REMOTE_DRAIN: Duration = Duration::from_secs(2);
/// How long what changed waits before its delta goes to the state writer. A burst of
/// appends (an agent streaming its reply) makes one delta, not one a line, and the two
/// thread wake-ups a delta costs (the event writer's, the state writer's) come after the
/// stream's reader has taken the event, not beside it on a 2-core machine. A crash in
/// between loses nothing: the journal holds every event written, and the next run reads
/// the files again from their last checkpoint.
const SAVE_AFTER: Duration = Duration::from_millis(100);

impl Core {
    /// Hands on the batches the remote links sent; true if there was one.
    pub(super) fn hand_on_remotes(&mut self) -> bool {
        let mut any = false;
        while let Some(rx) = &self.remotes {
            match rx.try_recv() {
                Ok(b) => {
                    self.outbox.send(Out::Batch(b));
                    any = true;
                }
                Err(TryRecvError::Empty) => break,
                // Every link ended.
                Err(TryRecvError::Disconnected) => self.remotes = None,
            }
        }
        any
    }

    pub(super) fn flush(&mut self) {
        self.reduce.record_decided(&self.files);
        self.readout.files_tracked.set(self.files.len());
        if let (Some(m), Some(at)) = (&self.metrics, &mut self.reduce.read_at) {
            // The span from the read to here: the bytes' reading, framing, projecting and
            // reducing, and the wait for the batch to end; not the sinks' own time.
            let now = self.files.now().mono;
            for t in at.drain(..) {
                m.observe_latency_ms(now.saturating_sub(t));
            }
        }
        if self.reduce.out.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.reduce.out);
        self.deltas.drop_decided(&mut batch);
        if batch.is_empty() {
            return;
        }
        self.outbox.send(Out::Batch(batch));
        // After the events are on their way, so the views never delay them.
        self.publish_views(false);
    }

    pub(super) fn save(&mut self) {
        let now = self.clock.now();
        self.reduce.record_decided(&self.files);
        let r = &mut self.reduce;
        self.deltas.save(
            &self.files,
            &r.reducer,
            &mut r.pending,
            &mut self.outbox,
            now,
        );
    }

    /// Saves what changed once it has waited [`SAVE_AFTER`]. After a batch or a sweep
    /// step, whose flush recorded what they decided.
    pub(super) fn save_when_due(&mut self) {
        let now = Instant::now();
        match self.save_at {
            Some(at) if now >= at => {
                self.save_at = None;
                self.save();
            }
            Some(_) => {}
            None if self.reduce.pending.is_empty() => {}
            None => self.save_at = Some(now + SAVE_AFTER),
        }
    }

    /// Sends the views of the sessions changed since the last time, unless that was less
    /// than [`VIEWS_EVERY`] ago (then the core wakes up for it when it is due). Costs
    /// what changed: the keeper holds the rest.
    pub(super) fn publish_views(&mut self, force: bool) {
        if self.views.is_none()
            || (!force && self.views_due().is_none_or(|t| t > Instant::now()))
            || !self.reduce.reducer.has_changes()
        {
            return;
        }
        let changes = self.reduce.reducer.take_changes();
        if let Some(tx) = &self.views
            && tx.send(changes).is_err()
        {
            // The keeper is gone (shutdown): `status` no longer needs views.
            self.views = None;
        }
        self.views_at = Some(Instant::now());
    }

    /// When pending views are due.
    pub(super) fn views_due(&self) -> Option<Instant> {
        if self.views.is_none() || !self.reduce.reducer.has_changes() {
            return None;
        }
        Some(self.views_at.map_or_else(Instant::now, |t| t + VIEWS_EVERY))
    }

    pub(super) fn lifecycle(&mut self, kind: EventKind) {
        let now = wall_now();
        let id = content_hash(&[
            b"lifecycle",
            kind.as_str().as_bytes(),
            self.run_id.as_bytes(),
        ]);
        self.reduce
            .out
            .push(Event::lifecycle(kind, format_rfc3339(now), id));
    }

    /// At the stop, hands on what the remote links still send until they end (they stop
    /// at the token): each saved its place in its stream once the batch was handed
    /// over, so none may be dropped here. Bounded by [`REMOTE_DRAIN`].
    fn drain_remotes(&mut self) {
        let Some(rx) = self.remotes.take() else {
            return;
        };
        let until = Instant::now() + REMOTE_DRAIN;
        while let Ok(b) = rx.recv_deadline(until) {
            self.outbox.send(Out::Batch(b));
        }
    }

    pub(super) fn stopping(mut self) -> Result<Fanout, Error> {
        if self.ready {
            let now = self.clock.now();
            self.reduce.tick(&self.files, now);
        } else {
            self.reduce.discard_out();
        }
        self.drain_remotes();
        self.lifecycle(EventKind::DaemonStopping);
        self.flush();
        self.publish_views(true);
        if self.ready {
            self.save();
        }
        let c = self.files.counters();
        tracing::info!(
            files = self.files.len(),
            sweeps = self.sweeps,
            rederived = ?c.rederived,
            deleted = c.deleted,
            watch_limit_hits = self.tree.watch_limit_hits,
            hint_overflows = self.hints.stats.overflow.get(),
            watcher_rescans = self.hints.stats.rescans.get(),
            native_events_dropped_by_test_hook = self.hints.stats.dropped_by_hook.get(),
            sink_waits = self.outbox.waits(),
            read_errors = c.read_errors,
            signals_applied = self.reduce.reducer.signal_stats().applied,
            signals_unmatched = self.reduce.reducer.signal_stats().unmatched,
            signal_disagreements = self.reduce.reducer.signal_stats().disagreements,
            "Stopped."
        );
        Ok(self.outbox.into_fan())
    }
}
