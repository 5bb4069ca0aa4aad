//! What the newest versions write (transcript-formats.md, Part F) and the regressions
//! issue 29 names: Codex 0.153 escalation requests as waits, a record appended twice,
//! and the start directory read from the parsed record. Fixtures are synthetic; see
//! tests/fixtures/part-f/README.md.

#![allow(clippy::unwrap_used)]

use crate::common::{SETTLE_MS, kinds, options, replay_bytes, replay_files};
use baton::model::{Event, ProviderKind};
use std::path::PathBuf;

fn replay(name: &str, provider: ProviderKind) -> Vec<Event> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/part-f")
        .join(name);
    replay_files(&[(path, provider)], &options(SETTLE_MS))
}

#[test]
fn a_codex_escalation_request_under_on_request_is_a_wait_until_answered() {
    let evs = replay(
        "synthetic-codex-0153-escalation-on-request.jsonl",
        ProviderKind::Codex,
    );
    assert_eq!(
        kinds(&evs),
        [
            "turn_started",
            "needs_input",
            "needs_input_resolved",
            "turn_completed",
            "turn_started",
            "needs_input",
        ]
    );
    let (first, second) = (&evs[1], &evs[5]);
    assert_eq!(first.reason.as_deref(), Some("approval"));
    assert_eq!(first.turn.as_deref(), Some("t-1"));
    assert_eq!(first.line, Some(9));
    assert_eq!(
        first.message.as_deref(),
        Some("Do you want to allow restarting the local test server on port 3000?")
    );
    // The call's output (48 s later) is the answer.
    assert_eq!(evs[2].line, Some(11));
    // The plain `exec_command` in between asks nothing; 0.153's `ordinal`,
    // `item_completed` and `token_usage_record` change no outcome.
    assert_eq!(evs[3].evidence.as_deref(), Some("task_complete"));
    assert_eq!(
        evs[3].message.as_deref(),
        Some("Restarted the server; all 12 e2e tests pass.")
    );
    // The second request is still open at the end of the file.
    assert_eq!(second.reason.as_deref(), Some("approval"));
    assert_eq!(second.turn.as_deref(), Some("t-2"));
    assert_eq!(
        second.message.as_deref(),
        Some("Do you want to allow deploying to staging, which needs network access?")
    );
    assert!(
        evs[1..]
            .iter()
            .all(|e| e.project.as_deref() == Some("platform"))
    );
}

#[test]
fn under_approval_policy_never_an_escalation_request_asks_nobody() {
    let evs = replay(
        "synthetic-codex-0153-escalation-never.jsonl",
        ProviderKind::Codex,
    );
    assert_eq!(
        kinds(&evs),
        ["turn_started", "turn_completed", "turn_started"]
    );
}

#[test]
fn a_decided_answer_appended_again_is_no_second_turn() {
    let evs = replay(
        "synthetic-claude-2288-repeated-record.jsonl",
        ProviderKind::Claude,
    );
    // Before: the copy on line 4 started a system turn keyed by it and completed it
    // (two "your turn" pages for one answer).
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    assert_eq!(evs[1].line, Some(2));
    assert_eq!(evs[1].evidence.as_deref(), Some("stop_reason"));
}

#[test]
fn a_windows_start_directory_names_the_project_by_its_last_component() {
    let evs = replay(
        "synthetic-claude-2288-repeated-record.jsonl",
        ProviderKind::Claude,
    );
    // `cwd` is `C:\\Users\\me\\api-server` as JSON writes it. (The turn's start comes
    // before the record's directory is taken: the completion names the project.)
    assert_eq!(
        evs[1].project.as_deref(),
        Some("api-server"),
        "{:?}",
        evs[1]
    );
}

/// A two-record Claude session whose first record carries `cwd_field` as written.
fn claude_with_cwd(cwd_field: &str) -> Vec<u8> {
    let s = "9a1b2c3d-0000-4000-8000-00000000000a";
    format!(
        "{{\"type\":\"user\",\"sessionId\":\"{s}\",\"uuid\":\"u1\",{cwd_field},\"timestamp\":\"2026-11-20T09:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"hi\"}}}}\n\
         {{\"type\":\"assistant\",\"sessionId\":\"{s}\",\"uuid\":\"a1\",\"timestamp\":\"2026-11-20T09:00:02.000Z\",\"message\":{{\"id\":\"m1\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"hello\"}}],\"stop_reason\":\"end_turn\"}}}}\n"
    )
    .into_bytes()
}

fn project_of(cwd_field: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let evs = replay_bytes(
        dir.path(),
        "projects/p/9a1b2c3d-0000-4000-8000-00000000000a.jsonl",
        ProviderKind::Claude,
        &claude_with_cwd(cwd_field),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    evs[1].project.clone()
}

#[test]
fn the_start_directory_is_read_from_the_parsed_record_however_it_is_written() {
    // Spaces around the colon: valid JSON that a byte search for `"cwd":"` missed.
    assert_eq!(
        project_of(r#""cwd" :  "/home/me/src/my-web-app""#).as_deref(),
        Some("my-web-app")
    );
    // Escaped characters.
    assert_eq!(
        project_of(r#""cwd":"/home/me/caf\u00e9 \"beta\"""#).as_deref(),
        Some("café \"beta\"")
    );
    // Longer than the 128 bytes the byte search gave up at; the name is cut for
    // display only.
    let deep = format!("/home/me/{}/api-server", "nested/".repeat(40));
    assert_eq!(
        project_of(&format!(r#""cwd":"{deep}""#)).as_deref(),
        Some("api-server")
    );
    // A `cwd` that is no string is no start directory, and the record still counts.
    assert_eq!(project_of(r#""cwd":42"#), None);
    // The text of a message never names the project.
    assert_eq!(project_of(r#""note":"see \"cwd\":\"/etc\" below""#), None);
}
