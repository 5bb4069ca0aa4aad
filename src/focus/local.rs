//! The agent's process as the liveness check finds it, and what its environment says
//! about where it is shown (tmux, WezTerm, kitty). Only processes of this user are read.

use crate::model::ProviderKind;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Most of a transcript read to find the directory its session started in.
const HEAD_BYTES: u64 = 256 * 1024;
/// Longest environment read from `/proc/PID/environ`.
const ENV_BYTES: u64 = 256 * 1024;

/// The agent's process and what it runs in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAgent {
    pub pid: u32,
    pub cwd: Option<PathBuf>,
    /// `TMUX`: socket path, server pid, session index.
    pub tmux: Option<String>,
    /// `TMUX_PANE`: `%N`.
    pub tmux_pane: Option<String>,
    pub wezterm_pane: Option<String>,
    pub kitty_window: Option<String>,
    pub kitty_listen_on: Option<String>,
}

/// The directory the session at `path` started in, as its projector reads it from the
/// transcript's first records.
pub fn start_dir(provider: ProviderKind, path: &Path) -> Option<PathBuf> {
    let f = fs::File::open(path).ok()?;
    let mut r = BufReader::new(f.take(HEAD_BYTES));
    let mut p = crate::provider::projector_for(provider, path);
    let mut out = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).ok()? == 0 || !line.ends_with(b"\n") {
            return None;
        }
        let body = crate::provider::strip_nul(line.trim_ascii_end());
        if body.is_empty() {
            continue;
        }
        out.clear();
        let _ = p.project(body, &mut out);
        for o in &out {
            if let crate::provider::ObsKind::StartDir(d) = &o.kind {
                return Some(PathBuf::from(d));
            }
        }
    }
}

/// Whether `/proc/PID` belongs to this process's user.
fn same_user(pid: u32) -> bool {
    let mine = fs::metadata("/proc/self").map(|m| m.uid()).ok();
    let theirs = fs::metadata(format!("/proc/{pid}")).map(|m| m.uid()).ok();
    mine.is_some() && mine == theirs
}

/// The environment of process `pid`, if it is this user's.
pub fn environ(pid: u32) -> Option<Vec<(String, String)>> {
    if !same_user(pid) {
        return None;
    }
    let mut raw = Vec::new();
    fs::File::open(format!("/proc/{pid}/environ"))
        .ok()?
        .take(ENV_BYTES)
        .read_to_end(&mut raw)
        .ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter_map(|kv| {
                let kv = std::str::from_utf8(kv).ok()?;
                let (k, v) = kv.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect(),
    )
}

/// The parent of `pid` (`/proc/PID/stat`, the field after the parenthesised name).
pub fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `ancestor` is `pid` or one of its ancestors.
pub fn is_ancestor(ancestor: u32, pid: u32) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if p == ancestor {
            return true;
        }
        match parent(p) {
            Some(q) if q != p && q != 0 => p = q,
            _ => return false,
        }
    }
    false
}

/// The agent of the session at `path`, with what its environment says.
pub fn find(provider: ProviderKind, path: &Path) -> Option<LocalAgent> {
    // A writer that holds the file open is found by the file, not by where it runs.
    let cwd = match provider.descriptor().writer() {
        Some(crate::provider::Writer::HoldsOpen) => None,
        _ => start_dir(provider, path),
    };
    // The agent's own registry (Claude Code's `sessions/<pid>.json`) names its process
    // and its pane: the first choice; the liveness rule's search is the fallback.
    let listed = registry_entry(path);
    let pid = match &listed {
        Some(l) => l.pid,
        None => crate::process::writer_pid(provider, path, cwd.as_deref())?,
    };
    let env = environ(pid)?;
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let listed_pane = listed
        .and_then(|l| l.tmux)
        .and_then(|t| pane_of(&t).map(str::to_owned));
    Some(LocalAgent {
        pid,
        cwd,
        tmux: get("TMUX"),
        tmux_pane: listed_pane.or_else(|| get("TMUX_PANE")),
        wezterm_pane: get("WEZTERM_PANE").filter(|p| is_number(p)),
        kitty_window: get("KITTY_WINDOW_ID").filter(|p| is_number(p)),
        kitty_listen_on: get("KITTY_LISTEN_ON"),
    })
}

/// The live registry entry of the session at `path` (named by its file stem), if its
/// process still lives.
fn registry_entry(path: &Path) -> Option<crate::process::Live> {
    let session = path.file_stem()?.to_str()?;
    let live = crate::process::index().lock().ok()?.get(session).cloned()?;
    crate::process::same_process(live.pid, live.started.as_deref()).then_some(live)
}

/// The pane id (`%N`) of a registry `tmux` field (`session:@window.%pane`).
pub fn pane_of(tmux: &str) -> Option<&str> {
    let pane = tmux.rsplit_once('.').map_or(tmux, |(_, p)| p);
    pane.strip_prefix('%')
        .filter(|d| is_number(d))
        .map(|_| pane)
}

pub fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_pane() {
        assert_eq!(pane_of("t1:@0.%0"), Some("%0"));
        assert_eq!(pane_of("my.session:@3.%12"), Some("%12"));
        assert_eq!(pane_of("t1:@0"), None);
        assert_eq!(pane_of("t1:@0.%x; rm -rf"), None);
    }

    #[test]
    fn our_own_environment_and_ancestry() {
        let me = std::process::id();
        assert!(environ(me).is_some_and(|e| !e.is_empty()));
        let parent = parent(me).expect("has a parent");
        assert!(is_ancestor(parent, me));
        assert!(is_ancestor(me, me));
        assert!(!is_ancestor(me, parent));
    }
}
