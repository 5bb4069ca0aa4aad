//! Parked sessions: a cold file's sessions kept in saved form instead of as live state.
//! Parking must change nothing anyone sees: the same events, the same `status` rows,
//! the same saved checkpoints, whenever it happens and whatever comes after.
#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, Daemon, SETTLE_MS, ts_ago};
use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::Event;
use baton::model::ProviderKind;
use baton::reduce::{Reducer, SessionView};
use baton::reduce::{Spill, Spilled};
use baton::session_row::Command;
use baton::state::spill::SpillFile;
use baton::views::{ParkedRows, RowReads, RowSource, Table};
use baton::watch::{self, Root};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const MAX_LINE: usize = 8 << 20;

/// Events, sessions at the end, the `status` table's views, saved sessions per file, and
/// how many times a file's sessions were parked.
type Run = (
    Vec<Event>,
    Vec<SessionView>,
    Vec<SessionView>,
    Vec<String>,
    usize,
);

/// One reducer over every corpus file, fed in chunks; with `park`, every file read so
/// far is offered for parking after each chunk (far more often than the daemon does).
/// Returns the events, the sessions at the end, the views a `status` table kept from
/// the reported changes, and each file's saved sessions as a checkpoint holds them.
/// With `spill`, parked sessions go to the daemon's scratch file in that directory.
/// With `open` (the liveness check's quiet period), open turns park too, as the
/// daemon's do, and the run ends with a liveness sweep that finds no writer alive.
fn run_corpus(park: bool, spill: Option<&std::path::Path>, open: Option<u64>) -> Option<Run> {
    let corpus = common::corpus()?;
    let mut files = watch::find(&Root {
        path: corpus.clone(),
        provider: None,
    });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let mut r = Reducer::new(SETTLE_MS, 65_536);
    let mut table = Table::default();
    if let Some(dir) = spill {
        let spill: Arc<dyn baton::reduce::Spill> = Arc::new(SpillFile::new(dir).unwrap());
        r.spill_parked(spill.clone());
        // As the daemon's: parked sessions' `status` rows go to the same spill.
        table = Table::with_parked_rows(ParkedRows {
            spill,
            format: baton::socket::parked_row,
        });
    }
    if let Some(after) = open {
        r.park_open_turns(after);
    }
    r.track_changes();
    let mut out = Vec::new();
    let mut clock = 0;
    let mut read: Vec<Arc<str>> = Vec::new();
    let mut parks = 0;
    for f in &files {
        let bytes = std::fs::read(&f.path).unwrap();
        let mut fd = FileFeed::new(&f.path, f.provider, MAX_LINE);
        read.push(fd.path.clone());
        for chunk in common::line_chunks(&bytes, 5) {
            common::feed_ticking(&mut fd, &mut r, &mut clock, chunk, &mut out);
            if park {
                for p in &read {
                    parks += usize::from(r.park_path(p, Now::virtual_at(clock)));
                }
            }
            table.apply(r.take_changes());
        }
    }
    if let Some(after) = open {
        let now = Now::virtual_at(clock + after as i64);
        for q in r.quiet_working(now, after) {
            r.writer_gone(&q.key, now, after, &mut out);
        }
        table.apply(r.take_changes());
    }
    r.tick(Now::virtual_at(clock + 10 * SETTLE_MS as i64), &mut out);
    table.apply(r.take_changes());
    // A parked row is `status`'s line at any time after it was parked, with the
    // daemon's quiet period where open turns park; without, at any time at all.
    let times = match open {
        Some(after) => vec![(clock, after), (clock + 86_400_000, after)],
        None => vec![(clock, 1), (clock + 86_400_000, 60_000), (0, u64::MAX)],
    };
    let kept = if spill.is_some() {
        parked_rows_are_the_status_rows(&table, &r.sessions(), &times)
    } else {
        table.snapshot().iter().map(|v| (**v).clone()).collect()
    };
    let saved = read
        .iter()
        .map(|p| serde_json::to_string(&r.save_path(p, Now::virtual_at(clock))).unwrap())
        .collect();
    Some((out, r.sessions(), kept, saved, parks))
}

#[test]
fn parking_every_file_at_every_chunk_changes_nothing_on_the_corpus() {
    let Some(unparked) = run_corpus(false, None, None) else {
        return;
    };
    same_run(unparked, run_corpus(true, None, None).unwrap());
}

