//! The state directory seen from the delivery task: events journaled as pending before
//! they go out and as done after, journals rotated and deleted once both generations
//! cover them, and the core's deltas handed to the state writer in delivery order. A
//! failure here never holds up delivery; it is logged, reported once through [`Health`],
//! and marked in the lock file ([`super::outage`]) so a restart knows.

use super::journal::{self, Journal};
use super::outage::Suspect;
use super::saver::{self, Progress};
use super::{Delta, Health, journaled, lock};
use crate::model::Event;
use std::fs::{self, File};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A journal is left for the next one past this size.
const JOURNAL_ROTATE: u64 = 1 << 20;
/// After opening or writing a journal failed, opening one is tried again no sooner than
/// this (not once per batch: each try can leave a file behind).
const JOURNAL_RETRY: Duration = Duration::from_secs(1);

/// The state directory seen from the delivery task: it journals events around their
/// delivery and hands the core's deltas to the state writer thread.
pub struct Persist {
    pub(super) dir: PathBuf,
    /// Held for the lock, and where the [`lock::Mark`] is kept.
    pub(super) lock: File,
    pub(super) mark: lock::Mark,
    /// The mark's outage is cleared once every delta up to this one is on disk: the
    /// first one sent after the last event that went out unjournaled.
    pub(super) clear_at: u64,
    /// Flags what this run derives again after the last run's outage; the sink takes it.
    pub(super) suspect: Option<Suspect>,
    /// `None` after a write to it failed; the next one is opened on the next write.
    pub(super) journal: Option<Journal>,
    /// No journal is opened before this, after a failure.
    pub(super) journal_retry: Option<Instant>,
    pub(super) next_journal: u64,
    /// Full journals, each with the delta sequence number that covers it.
    pub(super) closed: Vec<(u64, u64)>,
    /// Deltas handed to the writer so far.
    pub(super) seq: u64,
    pub(super) saver: Option<(crossbeam_channel::Sender<saver::Msg>, JoinHandle<()>)>,
    pub(super) progress: Arc<Progress>,
    pub health: Arc<Health>,
}

impl Persist {
    /// Records transcript events as pending before delivery. When that fails they go
    /// out all the same, but first the lock file says so, so that a restart flags
    /// whatever it derives again as `replay` rather than pass it for new.
    /// `lines` are the events' stream lines, in order.
    pub fn pending(&mut self, events: &[Event], lines: &[String]) {
        let durable: Vec<&str> = events
            .iter()
            .zip(lines)
            .filter(|(e, _)| journaled(e))
            .map(|(_, line)| line.as_str())
            .collect();
        if durable.is_empty() {
            return;
        }
        let res = match self.journal() {
            Some(Ok(j)) => j.pending(durable),
            Some(Err(e)) => Err(e),
            // Failing still; already said.
            None => {
                self.unjournaled();
                return;
            }
        };
        if let Err(e) = res {
            self.journal_failed("record pending events", &e);
            self.unjournaled();
        }
    }

    /// Records that `ev` was delivered.
    pub fn done(&mut self, ev: &Event) {
        if !journaled(ev) {
            return;
        }
        if let Some(j) = self.journal.as_mut()
            && let Err(e) = j.done(&ev.id)
        {
            // It stays pending: a restart replays it, flagged.
            self.journal_failed("record a delivered event", &e);
        }
    }

    /// The journal to write to, opened if need be; `None` while waiting to retry.
    fn journal(&mut self) -> Option<io::Result<&mut Journal>> {
        if self.journal.is_none() {
            if self.journal_retry.is_some_and(|t| Instant::now() < t) {
                return None;
            }
            match Journal::open(&self.dir, self.next_journal) {
                Ok(j) => {
                    self.next_journal += 1;
                    self.journal_retry = None;
                    self.journal = Some(j);
                }
                Err(e) => {
                    self.journal_retry = Some(Instant::now() + JOURNAL_RETRY);
                    return Some(Err(e));
                }
            }
        }
        self.journal.as_mut().map(Ok)
    }

    fn journal_failed(&mut self, what: &str, e: &io::Error) {
        if let Some(j) = self.journal.take() {
            self.closed.push((j.number, self.seq + 1));
        }
        self.journal_retry = Some(Instant::now() + JOURNAL_RETRY);
        self.health.failed(&self.dir, what, e);
    }

    /// Hands a delta to the state writer. It follows the events delivered before it,
    /// so a generation never covers an event that was not delivered.
    pub fn save(&mut self, delta: Box<Delta>) {
        self.seq += 1;
        if let Some((tx, _)) = &self.saver {
            let _ = tx.send((self.seq, delta));
        }
    }

    /// Numbers a delta that must wait (the event stream is blocked, and the saved state
    /// must not run ahead of it), and counts it as received, so that the core, which
    /// waits for the writer to take its deltas, goes on. Deltas held together are merged
    /// and handed over with [`Persist::save_held`] under the newest number.
    pub fn hold(&mut self) -> u64 {
        self.seq += 1;
        self.progress.received.fetch_max(self.seq, Ordering::AcqRel);
        self.seq
    }

    /// Hands over a delta numbered by [`Persist::hold`].
    pub fn save_held(&mut self, seq: u64, delta: Box<Delta>) {
        if let Some((tx, _)) = &self.saver {
            let _ = tx.send((seq, delta));
        }
    }

    /// Moves on to a new journal when this one is full, and deletes full ones that both
    /// generations on disk cover (the next delta covers what was delivered before it).
    pub fn tidy(&mut self) {
        self.rotate_journal();
        let covered = self.progress.covered.load(Ordering::Acquire);
        self.closed.retain(|&(n, seq)| {
            if seq > covered {
                return true;
            }
            let _ = fs::remove_file(self.dir.join(journal::name(n)));
            false
        });
        self.clear_outage();
    }

    /// Opens the next journal when this one is full. If that fails (a read-only
    /// directory) the full one goes on: it can still be written, and rotating only
    /// serves to delete journals sooner.
    fn rotate_journal(&mut self) {
        if self
            .journal
            .as_ref()
            .is_none_or(|j| j.written < JOURNAL_ROTATE)
            || self.journal_retry.is_some_and(|t| Instant::now() < t)
        {
            return;
        }
        match Journal::open(&self.dir, self.next_journal) {
            Ok(next) => {
                self.next_journal += 1;
                if let Some(j) = self.journal.replace(next) {
                    self.closed.push((j.number, self.seq + 1));
                }
            }
            Err(e) => {
                tracing::debug!(dir = %self.dir.display(), error = %e, "Cannot open the next journal; the full one goes on.");
                self.journal_retry = Some(Instant::now() + JOURNAL_RETRY);
            }
        }
    }

    /// Stops the state writer after it wrote what it was given.
    pub fn finish(&mut self) {
        if let Some((tx, handle)) = self.saver.take() {
            drop(tx);
            if handle.join().is_err() {
                tracing::error!("The state writer panicked.");
            }
        }
        self.clear_outage();
    }
}

impl Drop for Persist {
    fn drop(&mut self) {
        self.finish();
    }
}
