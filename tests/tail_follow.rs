//! `baton tail --follow` across a daemon restart, and `--since-id`, against the real
//! daemon on a temporary tree.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, DEADLINE, Daemon, append};
use serde_json::Value;
use std::io::Read;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A `baton tail` child whose stdout lines arrive on a channel.
struct Tail {
    child: Child,
    lines: mpsc::Receiver<String>,
    got: Vec<Value>,
}

impl Tail {
    fn start(d: &Daemon, args: &[&str]) -> Tail {
        let (child, lines) = common::tail(d, args, Stdio::piped());
        Tail {
            child,
            lines,
            got: Vec::new(),
        }
    }

    /// Reads lines until one matches `pred`; every line read is kept in `got`.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) {
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let v: Value = serde_json::from_str(&l)
                        .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {l}"));
                    let hit = pred(&v);
                    self.got.push(v);
                    if hit {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!(
            "tail never printed {what}; got:\n{}",
            self.got
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// Whatever else arrives within `quiet`.
    fn drain(&mut self, quiet: Duration) {
        while let Ok(l) = self.lines.recv_timeout(quiet) {
            self.got.push(serde_json::from_str(&l).unwrap());
        }
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills it and returns its stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

fn done(turn: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["event"] == "turn_completed" && v["turn"] == turn
}

/// The (event, turn) of the events about `turns`, in order.
fn about(events: &[Value], turns: &[&str]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|v| turns.iter().any(|t| v["turn"] == *t))
        .map(|v| {
            (
                v["event"].as_str().unwrap().to_owned(),
                v["turn"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn follow_keeps_going_across_a_restart_with_each_event_once_in_order() {
    let mut d = Daemon::tree().start(&[]);
    // --since: the first turn shows even if it comes before the tail is subscribed.
    let mut tail = Tail::start(&d, &["--json", "--follow", "--since", "1m"]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (bytes, t1) = c.turn("one", "first answer");
    append(&path, bytes.as_bytes());
    tail.wait_for("the first turn's completion", done(&t1));

    d.terminate();
    let (bytes, t2) = c.turn("two", "written while the daemon is down");
    append(&path, bytes.as_bytes());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        tail.running(),
        "tail --follow exited when the daemon stopped"
    );

    d.restart(&[]);
    tail.wait_for("the second turn's completion", done(&t2));
    let (bytes, t3) = c.turn("three", "after the restart");
    append(&path, bytes.as_bytes());
    tail.wait_for("the third turn's completion", done(&t3));
    tail.drain(Duration::from_millis(500));
    assert!(tail.running(), "tail --follow exited");

    let turns = [t1.as_str(), t2.as_str(), t3.as_str()];
    let printed = about(&tail.got, &turns);
    let written = about(&d.events(), &turns);
    assert_eq!(
        printed, written,
        "tail printed the turns' events differently from the daemon's stream"
    );
    let firsts: Vec<&str> = printed.iter().map(|(_, t)| t.as_str()).collect();
    let mut expect = firsts.clone();
    expect.dedup();
    assert_eq!(expect, turns, "turns out of order or repeated: {printed:?}");
    let mut ids: Vec<&str> = tail.got.iter().filter_map(|v| v["id"].as_str()).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "an event id was printed twice");
    let err = tail.stop();
    let outages = err.matches("reconnecting").count();
    assert_eq!(
        outages, 1,
        "one notice for the one outage, not one per attempt:\n{err}"
    );
    assert!(
        !err.contains("may be missing"),
        "the old daemon's events reached the tail to its last, so there is no gap:\n{err}"
    );
    d.stop();
}

#[test]
fn follow_waits_for_a_daemon_that_is_not_up_yet() {
    let mut d = Daemon::tree();
    let mut tail = Tail::start(&d, &["--json", "--follow"]);
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        tail.running(),
        "tail --follow gave up on a daemon not up yet"
    );
    d.spawn(&[]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let c = Claude::new();
    let (bytes, t) = c.turn("hi", "hello");
    // The tail reconnects within its 2 s backoff cap; a turn from before it came back
    // still reaches it, as the daemon's ring holds everything since it started.
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    tail.wait_for("the turn's completion", done(&t));
    let err = tail.stop();
    assert_eq!(err.matches("reconnecting").count(), 1, "{err}");
    d.stop();
}

#[test]
fn since_id_starts_after_that_event() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let mut turns = Vec::new();
    for i in 0..3 {
        let (bytes, t) = c.turn(&format!("q{i}"), &format!("a{i}"));
        append(&path, bytes.as_bytes());
        d.wait_for("a completion", |e| {
            e["event"] == "turn_completed" && e["turn"] == t
        });
        turns.push(t);
    }
    let events = d.events();
    let mid = events
        .iter()
        .find(|e| e["event"] == "turn_completed" && e["turn"] == turns[1])
        .unwrap();
    let mid_id = mid["id"].as_str().unwrap();
    let pos = events.iter().position(|e| e["id"] == mid_id).unwrap();
    let after: Vec<&str> = events[pos + 1..]
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert!(
        !after.is_empty(),
        "the third turn's events follow the second's"
    );

    let mut tail = Tail::start(&d, &["--json", "--since-id", mid_id]);
    tail.wait_for("the third turn's completion", done(&turns[2]));
    tail.drain(Duration::from_millis(300));
    let got: Vec<&str> = tail.got.iter().filter_map(|v| v["id"].as_str()).collect();
    assert_eq!(got, after, "not exactly the events after the one named");

    // An id the daemon never sent: all it holds, each once.
    let mut all = Tail::start(&d, &["--json", "--follow", "--since-id", "no-such-id"]);
    all.wait_for("the third turn's completion", done(&turns[2]));
    all.drain(Duration::from_millis(300));
    let got: Vec<&str> = all.got.iter().filter_map(|v| v["id"].as_str()).collect();
    let every: Vec<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(got, every);
    let err = all.stop();
    assert!(
        err.contains("may be missing"),
        "an id this client never saw the run of: a possible gap, said:\n{err}"
    );
    tail.stop();
    d.stop();
}
