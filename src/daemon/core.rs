//! The loop: hints in, batches of events out, shutdown. The one owner thread.
//!
//! It owns the watched tree ([`Tree`]: roots, directories, watches), the tracked-file
//! table ([`Files`]: tail states, projectors, the live set), the reducer with what it
//! produces ([`Reduce`]: events, the pending delta) and the core's side of durable
//! state ([`Deltas`]), and is the only thread that touches any of them. Each wake-up
//! takes every queued hint, has the tree and the file table look, applies what they
//! read to the reducer, flushes the events that came out, fires due settle timers, then
//! sends the delta of what changed behind those events (what goes out, and the stop, in
//! `emit.rs`). It never stats, lists or reads a path itself, and never builds a
//! checkpoint: those belong to the tree, the file table and `durable`.

use super::Settings;
use super::apply::{Looker, Reduce};
use super::deliver::Fanout;
use super::durable::{self, Deltas};
use super::files::{Files, Limits};
use super::outbox::Outbox;
use super::read::Mode;
use super::sweep::Sweeping;
use crate::clock::{Clock, wall_now};
use crate::error::Error;
use crate::model::{Event, EventKind};
use crate::reduce::{Reducer, dedup_capacity};
use crate::shutdown::Shutdown;
use crate::state::{self, Loaded, Status};
use crate::watch::native::Native;
use crate::watch::tree::Tree;
use crate::watch::{Hint, HintRx, HintTx, WatcherMode};
use crossbeam_channel::{Receiver, TryRecvError};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::time::Timespec;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// Most hints handled in one batch before events are flushed.
const MAX_BATCH: usize = 8192;
pub struct Core {
    state_dir: PathBuf,
    pub(super) clock: Clock,
    pub(super) tree: Tree,
    pub(super) files: Files,
    pub(super) reduce: Reduce,
    pub(super) deltas: Deltas,
    pub(super) outbox: Outbox,
    /// The `[[remote]]` links' batches, handed on as they come (none: no link, or every
    /// link ended).
    pub(super) remotes: Option<Receiver<Vec<Event>>>,
    pub(super) hints: HintRx,
    status: Status,
    pub(super) sweeps: u64,
    sweeping: Option<Sweeping>,
    pub(super) run_id: String,
    /// Where the sessions that changed go after each batch (for `status`).
    pub(super) views: Option<crate::views::ChangeTx>,
    /// Tells the poll ticker whether any file needs polling.
    poll_gate: Option<tokio::sync::watch::Sender<bool>>,
    /// History was read: from now on the state may be saved (a stop during the read
    /// keeps the previous state, which the next run redoes from).
    pub(super) ready: bool,
    /// When the views were last published.
    pub(super) views_at: Option<Instant>,
    /// When what changed is due to be saved (none: nothing waits).
    pub(super) save_at: Option<Instant>,
    /// The longest the core sleeps, idle or not, between two beats.
    beat_every: Duration,
    pub(super) metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Where the core sets its gauges (`files_tracked`), which `/metrics` reads.
    pub(super) readout: Arc<crate::diag::Readout>,
}

