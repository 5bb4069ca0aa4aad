//! Gemini CLI and Qwen Code: the synthetic fixtures (tests/fixtures/{gemini,qwen}, built
//! from the shapes in shared/docs/other-agents.md; see their README) through replay and
//! `scan`, and the cases that need the wall clock to pass between records (an upsert or a
//! rewind after a quiet completion), driven through the projector and the reducer with a
//! fake clock.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{SETTLE_MS, options, replay_files};
use baton::clock::Now;
use baton::model::{Event, ProviderKind};
use baton::provider::projector_for;
use baton::reduce::{Reducer, Src};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn replay(rel: &str, provider: ProviderKind) -> Vec<Event> {
    replay_files(&[(fixture(rel), provider)], &options(SETTLE_MS))
}

type Row = (&'static str, String, u64, String, String);

fn brief(evs: &[Event]) -> Vec<Row> {
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

fn row(ev: &'static str, turn: &str, line: u64, reason: &str, evidence: &str) -> Row {
    (
        ev,
        turn.to_owned(),
        line,
        reason.to_owned(),
        evidence.to_owned(),
    )
}

const GEMINI_MAIN: &str = "gemini/tmp/proj/chats/session-2026-11-01T10-00-s-main.jsonl";
const GEMINI_REWIND: &str = "gemini/tmp/proj/chats/session-2026-11-01T11-00-s-rewind.jsonl";

#[test]
fn gemini_session_upserts_cancel_rollback_quota_error() {
    let evs = replay(GEMINI_MAIN, ProviderKind::Gemini);
    assert!(evs.iter().all(|e| e.session.as_deref() == Some("s-main")));
    // The root from `tmp/proj/.project_root` (the records hold only its hash).
    assert!(evs.iter().all(|e| e.project.as_deref() == Some("proj")));
    // Read by hand: the session-context checkpoint (2) and the functionResponse record
    // (8) are no prompts; the tool-only answer (5) re-appended with its call (7) is work;
    // the answer (10) is decided by quiet; the cancel note (17) interrupts p2 and the
    // rollback (19) neither reopens nor repeats it; the rollback before the error (22)
    // leaves p3 to the error (23); the model switch note (25) is nothing.
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "p1", 3, "", ""),
            row("turn_completed", "p1", 10, "", "quiet"),
            row("turn_started", "p2", 12, "", ""),
            row("turn_interrupted", "p2", 17, "user", ""),
            row("turn_started", "p3", 20, "", ""),
            row("turn_failed", "p3", 23, "usage_limit", ""),
            row("turn_started", "p4", 26, "", ""),
            row("turn_completed", "p4", 28, "", "quiet"),
        ]
    );
    assert_eq!(
        evs[1].message.as_deref(),
        Some("There are two files: a.txt and b.txt.")
    );
    // "Your quota will reset after 2h." from the error's own time.
    assert_eq!(
        evs[5].resets_at.as_deref(),
        Some("2026-11-01T12:06:02.000Z")
    );
}

#[test]
fn gemini_rewind_before_the_settle_drops_the_pending_answer() {
    let evs = replay(GEMINI_REWIND, ProviderKind::Gemini);
    // q2's answer (9) was pending when `$rewindTo` q2 (11) dropped the turn: it is never
    // completed, and the next prompt does not complete it either.
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "q1", 3, "", ""),
            row("turn_completed", "q1", 5, "", "quiet"),
            row("turn_started", "q2", 7, "", ""),
            row("turn_started", "q3", 13, "", ""),
            row("turn_completed", "q3", 15, "", "quiet"),
        ]
    );
}

#[test]
fn gemini_subagent_file_is_its_parents_agent() {
    let evs = replay(
        "gemini/tmp/proj/chats/s-main/investigator-1.jsonl",
        ProviderKind::Gemini,
    );
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert!(
        evs.iter().all(|e| e.session.as_deref() == Some("s-main")
            && e.agent.as_deref() == Some("investigator-1"))
    );
    assert_eq!(evs[0].initiator, Some("agent"));
}

#[test]
fn qwen_older_build_ends_on_an_answer_and_shows_a_pending_question() {
    let evs = replay("qwen/projects/-w-app/chats/q-old.jsonl", ProviderKind::Qwen);
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "u1", 1, "", ""),
            row("turn_completed", "u1", 5, "", "quiet"),
            row("turn_started", "u2", 6, "", ""),
            row("needs_input", "u2", 7, "ask_user_question", ""),
        ]
    );
    assert_eq!(evs[1].message.as_deref(), Some("Added tests/parse.rs."));
    assert_eq!(evs[3].message.as_deref(), Some("Red or blue?"));
    assert!(evs.iter().all(|e| e.project.as_deref() == Some("app")));
}

