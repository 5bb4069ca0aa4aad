//! "Quiet while you are looking" and the click on a real headless sway with real foot
//! windows (issue 33): while another window has the focus, the agent's tmux pane showing
//! in an attached client is not in front (the page goes out); while the foot window
//! that holds the client has the focus, it is; a click focuses that window.
//!
//! sway refuses to run as root, so it runs in a user namespace (`unshare --user`), with
//! the headless wlroots backend and the pixman renderer. `.ci/run` installs sway and
//! foot; without them the test says so and skips. With `BATON_SWAY_SHOT=FILE` (and
//! `grim` installed) it saves a screenshot of the output after the click.

#![allow(clippy::unwrap_used)]

use crate::common::{DEADLINE, Kill};
use baton::focus::wayland::Compositor;
use baton::focus::{LocalAgent, Screen, click, in_front_on};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn have(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// Waits until `ok` holds, or fails the test with `what`.
fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Sway {
    dir: tempfile::TempDir,
    run: PathBuf,
    sock: PathBuf,
    _sway: Kill,
}

/// A program in sway's user namespace (`home`, runtime directory `run`), with sway's
/// session environment.
fn in_namespace(home: &Path, run: &Path, argv: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-user=1000", "--map-group=1000"])
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", run)
        .env("WAYLAND_DISPLAY", "wayland-1")
        .env("WLR_BACKENDS", "headless")
        .env("WLR_LIBINPUT_NO_DEVICES", "1")
        .env("WLR_RENDERER", "pixman")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

impl Sway {
    fn command(&self, argv: &[&str]) -> Command {
        in_namespace(self.dir.path(), &self.run, argv)
    }

    fn start() -> Option<Sway> {
        if !have("sway") || !have("foot") || !have("unshare") {
            eprintln!("NOTICE: sway, foot or unshare is not installed; the sway test is skipped.");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let conf = dir.path().join("sway.conf");
        std::fs::write(
            &conf,
            "output HEADLESS-1 resolution 1280x720\nxwayland disable\ndefault_border pixel 4\n",
        )
        .unwrap();
        let conf = conf.display().to_string();
        let sway = Kill(
            in_namespace(dir.path(), &run, &["sway", "-c", &conf])
                .spawn()
                .unwrap(),
        );
        let found = |run: &Path| {
            std::fs::read_dir(run)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("sway-ipc."))
                })
        };
        wait("sway's IPC socket", || found(&run).is_some());
        wait("sway's Wayland socket", || run.join("wayland-1").exists());
        Some(Sway {
            sock: found(&run).unwrap(),
            dir,
            run,
            _sway: sway,
        })
    }

    fn compositor(&self) -> Compositor {
        Compositor::Sway(self.sock.clone())
    }

    /// A foot window running `argv`, once sway shows it: its process.
    fn foot(&self, argv: &[&str]) -> Kill {
        let mut full = vec!["foot", "--term=xterm-256color", "-e"];
        full.extend_from_slice(argv);
        let child = Kill(self.command(&full).spawn().unwrap());
        let pid = child.0.id();
        let c = self.compositor();
        wait("the foot window", || c.window_pids().contains(&pid));
        child
    }
}

fn tmux(sock: &Path, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tmux {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn on_sway_the_agents_pane_is_in_front_only_while_its_terminal_has_the_focus() {
    let Some(sway) = Sway::start() else { return };
    let c = sway.compositor();
    // The agent: a process in a tmux pane.
    let tsock = sway.dir.path().join("tmux.sock");
    tmux(
        &tsock,
        &[
            "new-session",
            "-d",
            "-s",
            "agent",
            "-x",
            "80",
            "-y",
            "24",
            "sleep 600",
        ],
    );
    let info = tmux(
        &tsock,
        &[
            "display-message",
            "-p",
            "-t",
            "agent",
            "#{pane_pid} #{pane_id} #{pid}",
        ],
    );
    let mut it = info.split_whitespace();
    let (pane_pid, pane_id, server) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let agent = LocalAgent {
        pid: pane_pid.parse().unwrap(),
        tmux: Some(format!("{},{server},0", tsock.display())),
        tmux_pane: Some(pane_id.to_owned()),
        ..LocalAgent::default()
    };
    let tsock_s = tsock.display().to_string();
    // Its terminal: foot with a tmux client attached; then another window, which sway
    // focuses as it opens.
    let holder = sway.foot(&["tmux", "-S", &tsock_s, "attach", "-t", "agent"]);
    wait("the tmux client", || {
        !tmux(&tsock, &["list-clients"]).trim().is_empty()
    });
    let other = sway.foot(&["sleep", "600"]);
    let (holder_pid, other_pid) = (holder.0.id(), other.0.id());
    wait("the other window's focus", || {
        c.focused_pid() == Some(other_pid)
    });
    let screen = Screen::Wayland(sway.compositor());
    // The pane is showing in an attached client, but another window has the focus.
    assert!(
        !in_front_on(&agent, &screen),
        "another window has the focus: page"
    );

    assert!(c.focus(holder_pid));
    wait("the holder's focus", || c.focused_pid() == Some(holder_pid));
    assert!(
        in_front_on(&agent, &screen),
        "its terminal has the focus: quiet"
    );

    // The click, from another window: back to the terminal that holds the pane.
    assert!(c.focus(other_pid));
    wait("the other window's focus again", || {
        c.focused_pid() == Some(other_pid)
    });
    let done = click::go_to_on(Some(&agent), &click::Session::default(), &[], &screen, None);
    assert!(done.tmux && done.raised, "{done:?}");
    wait("the click's focus", || c.focused_pid() == Some(holder_pid));
    assert!(in_front_on(&agent, &screen));

    if let Some(shot) = std::env::var_os("BATON_SWAY_SHOT")
        && have("grim")
    {
        let shot = PathBuf::from(shot);
        let dir = sway.dir.path().join("shot.png");
        let ok = sway
            .command(&["grim", &dir.display().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            std::fs::copy(&dir, &shot).unwrap();
        }
    }
    tmux(&tsock, &["kill-server"]);
}
