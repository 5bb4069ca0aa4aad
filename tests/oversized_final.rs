//! A final answer longer than the line limit still ends its turn: the reader sees only
//! the line's two ends, which name the record and its stop reason.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{SETTLE_MS, claude, codex, lines, replay_bytes};
use baton::model::{Event, EventKind, ProviderKind};

const LIMIT: usize = 4096;

fn opts() -> baton::replay::Options {
    let mut o = common::options(SETTLE_MS);
    o.max_line = LIMIT;
    o
}

fn summary(evs: &[Event]) -> Vec<(EventKind, Option<String>, Option<String>)> {
    evs.iter()
        .map(|e| (e.event, e.turn.clone(), e.reason.clone()))
        .collect()
}

#[test]
fn oversized_end_turn_completes_its_turn_instead_of_being_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "y".repeat(LIMIT * 8);
    let bytes = lines(&[
        claude::prompt("u1", 0, "write a lot"),
        claude::text("a1", 3, "msg_1", &huge, Some("end_turn")),
        claude::prompt("u2", 60, "thanks"),
    ]);
    let evs = replay_bytes(dir.path(), "s.jsonl", ProviderKind::Claude, &bytes, &opts());
    assert_eq!(
        summary(&evs),
        vec![
            (EventKind::TurnStarted, Some("u1".into()), None),
            (EventKind::Anomaly, None, Some("oversized_final".into())),
            (EventKind::TurnCompleted, Some("u1".into()), None),
            (EventKind::TurnStarted, Some("u2".into()), None),
        ]
    );
    let done = &evs[2];
    assert_eq!(done.evidence.as_deref(), Some("stop_reason"));
    assert_eq!(done.line, Some(2));
    assert_eq!(done.message, None);
}

#[test]
fn oversized_tool_call_is_still_only_work() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "z".repeat(LIMIT * 8);
    let bytes = lines(&[
        claude::prompt("u1", 0, "go"),
        claude::text("a1", 3, "msg_1", &huge, Some("tool_use")),
        claude::prompt("u2", 60, "stop"),
    ]);
    let evs = replay_bytes(dir.path(), "s.jsonl", ProviderKind::Claude, &bytes, &opts());
    let reasons: Vec<_> = evs.iter().filter_map(|e| e.reason.clone()).collect();
    assert_eq!(reasons, vec!["oversized_line", "abandoned"]);
    assert!(!evs.iter().any(|e| e.event == EventKind::TurnCompleted));
}

#[test]
fn oversized_codex_task_complete_completes_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "q".repeat(LIMIT * 8);
    let bytes = lines(&[
        codex::meta(0),
        codex::started(1, "t1"),
        // Field order as Codex writes it: the turn id before the message.
        format!(
            "{{\"timestamp\":\"2026-03-01T10:00:05.000Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"task_complete\",\"turn_id\":\"t1\",\"last_agent_message\":\"{huge}\"}}}}"
        ),
        codex::started(60, "t2"),
    ]);
    let evs = replay_bytes(
        dir.path(),
        "rollout-2026-03-01T10-00-00-x.jsonl",
        ProviderKind::Codex,
        &bytes,
        &opts(),
    );
    assert_eq!(
        summary(&evs),
        vec![
            (EventKind::TurnStarted, Some("t1".into()), None),
            (EventKind::Anomaly, None, Some("oversized_final".into())),
            (EventKind::TurnCompleted, Some("t1".into()), None),
            (EventKind::TurnStarted, Some("t2".into()), None),
        ]
    );
}