#[test]
fn parking_into_the_spill_file_changes_nothing_on_the_corpus() {
    let Some(unparked) = run_corpus(false, None, None) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    same_run(unparked, run_corpus(true, Some(dir.path()), None).unwrap());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the spill file was unlinked once open"
    );
}

/// Open turns parked as the daemon parks them (working ones until their liveness check
/// falls due, waiting ones, stale ones) change nothing either: the same events, through
/// a last sweep that finds every writer gone, the same `status` rows and checkpoints;
/// and more sessions are parked at once than without.
#[test]
fn parking_open_turns_changes_nothing_on_the_corpus() {
    const AFTER: u64 = 120_000;
    let Some(unparked) = run_corpus(false, None, Some(AFTER)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let parked = run_corpus(true, Some(dir.path()), Some(AFTER)).unwrap();
    let closed_only = run_corpus(true, None, None).unwrap().4;
    assert!(
        parked.4 > closed_only + 10,
        "open turns parked too: {} parks, {closed_only} without",
        parked.4
    );
    let interrupted = unparked
        .0
        .iter()
        .filter(|e| e.reason.as_deref() == Some("writer_gone"))
        .count();
    assert!(interrupted > 0, "the last sweep ended turns: {interrupted}");
    same_run(unparked, parked);
}

/// Every parked session's row kept by `table` is the line `status` writes for its view
/// at each of `times` (now, and the quiet period after which a working session the
/// liveness check cannot judge shows stale). Returns what the table holds, as views:
/// each live one as kept, and for each parked row the view (of `sessions`) it was just
/// checked against.
fn parked_rows_are_the_status_rows(
    table: &Table,
    sessions: &[SessionView],
    times: &[(i64, u64)],
) -> Vec<SessionView> {
    let mut parked = 0;
    let mut kept = Vec::new();
    for (t, &(now, after)) in times.iter().enumerate() {
        let rows = table.rows(now);
        assert_eq!(rows.len(), sessions.len());
        for (source, view) in rows.iter().zip(sessions) {
            let Some(row) = source.row() else {
                assert!(
                    matches!(source, RowSource::View(_)),
                    "a parked row unreadable"
                );
                if t == 0 {
                    kept.push((*source.view()).clone());
                }
                continue;
            };
            if t == 0 {
                parked += 1;
                kept.push(view.clone());
            }
            let mut line = Vec::new();
            baton::session_row::write_line(view, now, after, Command::Status, &mut line).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&row) + "\n",
                String::from_utf8_lossy(&line),
                "{}",
                view.path
            );
        }
    }
    assert!(parked > 20, "rows kept for parked sessions: {parked}");
    kept
}

/// A spill that counts the reads of what it took.
#[derive(Debug)]
struct Counted {
    inner: Arc<dyn Spill>,
    reads: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct CountedPut {
    inner: Arc<dyn Spilled>,
    reads: Arc<AtomicUsize>,
}

impl Spill for Counted {
    fn put(&self, bytes: &[u8]) -> Option<Arc<dyn Spilled>> {
        let inner = self.inner.put(bytes)?;
        Some(Arc::new(CountedPut {
            inner,
            reads: self.reads.clone(),
        }))
    }
}

impl Spilled for CountedPut {
    fn read(&self) -> Option<Vec<u8>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read()
    }

    fn read_range_into(&self, from: usize, len: usize, out: &mut Vec<u8>) -> bool {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read_range_into(from, len, out)
    }
}

