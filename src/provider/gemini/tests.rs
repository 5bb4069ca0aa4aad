#![allow(clippy::unwrap_used)]
use super::*;

const PATH: &str = "/h/.gemini/tmp/proj/chats/session-2026-11-01T10-00-abcd1234.jsonl";

fn run(p: &mut GeminiProjector, lines: &[&str]) -> Vec<ObsKind> {
    let mut out = Vec::new();
    for l in lines {
        p.project(l.as_bytes(), &mut out).unwrap();
    }
    out.into_iter().map(|o| o.kind).collect()
}

const HEADER: &str = r#"{"sessionId":"s-1","projectHash":"ab","startTime":"2026-11-01T10:00:00.000Z","lastUpdated":"2026-11-01T10:00:00.000Z","kind":"main"}"#;
const CONTEXT: &str = r#"{"$set":{"messages":[{"id":"ctx","timestamp":"2026-11-01T10:00:00.000Z","type":"user","content":[{"text":"<session_context>\nos: linux\n</session_context>"}]}]}}"#;
const PROMPT: &str = r#"{"id":"p1","timestamp":"2026-11-01T10:00:01.000Z","type":"user","content":[{"text":"read a.txt"}]}"#;
const ANSWER: &str = r#"{"id":"g1","timestamp":"2026-11-01T10:00:05.000Z","type":"gemini","content":"I'll read it.","model":"gemini-2.5-pro"}"#;
const ANSWER_TOOLS: &str = r#"{"id":"g1","timestamp":"2026-11-01T10:00:05.000Z","type":"gemini","content":"I'll read it.","model":"gemini-2.5-pro","toolCalls":[{"id":"c1","name":"read_file","args":{},"status":"success","timestamp":"2026-11-01T10:03:00.000Z"}]}"#;

#[test]
fn header_names_the_session_and_the_context_checkpoint_is_no_prompt() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    assert_eq!(p.session, "session-2026-11-01T10-00-abcd1234");
    assert!(run(&mut p, &[HEADER, CONTEXT]).is_empty());
    assert_eq!(p.session, "s-1");
    let kinds = run(&mut p, &[PROMPT]);
    assert!(matches!(&kinds[..], [ObsKind::TurnStart { turn, .. }] if turn == "p1"));
}

#[test]
fn an_upsert_with_tool_calls_is_the_calls_and_an_identical_copy_is_nothing() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    let kinds = run(&mut p, &[HEADER, PROMPT, ANSWER]);
    assert!(
        matches!(&kinds[1], ObsKind::Final { message, confirm: None }
        if message.as_deref() == Some("I'll read it."))
    );
    let kinds = run(
        &mut p,
        &[
            ANSWER_TOOLS,
            ANSWER_TOOLS,
            r#"{"$set":{"lastUpdated":"x"}}"#,
        ],
    );
    assert!(
        matches!(&kinds[..], [ObsKind::ToolCall { id, .. }, ObsKind::ToolResult { id: r }]
            if id == "c1" && r == "c1"),
        "{kinds:?}"
    );
}

#[test]
fn a_changed_copy_has_a_key_of_its_own() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    let mut out = Vec::new();
    for l in [HEADER, PROMPT, ANSWER, ANSWER_TOOLS] {
        p.project(l.as_bytes(), &mut out).unwrap();
    }
    assert_eq!(out[1].key, "s-1:g1");
    assert!(out[2].key.starts_with("s-1:g1:"), "{}", out[2].key);
}

#[test]
fn rewind_takes_back_the_turns_it_drops_and_survives_save_and_restore() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    run(&mut p, &[HEADER, CONTEXT, PROMPT, ANSWER]);
    let mut q = GeminiProjector::new(Path::new(PATH));
    assert!(q.restore(&p.save()));
    let kinds = run(&mut q, &[r#"{"$rewindTo":"p1"}"#]);
    assert!(
        matches!(&kinds[..], [ObsKind::Retract { turn, reason }] if turn == "p1" && reason == "rewound"),
        "{kinds:?}"
    );
    // Nothing left to rewind.
    assert!(run(&mut q, &[r#"{"$rewindTo":"p1"}"#]).is_empty());
}

#[test]
fn cancel_error_and_rollback() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    let kinds = run(
        &mut p,
        &[
            HEADER,
            CONTEXT,
            PROMPT,
            r#"{"id":"i1","timestamp":"2026-11-01T10:00:09.000Z","type":"info","content":"Request cancelled."}"#,
            // The rollback: the prompt and the note gone, nothing reopened or repeated.
            CONTEXT,
            r#"{"id":"p2","timestamp":"2026-11-01T10:01:00.000Z","type":"user","content":"again"}"#,
            r#"{"$set":{"messages":[{"id":"ctx","timestamp":"2026-11-01T10:00:00.000Z","type":"user","content":[{"text":"<session_context>\nos: linux\n</session_context>"}]}]}}"#,
            r#"{"id":"e1","timestamp":"2026-11-01T10:01:02.000Z","type":"error","content":"[API Error: You exceeded your current quota. Please wait and try again later. (Status: RESOURCE_EXHAUSTED)]"}"#,
        ],
    );
    assert!(matches!(&kinds[1], ObsKind::Interrupted { reason, .. } if reason == "user"));
    assert!(matches!(&kinds[2], ObsKind::TurnStart { turn, .. } if turn == "p2"));
    assert!(
        matches!(&kinds[3], ObsKind::Failed { reason, .. } if reason == "usage_limit"),
        "{kinds:?}"
    );
    assert_eq!(kinds.len(), 4, "{kinds:?}");
}

#[test]
fn function_responses_are_no_prompt_and_subagents_sit_under_their_parent() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    let kinds = run(
        &mut p,
        &[
            HEADER,
            r#"{"id":"r1","timestamp":"2026-11-01T10:00:06.000Z","type":"user","content":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"x"}}}]}"#,
        ],
    );
    assert_eq!(kinds, vec![ObsKind::Work]);
    let sub = GeminiProjector::new(Path::new("/h/.gemini/tmp/proj/chats/s-1/agent-7.jsonl"));
    let o = sub.obs(String::new(), None, ObsKind::Work);
    assert_eq!(
        (o.session.as_str(), o.agent.as_deref()),
        ("s-1", Some("agent-7"))
    );
}

#[test]
fn a_checkpoint_reads_only_what_follows_the_messages_it_knows() {
    let mut p = GeminiProjector::new(Path::new(PATH));
    run(&mut p, &[HEADER, PROMPT, ANSWER]);
    // Listed before `p1`: older history this file no longer keeps (a long session).
    let old = r#"{"id":"p0","timestamp":"2026-11-01T09:00:00.000Z","type":"user","content":"old"}"#;
    let new = r#"{"id":"p9","timestamp":"2026-11-01T10:09:00.000Z","type":"user","content":"new"}"#;
    let set = format!(r#"{{"$set":{{"messages":[{old},{PROMPT},{ANSWER},{new}]}}}}"#);
    let kinds = run(&mut p, &[set.as_str()]);
    assert!(
        matches!(&kinds[..], [ObsKind::TurnStart { turn, .. }] if turn == "p9"),
        "{kinds:?}"
    );
}
