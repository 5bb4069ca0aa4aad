//! Is anything still writing a working session? A process that dies mid-turn (crash,
//! kill, reboot, closed terminal) writes nothing more, so without this its session
//! would show as working forever.
//!
//! Every sweep, each main session that is working and has been quiet for
//! `liveness_after` is looked for in `/proc`, among this user's processes only:
//! - Codex keeps its rollout open while the session lives: some process must hold the
//!   file open for writing (`/proc/PID/fd`, `/proc/PID/fdinfo`); readers (baton itself,
//!   `tail -f`, a pager) do not count.
//! - Claude Code does not keep its transcript open: some Claude Code process must run in
//!   the directory the session started in (`/proc/PID/cwd` against the first record's
//!   `cwd`). A Claude Code process is one whose executable or first two arguments are
//!   named `claude`, whose executable lies under a `claude/versions/` directory (the
//!   native installer), or whose script is the npm package's (`@anthropic-ai/claude-code`).
//! - Other providers are never judged.
//!
//! With no live writer, the reducer ends the turn (`writer_gone`). What this cannot see:
//! writers on other hosts or in other PID namespaces (containers), and a Claude Code
//! process of *another* session in the same directory, which keeps a dead one working.

use crate::clock::Now;
use crate::model::{Event, ProviderKind};
use crate::reduce::{Quiet, Reducer};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The process table's root.
const PROC: &str = "/proc";

/// Arguments looked at to tell a Claude Code process (`node cli.js`, `claude`…).
const ARGS_LOOKED_AT: usize = 2;

/// What the writers of the sessions asked about need to match.
#[derive(Debug, Default)]
pub struct Wanted {
    /// Files some process must hold open (Codex rollouts), canonical.
    pub open: HashSet<PathBuf>,
    /// Directories some Claude Code process must run in.
    pub claude_cwds: HashSet<PathBuf>,
}

/// What was found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    pub open: HashSet<PathBuf>,
    pub claude_cwds: HashSet<PathBuf>,
    /// The first process found for each file or directory, for acting on a click.
    pub pids: HashMap<PathBuf, u32>,
}

/// Whether `exe` (the process's executable) and `argv` make a Claude Code process.
pub fn is_claude(exe: Option<&Path>, argv: &[OsString]) -> bool {
    let named = |p: &Path| p.file_name().is_some_and(|n| n == "claude");
    if let Some(exe) = exe
        && (named(exe) || exe.to_string_lossy().contains("/claude/versions/"))
    {
        return true;
    }
    argv.iter().take(ARGS_LOOKED_AT).any(|a| {
        let p = Path::new(a);
        named(p) || a.to_string_lossy().contains("@anthropic-ai/claude-code/")
    })
}

fn argv(pid_dir: &Path) -> Vec<OsString> {
    use std::os::unix::ffi::OsStringExt;
    let Ok(raw) = fs::read(pid_dir.join("cmdline")) else {
        return Vec::new();
    };
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .take(ARGS_LOOKED_AT)
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
        if !want.claude_cwds.is_empty()
            && let Ok(cwd) = fs::read_link(dir.join("cwd"))
            && want.claude_cwds.contains(&cwd)
            && !found.claude_cwds.contains(&cwd)
            && is_claude(fs::read_link(dir.join("exe")).ok().as_deref(), &argv(&dir))
        {
            found.pids.insert(cwd.clone(), pid_of(&name));
            found.claude_cwds.insert(cwd);
        }
        if want.open.len() > found.open.len()
            && let Ok(fds) = fs::read_dir(dir.join("fd"))
        {
            for fd in fds.flatten() {
                if let Ok(target) = fs::read_link(fd.path())
                    && want.open.contains(&target)
                    && open_for_writing(&dir, &fd.file_name())
                {
                    found.pids.insert(target.clone(), pid_of(&name));
                    found.open.insert(target);
                }
            }
        }
    }
    Ok(found)
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
    ClaudeIn(PathBuf),
}

fn need(q: &Quiet) -> Option<Need> {
    need_for(
        q.key.provider,
        Path::new(&*q.path),
        q.cwd.as_deref().map(Path::new),
    )
}

fn need_for(provider: ProviderKind, path: &Path, cwd: Option<&Path>) -> Option<Need> {
    match provider {
        ProviderKind::Codex => fs::canonicalize(path).ok().map(Need::Open),
        ProviderKind::Claude => cwd.map(|c| Need::ClaudeIn(c.to_path_buf())),
        // No rule for these agents' processes yet: never judged.
        ProviderKind::Norma
        | ProviderKind::Sgme
        | ProviderKind::Cursor
        | ProviderKind::Copilot
        | ProviderKind::Pi => None,
    }
}

/// One sweep's check: ends the turns of quiet working sessions with no live writer.
pub fn sweep(after_ms: u64, reducer: &mut Reducer, now: Now, out: &mut Vec<Event>) {
    let quiet = reducer.quiet_working(now, after_ms);
    if quiet.is_empty() {
        return;
    }
    let Some(uid) = own_uid() else { return };
    check(Path::new(PROC), uid, after_ms, quiet, reducer, now, out);
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
            Need::ClaudeIn(d) => want.claude_cwds.insert(d.clone()),
        };
    }
    let found = match scan(proc, uid, &want) {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(error = %e, "Cannot list processes; liveness not judged this sweep.");
            return;
        }
    };
    for (q, n) in needs {
        let alive = match &n {
            Need::Open(p) => found.open.contains(p),
            Need::ClaudeIn(d) => found.claude_cwds.contains(d),
        };
        if !alive {
            tracing::info!(session = %q.key.session, path = %q.path, "No live writer; the turn ends as interrupted.");
            reducer.writer_gone(&q.key, now, after_ms, out);
        }
    }
}

fn pid_of(name: &std::ffi::OsStr) -> u32 {
    name.to_string_lossy().parse().unwrap_or(0)
}

/// The process writing the session at `path` (started in `cwd`) by the same rule the
/// sweep judges it, among this user's processes; `None` when there is none or the
/// provider has no rule. For acting on a click and telling whether it is in front.
pub fn writer_pid(provider: ProviderKind, path: &Path, cwd: Option<&Path>) -> Option<u32> {
    let uid = own_uid()?;
    let need = need_for(provider, path, cwd)?;
    let mut want = Wanted::default();
    let key = match need {
        Need::Open(p) => {
            want.open.insert(p.clone());
            p
        }
        Need::ClaudeIn(d) => {
            want.claude_cwds.insert(d.clone());
            d
        }
    };
    let found = scan(Path::new(PROC), uid, &want).ok()?;
    found.pids.get(&key).copied().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn tells_claude_code_processes() {
        let native = Path::new("/home/me/.local/share/claude/versions/2.1.39");
        assert!(is_claude(Some(native), &args(&["claude"])));
        assert!(is_claude(Some(native), &args(&["2.1.39"])));
        assert!(is_claude(
            Some(Path::new("/usr/bin/node")),
            &args(&["node", "/usr/local/bin/claude", "--resume"])
        ));
        assert!(is_claude(
            Some(Path::new("/usr/bin/node")),
            &args(&[
                "node",
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"
            ])
        ));
        assert!(!is_claude(
            Some(Path::new("/usr/bin/node")),
            &args(&["node", "server.js"])
        ));
        // Only the program and its script count, not a later argument.
        assert!(!is_claude(
            Some(Path::new("/usr/bin/vim")),
            &args(&["vim", "notes", "claude"])
        ));
        assert!(!is_claude(
            Some(Path::new("/usr/bin/claude-monitor")),
            &args(&["claude-monitor"])
        ));
    }
}
