//! Cursor agent, GitHub Copilot CLI and Pi: the real Pi session, the synthetic Cursor and
//! Copilot fixtures (tests/fixtures/{cursor,copilot}, sources in their README), and the
//! seed 004 defensive cases for each (partial last line, malformed line, oversized line,
//! NUL run). Truncation and rewrite are in tests/agents_daemon.rs, on the real daemon.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{SETTLE_MS, kinds, lines, options, replay_bytes, replay_files};
use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, EventKind, ProviderKind};
use baton::reduce::Reducer;
use baton::watch::{self, Root};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Every transcript under `dir`, detected without a provider hint, replayed.
fn replay_dir(dir: &Path) -> Vec<Event> {
    let found = watch::find(&Root {
        path: dir.to_path_buf(),
        provider: None,
    });
    let files: Vec<_> = found.into_iter().map(|f| (f.path, f.provider)).collect();
    replay_files(&files, &options(SETTLE_MS))
}

/// (event, turn, line, reason, evidence) for terse comparisons.
fn brief(evs: &[Event]) -> Vec<(&'static str, String, u64, String, String)> {
    evs.iter()
        .map(|e| {
            (
                e.event.as_str(),
                e.turn.clone().unwrap_or_default(),
                e.line.unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.evidence.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn row(
    ev: &'static str,
    turn: &str,
    line: u64,
    reason: &str,
    evidence: &str,
) -> (&'static str, String, u64, String, String) {
    (
        ev,
        turn.to_owned(),
        line,
        reason.to_owned(),
        evidence.to_owned(),
    )
}

// ---- Pi: the real session ----

#[test]
fn pi_corpus_session_is_three_turns_done_aborted_done() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let evs = replay_dir(&corpus.join("pi"));
    assert!(evs.iter().all(|e| e.provider == Some(ProviderKind::Pi)));
    assert!(
        evs.iter()
            .all(|e| e.session.as_deref() == Some("019dd55d-99a4-7344-aa11-d1d71d2c80fb"))
    );
    // Read by hand: user (line 4) → assistant stop (5); user (6) → toolUse rounds with
    // results (7-12) → assistant `aborted`, "Operation aborted" (13); user (14) →
    // assistant stop (15).
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "6d0d90ef", 4, "", ""),
            row("turn_completed", "6d0d90ef", 5, "", "stop_reason"),
            row("turn_started", "7c6bbffc", 6, "", ""),
            row("turn_interrupted", "7c6bbffc", 13, "aborted", ""),
            row("turn_started", "8483d2e9", 14, "", ""),
            row("turn_completed", "8483d2e9", 15, "", "stop_reason"),
        ]
    );
    assert_eq!(evs[3].message.as_deref(), Some("Operation aborted"));
    assert_eq!(
        evs[3].record_ts.as_deref(),
        Some("2026-04-28T18:35:15.859Z")
    );
    assert!(
        evs[5]
            .message
            .as_deref()
            .unwrap()
            .starts_with("Based on that page")
    );
}

#[test]
fn pi_corpus_session_passes_check() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("check")
        .arg(corpus.join("pi"))
        .output()
        .unwrap();
    // Read by hand: every toolCall has its toolResult and every parentId names the
    // entry before it.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "No problems found in 1 file.\n"
    );
    assert!(out.status.success());
}

// ---- Cursor: synthetic fixtures ----

#[test]
fn cursor_turn_ended_decides_each_outcome_and_time_is_the_files() {
    let dir = fixture("cursor/agent-transcripts/synthetic-0001");
    let main = dir.join("synthetic-0001.jsonl");
    // Records carry no time: replay takes the file's modification time.
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_millis(1_790_000_000_123);
    std::fs::File::options()
        .write(true)
        .open(&main)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let evs: Vec<Event> = replay_dir(&dir)
        .into_iter()
        .filter(|e| e.agent.is_none())
        .collect();
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "#1", 1, "", ""),
            row("turn_completed", "#1", 6, "", "turn_ended"),
            row("turn_started", "#2", 7, "", ""),
            row("turn_interrupted", "#2", 9, "aborted", ""),
            row("turn_started", "#3", 10, "", ""),
            row("turn_failed", "#3", 12, "error", ""),
        ]
    );
    assert!(evs.iter().all(|e| e.provider == Some(ProviderKind::Cursor)));
    assert!(evs.iter().all(|e| e.record_ts.is_none()));
    assert!(evs.iter().all(|e| e.ts == "2026-09-21T14:13:20.123Z"));
    assert_eq!(
        evs[1].message.as_deref(),
        Some("Added the test; it passes.")
    );
    assert!(
        evs[5]
            .message
            .as_deref()
            .unwrap()
            .starts_with("Connection failed.")
    );
}

