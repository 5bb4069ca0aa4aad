//! Work on many items across threads, results taken in item order: `scan` and `replay`
//! read and project files in parallel while one thread reduces them in file order, so
//! their output is the same as a sequential run's.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How many threads to use for `n` items: every core, at most one per item.
pub fn threads_for(n: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(n)
        .max(1)
}

/// Runs `work(i)` for every `i` in `0..n` on `threads` threads and hands each result to
/// `take` in index order, on the calling thread. At most `window` results are worked on
/// or waiting at once, so one slow item cannot make the others pile up in memory. The
/// first error from `take` stops the work and is returned.
pub fn in_order<T: Send, E>(
    n: usize,
    threads: usize,
    window: usize,
    work: impl Fn(usize) -> T + Sync,
    mut take: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    if threads <= 1 || n <= 1 {
        for i in 0..n {
            take(i, work(i))?;
        }
        return Ok(());
    }
    let window = window.max(threads);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // A worker takes a token before it claims an item, and the taker gives one back for
    // every result it consumes: the tokens bound the items in flight.
    let (tok_tx, tok_rx) = crossbeam_channel::bounded::<()>(window);
    for _ in 0..window {
        let _ = tok_tx.send(());
    }
    let (res_tx, res_rx) = crossbeam_channel::unbounded::<(usize, T)>();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (tok_rx, res_tx) = (tok_rx.clone(), res_tx.clone());
            let (next, stop, work) = (&next, &stop, &work);
            s.spawn(move || {
                while tok_rx.recv().is_ok() && !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || res_tx.send((i, work(i))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(res_tx);
        let mut waiting = BTreeMap::new();
        let mut want = 0;
        let mut result = Ok(());
        'recv: while want < n {
            // Err: every worker ended early, which only a panic does (the scope re-raises it).
            let Ok((i, t)) = res_rx.recv() else { break };
            waiting.insert(i, t);
            while let Some(t) = waiting.remove(&want) {
                if let Err(e) = take(want, t) {
                    result = Err(e);
                    break 'recv;
                }
                want += 1;
                let _ = tok_tx.send(());
            }
        }
        stop.store(true, Ordering::Relaxed);
        // Wakes workers waiting for a token; they see `stop` and end.
        drop(tok_tx);
        drop(res_rx);
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn results_come_in_index_order(n in 0usize..200, threads in 1usize..5, window in 1usize..9) {
            let mut got = Vec::new();
            let r: Result<(), ()> = in_order(n, threads, window, |i| {
                // Uneven work, so later items often finish first.
                if i % 7 == 0 { std::thread::sleep(std::time::Duration::from_micros(200)); }
                i * 3
            }, |i, t| { got.push((i, t)); Ok(()) });
            prop_assert!(r.is_ok());
            let want: Vec<(usize, usize)> = (0..n).map(|i| (i, i * 3)).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn an_error_stops_the_work_and_is_returned() {
        let done = AtomicUsize::new(0);
        let r = in_order(
            10_000,
            2,
            4,
            |i| {
                done.fetch_add(1, Ordering::Relaxed);
                i
            },
            |i, _| if i == 5 { Err(i) } else { Ok(()) },
        );
        assert_eq!(r, Err(5));
        // The window bounds what was worked on past the failing item.
        assert!(done.load(Ordering::Relaxed) < 100);
    }
}
