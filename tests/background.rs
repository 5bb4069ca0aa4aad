//! Background work: what `turn_completed` says about tasks still running, and what the
//! desktop and exec sinks page, on a fake clock (the events' own time), for the real
//! spotter sessions and for the synthetic cases in tests/cases/background/*.toml.
//!
//! The fake clock runs as the daemon's sink task does: before each event, every held
//! page that fell due is sent at its due time; after each event, the sinks are ticked.

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::clock::parse_rfc3339;
use baton::model::{Event, EventKind, ProviderKind};
use baton::naming::{escape_markup, plain_message};
use baton::sink::Sink;
use baton::sink::desktop::{DesktopConfig, DesktopSink, Job, Note};
use baton::sink::exec::{ExecConfig, ExecSink};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const HOLD: Duration = Duration::from_secs(600);

/// A page the desktop sink sent, and when (Unix ms on the fake clock).
#[derive(Debug)]
struct Sent {
    at: i64,
    note: Note,
}

fn ms(ev: &Event) -> i64 {
    parse_rfc3339(&ev.ts).unwrap()
}

/// Runs `events` through a capturing desktop sink on the fake clock.
fn desktop_pages(events: &[Event], hold: Duration) -> Vec<Sent> {
    let (sink, rx) = DesktopSink::capture(DesktopConfig::default());
    let mut sink = sink.with_hold(hold);
    let Some(first) = events.first() else {
        return Vec::new();
    };
    let t0 = Instant::now();
    let w0 = ms(first);
    let instant = |wall: i64| t0 + Duration::from_millis(u64::try_from(wall - w0).unwrap());
    let wall = |i: Instant| w0 + i64::try_from(i.duration_since(t0).as_millis()).unwrap();
    let mut sent = Vec::new();
    let mut next: Option<Instant> = None;
    let drain = |at: i64, sent: &mut Vec<Sent>| {
        while let Ok(job) = rx.try_recv() {
            if let Job::Show(note) = job {
                sent.push(Sent { at, note });
            }
        }
    };
    let end = ms(events.last().unwrap()) + 3_600_000;
    for ev in events.iter().map(Some).chain([None]) {
        let now = ev.map_or(instant(end), |e| instant(ms(e)));
        while let Some(due) = next.filter(|d| *d <= now) {
            next = sink.tick_at(due);
            drain(wall(due), &mut sent);
        }
        if let Some(ev) = ev {
            sink.deliver_at(ev, now);
            drain(wall(now), &mut sent);
            next = sink.tick_at(now);
        }
    }
    sent
}

/// Runs `events` through an exec hook on the fake clock; returns the JSON of each run.
fn exec_pages(events: &[Event], hold: Duration) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pages.jsonl");
    let mut cfg = ExecConfig::new(vec![
        "sh".to_owned(),
        "-c".to_owned(),
        "cat >> \"$0\"".to_owned(),
        out.display().to_string(),
    ]);
    // One at a time, so pages land in the order they were sent.
    cfg.max_concurrent = 1;
    cfg.queue = 1024;
    let mut sink = ExecSink::new(cfg).unwrap().with_hold(hold);
    let t0 = Instant::now();
    let w0 = events.first().map_or(0, ms);
    let instant = |wall: i64| t0 + Duration::from_millis(u64::try_from(wall - w0).unwrap());
    let mut next: Option<Instant> = None;
    let end = events.last().map_or(0, ms) + 3_600_000;
    for ev in events.iter().map(Some).chain([None]) {
        let now = ev.map_or(instant(end), |e| instant(ms(e)));
        while let Some(due) = next.filter(|d| *d <= now) {
            next = sink.tick_at(due);
        }
        if let Some(ev) = ev {
            sink.deliver_at(ev, now);
            next = Sink::tick(&mut sink, now);
        }
    }
    let (stats, done) = sink.close(Duration::from_secs(30));
    assert!(done && stats.failed == 0 && stats.dropped == 0, "{stats:?}");
    std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn spotter(session: &str) -> Option<Vec<Event>> {
    let corpus = common::corpus()?;
    let path = corpus.join(format!("claude/marot__spotter/{session}.jsonl"));
    Some(common::replay_files(
        &[(path, ProviderKind::Claude)],
        &common::options(common::SETTLE_MS),
    ))
}

fn event_at(events: &[Event], kind: EventKind, line: u64) -> &Event {
    events
        .iter()
        .find(|e| e.event == kind && e.line == Some(line))
        .unwrap_or_else(|| panic!("no {kind:?} at line {line}"))
}

/// The lines (and titles) paged by both sinks.
fn paged(events: &[Event], hold: Duration) -> (Vec<(u64, String)>, Vec<u64>) {
    let desktop: Vec<(u64, String)> = desktop_pages(events, hold)
        .into_iter()
        .map(|s| {
            // Notes carry no line: find the hand-back whose message they show.
            let ev = events
                .iter()
                .filter(|e| {
                    matches!(e.event, EventKind::TurnCompleted | EventKind::NeedsInput)
                        && e.agent.is_none()
                })
                .find(|e| escape_markup(&plain_message(e)) == s.note.body)
                .unwrap_or_else(|| panic!("page for no event: {:?}", s.note));
            (ev.line.unwrap(), s.note.summary)
        })
        .collect();
    let exec = exec_pages(events, hold)
        .iter()
        .map(|v| v["line"].as_u64().unwrap())
        .collect();
    (desktop, exec)
}

