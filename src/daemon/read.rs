//! What a look at a file hands the core: owned observations and the token that commits
//! the file's tail once they are reduced, plus the other changes to the sessions that
//! the look found (re-derived, gone, parked, taken back from a checkpoint).
//!
//! Plain data, so the file table never touches the reducer and the reducer never
//! touches a file: the table reads, the core applies these in the order given.

use crate::clock::Now;
use crate::model::ProviderKind;
use crate::provider::Obs;
use crate::reduce::SavedSession;
use crate::tail::TailState;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Files present at start: state only, no events.
    History,
    Live,
}

/// What one look found, for the core to apply in this order.
pub(super) enum Step {
    /// Boxed: the other steps are small.
    Read(Box<Read>),
    /// The file is read again from its first byte: its sessions start over.
    Forget(Arc<str>),
    /// The file is gone: its sessions are forgotten and its checkpoint removed.
    Gone(PathBuf),
    /// The file went idle: its sessions keep only their saved form.
    Park(Arc<str>, Now),
    /// The file continues from its checkpoint: these are its sessions.
    Restore(Arc<str>, Vec<SavedSession>, Now),
}

/// Observations read from one file, in file order.
pub(super) struct Read {
    pub provider: ProviderKind,
    pub path: Arc<str>,
    /// (line number, observation).
    pub obs: Vec<(u64, Obs)>,
    pub now: Now,
    /// Records older than this (Unix ms) are history: they change state, emit nothing.
    pub history_before: i64,
    /// Nothing this read produces is emitted (a re-read up to a checkpoint).
    pub quiet: bool,
    /// `None` for what an open handle still held after its file went away.
    pub commit: Option<Commit>,
    /// The read stopped at [`READ_CHUNK`]: once this is reduced and committed, the core
    /// reads on from there, so a large append is held a chunk at a time, never whole.
    pub more: Option<More>,
}

/// The most bytes one read takes in before its observations are reduced.
pub(super) const READ_CHUNK: u64 = 8 * 1024 * 1024;

/// Where a chunked read goes on: the same mode and history cut as its first chunk.
#[derive(Debug, Clone, Copy)]
pub(super) struct More {
    pub mode: Mode,
}

/// The tail-commit token: hand it back to the file table once the observations before
/// it are reduced.
pub(super) struct Commit {
    pub path: PathBuf,
    pub res: io::Result<()>,
    /// The newest record time read, for the writer's clock skew.
    pub newest: Option<i64>,
    pub mode: Mode,
    pub now: Now,
    /// A tail already committed elsewhere (a history worker's), taken over as is.
    pub tail: Option<TailState>,
    /// History: count the bytes read since this offset.
    pub count_from: Option<u64>,
}

impl Read {
    /// The newest record time among the observations.
    pub fn newest(obs: &[(u64, Obs)]) -> Option<i64> {
        obs.iter().map(|(_, o)| o.record_ts).max().flatten()
    }
}

/// The last read of `steps` that commits, to adjust what its commit does.
pub(super) fn last_commit(steps: &mut [Step]) -> Option<&mut Commit> {
    steps.iter_mut().rev().find_map(|s| match s {
        Step::Read(r) => r.commit.as_mut(),
        _ => None,
    })
}