#[test]
fn cursor_subagent_file_is_its_own_agent() {
    let dir = fixture("cursor/agent-transcripts/synthetic-0001");
    let evs: Vec<Event> = replay_dir(&dir)
        .into_iter()
        .filter(|e| e.agent.is_some())
        .collect();
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "#1", 1, "", ""),
            row("turn_completed", "#1", 4, "", "turn_ended"),
        ]
    );
    assert!(
        evs.iter()
            .all(|e| e.agent.as_deref() == Some("synthetic-sub-a")
                && e.session.as_deref() == Some("synthetic-0001"))
    );
    assert_eq!(evs[0].initiator, Some("agent"));
}

#[test]
fn cursor_file_without_turn_ended_settles_on_the_next_prompt_or_quiet() {
    let evs = replay_dir(&fixture("cursor/agent-transcripts/synthetic-0002"));
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "#1", 1, "", ""),
            row("turn_completed", "#1", 2, "", "next_prompt"),
            row("turn_started", "#2", 3, "", ""),
            row("turn_completed", "#2", 5, "", "quiet"),
        ]
    );
}

// ---- Copilot CLI: synthetic fixture ----

#[test]
fn copilot_rounds_steering_permission_abort_error_and_subagent() {
    let evs = replay_dir(&fixture("copilot/session-state"));
    assert!(evs.iter().all(|e| e.provider == Some(ProviderKind::Copilot)
        && e.session.as_deref() == Some("synthetic-0001")));
    let main: Vec<Event> = evs.iter().filter(|e| e.agent.is_none()).cloned().collect();
    assert_eq!(
        brief(&main),
        vec![
            // Round 1 asked for a tool: its turn_end (line 7) ends nothing; the steering
            // message (line 8) is no new turn; round 2 answers with no tool request.
            row("turn_started", "i-1", 2, "", ""),
            row("turn_completed", "i-1", 10, "", "turn_end"),
            row("turn_started", "i-2", 12, "", ""),
            row("needs_input", "i-2", 15, "permission:shell", ""),
            // The permission was granted: the wait is over, the turn goes on.
            row("needs_input_resolved", "i-2", 16, "", ""),
            row("turn_interrupted", "i-2", 18, "user initiated", ""),
            row("turn_started", "i-3", 19, "", ""),
            row("turn_failed", "i-3", 21, "rate_limit 429", ""),
            row("turn_started", "i-4", 22, "", ""),
            row("turn_completed", "i-4", 34, "", "turn_end"),
        ]
    );
    assert_eq!(
        main[3].message.as_deref(),
        Some("Delete the build directory")
    );
    assert_eq!(
        main[1].message.as_deref(),
        Some("Fixed the off-by-one in parse(); docs updated.")
    );
    assert_eq!(
        main[1].record_ts.as_deref(),
        Some("2026-11-01T10:00:10.000Z")
    );
    // The subagent's records carry `agentId`: its own turn, begun by its first record.
    let sub: Vec<Event> = evs.iter().filter(|e| e.agent.is_some()).cloned().collect();
    assert_eq!(
        brief(&sub),
        vec![
            row("turn_started", "sa-1", 27, "", ""),
            row("turn_completed", "sa-1", 28, "", "turn_end"),
        ]
    );
    assert!(sub.iter().all(|e| e.agent.as_deref() == Some("sa-1")));
    assert_eq!(sub[0].initiator, Some("agent"));
    assert_eq!(
        sub[1].message.as_deref(),
        Some("Three crates: core, cli and web.")
    );
}

// ---- Builders for the defensive cases ----

fn pi_rec(id: &str, sec: u32, message: serde_json::Value) -> String {
    json!({"type": "message", "id": id, "parentId": null,
        "timestamp": format!("2026-05-01T10:00:{sec:02}.000Z"), "message": message})
    .to_string()
}

fn pi_user(id: &str, sec: u32, text: &str) -> String {
    pi_rec(
        id,
        sec,
        json!({"role": "user", "content": [{"type": "text", "text": text}]}),
    )
}

