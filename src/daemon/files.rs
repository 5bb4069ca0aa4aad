//! The tracked-file table: every transcript the daemon follows, with its tail state and
//! its projector (warm) or the projector's saved context (cold).
//!
//! Owns: the table, the live set, and the caps on open handles and warm projectors
//! (its methods in `caps.rs`). It turns "look at this path" into a stat, then reads on
//! from the committed position, or re-derives the file from its first byte when it was
//! truncated, replaced or rewritten (`look.rs`). A look returns what it read as owned
//! observations ([`Step`]) with a tail-commit token; the core reduces them and hands the
//! token back ([`Files::commit`]). It never touches the reducer, never lists a directory
//! or adds a watch (the watched tree does), and never sends anything.
//!
//! On a restart a file only appended to since its checkpoint is read on from the
//! checkpoint, never from its first byte (`resume.rs`). A file idle for long keeps its
//! context in the same saved form ("cold"), so waking it up costs what was appended,
//! not the whole file; idle for longer still, and not polled, its whole entry goes to
//! the spill beside that context ("frozen", `table.rs`), read back when it changes.

use super::name::FileName;
use super::read::{Commit, Mode, Step};
use super::table::{Got, Table};
use crate::clock::{Clock, Now};
use crate::feed::name_of;
use crate::logging::RateLimit;
use crate::tail::Stat;
use crate::watch::Root;
use crate::watch::tree::Live;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
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

/// What a look at a path found.
pub(super) enum Look {
    Steps(Vec<Step>),
    /// Not tracked yet: the core decides how it is first read ([`Files::admit`]).
    New(fs::Metadata),
}

pub(super) struct Files {
    /// By the file's one shared name ([`FileName`]).
    pub(super) table: Table,
    /// Files stat'ed on every poll.
    pub(super) live: Live,
    pub(super) counters: Counters,
    /// While history is read: the files that kept their projector, to cap them early.
    pub(super) history_warm: Vec<(i64, PathBuf)>,
    /// Candidates that are no transcript (unknown provider, compaction helpers), with
    /// the size they had when looked at: looked at again only if it changes while small.
    pub(super) ignored: HashMap<PathBuf, u64>,
    pub(super) limits: Limits,
    pub(super) clock: Clock,
    /// Files whose handle may be open, least recently used first: every open handle is
    /// in it (entries whose handle was closed since are dropped as they come up), so
    /// its length bounds the open handles at every moment.
    pub(super) handles: lru::LruCache<PathBuf, ()>,
    /// Re-reads of a file truncated again and again log once a minute.
    pub(super) log: RateLimit,
    /// Bumped as the table makes progress, so the watchdog pings only while it does.
    heartbeat: Arc<AtomicU64>,
    /// The databases agents keep their sessions in, followed beside the files.
    pub(super) rows: super::rows::RowTable,
    /// Where cold files' projector contexts go, if anywhere ([`Files::spill_cold`]).
    pub(super) spill: Option<Arc<dyn crate::reduce::Spill>>,
}

impl Files {
    /// For tests: a table of Claude files under `root`, as the daemon's defaults set it
    /// up, with `catch_up_ms` as the catch-up window.
    #[cfg(test)]
    pub fn for_test(root: &Path, catch_up_ms: u64) -> Self {
        Files::new(
            Limits {
                roots: vec![Root {
                    path: root.to_path_buf(),
                    provider: Some(crate::model::ProviderKind::Claude),
                }],
                max_line: 1 << 20,
                max_warm: MAX_WARM,
                catch_up_ms,
                liveness_after_ms: 60_000,
                hang_core_on: None,
                history_threads: 1,
            },
            Clock::start(),
        )
    }

    pub fn new(limits: Limits, clock: Clock) -> Self {
        Files {
            table: Table::default(),
            live: Live::default(),
            counters: Counters::default(),
            history_warm: Vec::new(),
            ignored: HashMap::new(),
            limits,
            clock,
            handles: lru::LruCache::unbounded(),
            log: RateLimit::new(std::time::Duration::from_secs(60)),
            heartbeat: Arc::new(AtomicU64::new(0)),
            rows: super::rows::RowTable::default(),
            spill: None,
        }
    }

    /// Cold files keep their projector context in `spill`, not in memory.
    pub fn spill_cold(&mut self, spill: Arc<dyn crate::reduce::Spill>) {
        self.spill = Some(spill);
    }

    /// The database root a change to `path` (the database or its `-wal`) is about, for a
    /// database not followed yet.
    pub fn database_root_of(&self, path: &Path) -> Option<PathBuf> {
        let name = path.file_name()?.to_str()?;
        let db = match name.strip_suffix("-wal") {
            Some(stem) => path.with_file_name(stem),
            None => path.to_owned(),
        };
        let root = self.limits.roots.iter().any(|r| r.path == db);
        (root && self.row_provider(&db).is_some() && db.is_file()).then_some(db)
    }

    /// The agent of `path` if its sessions are rows of a database (`path` is one): the
    /// root's agent, else the one whose database name it has.
    pub fn row_provider(&self, path: &Path) -> Option<crate::model::ProviderKind> {
        let root = self
            .limits
            .roots
            .iter()
            .filter(|r| path.starts_with(&r.path))
            .max_by_key(|r| r.path.as_os_str().len())
            .and_then(|r| r.provider);
        let kind = root.or_else(|| crate::provider::detect(path, b""))?;
        kind.descriptor().rows().is_some().then_some(kind)
    }

