//! The scaffold every delivery sink (desktop, exec hook, webhook, and those to come)
//! stands on, so each one supplies only what is its own: how a page is formatted and the
//! IO that sends it.
//!
//! - [`Delivered`] runs events through the [`Hold`] and hands the pages that come out to
//!   the sink's [`Courier`]; it is the [`Sink`] the daemon sees.
//! - [`Workers`] are the courier's threads, each lane a bounded queue with its own
//!   threads, and the one way they are told to stop: the queues disconnect at
//!   [`Workers::close`] (the workers finish what is queued), and [`Stop`] tells them the
//!   sink is closing (no more retries) and, past the grace, that what runs is to be ended.
//!
//! Nothing here blocks the caller except `close`, which waits up to its grace.
//!
//! The workers do not wait on the daemon's shutdown token: at the stop they must still
//! send what the core's last batch paged. The daemon closes its sinks once the core
//! (stopped by the token) is done and has handed them back.

use super::hold::{Hold, Pages};
use super::{Closed, Sink, SinkError};
use crate::diag::Deliveries;
use crate::model::Event;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// What a delivery sink supplies to [`Delivered`]: formatting and IO.
pub trait Courier: Send + 'static {
    /// What the sink has done so far (logged at close).
    type Stats: fmt::Debug + Send + 'static;

    /// A short name for logs.
    const NAME: &'static str;

    /// Sends one page the hold let through, as if at `now`. Never blocks: work goes to
    /// the courier's [`Workers`], and what does not fit is dropped and counted.
    fn page(&mut self, ev: &Event, now: Instant);

    fn stats(&self) -> Self::Stats;

    /// Its counter set in `diag`, which `/metrics` reads at each scrape (from another
    /// thread) as `baton_deliveries_total` and `baton_delivery_failures_total`.
    fn counters(&self) -> Arc<dyn Deliveries>;

    /// Stops taking work and waits for the workers up to `deadline`. Returns the final
    /// counts and whether every worker finished in time.
    fn finish(self, deadline: Instant) -> (Self::Stats, bool);
}

/// A delivery sink as the daemon holds it: a [`Sink`] whose deliveries and failures
/// `baton_deliveries_total` counts.
pub trait Counting: Sink {
    /// The courier's counters, for the metrics' [`crate::diag::Readout`].
    fn deliveries(&self) -> Arc<dyn Deliveries>;

    /// (delivered, failed) so far; see [`Deliveries`].
    fn counts(&self) -> (u64, u64) {
        let c = self.deliveries();
        (c.delivered(), c.failed())
    }
}

impl<C: Courier> Counting for Delivered<C> {
    fn deliveries(&self) -> Arc<dyn Deliveries> {
        self.courier.counters()
    }
}

/// A delivery sink: the hold in front of a courier; see the module docs.
pub struct Delivered<C> {
    hold: Hold,
    courier: C,
}

impl<C: Courier> Delivered<C> {
    /// The courier behind the default hold.
    pub fn with_courier(courier: C) -> Self {
        Delivered {
            hold: Hold::default(),
            courier,
        }
    }

    /// Holds completions back for background tasks for up to `period` (see [`Hold`]).
    pub fn with_hold(mut self, period: Duration) -> Self {
        self.hold.set_period(period);
        self
    }

    /// Sets the grace of questions and whether scheduled turns page (see [`Hold`]).
    pub fn with_pages(mut self, pages: Pages) -> Self {
        self.hold.set_pages(pages);
        self
    }

    /// Delivers `ev` as if at `now` (holds, and whatever the courier times, are measured
    /// on it).
    pub fn deliver_at(&mut self, ev: &Event, now: Instant) {
        if let Some(ev) = self.hold.offer(ev, now) {
            self.courier.page(&ev, now);
        }
    }

    /// Sends the held pages due at `now`; returns when the next one is.
    pub fn tick_at(&mut self, now: Instant) -> Option<Instant> {
        for ev in self.hold.due(now) {
            self.courier.page(&ev, now);
        }
        self.hold.next_due()
    }

