//! systemd readiness, watchdog and status (`Type=notify`). Every call is a no-op when
//! `NOTIFY_SOCKET` is unset, i.e. outside systemd.

use crate::model::SessionState;
use crate::shutdown::Shutdown;
use crate::views::Counts;
use sd_notify::NotifyState;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Without a watchdog nobody asks the core to show it is alive: it sleeps until there is
/// work (or this long).
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(3600);

fn notify(states: &[NotifyState]) {
    // `false`: keep the variables, so a restart-in-place still finds them; exec hooks
    // inheriting them cannot pose as us (systemd's default NotifyAccess=main).
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!(error = %e, "sd_notify failed.");
    }
}

/// How often to send WATCHDOG=1 (half `WATCHDOG_USEC`), if systemd's watchdog is on.
pub fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0;
    sd_notify::watchdog_enabled(false, &mut usec)
        .then(|| Duration::from_micros(usec / 2).max(Duration::from_millis(500)))
}

/// How often the core must show progress: twice per watchdog ping, so one late wake-up
/// never costs a ping; with no watchdog, no idle wake-ups at all (each costs a few
/// hundred µs of cold-cache work on the core thread).
pub fn heartbeat_every(watchdog: Option<Duration>) -> Duration {
    watchdog.map_or(HEARTBEAT_EVERY, |w| HEARTBEAT_EVERY.min(w / 2))
}

/// Whether a watchdog ping is deserved: only if the core's heartbeat moved since the
/// last one, so a hung core thread stops the pings and systemd restarts the daemon.
#[derive(Debug, Default)]
pub struct Watchdog {
    last: Option<u64>,
    /// Pings withheld in a row (logged once per stall).
    withheld: u32,
}

impl Watchdog {
    /// Called at each ping time with the core's heartbeat.
    pub fn due(&mut self, beat: u64) -> bool {
        if self.last == Some(beat) {
            self.withheld += 1;
            return false;
        }
        self.last = Some(beat);
        self.withheld = 0;
        true
    }
}

/// "3 working, 1 waiting for you, 2 failed" (states with no sessions left out).
pub fn status_line(counts: &Counts) -> String {
    let order = [
        (SessionState::Working, "working"),
        (SessionState::Completed, "waiting for you"),
        (SessionState::NeedsInput, "needing an answer"),
        (SessionState::Failed, "failed"),
        (SessionState::Interrupted, "interrupted"),
    ];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|(state, label)| {
            let n = counts.get(*state);
            (n > 0).then(|| format!("{n} {label}"))
        })
        .collect();
    if parts.is_empty() {
        "no sessions".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Sends READY=1 once `daemon_ready` went out, then STATUS= on every change of the
/// session counts, and WATCHDOG=1 every `watchdog` (half `WATCHDOG_USEC`) if the core's
/// `heartbeat` moved since the last ping (during the history read too, which can be
/// long).
pub async fn run(
    ready: oneshot::Receiver<()>,
    mut counts: watch::Receiver<Counts>,
    watchdog: Option<Duration>,
    heartbeat: Arc<AtomicU64>,
    stop: Shutdown,
) {
    let mut tick = tokio::time::interval(watchdog.unwrap_or(Duration::from_secs(3600)));
    let mut dog = Watchdog::default();
    let mut ready = Some(ready);
    loop {
        tokio::select! {
            // STOPPING=1 went out with the stop: nothing more to tell systemd.
            () = stop.stopped() => return,
            _ = tick.tick() => {
                if watchdog.is_some() {
                    if dog.due(heartbeat.load(Ordering::Relaxed)) {
                        notify(&[NotifyState::Watchdog]);
                    } else if dog.withheld == 1 {
                        tracing::warn!("The core thread made no progress since the last watchdog ping; withholding the next one.");
                    }
                }
            }
            r = async {
                match ready.as_mut() {
                    Some(r) => r.await,
                    None => std::future::pending().await,
                }
            }, if ready.is_some() => {
                ready = None;
                if r.is_err() {
                    return;
                }
                let status = status_line(&counts.borrow_and_update());
                notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
            }
            changed = counts.changed(), if ready.is_none() => {
                if changed.is_err() {
                    return;
                }
                let status = status_line(&counts.borrow_and_update());
                notify(&[NotifyState::Status(&status)]);
            }
        }
    }
}

/// STOPPING=1.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::SessionChange;
    use crate::views::Table;

    /// Neither `daemon_ready` nor the counts' sender went away: only the token ends it.
    #[test]
    fn the_notifier_returns_at_the_stop() {
        let (ready_tx, ready) = oneshot::channel();
        let (counts_tx, counts) = watch::channel(Counts::default());
        let beat = Arc::new(AtomicU64::new(0));
        crate::shutdown::assert_ends_at_the_stop(|stop| async move {
            run(ready, counts, None, beat, stop).await;
            drop((ready_tx, counts_tx));
        });
    }

    fn view(session: &str, state: SessionState, agent: Option<&str>) -> SessionChange {
        SessionChange::Updated(crate::views::test_view(session, agent, state))
    }

    #[test]
    fn status_counts_main_sessions_by_state() {
        assert_eq!(status_line(&Counts::default()), "no sessions");
        let mut t = Table::default();
        t.apply(vec![
            view("a", SessionState::Working, None),
            view("b", SessionState::Working, None),
            view("b", SessionState::Working, Some("sub")),
            view("c", SessionState::Completed, None),
            view("d", SessionState::Failed, None),
        ]);
        assert_eq!(
            status_line(&t.counts()),
            "2 working, 1 waiting for you, 1 failed"
        );
    }

    #[test]
    fn watchdog_pings_only_while_the_core_beats() {
        let mut dog = Watchdog::default();
        // The first ping goes out (the core may not have looped yet).
        assert!(dog.due(0));
        assert!(!dog.due(0), "no beat since the last ping: withheld");
        assert!(!dog.due(0));
        assert!(dog.due(1), "the core came back");
        assert!(dog.due(7));
        assert!(!dog.due(7));
    }

    #[test]
    fn the_core_beats_at_least_twice_per_ping() {
        assert_eq!(heartbeat_every(None), HEARTBEAT_EVERY);
        // WatchdogSec=60s: a ping every 30 s, a beat every 15 s.
        assert_eq!(
            heartbeat_every(Some(Duration::from_secs(30))),
            Duration::from_secs(15)
        );
        // A short watchdog: beats follow it.
        assert_eq!(
            heartbeat_every(Some(Duration::from_secs(4))),
            Duration::from_secs(2)
        );
    }
}