fn pi_answer(id: &str, sec: u32, text: &str) -> String {
    pi_rec(
        id,
        sec,
        json!({"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"}),
    )
}

fn pi_tool_result(id: &str, sec: u32, output: &str) -> String {
    pi_rec(
        id,
        sec,
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
            "content": [{"type": "text", "text": output}], "isError": false}),
    )
}

const PI_HEADER: &str = r#"{"type":"session","version":3,"id":"pi-s","timestamp":"2026-05-01T10:00:00.000Z","cwd":"/w"}"#;
const PI_NAME: &str = "2026-05-01T10-00-00-000Z_pi-s.jsonl";

fn cursor_user(text: &str) -> String {
    json!({"role": "user", "message": {"content": [{"type": "text", "text": text}]}}).to_string()
}

fn cursor_text(text: &str) -> String {
    json!({"role": "assistant", "message": {"content": [{"type": "text", "text": text}]}})
        .to_string()
}

const CURSOR_DONE: &str = r#"{"type":"turn_ended","status":"success"}"#;
const CURSOR_NAME: &str = "agent-transcripts/cs/cs.jsonl";

fn copilot(id: &str, sec: u32, ty: &str, data: serde_json::Value) -> String {
    json!({"type": ty, "data": data, "id": id,
        "timestamp": format!("2026-05-01T10:00:{sec:02}.000Z"), "parentId": null})
    .to_string()
}

fn copilot_user(id: &str, sec: u32, interaction: &str) -> String {
    copilot(
        id,
        sec,
        "user.message",
        json!({"content": "go", "interactionId": interaction}),
    )
}

fn copilot_answer(id: &str, sec: u32, text: &str) -> String {
    copilot(
        id,
        sec,
        "assistant.message",
        json!({"messageId": id, "content": text, "toolRequests": []}),
    )
}

fn copilot_turn_end(id: &str, sec: u32) -> String {
    copilot(id, sec, "assistant.turn_end", json!({"turnId": "0"}))
}

const COPILOT_NAME: &str = "cp-s/events.jsonl";

/// One provider's records for the defensive cases: a prompt, an answer that ends the turn
/// (one or two lines), and a record that is big when `big` is.
struct Case {
    provider: ProviderKind,
    name: &'static str,
    head: Vec<String>,
    prompt: String,
    done: Vec<String>,
    big: fn(usize) -> String,
    /// The line of the completion when `done` starts on line `n`.
    done_line: fn(u64) -> u64,
    evidence: &'static str,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            provider: ProviderKind::Pi,
            name: PI_NAME,
            head: vec![PI_HEADER.to_owned()],
            prompt: pi_user("u1", 1, "hi"),
            done: vec![pi_answer("a1", 5, "All set — ✓ done.")],
            big: |n| pi_tool_result("r1", 3, &"x".repeat(n)),
            done_line: |n| n,
            evidence: "stop_reason",
        },
        Case {
            provider: ProviderKind::Cursor,
            name: CURSOR_NAME,
            head: Vec::new(),
            prompt: cursor_user("<user_query>hi</user_query>"),
            done: vec![cursor_text("All set — ✓ done."), CURSOR_DONE.to_owned()],
            big: |n| cursor_text(&"y".repeat(n)),
            done_line: |n| n + 1,
            evidence: "turn_ended",
        },
        Case {
            provider: ProviderKind::Copilot,
            name: COPILOT_NAME,
            head: vec![copilot(
                "h0",
                0,
                "session.start",
                json!({"sessionId": "cp-s"}),
            )],
            prompt: copilot_user("u1", 1, "i1"),
            done: vec![
                copilot_answer("a1", 5, "All set — ✓ done."),
                copilot_turn_end("e1", 6),
            ],
            big: |n| {
                copilot(
                    "t1",
                    3,
                    "tool.execution_complete",
                    json!({"toolCallId": "c1", "success": true, "result": {"content": "z".repeat(n)}}),
                )
            },
            // Copilot's completion sits on the answer, which turn_end confirms.
            done_line: |n| n,
            evidence: "turn_end",
        },
    ]
}

fn completed(evs: &[Event]) -> Vec<&Event> {
    evs.iter()
        .filter(|e| e.event == EventKind::TurnCompleted)
        .collect()
}

// ---- seed 004: a malformed line does not stop later records ----

