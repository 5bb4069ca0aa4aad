//! Library errors, with the context a person needs to act on them.
//!
//! Every error is of one [`Class`], and its exit code follows from it: a bad request
//! (1-3: the command line, the configuration, a path the person named), a failure to
//! start (5, 6, 9: something the daemon needs at start is held, unusable or refused by
//! the system), or a failure at run time (3, 4: the daemon went away, the stream cannot
//! be written). README, "Exit codes", lists them.

use std::path::PathBuf;

/// What kind of failure an error is, for the person reading it and for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The request was wrong: a flag, a configuration value, a path, a target. Fixing the
    /// command fixes it.
    Request,
    /// `baton run` could not start: the state directory or socket is held or unusable,
    /// or the system refused a thread, the runtime or a watcher. Nothing was read yet.
    Start,
    /// It started, then failed: the stream cannot be written, the daemon is gone or
    /// refused the client.
    Runtime,
}

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
    /// `baton run` could not start a part it needs: the async runtime, a thread, the
    /// shutdown signal, the socket, the native watcher when it was asked for. The message
    /// names the part and the system's reason.
    #[error("cannot start: {0}")]
    Start(String),
}

impl Error {
    /// Which kind of failure this is (the module's comment says what each means).
    pub fn class(&self) -> Class {
        match self {
            Error::ProblemsFound | Error::Usage(_) | Error::Missing(_) | Error::Read { .. } => {
                Class::Request
            }
            Error::StateLocked(_) | Error::State(_) | Error::Start(_) => Class::Start,
            Error::Output(_) | Error::NotRunning { .. } | Error::Refused(_) => Class::Runtime,
        }
    }

    /// The process exit code for this error (see README, "Exit codes"): a request's are
    /// 1-3, a start's 5, 6 and 9, a run's 3 and 4.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::ProblemsFound => 1,
            Error::Usage(_) => 2,
            Error::Missing(_) | Error::Read { .. } | Error::NotRunning { .. } => 3,
            Error::Output(_) | Error::Refused(_) => 4,
            Error::StateLocked(_) => 5,
            Error::State(_) => 6,
            Error::Start(_) => 9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each() -> Vec<Error> {
        let io = || std::io::Error::other("x");
        vec![
            Error::ProblemsFound,
            Error::Usage("u".into()),
            Error::Missing("/m".into()),
            Error::Read {
                path: "/r".into(),
                source: io(),
            },
            Error::StateLocked("/s".into()),
            Error::State("s".into()),
            Error::Start("the core thread: x".into()),
            Error::Output(io()),
            Error::NotRunning {
                socket: "/sock".into(),
                source: io(),
            },
            Error::Refused("r".into()),
        ]
    }

    #[test]
    fn exit_codes_follow_the_class() {
        for e in one_of_each() {
            let code = e.exit_code();
            let allowed: &[u8] = match e.class() {
                Class::Request => &[1, 2, 3],
                Class::Start => &[5, 6, 9],
                Class::Runtime => &[3, 4],
            };
            assert!(
                allowed.contains(&code),
                "{e:?}: code {code} in {:?}",
                e.class()
            );
        }
    }

    #[test]
    fn a_part_that_cannot_start_is_not_a_usage_error() {
        let e = Error::Start("the core thread: Resource temporarily unavailable".into());
        assert_eq!((e.class(), e.exit_code()), (Class::Start, 9));
        assert_eq!(
            e.to_string(),
            "cannot start: the core thread: Resource temporarily unavailable"
        );
    }
}
