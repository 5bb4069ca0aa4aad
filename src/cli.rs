//! Command-line interface.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

// The table options live with the table (`people`), below the command line.
pub use crate::people::{ColorChoice, TableArgs};

const ABOUT: &str = "Tells you when an AI coding agent hands the turn back to you.

baton reads the transcripts that Claude Code, Codex, Cursor, Copilot CLI, Pi and Oh My Pi
write (and Norma and SGME L0 sessions), works out where each turn stands — working,
completed, failed, interrupted or waiting for your answer — and reports it as JSON Lines
events.";

const AFTER: &str = "Examples:
  baton scan                         where does every session stand right now?
  baton scan --json | jq .           the same, one JSON object per session
  baton replay ~/.claude/projects    every turn event in history, in file order
  baton replay --settle 10s FILE     replay one transcript with a 10 s quiet period

  baton status                       what the running daemon knows, now
  baton tail --since 10m             recent events, then live ones
  baton tail --json --follow         the stream, across daemon restarts
  baton status --watch               a live table (/ filter, a all, q quit)
  baton status --format waybar --watch   a status-bar line on every change
                                     (waybar, i3bar, plain: docs/status-bar.md)

Default roots (read by `run`, `scan` and `check` without a PATH; each once it exists):
  ~/.claude/projects         Claude Code ($CLAUDE_CONFIG_DIR/projects)
  ~/.codex/sessions          Codex ($CODEX_HOME/sessions)
  ~/.cursor/projects         Cursor
  ~/.copilot/session-state   Copilot CLI ($COPILOT_HOME/session-state)
  ~/.pi/agent/sessions       Pi ($PI_CODING_AGENT_DIR/sessions)
  ~/.omp/agent/sessions      Oh My Pi
  ~/.gemini/tmp              Gemini CLI ($GEMINI_CLI_HOME/.gemini/tmp)
  ~/.qwen/projects           Qwen Code ($QWEN_RUNTIME_DIR/projects, $QWEN_HOME/projects)

Logging goes to stderr (to journald under systemd); set BATON_LOG (e.g.
BATON_LOG=debug) to change the filter. `baton man SUBCOMMAND` prints its man page.

Exit codes: 0 ok, 1 check found problems, 2 usage or config error, 3 cannot read a
path or the daemon is not running, 4 cannot write output, 5 another `baton run` holds
the state directory, 6 the state directory cannot be used, 7 no systemd user manager is
reachable (`baton service`), 8 systemctl failed (`baton service`), 9 `baton run` could
not start a part it needs (the socket, a thread, the native watcher).";

