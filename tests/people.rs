//! What a person reads: project names from the sessions themselves (the directory each
//! agent started in), agent display names, and the fallbacks when a transcript does not
//! say. A fixture tree of Claude Code projects and Codex sessions, as a new user has.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

fn baton() -> Command {
    Command::new(env!("CARGO_BIN_EXE_baton"))
}

fn write(path: &Path, lines: &[String]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut body = lines.join("\n");
    body.push('\n');
    std::fs::write(path, body).unwrap();
}

fn claude_turn(session: &str, cwd: Option<&str>, answer: &str) -> Vec<String> {
    claude_turn_at(
        session,
        cwd,
        answer,
        "2026-03-01T10:00:00.000Z",
        "2026-03-01T10:00:05.000Z",
    )
}

fn claude_turn_at(
    session: &str,
    cwd: Option<&str>,
    answer: &str,
    t0: &str,
    t1: &str,
) -> Vec<String> {
    let cwd = cwd.map_or(String::new(), |c| format!(r#""cwd":"{c}","#));
    vec![
        format!(
            r#"{{"type":"user","uuid":"u-{session}",{cwd}"parentUuid":null,"sessionId":"{session}","isSidechain":false,"timestamp":"{t0}","message":{{"role":"user","content":"go"}}}}"#
        ),
        format!(
            r#"{{"type":"assistant","uuid":"a-{session}",{cwd}"sessionId":"{session}","isSidechain":false,"timestamp":"{t1}","message":{{"id":"m-{session}","model":"claude-opus-4-6","role":"assistant","content":[{{"type":"text","text":"{answer}"}}],"stop_reason":"end_turn"}}}}"#
        ),
    ]
}

fn codex_turn(session: &str, cwd: &str, answer: &str) -> Vec<String> {
    vec![
        format!(
            r#"{{"timestamp":"2026-03-01T10:01:00.000Z","type":"session_meta","payload":{{"id":"{session}","timestamp":"2026-03-01T10:01:00.000Z","cwd":"{cwd}","originator":"codex_cli_rs","cli_version":"0.135.0","source":"cli"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"2026-03-01T10:01:01.000Z","type":"event_msg","payload":{{"type":"task_started","turn_id":"t1"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"2026-03-01T10:01:09.000Z","type":"event_msg","payload":{{"type":"task_complete","turn_id":"t1","last_agent_message":"{answer}"}}}}"#
        ),
    ]
}

const WEB: &str = "11111111-0000-4000-8000-000000000001";
const API: &str = "11111111-0000-4000-8000-000000000002";
const CLI: &str = "11111111-0000-4000-8000-000000000003";
const CX_API: &str = "019c0000-0000-7000-8000-0000000000a1";
const CX_WEB: &str = "019c0000-0000-7000-8000-0000000000a2";

/// `root/claude/projects/…` and `root/codex/sessions/…`; the cli-tool session's records
/// name no `cwd`, so its folder name is all there is.
fn tree(root: &Path) {
    let projects = root.join("claude/projects");
    write(
        &projects.join(format!("-home-me-src-my-web-app/{WEB}.jsonl")),
        &claude_turn(WEB, Some("/home/me/src/my-web-app"), "Web done."),
    );
    write(
        &projects.join(format!("-home-me-work-api-server/{API}.jsonl")),
        &claude_turn(API, Some("/home/me/work/api-server"), "API done."),
    );
    write(
        &projects.join(format!("-home-me-src-cli-tool/{CLI}.jsonl")),
        &claude_turn(CLI, None, "CLI done."),
    );
    let day = root.join("codex/sessions/2026/03/01");
    write(
        &day.join(format!("rollout-2026-03-01T10-01-00-{CX_API}.jsonl")),
        &codex_turn(CX_API, "/home/me/work/api-server", "Codex API done."),
    );
    // Another checkout called my-web-app: the tables tell the two apart.
    write(
        &day.join(format!("rollout-2026-03-01T10-02-00-{CX_WEB}.jsonl")),
        &codex_turn(CX_WEB, "/home/me/forks/my-web-app", "Fork done."),
    );
}

fn run(args: &[&str], root: &Path) -> String {
    let out = baton()
        .args(args)
        .arg(root)
        .env("TZ", "Europe/Madrid")
        .output()
        .unwrap();
    common::assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn events_name_the_project_the_session_started_in() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let out = run(&["replay"], dir.path());
    let mut by_session = std::collections::BTreeMap::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["event"] == "turn_completed" {
            by_session.insert(
                v["session"].as_str().unwrap().to_owned(),
                v["project"].clone(),
            );
        }
    }
    assert_eq!(by_session[WEB], "my-web-app");
    assert_eq!(by_session[API], "api-server");
    assert_eq!(by_session[CX_API], "api-server");
    assert_eq!(by_session[CX_WEB], "my-web-app");
    // No `cwd` in the records: no `project` on the event (the sinks fall back).
    assert_eq!(by_session[CLI], serde_json::Value::Null);
}

#[test]
fn scan_rows_and_table_name_projects_and_agents() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let rows: Vec<serde_json::Value> = run(&["scan", "--json"], dir.path())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let project = |s: &str| {
        rows.iter()
            .find(|r| r["session"] == s)
            .map(|r| r["project"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(project(WEB), "my-web-app");
    assert_eq!(project(API), "api-server");
    assert_eq!(project(CLI), "home-me-src-cli-tool");
    assert_eq!(project(CX_API), "api-server");
    assert_eq!(project(CX_WEB), "my-web-app");

    // --all: the fixture's sessions are older than a week.
    let table = run(&["scan", "--all"], dir.path());
    let row = |m: &str| {
        table
            .lines()
            .map(cells)
            .find(|c| c.last().is_some_and(|l| *l == m))
            .unwrap_or_else(|| panic!("{m} not in {table}"))[..3]
            .join("|")
    };
    // Two checkouts called my-web-app show their parent too; api-server is one
    // directory, so it stays short.
    assert_eq!(
        row("Web done."),
        "completed|Claude Code|src/my-web-app",
        "{table}"
    );
    assert_eq!(
        row("Fork done."),
        "completed|Codex|forks/my-web-app",
        "{table}"
    );
    assert_eq!(
        row("API done."),
        "completed|Claude Code|api-server",
        "{table}"
    );
    assert_eq!(
        row("Codex API done."),
        "completed|Codex|api-server",
        "{table}"
    );
    assert_eq!(
        row("CLI done."),
        "completed|Claude Code|home-me-src-cli-tool",
        "{table}"
    );
}

/// A table line's cells (columns are two spaces apart; cells hold single spaces).
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn copilot_and_pi_sessions_are_named_by_their_start_directory() {
    let dir = tempfile::tempdir().unwrap();
    let pi = dir.path().join("pi/agent/sessions/--home-me-src-notes--");
    write(
        &pi.join("2026-03-01T10-00-00-000Z_22222222-0000-4000-8000-000000000001.jsonl"),
        &[
            r#"{"type":"session","version":3,"id":"22222222-0000-4000-8000-000000000001","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/home/me/src/notes"}"#.to_owned(),
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#.to_owned(),
        ],
    );
    let out = run(&["replay"], dir.path());
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["provider"], "pi", "{out}");
    assert_eq!(v["project"], "notes", "{out}");

    let copilot = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/copilot");
    let out = run(&["replay"], &copilot);
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["provider"], "copilot", "{out}");
    assert_eq!(first["project"], "web", "{out}");
}

#[test]
fn status_rows_and_table_name_the_project() {
    let mut d = common::Daemon::tree().start(&[]);
    let now = baton::clock::wall_now();
    let t0 = baton::clock::format_rfc3339(now);
    let t1 = baton::clock::format_rfc3339(now + 1000);
    let path = d
        .claude()
        .join(format!("-home-me-src-my-web-app/{WEB}.jsonl"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let lines = claude_turn_at(WEB, Some("/home/me/src/my-web-app"), "Web done.", &t0, &t1);
    common::append(&path, (lines.join("\n") + "\n").as_bytes());
    let ev = d.wait_for("turn_completed", |e| e["event"] == "turn_completed");
    assert_eq!(ev["project"], "my-web-app");

    let out = d.baton().args(["status", "--json"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let row: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["session"] == WEB)
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(row["project"], "my-web-app");
    let out = d.baton().arg("status").output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table
            .lines()
            .any(|l| cells(l)[..3] == ["completed", "Claude Code", "my-web-app"]),
        "{table}"
    );
    d.stop();
}

#[test]
fn scan_tables_show_ages_and_json_stays_utc() {
    let dir = tempfile::tempdir().unwrap();
    let now = baton::clock::wall_now();
    let at = |ago_ms: i64| baton::clock::format_rfc3339(now - ago_ms);
    let projects = dir.path().join("claude/projects");
    write(
        &projects.join(format!("-home-me-src-my-web-app/{WEB}.jsonl")),
        &claude_turn_at(
            WEB,
            Some("/home/me/src/my-web-app"),
            "Web done.",
            &at(400_000),
            &at(330_000),
        ),
    );
    write(
        &projects.join(format!("-home-me-work-api-server/{API}.jsonl")),
        &claude_turn_at(
            API,
            Some("/home/me/work/api-server"),
            "API done.",
            &at(3 * 86_400_000 + 9000),
            &at(3 * 86_400_000 + 5000),
        ),
    );
    let table = run(&["scan"], dir.path());
    let row = |m: &str| {
        table
            .lines()
            .map(cells)
            .find(|c| c.last().is_some_and(|l| *l == m))
            .unwrap_or_else(|| panic!("{table}"))[3..]
            .join("|")
    };
    assert_eq!(row("Web done."), "5 min ago|Web done.", "{table}");
    assert_eq!(row("API done."), "3 days ago|API done.", "{table}");
    // Machines still get UTC.
    let json = run(&["scan", "--json"], dir.path());
    assert!(
        json.contains(&format!("\"record_ts\":\"{}\"", at(330_000))),
        "{json}"
    );
}

#[test]
fn tail_prints_the_local_time_of_day_with_its_zone() {
    let mut d = common::Daemon::tree().start(&[]);
    let mut tail = d
        .baton()
        .arg("tail")
        .env("TZ", "Europe/Madrid")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(tail.stdout.take().unwrap()));
    let now = baton::clock::wall_now();
    let t0 = baton::clock::format_rfc3339(now);
    let t1 = baton::clock::format_rfc3339(now + 1000);
    let path = d
        .claude()
        .join(format!("-home-me-src-my-web-app/{WEB}.jsonl"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Give tail a moment to subscribe; a turn written before it would be missed.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let turn = claude_turn_at(WEB, Some("/home/me/src/my-web-app"), "Web done.", &t0, &t1);
    common::append(&path, (turn.join("\n") + "\n").as_bytes());
    let ev = d.wait_for("turn_completed", |e| e["event"] == "turn_completed");
    let ms = baton::clock::parse_rfc3339(ev["ts"].as_str().unwrap()).unwrap();
    let madrid = jiff::tz::TimeZone::get("Europe/Madrid").unwrap();
    let local = jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned_datetime(madrid)
        .strftime("%H:%M:%S %Z")
        .to_string();
    let want = format!("{local}  Claude Code · my-web-app: your turn — Web done.");
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("your turn") {
            seen.push(line);
            break;
        }
        seen.push(line);
    }
    let _ = tail.kill();
    let _ = tail.wait();
    assert_eq!(
        seen.last().map(String::as_str),
        Some(want.as_str()),
        "{seen:?}"
    );
    d.stop();
}

#[test]
fn a_mistyped_watch_root_is_a_warning_at_start() {
    let d = common::Daemon::tree();
    let typo = d.claude().join("projcets");
    let ok = d.claude().join("projects");
    std::fs::create_dir_all(&ok).unwrap();
    let typo_flag = format!("claude={}", typo.display());
    let ok_flag = format!("claude={}", ok.display());
    let d = d.start(&["--watch", &typo_flag, "--watch", &ok_flag]);
    let (_, log) = d.stop_with_log();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("Watch root does not exist"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(warned[0].contains(&typo.display().to_string()), "{log}");
}
