//! Open turns parked (as the daemon parks them, `Reducer::park_open_turns`): a working
//! or waiting session of an idle file waits in saved form, and whatever time or a
//! signal can still do to it happens as if it had stayed live.
#![allow(clippy::unwrap_used)]

use crate::common::{SETTLE_MS, claude};
use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, ProviderKind, SessionState};
use baton::provider::signal::{SessionRef, Signal, SignalKind, SignalSource};
use baton::reduce::{Reducer, SessionView, Spill};
use baton::session_row::Command;
use baton::state::spill::SpillFile;
use baton::views::{ParkedRows, Table};
use std::path::Path;
use std::sync::Arc;

const MAX_LINE: usize = 8 << 20;
/// The liveness check's quiet period.
const AFTER: u64 = 120_000;
/// 2026-03-01T10:00:00Z, the time of the builders' first record.
const T0: i64 = 1_772_359_200_000;

fn reducer() -> Reducer {
    let mut r = Reducer::new(SETTLE_MS, 1024);
    r.park_open_turns(AFTER);
    r
}

/// Feeds `lines` to `r` at `clock`; returns the events.
fn feed(fd: &mut FileFeed, r: &mut Reducer, clock: i64, lines: &[String]) -> Vec<Event> {
    let mut out = Vec::new();
    fd.feed(&crate::common::lines(lines), |src, obs| {
        r.apply(src, obs, Now::virtual_at(clock), &mut out);
    });
    out
}

fn claude_working(dir: &Path) -> FileFeed {
    FileFeed::new(
        &dir.join(format!("{}.jsonl", claude::SESSION)),
        ProviderKind::Claude,
        MAX_LINE,
    )
}

/// A Claude Code turn at work, its records saying the directory the agent runs in (so
/// the liveness check judges it) or not.
fn working_lines(cwd: bool) -> Vec<String> {
    [
        claude::prompt("p1", 0, "go"),
        claude::tool_use("a1", 5, "m1", "tool_1", "Bash"),
    ]
    .into_iter()
    .map(|l| {
        let mut v: serde_json::Value = serde_json::from_str(&l).unwrap();
        if cwd {
            v["cwd"] = "/w".into();
        }
        v.to_string()
    })
    .collect()
}

fn at(ms: i64) -> Now {
    Now::virtual_at(ms)
}

/// The writer's clock runs a day ahead, so only the time since its last record arrived
/// makes the check due: a parked session keeps that time, and is asked about exactly
/// when it would have been had it stayed live, with the same outcome.
#[test]
fn a_parked_working_session_is_asked_about_when_its_check_falls_due() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = T0 - 86_400_000;
    let run = |park: bool| {
        let mut fd = claude_working(tmp.path());
        let mut r = reducer();
        let mut events = feed(&mut fd, &mut r, clock, &working_lines(true));
        if park {
            assert!(r.park_path(&fd.path, at(clock + 1000)), "parkable");
            assert_eq!(r.parked_count(), 1);
            assert!(
                r.open_paths().any(|p| *p == fd.path),
                "its file stays among those with a turn open"
            );
        }
        let early = at(clock + AFTER as i64 - 1);
        assert!(r.quiet_working(early, AFTER).is_empty());
        assert_eq!(r.parked_count(), usize::from(park), "not woken early");
        let due = at(clock + AFTER as i64);
        let quiet = r.quiet_working(due, AFTER);
        assert_eq!(quiet.len(), 1, "asked about once due");
        assert_eq!(r.parked_count(), 0);
        r.writer_gone(&quiet[0].key, due, AFTER, &mut events);
        (events, r.sessions())
    };
    let (plain, sessions) = run(false);
    let kinds: Vec<&str> = plain.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["turn_started", "turn_interrupted"]);
    let (parked, p_sessions) = run(true);
    assert_eq!(parked, plain);
    assert_eq!(p_sessions, sessions);
}

