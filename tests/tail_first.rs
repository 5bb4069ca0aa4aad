//! Tail-first equivalence: for every corpus file and every file of a generated tree, cut
//! after a line (every line of small files, many of big ones), the state read from the
//! file's last turns must equal the state a read of every byte gives: each session's
//! whole reducer state (state, turn, lines, times, message, evidence, pending
//! candidate) and the number of the last line.

#![allow(clippy::unwrap_used)]

mod common;

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::ProviderKind;
use baton::provider::ObsKind;
use baton::reduce::{Reducer, Src};
use baton::replay;
use baton::tail_first::{self, Plan};
use baton::watch::{self, Found, Root};
use std::collections::BTreeSet;
use std::io::Cursor;
use std::path::Path;
use std::process::Command;

/// Runs ../shared/tools/gen-corpus.py into `out` (`None` when the tool is absent).
fn generate(out: &Path, args: &[&str]) -> Option<serde_json::Value> {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/gen-corpus.py");
    if !tool.is_file() {
        println!("NOTICE: ../shared/tools/gen-corpus.py is absent; test skipped.");
        return None;
    }
    let made = Command::new("python3")
        .arg(&tool)
        .arg(out)
        .args(args)
        .output()
        .expect("python3");
    assert!(made.status.success());
    Some(serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap())
}

const MAX_LINE: usize = baton::tail::DEFAULT_MAX_LINE_BYTES;
/// Past every settle deadline of any record, so saved candidates compare by content.
const LATER: Now = Now {
    mono: u64::MAX / 4,
    wall: i64::MAX / 4,
};

/// Feeds `bytes` (which follow the feed's position) through the reducer as replay does
/// (virtual clock: the largest record time so far in this read).
fn feed(feed: &mut FileFeed, reducer: &mut Reducer, clock: &mut i64, bytes: &[u8]) -> Vec<u64> {
    let mut events = Vec::new();
    let mut starts = Vec::new();
    feed.feed(bytes, |src: &Src, obs| {
        if let Some(t) = obs.record_ts {
            *clock = (*clock).max(t);
        }
        if matches!(obs.kind, ObsKind::TurnStart { .. }) {
            starts.push(src.line);
        }
        let now = Now::virtual_at(*clock);
        reducer.tick(now, &mut events);
        reducer.apply(src, obs, now, &mut events);
    });
    starts
}

fn state(reducer: &Reducer, path: &str, last_line: u64) -> String {
    format!(
        "last_line={last_line} {}",
        serde_json::to_string(&reducer.save_path(path, LATER)).unwrap()
    )
}

#[derive(Default)]
struct Tally {
    cuts: u64,
    tail: u64,
    full: u64,
}

/// Checks one file; returns the mismatches.
fn check_file(f: &Found, tally: &mut Tally) -> Vec<String> {
    let data = std::fs::read(&f.path).unwrap();
    let mut full = FileFeed::new(&f.path, f.provider, MAX_LINE);
    if !full.is_conversation() {
        return Vec::new();
    }
    let path = full.path.clone();
    // Line ends (offset just past each newline).
    let ends: Vec<usize> = memchr::memchr_iter(b'\n', &data).map(|i| i + 1).collect();
    let n = ends.len();
    // First pass: where turns start, to cut around them as well.
    let mut probe = FileFeed::new(&f.path, f.provider, MAX_LINE);
    let mut r = Reducer::new(90_000, 1024);
    let turn_lines = feed(&mut probe, &mut r, &mut 0, &data);
    let mut cuts: BTreeSet<usize> = BTreeSet::new();
    // Every line of small files; about 2 MB of tail reading per big one (debug builds).
    let every = (data.len() / 80_000).clamp(1, n.max(1));
    cuts.extend((1..=n).step_by(every));
    cuts.extend(n.saturating_sub(8)..=n);
    for t in turn_lines.iter().rev().take(40) {
        let t = usize::try_from(*t).unwrap();
        cuts.extend([t - 1, t, t + 1, t + 2]);
    }
    cuts.retain(|c| (1..=n).contains(c));

    let mut wrong = Vec::new();
    let mut reducer = Reducer::new(90_000, 1024);
    let mut clock = 0;
    let mut prev = 0;
    for &cut in &cuts {
        feed(
            &mut full,
            &mut reducer,
            &mut clock,
            &data[prev..ends[cut - 1]],
        );
        prev = ends[cut - 1];
        let want = state(&reducer, &path, full.reader().line_no() - 1);
        let bytes = &data[..ends[cut - 1]];
        tally.cuts += 1;
        match tail_first::plan(&mut Cursor::new(bytes), f.provider, &f.path).unwrap() {
            Plan::Full(_) => tally.full += 1,
            Plan::Tail {
                offset,
                line_no,
                head,
                tail: kept,
            } => {
                tally.tail += 1;
                let off = usize::try_from(offset).unwrap();
                if let Some(kept) = kept {
                    assert_eq!(kept, &bytes[off..], "the kept tail is the file's end");
                }
                let mut tail = FileFeed::resume(&f.path, f.provider, MAX_LINE, offset, line_no);
                if let Some(h) = head {
                    tail.prime(&h);
                }
                let mut r = Reducer::new(90_000, 1024);
                feed(&mut tail, &mut r, &mut 0, &bytes[off..]);
                let got = state(&r, &path, tail.reader().line_no() - 1);
                if got != want {
                    wrong.push(format!(
                        "{} cut after line {cut} (restart at line {line_no}):\n  full: {want}\n  tail: {got}",
                        f.path.display()
                    ));
                }
            }
        }
    }
    wrong
}

