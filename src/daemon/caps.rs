//! The caps on what the tracked-file table holds at once: open handles, warm
//! projectors, and the live set. Memory and descriptors follow the files in use, not
//! the files on disk.
//!
//! Owns no state of its own: these are the file table's methods that close handles,
//! send projectors cold and rebuild the live set. It never reads a transcript, and
//! hands the sessions of files gone idle back as [`Step::Park`] for the core.

use super::files::{Files, HISTORY_WARM, MAX_OPEN, mono_i};
use super::read::Step;
use crate::clock::Now;
use std::path::Path;

/// Handles of files idle this long are closed (reopened on change).
const HANDLE_IDLE_MS: i64 = 5 * 60_000;

impl Files {
    /// After the history read: only the most recently changed files keep a projector.
    pub fn end_history(&mut self) {
        let mut warm = std::mem::take(&mut self.history_warm);
        warm.sort_by_key(|w| std::cmp::Reverse(w.0));
        for (_, p) in warm.into_iter().skip(HISTORY_WARM) {
            if let Some(t) = self.table.get_mut(p.as_path()) {
                t.go_cold(self.spill.as_ref());
            }
        }
        // Tail-first reads are a start-up burst: a live file is read on from its offset.
        crate::tail::scratch::release(crate::tail::scratch::Use::Count);
        crate::tail::scratch::release(crate::tail::scratch::Use::Back);
    }

    /// Makes room for `path`'s handle before it is opened: while [`MAX_OPEN`] files may
    /// hold one, the least recently used is closed. So the cap holds at every moment,
    /// not only after the next sweep (a burst of thousands of files must not run the
    /// process out of descriptors).
    pub(super) fn make_room(&mut self, path: &Path) {
        // Neither this check nor closing a victim reads a frozen entry back: it has no
        // handle. The list of handles still names files closed when they were frozen, and
        // a restart at 100,000 files read one back for each file it opened (BENCHMARKS.md,
        // round 24).
        if self.table.is_open(path).is_none_or(|open| open) {
            if self.handles.contains(path) {
                self.handles.promote(path);
            }
            return;
        }
        while self.handles.len() >= MAX_OPEN && !self.handles.contains(path) {
            let Some((victim, ())) = self.handles.pop_lru() else {
                break;
            };
            if let Some(t) = self.table.here_mut(victim.as_path()) {
                t.tail.close();
            }
        }
        self.handles.put(path.to_path_buf(), ());
    }

    /// Tracked, and unchanged for long enough that its sessions are parked when they
    /// can be (as [`Files::tidy`] has them).
    pub fn is_idle(&self, path: &Path) -> bool {
        let now = mono_i(self.now());
        self.table
            .last_change(path)
            .is_some_and(|last| now - last > self.cold_ms())
    }

    /// Rebuilds the live set and closes what went idle. `open`: whether a file has a
    /// turn still open (such a file stays live).
    pub fn tidy(&mut self, open: impl FnMut(&Path) -> bool) -> Vec<Step> {
        let now = self.clock.now();
        self.live.rebuild(
            mono_i(now),
            self.table.changes().map(|(p, last)| (p.path(), last)),
            open,
        );
        self.enforce_caps(now)
    }

    /// Closes idle handles and drops idle projectors, within the caps.
    pub(super) fn enforce_caps(&mut self, now: Now) -> Vec<Step> {
        let cold = self.cold_ms();
        let mut steps = Vec::new();
        let mut open = Vec::new();
        let mut warm = Vec::new();
        let mono = now;
        let now = mono_i(now);
        // Files to be frozen keep their projector until they are: freezing saves its
        // context once, where going cold first wrote it to the spill and freezing read it
        // back and wrote it again.
        let freezes = self.spill.is_some();
        for (path, t) in self.table.iter_mut() {
            let idle = now - t.last_change;
            if t.feed.is_some() && idle > cold {
                t.tail.close();
                if !freezes || self.live.contains(path.path()) {
                    t.go_cold(self.spill.as_ref());
                }
            }
            if idle > cold {
                // Idle that long, its sessions need no memory of their own until it
                // changes (a no-op for a file already parked, or one time can change).
                steps.push(Step::Park(path.name().clone(), mono));
            }
            if t.tail.is_open() && idle > HANDLE_IDLE_MS {
                t.tail.close();
            }
            if t.tail.is_open() {
                open.push((t.last_change, path.to_path_buf()));
            }
            if t.feed.is_some() && idle <= cold {
                warm.push((t.last_change, path.to_path_buf()));
            }
        }
        // No step for a frozen file: its sessions were parked as it froze, and the few a
        // timer kept in memory then are asked again from the reducer's side
        // ([`super::apply::Reduce::tidy`]). A step for each of them made every tidy cost
        // the number of files (117,758 steps at 100,000 sessions, on every sweep and on
        // every new file once 256 are tracked).
        for (list, cap, drop_feed) in [(open, MAX_OPEN, false), (warm, self.limits.max_warm, true)]
        {
            if list.len() <= cap {
                continue;
            }
            let mut list = list;
            list.sort();
            let excess = list.len() - cap;
            for (_, path) in list.into_iter().take(excess) {
                if let Some(t) = self.table.get_mut(path.as_path()) {
                    t.tail.close();
                    if drop_feed {
                        t.go_cold(self.spill.as_ref());
                    }
                }
            }
        }
        self.freeze_idle(now);
        steps
    }

    /// Keeps the entries of files idle for long in the spill ([`Frozen`]), but for live
    /// ones (polled, so looked at again soon).
    ///
    /// [`Frozen`]: super::tracked::Frozen
    fn freeze_idle(&mut self, now: i64) {
        if self.spill.is_none() {
            return;
        }
        let cold = self.cold_ms();
        let idle: Vec<_> = self
            .table
            .iter()
            .filter(|(p, t)| {
                now - t.last_change > cold
                    && (t.cold.is_some() || t.feed.is_some())
                    && !self.live.contains(p.path())
            })
            .map(|(p, _)| p.clone())
            .collect();
        for name in idle {
            self.freeze_or_cold(name.path());
        }
        self.table.repack();
    }

    /// Keeps `path`'s entry in the spill; one that cannot go there (no spill, a handle
    /// open, the spill refusing it) sends its projector cold all the same.
    pub(super) fn freeze_or_cold(&mut self, path: &Path) {
        // The spill and the table are two fields: borrowed apart, with no clone of the
        // spill's handle for each of the files a first start freezes.
        let frozen = self
            .spill
            .as_ref()
            .is_some_and(|s| self.table.freeze(path, s));
        if !frozen && let Some(t) = self.table.here_mut(path) {
            t.go_cold(self.spill.as_ref());
        }
    }
}
