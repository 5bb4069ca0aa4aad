//! Resolved settings. The environment is read here and nowhere downstream.

use crate::model::ProviderKind;
use crate::watch::Root;
use std::env;
use std::path::PathBuf;

fn home() -> Option<PathBuf> {
    env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn env_dir(var: &str) -> Option<PathBuf> {
    env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The default roots: `$CLAUDE_CONFIG_DIR/projects` or `~/.claude/projects`, and
/// `$CODEX_HOME/sessions` or `~/.codex/sessions`.
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
    roots
}
