//! OpenCode live: the real daemon following an OpenCode database as OpenCode writes it
//! (WAL mode, one transaction per row change), across a restart.
#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::Daemon;
use crate::common::opencode::Db;
use serde_json::Value;

fn now_ms() -> i64 {
    baton::clock::wall_now()
}

fn count(evs: &[Value], kind: &str, turn: &str) -> usize {
    evs.iter()
        .filter(|e| e["event"] == kind && e["turn"] == turn)
        .count()
}

#[test]
fn the_daemon_follows_a_live_database_and_resumes_after_a_restart() {
    let mut d = Daemon::tree();
    let db = Db::create(&d.dir.path().join("data/opencode"));
    let watch = format!("opencode={}", db.path.display());
    // History: a turn two days old, and one left waiting on a question. Neither pages.
    let old = now_ms() - 2 * 86_400_000;
    db.session("ses_old", None, "/w/old", old);
    db.prompt("ses_old", "msg_00a", old, "old work");
    db.assistant("ses_old", "msg_00b", "msg_00a", old + 10);
    db.finish("ses_old", "msg_00b", "msg_00a", old + 10, old + 20, "stop");
    d = d.start(&["--watch", &watch]);

    // A live turn, row by row.
    let t = now_ms();
    db.session("ses_1", None, "/w/app", t);
    db.prompt("ses_1", "msg_01", t, "fix it");
    db.assistant("ses_1", "msg_02", "msg_01", t + 1);
    let started = d.wait_for("turn_started", |e| {
        e["event"] == "turn_started" && e["turn"] == "msg_01"
    });
    assert_eq!(started["provider"], "opencode");
    assert_eq!(started["session"], "ses_1");
    assert_eq!(started["project"], "app");
    assert_eq!(started["path"], db.path.display().to_string());
    db.text("ses_1", "msg_02", "prt_t1", t + 2, "Fixed.");
    db.finish("ses_1", "msg_02", "msg_01", t + 1, t + 3, "stop");
    let done = d.wait_for("turn_completed", |e| {
        e["event"] == "turn_completed" && e["turn"] == "msg_01"
    });
    assert_eq!(done["message"], "Fixed.");

    // A turn running when baton stops, finished while it is down.
    let t = now_ms();
    db.prompt("ses_1", "msg_03", t, "and this");
    db.assistant("ses_1", "msg_04", "msg_03", t + 1);
    d.wait_for("turn_started 2", |e| {
        e["event"] == "turn_started" && e["turn"] == "msg_03"
    });
    d.terminate();
    db.text("ses_1", "msg_04", "prt_t2", t + 2, "Also done.");
    db.finish("ses_1", "msg_04", "msg_03", t + 1, t + 3, "stop");
    d.restart(&["--watch", &watch]);
    let done = d.wait_for("turn_completed 2", |e| {
        e["event"] == "turn_completed" && e["turn"] == "msg_03"
    });
    assert_eq!(done["message"], "Also done.");

    // One more live turn after the restart, so everything before it has been read.
    let t = now_ms();
    db.prompt("ses_1", "msg_05", t, "last");
    db.assistant("ses_1", "msg_06", "msg_05", t + 1);
    db.finish("ses_1", "msg_06", "msg_05", t + 1, t + 3, "stop");
    d.wait_for("turn_completed 3", |e| {
        e["event"] == "turn_completed" && e["turn"] == "msg_05"
    });
    // `status` shows the session as `scan` would (the views follow the events within
    // their publishing period, 100 ms, which the database's polling keeps busy).
    let start = std::time::Instant::now();
    let row = loop {
        let status = d.baton().args(["status", "--json"]).output().unwrap();
        common::assert_ok(&status);
        let rows = common::json_lines(&status);
        let row = rows
            .iter()
            .find(|r| r["session"] == "ses_1")
            .unwrap_or_else(|| panic!("{rows:#?}"))
            .clone();
        if row["state"] == "completed" || start.elapsed() > common::DEADLINE {
            break row;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(row["provider"], "opencode");
    assert_eq!(row["state"], "completed", "{row}");
    let evs = d.stop();
    for turn in ["msg_01", "msg_03", "msg_05"] {
        assert_eq!(count(&evs, "turn_started", turn), 1, "{turn}: {evs:#?}");
        assert_eq!(count(&evs, "turn_completed", turn), 1, "{turn}: {evs:#?}");
    }
    assert!(
        !evs.iter().any(|e| e["session"] == "ses_old"),
        "history must not page: {evs:#?}"
    );
    assert!(!evs.iter().any(|e| e["event"] == "anomaly"), "{evs:#?}");
}

#[test]
fn a_database_made_after_start_in_a_watched_folder_is_followed_and_a_corrupt_one_stalls_nothing() {
    let mut d = Daemon::tree();
    let dir = d.dir.path().join("data/opencode");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = d.dir.path().join("bad/opencode.db");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    // The folder as a root, as a person would write `--watch opencode=~/.local/share/opencode`.
    let watch = format!("opencode={}", dir.display());
    let watch_bad = format!("opencode={}", bad.display());
    d = d.start(&[
        "--watch",
        &watch_bad,
        "--watch",
        &watch,
        "--poll-interval",
        "200",
    ]);
    // A damaged database appears: one anomaly, retried on every poll, never repeated.
    std::fs::write(&bad, vec![0x33; 4096]).unwrap();
    d.wait_for("anomaly", |e| {
        e["event"] == "anomaly" && e["reason"] == "db_corrupt"
    });
    // OpenCode runs for the first time.
    let db = Db::create(&dir);
    let t = now_ms();
    db.session("ses_1", None, "/w/app", t);
    db.prompt("ses_1", "msg_01", t, "hello");
    db.assistant("ses_1", "msg_02", "msg_01", t + 1);
    db.finish("ses_1", "msg_02", "msg_01", t + 1, t + 2, "stop");
    d.wait_for("turn_completed", |e| {
        e["event"] == "turn_completed" && e["turn"] == "msg_01"
    });
    // A Claude session beside it is followed as ever.
    let claude = common::Claude::new();
    let path = claude.path_in(&d.claude());
    std::fs::write(&path, claude.prompt("hi").0).unwrap();
    d.wait_for("claude turn", |e| {
        e["event"] == "turn_started" && e["provider"] == "claude"
    });
    let evs = d.stop();
    let corrupt = evs.iter().filter(|e| e["reason"] == "db_corrupt").count();
    assert_eq!(corrupt, 1, "the same anomaly is not repeated: {evs:#?}");
}
