//! Discovery and watching. This layer names paths; it never reads transcript contents
//! beyond a first line for provider detection.
//!
//! Watching produces [`Hint`]s only: "look at this path" or "look at everything". The
//! tail layer re-stats and reads from its own offsets, so a duplicate, late or lost hint
//! costs at most a little latency, never correctness (polling catches what is lost).

pub mod discover;
pub mod native;
pub mod poll;
pub mod tree;

pub use discover::{Found, Root, find};

use crate::diag::{self, WatchCounters};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How changes are noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WatcherMode {
    /// The native watcher plus polling; polling alone if the native watcher cannot start.
    Auto,
    /// The native watcher plus polling; fail if the native watcher cannot start.
    Native,
    /// Polling only (NFS, SSHFS and other filesystems where inotify is blind).
    Poll,
}

/// How many hints may wait for the core before a full rescan replaces them.
pub const HINT_CAPACITY: usize = 4096;

/// A reason to look again. Hints never carry state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// Something happened at this path. `maybe_dir` is set when it may be a directory
    /// (created, renamed or removed), so the core knows a stat is worth it even when the
    /// name is not a transcript's.
    Path { path: PathBuf, maybe_dir: bool },
    /// Time to stat the live files (`--poll-interval`).
    Poll,
    /// Time to re-list every root (the slow sweep).
    Sweep,
    /// The agent's own word on a session (registry, background job, hook): applied by
    /// the core to the session it names.
    Signal(Box<crate::provider::signal::Signal>),
}

/// The sending side of the hint channel. Sending never blocks and never loses
/// information: a hint that does not fit marks a full rescan instead.
#[derive(Debug, Clone)]
pub struct HintTx {
    tx: Sender<Hint>,
    rescan: Arc<AtomicBool>,
    /// Counters shared by the hint senders and the core, for the shutdown summary.
    pub stats: Arc<WatchCounters>,
}

/// The receiving side, owned by the core.
#[derive(Debug)]
pub struct HintRx {
    pub rx: Receiver<Hint>,
    rescan: Arc<AtomicBool>,
    /// Counters shared by the hint senders and the core, for the shutdown summary.
    pub stats: Arc<WatchCounters>,
}

/// A bounded hint channel.
pub fn channel(capacity: usize) -> (HintTx, HintRx) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let rescan = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(WatchCounters::default());
    (
        HintTx {
            tx,
            rescan: rescan.clone(),
            stats: stats.clone(),
        },
        HintRx { rx, rescan, stats },
    )
}

impl HintTx {
    /// Sends a hint; when the channel is full, marks a full rescan instead.
    /// Returns false once the core has gone away.
    pub fn send(&self, hint: Hint) -> bool {
        match self.tx.try_send(hint) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                diag::HintOverflowed.emit(&self.stats);
                self.rescan.store(true, Ordering::Release);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// Asks for a full rescan (the watcher lost track of something); `why` is logged
    /// and counted.
    pub fn rescan(&self, why: diag::Rescan<'_>) {
        why.emit(&self.stats);
        self.rescan.store(true, Ordering::Release);
        // Wake the core; if the channel is full it is awake anyway.
        let _ = self.tx.try_send(Hint::Sweep);
    }
}

impl HintRx {
    /// True (once) when a rescan was requested since the last call.
    pub fn take_rescan(&self) -> bool {
        self.rescan.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_channel_marks_a_rescan_instead_of_dropping() {
        let (tx, rx) = channel(1);
        let hint = |p: &str| Hint::Path {
            path: PathBuf::from(p),
            maybe_dir: false,
        };
        assert!(tx.send(hint("a")));
        assert!(!rx.take_rescan());
        assert!(tx.send(hint("b")));
        assert!(rx.take_rescan(), "the lost hint must become a rescan");
        assert!(!rx.take_rescan());
        assert_eq!(rx.rx.try_recv().ok(), Some(hint("a")));
        assert_eq!(tx.stats.overflow.get(), 1);
        drop(rx);
        assert!(!tx.send(hint("c")));
    }
}
