//! `baton run`: the live daemon.
//!
//! ```text
//! notify thread ─┐ hints (bounded; overflow ⇒ full rescan)
//! poll ticker ───┼──────────────▶ core thread ──▶ fanout (sinks, socket: try_send)
//! signals ───────┘ (stop)        (tail state,  └─▶ event batches ──▶ event writer ──▶ JSONL
//! remote links ──── batches ───▶  projectors,       (bounded)       thread (state/)
//!                                 reducer)
//! ```
//!
//! One core thread owns every file's tail state, the projectors and the reducer; it is
//! the only place that opens transcripts, but for a first run's history read, whose
//! reading and parsing run on worker threads that hand it the results in order. The
//! watcher and the poll ticker only send hints. The core hands each batch to the
//! delivery sinks and the socket itself (they only `try_send` into their own queues),
//! then to the event writer's thread (`baton-events`), whose writes may block, so a
//! stalled reader of `--events` delays neither notifications nor `tail` until that
//! thread's queue is full. An event thus crosses one thread wake-up from the core to
//! the stream, with no async runtime on its way. A tokio current-thread runtime on the
//! main thread runs the signal handlers, the poll ticker, the systemd notifier and the
//! metrics listener.
//!
//! The core is a plain thread blocking on a crossbeam `select!` rather than a tokio
//! task: its work is synchronous file IO and parsing that would stall a current-thread
//! runtime, and its timers (the earliest settle deadline on the monotonic clock, a
//! held page falling due) are just the select's timeout.

mod apply;
mod caps;
mod core;
mod deliver;
mod durable;
mod emit;
mod files;
mod first;
mod history;
pub mod liveness;
mod look;
mod name;
mod outbox;
mod read;
pub mod registry;
mod resume;
mod rows;
mod service;
mod settings;
mod stage;
mod sweep;
mod table;
mod tracked;
mod writer;

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
        None => Ok(Box::new(Lines::stdout())),
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

/// How many batches of the remote links may wait for the core before a link waits.
const REMOTE_CAPACITY: usize = 64;

