//! `replay` and `scan`: read whole files through the same sans-IO pipeline the daemon
//! uses, on virtual time (the records' own timestamps are the clock).

use crate::clock::{Now, wall_now};
use crate::error::Error;
use crate::feed::FileFeed;
use crate::model::{Event, ProviderKind};
use crate::pool;
use crate::provider::Obs;
use crate::reduce::{Reducer, SessionView, Src};
use crate::rows::RowFeed;
use crate::tail::Stat;
use crate::tail_first::{self, Plan};
use crate::watch::discover::Walked;
use crate::watch::{self, Found, Root};
use std::collections::HashMap;
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

/// Far enough in the future that every settle timer is due, with room to add to it.
const END_OF_TIME: i64 = i64::MAX / 4;

#[derive(Debug, Clone)]
pub struct Options {
    pub settle_ms: u64,
    pub max_line: usize,
    pub seen_capacity: usize,
    /// Threads that read files (0: one per core).
    pub threads: usize,
}

/// What the clock does when a file ends.
#[derive(Debug, Clone, Copy)]
pub enum AtEof {
    /// Time runs on: every pending settle timer fires (replay).
    RunOn,
    /// Time stops at this moment: timers due by then fire (scan).
    StopAt(Now),
}

/// Resolves command-line paths (files or directories) to transcripts.
pub fn collect(paths: &[PathBuf], provider: Option<ProviderKind>) -> Result<Vec<Found>, Error> {
    Ok(roots(paths, provider)?
        .iter()
        .flat_map(watch::find)
        .collect())
}

/// Command-line paths (files or directories) as roots: a path that is not there is an
/// error; a file no agent is known to write is logged and left out, and a file root
/// carries its agent, so it is not told again. `scan` walks them as it reads.
pub fn roots(paths: &[PathBuf], provider: Option<ProviderKind>) -> Result<Vec<Root>, Error> {
    let mut out = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(Error::Missing(p.clone()));
        }
        let provider = if p.is_file() {
            let Some(kind) = watch::discover::classify(p, provider) else {
                tracing::warn!(path = %p.display(), "Cannot tell which agent wrote this file; skipped (try --provider).");
                continue;
            };
            Some(kind)
        } else {
            provider
        };
        out.push(Root {
            path: p.clone(),
            provider,
        });
    }
    Ok(out)
}

/// Runs every file through one reducer, calling `emit` for each event in order.
pub fn run(
    files: &[Found],
    opts: &Options,
    at_eof: AtEof,
    emit: impl FnMut(&Event) -> Result<(), Error>,
) -> Result<Reducer, Error> {
    run_counting(
        Files::Listed(files),
        opts,
        at_eof,
        false,
        &mut ScanStats::default(),
        emit,
    )
    .map(|(r, _)| r)
}

/// One file read and projected: its observations with their line numbers, in order.
struct FileRead {
    path: Arc<str>,
    provider: ProviderKind,
    obs: Vec<(u64, Obs)>,
    /// The virtual clock before the first record: 0, or for records that carry no time
    /// of their own (Cursor's) the file's last change, since they happened by then.
    clock_start: i64,
    /// The number of the last complete line.
    last_line: u64,
    /// Why reading started at the first byte, when it did.
    full_reason: Option<&'static str>,
    /// Bytes parsed, and the file's size.
    parsed: u64,
    size: u64,
}

/// A walked candidate of a root: its agent told as `classify` tells it, and read from the
/// handle that read its first line, if one did (one open a file, not one to tell and one
/// to read). `None` for a file of no agent's.
fn read_candidate(
    path: PathBuf,
    root_provider: Option<ProviderKind>,
    opts: &Options,
    tail_first: bool,
) -> Result<Option<FileRead>, Error> {
    let Some((provider, mut file)) = watch::discover::classify_open(&path, root_provider) else {
        return Ok(None);
    };
    let found = Found { path, provider };
    if let Some(f) = &mut file {
        f.seek(SeekFrom::Start(0)).map_err(|source| Error::Read {
            path: found.path.clone(),
            source,
        })?;
    }
    read_file(&found, opts, tail_first, file)
}