#[test]
fn qwen_turn_results_decide_and_a_rewind_retracts_the_dead_branch() {
    let evs = replay("qwen/projects/-w-app/chats/q-new.jsonl", ProviderKind::Qwen);
    assert_eq!(
        brief(&evs),
        vec![
            row("turn_started", "u1", 1, "", ""),
            row("turn_completed", "u1", 3, "", "turn_result"),
            row("turn_started", "u2", 4, "", ""),
            row("turn_completed", "u2", 6, "", "turn_result"),
            row("turn_retracted", "u2", 7, "rewound", ""),
            row("turn_started", "u3", 8, "", ""),
            row("turn_interrupted", "u3", 11, "user", ""),
            row("turn_started", "u4", 12, "", ""),
            row("turn_failed", "u4", 13, "usage_limit", ""),
        ]
    );
    assert_eq!(evs[4].supersedes.as_deref(), Some(evs[3].id.as_str()));
    assert_eq!(evs[8].resets_at.as_deref(), Some("12:30 PM"));
}

#[test]
fn qwen_background_subagent_is_no_main_turn() {
    let evs = replay(
        "qwen/projects/-w-app/subagents/q-new/agent-explore-1.jsonl",
        ProviderKind::Qwen,
    );
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert!(
        evs.iter()
            .all(|e| e.session.as_deref() == Some("q-new")
                && e.agent.as_deref() == Some("explore-1"))
    );
}

