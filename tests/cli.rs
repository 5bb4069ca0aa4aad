//! The `baton` binary as a user runs it.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{claude, codex, lines};
use std::process::Command;

fn baton() -> Command {
    Command::new(env!("CARGO_BIN_EXE_baton"))
}

#[test]
fn replay_prints_one_v1_event_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{}.jsonl", claude::SESSION));
    std::fs::write(
        &path,
        lines(&[
            claude::prompt("u1", 0, "hi"),
            claude::text("a1", 2, "msg_1", "<b>Hello</b> & bye", Some("end_turn")),
        ]),
    )
    .unwrap();
    let out = baton().arg("replay").arg(&path).output().unwrap();
    common::assert_ok(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    let done = &events[1];
    for key in [
        "v",
        "event",
        "provider",
        "session",
        "agent",
        "turn",
        "path",
        "line",
        "ts",
        "record_ts",
        "reason",
        "message",
        "evidence",
        "id",
    ] {
        assert!(done.get(key).is_some(), "field {key} missing in {done}");
    }
    assert_eq!(done["v"], 1);
    assert_eq!(done["event"], "turn_completed");
    assert_eq!(done["provider"], "claude");
    assert_eq!(done["session"], claude::SESSION);
    assert_eq!(done["agent"], serde_json::Value::Null);
    assert_eq!(done["turn"], "u1");
    assert_eq!(done["line"], 2);
    assert_eq!(done["evidence"], "stop_reason");
    assert_eq!(
        done["message"], "<b>Hello</b> & bye",
        "the stream carries text as written; sinks escape"
    );
    assert_eq!(done["record_ts"], "2026-03-01T10:00:02.000Z");
    assert_eq!(done["id"].as_str().unwrap().len(), 32);
    // Ids are stable across runs.
    let again = baton().arg("replay").arg(&path).output().unwrap();
    assert_eq!(String::from_utf8(again.stdout).unwrap(), stdout);
}

#[test]
fn replay_of_a_directory_detects_providers_by_content() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.jsonl"),
        lines(&[
            claude::prompt("u1", 0, "hi"),
            claude::text("a1", 2, "m", "ok", Some("end_turn")),
        ]),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("x/y")).unwrap();
    std::fs::write(
        dir.path().join("x/y/b.jsonl"),
        lines(&[
            codex::meta(0),
            codex::started(1, "t1"),
            codex::complete(3, "t1", "done"),
        ]),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a transcript").unwrap();
    let out = baton().arg("replay").arg(dir.path()).output().unwrap();
    assert!(out.status.success());
    let events: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let providers: Vec<&str> = events
        .iter()
        .map(|e| e["provider"].as_str().unwrap())
        .collect();
    assert_eq!(providers, ["claude", "claude", "codex", "codex"]);
}

#[test]
fn scan_json_reports_each_sessions_state() {
    let home = tempfile::tempdir().unwrap();
    let claude_dir = home.path().join("cc/projects/-home-me-web");
    std::fs::create_dir_all(&claude_dir).unwrap();
    std::fs::write(
        claude_dir.join(format!("{}.jsonl", claude::SESSION)),
        lines(&[
            claude::prompt("u1", 0, "hi"),
            claude::text("a1", 2, "m", "Done here.", Some("end_turn")),
        ]),
    )
    .unwrap();
    let codex_dir = home.path().join("cx/sessions/2026/03/01");
    std::fs::create_dir_all(&codex_dir).unwrap();
    std::fs::write(
        codex_dir.join(format!(
            "rollout-2026-03-01T10-00-00-{}.jsonl",
            codex::SESSION
        )),
        lines(&[
            codex::meta(0),
            codex::started(1, "t1"),
            codex::call(2, "c1"),
        ]),
    )
    .unwrap();
    // No PATH: the default roots, from CLAUDE_CONFIG_DIR and CODEX_HOME.
    let out = baton()
        .args(["scan", "--json"])
        .env("CLAUDE_CONFIG_DIR", home.path().join("cc"))
        .env("CODEX_HOME", home.path().join("cx"))
        .env("HOME", home.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["provider"], "claude");
    assert_eq!(rows[0]["state"], "completed");
    assert_eq!(rows[0]["line"], 2);
    assert_eq!(rows[0]["evidence"], "stop_reason");
    assert_eq!(rows[0]["message"], "Done here.");
    assert_eq!(rows[1]["provider"], "codex");
    // Working when its records were written, months ago, and no process holds the
    // rollout open: the liveness check ends it, as the daemon would.
    assert_eq!(rows[1]["state"], "interrupted");
    assert_eq!(rows[1]["reason"], "writer_gone");
    assert_eq!(rows[1]["turn"], "t1");
    assert_eq!(rows[1]["line"], 3);
    for key in [
        "provider",
        "session",
        "agent",
        "path",
        "state",
        "turn",
        "line",
        "record_ts",
        "message",
        "evidence",
    ] {
        assert!(rows[0].get(key).is_some(), "{key} missing");
    }
    // The table form is for people and strips terminal escapes.
    // --all: the records are from 2026-03-01, older than the table's week.
    let table = baton()
        .args(["scan", "--all"])
        .arg(home.path())
        .output()
        .unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.starts_with("STATE"), "{text}");
    assert!(text.contains("completed") && text.contains("interrupted (writer_gone)"));
}

#[test]
fn scan_table_strips_terminal_escapes_from_transcript_text() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J done";
    std::fs::write(
        dir.path().join("s.jsonl"),
        lines(&[
            claude::prompt("u1", 0, "hi"),
            claude::text("a1", 2, "m", evil, Some("end_turn")),
        ]),
    )
    .unwrap();
    let out = baton()
        .args(["scan", "--all"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("ok done"), "{text:?}");
}

#[test]
fn missing_path_is_a_clear_error_with_its_own_exit_code() {
    let out = baton()
        .args(["replay", "/nonexistent/baton-test"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no such file or directory: /nonexistent/baton-test"),
        "{err}"
    );
}

#[test]
fn bad_flags_exit_2_and_help_teaches() {
    let out = baton()
        .args(["replay", "--settle", "soon", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a duration"));
    let help = baton().args(["replay", "--help"]).output().unwrap();
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(
        text.contains("--settle") && text.contains("virtual"),
        "{text}"
    );
}
