//! The tracked-file table: every transcript the daemon follows, with its tail state and
//! its projector (warm) or the projector's saved context (cold).
//!
//! Owns: the table, the reducer the reads feed, the events they produce (until the loop
//! flushes them), the live set, and what the next state delta carries; the caps on open
//! handles, warm projectors and the live set are its methods in `caps.rs`. It turns "look at this path" into a stat, then reads on
//! from the committed position, or re-derives the file from its first byte when it was
//! truncated, replaced or rewritten. It never lists a directory or adds a watch (the
//! watched tree does, and reports here through [`Visit`]) and never sends anything: the
//! loop flushes `out` and the pending delta.
//!
//! On a restart a file only appended to since its checkpoint is read on from the
//! checkpoint, never from its first byte. A file idle for long keeps its context in
//! the same saved form ("cold"), so waking it up costs what was appended, not the whole
//! file.

use super::persist::Pending;
pub(super) use super::tracked::Tracked;
use crate::clock::{Clock, Now};
use crate::feed::FileFeed;
use crate::logging::RateLimit;
use crate::model::Event;
use crate::reduce::Reducer;
use crate::state;
use crate::tail::{Change, Stat, TailState};
use crate::watch::Root;
use crate::watch::discover::classify;
use crate::watch::tree::{Live, root_provider};
use std::collections::HashMap;
use std::fs;
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// At most this many open transcript handles.
pub(super) const MAX_OPEN: usize = 256;
/// Files idle this long drop their projector (re-derived from content on change), so
/// memory does not grow with the number of files on disk. Never shorter than the
/// catch-up window, so a re-derive cannot page anyone about a turn it already knew.
const COLD_MS: i64 = 30 * 60_000;
/// At most this many files keep a projector.
pub(super) const MAX_WARM: usize = 64;
/// At most this many files present at start keep their projector (the most recently
/// changed); others warm up on their first change, with one re-read.
pub(super) const HISTORY_WARM: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Files present at start: state only, no events.
    History,
    Live,
}

/// Why a file is re-read from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rederive {
    Truncated,
    Replaced,
    Rewritten,
    /// Its projector was dropped while idle.
    Reactivated,
}

impl Rederive {
    fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Replaced => "replaced",
            Self::Rewritten => "rewritten",
            Self::Reactivated => "reactivated",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub rederived: HashMap<&'static str, u64>,
    pub deleted: u64,
    /// Files present at start continued from their checkpoint, and read from their
    /// first byte (new, changed while down, or no saved context).
    pub resumed: u64,
    pub reread: u64,
    /// Bytes read while going through the files present at start.
    pub history_bytes: u64,
    pub read_errors: u64,
}

/// The settings the file table reads.
pub(super) struct Limits {
    pub roots: Vec<Root>,
    pub max_line: usize,
    pub max_warm: usize,
    pub catch_up_ms: u64,
    /// A working session quiet this long is checked for a live writer.
    pub liveness_after_ms: u64,
    /// Test only: see `RunArgs::debug_hang_core_on`.
    pub hang_core_on: Option<std::ffi::OsString>,
    /// Threads for a first run's history read (0: one per core; 1: each file as it is
    /// found, on the core thread).
    pub history_threads: usize,
}

pub(super) fn mono_i(now: Now) -> i64 {
    i64::try_from(now.mono).unwrap_or(i64::MAX)
}

fn path_str(path: &Path) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}

pub(super) struct Files {
    /// Boxed: the map keeps room for more entries than it holds, and an empty slot should
    /// cost a pointer, not a whole entry.
    pub table: HashMap<PathBuf, Box<Tracked>>,
    pub reducer: Reducer,
    /// Events produced by reads, until the loop flushes them.
    pub out: Vec<Event>,
    /// Files stat'ed on every poll.
    pub live: Live,
    /// What the next state delta carries.
    pub pending: Pending,
    pub counters: Counters,
    /// Checkpoints of the last run, while the files present at start are read; `None`
    /// on a first run (or after the state was lost): history is silent then.
    /// Raw `file` lines, parsed when their file is found.
    pub resume: Option<HashMap<PathBuf, Box<str>>>,
    /// When the first run began: records older than that are history.
    pub since: i64,
    /// While history is read: the files that kept their projector, to cap them early.
    pub(super) history_warm: Vec<(i64, PathBuf)>,
    /// Candidates that are no transcript (unknown provider, compaction helpers), with
    /// the size they had when looked at: looked at again only if it changes while small.
    ignored: HashMap<PathBuf, u64>,
    pub limits: Limits,
    pub clock: Clock,
    /// Files whose handle may be open, least recently used first: every open handle is
    /// in it (entries whose handle was closed since are dropped as they come up), so
    /// its length bounds the open handles at every moment.
    pub(super) handles: lru::LruCache<PathBuf, ()>,
    /// Re-reads of a file truncated again and again log once a minute.
    log: RateLimit,
    /// Bumped as the table makes progress, so the watchdog pings only while it does.
    pub heartbeat: Arc<AtomicU64>,
    /// While a first run's history is walked: the files found, read after the walk
    /// ([`super::history`]); `None` reads each file as it is found.
    pub(super) deferred: Option<super::history::Deferred>,
}

