//! OpenCode: sessions that are rows of a SQLite database. Each test builds a database
//! with OpenCode's tables (`common::opencode`), writes a turn's rows as OpenCode does,
//! and checks the events that come out.
#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::opencode::Db;
use crate::common::{SETTLE_MS, kinds, options, replay_files};
use baton::model::{Event, ProviderKind};
use baton::provider::ObsKind;
use baton::rows::RowFeed;
use serde_json::json;
use std::path::Path;

const T: i64 = 1_780_000_000_000;

fn replay(db: &Path) -> Vec<Event> {
    replay_files(
        &[(db.to_owned(), ProviderKind::OpenCode)],
        &options(SETTLE_MS),
    )
}

/// A session in `/w/app` whose one turn ran to `finish`.
fn one_turn(db: &Db, session: &str, user: &str, asst: &str, t: i64, finish: &str) {
    db.prompt(session, user, t, "fix the bug");
    db.assistant(session, asst, user, t + 10);
    db.text(session, asst, &format!("prt_{asst}_t"), t + 20, "Fixed it.");
    db.finish(session, asst, user, t + 10, t + 30, finish);
}

#[test]
fn a_turn_that_stops_is_completed_with_its_text_and_row_positions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    one_turn(&db, "ses_1", "msg_01", "msg_02", T, "stop");
    let evs = replay(&db.path);
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"], "{evs:#?}");
    let (start, done) = (&evs[0], &evs[1]);
    assert_eq!(start.provider, Some(ProviderKind::OpenCode));
    assert_eq!(start.session.as_deref(), Some("ses_1"));
    assert_eq!(start.agent, None);
    assert_eq!(start.turn.as_deref(), Some("msg_01"));
    assert_eq!(start.path.as_deref(), db.path.to_str());
    assert_eq!(start.line, Some(T as u64), "line is the row's time_updated");
    assert_eq!(start.project.as_deref(), Some("app"));
    assert_eq!(done.turn.as_deref(), Some("msg_01"));
    assert_eq!(done.message.as_deref(), Some("Fixed it."));
    assert_eq!(done.evidence.as_deref(), Some("stop_reason"));
    assert_eq!(done.line, Some((T + 31) as u64));
    // Read again: the same ids.
    let again = replay(&db.path);
    let ids = |e: &[Event]| e.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&evs));
}

#[test]
fn tool_call_rounds_go_on_until_a_round_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "look around");
    db.assistant("ses_1", "msg_02", "msg_01", T + 10);
    db.tool(
        "ses_1",
        "msg_02",
        "prt_a",
        T + 11,
        T + 11,
        "bash",
        "pending",
        json!({}),
    );
    db.tool(
        "ses_1",
        "msg_02",
        "prt_a",
        T + 11,
        T + 12,
        "bash",
        "running",
        json!({"command":"ls"}),
    );
    db.tool(
        "ses_1",
        "msg_02",
        "prt_a",
        T + 11,
        T + 13,
        "bash",
        "completed",
        json!({"command":"ls"}),
    );
    db.finish("ses_1", "msg_02", "msg_01", T + 10, T + 20, "tool-calls");
    // 1.15 ends on `unknown` too; the rule keeps a turn going on it.
    db.assistant("ses_1", "msg_03", "msg_01", T + 30);
    db.finish("ses_1", "msg_03", "msg_01", T + 30, T + 40, "unknown");
    let evs = replay(&db.path);
    // Only quiet can end it now (replay lets every settle timer fire).
    assert!(
        !evs.iter()
            .any(|e| e.evidence.as_deref() == Some("stop_reason")),
        "{evs:#?}"
    );
    db.assistant("ses_1", "msg_04", "msg_01", T + 50);
    db.text("ses_1", "msg_04", "prt_t", T + 55, "All there.");
    db.finish("ses_1", "msg_04", "msg_01", T + 50, T + 60, "stop");
    let evs = replay(&db.path);
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"], "{evs:#?}");
    assert_eq!(evs[1].message.as_deref(), Some("All there."));
    assert_eq!(evs[1].evidence.as_deref(), Some("stop_reason"));
}

