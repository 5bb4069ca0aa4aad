//! `baton run`: the live daemon.
//!
//! ```text
//! notify thread ─┐ hints (bounded; overflow ⇒ full rescan)
//! poll ticker ───┼──────────────▶ core thread ──▶ event batches ──▶ sink task ──▶ JSONL
//! signals ───────┘ (stop)        (tail state, projectors, reducer)
//! ```
//!
//! One core thread owns every file's tail state, the projectors and the reducer; it is
//! the only place that opens transcripts, but for a first run's history read, whose
//! reading and parsing run on worker threads that hand it the results in order. The watcher and the poll ticker only send
//! hints. A tokio current-thread runtime on the main thread runs the signal handlers,
//! the poll ticker and the event sink (whose blocking writes go to tokio's blocking
//! pool, so a stalled reader of `--events` cannot delay shutdown handling).
//!
//! The core is a plain thread blocking on a crossbeam `select!` rather than a tokio
//! task: its work is synchronous file IO and parsing that would stall a current-thread
//! runtime, and its one timer (the earliest settle deadline, on the monotonic clock)
//! is just the select's timeout.

mod apply;
mod caps;
mod core;
mod deliver;
mod durable;
mod files;
mod first;
mod history;
pub mod liveness;
mod outbox;
mod read;
pub mod registry;
mod resume;
mod rows;
mod service;
mod settings;
mod stage;
mod tracked;

use crate::error::Error;
use crate::shutdown::Shutdown;
use crate::sink::jsonl::{EventFile, LineOut, Lines};
pub use settings::{RunArgs, Settings};

use crate::watch::{self, poll};
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Runs the daemon until SIGTERM/SIGINT.
pub fn main(args: RunArgs) -> Result<(), Error> {
    let settings = Settings::from_args(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The sink's writes run on the blocking pool; keep its thread between batches.
        .thread_keep_alive(Duration::from_secs(24 * 3600))
        .build()
        .map_err(|e| Error::Start(format!("the async runtime: {e}")))?;
    let res = rt.block_on(async { run(settings, shutdown_signal()).await });
    // Every wait of the stop was bounded; a blocking write still stuck on a stalled
    // stdout must not hold the exit.
    rt.shutdown_background();
    res
}

/// Registers the SIGTERM and SIGINT handlers now (so a signal that arrives while
/// history is being read is not lost) and resolves when one arrives.
fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            (term, int) => {
                let e = term.err().or(int.err());
                tracing::error!(error = ?e, "Cannot handle SIGTERM/SIGINT; stop the daemon with SIGKILL.");
                std::future::pending::<()>().await;
            }
        }
    }
}

fn open_events(events: Option<&PathBuf>) -> Result<Box<dyn LineOut>, Error> {
    match events {
        None => Ok(Box::new(Lines::new(
            io::BufWriter::new(io::stdout()),
            "stdout",
        ))),
        Some(path) => {
            let f = EventFile::open(path).map_err(|e| {
                Error::Usage(format!("cannot open --events {}: {e}", path.display()))
            })?;
            Ok(Box::new(f))
        }
    }
}

/// How long delivery sinks may take to finish their queues at shutdown (running hooks
/// then get `exec`'s own short grace), so that a stop ends within a few seconds.
const SINK_GRACE: Duration = Duration::from_secs(2);
/// After a stop request, how long the event stream may stay blocked (its reader stalled)
/// before baton gives up flushing it and exits anyway.
const STREAM_GRACE: Duration = Duration::from_secs(10);

fn build_sinks(
    settings: &Settings,
    board: &crate::sink::desktop::Board,
) -> Result<Vec<deliver::Delivery>, Error> {
    let on = crate::sink::registry::Wiring {
        board,
        hold: settings.hold_background,
        pages: settings.pages,
    };
    let built = settings
        .sinks
        .build(&on)
        .map_err(|e| Error::Usage(e.to_string()))?;
    Ok(built.into_iter().map(deliver::Delivery::from).collect())
}

