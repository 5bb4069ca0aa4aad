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
    let mark = lock::read_mark(&lock);
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
    let leftovers = if !journals.is_empty() || !logs.is_empty() {
        Some("state files missing but journals or logs present")
    } else if mark.had_state {
        Some("every state file but the lock is gone")
    } else {
        None
    };
    let (status, base, base_name) = load(dir, leftovers);
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
                store::discard_tmp(dir);
                tracing::warn!(dir = %dir.display(), error = %e, "Cannot write the first state generation.");
            } else {
                first_gen = 2;
            }
            now
        }
    };
    // From now on, a state directory without a generation has lost its state. Written
    // at once, so the lock file has its bytes before any trouble with space.
    let mark = lock::Mark {
        had_state: mark.had_state || first_gen == 2 || base.is_some(),
        ..mark
    };
    if let Err(e) = lock::write_mark(&lock, mark) {
        tracing::warn!(dir = %dir.display(), error = %e, "Cannot write the lock file.");
    }
    // Events of the last run may have gone out unjournaled: those derived again now are
    // flagged until this run's state covers them.
    let suspect = mark.outage_since.map(|since| {
        tracing::warn!(since = %format_rfc3339(since), "The last run delivered events it could not journal; events derived again at this start are flagged replay.");
        Suspect::new(now)
    });
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
        base_name,
        behind: false,
        dropped_previous: false,
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
        lock,
        mark,
        // The state this run saves first covers what it derives again.
        clear_at: u64::from(mark.outage_since.is_some()),
        suspect,
        journal: None,
        journal_retry: None,
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
    w.finish(dir, false)
}

/// The newest usable base with its logs applied, and the file it was read from.
/// `leftovers`: why finding no generation at all is not a first run.
fn load(dir: &Path, leftovers: Option<&str>) -> (Status, Option<store::Base>, &'static str) {
    let (status, base, name) = load_base(dir, leftovers);
    let Some(mut base) = base else {
        return (status, None, store::CURRENT);
    };
    match store::apply_logs(dir, &mut base) {
        Ok(()) => (status, Some(base), name),
        Err(e) => (
            Status::Lost(format!("cannot read the state logs: {e}")),
            None,
            store::CURRENT,
        ),
    }
}

