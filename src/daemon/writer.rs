//! The event writer's thread (`baton-events`): it runs [`Stage`], which writes the JSON
//! Lines stream and owns the state directory's writes, on a plain thread of its own, so
//! an event goes from the core to the stream with one thread wake-up and no async
//! runtime or blocking pool in between. Its writes may block (a stalled reader of
//! stdout): nothing else runs on this thread.
//!
//! The one event of a live append need not wake it ([`Direct`]): when nothing waits
//! before it (no message queued or being handled, nothing held) and the stream takes its
//! line without waiting (a regular file, a pipe or socket with room), the core runs the
//! stage itself. On this machine a thread wake-up is a tenth of the time from an append
//! to its event line.
//!
//! Nothing is dropped: when the stream's reader stalls (or, past what [`Stage`] holds,
//! the stream stays blocked), this thread stops taking messages, its bounded queue
//! fills, and the core waits for it ([`super::outbox`]).

use super::stage::{Out, Stage};
use crate::error::Error;
use crate::model::Event;
use crate::shutdown::Shutdown;
use crate::sink::jsonl::{LineOut, StreamHealth};
use crate::state::Persist;
use crossbeam_channel::{Receiver, never, select};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use tokio::sync::oneshot;

/// How many messages may wait for the event writer before the core waits for it.
pub const BATCH_CAPACITY: usize = 1024;

/// What the event writer reports to and listens for.
pub struct Writer {
    /// Whether the stream is blocked (for `status`).
    pub health: Arc<StreamHealth>,
    /// At the stop, a blocked writer takes whatever comes, to let the core finish.
    pub shutdown: Shutdown,
}

/// How the event writer's thread ended: `Ok` once every sender of its queue was gone
/// and what it held was tried one last time; an error when the stream's reader went
/// away for good. Dropped without a value if the thread panicked.
pub type Done = oneshot::Receiver<Result<(), Error>>;

/// The stage, shared by the event writer's thread and the core.
struct Shared {
    stage: Mutex<Stage>,
    /// Messages sent on the queue (and the replay) not yet handled: while any is, the
    /// core may not write past them.
    queued: AtomicUsize,
    /// The stream's reader went away for good during a write by the core: the writer's
    /// thread ends with it.
    failed: Mutex<Option<io::Error>>,
}

/// The core's way to the stage without the writer's thread ([`Direct::try_write`]).
pub struct Direct(Arc<Shared>);

impl Direct {
    /// Writes a batch of one event on the calling thread if nothing waits before it and
    /// the stream can take it now; hands it back otherwise, to be sent on the queue (an
    /// empty batch after a write that found the stream's reader gone for good: it wakes
    /// the writer's thread to end). The caller sends on the queue only after
    /// [`Direct::queued`].
    pub fn try_write(&self, msg: Out) -> Result<(), Out> {
        let Out::Batch(batch) = msg else {
            return Err(msg);
        };
        // Only the core adds to `queued`: once it reads 0, the writer's thread has
        // handled every message, and none comes before this one.
        if batch.len() != 1 || self.0.queued.load(Ordering::Acquire) != 0 {
            return Err(Out::Batch(batch));
        }
        let mut stage = match self.0.stage.try_lock() {
            Ok(s) => s,
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => {
                return Err(Out::Batch(batch));
            }
        };
        match stage.try_direct(batch) {
            Ok(Ok(())) if stage.idle() => Ok(()),
            // The write failed and the event waits in the stage: the writer's thread
            // must wake to try again when that is due (an empty batch wakes it).
            Ok(Ok(())) => Err(Out::Batch(Vec::new())),
            Ok(Err(e)) => {
                *self.0.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                Err(Out::Batch(Vec::new()))
            }
            Err(batch) => Err(Out::Batch(batch)),
        }
    }

    /// Counts a message about to be sent on the queue.
    pub fn queued(&self) {
        self.0.queued.fetch_add(1, Ordering::AcqRel);
    }
}

