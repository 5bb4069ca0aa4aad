//! systemd readiness, watchdog and status (`Type=notify`). Every call is a no-op when
//! `NOTIFY_SOCKET` is unset, i.e. outside systemd.

use crate::model::SessionState;
use crate::socket::Views;
use sd_notify::NotifyState;
use std::time::Duration;
use tokio::sync::{oneshot, watch};

fn notify(states: &[NotifyState]) {
    // `false`: keep the variables, so a restart-in-place still finds them; exec hooks
    // inheriting them cannot pose as us (systemd's default NotifyAccess=main).
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!(error = %e, "sd_notify failed.");
    }
}

/// "3 working, 1 waiting for you, 2 failed" (states with no sessions left out).
pub fn status_line(views: &Views) -> String {
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
            let n = views
                .iter()
                .filter(|v| v.state == *state && v.key.agent.is_none())
                .count();
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
/// sessions' state, and WATCHDOG=1 every half `WATCHDOG_USEC` if the watchdog is on
/// (during the history read too, which can be long).
pub async fn run(ready: oneshot::Receiver<()>, mut views: watch::Receiver<Views>) {
    let mut usec = 0;
    let watchdog = sd_notify::watchdog_enabled(false, &mut usec)
        .then(|| Duration::from_micros(usec / 2).max(Duration::from_millis(500)));
    let mut tick = tokio::time::interval(watchdog.unwrap_or(Duration::from_secs(3600)));
    let mut ready = Some(ready);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if watchdog.is_some() {
                    notify(&[NotifyState::Watchdog]);
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
                let status = status_line(&views.borrow_and_update());
                notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
            }
            changed = views.changed(), if ready.is_none() => {
                if changed.is_err() {
                    return;
                }
                let status = status_line(&views.borrow_and_update());
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
    use crate::model::{ProviderKind, SessionKey};
    use crate::reduce::SessionView;
    use std::sync::Arc;

    fn view(state: SessionState, agent: Option<&str>) -> SessionView {
        SessionView {
            key: SessionKey {
                provider: ProviderKind::Claude,
                session: "s".to_owned(),
                agent: agent.map(str::to_owned),
            },
            path: "/p".into(),
            state,
            turn: None,
            line: 1,
            record_ts: None,
            message: None,
            evidence: None,
        }
    }

    #[test]
    fn status_counts_main_sessions_by_state() {
        assert_eq!(status_line(&Views::default()), "no sessions");
        let v = Arc::new(vec![
            view(SessionState::Working, None),
            view(SessionState::Working, None),
            view(SessionState::Working, Some("sub")),
            view(SessionState::Completed, None),
            view(SessionState::Failed, None),
        ]);
        assert_eq!(status_line(&v), "2 working, 1 waiting for you, 1 failed");
    }
}
