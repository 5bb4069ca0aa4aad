//! The eight tests of seed 004 (shared/seeds/004_*.txt), on both providers.
//! Each asserts events out for transcript bytes in.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{SETTLE_MS, claude, codex, kinds, lines, options, replay_bytes};
use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, EventKind, ProviderKind};
use baton::reduce::Reducer;
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A file being written while baton follows it: appends are read from the feed's own
/// offset, as the daemon does.
struct Live {
    path: PathBuf,
    feed: FileFeed,
    reducer: Reducer,
    clock: i64,
}

impl Live {
    fn new(dir: &Path, name: &str, provider: ProviderKind) -> Self {
        let path = dir.join(name);
        std::fs::write(&path, b"").unwrap();
        Live {
            feed: FileFeed::new(&path, provider, baton::tail::DEFAULT_MAX_LINE_BYTES),
            path,
            reducer: Reducer::new(SETTLE_MS, 1024),
            clock: 0,
        }
    }

    fn append(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut f = OpenOptions::new().append(true).open(&self.path).unwrap();
        f.write_all(bytes).unwrap();
        self.read()
    }

    fn read(&mut self) -> Vec<Event> {
        let mut f = std::fs::File::open(&self.path).unwrap();
        f.seek(SeekFrom::Start(self.feed.reader().pos())).unwrap();
        let mut out = Vec::new();
        let (reducer, clock) = (&mut self.reducer, &mut self.clock);
        self.feed
            .read_to_end(&mut f, |src, obs| {
                if let Some(t) = obs.record_ts {
                    *clock = (*clock).max(t);
                }
                reducer.apply(src, obs, Now::virtual_at(*clock), &mut out);
            })
            .unwrap();
        out
    }
}

fn completions(evs: &[Event]) -> Vec<&Event> {
    evs.iter()
        .filter(|e| e.event == EventKind::TurnCompleted)
        .collect()
}

// ---- 1. A malformed line does not stop later records. ----

#[test]
fn t1_malformed_line_does_not_stop_later_records_claude() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[claude::prompt("u1", 0, "hi")]);
    bytes.extend_from_slice(b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"te\n");
    bytes.extend_from_slice(b"\xff\xfe garbage \x00\n");
    bytes.extend(lines(&[claude::text(
        "a1",
        3,
        "msg_1",
        "Done.",
        Some("end_turn"),
    )]));
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(
        kinds(&evs),
        ["turn_started", "anomaly", "anomaly", "turn_completed"]
    );
    assert_eq!(evs[1].reason.as_deref(), Some("malformed_line"));
    assert_eq!(evs[1].line, Some(2));
    assert_eq!(evs[2].line, Some(3));
    assert_eq!(evs[3].line, Some(4));
    assert_eq!(evs[3].evidence.as_deref(), Some("stop_reason"));
}

#[test]
fn t1_malformed_line_does_not_stop_later_records_codex() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[codex::meta(0), codex::started(1, "t1")]);
    bytes.extend_from_slice(
        b"{\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"type\":\"event_msg\",\"payl\n",
    );
    bytes.extend(lines(&[
        codex::answer(3, "ok"),
        codex::complete(4, "t1", "ok"),
    ]));
    let evs = replay_bytes(
        dir.path(),
        "rollout.jsonl",
        ProviderKind::Codex,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("malformed_line"));
    assert_eq!(evs[2].line, Some(5));
    assert_eq!(evs[2].evidence.as_deref(), Some("task_complete"));
}

// ---- 2. A partial last line becomes readable after the next append. ----

#[test]
fn t2_partial_last_line_readable_after_append_claude() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::new(dir.path(), "s.jsonl", ProviderKind::Claude);
    let done = claude::text("a1", 3, "msg_1", "All set — ✓ done.", Some("end_turn"));
    let mut first = lines(&[claude::prompt("u1", 0, "hi")]);
    // Cut inside the multi-byte check mark.
    let cut = done.find('✓').unwrap() + 1;
    first.extend_from_slice(&done.as_bytes()[..cut]);
    assert_eq!(kinds(&live.append(&first)), ["turn_started"]);
    let mut rest = done.as_bytes()[cut..].to_vec();
    rest.push(b'\n');
    let evs = live.append(&rest);
    assert_eq!(kinds(&evs), ["turn_completed"]);
    assert_eq!(evs[0].line, Some(2));
    assert_eq!(evs[0].message.as_deref(), Some("All set — ✓ done."));
}