#[test]
fn aborted_and_failed_messages_end_their_turns() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "go");
    db.assistant("ses_1", "msg_02", "msg_01", T + 10);
    db.error(
        "ses_1",
        "msg_02",
        "msg_01",
        T + 10,
        T + 20,
        json!({"name":"MessageAbortedError","data":{"message":"The operation was aborted."}}),
    );
    db.prompt("ses_1", "msg_03", T + 100, "again");
    db.assistant("ses_1", "msg_04", "msg_03", T + 110);
    db.error("ses_1", "msg_04", "msg_03", T + 110, T + 120,
        json!({"name":"APIError","data":{"message":"Overloaded","statusCode":529,"isRetryable":true}}));
    db.prompt("ses_1", "msg_05", T + 200, "and again");
    db.assistant("ses_1", "msg_06", "msg_05", T + 210);
    db.error("ses_1", "msg_06", "msg_05", T + 210, T + 220,
        json!({"name":"APIError","data":{"message":"Rate limited: you exceeded your quota","statusCode":429,"isRetryable":false}}));
    db.prompt("ses_1", "msg_07", T + 300, "once more");
    db.assistant("ses_1", "msg_08", "msg_07", T + 310);
    db.error(
        "ses_1",
        "msg_08",
        "msg_07",
        T + 310,
        T + 320,
        json!({"name":"ProviderAuthError","data":{"providerID":"anthropic","message":"bad key"}}),
    );
    let evs = replay(&db.path);
    assert_eq!(
        kinds(&evs),
        [
            "turn_started",
            "turn_interrupted",
            "turn_started",
            "turn_failed",
            "turn_started",
            "turn_failed",
            "turn_started",
            "turn_failed"
        ],
        "{evs:#?}"
    );
    assert_eq!(evs[1].reason.as_deref(), Some("aborted"));
    assert_eq!(evs[3].reason.as_deref(), Some("api_error"));
    assert_eq!(evs[3].message.as_deref(), Some("Overloaded"));
    assert_eq!(evs[5].reason.as_deref(), Some("usage_limit"));
    assert_eq!(evs[7].reason.as_deref(), Some("auth_error"));
    assert_eq!(evs[7].message.as_deref(), Some("bad key"));
}

/// Follows a database as the daemon does: one feed read after each batch of writes,
/// reduced on the rows' own time.
struct Follow {
    feed: RowFeed,
    reducer: baton::reduce::Reducer,
}

impl Follow {
    fn new(db: &Path) -> Follow {
        Follow {
            feed: RowFeed::new(db, ProviderKind::OpenCode, 1 << 20).unwrap(),
            reducer: baton::reduce::Reducer::new(SETTLE_MS, 1024),
        }
    }

    fn step(&mut self) -> Vec<Event> {
        let mut obs = Vec::new();
        let _ = self.feed.read(|src, o| obs.push((src.clone(), o)));
        let mut out = Vec::new();
        for (src, o) in obs {
            let now = baton::clock::Now::virtual_at(o.record_ts.unwrap_or(0));
            self.reducer.apply(&src, o, now, &mut out);
        }
        out
    }
}

#[test]
fn a_running_question_needs_input_until_it_completes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "plan it");
    db.assistant("ses_1", "msg_02", "msg_01", T + 10);
    let mut follow = Follow::new(&db.path);
    assert_eq!(kinds(&follow.step()), ["turn_started"]);
    let input =
        json!({"questions":[{"question":"Which \u{1b}[31mdatabase?","header":"DB","options":[]}]});
    db.tool(
        "ses_1",
        "msg_02",
        "prt_q",
        T + 11,
        T + 11,
        "question",
        "pending",
        input.clone(),
    );
    assert!(kinds(&follow.step()).is_empty());
    db.tool(
        "ses_1",
        "msg_02",
        "prt_q",
        T + 11,
        T + 12,
        "question",
        "running",
        input.clone(),
    );
    let evs = follow.step();
    assert_eq!(kinds(&evs), ["needs_input"], "{evs:#?}");
    assert_eq!(evs[0].message.as_deref(), Some("Which database?"));
    assert_eq!(evs[0].reason.as_deref(), Some("question"));
    db.tool(
        "ses_1",
        "msg_02",
        "prt_q",
        T + 11,
        T + 5000,
        "question",
        "completed",
        input,
    );
    db.finish("ses_1", "msg_02", "msg_01", T + 10, T + 6000, "tool-calls");
    db.assistant("ses_1", "msg_03", "msg_01", T + 6010);
    db.text("ses_1", "msg_03", "prt_t", T + 6020, "Postgres it is.");
    db.finish("ses_1", "msg_03", "msg_01", T + 6010, T + 6030, "stop");
    let evs = follow.step();
    assert_eq!(
        kinds(&evs),
        ["needs_input_resolved", "turn_completed"],
        "{evs:#?}"
    );
    assert_eq!(evs[1].message.as_deref(), Some("Postgres it is."));
    // Read whole later, the finished wait is history: no question shows.
    assert_eq!(kinds(&replay(&db.path)), ["turn_started", "turn_completed"]);
}