    pub fn stats(&self) -> C::Stats {
        self.courier.stats()
    }

    /// Stops taking events and lets the workers finish for up to `grace` (what each
    /// courier then does with what still runs, its docs say). Returns the final counts
    /// and whether the workers finished in time.
    pub fn close(mut self, grace: Duration) -> (C::Stats, bool) {
        // A question still in its grace was not answered: it pages now, not never.
        for ev in self.hold.take_waits() {
            self.courier.page(&ev, Instant::now());
        }
        self.courier.finish(Instant::now() + grace)
    }
}

impl<C: Courier> Sink for Delivered<C> {
    fn name(&self) -> &'static str {
        C::NAME
    }

    fn deliver(&mut self, ev: &Event) {
        self.deliver_at(ev, Instant::now());
    }

    fn tick(&mut self, now: Instant) -> Option<Instant> {
        self.tick_at(now)
    }

    fn close(self: Box<Self>, grace: Duration) -> Closed {
        let (stats, done) = (*self).close(grace);
        Closed {
            stats: Box::new(stats),
            done,
        }
    }
}

/// What [`Workers`] tell their threads.
#[derive(Clone)]
pub struct Stop {
    /// Disconnects when the sink starts closing (nothing is ever sent).
    closing: Receiver<()>,
    ended: Arc<AtomicBool>,
}

impl Stop {
    /// Waits `d`; false when the sink is closing (at once if it already is).
    pub fn pause(&self, d: Duration) -> bool {
        matches!(self.closing.recv_timeout(d), Err(RecvTimeoutError::Timeout))
    }

    /// Whether the grace at close is over: what runs is to be ended, what waits skipped.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// The flag behind [`Stop::ended`], for a wait loop that checks it.
    pub fn ended_flag(&self) -> &AtomicBool {
        &self.ended
    }
}

/// How [`Workers::close`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Every worker finished within the grace.
    InTime,
    /// Not within the grace, but once told to end what runs.
    Ended,
    /// Some worker was still busy; it is abandoned.
    Busy,
}

/// Waits for a sink's worker threads: each holds a clone of the sender whose receiver
/// is kept here, so "all disconnected" means "all finished".
#[derive(Debug)]
struct Finished(Receiver<()>);

