//! Durable state, the core's side: what the last run left (checkpoints, decided ids)
//! taken back at start, and, a moment after a batch changed something, a delta of what
//! changed for the state writer.
//!
//! Owns: the ids decided by earlier runs (never emitted again), the count of deltas in
//! flight, and the building of checkpoints and deltas. The set of what changed since
//! the last delta ([`Pending`]) is filled by the core as it applies reads, and drained
//! here. It never reads a transcript (taking a file back from its checkpoint is the
//! file table's, in `resume.rs`), never writes a state file (the state writer thread
//! does, behind the events the delta follows) and never emits an event.
//!
//! A delta queues behind the events already sent, so durable state never runs ahead of
//! the event stream.

use super::files::Files;
use super::outbox::Out;
use super::outbox::Outbox;
use super::tracked::Tracked;
use crate::clock::{Now, wall_now};
use crate::model::Event;
use crate::reduce::Reducer;
use crate::state::{self, Checkpoint, Decision, Delta, Loaded, Resume};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Most checkpoints in one delta, so a save of every file never builds them all at once.
const SAVE_CHUNK: usize = 256;
/// At most this many deltas wait for the state writer beyond the one being sent.
const SAVES_IN_FLIGHT: u64 = 4;

/// What the next delta carries.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Files whose checkpoint or sessions changed since the last delta.
    pub dirty: HashSet<PathBuf>,
    /// Files no longer tracked since the last delta.
    pub removed: Vec<String>,
    /// Ids decided since the last delta, for the ledger.
    pub decided: Vec<Decision>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.dirty.is_empty() && self.removed.is_empty() && self.decided.is_empty()
    }

    pub fn mark(&mut self, path: &Path) {
        if !self.dirty.contains(path) {
            self.dirty.insert(path.to_path_buf());
        }
    }

    /// Keeps the ids `reducer` decided that the ledger should hold, and marks their
    /// files' checkpoints due: a decision absorbed as history (a `writer_gone` or quiet
    /// completion of an old turn) emits no event, yet the next run must start from it.
    pub fn record_decided(&mut self, reducer: &mut Reducer, catch_up: i64) {
        let now = wall_now();
        for d in reducer.take_decided() {
            self.mark(Path::new(&*d.path));
            if state::ledger::worth_keeping(d.record_ts, now, catch_up) {
                self.decided
                    .push(Decision::new(&d.session, d.id, d.record_ts));
            }
        }
    }
}

/// What the last run left, taken apart for the core.
pub(super) struct Restored {
    /// Raw `file` lines by path, parsed when their file is found; `None` on a first run
    /// (or after the state was lost): history is silent then.
    pub resume: Option<HashMap<PathBuf, Box<str>>>,
    /// Ids decided by an earlier run (ledger and journal).
    pub preloaded: HashSet<String>,
    /// What the journals recorded as decided, until a later state has it.
    pub decided: Vec<Decision>,
    /// When the first run began.
    pub since: i64,
}

/// Takes the loaded state apart; every id decided before is marked seen in `reducer`.
pub(super) fn restore(loaded: &mut Loaded, reducer: &mut Reducer, start: i64) -> Restored {
    let since = loaded.base.as_ref().map_or(0, |b| b.meta.since);
    let (resume, mut preloaded) = match loaded.base.take() {
        Some(base) => {
            let mut ledger = base.ledger;
            ledger.prune(start);
            let mut ids: HashSet<String> = ledger.ids().collect();
            ids.extend(base.decided.into_iter().map(|d| d.id));
            let files = base
                .files
                .into_iter()
                .map(|(p, line)| (PathBuf::from(p), line))
                .collect();
            (Some(files), ids)
        }
        None => (None, HashSet::new()),
    };
    preloaded.extend(std::mem::take(&mut loaded.journal.ids));
    for id in &preloaded {
        reducer.mark_seen(id);
    }
    Restored {
        resume,
        preloaded,
        decided: std::mem::take(&mut loaded.journal.decided),
        since,
    }
}

