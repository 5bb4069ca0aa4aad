//! The core: the one owner of every file's tail state, the projectors and the reducer.
//!
//! It turns hints into looks: stat the path, compare with the tail state, then read on
//! from the committed position, or re-derive the file from its first byte when it was
//! truncated, replaced or rewritten. Reads feed the reducer; its events go to the sink
//! in one batch per wake-up.
//!
//! With durable state (issue 5) it also restores where each file was committed, with
//! the projector's context and the reducer's sessions there: on a restart a file only
//! appended to since its checkpoint is read on from the checkpoint, never from its
//! first byte; the restored ledger keeps ids already decided silent. After each batch
//! it sends a delta (the checkpoints it changed, the ids it decided) behind the events
//! it produced. A file idle for long keeps its context in the same saved form
//! ("cold"), so waking it up costs what was appended, not the whole file.

use super::sink::Out;
use super::{Settings, WatcherMode};
use crate::clock::{Now, format_rfc3339, wall_now};
use crate::error::Error;
use crate::feed::FileFeed;
use crate::model::{Event, EventKind, ProviderKind};
use crate::provider::content_hash;
use crate::reduce::{Reducer, dedup_capacity};
use crate::state::{self, Checkpoint, Decision, Delta, Loaded, Resume, Status};
use crate::tail::{Change, Stat, TailState};
use crate::watch::discover::{classify, is_candidate, skip_dir};
use crate::watch::native::{Native, WatchError};
use crate::watch::poll::list_dir;
use crate::watch::{Hint, HintRx, HintTx, Root};
use crossbeam_channel::{Receiver, select};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A file changed this recently (monotonic ms) is live: polled every interval.
const LIVE_MS: i64 = 10 * 60_000;
/// A file with an open turn stays live this long after its last change.
const OPEN_TURN_MS: i64 = 6 * 3_600_000;
/// Handles of files idle this long are closed (reopened on change).
const HANDLE_IDLE_MS: i64 = 5 * 60_000;
/// At most this many open transcript handles.
const MAX_OPEN: usize = 256;
/// Files idle this long drop their projector (re-derived from content on change), so
/// memory does not grow with the number of files on disk. Never shorter than the
/// catch-up window, so a re-derive cannot page anyone about a turn it already knew.
const COLD_MS: i64 = 30 * 60_000;
/// At most this many files keep a projector.
const MAX_WARM: usize = 64;
/// At most this many files present at start keep their projector (the most recently
/// changed); others warm up on their first change, with one re-read.
const HISTORY_WARM: usize = 16;
/// At most this many files are polled as live; beyond it, the sweep bounds the delay.
const MAX_LIVE: usize = 1024;
/// The sessions changed since the last publish go to the `status` keeper at most this
/// often (a session changing many times in between is sent once); a batch after a quiet
/// spell publishes at once.
const VIEWS_EVERY: Duration = Duration::from_millis(100);
/// Most hints handled in one batch before events are flushed.
const MAX_BATCH: usize = 8192;
/// Most checkpoints in one delta, so a save of every file never builds them all at once.
const SAVE_CHUNK: usize = 256;
/// At most this many deltas wait for the state writer beyond the one being sent.
const SAVES_IN_FLIGHT: u64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
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
struct Counters {
    rederived: HashMap<&'static str, u64>,
    deleted: u64,
    watch_limit: u64,
    sweeps: u64,
    sink_waits: u64,
    /// Files present at start continued from their checkpoint, and read from their
    /// first byte (new, changed while down, or no saved context).
    resumed: u64,
    reread: u64,
    /// Bytes read while going through the files present at start.
    history_bytes: u64,
    read_errors: u64,
}

struct Tracked {
    provider: ProviderKind,
    tail: TailState,
    /// `None` while cold. Boxed: most files are cold, and a `None` should cost a
    /// pointer, not a whole feed.
    feed: Option<Box<FileFeed>>,
    /// While cold: the projector's context at the committed offset, as saved.
    cold: Option<Box<str>>,
    /// Monotonic ms of the last change seen; negative for changes before the start.
    last_change: i64,
    /// When a read error was last logged as a warning (at most one a minute per file).
    warned_at: i64,
}

impl Tracked {
    /// Drops the projector, keeping its context in saved form.
    fn go_cold(&mut self) {
        if let Some(f) = self.feed.take() {
            self.cold = Some(f.save().into_boxed_str());
        }
    }

    /// Takes the projector back from its saved context at the committed offset; false if
    /// there is none (the file is then re-read from its first byte).
    fn warm_up(&mut self, path: &Path, max_line: usize) -> bool {
        if self.feed.is_some() {
            return true;
        }
        let Some(saved) = self.cold.take() else {
            return false;
        };
        let at = (self.tail.offset(), self.tail.line_no());
        self.feed = FileFeed::restore(path, self.provider, max_line, at, &saved).map(Box::new);
        self.feed.is_some()
    }
}

struct DirState {
    mtime_ns: i128,
    /// The listing may have missed a change made within the same timestamp tick as the
    /// one it saw (the mtime was too recent when it was listed): list again next time.
    racy: bool,
    /// Covered by a native watch.
    watched: bool,
}

/// A directory listed less than this long after its last change is listed again on the
/// next look, whatever its mtime says (file timestamps are coarse).
const RACY_NS: i128 = 2_000_000_000;

fn wall_ns() -> i128 {
    i128::from(wall_now()) * 1_000_000
}

struct RootState {
    root: Root,
    /// New directories under this root get native watches (false with `--watcher
    /// poll`, and after the watch limit was hit).
    native: bool,
    exists: bool,
}