impl Finished {
    /// True when every worker has ended before `deadline`.
    fn wait(&self, deadline: Instant) -> bool {
        loop {
            match self.0.recv_deadline(deadline) {
                Ok(()) => continue,
                Err(RecvTimeoutError::Disconnected) => return true,
                Err(RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

/// A courier's worker threads, fed by bounded queues (lanes); see the module docs.
pub struct Workers<J> {
    sink: &'static str,
    lanes: Vec<Lane<J>>,
    /// Dropped at close: wakes workers out of a [`Stop::pause`].
    closing: Sender<()>,
    closing_rx: Receiver<()>,
    ended: Arc<AtomicBool>,
    /// Held by every worker thread; `None` once every clone is handed out and it is
    /// dropped at close.
    done_tx: Option<Sender<()>>,
    finished: Finished,
}

struct Lane<J> {
    tx: Sender<J>,
    /// Kept to drop the oldest job when the queue is full.
    oldest: Receiver<J>,
}

impl<J: Send + 'static> Workers<J> {
    /// No lanes yet; `sink` names the sink in errors.
    pub fn new(sink: &'static str) -> Self {
        let (closing, closing_rx) = crossbeam_channel::bounded(0);
        let (done_tx, done_rx) = crossbeam_channel::bounded(0);
        Workers {
            sink,
            lanes: Vec::new(),
            closing,
            closing_rx,
            ended: Arc::new(AtomicBool::new(false)),
            done_tx: Some(done_tx),
            finished: Finished(done_rx),
        }
    }

    /// Adds a lane: a queue of `queue` jobs and `threads` threads (named by `name`) each
    /// running `work` on it until the queue disconnects. Returns the lane's index.
    pub fn lane<F>(
        &mut self,
        queue: usize,
        threads: usize,
        name: impl Fn(usize) -> String,
        work: F,
    ) -> Result<usize, SinkError>
    where
        F: Fn(Receiver<J>, &Stop) + Send + Sync + 'static,
    {
        let (tx, rx) = crossbeam_channel::bounded::<J>(queue.max(1));
        let work = Arc::new(work);
        for i in 0..threads {
            let rx = rx.clone();
            let work = Arc::clone(&work);
            let stop = self.stop();
            let done = self.done_tx.clone();
            thread::Builder::new()
                .name(name(i))
                .spawn(move || {
                    let _done = done;
                    work(rx, &stop);
                })
                .map_err(|source| SinkError::Thread {
                    sink: self.sink,
                    source,
                })?;
        }
        self.lanes.push(Lane { tx, oldest: rx });
        Ok(self.lanes.len() - 1)
    }

    /// A lane with no thread, its queue's receiving end returned instead: every decision
    /// before the queue is the real sink's. For tests.
    pub fn capture(&mut self, queue: usize) -> Receiver<J> {
        let (tx, rx) = crossbeam_channel::bounded::<J>(queue.max(1));
        self.lanes.push(Lane {
            tx,
            oldest: rx.clone(),
        });
        rx
    }

    fn stop(&self) -> Stop {
        Stop {
            closing: self.closing_rx.clone(),
            ended: Arc::clone(&self.ended),
        }
    }

    /// Queues `job` on `lane`; when it is full (or its workers are gone), hands the job
    /// back for the caller to count as dropped.
    pub fn offer(&self, lane: usize, job: J) -> Result<(), TrySendError<J>> {
        match self.lanes.get(lane) {
            Some(l) => l.tx.try_send(job),
            None => Err(TrySendError::Disconnected(job)),
        }
    }

    /// Queues `job` on `lane`, dropping the oldest job when it is full. Returns how many
    /// jobs were dropped (the oldest, or this one when there was no room after all).
    pub fn push_out_oldest(&self, lane: usize, mut job: J) -> u64 {
        let Some(l) = self.lanes.get(lane) else {
            return 1;
        };
        let mut dropped = 0;
        // Only the sink's thread sends, so after one pop there is room (or a worker took
        // a job meanwhile): two rounds suffice.
        for _ in 0..2 {
            match l.tx.try_send(job) {
                Ok(()) => return dropped,
                Err(TrySendError::Full(j)) => {
                    job = j;
                    if l.oldest.try_recv().is_ok() {
                        dropped += 1;
                    }
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
        }
        dropped + 1
    }

    /// Stops taking jobs and tells the workers the sink is closing; they finish what is
    /// queued. Waits for them up to `deadline`; then, with `end_within`, tells them to
    /// end what runs ([`Stop::ended`]) and waits that much longer.
    pub fn close(self, deadline: Instant, end_within: Option<Duration>) -> Drain {
        let Workers {
            lanes,
            closing,
            ended,
            done_tx,
            finished,
            ..
        } = self;
        drop(closing);
        drop(lanes);
        drop(done_tx);
        if finished.wait(deadline) {
            return Drain::InTime;
        }
        let Some(more) = end_within else {
            return Drain::Busy;
        };
        ended.store(true, Ordering::Release);
        if finished.wait(Instant::now() + more) {
            Drain::Ended
        } else {
            Drain::Busy
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_full_lane_drops_its_oldest_job_or_refuses_the_newest() {
        let mut w: Workers<u32> = Workers::new("test");
        let rx = w.capture(2);
        assert_eq!(w.push_out_oldest(0, 1), 0);
        assert_eq!(w.push_out_oldest(0, 2), 0);
        assert_eq!(w.push_out_oldest(0, 3), 1);
        assert!(matches!(w.offer(0, 4), Err(TrySendError::Full(4))));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![2, 3]);
        assert!(matches!(w.offer(1, 5), Err(TrySendError::Disconnected(5))));
    }

    #[test]
    fn close_drains_the_queue_then_ends_what_still_runs() {
        let mut w: Workers<u32> = Workers::new("test");
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        w.lane(
            8,
            1,
            |_| "baton-test".to_owned(),
            move |rx, stop| {
                for job in rx {
                    // A job of 0 runs until it is told to end.
                    while job == 0 && !stop.ended() {
                        thread::sleep(Duration::from_millis(5));
                    }
                    log.lock().unwrap().push(job);
                }
            },
        )
        .unwrap();
        for j in [1, 2, 3] {
            w.offer(0, j).unwrap();
        }
        let drained = w.close(Instant::now() + Duration::from_secs(30), None);
        assert_eq!(drained, Drain::InTime);
        assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]);

        let mut w: Workers<u32> = Workers::new("test");
        w.lane(
            8,
            1,
            |_| "baton-test".to_owned(),
            |rx, stop| {
                for job in rx {
                    while job == 0 && !stop.ended() {
                        thread::sleep(Duration::from_millis(5));
                    }
                }
            },
        )
        .unwrap();
        w.offer(0, 0).unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(w.close(soon, Some(Duration::from_secs(30))), Drain::Ended);
    }

    /// Counts its pages; one worker that only drains.
    struct Tally {
        workers: Workers<u32>,
        paged: u32,
    }

    impl Courier for Tally {
        type Stats = u32;
        const NAME: &'static str = "tally";

        fn page(&mut self, _ev: &Event, _now: Instant) {
            self.paged += 1;
        }

        fn stats(&self) -> u32 {
            self.paged
        }

        fn counters(&self) -> Arc<dyn Deliveries> {
            Arc::new(crate::diag::ExecCounters::default())
        }

        fn finish(self, deadline: Instant) -> (u32, bool) {
            (
                self.paged,
                self.workers.close(deadline, None) == Drain::InTime,
            )
        }
    }

    /// Closed through the trait, as the daemon does: the question still in its grace
    /// pages first, and the stats come back for the log.
    #[test]
    fn close_through_the_trait_pages_waiting_questions_and_reports() {
        use crate::model::{EventKind, ProviderKind};
        let mut workers = Workers::new("tally");
        workers
            .lane(1, 1, |_| "baton-test".to_owned(), |rx, _| for _ in rx {})
            .unwrap();
        let mut sink = Delivered::with_courier(Tally { workers, paged: 0 });
        let t0 = Instant::now();
        let path = "/h/.claude/projects/-h-app/s.jsonl";
        let done =
            crate::naming::tests::event(EventKind::TurnCompleted, ProviderKind::Claude, path);
        sink.deliver_at(&done, t0);
        let asked = crate::naming::tests::event(EventKind::NeedsInput, ProviderKind::Claude, path);
        sink.deliver_at(&asked, t0);
        assert_eq!(sink.stats(), 1, "the question waits for its grace");
        let sink: Box<dyn Sink> = Box::new(sink);
        assert_eq!(sink.name(), "tally");
        let closed = sink.close(Duration::from_secs(30));
        assert!(closed.done);
        assert_eq!(format!("{:?}", closed.stats), "2");
    }

    #[test]
    fn a_pause_ends_when_the_sink_closes() {
        let mut w: Workers<u32> = Workers::new("test");
        let (tx, rx) = crossbeam_channel::bounded(1);
        w.lane(
            1,
            1,
            |_| "baton-test".to_owned(),
            move |_jobs, stop| {
                let _ = tx.send(stop.pause(Duration::from_secs(60)));
            },
        )
        .unwrap();
        assert_eq!(
            w.close(Instant::now() + Duration::from_secs(30), None),
            Drain::InTime
        );
        assert!(!rx.recv().unwrap(), "the pause was cut short");
    }
}
