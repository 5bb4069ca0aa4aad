//! `baton status` and `baton tail` against a running daemon, over its Unix socket.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, DEADLINE, Daemon, append};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn socket(d: &Daemon) -> std::path::PathBuf {
    d.runtime_dir().join("baton").join("baton.sock")
}

/// A `baton tail` child whose stdout lines arrive on a channel.
struct Tail {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Tail {
    fn start(d: &Daemon, args: &[&str]) -> Tail {
        let (child, lines) = common::tail(d, args, Stdio::null());
        Tail { child, lines }
    }

    /// Waits for a line matching `pred`; panics at the deadline with what came.
    fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        let mut seen = Vec::new();
        while start.elapsed() < DEADLINE {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if pred(&l) => return l,
                Ok(l) => seen.push(l),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("tail never printed {what}; got:\n{}", seen.join("\n"));
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json(l: &str) -> Value {
    serde_json::from_str(l).unwrap_or(Value::Null)
}

#[test]
fn status_shows_a_sessions_state_after_a_completion() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let (p, turn) = c.prompt("hi");
    append(
        &c.path_in(&d.claude()),
        (p + &c.answer("All done \u{1b}[31mred\u{1b}[0m <b>ok</b>")).as_bytes(),
    );
    d.wait_for("turn_completed", common::is("turn_completed", turn.clone()));

    let out = d.baton().args(["status", "--json"]).output().unwrap();
    common::assert_ok(&out);
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(json)
        .collect();
    let row = rows
        .iter()
        .find(|r| r["session"] == c.session.as_str())
        .unwrap_or_else(|| panic!("session missing from {rows:?}"));
    assert_eq!(row["state"], "completed");
    assert_eq!(row["turn"], turn.as_str());
    assert_eq!(row["provider"], "claude");
    assert!(row["since"].is_string(), "{row}");
    assert!(row["project"].is_string(), "{row}");

    // The human table strips terminal escapes from the transcript's text.
    let out = d.baton().arg("status").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("completed"), "{text}");
    assert!(text.contains("All done red <b>ok</b>"), "{text}");
    assert!(!text.contains('\u{1b}'), "escape leaked: {text:?}");
    d.stop();
}

#[test]
fn socket_is_private_and_removed_at_exit() {
    let d = Daemon::tree().start(&[]);
    let sock = socket(&d);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let dir = std::fs::metadata(sock.parent().unwrap()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    d.stop();
    assert!(!sock.exists(), "socket left behind");
}

#[test]
fn stale_socket_is_replaced() {
    let d = Daemon::tree();
    let sock = socket(&d);
    std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
    // A socket nobody listens on, as a crashed daemon leaves it.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let d = d.start(&[]);
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    common::assert_ok(&out);
    d.stop();
}

#[test]
fn two_tail_clients_get_live_events_and_the_recent_ones() {
    let d = Daemon::tree().start(&[]);
    // --since replays daemon_ready from the ring: once it is printed, the client is
    // subscribed and everything after is live.
    let a = Tail::start(&d, &["--json", "--since", "1m"]);
    let b = Tail::start(&d, &["--since", "1m"]);
    a.wait_for("daemon_ready", |l| json(l)["event"] == "daemon_ready");
    b.wait_for("started", |l| l.contains("baton: started"));

    let c = Claude::new();
    let (bytes, turn) = c.turn("hi", "Here you go");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    let ev = a.wait_for("turn_completed", |l| {
        let v = json(l);
        v["event"] == "turn_completed" && v["turn"] == turn.as_str()
    });
    assert_eq!(json(&ev)["message"], "Here you go");
    let line = b.wait_for("your turn", |l| l.contains("your turn"));
    assert!(line.contains("Claude Code"), "{line}");
    assert!(line.contains("Here you go"), "{line}");
    d.stop();
}

#[test]
fn a_slow_client_is_dropped_and_others_keep_receiving() {
    let mut d = Daemon::tree().start(&[]);
    // Connects, asks to tail, and reads one line every 50 ms: far slower than the stream,
    // yet never so stalled that the server's 10 s write timeout gives up on it first (then
    // there is no notice to read, which is the contract's "if it can still take it").
    // Once the daemon says it dropped the client, it reads the rest at full speed.
    let mut slow = UnixStream::connect(socket(&d)).unwrap();
    writeln!(slow, "{{\"cmd\":\"tail\"}}").unwrap();
    slow.set_read_timeout(Some(DEADLINE)).unwrap();
    let fast = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let fast = fast.clone();
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(&slow).lines().map_while(Result::ok) {
                lines.push(line);
                if !fast.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            lines
        })
    };
    let good = Tail::start(&d, &["--json", "--since", "1m"]);
    good.wait_for("daemon_ready", |l| json(l)["event"] == "daemon_ready");

