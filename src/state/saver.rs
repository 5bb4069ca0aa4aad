//! The state writer: a thread that takes the core's deltas (in delivery order), appends
//! them to the state log at most every [`SAVE_EVERY`], and now and then merges the logs
//! into a new base generation (see [`store`]). Its fsyncs are never on the path from a
//! turn's end to its alert, and what it holds is what changed since the last write,
//! plus the bounded ledger.

use super::ledger::Ledger;
use super::store::{self, BaseWriter, Line, LogWriter, Meta};
use super::{Decision, Health};
use crate::clock::wall_now;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// At most this often the log is appended to (a few times a second keeps durable state close behind the stream).
pub const SAVE_EVERY: Duration = Duration::from_millis(250);
/// After a failed write, the next try comes this much later.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Logs are merged into a new base once they hold this much, or half the base's size if
/// that is more (so merging stays a small share of the writing).
const MERGE_AT: u64 = 1 << 20;

/// How much log a merge waits for: [`MERGE_AT`], or half the base; twice the base in a
/// burst (more deltas waiting, as in the first save of every file after a start). At
/// half the base, that first save rewrote its growing base again and again: five
/// merges writing 29 MB of bases for a 12.4 MB state at 10,000 sessions, in the seconds
/// when the first `status` calls and alerts come. A burst's log stays bounded (twice the
/// base), and a clean stop merges whatever is left.
fn merge_at(base_bytes: u64, burst: bool) -> u64 {
    let share = if burst {
        base_bytes.saturating_mul(2)
    } else {
        base_bytes / 2
    };
    MERGE_AT.max(share)
}

/// What changed since the last delta, in the order the core saw it.
#[derive(Debug, Default)]
pub struct Delta {
    pub files: Vec<super::Checkpoint>,
    /// Paths no longer tracked.
    pub removed: Vec<String>,
    pub decided: Vec<Decision>,
}

impl Delta {
    /// Folds a later delta into this one, as if both were applied in turn: the later
    /// word on a path wins, decisions add up.
    pub fn merge(&mut self, later: Delta) {
        let gone: std::collections::HashSet<&str> =
            later.removed.iter().map(String::as_str).collect();
        let fresh: std::collections::HashSet<&str> =
            later.files.iter().map(|c| c.path.as_str()).collect();
        self.files
            .retain(|c| !gone.contains(c.path.as_str()) && !fresh.contains(c.path.as_str()));
        self.removed.retain(|p| !fresh.contains(p.as_str()));
        for p in later.removed {
            if !self.removed.contains(&p) {
                self.removed.push(p);
            }
        }
        self.files.extend(later.files);
        self.decided.extend(later.decided);
    }
}

/// A delta with its sequence number, on its way to the writer.
pub type Msg = (u64, Box<Delta>);

/// What the writer tells the delivery side.
#[derive(Debug, Default)]
pub struct Progress {
    /// Every delta up to this sequence number is on disk.
    pub covered: AtomicU64,
    /// Every delta up to this sequence number reached the writer (the core waits for it
    /// before it builds more, so a save of every file is never all in memory at once).
    pub received: AtomicU64,
}

pub struct Saver {
    pub dir: PathBuf,
    pub ledger: Ledger,
    pub catch_up: i64,
    pub next_gen: u64,
    /// The last log merged into the current base, and into the previous one.
    pub base_log: u64,
    pub prev_log: u64,
    pub next_log: u64,
    /// Body bytes of the current base.
    pub base_bytes: u64,
    /// The file the current base is read from when merging: [`store::CURRENT`], or
    /// [`store::PREVIOUS`] when loading fell back to it (the current file is unusable,
    /// or missing after a crash between the two renames of a write).
    pub base_name: &'static str,
    /// A write failed: what piles up meanwhile goes into the next base directly, not
    /// into the log. A base is bounded by the files and the ledger; the log of a long
    /// outage is not, and may not fit where a base would.
    pub behind: bool,
    /// The previous generation was given up for room at least once this run.
    pub dropped_previous: bool,
    /// See [`Meta::since`].
    pub since: i64,
    pub health: Arc<Health>,
    pub progress: Arc<Progress>,
}

/// Pending lines are written at once, without waiting for [`SAVE_EVERY`], past this size.
const WRITE_AT: usize = 1 << 20;

/// Lines waiting for the next write: one per file (the newest wins), then decisions.
#[derive(Default)]
struct Pending {
    files: Vec<Vec<u8>>,
    index: HashMap<String, usize>,
    decided: Vec<Vec<u8>>,
    /// Decided ids left out of `decided` (the writer is behind: the next base holds them
    /// in its ledger), which still need a write.
    ledger_only: bool,
    seq: u64,
    bytes: usize,
}

