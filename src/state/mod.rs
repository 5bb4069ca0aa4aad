//! Durable state: what lets a restarted daemon alert every turn exactly once.
//!
//! The state directory holds
//! - `state.json` and `state.json.prev`: the current and previous generation of the
//!   checkpoints (per file: identity, committed offset, line, marker, and the reading
//!   context there: projector and sessions) and the ledger of decided event ids
//!   ([`store`], [`ledger`]);
//! - `journal-N.jsonl`: events recorded as pending before delivery and done after
//!   ([`journal`]);
//! - `lock`: held exclusively by the running daemon ([`lock`]).
//!
//! The core thread sends deltas (the checkpoints it changed, the ids it decided) behind
//! the events they cover. The delivery task journals and delivers events and passes
//! each delta on only after the events before it were delivered, so a checkpoint never
//! runs ahead of an undelivered event; the state writer thread ([`saver`]) applies
//! deltas and writes generations, off the delivery path.

pub mod journal;
pub mod ledger;
pub mod lock;
pub mod saver;
pub mod store;

pub use ledger::Ledger;
pub use saver::Delta;
pub use store::{Checkpoint, Resume};

use crate::clock::{format_rfc3339, wall_now};
use crate::error::Error;
use crate::model::{Event, EventKind};
use journal::Journal;
use saver::{Progress, Saver};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
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
    /// The newest usable base with the later logs applied.
    pub base: Option<store::Base>,
    /// How far the state writer got with the deltas.
    pub progress: Arc<Progress>,
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
pub fn open(dir: &Path, catch_up_ms: u64) -> Result<(Persist, Loaded), Error> {
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
    let listed = |list: io::Result<Vec<(u64, PathBuf)>>| -> Result<_, Error> {
        let list = list.map_err(|e| {
            Error::State(format!(
                "cannot list the state directory {}: {e}",
                dir.display()
            ))
        })?;
        for (_, p) in &list {
            lock::check_owned(p)?;
        }
        Ok(list)
    };
    let journals = listed(journal::list(dir))?;
    let logs = listed(store::list_logs(dir))?;
    let (status, base) = load(dir, !journals.is_empty() || !logs.is_empty());
    let (journals, replay) = match &base {
        Some(_) => {
            let paths: Vec<PathBuf> = journals.iter().map(|(_, p)| p.clone()).collect();
            let replay = journal::read(&paths);
            (journals, replay)
        }
        None => {
            // No generation to apply them to: a first-run baseline starts afresh.
            for (_, p) in journals.iter().chain(&logs) {
                let _ = fs::remove_file(p);
            }
            (Vec::new(), journal::Replay::default())
        }
    };
    let now = wall_now();
    // A first run (or one after the state was lost) writes an empty base at once, so a
    // start after a crash of this run knows where its history ended even if no other
    // state was saved yet.
    let mut first_gen = 1;
    let since = match &base {
        Some(b) => b.meta.since,
        None => {
            if let Err(e) = write_empty_base(dir, now) {
                tracing::warn!(dir = %dir.display(), error = %e, "Cannot write the first state generation.");
            } else {
                first_gen = 2;
            }
            now
        }
    };
    let base_log = base.as_ref().map_or(0, |b| b.meta.log);
    let health = Arc::new(Health::default());
    let progress = Arc::new(Progress::default());
    let catch_up = i64::try_from(catch_up_ms).unwrap_or(i64::MAX);
    let mut ledger = base.as_ref().map(|b| b.ledger.clone()).unwrap_or_default();
    for d in base.iter().flat_map(|b| &b.decided) {
        ledger.record(&d.session, d.id.clone(), d.record_ts, now, catch_up);
    }
    let saver = Saver {
        dir: dir.to_path_buf(),
        ledger,
        catch_up,
        next_gen: base.as_ref().map_or(first_gen, |b| b.meta.generation + 1),
        since,
        base_log,
        prev_log: base_log,
        next_log: logs.last().map_or(1, |l| l.0 + 1).max(base_log + 1),
        // Unknown until the first merge: merging then is due soon anyway.
        base_bytes: 0,
        health: Arc::clone(&health),
        progress: Arc::clone(&progress),
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let handle = std::thread::Builder::new()
        .name("baton-state".to_owned())
        .spawn(move || saver.run(&rx))
        .map_err(|e| Error::State(format!("cannot start the state writer: {e}")))?;
    let next_journal = journals.last().map_or(1, |j| j.0 + 1);
    let shared = Arc::clone(&progress);
    let persist = Persist {
        dir: dir.to_path_buf(),
        _lock: lock,
        journal: None,
        next_journal,
        // The last run's journals go once this run's first state is written twice.
        closed: journals.iter().map(|(n, _)| (*n, 1)).collect(),
        seq: 0,
        saver: Some((tx, handle)),
        progress,
        health,
    };
    Ok((
        persist,
        Loaded {
            status,
            base,
            journal: replay,
            progress: shared,
        },
    ))
}

fn write_empty_base(dir: &Path, now: i64) -> io::Result<u64> {
    let mut w = store::BaseWriter::create(dir)?;
    let meta = store::Meta {
        generation: 1,
        written_at: now,
        log: 0,
        since: now,
    };
    w.line(&store::Line::Meta(meta).encode())?;
    w.line(&store::Line::Ledger(Ledger::default()).encode())?;
    w.finish(dir)
}

fn load(dir: &Path, journals: bool) -> (Status, Option<store::Base>) {
    let (status, base) = load_base(dir, journals);
    let Some(mut base) = base else {
        return (status, None);
    };
    match store::apply_logs(dir, &mut base) {
        Ok(()) => (status, Some(base)),
        Err(e) => (
            Status::Lost(format!("cannot read the state logs: {e}")),
            None,
        ),
    }
}

fn load_base(dir: &Path, journals: bool) -> (Status, Option<store::Base>) {
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
                Status::Lost("state files missing but journals or logs present".to_owned()),
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

/// An event id the reducer decided, for the ledger.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// `provider/session/agent`.
    pub session: String,
    pub id: String,
    pub record_ts: Option<i64>,
}

impl Decision {
    pub fn new(key: &crate::model::SessionKey, id: String, record_ts: Option<i64>) -> Self {
        Decision {
            session: format!(
                "{}/{}/{}",
                key.provider,
                key.session,
                key.agent.as_deref().unwrap_or_default()
            ),
            id,
            record_ts,
        }
    }

    /// A journaled event's decision.
    pub fn of(ev: &Event) -> Self {
        let key = crate::model::SessionKey {
            provider: ev.provider.unwrap_or(crate::model::ProviderKind::Claude),
            session: ev.session.clone().unwrap_or_default(),
            agent: ev.agent.clone(),
        };
        let ts = ev
            .record_ts
            .as_deref()
            .and_then(crate::clock::parse_rfc3339);
        Decision::new(&key, ev.id.clone(), ts)
    }
}

/// Whether the state directory can be written, shared by the journal writer and the
/// state writer: one `state_unwritable` anomaly per spell of trouble, and a warning at
/// most every [`LOG_EVERY`].
#[derive(Default)]
pub struct Health {
    failing: AtomicBool,
    logged_at: Mutex<Option<Instant>>,
    anomaly: Mutex<Option<Event>>,
    /// Wakes the delivery task when an anomaly is waiting.
    pub wake: tokio::sync::Notify,
}

impl Health {
    pub fn failed(&self, dir: &Path, what: &str, e: &io::Error) {
        let now = Instant::now();
        {
            let mut at = self
                .logged_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if at.is_none_or(|t| now.duration_since(t) >= LOG_EVERY) {
                *at = Some(now);
                tracing::warn!(dir = %dir.display(), error = %e, "Cannot {what}; still delivering events, retrying.");
            } else {
                tracing::debug!(dir = %dir.display(), error = %e, "Cannot {what}.");
            }
        }
        if self.failing.swap(true, Ordering::AcqRel) {
            return;
        }
        let ev = anomaly(
            "state_unwritable",
            format!(
                "cannot write the state directory {}: {e}; events are still delivered, but a \
                 restart may re-alert or miss turns until it is writable again",
                dir.display()
            ),
            &dir.to_string_lossy(),
        );
        *self.anomaly.lock().unwrap_or_else(PoisonError::into_inner) = Some(ev);
        self.wake.notify_one();
    }

    pub fn recovered(&self, dir: &Path) {
        if self.failing.swap(false, Ordering::AcqRel) {
            tracing::warn!(dir = %dir.display(), "State saved again.");
        }
    }

    /// A `state_unwritable` anomaly to deliver, once.
    pub fn take_anomaly(&self) -> Option<Event> {
        self.anomaly
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// A journal is left for the next one past this size.
const JOURNAL_ROTATE: u64 = 1 << 20;

/// The state directory seen from the delivery task: it journals events around their
/// delivery and hands the core's deltas to the state writer thread.
pub struct Persist {
    dir: PathBuf,
    _lock: File,
    /// `None` after a write to it failed; the next one is opened on the next write.
    journal: Option<Journal>,
    next_journal: u64,
    /// Full journals, each with the delta sequence number that covers it.
    closed: Vec<(u64, u64)>,
    /// Deltas handed to the writer so far.
    seq: u64,
    saver: Option<(crossbeam_channel::Sender<saver::Msg>, JoinHandle<()>)>,
    progress: Arc<Progress>,
    pub health: Arc<Health>,
}

impl Persist {
    /// Records transcript events as pending before delivery.
    pub fn pending(&mut self, events: &[Event]) {
        let durable: Vec<&Event> = events.iter().filter(|e| journaled(e)).collect();
        if durable.is_empty() {
            return;
        }
        let res = self.journal().and_then(|j| j.pending(&durable));
        self.check("record pending events", res);
    }

    /// Records that `ev` was delivered.
    pub fn done(&mut self, ev: &Event) {
        if !journaled(ev) {
            return;
        }
        if let Some(j) = self.journal.as_mut() {
            let res = j.done(&ev.id);
            self.check("record a delivered event", res);
        }
    }

    fn journal(&mut self) -> io::Result<&mut Journal> {
        if self.journal.is_none() {
            let j = Journal::open(&self.dir, self.next_journal)?;
            self.next_journal += 1;
            self.journal = Some(j);
        }
        self.journal
            .as_mut()
            .ok_or_else(|| io::Error::other("no journal"))
    }

    fn check(&mut self, what: &str, res: io::Result<()>) {
        if let Err(e) = res {
            if let Some(j) = self.journal.take() {
                self.closed.push((j.number, self.seq + 1));
            }
            self.health.failed(&self.dir, what, &e);
        }
    }

    /// Hands a delta to the state writer. It follows the events delivered before it,
    /// so a generation never covers an event that was not delivered.
    pub fn save(&mut self, delta: Box<Delta>) {
        self.seq += 1;
        if let Some((tx, _)) = &self.saver {
            let _ = tx.send((self.seq, delta));
        }
    }

    /// Moves on to a new journal when this one is full, and deletes full ones that both
    /// generations on disk cover (the next delta covers what was delivered before it).
    pub fn tidy(&mut self) {
        if self
            .journal
            .as_ref()
            .is_some_and(|j| j.written >= JOURNAL_ROTATE)
            && let Some(j) = self.journal.take()
        {
            self.closed.push((j.number, self.seq + 1));
        }
        let covered = self.progress.covered.load(Ordering::Acquire);
        self.closed.retain(|&(n, seq)| {
            if seq > covered {
                return true;
            }
            let _ = fs::remove_file(self.dir.join(journal::name(n)));
            false
        });
    }

    /// Stops the state writer after it wrote what it was given.
    pub fn finish(&mut self) {
        if let Some((tx, handle)) = self.saver.take() {
            drop(tx);
            if handle.join().is_err() {
                tracing::error!("The state writer panicked.");
            }
        }
    }
}

impl Drop for Persist {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Opens one of our append-only files (0600, created if missing), refusing one that is
/// a symlink or not ours.
fn open_append(path: &Path) -> io::Result<File> {
    lock::check_owned(path).map_err(io::Error::other)?;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// Files named `<prefix><N><suffix>` in `dir`, by number.
pub fn numbered(dir: &Path, prefix: &str, suffix: &str) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        // A directory by that name is no journal or log (a symlink still is listed, to
        // be refused).
        if entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.strip_suffix(suffix))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((n, entry.path()));
    }
    out.sort();
    Ok(out)
}

/// Transcript events go through the journal; the daemon's own events do not.
fn journaled(ev: &Event) -> bool {
    ev.provider.is_some()
}
