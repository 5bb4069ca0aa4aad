//! `baton run`'s flags and the settings they resolve to (config file, flags, defaults),
//! checked once before anything starts.

use crate::config::Config;
use crate::error::Error;
use crate::sink::registry::Sinks;
use crate::watch::{Root, WatcherMode};
use clap::Args;
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

/// Arguments of `baton run`. Options left unset take the config file's value, then the
/// built-in default.
#[derive(Debug, Args)]
#[command(after_help = RUN_AFTER)]
pub struct RunArgs {
    /// Read settings from FILE instead of $XDG_CONFIG_HOME/baton/config.toml (or
    /// ~/.config/baton/config.toml). Flags override it; `baton config` shows the result.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Watch DIR for PROVIDER's transcripts: claude, codex, norma, sgme, cursor, copilot, pi, opencode, gemini, qwen, or auto (tell
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
    /// Where to listen for `status` and `tail` (they take the same --socket, or the same
    /// --state-dir). Default: $XDG_RUNTIME_DIR/baton/baton.sock; with a --state-dir other
    /// than the default one, baton.sock in that directory, so daemons with their own
    /// state directories never collide.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Where events go: a file to append to, or - for stdout [default: -].
    #[arg(long, value_name = "FILE|-")]
    pub events: Option<PathBuf>,
    /// How changes are noticed [default: auto].
    #[arg(long, value_enum, value_name = "MODE")]
    pub watcher: Option<WatcherMode>,
    /// How often live files are stat'ed, whatever the watcher says (e.g. 500ms, 2s)
    /// [default: 2s].
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_positive_duration_ms)]
    pub poll_interval: Option<u64>,
    /// Quiet period after which an unmarked final answer counts as complete. Explicit
    /// end markers confirm at once; this is the last resort [default: 90s].
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_duration_ms)]
    pub settle: Option<u64>,
    /// Turns whose record time is older than this are history: they update state but
    /// emit nothing (so a late file full of old turns pages nobody) [default: 10m].
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_duration_ms)]
    pub catch_up: Option<u64>,
    /// How long a completion's page (desktop, exec hook, webhook) waits while background
    /// tasks the session launched still run; the event stream never waits [default: 10m].
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_duration_ms)]
    pub hold_background: Option<u64>,
    /// How long a `needs_input` page (desktop, exec hook, webhook) waits: a wait answered
    /// sooner, as when a rule approves a tool in 0.2 s, asked nobody and never pages. The
    /// event stream has it either way; 0 pages at once [default: 1.5s].
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_duration_ms)]
    pub needs_input_grace: Option<u64>,
    /// Page the completion of scheduled turns too (`/loop`, cron jobs: turns nobody
    /// typed); their questions and failures always page [config: page_scheduled].
    #[arg(long)]
    pub page_scheduled: bool,
    /// Quiet time after which a working session's agent process is looked for; with
    /// none alive, the turn ends as interrupted (writer_gone) [default: 2m].
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_positive_duration_ms)]
    pub liveness_after: Option<u64>,
    /// Longest line parsed, in bytes. Longer lines are streamed past (memory stays
    /// bounded) and reported as an `oversized_line` anomaly [default: 16777216].
    #[arg(long, value_name = "BYTES")]
    pub max_line_bytes: Option<usize>,
    /// Do not show desktop notifications.
    #[arg(long)]
    pub no_desktop: bool,
    /// Test only: throw away every native watcher event, so that only polling can
    /// notice changes.
    #[arg(long, hide = true)]
    pub debug_drop_native_events: bool,
    /// Test only: behave as if the OS allowed only N file watches.
    #[arg(long, hide = true, value_name = "N")]
    pub debug_max_watches: Option<usize>,
    /// Test only: the core thread hangs for good when it looks at a transcript with this
    /// file name (to see the watchdog pings stop).
    #[arg(long, hide = true, value_name = "NAME")]
    pub debug_hang_core_on: Option<std::ffi::OsString>,
    /// Test only: parked sessions put in the spill file cannot be read back (a failing
    /// disk), to see their files read again instead.
    #[arg(long, hide = true)]
    pub debug_spill_unreadable: bool,
    /// Test only: at most N files keep their projector warm (others keep it saved).
    #[arg(long, hide = true, value_name = "N")]
    pub debug_max_warm: Option<usize>,
    /// Test and benchmark only: threads for a first run's history read (0: one per
    /// core; 1: each file as it is found, on the core thread).
    #[arg(long, hide = true, value_name = "N", default_value = "0")]
    pub debug_history_threads: usize,
    /// Test and benchmark only: how often the whole tree is re-listed.
    #[arg(long, hide = true, value_name = "DUR", default_value = "30s", value_parser = crate::clock::parse_positive_duration_ms)]
    pub debug_sweep_interval: u64,
}

fn parse_watch(s: &str) -> Result<Root, String> {
    crate::config::parse_watch(s)
}

