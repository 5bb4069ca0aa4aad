//! Wayland compositors that tell a client which window has the focus and take a request
//! to focus one: sway (i3 IPC on `SWAYSOCK`) and Hyprland (its request socket,
//! `$XDG_RUNTIME_DIR/hypr/$HYPRLAND_INSTANCE_SIGNATURE/.socket.sock`). Other compositors
//! (GNOME's, KDE's) give no client that knowledge: there the window in front cannot be
//! known, and the caller says so.
//!
//! Both are spoken to directly over their Unix sockets (no `swaymsg` or `hyprctl` needed),
//! each request bounded in time and size. A window is named by its process, as on X11:
//! the terminal is the window whose process is an ancestor of the agent (or of the tmux
//! client that shows it).

use serde::Deserialize;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest a compositor may take to answer one request.
const TIMEOUT: Duration = Duration::from_secs(2);
/// Largest answer read (sway's whole tree; a few KiB a window).
const MAX_REPLY: usize = 16 << 20;

/// i3 IPC message types (sway speaks i3's protocol).
const RUN_COMMAND: u32 = 0;
const GET_TREE: u32 = 4;
const MAGIC: &[u8; 6] = b"i3-ipc";

/// A compositor this can ask, by the socket it listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compositor {
    Sway(PathBuf),
    Hyprland(PathBuf),
}

/// One node of sway's tree: only what finds windows and the focus.
#[derive(Deserialize)]
struct Node {
    #[serde(default)]
    focused: bool,
    pid: Option<u32>,
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    floating_nodes: Vec<Node>,
}

impl Node {
    /// Every window's process, and the focused one's, depth first.
    fn walk(&self, windows: &mut Vec<u32>, focused: &mut Option<u32>) {
        if let Some(pid) = self.pid.filter(|p| *p > 0) {
            windows.push(pid);
            if self.focused {
                *focused = Some(pid);
            }
        }
        for n in self.nodes.iter().chain(&self.floating_nodes) {
            n.walk(windows, focused);
        }
    }
}

/// Hyprland's window, as `j/activewindow` and `j/clients` give it.
#[derive(Deserialize)]
struct HyprWindow {
    pid: Option<i64>,
}

impl Compositor {
    /// The compositor of this session, from the daemon's environment.
    pub fn connect() -> Option<Compositor> {
        Self::from_env(&|k| std::env::var_os(k))
    }

    /// The compositor `env` names: sway by `SWAYSOCK`, Hyprland by
    /// `HYPRLAND_INSTANCE_SIGNATURE` (its socket under `XDG_RUNTIME_DIR`, or `/tmp/hypr`
    /// before 0.40). Only a socket that exists counts.
    pub fn from_env(env: &dyn Fn(&str) -> Option<OsString>) -> Option<Compositor> {
        let set = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(sock) = set("SWAYSOCK").map(PathBuf::from)
            && is_socket(&sock)
        {
            return Some(Compositor::Sway(sock));
        }
        let sig = set("HYPRLAND_INSTANCE_SIGNATURE")?;
        // The signature names a folder: never let it climb out of it.
        if Path::new(&sig).components().count() != 1 {
            return None;
        }
        let bases = [
            set("XDG_RUNTIME_DIR").map(|d| PathBuf::from(d).join("hypr")),
            Some(PathBuf::from("/tmp/hypr")),
        ];
        bases
            .into_iter()
            .flatten()
            .map(|b| b.join(&sig).join(".socket.sock"))
            .find(|p| is_socket(p))
            .map(Compositor::Hyprland)
    }

