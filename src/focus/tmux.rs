//! The agent's tmux pane, through the `tmux` binary on the server the agent's `TMUX`
//! names (`-S SOCKET`, argv only, never a shell).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a tmux command may take; a hung server must not hang a click.
const TMUX_TIMEOUT: Duration = Duration::from_secs(3);

/// A pane on a tmux server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub socket: PathBuf,
    /// `%N`.
    pub id: String,
}

impl Pane {
    /// From the agent's `TMUX` (`SOCKET,PID,SESSION`) and `TMUX_PANE` (`%N`).
    pub fn from_env(tmux: Option<&str>, pane: Option<&str>) -> Option<Pane> {
        let socket = tmux?.split(',').next().filter(|s| s.starts_with('/'))?;
        let id = pane?;
        let digits = id.strip_prefix('%')?;
        if !super::local::is_number(digits) {
            return None;
        }
        Some(Pane {
            socket: PathBuf::from(socket),
            id: id.to_owned(),
        })
    }

    fn run(&self, args: &[&str]) -> Option<String> {
        let mut child = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + TMUX_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    let mut out = String::new();
                    if let Some(mut so) = child.stdout.take() {
                        use std::io::Read;
                        let _ = so.read_to_string(&mut out);
                    }
                    return status.success().then_some(out);
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        }
    }

    /// The pane's session name and whether it is the active pane of its session's
    /// active window.
    fn state(&self) -> Option<(String, bool)> {
        let out = self.run(&[
            "display-message",
            "-p",
            "-t",
            &self.id,
            "#{pane_active}#{window_active} #{session_name}",
        ])?;
        let line = out.lines().next()?;
        let (flags, session) = line.split_once(' ')?;
        Some((session.to_owned(), flags == "11"))
    }

    /// The clients attached to the server: (pid, name, session).
    fn clients(&self) -> Vec<(u32, String, String)> {
        let Some(out) = self.run(&[
            "list-clients",
            "-F",
            "#{client_pid} #{client_name} #{client_session}",
        ]) else {
            return Vec::new();
        };
        out.lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ' ');
                let pid = it.next()?.parse().ok()?;
                Some((pid, it.next()?.to_owned(), it.next()?.to_owned()))
            })
            .collect()
    }

    /// The pids of the clients that show this pane as their active one; empty when it
    /// is not in front of any client.
    pub fn showing(&self) -> Vec<u32> {
        let Some((session, active)) = self.state() else {
            return Vec::new();
        };
        if !active {
            return Vec::new();
        }
        self.clients()
            .into_iter()
            .filter(|(_, _, s)| *s == session)
            .map(|(pid, _, _)| pid)
            .collect()
    }

    /// Makes the pane its window's active pane, the window its session's, and, when no
    /// client shows the session, switches the first client to it. Returns the pids of
    /// the clients that now show it.
    pub fn select(&self) -> Vec<u32> {
        let _ = self.run(&["select-window", "-t", &self.id]);
        let _ = self.run(&["select-pane", "-t", &self.id]);
        let Some((session, _)) = self.state() else {
            return Vec::new();
        };
        let clients = self.clients();
        if !clients.iter().any(|(_, _, s)| *s == session)
            && let Some((_, name, _)) = clients.first()
        {
            let _ = self.run(&["switch-client", "-c", name, "-t", &self.id]);
        }
        self.showing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pane_from_the_environment() {
        let p = Pane::from_env(Some("/tmp/tmux-1000/default,123,0"), Some("%7")).expect("pane");
        assert_eq!(p.socket, PathBuf::from("/tmp/tmux-1000/default"));
        assert_eq!(p.id, "%7");
        assert_eq!(Pane::from_env(Some("rel,1,0"), Some("%7")), None);
        assert_eq!(Pane::from_env(Some("/s,1,0"), Some("%7; kill")), None);
        assert_eq!(Pane::from_env(Some("/s,1,0"), None), None);
        assert_eq!(Pane::from_env(None, Some("%1")), None);
    }
}