impl Pending {
    fn add(&mut self, seq: u64, d: Delta) {
        self.seq = seq;
        let mut put = |path: String, line: Vec<u8>| {
            self.bytes += line.len();
            match self.index.get(&path) {
                Some(&i) => self.files[i] = line,
                None => {
                    self.index.insert(path, self.files.len());
                    self.files.push(line);
                }
            }
        };
        for path in d.removed {
            let line = Line::Removed(path.clone()).encode();
            put(path, line);
        }
        for cp in d.files {
            let path = cp.path.clone();
            put(path, Line::File(cp).encode());
        }
        for x in d.decided {
            let line = Line::Decided(x).encode();
            self.bytes += line.len();
            self.decided.push(line);
        }
    }

    fn is_empty(&self) -> bool {
        self.files.is_empty() && self.decided.is_empty() && !self.ledger_only
    }

    /// Drops the decided lines, which only a log needs: while the writer is behind, a
    /// long outage would pile them up in memory for nothing.
    fn ledger_only(&mut self) {
        if self.decided.is_empty() {
            return;
        }
        for line in self.decided.drain(..) {
            self.bytes -= line.len();
        }
        self.ledger_only = true;
    }
}

impl Saver {
    /// Runs until the sender is dropped, then writes what is left and merges the logs,
    /// so a clean stop leaves one base and no log to replay.
    pub fn run(mut self, rx: &Receiver<Msg>) {
        let mut log: Option<LogWriter> = None;
        let mut pending = Pending::default();
        // The first write of a run also merges, so there is a base early on.
        let mut merged_this_run = false;
        let mut due = Instant::now();
        loop {
            let msg = if pending.is_empty() {
                rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                rx.recv_timeout(due.saturating_duration_since(Instant::now()))
            };
            let closed = match msg {
                Ok((seq, d)) => {
                    self.apply_ledger(&d);
                    pending.add(seq, *d);
                    while pending.bytes < WRITE_AT
                        && let Ok((seq, d)) = rx.try_recv()
                    {
                        self.apply_ledger(&d);
                        pending.add(seq, *d);
                    }
                    if self.behind {
                        pending.ledger_only();
                    }
                    // fetch_max: deltas held for a blocked event stream were already
                    // counted as received when they were numbered.
                    self.progress
                        .received
                        .fetch_max(pending.seq, Ordering::AcqRel);
                    false
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            if !pending.is_empty() && (closed || pending.bytes >= WRITE_AT || Instant::now() >= due)
            {
                if self.behind {
                    // Everything since the last good write, as one new base.
                    if self.merge(&mut log, Some(&pending)) {
                        self.behind = false;
                        merged_this_run = true;
                        self.progress.covered.store(pending.seq, Ordering::Release);
                        pending = Pending::default();
                        due = Instant::now() + SAVE_EVERY;
                    } else {
                        due = Instant::now() + RETRY_EVERY;
                    }
                } else {
                    // Written for its size, or with more waiting: deltas come faster
                    // than the writes go.
                    let burst = pending.bytes >= WRITE_AT || !rx.is_empty();
                    match self.append(&mut log, &pending) {
                        Ok(()) => {
                            self.progress.covered.store(pending.seq, Ordering::Release);
                            pending = Pending::default();
                            due = Instant::now() + SAVE_EVERY;
                            let at = merge_at(self.base_bytes, burst);
                            let big = log.as_ref().is_some_and(|l| l.written >= at);
                            if big || (!merged_this_run && !burst) {
                                merged_this_run |= self.merge(&mut log, None);
                            }
                        }
                        Err(e) => {
                            self.health.failed(&self.dir, "save the state", &e);
                            log = None;
                            self.behind = true;
                            pending.ledger_only();
                            due = Instant::now() + RETRY_EVERY;
                        }
                    }
                }
            }
            if closed {
                if pending.is_empty() && log.is_some() {
                    self.merge(&mut log, None);
                }
                return;
            }
        }
    }

    fn apply_ledger(&mut self, d: &Delta) {
        let now = wall_now();
        for x in &d.decided {
            self.ledger
                .record(&x.session, x.id.clone(), x.record_ts, now, self.catch_up);
        }
    }

    fn append(&mut self, log: &mut Option<LogWriter>, p: &Pending) -> io::Result<()> {
        if log.is_none() {
            *log = Some(LogWriter::open(&self.dir, self.next_log)?);
            self.next_log += 1;
        }
        let Some(l) = log.as_mut() else {
            return Ok(());
        };
        let lines = p.files.iter().chain(&p.decided).map(Vec::as_slice);
        l.append(lines)
    }

    /// Writes a new base: the current one with every later log applied, and `pending`
    /// (not written to any log) on top. True on success.
    fn merge(&mut self, log: &mut Option<LogWriter>, pending: Option<&Pending>) -> bool {
        let upto = log.as_ref().map_or(self.next_log - 1, |l| l.number);
        let mut res = self.write_base(upto, pending);
        if let Err(e) = &res
            && store::is_full(e)
            && self.drop_previous()
        {
            res = self.write_base(upto, pending);
        }
        match res {
            Ok(bytes) => {
                *log = None;
                self.next_gen += 1;
                self.base_bytes = bytes;
                self.base_name = store::CURRENT;
                self.prev_log = self.base_log;
                self.base_log = upto;
                // The previous base needs the logs after its own; older ones can go.
                self.remove_logs_upto(self.prev_log);
                self.health.recovered(&self.dir);
                true
            }
            Err(e) => {
                store::discard_tmp(&self.dir);
                // The log goes on; merging is tried again when it grows.
                self.health.failed(&self.dir, "save the state", &e);
                false
            }
        }
    }

    fn remove_logs_upto(&self, upto: u64) {
        if let Ok(list) = store::list_logs(&self.dir) {
            for (n, p) in list {
                if n <= upto {
                    let _ = fs::remove_file(p);
                }
            }
        }
    }

    /// Makes room on a full filesystem by giving up the previous generation (and the
    /// logs only it needs): a fallback is worth less than saving at all, and a base
    /// needs room for itself next to the current one. True if something was freed.
    fn drop_previous(&mut self) -> bool {
        if self.base_name != store::CURRENT {
            // The previous generation is the base itself.
            return false;
        }
        store::discard_tmp(&self.dir);
        match fs::remove_file(self.dir.join(store::PREVIOUS)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => return false,
        }
        self.remove_logs_upto(self.base_log);
        self.prev_log = self.base_log;
        // On a filesystem too small for three generations this is every merge: say it once.
        if std::mem::replace(&mut self.dropped_previous, true) {
            tracing::debug!(dir = %self.dir.display(), "State directory full: dropped the previous state generation to make room.");
        } else {
            tracing::warn!(dir = %self.dir.display(), "State directory full: dropped the previous state generation to make room (said once per run).");
        }
        true
    }

    fn write_base(&mut self, upto: u64, pending: Option<&Pending>) -> io::Result<u64> {
        // Where the newest line about each file changed since the current base is
        // (log, offset, length), not the line itself: after a first run that is every
        // file.
        let mut logs: HashMap<u64, fs::File> = HashMap::new();
        let mut changed: HashMap<String, Newer> = HashMap::new();
        for (n, path) in store::list_logs(&self.dir)? {
            if n <= self.base_log || n > upto {
                continue;
            }
            store::read_log(&path, |line, at| {
                if let Some((p, gone)) = store::path_of(line) {
                    let newer = if gone {
                        Newer::Gone
                    } else {
                        Newer::Log(n, at, line.len())
                    };
                    changed.insert(p, newer);
                }
            })?;
            logs.insert(n, fs::File::open(&path)?);
        }
        // What is not in any log yet is newer still.
        for (i, line) in pending.iter().flat_map(|p| p.files.iter().enumerate()) {
            if let Some((p, gone)) = std::str::from_utf8(line).ok().and_then(store::path_of) {
                changed.insert(p, if gone { Newer::Gone } else { Newer::Pending(i) });
            }
        }
        let mut buf = Vec::new();
        let mut newer = |at: &Newer| -> io::Result<Vec<u8>> {
            match *at {
                Newer::Log(n, offset, len) => {
                    let f = logs
                        .get(&n)
                        .ok_or_else(|| io::Error::other("state log vanished"))?;
                    buf.resize(len, 0);
                    std::os::unix::fs::FileExt::read_exact_at(f, &mut buf, offset)?;
                    Ok(buf.clone())
                }
                Newer::Pending(i) => Ok(pending.map(|p| p.files[i].clone()).unwrap_or_default()),
                Newer::Gone => Ok(Vec::new()),
            }
        };
        let now = wall_now();
        self.ledger.prune(now);
        let mut w = BaseWriter::create(&self.dir)?;
        let meta = Meta {
            generation: self.next_gen,
            written_at: now,
            log: upto,
            since: self.since,
        };
        w.line(&Line::Meta(meta).encode())?;
        let base = self.dir.join(self.base_name);
        if base.exists() {
            let res = store::for_each_line(&base, |line| {
                if !line.starts_with("{\"file\":") {
                    return Ok(());
                }
                let Some((p, _)) = store::path_of(line) else {
                    return Ok(());
                };
                match changed.remove(&p) {
                    Some(Newer::Gone) => {}
                    Some(at) => w.line(&newer(&at)?)?,
                    None => w.line(line.as_bytes())?,
                }
                Ok(())
            });
            match res {
                Ok(()) => {}
                // Kept as it is: a full disk is told apart by its kind.
                Err(store::DecodeError::Io(e)) => return Err(e),
                Err(e) => {
                    // Only this process writes it, and it was whole when loaded; if it
                    // went bad under us, the logs and the previous generation still hold
                    // what is needed to load.
                    return Err(io::Error::other(format!(
                        "cannot read the current state to merge into: {e}"
                    )));
                }
            }
        }
        let mut rest: Vec<(String, Newer)> = changed
            .into_iter()
            .filter(|(_, at)| !matches!(at, Newer::Gone))
            .collect();
        rest.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, at) in rest {
            w.line(&newer(&at)?)?;
        }
        w.line(&Line::encode_ledger(&self.ledger))?;
        w.finish(&self.dir, self.base_name != store::CURRENT)
    }
}

/// Where the newest line about a file changed since the base is.
enum Newer {
    /// In log N, at this offset, this long.
    Log(u64, u64, usize),
    /// In the lines not yet written, at this index.
    Pending(usize),
    /// The file is no longer tracked.
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::tests::cp;