/// Milliseconds since the daemon started, and the wall clock.
struct Clock {
    start: Instant,
}

impl Clock {
    fn now(&self) -> Now {
        Now {
            mono: u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX),
            wall: wall_now(),
        }
    }

    fn instant(&self, mono: u64) -> Instant {
        self.start + Duration::from_millis(mono)
    }
}

pub struct Core {
    settings: Settings,
    clock: Clock,
    reducer: Reducer,
    roots: Vec<RootState>,
    dirs: HashMap<PathBuf, DirState>,
    files: HashMap<PathBuf, Tracked>,
    /// Files stat'ed on every poll: changed lately, or with a turn still open.
    live: HashSet<PathBuf>,
    /// How many known directories have no native watch (polled for new entries).
    unwatched_dirs: usize,
    /// While history is read: the files that kept their projector, to cap them early.
    history_warm: Vec<(i64, PathBuf)>,
    /// Candidates that are no transcript (unknown provider, compaction helpers), with
    /// the size they had when looked at: looked at again only if it changes while small.
    ignored: HashMap<PathBuf, u64>,
    native: Option<Native>,
    hints: HintRx,
    events: mpsc::Sender<Out>,
    out: Vec<Event>,
    /// Checkpoints of the last run, while the files present at start are read; `None`
    /// on a first run (or after the state was lost): history is silent then.
    /// Raw `file` lines, parsed when their file is found.
    resume: Option<HashMap<PathBuf, Box<str>>>,
    status: Status,
    /// Ids decided since the last delta, for the ledger.
    decided: Vec<Decision>,
    /// Ids decided by an earlier run (ledger and journal): never emitted again, even if
    /// the reducer's bounded seen-set forgot them.
    preloaded: HashSet<String>,
    /// Files whose checkpoint or sessions changed since the last delta.
    dirty: HashSet<PathBuf>,
    /// Files no longer tracked since the last delta.
    removed: Vec<String>,
    /// When the first run began: records older than that are history.
    since: i64,
    /// Deltas sent, and how far the state writer got with them.
    saves_sent: u64,
    save_progress: std::sync::Arc<state::saver::Progress>,
    sink_gone: bool,
    counters: Counters,
    run_id: String,
    /// Set when a stop request arrived while history was being read.
    stop_requested: bool,
    /// Where the sessions that changed go after each batch (for `status`).
    views: Option<crate::views::ChangeTx>,
    /// Tells the poll ticker whether any file needs polling.
    poll_gate: Option<tokio::sync::watch::Sender<bool>>,
    /// History was read: from now on the state may be saved (a stop during the read
    /// keeps the previous state, which the next run redoes from).
    ready: bool,
    /// When the views were last published.
    views_at: Option<Instant>,
    /// Bumped as the core makes progress, so the watchdog pings only while it does.
    heartbeat: Arc<AtomicU64>,
    /// The longest the core sleeps, idle or not, between two beats.
    beat_every: Duration,
}

fn mono_i(now: Now) -> i64 {
    i64::try_from(now.mono).unwrap_or(i64::MAX)
}

fn path_str(path: &Path) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}

impl Core {
    pub fn new(
        settings: &Settings,
        hint_tx: HintTx,
        hints: HintRx,
        events: mpsc::Sender<Out>,
        loaded: Loaded,
    ) -> Result<Self, Error> {
        let native = match settings.watcher {
            WatcherMode::Poll => None,
            mode => match Native::new(hint_tx, settings.drop_native_events, settings.max_watches) {
                Ok(n) => Some(n),
                Err(e) if mode == WatcherMode::Auto => {
                    tracing::warn!(error = %e, "Native file watcher unavailable; polling only.");
                    None
                }
                Err(e) => {
                    return Err(Error::Usage(format!(
                        "--watcher native: cannot start the native file watcher: {e} \
                         (try --watcher poll)"
                    )));
                }
            },
        };
        let roots = settings
            .roots
            .iter()
            .map(|r| RootState {
                root: r.clone(),
                native: native.is_some(),
                exists: false,
            })
            .collect();
        let start = wall_now();
        let run_id = format!("{}:{start}", std::process::id());
        let mut reducer = Reducer::new(settings.settle_ms, dedup_capacity());
        reducer.record_decided();
        let since = loaded.base.as_ref().map_or(0, |b| b.meta.since);
        let (resume, mut preloaded) = match loaded.base {
            Some(base) => {
                let mut ledger = base.ledger;
                ledger.prune(start);
                let mut ids: HashSet<String> = ledger.ids().map(str::to_owned).collect();
                ids.extend(base.decided.into_iter().map(|d| d.id));
                let files = base
                    .files
                    .into_iter()
                    .map(|(p, line)| (PathBuf::from(p), line))
                    .collect();
                (Some(files), ids)
            }
            None => (None, HashSet::new()),
        };
        preloaded.extend(loaded.journal.ids);
        for id in &preloaded {
            reducer.mark_seen(id);
        }
        Ok(Core {
            settings: settings.clone(),
            clock: Clock {
                start: Instant::now(),
            },
            reducer,
            roots,
            dirs: HashMap::new(),
            files: HashMap::new(),
            live: HashSet::new(),
            unwatched_dirs: 0,
            history_warm: Vec::new(),
            ignored: HashMap::new(),
            native,
            hints,
            events,
            out: Vec::new(),
            sink_gone: false,
            resume,
            status: loaded.status,
            // What the journals recorded is decided too, until a later state has it.
            decided: loaded.journal.decided,
            preloaded,
            dirty: HashSet::new(),
            removed: Vec::new(),
            saves_sent: 0,
            since,
            save_progress: loaded.progress,
            counters: Counters::default(),
            run_id,
            stop_requested: false,
            views: None,
            poll_gate: None,
            ready: false,
            views_at: None,
            heartbeat: Arc::new(AtomicU64::new(0)),
            beat_every: super::service::HEARTBEAT_EVERY,
        })
    }

