//! The event sink task: delivers each batch of events as JSON Lines, and owns the state
//! directory's writes, so they happen in the order the core produced them.
//!
//! Emission protocol (issue 5): a batch's transcript events are journaled as pending
//! (fsync'ed), then each is written and flushed and journaled as done. After a SIGKILL,
//! the pending-but-not-done ones are delivered again with `"replay": true` (see
//! `state::journal`). A snapshot from the core is written only after every batch sent
//! before it was delivered.

use crate::error::Error;
use crate::model::Event;
use crate::sink::JsonlSink;
use crate::state::{Persist, Snapshot};
use std::io::{self, Write};
use std::time::Duration;
use tokio::sync::mpsc;

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

/// Delivers `replay` (events pending at a crash), then every message until the core
/// drops its sender. A write error is fatal: the event stream is the product, and a
/// daemon nobody can hear should stop.
pub async fn run(
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
