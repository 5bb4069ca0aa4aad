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
use crate::model::{Event, ProviderKind};
use crate::provider::Writer;
use crate::provider::agent::WRITER_ARGS;
use crate::reduce::{Quiet, Reducer};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The process table's root.
const PROC: &str = "/proc";

/// What the writers of the sessions asked about need to match.
#[derive(Debug, Default)]
pub struct Wanted {
    /// Files some process must hold open (Codex rollouts), canonical.
    pub open: HashSet<PathBuf>,
    /// Directories some process of the agent must run in.
    pub cwds: HashSet<(ProviderKind, PathBuf)>,
}

/// What was found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    pub open: HashSet<PathBuf>,
    pub cwds: HashSet<(ProviderKind, PathBuf)>,
    /// The first process found for each file or directory, for acting on a click.
    pub pids: HashMap<PathBuf, u32>,
}

fn argv(pid_dir: &Path) -> Vec<OsString> {
    use std::os::unix::ffi::OsStringExt;
    let Ok(raw) = fs::read(pid_dir.join("cmdline")) else {
        return Vec::new();
    };
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .take(WRITER_ARGS)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// Whether descriptor `fd` of the process at `pid_dir` was opened for writing (its
/// `fdinfo` flags, octal, hold `O_WRONLY` or `O_RDWR`).
fn open_for_writing(pid_dir: &Path, fd: &std::ffi::OsStr) -> bool {
    let Ok(info) = fs::read_to_string(pid_dir.join("fdinfo").join(fd)) else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & 0o3 != 0)
}

/// Looks through the processes of user `uid` under `proc` for what `want` asks.
/// Processes that vanish or cannot be read midway are skipped.
pub fn scan(proc: &Path, uid: u32, want: &Wanted) -> std::io::Result<Found> {
    let mut found = Found::default();
    // The agents asked about: few, so each process's directory is looked up per agent.
    let mut kinds: Vec<ProviderKind> = want.cwds.iter().map(|(k, _)| *k).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for entry in fs::read_dir(proc)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        if fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        if !want.cwds.is_empty()
            && let Ok(cwd) = fs::read_link(dir.join("cwd"))
        {
            let mut process = None;
            for &kind in &kinds {
                let key = (kind, cwd.clone());
                if want.cwds.contains(&key) && !found.cwds.contains(&key) {
                    let (exe, args) = process
                        .get_or_insert_with(|| (fs::read_link(dir.join("exe")).ok(), argv(&dir)));
                    if kind.descriptor().is_writer_process(exe.as_deref(), args) {
                        found
                            .pids
                            .entry(cwd.clone())
                            .or_insert_with(|| pid_of(&name));
                        found.cwds.insert(key);
                    }
                }
            }
        }
        if want.open.len() > found.open.len()
            && let Ok(fds) = fs::read_dir(dir.join("fd"))
        {
            for fd in fds.flatten() {
                if let Ok(target) = fs::read_link(fd.path())
                    && want.open.contains(&target)
                    && open_for_writing(&dir, &fd.file_name())
                {
                    found
                        .pids
                        .entry(target.clone())
                        .or_insert_with(|| pid_of(&name));
                    found.open.insert(target);
                }
            }
        }
    }
    Ok(found)
}

/// One process of this user as a pass over `/proc` saw it: what the writer rules ask.
#[derive(Debug)]
struct Proc {
    name: std::ffi::OsString,
    cwd: Option<PathBuf>,
    exe: Option<PathBuf>,
    argv: Vec<OsString>,
    /// Open descriptors: name and target (whether one is open for writing is read
    /// only for a target asked about).
    fds: Vec<(OsString, PathBuf)>,
}

/// This user's processes, read in one pass before anyone asks about them: `scan` takes
/// it on a thread of its own while its files are read, then judges every quiet session
/// against it ([`Procs::find`]: the same answers as [`scan`] at that moment).
#[derive(Debug)]
pub struct Procs {
    root: PathBuf,
    procs: Vec<Proc>,
}

impl Procs {
    /// Reads every process of user `uid` under `proc`; processes that vanish or cannot be
    /// read midway are skipped.
    pub fn read(proc: &Path, uid: u32) -> std::io::Result<Self> {
        let mut procs = Vec::new();
        for entry in fs::read_dir(proc)? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let dir = entry.path();
            if fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
                continue;
            }
            let fds = fs::read_dir(dir.join("fd")).map_or_else(
                |_| Vec::new(),
                |fds| {
                    fds.flatten()
                        .filter_map(|fd| Some((fd.file_name(), fs::read_link(fd.path()).ok()?)))
                        .collect()
                },
            );
            procs.push(Proc {
                cwd: fs::read_link(dir.join("cwd")).ok(),
                exe: fs::read_link(dir.join("exe")).ok(),
                argv: argv(&dir),
                fds,
                name,
            });
        }
        Ok(Self {
            root: proc.to_path_buf(),
            procs,
        })
    }

    /// What [`scan`] would find for `want` among these processes.
    pub fn find(&self, want: &Wanted) -> Found {
        let mut found = Found::default();
        let mut kinds: Vec<ProviderKind> = want.cwds.iter().map(|(k, _)| *k).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for p in &self.procs {
            if let Some(cwd) = &p.cwd {
                for &kind in &kinds {
                    let key = (kind, cwd.clone());
                    if want.cwds.contains(&key)
                        && !found.cwds.contains(&key)
                        && kind
                            .descriptor()
                            .is_writer_process(p.exe.as_deref(), &p.argv)
                    {
                        found
                            .pids
                            .entry(cwd.clone())
                            .or_insert_with(|| pid_of(&p.name));
                        found.cwds.insert(key);
                    }
                }
            }
            for (fd, target) in &p.fds {
                if want.open.contains(target) && open_for_writing(&self.root.join(&p.name), fd) {
                    found
                        .pids
                        .entry(target.clone())
                        .or_insert_with(|| pid_of(&p.name));
                    found.open.insert(target.clone());
                }
            }
        }
        found
    }
}

