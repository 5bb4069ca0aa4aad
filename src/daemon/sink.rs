//! The event sink task. Each batch is handed to the delivery sinks and the socket (they
//! only `try_send` into their own bounded queues, so this is cheap), then to the stage
//! task, which writes the JSON Lines stream and owns the state directory's writes, so
//! they happen in the order the core produced them. A stalled reader of `--events`
//! delays neither notifications nor `tail`.
//!
//! Emission protocol (issue 5): a batch's transcript events are journaled as pending
//! (fsync'ed), then each is written and flushed and journaled as done. After a SIGKILL,
//! the pending-but-not-done ones are delivered again with `"replay": true` (see
//! `state::journal`). A snapshot from the core is written only after every batch sent
//! before it was delivered.

use crate::error::Error;
use crate::model::{Event, EventKind};
use crate::sink::{DesktopSink, ExecSink, JsonlSink, Sink, WebhookSink};
use crate::socket::Hub;
use crate::state::{Persist, Snapshot};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many messages may wait for the sink before the core starts dropping (and
/// counting) batches rather than blocking.
pub const BATCH_CAPACITY: usize = 1024;

/// How often a snapshot that could not be written is tried again.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// What the core sends.
pub enum Out {
    Batch(Vec<Event>),
    Save(Box<Snapshot>),
}

struct Stage {
    sink: JsonlSink<Box<dyn Write + Send>>,
    persist: Persist,
}

impl Stage {
    fn deliver(&mut self, batch: &[Event]) -> io::Result<()> {
        if let Some(a) = self.persist.pending(batch) {
            self.sink.write(&a)?;
        }
        for ev in batch {
            self.sink.write(ev)?;
            self.sink.flush()?;
            if let Some(a) = self.persist.done(ev) {
                self.sink.write(&a)?;
            }
        }
        self.sink.flush()
    }

    fn handle(&mut self, msgs: Vec<Out>) -> io::Result<()> {
        // Only the newest snapshot matters; it still waits for the batches before it.
        let last_save = msgs.iter().rposition(|m| matches!(m, Out::Save(_)));
        for (i, m) in msgs.into_iter().enumerate() {
            match m {
                Out::Batch(b) => self.deliver(&b)?,
                Out::Save(s) if Some(i) == last_save => {
                    if let Some(a) = self.persist.save(*s) {
                        self.deliver(&[a])?;
                    }
                }
                Out::Save(_) => {}
            }
        }
        Ok(())
    }

    fn retry(&mut self) -> io::Result<()> {
        match self.persist.retry() {
            Some(a) => self.deliver(&[a]),
            None => Ok(()),
        }
    }
}

/// A delivery sink that can be closed with a grace period.
pub enum Delivery {
    Desktop(DesktopSink),
    Exec(ExecSink),
    Webhook(WebhookSink),
}

impl Delivery {
    fn sink(&mut self) -> &mut dyn Sink {
        match self {
            Delivery::Desktop(s) => s,
            Delivery::Exec(s) => s,
            Delivery::Webhook(s) => s,
        }
    }

    /// Lets the sink finish its queue for up to `grace`, and logs what it did.
    pub fn close(self, grace: Duration) {
        let (name, stats, done) = match self {
            Delivery::Desktop(s) => {
                let (st, done) = s.close(grace);
                ("desktop", format!("{st:?}"), done)
            }
            Delivery::Exec(s) => {
                let (st, done) = s.close(grace);
                ("exec", format!("{st:?}"), done)
            }
            Delivery::Webhook(s) => {
                let (st, done) = s.close(grace);
                ("webhook", format!("{st:?}"), done)
            }
        };
        if done {
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
}

impl Fanout {
    fn deliver(&mut self, batch: &[Event]) {
        for ev in batch {
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
}

/// Runs until the core drops its sender, then returns the delivery sinks for closing.
/// Events pending at a crash (`replay`) go out first, to every sink.
pub async fn run(
    mut rx: mpsc::Receiver<Out>,
    out: Box<dyn Write + Send>,
    persist: Persist,
    replay: Vec<Event>,
    mut fan: Fanout,
) -> Result<Fanout, Error> {
    fan.deliver(&replay);
    let (stx, srx) = mpsc::channel::<Out>(BATCH_CAPACITY);
    let mut writer = tokio::spawn(stage(srx, out, persist, replay));
    let mut dropped: u64 = 0;
    loop {
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                if let Out::Batch(batch) = &msg {
                    fan.deliver(batch);
                }
                match stx.try_send(msg) {
                    Err(mpsc::error::TrySendError::Full(Out::Batch(b))) => {
                        dropped += b.len() as u64;
                        tracing::warn!(dropped_total = dropped, "Event stream is not keeping up; events dropped.");
                    }
                    // A newer snapshot follows; this one can go.
                    Err(mpsc::error::TrySendError::Full(Out::Save(_))) | Ok(()) => {}
                    Err(mpsc::error::TrySendError::Closed(_)) => break,
                }
            }
            res = &mut writer => {
                // The stage only ends early on a write error.
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

/// Writes `replay` (events pending at a crash), then every message until the sink task
/// drops its sender. A write error is fatal: the event stream is the product, and a
/// daemon nobody can hear should stop.
async fn stage(
    mut rx: mpsc::Receiver<Out>,
    out: Box<dyn Write + Send>,
    persist: Persist,
    replay: Vec<Event>,
) -> Result<(), Error> {
    let mut stage = Some(Stage {
        sink: JsonlSink::new(out),
        persist,
    });
    let mut first = (!replay.is_empty()).then(|| vec![Out::Batch(replay)]);
    loop {
        let retrying = stage.as_ref().is_some_and(|s| s.persist.needs_retry());
        let msgs = match first.take() {
            Some(m) => Some(m),
            None if retrying => match tokio::time::timeout(RETRY_EVERY, rx.recv()).await {
                Ok(Some(m)) => Some(vec![m]),
                Ok(None) => break,
                Err(_) => None,
            },
            None => match rx.recv().await {
                Some(m) => Some(vec![m]),
                None => break,
            },
        };
        let mut msgs = msgs.unwrap_or_default();
        while let Ok(more) = rx.try_recv() {
            msgs.push(more);
        }
        let Some(mut s) = stage.take() else {
            break;
        };
        // Writes and fsyncs block; keep them off the runtime thread.
        let done = tokio::task::spawn_blocking(move || {
            if msgs.is_empty() {
                s.retry()?;
            } else {
                s.handle(msgs)?;
            }
            Ok::<_, io::Error>(s)
        })
        .await
        .map_err(|e| Error::Output(io::Error::other(e)))?;
        stage = Some(done.map_err(Error::Output)?);
    }
    Ok(())
}
