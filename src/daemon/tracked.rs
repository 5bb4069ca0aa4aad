//! One tracked transcript: its tail state, its projector (or, while cold, the
//! projector's saved context), and what the file table learnt about it.

use super::name::FileName;
use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::reduce::{Kept, Spill};
use crate::tail::TailState;
use std::sync::Arc;

pub(super) struct Tracked {
    pub provider: ProviderKind,
    pub tail: TailState,
    /// `None` while cold. Boxed: most files are cold, and a `None` should cost a
    /// pointer, not a whole feed.
    pub feed: Option<Box<FileFeed>>,
    /// While cold: the projector's context at the committed offset, as saved: in memory,
    /// or in the spill (most files are cold, and the context is a tenth of what an idle
    /// file costs). If it cannot be read back, the file is read again from its first
    /// byte, as a file without one is.
    pub cold: Option<Kept>,
    /// Monotonic ms of the last change seen; negative for changes before the start.
    pub(super) last_change: i64,
    /// When a read error was last logged as a warning (at most one a minute per file), in
    /// monotonic seconds: 4 bytes, where the entry has room left.
    pub(super) warned_s: i32,
    /// How far the writer's clock is behind ours (ms, never negative), learned from an
    /// earlier read: the file's mtime against its newest record time. A live change is
    /// judged against `--catch-up` on the writer's clock, so a writer whose clock runs
    /// late still pages, while a file that appears full of old records stays quiet (its
    /// first read has nothing earlier to learn from).
    pub(super) skew_ms: i64,
}

// The file table holds one of these per file, in a slot of its list (`table.rs`): at
// 100,000 files, every 8 bytes more is about 1 MB.
const _: () = assert!(size_of::<Tracked>() <= 120);

impl Tracked {
    /// Drops the projector, keeping its context in saved form.
    pub(super) fn go_cold(&mut self, spill: Option<&Arc<dyn Spill>>) {
        if let Some(f) = self.feed.take() {
            self.cold = Some(Kept::new(f.save(), spill));
        }
    }

    /// How far the writer's clock is behind ours, from the newest record time read and
    /// the file's mtime.
    pub(super) fn skew(&self, newest: i64) -> i64 {
        let mtime_ms = self.tail.mtime_ns() / 1_000_000;
        mtime_ms.saturating_sub(newest).max(0)
    }

    /// Takes the projector back from its saved context at the committed offset; false if
    /// there is none (the file is then re-read from its first byte).
    pub(super) fn warm_up(&mut self, name: &FileName, max_line: usize) -> bool {
        if self.feed.is_some() {
            return true;
        }
        let Some(saved) = self.cold.take().and_then(|c| c.text()) else {
            return false;
        };
        let at = (self.tail.offset(), self.tail.line_no());
        let (path, name) = (name.path(), name.name().clone());
        self.feed = FileFeed::resume_named(name, path, self.provider, max_line, at.0, at.1)
            .restored(&saved)
            .map(Box::new);
        self.feed.is_some()
    }
}