    pub fn beat(&self) {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    pub fn heartbeat(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.heartbeat)
    }

    pub fn set_heartbeat(&mut self, beat: Arc<AtomicU64>) {
        self.heartbeat = beat;
    }

    pub fn now(&self) -> Now {
        self.clock.now()
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.table.contains_key(path)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// How many tracked files are frozen (their entry in the spill).
    pub fn frozen(&self) -> usize {
        self.table.frozen_len()
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// No file needs polling.
    pub fn none_live(&self) -> bool {
        self.live.is_empty()
    }

    /// The name a file is known by: for a tracked file the table's own, shared with every
    /// holder (see `name.rs`), else a new one.
    pub fn name(&self, path: &Path) -> Arc<str> {
        match self.table.key(path) {
            Some(k) => k.name().clone(),
            None => name_of(path),
        }
    }

    /// `name` as the table holds it, when it names a tracked file: what a read carries is
    /// its projector's copy, which goes when the projector does.
    pub fn shared_name(&self, name: Arc<str>) -> Arc<str> {
        match self.table.key(Path::new(&*name)) {
            Some(k) if **k.name() == *name => k.name().clone(),
            _ => name,
        }
    }

    /// The entry of a tracked file (a frozen one read back).
    pub fn tracked(&self, path: &Path) -> Option<Got<'_>> {
        self.table.get(path)
    }

    /// The tracked files `dir` holds directly that are not in `seen`.
    pub fn unlisted_in(&self, dir: &Path, seen: &HashSet<PathBuf>) -> Vec<PathBuf> {
        self.table
            .keys()
            .filter(|p| p.parent() == Some(dir) && !seen.contains(p.path()))
            .map(|p| p.to_path_buf())
            .collect()
    }

    /// The tracked files anywhere under `dir`.
    pub fn under(&self, dir: &Path) -> Vec<PathBuf> {
        self.table
            .keys()
            .filter(|p| p.starts_with(dir))
            .map(|p| p.to_path_buf())
            .collect()
    }

    pub fn catch_up(&self) -> i64 {
        i64::try_from(self.limits.catch_up_ms).unwrap_or(i64::MAX)
    }

    pub(super) fn cold_ms(&self) -> i64 {
        COLD_MS.max(self.catch_up().saturating_add(60_000))
    }

    /// Where the committed tail of `path` stands (bytes).
    pub(super) fn offset(&self, path: &Path) -> Option<u64> {
        self.table.get(path).map(|t| t.tail.offset())
    }

    /// Commits the tail of a read whose observations are reduced; true if the file's
    /// checkpoint moved.
    pub(super) fn commit(&mut self, c: Commit) -> bool {
        let Some(t) = self.table.get_mut(c.path.as_path()) else {
            return false;
        };
        let before = (t.tail.offset(), t.tail.id());
        if let Some(tail) = c.tail {
            t.tail = tail;
        }
        let res = c.res.and_then(|()| match t.feed.as_ref() {
            Some(feed) => t.tail.commit(feed.reader()),
            None => Ok(()),
        });
        if let Some(newest) = c.newest {
            t.skew_ms = t.skew(newest);
        }
        let moved = (t.tail.offset(), t.tail.id()) != before;
        if c.mode == Mode::Live {
            t.last_change = mono_i(c.now);
            self.live.insert(&c.path);
        }
        if let Err(e) = res {
            t.tail.close();
            self.read_error(&c.path, &e);
        }
        if let Some(start) = c.count_from
            && let Some(t) = self.table.get(c.path.as_path())
        {
            self.counters.history_bytes += t.tail.offset().saturating_sub(start);
        }
        moved
    }

    /// Counts a read error; warns at most once a minute per file (an unreadable live
    /// file is looked at on every poll).
    pub(super) fn read_error(&mut self, path: &Path, e: &io::Error) {
        self.counters.read_errors += 1;
        let now = mono_i(self.clock.now()) / 1000;
        let Some(t) = self.table.get_mut(path) else {
            return;
        };
        if now.saturating_sub(i64::from(t.warned_s)) < 60 {
            tracing::debug!(path = %path.display(), error = %e, "Cannot read transcript.");
        } else {
            t.warned_s = i32::try_from(now).unwrap_or(i32::MAX);
            tracing::warn!(path = %path.display(), error = %e, "Cannot read transcript; will retry on change.");
        }
    }

    /// The live files due a stat.
    pub fn due(&mut self) -> Vec<PathBuf> {
        self.live.due()
    }

    /// Every tracked file's name, for the slow safety net, which stats them a few at a
    /// time (shared names: a pointer each).
    pub fn names(&self) -> Vec<FileName> {
        self.table.keys().cloned().collect()
    }

    /// Whether the file `name` is not as its tail state last saw it (gone, replaced,
    /// grown, cut or touched); false for a file no longer tracked.
    pub fn changed_one(&self, name: &FileName) -> bool {
        match fs::metadata(name.path()) {
            Ok(m) if m.is_file() => self.table.same_stat(name, &Stat::of(&m)) == Some(false),
            _ => self.table.contains_key(name),
        }
    }
}
