//! Newer agent versions (transcript-formats.md, Part D): what baton reports for the
//! documented record shapes. Fixtures are synthetic; see tests/fixtures/part-d/README.md.

#![allow(clippy::unwrap_used)]

use crate::common::{SETTLE_MS, kinds, options, replay_files};
use baton::model::{Event, ProviderKind};
use std::path::PathBuf;

fn replay(name: &str, provider: ProviderKind) -> Vec<Event> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/part-d")
        .join(name);
    replay_files(&[(path, provider)], &options(SETTLE_MS))
}

#[test]
fn codex_request_user_input_needs_input_until_answered() {
    let evs = replay(
        "synthetic-codex-0145-request-user-input.jsonl",
        ProviderKind::Codex,
    );
    assert_eq!(
        kinds(&evs),
        [
            "turn_started",
            "needs_input",
            "needs_input_resolved",
            "turn_completed"
        ]
    );
    let ask = &evs[1];
    assert_eq!(ask.reason.as_deref(), Some("request_user_input"));
    assert_eq!(ask.line, Some(10));
    assert_eq!(ask.turn.as_deref(), Some("turn-1"));
    // The first question, as plain text (sinks escape markup).
    assert_eq!(
        ask.message.as_deref(),
        Some("Which end state should this plan deliver? <b>A</b> & B")
    );
    // The function_call_output (the answer) ends the wait.
    assert_eq!(evs[2].turn.as_deref(), Some("turn-1"));
    assert_eq!(evs[3].evidence.as_deref(), Some("task_complete"));
    assert_eq!(evs[3].line, Some(15));
}

#[test]
fn forked_codex_child_skips_the_copied_parent_history() {
    let evs = replay(
        "synthetic-codex-0145-forked-child.jsonl",
        ProviderKind::Codex,
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    for e in &evs {
        assert_eq!(e.turn.as_deref(), Some("child-turn-1"));
        assert_eq!(
            e.agent.as_deref(),
            Some("019a7c22-0000-7000-8000-00000000000c")
        );
        assert_eq!(
            e.session.as_deref(),
            Some("019a7c22-0000-7000-8000-00000000000a")
        );
    }
    assert_eq!(evs[0].line, Some(11));
}

#[test]
fn codex_new_record_types_never_break_a_turn() {
    let evs = replay("synthetic-codex-0146-new-types.jsonl", ProviderKind::Codex);
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    assert_eq!(evs[1].evidence.as_deref(), Some("task_complete"));
    assert_eq!(evs[1].message.as_deref(), Some("Found it."));
}

#[test]
fn exit_and_resume_make_no_turns() {
    let evs = replay(
        "synthetic-claude-2076-exit-resume.jsonl",
        ProviderKind::Claude,
    );
    let turns: Vec<_> = evs
        .iter()
        .filter(|e| e.event.as_str() == "turn_started")
        .map(|e| e.turn.clone().unwrap())
        .collect();
    assert_eq!(turns, ["u0", "u1", "u2", "u9"]);
    assert!(
        evs.iter().all(|e| e.event.as_str() != "turn_interrupted"),
        "{:?}",
        kinds(&evs)
    );
    assert_eq!(
        kinds(&evs)
            .iter()
            .filter(|k| **k == "turn_completed")
            .count(),
        4
    );
}

#[test]
fn a_quiet_completion_contradicted_by_its_turn_is_taken_back() {
    let evs = replay("synthetic-claude-2107-long-gap.jsonl", ProviderKind::Claude);
    assert_eq!(
        kinds(&evs),
        [
            "turn_started",
            "turn_completed",
            "turn_resumed",
            "turn_completed"
        ]
    );
    let (quiet, resumed, end) = (&evs[1], &evs[2], &evs[3]);
    assert_eq!(quiet.evidence.as_deref(), Some("quiet"));
    assert_eq!(resumed.turn, quiet.turn);
    assert_eq!(resumed.supersedes.as_deref(), Some(quiet.id.as_str()));
    // The contradicting record: the Write call 92.8 s after the text.
    assert_eq!(resumed.line, Some(3));
    assert_eq!(
        resumed.record_ts.as_deref(),
        Some("2026-11-02T09:01:38.800Z")
    );
    assert_eq!(end.turn, quiet.turn);
    assert_eq!(end.line, Some(5));
    assert_ne!(end.id, quiet.id);
    // On the wire: the new field is there, and only on turn_resumed.
    assert!(resumed.to_json().contains("\"supersedes\":"));
    assert!(!quiet.to_json().contains("supersedes"));
}

#[test]
fn a_file_that_stamps_every_block_never_ends_on_a_null_stop_text() {
    let evs = replay(
        "synthetic-claude-21230-explicit-stops.jsonl",
        ProviderKind::Claude,
    );
    // Neither the final-usage block (on every record in 2.1.23x) nor 100 s of quiet
    // make the null-stop text a final answer; bookkeeping after the end changes nothing.
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    assert_eq!(evs[1].line, Some(15));
    assert_eq!(evs[1].evidence.as_deref(), Some("stop_reason"));
}

#[test]
fn stop_hook_progress_ends_the_turn_at_once() {
    let evs = replay(
        "synthetic-claude-2139-stop-hook-progress.jsonl",
        ProviderKind::Claude,
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    assert_eq!(evs[1].evidence.as_deref(), Some("stop_hook"));
    assert_eq!(evs[1].line, Some(2));
    // Decided by the first hook_progress record, not 90 s of quiet.
    assert_eq!(evs[1].ts, "2026-11-02T09:00:03.200Z");
}

#[test]
fn legacy_usage_limit_fails_the_turn_even_when_synthetic() {
    let evs = replay(
        "synthetic-claude-1051-legacy-usage-limit.jsonl",
        ProviderKind::Claude,
    );
    assert_eq!(
        kinds(&evs),
        [
            "turn_started",
            "turn_failed",
            "turn_started",
            "turn_completed"
        ]
    );
    let f = &evs[1];
    assert_eq!(f.reason.as_deref(), Some("usage_limit"));
    assert_eq!(f.resets_at.as_deref(), Some("2025-07-08T18:00:00.000Z"));
    assert_eq!(f.line, Some(2));
}

/// `scan` states of the first `n` lines of a fixture (a file still being written).
fn states_after(name: &str, provider: ProviderKind, n: usize) -> Vec<&'static str> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/part-d")
        .join(name);
    let text = std::fs::read_to_string(src).unwrap();
    let head: String = text.split_inclusive('\n').take(n).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, head).unwrap();
    let found = [baton::watch::Found { path, provider }];
    baton::replay::scan(&found, &options(SETTLE_MS))
        .unwrap()
        .iter()
        .map(|v| v.state.as_str())
        .collect()
}

#[test]
fn status_shows_a_codex_question_until_it_is_answered() {
    let name = "synthetic-codex-0145-request-user-input.jsonl";
    // The file ends at the question (6.6 hours of waiting, long past any settle).
    assert_eq!(states_after(name, ProviderKind::Codex, 10), ["needs_input"]);
    // The answer came back: the turn works on.
    assert_eq!(states_after(name, ProviderKind::Codex, 11), ["working"]);
}

#[test]
fn status_is_working_again_after_a_retraction() {
    let name = "synthetic-claude-2107-long-gap.jsonl";
    assert_eq!(states_after(name, ProviderKind::Claude, 2), ["completed"]);
    assert_eq!(states_after(name, ProviderKind::Claude, 3), ["working"]);
}
