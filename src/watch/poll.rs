//! Polling: the fallback that is always on, and the only watcher with `--watcher poll`.
//!
//! The ticker only sends hints ([`Hint::Poll`] every `--poll-interval`, [`Hint::Sweep`]
//! every [`SWEEP_INTERVAL`]); the core decides what to stat and re-reads from its own
//! offsets. Listing helpers live here too: they read directories, never files.

use super::discover::{is_candidate, skip_dir};
use super::{Hint, HintTx};
use crate::model::ProviderKind;
use crate::shutdown::Shutdown;
use std::fs::{self, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior, interval_at};

/// How often the whole tree is re-listed and every file stat'ed, whatever the watcher
/// says: the bound on how long any missed change can go unnoticed.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// Sends [`Hint::Poll`] and [`Hint::Sweep`] on their intervals until the stop (or until
/// the core is gone). Polls are sent only while `wanted` says some file needs them.
pub async fn ticker(
    hints: HintTx,
    poll: Duration,
    sweep: Duration,
    mut wanted: tokio::sync::watch::Receiver<bool>,
    stop: Shutdown,
) {
    let start = Instant::now();
    let mut poll_tick = interval_at(start + poll, poll.max(Duration::from_millis(1)));
    let mut sweep_tick = interval_at(start + sweep, sweep.max(Duration::from_millis(1)));
    // A late tick is worth one look, not a burst of them.
    poll_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    sweep_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let polling = *wanted.borrow_and_update();
        let hint = tokio::select! {
            () = stop.stopped() => return,
            _ = poll_tick.tick(), if polling => Hint::Poll,
            _ = sweep_tick.tick() => Hint::Sweep,
            changed = wanted.changed() => match changed {
                Ok(()) => continue,
                // The core is gone.
                Err(_) => return,
            },
        };
        if !hints.send(hint) {
            return;
        }
    }
}

/// One directory's entries that matter: subdirectories to descend into and transcript
/// candidates with their metadata (symlinks followed).
#[derive(Debug, Default)]
pub struct Listing {
    pub dirs: Vec<PathBuf>,
    pub files: Vec<(PathBuf, Metadata)>,
}

/// Lists `dir`. Symlinked directories are not followed (a link loop cannot trap the
/// walk); symlinked files are.
pub fn list_dir(dir: &Path, provider: Option<ProviderKind>) -> io::Result<Listing> {
    let mut out = Listing::default();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(ft) = entry.file_type() else { continue };
        let path = entry.path();
        if ft.is_dir() {
            if !skip_dir(&path) {
                out.dirs.push(path);
            }
            continue;
        }
        if !is_candidate(&path, provider) {
            continue;
        }
        let meta = if ft.is_symlink() {
            fs::metadata(&path)
        } else {
            entry.metadata()
        };
        if let Ok(meta) = meta
            && meta.is_file()
        {
            out.files.push((path, meta));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The core still listens and polling is still wanted: only the token ends it.
    #[test]
    fn the_ticker_returns_at_the_stop() {
        let (hints, core) = super::super::channel(16).unwrap();
        let (wanted_tx, wanted) = tokio::sync::watch::channel(true);
        let ms = Duration::from_millis(5);
        crate::shutdown::assert_ends_at_the_stop(|stop| async move {
            ticker(hints, ms, ms, wanted, stop).await;
            drop((core, wanted_tx));
        });
    }

    #[test]
    fn lists_candidates_and_subdirs_only() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::create_dir_all(d.join("sub/deeper")).unwrap();
        fs::create_dir_all(d.join("archive")).unwrap();
        fs::write(d.join("a.jsonl"), b"{}\n").unwrap();
        fs::write(d.join("notes.txt"), b"x").unwrap();
        let l = list_dir(d, Some(ProviderKind::Claude)).unwrap();
        assert_eq!(l.dirs, vec![d.join("sub")]);
        let files: Vec<_> = l.files.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(files, vec![d.join("a.jsonl")]);
    }
}