/// One thread per `[[remote]]`, handing its events to the core, which hands them on like
/// its own batches (so they reach the stream, the sinks and `tail` the same way).
fn start_remotes(
    settings: &Settings,
    hub: &crate::socket::Hub,
    events: &crossbeam_channel::Sender<Vec<crate::model::Event>>,
    bell: &watch::HintTx,
    token: &Shutdown,
) -> Result<Vec<std::thread::JoinHandle<()>>, Error> {
    settings
        .remotes
        .iter()
        .map(|cfg| {
            let (tx, bell) = (events.clone(), bell.clone());
            // The core sleeps in `poll(2)`: the bell wakes it for the batch.
            let hand_on: crate::remote::link::HandOn = Box::new(move |batch| {
                let sent = tx.send(batch).is_ok();
                bell.ring();
                sent
            });
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

/// Wires the tasks together and runs until `shutdown` resolves (or the event writer
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
    let (mut persist, mut loaded) = crate::state::open(&settings.state_dir, settings.catch_up_ms)?;
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
    // One scratch file for what parked sessions keep out of memory: the reducer's saved
    // sessions and the `status` table's rows (the state directory is locked by now).
    let spill: Option<Arc<dyn crate::reduce::Spill>> = match crate::state::spill::SpillFile::new(
        &settings.state_dir,
    ) {
        Ok(s) => Some(Arc::new(s.unreadable(settings.spill_unreadable))),
        Err(e) => {
            tracing::warn!(error = %e, "No spill file for parked sessions; they stay in memory.");
            None
        }
    };
    let (counts_tx, counts_rx) = tokio::sync::watch::channel(crate::views::Counts::default());
    let rows = spill.clone().map(|spill| crate::views::ParkedRows {
        spill,
        format: crate::socket::parked_row,
    });
    let (views_tx, views) = crate::views::spawn(
        counts_tx,
        metrics.as_ref().map(|(_, m)| Arc::clone(m)),
        rows,
    )
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
    let (hint_tx, hint_rx) = watch::channel(watch::HINT_CAPACITY)
        .map_err(|e| Error::Start(format!("the hint channel's eventfd: {e}")))?;
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
    // The replay (events pending at a crash) goes out first, to every sink, then the
    // core's batches, each handed to the fanout by the core itself.
    let suspect = persist.take_suspect();
    let mut fan = deliver::Fanout {
        sinks,
        hub: Some(Arc::clone(&hub)),
        ready: Some(ready_tx),
        metrics: metrics.as_ref().map(|(_, m)| Arc::clone(m)),
    };
    fan.deliver(&replay);
    // The event writer's thread writes the replay first, then what the core sends.
    let (event_tx, event_rx) = crossbeam_channel::bounded(writer::BATCH_CAPACITY);
    let w = writer::Writer {
        health: hub.stream_health(),
        shutdown: token.clone(),
    };
    let (mut written, direct) = writer::spawn(event_rx, out, persist, replay, w)?;
    // Dropped to free a core waiting on a stream still blocked past `STREAM_GRACE`.
    let (abandon_tx, abandon_rx) = crossbeam_channel::bounded::<()>(0);
    let outbox = outbox::Outbox::new(event_tx, Some(direct), fan, suspect, abandon_rx);
    let (remote_tx, remote_rx) = crossbeam_channel::bounded(REMOTE_CAPACITY);
    let remotes = start_remotes(&settings, &hub, &remote_tx, &hint_tx, &token)?;
    drop(remote_tx);
    // Whether any file needs the poll (live files, or directories with no native watch):
    // when none does, the poll ticker sleeps instead of waking everyone for nothing.
    let (poll_tx, poll_rx) = tokio::sync::watch::channel(true);
    let watchdog = service::watchdog_interval();
    let heartbeat = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let core = core::Core::new(&settings, hint_tx.clone(), hint_rx, outbox, loaded, spill)?
        .with_remotes(remote_rx)
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
    let serving = metrics.map(|(l, m)| tokio::spawn(l.run(m, token.clone())));
    tokio::pin!(shutdown);
    let written = tokio::select! {
        () = &mut shutdown => {
            tracing::info!("Stopping.");
            service::stopping();
            token.stop();
            match tokio::time::timeout(STREAM_GRACE, &mut written).await {
                Ok(res) => res,
                Err(_) => {
                    // The one thread not ended by the token alone: it writes what the
                    // core sends after the stop, so it ends when the core's sender is
                    // gone, and here, past the stream's grace, it is left behind (stuck
                    // in a write). Giving up frees a core waiting on its queue.
                    drop(abandon_tx);
                    tracing::error!("The event stream is blocked (its reader stopped reading); exiting without flushing it; what was not written comes out on the next start (within --catch-up).");
                    Ok(Err(Error::Output(io::Error::other(
                        "the event stream was blocked at shutdown",
                    ))))
                }
            }
        }
        res = &mut written => res,
    };
    // The writer is done (it wrote the core's last batch, or failed): stop the core if
    // it is still running.
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
    // The writer's thread dropped its report only by panicking.
    let written = written.unwrap_or_else(|_| {
        Err(Error::Output(io::Error::other(
            "the event writer thread panicked",
        )))
    });
    // The core hands back the fanout, whose delivery sinks are closed here.
    let (fan, core_result) = match core_result {
        Ok(Ok(Ok(Ok(fan)))) => (Some(fan), Ok(())),
        Ok(Ok(Ok(Err(e)))) => (None, Err(e)),
        Ok(Ok(Err(_)) | Err(_)) => (
            None,
            Err(Error::Output(io::Error::other("the core thread panicked"))),
        ),
        Err(_) => {
            tracing::error!("The core thread did not stop in time; exiting without it.");
            (
                None,
                Err(Error::Output(io::Error::other(
                    "the core thread did not stop in time",
                ))),
            )
        }
    };
    // Close the socket and the delivery sinks off the runtime thread: they wait.
    tokio::task::spawn_blocking(move || {
        if let Some(s) = server {
            s.stop();
        }
        let deadline = std::time::Instant::now() + SINK_GRACE;
        // They ended with the core; a child's group may still be going.
        for r in remotes {
            while !r.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for s in fan.into_iter().flat_map(|f| f.sinks) {
            s.close(deadline.saturating_duration_since(std::time::Instant::now()));
        }
    })
    .await
    .map_err(|e| Error::Output(io::Error::other(format!("closing sinks: {e}"))))?;
    core_result?;
    written
}
