//! Continuing a file from a checkpoint gives the events a straight read gives.
//!
//! The daemon saves, with each file's checkpoint, the projector's context and the
//! reducer's sessions for that file, and after a restart (or when a cold file wakes up)
//! goes on from the checkpoint instead of re-reading the file. For every real
//! transcript and every Norma/SGME fixture, this cuts the file at many line starts,
//! saves there, restores into a fresh projector and reducer — through the state file's
//! JSON, as the daemon would — and checks that the events before the cut plus the
//! events after it are exactly the events of one uninterrupted read.
#![allow(clippy::unwrap_used)]

use crate::common;

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, ProviderKind};
use baton::reduce::{Reducer, SavedSession};
use baton::watch::{self, Found, Root};
use std::path::{Path, PathBuf};

const END: i64 = i64::MAX / 4;
const MAX_LINE: usize = 8 << 20;
/// Cuts per file: every line start for short files, this many spread evenly otherwise.
const CUTS: usize = 60;

/// Feeds `bytes` (whole lines) on the replay clock: the newest record time so far.
fn feed(
    feed: &mut FileFeed,
    reducer: &mut Reducer,
    clock: &mut i64,
    bytes: &[u8],
    out: &mut Vec<Event>,
) {
    feed.feed(bytes, |src, obs| {
        if let Some(t) = obs.record_ts {
            *clock = (*clock).max(t);
        }
        let now = Now::virtual_at(*clock);
        reducer.tick(now, out);
        reducer.apply(src, obs, now, out);
    });
}

fn straight(f: &Found, bytes: &[u8]) -> Vec<Event> {
    let mut fd = FileFeed::new(&f.path, f.provider, MAX_LINE);
    let mut r = Reducer::new(common::SETTLE_MS, 65_536);
    let (mut clock, mut out) = (0, Vec::new());
    feed(&mut fd, &mut r, &mut clock, bytes, &mut out);
    r.tick(Now::virtual_at(END), &mut out);
    out
}

/// Reads up to `cut`, saves, restores into fresh state, reads the rest.
fn resumed(f: &Found, bytes: &[u8], cut: usize) -> Vec<Event> {
    let mut fd = FileFeed::new(&f.path, f.provider, MAX_LINE);
    let mut r = Reducer::new(common::SETTLE_MS, 65_536);
    let (mut clock, mut out) = (0, Vec::new());
    feed(&mut fd, &mut r, &mut clock, &bytes[..cut], &mut out);
    assert_eq!(fd.reader().offset(), cut as u64, "cut at a line start");
    let now = Now::virtual_at(clock);
    let at = (fd.reader().offset(), fd.reader().line_no());
    let saved = fd.save();
    let sessions = serde_json::to_string(&r.save_path(&fd.path, now)).unwrap();
    drop((fd, r));

    let mut fd =
        FileFeed::restore(&f.path, f.provider, MAX_LINE, at, &saved).unwrap_or_else(|| {
            panic!(
                "{}: saved context does not restore: {saved}",
                f.path.display()
            )
        });
    let mut r = Reducer::new(common::SETTLE_MS, 65_536);
    // What the daemon's ledger does: ids decided before the cut stay decided.
    for e in &out {
        r.mark_seen(&e.id);
    }
    let sessions: Vec<SavedSession> = serde_json::from_str(&sessions).unwrap();
    r.restore_path(&fd.path, sessions, now);
    feed(&mut fd, &mut r, &mut clock, &bytes[cut..], &mut out);
    r.tick(Now::virtual_at(END), &mut out);
    out
}

fn line_starts(bytes: &[u8]) -> Vec<usize> {
    // Cuts before the file's end only: a trailing unfinished line is never committed.
    (0..bytes.len().saturating_sub(1))
        .filter(|&i| bytes[i] == b'\n')
        .map(|i| i + 1)
        .collect()
}

