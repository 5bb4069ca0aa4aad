//! The event sink task: writes each batch of events as JSON Lines and flushes.

use crate::error::Error;
use crate::model::Event;
use crate::sink::JsonlSink;
use std::io::{self, Write};
use tokio::sync::mpsc;

/// How many batches may wait for the sink before the core starts dropping (and counting)
/// them rather than blocking.
pub const BATCH_CAPACITY: usize = 1024;

/// Writes batches until the core drops its sender. A write error is fatal: the event
/// stream is the product, and a daemon nobody can hear should stop.
pub async fn run(
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
