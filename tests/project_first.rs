//! The first event of a new session names its project: `turn_started` carries
//! `project` as the later events do, so the first `tail` line reads `cli-tool: working`
//! and not the folder slug (`home-me-src-cli-tool: working`).

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::model::{EventKind, ProviderKind};

#[test]
fn the_first_turn_started_of_a_claude_session_carries_its_project() {
    let dir = tempfile::tempdir().unwrap();
    let s = "11111111-0000-4000-8000-000000000009";
    let cwd = "/home/me/src/cli-tool";
    let lines = [
        serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": s,
            "cwd": cwd, "timestamp": "2026-03-01T10:00:00.000Z",
            "message": {"role": "user", "content": "go"}}),
        serde_json::json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": s,
            "cwd": cwd, "timestamp": "2026-03-01T10:00:05.000Z",
            "message": {"id": "m1", "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}}),
    ];
    let bytes: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let events = common::replay_bytes(
        dir.path(),
        &format!("projects/-home-me-src-cli-tool/{s}.jsonl"),
        ProviderKind::Claude,
        bytes.as_bytes(),
        &common::options(1000),
    );
    let started = events
        .iter()
        .find(|e| e.event == EventKind::TurnStarted)
        .unwrap();
    // Before: None (the title fell back to the folder slug).
    assert_eq!(started.project.as_deref(), Some("cli-tool"));
    assert!(
        baton::naming::title(started).contains("cli-tool: working"),
        "{}",
        baton::naming::title(started)
    );
    let done = events
        .iter()
        .find(|e| e.event == EventKind::TurnCompleted)
        .unwrap();
    assert_eq!(done.project.as_deref(), Some("cli-tool"));
}

#[test]
fn the_first_turn_started_of_a_codex_session_carries_its_project() {
    let dir = tempfile::tempdir().unwrap();
    let id = "019c0000-0000-7000-8000-0000000000b1";
    let lines = [
        serde_json::json!({"timestamp": "2026-03-01T10:01:00.000Z", "type": "session_meta",
            "payload": {"id": id, "timestamp": "2026-03-01T10:01:00.000Z",
                "cwd": "/home/me/work/api-server", "originator": "codex_cli_rs"}}),
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
    let started = events
        .iter()
        .find(|e| e.event == EventKind::TurnStarted)
        .unwrap();
    assert_eq!(started.project.as_deref(), Some("api-server"));
}