    // Enough events to fill the slow client's socket buffer and then its queue, in
    // batches a reading client keeps up with.
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let mut last = String::new();
    for _ in 0..110 {
        let mut chunk = String::new();
        for _ in 0..30 {
            let (bytes, turn) = c.turn("go on", &"x".repeat(250));
            chunk.push_str(&bytes);
            last = turn;
        }
        append(&path, chunk.as_bytes());
        std::thread::sleep(Duration::from_millis(30));
    }
    d.wait_for(
        "the last turn_completed",
        common::is("turn_completed", last.clone()),
    );
    good.wait_for("the last turn_completed", |l| {
        let v = json(l);
        v["event"] == "turn_completed" && v["turn"] == last.as_str()
    });
    d.wait_log("the slow client dropped", |l| {
        l.contains("fell behind and was dropped")
    });
    fast.store(true, std::sync::atomic::Ordering::Release);

    // The slow client was cut off with a notice, short of the whole stream.
    let lines = reader.join().unwrap();
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("\"notice\":\"dropped")),
        "no drop notice; last line: {:?}",
        lines.last()
    );
    assert!(lines.len() < 6600, "got {} lines", lines.len());

    // The daemon is still serving.
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success());
    d.stop();
}

#[test]
fn status_without_a_daemon_says_so() {
    let d = Daemon::tree();
    let out = d.baton().arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("baton is not running"), "{err}");
    let out = d.baton().arg("tail").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
}

