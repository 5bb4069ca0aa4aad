//! The event sink task. Each batch is handed to the delivery sinks and the socket (they
//! only `try_send` into their own bounded queues, so this is cheap), then to the event
//! writer ([`super::stage`]), which writes the JSON Lines stream and owns the state
//! directory's writes. A stalled reader of `--events`, or a full disk under it, delays
//! neither notifications nor `tail`.
//!
//! Nothing is dropped: when the event stream's reader stalls (or, past what the writer
//! holds, the stream stays blocked), this task waits, and so, once its queue is full,
//! does the core.

use super::outbox::Out;
use super::stage::Stage;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::model::{Event, EventKind};
use crate::shutdown::Shutdown;
use crate::sink::Sink;
use crate::sink::delivery::Counting;
use crate::sink::jsonl::{LineOut, StreamHealth};
use crate::socket::Hub;
use crate::state::Persist;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many messages may wait for the sink before the core waits for it.
pub const BATCH_CAPACITY: usize = 1024;

/// A delivery sink, closed with a grace period at the end.
pub struct Delivery(Box<dyn Counting>);

impl From<Box<dyn Counting>> for Delivery {
    fn from(s: Box<dyn Counting>) -> Self {
        Delivery(s)
    }
}

impl Delivery {
    fn sink(&mut self) -> &mut dyn Sink {
        self.0.as_mut()
    }

    /// The sink's name and its counters, for the metrics' [`crate::diag::Readout`].
    pub fn counters(&self) -> (&'static str, Arc<dyn crate::diag::Deliveries>) {
        (self.0.name(), self.0.deliveries())
    }

    /// Lets the sink finish its queue for up to `grace`, and logs what it did.
    pub fn close(self, grace: Duration) {
        let name = self.0.name();
        let sink: Box<dyn Sink> = self.0;
        let closed = sink.close(grace);
        let stats = format!("{:?}", closed.stats);
        if closed.done {
            tracing::info!(sink = name, stats = %stats, "Sink closed.");
        } else {
            tracing::warn!(sink = name, stats = %stats, "Sink still busy at shutdown; abandoned.");
        }
    }
}

/// Everything that receives events besides the JSON Lines stream.
pub struct Fanout {
    pub sinks: Vec<Delivery>,
    pub hub: Option<Arc<Hub>>,
    /// Fired once, when `daemon_ready` goes out.
    pub ready: Option<oneshot::Sender<()>>,
    /// Counts turns and anomalies (`/metrics` reads the sinks' deliveries from `diag`).
    pub metrics: Option<Arc<Metrics>>,
}

impl Fanout {
    fn deliver(&mut self, batch: &[Event]) {
        for ev in batch {
            if let Some(m) = &self.metrics {
                m.count_event(ev);
            }
            for s in &mut self.sinks {
                s.sink().deliver(ev);
            }
            if let Some(hub) = &self.hub {
                hub.publish(ev);
            }
            if ev.event == EventKind::DaemonReady
                && let Some(r) = self.ready.take()
            {
                let _ = r.send(());
            }
        }
        for s in &mut self.sinks {
            s.sink().flush();
        }
    }

    /// Sends the pages that fell due (held for background tasks); returns when the
    /// next one is due.
    fn tick(&mut self) -> Option<std::time::Instant> {
        let now = std::time::Instant::now();
        let mut next = None;
        for s in &mut self.sinks {
            let sink = s.sink();
            if let Some(at) = sink.tick(now) {
                next = Some(next.map_or(at, |n: std::time::Instant| n.min(at)));
            }
            sink.flush();
        }
        next
    }
}

/// Runs until the core drops its sender, then returns the delivery sinks for closing.
/// It ends by that channel closing, not on the shutdown token, because the core sends its
/// last batch after the stop; the core stops on the token.
/// Events pending at a crash (`replay`) go out first, to every sink.
pub async fn run(
    mut rx: mpsc::Receiver<Out>,
    out: Box<dyn LineOut>,
    mut persist: Persist,
    replay: Vec<Event>,
    mut fan: Fanout,
    writer: Writer,
) -> Result<Fanout, Error> {
    // After the last run's outage: what comes out again says `replay` to every sink.
    let mut suspect = persist.take_suspect();
    fan.deliver(&replay);
    let (stx, srx) = mpsc::channel::<Out>(BATCH_CAPACITY);
    let mut writer = tokio::spawn(stage(srx, out, persist, replay, writer));
    let mut waits: u64 = 0;
    // When a page held back for background tasks falls due.
    let mut held_due: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            () = sleep_until(held_due) => held_due = fan.tick(),
            msg = rx.recv() => {
                let Some(mut msg) = msg else { break };
                if let Out::Batch(batch) = &mut msg {
                    crate::state::flag_replays(&mut suspect, batch);
                    fan.deliver(batch);
                    held_due = fan.tick();
                }
                match stx.try_send(msg) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(msg)) => {
                        waits += 1;
                        if waits.is_power_of_two() {
                            tracing::warn!(waits, "Event stream is not keeping up; waiting for it.");
                        }
                        tokio::select! {
                            sent = stx.send(msg) => if sent.is_err() { break },
                            res = &mut writer => {
                                res.map_err(|e| Error::Output(io::Error::other(e)))??;
                                return Err(Error::Output(io::Error::other("the event writer stopped")));
                            }
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => break,
                }
            }
            res = &mut writer => {
                // The writer ends early only when stdout's reader is gone, or on a panic.
                res.map_err(|e| Error::Output(io::Error::other(e)))??;
                return Err(Error::Output(io::Error::other("the event writer stopped")));
            }
        }
    }
    drop(stx);
    writer
        .await
        .map_err(|e| Error::Output(io::Error::other(e)))??;
    Ok(fan)
}

