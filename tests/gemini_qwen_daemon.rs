//! `baton run` end to end for Gemini CLI and Qwen Code: roots that appear after start
//! (`--watch gemini=…`, `--watch qwen=…`), a Gemini rewind over a completed turn, and
//! exactly once across a restart. Waits have deadlines but nothing asserts how fast an
//! event came.

#![allow(clippy::unwrap_used)]

use crate::common::{Daemon, append, count, is, ts_now};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn line(v: &Value) -> String {
    format!("{v}\n")
}

fn gemini_root(base: &Path) -> PathBuf {
    base.join("home/.gemini/tmp")
}

fn qwen_root(base: &Path) -> PathBuf {
    base.join("home/.qwen/projects")
}

fn start(d: Daemon, base: &Path) -> Daemon {
    let g = format!("gemini={}", gemini_root(base).display());
    let q = format!("qwen={}", qwen_root(base).display());
    d.start(&args(&g, &q))
}

fn args<'a>(g: &'a str, q: &'a str) -> Vec<&'a str> {
    vec![
        "--debug-sweep-interval",
        "200ms",
        "--settle",
        "1s",
        "--watch",
        g,
        "--watch",
        q,
    ]
}

fn gemini_turn(prompt: &str, answer: &str) -> String {
    line(&json!({"id": prompt, "timestamp": ts_now(), "type": "user",
        "content": [{"text": format!("prompt {prompt}")}]}))
        + &line(&json!({"$set": {"lastUpdated": ts_now()}}))
        + &line(
            &json!({"id": format!("{prompt}-answer"), "timestamp": ts_now(),
            "type": "gemini", "content": answer, "model": "gemini-2.5-pro"}),
        )
        + &line(&json!({"$set": {"lastUpdated": ts_now()}}))
}

