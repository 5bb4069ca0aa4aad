//! Claude Code shapes of late 2026 (transcript-formats.md, Part E.1 and E.5): turns the
//! person did not type, teammates and timed-out commands as background work, unanswered
//! questions. Fixtures are synthetic; see tests/fixtures/part-e/README.md.

#![allow(clippy::unwrap_used)]

use crate::common::{SETTLE_MS, options, replay_files};
use baton::model::{Event, ProviderKind};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/part-e")
        .join(name)
}

fn replay(name: &str) -> Vec<Event> {
    replay_files(
        &[(fixture(name), ProviderKind::Claude)],
        &options(SETTLE_MS),
    )
}

/// One event as `kind turn=… line=… origin=… [initiator=…] [evidence=…] [bg=…] [reason=…]`,
/// the fields this file is about.
fn brief(e: &Event) -> String {
    let mut s = format!(
        "{} turn={} line={} origin={}",
        e.event.as_str(),
        e.turn.as_deref().unwrap_or("-"),
        e.line.map_or_else(|| "-".to_owned(), |l| l.to_string()),
        e.origin.unwrap_or("-"),
    );
    if let Some(i) = e.initiator {
        s += &format!(" initiator={i}");
    }
    if let Some(ev) = &e.evidence {
        s += &format!(" evidence={ev}");
    }
    if let Some(n) = e.background_tasks {
        s += &format!(" bg={n}");
    }
    if let Some(r) = &e.reason {
        s += &format!(" reason={r}");
    }
    s
}

fn briefs(evs: &[Event]) -> Vec<String> {
    evs.iter().map(brief).collect()
}

#[test]
fn peer_messages_start_system_turns_and_teammates_are_background_work() {
    let evs = replay("synthetic-claude-2232-peer-messages.jsonl");
    assert_eq!(
        briefs(&evs),
        [
            "turn_started turn=0b7f4c1e-2d3a-4e5f-8a9b-1c2d3e4f5a01 line=1 origin=human initiator=human",
            // Two teammates launched, neither reported: the main turn waits on them.
            "turn_completed turn=0b7f4c1e-2d3a-4e5f-8a9b-1c2d3e4f5a01 line=6 origin=human evidence=stop_reason bg=2",
            // design-review reports (the isMeta form): a turn of its own, one teammate left.
            "turn_started turn=d07c8b9d-0e1f-4a2b-8c3d-5e6f7a8b9c08 line=8 origin=peer initiator=system",
            "turn_completed turn=d07c8b9d-0e1f-4a2b-8c3d-5e6f7a8b9c08 line=9 origin=peer evidence=stop_reason bg=1",
            // perf-audit goes idle (the plain form) and the model answers: a turn keyed by
            // the notification, started at the answer's line; no teammate left.
            "turn_started turn=03af1e2a-3b4c-4d5e-9f6a-8b9c0d1e2f11 line=12 origin=peer initiator=system",
            "turn_completed turn=03af1e2a-3b4c-4d5e-9f6a-8b9c0d1e2f11 line=12 origin=peer evidence=stop_reason",
            // design-review's idle notification at line 14 is answered by nothing: no turn.
            "turn_started turn=47e35c6e-7f8a-4b9c-9d0e-2f3a4b5c6d15 line=15 origin=human initiator=human",
            "turn_completed turn=47e35c6e-7f8a-4b9c-9d0e-2f3a4b5c6d15 line=16 origin=human evidence=stop_reason",
        ]
    );
}

#[test]
fn answered_bash_input_is_a_turn_unanswered_is_a_local_command_and_compact_is_none() {
    let evs = replay("synthetic-claude-2232-bash-mode.jsonl");
    assert_eq!(
        briefs(&evs),
        [
            "turn_started turn=1a0b2c3d-4e5f-4061-8273-94a5b6c7d801 line=1 origin=human initiator=human",
            "turn_completed turn=1a0b2c3d-4e5f-4061-8273-94a5b6c7d801 line=2 origin=human evidence=stop_reason",
            "turn_started turn=3d4e5f60-7182-4a93-85b6-c7d8e9f0a1b2 line=4 origin=human initiator=human",
            "turn_completed turn=3d4e5f60-7182-4a93-85b6-c7d8e9f0a1b2 line=5 origin=human evidence=stop_reason",
            // `git status` (line 7) answered at line 9: the bash-input's key, the answer's line.
            "turn_started turn=4d3e5f60-7182-4394-95b6-c7d8e9f0a104 line=9 origin=bash initiator=human",
            "turn_completed turn=4d3e5f60-7182-4394-95b6-c7d8e9f0a104 line=9 origin=bash evidence=stop_reason",
            // `ls target` (line 11) is answered by nothing, and `/compact` (line 13) is no
            // turn: the compaction belongs to the last turn.
            "context_compacted turn=4d3e5f60-7182-4394-95b6-c7d8e9f0a104 line=14 origin=bash",
            // `cargo test` (line 17): the answer begins with a thinking block at line 19.
            "turn_started turn=e7d8091a-2b3c-4d45-9f56-a7b8c9dae014 line=19 origin=bash initiator=human",
            "turn_completed turn=e7d8091a-2b3c-4d45-9f56-a7b8c9dae014 line=20 origin=bash evidence=stop_reason",
            "turn_started turn=3c2d5e6f-7081-4a9a-8bab-fc0d1e2f3a18 line=22 origin=human initiator=human",
            "turn_completed turn=3c2d5e6f-7081-4a9a-8bab-fc0d1e2f3a18 line=23 origin=human evidence=stop_reason",
        ]
    );
}

