//! `baton run`: the live daemon.
//!
//! ```text
//! notify thread ─┐ hints (bounded; overflow ⇒ full rescan)
//! poll ticker ───┼──────────────▶ core thread ──▶ event batches ──▶ sink task ──▶ JSONL
//! signals ───────┘ (stop)        (tail state, projectors, reducer)
//! ```
//!
//! One core thread owns every file's tail state, the projectors and the reducer; it is
//! the only place that opens transcripts. The watcher and the poll ticker only send
//! hints. A tokio current-thread runtime on the main thread runs the signal handlers,
//! the poll ticker and the event sink (whose blocking writes go to tokio's blocking
//! pool, so a stalled reader of `--events` cannot delay shutdown handling).
//!
//! The core is a plain thread blocking on a crossbeam `select!` rather than a tokio
//! task: its work is synchronous file IO and parsing that would stall a current-thread
//! runtime, and its one timer (the earliest settle deadline, on the monotonic clock)
//! is just the select's timeout.

mod core;
mod sink;

use crate::clock::parse_duration_ms;
use crate::error::Error;
use crate::model::ProviderKind;
use crate::tail::DEFAULT_MAX_LINE_BYTES;
use crate::watch::{self, Root, poll};
use clap::{Args, ValueEnum};
use std::future::Future;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

const RUN_AFTER: &str = "How it works:
  Files already present at start are history: baton reads them to learn where each
  session stands, emits nothing for them, then emits daemon_ready and goes live. A file
  created later is read from its first byte. Everywhere, a turn whose record time is
  older than --catch-up is history too: it updates state but pages nobody.

  inotify reports changes within a millisecond. Polling runs as well, always: the live
  files (changed in the last 10 minutes, or with a turn still open) are stat'ed every
  --poll-interval, and the whole tree is re-listed every 30 s. So a change the watcher
  misses (queue overflow, a write through a hard link, NFS) is still seen.

Examples:
  baton run                                   watch ~/.claude/projects and ~/.codex/sessions
  baton run --events ~/baton-events.jsonl     append events to a file instead of stdout
  baton run --no-default-roots --watch claude=/mnt/box/.claude/projects --watcher poll
                                              a network mount, where inotify is blind

  State (--state-dir) makes restarts exact: each turn is alerted once across restarts,
  crashes and rewrites. The first run ever treats what exists as history; later runs
  read what files gained while baton was down and alert what is within --catch-up.
  After a crash (SIGKILL, power loss), an event that may not have been delivered is
  delivered again with \"replay\": true and the same id.

Stop with SIGTERM or Ctrl-C: baton emits daemon_stopping, flushes and exits 0. A second
baton on the same state directory exits with code 5.";

/// How changes are noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WatcherMode {
    /// The native watcher plus polling; polling alone if the native watcher cannot start.
    Auto,
    /// The native watcher plus polling; fail if the native watcher cannot start.
    Native,
    /// Polling only (NFS, SSHFS and other filesystems where inotify is blind).
    Poll,
}

/// Arguments of `baton run`.
#[derive(Debug, Args)]
#[command(after_help = RUN_AFTER)]
pub struct RunArgs {
    /// Read settings from FILE. Not supported yet: config files arrive with the
    /// delivery work; use flags for now.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Watch DIR for PROVIDER's transcripts: claude, codex, norma, sgme, or auto (tell
    /// each file's provider from its path and first line). Repeatable; adds to the
    /// default roots unless --no-default-roots.
    #[arg(long = "watch", value_name = "PROVIDER=DIR", value_parser = parse_watch)]
    pub watch: Vec<Root>,
    /// Do not watch the default roots ($CLAUDE_CONFIG_DIR/projects or
    /// ~/.claude/projects, and $CODEX_HOME/sessions or ~/.codex/sessions).
    #[arg(long)]
    pub no_default_roots: bool,
    /// Where baton keeps its state (checkpoints, the ledger of alerted turns, the
    /// journal, the lock). Default: $XDG_STATE_HOME/baton or ~/.local/state/baton.
    /// One daemon per state directory.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where events go: a file to append to, or - for stdout.
    #[arg(long, value_name = "FILE|-", default_value = "-")]
    pub events: PathBuf,
    /// How changes are noticed.
    #[arg(long, value_enum, value_name = "MODE", default_value = "auto")]
    pub watcher: WatcherMode,
    /// How often live files are stat'ed, whatever the watcher says (e.g. 500ms, 2s).
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = parse_positive_duration)]
    pub poll_interval: u64,
    /// Quiet period after which an unmarked final answer counts as complete. Explicit
    /// end markers confirm at once; this is the last resort.
    #[arg(long, value_name = "DUR", default_value = "90s", value_parser = parse_duration)]
    pub settle: u64,
    /// Turns whose record time is older than this are history: they update state but
    /// emit nothing (so a late file full of old turns pages nobody).
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    pub catch_up: u64,
    /// Longest line parsed, in bytes. Longer lines are streamed past (memory stays
    /// bounded) and reported as an `oversized_line` anomaly.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
    /// Do not show desktop notifications (accepted now; notifications come with the
    /// delivery work).
    #[arg(long)]
    pub no_desktop: bool,
    /// Test only: throw away every native watcher event, so that only polling can
    /// notice changes.
    #[arg(long, hide = true)]
    pub debug_drop_native_events: bool,
    /// Test only: behave as if the OS allowed only N file watches.
    #[arg(long, hide = true, value_name = "N")]
    pub debug_max_watches: Option<usize>,
    /// Test and benchmark only: how often the whole tree is re-listed.
    #[arg(long, hide = true, value_name = "DUR", default_value = "30s", value_parser = parse_positive_duration)]
    pub debug_sweep_interval: u64,
}

