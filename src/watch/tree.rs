//! The watched tree: roots, the directories under them, their native watches, listing,
//! the poll and sweep of directories, and the rules of the live set.
//!
//! Owns: every root's state, every known directory (its mtime when last listed, whether
//! a native watch covers it), the native watcher handle, and the [`Live`] set's policy.
//! It never opens a transcript and never sees the tracked-file table: every transcript
//! it lists, every candidate path it is told about and every directory that vanished is
//! handed to a [`Visit`], which the daemon's file table implements. So the tree turns
//! hints into "look at this file", and the file table decides what that means.
//!
//! Add a directory's watch *before* listing it: a file created in between is then seen
//! by one or the other.

use super::Root;
use super::discover::{is_candidate, skip_dir};
use super::native::{Native, WatchError, Wd};
use super::poll::list_dir;
use crate::clock::wall_now;
use crate::logging::RateLimit;
use crate::model::ProviderKind;
use crate::tail::Stat;
use std::collections::{HashMap, HashSet};
use std::fs::{self, Metadata};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A directory listed less than this long after its last change is listed again on the
/// next look, whatever its mtime says (file timestamps are coarse).
const RACY_NS: i64 = 2_000_000_000;

/// The same problem is logged at most this often.
const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// A file changed this recently (monotonic ms) is live: polled every interval.
pub const LIVE_MS: i64 = 10 * 60_000;
/// A file with an open turn stays live this long after its last change.
pub const OPEN_TURN_MS: i64 = 6 * 3_600_000;
/// At most this many files are polled as live; beyond it, the sweep bounds the delay.
pub const MAX_LIVE: usize = 1024;

fn wall_ns() -> i64 {
    wall_now().saturating_mul(1_000_000)
}

/// What the tree reports to the owner of the tracked files.
pub trait Visit {
    /// True once the walk should stop (a stop request arrived during a long listing).
    fn stopped(&mut self) -> bool;
    /// A transcript candidate was listed, with its metadata (symlinks followed).
    fn listed(&mut self, path: &Path, meta: &Metadata);
    /// Stat `path`, a transcript candidate (a file root, or a path a hint named), and
    /// bring it up to date.
    fn look(&mut self, path: &Path);
    /// `dir` was re-listed: files known there but not in `seen` may be gone.
    fn unlisted(&mut self, dir: &Path, seen: &HashSet<PathBuf>);
    /// `dir` and everything under it is gone.
    fn gone(&mut self, dir: &Path);
}

/// The root a path belongs to (the deepest one containing it).
pub fn root_of(roots: &[Root], path: &Path) -> Option<usize> {
    roots
        .iter()
        .enumerate()
        .filter(|(_, r)| path.starts_with(&r.path))
        .max_by_key(|(_, r)| r.path.as_os_str().len())
        .map(|(i, _)| i)
}

// One per directory in the tree's map (38,000 at 100,000 sessions).
const _: () = assert!(size_of::<DirState>() <= 16);

struct DirState {
    mtime_ns: i64,
    /// The listing may have missed a change made within the same timestamp tick as the
    /// one it saw (the mtime was too recent when it was listed): list again next time.
    racy: bool,
    /// Its native watch, if it has one.
    wd: Option<Wd>,
}

struct RootState {
    root: Root,
    /// New directories under this root get native watches (false with `--watcher
    /// poll`, and after the watch limit was hit).
    native: bool,
    exists: bool,
    /// Where the root's path led when it was last listed, if a symlink on the way
    /// makes that differ from the path itself: checked on every poll, so a retargeted
    /// link is followed at once rather than at the next sweep (the native watch stays on
    /// the old target).
    resolved: Option<PathBuf>,
}

/// Roots and directories, with their watches.
pub struct Tree {
    roots: Vec<RootState>,
    /// Each directory's path is one allocation, shared with the native watcher's table
    /// and a sweep's list (38,000 directories at 100,000 sessions).
    dirs: HashMap<Arc<Path>, DirState>,
    /// How many known directories have no native watch (polled for new entries).
    unwatched: usize,
    native: Option<Native>,
    /// How often the OS limit on watches was hit.
    pub watch_limit_hits: u64,
    /// A directory that stays unreadable is listed again on every poll: its warning
    /// comes once a minute, with a count.
    log: RateLimit,
}

impl Tree {
    pub fn new(roots: &[Root], native: Option<Native>) -> Self {
        let roots = roots
            .iter()
            .map(|r| RootState {
                root: r.clone(),
                native: native.is_some(),
                exists: false,
                resolved: None,
            })
            .collect();
        Tree {
            roots,
            dirs: HashMap::new(),
            unwatched: 0,
            native,
            watch_limit_hits: 0,
            log: RateLimit::new(LOG_EVERY),
        }
    }