/// Reads and projects one file (no reducer: that part stays in file order on one
/// thread), from its last turns only when `tail_first`; from `file` when given (open,
/// at its start). `None` for a file with no conversation in it.
fn read_file(
    f: &Found,
    opts: &Options,
    tail_first: bool,
    file: Option<std::fs::File>,
) -> Result<Option<FileRead>, Error> {
    let err = |source| Error::Read {
        path: f.path.clone(),
        source,
    };
    if let Some(feed) = RowFeed::new(&f.path, f.provider, opts.max_line) {
        return Ok(Some(read_rows(feed, f)));
    }
    let mut feed = FileFeed::new(&f.path, f.provider, opts.max_line);
    if !feed.is_conversation() {
        return Ok(None);
    }
    let mut file = match file {
        Some(file) => file,
        None => crate::tail::open(&f.path).map_err(err)?,
    };
    let clock_start = if f.provider.records_have_time() {
        0
    } else {
        file.metadata().map_or(0, |m| Stat::of(&m).mtime_ms())
    };
    let mut start = 0;
    // Where parsing proper starts (past a jump).
    let mut parse_from = 0;
    let mut full_reason = None;
    let mut kept = None;
    if tail_first {
        match tail_first::plan(&mut file, f.provider, &f.path).map_err(err)? {
            Plan::Tail { start: at, tail } => {
                kept = tail;
                feed = at.feed(&f.path, f.provider, opts.max_line);
                start = at.offset;
                parse_from = at.parse_from();
            }
            Plan::Full(reason) => {
                tracing::info!(path = %f.path.display(), reason, "Read whole (tail-first does not apply).");
                full_reason = Some(reason);
            }
        }
        file.seek(SeekFrom::Start(start)).map_err(err)?;
    }
    let mut obs = Vec::new();
    let read = match kept {
        // What the backward read kept: the file's end as of then, as a read would give.
        Some(bytes) => {
            feed.feed(bytes.bytes(), |src, o| obs.push((src.line, o)));
            bytes.bytes().len() as u64
        }
        None => feed
            .read_to_end(&mut file, |src, o| obs.push((src.line, o)))
            .map_err(err)?,
    };
    feed.finish(|src, o| obs.push((src.line, o)));
    let trailing = feed.pending();
    if trailing > 0 {
        tracing::info!(path = %f.path.display(), bytes = trailing, "File ends in an unfinished line; it is not parsed until its newline arrives.");
    }
    Ok(Some(FileRead {
        path: feed.path.clone(),
        provider: f.provider,
        obs,
        clock_start,
        last_line: feed.reader().line_no() - 1,
        full_reason,
        parsed: (start + read).saturating_sub(parse_from),
        size: start + read,
    }))
}

/// Reads a database's rows (`rows.rs`): every row, as a file is read whole. A database
/// that cannot be read gives its anomaly and nothing else.
fn read_rows(mut feed: RowFeed, f: &Found) -> FileRead {
    let mut obs = Vec::new();
    let read = feed
        .read(|src, o| obs.push((src.line, o)))
        .unwrap_or_default();
    let size = std::fs::metadata(&f.path).map_or(0, |m| m.len());
    FileRead {
        path: feed.path.clone(),
        provider: f.provider,
        obs,
        clock_start: 0,
        last_line: feed
            .position()
            .and_then(|p| u64::try_from(p).ok())
            .unwrap_or(0),
        full_reason: Some("database"),
        parsed: read.bytes,
        size: size.max(read.bytes),
    }
}

/// How a scan read its files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScanStats {
    pub files: u64,
    /// Files read from a restart point near their end.
    pub tail_first: u64,
    /// Files read whole, by reason.
    pub full: std::collections::BTreeMap<&'static str, u64>,
    pub bytes_total: u64,
    pub bytes_parsed: u64,
}

impl ScanStats {
    fn add(&mut self, r: &FileRead) {
        self.files += 1;
        self.bytes_total += r.size;
        self.bytes_parsed += r.parsed;
        match r.full_reason {
            Some(why) => *self.full.entry(why).or_default() += 1,
            None => self.tail_first += 1,
        }
    }

    /// One line for people (stderr).
    pub fn summary(&self) -> String {
        let full: Vec<String> = self.full.iter().map(|(k, v)| format!("{k} {v}")).collect();
        format!(
            "{} files: {} read from their last turns, {} whole ({}); parsed {} of {} bytes",
            self.files,
            self.tail_first,
            self.full.values().sum::<u64>(),
            if full.is_empty() {
                "-".to_owned()
            } else {
                full.join(", ")
            },
            self.bytes_parsed,
            self.bytes_total
        )
    }
}

/// How many files may be read ahead of the one being reduced, per thread, when they are
/// read whole (replay, `--full-read`): each result holds a whole file's observations.
const READ_AHEAD: usize = 4;
/// The same when read from their last turns (`scan`): the results are small, and with
/// 4 a worker that met a large file left the other idle once it was four files ahead
/// (16: `scan` 7–9% faster on the 600-session tree, BENCHMARKS.md round 8).
const TAIL_READ_AHEAD: usize = 16;

