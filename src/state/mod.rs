//! Durable state: what lets a restarted daemon alert every turn exactly once.
//!
//! The state directory holds
//! - `state.json` and `state.json.prev`: the current and previous generation of the
//!   checkpoints (per file: identity, committed offset, line, marker) and the ledger of
//!   decided event ids ([`store`], [`ledger`]);
//! - `journal-N.jsonl`: events recorded as pending before delivery and done after, since
//!   generation N ([`journal`]);
//! - `lock`: held exclusively by the running daemon ([`lock`]).
//!
//! The core thread builds snapshots; the event sink task owns the directory and writes
//! everything in order (a snapshot is written only after the events produced before it
//! were delivered, so a checkpoint never runs ahead of an undelivered event).

pub mod journal;
pub mod ledger;
pub mod lock;
pub mod store;

pub use ledger::Ledger;
pub use store::{Checkpoint, Snapshot};

use crate::clock::{format_rfc3339, wall_now};
use crate::error::Error;
use crate::model::{Event, EventKind};
use journal::Journal;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Failures to persist are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// `$XDG_STATE_HOME/baton`, else `~/.local/state/baton`.
pub fn default_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty());
    if let Some(x) = xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(x.join("baton"));
    }
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty())?;
    Some(PathBuf::from(home).join(".local/state/baton"))
}

/// What was found in the state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Nothing there: history is silent.
    FirstRun,
    Restored,
    /// The current generation was unusable; the previous one was.
    FellBack(String),
    /// State existed but no generation was usable: first-run baseline, plus a
    /// `state_lost` anomaly.
    Lost(String),
}

pub struct Loaded {
    pub status: Status,
    pub snapshot: Option<Snapshot>,
    /// Pending events never marked done, and every journaled id.
    pub journal: journal::Replay,
}

/// An anomaly about the daemon's own state (not about a transcript).
pub fn anomaly(reason: &str, message: String, salt: &str) -> Event {
    let now = wall_now();
    let id = crate::provider::content_hash(&[
        b"state",
        reason.as_bytes(),
        salt.as_bytes(),
        &now.to_le_bytes(),
    ]);
    let mut ev = Event::lifecycle(EventKind::Anomaly, format_rfc3339(now), id);
    ev.reason = Some(reason.to_owned());
    ev.message = Some(message);
    ev
}

/// Opens the state directory: creates it (0700), locks it, checks its files and loads
/// the newest usable generation with its journals.
pub fn open(dir: &Path) -> Result<(Persist, Loaded), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            Error::State(format!(
                "cannot create the state directory {}: {e}",
                dir.display()
            ))
        })?;
    if !fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Err(Error::State(format!(
            "the state directory {} is not a directory",
            dir.display()
        )));
    }
    let lock = lock::lock(dir)?;
    for name in [store::CURRENT, store::PREVIOUS, store::TMP] {
        lock::check_owned(&dir.join(name))?;
    }
    let journals = journal::list(dir).map_err(|e| {
        Error::State(format!(
            "cannot list the state directory {}: {e}",
            dir.display()
        ))
    })?;
    for (_, p) in &journals {
        lock::check_owned(p)?;
    }
    let (status, snapshot) = load(dir, !journals.is_empty());
    let mut max_gen = journals.last().map_or(0, |j| j.0);
    let replay = match &snapshot {
        Some(s) => {
            max_gen = max_gen.max(s.generation);
            let since: Vec<PathBuf> = journals
                .iter()
                .filter(|(g, _)| *g >= s.generation)
                .map(|(_, p)| p.clone())
                .collect();
            journal::read(&since)
        }
        None => {
            // No generation to apply them to: a first-run baseline starts afresh.
            for (_, p) in &journals {
                let _ = fs::remove_file(p);
            }
            journal::Replay::default()
        }
    };
    let journal = Journal::open(dir, max_gen)
        .map_err(|e| Error::State(format!("cannot open the journal in {}: {e}", dir.display())))?;
    let persist = Persist {
        dir: dir.to_path_buf(),
        _lock: lock,
        journal: Some(journal),
        next_gen: max_gen + 1,
        unsaved: None,
        failing: false,
        logged_at: None,
    };
    Ok((
        persist,
        Loaded {
            status,
            snapshot,
            journal: replay,
        },
    ))
}