    /// Sends the sessions that changed to `tx` after each batch (coalesced).
    pub fn with_views(mut self, tx: crate::views::ChangeTx) -> Self {
        self.reducer.track_changes();
        self.views = Some(tx);
        self
    }

    /// Bumps `beat` as the core makes progress, waking up at least every `every`.
    pub fn with_heartbeat(mut self, beat: Arc<AtomicU64>, every: Duration) -> Self {
        self.heartbeat = beat;
        self.beat_every = every;
        self
    }

    fn beat(&self) {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    /// Tells `tx` whether polling is needed (so the ticker can sleep when it is not).
    pub fn with_poll_gate(mut self, tx: tokio::sync::watch::Sender<bool>) -> Self {
        self.poll_gate = Some(tx);
        self
    }

    /// Polling is needed while a file is live or a directory has no native watch.
    fn update_poll_gate(&self) {
        if let Some(tx) = &self.poll_gate {
            let wanted = !self.live.is_empty() || self.unwatched_dirs > 0;
            tx.send_if_modified(|w| std::mem::replace(w, wanted) != wanted);
        }
    }

    /// Reads history, emits `daemon_ready`, then handles hints until told to stop.
    pub fn run(mut self, stop: &Receiver<()>) -> Result<(), Error> {
        let started = Instant::now();
        self.reducer.set_history_before(Some(i64::MAX));
        for i in 0..self.roots.len() {
            let path = self.roots[i].root.path.clone();
            self.add_root(i, &path, Mode::History, Some(stop));
            if self.stop_requested {
                return self.stopping();
            }
        }
        // On a restart, what the files gained while we were down (within the catch-up
        // window) comes out after daemon_ready; on a first run history is silent.
        let caught_up = match self.resume.take() {
            Some(gone) => {
                // Checkpoints of files no longer there.
                self.removed
                    .extend(gone.into_keys().map(|p| path_str(&p).into_owned()));
                std::mem::take(&mut self.out)
            }
            None => {
                self.out.clear();
                Vec::new()
            }
        };
        let mut warm = std::mem::take(&mut self.history_warm);
        warm.sort_by_key(|w| std::cmp::Reverse(w.0));
        for (_, p) in warm.into_iter().skip(HISTORY_WARM) {
            if let Some(t) = self.files.get_mut(&p) {
                t.go_cold();
            }
        }
        let now = self.clock.now();
        self.rebuild_live(now);
        self.enforce_caps(now);
        tracing::info!(
            files = self.files.len(),
            dirs = self.dirs.len(),
            sessions = self.reducer.session_count(),
            resumed = self.counters.resumed,
            reread = self.counters.reread,
            bytes = self.counters.history_bytes,
            ms = started.elapsed().as_millis(),
            "History read; going live."
        );
        self.lifecycle(EventKind::DaemonReady);
        match &self.status {
            Status::FirstRun | Status::Restored => {}
            Status::FellBack(why) => {
                tracing::warn!(reason = %why, "The current state generation is unusable; using the previous one.");
            }
            Status::Lost(why) => {
                tracing::warn!(reason = %why, "No usable state: starting from a first-run baseline (history is silent).");
                self.out.push(state::anomaly(
                    "state_lost",
                    format!(
                        "no usable state in {} ({why}); history was treated as already \
                         seen, so a turn that ended while baton was down may go unreported",
                        self.settings.state_dir.display()
                    ),
                    &self.run_id,
                ));
            }
        }
        self.out.extend(caught_up);
        self.ready = true;
        self.flush();
        self.save();
        // The first live batch publishes at once, however soon it comes.
        self.views_at = None;
        self.update_poll_gate();
        while !self.sink_gone {
            self.beat();
            let settle = self
                .reducer
                .next_deadline()
                .map(|d| self.clock.instant(d))
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            // Idle or not, wake up in time for the next beat.
            let deadline = self
                .views_due()
                .map_or(settle, |v| v.min(settle))
                .min(Instant::now() + self.beat_every);
            let first = select! {
                recv(self.hints.rx) -> h => match h {
                    Ok(h) => Some(h),
                    Err(_) => break,
                },
                recv(stop) -> _ => break,
                default(deadline.saturating_duration_since(Instant::now())) => None,
            };
            self.batch(first, settle);
            self.save();
        }
        self.stopping()
    }

    /// Handles one hint and everything queued behind it, flushing events as soon as
    /// they exist, then fires the settle timers if `deadline` has passed.
    fn batch(&mut self, first: Option<Hint>, deadline: Instant) {
        let mut paths: Vec<(PathBuf, bool)> = Vec::new();
        let mut index: HashMap<PathBuf, usize> = HashMap::new();
        let (mut poll, mut sweep) = (false, false);
        let mut next = first;
        let mut n = 0;
        while let Some(h) = next {
            match h {
                Hint::Path { path, maybe_dir } => match index.get(&path) {
                    Some(&i) => paths[i].1 |= maybe_dir,
                    None => {
                        index.insert(path.clone(), paths.len());
                        paths.push((path, maybe_dir));
                    }
                },
                Hint::Poll => poll = true,
                Hint::Sweep => sweep = true,
            }
            n += 1;
            next = if n < MAX_BATCH {
                self.hints.rx.try_recv().ok()
            } else {
                None
            };
        }
        if self.hints.take_rescan() {
            sweep = true;
        }
        let now = self.clock.now();
        self.reducer
            .set_history_before(Some(now.wall.saturating_sub(self.catch_up())));
        for (path, maybe_dir) in paths {
            self.look(&path, maybe_dir);
        }
        self.flush();
        if sweep {
            self.sweep();
        } else if poll {
            self.poll();
        }
        // Ticking walks every session: only when a deadline is due (new candidates made
        // in this batch are due a settle period from now).
        if Instant::now() >= deadline {
            let now = self.clock.now();
            self.reducer.tick(now, &mut self.out);
        }
        self.flush();
        self.publish_views(false);
        self.update_poll_gate();
    }

    fn catch_up(&self) -> i64 {
        i64::try_from(self.settings.catch_up_ms).unwrap_or(i64::MAX)
    }

    fn cold_ms(&self) -> i64 {
        COLD_MS.max(self.catch_up().saturating_add(60_000))
    }

    fn flush(&mut self) {
        self.record_decided();
        if self.out.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.out);
        if !self.preloaded.is_empty() {
            batch.retain(|e| !self.preloaded.contains(&e.id));
        }
        if batch.is_empty() {
            return;
        }
        // A quiet completion changes a session with no read: its file's state is due.
        for ev in &batch {
            if let Some(p) = &ev.path
                && let Some((path, _)) = self.files.get_key_value(Path::new(p))
                && !self.dirty.contains(path)
            {
                self.dirty.insert(path.clone());
            }
        }
        self.send(Out::Batch(batch));
        // After the events are on their way, so the views never delay them.
        self.publish_views(false);
    }