    /// Its name, for the log and `status`.
    pub fn name(&self) -> &'static str {
        match self {
            Compositor::Sway(_) => "sway",
            Compositor::Hyprland(_) => "Hyprland",
        }
    }

    /// The process of the focused window, if the compositor says.
    pub fn focused_pid(&self) -> Option<u32> {
        match self {
            Compositor::Sway(sock) => sway_windows(sock)?.1,
            Compositor::Hyprland(sock) => {
                let reply = hypr(sock, "j/activewindow")?;
                let w: HyprWindow = serde_json::from_slice(&reply).ok()?;
                pid_of(w.pid)
            }
        }
    }

    /// Every window's process.
    pub fn window_pids(&self) -> Vec<u32> {
        match self {
            Compositor::Sway(sock) => sway_windows(sock).map(|w| w.0).unwrap_or_default(),
            Compositor::Hyprland(sock) => hypr(sock, "j/clients")
                .and_then(|r| serde_json::from_slice::<Vec<HyprWindow>>(&r).ok())
                .map(|ws| ws.into_iter().filter_map(|w| pid_of(w.pid)).collect())
                .unwrap_or_default(),
        }
    }

    /// Whether the focused window is the terminal of one of `pids` (its process an
    /// ancestor of one of them).
    pub fn focused_shows(&self, pids: &[u32]) -> bool {
        self.focused_pid()
            .is_some_and(|w| pids.iter().any(|p| super::local::is_ancestor(w, *p)))
    }

    /// The process of the first window that shows one of `pids`.
    pub fn window_showing(&self, pids: &[u32]) -> Option<u32> {
        self.window_pids()
            .into_iter()
            .find(|w| pids.iter().any(|p| super::local::is_ancestor(*w, *p)))
    }

    /// Asks the compositor to focus the window of process `pid`; true if it says done.
    pub fn focus(&self, pid: u32) -> bool {
        match self {
            Compositor::Sway(sock) => {
                let cmd = format!("[pid={pid}] focus");
                i3_request(sock, RUN_COMMAND, cmd.as_bytes())
                    .and_then(|r| serde_json::from_slice::<Vec<Success>>(&r).ok())
                    .is_some_and(|v| !v.is_empty() && v.iter().all(|s| s.success))
            }
            Compositor::Hyprland(sock) => {
                hypr(sock, &format!("dispatch focuswindow pid:{pid}")).as_deref() == Some(b"ok")
            }
        }
    }
}

#[derive(Deserialize)]
struct Success {
    #[serde(default)]
    success: bool,
}

fn pid_of(p: Option<i64>) -> Option<u32> {
    p.and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0)
}

fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

fn connect(sock: &Path) -> Option<UnixStream> {
    let s = UnixStream::connect(sock)
        .map_err(
            |e| tracing::debug!(socket = %sock.display(), error = %e, "Compositor unreachable."),
        )
        .ok()?;
    s.set_read_timeout(Some(TIMEOUT)).ok()?;
    s.set_write_timeout(Some(TIMEOUT)).ok()?;
    Some(s)
}

/// Every window's process in sway's tree, and the focused one's.
fn sway_windows(sock: &Path) -> Option<(Vec<u32>, Option<u32>)> {
    let reply = i3_request(sock, GET_TREE, b"")?;
    let root: Node = serde_json::from_slice(&reply).ok()?;
    let (mut windows, mut focused) = (Vec::new(), None);
    root.walk(&mut windows, &mut focused);
    Some((windows, focused))
}