fn load(dir: &Path, journals: bool) -> (Status, Option<Snapshot>) {
    let current = store::read(dir, store::CURRENT);
    let fallback = |why: String| match store::read(dir, store::PREVIOUS) {
        Ok(Some(s)) => (Status::FellBack(why), Some(s)),
        Ok(None) => (Status::Lost(format!("{why}; no previous generation")), None),
        Err(e) => (
            Status::Lost(format!("{why}; previous generation: {e}")),
            None,
        ),
    };
    match current {
        Ok(Some(s)) => (Status::Restored, Some(s)),
        Err(e) => fallback(format!("{}: {e}", store::CURRENT)),
        Ok(None) => match store::read(dir, store::PREVIOUS) {
            // A crash between the two renames of a write: the previous one is whole.
            Ok(Some(s)) => (Status::Restored, Some(s)),
            Ok(None) if journals => (
                Status::Lost("state files missing but journals present".to_owned()),
                None,
            ),
            Ok(None) => (Status::FirstRun, None),
            Err(e) => (
                Status::Lost(format!("{} missing; previous: {e}", store::CURRENT)),
                None,
            ),
        },
    }
}

/// The writer of the state directory (owned by the event sink task).
pub struct Persist {
    dir: PathBuf,
    _lock: File,
    /// `None` after a write to it failed; reopened with the next generation.
    journal: Option<Journal>,
    next_gen: u64,
    /// A snapshot that could not be written yet.
    unsaved: Option<Snapshot>,
    failing: bool,
    logged_at: Option<Instant>,
}

impl Persist {
    /// Records transcript events as pending before delivery. Returns a
    /// `state_unwritable` anomaly to deliver if persistence just started failing.
    pub fn pending(&mut self, events: &[Event]) -> Option<Event> {
        let durable: Vec<&Event> = events.iter().filter(|e| journaled(e)).collect();
        if durable.is_empty() {
            return None;
        }
        let res = match self.journal.as_mut() {
            Some(j) => j.pending(&durable),
            None => Err(io::Error::other(
                "the journal is not open (an earlier write failed)",
            )),
        };
        self.check("record pending events", res)
    }

    /// Records that `ev` was delivered.
    pub fn done(&mut self, ev: &Event) -> Option<Event> {
        if !journaled(ev) {
            return None;
        }
        let res = match self.journal.as_mut() {
            Some(j) => j.done(&ev.id),
            None => Ok(()),
        };
        self.check("record a delivered event", res)
    }

    /// Writes `snap` as the next generation (or keeps it for [`Persist::retry`]).
    pub fn save(&mut self, snap: Snapshot) -> Option<Event> {
        self.unsaved = Some(snap);
        self.retry()
    }

    /// Whether a snapshot is waiting for the disk to come back.
    pub fn needs_retry(&self) -> bool {
        self.unsaved.is_some()
    }

    pub fn retry(&mut self) -> Option<Event> {
        let mut snap = self.unsaved.take()?;
        snap.generation = self.next_gen;
        snap.written_at = wall_now();
        let mut journal = None;
        let res = store::write(&self.dir, &snap, || {
            journal = Some(Journal::open(&self.dir, snap.generation)?);
            Ok(())
        });
        match res {
            Ok(()) => {
                self.next_gen += 1;
                self.journal = journal;
                // Journals older than the previous generation are no longer needed.
                if let Ok(list) = journal::list(&self.dir) {
                    for (g, p) in list {
                        if g + 1 < snap.generation {
                            let _ = fs::remove_file(p);
                        }
                    }
                }
                if self.failing {
                    self.failing = false;
                    tracing::warn!(dir = %self.dir.display(), "State saved again.");
                }
                None
            }
            Err(e) => {
                self.unsaved = Some(snap);
                self.check("save the state", Err(e))
            }
        }
    }

    fn check(&mut self, what: &str, res: io::Result<()>) -> Option<Event> {
        let e = res.err()?;
        let now = Instant::now();
        if self
            .logged_at
            .is_none_or(|t| now.duration_since(t) >= LOG_EVERY)
        {
            self.logged_at = Some(now);
            tracing::warn!(dir = %self.dir.display(), error = %e, "Cannot {what}; still delivering events, retrying.");
        } else {
            tracing::debug!(dir = %self.dir.display(), error = %e, "Cannot {what}.");
        }
        if self.failing {
            return None;
        }
        self.failing = true;
        Some(anomaly(
            "state_unwritable",
            format!(
                "cannot write the state directory {}: {e}; events are still delivered, but a \
                 restart may re-alert or miss turns until it is writable again",
                self.dir.display()
            ),
            &self.dir.to_string_lossy(),
        ))
    }
}

/// Transcript events go through the journal; the daemon's own events do not.
fn journaled(ev: &Event) -> bool {
    ev.provider.is_some()
}