impl Files {
    pub fn new(
        limits: Limits,
        clock: Clock,
        reducer: Reducer,
        resume: Option<HashMap<PathBuf, Box<str>>>,
        since: i64,
    ) -> Self {
        Files {
            table: HashMap::new(),
            reducer,
            out: Vec::new(),
            live: Live::default(),
            pending: Pending::default(),
            counters: Counters::default(),
            resume,
            since,
            history_warm: Vec::new(),
            ignored: HashMap::new(),
            limits,
            clock,
            handles: lru::LruCache::unbounded(),
            log: RateLimit::new(std::time::Duration::from_secs(60)),
            heartbeat: Arc::new(AtomicU64::new(0)),
            deferred: None,
        }
    }

    pub fn beat(&self) {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.table.contains_key(path)
    }

    pub fn catch_up(&self) -> i64 {
        i64::try_from(self.limits.catch_up_ms).unwrap_or(i64::MAX)
    }

    pub(super) fn cold_ms(&self) -> i64 {
        COLD_MS.max(self.catch_up().saturating_add(60_000))
    }

    /// Keeps the ids the reducer decided for the next delta (the ledger's).
    pub fn record_decided(&mut self) {
        let catch_up = self.catch_up();
        self.pending.record_decided(&mut self.reducer, catch_up);
    }

    /// Stats a transcript path and brings its state up to date.
    pub fn look_file(&mut self, path: &Path, mode: Mode) {
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
            Ok(_) => return self.remove_file(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.remove_file(path),
            Err(e) => {
                self.counters.read_errors += 1;
                tracing::debug!(path = %path.display(), error = %e, "Cannot stat transcript.");
                return;
            }
        };
        if self.deferred.as_ref().is_some_and(|d| d.contains(path)) {
            // Its first read is still to come, and sees whatever changed until then.
            return;
        }
        let stat = Stat::of(&meta);
        let Some(t) = self.table.get_mut(path) else {
            return self.track_new(path, &meta, mode);
        };
        match t.tail.compare(&stat) {
            Change::Same => {}
            Change::Replaced => {
                // Bytes written to the old file before it was replaced still count.
                self.drain(path);
                self.rederive(path, Rederive::Replaced, mode);
            }
            Change::Truncated => self.rederive(path, Rederive::Truncated, mode),
            // Same size and mtime, yet written to: only the content can say what changed.
            Change::Touched => self.rederive(path, Rederive::Rewritten, mode),
            Change::Changed => {
                if !t.warm_up(path, self.limits.max_line) {
                    return self.rederive(path, Rederive::Reactivated, mode);
                }
                self.make_room(path);
                let Some(t) = self.table.get_mut(path) else {
                    return;
                };
                match t.tail.marker_matches(path) {
                    Ok(true) => self.read_on(path, mode),
                    Ok(false) => self.rederive(path, Rederive::Rewritten, mode),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => self.remove_file(path),
                    Err(e) => self.read_error(path, &e),
                }
            }
        }
    }

    pub(super) fn track_new(&mut self, path: &Path, meta: &fs::Metadata, mode: Mode) {
        let size = meta.len();
        if let Some(&seen_at) = self.ignored.get(path)
            && (seen_at == u64::MAX || seen_at == size || seen_at >= 64 * 1024)
        {
            return;
        }
        let Some(root_provider) = root_provider(&self.limits.roots, path) else {
            return;
        };
        let Some(provider) = classify(path, root_provider) else {
            self.ignored.insert(path.to_path_buf(), size);
            return;
        };
        let feed = FileFeed::new(path, provider, self.limits.max_line);
        if !feed.is_conversation() {
            self.ignored.insert(path.to_path_buf(), u64::MAX);
            return;
        }
        self.ignored.remove(path);
        let now = self.clock.now();
        let mtime_ms = Stat::of(meta).mtime_ms();
        let last_change = if mode == Mode::History {
            // Before the start: as long ago as the file's modification time says.
            mono_i(now).saturating_sub(now.wall.saturating_sub(mtime_ms).max(0))
        } else {
            mono_i(now)
        };
        self.table.insert(
            path.to_path_buf(),
            Box::new(Tracked {
                provider,
                tail: TailState::new(Stat::of(meta).id),
                feed: Some(Box::new(feed)),
                cold: None,
                last_change,
                warned_at: i64::MIN,
                skew_ms: 0,
            }),
        );
        if mode == Mode::History
            && let Some(later) = self.deferred.as_mut()
        {
            // A first run's history: read on worker threads once the walk is done.
            later.push(path, provider, Stat::of(meta).id, mtime_ms);
            if let Some(t) = self.table.get_mut(path) {
                t.feed = None;
            }
            return;
        }
        match self.resume.as_mut().map(|r| r.remove(path)) {
            Some(line) if mode == Mode::History => {
                let cp = line.and_then(|l| match serde_json::from_str(&l) {
                    Ok(state::store::Line::File(cp)) => Some(cp),
                    _ => None,
                });
                self.read_resumed(path, meta, cp);
            }
            _ => self.read_first(path, mode),
        }
        self.finish_new(path, mtime_ms, now, mode);
    }

