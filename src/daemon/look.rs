//! Looking at one tracked file: a stat, then a read on from the committed position, a
//! re-derive from the first byte (truncated, replaced, rewritten, or its projector or
//! parked sessions lost), or letting it go (gone).
//!
//! Owns no state of its own: these are the file table's methods ([`Files`]). What a
//! read finds goes back to the core as [`Step`]s with a tail-commit token.

use super::files::{Files, Look};
use super::read::{Commit, Mode, More, READ_CHUNK, Read, Step};
use crate::feed::FileFeed;
use crate::tail::{Change, Stat, TailState};
use std::fs;
use std::io::{self, Seek, SeekFrom};
use std::path::Path;

/// Why a file is re-read from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rederive {
    Truncated,
    Replaced,
    Rewritten,
    /// Its projector was dropped while idle.
    Reactivated,
    /// Its parked sessions could not be read back from the spill.
    Unspilled,
}

impl Rederive {
    fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Replaced => "replaced",
            Self::Rewritten => "rewritten",
            Self::Reactivated => "reactivated",
            Self::Unspilled => "unspilled",
        }
    }
}

impl Files {
    /// Stats a transcript path and brings its state up to date. `first_read_later`: its
    /// first read is still to come (a history reader has it), and sees whatever changed
    /// until then.
    pub fn look_file(&mut self, path: &Path, mode: Mode, first_read_later: bool) -> Look {
        self.beat();
        if self
            .limits
            .hang_core_on
            .as_deref()
            .is_some_and(|n| path.file_name() == Some(n))
        {
            tracing::warn!(path = %path.display(), "Test hook: the core thread hangs for good.");
            loop {
                std::thread::park();
            }
        }
        let meta = match fs::metadata(path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => return Look::Steps(self.remove_file(path, mode)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Look::Steps(self.remove_file(path, mode));
            }
            Err(e) => {
                self.counters.read_errors += 1;
                tracing::debug!(path = %path.display(), error = %e, "Cannot stat transcript.");
                return Look::Steps(Vec::new());
            }
        };
        if first_read_later {
            return Look::Steps(Vec::new());
        }
        let stat = Stat::of(&meta);
        if self.table.frozen_same(path, &stat) {
            // Unchanged: it stays frozen (a directory listed again looks at every file).
            return Look::Steps(Vec::new());
        }
        let Some((name, t)) = self.table.get_named_mut(path) else {
            return Look::New(meta);
        };
        let change = t.tail.compare(&stat);
        if t.provider.descriptor().is_document(path)
            && matches!(
                change,
                Change::Changed | Change::Truncated | Change::Touched
            )
        {
            // A document rewritten in place: read whole again by the projector that
            // knows its last version, so only what is new comes out and no session is
            // forgotten.
            return Look::Steps(self.read_upto(path, mode, None, None));
        }
        Look::Steps(match change {
            Change::Same => Vec::new(),
            Change::Replaced => {
                // Bytes written to the old file before it was replaced still count.
                let mut steps = self.drain(path, mode);
                steps.extend(self.rederive(path, Rederive::Replaced, mode, None));
                steps
            }
            Change::Truncated => self.rederive(path, Rederive::Truncated, mode, None),
            // Same size and mtime, yet written to: only the content can say what changed.
            Change::Touched => self.rederive(path, Rederive::Rewritten, mode, None),
            Change::Changed => {
                if !t.warm_up(name, self.limits.max_line) {
                    return Look::Steps(self.rederive(path, Rederive::Reactivated, mode, None));
                }
                self.make_room(path);
                let Some(t) = self.table.get_mut(path) else {
                    return Look::Steps(Vec::new());
                };
                match t.tail.marker_matches(path) {
                    Ok(true) => self.read_upto(path, mode, None, None),
                    Ok(false) => self.rederive(path, Rederive::Rewritten, mode, None),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => self.remove_file(path, mode),
                    Err(e) => {
                        self.read_error(path, &e);
                        Vec::new()
                    }
                }
            }
        })
    }

    /// Reads again from its first byte a file whose parked sessions could not be read
    /// back, with the history cut-off in effect when that was found.
    pub(super) fn reread_lost(&mut self, path: &Path, history_before: Option<i64>) -> Vec<Step> {
        self.rederive(path, Rederive::Unspilled, Mode::Live, history_before)
    }