/// Where a run's files come from: listed before the run, or walked from roots while the
/// first ones are read (`scan`).
#[derive(Clone, Copy)]
pub enum Files<'a> {
    Listed(&'a [Found]),
    Walked(&'a [Root]),
}

/// [`run`], also returning the number of the last complete line of each file. Files are
/// read and projected in parallel; the reducer takes them in the given order (a walk's:
/// path order within each root), so events and states are those of a sequential run.
fn run_counting(
    files: Files<'_>,
    opts: &Options,
    at_eof: AtEof,
    tail_first: bool,
    stats: &mut ScanStats,
    mut emit: impl FnMut(&Event) -> Result<(), Error>,
) -> Result<(Reducer, HashMap<Arc<str>, u64>), Error> {
    let mut reducer = Reducer::new(opts.settle_ms, opts.seen_capacity);
    let mut last_lines = HashMap::new();
    let mut events = Vec::new();
    let threads = match (opts.threads, files) {
        (0, Files::Listed(f)) => pool::threads_for(f.len()),
        (0, Files::Walked(_)) => pool::threads_for(usize::MAX),
        (n, _) => n,
    };
    let window = threads
        * if tail_first {
            TAIL_READ_AHEAD
        } else {
            READ_AHEAD
        };
    let take = |_, read| {
        let Some(read) = read? else { return Ok(()) };
        stats.add(&read);
        let mut clock: i64 = read.clock_start;
        for (line, obs) in read.obs {
            if let Some(t) = obs.record_ts {
                clock = clock.max(t);
            }
            let now = Now::virtual_at(clock);
            let src = Src {
                provider: read.provider,
                path: read.path.clone(),
                line,
            };
            reducer.tick(now, &mut events);
            reducer.apply(&src, obs, now, &mut events);
        }
        last_lines.insert(read.path, read.last_line);
        let end = match at_eof {
            AtEof::RunOn => Now::virtual_at(END_OF_TIME),
            AtEof::StopAt(now) => now,
        };
        reducer.tick(end, &mut events);
        for ev in events.drain(..) {
            emit(&ev)?;
        }
        Ok(())
    };
    match files {
        Files::Listed(files) => pool::in_order(
            files.len(),
            threads,
            window,
            |i| read_file(&files[i], opts, tail_first, None),
            take,
        )?,
        Files::Walked(roots) => pool::in_order_from(
            |send| walk_roots(roots, send),
            threads,
            window,
            // A candidate's agent is told by the worker, with its root's provider.
            |(walked, root_provider)| match walked {
                Walked::File(f) => read_file(&f, opts, tail_first, None),
                Walked::Candidate(path) => read_candidate(path, root_provider, opts, tail_first),
            },
            take,
        )?,
    }
    Ok((reducer, last_lines))
}

/// Every root's files in turn, as [`collect`] lists them (one root's in path order).
fn walk_roots(roots: &[Root], send: &mut dyn FnMut((Walked, Option<ProviderKind>)) -> bool) {
    for root in roots {
        let mut going = true;
        watch::discover::walk(root, &mut |w| {
            going = send((w, root.provider));
            going
        });
        if !going {
            return;
        }
    }
}

/// `scan`: every session's state as of now, from each file's last turns where that gives
/// the same state as a whole read.
pub fn scan(files: &[Found], opts: &Options) -> Result<Vec<SessionView>, Error> {
    scan_with(files, opts, true).map(|(v, _)| v)
}

/// [`scan`], reading every file whole unless `tail_first`, with how the files were read.
pub fn scan_with(
    files: &[Found],
    opts: &Options,
    tail_first: bool,
) -> Result<(Vec<SessionView>, ScanStats), Error> {
    scan_judged(Files::Listed(files), opts, tail_first, None)
}

/// [`scan_with`], then the daemon's liveness check on this machine's processes: a
/// working session quiet for `liveness_after_ms` (by its last record's time) whose
/// writer is not alive ends as interrupted (`writer_gone`), as the daemon would end it.
/// Roots ([`Files::Walked`]) are read while the walk lists the rest: the same states
/// as their files listed first.
pub fn scan_live(
    files: Files<'_>,
    opts: &Options,
    tail_first: bool,
    liveness_after_ms: u64,
) -> Result<(Vec<SessionView>, ScanStats), Error> {
    scan_judged(files, opts, tail_first, Some(liveness_after_ms))
}

fn scan_judged(
    files: Files<'_>,
    opts: &Options,
    tail_first: bool,
    liveness_after_ms: Option<u64>,
) -> Result<(Vec<SessionView>, ScanStats), Error> {
    let mut stats = ScanStats::default();
    let wall = wall_now();
    let now = Now {
        mono: u64::try_from(wall).unwrap_or(0),
        wall,
    };
    // The processes are read while the files are, on a thread of their own: judging
    // then takes no pass over /proc after the last file.
    let procs = liveness_after_ms.map(|_| std::thread::spawn(crate::daemon::liveness::read_procs));
    let (mut reducer, last_lines) = run_counting(
        files,
        opts,
        AtEof::StopAt(now),
        tail_first,
        &mut stats,
        |_| Ok(()),
    )?;
    if let (Some(after), Some(procs)) = (liveness_after_ms, procs) {
        // The events it makes are not scan's to print: only the states they leave.
        match procs.join() {
            Ok(Some(procs)) => {
                crate::daemon::liveness::sweep_with(&procs, after, &mut reducer, now);
            }
            // No /proc (logged), or the thread failed: judge as the daemon does.
            Ok(None) | Err(_) => {
                crate::daemon::liveness::sweep(after, &mut reducer, now, &mut Vec::new());
            }
        }
    }
    let mut views = reducer.sessions();
    for v in &mut views {
        // A working session is as recent as the last record read from its file, even a
        // record that changed nothing.
        if v.state == crate::model::SessionState::Working
            && let Some(&last) = last_lines.get(&v.path)
        {
            v.line = v.line.max(last);
        }
    }
    Ok((views, stats))
}