#[test]
fn t2_partial_last_line_readable_after_append_codex() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::new(dir.path(), "rollout.jsonl", ProviderKind::Codex);
    let done = codex::complete(4, "t1", "fin");
    let mut first = lines(&[codex::meta(0), codex::started(1, "t1")]);
    first.extend_from_slice(&done.as_bytes()[..20]);
    assert_eq!(kinds(&live.append(&first)), ["turn_started"]);
    assert_eq!(
        live.feed.reader().offset(),
        first.len() as u64 - 20,
        "offset stays at the line start"
    );
    let mut rest = done.as_bytes()[20..].to_vec();
    rest.push(b'\n');
    let evs = live.append(&rest);
    assert_eq!(kinds(&evs), ["turn_completed"]);
    assert_eq!(evs[0].message.as_deref(), Some("fin"));
}

// ---- 3. An oversized line follows the documented policy. ----

fn oversized_case(
    provider: ProviderKind,
    before: Vec<String>,
    huge: String,
    after: Vec<String>,
) -> Vec<Event> {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&before);
    bytes.extend_from_slice(huge.as_bytes());
    bytes.push(b'\n');
    bytes.extend(lines(&after));
    let mut opts = options(SETTLE_MS);
    opts.max_line = 4096;
    replay_bytes(dir.path(), "big.jsonl", provider, &bytes, &opts)
}

#[test]
fn t3_oversized_line_is_skipped_reported_and_later_records_count_claude() {
    let big = claude::tool_result("r1", 2, &"x".repeat(100_000));
    let evs = oversized_case(
        ProviderKind::Claude,
        vec![
            claude::prompt("u1", 0, "read it"),
            claude::tool_use("a1", 1, "msg_1", "t1", "Read"),
        ],
        big,
        vec![claude::text("a2", 5, "msg_2", "Read it.", Some("end_turn"))],
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("oversized_line"));
    assert_eq!(evs[1].line, Some(3));
    assert_eq!(evs[2].line, Some(4));
}

#[test]
fn t3_oversized_line_is_skipped_reported_and_later_records_count_codex() {
    let big = codex::event(
        2,
        serde_json::json!({"type":"agent_reasoning","text":"y".repeat(50_000)}),
    );
    let evs = oversized_case(
        ProviderKind::Codex,
        vec![codex::meta(0), codex::started(1, "t1")],
        big,
        vec![codex::complete(9, "t1", "ok")],
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("oversized_line"));
}

#[test]
fn t3_oversized_line_supersedes_a_pending_candidate() {
    // Policy: a skipped line counts as activity in its session, so a candidate before it
    // is not confirmed by a quiet period measured across it.
    let evs = oversized_case(
        ProviderKind::Claude,
        vec![
            claude::prompt("u1", 0, "go"),
            claude::text("a1", 1, "msg_1", "Let me look.", None),
        ],
        claude::tool_result("r1", 2, &"x".repeat(10_000)),
        vec![claude::text(
            "a2",
            300,
            "msg_2",
            "Looked.",
            Some("end_turn"),
        )],
    );
    let done = completions(&evs);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].line, Some(4));
}

// ---- 4. A duplicate event gives no second alert. ----

#[test]
fn t4_duplicate_records_give_no_second_alert_claude() {
    let dir = tempfile::tempdir().unwrap();
    let turn = [
        claude::prompt("u1", 0, "hi"),
        claude::text("a1", 2, "msg_1", "Hello.", Some("end_turn")),
    ];
    // A resumed session copies the same records (same uuids) again.
    let mut records = turn.to_vec();
    records.extend(turn.iter().cloned());
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
}

#[test]
fn t4_re_reading_a_file_gives_no_second_alert_codex() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout.jsonl");
    std::fs::write(
        &path,
        lines(&[
            codex::meta(0),
            codex::started(1, "t1"),
            codex::complete(3, "t1", "ok"),
        ]),
    )
    .unwrap();
    // The same file twice through one reducer: the second pass is a re-read.
    let evs = common::replay_files(
        &[
            (path.clone(), ProviderKind::Codex),
            (path, ProviderKind::Codex),
        ],
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
}

// ---- 5. Later user activity supersedes an earlier completion. ----

