//! One stop signal for every task and thread of the daemon, so that no part of a stop
//! depends on anything outside the process (such as connecting to the socket's path,
//! which may be gone).
//!
//! It wakes each kind of waiter the way it waits: a thread blocked in a crossbeam
//! `select!` or `recv_timeout` (the token's channel disconnects), an async task
//! ([`Shutdown::stopped`]), and a `poll(2)` loop ([`Shutdown::fd`] becomes readable: its
//! pipe's write end is closed). Once stopped it stays stopped.
//!
//! SIGTERM/SIGINT (`daemon::shutdown_signal`) fire it. Every long-lived task then stops
//! by it, or by a queue closing behind a task that stopped by it:
//! - the core thread checks it between files and waits on its fd; the native watcher and
//!   the history readers are the core's, and end when it returns;
//! - the poll ticker, the systemd notifier and the socket server's loop wait on it;
//! - the event writer's thread stops holding back on it, then ends when the core's
//!   sender goes (it must write the core's last batch); it is left behind only when the
//!   event stream stays blocked past its grace;
//! - the state writer ends when the event writer drops its queue;
//! - tail clients end when the stopped server closes the hub; the status keeper
//!   (`views`) ends when the core and the hub are gone, so it answers to the end;
//! - delivery workers finish their queues when `Delivery::close` disconnects them, after
//!   the core hands them back, within a grace (see `sink::delivery`).

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::io::{self, PipeReader, PipeWriter};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

struct Inner {
    stopped: AtomicBool,
    /// Dropped at the stop: every clone of `rx` then reports a disconnection.
    tx: Mutex<Option<Sender<()>>>,
    rx: Receiver<()>,
    notify: tokio::sync::Notify,
    /// Reads EOF once `pipe_tx` is dropped at the stop.
    pipe_rx: PipeReader,
    pipe_tx: Mutex<Option<PipeWriter>>,
}

/// A clonable stop signal; see the module docs.
#[derive(Clone)]
pub struct Shutdown(Arc<Inner>);

impl Shutdown {
    pub fn new() -> io::Result<Shutdown> {
        let (tx, rx) = crossbeam_channel::bounded(0);
        let (pipe_rx, pipe_tx) = io::pipe()?;
        Ok(Shutdown(Arc::new(Inner {
            stopped: AtomicBool::new(false),
            tx: Mutex::new(Some(tx)),
            rx,
            notify: tokio::sync::Notify::new(),
            pipe_rx,
            pipe_tx: Mutex::new(Some(pipe_tx)),
        })))
    }

    /// Tells every waiter to stop. Idempotent.
    pub fn stop(&self) {
        if self.0.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        drop(
            self.0
                .tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        drop(
            self.0
                .pipe_tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.0.notify.notify_waiters();
    }

    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::Acquire)
    }

    /// For a crossbeam `select!`: it disconnects at the stop (nothing is ever sent).
    pub fn receiver(&self) -> &Receiver<()> {
        &self.0.rx
    }

    /// Sleeps up to `d`; true if the stop came (at once if it already had).
    pub fn wait_timeout(&self, d: Duration) -> bool {
        matches!(
            self.0.rx.recv_timeout(d),
            Err(RecvTimeoutError::Disconnected) | Ok(())
        )
    }

    /// Resolves at the stop.
    pub async fn stopped(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a stop in between is not missed.
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }

    /// Readable (EOF) once stopped: for a `poll(2)` loop.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.pipe_rx.as_fd()
    }
}

/// Runs the task `start` makes with a token and checks that it runs until the stop,
/// then returns within 5 s of it.
#[cfg(test)]
pub(crate) fn assert_ends_at_the_stop<F>(start: impl FnOnce(Shutdown) -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stop = Shutdown::new().expect("a token");
    let task = rt.spawn(start(stop.clone()));
    rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!task.is_finished(), "ended before the stop");
        stop.stop();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("returns within 5 s of the stop")
            .expect("does not panic");
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rustix::event::{PollFd, PollFlags, poll};

    #[test]
    fn every_kind_of_waiter_wakes_at_the_stop() {
        let s = Shutdown::new().unwrap();
        assert!(!s.wait_timeout(Duration::from_millis(10)));
        let fd = s.fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        assert_eq!(poll(&mut fds, Some(&zero)).unwrap(), 0);
        let thread = {
            let s = s.clone();
            std::thread::spawn(move || s.wait_timeout(Duration::from_secs(60)))
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let task = {
            let s = s.clone();
            rt.spawn(async move { s.stopped().await })
        };
        std::thread::sleep(Duration::from_millis(20));
        s.stop();
        assert!(thread.join().unwrap());
        rt.block_on(task).unwrap();
        let fd = s.fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        assert_eq!(poll(&mut fds, Some(&zero)).unwrap(), 1);
        assert!(s.is_stopped() && s.wait_timeout(Duration::from_secs(60)));
        s.stop();
    }
}
