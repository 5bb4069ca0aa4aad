#![allow(clippy::unwrap_used)]
use super::*;

const PATH: &str = "/h/.qwen/projects/-w-app/chats/q-1.jsonl";

fn run(p: &mut QwenProjector, lines: &[&str]) -> Vec<ObsKind> {
    let mut out = Vec::new();
    for l in lines {
        p.project(l.as_bytes(), &mut out).unwrap();
    }
    out.into_iter().map(|o| o.kind).collect()
}

#[test]
fn an_unanswered_question_waits_for_the_person() {
    let mut p = QwenProjector::new(Path::new(PATH));
    let kinds = run(
        &mut p,
        &[
            r#"{"uuid":"u1","parentUuid":null,"sessionId":"q-1","timestamp":"2026-11-01T10:00:00.000Z","type":"user","cwd":"/w/app","message":{"role":"user","parts":[{"text":"pick one"}]}}"#,
            r#"{"uuid":"a1","parentUuid":"u1","sessionId":"q-1","timestamp":"2026-11-01T10:00:02.000Z","type":"assistant","cwd":"/w/app","message":{"role":"model","parts":[{"text":"Asking."},{"functionCall":{"id":"call-1","name":"ask_user_question","args":{"questions":[{"question":"Red or blue?"}]}}}]}}"#,
        ],
    );
    assert!(matches!(&kinds[0], ObsKind::StartDir(d) if d == "/w/app"));
    assert!(matches!(&kinds[1], ObsKind::TurnStart { turn, .. } if turn == "u1"));
    assert!(
        matches!(&kinds[2], ObsKind::ToolCall { needs_input: Some(n), message, .. }
            if n == "ask_user_question" && message.as_deref() == Some("Red or blue?")),
        "{kinds:?}"
    );
}

#[test]
fn rewind_retracts_the_rewound_prompt_and_later_ones() {
    let mut p = QwenProjector::new(Path::new(PATH));
    let kinds = run(
        &mut p,
        &[
            r#"{"uuid":"u1","parentUuid":null,"type":"user","message":{"parts":[{"text":"one"}]}}"#,
            r#"{"uuid":"a1","parentUuid":"u1","type":"assistant","message":{"parts":[{"text":"1"}]}}"#,
            r#"{"uuid":"u2","parentUuid":"a1","type":"user","message":{"parts":[{"text":"two"}]}}"#,
            r#"{"uuid":"a2","parentUuid":"u2","type":"assistant","message":{"parts":[{"text":"2"}]}}"#,
            r#"{"uuid":"r1","parentUuid":"a1","type":"system","subtype":"rewind","systemPayload":{"truncatedCount":2}}"#,
        ],
    );
    assert!(
        matches!(kinds.last(), Some(ObsKind::Retract { turn, .. }) if turn == "u2"),
        "{kinds:?}"
    );
    assert_eq!(p.prompts.len(), 1);
}

#[test]
fn turn_results_decide_and_subagent_files_are_agents() {
    let mut p = QwenProjector::new(Path::new(PATH));
    let kinds = run(
        &mut p,
        &[
            r#"{"uuid":"t1","type":"system","subtype":"turn_result","systemPayload":{"promptId":"x","state":"completed"}}"#,
            r#"{"uuid":"t2","type":"system","subtype":"turn_result","systemPayload":{"promptId":"y","state":"cancelled"}}"#,
            r#"{"uuid":"t3","type":"system","subtype":"turn_result","systemPayload":{"promptId":"z","state":"error","error":{"message":"Rate limit exceeded","code":429}}}"#,
        ],
    );
    assert!(matches!(
        &kinds[0],
        ObsKind::Completed {
            evidence: Evidence::TurnResult,
            ..
        }
    ));
    assert!(matches!(&kinds[1], ObsKind::Interrupted { reason, .. } if reason == "user"));
    assert!(matches!(&kinds[2], ObsKind::Failed { reason, .. } if reason == "usage_limit"));
    let sub = QwenProjector::new(Path::new(
        "/h/.qwen/projects/-w/subagents/q-1/agent-9.jsonl",
    ));
    let o = sub.obs(String::new(), None, ObsKind::Work);
    assert_eq!((o.session.as_str(), o.agent.as_deref()), ("q-1", Some("9")));
}