#[test]
fn malformed_line_is_an_anomaly_and_the_turn_still_completes() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let mut recs = c.head.clone();
        recs.push(c.prompt.clone());
        let mut bytes = lines(&recs);
        bytes.extend_from_slice(b"{\"type\":\"message\",\"message\":{\"role\":\"assis\n");
        bytes.extend_from_slice(b"\xff\xfe garbage\n");
        let first_done = recs.len() as u64 + 3;
        bytes.extend(lines(&c.done));
        let evs = replay_bytes(dir.path(), c.name, c.provider, &bytes, &options(SETTLE_MS));
        assert_eq!(
            kinds(&evs),
            ["turn_started", "anomaly", "anomaly", "turn_completed"],
            "{:?}",
            c.provider
        );
        assert_eq!(evs[1].reason.as_deref(), Some("malformed_line"));
        assert_eq!(evs[2].reason.as_deref(), Some("malformed_line"));
        assert_eq!(
            evs[3].line,
            Some((c.done_line)(first_done)),
            "{:?}",
            c.provider
        );
        assert_eq!(evs[3].evidence.as_deref(), Some(c.evidence));
    }
}

// ---- seed 004: a partial last line is read once its newline arrives ----

#[test]
fn partial_last_line_completes_the_turn_after_the_next_append() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(c.name);
        let mut reducer = Reducer::new(SETTLE_MS, 1024);
        let mut feed = FileFeed::new(&path, c.provider, baton::tail::DEFAULT_MAX_LINE_BYTES);
        let mut recs = c.head.clone();
        recs.push(c.prompt.clone());
        let mut done = lines(&c.done);
        // Cut inside the multi-byte check mark of the answer.
        let cut = done.windows(3).position(|w| w == "✓".as_bytes()).unwrap() + 1;
        let mut first = lines(&recs);
        first.extend_from_slice(&done[..cut]);
        let rest = done.split_off(cut);
        let mut clock = 0;
        let mut run = |feed: &mut FileFeed, bytes: &[u8]| {
            let mut out = Vec::new();
            feed.feed(bytes, |src, obs| {
                if let Some(t) = obs.record_ts {
                    clock = t.max(clock);
                }
                reducer.apply(src, obs, Now::virtual_at(clock), &mut out);
            });
            out
        };
        let evs = run(&mut feed, &first);
        assert_eq!(kinds(&evs), ["turn_started"], "{:?}", c.provider);
        let evs = run(&mut feed, &rest);
        assert_eq!(kinds(&evs), ["turn_completed"], "{:?}", c.provider);
        assert_eq!(evs[0].message.as_deref(), Some("All set — ✓ done."));
        assert!(!evs.iter().any(|e| e.event == EventKind::Anomaly));
    }
}

// ---- seed 004: an oversized line is skipped, reported, and later records count ----

#[test]
fn oversized_line_is_reported_and_later_records_count() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let mut recs = c.head.clone();
        recs.push(c.prompt.clone());
        recs.push((c.big)(50_000));
        let big_line = recs.len() as u64;
        recs.extend(c.done.iter().cloned());
        let mut opts = options(SETTLE_MS);
        opts.max_line = 4096;
        let evs = replay_bytes(dir.path(), c.name, c.provider, &lines(&recs), &opts);
        assert_eq!(
            kinds(&evs),
            ["turn_started", "anomaly", "turn_completed"],
            "{:?}",
            c.provider
        );
        assert_eq!(evs[1].reason.as_deref(), Some("oversized_line"));
        assert_eq!(evs[1].line, Some(big_line));
        assert_eq!(evs[2].line, Some((c.done_line)(big_line + 1)));
    }
}

#[test]
fn oversized_line_after_an_answer_keeps_quiet_from_confirming_it() {
    // Cursor files without turn_ended settle on quiet: a skipped line between the answer
    // and the end counts as activity, so the quiet period is measured from after it.
    let dir = tempfile::tempdir().unwrap();
    let recs = [
        cursor_user("hi"),
        cursor_text("Looking."),
        cursor_text(&"y".repeat(10_000)),
        cursor_text("Done."),
    ];
    let mut opts = options(SETTLE_MS);
    opts.max_line = 4096;
    let evs = replay_bytes(
        dir.path(),
        CURSOR_NAME,
        ProviderKind::Cursor,
        &lines(&recs),
        &opts,
    );
    let done = completed(&evs);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].line, Some(4));
    assert_eq!(done[0].message.as_deref(), Some("Done."));
}