#[test]
fn scan_shows_each_sessions_state() {
    for (provider, dir, want) in [
        (
            "qwen",
            "qwen",
            vec![("q-new", "failed"), ("q-old", "needs_input")],
        ),
        (
            "gemini",
            "gemini",
            vec![("s-main", "completed"), ("s-rewind", "completed")],
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["scan", "--json", "--all", "--provider", provider])
            .arg(fixture(dir))
            .output()
            .unwrap();
        let mut got: Vec<(String, String)> = common::json_lines(&out)
            .iter()
            .filter(|r| r["agent"].is_null())
            .map(|r| {
                (
                    r["session"].as_str().unwrap_or_default().to_owned(),
                    r["state"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        got.sort();
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(s, st)| (s.to_owned(), st.to_owned()))
            .collect();
        assert_eq!(got, want, "{provider}");
    }
}

/// Lines fed one by one at the given wall times (Unix ms), the reducer ticked before each;
/// then the clock runs on to `end`.
fn drive(
    reducer: &mut Reducer,
    provider: ProviderKind,
    path: &str,
    lines: &[(&str, i64)],
    end: i64,
) -> Vec<Event> {
    let mut p = projector_for(provider, Path::new(path));
    let path: Arc<str> = Arc::from(path);
    let mut events = Vec::new();
    for (i, (line, at)) in lines.iter().enumerate() {
        let now = Now::virtual_at(*at);
        reducer.tick(now, &mut events);
        let mut obs = Vec::new();
        p.project(line.as_bytes(), &mut obs).unwrap();
        let src = Src {
            provider,
            path: path.clone(),
            line: i as u64 + 1,
        };
        for o in obs {
            reducer.apply(&src, o, now, &mut events);
        }
    }
    reducer.tick(Now::virtual_at(end), &mut events);
    events
}

const G_PATH: &str = "/h/.gemini/tmp/proj/chats/session-2026-11-01T10-00-s-1.jsonl";
const G_HEADER: &str = r#"{"sessionId":"s-1","projectHash":"ab","startTime":"2026-11-01T10:00:00.000Z","lastUpdated":"2026-11-01T10:00:00.000Z","kind":"main"}"#;
const G_PROMPT: &str =
    r#"{"id":"p1","timestamp":"2026-11-01T10:00:00.000Z","type":"user","content":"Fix it."}"#;
const G_ANSWER: &str = r#"{"id":"g1","timestamp":"2026-11-01T10:00:05.000Z","type":"gemini","content":"I'll edit main.rs."}"#;
const G_ANSWER_TOOLS: &str = r#"{"id":"g1","timestamp":"2026-11-01T10:00:05.000Z","type":"gemini","content":"I'll edit main.rs.","toolCalls":[{"id":"c1","name":"replace","args":{},"status":"success"}]}"#;
const G_FINAL: &str =
    r#"{"id":"g2","timestamp":"2026-11-01T10:05:02.000Z","type":"gemini","content":"Fixed."}"#;
const T0: i64 = 1_793_527_200_000; // 2026-11-01T10:00:00Z

#[test]
fn gemini_upsert_after_a_quiet_completion_takes_it_back_and_the_turn_ends_once_more() {
    let mut r = Reducer::new(SETTLE_MS, 4096);
    // The edit waited five minutes for approval: the answer looked final until the tools
    // came back and the answer was appended again with its call.
    let evs = drive(
        &mut r,
        ProviderKind::Gemini,
        G_PATH,
        &[
            (G_HEADER, T0),
            (G_PROMPT, T0),
            (G_ANSWER, T0 + 5_000),
            (G_ANSWER_TOOLS, T0 + 300_000),
            (G_FINAL, T0 + 302_000),
        ],
        T0 + 600_000,
    );
    let got: Vec<_> = evs
        .iter()
        .map(|e| (e.event.as_str(), e.message.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("turn_started", String::new()),
            ("turn_completed", "I'll edit main.rs.".to_owned()),
            ("turn_resumed", String::new()),
            ("turn_completed", "Fixed.".to_owned()),
        ]
    );
    assert_eq!(evs[2].supersedes.as_deref(), Some(evs[1].id.as_str()));
}

#[test]
fn gemini_rewind_over_a_decided_turn_retracts_it_and_a_reread_pages_nothing() {
    let mut r = Reducer::new(SETTLE_MS, 4096);
    let lines = [
        (G_HEADER, T0),
        (G_PROMPT, T0),
        (G_ANSWER, T0 + 5_000),
        (r#"{"$rewindTo":"p1"}"#, T0 + 200_000),
    ];
    let evs = drive(&mut r, ProviderKind::Gemini, G_PATH, &lines, T0 + 600_000);
    let kinds: Vec<_> = evs.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["turn_started", "turn_completed", "turn_retracted"]);
    assert_eq!(evs[2].turn.as_deref(), Some("p1"));
    assert_eq!(evs[2].reason.as_deref(), Some("rewound"));
    assert_eq!(evs[2].supersedes.as_deref(), Some(evs[1].id.as_str()));
    // The same file read again from its first byte (a replaced projector, as after a
    // lost checkpoint): the dropped turn is not paged again.
    let again = drive(&mut r, ProviderKind::Gemini, G_PATH, &lines, T0 + 900_000);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn qwen_rewind_over_a_quiet_completion_retracts_it() {
    let mut r = Reducer::new(SETTLE_MS, 4096);
    let evs = drive(
        &mut r,
        ProviderKind::Qwen,
        "/h/.qwen/projects/-w/chats/q-1.jsonl",
        &[
            (
                r#"{"uuid":"u1","parentUuid":null,"sessionId":"q-1","type":"user","message":{"parts":[{"text":"one"}]}}"#,
                T0,
            ),
            (
                r#"{"uuid":"a1","parentUuid":"u1","sessionId":"q-1","type":"assistant","message":{"parts":[{"text":"1"}]}}"#,
                T0 + 1_000,
            ),
            (
                r#"{"uuid":"r1","parentUuid":null,"sessionId":"q-1","type":"system","subtype":"rewind","systemPayload":{"truncatedCount":2}}"#,
                T0 + 200_000,
            ),
            (
                r#"{"uuid":"u2","parentUuid":"r1","sessionId":"q-1","type":"user","message":{"parts":[{"text":"one, again"}]}}"#,
                T0 + 210_000,
            ),
        ],
        T0 + 215_000,
    );
    let kinds: Vec<_> = evs
        .iter()
        .map(|e| (e.event.as_str(), e.turn.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("turn_started", "u1".to_owned()),
            ("turn_completed", "u1".to_owned()),
            ("turn_retracted", "u1".to_owned()),
            ("turn_started", "u2".to_owned()),
        ]
    );
}

// ---- seed 004: bad input, for both agents ----

/// One agent's session as lines: its head, a prompt, a big record for the oversized case
/// and the answer.
struct Case {
    provider: ProviderKind,
    name: &'static str,
    head: Vec<String>,
    prompt: String,
    big: String,
    answer: String,
}

fn cases() -> Vec<Case> {
    let g = |v: serde_json::Value| v.to_string();
    vec![
        Case {
            provider: ProviderKind::Gemini,
            name: "tmp/p/chats/session-2026-11-01T10-00-s-bad.jsonl",
            head: vec![G_HEADER.to_owned()],
            prompt: G_PROMPT.to_owned(),
            big: g(serde_json::json!({"id": "r1", "timestamp": "2026-11-01T10:00:02.000Z",
                "type": "user", "content": [{"functionResponse": {"id": "c1",
                "response": {"output": "x".repeat(50_000)}}}]})),
            answer: r#"{"id":"g9","timestamp":"2026-11-01T10:00:05.000Z","type":"gemini","content":"All set — ✓ done."}"#.to_owned(),
        },
        Case {
            provider: ProviderKind::Qwen,
            name: "projects/-w/chats/q-bad.jsonl",
            head: Vec::new(),
            prompt: r#"{"uuid":"u1","parentUuid":null,"sessionId":"q-bad","timestamp":"2026-11-01T10:00:00.000Z","type":"user","message":{"parts":[{"text":"hi"}]}}"#.to_owned(),
            big: g(serde_json::json!({"uuid": "t1", "parentUuid": "u1",
                "timestamp": "2026-11-01T10:00:02.000Z", "type": "tool_result",
                "message": {"parts": [{"functionResponse": {"id": "c1",
                "response": {"output": "y".repeat(50_000)}}}]},
                "toolCallResult": {"callId": "c1", "status": "success"}})),
            answer: r#"{"uuid":"a1","parentUuid":"t1","sessionId":"q-bad","timestamp":"2026-11-01T10:00:05.000Z","type":"assistant","message":{"parts":[{"text":"All set — ✓ done."}]}}"#.to_owned(),
        },
    ]
}

fn bytes_of(recs: &[String]) -> Vec<u8> {
    common::lines(recs)
}

#[test]
fn malformed_nul_and_oversized_lines_are_anomalies_and_the_turn_still_completes() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let mut recs = c.head.clone();
        recs.push(c.prompt.clone());
        let mut bytes = bytes_of(&recs);
        bytes.extend_from_slice(b"{\"id\":\"x\",\"type\":\"gem\n");
        bytes.extend_from_slice(b"\xff\xfe garbage\n");
        bytes.extend(bytes_of(std::slice::from_ref(&c.big)));
        bytes.extend(std::iter::repeat_n(0u8, 1024));
        bytes.extend(bytes_of(std::slice::from_ref(&c.answer)));
        let mut opts = options(SETTLE_MS);
        opts.max_line = 4096;
        let evs = common::replay_bytes(dir.path(), c.name, c.provider, &bytes, &opts);
        let reasons: Vec<_> = evs
            .iter()
            .map(|e| (e.event.as_str(), e.reason.clone().unwrap_or_default()))
            .collect();
        let want: Vec<(&str, String)> = vec![
            ("turn_started", String::new()),
            ("anomaly", "malformed_line".to_owned()),
            ("anomaly", "malformed_line".to_owned()),
            ("anomaly", "oversized_line".to_owned()),
            ("anomaly", "nul_bytes".to_owned()),
            ("turn_completed", String::new()),
        ];
        assert_eq!(reasons, want, "{:?}", c.provider);
        assert_eq!(evs[5].message.as_deref(), Some("All set — ✓ done."));
    }
}

#[test]
fn partial_last_line_is_read_once_its_newline_arrives() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("partial.jsonl");
        let mut reducer = Reducer::new(SETTLE_MS, 1024);
        let mut feed =
            baton::feed::FileFeed::new(&path, c.provider, baton::tail::DEFAULT_MAX_LINE_BYTES);
        let mut recs = c.head.clone();
        recs.push(c.prompt.clone());
        let mut first = bytes_of(&recs);
        let answer = bytes_of(std::slice::from_ref(&c.answer));
        // Cut inside the multi-byte check mark.
        let cut = answer.windows(3).position(|w| w == "✓".as_bytes()).unwrap() + 1;
        first.extend_from_slice(&answer[..cut]);
        let mut run = |feed: &mut baton::feed::FileFeed, bytes: &[u8], at: i64| {
            let mut out = Vec::new();
            feed.feed(bytes, |src, obs| {
                reducer.apply(src, obs, Now::virtual_at(at), &mut out);
            });
            reducer.tick(Now::virtual_at(at), &mut out);
            out
        };
        let evs = run(&mut feed, &first, T0);
        assert_eq!(common::kinds(&evs), ["turn_started"], "{:?}", c.provider);
        let evs = run(&mut feed, &answer[cut..], T0 + 1_000);
        assert!(evs.is_empty(), "{evs:?}");
        let evs = run(&mut feed, b"", T0 + 100_000);
        assert_eq!(common::kinds(&evs), ["turn_completed"], "{:?}", c.provider);
        assert_eq!(evs[0].message.as_deref(), Some("All set — ✓ done."));
    }
}

