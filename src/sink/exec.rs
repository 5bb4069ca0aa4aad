//! The exec hook: `on_event = ["program", "arg", …]` runs the program for each matching
//! event, with the event's JSON line on stdin.
//!
//! Transcript text is untrusted, so it only ever travels on stdin: the program is started
//! directly (never through a shell), its argv is exactly the configured one, and its
//! environment gains only `BATON_EVENT` (the event kind, one of a fixed set of names) and
//! `BATON_PROJECT` (the project's name, printable and capped; see `sink::project_name`).
//! Each run has a timeout (the program is killed when it expires); at most
//! `max_concurrent` run at once, fed from a bounded queue that drops (and counts) what
//! does not fit, so a slow hook never stalls the core.
//!
//! The program's stdout is discarded (baton's stdout may be the event stream) and its
//! stderr is baton's. Only the program itself is killed on timeout, not processes it
//! started in the background.

use super::hold::Hold;
use super::{EventFilter, Finished, Sink, SinkError};
use crate::model::Event;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::io::Write;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Settings of one exec hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecConfig {
    /// The program and its arguments (`on_event`).
    pub command: Vec<String>,
    /// Which events run it.
    pub filter: EventFilter,
    /// How long one run may take before it is killed.
    pub timeout: Duration,
    /// Runs at once.
    pub max_concurrent: usize,
    /// Events waiting for a free slot; more are dropped and counted.
    pub queue: usize,
}

impl ExecConfig {
    /// The defaults, for `command`.
    pub fn new(command: Vec<String>) -> Self {
        ExecConfig {
            command,
            filter: EventFilter::default(),
            timeout: Duration::from_secs(10),
            max_concurrent: 2,
            queue: 32,
        }
    }
}

/// What the hook has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Runs that exited with status 0.
    pub ok: u64,
    /// Runs that could not start or exited non-zero.
    pub failed: u64,
    /// Runs killed at the timeout.
    pub timed_out: u64,
    /// Events dropped because the queue was full.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    ok: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
}

struct Job {
    kind: &'static str,
    project: String,
    json: String,
}

/// Runs the configured program for matching events; see the module docs.
pub struct ExecSink {
    filter: EventFilter,
    hold: Hold,
    tx: Sender<Job>,
    counters: Arc<Counters>,
    finished: Finished,
    dropped: u64,
}

impl ExecSink {
    /// Validates the command and starts `max_concurrent` worker threads.
    pub fn new(cfg: ExecConfig) -> Result<Self, SinkError> {
        if cfg.command.first().is_none_or(|p| p.is_empty()) {
            return Err(SinkError::EmptyCommand);
        }
        let argv: Arc<[String]> = cfg.command.into();
        let (tx, rx) = crossbeam_channel::bounded::<Job>(cfg.queue.max(1));
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
        let counters = Arc::new(Counters::default());
        for i in 0..cfg.max_concurrent.max(1) {
            let rx: Receiver<Job> = rx.clone();
            let argv = Arc::clone(&argv);
            let counters = Arc::clone(&counters);
            let done = done_tx.clone();
            let timeout = cfg.timeout;
            thread::Builder::new()
                .name(format!("baton-exec-{i}"))
                .spawn(move || {
                    let _done = done;
                    for job in rx {
                        run(&argv, &job, timeout, &counters);
                    }
                })
                .map_err(|source| SinkError::Thread {
                    sink: "exec",
                    source,
                })?;
        }
        Ok(ExecSink {
            filter: cfg.filter,
            hold: Hold::default(),
            tx,
            counters,
            finished: Finished(done_rx),
            dropped: 0,
        })
    }

    /// Holds completions back for background tasks for up to `period` (see [`Hold`]).
    pub fn with_hold(mut self, period: Duration) -> Self {
        self.hold.set_period(period);
        self
    }

    /// Sets the grace of questions and whether scheduled turns page (see [`Hold`]).
    pub fn with_pages(mut self, pages: super::hold::Pages) -> Self {
        self.hold.set_pages(pages);
        self
    }

