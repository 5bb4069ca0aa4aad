//! The core's reducing side: what the file table reads is applied here, to the one
//! reducer, in the order it was read.
//!
//! Owns: the reducer, the events it produced (until the loop flushes them), what the
//! next state delta carries ([`Pending`]), the checkpoints of the last run while the
//! files present at start are read, and a first run's history readers. Every read,
//! live or history, comes the same way: [`Files`] returns [`Step`]s (owned
//! observations, then a tail-commit token), [`Reduce::apply`] reduces them with the
//! read's `history_before`, hands the token back and marks the file for the next delta.
//! It never opens a file itself.

use super::durable::Pending;
use super::files::{Files, Look};
use super::first::Admit;
use super::history::{self, Deferred, Outcome};
use super::read::{Mode, More, Step, last_commit};
use crate::clock::Now;
use crate::model::Event;
use crate::reduce::{Reducer, Src};
use crate::shutdown::Shutdown;
use crate::state;
use crate::watch::tree::Visit;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) struct Reduce {
    pub reducer: Reducer,
    /// Events produced by reads, until the loop flushes them.
    pub out: Vec<Event>,
    /// With metrics on: when the bytes behind each event a read produced were read
    /// (`Read.now`, monotonic ms), until the loop flushes them.
    pub read_at: Option<Vec<u64>>,
    /// What the next state delta carries.
    pub pending: Pending,
    /// Checkpoints of the last run, while the files present at start are read; `None`
    /// on a first run (or after the state was lost): history is silent then.
    /// Raw `file` lines, parsed when their file is found.
    pub resume: Option<HashMap<PathBuf, Box<str>>>,
    /// When the first run began: records older than that are history.
    since: i64,
    /// While a first run's history is walked: the files found, read after the walk
    /// ([`super::history`]); `None` reads each file as it is found.
    deferred: Option<Deferred>,
}

impl Reduce {
    pub fn new(reducer: Reducer, resume: Option<HashMap<PathBuf, Box<str>>>, since: i64) -> Self {
        Reduce {
            reducer,
            out: Vec::new(),
            read_at: None,
            pending: Pending::default(),
            resume,
            since,
            deferred: None,
        }
    }

    /// Keeps the ids the reducer decided for the next delta (the ledger's).
    pub fn record_decided(&mut self, files: &Files) {
        self.pending
            .record_decided(&mut self.reducer, files.catch_up());
    }

    /// Applies what a look found, in order.
    pub fn apply(&mut self, files: &mut Files, steps: Vec<Step>) {
        let mut steps: VecDeque<Step> = steps.into();
        while let Some(step) = steps.pop_front() {
            match step {
                Step::Read(read) => {
                    self.reducer.set_history_before(Some(read.history_before));
                    let keep = self.out.len();
                    let mut src = Src {
                        provider: read.provider,
                        // What the reducer keeps of the path is the table's one copy.
                        path: files.shared_name(read.path),
                        line: 0,
                    };
                    for (line, obs) in read.obs {
                        src.line = line;
                        self.reducer.apply(&src, obs, read.now, &mut self.out);
                    }
                    if read.quiet {
                        self.out.truncate(keep);
                    }
                    if let Some(at) = &mut self.read_at {
                        at.extend(std::iter::repeat_n(read.now.mono, self.out.len() - keep));
                    }
                    let Some(c) = read.commit else {
                        continue;
                    };
                    let path = c.path.clone();
                    let (newest, counted) = (c.newest, c.count_from.is_some());
                    if files.commit(c) {
                        self.pending.mark(&path);
                    }
                    if let Some(more) = read.more {
                        // The same read, on from where this chunk was committed: it goes
                        // first, before any step that followed it.
                        let from = files.offset(&path);
                        let mut next =
                            files.read_upto(&path, more.mode, None, Some(read.history_before));
                        if let Some(c) = last_commit(&mut next) {
                            c.newest = c.newest.max(newest);
                            c.count_from = if counted { from } else { None };
                        }
                        for mut s in next.into_iter().rev() {
                            if let Step::Read(r) = &mut s {
                                r.quiet |= read.quiet;
                            }
                            steps.push_front(s);
                        }
                    }
                }
                Step::Forget(path) => self.reducer.forget_path(&path),
                Step::Gone(path) => {
                    let p = path.to_string_lossy().into_owned();
                    self.reducer.forget_path(&p);
                    self.pending.dirty.remove(&path);
                    self.pending.removed.push(p);
                }
                Step::Park(path, now) => {
                    self.reducer.park_path(&path, now);
                }
                Step::Restore(path, sessions, now) => {
                    self.reducer.restore_path(&path, sessions, now);
                }
            }
            if steps.is_empty() {
                // Parked sessions that could not be read back: their files read again,
                // once what was queued is done (its records for them were left for this).
                for (path, history_before) in self.reducer.take_lost() {
                    steps.extend(files.reread_lost(Path::new(&*path), history_before));
                }
            }
        }
    }

