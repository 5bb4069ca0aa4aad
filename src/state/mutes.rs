//! `mutes.json` in the state directory: the mutes set with `baton mute`, so they outlive
//! a restart. Written whole to a temporary file, fsync'ed and renamed over the old one,
//! so a crash leaves the old list or the new, never half of one. Shared between the
//! socket (which sets them) and the desktop sink (which reads them); one lock guards it.
//! A mute's type and the reading of a `baton mute` target are here, below both.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

const FILE: &str = "mutes.json";
const TMP: &str = "mutes.json.tmp";
/// More mutes than this are refused: the list is read on every page.
pub const MAX_MUTES: usize = 256;
/// Longest mute target (a project name or a session id).
pub const MAX_TARGET: usize = 256;
/// Most sessions one mute of a longer project name covers.
const MAX_SESSIONS: usize = 256;

/// One mute set with `baton mute`: a project name or a session id, until a time or for
/// good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mute {
    pub target: String,
    /// Unix ms; `None`: until `baton unmute`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
    /// The sessions a longer project name (`src/my-web-app`, as `status` shows it when
    /// two projects share a name) stood for when the mute was set: a page names only
    /// the short one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<String>,
    /// `baton mute --branch`: the mute covers every page of a session on this git
    /// branch (`target` then names the branch, for people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Mute {
    /// Whether it still holds at `now` (Unix ms).
    pub fn live(&self, now: i64) -> bool {
        self.until_ms.is_none_or(|u| now < u)
    }

    /// Whether it silences the page of `project` / `session`.
    pub fn covers(&self, project: &str, session: &str) -> bool {
        self.target == project
            || self.target == session
            || self.sessions.iter().any(|s| s == session)
    }

    /// Whether it silences the pages of a session on `branch` (`mute --branch`).
    pub fn covers_branch(&self, branch: Option<&str>) -> bool {
        self.branch.is_some() && self.branch.as_deref() == branch
    }
}

/// What a `baton mute` target names among the sessions the daemon knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The target as the mute keeps it: a session id, or a project as `status` spells it.
    pub target: String,
    /// For a longer project name, the sessions it stands for (see [`Mute::sessions`]).
    pub sessions: Vec<String>,
    /// How many sessions it names now (0: none; the mute is kept for later ones).
    pub matched: usize,
}

/// One session as `status` names it: its id, its project and its longer project name.
pub struct Named<'a> {
    pub session: &'a str,
    pub project: &'a str,
    pub project_long: &'a str,
}

