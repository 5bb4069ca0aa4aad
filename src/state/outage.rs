//! The outage mark: when events go out without a journal record, the lock file says so
//! until the saved state covers them, and the start after a crash in between flags
//! what it derives again as `replay`. Owns the mark's setting and clearing and the
//! flagging; it writes only the lock file, never a journal or a generation.

use super::delivery::Persist;
use super::{journaled, lock};
use crate::clock::wall_now;
use crate::model::{Event, EventKind};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Persist {
    /// Events are about to go out with no journal record: mark the outage (once) in
    /// the lock file, which is open for writing whatever became of the directory.
    pub(super) fn unjournaled(&mut self) {
        self.clear_at = self.seq + 1;
        if self.mark.outage_since.is_some() {
            return;
        }
        self.mark.outage_since = Some(wall_now());
        if let Err(e) = lock::write_mark(&self.lock, self.mark) {
            tracing::error!(dir = %self.dir.display(), error = %e, "Cannot mark the lock file: after a crash now, events delivered meanwhile may be delivered again without the replay flag.");
        }
    }

    /// Clears the outage mark once the saved state covers every event that went out
    /// unjournaled (a restart no longer derives any of them again).
    pub(super) fn clear_outage(&mut self) {
        if self.mark.outage_since.is_none()
            || self.progress.covered.load(Ordering::Acquire) < self.clear_at
        {
            return;
        }
        self.mark.outage_since = None;
        match lock::write_mark(&self.lock, self.mark) {
            Ok(()) => {
                tracing::info!(dir = %self.dir.display(), "Every event delivered is in the saved state again.")
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "Cannot clear the lock file's outage mark.");
            }
        }
    }

    /// The flagging of events derived again after the last run's outage, if there was
    /// one (see [`Suspect`]).
    pub fn take_suspect(&mut self) -> Option<Suspect> {
        self.suspect.take()
    }
}

/// For a while after the start that follows an outage (events delivered without a
/// journal record, then a crash), flags as `replay` the transcript events that may have
/// gone out already: every one up to and including the batch with `daemon_ready`
/// (derived again from what was read at start), and for [`SUSPECT_AFTER_READY`] after
/// it those whose record predates this start (a completion whose quiet period fell due
/// while baton was down comes out at the first tick). Repeating one with the flag is
/// the promise (an idempotent consumer drops it); passing one off as new is not.
#[derive(Debug)]
pub struct Suspect {
    /// This run's start (Unix ms).
    started: i64,
    /// When `daemon_ready` went by.
    ready_at: Option<Instant>,
}

const SUSPECT_AFTER_READY: Duration = Duration::from_secs(60);

impl Suspect {
    pub(super) fn new(started: i64) -> Suspect {
        Suspect {
            started,
            ready_at: None,
        }
    }

    /// Flags what in `batch` may have gone out before; false once nothing can.
    pub fn flag(&mut self, batch: &mut [Event]) -> bool {
        if self
            .ready_at
            .is_some_and(|t| t.elapsed() > SUSPECT_AFTER_READY)
        {
            return false;
        }
        let reading = self.ready_at.is_none();
        for ev in batch.iter_mut() {
            if !journaled(ev) {
                if ev.event == EventKind::DaemonReady {
                    self.ready_at = Some(Instant::now());
                }
                continue;
            }
            let before_start = ev
                .record_ts
                .as_deref()
                .and_then(crate::clock::parse_rfc3339)
                .is_none_or(|t| t < self.started);
            if reading || before_start {
                ev.replay = true;
            }
        }
        true
    }
}

/// [`Suspect::flag`], dropping it when it is done.
pub fn flag_replays(suspect: &mut Option<Suspect>, batch: &mut [Event]) {
    if let Some(s) = suspect
        && !s.flag(batch)
    {
        *suspect = None;
    }
}
