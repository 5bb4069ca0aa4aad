//! A first run's history read, on every core: worker threads read the files the
//! start-up walk finds as it finds them, and the core thread applies each result in the
//! order the walk found them (between the files it lists, then after the walk), so
//! events, state, ids and checkpoints are those of reading each file as it is found.
//!
//! Owns: the files found and not applied yet, and the workers. A worker opens its file,
//! finds the tail-first restart point, reads from there to the end (at most about
//! [`READ_MAX`] bytes), and frames and projects the lines into observations; it touches
//! neither the reducer nor the file table, and closes its handles before handing the
//! result back. At most [`READ_AHEAD`] files a worker are in flight. The core thread
//! then reduces the observations, commits the tail state and finishes the file as
//! [`Files::track_new`] does. A file that changed identity, vanished or could not be
//! opened in between is read on the core thread as it would have been at its discovery.
//!
//! Files resumed from a checkpoint (a restart) are read as they are found: their events
//! come out after `daemon_ready`, in the walk's order.

use super::files::{Files, Mode};
use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::pool;
use crate::provider::Obs;
use crate::reduce::Src;
use crate::tail::{FileId, TailState};
use crossbeam_channel::{Receiver, Sender};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Seek, SeekFrom};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
#[derive(Clone)]
struct Found {
    path: PathBuf,
    provider: ProviderKind,
    /// Its identity when found: a file that has another by its read was replaced.
    id: FileId,
    mtime_ms: i64,
}

/// The files found by the walk and not applied yet, in the order found, and the workers
/// reading them.
pub(super) struct Deferred {
    queue: VecDeque<Found>,
    paths: HashSet<PathBuf>,
    /// Files handed to the workers so far (the next one's number).
    sent: u64,
    /// The number of the next file to apply (the front of `queue`).
    next: u64,
    jobs: Option<Sender<(u64, Found)>>,
    results: Receiver<(u64, Outcome)>,
    /// One token a file in flight (being read, or read and not applied yet).
    tokens: Sender<()>,
    waiting: HashMap<u64, Outcome>,
    quit: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl Deferred {
    /// Starts `threads` workers; `None` if none could be started.
    fn start(threads: usize, max_line: usize) -> Option<Deferred> {
        let window = threads * READ_AHEAD;
        let (tok_tx, tok_rx) = crossbeam_channel::bounded::<()>(window);
        for _ in 0..window {
            let _ = tok_tx.send(());
        }
        let (job_tx, job_rx) = crossbeam_channel::unbounded::<(u64, Found)>();
        let (res_tx, res_rx) = crossbeam_channel::unbounded();
        let quit = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for _ in 0..threads {
            let (tok_rx, job_rx, res_tx) = (tok_rx.clone(), job_rx.clone(), res_tx.clone());
            let quit = Arc::clone(&quit);
            let spawned = std::thread::Builder::new()
                .name("baton-history".into())
                .spawn(move || work(&tok_rx, &job_rx, &res_tx, &quit, max_line));
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => tracing::warn!(error = %e, "Cannot start a history reader thread."),
            }
        }
        if workers.is_empty() {
            return None;
        }
        Some(Deferred {
            queue: VecDeque::new(),
            paths: HashSet::new(),
            sent: 0,
            next: 0,
            jobs: Some(job_tx),
            results: res_rx,
            tokens: tok_tx,
            waiting: HashMap::new(),
            quit,
            workers,
        })
    }

    /// A file found: a worker reads it as soon as the window has room.
    pub fn push(&mut self, path: &Path, provider: ProviderKind, id: FileId, mtime_ms: i64) {
        if !self.paths.insert(path.to_path_buf()) {
            return;
        }
        let found = Found {
            path: path.to_path_buf(),
            provider,
            id,
            mtime_ms,
        };
        if let Some(jobs) = &self.jobs {
            // The workers outlive the sender; a failed send leaves the file to `Redo`.
            let _ = jobs.send((self.sent, found.clone()));
        }
        self.sent += 1;
        self.queue.push_back(found);
    }

