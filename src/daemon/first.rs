//! A new file's way into the tracked-file table: taken in (or left out, when it is no
//! transcript of ours), read for the first time, then finished (in history: its handle
//! closed, its projector dropped unless it changed recently). A first run's history
//! reader's result is taken over here too.
//!
//! Owns no state of its own: these are the file table's methods. The core reduces what
//! the first read returns between [`Files::admit`] and [`Files::finish_new`].

use super::files::{Files, HISTORY_WARM, MAX_OPEN, mono_i};
use super::name::FileName;
use super::read::{Commit, Mode, Read, Step};
use super::tracked::Tracked;
use crate::clock::Now;
use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::tail::{FileId, Stat, TailState};
use crate::watch::discover::classify;
use crate::watch::tree::root_provider;
use std::fs;
use std::io;
use std::path::Path;

/// A new file taken into the table.
pub(super) enum Admit {
    /// No transcript, or no root of ours.
    Skip,
    /// Its first read is left to the history readers.
    Deferred {
        /// The name the table holds it by, for the reader's feed to share.
        name: FileName,
        provider: ProviderKind,
        id: FileId,
        mtime_ms: i64,
    },
    /// Read it now, then finish it ([`Files::finish_new`]).
    Read { mtime_ms: i64, now: Now },
}

impl Files {
    /// Takes a new file into the table, unless it is no transcript of ours. `defer`:
    /// a history reader reads it, so it keeps no projector until then.
    pub(super) fn admit(
        &mut self,
        path: &Path,
        meta: &fs::Metadata,
        mode: Mode,
        defer: bool,
    ) -> Admit {
        let size = meta.len();
        if let Some(&seen_at) = self.ignored.get(path)
            && (seen_at == u64::MAX || seen_at == size || seen_at >= 64 * 1024)
        {
            return Admit::Skip;
        }
        let Some(root_provider) = root_provider(&self.limits.roots, path) else {
            return Admit::Skip;
        };
        let Some(provider) = classify(path, root_provider) else {
            self.ignored.insert(path.to_path_buf(), size);
            return Admit::Skip;
        };
        let name = FileName::new(path);
        let feed = FileFeed::named(name.name().clone(), path, provider, self.limits.max_line);
        if !feed.is_conversation() {
            self.ignored.insert(path.to_path_buf(), u64::MAX);
            return Admit::Skip;
        }
        self.ignored.remove(path);
        let now = self.clock.now();
        let stat = Stat::of(meta);
        let mtime_ms = stat.mtime_ms();
        let last_change = if mode == Mode::History {
            // Before the start: as long ago as the file's modification time says.
            mono_i(now).saturating_sub(now.wall.saturating_sub(mtime_ms).max(0))
        } else {
            mono_i(now)
        };
        let defer = defer && mode == Mode::History;
        self.table.insert(
            name.clone(),
            Tracked {
                provider,
                tail: TailState::new(stat.id),
                feed: (!defer).then(|| Box::new(feed)),
                cold: None,
                last_change,
                warned_s: i32::MIN,
                skew_ms: 0,
            },
        );
        if defer {
            return Admit::Deferred {
                name,
                provider,
                id: stat.id,
                mtime_ms,
            };
        }
        Admit::Read { mtime_ms, now }
    }

    /// A new file's first read; in history, from where its last turn can be read.
    pub(super) fn read_first(&mut self, path: &Path, mode: Mode) -> Vec<Step> {
        if mode == Mode::History {
            self.start_tail_first(path);
        }
        let mut steps = self.read_upto(path, mode, None, None);
        if mode == Mode::History
            && let Some(c) = super::read::last_commit(&mut steps)
        {
            c.count_from = Some(0);
        }
        steps
    }

    /// What follows a new file's first read, once it is reduced and committed: in
    /// history, its handle closed and sent cold unless recent.
    pub(super) fn finish_new(&mut self, path: &Path, now: Now, mode: Mode) -> Vec<Step> {
        let cold = self.cold_ms();
        let name = self.name(path);
        let mut steps = Vec::new();
        if mode == Mode::History
            && let Some(t) = self.table.get_mut(path)
        {
            // History can be thousands of files: no handle stays open, and only the most
            // recently changed keep their projector.
            t.tail.close();
            if mono_i(now) - t.last_change > cold {
                steps.push(Step::Park(name, now));
                // Idle for long: its entry goes to the spill at once, the projector's
                // context with it (one write, not one now and another at the next tidy).
                self.freeze_or_cold(path);
            } else {
                self.history_warm.push((t.last_change, path.to_path_buf()));
                if self.history_warm.len() > 2 * HISTORY_WARM {
                    self.history_warm.sort_by_key(|w| std::cmp::Reverse(w.0));
                    for (_, p) in self.history_warm.drain(HISTORY_WARM..) {
                        if let Some(t) = self.table.get_mut(p.as_path()) {
                            t.go_cold(self.spill.as_ref());
                        }
                    }
                }
            }
        } else if mode == Mode::Live && self.table.len() > MAX_OPEN {
            steps = self.enforce_caps(now);
        }
        steps
    }

    /// A first run's history read: the projector a history reader's read left, read
    /// from the file's first byte when the reader could not.
    pub(super) fn restart_feed(&mut self, path: &Path, provider: ProviderKind) {
        if let Some((name, t)) = self.table.get_named_mut(path) {
            t.feed = Some(Box::new(FileFeed::named(
                name.name().clone(),
                path,
                provider,
                self.limits.max_line,
            )));
        }
    }

    /// Takes over what a history reader read: its projector now, its tail with the
    /// commit. `None` if the file went away meanwhile.
    pub(super) fn adopt(
        &mut self,
        path: &Path,
        feed: FileFeed,
        tail: TailState,
        obs: Vec<(u64, crate::provider::Obs)>,
        res: io::Result<()>,
        now: Now,
    ) -> Option<Read> {
        let t = self.table.get_mut(path)?;
        let provider = feed.provider;
        let src_path = feed.path.clone();
        t.feed = Some(Box::new(feed));
        let newest = Read::newest(&obs);
        Some(Read {
            provider,
            path: src_path,
            obs,
            now,
            history_before: i64::MAX,
            quiet: false,
            commit: Some(Commit {
                path: path.to_path_buf(),
                res,
                newest,
                mode: Mode::History,
                now,
                tail: Some(tail),
                count_from: Some(0),
            }),
            more: None,
        })
    }

    /// A first history read needs a file's state, not its events (history is silent):
    /// start it at its tail-first restart point instead of its first byte.
    fn start_tail_first(&mut self, path: &Path) {
        if let Some((name, t)) = self.table.get_named_mut(path)
            && let Some(feed) = crate::tail_first::open_feed(
                name.name().clone(),
                path,
                t.provider,
                self.limits.max_line,
            )
        {
            t.feed = Some(Box::new(feed));
        }
    }
}