#[test]
fn t5_later_activity_supersedes_a_candidate_claude() {
    let dir = tempfile::tempdir().unwrap();
    // 2.1.3x: every stop_reason is null. Text, then a tool call of the same message 40 s
    // later (the measured long tail), then the real final answer.
    let records = [
        claude::prompt("u1", 0, "fix it"),
        claude::text("a1", 1, "msg_1", "Now I'll write the file.", None),
        claude::tool_use("a2", 41, "msg_1", "t1", "Write"),
        claude::tool_result("r1", 42, "t1"),
        claude::text("a3", 50, "msg_2", "Written.", None),
    ];
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    let done = completions(&evs);
    assert_eq!(done.len(), 1, "{evs:?}");
    assert_eq!(done[0].line, Some(5));
    assert_eq!(done[0].evidence.as_deref(), Some("quiet"));
}

#[test]
fn t5_next_prompt_completes_the_previous_turn_first_claude() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        claude::prompt("u1", 0, "one"),
        claude::text("a1", 1, "msg_1", "First answer.", None),
        claude::prompt("u2", 10, "two"),
    ];
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(
        kinds(&evs),
        ["turn_started", "turn_completed", "turn_started"]
    );
    assert_eq!(evs[1].evidence.as_deref(), Some("next_prompt"));
    assert_eq!(evs[1].turn.as_deref(), Some("u1"));
    assert_eq!(evs[1].line, Some(2));
    assert_eq!(evs[2].turn.as_deref(), Some("u2"));
}

#[test]
fn t5_later_activity_supersedes_a_candidate_codex() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        codex::meta(0),
        codex::started(1, "t1"),
        codex::answer(2, "done?"),
        codex::call(3, "c1"),
        codex::output(4, "c1"),
        codex::answer(5, "done."),
        codex::complete(6, "t1", "done."),
    ];
    // With the default settle the candidate is superseded before it is confirmed.
    let evs = replay_bytes(
        dir.path(),
        "rollout.jsonl",
        ProviderKind::Codex,
        &lines(&records),
        &options(SETTLE_MS),
    );
    let done = completions(&evs);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].line, Some(7));
}

// ---- 6. An API-error envelope never becomes a completion. ----

#[test]
fn t6_api_error_envelope_is_a_failure_not_a_completion_claude() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        claude::prompt("u1", 0, "go"),
        claude::api_error("e1", 2, "You've hit your session limit · resets 5:40pm (Europe/Madrid)"),
        r#"{"type":"system","subtype":"turn_duration","durationMs":31000,"uuid":"d1","timestamp":"2026-03-01T10:00:03.000Z","sessionId":"11111111-2222-4333-8444-555555555555"}"#.to_owned(),
    ];
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_failed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("rate_limit"));
    assert_eq!(evs[1].resets_at.as_deref(), Some("5:40pm (Europe/Madrid)"));
}

#[test]
fn t6_legacy_usage_limit_text_is_a_failure_claude() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        claude::prompt("u1", 0, "go"),
        claude::text(
            "a1",
            2,
            "msg_1",
            "Claude AI usage limit reached|1751997600",
            None,
        ),
    ];
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_failed"]);
    assert_eq!(
        evs[1].resets_at.as_deref(),
        Some("2025-07-08T18:00:00.000Z")
    );
}

#[test]
fn t6_task_complete_with_error_is_a_failure_codex() {
    let dir = tempfile::tempdir().unwrap();
    let err = codex::event(
        5,
        serde_json::json!({"type":"task_complete","turn_id":"t1","last_agent_message":null,"error":{"message":"You’ve hit your usage limit. try again at 10:45 PM.","codex_error_info":"usage_limit_exceeded"}}),
    );
    let records = [codex::meta(0), codex::started(1, "t1"), err];
    let evs = replay_bytes(
        dir.path(),
        "rollout.jsonl",
        ProviderKind::Codex,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_failed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("usage_limit_exceeded"));
}

