//! Where a session is shown: whether it is in front of the person (then a page is
//! noise: the desktop's, and the exec hook's or a webhook's that ask), and going back to
//! it on a click.
//!
//! - The agent's process is the one the liveness check finds ([`local::find`]); its
//!   environment (`/proc/PID/environ`, same user only) names its tmux pane, WezTerm pane
//!   or kitty window.
//! - tmux: the pane is in front when it is the active pane of its session's active
//!   window and a client is attached to that session ([`tmux`]).
//! - X11: the terminal window is the managed window whose `_NET_WM_PID` is an ancestor
//!   of the agent or of that tmux client ([`x11`]).
//! - Wayland: sway and Hyprland say which window has the focus and whose process it is
//!   ([`wayland`]); other compositors do not, and then nothing is "in front".
//!
//! Every program is run as argv, never through a shell.

pub mod click;
pub mod local;
pub mod tmux;
pub mod wayland;
pub mod x11;

pub use local::LocalAgent;

use crate::model::ProviderKind;
use std::path::Path;

/// The agent of the session at `path`, if it runs on this machine: another machine's
/// session (`remote`) has no process here, and its path names nothing here.
pub fn local_agent(
    provider: Option<ProviderKind>,
    path: &Path,
    remote: bool,
) -> Option<LocalAgent> {
    if remote || path.as_os_str().is_empty() {
        return None;
    }
    local::find(provider?, path)
}

/// Whether the session at `path` is in front of the person ([`in_front`] of its
/// [`local_agent`]): the one rule behind every sink's `suppress_when_focused`. It reads
/// `/proc` and runs tmux, so it belongs on a sink's worker thread.
pub fn session_in_front(provider: Option<ProviderKind>, path: &Path, remote: bool) -> bool {
    local_agent(provider, path, remote).is_some_and(|a| in_front(&a))
}

/// What can tell which window is in front: an X11 display, a Wayland compositor that
/// says (sway, Hyprland), or nothing (GNOME's or KDE's Wayland, a console, ssh).
pub enum Screen {
    Wayland(wayland::Compositor),
    /// Boxed: the connection is large, and a screen is made once a page.
    X11(Box<x11::Display>),
    Unknown,
}

impl Screen {
    /// The daemon's screen. A compositor that says comes first: under Wayland an X11
    /// `DISPLAY` (Xwayland) sees only its own windows, never a native terminal's focus.
    pub fn detect() -> Screen {
        if let Some(c) = wayland::Compositor::connect() {
            return Screen::Wayland(c);
        }
        x11::Display::connect().map_or(Screen::Unknown, |d| Screen::X11(Box::new(d)))
    }

    /// Whether the window in front is the terminal of one of `pids`; `None` where
    /// that cannot be known.
    pub fn front_shows(&self, pids: &[u32]) -> Option<bool> {
        match self {
            Screen::Wayland(c) => Some(c.focused_shows(pids)),
            Screen::X11(d) => Some(d.active_window().is_some_and(|w| d.shows(w, pids))),
            Screen::Unknown => None,
        }
    }
}

/// Whether `a`'s session is in front of the person, on this machine's [`Screen`].
pub fn in_front(a: &LocalAgent) -> bool {
    in_front_on(a, &Screen::detect())
}

/// Whether `a`'s session is in front on `screen`: its tmux pane is the active pane of
/// an attached client and that client's terminal (or, outside tmux, the agent's own
/// terminal) is the window in front. Where the window in front cannot be known, a pane
/// showing in a client is not taken for "in front": another window may have the focus,
/// and a missed page is worse than one too many (said once in the log).
pub fn in_front_on(a: &LocalAgent, screen: &Screen) -> bool {
    let pane = tmux::Pane::from_env(a.tmux.as_deref(), a.tmux_pane.as_deref());
    let shown_by = match &pane {
        Some(pane) => pane.showing(),
        None => vec![a.pid],
    };
    if shown_by.is_empty() {
        return false;
    }
    match screen.front_shows(&shown_by) {
        Some(front) => front,
        None => {
            if pane.is_some() {
                unknown_window_once();
            }
            false
        }
    }
}

/// Says once per run that a visible tmux pane does not hold pages back here.
fn unknown_window_once() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(
            "Cannot tell which window is in front (no X11 display, and no sway or Hyprland socket); a tmux pane showing in a client does not count as in front, so its pages are shown."
        );
    }
}