/// One `status` request on the raw socket: the rows, and the count its end line gives.
fn status_rows(d: &Daemon) -> (Vec<Value>, u64) {
    let mut s = UnixStream::connect(socket(d)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    writeln!(s, "{{\"cmd\":\"status\"}}").unwrap();
    let mut rows = Vec::new();
    for l in BufReader::new(&s).lines() {
        let l = l.unwrap();
        let v = json(&l);
        if v["end"] == true {
            assert_eq!(l, format!("{{\"end\":true,\"sessions\":{}}}", rows.len()));
            let n = v["sessions"].as_u64().unwrap();
            return (rows, n);
        }
        rows.push(v);
    }
    panic!("status ended without its end line");
}

/// Asks for `status` until `pred` holds for the rows; panics at the deadline with the
/// last answer.
fn status_until(d: &Daemon, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let (rows, _) = status_rows(d);
        if pred(&rows) {
            return rows;
        }
        if start.elapsed() > DEADLINE {
            panic!(
                "status never showed {what}; last answer had {} rows",
                rows.len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `n` sessions on disk before the start (history), each with a finished turn, in one
/// project directory.
fn finished_sessions(d: &Daemon, n: usize) -> (Vec<Claude>, std::path::PathBuf) {
    let many: Vec<Claude> = (0..n).map(|_| Claude::new()).collect();
    let dir = d.claude().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    for c in &many {
        append(&c.path_in(&dir), c.turn("hi", "done").0.as_bytes());
    }
    (many, dir)
}

fn row<'a>(rows: &'a [Value], c: &Claude) -> Option<&'a Value> {
    rows.iter().find(|r| r["session"] == c.session.as_str())
}

#[test]
fn status_reflects_a_change_among_many_sessions() {
    const MANY: usize = 500;
    let d = Daemon::tree();
    let (many, dir) = finished_sessions(&d, MANY);
    let mut d = d.start(&[]);
    let rows = status_until(&d, "every session", |r| r.len() == MANY);
    assert!(rows.iter().all(|r| r["state"] == "completed"));

    // One session in the middle of the listing starts a new turn.
    let mut sorted: Vec<&Claude> = many.iter().collect();
    sorted.sort_by(|a, b| a.session.cmp(&b.session));
    let target = sorted[MANY / 2];
    let (p, turn) = target.prompt("one more thing");
    append(&target.path_in(&dir), p.as_bytes());
    d.wait_for("turn_started", common::is("turn_started", turn.clone()));
    let rows = status_until(&d, "the new turn working", |r| {
        row(r, target).is_some_and(|v| v["state"] == "working" && v["turn"] == turn.as_str())
    });
    assert_eq!(rows.len(), MANY);
    let working: Vec<&Value> = rows.iter().filter(|r| r["state"] == "working").collect();
    assert_eq!(working.len(), 1, "only that session changed");

    // It completes; a new session appears beside the others.
    append(
        &target.path_in(&dir),
        target.answer("Finished the extra bit").as_bytes(),
    );
    let newcomer = Claude::new();
    let (bytes, new_turn) = newcomer.turn("hello", "hi there");
    append(&newcomer.path_in(&dir), bytes.as_bytes());
    d.wait_for("turn_completed", common::is("turn_completed", turn.clone()));
    d.wait_for(
        "the newcomer's turn_completed",
        common::is("turn_completed", new_turn.clone()),
    );
    let rows = status_until(&d, "the completion and the newcomer", |r| {
        row(r, target)
            .is_some_and(|v| v["state"] == "completed" && v["message"] == "Finished the extra bit")
            && row(r, &newcomer).is_some_and(|v| v["turn"] == new_turn.as_str())
    });
    let (_, end) = status_rows(&d);
    assert_eq!(rows.len(), MANY + 1);
    assert_eq!(end, (MANY + 1) as u64);
    // Still one row per session, sorted.
    let keys: Vec<&str> = rows
        .iter()
        .map(|r| r["session"].as_str().unwrap())
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "not sorted and unique"
    );

    // A deleted transcript leaves the listing.
    std::fs::remove_file(newcomer.path_in(&dir)).unwrap();
    status_until(&d, "the deleted session gone", |r| {
        r.len() == MANY && row(r, &newcomer).is_none()
    });
    d.stop();
}

/// One `status` request asking for frames on the raw socket: each frame's head, its
/// rows (split from exactly the bytes it announced), and the end line.
fn framed_status(d: &Daemon) -> (Vec<(u64, u64)>, Vec<Value>, String) {
    use std::io::Read;
    let mut s = UnixStream::connect(socket(d)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    writeln!(s, "{{\"cmd\":\"status\",\"frames\":true}}").unwrap();
    let mut r = BufReader::new(&s);
    let (mut heads, mut rows) = (Vec::new(), Vec::new());
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "the answer ended early"
        );
        let v = json(line.trim_end());
        if v["end"] == true {
            return (heads, rows, line.trim_end().to_owned());
        }
        let (len, n) = (v["frame"].as_u64().unwrap(), v["rows"].as_u64().unwrap());
        heads.push((len, n));
        let mut bytes = vec![0; usize::try_from(len).unwrap()];
        r.read_exact(&mut bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.ends_with('\n'), "a frame of part of a row: {text:?}");
        let before = rows.len();
        rows.extend(text.lines().map(json));
        assert_eq!(rows.len() - before, usize::try_from(n).unwrap(), "{text}");
    }
}

#[test]
fn status_in_frames_carries_the_rows_of_a_plain_answer() {
    const MANY: usize = 400;
    let d = Daemon::tree();
    finished_sessions(&d, MANY);
    let d = d.start(&[]);
    let plain = status_until(&d, "every session", |r| r.len() == MANY);

    let (heads, rows, end) = framed_status(&d);
    // The same rows in the same order, in more than one frame (the daemon writes one
    // each time its 64 KiB buffer fills), and the same end line.
    assert_eq!(rows, plain);
    assert!(heads.len() > 1, "one frame for {MANY} rows: {heads:?}");
    assert!(rows.iter().all(|r| r["state"] == "completed"));
    assert_eq!(end, format!("{{\"end\":true,\"sessions\":{MANY}}}"));

    // `status --json` asks for frames and prints the rows as the plain answer has them.
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(json)
        .collect();
    assert_eq!(printed, plain);
}