/// Sessions parked together, in any order, are read back for `status` (in key order) a
/// put at a time, not one read per row, and each row is still its own session's.
#[test]
fn parked_rows_are_read_back_a_put_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let spill: Arc<dyn Spill> = Arc::new(Counted {
        inner: Arc::new(SpillFile::new(dir.path()).unwrap()),
        reads: reads.clone(),
    });
    let mut r = Reducer::new(SETTLE_MS, 65_536);
    r.spill_parked(spill.clone());
    let mut table = Table::with_parked_rows(ParkedRows {
        spill,
        format: baton::socket::parked_row,
    });
    r.track_changes();
    let (mut out, mut clock) = (Vec::new(), 0);
    let old = ts_ago(Duration::from_secs(2 * 3600));
    let files = tempfile::tempdir().unwrap();
    let n = 1500;
    let mut paths = Vec::new();
    for i in 0..n {
        let c = Claude::new();
        let (p, _) = c.prompt_at(&format!("prompt {i}"), &old);
        let bytes = p + &c.answer_at(&format!("answer {i}"), &old);
        let mut fd = FileFeed::new(&c.path_in(files.path()), ProviderKind::Claude, MAX_LINE);
        common::feed_ticking(&mut fd, &mut r, &mut clock, bytes.as_bytes(), &mut out);
        paths.push(fd.path.clone());
    }
    table.apply(r.take_changes());
    // One batch, in an order far from the sessions' key order.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|i| (i * 7919) % n);
    for i in order {
        assert!(r.park_path(&paths[i], Now::virtual_at(clock)));
    }
    table.apply(r.take_changes());
    let sessions = r.sessions();
    let rows = table.rows(clock);
    assert_eq!(rows.len(), n);
    let before = reads.load(Ordering::Relaxed);
    let mut via = RowReads::default();
    for (source, view) in rows.iter().zip(&sessions) {
        let mut row = Vec::new();
        assert!(
            source.row_via(&mut via, &mut row),
            "a parked row unreadable"
        );
        let mut line = Vec::new();
        baton::session_row::write_line(view, clock, 1, Command::Status, &mut line).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&row) + "\n",
            String::from_utf8_lossy(&line)
        );
    }
    // 1,500 rows of a few hundred bytes fill about a dozen puts; one read per row
    // would be 1,500.
    let taken = reads.load(Ordering::Relaxed) - before;
    assert!(taken <= n / 20, "{taken} reads for {n} parked rows");
}

/// Asserts that a run with parking (`parked`) saw what one without did.
fn same_run(unparked: Run, parked_run: Run) {
    let (events, sessions, kept, saved, _) = unparked;
    let (p_events, p_sessions, p_kept, p_saved, parked) = parked_run;
    assert!(parked > 20, "parking happened: {parked} times");
    assert_eq!(p_events.len(), events.len(), "event count");
    for (a, b) in events.iter().zip(&p_events) {
        assert_eq!(a, b, "events differ");
    }
    assert_eq!(p_sessions, sessions, "sessions at the end");
    assert_eq!(p_kept, sessions, "status table kept from parked changes");
    assert_eq!(kept, sessions, "status table without parking");
    assert_eq!(p_saved, saved, "saved sessions per file");
}

/// `status --json` rows as (session, state, turn, line, message).
fn rows(d: &Daemon) -> Vec<(String, String, String, u64, String)> {
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
            (
                s("session"),
                s("state"),
                s("turn"),
                v["line"].as_u64().unwrap_or(0),
                s("message"),
            )
        })
        .collect()
}

/// A file idle for an hour is parked by the history read; `status` shows it as before,
/// and the next turn written to it pages once, with the right lines, from the state
/// it was parked in — also after a restart.
#[test]
fn a_parked_session_shows_in_status_and_wakes_up_on_its_next_turn() {
    let d = Daemon::tree();
    let dir = d.claude().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let c = Claude::new();
    let path = c.path_in(&dir);
    let old = ts_ago(Duration::from_secs(2 * 3600));
    let (p1, t1) = c.prompt_at("first", &old);
    std::fs::write(&path, p1 + &c.answer_at("first answer", &old)).unwrap();
    std::fs::File::open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let mut d = d.start(&["--no-desktop"]);
    // Idle for an hour: its entry went to the spill with its sessions, and comes back
    // for the next turn.
    let log = d.log_text();
    assert!(log.contains("frozen=1"), "{log}");
    let before = rows(&d);
    assert_eq!(
        before,
        vec![(
            c.session.clone(),
            "completed".to_owned(),
            t1.clone(),
            2,
            "first answer".to_owned()
        )]
    );

    let (t2_bytes, t2) = c.turn("second", "second answer");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(t2_bytes.as_bytes())
        .unwrap();
    let done = d.wait_for(
        "the second turn's completion",
        common::is("turn_completed", t2.clone()),
    );
    assert_eq!(done["line"], 4);
    let started = d
        .events()
        .into_iter()
        .filter(|e| e["event"] == "turn_started" && e["turn"] == t2.as_str())
        .count();
    assert_eq!(started, 1);
    assert_eq!(
        common::count(&d.events(), "turn_completed", &t1),
        0,
        "old turn re-paged"
    );
    let after = vec![(
        c.session.clone(),
        "completed".to_owned(),
        t2.clone(),
        4,
        "second answer".to_owned(),
    )];
    assert_eq!(rows(&d), after);

    // Saved while parked and after: a restart neither re-pages nor loses the session.
    d.terminate();
    d.restart(&["--no-desktop"]);
    assert_eq!(rows(&d), after);
    let events = d.stop();
    assert_eq!(
        common::count(&events, "turn_completed", &t2),
        1,
        "{events:#?}"
    );
}

