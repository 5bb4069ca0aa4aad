//! Golden tests: the events `baton replay` gives for every real corpus transcript, checked
//! against reviewed snapshots in tests/snapshots/. After a deliberate change, re-bless with
//! `BATON_BLESS=1 cargo test --test integration golden::` and review the diff against the transcripts.

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::model::Event;
use baton::watch::{self, Root};
use std::path::Path;

fn render(events: &[Event], corpus: &Path) -> String {
    let prefix = format!("{}/", corpus.display());
    let mut out = String::new();
    for e in events {
        let mut e = e.clone();
        e.path = e
            .path
            .map(|p| p.strip_prefix(&prefix).unwrap_or(&p).to_owned());
        out.push_str(&e.to_json());
        out.push('\n');
    }
    out
}

#[test]
fn corpus_replay_matches_reviewed_snapshots() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let files = watch::find(&Root {
        path: corpus.clone(),
        provider: None,
    });
    assert!(
        files.len() >= 22,
        "expected the whole corpus, found {}",
        files.len()
    );
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let bless = std::env::var_os("BATON_BLESS").is_some();
    let mut failures = Vec::new();
    for f in &files {
        let rel = f.path.strip_prefix(&corpus).unwrap();
        let events = common::replay_files(
            &[(f.path.clone(), f.provider)],
            &common::options(common::SETTLE_MS),
        );
        let got = render(&events, &corpus);
        let snap = snapshots.join(rel).with_extension("events.jsonl");
        if bless {
            std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
            std::fs::write(&snap, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&snap)
            .unwrap_or_else(|_| format!("<missing snapshot {}>", snap.display()));
        if want != got {
            failures.push(format!(
                "{}:\n--- want\n{want}--- got\n{got}",
                rel.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} snapshot(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