#[test]
fn spotter_8463c716_pages_once_for_1589() {
    let Some(events) = spotter("8463c716-a2ea-4c14-9efa-87158ebd9f20") else {
        return;
    };
    // The stream carries every event at once, the held one included.
    let held = event_at(&events, EventKind::TurnCompleted, 1582);
    assert_eq!(held.background_tasks, Some(1));
    let last = event_at(&events, EventKind::TurnCompleted, 1589);
    assert_eq!(last.background_tasks, None);
    let (desktop, exec) = paged(&events, HOLD);
    // 132 is the plan approval question (needs_input), paged as before.
    assert_eq!(
        desktop.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        [132, 1589]
    );
    assert!(
        desktop[1]
            .1
            .ends_with(": your turn — 1 background task finished"),
        "{}",
        desktop[1].1
    );
    assert_eq!(exec, [132, 1589]);
    // Without a hold (the behaviour before), 1582 pages while the task's notification
    // is still queued, and the exec hook runs again for 1589 (the desktop's 10 s
    // cooldown swallows that one).
    let (desktop, exec) = paged(&events, Duration::ZERO);
    assert_eq!(
        desktop.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        [132, 1582]
    );
    assert_eq!(exec, [132, 1582, 1589]);
}

#[test]
fn spotter_258c7280_pages_for_1852_and_1859() {
    let Some(events) = spotter("258c7280-ae70-4798-800f-63464d01a85d") else {
        return;
    };
    let held = event_at(&events, EventKind::TurnCompleted, 1841);
    assert_eq!(held.background_tasks, Some(1));
    let (desktop, exec) = paged(&events, HOLD);
    assert_eq!(
        desktop.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        [1852, 1859]
    );
    assert!(
        desktop[0]
            .1
            .ends_with(": your turn — 1 background task finished")
    );
    assert!(desktop[1].1.ends_with(": your turn"));
    assert_eq!(exec, [1852, 1859]);
    let (_, exec) = paged(&events, Duration::ZERO);
    assert_eq!(exec, [1841, 1852, 1859]);
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    description: String,
    source: String,
    records: String,
    /// `LINE tasks=N|-`: each turn_completed, in order, and its `background_tasks`.
    completions: Vec<String>,
    /// `LINE[@HH:MM:SS] TITLE-END`: each desktop page, in order (and when, if not at the
    /// event's own time); the exec hook runs for the same lines.
    pages: Vec<String>,
}

fn run_case(path: &Path) -> Result<(), String> {
    let case: Case = toml::from_str(&std::fs::read_to_string(path).unwrap())
        .map_err(|e| format!("bad case file: {e}"))?;
    assert!(!case.description.is_empty() && case.source.starts_with("Synthetic"));
    let dir = tempfile::tempdir().unwrap();
    let bytes = format!("{}\n", case.records.trim());
    let events = common::replay_bytes(
        dir.path(),
        "projects/-w/11111111-2222-4333-8444-555555555555.jsonl",
        ProviderKind::Claude,
        bytes.as_bytes(),
        &common::options(common::SETTLE_MS),
    );
    let got: Vec<String> = events
        .iter()
        .filter(|e| e.event == EventKind::TurnCompleted)
        .map(|e| {
            let n = e.background_tasks.map_or("-".to_owned(), |n| n.to_string());
            format!("{} tasks={n}", e.line.unwrap())
        })
        .collect();
    if got != case.completions {
        return Err(format!("completions {got:?}, want {:?}", case.completions));
    }
    let sent = desktop_pages(&events, HOLD);
    let mut want_lines = Vec::new();
    if sent.len() != case.pages.len() {
        return Err(format!(
            "{} pages, want {}: {sent:?}",
            sent.len(),
            case.pages.len()
        ));
    }
    for (s, want) in sent.iter().zip(&case.pages) {
        let (head, title) = want.split_once(' ').unwrap();
        let (line, at) = match head.split_once('@') {
            Some((l, t)) => (l, Some(t)),
            None => (head, None),
        };
        let line: u64 = line.parse().unwrap();
        want_lines.push(line);
        let ev = event_at(&events, EventKind::TurnCompleted, line);
        let when = at.map_or_else(
            || ms(ev),
            |t| parse_rfc3339(&format!("2026-02-11T{t}.000Z")).unwrap(),
        );
        if s.at != when
            || !s.note.summary.ends_with(&format!(": {title}"))
            || s.note.body != escape_markup(&plain_message(ev))
        {
            return Err(format!("page {s:?}, want `{want}` at {when}"));
        }
    }
    let exec: Vec<u64> = exec_pages(&events, HOLD)
        .iter()
        .map(|v| v["line"].as_u64().unwrap())
        .collect();
    if exec != want_lines {
        return Err(format!("exec ran for {exec:?}, want {want_lines:?}"));
    }
    Ok(())
}

#[test]
fn synthetic_background_cases() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cases/background");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6);
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| {
            run_case(f)
                .err()
                .map(|e| format!("{}: {e}", f.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