/// A working session already due its check stays live (the sweeps keep asking it). One
/// the check cannot judge parks, and its `status` row turns stale while it waits, when
/// it would have live: the table keeps it both ways.
#[test]
fn a_due_session_stays_live_and_a_parked_row_turns_stale_on_time() {
    let tmp = tempfile::tempdir().unwrap();
    let last = T0 + 5_000;

    let mut fd = claude_working(tmp.path());
    let mut r = reducer();
    feed(&mut fd, &mut r, last, &working_lines(true));
    assert!(!r.park_path(&fd.path, at(last + AFTER as i64)), "due");
    assert!(r.park_path(&fd.path, at(last + 1_000)), "not due yet");

    // Without the directory its agent runs in, no check can judge it.
    let spill: Arc<dyn Spill> = Arc::new(SpillFile::new(tmp.path()).unwrap());
    let mut table = Table::with_parked_rows(ParkedRows {
        spill: spill.clone(),
        format: baton::socket::parked_row,
    });
    let mut fd = claude_working(tmp.path());
    let mut r = reducer();
    r.spill_parked(spill);
    r.track_changes();
    feed(&mut fd, &mut r, last, &working_lines(false));
    table.apply(r.take_changes());
    let view: SessionView = r.sessions().remove(0);
    assert_eq!(view.state, SessionState::Working);
    assert!(!view.judged);
    assert!(r.park_path(&fd.path, at(last + 1_000)));
    table.apply(r.take_changes());
    let turns = view.record_ts.unwrap() + AFTER as i64;
    for (now, shown) in [
        (last + 1_000, "working"),
        (turns, "working"),
        (turns + 1, "stale"),
        (turns + 86_400_000, "stale"),
    ] {
        let rows = table.rows(now);
        assert_eq!(rows.len(), 1);
        let row = String::from_utf8(rows[0].row().expect("a parked row")).unwrap() + "\n";
        assert!(
            row.contains(&format!(r#""state":"{shown}""#)),
            "{now}: {row}"
        );
        let mut line = Vec::new();
        baton::session_row::write_line(&view, now, AFTER, Command::Status, &mut line).unwrap();
        assert_eq!(row, String::from_utf8(line).unwrap(), "{now}");
    }
}

/// A background job names its session by the first block of the id: the parked
/// working session is found by it, and the job's wait for its person is a wait as it
/// would have been live. A session a signal put in a wait does not park (that memory is not saved).
#[test]
fn signals_reach_parked_open_turns_and_a_heard_wait_stays_live() {
    let tmp = tempfile::tempdir().unwrap();
    let last = T0 + 5_000;
    let job = Signal {
        provider: ProviderKind::Claude,
        session: SessionRef::Prefix(claude::SESSION[..8].to_owned()),
        kind: SignalKind::Waiting {
            reason: "input needed".to_owned(),
            message: None,
        },
        source: SignalSource::Job,
        name: Some("nightly".to_owned()),
    };
    let run = |park: bool| {
        let mut fd = claude_working(tmp.path());
        let mut r = reducer();
        let mut events = feed(&mut fd, &mut r, last, &working_lines(true));
        if park {
            assert!(r.park_path(&fd.path, at(last + 1_000)));
        }
        assert_eq!(r.signal(&job, at(last + 2_000), &mut events), 1);
        (events, r.sessions())
    };
    let (plain, sessions) = run(false);
    assert!(
        plain.iter().any(|e| e.event.as_str() == "needs_input"),
        "{plain:?}"
    );
    let (parked, p_sessions) = run(true);
    assert_eq!(parked, plain);
    assert_eq!(p_sessions, sessions);

    let mut fd = claude_working(tmp.path());
    let mut r = reducer();
    let mut events = feed(&mut fd, &mut r, last, &working_lines(true));
    let wait = Signal {
        provider: ProviderKind::Claude,
        session: SessionRef::Id(claude::SESSION.to_owned()),
        kind: SignalKind::Waiting {
            reason: "permission prompt".to_owned(),
            message: None,
        },
        source: SignalSource::Hook,
        name: None,
    };
    assert_eq!(r.signal(&wait, at(last + 1_000), &mut events), 1);
    assert_eq!(r.sessions()[0].state, SessionState::NeedsInput);
    assert!(!r.park_path(&fd.path, at(last + 2_000)), "a heard wait");
}

/// In the daemon: a working session of a rollout idle for an hour, whose writer's clock
/// runs an hour ahead, parks with the history read (its check is not due by the record
/// times). A quiet period after the read the check falls due, the sweep brings it back,
/// finds nothing holding the rollout open, and ends the turn once; `status` shows it.
#[test]
fn the_daemon_asks_about_a_parked_working_session_once_it_falls_due() {
    use crate::common::{Codex, DEADLINE, Daemon, count, is, uuid};
    use serde_json::json;
    let d = Daemon::tree();
    let x = Codex::new();
    let dir = d.codex().join("2026").join("12").join("01");
    std::fs::create_dir_all(&dir).unwrap();
    let path = x.path_in(&dir);
    let turn = uuid();
    let ahead = baton::clock::format_rfc3339(baton::clock::wall_now() + 3_600_000);
    let meta = json!({"timestamp": ahead, "type": "session_meta",
        "payload": {"id": x.session, "timestamp": ahead, "cwd": "/tmp", "originator": "codex_cli_rs"}});
    let open = json!({"timestamp": ahead, "type": "event_msg",
        "payload": {"type": "task_started", "turn_id": turn}});
    std::fs::write(&path, format!("{meta}\n{open}\n")).unwrap();
    std::fs::File::open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    let mut d = d.start(&[
        "--no-desktop",
        "--liveness-after",
        "2s",
        "--debug-sweep-interval",
        "500ms",
    ]);
    let ev = d.wait_for("the interruption", is("turn_interrupted", turn.clone()));
    assert_eq!(ev["reason"], "writer_gone");
    let start = std::time::Instant::now();
    loop {
        let out = d.baton().args(["status", "--json"]).output().unwrap();
        let shown = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["session"] == x.session.as_str())
            .map(|v| (v["state"].clone(), v["reason"].clone()));
        if shown == Some(("interrupted".into(), "writer_gone".into())) {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "status shows {shown:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Sweeps go on: parked again, decided, it is never asked about twice.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let events = d.stop();
    assert_eq!(count(&events, "turn_interrupted", &turn), 1, "{events:?}");
}
