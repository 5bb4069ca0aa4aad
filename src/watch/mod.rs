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
use rustix::event::{EventfdFlags, eventfd};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
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
    bell: Arc<OwnedFd>,
    rescan: Arc<AtomicBool>,
    /// Counters shared by the hint senders and the core, for the shutdown summary.
    pub stats: Arc<WatchCounters>,
}

/// The receiving side, owned by the core.
#[derive(Debug)]
pub struct HintRx {
    pub rx: Receiver<Hint>,
    bell: Arc<OwnedFd>,
    rescan: Arc<AtomicBool>,
    /// Counters shared by the hint senders and the core, for the shutdown summary.
    pub stats: Arc<WatchCounters>,
}

/// A bounded hint channel, with its bell: the core sleeps in `poll(2)` on the bell and
/// the native watcher's descriptor together, so a file's change wakes it directly, with
/// no thread in between (see [`native`]); every other hint rings the bell.
pub fn channel(capacity: usize) -> std::io::Result<(HintTx, HintRx)> {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let bell = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
    let rescan = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(WatchCounters::default());
    Ok((
        HintTx {
            tx,
            bell: bell.clone(),
            rescan: rescan.clone(),
            stats: stats.clone(),
        },
        HintRx {
            rx,
            bell,
            rescan,
            stats,
        },
    ))
}

impl HintTx {
    /// Sends a hint; when the channel is full, marks a full rescan instead.
    /// Returns false once the core has gone away.
    pub fn send(&self, hint: Hint) -> bool {
        let sent = match self.tx.try_send(hint) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                diag::HintOverflowed.emit(&self.stats);
                self.rescan.store(true, Ordering::Release);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        };
        self.ring();
        sent
    }

    /// Wakes the core (for a hint, or anything else it waits for: a remote's batch).
    pub fn ring(&self) {
        // Nonblocking: the counter can only be full after 2^64 - 2 rings not yet
        // answered, and then the core is awake anyway.
        let _ = rustix::io::write(&*self.bell, &1u64.to_ne_bytes());
    }

    /// Asks for a full rescan (the watcher lost track of something); `why` is logged
    /// and counted.
    pub fn rescan(&self, why: diag::Rescan<'_>) {
        why.emit(&self.stats);
        self.rescan.store(true, Ordering::Release);
        // Wake the core; if the channel is full it is awake anyway.
        let _ = self.tx.try_send(Hint::Sweep);
        self.ring();
    }
}

impl HintRx {
    /// True (once) when a rescan was requested since the last call.
    pub fn take_rescan(&self) -> bool {
        self.rescan.swap(false, Ordering::AcqRel)
    }

    /// The bell, readable once rung: for the core's `poll(2)`.
    pub fn bell(&self) -> BorrowedFd<'_> {
        self.bell.as_fd()
    }

    /// Answers the rings so far (before the hints they rang for are taken).
    pub fn quiet(&self) {
        let mut n = [0u8; 8];
        let _ = rustix::io::read(&*self.bell, &mut n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_channel_marks_a_rescan_instead_of_dropping() {
        let (tx, rx) = channel(1).unwrap();
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

    /// The core sleeps on the bell: every hint, and a plain ring, makes it readable
    /// until the core answers.
    #[test]
    fn every_hint_rings_the_bell_until_answered() {
        use rustix::event::{PollFd, PollFlags, poll};
        let (tx, rx) = channel(4).unwrap();
        let rung = |rx: &HintRx| {
            let mut fds = [PollFd::from_borrowed_fd(rx.bell(), PollFlags::IN)];
            let now = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            poll(&mut fds, Some(&now)).unwrap() == 1
        };
        assert!(!rung(&rx));
        assert!(tx.send(Hint::Poll));
        assert!(tx.send(Hint::Sweep));
        assert!(rung(&rx));
        rx.quiet();
        assert!(!rung(&rx));
        assert_eq!(rx.rx.try_recv().ok(), Some(Hint::Poll));
        tx.ring();
        assert!(rung(&rx));
        rx.quiet();
        tx.rescan(diag::Rescan::QueueOverflowed);
        assert!(rung(&rx));
    }
}
