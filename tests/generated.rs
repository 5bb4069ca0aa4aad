//! Scale and accuracy against shared/tools/gen-corpus.py: a generated tree whose manifest
//! says, for every main session, the state at the end of its file, the last turn and the
//! line that decided it. `baton scan --json` must agree on every session.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::HashMap;
use std::process::Command;

#[test]
fn scan_agrees_with_the_generators_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree");
    let args = [
        "--mib",
        "24",
        "--sessions",
        "80",
        "--seed",
        "7",
        "--huge-every",
        "10",
    ];
    let Some(manifest) = common::generate(&out, &args) else {
        return;
    };
    let scan = Command::new(env!("CARGO_BIN_EXE_baton"))
        // The generator's states: no liveness verdict on these old, writerless files.
        .args(["scan", "--json", "--liveness-after", "1000000h"])
        .arg(out.join("claude"))
        .arg(out.join("codex"))
        .output()
        .unwrap();
    assert!(
        scan.status.success(),
        "{}",
        String::from_utf8_lossy(&scan.stderr)
    );
    let mut by_path: HashMap<String, serde_json::Value> = HashMap::new();
    for line in String::from_utf8(scan.stdout).unwrap().lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        if row["agent"].is_null() {
            let rel = row["path"]
                .as_str()
                .unwrap()
                .strip_prefix(&format!("{}/", out.display()))
                .unwrap()
                .to_owned();
            by_path.insert(rel, row);
        }
    }
    let sessions = manifest["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 80);
    let mut wrong = Vec::new();
    for s in sessions {
        let want_state = match s["state"].as_str().unwrap() {
            "waiting" => "completed",
            other => other,
        };
        let row = &by_path[s["path"].as_str().unwrap()];
        if row["state"] != want_state || row["line"] != s["line"] || row["turn"] != s["turn"] {
            wrong.push(format!("{s} -> {row}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of 80 sessions disagree:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