/// One i3 IPC request and its reply's payload.
fn i3_request(sock: &Path, kind: u32, payload: &[u8]) -> Option<Vec<u8>> {
    let mut s = connect(sock)?;
    let mut msg = Vec::with_capacity(14 + payload.len());
    msg.extend_from_slice(MAGIC);
    msg.extend_from_slice(&u32::try_from(payload.len()).ok()?.to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(payload);
    s.write_all(&msg).ok()?;
    let mut head = [0u8; 14];
    s.read_exact(&mut head).ok()?;
    if &head[..6] != MAGIC {
        return None;
    }
    let len = u32::from_ne_bytes(head[6..10].try_into().ok()?) as usize;
    if len > MAX_REPLY {
        return None;
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// One Hyprland request (it answers, then closes).
fn hypr(sock: &Path, request: &str) -> Option<Vec<u8>> {
    let mut s = connect(sock)?;
    s.write_all(request.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.take(MAX_REPLY as u64).read_to_end(&mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn sways_tree_gives_every_window_and_the_focused_one() {
        let tree = br#"{"id":1,"type":"root","focused":false,"nodes":[{"type":"output","nodes":[
            {"type":"workspace","nodes":[{"type":"con","pid":11,"focused":false,"nodes":[]},
            {"type":"con","pid":12,"focused":true}],"floating_nodes":[{"type":"floating_con","pid":13}]}]}]}"#;
        let root: Node = serde_json::from_slice(tree).unwrap();
        let (mut w, mut f) = (Vec::new(), None);
        root.walk(&mut w, &mut f);
        assert_eq!(w, [11, 12, 13]);
        assert_eq!(f, Some(12));
    }

    #[test]
    fn the_environment_names_the_compositor_by_a_socket_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        let sway = dir.path().join("sway-ipc.sock");
        let _l = UnixListener::bind(&sway).unwrap();
        let hypr = dir.path().join("hypr/abc");
        std::fs::create_dir_all(&hypr).unwrap();
        let _h = UnixListener::bind(hypr.join(".socket.sock")).unwrap();
        let env = |vars: Vec<(&'static str, OsString)>| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        };
        let rt = dir.path().as_os_str().to_owned();
        let got = Compositor::from_env(&env(vec![("SWAYSOCK", sway.clone().into())]));
        assert_eq!(got, Some(Compositor::Sway(sway.clone())));
        let got = Compositor::from_env(&env(vec![
            ("HYPRLAND_INSTANCE_SIGNATURE", "abc".into()),
            ("XDG_RUNTIME_DIR", rt.clone()),
        ]));
        assert_eq!(got, Some(Compositor::Hyprland(hypr.join(".socket.sock"))));
        // A signature that climbs out of the folder names nothing.
        let got = Compositor::from_env(&env(vec![
            ("HYPRLAND_INSTANCE_SIGNATURE", "../hypr/abc".into()),
            ("XDG_RUNTIME_DIR", rt),
        ]));
        assert_eq!(got, None);
        // A stale variable (no socket there) names nothing.
        let gone = dir.path().join("nothing.sock");
        assert_eq!(
            Compositor::from_env(&env(vec![("SWAYSOCK", gone.into())])),
            None
        );
    }

    /// A stand-in Hyprland: answers each request from `answers` (one connection each)
    /// and records what was asked.
    fn fake_hyprland(
        sock: PathBuf,
        answers: Vec<(&'static str, String)>,
    ) -> std::thread::JoinHandle<Vec<String>> {
        let l = UnixListener::bind(sock).unwrap();
        std::thread::spawn(move || {
            let mut asked = Vec::new();
            for _ in 0..answers.len() {
                let (mut c, _) = l.accept().unwrap();
                let mut buf = [0u8; 256];
                let n = c.read(&mut buf).unwrap();
                let q = String::from_utf8_lossy(&buf[..n]).into_owned();
                let a = answers
                    .iter()
                    .find(|(k, _)| q.starts_with(k))
                    .map_or("unknown request", |(_, v)| v.as_str());
                c.write_all(a.as_bytes()).unwrap();
                asked.push(q);
            }
            asked
        })
    }

    #[test]
    fn hyprland_is_asked_for_the_active_window_and_to_focus_one() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join(".socket.sock");
        let me = std::process::id();
        // A pid above the kernel's largest is nobody's ancestor.
        let active = format!(r#"{{"address":"0x1","pid":{me},"class":"foot"}}"#);
        let clients = format!(r#"[{{"pid":4194305}},{{"pid":{me}}}]"#);
        let t = fake_hyprland(
            sock.clone(),
            vec![
                ("j/activewindow", active),
                ("j/clients", clients),
                ("dispatch focuswindow", "ok".to_owned()),
            ],
        );
        let h = Compositor::Hyprland(sock);
        // This process's window "has the focus": it shows this process.
        assert!(h.focused_shows(&[me]));
        assert_eq!(h.window_showing(&[me]), Some(me));
        assert!(h.focus(me));
        let asked = t.join().unwrap();
        assert_eq!(
            asked,
            [
                "j/activewindow".to_owned(),
                "j/clients".to_owned(),
                format!("dispatch focuswindow pid:{me}")
            ]
        );
    }
}
