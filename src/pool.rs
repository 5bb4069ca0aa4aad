//! Work on many items across threads, results taken in item order: `scan` and `replay`
//! read and project files in parallel while one thread reduces them in file order, so
//! their output is the same as a sequential run's.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

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
    in_order_from(
        |send| {
            for i in 0..n {
                if !send(i) {
                    return;
                }
            }
        },
        threads,
        window,
        work,
        take,
    )
}

/// [`in_order`] for items that `produce` hands on as it finds them, on a thread of its
/// own (a walk of directories): the workers start on the first item while it looks for
/// the rest. Item `i` is the `i`-th handed on; `produce` stops when its sender says no
/// (the work was stopped).
pub fn in_order_from<J: Send, T: Send, E>(
    produce: impl FnOnce(&mut dyn FnMut(J) -> bool) + Send,
    threads: usize,
    window: usize,
    work: impl Fn(J) -> T + Sync,
    mut take: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    if threads <= 1 {
        let mut items = Vec::new();
        produce(&mut |j| {
            items.push(j);
            true
        });
        for (i, j) in items.into_iter().enumerate() {
            take(i, work(j))?;
        }
        return Ok(());
    }
    let window = window.max(threads);
    let stop = AtomicBool::new(false);
    let (tok_tx, tok_rx) = crossbeam_channel::bounded::<()>(window);
    for _ in 0..window {
        let _ = tok_tx.send(());
    }
    let (job_tx, job_rx) = crossbeam_channel::unbounded::<(usize, J)>();
    let (res_tx, res_rx) = crossbeam_channel::unbounded::<(usize, T)>();
    std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            let mut i = 0;
            produce(&mut |j| {
                let sent = !stop.load(Ordering::Relaxed) && job_tx.send((i, j)).is_ok();
                i += 1;
                sent
            });
            // Dropping `job_tx` here tells the workers no more items come.
        });
        for _ in 0..threads {
            let (tok_rx, job_rx, res_tx) = (tok_rx.clone(), job_rx.clone(), res_tx.clone());
            let work = &work;
            s.spawn(move || {
                while tok_rx.recv().is_ok() && !stop.load(Ordering::Relaxed) {
                    // Err: every item is handed out.
                    let Ok((i, j)) = job_rx.recv() else { return };
                    if res_tx.send((i, work(j))).is_err() {
                        return;
                    }
                }
            });
        }
        drop((res_tx, job_rx));
        let mut waiting = BTreeMap::new();
        let mut want = 0;
        let mut result = Ok(());
        // Ends when every worker has ended: every item is done (or a panic, which the
        // scope re-raises).
        'recv: while let Ok((i, t)) = res_rx.recv() {
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
        drop(tok_tx);
        drop(res_rx);
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::AtomicUsize;

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

    proptest! {
        #[test]
        fn items_handed_on_come_back_in_their_order(n in 0usize..200, threads in 1usize..5, window in 1usize..9) {
            let mut got = Vec::new();
            let r: Result<(), ()> = in_order_from(
                |send| {
                    for i in 0..n {
                        // The producer is slow now and then, as a walk listing a directory.
                        if i % 11 == 0 { std::thread::sleep(std::time::Duration::from_micros(100)); }
                        if !send(i) { return; }
                    }
                },
                threads,
                window,
                |i| {
                    if i % 7 == 0 { std::thread::sleep(std::time::Duration::from_micros(200)); }
                    i * 3
                },
                |i, t| { got.push((i, t)); Ok(()) },
            );
            prop_assert!(r.is_ok());
            let want: Vec<(usize, usize)> = (0..n).map(|i| (i, i * 3)).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn an_error_stops_the_producer_and_the_work() {
        let (made, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let r = in_order_from(
            |send| {
                for i in 0..100_000 {
                    made.fetch_add(1, Ordering::Relaxed);
                    if !send(i) {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(10));
                }
            },
            2,
            4,
            |i| {
                done.fetch_add(1, Ordering::Relaxed);
                i
            },
            |i, _| if i == 5 { Err(i) } else { Ok(()) },
        );
        assert_eq!(r, Err(5));
        assert!(done.load(Ordering::Relaxed) < 100);
        assert!(
            made.load(Ordering::Relaxed) < 100_000,
            "the producer ran on"
        );
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