    /// Stats a path and brings its state up to date.
    pub fn look(&mut self, files: &mut Files, path: &Path, mode: Mode) {
        if let Some(provider) = files.row_provider(path) {
            return self.look_rows(files, path, provider, mode);
        }
        let later = self.deferred.as_ref().is_some_and(|d| d.contains(path));
        match files.look_file(path, mode, later) {
            Look::Steps(steps) => self.apply(files, steps),
            Look::New(meta) => self.track_new(files, path, &meta, mode),
        }
    }

    /// A database of rows (`rows.rs`): what changed since its position, reduced as any
    /// read is, and its checkpoint marked for the next delta.
    fn look_rows(
        &mut self,
        files: &mut Files,
        path: &Path,
        provider: crate::model::ProviderKind,
        mode: Mode,
    ) {
        let checkpoint = match (files.rows.contains(path), self.resume.as_mut()) {
            (false, Some(resume)) => {
                resume
                    .remove(path)
                    .and_then(|l| match serde_json::from_str(&l) {
                        Ok(state::store::Line::File(cp)) => Some(cp),
                        _ => None,
                    })
            }
            _ => None,
        };
        let at = super::rows::RowLook {
            mode,
            now: files.now(),
            catch_up: files.catch_up(),
            max_row: files.limits().max_line,
            since: self.resume.is_some().then_some(self.since),
            checkpoint: checkpoint.as_ref(),
        };
        let steps = files.rows.look(path, provider, &at);
        if steps.is_empty() {
            return;
        }
        let gone = steps.iter().any(|s| matches!(s, Step::Gone(_)));
        self.apply(files, steps);
        if !gone {
            self.pending.mark(path);
        }
        self.record_decided(files);
    }

    /// A file not tracked yet: taken in, first read, finished.
    fn track_new(&mut self, files: &mut Files, path: &Path, meta: &fs::Metadata, mode: Mode) {
        let (mtime_ms, now) = match files.admit(path, meta, mode, self.deferred.is_some()) {
            Admit::Skip => return,
            Admit::Deferred {
                name,
                provider,
                id,
                mtime_ms,
            } => {
                // A first run's history: read on worker threads once the walk is done.
                if let Some(later) = self.deferred.as_mut() {
                    later.push(name, provider, id, mtime_ms);
                }
                return;
            }
            Admit::Read { mtime_ms, now } => (mtime_ms, now),
        };
        let steps = match self.resume.as_mut().map(|r| r.remove(path)) {
            Some(line) if mode == Mode::History => {
                let cp = line.and_then(|l| match serde_json::from_str(&l) {
                    Ok(state::store::Line::File(cp)) => Some(cp),
                    _ => None,
                });
                files.read_resumed(path, meta, cp, self.since)
            }
            _ => files.read_first(path, mode),
        };
        self.apply(files, steps);
        self.finish_new(files, path, mtime_ms, now, mode);
    }

    /// What follows a new file's first read: settle what history left pending, keep the
    /// decided ids, and let the file table close and cap it.
    fn finish_new(&mut self, files: &mut Files, path: &Path, mtime_ms: i64, now: Now, mode: Mode) {
        if mode == Mode::History {
            // A pending answer whose file has been still for a settle period is already
            // complete: `status` at start agrees with `scan`.
            let idle = now.wall.saturating_sub(mtime_ms);
            let live = now.wall.saturating_sub(files.catch_up()).max(self.since);
            let p = path.to_string_lossy();
            self.reducer.settle_idle(&p, idle, live, now, &mut self.out);
        }
        // History decides many ids, most too old for the ledger: sift them per file.
        self.record_decided(files);
        let steps = files.finish_new(path, now, mode);
        self.apply(files, steps);
    }

    /// Before the start-up walk: a first run's history readers start.
    pub fn begin_history(&mut self, files: &Files) {
        let limits = files.limits();
        self.deferred = history::begin(
            self.resume.is_none(),
            limits.history_threads,
            limits.max_line,
        );
    }

    /// During the walk: applies the files read so far, in order, without waiting.
    fn pump(&mut self, files: &mut Files) {
        let Some(mut later) = self.deferred.take() else {
            return;
        };
        while let Some((f, got)) = later.take(false) {
            self.apply_found(files, &f, got);
            later.release();
        }
        self.deferred = Some(later);
    }

