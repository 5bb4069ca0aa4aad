//! The event writer's thread (`baton-events`): it runs [`Stage`], which writes the JSON
//! Lines stream and owns the state directory's writes, on a plain thread of its own, so
//! an event goes from the core to the stream with one thread wake-up and no async
//! runtime or blocking pool in between. Its writes may block (a stalled reader of
//! stdout): nothing else runs on this thread.
//!
//! Nothing is dropped: when the stream's reader stalls (or, past what [`Stage`] holds,
//! the stream stays blocked), this thread stops taking messages, its bounded queue
//! fills, and the core waits for it ([`super::outbox`]).

use super::outbox::Out;
use super::stage::Stage;
use crate::error::Error;
use crate::model::Event;
use crate::shutdown::Shutdown;
use crate::sink::jsonl::{LineOut, StreamHealth};
use crate::state::Persist;
use crossbeam_channel::{Receiver, never, select};
use std::sync::Arc;
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

/// Starts the event writer's thread. It writes `replay` (events pending at a crash)
/// first, then every message of `rx` until the senders are gone.
pub fn spawn(
    rx: Receiver<Out>,
    out: Box<dyn LineOut>,
    persist: Persist,
    replay: Vec<Event>,
    w: Writer,
) -> Result<Done, Error> {
    let (tx, done) = oneshot::channel();
    std::thread::Builder::new()
        .name("baton-events".to_owned())
        .spawn(move || {
            let _ = tx.send(run(&rx, out, persist, replay, &w));
        })
        .map_err(|e| Error::Start(format!("the event writer thread: {e}")))?;
    Ok(done)
}

/// A stream that cannot be written holds what waits and tries again (see `Stage`); it
/// wakes for that only when the retry is due, for a message, for the state writer's
/// anomaly, or at the stop. At the end, one last try. Stdout whose reader exited ends
/// it.
fn run(
    rx: &Receiver<Out>,
    out: Box<dyn LineOut>,
    persist: Persist,
    replay: Vec<Event>,
    w: &Writer,
) -> Result<(), Error> {
    let health = Arc::clone(&persist.health);
    let mut stage = Stage::new(out, persist, Arc::clone(&w.health));
    let mut first = (!replay.is_empty()).then(|| vec![Out::Batch(replay)]);
    let mut stopping = w.shutdown.is_stopped();
    let (no_msgs, no_stop) = (never::<Out>(), never::<()>());
    loop {
        let take = !stage.full() || stopping;
        let mut msgs = match first.take() {
            Some(m) => m,
            None => {
                let from = if take { rx } else { &no_msgs };
                let stop = if stopping {
                    &no_stop
                } else {
                    w.shutdown.receiver()
                };
                let retry = stage.retry_at().map_or_else(never, crossbeam_channel::at);
                select! {
                    recv(from) -> m => match m {
                        Ok(m) => vec![m],
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
        }
        stage.handle(msgs).map_err(Error::Output)?;
    }
    // The state writer writes what it was given before it stops.
    stage.finish();
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
        let done = spawn(rx, stream, persist, Vec::new(), writer).unwrap();
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