    pub fn dir_count(&self) -> usize {
        self.dirs.len()
    }

    /// The native watcher, whose events the core reads.
    pub fn native_mut(&mut self) -> Option<&mut Native> {
        self.native.as_mut()
    }

    /// Whether some directory has no native watch (so the poll must list it), or a
    /// root goes through a symlink (so the poll must check where it leads).
    pub fn needs_poll(&self) -> bool {
        self.unwatched > 0 || self.roots.iter().any(|r| r.resolved.is_some())
    }

    fn root_of(&self, path: &Path) -> Option<usize> {
        self.roots
            .iter()
            .enumerate()
            .filter(|(_, r)| path.starts_with(&r.root.path))
            .max_by_key(|(_, r)| r.root.path.as_os_str().len())
            .map(|(i, _)| i)
    }

    /// Adds every root, in order, until `v` says stop. `first`: this is the start-up
    /// walk (a missing root is logged once).
    pub fn add_roots(&mut self, first: bool, v: &mut impl Visit) {
        for i in 0..self.roots.len() {
            self.add_root(i, first, v);
            if v.stopped() {
                return;
            }
        }
    }

    fn add_root(&mut self, i: usize, first: bool, v: &mut impl Visit) {
        let path = self.roots[i].root.path.clone();
        self.roots[i].resolved = resolve_link(&path);
        match fs::metadata(&path) {
            Ok(m) if m.is_dir() => {
                self.roots[i].exists = true;
                self.scan(path, None, v);
            }
            Ok(m) if m.is_file() => {
                self.roots[i].exists = true;
                if self.roots[i].native
                    && let Some(n) = self.native.as_mut()
                    && let Err(WatchError::Limit) = n.watch(&path)
                {
                    self.limit_hit(i, &path);
                }
                self.watch_database_dir(i);
                v.look(&path);
            }
            _ => {
                // A database that does not exist yet wakes the core when it is made.
                self.watch_database_dir(i);
                if !self.roots[i].exists && first {
                    tracing::info!(path = %path.display(), "Root does not exist (yet); looked for on every sweep.");
                }
                self.roots[i].exists = false;
            }
        }
    }

    /// A database root's folder, watched (not below it): the database's writes land in
    /// its `-wal` first, and the database may be made after the start.
    fn watch_database_dir(&mut self, i: usize) {
        let path = &self.roots[i].root.path;
        let kind = self.roots[i]
            .root
            .provider
            .or_else(|| crate::provider::detect(path, b""));
        if !self.roots[i].native || kind.is_none_or(|k| k.descriptor().rows().is_none()) {
            return;
        }
        if let (Some(n), Some(dir)) = (self.native.as_mut(), path.parent())
            && let Err(WatchError::Limit) = n.watch(dir)
        {
            let dir = dir.to_path_buf();
            self.limit_hit(i, &dir);
        }
    }

    /// Adds a native watch on `dir` if its root is watched natively: its descriptor.
    fn ensure_watch(&mut self, root: usize, dir: &Arc<Path>) -> Option<Wd> {
        if !self.roots[root].native {
            return None;
        }
        let native = self.native.as_mut()?;
        match native.watch_shared(dir.clone()) {
            Ok(wd) => Some(wd),
            Err(WatchError::Limit) => {
                self.limit_hit(root, dir);
                None
            }
            Err(WatchError::Gone) => None,
            Err(WatchError::Other(e)) => {
                if let Some(repeats) = self.log.check(&format!("watch {}", dir.display())) {
                    tracing::warn!(dir = %dir.display(), error = %e, repeats, "Cannot watch directory; it is polled.");
                }
                None
            }
        }
    }

    /// The OS refused a watch for `path` under `root` (its limit is reached): the root
    /// watches nothing new from now on, and says so once, with what polling covers
    /// instead. The watches it holds stay.
    fn limit_hit(&mut self, root: usize, path: &Path) {
        self.watch_limit_hits += 1;
        if !self.roots[root].native {
            return;
        }
        self.roots[root].native = false;
        let watches = self.native.as_ref().map_or(0, Native::watches);
        tracing::warn!(
            root = %self.roots[root].root.path.display(),
            dir = %path.display(),
            watches,
            watch_limit_hits = self.watch_limit_hits,
            "The OS limit on file watches is reached ({watches} held by baton); this root \
             falls back to polling for what is not watched yet: new files and directories \
             there within --poll-interval, appends to a file idle for 10 minutes within 30 s \
             (the sweep). Raise fs.inotify.max_user_watches and restart baton to watch them \
             all."
        );
    }