#[test]
fn a_command_moved_to_the_background_counts_until_its_notification() {
    let evs = replay("synthetic-claude-2240-moved-to-background.jsonl");
    assert_eq!(
        briefs(&evs),
        [
            "turn_started turn=3c2d5e6f-7081-429a-8eab-fc0d1e2f3501 line=1 origin=human initiator=human",
            "turn_completed turn=3c2d5e6f-7081-429a-8eab-fc0d1e2f3501 line=4 origin=human evidence=stop_reason bg=1",
            "turn_started turn=8172a314-c5d6-47ef-93f0-4b5c6d7e8a06 line=8 origin=task_notification initiator=system",
            "turn_completed turn=8172a314-c5d6-47ef-93f0-4b5c6d7e8a06 line=9 origin=task_notification evidence=stop_reason",
        ]
    );
}

#[test]
fn turn_origin_decides_and_an_unknown_one_is_an_anomaly_not_a_lost_turn() {
    let evs = replay("synthetic-claude-2284-turn-origin.jsonl");
    assert_eq!(
        briefs(&evs),
        [
            // The skill body (line 4, `turnCompanion`) is no prompt: one turn to line 7.
            "turn_started turn=2c1d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e01 line=1 origin=human initiator=human",
            "turn_completed turn=2c1d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e01 line=7 origin=human evidence=stop_reason",
            "turn_started turn=ae9f0b1c-2d34-44f5-86b7-8c9d0e1f2a09 line=9 origin=scheduled initiator=system",
            "turn_completed turn=ae9f0b1c-2d34-44f5-86b7-8c9d0e1f2a09 line=10 origin=scheduled evidence=stop_reason",
            "turn_started turn=d1c23e4f-5a67-47c8-99ea-1f2a3b4c5d12 line=12 origin=sdk initiator=human",
            "turn_completed turn=d1c23e4f-5a67-47c8-99ea-1f2a3b4c5d12 line=13 origin=sdk evidence=stop_reason",
            "turn_started turn=04f56b7c-8d9a-4afb-8c1d-4c5d6e7f8a15 line=15 origin=task_notification initiator=system",
            "turn_completed turn=04f56b7c-8d9a-4afb-8c1d-4c5d6e7f8a15 line=16 origin=task_notification evidence=stop_reason",
            "turn_started turn=37c89eaf-b0cd-4d2e-9f4a-7f8a9b0c1d18 line=18 origin=peer initiator=system",
            "turn_completed turn=37c89eaf-b0cd-4d2e-9f4a-7f8a9b0c1d18 line=19 origin=peer evidence=stop_reason",
            "anomaly turn=- line=21 origin=- reason=unknown_turn_origin",
            "turn_started turn=6afbc1d2-e3f0-405b-8c7d-0c1d2e3f4a21 line=21 origin=- initiator=system",
            "turn_completed turn=6afbc1d2-e3f0-405b-8c7d-0c1d2e3f4a21 line=22 origin=- evidence=stop_reason",
        ]
    );
    let anomaly = &evs[10];
    assert_eq!(
        anomaly.message.as_deref(),
        Some("turnOrigin \"workflow_step\" is not known: the turn is started with no origin")
    );
}

#[test]
fn an_unanswered_question_ends_its_wait_and_an_auto_mode_denial_is_no_wait() {
    let name = "synthetic-claude-2251-unanswered-question.jsonl";
    assert_eq!(
        briefs(&replay(name)),
        [
            "turn_started turn=b4a5c6d7-e8f9-4a01-8b12-c3d4e5f60101 line=1 origin=human initiator=human",
            "needs_input turn=b4a5c6d7-e8f9-4a01-8b12-c3d4e5f60101 line=2 origin=human reason=AskUserQuestion",
            // The timeout's tool result ends the wait.
            "needs_input_resolved turn=b4a5c6d7-e8f9-4a01-8b12-c3d4e5f60101 line=3 origin=human",
            "turn_completed turn=b4a5c6d7-e8f9-4a01-8b12-c3d4e5f60101 line=6 origin=human evidence=stop_reason",
        ]
    );
    // The session's state as the file grows: waiting on the question, then (the 300 s
    // timeout's result, line 3) working again, and still working after the denial.
    let states: Vec<_> = (2..=5).map(|n| state_after(name, n)).collect();
    assert_eq!(states, ["needs_input", "working", "working", "working"]);
}

/// The `scan` state of the first `n` lines of a fixture (a file still being written).
fn state_after(name: &str, n: usize) -> String {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let head: String = text.split_inclusive('\n').take(n).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, head).unwrap();
    let found = [baton::watch::Found {
        path,
        provider: ProviderKind::Claude,
    }];
    let views = baton::replay::scan(&found, &options(SETTLE_MS)).unwrap();
    assert_eq!(views.len(), 1);
    views[0].state.as_str().to_owned()
}

/// This file's fixtures (the folder also holds other agents').
fn claude_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("synthetic-claude-"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn check_finds_nothing_wrong_in_the_new_shapes() {
    let files = claude_fixtures();
    assert_eq!(files.len(), 5);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["check", "--provider", "claude"])
        .args(&files)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("No problems found in 5 files"), "{stdout}");
}
