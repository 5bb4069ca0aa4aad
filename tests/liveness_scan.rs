//! `scan` judges liveness as the daemon does: a working Codex session quiet for longer
//! than `--liveness-after` whose rollout no process holds open for writing shows
//! `interrupted (writer_gone)`, in the table and in `--json`; with a writer alive it stays
//! `working`. Where no process can tell (a Claude Code session whose transcript does not
//! say where it runs), a working session silent that long shows `stale`.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{claude, codex, lines};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scan(path: &Path, json: bool) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.arg("scan").arg("--all").arg(path).env("COLUMNS", "200");
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    common::assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

fn row(path: &Path) -> Value {
    let text = scan(path, true);
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    rows[0].clone()
}

/// A working Codex rollout (a tool call out, no end), its records months old.
fn working_codex(dir: &Path) -> PathBuf {
    let path = dir.join("rollout-2026-03-01T10-00-00-x.jsonl");
    std::fs::write(
        &path,
        lines(&[
            codex::meta(0),
            codex::started(1, "t1"),
            codex::user(1, "refactor it"),
            codex::call(5, "c1"),
        ]),
    )
    .unwrap();
    path
}

#[test]
fn scan_ends_a_dead_writers_turn_as_the_daemon_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = working_codex(dir.path());
    let r = row(&path);
    assert_eq!(r["state"], "interrupted", "{r}");
    assert_eq!(r["reason"], "writer_gone", "{r}");
    let table = scan(&path, false);
    assert!(table.contains("interrupted (writer_gone)"), "{table}");

    // A process holding it open for writing, as Codex does: alive, so working.
    let _writer = common::writer_of(&path);
    let r = row(&path);
    assert_eq!(r["state"], "working", "{r}");
    assert!(r.get("reason").is_none(), "{r}");
}

#[test]
fn scan_shows_stale_where_no_process_can_tell() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{}.jsonl", claude::SESSION));
    // Working (a tool call out), months ago; no `cwd`, so no process to look for.
    std::fs::write(
        &path,
        lines(&[
            claude::prompt("u1", 0, "build it"),
            claude::tool_use("a1", 5, "msg_1", "toolu_1", "Bash"),
        ]),
    )
    .unwrap();
    let r = row(&path);
    assert_eq!(r["state"], "stale", "{r}");
    let table = scan(&path, false);
    assert!(
        table.lines().nth(1).unwrap().starts_with("stale"),
        "{table}"
    );
    // Within liveness_after of its last record it is still working.
    let r: Value = {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["scan", "--json", "--liveness-after", "10000h"])
            .arg(&path)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(r["state"], "working", "{r}");
}
