//! Gemini CLI's legacy sessions (v0.29–v0.38): `chats/session-….json`, one pretty-printed
//! document `{sessionId, projectHash, startTime, lastUpdated, messages, kind}` rewritten
//! in place on every change (shared/docs/other-agents.md "Gemini CLI (details)"). The
//! documents here are built from that shape. Each version is read whole and diffed
//! against the one read before: a turn is decided once across rewrites, a half-written
//! version is held until a good one comes, and the daemon pages each turn once across a
//! restart. Waits have deadlines but nothing asserts how fast an event came.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Daemon, SETTLE_MS, count, feed_ticking, is, options, replay_files, ts_now};
use baton::feed::FileFeed;
use baton::model::{Event, ProviderKind};
use baton::reduce::Reducer;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const NAME: &str = "session-2026-10-01T09-00-legacy1.json";

fn user(id: &str, ts: &str, text: &str) -> Value {
    json!({"id": id, "timestamp": ts, "type": "user", "content": [{"text": text}]})
}

fn gemini(id: &str, ts: &str, text: &str) -> Value {
    json!({"id": id, "timestamp": ts, "type": "gemini", "content": text,
        "thoughts": [], "tokens": {"input": 10, "output": 5, "total": 15},
        "model": "gemini-2.5-pro"})
}

/// One version of the document, as `JSON.stringify(conversation, null, 2)` writes it
/// (no newline at the end).
fn doc(session: &str, updated: &str, messages: &[Value]) -> Vec<u8> {
    let d = json!({"sessionId": session, "projectHash": "ab12", "startTime": "2026-10-01T09:00:00.000Z",
        "lastUpdated": updated, "messages": messages, "kind": "main"});
    serde_json::to_string_pretty(&d).unwrap().into_bytes()
}

const T1: &str = "2026-10-01T09:00:00.000Z";
const T2: &str = "2026-10-01T09:00:05.000Z";
const T3: &str = "2026-10-01T09:10:00.000Z";
const T4: &str = "2026-10-01T09:10:07.000Z";
/// 2026-10-01T09:00:00Z, Unix ms.
const T0_MS: i64 = 1_790_845_200_000;

fn first_version() -> Vec<u8> {
    doc(
        "legacy1",
        T2,
        &[
            user("p1", T1, "Fix the build."),
            gemini("g1", T2, "Fixed the build."),
        ],
    )
}

fn second_version() -> Vec<u8> {
    doc(
        "legacy1",
        T4,
        &[
            user("p1", T1, "Fix the build."),
            gemini("g1", T2, "Fixed the build."),
            user("p2", T3, "Now the tests."),
            gemini("g2", T4, "The tests pass."),
        ],
    )
}

fn path_in(dir: &Path) -> PathBuf {
    dir.join(".gemini/tmp/proj/chats").join(NAME)
}