    /// A new file's first read; in history, from where its last turn can be read.
    pub(super) fn read_first(&mut self, path: &Path, mode: Mode) {
        if mode == Mode::History {
            self.start_tail_first(path);
        }
        self.read_on(path, mode);
        if mode == Mode::History
            && let Some(t) = self.table.get(path)
        {
            self.counters.history_bytes += t.tail.offset();
        }
    }

    /// What follows a new file's first read: settle what history left pending, keep the
    /// decided ids, and (history) close its handle and send it cold unless recent.
    pub(super) fn finish_new(&mut self, path: &Path, mtime_ms: i64, now: Now, mode: Mode) {
        if mode == Mode::History {
            // A pending answer whose file has been still for a settle period is already
            // complete: `status` at start agrees with `scan`.
            let idle = now.wall.saturating_sub(mtime_ms);
            let live = now.wall.saturating_sub(self.catch_up()).max(self.since);
            let p = path_str(path);
            self.reducer.settle_idle(&p, idle, live, now, &mut self.out);
        }
        // History decides many ids, most too old for the ledger: sift them per file.
        self.record_decided();
        let cold = self.cold_ms();
        if mode == Mode::History
            && let Some(t) = self.table.get_mut(path)
        {
            // History can be thousands of files: no handle stays open, and only the most
            // recently changed keep their projector.
            t.tail.close();
            if mono_i(now) - t.last_change > cold {
                t.go_cold();
                self.reducer.park_path(&path_str(path), now);
            } else {
                self.history_warm.push((t.last_change, path.to_path_buf()));
                if self.history_warm.len() > 2 * HISTORY_WARM {
                    self.history_warm.sort_by_key(|w| std::cmp::Reverse(w.0));
                    for (_, p) in self.history_warm.drain(HISTORY_WARM..) {
                        if let Some(t) = self.table.get_mut(&p) {
                            t.go_cold();
                        }
                    }
                }
            }
        } else if self.table.len() > MAX_OPEN {
            self.enforce_caps(now);
        }
    }

    /// A first history read needs a file's state, not its events (history is silent):
    /// start it at its tail-first restart point instead of its first byte.
    fn start_tail_first(&mut self, path: &Path) {
        if let Some(t) = self.table.get_mut(path)
            && let Some(feed) = crate::tail_first::open_feed(path, t.provider, self.limits.max_line)
        {
            t.feed = Some(Box::new(feed));
        }
    }

    /// Forgets the file's sessions and reads it again from its first byte. Events it
    /// already produced are in the seen-set, so only what is new comes out.
    fn rederive(&mut self, path: &Path, why: Rederive, mode: Mode) {
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
        let Some(t) = self.table.get_mut(path) else {
            return;
        };
        let id = match fs::metadata(path) {
            Ok(m) if m.is_file() => Stat::of(&m).id,
            _ => return self.remove_file(path),
        };
        self.reducer.forget_path(&path_str(path));
        t.cold = None;
        t.feed = Some(Box::new(FileFeed::new(
            path,
            t.provider,
            self.limits.max_line,
        )));
        t.tail = TailState::new(id);
        self.read_on(path, mode);
    }

    /// Reads from the committed position to the end of the file.
    pub(super) fn read_on(&mut self, path: &Path, mode: Mode) {
        self.read_upto(path, mode, None);
    }