#[test]
fn check_passes_the_fixtures_and_reports_a_damaged_line() {
    for (provider, dir) in [("gemini", "gemini"), ("qwen", "qwen")] {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["check", "--provider", provider])
            .arg(fixture(dir))
            .output()
            .unwrap();
        common::assert_ok(&out);
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("chats/session-x.jsonl");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::write(
        &bad,
        format!("{G_HEADER}\n{{\"id\":\"x\",\"type\":\n{G_PROMPT}\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["check", "--provider", "gemini"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

// ---- liveness: a working session whose agent process is gone ----

/// A copy of `sleep` named `name`, running in `cwd`, once `/proc` shows it so.
fn agent_process(bin: &Path, name: &str, cwd: &Path) -> common::Kill {
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a sleep binary");
    std::fs::create_dir_all(bin).unwrap();
    let exe = bin.join(name);
    std::fs::copy(sleep, &exe).unwrap();
    let child = Command::new(&exe)
        .arg("600")
        .current_dir(cwd)
        .spawn()
        .unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{}", child.id()));
    let kill = common::Kill(child);
    for _ in 0..500 {
        if std::fs::read_link(proc_dir.join("exe")).is_ok_and(|e| e.ends_with(name))
            && std::fs::read_link(proc_dir.join("cwd")).is_ok_and(|c| c == cwd)
        {
            return kill;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{name} never got ready");
}

fn scan_row(provider: &str, path: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--json", "--all", "--provider", provider])
        .arg(path)
        .output()
        .unwrap();
    let rows = common::json_lines(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0].clone()
}

#[test]
fn a_working_session_without_its_agent_process_is_interrupted_and_with_it_working() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let work = base.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let root = work.display().to_string();
    // Gemini: a prompt with no answer yet, months ago; the root from `.project_root`.
    let slug = base.join("gemini/tmp/work");
    std::fs::create_dir_all(slug.join("chats")).unwrap();
    std::fs::write(slug.join(".project_root"), &root).unwrap();
    let gemini = slug.join("chats/session-2026-11-01T10-00-s-1.jsonl");
    std::fs::write(&gemini, format!("{G_HEADER}\n{G_PROMPT}\n")).unwrap();
    // Qwen: a tool call out, months ago, in `cwd`.
    let qwen = base.join("qwen/projects/-work/chats/q-1.jsonl");
    std::fs::create_dir_all(qwen.parent().unwrap()).unwrap();
    let rec = |v: serde_json::Value| format!("{v}\n");
    std::fs::write(
        &qwen,
        rec(
            serde_json::json!({"uuid": "u1", "parentUuid": null, "sessionId": "q-1",
            "timestamp": "2026-11-01T10:00:00.000Z", "type": "user", "cwd": root,
            "message": {"parts": [{"text": "build it"}]}}),
        ) + &rec(
            serde_json::json!({"uuid": "a1", "parentUuid": "u1", "sessionId": "q-1",
            "timestamp": "2026-11-01T10:00:02.000Z", "type": "assistant", "cwd": root,
            "message": {"parts": [{"functionCall": {"id": "c1", "name": "run_shell_command",
            "args": {}}}]}}),
        ),
    )
    .unwrap();
    for (provider, path) in [("gemini", &gemini), ("qwen", &qwen)] {
        let r = scan_row(provider, path);
        assert_eq!(r["state"], "interrupted", "{provider}: {r}");
        assert_eq!(r["reason"], "writer_gone", "{provider}: {r}");
        // Another program there does not count; the agent's own does.
        let _other = agent_process(&base.join("bin-other"), "node-other", &work);
        assert_eq!(
            scan_row(provider, path)["state"],
            "interrupted",
            "{provider}"
        );
        let agent = agent_process(&base.join("bin"), provider, &work);
        let r = scan_row(provider, path);
        assert_eq!(r["state"], "working", "{provider}: {r}");
        agent.exit();
    }
}