/// Everything the daemon needs, resolved once from the command line, the config file
/// and the environment.
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
    pub hold_background: Duration,
    /// The page rules besides the background hold.
    pub pages: crate::sink::hold::Pages,
    pub liveness_after_ms: u64,
    pub max_line: usize,
    pub drop_native_events: bool,
    pub max_watches: Option<usize>,
    /// At most this many files keep a live projector.
    pub max_warm: Option<usize>,
    /// Test only: see `RunArgs::debug_hang_core_on`.
    pub hang_core_on: Option<std::ffi::OsString>,
    /// Test only: see `RunArgs::debug_spill_unreadable`.
    pub spill_unreadable: bool,
    /// Test and benchmark only: see `RunArgs::debug_history_threads`.
    pub history_threads: usize,
    /// The delivery sinks' sections (desktop, exec hook, webhooks: see
    /// `sink::registry`).
    pub sinks: Sinks,
    /// `None`: no socket (no runtime, state or home directory to put it in).
    pub socket: Option<PathBuf>,
    /// `tail` clients served at once.
    pub max_followers: usize,
    /// Other machines whose events come here.
    pub remotes: Vec<crate::remote::RemoteConfig>,
    /// Where `/metrics` is served (already checked against `metrics_allow_remote`).
    pub metrics: Option<std::net::SocketAddr>,
}

impl Settings {
    /// Loads the config file (`--config`, or the default one if present) and applies
    /// the flags over it.
    pub fn from_args(args: RunArgs) -> Result<Self, Error> {
        let config = Config::load(args.config.as_deref())?;
        Self::resolve(args, config)
    }

    /// Applies the flags over `config`.
    pub fn resolve(args: RunArgs, mut config: Config) -> Result<Self, Error> {
        let mut sinks = config.take_sinks();
        if args.no_desktop {
            sinks.desktop.enabled = false;
        }
        let mut roots = if args.no_default_roots || !config.default_roots {
            Vec::new()
        } else {
            crate::config::default_roots()
        };
        for r in config.watch.into_iter().chain(args.watch) {
            // A root asked for by name that is not there is most likely mistyped: say so
            // (default roots appear when their agent is installed, and stay quiet).
            if !r.path.exists() {
                tracing::warn!(
                    path = %r.path.display(),
                    "Watch root does not exist; waiting for it (is it spelled right?)."
                );
            }
            if !roots.contains(&r) {
                roots.push(r);
            }
        }
        if roots.is_empty() {
            return Err(Error::Usage(
                "nothing to watch: --no-default-roots (or default_roots = false) needs at \
                 least one --watch PROVIDER=DIR"
                    .to_owned(),
            ));
        }
        let events = match args.events {
            Some(p) => (p.as_os_str() != "-").then_some(p),
            None => config.events,
        };
        let given_state_dir = args.state_dir.is_some();
        let state_dir = args
            .state_dir
            .or_else(crate::config::default_state_dir)
            .ok_or_else(|| {
                Error::Usage(
                    "no state directory: set --state-dir, or XDG_STATE_HOME or HOME to an \
                     absolute path (relative ones are ignored)"
                        .to_owned(),
                )
            })?;
        let state_dir = std::path::absolute(&state_dir)
            .map_err(|e| Error::Usage(format!("--state-dir {}: {e}", state_dir.display())))?;
        let socket = match (args.socket, given_state_dir) {
            (Some(s), _) => Some(
                std::path::absolute(&s)
                    .map_err(|e| Error::Usage(format!("--socket {}: {e}", s.display())))?,
            ),
            (None, true) => crate::config::socket_for(None, Some(&state_dir)),
            (None, false) => config.socket,
        };
        Ok(Settings {
            roots,
            events,
            state_dir,
            watcher: args.watcher.unwrap_or(config.watcher),
            poll_interval: Duration::from_millis(
                args.poll_interval.unwrap_or(config.poll_interval_ms),
            ),
            sweep_interval: Duration::from_millis(args.debug_sweep_interval),
            settle_ms: args.settle.unwrap_or(config.settle_ms),
            catch_up_ms: args.catch_up.unwrap_or(config.catch_up_ms),
            hold_background: Duration::from_millis(
                args.hold_background.unwrap_or(config.hold_background_ms),
            ),
            pages: crate::sink::hold::Pages {
                needs_input_grace: Duration::from_millis(
                    args.needs_input_grace
                        .unwrap_or(config.needs_input_grace_ms),
                ),
                page_scheduled: args.page_scheduled || config.page_scheduled,
            },
            liveness_after_ms: args.liveness_after.unwrap_or(config.liveness_after_ms),
            max_line: args.max_line_bytes.unwrap_or(config.max_line_bytes),
            drop_native_events: args.debug_drop_native_events,
            max_watches: args.debug_max_watches,
            max_warm: args.debug_max_warm,
            hang_core_on: args.debug_hang_core_on,
            spill_unreadable: args.debug_spill_unreadable,
            history_threads: args.debug_history_threads,
            sinks,
            socket,
            max_followers: config.max_followers,
            remotes: config.remotes,
            metrics: config.metrics,
        })
    }
}