    fn decision(id: &str) -> Decision {
        Decision {
            session: "claude/s/".to_owned(),
            id: id.to_owned(),
            record_ts: None,
        }
    }

    /// A burst of deltas, as in the first save of every file after a start, merges at
    /// twice the base rather than at half of it: 5 MB of checkpoints waiting at once end
    /// in generation 4 (half the base: generation 6, and the gap grows with the burst),
    /// and every checkpoint is in the state after. The deltas are all queued before the
    /// writer runs, on this thread: no timing decides what counts as a burst.
    #[test]
    fn a_burst_of_deltas_merges_seldom_and_keeps_every_file() {
        let tmp = tempfile::tempdir().unwrap();
        // A first run's directory: its lock and empty first generation.
        drop(crate::state::open(tmp.path(), 600_000).unwrap());
        let saver = Saver {
            dir: tmp.path().to_path_buf(),
            ledger: Ledger::default(),
            catch_up: 600_000,
            next_gen: 2,
            base_log: 0,
            prev_log: 0,
            next_log: 1,
            base_bytes: 0,
            base_name: store::CURRENT,
            behind: false,
            dropped_previous: false,
            since: 0,
            health: Arc::default(),
            progress: Arc::default(),
        };
        let dir = "d".repeat(120);
        let (tx, rx) = crossbeam_channel::unbounded();
        for i in 0..300u64 {
            let files = (0..100)
                .map(|j| cp(&format!("/{dir}/{i}/{j}.jsonl"), 7))
                .collect();
            let d = Delta {
                files,
                ..Delta::default()
            };
            tx.send((i + 1, Box::new(d))).unwrap();
        }
        drop(tx);
        saver.run(&rx);
        let (_, loaded) = crate::state::open(tmp.path(), 600_000).unwrap();
        let base = loaded.base.unwrap();
        assert_eq!(base.files.len(), 30_000);
        assert_eq!(base.meta.generation, 4, "merged too often, or too seldom");
    }

    /// Merged deltas say what applying them in turn says: the later word on a path wins.
    #[test]
    fn a_merged_delta_is_the_deltas_applied_in_turn() {
        let mut d = Delta {
            files: vec![cp("/a", 10), cp("/b", 10), cp("/c", 10)],
            removed: vec!["/d".to_owned()],
            decided: vec![decision("1")],
        };
        d.merge(Delta {
            files: vec![cp("/a", 20), cp("/d", 5)],
            removed: vec!["/b".to_owned()],
            decided: vec![decision("2")],
        });
        let mut files: Vec<(&str, u64)> = d
            .files
            .iter()
            .map(|c| (c.path.as_str(), c.offset))
            .collect();
        files.sort_unstable();
        assert_eq!(files, [("/a", 20), ("/c", 10), ("/d", 5)]);
        assert_eq!(d.removed, ["/b"]);
        let ids: Vec<&str> = d.decided.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["1", "2"]);
    }
}