#[test]
fn a_child_session_is_a_subagent_of_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "explore");
    db.assistant("ses_1", "msg_02", "msg_01", T + 10);
    db.tool(
        "ses_1",
        "msg_02",
        "prt_task",
        T + 11,
        T + 12,
        "task",
        "running",
        json!({"prompt":"look"}),
    );
    db.session("ses_2", Some("ses_1"), "/w/app", T + 13);
    one_turn(&db, "ses_2", "msg_03", "msg_04", T + 14, "stop");
    db.tool(
        "ses_1",
        "msg_02",
        "prt_task",
        T + 11,
        T + 100,
        "task",
        "completed",
        json!({"prompt":"look"}),
    );
    db.finish("ses_1", "msg_02", "msg_01", T + 10, T + 110, "tool-calls");
    db.assistant("ses_1", "msg_05", "msg_01", T + 120);
    db.text("ses_1", "msg_05", "prt_t5", T + 121, "Explored.");
    db.finish("ses_1", "msg_05", "msg_01", T + 120, T + 130, "stop");
    let evs = replay(&db.path);
    let main: Vec<&Event> = evs.iter().filter(|e| e.agent.is_none()).collect();
    let sub: Vec<&Event> = evs.iter().filter(|e| e.agent.is_some()).collect();
    assert_eq!(
        main.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["turn_started", "turn_completed"],
        "{evs:#?}"
    );
    assert_eq!(main[1].message.as_deref(), Some("Explored."));
    assert!(!sub.is_empty(), "{evs:#?}");
    for e in &sub {
        assert_eq!(e.session.as_deref(), Some("ses_1"));
        assert_eq!(e.agent.as_deref(), Some("ses_2"));
        assert_eq!(
            e.initiator
                .filter(|_| e.event.as_str() == "turn_started")
                .unwrap_or("agent"),
            "agent"
        );
    }
}

#[test]
fn late_rewrites_of_decided_messages_start_and_end_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    one_turn(&db, "ses_1", "msg_01", "msg_02", T, "stop");
    // OpenCode writes the turn's summary back onto the prompt, and may touch the
    // finished answer again (tokens, cost).
    let prompt = json!({"role":"user","time":{"created":T},"summary":{"title":"Fix","diffs":[]}});
    db.message("msg_01", "ses_1", T, T + 500, &prompt);
    db.part(
        "prt_msg_02_t",
        "msg_02",
        "ses_1",
        T + 20,
        T + 600,
        &json!({"type":"text","text":"Fixed it!"}),
    );
    let evs = replay(&db.path);
    assert_eq!(kinds(&evs), ["turn_started", "turn_completed"], "{evs:#?}");
}

/// The kinds a feed's next read observes.
fn read_kinds(feed: &mut RowFeed) -> Vec<ObsKind> {
    let mut out = Vec::new();
    feed.read(|_, o| out.push(o.kind)).ok();
    out
}

fn is_start(k: &ObsKind) -> bool {
    matches!(k, ObsKind::TurnStart { .. })
}

#[test]
fn a_restart_in_the_middle_of_a_turn_reads_on_from_the_saved_position() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "go");
    db.assistant("ses_1", "msg_02", "msg_01", T + 10);
    let mut feed = RowFeed::new(&db.path, ProviderKind::OpenCode, 1 << 20).unwrap();
    let first = read_kinds(&mut feed);
    assert_eq!(first.iter().filter(|k| is_start(k)).count(), 1, "{first:?}");
    let saved = feed.save();
    drop(feed);
    db.text("ses_1", "msg_02", "prt_t", T + 20, "Done.");
    db.finish("ses_1", "msg_02", "msg_01", T + 10, T + 30, "stop");
    let mut feed = RowFeed::restore(&db.path, ProviderKind::OpenCode, 1 << 20, &saved).unwrap();
    let next = read_kinds(&mut feed);
    assert!(!next.iter().any(is_start), "nothing read twice: {next:?}");
    assert!(
        next.iter().any(
            |k| matches!(k, ObsKind::Final { message, .. } if message.as_deref() == Some("Done."))
        ),
        "{next:?}"
    );
    // Nothing new: nothing read.
    assert!(read_kinds(&mut feed).is_empty());
}

