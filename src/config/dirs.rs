//! Where things are by default: the agents' transcript roots, and baton's own config,
//! state and socket paths, from the environment (absolute values only).

use crate::watch::Root;
use std::env;
use std::path::{Path, PathBuf};

/// A directory from the environment: set, not empty, and absolute. A relative value
/// counts as unset (as the XDG Base Directory spec says of its variables), so that
/// nothing is ever made or read relative to whatever the working directory is.
pub(crate) fn env_dir(var: &str) -> Option<PathBuf> {
    env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

pub(super) fn home() -> Option<PathBuf> {
    env_dir("HOME")
}

/// The default roots: each agent's ([`crate::provider::Agent::default_roots`]), in
/// registry order. A root that does not exist is looked for again on every sweep.
pub fn default_roots() -> Vec<Root> {
    crate::provider::ALL
        .iter()
        .flat_map(|a| {
            a.default_roots(&env_dir).into_iter().map(|path| Root {
                path,
                provider: Some(a.kind()),
            })
        })
        .collect()
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

/// The socket's file name, in whichever directory holds it.
pub const SOCKET_NAME: &str = "baton.sock";

/// Where the daemon of state directory `state_dir` listens, as `baton run` places it
/// and `status`/`tail` look for it: `socket` when named; the state directory's own
/// `baton.sock` for a state directory other than the default one, so that two daemons
/// with two state directories never share a socket; else [`socket_path`] (the default
/// instance keeps its socket in the runtime directory, where the systemd unit's clients
/// find it).
pub fn socket_for(socket: Option<PathBuf>, state_dir: Option<&Path>) -> Option<PathBuf> {
    if socket.is_some() {
        return socket;
    }
    match state_dir.map(std::path::absolute) {
        Some(Ok(dir)) if Some(&dir) != default_state_dir().as_ref() => Some(dir.join(SOCKET_NAME)),
        _ => socket_path(),
    }
}

/// `$XDG_RUNTIME_DIR/baton/baton.sock`, falling back to the state directory.
pub fn socket_path() -> Option<PathBuf> {
    env_dir("XDG_RUNTIME_DIR")
        .map(|d| d.join("baton"))
        .or_else(default_state_dir)
        .map(|d| d.join(SOCKET_NAME))
}
