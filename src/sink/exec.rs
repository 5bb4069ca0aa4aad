//! The exec hook: `on_event = ["program", "arg", …]` runs the program for each matching
//! event, with the event's JSON line on stdin.
//!
//! Transcript text is untrusted, so it only ever travels on stdin: the program is started
//! directly (never through a shell), its argv is exactly the configured one, and its
//! environment gains only `BATON_EVENT` (the event kind, one of a fixed set of names) and
//! `BATON_PROJECT` (the project's name, printable and capped; see `naming::project_name`),
//! plus `BATON_REMOTE` (the `[[remote]]`'s configured name) on a remote machine's event.
//! Each run has a timeout (the program is killed when it expires); at most
//! `max_concurrent` run at once, fed from a bounded queue that drops (and counts) what
//! does not fit, so a slow hook never stalls the core.
//!
//! With `suppress_when_focused` (off by default), an event whose session is in front of
//! the person does not run it (see [`super::focused`]; counted, and noted for `status`).
//!
//! The program's stdout is discarded (baton's stdout may be the event stream) and its
//! stderr is baton's.
//!
//! Each run is the leader of a process group of its own, which whatever it starts joins.
//! When its timeout passes, or at shutdown once the sink's grace is over, the whole group
//! gets SIGTERM, then SIGKILL after [`KILL_GRACE`], so nothing it started outlives it
//! there. (A run that exits by itself leaves what it started in the background alone:
//! that is how a hook starts something on purpose.)

use super::SinkError;
use super::delivery::{Courier, Delivered, Drain, Stop, Workers};
use super::desktop::Board;
use super::focused::{Check, Gate};
use super::quiet::HeldLog;
use super::registry::{SinkKind, Sinks};
use super::section::{
    Bad, check_argv, duration, fmt_duration, ms_of, parse_kinds, toml_kinds, toml_list, toml_str,
};
use crate::child::{Rest, Wiring, end_group, wait_for};
use crate::diag::{self, ExecCounters};
use crate::model::Event;
use crate::naming::EventFilter;
use crossbeam_channel::TrySendError;
use serde::Deserialize;
use std::fmt::Write as _;
use std::io::Write;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// After SIGTERM to a run's process group, how long before SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_millis(500);

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
    /// No run while the event's session is in front of the person.
    pub suppress_when_focused: bool,
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
            suppress_when_focused: false,
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
    /// Runs skipped: the session was in front of the person (`suppress_when_focused`).
    pub focused: u64,
}

fn stats(c: &ExecCounters) -> ExecStats {
    ExecStats {
        ok: c.ok.get(),
        failed: c.failed.get(),
        timed_out: c.timed_out.get(),
        dropped: c.dropped.get(),
        focused: c.focused.get(),
    }
}

struct Job {
    kind: &'static str,
    project: String,
    /// The `[[remote]]` name (validated config, not record contents).
    remote: Option<String>,
    json: String,
    /// Set with `suppress_when_focused`: run on the worker, it may skip the run.
    check: Option<Check>,
}

/// Runs the configured program for matching events; see the module docs.
pub type ExecSink = Delivered<Exec>;

/// The exec hook's formatting and IO (see [`Courier`]).
pub struct Exec {
    gate: Gate,
    workers: Workers<Job>,
    counters: Arc<ExecCounters>,
}

impl ExecSink {
    /// Validates the command and starts `max_concurrent` worker threads.
    pub fn new(cfg: ExecConfig) -> Result<Self, SinkError> {
        Self::with_held(cfg, Arc::default())
    }

    /// [`ExecSink::new`] noting the runs it skips in `held` (read by `status`).
    pub fn with_held(cfg: ExecConfig, held: Arc<HeldLog>) -> Result<Self, SinkError> {
        if cfg.command.first().is_none_or(|p| p.is_empty()) {
            return Err(SinkError::EmptyCommand);
        }
        let argv: Arc<[String]> = cfg.command.into();
        let counters = Arc::new(ExecCounters::default());
        let mut workers: Workers<Job> = Workers::new("exec");
        let timeout = cfg.timeout;
        let shared = Arc::clone(&counters);
        workers.lane(
            cfg.queue,
            cfg.max_concurrent.max(1),
            |i| format!("baton-exec-{i}"),
            move |jobs, stop: &Stop| {
                for job in jobs {
                    if stop.ended() {
                        break;
                    }
                    if job.check.as_ref().is_some_and(|c| c.holds("exec", &held)) {
                        diag::ExecFocused.emit(&shared);
                        continue;
                    }
                    run(&argv, &job, timeout, &shared, stop.ended_flag());
                }
            },
        )?;
        Ok(Delivered::with_courier(Exec {
            gate: Gate::new(cfg.filter, cfg.suppress_when_focused),
            workers,
            counters,
        }))
    }
}

impl Courier for Exec {
    type Stats = ExecStats;
    const NAME: &'static str = "exec";

