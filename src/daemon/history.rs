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
//! then hands each result to the file table, reduces the observations, commits the tail
//! state with the same token as any read, and finishes the file as a new one. A file
//! that changed identity, vanished or could not be opened in between is read on the
//! core thread as it would have been at its discovery.
//!
//! It knows nothing of the file table or the reducer: it takes paths in (under the
//! names the table holds them by) and gives projectors, tails and observations back.
//!
//! Files resumed from a checkpoint (a restart) are read as they are found: their events
//! come out after `daemon_ready`, in the walk's order.

use super::name::FileName;
use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::pool;
use crate::provider::Obs;
use crate::tail::{FileId, TailState};
use crossbeam_channel::{Receiver, Sender};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Seek, SeekFrom};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many files may be read ahead of the one being applied, per thread: bounds the
/// observations held at once. With 4, a worker that met a large file left the other
/// idle once it was four files ahead: 16 made a first start on 10,000 sessions 6–10%
/// faster (BENCHMARKS.md, round 8).
const READ_AHEAD: usize = 16;
/// A worker reads at most this much of a file (from its restart point; the tail the
/// backward read kept, at most 4 MiB, counts towards it); the core thread reads the
/// rest, as a live read would, so a huge file read whole never sits in memory as
/// observations. In flight at once: at most READ_AHEAD files' observations of at most 4
/// MiB of lines each, a worker (32 MiB of lines before round 8, 64 now).
const READ_MAX: u64 = 4 * 1024 * 1024;

/// A file found by the walk, not read yet.
#[derive(Clone)]
pub(super) struct Found {
    /// Its path, under the name the file table holds it by: the queue, the set of paths
    /// and the reader's feed share that one allocation.
    pub name: FileName,
    pub provider: ProviderKind,
    /// Its identity when found: a file that has another by its read was replaced.
    id: FileId,
    pub mtime_ms: i64,
}

/// The files found by the walk and not applied yet, in the order found, and the workers
/// reading them.
pub(super) struct Deferred {
    queue: VecDeque<Found>,
    paths: HashSet<FileName>,
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
    pub fn push(&mut self, name: FileName, provider: ProviderKind, id: FileId, mtime_ms: i64) {
        if !self.paths.insert(name.clone()) {
            return;
        }
        let found = Found {
            name,
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

    /// The next file found and its result, once read: waits for it only if `block`.
    /// Hand its token back with [`Deferred::release`] once it is applied.
    pub fn take(&mut self, block: bool) -> Option<(Found, Outcome)> {
        let got = self.next_result(block)?;
        let f = self.queue.pop_front()?;
        self.paths.remove(f.name.path());
        self.next += 1;
        Some((f, got))
    }

    /// A file is applied: the workers may read one more ahead.
    pub fn release(&self) {
        let _ = self.tokens.try_send(());
    }

    /// The walk is done: no more files come.
    pub fn close(&mut self) {
        self.jobs = None;
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
pub(super) enum Outcome {
    Read(Box<Got>),
    /// Not the file found, gone, or unreadable: the core thread reads it as before.
    Redo,
}

/// One file read from its restart point.
pub(super) struct Got {
    pub feed: FileFeed,
    /// Committed to where the read stopped; its handle closed.
    pub tail: TailState,
    pub obs: Vec<(u64, Obs)>,
    /// The read stopped at [`READ_MAX`]: there may be more.
    pub more: bool,
    pub res: io::Result<()>,
}

/// Before the start-up walk: on a first run (no checkpoints) the files it finds are read
/// by worker threads, unless one thread is asked for (`threads`: 0 is one per core).
pub(super) fn begin(first_run: bool, threads: usize, max_line: usize) -> Option<Deferred> {
    if !first_run || threads == 1 {
        return None;
    }
    let threads = match threads {
        0 => pool::threads_for(usize::MAX),
        n => n,
    };
    Deferred::start(threads, max_line)
}

/// The worker's part: no reducer, no file table, no handle kept.
fn read(f: &Found, max_line: usize) -> Outcome {
    let mut tail = TailState::new(f.id);
    let path = f.name.path();
    let Ok(Some(file)) = tail.handle(path) else {
        return Outcome::Redo;
    };
    // One handle for the plan and the read: what the plan read of the end is not read
    // again.
    let name = f.name.name();
    let (mut feed, kept) =
        crate::tail_first::feed_keeping(file, name.clone(), path, f.provider, max_line)
            .unwrap_or_else(|| {
                let feed = FileFeed::named(name.clone(), path, f.provider, max_line);
                (feed, None)
            });
    let mut obs = Vec::new();
    let kept = kept
        .as_ref()
        .map_or(&[][..], crate::tail_first::KeptTail::bytes);
    feed.feed(kept, |src, o| obs.push((src.line, o)));
    // A document is one record: read whole (its feed bounds what it keeps).
    let limit = if feed.is_document() {
        u64::MAX
    } else {
        READ_MAX.saturating_sub(kept.len() as u64).max(1)
    };
    let pos = feed.start();
    let got = file.seek(SeekFrom::Start(pos)).and_then(|_| {
        feed.read_to_end(&mut Read::take(&mut *file, limit), |src, o| {
            obs.push((src.line, o));
        })
    });
    let more = !feed.is_document() && got.as_ref().is_ok_and(|n| *n >= limit);
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
