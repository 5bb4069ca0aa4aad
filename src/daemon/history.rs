//! A first run's history read, on every core: the files the start-up walk finds are
//! read after it, the expensive part on worker threads, the rest on the core thread in
//! the order the walk found them, so events, state, ids and checkpoints are those of
//! reading each file as it is found.
//!
//! Owns: the list of files found and not read yet. A worker opens its file, finds the
//! tail-first restart point, reads from there to the end (at most about [`READ_MAX`] bytes),
//! and frames and projects the lines into observations; it touches neither the reducer
//! nor the file table, and closes its handles before handing the result back. The core
//! thread then reduces the observations, commits the tail state and finishes the file as
//! [`Files::track_new`] does. A file that changed identity, vanished or could not be
//! opened in between is read on the core thread as it would have been at its discovery.
//!
//! Files resumed from a checkpoint (a restart) are read as they are found: their events
//! come out after `daemon_ready`, in the walk's order.

use super::files::{Files, Mode, Tracked};
use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::pool;
use crate::provider::Obs;
use crate::reduce::Src;
use crate::tail::{FileId, TailState};
use crossbeam_channel::Receiver;
use std::collections::HashSet;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How many files may be read ahead of the one being applied, per thread: bounds the
/// observations held at once.
const READ_AHEAD: usize = 4;
/// A worker reads at most this much of a file (from its restart point); the core
/// thread reads the rest, as a live read would, so a huge file read whole never sits in
/// memory as observations.
const READ_MAX: u64 = 8 * 1024 * 1024;

/// `skew_ms` while a read that learns it has not.
const UNSET: i64 = i64::MIN;

/// A file found by the walk, not read yet.
struct Found {
    path: PathBuf,
    provider: ProviderKind,
    /// Its identity when found: a file that has another by its read was replaced.
    id: FileId,
    mtime_ms: i64,
}

/// The files found by the walk, in the order found.
#[derive(Default)]
pub(super) struct Deferred {
    found: Vec<Found>,
    paths: HashSet<PathBuf>,
}

impl Deferred {
    pub fn push(&mut self, path: &Path, provider: ProviderKind, id: FileId, mtime_ms: i64) {
        if self.paths.insert(path.to_path_buf()) {
            self.found.push(Found {
                path: path.to_path_buf(),
                provider,
                id,
                mtime_ms,
            });
        }
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.paths.contains(path)
    }
}

/// What a worker made of one file.
enum Outcome {
    Read(Box<Got>),
    /// Not the file found, gone, or unreadable: the core thread reads it as before.
    Redo,
}

/// One file read from its restart point.
struct Got {
    feed: FileFeed,
    /// Committed to where the read stopped; its handle closed.
    tail: TailState,
    obs: Vec<(u64, Obs)>,
    /// The read stopped at [`READ_MAX`]: there may be more.
    more: bool,
    res: io::Result<()>,
}

/// Before the start-up walk: on a first run (no checkpoints) history is read after the
/// walk, in parallel, unless one thread is asked for.
pub(super) fn begin(files: &mut Files) {
    if files.resume.is_none() && files.limits.history_threads != 1 {
        files.deferred = Some(Deferred::default());
    }
}

/// After the start-up walk: reads the files it found. False if `stop` said stop first
/// (what was read so far stays, as a stop during the walk leaves it).
pub(super) fn finish(files: &mut Files, stop: Option<&Receiver<()>>) -> bool {
    let Some(later) = files.deferred.take() else {
        return true;
    };
    let found = later.found;
    let threads = match files.limits.history_threads {
        0 => pool::threads_for(found.len()),
        n => n,
    };
    let max_line = files.limits.max_line;
    pool::in_order(
        found.len(),
        threads,
        threads * READ_AHEAD,
        |i| read(&found[i], max_line),
        |i, got| {
            if stop.is_some_and(|s| s.try_recv().is_ok()) {
                return Err(());
            }
            apply(files, &found[i], got);
            Ok(())
        },
    )
    .is_ok()
}