fn parse_duration(s: &str) -> Result<u64, String> {
    parse_duration_ms(s)
}

fn parse_positive_duration(s: &str) -> Result<u64, String> {
    match parse_duration_ms(s)? {
        0 => Err(format!("`{s}` must be longer than zero")),
        ms => Ok(ms),
    }
}

fn parse_watch(s: &str) -> Result<Root, String> {
    let (provider, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not PROVIDER=DIR (e.g. claude=~/.claude/projects)"))?;
    let provider = match provider {
        "auto" => None,
        p => Some(ProviderKind::parse(p).ok_or_else(|| {
            format!("unknown provider `{p}` (claude, codex, norma, sgme or auto)")
        })?),
    };
    if dir.is_empty() {
        return Err(format!("`{s}` names no directory"));
    }
    let path = std::path::absolute(dir).map_err(|e| format!("`{dir}`: {e}"))?;
    Ok(Root { path, provider })
}

/// Everything the daemon needs, resolved once from the command line and environment.
#[derive(Debug, Clone)]
pub struct Settings {
    pub roots: Vec<Root>,
    /// `None`: stdout.
    pub events: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub watcher: WatcherMode,
    pub poll_interval: Duration,
    pub sweep_interval: Duration,
    pub settle_ms: u64,
    pub catch_up_ms: u64,
    pub max_line: usize,
    pub drop_native_events: bool,
    pub max_watches: Option<usize>,
}

impl Settings {
    pub fn from_args(args: RunArgs) -> Result<Self, Error> {
        if let Some(file) = &args.config {
            return Err(Error::Usage(format!(
                "--config {}: config files are not supported yet (they arrive with the \
                 delivery work); use flags instead",
                file.display()
            )));
        }
        let mut roots = if args.no_default_roots {
            Vec::new()
        } else {
            crate::config::default_roots()
        };
        for r in args.watch {
            if !roots.contains(&r) {
                roots.push(r);
            }
        }
        if roots.is_empty() {
            return Err(Error::Usage(
                "nothing to watch: --no-default-roots needs at least one --watch PROVIDER=DIR"
                    .to_owned(),
            ));
        }
        let events = (args.events.as_os_str() != "-").then_some(args.events);
        let state_dir = args
            .state_dir
            .or_else(crate::state::default_dir)
            .ok_or_else(|| {
                Error::Usage(
                    "no state directory: set --state-dir, XDG_STATE_HOME or HOME".to_owned(),
                )
            })?;
        let state_dir = std::path::absolute(&state_dir)
            .map_err(|e| Error::Usage(format!("--state-dir {}: {e}", state_dir.display())))?;
        Ok(Settings {
            roots,
            events,
            state_dir,
            watcher: args.watcher,
            poll_interval: Duration::from_millis(args.poll_interval),
            sweep_interval: Duration::from_millis(args.debug_sweep_interval),
            settle_ms: args.settle,
            catch_up_ms: args.catch_up,
            max_line: args.max_line_bytes,
            drop_native_events: args.debug_drop_native_events,
            max_watches: args.debug_max_watches,
        })
    }
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn main(args: RunArgs) -> Result<(), Error> {
    let settings = Settings::from_args(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The sink's writes run on the blocking pool; keep its thread between batches.
        .thread_keep_alive(Duration::from_secs(24 * 3600))
        .build()
        .map_err(|e| Error::Usage(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(async { run(settings, shutdown_signal()).await })
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

fn open_events(events: Option<&PathBuf>) -> Result<Box<dyn Write + Send>, Error> {
    match events {
        None => Ok(Box::new(io::BufWriter::new(io::stdout()))),
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    Error::Usage(format!("cannot open --events {}: {e}", path.display()))
                })?;
            Ok(Box::new(io::BufWriter::new(f)))
        }
    }
}

/// Wires the tasks together and runs until `shutdown` resolves (or the event stream
/// cannot be written).
pub async fn run(settings: Settings, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    // First: a second daemon on the same state directory must stop before it does
    // anything else.
    let (persist, mut loaded) = crate::state::open(&settings.state_dir)?;
    let replay = std::mem::take(&mut loaded.journal.undone);
    let out = open_events(settings.events.as_ref())?;
    let (hint_tx, hint_rx) = watch::channel(watch::HINT_CAPACITY);
    let (event_tx, event_rx) = tokio::sync::mpsc::channel(sink::BATCH_CAPACITY);
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
    let core = core::Core::new(&settings, hint_tx.clone(), hint_rx, event_tx, loaded)?;
    let core = std::thread::Builder::new()
        .name("baton-core".to_owned())
        .spawn(move || core.run(&stop_rx))
        .map_err(|e| Error::Usage(format!("cannot start the core thread: {e}")))?;
    let ticker = tokio::spawn(poll::ticker(
        hint_tx,
        settings.poll_interval,
        settings.sweep_interval,
    ));
    let mut sink = tokio::spawn(sink::run(event_rx, out, persist, replay));
    tokio::pin!(shutdown);
    let sink_result = tokio::select! {
        () = &mut shutdown => {
            tracing::info!("Stopping.");
            let _ = stop_tx.try_send(());
            (&mut sink).await
        }
        res = &mut sink => res,
    };
    // The sink is done (drained after the core's last batch, or failed): stop the core
    // if it is still running.
    let _ = stop_tx.try_send(());
    ticker.abort();
    let core_result = tokio::task::spawn_blocking(move || core.join()).await;
    let sink_result =
        sink_result.map_err(|e| Error::Output(io::Error::other(format!("event sink: {e}"))))?;
    match core_result {
        Ok(Ok(res)) => res?,
        Ok(Err(_)) | Err(_) => {
            return Err(Error::Output(io::Error::other("the core thread panicked")));
        }
    }
    sink_result
}
