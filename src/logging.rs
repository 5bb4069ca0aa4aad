//! Logging setup: journald under systemd, stderr otherwise; `BATON_LOG` sets the filter.

use std::io::{self, IsTerminal};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// True when stderr is the journal stream systemd connected us to (`JOURNAL_STREAM` is
/// `DEVICE:INODE` of it). Compared, not just tested for presence: a shell started from a
/// service inherits the variable with its stderr pointing elsewhere.
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(want) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    want.to_string_lossy() == format!("{}:{}", meta.dev(), meta.ino())
}

/// Installs the global subscriber. `default` is the filter when `BATON_LOG` is unset
/// (`info` for the daemon, `warn` for one-shot commands).
pub fn init(default: &str) {
    let filter = EnvFilter::try_from_env("BATON_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    if stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(journald) => {
                tracing_subscriber::registry()
                    .with(filter)
                    .with(journald.with_syslog_identifier("baton".to_owned()))
                    .init();
                return;
            }
            Err(e) => eprintln!("baton: cannot log to journald ({e}); logging to stderr"),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .init();
}