#[test]
fn t6_stream_error_is_a_retry_not_an_end_codex() {
    let dir = tempfile::tempdir().unwrap();
    let retry = codex::event(
        2,
        serde_json::json!({"type":"stream_error","message":"Reconnecting... 1/4"}),
    );
    let records = [
        codex::meta(0),
        codex::started(1, "t1"),
        retry,
        codex::complete(9, "t1", "ok"),
    ];
    let evs = replay_bytes(
        dir.path(),
        "rollout.jsonl",
        ProviderKind::Codex,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
}

// ---- 7. A sidechain's end does not page for the parent session. ----

#[test]
fn t7_inline_sidechain_end_is_the_subagents_not_the_parents_claude() {
    let dir = tempfile::tempdir().unwrap();
    let records = [
        claude::prompt("u1", 0, "research"),
        claude::tool_use("a1", 1, "msg_1", "task1", "Task"),
        claude::sidechain_prompt("s1", 2, "look things up"),
        claude::sidechain_text("s2", Some("s1"), 5, "Found it.", Some("end_turn")),
        claude::tool_result("r1", 6, "task1"),
    ];
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    let done = completions(&evs);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].agent.as_deref(), Some("side-s1"));
    // The main conversation is still working: no completion without an agent.
    assert!(
        evs.iter()
            .all(|e| e.agent.is_some() || e.event != EventKind::TurnCompleted)
    );
}

#[test]
fn t7_subagent_file_end_carries_its_agent_claude() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("{}/subagents/agent-a881341.jsonl", claude::SESSION);
    let records = [
        claude::sidechain_prompt("s1", 0, "look"),
        claude::sidechain_text("s2", Some("s1"), 3, "Found.", Some("end_turn")),
    ];
    let evs = replay_bytes(
        dir.path(),
        &name,
        ProviderKind::Claude,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    assert!(evs.iter().all(|e| e.agent.as_deref() == Some("a881341")));
    assert!(
        evs.iter()
            .all(|e| e.session.as_deref() == Some(claude::SESSION))
    );
}

#[test]
fn t7_child_rollout_end_carries_its_agent_codex() {
    let dir = tempfile::tempdir().unwrap();
    let child = "019c0000-0000-7000-8000-0000000000c1";
    let records = [
        codex::child_meta(0, child),
        codex::started(1, "ct1"),
        codex::complete(4, "ct1", "child done"),
    ];
    let evs = replay_bytes(
        dir.path(),
        "rollout-child.jsonl",
        ProviderKind::Codex,
        &lines(&records),
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"]);
    assert!(evs.iter().all(|e| e.agent.as_deref() == Some(child)));
    assert!(
        evs.iter()
            .all(|e| e.session.as_deref() == Some(codex::SESSION))
    );
}

// ---- 8. Polling recovers missed watcher events (the reader's part). ----

#[test]
fn t8_reading_again_from_a_saved_offset_picks_up_missed_bytes_claude() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::new(dir.path(), "s.jsonl", ProviderKind::Claude);
    assert_eq!(
        kinds(&live.append(&lines(&[claude::prompt("u1", 0, "hi")]))),
        ["turn_started"]
    );
    // Bytes land while no one looks (a dropped watcher event)...
    let mut f = OpenOptions::new().append(true).open(&live.path).unwrap();
    f.write_all(&lines(&[claude::text(
        "a1",
        2,
        "msg_1",
        "Hi.",
        Some("end_turn"),
    )]))
    .unwrap();
    // ...and the next poll reads from the committed offset.
    let evs = live.read();
    assert_eq!(kinds(&evs), ["turn_completed"]);
    assert_eq!(evs[0].line, Some(2));
}

#[test]
fn t8_reading_again_from_a_saved_offset_picks_up_missed_bytes_codex() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout.jsonl");
    let head = lines(&[codex::meta(0), codex::started(1, "t1")]);
    std::fs::write(&path, &head).unwrap();
    let mut live = Live::new(dir.path(), "unused.jsonl", ProviderKind::Codex);
    live.path = path.clone();
    live.feed = FileFeed::new(&path, ProviderKind::Codex, 1 << 20);
    assert_eq!(kinds(&live.read()), ["turn_started"]);
    let (offset, line_no) = (live.feed.reader().offset(), live.feed.reader().line_no());
    assert_eq!(offset, head.len() as u64);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&lines(&[codex::complete(5, "t1", "ok")]))
        .unwrap();
    // A fresh feed resumed from the saved checkpoint (as after a restart) sees the rest.
    live.feed = FileFeed::resume(&path, ProviderKind::Codex, 1 << 20, offset, line_no);
    let evs = live.read();
    assert_eq!(kinds(&evs), ["turn_completed"]);
    assert_eq!(evs[0].line, Some(3));
}
