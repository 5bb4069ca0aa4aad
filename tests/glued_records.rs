//! Two complete records glued on one line (`}{`, a writer lost a newline; seed 004):
//! both are read, in order, and both carry that line's number.

#![allow(clippy::unwrap_used)]

use crate::common::{Live, SETTLE_MS, claude, codex, lines, options, replay_bytes};
use baton::model::{Event, EventKind, ProviderKind};

fn turn_events(evs: &[Event]) -> Vec<(EventKind, Option<String>, Option<u64>)> {
    evs.iter()
        .filter(|e| e.event != EventKind::Anomaly)
        .map(|e| (e.event, e.turn.clone(), e.line))
        .collect()
}

fn glued(a: &str, b: &str) -> Vec<u8> {
    format!("{a}{b}\n").into_bytes()
}

#[test]
fn answer_glued_to_the_next_prompt_completes_the_first_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[claude::prompt("u1", 0, "first")]);
    bytes.extend(glued(
        &claude::text("a1", 3, "msg_1", "Done.", Some("end_turn")),
        &claude::prompt("u2", 9, "second"),
    ));
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(
        turn_events(&evs),
        vec![
            (EventKind::TurnStarted, Some("u1".into()), Some(1)),
            (EventKind::TurnCompleted, Some("u1".into()), Some(2)),
            (EventKind::TurnStarted, Some("u2".into()), Some(2)),
        ]
    );
    let done = evs
        .iter()
        .find(|e| e.event == EventKind::TurnCompleted)
        .unwrap();
    assert_eq!(done.message.as_deref(), Some("Done."));
    let anomaly = evs.iter().find(|e| e.event == EventKind::Anomaly).unwrap();
    assert_eq!(anomaly.reason.as_deref(), Some("glued_records"));
    assert_eq!(anomaly.line, Some(2));
}

#[test]
fn live_prompt_glued_to_its_answer_starts_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::new(dir.path(), "s.jsonl", ProviderKind::Claude);
    let evs = live.append(&glued(
        &claude::prompt("u1", 0, "hi"),
        &claude::text("a1", 2, "msg_1", "All done.", Some("end_turn")),
    ));
    assert_eq!(
        turn_events(&evs),
        vec![
            (EventKind::TurnStarted, Some("u1".into()), Some(1)),
            (EventKind::TurnCompleted, Some("u1".into()), Some(1)),
        ]
    );
    // The next record, on its own line, is read as usual.
    let evs = live.append(&lines(&[claude::prompt("u2", 5, "again")]));
    assert_eq!(
        turn_events(&evs),
        vec![(EventKind::TurnStarted, Some("u2".into()), Some(2))]
    );
}

#[test]
fn codex_records_glued_together_are_all_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[codex::meta(0)]);
    bytes.extend(glued(
        &codex::started(1, "t1"),
        &codex::complete(4, "t1", "ok"),
    ));
    let evs = replay_bytes(
        dir.path(),
        "rollout-2026-03-01T10-00-00-x.jsonl",
        ProviderKind::Codex,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(
        turn_events(&evs),
        vec![
            (EventKind::TurnStarted, Some("t1".into()), Some(2)),
            (EventKind::TurnCompleted, Some("t1".into()), Some(2)),
        ]
    );
}

#[test]
fn braces_inside_a_string_are_not_a_split_and_a_bad_tail_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[claude::prompt("u1", 0, "fn x() {}{ }")]);
    // A complete answer, then the start of a record cut off by a crash.
    bytes.extend(glued(
        &claude::text("a1", 3, "msg_1", "Done }{ here.", Some("end_turn")),
        "{\"type\":\"us",
    ));
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(
        turn_events(&evs),
        vec![
            (EventKind::TurnStarted, Some("u1".into()), Some(1)),
            (EventKind::TurnCompleted, Some("u1".into()), Some(2)),
        ]
    );
    let reasons: Vec<_> = evs
        .iter()
        .filter(|e| e.event == EventKind::Anomaly)
        .map(|e| e.reason.clone().unwrap_or_default())
        .collect();
    assert_eq!(reasons, vec!["glued_records", "malformed_line"]);
}

#[test]
fn records_glued_around_an_oversized_one_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(SETTLE_MS);
    opts.max_line = 128 * 1024;
    let huge = "h".repeat(200 * 1024);
    let mut bytes = lines(&[claude::prompt("u1", 0, "first")]);
    bytes.extend(glued(
        &claude::text("a1", 3, "msg_1", "Done.", Some("end_turn")),
        &claude::prompt("u2", 9, "second"),
    ));
    // Turn 2's prompt is complete in the oversized line's head and turn 3's prompt in
    // its tail; the huge answer between them ends turn 2.
    let mut line = claude::prompt("u3", 20, "third").into_bytes();
    line.splice(
        0..0,
        format!(
            "{}{}",
            claude::prompt("u2b", 10, "second, again"),
            claude::text("a2", 12, "msg_2", &huge, Some("end_turn"))
        )
        .into_bytes(),
    );
    line.push(b'\n');
    bytes.extend(line);
    let evs = replay_bytes(dir.path(), "s.jsonl", ProviderKind::Claude, &bytes, &opts);
    assert_eq!(
        turn_events(&evs),
        vec![
            (EventKind::TurnStarted, Some("u1".into()), Some(1)),
            (EventKind::TurnCompleted, Some("u1".into()), Some(2)),
            (EventKind::TurnStarted, Some("u2".into()), Some(2)),
            (EventKind::TurnInterrupted, Some("u2".into()), Some(2)),
            (EventKind::TurnStarted, Some("u2b".into()), Some(3)),
            (EventKind::TurnCompleted, Some("u2b".into()), Some(3)),
            (EventKind::TurnStarted, Some("u3".into()), Some(3)),
        ]
    );
}
