//! The agents' processes on this machine, as `/proc` and the registries say: who writes
//! a session ([`writer_pid`], by its agent's [`Writer`] rule), whether a pid is still the
//! process that registered ([`same_process`]), and the index of live registry entries
//! ([`index`]) that `daemon/registry.rs` fills. Asked by the liveness sweep
//! (`daemon/liveness.rs`) and by `focus` (a click, "quiet while you are looking"); all
//! `/proc` reading is here. Only this user's processes are looked at.

use crate::model::ProviderKind;
use crate::provider::Writer;
use crate::provider::descriptor::WRITER_ARGS;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The process table's root.
pub const PROC: &str = "/proc";

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

/// The processes of user `uid` under `proc`: each one's name (its pid) and directory.
/// Entries that vanish or cannot be read midway are skipped.
fn processes_of(
    proc: &Path,
    uid: u32,
) -> std::io::Result<impl Iterator<Item = (OsString, PathBuf)>> {
    Ok(fs::read_dir(proc)?.filter_map(move |entry| {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let dir = entry.path();
        let own = fs::metadata(&dir).map(|m| m.uid()).ok() == Some(uid);
        own.then_some((name, dir))
    }))
}

/// Looks through the processes of user `uid` under `proc` for what `want` asks.
/// Processes that vanish or cannot be read midway are skipped.
pub fn scan(proc: &Path, uid: u32, want: &Wanted) -> std::io::Result<Found> {
    let mut found = Found::default();
    // The agents asked about: few, so each process's directory is looked up per agent.
    let mut kinds: Vec<ProviderKind> = want.cwds.iter().map(|(k, _)| *k).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for (name, dir) in processes_of(proc, uid)? {
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
        for (name, dir) in processes_of(proc, uid)? {
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
pub fn own_uid() -> Option<u32> {
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

/// What the writer of a session must match, if its agent can be judged.
pub enum Need {
    Open(PathBuf),
    RunsIn(ProviderKind, PathBuf),
}

/// What the writer of the session at `path` (started in `cwd`) must match, if its
/// agent has a rule.
pub fn need_for(kind: ProviderKind, path: &Path, cwd: Option<&Path>) -> Option<Need> {
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

/// A live registry entry, for click-to-focus (its `tmux` pane) and for liveness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    pub pid: u32,
    /// `procStart`, to tell the process from a later one with the same pid.
    pub started: Option<String>,
    pub tmux: Option<String>,
}

/// The live registry entries by session id, shared with the focus code and the
/// liveness sweep.
pub type Index = Arc<Mutex<HashMap<String, Live>>>;

/// The one index of this process: the reader fills it; a click asks it for the
/// session's process and tmux pane first, and the liveness sweep for whether the
/// session's own process still runs.
pub fn index() -> Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    Arc::clone(INDEX.get_or_init(Default::default))
}

/// Whether the registry lists `session` with a live process of its own.
pub fn listed_alive(session: &str) -> bool {
    let live = index().lock().ok().and_then(|ix| ix.get(session).cloned());
    live.is_some_and(|l| same_process(l.pid, l.started.as_deref()))
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
