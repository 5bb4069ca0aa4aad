//! The daemon and `replay` agree: real corpus transcripts written into a watched tree in
//! chunks that split lines produce, live, the same turn events (every event decided by
//! an explicit marker) that `replay` derives from the whole file.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::Daemon;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

/// (event, line, evidence-or-reason, turn) for events an explicit record decides.
fn decided(events: &[serde_json::Value]) -> BTreeSet<(String, u64, String, String)> {
    events
        .iter()
        .filter(|e| e["provider"].is_string() && e["evidence"] != "quiet")
        .map(|e| {
            let why = e["evidence"]
                .as_str()
                .or(e["reason"].as_str())
                .unwrap_or("")
                .to_owned();
            (
                e["event"].as_str().unwrap().to_owned(),
                e["line"].as_u64().unwrap(),
                why,
                e["turn"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn replay(path: &Path) -> Vec<serde_json::Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["replay", "--settle", "1h"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn live_events_match_replay_on_real_transcripts() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let cases = [
        (
            "claude/marot__spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
            "claude",
            "proj/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        ),
        (
            "codex/madshn__localpush/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl",
            "codex",
            "2026/02/23/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl",
        ),
    ];
    // Corpus records are months old: widen the catch-up window so they count as live,
    // and make quiet completions impossible within the test.
    let mut d = Daemon::tree().start(&["--catch-up", "1000000h", "--settle", "1h", "--no-desktop"]);
    let mut want = BTreeSet::new();
    for (rel, root, dest) in cases {
        let src = corpus.join(rel);
        let bytes = std::fs::read(&src).unwrap();
        let dest = d.dir.path().join(root).join(dest);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        let mut f = std::fs::File::create(&dest).unwrap();
        // Odd-sized chunks: lines (and UTF-8 sequences) are split across writes.
        for chunk in bytes.chunks(65_521) {
            f.write_all(chunk).unwrap();
            f.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let mut events = replay(&src);
        for e in &mut events {
            e["path"] = serde_json::Value::Null;
        }
        want.extend(decided(&events));
    }
    let n = want.len();
    d.wait_count("the replayed events", n, |e| {
        e["provider"].is_string() && e["evidence"] != "quiet"
    });
    let got = decided(&d.events());
    assert_eq!(got, want, "live and replay disagree");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

#[test]
fn norma_and_sgme_work_live_as_in_replay() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut d = Daemon::tree();
    let (norma, sgme) = (d.dir.path().join("norma"), d.dir.path().join("sgme/raw"));
    std::fs::create_dir_all(&norma).unwrap();
    std::fs::create_dir_all(&sgme).unwrap();
    let norma_flag = format!("norma={}", norma.display());
    let sgme_flag = format!("sgme={}", sgme.display());
    d = d.start(&[
        "--watch",
        &norma_flag,
        "--watch",
        &sgme_flag,
        "--catch-up",
        "1000000h",
        "--settle",
        "1s",
        "--no-desktop",
    ]);
    copy_tree(&fixtures.join("norma"), &norma);
    copy_tree(&fixtures.join("sgme/raw"), &sgme);
    // Each file arrives whole, so live the settle period can only run after its last
    // block; replay on record time must not fire it between blocks either.
    let mut want = BTreeSet::new();
    for (dir, provider) in [(&norma, "norma"), (&sgme, "sgme")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["replay", "--settle", "1000000h", "--provider", provider])
            .arg(dir)
            .output()
            .unwrap();
        let events: Vec<serde_json::Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            events.iter().any(|e| e["event"] == "turn_completed"),
            "{provider}: no completions in replay"
        );
        want.extend(all(&events));
    }
    let n = want.len();
    d.wait_count("the replayed events", n, |e| e["provider"].is_string());
    assert_eq!(all(&d.events()), want, "live and replay disagree");
}

/// Every transcript event as (event, line, evidence-or-reason, turn).
fn all(events: &[serde_json::Value]) -> BTreeSet<(String, u64, String, String)> {
    events
        .iter()
        .filter(|e| e["provider"].is_string())
        .map(|e| {
            let why = e["evidence"]
                .as_str()
                .or(e["reason"].as_str())
                .unwrap_or("")
                .to_owned();
            (
                e["event"].as_str().unwrap().to_owned(),
                e["line"].as_u64().unwrap(),
                why,
                e["turn"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Sets every file under `dir` to have last changed `ago` before now.
fn age_tree(dir: &Path, ago: std::time::Duration) {
    let when = std::time::SystemTime::now() - ago;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            age_tree(&entry.path(), ago);
        } else {
            std::fs::File::open(entry.path())
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
    }
}

/// (provider, session, agent) → state, from `scan --json` / `status --json` rows. (Not
/// the path: a continued session spans two files, read in either order.)
fn states(rows: &str) -> std::collections::BTreeMap<(String, String, String), String> {
    rows.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
            ((s("provider"), s("session"), s("agent")), s("state"))
        })
        .collect()
}

#[test]
fn status_at_ready_equals_scan_of_the_same_tree() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let d = Daemon::tree();
    let (claude, codex) = (d.claude(), d.codex());
    copy_tree(&corpus.join("claude"), &claude);
    copy_tree(&corpus.join("codex"), &codex);
    // Nobody has touched these files for a long while (an hour is far beyond --settle).
    age_tree(d.dir.path(), std::time::Duration::from_secs(3600));
    let mut scan = std::collections::BTreeMap::new();
    for (root, provider) in [(&claude, "claude"), (&codex, "codex")] {
        // Both judge liveness with the default `--liveness-after`: the daemon in its
        // history read, before `daemon_ready` (issue 29: it used to wait for its first
        // sweep, so dead Codex sessions showed `working` for 30 s).
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["scan", "--json", "--provider", provider])
            .arg(root)
            .output()
            .unwrap();
        assert!(out.status.success());
        scan.extend(states(&String::from_utf8(out.stdout).unwrap()));
    }
    assert!(scan.len() > 19, "{} sessions", scan.len());
    // Default settle (90 s): a pending answer must not wait for its timer in real time.
    let d = d.start(&["--no-desktop"]);
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success());
    let status = states(&String::from_utf8(out.stdout).unwrap());
    let differ: Vec<_> = scan
        .iter()
        .filter(|(k, v)| status.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k:?}: scan {v}, status {:?}", status.get(k)))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert_eq!(status.len(), scan.len());
}