/// What the event writer reports to and listens for.
pub struct Writer {
    /// Whether the stream is blocked (for `status`).
    pub health: Arc<StreamHealth>,
    /// At the stop, a blocked writer takes whatever comes, to let the core finish.
    pub shutdown: Shutdown,
}

/// Writes `replay` (events pending at a crash), then every message until the sink task
/// drops its sender. A stream that cannot be written holds what waits and tries again
/// (see `stage`); at the end, one last try. Stdout whose reader exited ends it.
async fn stage(
    mut rx: mpsc::Receiver<Out>,
    out: Box<dyn LineOut>,
    persist: Persist,
    replay: Vec<Event>,
    w: Writer,
) -> Result<(), Error> {
    let health = Arc::clone(&persist.health);
    let mut stage = Some(Stage::new(out, persist, w.health));
    let mut first = (!replay.is_empty()).then(|| vec![Out::Batch(replay)]);
    let mut stopping = w.shutdown.is_stopped();
    loop {
        let (retry_at, full) = stage
            .as_ref()
            .map_or((None, false), |s| (s.retry_at(), s.full()));
        let take = !full || stopping;
        let msgs = match first.take() {
            Some(m) => m,
            None => tokio::select! {
                m = rx.recv(), if take => match m {
                    Some(m) => vec![m],
                    None => break,
                },
                // A state_unwritable anomaly from the state writer.
                () = health.wake.notified() => Vec::new(),
                () = sleep_until(retry_at), if retry_at.is_some() => Vec::new(),
                () = w.shutdown.stopped(), if !stopping => {
                    stopping = true;
                    Vec::new()
                }
            },
        };
        let mut msgs = msgs;
        while take && let Ok(more) = rx.try_recv() {
            msgs.push(more);
        }
        let Some(mut s) = stage.take() else {
            break;
        };
        // Writes block; keep them off the runtime thread.
        let done = tokio::task::spawn_blocking(move || s.handle(msgs).map(|()| s))
            .await
            .map_err(|e| Error::Output(io::Error::other(e)))?;
        stage = Some(done.map_err(Error::Output)?);
    }
    // The state writer writes what it was given before it stops.
    if let Some(mut s) = stage {
        tokio::task::spawn_blocking(move || s.finish())
            .await
            .map_err(|e| Error::Output(io::Error::other(e)))?;
    }
    Ok(())
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProviderKind;
    use std::io::Write;
    use std::sync::{Condvar, Mutex};

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

    /// More batches than every queue holds, while the stream's reader stalls: the
    /// sender waits instead of anything being dropped, and every event comes out, in
    /// order, once the reader reads again.
    #[test]
    fn a_stalled_stream_makes_the_core_wait_and_loses_nothing() {
        const N: usize = 3 * BATCH_CAPACITY;
        let tmp = tempfile::tempdir().unwrap();
        let (persist, _) = crate::state::open(tmp.path(), 600_000).unwrap();
        let out = Stalled::default();
        let (tx, rx) = mpsc::channel(BATCH_CAPACITY);
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&sent);
        // The core is a plain thread that blocks on a full queue.
        let core = std::thread::spawn(move || {
            for i in 0..N {
                let mut ev = Event::lifecycle(EventKind::TurnCompleted, "t".into(), format!("{i}"));
                ev.provider = Some(ProviderKind::Claude);
                tx.blocking_send(Out::Batch(vec![ev])).unwrap();
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let fan = Fanout {
            sinks: Vec::new(),
            hub: None,
            ready: None,
            metrics: None,
        };
        // The runtime runs on its own thread, as in the daemon.
        let stream = Box::new(crate::sink::jsonl::Lines::new(out.clone(), "test"));
        let writer = Writer {
            health: Arc::default(),
            shutdown: Shutdown::new().unwrap(),
        };
        let task = std::thread::spawn(move || {
            rt.block_on(run(rx, stream, persist, Vec::new(), fan, writer))
        });
        // The sender gets stuck: both queues fill and nothing is thrown away.
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
        task.join().unwrap().map(|_| ()).unwrap();
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
