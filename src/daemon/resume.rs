//! Taking a file back from its checkpoint, at a restart: read on from the checkpoint
//! when the file was only appended to, else from its first byte.
//!
//! Owns no state of its own: these are the file table's methods. What the reads find
//! goes back to the core as [`Step`]s, with the saved sessions to restore.

use super::files::Files;
use super::read::{Mode, Step, last_commit};
use crate::clock::Now;
use crate::feed::FileFeed;
use crate::state::Checkpoint;
use crate::tail::{FileId, Stat, TailState};
use std::fs;
use std::path::Path;

impl Files {
    /// A file present at a restart. Known and only appended to since its checkpoint:
    /// silent up to the checkpoint, live after it. Rewritten while we were down, or
    /// new since the last run: live from its first byte. Live means within the
    /// catch-up window and not already in the ledger; records from before `since` (when
    /// the first run began) stay history.
    pub(super) fn read_resumed(
        &mut self,
        path: &Path,
        meta: &fs::Metadata,
        cp: Option<Checkpoint>,
        since: i64,
    ) -> Vec<Step> {
        let now = self.clock.now();
        let mut live_before = now.wall.saturating_sub(self.catch_up());
        let appended = cp.filter(|cp| {
            let stat = Stat::of(meta);
            let id = FileId {
                dev: cp.dev,
                ino: cp.ino,
            };
            stat.id == id
                && stat.size >= cp.offset
                && TailState::resumed(id, cp.offset, cp.line, cp.marker)
                    .marker_matches(path)
                    .unwrap_or(false)
        });
        let mut steps = Vec::new();
        let start = match appended {
            Some(cp) => match self.resume_at(path, &cp, now) {
                Some(restore) => {
                    self.counters.resumed += 1;
                    steps.push(restore);
                    cp.offset
                }
                None => {
                    // No reading context saved (an older state file): re-read up to the
                    // checkpoint, silently.
                    self.counters.reread += 1;
                    let mut upto =
                        self.read_upto(path, Mode::History, Some(cp.offset), Some(i64::MAX));
                    for s in &mut upto {
                        if let Step::Read(r) = s {
                            r.quiet = true;
                        }
                    }
                    steps.extend(upto);
                    0
                }
            },
            None => {
                // Records from before the first run began stay history, even in a file
                // with no checkpoint (a first run that crashed before saving it).
                live_before = live_before.max(since);
                self.counters.reread += 1;
                tracing::debug!(path = %path.display(), "Changed or new while baton was down: read from its start.");
                0
            }
        };
        let mut rest = self.read_upto(path, Mode::History, None, Some(live_before));
        if let Some(c) = last_commit(&mut rest) {
            c.count_from = Some(start);
        }
        steps.extend(rest);
        steps
    }

    /// Continues `path` from its checkpoint with the saved projector context; the saved
    /// sessions to restore, or `None` if they cannot be taken back.
    fn resume_at(&mut self, path: &Path, cp: &Checkpoint, now: Now) -> Option<Step> {
        let (name, t) = self.table.get_named_mut(path)?;
        let r = cp.resume.as_ref().filter(|r| r.provider == t.provider)?;
        let at = (cp.offset, cp.line);
        let (max_line, name) = (self.limits.max_line, name.name().clone());
        let feed = FileFeed::resume_named(name, path, t.provider, max_line, at.0, at.1)
            .restored(&r.projector)?;
        let id = t.tail.id();
        t.tail = TailState::resumed(id, cp.offset, cp.line, cp.marker);
        let restore = Step::Restore(feed.path.clone(), r.sessions.clone(), now);
        t.feed = Some(Box::new(feed));
        t.cold = None;
        Some(restore)
    }
}