#[derive(Debug, Parser)]
#[command(name = "baton", version, about = ABOUT, long_about = ABOUT, after_help = AFTER)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the events a transcript produces, reading it from its first byte.
    ///
    /// Time is virtual: the records' own timestamps are the clock, and settle timers fire
    /// in that time. When a file ends the clock runs on, so a final answer with no end
    /// marker still completes (evidence "quiet").
    Replay(ReplayArgs),
    /// Print every session's current state.
    ///
    /// States: working, completed (waiting for you), failed, interrupted, needs_input.
    /// Without PATH, reads the default roots that exist: ~/.claude/projects
    /// ($CLAUDE_CONFIG_DIR/projects), ~/.codex/sessions ($CODEX_HOME/sessions),
    /// ~/.cursor/projects, ~/.copilot/session-state ($COPILOT_HOME/session-state),
    /// ~/.pi/agent/sessions, ~/.omp/agent/sessions, ~/.gemini/tmp ($GEMINI_CLI_HOME) and
    /// ~/.qwen/projects ($QWEN_RUNTIME_DIR, $QWEN_HOME).
    Scan(ScanArgs),
    /// Run the daemon: watch the transcript roots and report turns live.
    Run(Box<crate::daemon::RunArgs>),
    /// Audit transcripts for damage: malformed, partial or oversized lines, duplicate
    /// uuids, broken parent chains, dangling tool calls. Exits 1 when it finds problems.
    ///
    /// Without PATH, reads the default roots that exist, as `scan` does.
    Check(crate::check::CheckArgs),
    /// Print every session the running daemon knows: agent, project, state, turn,
    /// since when, last message.
    ///
    /// The table shows what fits, the most urgent rows first (what waits for you, then
    /// the newest): on a terminal as many as its height leaves room for (`LINES`, else
    /// the terminal's size), in a pipe or a file 100; then "… and N more (baton status
    /// --all / --json)". `--all` lists every row, `--json` every row and field.
    ///
    /// `--format waybar|i3bar|plain` prints one line for a status bar instead (e.g. "2
    /// need you · 1 working"), and with `--watch` a new line on every change; while the
    /// daemon is not running that line says so (class `down`) and `--watch` retries
    /// until it is back. See docs/status-bar.md for waybar, i3blocks, i3status-rust,
    /// polybar and tmux. With `--format`, the exit code is 0 whenever the line was
    /// printed, the `down` line included (bars hide or redden a block whose command
    /// fails), 2 on a usage error, 4 when the line cannot be written.
    Status(StatusArgs),
    /// Follow the running daemon's events live: one line each, or JSON Lines with
    /// --json. --since (or --since-id) replays recent events first; --follow keeps going
    /// across daemon restarts.
    Tail(TailArgs),
    /// Show no desktop notification for a project or a session, for a while or until
    /// `baton unmute` (the running daemon keeps it in its state directory). Events still
    /// stream, and hooks and webhooks still run.
    Mute(MuteArgs),
    /// Lift a mute set with `baton mute`.
    Unmute {
        /// The project name (as `baton status` shows it) or session id.
        #[arg(value_name = "PROJECT|SESSION")]
        target: String,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Hand an agent hook's input to the running daemon (for the agent's settings; see
    /// `baton hooks install`).
    ///
    /// Reads the hook's JSON on stdin (Claude Code `Notification`, `PermissionRequest`,
    /// `Stop`, `UserPromptSubmit`, `PostToolUse`; Codex hooks; Gemini CLI `Notification`
    /// with `ToolPermission`, `AfterAgent`, `BeforeAgent`, `AfterTool`, with `--agent
    /// gemini`), or from the last argument
    /// (Codex's legacy `notify`), and returns at once. Always exits 0, even when no
    /// daemon runs or the input is not understood, so it never blocks or fails the
    /// agent; the hook is one more witness of a wait or an end the daemon may already
    /// know from the transcript or the registry, never a second page.
    Hook(HookArgs),
    /// Add (or remove) `baton hook` in an agent's own hook settings.
    ///
    /// `install --agent claude` adds Notification, PermissionRequest and Stop hooks to
    /// ~/.claude/settings.json ($CLAUDE_CONFIG_DIR/settings.json); `--agent codex` adds
    /// PermissionRequest and Stop hooks to ~/.codex/hooks.json ($CODEX_HOME/hooks.json;
    /// Codex reads it with `[features] codex_hooks = true`). Shows the diff, keeps a
    /// backup (FILE.baton-backup), and is idempotent; `uninstall` removes exactly the
    /// entries it added.
    Hooks(HooksArgs),
    /// Print the effective configuration (config file plus defaults) as commented TOML.
    Config {
        /// Read FILE instead of $XDG_CONFIG_HOME/baton/config.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Print the systemd user unit, its ExecStart naming this binary.
    ///
    /// `baton service install` writes it and enables it.
    Unit,
    /// Install, remove or check baton as a systemd user service.
    ///
    /// `install` writes ~/.config/systemd/user/baton.service (ExecStart naming this
    /// binary; nothing when the Debian package's unit is there) and runs `systemctl --user
    /// daemon-reload` and `enable --now baton`. Without a user manager (a container, SSH
    /// without lingering) it says so: `loginctl enable-linger $USER` is the fix.
    Service(crate::service_cmd::ServiceArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For example: baton completions bash > ~/.local/share/bash-completion/completions/baton
    Completions {
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `baton man | man -l -`, or a subcommand's
    /// (`baton man scan | man -l -`).
    Man {
        /// The subcommand whose page to print (default: the top page).
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// Quiet period after which an unmarked final answer counts as complete
    /// (e.g. 500ms, 30s, 2m). Explicit end markers confirm at once; this is the last
    /// resort.
    #[arg(long, value_name = "DUR", default_value = "90s", value_parser = crate::clock::parse_duration_ms)]
    pub settle: u64,
    /// Longest line parsed, in bytes. Longer lines are streamed past (memory stays
    /// bounded) and reported as an `oversized_line` anomaly.
    #[arg(long, value_name = "BYTES", default_value_t = crate::tail::DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
    /// Read files as this provider's instead of detecting it (claude, codex, norma, sgme, cursor, copilot, pi, opencode, gemini, qwen).
    #[arg(long, value_name = "PROVIDER", value_parser = crate::model::ProviderKind::parse_arg)]
    pub provider: Option<crate::model::ProviderKind>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Transcript files, or directories to search for them.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// One JSON object per session instead of a table (every row, subagents and old
    /// sessions too; --state, --project and --agent still filter), each written as it
    /// comes from the daemon.
    #[arg(long)]
    pub json: bool,
    /// Read every file from its first byte instead of from its last turns (the state is
    /// the same; this is slower).
    #[arg(long)]
    pub full_read: bool,
    /// Print how the files were read to stderr: how many from their last turns, how many
    /// whole and why, bytes parsed.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub table: TableArgs,
    /// Quiet time after which a working session's agent process is looked for, as the
    /// daemon does: with none alive, it shows interrupted (writer_gone). Where no process
    /// can tell (agents without a writer rule), a longer silence shows as `stale`.
    #[arg(long, value_name = "DUR", default_value = "2m", value_parser = crate::clock::parse_positive_duration_ms)]
    pub liveness_after: u64,
    /// Transcript files or directories (default: the default roots; see `baton --help`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Which daemon a client asks.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The socket of the daemon to ask (as given to `baton run --socket`).
    #[arg(long, value_name = "PATH", conflicts_with = "state_dir")]
    pub socket: Option<PathBuf>,
    /// Ask the daemon of this state directory (as given to `baton run --state-dir`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl DaemonArgs {
    /// The socket to connect to.
    pub fn socket(&self) -> Option<PathBuf> {
        crate::config::socket_for(self.socket.clone(), self.state_dir.as_deref())
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One JSON object per session instead of a table (every row, subagents and old
    /// sessions too; --state, --project and --agent still filter).
    #[arg(long)]
    pub json: bool,
    /// A full-screen table that follows the daemon live (keys: / filter, a all, q quit);
    /// with --format, a new bar line on every change (and only then).
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
    /// One line for a status bar instead of a table: waybar (JSON: text, tooltip,
    /// class), i3bar (the i3bar protocol) or plain (polybar, i3blocks, tmux). See
    /// docs/status-bar.md.
    #[arg(long, value_name = "FORMAT", value_enum, conflicts_with = "json")]
    pub format: Option<crate::live::bar::BarFormat>,
    /// With --format: how long a completed or failed turn counts as waiting for you
    /// after it ended (a question counts until it is answered).
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = crate::clock::parse_duration_unit_ms, requires = "format")]
    pub recent: u64,
    #[command(flatten)]
    pub daemon: DaemonArgs,
    #[command(flatten)]
    pub table: TableArgs,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// Whose hook this is.
    #[arg(long, value_name = "AGENT", default_value = "claude", value_parser = crate::model::ProviderKind::parse_arg)]
    pub agent: crate::model::ProviderKind,
    /// The hook's JSON, when the agent passes it as an argument (Codex's `notify`);
    /// otherwise it is read from stdin.
    #[arg(value_name = "JSON")]
    pub payload: Option<String>,
}

#[derive(Debug, Args)]
pub struct HooksArgs {
    #[command(subcommand)]
    pub action: HooksAction,
}

#[derive(Debug, Subcommand)]
pub enum HooksAction {
    /// Add baton's hooks to the agent's settings file.
    Install(HooksTarget),
    /// Remove exactly the hooks `install` added.
    Uninstall(HooksTarget),
}

#[derive(Debug, Args)]
pub struct HooksTarget {
    /// `claude` or `codex`.
    #[arg(long, value_name = "AGENT", value_parser = ["claude", "codex"])]
    pub agent: String,
    /// Edit FILE instead of the agent's default settings file.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Show the diff, change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["target", "project", "branch"])))]
pub struct MuteArgs {
    /// The project name as `baton status` shows it (my-web-app, or src/my-web-app when
    /// two projects share the name; any case) or a session id. Warns when the daemon
    /// knows no session by that name (the mute still waits for one).
    #[arg(value_name = "PROJECT|SESSION")]
    pub target: Option<String>,
    /// Mute this project (a name as `baton status` shows it), never a session id.
    #[arg(long, value_name = "NAME", conflicts_with = "target")]
    pub project: Option<String>,
    /// Mute every session on this git branch (as the agent records it: Claude Code,
    /// Codex); `baton unmute BRANCH` lifts it.
    #[arg(long, value_name = "BRANCH", conflicts_with_all = ["target", "project"])]
    pub branch: Option<String>,
    /// For this long, with its unit (e.g. 90s, 30m, 1h); without it, until `baton
    /// unmute`.
    #[arg(long = "for", value_name = "DUR", value_parser = crate::clock::parse_duration_unit_ms)]
    pub for_ms: Option<u64>,
    #[command(flatten)]
    pub daemon: DaemonArgs,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    /// Print events as JSON Lines (the `baton run` stream format).
    #[arg(long)]
    pub json: bool,
    /// First replay the events of this last while (e.g. 10m) that the daemon still
    /// holds (its last 1024 events).
    #[arg(long, value_name = "DUR", value_parser = crate::clock::parse_duration_ms)]
    pub since: Option<u64>,
    /// Start after the event with this id (its `id` field), if the daemon still holds
    /// it; otherwise from every event it holds, minus those printed already.
    #[arg(long, value_name = "ID", conflicts_with = "since")]
    pub since_id: Option<String>,
    /// Keep following when the daemon stops or is not up yet: reconnect (backing off
    /// from 100 ms to 2 s) and resume after the last event printed, with no repeats.
    #[arg(long, short = 'f')]
    pub follow: bool,
    #[command(flatten)]
    pub daemon: DaemonArgs,
}
