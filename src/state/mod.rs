//! Durable state: what lets a restarted daemon alert every turn exactly once.
//!
//! The state directory holds
//! - `state.json` and `state.json.prev`: the current and previous generation of the
//!   checkpoints (per file: identity, committed offset, line, marker, and the reading
//!   context there: projector and sessions) and the ledger of decided event ids
//!   ([`store`], [`ledger`]);
//! - `journal-N.jsonl`: events recorded as pending before delivery and done after
//!   ([`journal`]);
//! - `lock`: held exclusively by the running daemon ([`lock`]);
//! - `parked-*.spill`: scratch for parked sessions, unlinked once open ([`spill`]).
//!
//! The core thread sends deltas (the checkpoints it changed, the ids it decided) behind
//! the events they cover. The delivery task journals and delivers events and passes
//! each delta on only after the events before it were delivered, so a checkpoint never
//! runs ahead of an undelivered event; the state writer thread ([`saver`]) applies
//! deltas and writes generations, off the delivery path.
//!
//! Opening the directory at start is [`open()`]; the delivery side is [`Persist`]
//! (`delivery.rs`), with its outage mark and the `replay` flagging that follows one in
//! `outage.rs`. This file keeps what they share: the start's [`Status`], [`Decision`]s,
//! the directory's [`Health`] and the file helpers.

mod crc;
mod delivery;
mod open;
mod outage;

pub mod journal;
pub mod ledger;
pub mod lock;
pub mod mutes;
pub mod remotes;
pub mod saver;
pub mod spill;
pub mod store;

pub use ledger::Ledger;
pub use saver::Delta;
pub use store::{Checkpoint, Resume};

pub use delivery::Persist;
pub use open::open;
pub use outage::{Suspect, flag_replays};

use crate::clock::{format_rfc3339, wall_now};
use crate::model::{Event, EventKind};
use saver::Progress;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Failures to persist are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);

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
            provider: ev.provider.unwrap_or(crate::provider::UNNAMED),
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
pub struct Health {
    failing: AtomicBool,
    logged_at: Mutex<Option<Instant>>,
    anomaly: Mutex<Option<Event>>,
    /// Wakes the event writer's thread when an anomaly is waiting (one slot: a wake
    /// not yet taken stands for any that come behind it).
    wake: (
        crossbeam_channel::Sender<()>,
        crossbeam_channel::Receiver<()>,
    ),
}

impl Default for Health {
    fn default() -> Self {
        Health {
            failing: AtomicBool::new(false),
            logged_at: Mutex::default(),
            anomaly: Mutex::default(),
            wake: crossbeam_channel::bounded(1),
        }
    }
}

impl Health {
    /// For a crossbeam `select!`: ready when an anomaly may be waiting.
    pub fn woken(&self) -> &crossbeam_channel::Receiver<()> {
        &self.wake.1
    }

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
        // Full means a wake is already waiting.
        let _ = self.wake.0.try_send(());
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

/// Opens one of our append-only files (0600, created if missing), refusing one that is
/// a symlink or not ours.
/// The JSON file at `path` read as a `T`; a missing file is the default, and so is one
/// that cannot be read or parsed, said in the log as the `what` that is passed over and
/// what is done instead (`then`).
fn load_json<T: serde::de::DeserializeOwned + Default>(path: &Path, what: &str, then: &str) -> T {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "Unreadable {what}; {then}.");
            T::default()
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => T::default(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "Cannot read the {what}; {then}.");
            T::default()
        }
    }
}

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
            let ev = turn_event("a", None);
            p.pending(std::slice::from_ref(&ev), &[ev.to_json()]);
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
