//! The state writer: a thread that owns the checkpoints and the ledger, takes changes
//! as small deltas (in delivery order) and writes a new generation at most every
//! [`SAVE_EVERY`]. Two fsyncs per generation, so never on the path from a turn's end to
//! its alert.

use super::ledger::Ledger;
use super::store::{self, Checkpoint};
use super::{Decision, Health};
use crate::clock::wall_now;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// At most this often a generation is written (the issue asks for a few per second).
pub const SAVE_EVERY: Duration = Duration::from_millis(250);
/// After a failed write, the next try comes this much later.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// What changed since the last delta, in the order the core saw it.
#[derive(Debug, Default)]
pub struct Delta {
    /// Every tracked file is in `files`; checkpoints not in it are dropped.
    pub full: bool,
    pub files: Vec<Checkpoint>,
    /// Paths no longer tracked.
    pub removed: Vec<String>,
    pub decided: Vec<Decision>,
}

/// A delta with its sequence number, on its way to the writer.
pub type Msg = (u64, Box<Delta>);

/// What the writer tells the delivery side.
#[derive(Debug, Default)]
pub struct Progress {
    /// Every delta up to this sequence number is in both generations on disk.
    pub covered: AtomicU64,
}

pub struct Saver {
    pub dir: PathBuf,
    pub files: HashMap<String, Checkpoint>,
    pub ledger: Ledger,
    pub catch_up: i64,
    pub next_gen: u64,
    pub health: Arc<Health>,
    pub progress: Arc<Progress>,
}

impl Saver {
    /// Runs until the sender is dropped, then writes what is left.
    pub fn run(mut self, rx: &Receiver<Msg>) {
        // Sequence numbers of the deltas in the newest generation on disk and the one
        // before it.
        let (mut current, mut applied) = (0u64, 0u64);
        let mut dirty = false;
        let mut due = Instant::now();
        loop {
            let msg = if dirty {
                rx.recv_timeout(due.saturating_duration_since(Instant::now()))
            } else {
                rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
            };
            let closed = match msg {
                Ok((seq, d)) => {
                    self.apply(*d);
                    applied = seq;
                    while let Ok((seq, d)) = rx.try_recv() {
                        self.apply(*d);
                        applied = seq;
                    }
                    dirty = true;
                    false
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            if dirty && (closed || Instant::now() >= due) {
                if self.write() {
                    self.progress.covered.store(current, Ordering::Release);
                    current = applied;
                    dirty = false;
                    due = Instant::now() + SAVE_EVERY;
                } else {
                    due = Instant::now() + RETRY_EVERY;
                }
            }
            if closed {
                return;
            }
        }
    }

    fn apply(&mut self, d: Delta) {
        if d.full {
            self.files.clear();
        }
        for path in d.removed {
            self.files.remove(&path);
        }
        for cp in d.files {
            self.files.insert(cp.path.clone(), cp);
        }
        let now = wall_now();
        for x in d.decided {
            self.ledger
                .record(&x.session, x.id, x.record_ts, now, self.catch_up);
        }
    }

    /// Writes the next generation; false if it could not.
    fn write(&mut self) -> bool {
        let now = wall_now();
        self.ledger.prune(now);
        let mut files: Vec<&Checkpoint> = self.files.values().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let bytes = store::encode_parts(self.next_gen, now, files.into_iter(), &self.ledger);
        match store::write(&self.dir, &bytes, || Ok(())) {
            Ok(()) => {
                self.next_gen += 1;
                self.health.recovered(&self.dir);
                true
            }
            Err(e) => {
                self.health.failed(&self.dir, "save the state", &e);
                false
            }
        }
    }
}
