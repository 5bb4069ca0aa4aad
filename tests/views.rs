//! `status` views kept incrementally: applying, one batch at a time, only the sessions
//! the reducer reports as changed always gives the table a full rebuild gives — through
//! observations, quiet completions, files forgotten and sessions restored.
#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{SETTLE_MS, claude, codex};
use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::ProviderKind;
use baton::reduce::{Reducer, SessionView};
use baton::views::Table;
use baton::watch::{self, Root};

const MAX_LINE: usize = 8 << 20;

/// Brings `table` up to date from the reducer's changes and compares it with a full
/// rebuild.
fn check(r: &mut Reducer, table: &mut Table, when: &str) -> usize {
    let changes = r.take_changes();
    let n = changes.len();
    table.apply(changes);
    let kept: Vec<SessionView> = table.snapshot().iter().map(|v| (**v).clone()).collect();
    assert_eq!(kept, r.sessions(), "{when}");
    assert!(!r.has_changes(), "{when}: changes left after taking them");
    n
}

/// Feeds `bytes` one line at a time, checking the table after each.
fn feed_checked(
    fd: &mut FileFeed,
    r: &mut Reducer,
    table: &mut Table,
    clock: &mut i64,
    bytes: &[u8],
) {
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let mut out = Vec::new();
        fd.feed(line, |src, obs| {
            if let Some(t) = obs.record_ts {
                *clock = (*clock).max(t);
            }
            r.apply(src, obs, Now::virtual_at(*clock), &mut out);
        });
        check(r, table, &format!("{} after {line:?}", fd.path));
    }
}

#[test]
fn changed_sessions_rebuild_the_full_table() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = Reducer::new(SETTLE_MS, 1024);
    r.track_changes();
    let mut table = Table::default();
    let mut clock = 0;

    // A Claude turn whose answer has no stop reason: it completes only when quiet.
    let a = tmp.path().join(format!("{}.jsonl", claude::SESSION));
    let mut fa = FileFeed::new(&a, ProviderKind::Claude, MAX_LINE);
    let bytes = common::lines(&[
        claude::prompt("p1", 0, "go"),
        claude::tool_use("t1", 1, "m1", "tool_1", "Bash"),
        claude::tool_result("r1", 2, "tool_1"),
        claude::sidechain_prompt("s1", 3, "sub task"),
        claude::sidechain_text("s2", Some("s1"), 4, "sub done", Some("end_turn")),
        claude::text("a1", 5, "m2", "Done, probably.", None),
    ]);
    feed_checked(&mut fa, &mut r, &mut table, &mut clock, &bytes);
    assert_eq!(table.len(), 2, "main session and its sidechain");

    // Nothing due yet: a tick changes nothing.
    let mut out = Vec::new();
    r.tick(Now::virtual_at(clock), &mut out);
    assert_eq!(check(&mut r, &mut table, "early tick"), 0);
    // The settle period passes: a quiet completion changes the session with no read.
    r.tick(
        Now::virtual_at(clock + i64::try_from(SETTLE_MS).unwrap() + 1),
        &mut out,
    );
    assert!(out.iter().any(|e| e.event.as_str() == "turn_completed"));
    assert_eq!(check(&mut r, &mut table, "quiet completion"), 1);

    // A Codex session in another file.
    let b = tmp.path().join(format!("rollout-{}.jsonl", codex::SESSION));
    let mut fb = FileFeed::new(&b, ProviderKind::Codex, MAX_LINE);
    let bytes = common::lines(&[
        codex::meta(10),
        codex::started(11, "turn-1"),
        codex::complete(12, "turn-1", "all good"),
    ]);
    feed_checked(&mut fb, &mut r, &mut table, &mut clock, &bytes);
    assert_eq!(table.len(), 3);

    // The first file goes away and comes back from its saved state.
    let now = Now::virtual_at(clock);
    let saved = r.save_path(&fa.path, now).unwrap();
    r.forget_path(&fa.path);
    assert_eq!(check(&mut r, &mut table, "file forgotten"), 2);
    assert_eq!(table.len(), 1);
    r.restore_path(&fa.path, saved, now);
    assert_eq!(check(&mut r, &mut table, "file restored"), 2);
    assert_eq!(table.len(), 3);

    // One session forgotten by key.
    let codex_key = r
        .sessions()
        .into_iter()
        .find(|v| v.key.provider == ProviderKind::Codex)
        .unwrap()
        .key;
    r.forget(&codex_key);
    assert_eq!(check(&mut r, &mut table, "session forgotten"), 1);
    assert_eq!(table.len(), 2);
    // Forgetting it again changes nothing.
    r.forget(&codex_key);
    assert_eq!(check(&mut r, &mut table, "forgotten twice"), 0);
}

#[test]
fn tracking_started_late_reports_every_session_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = Reducer::new(SETTLE_MS, 1024);
    let a = tmp.path().join(format!("{}.jsonl", claude::SESSION));
    let mut fa = FileFeed::new(&a, ProviderKind::Claude, MAX_LINE);
    let mut out = Vec::new();
    fa.feed(
        &common::lines(&[
            claude::prompt("p1", 0, "go"),
            claude::text("a1", 1, "m1", "Done.", Some("end_turn")),
        ]),
        |src, obs| r.apply(src, obs, Now::virtual_at(0), &mut out),
    );
    // Not tracking: nothing to report, nothing kept.
    assert!(!r.has_changes());
    assert!(r.take_changes().is_empty());

    r.track_changes();
    let mut table = Table::default();
    assert_eq!(check(&mut r, &mut table, "first take"), 1);
    assert_eq!(check(&mut r, &mut table, "second take"), 0);
    assert_eq!(r.session_count(), 1);
}

/// Every real transcript, fed in chunks through one reducer (sessions spread over many
/// files), with files forgotten and restored along the way.
#[test]
fn corpus_changes_rebuild_the_full_table() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut files = watch::find(&Root {
        path: corpus.clone(),
        provider: None,
    });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    assert!(files.len() >= 20, "corpus files found: {}", files.len());
    let mut r = Reducer::new(SETTLE_MS, 65_536);
    r.track_changes();
    let mut table = Table::default();
    let mut clock = 0;
    let mut changed = 0;
    for (i, f) in files.iter().enumerate() {
        let bytes = std::fs::read(&f.path).unwrap();
        let mut fd = FileFeed::new(&f.path, f.provider, MAX_LINE);
        let mut out = Vec::new();
        // A few chunks per file, cut at line starts.
        let mut end = 0;
        for chunk in common::line_chunks(&bytes, 4) {
            end += chunk.len();
            common::feed_ticking(&mut fd, &mut r, &mut clock, chunk, &mut out);
            changed += check(
                &mut r,
                &mut table,
                &format!("{} to byte {end}", f.path.display()),
            );
        }
        if i % 5 == 0 {
            let now = Now::virtual_at(clock);
            let saved = r.save_path(&fd.path, now).unwrap();
            r.forget_path(&fd.path);
            check(
                &mut r,
                &mut table,
                &format!("{} forgotten", f.path.display()),
            );
            r.restore_path(&fd.path, saved, now);
            check(
                &mut r,
                &mut table,
                &format!("{} restored", f.path.display()),
            );
        }
    }
    let mut out = Vec::new();
    r.tick(
        Now::virtual_at(clock + i64::try_from(SETTLE_MS).unwrap() + 1),
        &mut out,
    );
    check(&mut r, &mut table, "final tick");
    assert!(table.len() >= 20, "sessions: {}", table.len());
    assert!(changed >= table.len());
}