/// Reads `target` as `status` would: a session id, else a project name (`my-web-app`),
/// else a longer one (`src/my-web-app`), ignoring case; `project_only` (`--project`)
/// skips session ids. Pure.
pub fn resolve<'a>(target: &str, project_only: bool, known: &[Named<'a>]) -> Resolved {
    let target = target.trim();
    let lower = target.to_lowercase();
    let ids = |pick: &dyn Fn(&Named<'_>) -> bool| {
        let mut out: Vec<String> = Vec::new();
        for n in known.iter().filter(|n| pick(n)) {
            if !out.iter().any(|x| x == n.session) {
                out.push(n.session.to_owned());
            }
        }
        out
    };
    let spelled = |pick: &dyn Fn(&Named<'a>) -> Option<&'a str>| {
        known.iter().find_map(pick).unwrap_or(target).to_owned()
    };
    let by_session = if project_only {
        Vec::new()
    } else {
        ids(&|n| n.session == target)
    };
    if !by_session.is_empty() {
        return Resolved {
            target: target.to_owned(),
            sessions: Vec::new(),
            matched: by_session.len(),
        };
    }
    let by_project = ids(&|n| n.project.to_lowercase() == lower);
    if !by_project.is_empty() {
        return Resolved {
            target: spelled(&|n| (n.project.to_lowercase() == lower).then_some(n.project)),
            sessions: Vec::new(),
            matched: by_project.len(),
        };
    }
    let by_long = ids(&|n| n.project_long.to_lowercase() == lower);
    Resolved {
        target: spelled(&|n| (n.project_long.to_lowercase() == lower).then_some(n.project_long)),
        matched: by_long.len(),
        sessions: by_long,
    }
}

/// The mutes, in memory and (when it has a directory) on disk.
#[derive(Debug, Default)]
pub struct Mutes {
    dir: Option<PathBuf>,
    list: Mutex<Vec<Mute>>,
}

/// Why a mute could not be set.
#[derive(Debug, thiserror::Error)]
pub enum MuteError {
    #[error("the mute target is empty or longer than {MAX_TARGET} characters")]
    BadTarget,
    #[error("too many mutes ({MAX_MUTES}); unmute some first")]
    Full,
    #[error("cannot save {}: {source}", path.display())]
    Save {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Mutes {
    /// Mutes kept in memory only (tests, a daemon without a state directory).
    pub fn in_memory() -> Self {
        Mutes::default()
    }

    /// Loads `dir`'s mutes; a missing file is none, an unreadable one is logged and none.
    pub fn load(dir: &Path) -> Self {
        let path = dir.join(FILE);
        let mut list: Vec<Mute> = super::load_json(&path, "mutes file", "starting with none");
        list.retain(|m| !m.target.is_empty() && m.target.len() <= MAX_TARGET);
        list.truncate(MAX_MUTES);
        for m in &mut list {
            m.sessions.truncate(MAX_SESSIONS);
        }
        Mutes {
            dir: Some(dir.to_path_buf()),
            list: Mutex::new(list),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Mute>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The mutes live at `now` (Unix ms); expired ones are forgotten.
    pub fn live(&self, now: i64) -> Vec<Mute> {
        let mut g = self.lock();
        g.retain(|m| m.live(now));
        g.clone()
    }

    /// Mutes `target` until `until_ms` (or for good), replacing an earlier mute of it.
    pub fn set(
        &self,
        target: &str,
        until_ms: Option<i64>,
        now: i64,
    ) -> Result<Vec<Mute>, MuteError> {
        self.set_covering(target, Vec::new(), until_ms, now)
    }

    /// [`Mutes::set`], the mute also covering `sessions` (what a longer project name
    /// stood for when it was set; see [`Mute::sessions`]).
    pub fn set_covering(
        &self,
        target: &str,
        mut sessions: Vec<String>,
        until_ms: Option<i64>,
        now: i64,
    ) -> Result<Vec<Mute>, MuteError> {
        sessions.truncate(MAX_SESSIONS);
        let target = target.trim();
        if target.is_empty() || target.len() > MAX_TARGET || target.chars().any(char::is_control) {
            return Err(MuteError::BadTarget);
        }
        let mut g = self.lock();
        g.retain(|m| m.live(now) && (m.target != target || m.branch.is_some()));
        if g.len() >= MAX_MUTES {
            return Err(MuteError::Full);
        }
        g.push(Mute {
            target: target.to_owned(),
            until_ms,
            sessions,
            branch: None,
        });
        self.save(&g)?;
        Ok(g.clone())
    }

    /// Mutes every page of a session on git branch `branch` until `until_ms` (or for
    /// good), replacing an earlier mute of it.
    pub fn set_branch(
        &self,
        branch: &str,
        until_ms: Option<i64>,
        now: i64,
    ) -> Result<Vec<Mute>, MuteError> {
        let branch = branch.trim();
        if branch.is_empty() || branch.len() > MAX_TARGET || branch.chars().any(char::is_control) {
            return Err(MuteError::BadTarget);
        }
        let mut g = self.lock();
        g.retain(|m| m.live(now) && m.branch.as_deref() != Some(branch));
        if g.len() >= MAX_MUTES {
            return Err(MuteError::Full);
        }
        g.push(Mute {
            target: branch.to_owned(),
            until_ms,
            sessions: Vec::new(),
            branch: Some(branch.to_owned()),
        });
        self.save(&g)?;
        Ok(g.clone())
    }

    /// Lifts the mute of `target`; true if there was one.
    pub fn unset(&self, target: &str, now: i64) -> Result<bool, MuteError> {
        let mut g = self.lock();
        let before = g.len();
        let target = target.trim().to_lowercase();
        g.retain(|m| m.target.to_lowercase() != target);
        let had = g.len() != before;
        g.retain(|m| m.live(now));
        self.save(&g)?;
        Ok(had)
    }

    fn save(&self, list: &[Mute]) -> Result<(), MuteError> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let bytes = serde_json::to_string(list).unwrap_or_default();
        super::store::write_atomic(dir, FILE, TMP, bytes.as_bytes()).map_err(|source| {
            MuteError::Save {
                path: dir.join(FILE),
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;

    #[test]
    fn mutes_survive_a_reload_and_expire() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mutes::load(dir.path());
        m.set("web", Some(2_000), 1_000).unwrap();
        m.set("api", None, 1_000).unwrap();
        m.set("web", Some(5_000), 1_000).unwrap();
        assert!(m.set(" ", None, 1_000).is_err());
        let again = Mutes::load(dir.path());
        let live = again.live(3_000);
        assert_eq!(live.len(), 2);
        assert_eq!(
            live.iter().find(|m| m.target == "web").unwrap().until_ms,
            Some(5_000)
        );
        assert_eq!(again.live(6_000).len(), 1);
        assert!(again.unset("api", 6_000).unwrap());
        assert!(!again.unset("api", 6_000).unwrap());
        assert!(Mutes::load(dir.path()).live(6_000).is_empty());
        fs::write(dir.path().join(FILE), b"\0garbage").unwrap();
        assert!(Mutes::load(dir.path()).live(0).is_empty());
    }
}