    /// Lists `top` and every new directory below it, each watched *before* it is
    /// listed (a file created in between is seen by one or the other). Known
    /// subdirectories have their own checks. Every transcript listed goes to
    /// `v.listed`, and into `seen`.
    fn scan(&mut self, top: PathBuf, mut seen: Option<&mut HashSet<PathBuf>>, v: &mut impl Visit) {
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            if v.stopped() {
                return;
            }
            let Some(root) = self.root_of(&dir) else {
                continue;
            };
            if !self.dirs.contains_key(dir.as_path()) {
                let shared: Arc<Path> = Arc::from(dir.as_path());
                let wd = self.ensure_watch(root, &shared);
                if wd.is_none() {
                    self.unwatched += 1;
                }
                self.dirs.insert(
                    shared,
                    DirState {
                        mtime_ns: i64::MIN,
                        racy: true,
                        wd,
                    },
                );
            }
            // Stat before listing: a change during the listing shows on the next look.
            let mtime = match fs::metadata(&dir) {
                Ok(m) if m.is_dir() => Stat::of(&m).mtime_ns,
                _ => {
                    self.remove(&dir, v);
                    continue;
                }
            };
            let listing = match list_dir(&dir, self.roots[root].root.provider) {
                Ok(l) => l,
                Err(e) => {
                    match self.log.check(&format!("list {}", dir.display())) {
                        Some(repeats) => {
                            tracing::warn!(dir = %dir.display(), error = %e, repeats, "Cannot list directory; will retry.")
                        }
                        None => {
                            tracing::debug!(dir = %dir.display(), error = %e, "Cannot list directory.")
                        }
                    }
                    continue;
                }
            };
            if let Some(d) = self.dirs.get_mut(dir.as_path()) {
                d.mtime_ns = mtime;
                d.racy = wall_ns().saturating_sub(mtime) < RACY_NS;
            }
            for sub in listing.dirs {
                // Another root's directory is that root's business.
                if self.roots.iter().any(|r| r.root.path == sub) {
                    continue;
                }
                if !self.dirs.contains_key(sub.as_path()) {
                    stack.push(sub);
                }
            }
            for (path, meta) in listing.files {
                v.listed(&path, &meta);
                if let Some(seen) = seen.as_deref_mut() {
                    seen.insert(path);
                }
            }
        }
    }

    /// A hint named `path`, which is no tracked file: a known directory is re-listed, a
    /// transcript candidate looked at, and a new directory walked.
    pub fn look(&mut self, path: &Path, maybe_dir: bool, v: &mut impl Visit) {
        if self.dirs.contains_key(path) {
            return self.relist(path, v);
        }
        let Some(root) = self.root_of(path) else {
            return;
        };
        if is_candidate(path, self.roots[root].root.provider) {
            v.look(path);
        } else if maybe_dir
            && !skip_dir(path)
            && fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        {
            self.scan(path.to_path_buf(), None, v);
        }
    }

    /// A known directory changed: gone, or re-list it (and have `v` look at the files it
    /// listed no longer).
    fn relist(&mut self, dir: &Path, v: &mut impl Visit) {
        let mut seen = HashSet::new();
        if self.list_again(dir, Some(&mut seen), v) {
            v.unlisted(dir, &seen);
        }
    }

    /// Forgets `dir` and every directory under it; `v` looks at the files there.
    fn remove(&mut self, dir: &Path, v: &mut impl Visit) {
        let gone: Vec<Arc<Path>> = self
            .dirs
            .keys()
            .filter(|d| d.starts_with(dir))
            .cloned()
            .collect();
        for d in gone {
            let Some(state) = self.dirs.remove(&*d) else {
                continue;
            };
            match (state.wd, self.native.as_mut()) {
                (None, _) => self.unwatched -= 1,
                (Some(wd), Some(n)) => n.unwatch(&d, wd),
                (Some(_), None) => {}
            }
        }
        v.gone(dir);
        if let Some(i) = self.roots.iter().position(|r| r.root.path == dir) {
            self.roots[i].exists = false;
        }
    }

    /// Stats the directories no native watch covers and re-lists those whose entries
    /// may have changed. A missed create or delete always changes the directory's
    /// mtime, so unchanged directories need no listing.
    fn check_unwatched(&mut self, v: &mut impl Visit) {
        let changed: Vec<Arc<Path>> = self
            .dirs
            .iter()
            .filter(|(dir, d)| d.wd.is_none() && moved(dir, d))
            .map(|(dir, _)| dir.clone())
            .collect();
        for dir in changed {
            self.list_again(&dir, None, v);
        }
    }

    /// Lists `dir` again, noting what it lists in `seen` when given (without it, its
    /// files gone since are the sweep's file pass's to find), or lets it go if it is no
    /// directory now: false then.
    fn list_again(
        &mut self,
        dir: &Path,
        seen: Option<&mut HashSet<PathBuf>>,
        v: &mut impl Visit,
    ) -> bool {
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {
                self.scan(dir.to_path_buf(), seen, v);
                true
            }
            _ => {
                self.remove(dir, v);
                false
            }
        }
    }

    /// The poll's share: roots whose symlink now leads elsewhere, and the directories
    /// no native watch covers.
    pub fn poll(&mut self, v: &mut impl Visit) {
        self.follow_links(v);
        if self.unwatched > 0 {
            self.check_unwatched(v);
        }
    }

    /// A root reached through a symlink that was retargeted: forget what was under the
    /// old target (its files are looked at, so their sessions go) and list the new one,
    /// with a fresh watch.
    fn follow_links(&mut self, v: &mut impl Visit) {
        for i in 0..self.roots.len() {
            let Some(was) = &self.roots[i].resolved else {
                continue;
            };
            let path = self.roots[i].root.path.clone();
            let now = resolve_link(&path);
            if now.as_ref() == Some(was) {
                continue;
            }
            tracing::info!(root = %path.display(), "The root's symlink leads elsewhere now; listing it again.");
            self.remove(&path, v);
            self.add_root(i, false, v);
        }
    }

    /// The slow safety net's share, in steps: the missing roots now, and every known
    /// directory to check, each with [`Tree::check_dir`] when its turn comes (a sweep of
    /// 100,000 sessions in one go held the core, and every event, for most of a second).
    /// The list holds the tree's own shared paths, not copies.
    pub fn sweep_start(&mut self, v: &mut impl Visit) -> Vec<Arc<Path>> {
        for i in 0..self.roots.len() {
            let path = &self.roots[i].root.path;
            if !self.roots[i].exists || fs::metadata(path).is_ok_and(|m| m.is_file()) {
                self.add_root(i, false, v);
            }
        }
        self.dirs.keys().cloned().collect()
    }

    /// One directory of a sweep: listed again if its mtime moved (or its last listing
    /// was too soon after a change to trust), let go if it is gone. A directory no
    /// longer known (gone since the sweep began) is passed over.
    pub fn check_dir(&mut self, dir: &Path, v: &mut impl Visit) {
        if self.dirs.get(dir).is_some_and(|d| moved(dir, d)) {
            self.list_again(dir, None, v);
        }
    }
}