/// Starts the event writer's thread. It writes `replay` (events pending at a crash)
/// first, then every message of `rx` until the senders are gone.
pub fn spawn(
    rx: Receiver<Out>,
    out: Box<dyn LineOut>,
    persist: Persist,
    replay: Vec<Event>,
    w: Writer,
) -> Result<(Done, Direct), Error> {
    let (tx, done) = oneshot::channel();
    let health = Arc::clone(&persist.health);
    let shared = Arc::new(Shared {
        stage: Mutex::new(Stage::new(out, persist, Arc::clone(&w.health))),
        queued: AtomicUsize::new(usize::from(!replay.is_empty())),
        failed: Mutex::default(),
    });
    let mine = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("baton-events".to_owned())
        .spawn(move || {
            let _ = tx.send(run(&rx, &mine, &health, replay, &w));
        })
        .map_err(|e| Error::Start(format!("the event writer thread: {e}")))?;
    Ok((done, Direct(shared)))
}

/// A stream that cannot be written holds what waits and tries again (see `Stage`); it
/// wakes for that only when the retry is due, for a message, for the state writer's
/// anomaly, or at the stop. At the end, one last try. Stdout whose reader exited ends
/// it.
fn run(
    rx: &Receiver<Out>,
    shared: &Shared,
    health: &crate::state::Health,
    replay: Vec<Event>,
    w: &Writer,
) -> Result<(), Error> {
    let stage = || shared.stage.lock().unwrap_or_else(PoisonError::into_inner);
    let mut first = (!replay.is_empty()).then(|| vec![Out::Batch(replay)]);
    let mut stopping = w.shutdown.is_stopped();
    let (no_msgs, no_stop) = (never::<Out>(), never::<()>());
    loop {
        let (full, retry_at) = {
            let s = stage();
            (s.full(), s.retry_at())
        };
        let take = !full || stopping;
        // How many of `msgs` count in `queued` (the replay does, once).
        let mut counted = 0;
        let mut msgs = match first.take() {
            Some(m) => {
                counted = 1;
                m
            }
            None => {
                let from = if take { rx } else { &no_msgs };
                let stop = if stopping {
                    &no_stop
                } else {
                    w.shutdown.receiver()
                };
                let retry = retry_at.map_or_else(never, crossbeam_channel::at);
                select! {
                    recv(from) -> m => match m {
                        Ok(m) => {
                            counted = 1;
                            vec![m]
                        }
                        Err(_) => break,
                    },
                    // A state_unwritable anomaly from the state writer.
                    recv(health.woken()) -> _ => Vec::new(),
                    recv(retry) -> _ => Vec::new(),
                    recv(stop) -> _ => {
                        stopping = true;
                        Vec::new()
                    }
                }
            }
        };
        while take && let Ok(more) = rx.try_recv() {
            msgs.push(more);
            counted += 1;
        }
        let handled = stage().handle(msgs);
        // Only now may the core write past them.
        shared.queued.fetch_sub(counted, Ordering::AcqRel);
        handled.map_err(Error::Output)?;
        if let Some(e) = shared
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(Error::Output(e));
        }
    }
    // The state writer writes what it was given before it stops.
    stage().finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{EventKind, ProviderKind};
    use std::io::{self, Write};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    /// An event stream whose reader stalls until it is let go.
    #[derive(Clone, Default)]
    struct Stalled {
        open: Arc<(Mutex<bool>, Condvar)>,
        bytes: Arc<Mutex<Vec<u8>>>,
    }

    impl Stalled {
        fn let_go(&self) {
            *self.open.0.lock().unwrap() = true;
            self.open.1.notify_all();
        }
    }

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let (lock, cv) = &*self.open;
            let _open = cv.wait_while(lock.lock().unwrap(), |open| !*open).unwrap();
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// More batches than the queue and the writer hold, while the stream's reader stalls: the
    /// sender waits instead of anything being dropped, and every event comes out, in
    /// order, once the reader reads again.
    #[test]
    fn a_stalled_stream_makes_the_core_wait_and_loses_nothing() {
        const N: usize = 3 * BATCH_CAPACITY;
        let tmp = tempfile::tempdir().unwrap();
        let (persist, _) = crate::state::open(tmp.path(), 600_000).unwrap();
        let out = Stalled::default();
        let (tx, rx) = crossbeam_channel::bounded(BATCH_CAPACITY);
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&sent);
        // The core is a plain thread that blocks on a full queue.
        let core = std::thread::spawn(move || {
            for i in 0..N {
                let mut ev = Event::lifecycle(EventKind::TurnCompleted, "t".into(), format!("{i}"));
                ev.provider = Some(ProviderKind::Claude);
                tx.send(Out::Batch(vec![ev])).unwrap();
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let stream = Box::new(crate::sink::jsonl::Lines::new(out.clone(), "test"));
        let writer = Writer {
            health: Arc::default(),
            shutdown: Shutdown::new().unwrap(),
        };
        let (done, _) = spawn(rx, stream, persist, Vec::new(), writer).unwrap();
        // The sender gets stuck: the queue fills and nothing is thrown away.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut last = usize::MAX;
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = sent.load(std::sync::atomic::Ordering::SeqCst);
            if now == last || std::time::Instant::now() > deadline {
                break;
            }
            last = now;
        }
        assert!(last < N, "the sender was held back ({last} of {N} sent)");
        out.let_go();
        core.join().unwrap();
        done.blocking_recv().unwrap().unwrap();
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let ids: Vec<usize> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, (0..N).collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod direct_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{EventKind, ProviderKind};
    use std::sync::Condvar;
    use std::sync::atomic::AtomicBool;
    use std::thread::ThreadId;
    use std::time::Duration;

    /// A stream that says whether it is ready, writes down each line with the thread
    /// that wrote it, and can be held shut (a write waits until it is opened).
    #[derive(Clone)]
    struct Probe {
        ready: Arc<AtomicBool>,
        /// Writes fail (a full disk) while set.
        full: Arc<AtomicBool>,
        /// Writes fail for good (the reader is gone) once set.
        broken: Arc<AtomicBool>,
        open: Arc<(Mutex<bool>, Condvar)>,
        lines: Arc<Mutex<Vec<(String, ThreadId)>>>,
    }

    impl Probe {
        fn new(ready: bool, open: bool) -> Probe {
            Probe {
                ready: Arc::new(AtomicBool::new(ready)),
                full: Arc::default(),
                broken: Arc::default(),
                open: Arc::new((Mutex::new(open), Condvar::new())),
                lines: Arc::default(),
            }
        }

        fn set_open(&self, open: bool) {
            *self.open.0.lock().unwrap() = open;
            self.open.1.notify_all();
        }

        fn ids(&self) -> Vec<String> {
            let lines = self.lines.lock().unwrap();
            lines
                .iter()
                .map(|(l, _)| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["id"].as_str().unwrap().to_owned()
                })
                .collect()
        }

        /// Waits until `n` lines were written.
        fn wait_for(&self, n: usize) {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while self.lines.lock().unwrap().len() < n {
                assert!(std::time::Instant::now() < deadline, "{n} lines never came");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    impl LineOut for Probe {
        fn append(&mut self, line: &[u8]) -> io::Result<()> {
            if self.full.load(Ordering::SeqCst) {
                return Err(io::Error::other("no space left"));
            }
            if self.broken.load(Ordering::SeqCst) {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let (lock, cv) = &*self.open;
            let _open = cv.wait_while(lock.lock().unwrap(), |open| !*open).unwrap();
            let text = String::from_utf8(line.to_vec()).unwrap();
            self.lines
                .lock()
                .unwrap()
                .push((text, std::thread::current().id()));
            Ok(())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }

        fn name(&self) -> String {
            "probe".into()
        }

        fn ready(&self, _len: usize) -> bool {
            self.ready.load(Ordering::SeqCst)
        }

        fn gone(&self, e: &io::Error) -> bool {
            e.kind() == io::ErrorKind::BrokenPipe
        }
    }

    fn event(id: &str) -> Event {
        let mut ev = Event::lifecycle(EventKind::TurnCompleted, "t".into(), id.into());
        ev.provider = Some(ProviderKind::Claude);
        ev
    }

    fn start(
        probe: &Probe,
        replay: Vec<Event>,
    ) -> (
        crossbeam_channel::Sender<Out>,
        Direct,
        Done,
        tempfile::TempDir,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let (persist, _) = crate::state::open(tmp.path(), 600_000).unwrap();
        let (tx, rx) = crossbeam_channel::bounded(BATCH_CAPACITY);
        let writer = Writer {
            health: Arc::default(),
            shutdown: Shutdown::new().unwrap(),
        };
        let (done, direct) = spawn(rx, Box::new(probe.clone()), persist, replay, writer).unwrap();
        (tx, direct, done, tmp)
    }

    /// What the core does with a message: the stage at once if it may, else the queue.
    fn send(direct: &Direct, tx: &crossbeam_channel::Sender<Out>, msg: Out) -> bool {
        match direct.try_write(msg) {
            Ok(()) => true,
            Err(msg) => {
                direct.queued();
                tx.send(msg).unwrap();
                false
            }
        }
    }

    /// With nothing before it and a stream that can take it, one event is written by the
    /// sender itself, before `try_write` returns; a batch of two, or a stream that is
    /// not ready, goes on the queue to the writer's thread.
    #[test]
    fn one_event_goes_out_from_the_core_when_nothing_waits() {
        let probe = Probe::new(true, true);
        let (tx, direct, done, _tmp) = start(&probe, Vec::new());
        let me = std::thread::current().id();
        assert!(send(&direct, &tx, Out::Batch(vec![event("1")])));
        assert_eq!(probe.ids(), ["1"]);
        assert_eq!(probe.lines.lock().unwrap()[0].1, me);
        assert!(!send(
            &direct,
            &tx,
            Out::Batch(vec![event("2"), event("3")])
        ));
        probe.wait_for(3);
        probe.ready.store(false, Ordering::SeqCst);
        assert!(!send(&direct, &tx, Out::Batch(vec![event("4")])));
        probe.wait_for(4);
        drop((tx, direct));
        done.blocking_recv().unwrap().unwrap();
        let lines = probe.lines.lock().unwrap();
        assert!(
            lines[1..].iter().all(|(_, t)| *t != me),
            "the writer's thread wrote the rest"
        );
        drop(lines);
        assert_eq!(probe.ids(), ["1", "2", "3", "4"]);
    }

    /// While the writer's thread is stuck on what was queued before (here the replay of
    /// a crash, then a batch), a ready stream does not let a later event go first: every
    /// line comes out in the order sent.
    #[test]
    fn nothing_goes_out_past_what_waits_on_the_queue() {
        let probe = Probe::new(true, false);
        let (tx, direct, done, _tmp) = start(&probe, vec![event("r")]);
        assert!(!send(&direct, &tx, Out::Batch(vec![event("1")])));
        assert!(!send(
            &direct,
            &tx,
            Out::Batch(vec![event("2"), event("3")])
        ));
        assert!(!send(&direct, &tx, Out::Batch(vec![event("4")])));
        probe.set_open(true);
        probe.wait_for(5);
        // Once the queue is drained, the next one goes directly again.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while direct.0.queued.load(Ordering::SeqCst) != 0 {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(send(&direct, &tx, Out::Batch(vec![event("5")])));
        drop((tx, direct));
        done.blocking_recv().unwrap().unwrap();
        assert_eq!(probe.ids(), ["r", "1", "2", "3", "4", "5"]);
    }

    /// A write from the core that fails (a full disk) leaves the event held, and the
    /// writer's thread tries it again when due, with nothing more sent to wake it.
    #[test]
    fn a_failed_write_from_the_core_is_tried_again_by_the_writer() {
        let probe = Probe::new(true, true);
        let (tx, direct, done, _tmp) = start(&probe, Vec::new());
        // The writer's thread has handled a batch and gone back to wait, with nothing
        // to try again.
        send(&direct, &tx, Out::Batch(vec![event("0"), event("00")]));
        probe.wait_for(2);
        std::thread::sleep(Duration::from_millis(200));
        probe.full.store(true, Ordering::SeqCst);
        send(&direct, &tx, Out::Batch(vec![event("1")]));
        assert_eq!(probe.ids().len(), 2);
        probe.full.store(false, Ordering::SeqCst);
        probe.wait_for(3);
        // And the next one follows it, in order.
        send(&direct, &tx, Out::Batch(vec![event("2")]));
        probe.wait_for(4);
        drop((tx, direct));
        done.blocking_recv().unwrap().unwrap();
        assert_eq!(probe.ids(), ["0", "00", "1", "2"]);
    }

    /// A write from the core that finds the stream's reader gone for good ends the
    /// writer's thread with that error, as one of its own writes does.
    #[test]
    fn a_reader_gone_during_a_write_from_the_core_ends_the_writer() {
        let probe = Probe::new(true, true);
        let (tx, direct, done, _tmp) = start(&probe, Vec::new());
        probe.broken.store(true, Ordering::SeqCst);
        send(&direct, &tx, Out::Batch(vec![event("1")]));
        let ended = done.blocking_recv().unwrap();
        assert!(
            matches!(&ended, Err(Error::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe),
            "{ended:?}"
        );
        drop((tx, direct));
    }
}
