//! Logging setup: journald under systemd, stderr otherwise; `BATON_LOG` sets the filter.
//! Also [`RateLimit`], which keeps a recurring problem from flooding the log.

use std::collections::HashMap;
use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};
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

/// At most one log line per problem per period: a problem that recurs (a directory that
/// stays unreadable, a file truncated again and again) logs once, then once a period
/// with how many times it recurred in between. Keys are the caller's names for
/// problems; time is passed in, so the rule is testable without sleeping.
#[derive(Debug)]
pub struct RateLimit {
    every: Duration,
    /// Per problem: when it was last logged, and how often it recurred since.
    seen: HashMap<String, (Instant, u64)>,
}

/// Most problems remembered at once; past it, the ones logged longest ago are forgotten.
const RATE_LIMIT_KEYS: usize = 4096;

impl RateLimit {
    pub fn new(every: Duration) -> Self {
        RateLimit {
            every,
            seen: HashMap::new(),
        }
    }

    /// Should `problem`, happening at `now`, be logged? `Some(n)`: yes, and it recurred
    /// `n` times unlogged since the last line. `None`: not now (it is counted).
    pub fn check_at(&mut self, problem: &str, now: Instant) -> Option<u64> {
        if let Some((at, missed)) = self.seen.get_mut(problem) {
            if now.saturating_duration_since(*at) < self.every {
                *missed += 1;
                return None;
            }
            let n = std::mem::take(missed);
            *at = now;
            return Some(n);
        }
        if self.seen.len() >= RATE_LIMIT_KEYS {
            let every = self.every;
            self.seen
                .retain(|_, (at, _)| now.saturating_duration_since(*at) < every);
            if self.seen.len() >= RATE_LIMIT_KEYS {
                self.seen.clear();
            }
        }
        self.seen.insert(problem.to_owned(), (now, 0));
        Some(0)
    }

    /// [`RateLimit::check_at`] now.
    pub fn check(&mut self, problem: &str) -> Option<u64> {
        self.check_at(problem, Instant::now())
    }

    /// The problem is over: the next occurrence logs at once.
    pub fn clear(&mut self, problem: &str) {
        self.seen.remove(problem);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recurring_problem_logs_once_a_period_with_the_count() {
        let t0 = Instant::now();
        let mut rl = RateLimit::new(Duration::from_secs(60));
        assert_eq!(rl.check_at("list:/a", t0), Some(0));
        // Every 2 s for a minute: silent, counted.
        for i in 1..30 {
            assert_eq!(
                rl.check_at("list:/a", t0 + Duration::from_secs(2 * i)),
                None
            );
        }
        assert_eq!(
            rl.check_at("list:/a", t0 + Duration::from_secs(60)),
            Some(29)
        );
        assert_eq!(rl.check_at("list:/a", t0 + Duration::from_secs(61)), None);
        assert_eq!(
            rl.check_at("list:/a", t0 + Duration::from_secs(121)),
            Some(1)
        );
    }

    #[test]
    fn problems_are_limited_separately_and_clear_resets() {
        let t0 = Instant::now();
        let mut rl = RateLimit::new(Duration::from_secs(60));
        assert_eq!(rl.check_at("a", t0), Some(0));
        assert_eq!(rl.check_at("b", t0), Some(0));
        assert_eq!(rl.check_at("a", t0 + Duration::from_secs(1)), None);
        rl.clear("a");
        assert_eq!(rl.check_at("a", t0 + Duration::from_secs(2)), Some(0));
    }

    #[test]
    fn memory_stays_bounded_with_many_problems() {
        let t0 = Instant::now();
        let mut rl = RateLimit::new(Duration::from_secs(60));
        for i in 0..3 * RATE_LIMIT_KEYS {
            assert_eq!(rl.check_at(&format!("p{i}"), t0), Some(0));
            assert!(rl.seen.len() <= RATE_LIMIT_KEYS);
        }
    }
}