fn qwen_turn(prompt: &str, answer: &str) -> String {
    let rec = |uuid: String, parent: Option<String>, ty: &str, extra: Value| {
        let mut v = json!({"uuid": uuid, "parentUuid": parent, "sessionId": "q-live",
            "timestamp": ts_now(), "type": ty, "cwd": "/home/u/web", "version": "0.16.0"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        line(&v)
    };
    rec(
        prompt.to_owned(),
        None,
        "user",
        json!({"message": {"role": "user", "parts": [{"text": "go"}]}}),
    ) + &rec(
        format!("{prompt}-a"),
        Some(prompt.to_owned()),
        "assistant",
        json!({"message": {"role": "model", "parts": [{"text": answer}]}}),
    ) + &rec(
        format!("{prompt}-r"),
        Some(format!("{prompt}-a")),
        "system",
        json!({"subtype": "turn_result", "systemPayload": {"promptId": "p", "state": "completed"}}),
    )
}

#[test]
fn gemini_and_qwen_live_rewind_and_restart_alert_each_outcome_once() {
    let d = Daemon::tree();
    let base = d.dir.path().to_path_buf();
    let mut d = start(d, &base);
    let chats = gemini_root(&base).join("web/chats");
    std::fs::create_dir_all(&chats).unwrap();
    std::fs::write(gemini_root(&base).join("web/.project_root"), "/home/u/web").unwrap();
    let gemini = chats.join("session-2026-12-01T10-00-g-live.jsonl");
    let header = line(&json!({"sessionId": "g-live", "projectHash": "ab",
        "startTime": ts_now(), "lastUpdated": ts_now(), "kind": "main"}));
    append(
        &gemini,
        (header + &gemini_turn("p1", "first answer")).as_bytes(),
    );
    let done = d.wait_for("gemini completion", |e| {
        e["provider"] == "gemini" && is("turn_completed", "p1".to_owned())(e)
    });
    assert_eq!(done["evidence"], "quiet");
    assert_eq!(done["message"], "first answer");
    assert_eq!(done["project"], "web");

    let qwen_dir = qwen_root(&base).join("-home-u-web/chats");
    std::fs::create_dir_all(&qwen_dir).unwrap();
    let qwen = qwen_dir.join("q-live.jsonl");
    append(&qwen, qwen_turn("u1", "qwen answer").as_bytes());
    let q = d.wait_for("qwen completion", |e| {
        e["provider"] == "qwen" && is("turn_completed", "u1".to_owned())(e)
    });
    assert_eq!(q["evidence"], "turn_result");
    assert_eq!(q["project"], "web");

    // The person rewinds the completed turn.
    append(&gemini, line(&json!({"$rewindTo": "p1"})).as_bytes());
    let back = d.wait_for("gemini retraction", |e| {
        e["provider"] == "gemini" && is("turn_retracted", "p1".to_owned())(e)
    });
    assert_eq!(back["supersedes"], done["id"]);

    // A restart reads on from the checkpoints: nothing is paged again, and the next
    // turn is paged once.
    d.terminate();
    let g = format!("gemini={}", gemini_root(&base).display());
    let qa = format!("qwen={}", qwen_root(&base).display());
    d.restart(&args(&g, &qa));
    append(&gemini, gemini_turn("p2", "second answer").as_bytes());
    d.wait_for("second gemini completion", |e| {
        e["provider"] == "gemini" && is("turn_completed", "p2".to_owned())(e)
    });
    let events = d.stop();
    let gem: Vec<Value> = events
        .iter()
        .filter(|e| e["provider"] == "gemini")
        .cloned()
        .collect();
    assert_eq!(count(&gem, "turn_completed", "p1"), 1);
    assert_eq!(count(&gem, "turn_retracted", "p1"), 1);
    assert_eq!(count(&gem, "turn_completed", "p2"), 1);
    let qw: Vec<Value> = events
        .iter()
        .filter(|e| e["provider"] == "qwen")
        .cloned()
        .collect();
    assert_eq!(count(&qw, "turn_completed", "u1"), 1);
}

/// `baton hook --agent gemini` with Gemini CLI's own hook input on stdin.
fn gemini_hook(d: &Daemon, input: &Value) {
    use std::io::Write;
    let mut child = d
        .baton()
        .args(["hook", "--agent", "gemini"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

/// Gemini CLI's hooks are the waits and the end its transcript cannot show: a tool
/// waiting for permission (`Notification`/`ToolPermission`) is `needs_input` until the
/// tool comes back (`AfterTool`), and `AfterAgent` ends the turn at once (`hook_stop`)
/// instead of after the 90 s settle.
#[test]
fn gemini_hooks_are_the_wait_and_the_end_its_transcript_cannot_show() {
    let d = Daemon::tree();
    let base = d.dir.path().to_path_buf();
    let g = format!("gemini={}", gemini_root(&base).display());
    // The root appears after the start: the sweep finds it (the settle stays 90 s).
    let mut d = d.start(&["--debug-sweep-interval", "200ms", "--watch", &g]);
    let chats = gemini_root(&base).join("web/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let gemini = chats.join("session-2026-12-01T11-00-g-hook.jsonl");
    let header = line(&json!({"sessionId": "g-hook", "projectHash": "ab",
        "startTime": ts_now(), "lastUpdated": ts_now(), "kind": "main"}));
    let prompt = line(&json!({"id": "h1", "timestamp": ts_now(), "type": "user",
        "content": [{"text": "run the tests"}]}));
    append(&gemini, (header + &prompt).as_bytes());
    d.wait_for("the turn", is("turn_started", "h1".to_owned()));
    let hook = |event: &str, extra: Value| {
        let mut v = json!({"session_id": "g-hook", "transcript_path": gemini.display().to_string(),
            "cwd": "/home/u/web", "hook_event_name": event, "timestamp": ts_now()});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    gemini_hook(
        &d,
        &hook(
            "Notification",
            json!({"notification_type": "ToolPermission",
                "message": "Allow run_shell_command: npm test?", "details": {}}),
        ),
    );
    let w = d.wait_for("the permission wait", is("needs_input", "h1".to_owned()));
    assert_eq!(w["reason"], "permission prompt");
    assert_eq!(w["message"], "Allow run_shell_command: npm test?");
    gemini_hook(
        &d,
        &hook("AfterTool", json!({"tool_name": "run_shell_command"})),
    );
    d.wait_for("the approval", is("needs_input_resolved", "h1".to_owned()));
    append(
        &gemini,
        line(
            &json!({"id": "h1-answer", "timestamp": ts_now(), "type": "gemini",
            "content": "All 12 tests pass.", "model": "gemini-2.5-pro"}),
        )
        .as_bytes(),
    );
    gemini_hook(
        &d,
        &hook(
            "AfterAgent",
            json!({"prompt": "run the tests", "prompt_response": "All 12 tests pass."}),
        ),
    );
    let done = d.wait_for("the end", is("turn_completed", "h1".to_owned()));
    assert_eq!(done["evidence"], "hook_stop");
    assert_eq!(done["message"], "All 12 tests pass.");
    let events = d.stop();
    assert_eq!(count(&events, "needs_input", "h1"), 1);
    assert_eq!(count(&events, "turn_completed", "h1"), 1);
}