fn load_base(dir: &Path, leftovers: Option<&str>) -> (Status, Option<store::Base>, &'static str) {
    let current = store::read(dir, store::CURRENT);
    let prev = store::PREVIOUS;
    let fallback = |why: String| match store::read(dir, prev) {
        Ok(Some(s)) => (Status::FellBack(why), Some(s), prev),
        Ok(None) => (
            Status::Lost(format!("{why}; no previous generation")),
            None,
            prev,
        ),
        Err(e) => (
            Status::Lost(format!("{why}; previous generation: {e}")),
            None,
            prev,
        ),
    };
    match current {
        Ok(Some(s)) => (Status::Restored, Some(s), store::CURRENT),
        Err(e) => fallback(format!("{}: {e}", store::CURRENT)),
        Ok(None) => match store::read(dir, prev) {
            // A crash between the two renames of a write: the previous one is whole.
            Ok(Some(s)) => (Status::Restored, Some(s), prev),
            Ok(None) => match leftovers {
                Some(why) => (Status::Lost(why.to_owned()), None, prev),
                None => (Status::FirstRun, None, prev),
            },
            Err(e) => (
                Status::Lost(format!("{} missing; previous: {e}", store::CURRENT)),
                None,
                prev,
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
/// After opening or writing a journal failed, opening one is tried again no sooner than
/// this (not once per batch: each try can leave a file behind).
const JOURNAL_RETRY: Duration = Duration::from_secs(1);

/// The state directory seen from the delivery task: it journals events around their
/// delivery and hands the core's deltas to the state writer thread.
pub struct Persist {
    dir: PathBuf,
    /// Held for the lock, and where the [`lock::Mark`] is kept.
    lock: File,
    mark: lock::Mark,
    /// The mark's outage is cleared once every delta up to this one is on disk: the
    /// first one sent after the last event that went out unjournaled.
    clear_at: u64,
    /// Flags what this run derives again after the last run's outage; the sink takes it.
    suspect: Option<Suspect>,
    /// `None` after a write to it failed; the next one is opened on the next write.
    journal: Option<Journal>,
    /// No journal is opened before this, after a failure.
    journal_retry: Option<Instant>,
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
    /// Records transcript events as pending before delivery. When that fails they go
    /// out all the same, but first the lock file says so, so that a restart flags
    /// whatever it derives again as `replay` rather than pass it for new.
    pub fn pending(&mut self, events: &[Event]) {
        let durable: Vec<&Event> = events.iter().filter(|e| journaled(e)).collect();
        if durable.is_empty() {
            return;
        }
        let res = match self.journal() {
            Some(Ok(j)) => j.pending(&durable),
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

    /// Events are about to go out with no journal record: mark the outage (once) in
    /// the lock file, which is open for writing whatever became of the directory.
    fn unjournaled(&mut self) {
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
    fn clear_outage(&mut self) {
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
    fn new(started: i64) -> Suspect {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProviderKind;

    fn turn_event(id: &str, record_ts: Option<&str>) -> Event {
        let mut e = Event::lifecycle(EventKind::TurnCompleted, "t".to_owned(), id.to_owned());
        e.provider = Some(ProviderKind::Claude);
        e.record_ts = record_ts.map(str::to_owned);
        e
    }

    /// Events that go out unjournaled mark the lock file before they go; the next start
    /// finds the mark and flags what it derives again; once the state covers them the
    /// mark is gone.
    #[test]
    fn an_unjournaled_delivery_marks_the_lock_until_the_state_covers_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        {
            let (mut p, _) = open(dir, 600_000).unwrap();
            // The journal cannot be created (even as root): its name is a directory.
            fs::create_dir(dir.join(journal::name(1))).unwrap();
            assert_eq!(p.mark.outage_since, None);
            p.pending(&[turn_event("a", None)]);
            let on_disk = lock::read_mark(&File::open(dir.join(lock::LOCK)).unwrap());
            assert!(on_disk.outage_since.is_some(), "marked before delivery");
            assert!(on_disk.had_state);
            // Killed here: no delta ever covers the event.
            p.saver = None;
        }
        fs::remove_dir(dir.join(journal::name(1))).unwrap();
        let (mut p, _) = open(dir, 600_000).unwrap();
        let mut suspect = p.take_suspect();
        assert!(suspect.is_some());
        let mut batch = vec![
            turn_event("a", None),
            Event::lifecycle(EventKind::DaemonReady, "t".to_owned(), "r".to_owned()),
            turn_event("b", Some("2020-01-01T00:00:00Z")),
        ];
        flag_replays(&mut suspect, &mut batch);
        assert!(batch[0].replay && batch[2].replay, "{batch:?}");
        // After daemon_ready only what was recorded before this start.
        let mut later = vec![
            turn_event("c", Some("2020-01-01T00:00:00Z")),
            turn_event("d", Some("2999-01-01T00:00:00Z")),
        ];
        flag_replays(&mut suspect, &mut later);
        assert!(later[0].replay && !later[1].replay, "{later:?}");
        // This run's first delta covers what it derived again: the mark goes.
        let cp = Checkpoint {
            path: "/t/a.jsonl".to_owned(),
            dev: 1,
            ino: 2,
            offset: 10,
            line: 2,
            marker: 3,
            resume: None,
        };
        p.save(Box::new(Delta {
            files: vec![cp],
            ..Delta::default()
        }));
        p.finish();
        let on_disk = lock::read_mark(&File::open(dir.join(lock::LOCK)).unwrap());
        assert_eq!(on_disk.outage_since, None);
    }

    #[test]
    fn only_a_lock_left_is_state_lost_and_an_empty_dir_a_first_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (_, loaded) = open(dir, 600_000).unwrap();
        assert_eq!(loaded.status, Status::FirstRun);
        drop(loaded);
        for e in fs::read_dir(dir).unwrap().flatten() {
            if e.file_name() != lock::LOCK {
                fs::remove_file(e.path()).unwrap();
            }
        }
        let (_, loaded) = open(dir, 600_000).unwrap();
        assert!(
            matches!(loaded.status, Status::Lost(_)),
            "{:?}",
            loaded.status
        );
    }
}
