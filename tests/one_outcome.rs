//! One outcome per turn, as an invariant: between retractions (`turn_resumed`), each
//! (provider, session, agent, turn) gets at most one of `turn_completed`, `turn_failed`
//! and `turn_interrupted`. Checked on every real corpus file and every fixture, and as a
//! property over random record sequences of every provider, drawn from those same files'
//! lines (any order, repeats, records of other turns and sessions mixed in).

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::model::{Event, EventKind, ProviderKind};
use baton::watch::{self, Found, Root};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every key that got a second outcome since its last retraction, with the two events.
fn double_outcomes(events: &[Event]) -> Vec<String> {
    let mut decided: HashMap<(Option<ProviderKind>, String, String, String), &Event> =
        HashMap::new();
    let mut out = Vec::new();
    for e in events {
        let key = (
            e.provider,
            e.session.clone().unwrap_or_default(),
            e.agent.clone().unwrap_or_default(),
            e.turn.clone().unwrap_or_default(),
        );
        match e.event {
            EventKind::TurnResumed => {
                decided.remove(&key);
            }
            EventKind::TurnCompleted | EventKind::TurnFailed | EventKind::TurnInterrupted => {
                if let Some(first) = decided.get(&key) {
                    out.push(format!(
                        "turn {:?}: {} at line {:?}, then {} at line {:?}",
                        key.3,
                        first.event.as_str(),
                        first.line,
                        e.event.as_str(),
                        e.line
                    ));
                } else {
                    decided.insert(key, e);
                }
            }
            _ => {}
        }
    }
    out
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every transcript under the fixtures and (when present) the corpus.
fn all_files() -> Vec<(PathBuf, Found)> {
    let mut roots = vec![fixtures()];
    roots.extend(common::corpus());
    let mut out = Vec::new();
    for root in roots {
        for f in watch::find(&Root {
            path: root.clone(),
            provider: None,
        }) {
            out.push((root.clone(), f));
        }
    }
    out
}

#[test]
fn no_turn_of_the_corpus_or_the_fixtures_gets_two_outcomes() {
    let files = all_files();
    assert!(files.len() >= 30, "found only {} files", files.len());
    let mut failures = Vec::new();
    for (_, f) in &files {
        let events = common::replay_files(
            &[(f.path.clone(), f.provider)],
            &common::options(common::SETTLE_MS),
        );
        for d in double_outcomes(&events) {
            failures.push(format!("{}: {d}", f.path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The lines of every file of one provider, and where each file sits under its root
/// (a sequence is written where one of them sat, so path rules still apply).
#[derive(Default)]
struct Pool {
    lines: Vec<Vec<u8>>,
    places: Vec<PathBuf>,
}

fn pools() -> Vec<(ProviderKind, Pool)> {
    let mut by: HashMap<ProviderKind, Pool> = HashMap::new();
    for (root, f) in all_files() {
        let Ok(bytes) = std::fs::read(&f.path) else {
            continue;
        };
        let pool = by.entry(f.provider).or_default();
        pool.places
            .push(f.path.strip_prefix(&root).unwrap().to_path_buf());
        // Long lines add time, not shapes.
        pool.lines.extend(
            bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty() && l.len() <= 16 * 1024)
                .map(<[u8]>::to_vec),
        );
    }
    let mut v: Vec<_> = by
        .into_iter()
        .filter(|(_, p)| !p.lines.is_empty())
        .collect();
    v.sort_by_key(|(k, _)| *k);
    v
}

#[test]
fn no_record_sequence_of_any_provider_gives_a_turn_two_outcomes() {
    let pools = pools();
    assert!(pools.len() >= 6, "providers with lines: {}", pools.len());
    let cases = std::env::var("BATON_OUTCOME_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        any::<Index>(),
        any::<Index>(),
        prop::collection::vec(any::<Index>(), 1..60),
        // A short settle makes quiet completions (and their retractions) common.
        prop_oneof![Just(1_000u64), Just(90_000u64)],
    );
    let dir = tempfile::tempdir().unwrap();
    let result = runner.run(&strategy, |(which, place, picks, settle)| {
        let (provider, pool) = &pools[which.index(pools.len())];
        let rel = &pool.places[place.index(pool.places.len())];
        let mut body = Vec::new();
        for p in &picks {
            body.extend_from_slice(&pool.lines[p.index(pool.lines.len())]);
            body.push(b'\n');
        }
        let case = dir.path().join(format!("{}", rand_dir()));
        let events = common::replay_bytes(
            &case,
            rel.to_str().unwrap(),
            *provider,
            &body,
            &common::options(settle),
        );
        let doubles = double_outcomes(&events);
        if doubles.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(format!(
                "{provider} ({}):\n{}\n--- records\n{}",
                rel.display(),
                doubles.join("\n"),
                String::from_utf8_lossy(&body)
            )))
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn rand_dir() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// `status` and `scan` keep the failure: the `task_complete` that closes a failed Codex
/// turn neither pages nor turns the session into "completed" with an empty message.
#[test]
fn a_failed_codex_turn_closed_by_task_complete_stays_failed_in_scan() {
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("sessions/2026/11/20");
    std::fs::create_dir_all(&codex).unwrap();
    let fixture = fixtures().join("part-e/synthetic-codex-0147-usage-limit.jsonl");
    let text = std::fs::read_to_string(&fixture).unwrap();
    // Only the failed turn: the file ends with its closing task_complete.
    let failed: String = text.lines().take(9).map(|l| format!("{l}\n")).collect();
    std::fs::write(
        codex.join("rollout-2026-11-20T09-10-00-019aa1b2-0000-7000-8000-000000000147.jsonl"),
        failed,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--json", "--provider", "codex"])
        .arg(dir.path())
        .output()
        .unwrap();
    let rows = common::json_lines(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["state"], "failed", "{row}");
    assert!(
        row["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("You've hit your usage limit")),
        "{row}"
    );
    assert_eq!(row["line"], 8, "{row}");
}
