//! The X11 side: which window is active, which process owns a window, and raising one.
//! Through x11rb's pure-Rust connection (no libxcb, no `unsafe`), on the daemon's
//! `DISPLAY`, with the EWMH properties every mainstream window manager keeps.

use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    AtomEnum, ClientMessageEvent, ConnectionExt as _, EventMask, Window,
};
use x11rb::rust_connection::RustConnection;

/// Windows looked at in `_NET_CLIENT_LIST`.
const MAX_CLIENTS: u32 = 4096;

/// A connection to the display and the atoms used.
pub struct Display {
    conn: RustConnection,
    root: Window,
    active: u32,
    wm_pid: u32,
    clients: u32,
}

impl Display {
    /// Connects to `DISPLAY`; `None` without one (Wayland, a console, ssh).
    pub fn connect() -> Option<Display> {
        std::env::var_os("DISPLAY").filter(|d| !d.is_empty())?;
        let (conn, screen) = RustConnection::connect(None).ok()?;
        let root = conn.setup().roots.get(screen)?.root;
        let atom = |name: &str| -> Option<u32> {
            Some(
                conn.intern_atom(false, name.as_bytes())
                    .ok()?
                    .reply()
                    .ok()?
                    .atom,
            )
        };
        let (active, wm_pid, clients) = (
            atom("_NET_ACTIVE_WINDOW")?,
            atom("_NET_WM_PID")?,
            atom("_NET_CLIENT_LIST")?,
        );
        Some(Display {
            conn,
            root,
            active,
            wm_pid,
            clients,
        })
    }

    fn windows(&self, of: Window, prop: u32, max: u32) -> Vec<u32> {
        self.conn
            .get_property(false, of, prop, AtomEnum::WINDOW, 0, max)
            .ok()
            .and_then(|c| c.reply().ok())
            .and_then(|r| r.value32().map(Iterator::collect))
            .unwrap_or_default()
    }

    /// The active window (`_NET_ACTIVE_WINDOW` on the root), if any.
    pub fn active_window(&self) -> Option<Window> {
        self.windows(self.root, self.active, 1)
            .first()
            .copied()
            .filter(|w| *w != 0)
    }

    /// The process that owns `w` (`_NET_WM_PID`).
    pub fn window_pid(&self, w: Window) -> Option<u32> {
        self.conn
            .get_property(false, w, self.wm_pid, AtomEnum::CARDINAL, 0, 1)
            .ok()?
            .reply()
            .ok()?
            .value32()?
            .next()
    }

    /// The managed top-level windows (`_NET_CLIENT_LIST`).
    pub fn client_windows(&self) -> Vec<Window> {
        self.windows(self.root, self.clients, MAX_CLIENTS)
    }

    /// Whether `w`'s process is an ancestor of one of `pids` (the terminal they run in).
    pub fn shows(&self, w: Window, pids: &[u32]) -> bool {
        self.window_pid(w)
            .is_some_and(|wp| pids.iter().any(|p| super::local::is_ancestor(wp, *p)))
    }

    /// The first managed window that [`shows`](Display::shows) one of `pids`.
    pub fn window_showing(&self, pids: &[u32]) -> Option<Window> {
        self.client_windows()
            .into_iter()
            .find(|w| self.shows(*w, pids))
    }

    /// Asks the window manager to activate `w` (a `_NET_ACTIVE_WINDOW` client message,
    /// source "pager", so focus-stealing prevention lets it through).
    pub fn raise(&self, w: Window) -> bool {
        let ev = ClientMessageEvent::new(32, w, self.active, [2u32, 0, 0, 0, 0]);
        let mask = EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY;
        self.conn.send_event(false, self.root, mask, ev).is_ok() && self.conn.flush().is_ok()
    }
}
