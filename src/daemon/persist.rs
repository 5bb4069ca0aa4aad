//! Durable state, the core's side: what the last run left (checkpoints, decided ids)
//! taken back at start, and after each batch a delta of what changed for the state
//! writer.
//!
//! Owns: the ids decided by earlier runs (never emitted again), the count of deltas in
//! flight, the building of checkpoints and deltas, and taking a file back from its
//! checkpoint at a restart (read on from it when the file was only appended to). The set of what changed since
//! the last delta ([`Pending`]) is filled by the file table as it reads, and drained
//! here. It never reads a transcript, never writes a state file (the state writer
//! thread does, behind the events the delta follows) and never emits an event.
//!
//! A delta queues behind the events already sent, so durable state never runs ahead of
//! the event stream.

use super::core::Outbox;
use super::files::{Files, Mode, Tracked};
use super::sink::Out;
use crate::clock::{Now, wall_now};
use crate::feed::FileFeed;
use crate::model::Event;
use crate::reduce::Reducer;
use crate::state::{self, Checkpoint, Decision, Delta, Loaded, Resume};
use crate::tail::{Stat, TailState};
use std::collections::{HashMap, HashSet};
use std::fs;
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
    pub fn mark(&mut self, path: &Path) {
        if !self.dirty.contains(path) {
            self.dirty.insert(path.to_path_buf());
        }
    }

    /// Keeps the ids `reducer` decided that the ledger should hold.
    pub fn record_decided(&mut self, reducer: &mut Reducer, catch_up: i64) {
        let now = wall_now();
        for d in reducer.take_decided() {
            if state::ledger::worth_keeping(d.record_ts, now, catch_up) {
                self.decided
                    .push(Decision::new(&d.session, d.id, d.record_ts));
            }
        }
    }
}

/// What the last run left, taken apart for the file table and the loop.
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
            let mut ids: HashSet<String> = ledger.ids().map(str::to_owned).collect();
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
    pub fn save(&mut self, files: &mut Files, outbox: &mut Outbox, now: Now) {
        files.record_decided();
        let pending = &mut files.pending;
        if pending.dirty.is_empty() && pending.removed.is_empty() && pending.decided.is_empty() {
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
                .filter_map(|p| {
                    files
                        .table
                        .get(p)
                        .map(|t| checkpoint(p, t, &files.reducer, now))
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
        (None, Some(c)) => Some(c.to_string()),
        (None, None) => None,
    };
    Checkpoint {
        path: path_s.clone().into_owned(),
        dev: t.tail.id().dev,
        ino: t.tail.id().ino,
        offset: t.tail.offset(),
        line: t.tail.line_no(),
        marker: t.tail.marker(),
        resume: projector.map(|projector| Resume {
            provider: t.provider,
            projector,
            sessions: reducer.save_path(&path_s, now),
        }),
    }
}

/// Taking a file back from its checkpoint, at a restart.
impl Files {
    /// A file present at a restart. Known and only appended to since its checkpoint:
    /// silent up to the checkpoint, live after it. Rewritten while we were down, or
    /// new since the last run: live from its first byte. Live means within the
    /// catch-up window and not already in the ledger.
    pub(super) fn read_resumed(
        &mut self,
        path: &Path,
        meta: &fs::Metadata,
        cp: Option<Checkpoint>,
    ) {
        let now = self.clock.now();
        let mut live_before = now.wall.saturating_sub(self.catch_up());
        let appended = cp.filter(|cp| {
            let stat = Stat::of(meta);
            let id = crate::tail::FileId {
                dev: cp.dev,
                ino: cp.ino,
            };
            stat.id == id
                && stat.size >= cp.offset
                && TailState::resumed(id, cp.offset, cp.line, cp.marker)
                    .marker_matches(path)
                    .unwrap_or(false)
        });
        let start = match appended {
            Some(cp) if self.resume_at(path, &cp, now) => {
                self.counters.resumed += 1;
                cp.offset
            }
            Some(cp) => {
                // No reading context saved (an older state file): re-read up to the
                // checkpoint, silently.
                self.counters.reread += 1;
                let keep = self.out.len();
                self.reducer.set_history_before(Some(i64::MAX));
                self.read_upto(path, Mode::History, Some(cp.offset));
                self.out.truncate(keep);
                0
            }
            None => {
                // Records from before the first run began stay history, even in a file
                // with no checkpoint (a first run that crashed before saving it).
                live_before = live_before.max(self.since);
                self.counters.reread += 1;
                tracing::debug!(path = %path.display(), "Changed or new while baton was down: read from its start.");
                0
            }
        };
        self.reducer.set_history_before(Some(live_before));
        self.read_upto(path, Mode::History, None);
        self.reducer.set_history_before(Some(i64::MAX));
        if let Some(t) = self.table.get(path) {
            self.counters.history_bytes += t.tail.offset().saturating_sub(start);
        }
    }

    /// Continues `path` from its checkpoint with the saved projector context and
    /// sessions; false if they cannot be taken back.
    fn resume_at(&mut self, path: &Path, cp: &Checkpoint, now: Now) -> bool {
        let Some(t) = self.table.get_mut(path) else {
            return false;
        };
        let Some(r) = cp.resume.as_ref().filter(|r| r.provider == t.provider) else {
            return false;
        };
        let at = (cp.offset, cp.line);
        let Some(feed) =
            FileFeed::restore(path, t.provider, self.limits.max_line, at, &r.projector)
        else {
            return false;
        };
        let id = t.tail.id();
        t.tail = TailState::resumed(id, cp.offset, cp.line, cp.marker);
        self.reducer
            .restore_path(&feed.path, r.sessions.clone(), now);
        t.feed = Some(Box::new(feed));
        t.cold = None;
        true
    }
}