/// The worker's part: no reducer, no file table, no handle kept.
fn read(f: &Found, max_line: usize) -> Outcome {
    let mut tail = TailState::new(f.id);
    let Ok(Some(file)) = tail.handle(&f.path) else {
        return Outcome::Redo;
    };
    // One handle for the plan and the read: what the plan read of the end is not read
    // again.
    let (mut feed, kept) = crate::tail_first::feed_keeping(file, &f.path, f.provider, max_line)
        .unwrap_or_else(|| (FileFeed::new(&f.path, f.provider, max_line), None));
    let mut obs = Vec::new();
    let kept = kept.unwrap_or_default();
    feed.feed(&kept, |src, o| obs.push((src.line, o)));
    let limit = READ_MAX.saturating_sub(kept.len() as u64).max(1);
    let pos = feed.reader().pos();
    let got = file.seek(SeekFrom::Start(pos)).and_then(|_| {
        feed.read_to_end(&mut Read::take(&mut *file, limit), |src, o| {
            obs.push((src.line, o));
        })
    });
    let more = got.as_ref().is_ok_and(|n| *n >= limit);
    let res = got.and_then(|_| tail.commit(feed.reader()));
    tail.close();
    Outcome::Read(Box::new(Got {
        feed,
        tail,
        obs,
        more,
        res,
    }))
}

/// The core thread's part, in the walk's order: what `track_new` and `read_upto` do
/// after the bytes are read.
fn apply(files: &mut Files, f: &Found, got: Outcome) {
    files.beat();
    let now = files.clock.now();
    let path = f.path.as_path();
    let Some(t) = files.table.get_mut(path) else {
        // Gone during the walk.
        return;
    };
    match got {
        Outcome::Redo => {
            t.feed = Some(Box::new(FileFeed::new(
                path,
                f.provider,
                files.limits.max_line,
            )));
            files.start_tail_first(path);
            files.read_on(path, Mode::History);
        }
        Outcome::Read(r) => {
            let Got {
                feed,
                tail,
                obs,
                more,
                res,
            } = *r;
            let before = (t.tail.offset(), t.tail.id());
            let src_path = feed.path.clone();
            t.tail = tail;
            t.feed = Some(Box::new(feed));
            let mut newest = None;
            for (line, o) in obs {
                newest = newest.max(o.record_ts);
                let src = Src {
                    provider: f.provider,
                    path: src_path.clone(),
                    line,
                };
                files.reducer.apply(&src, o, now, &mut files.out);
            }
            if let Some(newest) = newest {
                t.skew_ms = skew(t, newest);
            }
            if (t.tail.offset(), t.tail.id()) != before {
                files.pending.mark(path);
            }
            match res {
                Err(e) => files.read_error(path, &e),
                Ok(()) if more => {
                    // The rest as `read_on` reads it; the skew is learnt from the newest
                    // record of both reads, as one read would.
                    t.skew_ms = UNSET;
                    files.read_on(path, Mode::History);
                    if let Some(t) = files.table.get_mut(path) {
                        let rest = (t.skew_ms != UNSET).then_some(t.skew_ms);
                        let first = newest.map(|n| skew(t, n));
                        t.skew_ms = match (rest, first) {
                            (Some(a), Some(b)) => a.min(b),
                            (a, b) => a.or(b).unwrap_or(0),
                        };
                    }
                }
                Ok(()) => {}
            }
        }
    }
    if let Some(t) = files.table.get(path) {
        files.counters.history_bytes += t.tail.offset();
    }
    files.finish_new(path, f.mtime_ms, now, Mode::History);
    // History is silent on a first run.
    files.out.clear();
}

/// How far the writer's clock is behind ours, from the newest record read (as
/// `read_upto` learns it).
fn skew(t: &Tracked, newest: i64) -> i64 {
    let mtime_ms = i64::try_from(t.tail.mtime_ns() / 1_000_000).unwrap_or(0);
    mtime_ms.saturating_sub(newest).max(0)
}