/// Whether the directory `dir` may have entries its last listing (`d`) did not: its
/// mtime moved, it is gone, or that listing came too soon after a change to trust.
fn moved(dir: &Path, d: &DirState) -> bool {
    d.racy || !fs::metadata(dir).is_ok_and(|m| m.is_dir() && Stat::of(&m).mtime_ns == d.mtime_ns)
}

/// The live set: files stat'ed on every poll, because they changed lately or have a
/// turn still open.
#[derive(Debug, Default)]
pub struct Live {
    paths: HashSet<PathBuf>,
}

impl Live {
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.paths.contains(path)
    }

    /// Marks `path` live (it just changed).
    pub fn insert(&mut self, path: &Path) {
        if !self.paths.contains(path) {
            self.paths.insert(path.to_path_buf());
        }
    }

    pub fn remove(&mut self, path: &Path) {
        self.paths.remove(path);
    }

    /// The paths to stat on this poll.
    pub fn due(&self) -> Vec<PathBuf> {
        self.paths.iter().cloned().collect()
    }

    /// Rebuilds the set from every file's last change (monotonic ms): live if changed
    /// in the last [`LIVE_MS`], or in the last [`OPEN_TURN_MS`] with a turn still open
    /// (`open`, asked only for files in that band). At most [`MAX_LIVE`], the most
    /// recently changed first.
    pub fn rebuild<'a>(
        &mut self,
        now: i64,
        files: impl Iterator<Item = (&'a Path, i64)>,
        mut open: impl FnMut(&Path) -> bool,
    ) {
        let mut live: Vec<(i64, &Path)> = files
            .filter(|(path, last_change)| {
                let idle = now - last_change;
                idle < LIVE_MS || (idle < OPEN_TURN_MS && open(path))
            })
            .map(|(p, last_change)| (last_change, p))
            .collect();
        if live.len() > MAX_LIVE {
            live.sort_by_key(|w| std::cmp::Reverse(w.0));
            live.truncate(MAX_LIVE);
        }
        self.paths = live.into_iter().map(|(_, p)| p.to_path_buf()).collect();
    }
}

/// Where `path` leads if a symlink on the way makes that differ from `path` itself
/// (gone or unreadable: the path itself, so a later link shows as a change).
fn resolve_link(path: &Path) -> Option<PathBuf> {
    let real = fs::canonicalize(path).ok()?;
    let plain = std::path::absolute(path).ok()?;
    (real != plain).then_some(real)
}

/// The provider a root names for `path` (`None` inside: sniff each file), or `None`
/// outside every root.
pub fn root_provider(roots: &[Root], path: &Path) -> Option<Option<ProviderKind>> {
    root_of(roots, path).map(|i| roots[i].provider)
}