    fn page(&mut self, ev: &Event, _now: Instant) {
        let project = crate::naming::project_name(ev);
        let Some(check) = self.gate.admit(ev, &project) else {
            return;
        };
        let mut json = ev.to_json();
        json.push('\n');
        let job = Job {
            kind: ev.event.as_str(),
            project,
            remote: ev.remote.clone(),
            json,
            check,
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.workers.offer(0, job)
        {
            diag::ExecDropped.emit(&self.counters);
        }
    }

    fn stats(&self) -> ExecStats {
        stats(&self.counters)
    }

    fn counters(&self) -> Arc<dyn diag::Deliveries> {
        self.counters.clone()
    }

    /// Lets the workers run what is queued until `deadline`, then ends the runs still
    /// going (their process groups: SIGTERM, SIGKILL after [`KILL_GRACE`]) and skips the
    /// rest.
    fn finish(self, deadline: Instant) -> (ExecStats, bool) {
        let Exec {
            workers, counters, ..
        } = self;
        // The workers notice within their poll interval, then give each group its grace.
        let drain = workers.close(deadline, Some(KILL_GRACE + Duration::from_millis(500)));
        if drain == Drain::Ended {
            tracing::warn!("Exec hooks still running at shutdown were ended.");
        }
        (stats(&counters), drain != Drain::Busy)
    }
}

fn run(argv: &[String], job: &Job, timeout: Duration, counters: &ExecCounters, stop: &AtomicBool) {
    let program = &argv[0];
    let mut env = vec![
        ("BATON_EVENT", job.kind),
        ("BATON_PROJECT", job.project.as_str()),
    ];
    if let Some(r) = &job.remote {
        env.push(("BATON_REMOTE", r));
    }
    let wiring = Wiring {
        stdin: Stdio::piped(),
        stdout: Stdio::null(),
        stderr: Stdio::inherit(),
    };
    let mut child = match crate::child::start(argv, &env, wiring) {
        Ok(c) => c,
        Err(e) => {
            diag::ExecCannotStart { program, error: &e }.emit(counters);
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
    match wait_for(&mut child, Instant::now() + timeout, Some(stop)) {
        Ok(Some(status)) if status.success() => {
            diag::ExecSucceeded.emit(counters);
        }
        Ok(Some(status)) => {
            diag::ExecFailed {
                program,
                status: &status,
            }
            .emit(counters);
        }
        Ok(None) if stop.load(Ordering::Acquire) => {
            end(&mut child);
            diag::ExecEndedAtShutdown { program }.emit(counters);
        }
        Ok(None) => {
            end(&mut child);
            diag::ExecTimedOut {
                program,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }
            .emit(counters);
        }
        Err(e) => {
            end(&mut child);
            diag::ExecWaitFailed { program, error: &e }.emit(counters);
        }
    }
}

/// Ends a run and its process group: SIGTERM to the group, SIGKILL after
/// [`KILL_GRACE`] to whatever is left of it, and the leader reaped.
fn end(child: &mut Child) {
    let _ = end_group(child, KILL_GRACE, Rest::Grace);
}

/// `on_event = ["program", "arg"]`, or a table with `command` and limits.
#[derive(Debug, Default)]
pub struct RawExec {
    pub command: Vec<String>,
    pub timeout: Option<String>,
    pub concurrency: Option<usize>,
    pub events: Option<Vec<String>>,
    pub suppress_when_focused: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExecTable {
    command: Vec<String>,
    timeout: Option<String>,
    concurrency: Option<usize>,
    events: Option<Vec<String>>,
    suppress_when_focused: Option<bool>,
}

impl<'de> Deserialize<'de> for RawExec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Hand-written rather than `untagged`, whose error would not name a bad key.
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawExec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an argv array [\"program\", \"arg\", …] or a table with `command`")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<RawExec, A::Error> {
                let command =
                    Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(RawExec {
                    command,
                    ..RawExec::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawExec, A::Error> {
                let t =
                    RawExecTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RawExec {
                    command: t.command,
                    timeout: t.timeout,
                    concurrency: t.concurrency,
                    events: t.events,
                    suppress_when_focused: t.suppress_when_focused,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// The `on_event` section: off when absent.
impl SinkKind for Exec {
    type Raw = RawExec;
    type Config = Option<ExecConfig>;

    fn parse(x: RawExec, c: &mut Option<ExecConfig>, _: &Sinks) -> Result<(), Bad> {
        check_argv("on_event", &x.command)?;
        let mut e = ExecConfig::new(x.command);
        if let Some(ms) = duration("on_event.timeout", &x.timeout, true)? {
            e.timeout = Duration::from_millis(ms);
        }
        if let Some(n) = x.concurrency {
            if n == 0 {
                return Err((
                    "on_event.concurrency".to_owned(),
                    "must be at least 1".to_owned(),
                ));
            }
            e.max_concurrent = n;
        }
        if let Some(ev) = x.events {
            e.filter.kinds = parse_kinds(&ev).map_err(|e| ("on_event.events".to_owned(), e))?;
        }
        e.suppress_when_focused = x.suppress_when_focused.unwrap_or(false);
        *c = Some(e);
        Ok(())
    }

    fn write(c: &Option<ExecConfig>, o: &mut String) {
        match c {
            Some(e) => {
                let _ = writeln!(
                    o,
                    "# Exec hook: run this program (no shell) with each matching event's JSON on stdin.\n\
                     [on_event]\n\
                     command = {}\n\
                     # A run taking longer is killed.\n\
                     timeout = {}\n\
                     # Runs at once.\n\
                     concurrency = {}\n\
                     # Which events run it (main conversations only).\n\
                     events = {}\n\
                     # No run while the session is in front of you (as desktop's).\n\
                     suppress_when_focused = {}\n",
                    toml_list(&e.command),
                    toml_str(&fmt_duration(ms_of(e.timeout))),
                    e.max_concurrent,
                    toml_kinds(&e.filter.kinds),
                    e.suppress_when_focused
                );
            }
            None => o.push_str(
                "# Exec hook (off): on_event = [\"program\", \"arg\"] runs the program with each\n\
                 # event's JSON on stdin; or an [on_event] table with command, timeout, concurrency,\n\
                 # events, suppress_when_focused.\n\n",
            ),
        }
    }

    fn build(c: &Option<ExecConfig>, board: &Board) -> Result<Vec<ExecSink>, SinkError> {
        c.iter()
            .map(|cfg| ExecSink::with_held(cfg.clone(), board.held.clone()))
            .collect()
    }
}