fn files_under(dir: &Path, provider: Option<ProviderKind>) -> Vec<Found> {
    let mut v = watch::find(&Root {
        path: dir.to_path_buf(),
        provider,
    });
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

fn check(files: &[Found]) -> usize {
    let mut cuts_checked = 0;
    for f in files {
        let bytes = std::fs::read(&f.path).unwrap();
        let whole = straight(f, &bytes);
        let starts = line_starts(&bytes);
        let step = starts.len().div_ceil(CUTS).max(1);
        for &cut in starts.iter().step_by(step) {
            let got = resumed(f, &bytes, cut);
            if got != whole {
                let show = |v: &[Event]| {
                    v.iter()
                        .map(|e| format!("{} {:?} {:?}", e.event.as_str(), e.turn, e.line))
                        .collect::<Vec<_>>()
                };
                panic!(
                    "{}: resumed at byte {cut} differs\nstraight: {:#?}\nresumed:  {:#?}",
                    f.path.display(),
                    show(&whole),
                    show(&got)
                );
            }
            cuts_checked += 1;
        }
    }
    cuts_checked
}

#[test]
fn every_corpus_file_resumes_at_any_line_like_a_straight_read() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let files = files_under(&corpus, None);
    assert!(files.len() >= 20, "corpus files found: {}", files.len());
    let n = check(&files);
    assert!(n > 500, "cuts checked: {n}");
}

#[test]
fn norma_and_sgme_fixtures_resume_at_any_line_like_a_straight_read() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = files_under(&root.join("norma"), Some(ProviderKind::Norma));
    files.extend(files_under(&root.join("sgme"), Some(ProviderKind::Sgme)));
    assert!(files.len() >= 8, "fixtures found: {}", files.len());
    assert!(check(&files) > 50);
}

#[test]
fn cursor_and_copilot_fixtures_resume_at_any_line_like_a_straight_read() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = files_under(&root.join("cursor"), Some(ProviderKind::Cursor));
    files.extend(files_under(
        &root.join("copilot"),
        Some(ProviderKind::Copilot),
    ));
    assert_eq!(files.len(), 4, "fixtures found: {files:?}");
    assert!(check(&files) > 40);
}

/// Per-file context of newer versions (a forked child's copy in progress, a file that
/// stamps every block, a quiet completion that may be taken back) survives a cut.
#[test]
fn part_d_fixtures_resume_at_any_line_like_a_straight_read() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-d");
    let mut files = files_under(&root, Some(ProviderKind::Claude));
    // By file name: the checkout's own path may hold either word.
    let named = |f: &Found, word: &str| {
        f.path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(word))
    };
    files.retain(|f| named(f, "claude"));
    let mut codex = files_under(&root, Some(ProviderKind::Codex));
    codex.retain(|f| named(f, "codex"));
    files.extend(codex);
    assert_eq!(files.len(), 8, "fixtures found: {}", files.len());
    let cuts = check(&files);
    assert!(cuts > 80, "cuts checked: {cuts}");
}

/// Part E's Copilot and Oh My Pi fixtures: the per-file context they add (background
/// calls, a notification waiting for the next round, whether a turn is open, a subagent's
/// yield) survives a cut.
#[test]
fn part_e_copilot_and_omp_fixtures_resume_at_any_line_like_a_straight_read() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-e");
    let mut files = files_under(&root, None);
    files.retain(|f| {
        f.path.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with("synthetic-copilot-") || n.starts_with("synthetic-omp-")
        })
    });
    assert_eq!(files.len(), 5, "fixtures found: {files:?}");
    let cuts = check(&files);
    assert!(cuts > 80, "cuts checked: {cuts}");
}

/// Inline sidechains (Claude ≤ 1.0.x) find their agent through the parent chain, which
/// the projector remembers: a cut between a sidechain's records must keep that memory.
#[test]
fn inline_sidechain_chain_survives_a_cut() {
    use crate::common::claude;
    let records = [
        claude::prompt("p1", 0, "go"),
        claude::sidechain_prompt("s1", 1, "sub task"),
        claude::sidechain_text("s2", Some("s1"), 2, "halfway", None),
        claude::sidechain_text("s3", Some("s2"), 3, "sub done", Some("end_turn")),
        claude::text("a1", 4, "m3", "all done", Some("end_turn")),
    ];
    let bytes = common::lines(&records);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{}.jsonl", claude::SESSION));
    std::fs::write(&path, &bytes).unwrap();
    let f = Found {
        path,
        provider: ProviderKind::Claude,
    };
    let whole = straight(&f, &bytes);
    let agents: Vec<_> = whole.iter().filter_map(|e| e.agent.clone()).collect();
    assert!(
        agents.iter().all(|a| a == "side-s1"),
        "one sidechain agent: {agents:?}"
    );
    assert!(!agents.is_empty());
    for cut in line_starts(&bytes) {
        assert_eq!(resumed(&f, &bytes, cut), whole, "cut at {cut}");
    }
}

