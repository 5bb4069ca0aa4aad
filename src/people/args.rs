//! The table options `scan` and `status` share (`--state`, `--project`, `--agent`,
//! `--branch`, `--all`, `--color`), here beside the table they shape; `cli` flattens them
//! into both commands.

use clap::Args;

/// What the `scan` and `status` tables show, and how.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// Only sessions in this state: needs_input, failed, completed, working,
    /// interrupted, stale (repeat it, or give a comma list).
    #[arg(long, value_name = "STATE", value_delimiter = ',', value_parser = super::parse_state)]
    pub state: Vec<String>,
    /// Only sessions of this project (its name as shown, e.g. my-web-app or
    /// src/my-web-app; any case).
    #[arg(long, value_name = "NAME")]
    pub project: Option<String>,
    /// Only this agent's sessions: its id (claude, codex, cursor, copilot, pi, opencode,
    /// gemini, qwen, norma, sgme) or its name (Claude Code, Copilot CLI, ...).
    #[arg(long, value_name = "NAME", value_parser = super::parse_agent)]
    pub agent: Option<crate::model::ProviderKind>,
    /// Only sessions on this git branch (as the agent records it: Claude Code, Codex).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// Also the sessions idle for more than 7 days (the table sums them up in one
    /// line); for `status`, every row too, not only those that fit.
    #[arg(long)]
    pub all: bool,
    /// Colour the state column: auto (on a terminal, unless NO_COLOR is set), always
    /// or never.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}
