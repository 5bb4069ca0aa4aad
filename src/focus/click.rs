//! What a click on a notification does: back to the agent's tmux pane, its terminal
//! window raised (X11, sway, Hyprland), its WezTerm pane or kitty window focused, and
//! `on_click` run, the last three with the server's activation token in their
//! environment.
//! Each step that does not apply (no tmux, no X11, another terminal, a session on
//! another machine) is skipped; none of them can do harm.

use super::{LocalAgent, Screen, tmux, x11};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Longest an `on_click` command or a terminal's CLI may run before it is killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(10);

/// The session a click is about, for `on_click`'s environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    pub provider: String,
    pub session: String,
    pub project: String,
    pub path: String,
    /// The `[[remote]]` the event came from: its process is on another machine, so no
    /// local one is looked for; `on_click` gets `BATON_REMOTE`.
    pub remote: Option<String>,
}

/// What a click did, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Done {
    pub tmux: bool,
    pub raised: bool,
    pub terminal: bool,
    pub on_click: bool,
}

/// Goes back to `agent` (if it was found) and runs `on_click` (if set). `token` is the
/// notification server's activation token for this click, if it sent one (already
/// checked: [`crate::sink::notifier::valid_token`]).
pub fn go_to(
    agent: Option<&LocalAgent>,
    s: &Session,
    on_click: &[String],
    token: Option<&str>,
) -> Done {
    go_to_on(agent, s, on_click, &Screen::detect(), token)
}

/// The activation token as the programs a click runs take it: `XDG_ACTIVATION_TOKEN`
/// (Wayland's xdg-activation) and `DESKTOP_STARTUP_ID` (X11 startup notification, which
/// X11-minded terminals read). Environment only: the token never enters an argument.
fn token_env(token: Option<&str>) -> Vec<(&'static str, &str)> {
    token
        .map(|t| vec![("XDG_ACTIVATION_TOKEN", t), ("DESKTOP_STARTUP_ID", t)])
        .unwrap_or_default()
}

/// [`go_to`] on a given screen.
pub fn go_to_on(
    agent: Option<&LocalAgent>,
    s: &Session,
    on_click: &[String],
    screen: &Screen,
    token: Option<&str>,
) -> Done {
    let tokens = token_env(token);
    let mut done = Done::default();
    if let Some(a) = agent {
        let mut shown_by = vec![a.pid];
        if let Some(pane) = tmux::Pane::from_env(a.tmux.as_deref(), a.tmux_pane.as_deref()) {
            let clients = pane.select();
            done.tmux = true;
            if !clients.is_empty() {
                shown_by = clients;
            }
        }
        match screen {
            Screen::X11(d) => done.raised = raise_x11(d, &shown_by),
            Screen::Wayland(c) => {
                done.raised = c.window_showing(&shown_by).is_some_and(|w| c.focus(w));
            }
            Screen::Unknown => no_raise_once(),
        }
        if let Some(id) = &a.wezterm_pane {
            done.terminal |= run(
                &["wezterm", "cli", "activate-pane", "--pane-id", id],
                &tokens,
            );
        }
        if let Some(id) = &a.kitty_window {
            let matcher = format!("id:{id}");
            let mut argv = vec!["kitty", "@"];
            if let Some(to) = &a.kitty_listen_on {
                argv.extend(["--to", to.as_str()]);
            }
            argv.extend(["focus-window", "--match", &matcher]);
            done.terminal |= run(&argv, &tokens);
        }
    }
    if !on_click.is_empty() {
        let env = click_env(agent, s);
        let argv: Vec<&str> = on_click.iter().map(String::as_str).collect();
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.extend(&tokens);
        done.on_click = run(&argv, &env);
    }
    done
}

