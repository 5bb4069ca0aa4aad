//! The git branch where the agent records it (Claude Code's `gitBranch`, Codex's
//! `session_meta.payload.git.branch`): an additive `branch` on events and on `scan`
//! rows, `my-web-app (feat/login): your turn` in titles when it is not the default
//! branch, and `--branch` to filter tables.

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::model::{EventKind, ProviderKind};
use std::path::Path;
use std::process::Command;

fn claude_lines(session: &str, branch: &str) -> String {
    let cwd = "/home/me/src/my-web-app";
    [
        serde_json::json!({"type": "user", "uuid": format!("u-{session}"), "parentUuid": null,
            "sessionId": session, "cwd": cwd, "gitBranch": branch,
            "timestamp": "2026-03-01T10:00:00.000Z",
            "message": {"role": "user", "content": "go"}}),
        serde_json::json!({"type": "assistant", "uuid": format!("a-{session}"),
            "parentUuid": format!("u-{session}"), "sessionId": session, "cwd": cwd,
            "gitBranch": branch, "timestamp": "2026-03-01T10:00:05.000Z",
            "message": {"id": "m1", "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

const FEAT: &str = "11111111-0000-4000-8000-0000000000f1";
const MAIN: &str = "11111111-0000-4000-8000-0000000000f2";

fn write(root: &Path, session: &str, branch: &str) -> std::path::PathBuf {
    let p = root.join(format!("projects/-home-me-src-my-web-app/{session}.jsonl"));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, claude_lines(session, branch)).unwrap();
    p
}

#[test]
fn claude_events_carry_the_branch_and_titles_name_a_feature_branch() {
    let dir = tempfile::tempdir().unwrap();
    let feat = write(dir.path(), FEAT, "feat/login");
    let main = write(dir.path(), MAIN, "main");
    let events = common::replay_files(
        &[(feat, ProviderKind::Claude), (main, ProviderKind::Claude)],
        &common::options(1000),
    );
    let of = |s: &str, k: EventKind| {
        events
            .iter()
            .find(|e| e.session.as_deref() == Some(s) && e.event == k)
            .unwrap()
    };
    // Before: no `branch` (the transcript's gitBranch was dropped).
    for k in [EventKind::TurnStarted, EventKind::TurnCompleted] {
        assert_eq!(of(FEAT, k).branch.as_deref(), Some("feat/login"));
        assert_eq!(of(MAIN, k).branch.as_deref(), Some("main"));
    }
    let done = of(FEAT, EventKind::TurnCompleted);
    assert!(done.to_json().contains(r#""branch":"feat/login""#));
    assert_eq!(
        baton::naming::title(done),
        "Claude Code · my-web-app (feat/login): your turn"
    );
    assert_eq!(
        baton::naming::title(of(MAIN, EventKind::TurnCompleted)),
        "Claude Code · my-web-app: your turn"
    );
}

#[test]
fn codex_session_meta_names_the_branch() {
    let dir = tempfile::tempdir().unwrap();
    let id = "019c0000-0000-7000-8000-0000000000c1";
    let lines = [
        serde_json::json!({"timestamp": "2026-03-01T10:01:00.000Z", "type": "session_meta",
            "payload": {"id": id, "timestamp": "2026-03-01T10:01:00.000Z",
                "cwd": "/home/me/work/api-server", "originator": "codex_cli_rs",
                "git": {"commit_hash": "abc", "branch": "fix/retry", "repository_url": "x"}}}),
        serde_json::json!({"timestamp": "2026-03-01T10:01:01.000Z", "type": "event_msg",
            "payload": {"type": "task_started", "turn_id": "t1"}}),
        serde_json::json!({"timestamp": "2026-03-01T10:01:09.000Z", "type": "event_msg",
            "payload": {"type": "task_complete", "turn_id": "t1", "last_agent_message": "ok"}}),
    ];
    let bytes: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let events = common::replay_bytes(
        dir.path(),
        &format!("sessions/2026/03/01/rollout-2026-03-01T10-01-00-{id}.jsonl"),
        ProviderKind::Codex,
        bytes.as_bytes(),
        &common::options(1000),
    );
    let done = events
        .iter()
        .find(|e| e.event == EventKind::TurnCompleted)
        .unwrap();
    assert_eq!(done.branch.as_deref(), Some("fix/retry"));
    assert_eq!(
        baton::naming::title(done),
        "Codex · api-server (fix/retry): your turn"
    );
}

#[test]
fn scan_rows_carry_the_branch_and_branch_filters() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), FEAT, "feat/login");
    write(dir.path(), MAIN, "main");
    let scan = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .arg("scan")
            .args(extra)
            .arg("--provider")
            .arg("claude")
            .arg(dir.path())
            .env("HOME", dir.path())
            .output()
            .unwrap();
        common::assert_ok(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    let rows: Vec<serde_json::Value> = scan(&["--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let branch = |s: &str| {
        rows.iter()
            .find(|r| r["session"] == s)
            .map(|r| r["branch"].clone())
            .unwrap()
    };
    assert_eq!(branch(FEAT), "feat/login");
    assert_eq!(branch(MAIN), "main");
    let only: Vec<String> = scan(&["--json", "--branch", "feat/login"])
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["session"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(only, [FEAT]);
}

#[test]
fn the_scan_table_has_a_branch_column_only_when_a_session_is_off_the_default_branch() {
    let table = |dir: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["scan", "--provider", "claude", "--all", "--color", "never"])
            .arg(dir)
            .env("HOME", dir)
            .env("COLUMNS", "120")
            .output()
            .unwrap();
        common::assert_ok(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MAIN, "main");
    let plain = table(dir.path());
    assert!(plain.starts_with("STATE "), "{plain}");
    assert!(!plain.contains("BRANCH"), "{plain}");
    write(dir.path(), FEAT, "feat/login");
    let text = table(dir.path());
    let head = text.lines().next().unwrap();
    assert!(head.contains("  PROJECT     BRANCH      AGE"), "{text}");
    for b in ["feat/login", "main"] {
        assert!(
            text.lines().any(|l| l.contains(&format!("  {b} "))),
            "{b}: {text}"
        );
    }
}