#[test]
fn a_row_committed_late_with_an_earlier_time_is_still_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T + 1000, "go");
    let mut feed = RowFeed::new(&db.path, ProviderKind::OpenCode, 1 << 20).unwrap();
    assert_eq!(
        read_kinds(&mut feed).iter().filter(|k| is_start(k)).count(),
        1
    );
    // A second OpenCode process stamped its row before the first one's commit.
    db.session("ses_9", None, "/w/other", T);
    db.prompt("ses_9", "msg_09", T + 900, "other");
    let next = read_kinds(&mut feed);
    assert_eq!(next.iter().filter(|k| is_start(k)).count(), 1, "{next:?}");
    assert!(read_kinds(&mut feed).is_empty());
}

#[test]
fn a_damaged_row_is_an_anomaly_and_later_rows_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "go");
    db.assistant("ses_1", "msg_02", "msg_01", T + 10);
    db.part_text(
        "prt_bad",
        "msg_02",
        "ses_1",
        T + 11,
        T + 11,
        "{\"type\":\"text\",\"text\":",
    );
    db.part_text(
        "prt_nul",
        "msg_02",
        "ses_1",
        T + 12,
        T + 12,
        "\u{0}\u{0}\u{0}",
    );
    db.text("ses_1", "msg_02", "prt_t", T + 20, "Still here.");
    db.finish("ses_1", "msg_02", "msg_01", T + 10, T + 30, "stop");
    let evs = replay(&db.path);
    assert_eq!(
        kinds(&evs),
        ["turn_started", "anomaly", "anomaly", "turn_completed"],
        "{evs:#?}"
    );
    assert_eq!(evs[1].reason.as_deref(), Some("malformed_row"));
    assert_eq!(evs[3].message.as_deref(), Some("Still here."));
}

#[test]
fn a_database_from_a_newer_opencode_without_the_tables_is_an_anomaly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opencode.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE session_v2 (id TEXT PRIMARY KEY); CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT, extra TEXT);")
        .unwrap();
    drop(conn);
    let evs = replay(&path);
    assert_eq!(kinds(&evs), ["anomaly"], "{evs:#?}");
    assert_eq!(evs[0].reason.as_deref(), Some("db_schema"));
}

#[test]
fn unknown_columns_of_a_newer_opencode_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.conn
        .execute_batch(
            "ALTER TABLE message ADD COLUMN seq INTEGER; ALTER TABLE part ADD COLUMN extra TEXT;",
        )
        .unwrap();
    db.session("ses_1", None, "/w/app", T);
    one_turn(&db, "ses_1", "msg_01", "msg_02", T, "stop");
    assert_eq!(kinds(&replay(&db.path)), ["turn_started", "turn_completed"]);
}

#[test]
fn a_corrupt_or_truncated_database_is_an_anomaly_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk/opencode.db");
    std::fs::create_dir_all(junk.parent().unwrap()).unwrap();
    std::fs::write(&junk, vec![0x5a; 8192]).unwrap();
    let evs = replay(&junk);
    assert_eq!(kinds(&evs), ["anomaly"], "{evs:#?}");
    assert_eq!(evs[0].reason.as_deref(), Some("db_corrupt"));

    let db = Db::create(&dir.path().join("cut"));
    db.session("ses_1", None, "/w/app", T);
    for i in 0..200 {
        db.prompt(
            "ses_1",
            &format!("msg_{i:04}"),
            T + i * 100,
            &"x".repeat(2000),
        );
    }
    db.conn
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let path = db.path.clone();
    drop(db);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 3).unwrap();
    drop(f);
    let evs = replay(&path);
    assert!(
        evs.iter()
            .any(|e| e.reason.as_deref() == Some("db_corrupt")),
        "{evs:#?}"
    );
}

