//! Is anything still writing a working session? A process that dies mid-turn (crash,
//! kill, reboot, closed terminal) writes nothing more, so without this its session
//! would show as working forever.
//!
//! Every sweep, each main session that is working and has been quiet for
//! `liveness_after` is looked for in `/proc`, among this user's processes only, as its
//! agent's descriptor says who writes it ([`Writer`]):
//! - [`Writer::HoldsOpen`] (Codex): some process must hold the file open for writing
//!   (`/proc/PID/fd`, `/proc/PID/fdinfo`); readers (baton itself, `tail -f`, a pager)
//!   do not count.
//! - [`Writer::RunsIn`] (Claude Code): some process the agent recognises
//!   ([`crate::provider::Agent::is_writer_process`]) must run in the directory the session
//!   started in (`/proc/PID/cwd` against the first record's `cwd`).
//! - Agents with no writer rule are never judged.
//!
//! With no live writer, the reducer ends the turn (`writer_gone`). What this cannot see:
//! writers on other hosts or in other PID namespaces (containers), and an agent's
//! process of *another* session in the same directory, which keeps a dead one working.

use crate::clock::Now;
use crate::model::Event;
use crate::process::{Found, Need, PROC, Procs, Wanted, need_for, own_uid, scan};
use crate::reduce::{Quiet, Reducer};
use std::path::Path;
use std::sync::Arc;

// Moved to `crate::process` (below `focus`, which asks them too); named here for old paths.
pub use crate::process::{same_process, writer_pid};

fn need(q: &Quiet) -> Option<Need> {
    need_for(
        q.key.provider,
        Path::new(&*q.path),
        q.cwd.as_deref().map(Path::new),
    )
}

/// One sweep's check: ends the turns of quiet working sessions with no live writer.
/// Returns the files of the sessions it asked about (parked ones were brought back to
/// be asked about: the caller parks those of idle files again).
pub fn sweep(
    after_ms: u64,
    reducer: &mut Reducer,
    now: Now,
    out: &mut Vec<Event>,
) -> Vec<Arc<str>> {
    sweep_in(None, after_ms, reducer, now, out)
}

/// This user's processes, read now ([`Procs::read`] on the real process table), or
/// `None` when `/proc` cannot be read (the liveness check is then off).
pub fn read_procs() -> Option<Procs> {
    let uid = own_uid()?;
    Procs::read(Path::new(PROC), uid)
        .inspect_err(|e| tracing::debug!(error = %e, "Cannot list processes; liveness not judged."))
        .ok()
}

/// [`sweep`] against processes read beforehand ([`read_procs`]): `scan` reads them while
/// it reads its files, so judging takes no pass over `/proc` of its own.
pub fn sweep_with(procs: &Procs, after_ms: u64, reducer: &mut Reducer, now: Now) {
    sweep_in(Some(procs), after_ms, reducer, now, &mut Vec::new());
}

fn sweep_in(
    procs: Option<&Procs>,
    after_ms: u64,
    reducer: &mut Reducer,
    now: Now,
    out: &mut Vec<Event>,
) -> Vec<Arc<str>> {
    let mut quiet = reducer.quiet_working(now, after_ms);
    let asked = quiet.iter().map(|q| q.path.clone()).collect();
    // A session Claude Code's registry lists with a live process of its own is alive,
    // wherever that process runs.
    quiet.retain(|q| !crate::process::listed_alive(&q.key.session));
    if quiet.is_empty() {
        return asked;
    }
    match procs {
        Some(procs) => judge(
            quiet,
            |want| Some(procs.find(want)),
            after_ms,
            reducer,
            now,
            out,
        ),
        None => {
            if let Some(uid) = own_uid() {
                check(Path::new(PROC), uid, after_ms, quiet, reducer, now, out);
            }
        }
    }
    asked
}

/// [`sweep`] on a given process table (tests use the real one with their own
/// processes), for the sessions in `quiet`.
pub fn check(
    proc: &Path,
    uid: u32,
    after_ms: u64,
    quiet: Vec<Quiet>,
    reducer: &mut Reducer,
    now: Now,
    out: &mut Vec<Event>,
) {
    let look = |want: &Wanted| match scan(proc, uid, want) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::debug!(error = %e, "Cannot list processes; liveness not judged this sweep.");
            None
        }
    };
    judge(quiet, look, after_ms, reducer, now, out);
}

/// Ends the turns of the `quiet` sessions whose writer `look` does not find.
fn judge(
    quiet: Vec<Quiet>,
    look: impl FnOnce(&Wanted) -> Option<Found>,
    after_ms: u64,
    reducer: &mut Reducer,
    now: Now,
    out: &mut Vec<Event>,
) {
    let needs: Vec<(Quiet, Need)> = quiet
        .into_iter()
        .filter_map(|q| need(&q).map(|n| (q, n)))
        .collect();
    if needs.is_empty() {
        return;
    }
    let mut want = Wanted::default();
    for (_, n) in &needs {
        match n {
            Need::Open(p) => want.open.insert(p.clone()),
            Need::RunsIn(k, d) => want.cwds.insert((*k, d.clone())),
        };
    }
    let Some(found) = look(&want) else { return };
    for (q, n) in needs {
        let alive = match &n {
            Need::Open(p) => found.open.contains(p),
            Need::RunsIn(k, d) => found.cwds.contains(&(*k, d.clone())),
        };
        if !alive {
            tracing::info!(session = %q.key.session, path = %q.path, "No live writer; the turn ends as interrupted.");
            reducer.writer_gone(&q.key, now, after_ms, out);
        }
    }
}
