//! `replay` and `scan`: read whole files through the same sans-IO pipeline the daemon
//! uses, on virtual time (the records' own timestamps are the clock).

use crate::clock::{Now, wall_now};
use crate::error::Error;
use crate::feed::FileFeed;
use crate::model::{Event, ProviderKind};
use crate::pool;
use crate::provider::Obs;
use crate::reduce::{Reducer, SessionView, Src};
use crate::watch::{self, Found, Root};
use std::collections::HashMap;
use std::fs::File;
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
    let mut out = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(Error::Missing(p.clone()));
        }
        let found = watch::find(&Root {
            path: p.clone(),
            provider,
        });
        if found.is_empty() && p.is_file() {
            tracing::warn!(path = %p.display(), "Cannot tell which agent wrote this file; skipped (try --provider).");
        }
        out.extend(found);
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
    run_counting(files, opts, at_eof, emit).map(|(r, _)| r)
}

/// One file read and projected: its observations with their line numbers, in order.
struct FileRead {
    path: Arc<str>,
    provider: ProviderKind,
    obs: Vec<(u64, Obs)>,
    /// The number of the last complete line.
    last_line: u64,
}

/// Reads and projects one file (no reducer: that part stays in file order on one
/// thread). `None` for a file with no conversation in it.
fn read_file(f: &Found, opts: &Options) -> Result<Option<FileRead>, Error> {
    let mut feed = FileFeed::new(&f.path, f.provider, opts.max_line);
    if !feed.is_conversation() {
        return Ok(None);
    }
    let mut file = File::open(&f.path).map_err(|source| Error::Read {
        path: f.path.clone(),
        source,
    })?;
    let mut obs = Vec::new();
    feed.read_to_end(&mut file, |src, o| obs.push((src.line, o)))
        .map_err(|source| Error::Read {
            path: f.path.clone(),
            source,
        })?;
    let trailing = feed.reader().pending();
    if trailing > 0 {
        tracing::info!(path = %f.path.display(), bytes = trailing, "File ends in an unfinished line; it is not parsed until its newline arrives.");
    }
    Ok(Some(FileRead {
        path: feed.path.clone(),
        provider: f.provider,
        obs,
        last_line: feed.reader().line_no() - 1,
    }))
}

/// How many files may be read ahead of the one being reduced, per thread.
const READ_AHEAD: usize = 4;

/// [`run`], also returning the number of the last complete line of each file. Files are
/// read and projected in parallel; the reducer takes them in the given order, so events
/// and states are those of a sequential run.
fn run_counting(
    files: &[Found],
    opts: &Options,
    at_eof: AtEof,
    mut emit: impl FnMut(&Event) -> Result<(), Error>,
) -> Result<(Reducer, HashMap<Arc<str>, u64>), Error> {
    let mut reducer = Reducer::new(opts.settle_ms, opts.seen_capacity);
    let mut last_lines = HashMap::new();
    let mut events = Vec::new();
    let threads = match opts.threads {
        0 => pool::threads_for(files.len()),
        n => n,
    };
    pool::in_order(
        files.len(),
        threads,
        threads * READ_AHEAD,
        |i| read_file(&files[i], opts),
        |_, read| {
            let Some(read) = read? else { return Ok(()) };
            let mut clock: i64 = 0;
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
        },
    )?;
    Ok((reducer, last_lines))
}

/// `scan`: every session's state as of now.
pub fn scan(files: &[Found], opts: &Options) -> Result<Vec<SessionView>, Error> {
    let wall = wall_now();
    let now = Now {
        mono: u64::try_from(wall).unwrap_or(0),
        wall,
    };
    let (reducer, last_lines) = run_counting(files, opts, AtEof::StopAt(now), |_| Ok(()))?;
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
    Ok(views)
}