type Row = (&'static str, String, String);

fn rows(evs: &[Event]) -> Vec<Row> {
    evs.iter()
        .map(|e| {
            (
                e.event.as_str(),
                e.turn.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn row(ev: &'static str, turn: &str, msg: &str) -> Row {
    (ev, turn.to_owned(), msg.to_owned())
}

/// Each version read whole by one feed (as the daemon reads a document on each change),
/// the clock run past the settle after each.
fn read_versions(versions: &[Vec<u8>]) -> Vec<Event> {
    let path = Path::new("/h/.gemini/tmp/proj/chats").join(NAME);
    let mut fd = FileFeed::new(&path, ProviderKind::Gemini, 1 << 20);
    assert!(fd.is_document());
    let mut r = Reducer::new(SETTLE_MS, 4096);
    let mut clock = T0_MS;
    let mut out = Vec::new();
    for v in versions {
        assert_eq!(fd.start(), 0, "a document is read from its first byte");
        feed_ticking(&mut fd, &mut r, &mut clock, v, &mut out);
        clock += 2 * SETTLE_MS as i64;
        r.tick(baton::clock::Now::virtual_at(clock), &mut out);
    }
    out
}

#[test]
fn legacy_document_rewritten_twice_decides_each_turn_once_from_the_newest_version() {
    // Turn 1 answered; the same document rewritten with only `lastUpdated` changed; then
    // a second prompt and its answer added.
    let touched = doc(
        "legacy1",
        T3,
        &[
            user("p1", T1, "Fix the build."),
            gemini("g1", T2, "Fixed the build."),
        ],
    );
    let evs = read_versions(&[first_version(), touched, second_version()]);
    assert_eq!(
        rows(&evs),
        vec![
            row("turn_started", "p1", ""),
            row("turn_completed", "p1", "Fixed the build."),
            row("turn_started", "p2", ""),
            row("turn_completed", "p2", "The tests pass."),
        ]
    );
    assert!(evs.iter().all(|e| e.session.as_deref() == Some("legacy1")));
    // The ids come from the message ids: the same as a straight read of the newest
    // version gives (what a restart's re-read finds in the ledger).
    let once = read_versions(&[second_version()]);
    let ids = |evs: &[Event]| evs.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&evs), ids(&once));
}

#[test]
fn legacy_half_written_rewrite_is_held_and_the_next_good_version_is_read() {
    let second = second_version();
    let half = second[..second.len() / 2].to_vec();
    let evs = read_versions(&[first_version(), half, second.clone()]);
    assert_eq!(
        rows(&evs),
        vec![
            row("turn_started", "p1", ""),
            row("turn_completed", "p1", "Fixed the build."),
            row("turn_started", "p2", ""),
            row("turn_completed", "p2", "The tests pass."),
        ],
        "no anomaly for a version a later one completes, and nothing lost"
    );

    // A replay whose file stays half written: a counted anomaly; the good version of the
    // same file: the turns.
    let dir = tempfile::tempdir().unwrap();
    let path = path_in(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &second[..second.len() - 3]).unwrap();
    let evs = replay_files(&[(path.clone(), ProviderKind::Gemini)], &options(SETTLE_MS));
    let anomalies: Vec<_> = evs
        .iter()
        .filter(|e| e.event.as_str() == "anomaly")
        .map(|e| e.reason.clone().unwrap_or_default())
        .collect();
    assert_eq!(anomalies, ["malformed_line"]);
    assert!(evs.iter().all(|e| e.event.as_str() == "anomaly"));
    std::fs::write(&path, &second).unwrap();
    let evs = replay_files(&[(path, ProviderKind::Gemini)], &options(SETTLE_MS));
    let kinds: Vec<_> = evs.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "turn_started",
            "turn_completed",
            "turn_started",
            "turn_completed"
        ]
    );
}

#[test]
fn default_root_scan_finds_legacy_json_sessions_beside_jsonl_ones() {
    let home = tempfile::tempdir().unwrap();
    let legacy = path_in(home.path());
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::write(&legacy, second_version()).unwrap();
    let jsonl = legacy.with_file_name("session-2026-11-01T10-00-new1.jsonl");
    let header = json!({"sessionId": "new1", "projectHash": "ab12",
        "startTime": T1, "lastUpdated": T1, "kind": "main"});
    std::fs::write(&jsonl, format!("{header}\n{}\n", user("q1", T1, "Hello."))).unwrap();
    // Not a session: the prompt log beside `chats/`. (The JSONL session is stale: its
    // record is old and no agent runs.)
    std::fs::write(
        home.path().join(".gemini/tmp/proj/logs.json"),
        "[{\"sessionId\":\"x\",\"messageId\":0,\"type\":\"user\",\"message\":\"hi\"}]",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--json", "--all", "--provider", "gemini"])
        .env("HOME", home.path())
        .env_remove("GEMINI_CLI_HOME")
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_RUNTIME_DIR", home.path().join("run"))
        .output()
        .unwrap();
    common::assert_ok(&out);
    let mut got: Vec<(String, String)> = common::json_lines(&out)
        .iter()
        .map(|r| {
            (
                r["session"].as_str().unwrap_or_default().to_owned(),
                r["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("legacy1".to_owned(), "completed".to_owned()),
            ("new1".to_owned(), "stale".to_owned()),
        ]
    );
}

fn root(base: &Path) -> PathBuf {
    base.join("home/.gemini/tmp")
}

fn args(watch: &str) -> Vec<&str> {
    vec![
        "--debug-sweep-interval",
        "200ms",
        "--settle",
        "1s",
        "--watch",
        watch,
    ]
}

#[test]
fn daemon_reads_each_rewrite_and_pages_each_turn_once_across_a_restart() {
    let d = Daemon::tree();
    let base = d.dir.path().to_path_buf();
    let watch = format!("gemini={}", root(&base).display());
    let mut d = d.start(&args(&watch));
    let chats = root(&base).join("web/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let path = chats.join(NAME);
    let (t1, t2) = (ts_now(), ts_now());
    let turn1 = [
        user("p1", &t1, "Fix the build."),
        gemini("g1", &t2, "Fixed."),
    ];
    // Each version is written over the last one in place (same file, truncated first).
    std::fs::write(&path, doc("live1", &t2, &turn1)).unwrap();
    let done = d.wait_for("turn 1", |e| is("turn_completed", "p1".to_owned())(e));
    assert_eq!(done["message"], "Fixed.");
    assert_eq!(done["session"], "live1");

    // A second prompt, caught half written, then the whole version with its answer.
    let t3 = ts_now();
    let mut turn2 = turn1.to_vec();
    turn2.push(user("p2", &t3, "Now the tests."));
    let v2 = doc("live1", &t3, &turn2);
    std::fs::write(&path, &v2[..v2.len() / 2]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    std::fs::write(&path, &v2).unwrap();
    d.wait_for("turn 2 started", |e| is("turn_started", "p2".to_owned())(e));
    let t4 = ts_now();
    turn2.push(gemini("g2", &t4, "The tests pass."));
    std::fs::write(&path, doc("live1", &t4, &turn2)).unwrap();
    d.wait_for("turn 2", |e| is("turn_completed", "p2".to_owned())(e));

    // A restart: the document is read again, and nothing is paged again; then it is
    // rewritten with a third turn, paged once.
    d.terminate();
    d.restart(&args(&watch));
    let t5 = ts_now();
    let mut turn3 = turn2.clone();
    turn3.push(user("p3", &t5, "Ship it."));
    turn3.push(gemini("g3", &t5, "Shipped."));
    std::fs::write(&path, doc("live1", &t5, &turn3)).unwrap();
    d.wait_for("turn 3", |e| is("turn_completed", "p3".to_owned())(e));
    let events = d.stop();
    for turn in ["p1", "p2", "p3"] {
        assert_eq!(count(&events, "turn_started", turn), 1, "{turn}");
        assert_eq!(count(&events, "turn_completed", turn), 1, "{turn}");
    }
    let anomalies: Vec<&Value> = events.iter().filter(|e| e["event"] == "anomaly").collect();
    assert!(anomalies.is_empty(), "{anomalies:?}");
}