    /// After the walk: applies the rest as it is read. False if `stop` said stop first
    /// (what was applied so far stays, as a stop during the walk leaves it).
    pub fn finish_history(&mut self, files: &mut Files, stop: Option<&Shutdown>) -> bool {
        if let Some(mut later) = self.deferred.take() {
            later.close();
            while let Some((f, got)) = later.take(true) {
                if stop.is_some_and(Shutdown::is_stopped) {
                    return false;
                }
                self.apply_found(files, &f, got);
                later.release();
            }
        }
        // What `scan` shows at once, `status` shows at `daemon_ready`: a session whose
        // writer died while nobody watched ends now, not at the first sweep.
        self.judge_writers(files);
        true
    }

    /// Quiet working sessions checked for a live writer (one look through `/proc` for
    /// all of them); those with none end as `writer_gone`. The files of idle ones are
    /// offered for parking again: a session decided now parks, one found alive stays
    /// live (due, it is asked again at every sweep).
    fn judge_writers(&mut self, files: &Files) {
        let now = files.now();
        self.live_cutoff(files, now);
        let asked = super::liveness::sweep(
            files.limits().liveness_after_ms,
            &mut self.reducer,
            now,
            &mut self.out,
        );
        for path in asked {
            if files.is_idle(Path::new(&*path)) {
                self.reducer.park_path(&path, now);
            }
        }
    }

    /// A history reader's result, in the walk's order: reduced and committed like any
    /// read, then the file finished as a new one.
    fn apply_found(&mut self, files: &mut Files, f: &history::Found, got: Outcome) {
        files.beat();
        let now = files.now();
        let path = f.name.path();
        if !files.contains(path) {
            // Gone during the walk.
            return;
        }
        match got {
            Outcome::Redo => {
                files.restart_feed(path, f.provider);
                let steps = files.read_first(path, Mode::History);
                self.apply(files, steps);
            }
            Outcome::Read(r) => {
                let history::Got {
                    feed,
                    tail,
                    obs,
                    more,
                    res,
                } = *r;
                let more = more && res.is_ok();
                let Some(mut read) = files.adopt(path, feed, tail, obs, res, now) else {
                    return;
                };
                if more {
                    // The worker stopped at its cap: the rest is read on as any chunked
                    // read is (the skew from the newest record of both, bytes counted once).
                    read.more = Some(More {
                        mode: Mode::History,
                    });
                }
                self.apply(files, vec![Step::Read(Box::new(read))]);
            }
        }
        self.finish_new(files, path, f.mtime_ms, now, Mode::History);
        // History is silent on a first run.
        self.discard_out();
    }

    /// Drops the events made so far (history is silent), and their read times with
    /// them, so `baton_append_to_event_seconds` only measures events that go out.
    pub fn discard_out(&mut self) {
        self.out.clear();
        if let Some(at) = &mut self.read_at {
            at.clear();
        }
    }

    /// After the history read: only the most recently changed files keep a projector.
    pub fn end_history(&mut self, files: &mut Files) {
        files.end_history();
        self.reducer.compact();
    }

    /// Stats the live files.
    pub fn poll(&mut self, files: &mut Files) {
        for path in files.due() {
            self.look(files, &path, Mode::Live);
        }
        // A database's change may have come with no wake (a missed or unwatched
        // `-wal`): a look costs one `data_version` when nothing changed.
        for path in files.rows.paths() {
            self.look(files, &path, Mode::Live);
        }
    }

    /// The slow safety net's share, once every file was stat'ed (the core does that a
    /// few at a time, [`Files::changed_one`]): the live set rebuilt, what went idle
    /// closed, and quiet working sessions checked for a live writer.
    pub fn end_sweep(&mut self, files: &mut Files) {
        self.tidy(files);
        self.judge_writers(files);
    }

    /// Rebuilds the live set (a file with a turn still open stays live) and closes what
    /// went idle.
    pub fn tidy(&mut self, files: &mut Files) {
        let mut open: Option<HashSet<&str>> = None;
        let reducer = &self.reducer;
        let steps = files.tidy(|path| {
            open.get_or_insert_with(|| reducer.open_paths().map(|p| &**p).collect())
                .contains(path.to_string_lossy().as_ref())
        });
        self.apply(files, steps);
        // Sessions still held for a file idle that long (a frozen one's, kept when it froze
        // by a timer since fired) are parked now.
        let now = files.now();
        let idle: Vec<Arc<str>> = self
            .reducer
            .held_paths()
            .filter(|p| files.is_idle(Path::new(&***p)))
            .cloned()
            .collect();
        for path in idle {
            self.reducer.park_path(&path, now);
        }
    }

