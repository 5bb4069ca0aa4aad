//! `scan` and `replay` read files on several threads; their output must be exactly that
//! of one thread reading the files in order.

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::model::Event;
use baton::replay::{self, AtEof};
use baton::watch::{self, Root};

fn events(files: &[watch::Found], threads: usize) -> Vec<Event> {
    let mut opts = common::options(common::SETTLE_MS);
    opts.threads = threads;
    let mut out = Vec::new();
    replay::run(files, &opts, AtEof::RunOn, |e| {
        out.push(e.clone());
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn parallel_reads_give_the_sequential_order() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let files = watch::find(&Root {
        path: corpus,
        provider: None,
    });
    assert!(files.len() > 10);
    let one = events(&files, 1);
    assert!(one.len() > 100, "the corpus gives events");
    let mut reversed = files.clone();
    reversed.reverse();
    let one_reversed: Vec<String> = events(&reversed, 1).iter().map(Event::to_json).collect();
    for threads in [2, 3, 8] {
        let many = events(&files, threads);
        assert_eq!(
            one.iter().map(Event::to_json).collect::<Vec<_>>(),
            many.iter().map(Event::to_json).collect::<Vec<_>>(),
            "{threads} threads"
        );
        let mut opts = common::options(common::SETTLE_MS);
        opts.threads = threads;
        let par = replay::scan(&files, &opts).unwrap();
        opts.threads = 1;
        assert_eq!(par, replay::scan(&files, &opts).unwrap());
        // Order is the caller's, not whichever thread finished first.
        assert_eq!(
            one_reversed,
            events(&reversed, threads)
                .iter()
                .map(Event::to_json)
                .collect::<Vec<_>>()
        );
    }
}

/// `scan` of roots reads each file while the walk lists the rest: the states must be
/// those of the files listed first and read in order.
fn walked_and_listed(roots: &[Root]) -> (usize, Vec<baton::reduce::SessionView>) {
    let opts = common::options(common::SETTLE_MS);
    let listed: Vec<watch::Found> = roots.iter().flat_map(watch::find).collect();
    let scan = |files| replay::scan_live(files, &opts, true, 60_000).unwrap();
    let (want, want_stats) = scan(replay::Files::Listed(&listed));
    let (got, got_stats) = scan(replay::Files::Walked(roots));
    assert_eq!(got, want);
    assert_eq!(got_stats, want_stats);
    (listed.len(), got)
}

#[test]
fn a_scan_of_roots_walked_as_it_reads_gives_the_listed_files_states() {
    // Files told by their first line (no provider named), by their path (a Codex
    // rollout), and files of no agent's, in nested directories.
    let dir = tempfile::tempdir().unwrap();
    let (projects, sessions) = (dir.path().join("p"), dir.path().join("s"));
    let mut want = 0;
    for (i, sub) in ["a", "a/b", "a-b", "z"].iter().enumerate() {
        let d = projects.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        for j in 0..=i {
            let c = common::Claude::new();
            let (bytes, _) = c.turn(&format!("prompt {i}.{j}"), &format!("answer {i}.{j}"));
            common::append(&c.path_in(&d), bytes.as_bytes());
            want += 1;
        }
        std::fs::write(d.join("other.jsonl"), "{\"foo\":1}\n").unwrap();
        std::fs::write(d.join("empty.jsonl"), "").unwrap();
    }
    for _ in 0..3 {
        let c = common::Codex::new();
        let (bytes, _) = c.turn("done");
        let path = c.path_in(&sessions);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        common::append(&path, format!("{}{bytes}", c.meta()).as_bytes());
        want += 1;
    }
    let root = |path: &std::path::Path| Root {
        path: path.to_path_buf(),
        provider: None,
    };
    let (files, views) = walked_and_listed(&[root(&projects), root(&sessions)]);
    assert_eq!(files, want);
    assert_eq!(views.len(), want, "{views:?}");
    // A root that is one file, and one root twice.
    let one = common::Claude::new();
    let path = one.path_in(&projects);
    common::append(&path, one.turn("hi", "there").0.as_bytes());
    walked_and_listed(&[root(&path), root(&projects), root(&projects)]);

    if let Some(corpus) = common::corpus() {
        let (files, views) = walked_and_listed(&[root(&corpus)]);
        assert!(files > 10 && views.len() > 10);
    }
}