/// One thread per `[[remote]]`, handing its events to the sink task's queue like the
/// core's batches (so they reach the stream, the sinks and `tail` the same way).
fn start_remotes(
    settings: &Settings,
    hub: &crate::socket::Hub,
    events: &tokio::sync::mpsc::Sender<outbox::Out>,
    token: &Shutdown,
) -> Result<Vec<std::thread::JoinHandle<()>>, Error> {
    settings
        .remotes
        .iter()
        .map(|cfg| {
            let tx = events.clone();
            let hand_on: crate::remote::link::HandOn =
                Box::new(move |batch| tx.blocking_send(outbox::Out::Batch(batch)).is_ok());
            crate::remote::spawn(
                cfg.clone(),
                settings.state_dir.clone(),
                hub.remote_links(),
                token.clone(),
                hand_on,
            )
            .map_err(|e| Error::Start(format!("the link to remote {}: {e}", cfg.name)))
        })
        .collect()
}

/// How long the core may take to finish once told to stop (it checks between files).
const CORE_GRACE: Duration = Duration::from_secs(3);

/// Wires the tasks together and runs until `shutdown` resolves (or the event sink
/// fails). Every task gets the one [`Shutdown`] token, and every wait of the stop is
/// bounded.
pub async fn run(settings: Settings, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    // First the settings the sinks check (webhook URLs and headers, the exec command), so
    // a bad one is a usage error whatever holds the state directory or the socket.
    // (The mutes file is only read here; a second daemon stops at the lock below.)
    let board = crate::sink::desktop::Board {
        mutes: std::sync::Arc::new(crate::state::mutes::Mutes::load(&settings.state_dir)),
        held: std::sync::Arc::default(),
        raise: std::sync::Arc::default(),
    };
    let sinks = build_sinks(&settings, &board)?;
    // Then: a second daemon on the same state directory must stop before it does
    // anything else.
    let (persist, mut loaded) = crate::state::open(&settings.state_dir, settings.catch_up_ms)?;
    let replay = std::mem::take(&mut loaded.journal.undone);
    let out = open_events(settings.events.as_ref())?;
    let token = Shutdown::new().map_err(|e| Error::Start(format!("the shutdown signal: {e}")))?;
    // What `/metrics` reads at each scrape: the sinks' counters and the gauges.
    let readout = Arc::new(crate::diag::Readout::default());
    for s in &sinks {
        let (name, counters) = s.counters();
        readout.add_sink(name, counters);
    }
    let metrics = match settings.metrics {
        Some(addr) => Some(
            crate::metrics::serve::Listener::bind(addr).map_err(|e| Error::Usage(e.to_string()))?,
        ),
        None => None,
    }
    .map(|l| {
        (
            l,
            Arc::new(crate::metrics::Metrics::new(Arc::clone(&readout))),
        )
    });
    let (counts_tx, counts_rx) = tokio::sync::watch::channel(crate::views::Counts::default());
    let (views_tx, views) =
        crate::views::spawn(counts_tx, metrics.as_ref().map(|(_, m)| Arc::clone(m)))
            .map_err(|e| Error::Start(format!("the status thread: {e}")))?;
    let hub = crate::socket::Hub::new(views, crate::socket::CLIENT_QUEUE, board);
    hub.remote_links().count_into(Arc::clone(&readout));
    // The roots the person named (the defaults appear as their agents are installed, and
    // are never "waiting").
    let defaults = crate::config::default_roots();
    hub.set_named_roots(
        settings
            .roots
            .iter()
            .filter(|r| !defaults.contains(r))
            .cloned()
            .collect(),
    );
    hub.set_stale_after(settings.liveness_after_ms);
    let (hint_tx, hint_rx) = watch::channel(watch::HINT_CAPACITY);
    let server = match &settings.socket {
        Some(path) => {
            let opts = crate::socket::Options {
                max_followers: settings.max_followers,
                sweep: settings.sweep_interval,
                hints: Some(hint_tx.clone()),
            };
            Some(crate::socket::Server::start(
                path,
                Arc::clone(&hub),
                opts,
                token.clone(),
            )?)
        }
        None => {
            tracing::warn!(
                "No absolute runtime, state or home directory: no socket, so no status or tail."
            );
            None
        }
    };
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (event_tx, event_rx) = tokio::sync::mpsc::channel(deliver::BATCH_CAPACITY);
    let remotes = start_remotes(&settings, &hub, &event_tx, &token)?;
    // Whether any file needs the poll (live files, or directories with no native watch):
    // when none does, the poll ticker sleeps instead of waking everyone for nothing.
    let (poll_tx, poll_rx) = tokio::sync::watch::channel(true);
    let watchdog = service::watchdog_interval();
    let heartbeat = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let core = core::Core::new(&settings, hint_tx.clone(), hint_rx, event_tx, loaded)?
        .with_views(views_tx)
        .with_poll_gate(poll_tx)
        .with_heartbeat(Arc::clone(&heartbeat), service::heartbeat_every(watchdog))
        .with_readout(readout);
    let core = match &metrics {
        Some((_, m)) => core.with_metrics(Arc::clone(m)),
        None => core,
    };
    let core = {
        let token = token.clone();
        std::thread::Builder::new()
            .name("baton-core".to_owned())
            .spawn(move || core.run(&token))
            .map_err(|e| Error::Start(format!("the core thread: {e}")))?
    };
    let registry = registry::Reader::new(
        registry::dirs_of(&settings.roots),
        hint_tx.clone(),
        registry::index(),
    )
    .spawn(token.clone());
    let ticker = tokio::spawn(poll::ticker(
        hint_tx,
        settings.poll_interval,
        settings.sweep_interval,
        poll_rx,
        token.clone(),
    ));
    let notifier = tokio::spawn(service::run(
        ready_rx,
        counts_rx,
        watchdog,
        heartbeat,
        token.clone(),
    ));
    let writer = deliver::Writer {
        health: hub.stream_health(),
        shutdown: token.clone(),
    };
    let fan = deliver::Fanout {
        sinks,
        hub: Some(hub),
        ready: Some(ready_tx),
        metrics: metrics.as_ref().map(|(_, m)| Arc::clone(m)),
    };
    let serving = metrics.map(|(l, m)| tokio::spawn(l.run(m, token.clone())));
    let mut sink = tokio::spawn(deliver::run(event_rx, out, persist, replay, fan, writer));
    tokio::pin!(shutdown);
    let sink_result = tokio::select! {
        () = &mut shutdown => {
            tracing::info!("Stopping.");
            service::stopping();
            token.stop();
            match tokio::time::timeout(STREAM_GRACE, &mut sink).await {
                Ok(res) => res,
                Err(_) => {
                    // The one task not ended by the token alone: it drains what the core
                    // sends after the stop, so it ends when the core's sender is gone,
                    // and here, past the stream's grace, by force. Dropping the task
                    // drops its queue, which frees a core waiting on it.
                    sink.abort();
                    tracing::error!("The event stream is blocked (its reader stopped reading); exiting without flushing it; what was not written comes out on the next start (within --catch-up).");
                    Ok(Err(Error::Output(io::Error::other(
                        "the event stream was blocked at shutdown",
                    ))))
                }
            }
        }
        res = &mut sink => res,
    };
    // The sink is done (drained after the core's last batch, or failed): stop the core
    // if it is still running.
    token.stop();
    // Both return at the token.
    if let Some(r) = registry {
        let _ = r.join();
    }
    let _ = ticker.await;
    let _ = notifier.await;
    if let Some(s) = serving {
        let _ = s.await;
    }
    let core_result =
        tokio::time::timeout(CORE_GRACE, tokio::task::spawn_blocking(move || core.join())).await;
    let sink_result =
        sink_result.map_err(|e| Error::Output(io::Error::other(format!("event sink: {e}"))))?;
    // Close the socket and the delivery sinks off the runtime thread: they wait.
    let closing = tokio::task::spawn_blocking(move || {
        if let Some(s) = server {
            s.stop();
        }
        let deadline = std::time::Instant::now() + SINK_GRACE;
        // They ended with the sink's queue; a child's group may still be going.
        for r in remotes {
            while !r.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        sink_result.map(|fan| {
            for s in fan.sinks {
                s.close(deadline.saturating_duration_since(std::time::Instant::now()));
            }
        })
    })
    .await
    .map_err(|e| Error::Output(io::Error::other(format!("closing sinks: {e}"))))?;
    match core_result {
        Ok(Ok(Ok(res))) => res?,
        Ok(Ok(Err(_)) | Err(_)) => {
            return Err(Error::Output(io::Error::other("the core thread panicked")));
        }
        Err(_) => {
            tracing::error!("The core thread did not stop in time; exiting without it.");
            return Err(Error::Output(io::Error::other(
                "the core thread did not stop in time",
            )));
        }
    }
    closing
}