    /// Fires the settle timers due by `now`.
    pub fn tick(&mut self, files: &Files, now: Now) {
        self.live_cutoff(files, now);
        self.reducer.tick(now, &mut self.out);
    }

    /// Outside a read, live: records older than the catch-up window are history.
    pub fn live_cutoff(&mut self, files: &Files, now: Now) {
        self.reducer
            .set_history_before(Some(now.wall.saturating_sub(files.catch_up())));
    }
}

/// The file table and the reducer as the watched tree's visitor: what a walk lists is
/// tracked, read and, once gone, let go.
pub(super) struct Looker<'a> {
    pub files: &'a mut Files,
    pub reduce: &'a mut Reduce,
    pub mode: Mode,
    /// Checked between directories during a walk (the start-up walk can be long).
    pub stop: Option<&'a Shutdown>,
    pub stopped: bool,
}

impl<'a> Looker<'a> {
    /// A visitor for live changes (no stop check: live walks are short).
    pub fn live(files: &'a mut Files, reduce: &'a mut Reduce) -> Self {
        Looker {
            files,
            reduce,
            mode: Mode::Live,
            stop: None,
            stopped: false,
        }
    }
}

impl Visit for Looker<'_> {
    fn stopped(&mut self) -> bool {
        if !self.stopped && self.stop.is_some_and(Shutdown::is_stopped) {
            self.stopped = true;
        }
        self.stopped
    }

    fn listed(&mut self, path: &Path, meta: &fs::Metadata) {
        self.files.beat();
        if !self.files.contains(path) {
            self.reduce.track_new(self.files, path, meta, self.mode);
        }
        if self.mode == Mode::History {
            // What the history readers finished meanwhile, so they need not wait for
            // the walk to end.
            self.reduce.pump(self.files);
        }
        if self.mode == Mode::History && self.reduce.resume.is_none() {
            self.reduce.discard_out();
        }
    }

    fn look(&mut self, path: &Path) {
        self.reduce.look(self.files, path, self.mode);
    }

    fn unlisted(&mut self, dir: &Path, seen: &HashSet<PathBuf>) {
        for p in self.files.unlisted_in(dir, seen) {
            self.reduce.look(self.files, &p, Mode::Live);
        }
    }

    fn gone(&mut self, dir: &Path) {
        for p in self.files.under(dir) {
            self.reduce.look(self.files, &p, Mode::Live);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::clock::{format_rfc3339, wall_now};
    use crate::model::EventKind;
    use crate::state::spill::SpillFile;
    use serde_json::json;

    /// A file frozen while a settle timer held its session in memory: the tidies before
    /// the timer fires leave the session held, and the first one after parks it.
    #[test]
    fn a_frozen_files_session_held_by_a_timer_is_parked_once_it_fires() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("projects");
        let path = root.join("p").join("s.jsonl");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let ts = format_rfc3339(wall_now());
        let prompt = json!({"type": "user", "uuid": "u1", "sessionId": "s1", "timestamp": ts,
            "message": {"role": "user", "content": "go"}});
        // No end marker: the answer completes once the settle period passes.
        let answer = json!({"type": "assistant", "uuid": "a1", "sessionId": "s1",
            "timestamp": ts, "message": {"role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Done."}], "stop_reason": null}});
        fs::write(&path, format!("{prompt}\n{answer}\n")).unwrap();
        let mut files = Files::for_test(&root, 600_000);
        let spill: Arc<dyn crate::reduce::Spill> = Arc::new(SpillFile::new(dir.path()).unwrap());
        files.spill_cold(spill.clone());
        let mut reduce = Reduce::new(Reducer::new(1_000, 1024), None, 0);
        reduce.look(&mut files, &path, Mode::Live);
        let done = |r: &Reduce| r.out.iter().any(|e| e.event == EventKind::TurnCompleted);
        assert!(!done(&reduce), "{:?}", reduce.out);
        // Idle for an hour, and frozen as it is (as a history read freezes an idle file).
        let t = files.table.get_mut(&path).unwrap();
        t.last_change = -3_600_000;
        t.tail.close();
        assert!(files.table.freeze(&path, &spill));
        reduce.tidy(&mut files);
        assert_eq!(
            reduce.reducer.parked_count(),
            0,
            "the settle timer holds it"
        );
        let n = files.now();
        reduce.tick(
            &files,
            Now {
                mono: n.mono + 5_000,
                wall: n.wall + 5_000,
            },
        );
        assert!(done(&reduce), "{:?}", reduce.out);
        assert_eq!(reduce.reducer.parked_count(), 0);
        reduce.tidy(&mut files);
        assert_eq!(reduce.reducer.parked_count(), 1);
        assert_eq!(files.frozen(), 1, "parking left it frozen");
    }
}