/// Raises the X11 window that shows one of `pids`; true if the window manager took it.
fn raise_x11(d: &x11::Display, pids: &[u32]) -> bool {
    let Some(w) = d.window_showing(pids) else {
        return false;
    };
    let mut raised = d.raise(w);
    // A window manager may drop a request that races its own focus change (the tmux
    // switch just before can cause one): ask again, a few times, until the window is
    // active.
    for _ in 0..5 {
        if !raised || d.active_window() == Some(w) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        if d.active_window() != Some(w) {
            raised = d.raise(w);
        }
    }
    raised
}

/// Why a click cannot raise the terminal on `screen`, or `None` when it can (an X11
/// display, sway or Hyprland) or `on_click` may (it is the person's own way).
pub fn why_no_raise(screen: &Screen, on_click: &[String]) -> Option<&'static str> {
    match screen {
        Screen::Unknown if on_click.is_empty() => Some(
            "no X11 display and no sway or Hyprland socket (GNOME's and KDE's Wayland let no \
             program raise another's window); set desktop.on_click to run your own",
        ),
        _ => None,
    }
}

/// Whether clicks can raise the terminal, as the desktop sink last found (for
/// `status`; see `sink::notifier`).
#[derive(Debug, Default)]
pub struct RaiseCheck {
    why_not: std::sync::Mutex<Option<&'static str>>,
}

impl RaiseCheck {
    pub fn set(&self, why_not: Option<&'static str>) {
        *self.why_not.lock().unwrap_or_else(|p| p.into_inner()) = why_not;
    }

    /// Why a click cannot raise the terminal, if it cannot.
    pub fn why_not(&self) -> Option<&'static str> {
        *self.why_not.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Says once per run that a click cannot raise a window here (GNOME's or KDE's Wayland:
/// no client may focus another's window); the tmux switch still happens.
fn no_raise_once() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(
            "A click cannot raise the terminal here (no X11 display, and no sway or Hyprland socket); it switches the tmux pane only."
        );
    }
}

/// `on_click`'s environment.
pub fn click_env(agent: Option<&LocalAgent>, s: &Session) -> Vec<(&'static str, String)> {
    let pid = agent.map(|a| a.pid.to_string()).unwrap_or_default();
    let pane = agent.and_then(|a| a.tmux_pane.clone()).unwrap_or_default();
    let cwd = agent
        .and_then(|a| a.cwd.as_ref())
        .map(|c| c.display().to_string())
        .unwrap_or_default();
    vec![
        ("BATON_PID", pid),
        ("BATON_TMUX_PANE", pane),
        ("BATON_CWD", cwd),
        ("BATON_PROJECT", s.project.clone()),
        ("BATON_SESSION", s.session.clone()),
        ("BATON_PROVIDER", s.provider.clone()),
        ("BATON_PATH", s.path.clone()),
        ("BATON_REMOTE", s.remote.clone().unwrap_or_default()),
    ]
}

/// Runs `argv` (no shell) with `env` added, up to [`RUN_TIMEOUT`]; true if it exited 0.
fn run(argv: &[&str], env: &[(&str, &str)]) -> bool {
    let Some((prog, args)) = argv.split_first() else {
        return false;
    };
    let child = Command::new(prog)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(program = %prog, error = %e, "Cannot run a click's command.");
            return false;
        }
    };
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                tracing::warn!(program = %prog, "A click's command ran too long; killed.");
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn get<'a>(env: &'a [(&'static str, String)], k: &str) -> &'a str {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.as_str())
            .unwrap()
    }

    #[test]
    fn on_click_is_told_the_remote_and_the_session() {
        let mut s = Session {
            provider: "claude".into(),
            session: "s1".into(),
            project: "api".into(),
            path: "/home/me/.claude/projects/p/s1.jsonl".into(),
            remote: Some("devbox".into()),
        };
        let env = click_env(None, &s);
        assert_eq!(get(&env, "BATON_REMOTE"), "devbox");
        assert_eq!(get(&env, "BATON_PROJECT"), "api");
        assert_eq!(get(&env, "BATON_PID"), "");
        s.remote = None;
        assert_eq!(get(&click_env(None, &s), "BATON_REMOTE"), "");
    }
}