// ---- seed 004: a NUL run left by a crashed writer ----

#[test]
fn nul_run_before_a_record_is_stripped_and_the_record_counts() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let mut recs = c.head.clone();
        recs.push(c.prompt.clone());
        let mut bytes = lines(&recs);
        let first_done = recs.len() as u64 + 1;
        bytes.extend(std::iter::repeat_n(0u8, 4096));
        bytes.extend(lines(&c.done));
        let evs = replay_bytes(dir.path(), c.name, c.provider, &bytes, &options(SETTLE_MS));
        assert_eq!(
            kinds(&evs),
            ["turn_started", "anomaly", "turn_completed"],
            "{:?}",
            c.provider
        );
        assert_eq!(evs[1].reason.as_deref(), Some("nul_bytes"));
        assert_eq!(evs[2].line, Some((c.done_line)(first_done)));
    }
}

// ---- Default roots ----

#[test]
fn default_roots_are_found_by_scan_and_follow_the_environment() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let write = |rel: &str, recs: &[String]| {
        let p = h.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, lines(recs)).unwrap();
    };
    write(
        ".cursor/projects/home-u-web/agent-transcripts/c1/c1.jsonl",
        &[cursor_user("hi"), cursor_text("ok"), CURSOR_DONE.to_owned()],
    );
    // Cursor's projects folder holds more than transcripts; only agent-transcripts count.
    write(
        ".cursor/projects/home-u-web/other/c2.jsonl",
        &[cursor_user("hi")],
    );
    write(
        "copilot-home/session-state/cp1/events.jsonl",
        &[copilot_user("u1", 1, "i1")],
    );
    write(
        "pi-sessions/--w--/2026-05-01T10-00-00-000Z_p1.jsonl",
        &[PI_HEADER.to_owned(), pi_user("u1", 1, "hi")],
    );
    // Not where the environment points: not read.
    write(
        ".copilot/session-state/cp-default/events.jsonl",
        &[copilot_user("u1", 1, "i1")],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--json"])
        .env("HOME", h)
        .env("COPILOT_HOME", h.join("copilot-home"))
        .env("PI_CODING_AGENT_SESSION_DIR", h.join("pi-sessions"))
        .env("PI_CODING_AGENT_DIR", h.join("unused"))
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    common::assert_ok(&out);
    let mut got: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["provider"].as_str().unwrap_or_default().to_owned(),
                v["session"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("copilot".to_owned(), "cp1".to_owned()),
            ("cursor".to_owned(), "c1".to_owned()),
            ("pi".to_owned(), "pi-s".to_owned()),
        ]
    );
}

// ---- check ----

#[test]
fn check_audits_each_new_provider() {
    let dir = tempfile::tempdir().unwrap();
    let pi = dir.path().join(PI_NAME);
    std::fs::write(
        &pi,
        lines(&[
            PI_HEADER.to_owned(),
            r#"{"type":"message","id":"a1","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"c1"}],"stopReason":"toolUse"}}"#.to_owned(),
            r#"{"type":"message","id":"u2","parentId":"zz","message":{"role":"user","content":"next"}}"#.to_owned(),
        ]),
    )
    .unwrap();
    let cp = dir.path().join("cp/events.jsonl");
    std::fs::create_dir_all(cp.parent().unwrap()).unwrap();
    let mut recs = vec![copilot(
        "h0",
        0,
        "session.start",
        json!({"sessionId": "cp"}),
    )];
    recs.push(copilot(
        "m1",
        1,
        "assistant.message",
        json!({"messageId": "m1", "content": "", "toolRequests": [{"toolCallId": "t9"}]}),
    ));
    recs.push(copilot_user("u2", 2, "i2"));
    let mut bytes = lines(&recs);
    bytes.extend_from_slice(b"{\"type\":\"abort\",\n");
    std::fs::write(&cp, bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["check", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let file = Path::new(v["path"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            format!("{file}:{} {}", v["line"], v["kind"].as_str().unwrap())
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            format!("{PI_NAME}:2 dangling_tool_call"),
            format!("{PI_NAME}:3 parent_chain_break"),
            "events.jsonl:2 dangling_tool_call".to_owned(),
            "events.jsonl:4 malformed_line".to_owned(),
        ]
    );
    // The fixtures are clean.
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("check")
        .arg(fixture("cursor"))
        .arg(fixture("copilot"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "No problems found in 4 files.\n"
    );
}
