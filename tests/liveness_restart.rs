//! The `writer_gone` verdict survives a restart: a Codex session whose rollout nobody
//! holds open is interrupted once, and the next daemon shows it interrupted from its
//! first answer on (never `working` in between) without a second `turn_interrupted`.
//! Also for a turn older than `--catch-up`, whose verdict is history (no event): it was
//! never saved, so every restart showed the dead session working until the next check.

#![allow(clippy::unwrap_used)]

use crate::common::*;
use serde_json::{Value, json};
use std::fs;
use std::time::{Duration, Instant};

/// The `status --json` row of `session`, if the daemon answers and lists it.
fn row(d: &Daemon, session: &str) -> Option<Value> {
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["session"] == session)
}

/// Restarts `d` with the default `liveness_after` (2 min, so only a saved verdict can show
/// it interrupted) and asserts that `status` shows `session` interrupted (writer_gone)
/// from its first answer on, and still a second later.
fn restart_shows_interrupted(d: &mut Daemon, session: &str) {
    d.restart(&[]);
    let start = Instant::now();
    loop {
        if let Some(r) = row(d, session) {
            assert_eq!(r["state"], "interrupted", "right after the restart: {r}");
            assert_eq!(r["reason"], "writer_gone", "{r}");
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "status never listed the session"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(200));
        let r = row(d, session).unwrap();
        assert_eq!(r["state"], "interrupted", "{r}");
    }
}

#[test]
fn an_old_turns_verdict_is_kept_though_it_made_no_event() {
    let mut d =
        Daemon::tree().start(&["--liveness-after", "1s", "--debug-sweep-interval", "500ms"]);
    let x = Codex::new();
    let dir = d.codex().join("2026").join("11").join("29");
    fs::create_dir_all(&dir).unwrap();
    let path = x.path_in(&dir);
    let turn = uuid();
    let old = ts_ago(Duration::from_secs(3600));
    let meta = json!({"timestamp": old, "type": "session_meta",
        "payload": {"id": x.session, "timestamp": old, "cwd": "/tmp", "originator": "codex_cli_rs"}});
    let open = json!({"timestamp": old, "type": "event_msg",
        "payload": {"type": "task_started", "turn_id": turn}});
    append(&path, format!("{meta}\n{open}\n").as_bytes());
    // Judged by the first run (an hour older than --catch-up: history, no event).
    let start = Instant::now();
    loop {
        if row(&d, &x.session).is_some_and(|r| r["state"] == "interrupted") {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "never interrupted: {:?}",
            row(&d, &x.session)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d.terminate();
    restart_shows_interrupted(&mut d, &x.session);
    let events = d.stop();
    assert_eq!(count(&events, "turn_interrupted", &turn), 0, "{events:?}");
}

#[test]
fn a_restart_keeps_the_writer_gone_verdict() {
    let mut d =
        Daemon::tree().start(&["--liveness-after", "1s", "--debug-sweep-interval", "500ms"]);
    let x = Codex::new();
    let (_, turn) = x.working_in(&d.codex());
    d.wait_for("the turn start", is("turn_started", turn.clone()));
    let ev = d.wait_for("the interruption", is("turn_interrupted", turn.clone()));
    assert_eq!(ev["reason"], "writer_gone");
    d.terminate();

    restart_shows_interrupted(&mut d, &x.session);
    let events = d.stop();
    assert_eq!(count(&events, "turn_interrupted", &turn), 1, "{events:?}");
}