#[test]
fn a_locked_database_is_retried_and_loses_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    db.prompt("ses_1", "msg_01", T, "go");
    // Another program holds the database exclusively (a writer in exclusive locking
    // mode, as a `VACUUM INTO`-style tool may) and writes in the meantime.
    db.conn
        .execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();
    db.assistant_in_tx("ses_1", "msg_02", "msg_01", T + 10);
    let mut feed = RowFeed::new(&db.path, ProviderKind::OpenCode, 1 << 20).unwrap();
    let mut got = Vec::new();
    let res = feed.read(|_, o| got.push(o.kind));
    assert!(res.is_err(), "{got:?}");
    assert!(
        matches!(&got[..], [ObsKind::Anomaly { reason, .. }] if reason == "db_busy"),
        "{got:?}"
    );
    db.conn
        .execute_batch("COMMIT; PRAGMA locking_mode=NORMAL;")
        .unwrap();
    // Leaving exclusive mode takes effect at the next access.
    db.conn
        .execute_batch("SELECT count(*) FROM message;")
        .unwrap();
    let next = read_kinds(&mut feed);
    assert_eq!(next.iter().filter(|k| is_start(k)).count(), 1, "{next:?}");
    assert!(
        next.contains(&ObsKind::Work),
        "the row written meanwhile: {next:?}"
    );
}

#[test]
fn scan_shows_opencode_sessions_with_their_projects() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    // Recent rows: an old working session would be judged ended (no writer).
    let t = baton::clock::wall_now() - 1000;
    db.session("ses_1", None, "/w/app", t);
    one_turn(&db, "ses_1", "msg_01", "msg_02", t, "stop");
    db.session("ses_2", None, "/w/tool", t);
    db.prompt("ses_2", "msg_05", t + 50, "still going");
    db.assistant("ses_2", "msg_06", "msg_05", t + 60);
    let out = common::baton_in(dir.path(), "state")
        .args(["scan", "--json"])
        .arg(&db.path)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let rows = common::json_lines(&out);
    let find = |s: &str| {
        rows.iter()
            .find(|r| r["session"] == s)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(find("ses_1")["state"], "completed", "{rows:#?}");
    assert_eq!(find("ses_1")["provider"], "opencode");
    assert_eq!(find("ses_2")["state"], "working", "{rows:#?}");
}

#[test]
fn a_database_whose_opencode_is_not_running_is_read_without_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    one_turn(&db, "ses_1", "msg_01", "msg_02", T, "stop");
    let path = db.path.clone();
    // The last connection closing checkpoints the log and removes `-wal` and `-shm`.
    drop(db);
    let wal = path.with_file_name("opencode.db-wal");
    assert!(!wal.exists());
    let before = std::fs::read(&path).unwrap();
    assert_eq!(kinds(&replay(&path)), ["turn_started", "turn_completed"]);
    // A read-only reader changes nothing: the database is as it was, and a log SQLite
    // may have made for the read holds no write.
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0);
}

#[test]
fn a_row_from_a_clock_far_ahead_hides_no_later_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    let now = baton::clock::wall_now();
    db.session("ses_1", None, "/w/app", now);
    // Stamped a year ahead.
    db.prompt("ses_1", "msg_01", now + 365 * 86_400_000, "from the future");
    let mut feed = RowFeed::new(&db.path, ProviderKind::OpenCode, 1 << 20).unwrap();
    assert_eq!(
        read_kinds(&mut feed).iter().filter(|k| is_start(k)).count(),
        1
    );
    db.session("ses_2", None, "/w/app", now);
    db.prompt("ses_2", "msg_02", now + 1000, "now");
    let next = read_kinds(&mut feed);
    assert_eq!(next.iter().filter(|k| is_start(k)).count(), 1, "{next:?}");
}

#[test]
fn check_reads_a_databases_rows_not_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path());
    db.session("ses_1", None, "/w/app", T);
    one_turn(&db, "ses_1", "msg_01", "msg_02", T, "stop");
    let check = |path: &Path| {
        common::baton_in(dir.path(), "state")
            .arg("check")
            .arg(path)
            .output()
            .unwrap()
    };
    let out = check(&db.path);
    common::assert_ok(&out);
    db.part_text("prt_bad", "msg_02", "ses_1", T + 40, T + 40, "{not json");
    let out = check(&db.path);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("malformed_row"), "{text}");
    assert!(!text.contains("partial_line"), "{text}");
}