    /// Reads from the committed position to the end of the file, or to `limit`.
    pub(super) fn read_upto(&mut self, path: &Path, mode: Mode, limit: Option<u64>) {
        let now = self.clock.now();
        self.make_room(path);
        let Some(t) = self.table.get_mut(path) else {
            return;
        };
        if !t.warm_up(path, self.limits.max_line) {
            return self.rederive(path, Rederive::Reactivated, mode);
        }
        let Some(feed) = t.feed.as_mut() else {
            return;
        };
        let file = match t.tail.handle(path) {
            Ok(Some(f)) => f,
            Ok(None) => return self.rederive(path, Rederive::Replaced, mode),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.remove_file(path),
            Err(e) => return self.read_error(path, &e),
        };
        let reducer = &mut self.reducer;
        let catch_up = i64::try_from(self.limits.catch_up_ms).unwrap_or(i64::MAX);
        if mode == Mode::Live {
            // The bytes changed now: what is recent is judged on the writer's clock.
            let writer_now = now.wall.saturating_sub(t.skew_ms);
            reducer.set_history_before(Some(writer_now.saturating_sub(catch_up)));
        }
        let out = &mut self.out;
        let pos = feed.reader().pos();
        let mut newest = None;
        let mut apply = |src: &crate::reduce::Src, obs: crate::provider::Obs| {
            newest = newest.max(obs.record_ts);
            reducer.apply(src, obs, now, out);
        };
        let res = file.seek(SeekFrom::Start(pos)).and_then(|_| match limit {
            Some(end) => feed.read_to_end(
                &mut io::Read::take(&mut *file, end.saturating_sub(pos)),
                &mut apply,
            ),
            None => feed.read_to_end(file, &mut apply),
        });
        if mode == Mode::Live {
            reducer.set_history_before(Some(now.wall.saturating_sub(catch_up)));
        }
        let before = (t.tail.offset(), t.tail.id());
        let res = res.and_then(|_| t.tail.commit(feed.reader()));
        if let Some(newest) = newest {
            t.skew_ms = t.skew(newest);
        }
        if (t.tail.offset(), t.tail.id()) != before {
            self.pending.mark(path);
        }
        if mode == Mode::Live {
            t.last_change = mono_i(now);
            self.live.insert(path);
        }
        if let Err(e) = res {
            t.tail.close();
            self.read_error(path, &e);
        }
    }

    /// Counts a read error; warns at most once a minute per file (an unreadable live
    /// file is looked at on every poll).
    pub(super) fn read_error(&mut self, path: &Path, e: &io::Error) {
        self.counters.read_errors += 1;
        let now = mono_i(self.clock.now());
        let Some(t) = self.table.get_mut(path) else {
            return;
        };
        if now.saturating_sub(t.warned_at) < 60_000 {
            tracing::debug!(path = %path.display(), error = %e, "Cannot read transcript.");
        } else {
            t.warned_at = now;
            tracing::warn!(path = %path.display(), error = %e, "Cannot read transcript; will retry on change.");
        }
    }

    /// Reads what is left through the open handle (the path may already be gone).
    fn drain(&mut self, path: &Path) {
        let now = self.clock.now();
        let Some(t) = self.table.get_mut(path) else {
            return;
        };
        let (Some(feed), Some(file)) = (t.feed.as_mut(), t.tail.open_handle()) else {
            return;
        };
        let reducer = &mut self.reducer;
        let out = &mut self.out;
        let _ = file
            .seek(SeekFrom::Start(feed.reader().pos()))
            .and_then(|_| feed.read_to_end(file, |src, obs| reducer.apply(src, obs, now, out)));
    }

    /// The file is gone: read what the open handle still holds, then let it go.
    fn remove_file(&mut self, path: &Path) {
        if !self.table.contains_key(path) {
            self.ignored.remove(path);
            return;
        }
        self.drain(path);
        self.table.remove(path);
        self.live.remove(path);
        self.reducer.forget_path(&path_str(path));
        self.counters.deleted += 1;
        self.pending.dirty.remove(path);
        self.pending.removed.push(path_str(path).into_owned());
        tracing::debug!(path = %path.display(), "Transcript gone.");
    }

    /// Stats the live files.
    pub fn poll(&mut self) {
        for path in self.live.due() {
            self.look_file(&path, Mode::Live);
        }
    }

    /// The slow safety net's share: every file's stat, then the live set rebuilt and
    /// what went idle closed.
    pub fn sweep(&mut self) {
        let mut changed = Vec::new();
        for (path, t) in &self.table {
            let same = fs::metadata(path)
                .is_ok_and(|m| m.is_file() && t.tail.compare(&Stat::of(&m)) == Change::Same);
            if !same {
                changed.push(path.clone());
            }
        }
        for path in changed {
            self.look_file(&path, Mode::Live);
        }
        self.tidy();
        let now = self.clock.now();
        super::liveness::sweep(
            self.limits.liveness_after_ms,
            &mut self.reducer,
            now,
            &mut self.out,
        );
    }
}