impl Core {
    pub fn new(
        settings: &Settings,
        hint_tx: HintTx,
        hints: HintRx,
        mut outbox: Outbox,
        mut loaded: Loaded,
        spill: Option<Arc<dyn crate::reduce::Spill>>,
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
                    return Err(Error::Start(format!(
                        "the native file watcher (--watcher native): {e} \
                         (try --watcher poll)"
                    )));
                }
            },
        };
        let start = wall_now();
        let run_id = format!("{}:{start}", std::process::id());
        let mut reducer = Reducer::new(settings.settle_ms, dedup_capacity());
        reducer.record_decided();
        reducer.park_open_turns(settings.liveness_after_ms);
        if let Some(spill) = &spill {
            reducer.spill_parked(spill.clone());
        }
        let restored = durable::restore(&mut loaded, &mut reducer, start);
        let clock = Clock::start();
        let limits = Limits {
            roots: settings.roots.clone(),
            max_line: settings.max_line,
            max_warm: settings.max_warm.unwrap_or(super::files::MAX_WARM),
            catch_up_ms: settings.catch_up_ms,
            liveness_after_ms: settings.liveness_after_ms,
            hang_core_on: settings.hang_core_on.clone(),
            history_threads: settings.history_threads,
        };
        let mut files = Files::new(limits, clock);
        if let Some(spill) = spill {
            files.spill_cold(spill);
        }
        let mut reduce = Reduce::new(reducer, restored.resume, restored.since);
        reduce.pending.decided = restored.decided;
        let heartbeat = files.heartbeat();
        Ok(Core {
            state_dir: settings.state_dir.clone(),
            clock,
            tree: Tree::new(&settings.roots, native),
            files,
            reduce,
            deltas: Deltas::new(restored.preloaded, loaded.progress),
            outbox: {
                outbox.set_heartbeat(heartbeat);
                outbox
            },
            remotes: None,
            hints,
            status: loaded.status,
            sweeps: 0,
            sweeping: None,
            run_id,
            views: None,
            poll_gate: None,
            ready: false,
            views_at: None,
            save_at: None,
            beat_every: super::service::HEARTBEAT_EVERY,
            metrics: None,
            readout: Arc::default(),
        })
    }

    /// Hands on the batches of the `[[remote]]` links that arrive on `rx` (once history
    /// is read; until then they wait in the channel).
    pub fn with_remotes(mut self, rx: Receiver<Vec<Event>>) -> Self {
        self.remotes = Some(rx);
        self
    }

    /// Sets the gauges of `readout` (the daemon's, which `/metrics` reads).
    pub fn with_readout(mut self, readout: Arc<crate::diag::Readout>) -> Self {
        self.readout = readout;
        self
    }

    /// Observes `baton_append_to_event_seconds`.
    pub fn with_metrics(mut self, m: Arc<crate::metrics::Metrics>) -> Self {
        self.reduce.read_at = Some(Vec::new());
        self.metrics = Some(m);
        self
    }

    /// Sends the sessions that changed to `tx` after each batch (coalesced).
    pub fn with_views(mut self, tx: crate::views::ChangeTx) -> Self {
        self.reduce.reducer.track_changes();
        self.views = Some(tx);
        self
    }

    /// Bumps `beat` as the core makes progress, waking up at least every `every`.
    pub fn with_heartbeat(mut self, beat: Arc<AtomicU64>, every: Duration) -> Self {
        self.files.set_heartbeat(Arc::clone(&beat));
        self.outbox.set_heartbeat(beat);
        self.beat_every = every;
        self
    }

    /// Tells `tx` whether polling is needed (so the ticker can sleep when it is not).
    pub fn with_poll_gate(mut self, tx: tokio::sync::watch::Sender<bool>) -> Self {
        self.poll_gate = Some(tx);
        self
    }

    /// Polling is needed while a file is live or a directory has no native watch.
    fn update_poll_gate(&self) {
        if let Some(tx) = &self.poll_gate {
            // A followed database is polled too: SQLite writes the WAL frames (the
            // change a watch wakes on) before it publishes the commit in the `-shm`
            // index (no watch event), so a look in between sees nothing new and no
            // later event comes; the poll bounds that delay (one `data_version` a tick).
            let wanted =
                !self.files.none_live() || self.tree.needs_poll() || !self.files.rows.is_empty();
            tx.send_if_modified(|w| std::mem::replace(w, wanted) != wanted);
        }
    }

    /// Reads history, emits `daemon_ready`, then handles hints until told to stop.
    /// Returns the fanout, whose sinks are closed at the end.
    pub fn run(mut self, stop: &Shutdown) -> Result<Fanout, Error> {
        let started = Instant::now();
        self.reduce.begin_history(&self.files);
        let mut v = Looker {
            files: &mut self.files,
            reduce: &mut self.reduce,
            mode: Mode::History,
            stop: Some(stop),
            stopped: false,
        };
        self.tree.add_roots(true, &mut v);
        let walk_ms = started.elapsed().as_millis();
        if !v.stopped && !v.reduce.finish_history(v.files, v.stop) {
            v.stopped = true;
        }
        if v.stopped {
            return self.stopping();
        }
        // On a restart, what the files gained while we were down (within the catch-up
        // window) comes out after daemon_ready; on a first run history is silent.
        let r = &mut self.reduce;
        let caught_up = match r.resume.take() {
            Some(gone) => {
                // Checkpoints of files no longer there.
                r.pending
                    .removed
                    .extend(gone.into_keys().map(|p| p.to_string_lossy().into_owned()));
                std::mem::take(&mut r.out)
            }
            None => {
                r.discard_out();
                Vec::new()
            }
        };
        r.end_history(&mut self.files);
        r.tidy(&mut self.files);
        let c = self.files.counters();
        tracing::info!(
            files = self.files.len(),
            frozen = self.files.frozen(),
            dirs = self.tree.dir_count(),
            sessions = self.reduce.reducer.session_count(),
            resumed = c.resumed,
            reread = c.reread,
            bytes = c.history_bytes,
            walk_ms,
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
                let ev = state::anomaly(
                    "state_lost",
                    format!(
                        "no usable state in {} ({why}); history was treated as already \
                         seen, so a turn that ended while baton was down may go unreported",
                        self.state_dir.display()
                    ),
                    &self.run_id,
                );
                self.reduce.out.push(ev);
            }
        }
        self.reduce.out.extend(caught_up);
        self.ready = true;
        self.flush();
        self.save();
        // The first live batch publishes at once, however soon it comes.
        self.views_at = None;
        self.update_poll_gate();
        let mut got = Vec::new();
        while !self.outbox.gone {
            self.outbox.beat();
            let settle = self
                .reduce
                .reducer
                .next_deadline()
                .map(|d| self.clock.instant(d))
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            // Idle or not, wake up in time for the next beat; with a sweep under way, at
            // once for its next step (hints still come first).
            let deadline = [self.views_due(), self.outbox.held_due(), self.save_at]
                .into_iter()
                .flatten()
                .fold(settle, Instant::min)
                .min(Instant::now() + self.beat_every);
            let wait_until = if self.sweeping.is_some() {
                Instant::now()
            } else {
                deadline
            };
            if !self.wait(wait_until, stop, &mut got) {
                break;
            }
            self.outbox.tick();
            self.batch(std::mem::take(&mut got), settle);
            self.sweep_step();
            self.save_when_due();
        }
        self.stopping()
    }

    /// Waits until `until` for hints, taking what came into `got` (at most
    /// [`MAX_BATCH`]): the native watcher's events, read here, and the channel's. The
    /// remote links' batches are handed on as they come. False at the stop, or once
    /// every hint sender is gone.
    ///
    /// It sleeps in `poll(2)` on the watcher's descriptor, the channel's bell and the
    /// stop, so a change to a file wakes this thread itself.
    fn wait(&mut self, until: Instant, stop: &Shutdown, got: &mut Vec<Hint>) -> bool {
        loop {
            // The rings so far are answered before looking: one after the look is still
            // heard by the poll below.
            self.hints.quiet();
            if stop.is_stopped() {
                return false;
            }
            let handed_on = self.hand_on_remotes();
            if let Some(n) = self.tree.native_mut() {
                n.read(got, MAX_BATCH);
            }
            while got.len() < MAX_BATCH {
                match self.hints.rx.try_recv() {
                    Ok(h) => got.push(h),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return false,
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if handed_on || !got.is_empty() || left.is_zero() {
                return true;
            }
            let timeout = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            });
            let native = self.tree.native_mut().map(|n| n.fd());
            let mut fds: Vec<PollFd<'_>> = [Some(self.hints.bell()), Some(stop.fd()), native]
                .into_iter()
                .flatten()
                .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
                .collect();
            if let Err(e) = poll(&mut fds, Some(&timeout))
                && e != Errno::INTR
            {
                // Not expected with valid descriptors; sleep instead of spinning.
                tracing::warn!(error = %e, "Waiting for changes failed; sleeping instead.");
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
        }
    }

    /// Handles the hints that came, flushing events as soon as they exist, then fires
    /// the settle timers if `deadline` has passed.
    fn batch(&mut self, got: Vec<Hint>, deadline: Instant) {
        let mut paths: Vec<(PathBuf, bool)> = Vec::new();
        let mut index: HashMap<PathBuf, usize> = HashMap::new();
        let (mut poll, mut sweep) = (false, false);
        let mut signals = Vec::new();
        for h in got {
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
                Hint::Signal(s) => signals.push(s),
            }
        }
        if self.hints.take_rescan() {
            sweep = true;
        }
        for (path, maybe_dir) in paths {
            self.look(&path, maybe_dir);
        }
        // After the transcripts' news of the same batch, so a signal finds the turn the
        // transcript just began or answered.
        if !signals.is_empty() {
            let now = self.clock.now();
            let r = &mut self.reduce;
            r.reducer.set_history_before(None);
            for s in signals {
                r.reducer.signal(&s, now, &mut r.out);
            }
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
            self.reduce.tick(&self.files, now);
        }
        self.flush();
        self.publish_views(false);
        self.update_poll_gate();
    }

    /// A hint: something happened at `path`. A tracked file is the file table's; any
    /// other path is the tree's to make sense of.
    fn look(&mut self, path: &Path, maybe_dir: bool) {
        let db = self.files.rows.owner_of(path);
        if let Some(db) = db.or_else(|| self.files.database_root_of(path)) {
            self.reduce.look(&mut self.files, &db, Mode::Live);
            return;
        }
        if self.files.contains(path) {
            self.reduce.look(&mut self.files, path, Mode::Live);
            return;
        }
        self.tree.look(
            path,
            maybe_dir,
            &mut Looker::live(&mut self.files, &mut self.reduce),
        );
    }

    /// Stats the live files, and the directories no native watch covers.
    fn poll(&mut self) {
        self.reduce.poll(&mut self.files);
        self.tree
            .poll(&mut Looker::live(&mut self.files, &mut self.reduce));
    }

    /// The slow safety net: missing roots, every directory's mtime, every file's stat.
    /// Then rebuilds the live set and closes what went idle. Begun here, done in steps
    /// between batches of hints ([`Core::sweep_step`], `daemon/sweep.rs`).
    fn sweep(&mut self) {
        if let Some(s) = &mut self.sweeping {
            s.again = true;
            return;
        }
        self.sweeps += 1;
        self.sweeping = Some(Sweeping::start(
            &mut self.tree,
            &mut self.files,
            &mut self.reduce,
        ));
    }

    /// The next step of the sweep under way; at its end, the live set rebuilt and quiet
    /// sessions judged, as one sweep always did.
    fn sweep_step(&mut self) {
        let Some(s) = &mut self.sweeping else {
            return;
        };
        if !s.step(&mut self.tree, &mut self.files, &mut self.reduce) {
            return;
        }
        let again = s.again;
        self.sweeping = None;
        self.reduce.end_sweep(&mut self.files);
        self.flush();
        if again {
            self.sweep();
        }
    }
}
