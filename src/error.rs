//! Library errors, with the context a person needs to act on them.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no such file or directory: {0}")]
    Missing(PathBuf),
    #[error("cannot write the event stream: {0}")]
    Output(#[source] std::io::Error),
    #[error("{0}")]
    Usage(String),
    /// `status` or `tail` found no daemon to talk to.
    #[error(
        "baton is not running (no daemon answers on {socket}: {source}); start it with \
         `baton run` or `systemctl --user start baton`"
    )]
    NotRunning {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The daemon refused this client (`tail` past the follower cap).
    #[error("{0}")]
    Refused(String),
    /// Another `baton run` holds the state directory.
    #[error(
        "another baton is already running on the state directory {0} (stop it, or give this \
         one its own --state-dir)"
    )]
    StateLocked(PathBuf),
    /// The state directory cannot be used (see docs/reliability.md, "State directory, restarts
    /// and replays").
    #[error("{0}")]
    State(String),
    /// `check` found problems (already printed).
    #[error("problems found")]
    ProblemsFound,
}

impl Error {
    /// The process exit code for this error (see README, "Exit codes").
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::ProblemsFound => 1,
            Error::Usage(_) => 2,
            Error::Missing(_) | Error::Read { .. } | Error::NotRunning { .. } => 3,
            Error::Output(_) | Error::Refused(_) => 4,
            Error::StateLocked(_) => 5,
            Error::State(_) => 6,
        }
    }
}
