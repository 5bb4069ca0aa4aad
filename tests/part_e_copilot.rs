//! Part E of shared/docs/transcript-formats.md for Copilot CLI 1.0.7x (E.3) and Oh My Pi
//! (E.4): the synthetic fixtures in tests/fixtures/part-e (sources in its README), each
//! replayed the way `baton replay` reads a directory (provider found from the content),
//! with the exact events they must give.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{SETTLE_MS, options, replay_files};
use baton::model::{Event, ProviderKind};
use baton::watch::{self, Found, Root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn part_e(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/part-e")
        .join(name)
}

/// The fixture, detected without a provider hint, then replayed.
fn replay(name: &str) -> (ProviderKind, Vec<Event>) {
    let found = watch::find(&Root {
        path: part_e(name),
        provider: None,
    });
    assert_eq!(found.len(), 1, "{name} not detected");
    let kind = found[0].provider;
    let files: Vec<_> = found.into_iter().map(|f| (f.path, f.provider)).collect();
    (kind, replay_files(&files, &options(SETTLE_MS)))
}

/// What a test compares: event, agent, turn, line, initiator, origin, background tasks,
/// reason and evidence, as one string per event.
fn brief(evs: &[Event]) -> Vec<String> {
    evs.iter()
        .map(|e| {
            let mut s = format!(
                "{} {} {} {}",
                e.event.as_str(),
                e.agent.as_deref().unwrap_or("-"),
                e.turn.as_deref().unwrap_or("-"),
                e.line.unwrap_or_default()
            );
            for (k, v) in [
                ("initiator", e.initiator.map(str::to_owned)),
                ("origin", e.origin.map(str::to_owned)),
                ("bg", e.background_tasks.map(|n| n.to_string())),
                ("reason", e.reason.clone()),
                ("evidence", e.evidence.clone()),
            ] {
                if let Some(v) = v {
                    s.push_str(&format!(" {k}={v}"));
                }
            }
            s
        })
        .collect()
}

/// Each (session, agent, turn) has at most one completed/failed/interrupted event.
fn one_outcome_per_turn(evs: &[Event]) {
    let mut outcomes: BTreeMap<(String, String, String), Vec<&str>> = BTreeMap::new();
    for e in evs {
        if matches!(
            e.event.as_str(),
            "turn_completed" | "turn_failed" | "turn_interrupted"
        ) {
            outcomes
                .entry((
                    e.session.clone().unwrap_or_default(),
                    e.agent.clone().unwrap_or_default(),
                    e.turn.clone().unwrap_or_default(),
                ))
                .or_default()
                .push(e.event.as_str());
        }
    }
    let doubles: Vec<_> = outcomes.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(
        doubles.is_empty(),
        "turns with more than one outcome: {doubles:?}"
    );
}

// ---- Copilot CLI 1.0.7x (E.3) ----

#[test]
fn copilot_background_subagent_holds_the_answer_and_its_report_is_a_turn_of_its_own() {
    let (kind, evs) = replay("synthetic-copilot-background.jsonl");
    assert_eq!(kind, ProviderKind::Copilot);
    assert_eq!(
        brief(&evs),
        [
            // The prompt's hooks (lines 2-3) come before it and start nothing.
            "turn_started - i-1 4 initiator=human origin=human",
            // "Waiting on the car now": the background subagent still runs.
            "turn_completed - i-1 12 origin=human bg=1 evidence=turn_end",
            "turn_started sa-car sa-car 14 initiator=agent",
            "turn_completed sa-car sa-car 20 evidence=turn_end",
            // After subagent.completed (22) and the notification (23) the main agent
            // goes on in the same interaction: the notification's own turn.
            "turn_started - ba0023-0000-4000-8000-000000000023 24 initiator=system origin=task_notification",
            "turn_completed - ba0023-0000-4000-8000-000000000023 25 origin=task_notification evidence=turn_end",
            // The next prompt's hooks (27-28) leave the finished turn alone.
            "turn_started - i-2 29 initiator=human origin=human",
            "turn_completed - i-2 31 origin=human evidence=turn_end",
        ]
    );
    assert_eq!(
        evs[1].message.as_deref(),
        Some("Waiting on the car now — I'll report when it completes.")
    );
    assert_eq!(
        evs[5].message.as_deref(),
        Some("The car firmware built: 212 tests passed, no failures.")
    );
    one_outcome_per_turn(&evs);
}

#[test]
fn copilot_hooks_steering_and_system_messages_start_no_turn() {
    let (kind, evs) = replay("synthetic-copilot-hooks.jsonl");
    assert_eq!(kind, ProviderKind::Copilot);
    assert_eq!(
        brief(&evs),
        [
            // sessionStart (failed), userPromptSubmitted and userPromptTransformed hooks
            // (lines 2-7), then the prompt. The instruction-discovery message (9), the
            // system message (11), a preToolUse hook (13-14) and steering input (18) are
            // all inside the turn.
            "turn_started - i-1 8 initiator=human origin=human",
            "turn_completed - i-1 20 origin=human evidence=turn_end",
            // agentStop hook, a warning and the next prompt's hooks (22-26): nothing.
            "turn_started - i-2 27 initiator=human origin=human",
            "turn_completed - i-2 29 origin=human evidence=turn_end",
        ]
    );
    one_outcome_per_turn(&evs);
}

/// `baton scan --json` of the fixture's first `n` lines: the session's state.
fn state_after(name: &str, n: usize) -> String {
    let text = std::fs::read_to_string(part_e(name)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut: String = text.lines().take(n).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join(name), cut).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("scan")
        .arg("--json")
        // The transcript's own states: not judged stale by how old its records are now.
        .args(["--liveness-after", "1000000h"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    v["state"].as_str().unwrap().to_owned()
}

#[test]
fn copilot_permission_wait_ends_when_it_is_resolved() {
    let name = "synthetic-copilot-permission.jsonl";
    let (_, evs) = replay(name);
    assert_eq!(
        brief(&evs),
        [
            "turn_started - i-1 2 initiator=human origin=human",
            "needs_input - i-1 5 origin=human reason=permission:read",
            "needs_input_resolved - i-1 6 origin=human",
            "needs_input - i-1 12 origin=human reason=permission:shell",
            "needs_input_resolved - i-1 13 origin=human",
            "turn_completed - i-1 18 origin=human evidence=turn_end",
        ]
    );
    assert_eq!(evs[1].message.as_deref(), Some("List the migrations"));
    // A rule approved the first request 0.2 s later, a person the second after 64 s:
    // either way its `permission.completed` ends the wait.
    assert_eq!(state_after(name, 5), "needs_input");
    assert_eq!(state_after(name, 6), "working");
    assert_eq!(state_after(name, 12), "needs_input");
    assert_eq!(state_after(name, 13), "working");
}

#[test]
fn every_part_e_copilot_and_omp_fixture_gives_each_turn_one_outcome() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-e");
    let found: Vec<Found> = watch::find(&Root {
        path: dir,
        provider: None,
    })
    .into_iter()
    .filter(|f| {
        let n = f.path.file_name().unwrap().to_string_lossy().into_owned();
        n.starts_with("synthetic-copilot-") || n.starts_with("synthetic-omp-")
    })
    .collect();
    assert!(found.len() >= 3, "fixtures found: {}", found.len());
    for f in found {
        let evs = replay_files(&[(f.path.clone(), f.provider)], &options(SETTLE_MS));
        assert!(!evs.is_empty(), "{}", f.path.display());
        one_outcome_per_turn(&evs);
    }
}

// ---- Oh My Pi (E.4) ----

#[test]
fn omp_session_is_found_by_its_title_slot_and_a_process_exit_interrupts_the_open_turn() {
    let (kind, evs) = replay("synthetic-omp-session.jsonl");
    assert_eq!(kind, ProviderKind::Pi);
    assert!(
        evs.iter()
            .all(|e| e.session.as_deref() == Some("0199f1a2-7c3e-7000-8000-00000000a001"))
    );
    assert_eq!(
        brief(&evs),
        [
            // The title slot, header, credential pin, model change and developer message
            // (lines 1-5) start nothing; the steering message (10) stays in the turn.
            "turn_started - u0000001 6 initiator=human origin=human",
            "turn_completed - u0000001 11 origin=human evidence=stop_reason",
            // A `signal` exit with a bash call pending (15) cuts the turn short.
            "turn_started - u0000003 12 initiator=human origin=human",
            "turn_interrupted - u0000003 15 origin=human reason=session_exit",
            // Resumed in the same file; the closing normal exit (18) changes nothing.
            "turn_started - u0000004 16 initiator=human origin=human",
            "turn_completed - u0000004 17 origin=human evidence=stop_reason",
        ]
    );
    assert_eq!(evs[3].message.as_deref(), Some("SIGTERM"));
    one_outcome_per_turn(&evs);
}

#[test]
fn omp_subagent_turn_ends_at_its_terminal_yield() {
    let (kind, evs) = replay("synthetic-omp-subagent.jsonl");
    assert_eq!(kind, ProviderKind::Pi);
    assert_eq!(
        brief(&evs),
        [
            // The task its parent gave it (after `session_init`), not a person's prompt.
            "turn_started - u1000001 3 initiator=agent",
            // The incremental yield (8) goes on; the terminal one (10) hands back.
            "turn_completed - u1000001 10 evidence=tool_ends_turn",
        ]
    );
    assert_eq!(
        evs[1].message.as_deref(),
        Some("The lexer drops the last token when the input has no trailing newline.")
    );
}

/// Oh My Pi's own folder is a default root: `scan` with no path finds its sessions there
/// and reads them as Pi's.
#[test]
fn oh_my_pi_sessions_are_found_under_the_default_roots() {
    let home = tempfile::tempdir().unwrap();
    let dir = home
        .path()
        .join(".omp/agent/sessions/--home-me-src-my-web-app--");
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/part-e/synthetic-omp-session.jsonl");
    std::fs::copy(&fixture, dir.join("2026-11-20T09-00-00-000Z_omp.jsonl")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--json"])
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("COPILOT_HOME")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .env_remove("PI_CODING_AGENT_DIR")
        .output()
        .unwrap();
    let rows = common::json_lines(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["provider"], "pi", "{rows:?}");
    assert_eq!(rows[0]["state"], "completed", "{rows:?}");
}