/// This process's user, if `/proc` can be read; logs once when it cannot.
fn own_uid() -> Option<u32> {
    static UID: OnceLock<Option<u32>> = OnceLock::new();
    *UID.get_or_init(|| {
        let proc = Path::new(PROC);
        match fs::metadata(proc.join("self"))
            .map(|m| m.uid())
            .and_then(|uid| fs::read_dir(proc.join("self/fd")).map(|_| uid))
        {
            Ok(uid) => Some(uid),
            Err(e) => {
                tracing::warn!(error = %e, "Cannot read /proc: the liveness check is off (sessions whose agent died stay working).");
                None
            }
        }
    })
}

/// What a [`Quiet`] session's writer must match, if its provider can be judged.
enum Need {
    Open(PathBuf),
    RunsIn(ProviderKind, PathBuf),
}

fn need(q: &Quiet) -> Option<Need> {
    need_for(
        q.key.provider,
        Path::new(&*q.path),
        q.cwd.as_deref().map(Path::new),
    )
}

fn need_for(kind: ProviderKind, path: &Path, cwd: Option<&Path>) -> Option<Need> {
    match kind.descriptor().writer()? {
        Writer::HoldsOpen => fs::canonicalize(path).ok().map(Need::Open),
        Writer::RunsIn => cwd.map(|c| Need::RunsIn(kind, c.to_path_buf())),
    }
}

fn pid_of(name: &std::ffi::OsStr) -> u32 {
    name.to_string_lossy().parse().unwrap_or(0)
}

/// The process writing the session at `path` (started in `cwd`) by the same rule the
/// sweep judges it, among this user's processes; `None` when there is none or the
/// agent has no rule. For acting on a click and telling whether it is in front.
pub fn writer_pid(provider: ProviderKind, path: &Path, cwd: Option<&Path>) -> Option<u32> {
    let uid = own_uid()?;
    let mut want = Wanted::default();
    let key = match need_for(provider, path, cwd)? {
        Need::Open(p) => {
            want.open.insert(p.clone());
            p
        }
        Need::RunsIn(k, d) => {
            want.cwds.insert((k, d.clone()));
            d
        }
    };
    let found = scan(Path::new(PROC), uid, &want).ok()?;
    found.pids.get(&key).copied().filter(|p| *p > 0)
}

/// One sweep's check: ends the turns of quiet working sessions with no live writer.
pub fn sweep(after_ms: u64, reducer: &mut Reducer, now: Now, out: &mut Vec<Event>) {
    sweep_in(None, after_ms, reducer, now, out);
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
) {
    let mut quiet = reducer.quiet_working(now, after_ms);
    // A session Claude Code's registry lists with a live process of its own is alive,
    // wherever that process runs.
    quiet.retain(|q| !super::registry::listed_alive(&q.key.session));
    if quiet.is_empty() {
        return;
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
            let Some(uid) = own_uid() else { return };
            check(Path::new(PROC), uid, after_ms, quiet, reducer, now, out);
        }
    }
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

/// Whether process `pid` is alive and, when `started` is given (Claude Code's registry
/// `procStart`), is the process that wrote it: `started` equals its start time,
/// `/proc/<pid>/stat` field 22 (clock ticks since boot). A pid reused by another
/// process has another start time.
pub fn same_process(pid: u32, started: Option<&str>) -> bool {
    same_process_in(Path::new(PROC), pid, started)
}

fn same_process_in(proc: &Path, pid: u32, started: Option<&str>) -> bool {
    if pid == 0 {
        return false;
    }
    let Ok(stat) = fs::read_to_string(proc.join(pid.to_string()).join("stat")) else {
        return false;
    };
    // The command name (field 2) is in parentheses and may hold spaces or `)`: count
    // fields from after the last `)`, where field 3 begins.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return false;
    };
    let mut fields = rest.split_ascii_whitespace();
    // Field 3 is the state: a zombie has exited.
    if fields.next() == Some("Z") {
        return false;
    }
    match started {
        None => true,
        // Fields 4..=21 lie between the state and the start time.
        Some(s) => fields.nth(18) == Some(s.trim()),
    }
}

#[cfg(test)]
mod same_process_tests {
    use super::*;

    #[test]
    fn this_process_by_its_start_time() {
        let me = std::process::id();
        let stat = fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let start = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_ascii_whitespace()
            .nth(19)
            .unwrap()
            .to_owned();
        assert!(same_process(me, None));
        assert!(same_process(me, Some(&start)));
        assert!(!same_process(me, Some("1")));
        assert!(!same_process(0, None));
        assert!(!same_process(u32::MAX, None));
    }
}
