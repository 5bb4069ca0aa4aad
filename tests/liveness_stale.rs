//! A first run's history read of a transcript copied without its modification time (so
//! the file looks fresh): its last record, an answer with no end marker, is months old.
//! The settle period counts from the read (the file's mtime is what says it is idle), so
//! for 90 s the answer is pending; `status` must not show it `working` months ago
//! meanwhile: it shows `stale` (no event says so).

#![allow(clippy::unwrap_used)]

use crate::common::{DEADLINE, Daemon};
use crate::common::{claude, lines};
use serde_json::Value;
use std::fs;
use std::time::{Duration, Instant};

#[test]
fn an_old_pending_answer_read_at_start_shows_stale_not_working() {
    let d = Daemon::tree();
    let dir = d.claude().join("-home-me-src-app");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("{}.jsonl", claude::SESSION)),
        lines(&[
            claude::prompt("u1", 0, "hi"),
            claude::text("a1", 3, "msg_1", "Here it is.", None),
        ]),
    )
    .unwrap();
    let d = d.start(&[]);
    let start = Instant::now();
    let row = loop {
        let out = d.baton().args(["status", "--json"]).output().unwrap();
        let row = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["session"] == claude::SESSION);
        if let Some(r) = row {
            break r;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "status never listed the session"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(row["state"], "stale", "{row}");
    // The record is months old: `--all`, or the table sums it up as an older session.
    let out = d.baton().args(["status", "--all"]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.lines().nth(1).is_some_and(|l| l.starts_with("stale")),
        "{table}"
    );
    let events = d.stop();
    assert!(
        events.iter().all(|e| e["event"] != "stale"),
        "stale is a view state, never an event: {events:?}"
    );
}