fn check_tree(root: &Path, provider: Option<ProviderKind>) -> Tally {
    let files = watch::find(&Root {
        path: root.to_path_buf(),
        provider,
    });
    assert!(!files.is_empty(), "no files under {}", root.display());
    let mut tally = Tally::default();
    let mut wrong = Vec::new();
    for f in &files {
        wrong.extend(check_file(f, &mut tally));
    }
    assert!(
        wrong.is_empty(),
        "{} cuts disagree:\n{}",
        wrong.len(),
        wrong.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    // A scan reads the same states either way.
    let opts = common::options(common::SETTLE_MS);
    let (tail, stats) = replay::scan_with(&files, &opts, true).unwrap();
    let (whole, _) = replay::scan_with(&files, &opts, false).unwrap();
    assert_eq!(tail, whole);
    println!("{}: {}", root.display(), stats.summary());
    tally
}

#[test]
fn corpus_tail_first_state_equals_full_read_at_every_cut() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let t = check_tree(&corpus, None);
    println!("{} cuts: {} tail-first, {} whole", t.cuts, t.tail, t.full);
    // The test means something only if most cuts take the tail-first path.
    assert!(
        t.tail * 4 > t.cuts,
        "{} of {} cuts tail-first",
        t.tail,
        t.cuts
    );
}

#[test]
fn generated_tail_first_state_equals_full_read_at_every_cut() {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/gen-corpus.py");
    if !tool.is_file() {
        println!("NOTICE: ../shared/tools/gen-corpus.py is absent; test skipped.");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree");
    let made = Command::new("python3")
        .arg(&tool)
        .arg(&out)
        .args([
            "--mib",
            "4",
            "--sessions",
            "24",
            "--seed",
            "12",
            "--huge-every",
            "0",
        ])
        .output()
        .expect("python3");
    assert!(made.status.success());
    let mut t = check_tree(&out.join("claude"), Some(ProviderKind::Claude));
    let c = check_tree(&out.join("codex"), Some(ProviderKind::Codex));
    t.cuts += c.cuts;
    t.tail += c.tail;
    t.full += c.full;
    println!("{} cuts: {} tail-first, {} whole", t.cuts, t.tail, t.full);
    assert!(
        t.tail * 4 > t.cuts,
        "{} of {} cuts tail-first",
        t.tail,
        t.cuts
    );
}

/// The daemon's first history read starts files at their restart points too: what
/// `status` shows right after `daemon_ready` agrees with the generator's manifest.
#[test]
fn daemon_first_start_agrees_with_the_manifest() {
    let d = common::Daemon::tree();
    let args = [
        "--mib",
        "3",
        "--sessions",
        "16",
        "--seed",
        "21",
        "--huge-every",
        "0",
    ];
    let Some(manifest) = generate(d.dir.path(), &args) else {
        return;
    };
    let d = d.start(&[]);
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let log = std::fs::read_to_string(&d.log).unwrap_or_default();
    let mut wrong = Vec::new();
    for s in manifest["sessions"].as_array().unwrap() {
        let path = d.dir.path().join(s["path"].as_str().unwrap());
        let row = rows
            .iter()
            .find(|r| r["path"] == path.display().to_string() && r["agent"].is_null());
        let want = match s["state"].as_str().unwrap() {
            "waiting" => "completed",
            other => other,
        };
        match row {
            Some(r) if r["state"] == want && r["turn"] == s["turn"] && r["line"] == s["line"] => {}
            _ => wrong.push(format!("{s} -> {row:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}\n{log}", wrong.join("\n"));
    // Most files took the tail-first path (the rest say why in the log).
    let tail = log.matches("History read from its last turn").count();
    let whole = log.matches("History read whole").count();
    assert!(tail > whole, "{tail} files read tail-first, {whole} whole");
    d.stop();
}