    /// Forgets the file's sessions and reads it again from its first byte. Events it
    /// already produced are in the seen-set, so only what is new comes out.
    fn rederive(
        &mut self,
        path: &Path,
        why: Rederive,
        mode: Mode,
        history_before: Option<i64>,
    ) -> Vec<Step> {
        *self.counters.rederived.entry(why.as_str()).or_default() += 1;
        let level_info = why != Rederive::Reactivated;
        // A file truncated over and over (copytruncate) logs once a minute, with a count.
        let repeats = if level_info {
            self.log.check(&format!("re-read {}", path.display()))
        } else {
            None
        };
        if let Some(repeats) = repeats {
            tracing::info!(path = %path.display(), reason = why.as_str(), repeats, "Re-reading transcript from its start.");
        } else {
            tracing::debug!(path = %path.display(), reason = why.as_str(), "Re-reading transcript from its start.");
        }
        let Some((name, t)) = self.table.get_named_mut(path) else {
            return Vec::new();
        };
        let id = match fs::metadata(path) {
            Ok(m) if m.is_file() => Stat::of(&m).id,
            _ => return self.remove_file(path, mode),
        };
        t.cold = None;
        t.feed = Some(Box::new(FileFeed::named(
            name.name().clone(),
            path,
            t.provider,
            self.limits.max_line,
        )));
        t.tail = TailState::new(id);
        let mut steps = vec![Step::Forget(name.name().clone())];
        steps.extend(self.read_upto(path, mode, None, history_before));
        steps
    }

    /// Reads from the committed position to the end of the file, or to `limit`. Records
    /// older than `history_before` are history; by default, live, those older than the
    /// catch-up window on the writer's clock, and in history all of them.
    pub(super) fn read_upto(
        &mut self,
        path: &Path,
        mode: Mode,
        limit: Option<u64>,
        history_before: Option<i64>,
    ) -> Vec<Step> {
        let now = self.clock.now();
        self.make_room(path);
        let catch_up = self.catch_up();
        let Some((name, t)) = self.table.get_named_mut(path) else {
            return Vec::new();
        };
        if !t.warm_up(name, self.limits.max_line) {
            return self.rederive(path, Rederive::Reactivated, mode, history_before);
        }
        let Some(feed) = t.feed.as_mut() else {
            return Vec::new();
        };
        let file = match t.tail.handle(path) {
            Ok(Some(f)) => f,
            Ok(None) => return self.rederive(path, Rederive::Replaced, mode, history_before),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.remove_file(path, mode),
            Err(e) => {
                self.read_error(path, &e);
                return Vec::new();
            }
        };
        let history_before = history_before.unwrap_or(match mode {
            // The bytes changed now: what is recent is judged on the writer's clock.
            Mode::Live => now.wall.saturating_sub(t.skew_ms).saturating_sub(catch_up),
            Mode::History => i64::MAX,
        });
        let pos = feed.start();
        // Only an open-ended read is cut into chunks: one up to a checkpoint is followed
        // by another read of the same file in the same look, which must start there. A
        // document is one record, read whole (its feed bounds what it keeps).
        let cap = if feed.is_document() {
            u64::MAX
        } else {
            pos.saturating_add(READ_CHUNK)
        };
        let end = limit.unwrap_or(cap);
        let mut obs = Vec::new();
        let collect = |src: &crate::reduce::Src, o| obs.push((src.line, o));
        let res = file
            .seek(SeekFrom::Start(pos))
            .and_then(|_| {
                feed.read_to_end(
                    &mut io::Read::take(&mut *file, end.saturating_sub(pos)),
                    collect,
                )
            })
            .map(|_| ());
        let more =
            (res.is_ok() && limit.is_none() && feed.reader().pos() >= cap).then_some(More { mode });
        let newest = Read::newest(&obs);
        vec![Step::Read(Box::new(Read {
            provider: feed.provider,
            path: feed.path.clone(),
            obs,
            now,
            history_before,
            quiet: false,
            commit: Some(Commit {
                path: path.to_path_buf(),
                res,
                newest,
                mode,
                now,
                tail: None,
                count_from: None,
            }),
            more,
        }))]
    }

    /// Reads what is left through the open handle (the path may already be gone).
    fn drain(&mut self, path: &Path, mode: Mode) -> Vec<Step> {
        let now = self.clock.now();
        let catch_up = self.catch_up();
        let Some(t) = self.table.get_mut(path) else {
            return Vec::new();
        };
        let (Some(feed), Some(file)) = (t.feed.as_mut(), t.tail.open_handle()) else {
            return Vec::new();
        };
        let mut obs = Vec::new();
        let _ = file
            .seek(SeekFrom::Start(feed.start()))
            .and_then(|_| feed.read_to_end(file, |src, o| obs.push((src.line, o))));
        vec![Step::Read(Box::new(Read {
            provider: feed.provider,
            path: feed.path.clone(),
            obs,
            now,
            history_before: match mode {
                Mode::Live => now.wall.saturating_sub(catch_up),
                Mode::History => i64::MAX,
            },
            quiet: false,
            commit: None,
            more: None,
        }))]
    }

    /// The file is gone: read what the open handle still holds, then let it go.
    fn remove_file(&mut self, path: &Path, mode: Mode) -> Vec<Step> {
        if !self.table.contains_key(path) {
            self.ignored.remove(path);
            return Vec::new();
        }
        let mut steps = self.drain(path, mode);
        self.table.remove(path);
        self.live.remove(path);
        self.counters.deleted += 1;
        tracing::debug!(path = %path.display(), "Transcript gone.");
        steps.push(Step::Gone(path.to_path_buf()));
        steps
    }
}
