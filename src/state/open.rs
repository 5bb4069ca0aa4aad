//! Opening the state directory at start: creating and locking it, refusing files that
//! are not ours, loading the newest usable generation with its logs and journals, and
//! starting the state writer thread. It decides what the start knows ([`Status`]) and
//! hands the rest of the run to [`Persist`]; after it returns, nothing here runs again.

use super::delivery::Persist;
use super::outage::Suspect;
use super::saver::{Progress, Saver};
use super::{Health, Ledger, Loaded, Status, journal, lock, store};
use crate::clock::{format_rfc3339, wall_now};
use crate::error::Error;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