/// Parked sessions that cannot be read back (a failing disk under the spill file) are
/// not lost: their file is read again from its start, silently, and its next turn
/// pages once, with the right lines.
#[test]
fn a_parked_file_that_cannot_be_read_back_is_read_again() {
    let d = Daemon::tree();
    let dir = d.claude().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let c = Claude::new();
    let path = c.path_in(&dir);
    let old = ts_ago(Duration::from_secs(2 * 3600));
    let (p1, t1) = c.prompt_at("first", &old);
    std::fs::write(&path, p1 + &c.answer_at("first answer", &old)).unwrap();
    std::fs::File::open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let mut d = d.start(&["--no-desktop", "--debug-spill-unreadable"]);
    // Its `status` row cannot be read back either: the session is still listed, by what
    // the table knows without it (its key and state).
    assert_eq!(
        rows(&d),
        vec![(
            c.session.clone(),
            "completed".to_owned(),
            String::new(),
            0,
            String::new()
        )]
    );

    let (t2_bytes, t2) = c.turn("second", "second answer");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(t2_bytes.as_bytes())
        .unwrap();
    let done = d.wait_for(
        "the second turn's completion",
        common::is("turn_completed", t2.clone()),
    );
    assert_eq!(done["line"], 4);
    let events = d.events();
    assert_eq!(
        common::count(&events, "turn_started", &t2),
        1,
        "{events:#?}"
    );
    assert_eq!(
        common::count(&events, "turn_completed", &t1),
        0,
        "old turn re-paged: {events:#?}"
    );
    let after = vec![(
        c.session.clone(),
        "completed".to_owned(),
        t2.clone(),
        4,
        "second answer".to_owned(),
    )];
    assert_eq!(rows(&d), after);
    let log = d.log_text();
    assert!(
        log.contains("read again from its start"),
        "the failed read back is logged: {log}"
    );
    d.terminate();
    // What was saved restores the session, from a spill that works again.
    d.restart(&["--no-desktop"]);
    assert_eq!(rows(&d), after);
    let events = d.stop();
    assert_eq!(
        common::count(&events, "turn_completed", &t2),
        1,
        "{events:#?}"
    );
}

/// Feeds `lines` of one Claude file to `r`; returns the events.
fn feed(fd: &mut FileFeed, r: &mut Reducer, clock: i64, lines: &[String]) -> Vec<Event> {
    let mut out = Vec::new();
    fd.feed(&common::lines(lines), |src, obs| {
        r.apply(src, obs, Now::virtual_at(clock), &mut out);
    });
    out
}

/// What the parked form must carry: a completion decided by quiet alone is taken back
/// when its turn goes on, however long the file was parked in between.
#[test]
fn a_quiet_completion_parked_with_its_file_is_still_taken_back() {
    use crate::common::claude;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{}.jsonl", claude::SESSION));
    let run = |park: bool| {
        let mut fd = FileFeed::new(&path, baton::model::ProviderKind::Claude, MAX_LINE);
        let mut r = Reducer::new(SETTLE_MS, 1024);
        let t0 = 1_772_359_200_000; // 2026-03-01T10:00:00Z
        let mut events = feed(
            &mut fd,
            &mut r,
            t0,
            &[
                claude::prompt("p1", 0, "go"),
                claude::text("a1", 5, "m1", "Done, probably.", None),
            ],
        );
        let later = t0 + 10 * SETTLE_MS as i64;
        r.tick(Now::virtual_at(later), &mut events);
        if park {
            assert!(r.park_path(&fd.path, Now::virtual_at(later)), "parkable");
            assert_eq!(r.parked_count(), 1);
        }
        events.extend(feed(
            &mut fd,
            &mut r,
            later + 3_600_000,
            &[
                claude::tool_use("a2", 9, "m2", "tool_1", "Bash"),
                claude::tool_result("r2", 10, "tool_1"),
                claude::text("a3", 11, "m3", "Now really done.", Some("end_turn")),
            ],
        ));
        (events, r.sessions())
    };
    let (plain, sessions) = run(false);
    let kinds: Vec<&str> = plain.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "turn_started",
            "turn_completed",
            "turn_resumed",
            "turn_completed"
        ]
    );
    let (parked, p_sessions) = run(true);
    assert_eq!(parked, plain);
    assert_eq!(p_sessions, sessions);
}
