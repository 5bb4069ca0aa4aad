//! Where a session is shown: whether it is in front of the person (then a page is
//! noise: the desktop's, and the exec hook's or a webhook's that ask), and going back to
//! it on a click.
//!
//! - The agent's process is the one the liveness check finds ([`agent::find`]); its
//!   environment (`/proc/PID/environ`, same user only) names its tmux pane, WezTerm pane
//!   or kitty window.
//! - tmux: the pane is in front when it is the active pane of its session's active
//!   window and a client is attached to that session ([`tmux`]).
//! - X11: the terminal window is the managed window whose `_NET_WM_PID` is an ancestor
//!   of the agent or of that tmux client ([`x11`]).
//!
//! Every program is run as argv, never through a shell.

pub mod agent;
pub mod click;
pub mod tmux;
pub mod x11;

pub use agent::Agent;

use crate::model::ProviderKind;
use std::path::Path;

/// The agent of the session at `path`, if it runs on this machine: another machine's
/// session (`remote`) has no process here, and its path names nothing here.
pub fn local_agent(provider: Option<ProviderKind>, path: &Path, remote: bool) -> Option<Agent> {
    if remote || path.as_os_str().is_empty() {
        return None;
    }
    agent::find(provider?, path)
}

/// Whether the session at `path` is in front of the person ([`in_front`] of its
/// [`local_agent`]): the one rule behind every sink's `suppress_when_focused`. It reads
/// `/proc` and runs tmux, so it belongs on a sink's worker thread.
pub fn session_in_front(provider: Option<ProviderKind>, path: &Path, remote: bool) -> bool {
    local_agent(provider, path, remote).is_some_and(|a| in_front(&a))
}

/// Whether `a`'s session is in front of the person: its tmux pane is the active pane
/// of an attached client and, with an X11 display, that client's terminal (or, outside
/// tmux, the agent's own terminal) is the active window. Where the window in front
/// cannot be known (no X11 display: Wayland, a console, ssh), a pane showing in a
/// client is not taken for "in front": another window may have the focus, and a missed
/// page is worse than one too many. The answer is then no (said once in the log).
pub fn in_front(a: &Agent) -> bool {
    let pane = tmux::Pane::from_env(a.tmux.as_deref(), a.tmux_pane.as_deref());
    let display = x11::Display::connect();
    match (pane, display) {
        (Some(pane), None) => {
            if !pane.showing().is_empty() {
                unknown_window_once();
            }
            false
        }
        (Some(pane), Some(d)) => {
            let clients = pane.showing();
            !clients.is_empty() && active_shows(&d, &clients)
        }
        (None, Some(d)) => active_shows(&d, &[a.pid]),
        (None, None) => false,
    }
}

/// Says once per run that a visible tmux pane does not hold pages back here.
fn unknown_window_once() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(
            "Cannot tell which window is in front (no X11 display); a tmux pane showing in a client does not count as in front, so its pages are shown."
        );
    }
}

/// Whether the active window shows one of `pids`.
fn active_shows(d: &x11::Display, pids: &[u32]) -> bool {
    d.active_window().is_some_and(|w| d.shows(w, pids))
}
