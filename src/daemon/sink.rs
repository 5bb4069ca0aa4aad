//! The event sink task: hands each batch to the delivery sinks and the socket, then to
//! the JSON Lines writer.
//!
//! Delivery sinks only `try_send` into their own bounded queues, so fanning out on the
//! runtime thread is cheap. The JSON Lines writer is a task of its own behind a bounded
//! queue: a stalled reader of `--events` delays neither notifications nor `tail`.

use crate::error::Error;
use crate::model::{Event, EventKind};
use crate::sink::{DesktopSink, ExecSink, JsonlSink, Sink, WebhookSink};
use crate::socket::Hub;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many batches may wait for the sink before the core starts dropping (and counting)
/// them rather than blocking.
pub const BATCH_CAPACITY: usize = 1024;

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

/// Runs until the core drops its sender, then returns the delivery sinks for closing. A
/// write error on the event stream is fatal: the stream is the product, and a daemon
/// nobody can hear should stop.
pub async fn run(
    mut rx: mpsc::Receiver<Vec<Event>>,
    out: Box<dyn Write + Send>,
    mut fan: Fanout,
) -> Result<Fanout, Error> {
    let (jtx, jrx) = mpsc::channel::<Vec<Event>>(BATCH_CAPACITY);
    let mut writer = tokio::spawn(write_jsonl(jrx, out));
    let mut dropped: u64 = 0;
    loop {
        tokio::select! {
            batch = rx.recv() => {
                let Some(batch) = batch else { break };
                for ev in &batch {
                    for s in &mut fan.sinks {
                        s.sink().deliver(ev);
                    }
                    if let Some(hub) = &fan.hub {
                        hub.publish(ev);
                    }
                    if ev.event == EventKind::DaemonReady
                        && let Some(r) = fan.ready.take()
                    {
                        let _ = r.send(());
                    }
                }
                for s in &mut fan.sinks {
                    s.sink().flush();
                }
                if let Err(mpsc::error::TrySendError::Full(b)) = jtx.try_send(batch) {
                    dropped += b.len() as u64;
                    tracing::warn!(dropped_total = dropped, "Event stream is not keeping up; events dropped.");
                }
            }
            res = &mut writer => {
                // The writer only ends early on a write error.
                res.map_err(|e| Error::Output(io::Error::other(e)))??;
                return Err(Error::Output(io::Error::other("the event writer stopped")));
            }
        }
    }
    drop(jtx);
    writer
        .await
        .map_err(|e| Error::Output(io::Error::other(e)))??;
    Ok(fan)
}

async fn write_jsonl(
    mut rx: mpsc::Receiver<Vec<Event>>,
    out: Box<dyn Write + Send>,
) -> Result<(), Error> {
    let mut sink = Some(JsonlSink::new(out));
    while let Some(mut batch) = rx.recv().await {
        while let Ok(more) = rx.try_recv() {
            batch.extend(more);
        }
        let Some(mut s) = sink.take() else {
            break;
        };
        // Writes block (a pipe whose reader stalls); keep them off the runtime thread.
        let written = tokio::task::spawn_blocking(move || {
            for ev in &batch {
                s.write(ev)?;
            }
            s.flush()?;
            Ok::<_, io::Error>(s)
        })
        .await
        .map_err(|e| Error::Output(io::Error::other(e)))?;
        sink = Some(written.map_err(Error::Output)?);
    }
    Ok(())
}