    /// Sends the views of the sessions changed since the last time, unless that was less
    /// than [`VIEWS_EVERY`] ago (then the core wakes up for it when it is due). Costs
    /// what changed: the keeper holds the rest.
    fn publish_views(&mut self, force: bool) {
        if self.views.is_none()
            || (!force && self.views_due().is_none_or(|t| t > Instant::now()))
            || !self.reducer.has_changes()
        {
            return;
        }
        let changes = self.reducer.take_changes();
        if let Some(tx) = &self.views
            && tx.send(changes).is_err()
        {
            // The keeper is gone (shutdown): `status` no longer needs views.
            self.views = None;
        }
        self.views_at = Some(Instant::now());
    }

    /// When pending views are due.
    fn views_due(&self) -> Option<Instant> {
        if self.views.is_none() || !self.reducer.has_changes() {
            return None;
        }
        Some(self.views_at.map_or_else(Instant::now, |t| t + VIEWS_EVERY))
    }

    /// Waits for room in the sink's queue rather than drop anything: the stream is the
    /// product, and durable state must never run ahead of it.
    fn send(&mut self, msg: Out) {
        let msg = match self.events.try_send(msg) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.sink_gone = true;
                return;
            }
            Err(mpsc::error::TrySendError::Full(msg)) => msg,
        };
        self.counters.sink_waits += 1;
        if self.counters.sink_waits.is_power_of_two() {
            tracing::warn!(
                waits = self.counters.sink_waits,
                "Event sink is not keeping up; waiting for it."
            );
        }
        // Waiting on the sink is not being hung: keep the watchdog fed meanwhile.
        let mut msg = msg;
        let mut pause = Duration::from_micros(100);
        loop {
            match self.events.try_send(msg) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.sink_gone = true;
                    return;
                }
                Err(mpsc::error::TrySendError::Full(m)) => msg = m,
            }
            self.beat();
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    /// Keeps the ids the reducer decided for the next delta (the ledger's).
    fn record_decided(&mut self) {
        let (now, catch_up) = (wall_now(), self.catch_up());
        for d in self.reducer.take_decided() {
            if state::ledger::worth_keeping(d.record_ts, now, catch_up) {
                self.decided
                    .push(Decision::new(&d.session, d.id, d.record_ts));
            }
        }
    }

    /// A file's checkpoint with its reading context, as of `now`.
    fn checkpoint(&self, path: &Path, t: &Tracked, now: Now) -> Checkpoint {
        let path_s = path_str(path);
        let projector = match (&t.feed, &t.cold) {
            (Some(f), _) => Some(f.save()),
            (None, Some(c)) => Some(c.to_string()),
            (None, None) => None,
        };
        Checkpoint {
            path: path_s.clone().into_owned(),
            dev: t.tail.id().dev,
            ino: t.tail.id().ino,
            offset: t.tail.offset(),
            line: t.tail.line_no(),
            marker: t.tail.marker(),
            resume: projector.map(|projector| Resume {
                provider: t.provider,
                projector,
                sessions: self.reducer.save_path(&path_s, now),
            }),
        }
    }

    /// Sends what changed since the last delta, in pieces of at most [`SAVE_CHUNK`]
    /// files (after the first run's history read that is every file). It queues behind
    /// the events already sent, so the state writer gets it only once they are
    /// delivered.
    fn save(&mut self) {
        self.record_decided();
        if self.dirty.is_empty() && self.removed.is_empty() && self.decided.is_empty() {
            return;
        }
        let now = self.clock.now();
        let dirty: Vec<PathBuf> = self.dirty.drain().collect();
        let mut first = true;
        for chunk in dirty.chunks(SAVE_CHUNK) {
            let files = chunk
                .iter()
                .filter_map(|p| self.files.get(p).map(|t| self.checkpoint(p, t, now)))
                .collect();
            let mut delta = Delta {
                files,
                ..Delta::default()
            };
            if std::mem::take(&mut first) {
                delta.removed = std::mem::take(&mut self.removed);
                delta.decided = std::mem::take(&mut self.decided);
            }
            self.send_save(delta);
        }
        if first {
            let delta = Delta {
                removed: std::mem::take(&mut self.removed),
                decided: std::mem::take(&mut self.decided),
                ..Delta::default()
            };
            self.send_save(delta);
        }
    }

    /// Sends a delta once fewer than [`SAVES_IN_FLIGHT`] are on their way to the state
    /// writer: after a first run's history read the deltas hold every file, and queued
    /// all at once they would all be in memory at once.
    fn send_save(&mut self, delta: Delta) {
        let waited = Instant::now();
        while !self.sink_gone
            && self.saves_sent
                > self.save_progress.received.load(Ordering::Acquire) + SAVES_IN_FLIGHT
            && waited.elapsed() < Duration::from_secs(10)
        {
            self.beat();
            std::thread::sleep(Duration::from_millis(1));
        }
        self.saves_sent += 1;
        self.send(Out::Save(Box::new(delta)));
    }

    fn lifecycle(&mut self, kind: EventKind) {
        let now = wall_now();
        let id = content_hash(&[
            b"lifecycle",
            kind.as_str().as_bytes(),
            self.run_id.as_bytes(),
        ]);
        self.out
            .push(Event::lifecycle(kind, format_rfc3339(now), id));
    }

    fn stopping(mut self) -> Result<(), Error> {
        if self.ready {
            let now = self.clock.now();
            self.reducer.tick(now, &mut self.out);
        } else {
            self.out.clear();
        }
        self.lifecycle(EventKind::DaemonStopping);
        self.flush();
        self.publish_views(true);
        if self.ready {
            self.save();
        }
        let c = &self.counters;
        tracing::info!(
            files = self.files.len(),
            sweeps = c.sweeps,
            rederived = ?c.rederived,
            deleted = c.deleted,
            watch_limit_hits = c.watch_limit,
            hint_overflows = self.hints.stats.overflow.load(Ordering::Relaxed),
            watcher_rescans = self.hints.stats.rescans.load(Ordering::Relaxed),
            native_events_dropped_by_test_hook = self.hints.stats.dropped_by_hook.load(Ordering::Relaxed),
            sink_waits = c.sink_waits,
            read_errors = c.read_errors,
            "Stopped."
        );
        Ok(())
    }

    /// The root a path belongs to (the deepest one containing it).
    fn root_of(&self, path: &Path) -> Option<usize> {
        self.roots
            .iter()
            .enumerate()
            .filter(|(_, r)| path.starts_with(&r.root.path))
            .max_by_key(|(_, r)| r.root.path.as_os_str().len())
            .map(|(i, _)| i)
    }

    fn add_root(&mut self, i: usize, path: &Path, mode: Mode, stop: Option<&Receiver<()>>) {
        match fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                self.roots[i].exists = true;
                self.scan_tree(path.to_path_buf(), mode, None, stop);
            }
            Ok(m) if m.is_file() => {
                self.roots[i].exists = true;
                if self.roots[i].native
                    && let Some(n) = self.native.as_mut()
                {
                    let _ = n.watch(path);
                }
                self.look_file(path, mode);
            }
            _ => {
                if !self.roots[i].exists && mode == Mode::History {
                    tracing::info!(path = %path.display(), "Root does not exist (yet); looked for on every sweep.");
                }
                self.roots[i].exists = false;
            }
        }
    }

    /// Adds a native watch on `dir` if its root is watched natively.
    fn ensure_watch(&mut self, root: usize, dir: &Path) -> bool {
        if !self.roots[root].native {
            return false;
        }
        let Some(native) = self.native.as_mut() else {
            return false;
        };
        match native.watch(dir) {
            Ok(()) => true,
            Err(WatchError::Limit) => {
                self.counters.watch_limit += 1;
                self.roots[root].native = false;
                tracing::warn!(
                    root = %self.roots[root].root.path.display(),
                    dir = %dir.display(),
                    watch_limit_hits = self.counters.watch_limit,
                    "The OS limit on file watches is reached; this root falls back to polling \
                     (raise fs.inotify.max_user_watches to restore instant updates)."
                );
                false
            }
            Err(WatchError::Gone) => false,
            Err(WatchError::Other(e)) => {
                tracing::warn!(dir = %dir.display(), error = %e, "Cannot watch directory; it is polled.");
                false
            }
        }
    }

    /// Lists `top` and every new directory below it, each watched *before* it is
    /// listed (a file created in between is seen by one or the other). Known
    /// subdirectories have their own checks. New transcripts are read; every transcript
    /// listed lands in `seen`.
    fn scan_tree(
        &mut self,
        top: PathBuf,
        mode: Mode,
        mut seen: Option<&mut HashSet<PathBuf>>,
        stop: Option<&Receiver<()>>,
    ) {
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            if stop.is_some_and(|s| s.try_recv().is_ok()) {
                self.stop_requested = true;
                return;
            }
            let Some(root) = self.root_of(&dir) else {
                continue;
            };
            if !self.dirs.contains_key(&dir) {
                let watched = self.ensure_watch(root, &dir);
                if !watched {
                    self.unwatched_dirs += 1;
                }
                self.dirs.insert(
                    dir.clone(),
                    DirState {
                        mtime_ns: i128::MIN,
                        racy: true,
                        watched,
                    },
                );
            }
            // Stat before listing: a change during the listing shows on the next look.
            let mtime = match fs::metadata(&dir) {
                Ok(m) if m.is_dir() => Stat::of(&m).mtime_ns,
                _ => {
                    self.remove_dir_tree(&dir);
                    continue;
                }
            };
            let listing = match list_dir(&dir, self.roots[root].root.provider) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "Cannot list directory.");
                    continue;
                }
            };
            if let Some(d) = self.dirs.get_mut(&dir) {
                d.mtime_ns = mtime;
                d.racy = wall_ns() - mtime < RACY_NS;
            }
            for sub in listing.dirs {
                // Another root's directory is that root's business.
                if self.roots.iter().any(|r| r.root.path == sub) {
                    continue;
                }
                if !self.dirs.contains_key(&sub) {
                    stack.push(sub);
                }
            }
            for (path, meta) in listing.files {
                self.beat();
                if let Some(seen) = seen.as_deref_mut() {
                    seen.insert(path.clone());
                }
                if !self.files.contains_key(&path) {
                    self.track_new(&path, &meta, mode);
                }
                if mode == Mode::History && self.resume.is_none() {
                    self.out.clear();
                }
            }
        }
    }

    /// A hint: something happened at `path`.
    fn look(&mut self, path: &Path, maybe_dir: bool) {
        if self.files.contains_key(path) {
            self.look_file(path, Mode::Live);
            return;
        }
        if self.dirs.contains_key(path) {
            self.look_dir(path);
            return;
        }
        let Some(root) = self.root_of(path) else {
            return;
        };
        if is_candidate(path, self.roots[root].root.provider) {
            self.look_file(path, Mode::Live);
        } else if maybe_dir
            && !skip_dir(path)
            && fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        {
            self.scan_tree(path.to_path_buf(), Mode::Live, None, None);
        }
    }

    /// A known directory changed: gone, or re-list it (and look at the files it
    /// listed no longer).
    fn look_dir(&mut self, dir: &Path) {
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {
                let mut seen = HashSet::new();
                self.scan_tree(dir.to_path_buf(), Mode::Live, Some(&mut seen), None);
                let gone: Vec<PathBuf> = self
                    .files
                    .keys()
                    .filter(|p| p.parent() == Some(dir) && !seen.contains(*p))
                    .cloned()
                    .collect();
                for p in gone {
                    self.look_file(&p, Mode::Live);
                }
            }
            _ => self.remove_dir_tree(dir),
        }
    }

    fn remove_dir_tree(&mut self, dir: &Path) {
        let gone: Vec<PathBuf> = self
            .dirs
            .keys()
            .filter(|d| d.starts_with(dir))
            .cloned()
            .collect();
        for d in gone {
            let Some(state) = self.dirs.remove(&d) else {
                continue;
            };
            if !state.watched {
                self.unwatched_dirs -= 1;
            } else if let Some(n) = self.native.as_mut() {
                n.unwatch(&d);
            }
        }
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        for p in gone {
            self.look_file(&p, Mode::Live);
        }
        if let Some(i) = self.roots.iter().position(|r| r.root.path == dir) {
            self.roots[i].exists = false;
        }
    }

    /// Stats a transcript path and brings its state up to date.
    fn look_file(&mut self, path: &Path, mode: Mode) {
        self.beat();
        if self
            .settings
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
        let stat = Stat::of(&meta);
        let Some(t) = self.files.get_mut(path) else {
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
            Change::Changed => {
                if !t.warm_up(path, self.settings.max_line) {
                    return self.rederive(path, Rederive::Reactivated, mode);
                }
                match t.tail.marker_matches(path) {
                    Ok(true) => self.read_on(path, mode),
                    Ok(false) => self.rederive(path, Rederive::Rewritten, mode),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => self.remove_file(path),
                    Err(e) => self.read_error(path, &e),
                }
            }
        }
    }

    fn track_new(&mut self, path: &Path, meta: &fs::Metadata, mode: Mode) {
        let size = meta.len();
        if let Some(&seen_at) = self.ignored.get(path)
            && (seen_at == u64::MAX || seen_at == size || seen_at >= 64 * 1024)
        {
            return;
        }
        let Some(root) = self.root_of(path) else {
            return;
        };
        let Some(provider) = classify(path, self.roots[root].root.provider) else {
            self.ignored.insert(path.to_path_buf(), size);
            return;
        };
        let feed = FileFeed::new(path, provider, self.settings.max_line);
        if !feed.is_conversation() {
            self.ignored.insert(path.to_path_buf(), u64::MAX);
            return;
        }
        self.ignored.remove(path);
        let now = self.clock.now();
        let last_change = if mode == Mode::History {
            // Before the start: as long ago as the file's modification time says.
            let mtime_ms = i64::try_from(Stat::of(meta).mtime_ns / 1_000_000).unwrap_or(0);
            mono_i(now).saturating_sub(now.wall.saturating_sub(mtime_ms).max(0))
        } else {
            mono_i(now)
        };
        self.files.insert(
            path.to_path_buf(),
            Tracked {
                provider,
                tail: TailState::new(Stat::of(meta).id),
                feed: Some(Box::new(feed)),
                cold: None,
                last_change,
                warned_at: i64::MIN,
            },
        );
        match self.resume.as_mut().map(|r| r.remove(path)) {
            Some(line) if mode == Mode::History => {
                let cp = line.and_then(|l| match serde_json::from_str(&l) {
                    Ok(state::store::Line::File(cp)) => Some(cp),
                    _ => None,
                });
                self.read_resumed(path, meta, cp);
            }
            _ => {
                if mode == Mode::History {
                    self.start_tail_first(path);
                }
                self.read_on(path, mode);
                if mode == Mode::History
                    && let Some(t) = self.files.get(path)
                {
                    self.counters.history_bytes += t.tail.offset();
                }
            }
        }
        // History decides many ids, most too old for the ledger: sift them per file.
        self.record_decided();
        let cold = self.cold_ms();
        if mode == Mode::History
            && let Some(t) = self.files.get_mut(path)
        {
            // History can be thousands of files: no handle stays open, and only the most
            // recently changed keep their projector.
            t.tail.close();
            if mono_i(now) - t.last_change > cold {
                t.go_cold();
            } else {
                self.history_warm.push((t.last_change, path.to_path_buf()));
                if self.history_warm.len() > 2 * HISTORY_WARM {
                    self.history_warm.sort_by_key(|w| std::cmp::Reverse(w.0));
                    for (_, p) in self.history_warm.drain(HISTORY_WARM..) {
                        if let Some(t) = self.files.get_mut(&p) {
                            t.go_cold();
                        }
                    }
                }
            }
        } else if self.files.len() > MAX_OPEN {
            self.enforce_caps(now);
        }
    }

    /// A first history read needs a file's state, not its events (history is silent):
    /// start it at its tail-first restart point instead of its first byte.
    fn start_tail_first(&mut self, path: &Path) {
        if let Some(t) = self.files.get_mut(path)
            && let Some(feed) =
                crate::tail_first::open_feed(path, t.provider, self.settings.max_line)
        {
            t.feed = Some(Box::new(feed));
        }
    }

    /// Forgets the file's sessions and reads it again from its first byte. Events it
    /// already produced are in the seen-set, so only what is new comes out.
    fn rederive(&mut self, path: &Path, why: Rederive, mode: Mode) {
        *self.counters.rederived.entry(why.as_str()).or_default() += 1;
        let level_info = why != Rederive::Reactivated;
        if level_info {
            tracing::info!(path = %path.display(), reason = why.as_str(), "Re-reading transcript from its start.");
        } else {
            tracing::debug!(path = %path.display(), reason = why.as_str(), "Re-reading transcript from its start.");
        }
        let Some(t) = self.files.get_mut(path) else {
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
            self.settings.max_line,
        )));
        t.tail = TailState::new(id);
        self.read_on(path, mode);
    }

    /// A file present at a restart. Known and only appended to since its checkpoint:
    /// silent up to the checkpoint, live after it. Rewritten while we were down, or
    /// new since the last run: live from its first byte. Live means within the
    /// catch-up window and not already in the ledger.
    fn read_resumed(&mut self, path: &Path, meta: &fs::Metadata, cp: Option<Checkpoint>) {
        let now = self.clock.now();
        let mut live_before = now.wall.saturating_sub(self.catch_up());
        let appended = cp.filter(|cp| {
            let stat = Stat::of(meta);
            let id = crate::tail::FileId {
                dev: cp.dev,
                ino: cp.ino,
            };
            stat.id == id
                && stat.size >= cp.offset
                && TailState::resumed(id, cp.offset, cp.line, cp.marker)
                    .marker_matches(path)
                    .unwrap_or(false)
        });
        let start = match appended {
            Some(cp) if self.resume_at(path, &cp, now) => {
                self.counters.resumed += 1;
                cp.offset
            }
            Some(cp) => {
                // No reading context saved (an older state file): re-read up to the
                // checkpoint, silently.
                self.counters.reread += 1;
                let keep = self.out.len();
                self.reducer.set_history_before(Some(i64::MAX));
                self.read_upto(path, Mode::History, Some(cp.offset));
                self.out.truncate(keep);
                0
            }
            None => {
                // Records from before the first run began stay history, even in a file
                // with no checkpoint (a first run that crashed before saving it).
                live_before = live_before.max(self.since);
                self.counters.reread += 1;
                tracing::debug!(path = %path.display(), "Changed or new while baton was down: read from its start.");
                0
            }
        };
        self.reducer.set_history_before(Some(live_before));
        self.read_upto(path, Mode::History, None);
        self.reducer.set_history_before(Some(i64::MAX));
        if let Some(t) = self.files.get(path) {
            self.counters.history_bytes += t.tail.offset().saturating_sub(start);
        }
    }

    /// Continues `path` from its checkpoint with the saved projector context and
    /// sessions; false if they cannot be taken back.
    fn resume_at(&mut self, path: &Path, cp: &Checkpoint, now: Now) -> bool {
        let Some(t) = self.files.get_mut(path) else {
            return false;
        };
        let Some(r) = cp.resume.as_ref().filter(|r| r.provider == t.provider) else {
            return false;
        };
        let at = (cp.offset, cp.line);
        let Some(feed) =
            FileFeed::restore(path, t.provider, self.settings.max_line, at, &r.projector)
        else {
            return false;
        };
        let id = t.tail.id();
        t.tail = TailState::resumed(id, cp.offset, cp.line, cp.marker);
        self.reducer
            .restore_path(&feed.path, r.sessions.clone(), now);
        t.feed = Some(Box::new(feed));
        t.cold = None;
        true
    }

    /// Reads from the committed position to the end of the file.
    fn read_on(&mut self, path: &Path, mode: Mode) {
        self.read_upto(path, mode, None);
    }

    /// Reads from the committed position to the end of the file, or to `limit`.
    fn read_upto(&mut self, path: &Path, mode: Mode, limit: Option<u64>) {
        let now = self.clock.now();
        let Some(t) = self.files.get_mut(path) else {
            return;
        };
        if !t.warm_up(path, self.settings.max_line) {
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
        let out = &mut self.out;
        let pos = feed.reader().pos();
        let res = file.seek(SeekFrom::Start(pos)).and_then(|_| match limit {
            Some(end) => feed.read_to_end(
                &mut io::Read::take(&mut *file, end.saturating_sub(pos)),
                |src, obs| reducer.apply(src, obs, now, out),
            ),
            None => feed.read_to_end(file, |src, obs| reducer.apply(src, obs, now, out)),
        });
        let before = (t.tail.offset(), t.tail.id());
        let res = res.and_then(|_| t.tail.commit(feed.reader()));
        if (t.tail.offset(), t.tail.id()) != before && !self.dirty.contains(path) {
            self.dirty.insert(path.to_path_buf());
        }
        if mode == Mode::Live {
            t.last_change = mono_i(now);
            if !self.live.contains(path) {
                self.live.insert(path.to_path_buf());
            }
        }
        if let Err(e) = res {
            t.tail.close();
            self.read_error(path, &e);
        }
    }

    /// Counts a read error; warns at most once a minute per file (an unreadable live
    /// file is looked at on every poll).
    fn read_error(&mut self, path: &Path, e: &io::Error) {
        self.counters.read_errors += 1;
        let now = mono_i(self.clock.now());
        let Some(t) = self.files.get_mut(path) else {
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
        let Some(t) = self.files.get_mut(path) else {
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
        if !self.files.contains_key(path) {
            self.ignored.remove(path);
            return;
        }
        self.drain(path);
        self.files.remove(path);
        self.live.remove(path);
        self.reducer.forget_path(&path_str(path));
        self.counters.deleted += 1;
        self.dirty.remove(path);
        self.removed.push(path_str(path).into_owned());
        tracing::debug!(path = %path.display(), "Transcript gone.");
    }

    /// Stats the live files, and the directories no native watch covers.
    fn poll(&mut self) {
        let due: Vec<PathBuf> = self.live.iter().cloned().collect();
        for path in due {
            self.look_file(&path, Mode::Live);
        }
        if self.unwatched_dirs > 0 {
            self.check_dirs(true);
        }
    }

    /// Stats every known directory (or only the unwatched ones) and re-lists those whose
    /// entries may have changed. A missed create or delete always changes the
    /// directory's mtime, so unchanged directories need no listing.
    fn check_dirs(&mut self, only_unwatched: bool) {
        let mut changed = Vec::new();
        for (dir, d) in &self.dirs {
            if only_unwatched && d.watched {
                continue;
            }
            let same =
                fs::metadata(dir).is_ok_and(|m| m.is_dir() && Stat::of(&m).mtime_ns == d.mtime_ns);
            if !same || d.racy {
                changed.push(dir.clone());
            }
        }
        for dir in changed {
            match fs::metadata(&dir) {
                Ok(m) if m.is_dir() => self.scan_tree(dir, Mode::Live, None, None),
                _ => self.remove_dir_tree(&dir),
            }
        }
    }

    /// The slow safety net: missing roots, every directory's mtime, every file's stat.
    /// Then rebuilds the live set and closes what went idle.
    fn sweep(&mut self) {
        self.counters.sweeps += 1;
        for i in 0..self.roots.len() {
            let path = self.roots[i].root.path.clone();
            if !self.roots[i].exists || fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                self.add_root(i, &path, Mode::Live, None);
            }
        }
        self.check_dirs(false);
        let mut changed = Vec::new();
        for (path, t) in &self.files {
            let same = fs::metadata(path)
                .is_ok_and(|m| m.is_file() && t.tail.compare(&Stat::of(&m)) == Change::Same);
            if !same {
                changed.push(path.clone());
            }
        }
        for path in changed {
            self.look_file(&path, Mode::Live);
        }
        let now = self.clock.now();
        self.rebuild_live(now);
        self.enforce_caps(now);
    }

    /// Live: changed in the last [`LIVE_MS`], or in the last [`OPEN_TURN_MS`] with a
    /// turn still open.
    fn rebuild_live(&mut self, now: Now) {
        let now = mono_i(now);
        let mut open: Option<HashSet<&str>> = None;
        let reducer = &self.reducer;
        let mut live: Vec<(i64, &PathBuf)> = self
            .files
            .iter()
            .filter(|(path, t)| {
                let idle = now - t.last_change;
                idle < LIVE_MS
                    || (idle < OPEN_TURN_MS
                        && open
                            .get_or_insert_with(|| reducer.open_paths().map(|p| &**p).collect())
                            .contains(path_str(path).as_ref()))
            })
            .map(|(p, t)| (t.last_change, p))
            .collect();
        if live.len() > MAX_LIVE {
            live.sort_by_key(|w| std::cmp::Reverse(w.0));
            live.truncate(MAX_LIVE);
        }
        self.live = live.into_iter().map(|(_, p)| p.clone()).collect();
    }

    /// Closes idle handles and drops idle projectors, within the caps.
    fn enforce_caps(&mut self, now: Now) {
        let now = mono_i(now);
        let cold = self.cold_ms();
        let mut open = Vec::new();
        let mut warm = Vec::new();
        for (path, t) in &mut self.files {
            let idle = now - t.last_change;
            if t.feed.is_some() && idle > cold {
                t.go_cold();
                t.tail.close();
            }
            if t.tail.is_open() && idle > HANDLE_IDLE_MS {
                t.tail.close();
            }
            if t.tail.is_open() {
                open.push((t.last_change, path.clone()));
            }
            if t.feed.is_some() {
                warm.push((t.last_change, path.clone()));
            }
        }
        for (list, cap, drop_feed) in [
            (open, MAX_OPEN, false),
            (warm, self.settings.max_warm.unwrap_or(MAX_WARM), true),
        ] {
            if list.len() <= cap {
                continue;
            }
            let mut list = list;
            list.sort();
            let excess = list.len() - cap;
            for (_, path) in list.into_iter().take(excess) {
                if let Some(t) = self.files.get_mut(&path) {
                    t.tail.close();
                    if drop_feed {
                        t.go_cold();
                    }
                }
            }
        }
    }
}