    /// Its first read is still to come.
    pub fn contains(&self, path: &Path) -> bool {
        self.paths.contains(path)
    }

    /// The next file's result: waits for it only if `block`.
    fn next_result(&mut self, block: bool) -> Option<Outcome> {
        while let Ok((i, got)) = self.results.try_recv() {
            self.waiting.insert(i, got);
        }
        if let Some(got) = self.waiting.remove(&self.next) {
            return Some(got);
        }
        if !block || self.next == self.sent {
            return None;
        }
        loop {
            match self.results.recv() {
                Ok((i, got)) if i == self.next => return Some(got),
                Ok((i, got)) => {
                    self.waiting.insert(i, got);
                }
                // No worker left (cannot happen while they catch their panics): the core
                // thread reads the file itself.
                Err(_) => return Some(Outcome::Redo),
            }
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        // A stop: workers end after the file they are on.
        self.quit.store(true, Ordering::Relaxed);
        self.jobs = None;
        while self.results.try_recv().is_ok() {}
        for _ in 0..self.workers.len() {
            let _ = self.tokens.try_send(());
        }
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

/// A worker: takes a token, then a file, reads it and hands the result back.
fn work(
    tokens: &Receiver<()>,
    jobs: &Receiver<(u64, Found)>,
    results: &Sender<(u64, Outcome)>,
    quit: &AtomicBool,
    max_line: usize,
) {
    while tokens.recv().is_ok() && !quit.load(Ordering::Relaxed) {
        let Ok((i, f)) = jobs.recv() else { return };
        if quit.load(Ordering::Relaxed) {
            return;
        }
        // A panic on one file must not leave the core thread waiting for it.
        let got = std::panic::catch_unwind(AssertUnwindSafe(|| read(&f, max_line)))
            .unwrap_or(Outcome::Redo);
        if results.send((i, got)).is_err() {
            return;
        }
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

/// Before the start-up walk: on a first run (no checkpoints) the files it finds are read
/// by worker threads, unless one thread is asked for.
pub(super) fn begin(files: &mut Files) {
    if files.resume.is_some() || files.limits.history_threads == 1 {
        return;
    }
    let threads = match files.limits.history_threads {
        0 => pool::threads_for(usize::MAX),
        n => n,
    };
    files.deferred = Deferred::start(threads, files.limits.max_line);
}

/// During the walk: applies the files read so far, in order, without waiting.
pub(super) fn pump(files: &mut Files) {
    let Some(mut later) = files.deferred.take() else {
        return;
    };
    while let Some(got) = later.next_result(false) {
        apply_next(files, &mut later, got);
    }
    files.deferred = Some(later);
}

/// After the walk: applies the rest as it is read. False if `stop` said stop first
/// (what was applied so far stays, as a stop during the walk leaves it).
pub(super) fn finish(files: &mut Files, stop: Option<&crate::shutdown::Shutdown>) -> bool {
    let Some(mut later) = files.deferred.take() else {
        return true;
    };
    later.jobs = None;
    while let Some(got) = later.next_result(true) {
        if stop.is_some_and(crate::shutdown::Shutdown::is_stopped) {
            return false;
        }
        apply_next(files, &mut later, got);
    }
    true
}

fn apply_next(files: &mut Files, later: &mut Deferred, got: Outcome) {
    let Some(f) = later.queue.pop_front() else {
        return;
    };
    later.paths.remove(&f.path);
    later.next += 1;
    apply(files, &f, got);
    let _ = later.tokens.try_send(());
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
            files.read_first(path, Mode::History);
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
                t.skew_ms = t.skew(newest);
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
                        let first = newest.map(|n| t.skew(n));
                        t.skew_ms = match (rest, first) {
                            (Some(a), Some(b)) => a.min(b),
                            (a, b) => a.or(b).unwrap_or(0),
                        };
                    }
                }
                Ok(()) => {}
            }
            if let Some(t) = files.table.get(path) {
                files.counters.history_bytes += t.tail.offset();
            }
        }
    }
    files.finish_new(path, f.mtime_ms, now, Mode::History);
    // History is silent on a first run.
    files.out.clear();
}
