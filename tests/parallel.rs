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
