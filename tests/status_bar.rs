//! `baton status --format waybar|i3bar|plain` against the real daemon: the line names the
//! most urgent state and who waits; with `--watch` a new line arrives on every change and
//! only then; while the daemon is not running the line says so, and the bar goes on.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{DEADLINE, Daemon, Kill, append};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn user(session: &str, cwd: &Path, content: Value) -> String {
    let line = json!({"type": "user", "uuid": common::uuid(), "sessionId": session,
        "timestamp": common::ts_now(), "cwd": cwd,
        "message": {"role": "user", "content": content}});
    format!("{line}\n")
}

fn ask(session: &str, cwd: &Path, tool: &str) -> String {
    let line = json!({"type": "assistant", "uuid": common::uuid(), "sessionId": session,
        "timestamp": common::ts_now(), "cwd": cwd,
        "message": {"role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": tool, "name": "AskUserQuestion",
                "input": {"questions": [{"question": "Pick one?"}]}}]}});
    format!("{line}\n")
}

fn answer(session: &str, cwd: &Path) -> String {
    let line = json!({"type": "assistant", "uuid": common::uuid(), "sessionId": session,
        "timestamp": common::ts_now(), "cwd": cwd,
        "message": {"role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Done."}]}});
    format!("{line}\n")
}

/// A new Claude session whose project is `cwd`'s last component: (transcript, id).
fn session(d: &Daemon, cwd: &Path) -> (PathBuf, String) {
    let dir = d.claude().join(cwd.display().to_string().replace('/', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let s = common::uuid();
    (dir.join(format!("{s}.jsonl")), s)
}

/// A session of project `my-web-app` waiting for an answer, once the daemon says so.
fn waiting(d: &mut Daemon) -> (PathBuf, String, PathBuf) {
    let cwd = d.dir.path().join("my-web-app");
    let (path, s) = session(d, &cwd);
    append(
        &path,
        (user(&s, &cwd, json!("go")) + &ask(&s, &cwd, "toolu_1")).as_bytes(),
    );
    d.wait_for("needs_input", |e| e["event"] == "needs_input");
    (path, s, cwd)
}

/// `baton status ARGS` once: (exit success, stdout lines).
fn status(d: &Daemon, args: &[&str]) -> (bool, Vec<String>) {
    let out = d.baton().arg("status").args(args).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    (
        out.status.success(),
        text.lines().map(str::to_owned).collect(),
    )
}

/// Asks `status --format waybar` until its line passes `pred` (the daemon's view of a
/// session follows its event by a moment).
fn waybar_until(d: &Daemon, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let (ok, lines) = status(d, &["--format", "waybar"]);
        assert!(ok);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let v: Value = serde_json::from_str(&lines[0]).unwrap();
        if pred(&v) {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "never {what}; last: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `status --watch` bar whose lines arrive on a channel.
struct Watch {
    child: Kill,
    lines: mpsc::Receiver<String>,
    got: Vec<String>,
}

impl Watch {
    fn start(d: &Daemon, format: &str) -> Watch {
        let mut child = d
            .baton()
            .args(["status", "--watch", "--format", format])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = common::stdout_lines(&mut child);
        Watch {
            child: Kill(child),
            lines,
            got: Vec::new(),
        }
    }

    /// The next line (failing at the deadline).
    fn next(&mut self, what: &str) -> String {
        match self.lines.recv_timeout(DEADLINE) {
            Ok(l) => {
                self.got.push(l.clone());
                l
            }
            Err(e) => panic!("no line for {what} ({e}); got so far: {:?}", self.got),
        }
    }

    fn next_json(&mut self, what: &str) -> Value {
        let l = self.next(what);
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    }
}

#[test]
fn the_waybar_line_names_who_waits_and_watch_prints_each_change_once() {
    let mut d = Daemon::tree().start(&[]);
    let (path, s, cwd) = waiting(&mut d);

    let v = waybar_until(&d, "needs_input", |v| v["class"] == "needs_input");
    assert_eq!(v["text"], "1 needs you");
    assert_eq!(v["alt"], "needs_input");
    let tip = v["tooltip"].as_str().unwrap();
    assert!(
        tip.starts_with("Claude Code · my-web-app: needs you since "),
        "{tip}"
    );

    // The same through i3bar (header, the array's opening, one array of blocks) and
    // plain.
    let (ok, lines) = status(&d, &["--format", "i3bar"]);
    assert!(ok);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let head: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(head["version"], 1);
    assert_eq!(lines[1], "[");
    let blocks: Value = serde_json::from_str(&lines[2]).unwrap();
    assert_eq!(blocks[0]["full_text"], "1 needs you");
    assert_eq!(blocks[0]["short_text"], "1 needs you");
    assert_eq!(blocks[0]["name"], "baton");
    assert_eq!(blocks[0]["urgent"], true);
    assert!(blocks[0]["color"].is_string());
    assert_eq!(
        status(&d, &["--format", "plain"]),
        (true, vec!["1 needs you".to_owned()])
    );

    // --watch: the line now, then one per change.
    let mut w = Watch::start(&d, "waybar");
    let first = w.next_json("the first line");
    assert_eq!(first["class"], "needs_input");
    // A line that changes nothing the bar shows (an anomaly event): no new line.
    append(&path, b"{\"type\": \"user\", \"broken\n");
    d.wait_for("the anomaly", |e| e["event"] == "anomaly");
    // The answer: the session works again.
    let result = json!([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"}]);
    append(&path, user(&s, &cwd, result).as_bytes());
    let next = w.next_json("the answer");
    assert_eq!(next["class"], "working", "{next}");
    assert_eq!(next["text"], "1 working");
    assert_eq!(next["tooltip"], "working: my-web-app");
    // The turn ends: the person's turn.
    append(&path, answer(&s, &cwd).as_bytes());
    let done = w.next_json("the completion");
    assert_eq!(done["class"], "completed", "{done}");
    assert_eq!(done["text"], "1 done");
    // Every line printed was a change.
    assert!(w.got.windows(2).all(|p| p[0] != p[1]), "{:?}", w.got);
    assert_eq!(w.got.len(), 3, "{:?}", w.got);
    d.stop();
}

#[test]
fn without_a_daemon_the_bar_says_so_and_watch_waits_for_it() {
    let mut d = Daemon::tree();
    // One-shot: the `down` line, exit 0 (a bar hides a block whose command fails).
    let (ok, lines) = status(&d, &["--format", "waybar"]);
    assert!(ok, "exit 0 with the down line");
    let v: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["class"], "down");
    assert_eq!(v["text"], "baton not running");
    assert_eq!(
        status(&d, &["--format", "plain"]),
        (true, vec!["baton not running".to_owned()])
    );

    let mut w = Watch::start(&d, "i3bar");
    assert_eq!(w.next("the header"), "{\"version\":1}");
    assert_eq!(w.next("the opening"), "[");
    let down: Value = serde_json::from_str(&w.next("the down line")).unwrap();
    assert_eq!(down[0]["full_text"], "baton not running");
    // The daemon comes up: a new line (later arrays take a leading comma).
    d.spawn(&[]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let up = w.next("the daemon up");
    let up: Value = serde_json::from_str(up.strip_prefix(',').unwrap()).unwrap();
    assert_eq!(up[0]["full_text"], "", "nothing waits: an empty block");
    assert_eq!(up[0]["instance"], "idle");
    // A question: the block turns urgent. (The prompt's `turn_started` may reach the bar
    // on its own first: then a `1 working` line comes before it, a change too.)
    waiting(&mut d);
    let ask = loop {
        let l = w.next("the question");
        let v: Value = serde_json::from_str(l.strip_prefix(',').unwrap()).unwrap();
        if v[0]["full_text"] != "1 working" {
            break v;
        }
    };
    assert_eq!(ask[0]["full_text"], "1 needs you");
    assert_eq!(ask[0]["urgent"], true);
    // It stops: the down line again, and the bar keeps running.
    d.terminate();
    let gone: Value =
        serde_json::from_str(w.next("the daemon gone").strip_prefix(',').unwrap()).unwrap();
    assert_eq!(gone[0]["full_text"], "baton not running");
    assert!(
        matches!(w.child.0.try_wait(), Ok(None)),
        "the bar outlives the daemon"
    );
    assert!(w.got.windows(2).all(|p| p[0] != p[1]), "{:?}", w.got);
}
