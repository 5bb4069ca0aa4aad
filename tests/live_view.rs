//! `baton status --watch` in a real terminal: tmux runs it against the real daemon, and
//! `capture-pane` reads the screen.

#![allow(clippy::unwrap_used)]

use crate::common::{Claude, DEADLINE, Daemon, append};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long the screen may take to show an event (a correctness bound, not a measure).
const SHOWN_WITHIN: Duration = Duration::from_secs(5);

/// A tmux server of this test's own (its socket in the test's temporary tree, so
/// nothing is left behind), killed when dropped.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn new(dir: &Path) -> Tmux {
        Tmux {
            socket: dir.join("tmux.sock"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "live"]).stdout)
            .into_owned()
    }

    /// Polls the screen until `pred` holds; fails with the last screen.
    fn wait_screen(&self, what: &str, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if start.elapsed() > within {
                panic!("the screen never showed {what}; it shows:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "live"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    /// Whether the session still has a pane (false once the program exited and tmux
    /// closed it, which ends this server).
    fn has_pane(&self) -> bool {
        let o = self.run(&["list-panes", "-t", "live"]);
        o.status.success() && !o.stdout.is_empty()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn socket(d: &Daemon) -> PathBuf {
    d.runtime_dir().join("baton").join("baton.sock")
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Starts `baton status --watch` in a 120×30 tmux window; its exit code goes to `rc`.
fn start_watch(t: &Tmux, d: &Daemon, rc: &Path) {
    let cmd = format!(
        "{} status --watch --socket {}; echo $? > {}",
        shell_quote(Path::new(env!("CARGO_BIN_EXE_baton"))),
        shell_quote(&socket(d)),
        shell_quote(rc)
    );
    let o = t.run(&[
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "30",
        "-s",
        "live",
        &cmd,
    ]);
    assert!(
        o.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The screen line that holds `text`.
fn line_with<'a>(screen: &'a str, text: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(text))
}

#[test]
fn the_live_view_follows_a_turn_filters_and_quits_cleanly() {
    if !Tmux::available() {
        eprintln!("SKIPPED: tmux is not installed (.ci/run installs it)");
        return;
    }
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (prompt, turn) = c.prompt("fix the login page");
    append(&path, prompt.as_bytes());
    d.wait_for("turn_started", |e| {
        e["event"] == "turn_started" && e["turn"] == turn
    });

    let t = Tmux::new(d.dir.path());
    let rc = d.dir.path().join("watch.rc");
    start_watch(&t, &d, &rc);
    let s = t.wait_screen("the working session", DEADLINE, |s| {
        s.contains("· live") && line_with(s, "Claude Code").is_some_and(|l| l.contains("working"))
    });
    assert!(s.lines().any(|l| l.starts_with("STATE")), "{s}");

    append(&path, c.answer("The login page is fixed.").as_bytes());
    let s = t.wait_screen("the completion", SHOWN_WITHIN, |s| {
        line_with(s, "Claude Code").is_some_and(|l| l.contains("completed"))
    });
    let row = line_with(&s, "Claude Code").unwrap();
    assert!(row.contains("The login page is fixed."), "{s}");
    assert!(
        !s.contains("working"),
        "the row moved, it was not added:\n{s}"
    );

    // `/` filter: a text no row has hides the row; Esc quits only outside the prompt.
    t.keys(&["/", "nomatch", "Enter"]);
    let s = t.wait_screen("the filter", SHOWN_WITHIN, |s| {
        s.contains("1 filtered out") && line_with(s, "Claude Code").is_none()
    });
    assert!(s.contains("filter “nomatch”"), "{s}");
    t.keys(&["/"]);
    for _ in 0.."nomatch".len() {
        t.keys(&["BSpace"]);
    }
    t.keys(&["login", "Enter"]);
    t.wait_screen("the row again", SHOWN_WITHIN, |s| {
        line_with(s, "Claude Code").is_some_and(|l| l.contains("completed"))
    });

    t.keys(&["q"]);
    let start = Instant::now();
    while t.has_pane() {
        assert!(start.elapsed() < DEADLINE, "q did not end the live view");
        std::thread::sleep(Duration::from_millis(20));
    }
    let code = std::fs::read_to_string(&rc).unwrap();
    assert_eq!(code.trim(), "0", "status --watch exited with {code}");
    d.stop();
}

#[test]
fn the_live_view_says_when_the_daemon_is_gone_and_comes_back_with_it() {
    if !Tmux::available() {
        eprintln!("SKIPPED: tmux is not installed (.ci/run installs it)");
        return;
    }
    let mut d = Daemon::tree().start(&[]);
    let t = Tmux::new(d.dir.path());
    let rc = d.dir.path().join("watch.rc");
    start_watch(&t, &d, &rc);
    t.wait_screen("the live header", DEADLINE, |s| s.contains("· live"));
    d.terminate();
    t.wait_screen("the outage", DEADLINE, |s| s.contains("reconnecting"));
    d.restart(&[]);
    let c = Claude::new();
    let (bytes, _) = c.turn("hello", "Hi there, all set.");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    t.wait_screen("the new session after the restart", DEADLINE, |s| {
        s.contains("· live")
            && line_with(s, "Claude Code").is_some_and(|l| l.contains("Hi there, all set."))
    });
    t.keys(&["C-c"]);
    let start = Instant::now();
    while t.has_pane() {
        assert!(
            start.elapsed() < DEADLINE,
            "Ctrl-C did not end the live view"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&rc).unwrap().trim(), "0");
    d.stop();
}
