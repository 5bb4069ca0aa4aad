//! One tracked transcript: its tail state, its projector (or, while cold, the
//! projector's saved context), and what the file table learnt about it.

use super::name::FileName;
use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::reduce::{Kept, Spill};
use crate::tail::{FileId, Parts, Stat, TailState};
use std::fmt::Write;
use std::hash::{DefaultHasher, Hash, Hasher};
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

/// A file idle for long, kept in 32 bytes: when it last changed, a fingerprint of the
/// stat it was last read at, and the rest of its entry (the tail state's numbers, the
/// clocks, the projector's saved context) as one text in the spill. At 100,000 files a
/// [`Tracked`] in the table's list took 136 bytes a file (17.8 MB); nothing of it is
/// needed until the file changes or a checkpoint is saved, and each of those reads it
/// back. The slow safety net stats every file every 30 s: the fingerprint tells it
/// "unchanged" without reading anything back (a read back for each file took the idle
/// daemon from 0.86–1.01 to 1.34–1.41 s of CPU each 5 minutes at 10,000 files).
pub(super) struct Frozen {
    /// The numbers on a first line, then the projector's saved context.
    blob: Kept,
    /// [`Tracked::last_change`] in whole seconds (rounded down): the live set and the caps
    /// ask for it on every tidy, and a file frozen has been idle for half an hour.
    last_change_s: i32,
    provider: ProviderKind,
    /// [`fingerprint`] of the stat the tail state was last at; 0 if it cannot say
    /// "unchanged" (a file never stat'ed after a read), so a compare reads it back.
    stat: u64,
}

const _: () = assert!(size_of::<Frozen>() <= 32);

/// A hash of what [`TailState::compare`] looks at, never 0. Two stats with the same
/// fingerprint are taken as the same: a change missed that way (one in 2^64) waits for
/// the watcher's next event for the file.
fn fingerprint(s: &Stat) -> u64 {
    let mut h = DefaultHasher::new();
    (s.id, s.size, s.mtime_ns, s.ctime_ns).hash(&mut h);
    h.finish().max(1)
}

impl Frozen {
    /// `t` kept out of memory, its projector (if it has one) sent cold; `Err(t)` for an
    /// entry that must stay as it is: one with an open handle, or with neither a
    /// projector nor a saved context (a file still to be read by a history reader, or
    /// one to be read again from its first byte).
    pub(super) fn freeze(t: Tracked, spill: &Arc<dyn Spill>) -> Result<Frozen, Tracked> {
        if t.tail.is_open() {
            return Err(t);
        }
        let context = match (&t.feed, &t.cold) {
            (Some(f), _) => Some(f.save()),
            (None, Some(c)) => c.text(),
            (None, None) => None,
        };
        let Some(context) = context else {
            return Err(t);
        };
        let p = t.tail.parts();
        let stat = t.tail.same_stat().map_or(0, |s| fingerprint(&s));
        // The first line: the tail state's numbers, then the entry's two clocks.
        let mut text = String::with_capacity(160 + context.len());
        p.encode(&mut text);
        let _ = writeln!(text, " {} {}", t.skew_ms, t.warned_s);
        text.push_str(&context);
        let last_change_s = t
            .last_change
            .div_euclid(1000)
            .clamp(i32::MIN.into(), i32::MAX.into());
        Ok(Frozen {
            blob: Kept::new(text, Some(spill)),
            last_change_s: i32::try_from(last_change_s).unwrap_or(i32::MIN),
            provider: t.provider,
            stat,
        })
    }

    /// Whether `now` is the stat the file was frozen at (as [`TailState::compare`] would
    /// say `Same`); `None` if only the entry read back can tell.
    pub(super) fn unchanged(&self, now: &Stat) -> Option<bool> {
        (self.stat != 0).then(|| fingerprint(now) == self.stat)
    }

    /// When the file last changed (monotonic ms, to the second).
    pub(super) fn last_change(&self) -> i64 {
        i64::from(self.last_change_s) * 1000
    }

    /// The entry as it was frozen. If the spill cannot give it back, an entry that no
    /// file matches, with no context: the next look finds the file replaced and reads it
    /// again from its first byte (what it already reported is in the seen-set), and a
    /// checkpoint saved from it makes a restart do the same.
    pub(super) fn thaw(&self, path: &std::path::Path) -> Tracked {
        let back = self.blob.text().and_then(|text| {
            let (parts, rest) = Parts::decode(&text)?;
            let (clocks, context) = rest.split_once('\n')?;
            let (skew_ms, warned_s) = clocks.split_once(' ')?;
            let (skew_ms, warned_s) = (skew_ms.parse().ok()?, warned_s.parse().ok()?);
            Some((parts, skew_ms, warned_s, Some(context.to_owned())))
        });
        let (tail, skew_ms, warned_s, context) = match back {
            Some((parts, skew, warned, context)) => {
                (TailState::from_parts(parts), skew, warned, context)
            }
            None => {
                tracing::error!(path = %path.display(),
                    "An idle file's state could not be read back; the transcript will be read again from its start.");
                (TailState::new(FileId { dev: 0, ino: 0 }), 0, i32::MIN, None)
            }
        };
        Tracked {
            provider: self.provider,
            tail,
            feed: None,
            // In memory: a thawed file is about to be read on, which takes it.
            cold: context.map(|c| Kept::new(c, None)),
            last_change: self.last_change(),
            warned_s,
            skew_ms,
        }
    }
}
