//! Where things are by default: the agents' transcript roots, and baton's own config,
//! state and socket paths, from the environment (absolute values only).

use crate::model::ProviderKind;
use crate::watch::Root;
use std::env;
use std::path::PathBuf;

/// A directory from the environment: set, not empty, and absolute. A relative value
/// counts as unset (as the XDG Base Directory spec says of its variables), so that
/// nothing is ever made or read relative to whatever the working directory is.
pub(super) fn env_dir(var: &str) -> Option<PathBuf> {
    env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

pub(super) fn home() -> Option<PathBuf> {
    env_dir("HOME")
}

/// The default roots: `$CLAUDE_CONFIG_DIR/projects` or `~/.claude/projects`,
/// `$CODEX_HOME/sessions` or `~/.codex/sessions`, `~/.cursor/projects` (only its
/// `agent-transcripts` folders are read), `$COPILOT_HOME/session-state` or
/// `~/.copilot/session-state`, and `$PI_CODING_AGENT_SESSION_DIR`,
/// `$PI_CODING_AGENT_DIR/sessions` or `~/.pi/agent/sessions`, and Oh My Pi's
/// `~/.omp/agent/sessions`. A root that does not exist
/// is looked for again on every sweep.
pub fn default_roots() -> Vec<Root> {
    let mut roots = Vec::new();
    if let Some(dir) = env_dir("CLAUDE_CONFIG_DIR").or_else(|| home().map(|h| h.join(".claude"))) {
        roots.push(Root {
            path: dir.join("projects"),
            provider: Some(ProviderKind::Claude),
        });
    }
    if let Some(dir) = env_dir("CODEX_HOME").or_else(|| home().map(|h| h.join(".codex"))) {
        roots.push(Root {
            path: dir.join("sessions"),
            provider: Some(ProviderKind::Codex),
        });
    }
    if let Some(h) = home() {
        roots.push(Root {
            path: h.join(".cursor").join("projects"),
            provider: Some(ProviderKind::Cursor),
        });
    }
    if let Some(dir) = env_dir("COPILOT_HOME").or_else(|| home().map(|h| h.join(".copilot"))) {
        roots.push(Root {
            path: dir.join("session-state"),
            provider: Some(ProviderKind::Copilot),
        });
    }
    let pi = env_dir("PI_CODING_AGENT_SESSION_DIR")
        .or_else(|| env_dir("PI_CODING_AGENT_DIR").map(|d| d.join("sessions")))
        .or_else(|| home().map(|h| h.join(".pi").join("agent").join("sessions")));
    if let Some(path) = pi {
        roots.push(Root {
            path,
            provider: Some(ProviderKind::Pi),
        });
    }
    // Oh My Pi, the Pi fork (read as Pi): its own folder, `omp`'s default.
    if let Some(h) = home() {
        roots.push(Root {
            path: h.join(".omp").join("agent").join("sessions"),
            provider: Some(ProviderKind::Pi),
        });
    }
    roots
}

/// `$XDG_CONFIG_HOME/baton/config.toml` or `~/.config/baton/config.toml`.
pub fn default_config_path() -> Option<PathBuf> {
    env_dir("XDG_CONFIG_HOME")
        .or_else(|| home().map(|h| h.join(".config")))
        .map(|d| d.join("baton").join("config.toml"))
}

/// `$XDG_STATE_HOME/baton` or `~/.local/state/baton`: the one default state
/// directory (the daemon's, and the socket's when there is no runtime directory).
pub fn default_state_dir() -> Option<PathBuf> {
    env_dir("XDG_STATE_HOME")
        .or_else(|| home().map(|h| h.join(".local").join("state")))
        .map(|d| d.join("baton"))
}

/// `$XDG_RUNTIME_DIR/baton/baton.sock`, falling back to the state directory.
pub fn socket_path() -> Option<PathBuf> {
    env_dir("XDG_RUNTIME_DIR")
        .map(|d| d.join("baton"))
        .or_else(default_state_dir)
        .map(|d| d.join("baton.sock"))
}
