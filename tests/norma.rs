//! Norma transcripts through `baton replay` and `baton scan`: hand-written fixtures from
//! seeds 000/001 (tests/fixtures/norma), one scenario each.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/norma")
        .join(rel)
}

fn replay(args: &[&str], paths: &[PathBuf]) -> Vec<String> {
    common::replay_summary("norma", true, args, paths)
}

fn id(n: u32) -> String {
    format!("{n:032x}")
}

#[test]
fn tool_use_then_result_then_final_answer() {
    let got = replay(&[], &[fixture("sess-tools.jsonl")]);
    let a1 = id(0xa1);
    let a5 = id(0xa5);
    assert_eq!(
        got,
        vec![
            format!("turn_started sess-tools/- turn={a1} line=1 rts=2026-08-03T11:18:06.123Z"),
            // The tool_use record (line 2) and its result (line 3) keep the turn going;
            // the whole answer with no tool call ends it at once.
            format!(
                "turn_completed sess-tools/- turn={a1} line=4 rts=2026-08-03T11:18:14.000Z \
                 evidence=final_message message=The repo holds README.md and src/."
            ),
            format!("turn_started sess-tools/- turn={a5} line=5 rts=2026-08-03T11:25:00.000Z"),
            format!(
                "turn_completed sess-tools/- turn={a5} line=6 rts=2026-08-03T11:25:03.000Z \
                 evidence=final_message message=Only main.go."
            ),
        ]
    );
}

#[test]
fn completion_needs_no_quiet_period() {
    // With an hour of settle time the answer still completes: Norma writes whole messages.
    let got = replay(&["--settle", "1h"], &[fixture("sess-tools.jsonl")]);
    assert_eq!(
        got.iter()
            .filter(|e| e.contains("evidence=final_message"))
            .count(),
        2
    );
}

#[test]
fn boundary_mid_turn_is_compaction_not_completion() {
    let got = replay(&[], &[fixture("sess-compact.jsonl")]);
    let b1 = id(0xb1);
    assert_eq!(
        got,
        vec![
            format!("turn_started sess-compact/- turn={b1} line=1 rts=2026-08-03T12:00:00.000Z"),
            format!(
                "context_compacted sess-compact/- turn={b1} line=4 rts=2026-08-03T12:00:07.000Z \
                 pre_tokens=183000"
            ),
            // Line 5, the skill re-injected after compaction, is no new prompt.
            format!(
                "turn_completed sess-compact/- turn={b1} line=8 rts=2026-08-03T12:00:20.000Z \
                 evidence=final_message message=Refactored; tests pass."
            ),
        ]
    );
}

#[test]
fn sidechain_file_is_its_own_agent_and_never_ends_the_parent_turn() {
    let got = replay(&[], &[fixture("sess-sub.jsonl"), fixture("sess-sub")]);
    let (c1, d1) = (id(0xc1), id(0xd1));
    assert_eq!(
        got,
        vec![
            format!("turn_started sess-sub/- turn={c1} line=1 rts=2026-08-03T13:00:00.000Z"),
            format!(
                "turn_completed sess-sub/- turn={c1} line=4 rts=2026-08-03T13:00:22.000Z \
                 evidence=final_message message=The subagent approved the patch."
            ),
            format!("turn_started sess-sub/a7f3 turn={d1} line=1 rts=2026-08-03T13:00:03.000Z"),
            format!(
                "turn_completed sess-sub/a7f3 turn={d1} line=4 rts=2026-08-03T13:00:19.000Z \
                 evidence=final_message message=Looks good."
            ),
        ]
    );
}

#[test]
fn unanswered_tool_use_then_new_prompt_is_abandoned() {
    let got = replay(&[], &[fixture("sess-resume.jsonl")]);
    let (e1, e3) = (id(0xe1), id(0xe3));
    assert_eq!(
        got,
        vec![
            format!("turn_started sess-resume/- turn={e1} line=1 rts=2026-08-03T14:00:00.000Z"),
            // Decided by the prompt on line 3; it points at the turn's last record.
            format!(
                "turn_interrupted sess-resume/- turn={e1} line=2 rts=2026-08-03T14:00:04.000Z \
                 reason=abandoned"
            ),
            format!("turn_started sess-resume/- turn={e3} line=3 rts=2026-08-03T15:10:00.000Z"),
            format!(
                "turn_completed sess-resume/- turn={e3} line=4 rts=2026-08-03T15:10:05.000Z \
                 evidence=final_message message=Staging is up on the new build."
            ),
        ]
    );
}

#[test]
fn malformed_line_and_foreign_session_id_are_anomalies_and_reading_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s9.jsonl");
    let lines = [
        r#"{"uuid":"u1","session_id":"s9","timestamp":"2026-08-03T10:00:00Z","type":"message","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#,
        r#"{"uuid":"u2","parent_uuid":"u1","session_id":"s9","timestamp":"2026-08-03T10:00:01Z","type":"mess"#,
        r#"{"uuid":"u3","parent_uuid":"u2","session_id":"intruder","timestamp":"2026-08-03T10:00:02Z","type":"message","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}"#,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    let got = replay(&["--provider", "norma"], &[path]);
    assert_eq!(got.len(), 4, "{got:#?}");
    assert_eq!(
        got[0],
        "turn_started s9/- turn=u1 line=1 rts=2026-08-03T10:00:00.000Z"
    );
    assert!(
        got[1].starts_with("anomaly s9/- turn=- line=2 rts=- reason=malformed_line"),
        "{}",
        got[1]
    );
    assert_eq!(
        got[2],
        "anomaly s9/- turn=- line=3 rts=2026-08-03T10:00:02.000Z reason=session_mismatch \
         message=record session_id `intruder` differs from the file's session `s9`"
    );
    assert_eq!(
        got[3],
        "turn_completed s9/- turn=u1 line=3 rts=2026-08-03T10:00:02.000Z \
         evidence=final_message message=hello"
    );
}

#[test]
fn files_are_detected_without_provider_hint() {
    // The first record has no `parent_uuid` (seed 000), so detection must not need one.
    let got = replay(&[], &[fixture("")]);
    assert_eq!(got.len(), 15, "{got:#?}");
}

#[test]
fn scan_reports_each_session_and_agent() {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--json"])
        .arg(fixture(""))
        .output()
        .expect("runs baton");
    assert!(out.status.success());
    let rows: Vec<String> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON");
            format!(
                "{} {}/{} {} {}",
                common::field_text(&v, "provider"),
                common::field_text(&v, "session"),
                common::field_text(&v, "agent"),
                common::field_text(&v, "state"),
                common::field_text(&v, "evidence")
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            "norma sess-compact/- completed final_message",
            "norma sess-resume/- completed final_message",
            "norma sess-sub/- completed final_message",
            "norma sess-sub/a7f3 completed final_message",
            "norma sess-tools/- completed final_message",
        ]
    );
}