/// The core's side of durable state.
pub(super) struct Deltas {
    /// Ids decided by an earlier run (ledger and journal): never emitted again, even if
    /// the reducer's bounded seen-set forgot them.
    preloaded: HashSet<String>,
    /// Deltas sent, and how far the state writer got with them.
    sent: u64,
    progress: Arc<state::saver::Progress>,
}

impl Deltas {
    pub fn new(preloaded: HashSet<String>, progress: Arc<state::saver::Progress>) -> Self {
        Deltas {
            preloaded,
            sent: 0,
            progress,
        }
    }

    /// Drops events an earlier run already decided.
    pub fn drop_decided(&self, batch: &mut Vec<Event>) {
        if !self.preloaded.is_empty() {
            batch.retain(|e| !self.preloaded.contains(&e.id));
        }
    }

    /// Sends what changed since the last delta, in pieces of at most [`SAVE_CHUNK`]
    /// files (after the first run's history read that is every file). It queues behind
    /// the events already sent, so the state writer gets it only once they are
    /// delivered.
    pub fn save(
        &mut self,
        files: &Files,
        reducer: &Reducer,
        pending: &mut Pending,
        outbox: &mut Outbox,
        now: Now,
    ) {
        if pending.is_empty() {
            return;
        }
        let dirty: Vec<PathBuf> = pending.dirty.drain().collect();
        if pending.dirty.capacity() > 4096 {
            // After a first run's history read every file was dirty: give that room back.
            pending.dirty.shrink_to_fit();
        }
        let mut removed = std::mem::take(&mut pending.removed);
        let mut decided = std::mem::take(&mut pending.decided);
        let mut first = true;
        for chunk in dirty.chunks(SAVE_CHUNK) {
            let files = chunk
                .iter()
                .filter_map(|p| match files.tracked(p) {
                    Some(t) => Some(checkpoint(p, &t, reducer, now)),
                    None => files.rows.checkpoint(p, reducer, now),
                })
                .collect();
            let mut delta = Delta {
                files,
                ..Delta::default()
            };
            if std::mem::take(&mut first) {
                delta.removed = std::mem::take(&mut removed);
                delta.decided = std::mem::take(&mut decided);
            }
            self.send(delta, outbox);
        }
        if first {
            self.send(
                Delta {
                    removed,
                    decided,
                    ..Delta::default()
                },
                outbox,
            );
        }
    }

    /// Sends a delta once fewer than [`SAVES_IN_FLIGHT`] are on their way to the state
    /// writer: after a first run's history read the deltas hold every file, and queued
    /// all at once they would all be in memory at once.
    fn send(&mut self, delta: Delta, outbox: &mut Outbox) {
        let waited = Instant::now();
        while !outbox.gone
            && self.sent > self.progress.received.load(Ordering::Acquire) + SAVES_IN_FLIGHT
            && waited.elapsed() < Duration::from_secs(10)
        {
            outbox.beat();
            std::thread::sleep(Duration::from_millis(1));
        }
        self.sent += 1;
        outbox.send(Out::Save(Box::new(delta)));
    }
}

/// A file's checkpoint with its reading context, as of `now`.
fn checkpoint(path: &Path, t: &Tracked, reducer: &Reducer, now: Now) -> Checkpoint {
    let path_s = path.to_string_lossy();
    let projector = match (&t.feed, &t.cold) {
        (Some(f), _) => Some(f.save()),
        (None, Some(c)) => c.text(),
        (None, None) => None,
    };
    Checkpoint {
        path: path_s.clone().into_owned(),
        dev: t.tail.id().dev,
        ino: t.tail.id().ino,
        offset: t.tail.offset(),
        line: t.tail.line_no(),
        marker: t.tail.marker(),
        // No sessions to save (parked ones that cannot be read back): no resume, so a
        // restart re-reads the file up to the checkpoint instead.
        resume: projector.and_then(|projector| {
            Some(Resume {
                provider: t.provider,
                projector,
                sessions: reducer.save_path(&path_s, now)?,
            })
        }),
    }
}