/// A completion waiting for its quiet period keeps its deadline on the wall clock across
/// a save and restore (monotonic time does not survive a restart), and a wall clock set
/// back meanwhile never stretches it past one settle period.
#[test]
fn a_pending_completion_keeps_its_wall_clock_deadline() {
    use crate::common::claude;
    let bytes = common::lines(&[
        claude::prompt("p1", 0, "go"),
        claude::text("a1", 1, "m1", "done, I think", None),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{}.jsonl", claude::SESSION));
    let settle = common::SETTLE_MS;
    let wall0: i64 = 1_800_000_000_000;
    let start = Now {
        mono: 1_000,
        wall: wall0,
    };
    let mut fd = FileFeed::new(&path, ProviderKind::Claude, MAX_LINE);
    let mut r = Reducer::new(settle, 1024);
    let mut out = Vec::new();
    fd.feed(&bytes, |src, obs| r.apply(src, obs, start, &mut out));
    assert_eq!(common::kinds(&out), ["turn_started"]);
    // Saved 30 s later; restored by a process whose monotonic clock starts at 0.
    let later = Now {
        mono: 31_000,
        wall: wall0 + 30_000,
    };
    let saved = serde_json::to_string(&r.save_path(&fd.path, later)).unwrap();
    let restore = |wall: i64| {
        let mut r = Reducer::new(settle, 1024);
        let sessions: Vec<SavedSession> = serde_json::from_str(&saved).unwrap();
        r.restore_path(&fd.path, sessions, Now { mono: 0, wall });
        r
    };
    let fires_at = |mut r: Reducer| {
        let mut out = Vec::new();
        let mut mono = 0;
        while out.is_empty() && mono < 10 * settle {
            mono += 1_000;
            r.tick(Now { mono, wall: 0 }, &mut out);
        }
        assert_eq!(common::kinds(&out), ["turn_completed"]);
        assert_eq!(out[0].evidence.as_deref(), Some("quiet"));
        mono
    };
    // Restarted 10 s after the save: 50 s of the 90 s were left.
    assert_eq!(fires_at(restore(wall0 + 40_000)), settle - 40_000);
    // Restarted long after the deadline: due at once.
    assert_eq!(fires_at(restore(wall0 + 10 * 3_600_000)), 1_000);
    // The wall clock was set back an hour: at most one settle period.
    assert_eq!(fires_at(restore(wall0 - 3_600_000)), settle);
}

/// What a Claude projector keeps between lines for the shapes of Part E (a `<bash-input>`
/// or an idle notification waiting for the model's answer) survives a cut at every line.
#[test]
fn part_e_claude_fixtures_resume_at_any_line_like_a_straight_read() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-e");
    let mut files = files_under(&root, Some(ProviderKind::Claude));
    files.retain(|f| {
        f.path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("synthetic-claude-"))
    });
    assert_eq!(files.len(), 5, "fixtures found: {files:?}");
    let cuts = check(&files);
    assert!(cuts > 60, "cuts checked: {cuts}");
}

/// Gemini CLI and Qwen Code fixtures: the per-file context they keep (the messages seen,
/// for upserts, checkpoints and rewinds; the prompts, for `/rewind`) survives a cut.
#[test]
fn gemini_and_qwen_fixtures_resume_at_any_line_like_a_straight_read() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = files_under(&root.join("gemini"), Some(ProviderKind::Gemini));
    files.extend(files_under(&root.join("qwen"), Some(ProviderKind::Qwen)));
    assert_eq!(files.len(), 6, "fixtures found: {files:?}");
    let cuts = check(&files);
    assert!(cuts > 40, "cuts checked: {cuts}");
}
