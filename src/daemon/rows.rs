//! The daemon's row sources: the databases agents keep their sessions in, followed
//! beside the file table (`files.rs`) and handing the core the same [`Step`]s, so one
//! reducer, one event path and one state writer serve both.
//!
//! Owns: one [`RowFeed`] per database (its connection, row position and projector).
//! A look is a read of what changed since the position (nothing at all when
//! `PRAGMA data_version` says no one committed); a change to the database's `-wal`
//! companion is a look at the database. The position moves as the rows are read, and
//! is saved with the sessions in the database's checkpoint (`offset` 0, `line` the
//! newest `time_updated`, the feed's [`RowFeed::save`] as the reading context), so a
//! restart reads on from it: nothing twice, nothing lost.

use super::read::{Mode, Read, Step};
use crate::clock::Now;
use crate::model::ProviderKind;
use crate::reduce::Reducer;
use crate::rows::RowFeed;
use crate::state::{Checkpoint, Resume};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

struct Followed {
    feed: RowFeed,
    /// The database file's identity when it was first read: another file at the path
    /// (OpenCode's database deleted and made again) starts over.
    dev: u64,
    ino: u64,
}

#[derive(Default)]
pub(super) struct RowTable {
    dbs: HashMap<PathBuf, Followed>,
    /// Reads that failed (busy, corrupt, schema): each one anomaly, retried on the next
    /// wake.
    pub errors: u64,
}

/// When a look happens and what the last run left.
pub(super) struct RowLook<'a> {
    pub mode: Mode,
    pub now: Now,
    pub catch_up: i64,
    pub max_row: usize,
    /// When the first run began; `None` on a first run (history is silent then).
    pub since: Option<i64>,
    /// The database's checkpoint from the last run, if any.
    pub checkpoint: Option<&'a Checkpoint>,
}

impl RowTable {
    pub fn contains(&self, path: &Path) -> bool {
        self.dbs.contains_key(path)
    }

    /// Whether any database is followed.
    pub fn is_empty(&self) -> bool {
        self.dbs.is_empty()
    }

    pub fn paths(&self) -> Vec<PathBuf> {
        self.dbs.keys().cloned().collect()
    }

    /// The followed database a change to `path` is about: itself, or the database
    /// whose write-ahead log `path` is.
    pub fn owner_of(&self, path: &Path) -> Option<PathBuf> {
        if self.dbs.contains_key(path) {
            return Some(path.to_owned());
        }
        let name = path.file_name()?.to_str()?;
        let db = path.with_file_name(name.strip_suffix("-wal")?);
        self.dbs.contains_key(&db).then_some(db)
    }

    /// Reads what changed in the database at `path` of `provider`.
    pub fn look(&mut self, path: &Path, provider: ProviderKind, at: &RowLook<'_>) -> Vec<Step> {
        let meta = match std::fs::metadata(path) {
            Ok(m) if m.is_file() => m,
            _ => {
                return match self.dbs.remove(path) {
                    Some(_) => vec![Step::Gone(path.to_owned())],
                    None => Vec::new(),
                };
            }
        };
        let mut steps = Vec::new();
        let replaced = self
            .dbs
            .get(path)
            .is_some_and(|f| (f.dev, f.ino) != (meta.dev(), meta.ino()));
        if replaced {
            tracing::info!(path = %path.display(), "Database replaced; read from its first row.");
            self.dbs.remove(path);
            steps.push(Step::Forget(crate::feed::name_of(path)));
        }
        let live_before = at.now.wall.saturating_sub(at.catch_up);
        let history_before = match self.dbs.get(path) {
            Some(_) => live_before,
            None => {
                let (feed, history_before) = self.first(path, provider, &meta, at, &mut steps);
                let Some(feed) = feed else {
                    return steps;
                };
                self.dbs.insert(
                    path.to_owned(),
                    Followed {
                        feed,
                        dev: meta.dev(),
                        ino: meta.ino(),
                    },
                );
                history_before
            }
        };
        let Some(f) = self.dbs.get_mut(path) else {
            return steps;
        };
        let mut obs = Vec::new();
        if f.feed.read(|src, o| obs.push((src.line, o))).is_err() {
            self.errors += 1;
        }
        if !obs.is_empty() {
            steps.push(Step::Read(Box::new(Read {
                provider,
                path: f.feed.path.clone(),
                obs,
                now: at.now,
                history_before,
                quiet: false,
                commit: None,
                more: None,
            })));
        }
        steps
    }

    /// A database not followed yet: its feed, taken back from the checkpoint when the
    /// same file has one, and the time before which its rows are history.
    fn first(
        &mut self,
        path: &Path,
        provider: ProviderKind,
        meta: &std::fs::Metadata,
        at: &RowLook<'_>,
        steps: &mut Vec<Step>,
    ) -> (Option<RowFeed>, i64) {
        let live_before = at.now.wall.saturating_sub(at.catch_up);
        let same = at
            .checkpoint
            .filter(|cp| (cp.dev, cp.ino) == (meta.dev(), meta.ino()))
            .and_then(|cp| cp.resume.as_ref())
            .filter(|r| r.provider == provider);
        if let Some(r) = same
            && let Some(feed) = RowFeed::restore(path, provider, at.max_row, &r.projector)
        {
            steps.push(Step::Restore(feed.path.clone(), r.sessions.clone(), at.now));
            return (Some(feed), live_before);
        }
        let history_before = match (at.mode, at.since) {
            // Present at a first run's start: every row is history.
            (Mode::History, None) => i64::MAX,
            // New since the last run: rows since it began may still page.
            (Mode::History, Some(since)) => live_before.max(since),
            (Mode::Live, _) => live_before,
        };
        (RowFeed::new(path, provider, at.max_row), history_before)
    }

    /// The database's checkpoint: its row position and reading context, and the
    /// sessions its rows fed.
    pub fn checkpoint(&self, path: &Path, reducer: &Reducer, now: Now) -> Option<Checkpoint> {
        let f = self.dbs.get(path)?;
        let path_s = path.to_string_lossy();
        Some(Checkpoint {
            path: path_s.clone().into_owned(),
            dev: f.dev,
            ino: f.ino,
            offset: 0,
            line: f
                .feed
                .position()
                .and_then(|p| u64::try_from(p).ok())
                .unwrap_or(0),
            marker: 0,
            resume: reducer.save_path(&path_s, now).map(|sessions| Resume {
                provider: f.feed.provider,
                projector: f.feed.save(),
                sessions,
            }),
        })
    }
}