    /// Delivers `ev` as if at `now` (held completions are timed on it).
    pub fn deliver_at(&mut self, ev: &Event, now: Instant) {
        if let Some(ev) = self.hold.offer(ev, now) {
            self.run_for(&ev);
        }
    }

    /// Runs the hook for the held completions due at `now`; returns when the next is.
    pub fn tick_at(&mut self, now: Instant) -> Option<Instant> {
        for ev in self.hold.due(now) {
            self.run_for(&ev);
        }
        self.hold.next_due()
    }

    pub fn stats(&self) -> ExecStats {
        ExecStats {
            ok: self.counters.ok.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            timed_out: self.counters.timed_out.load(Ordering::Relaxed),
            dropped: self.dropped,
        }
    }

    /// Stops taking events, lets the workers run what is queued, and waits for them up to
    /// `grace`. Returns the final counts and whether they finished in time.
    pub fn close(mut self, grace: Duration) -> (ExecStats, bool) {
        // A question still in its grace was not answered: it pages now, not never.
        for ev in self.hold.take_waits() {
            self.run_for(&ev);
        }
        let deadline = Instant::now() + grace;
        let ExecSink {
            tx,
            counters,
            finished,
            dropped,
            ..
        } = self;
        drop(tx);
        let done = finished.wait(deadline);
        let stats = ExecStats {
            ok: counters.ok.load(Ordering::Relaxed),
            failed: counters.failed.load(Ordering::Relaxed),
            timed_out: counters.timed_out.load(Ordering::Relaxed),
            dropped,
        };
        (stats, done)
    }
}

impl Sink for ExecSink {
    fn name(&self) -> &'static str {
        "exec"
    }

    fn deliver(&mut self, ev: &Event) {
        self.deliver_at(ev, Instant::now());
    }

    fn tick(&mut self, now: Instant) -> Option<Instant> {
        self.tick_at(now)
    }
}

impl ExecSink {
    fn run_for(&mut self, ev: &Event) {
        if !self.filter.matches(ev) {
            return;
        }
        let project = super::project_name(ev);
        let mut json = ev.to_json();
        json.push('\n');
        let job = Job {
            kind: ev.event.as_str(),
            project,
            json,
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(job) {
            self.dropped += 1;
            let msg = "Exec hook busy; event dropped (raise its queue or concurrency).";
            // Logarithmic: a flood of drops must not become a flood of log lines.
            if self.dropped.is_power_of_two() {
                tracing::warn!(dropped = self.dropped, "{msg}");
            } else {
                tracing::debug!(dropped = self.dropped, "{msg}");
            }
        }
    }
}

fn run(argv: &[String], job: &Job, timeout: Duration, counters: &Counters) {
    let program = &argv[0];
    let spawned = Command::new(program)
        .args(&argv[1..])
        .env("BATON_EVENT", job.kind)
        .env("BATON_PROJECT", &job.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            counters.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(program = %program, error = %e, "Cannot start the exec hook.");
            return;
        }
    };
    // A program that never reads its stdin must not hold this worker past the timeout,
    // so the write happens on a thread of its own (it ends with EPIPE once the child dies).
    if let Some(mut stdin) = child.stdin.take() {
        let json = job.json.clone();
        let writer = thread::Builder::new()
            .name("baton-exec-stdin".to_owned())
            .spawn(move || {
                let _ = stdin.write_all(json.as_bytes());
            });
        if let Err(e) = writer {
            tracing::warn!(error = %e, "Cannot start a thread to feed the exec hook.");
        }
    }
    match wait_for(&mut child, Instant::now() + timeout) {
        Ok(Some(status)) if status.success() => {
            counters.ok.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Some(status)) => {
            counters.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(program = %program, %status, "Exec hook failed.");
        }
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            counters.timed_out.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                program = %program,
                timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                "Exec hook timed out and was killed."
            );
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            counters.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(program = %program, error = %e, "Cannot wait for the exec hook.");
        }
    }
}

/// The child's exit status, or `None` if it is still running at `deadline`.
fn wait_for(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    let mut nap = Duration::from_millis(2);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(100));
    }
}
