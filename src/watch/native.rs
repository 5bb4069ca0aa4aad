//! The native watcher: inotify, through rustix's safe calls, read by the core itself.
//!
//! Each directory gets its own watch, added by the core when it first lists the
//! directory: add the watch, *then* list, so a file created in between is seen by one
//! or the other. (A recursive watch that adds watches for new directories after
//! reporting them leaves a window where a file created in the new directory is reported
//! by neither.)
//!
//! The watch asks for what changes a file or a directory, nothing else. `notify`'s
//! inotify watcher, used before, always asks for opens too: every open of a watched
//! file, the daemon's own reads included, was an event for its thread to read and drop,
//! a sixth of a first start on a generated tree of 10,000 sessions (BENCHMARKS.md,
//! round 16). Each add was also a round trip to its thread, with a `stat` of its own.
//!
//! No thread reads the events: the core sleeps in `poll(2)` on this descriptor (and the
//! hint channel's bell) and reads them when it wakes ([`Native::read`]). A thread of
//! its own woke the core for each event, through a channel whose lock the two then at
//! times passed back and forth: 30 µs of an append's 180 µs to its event line
//! (medians); without it the event line comes in about half the time (BENCHMARKS.md,
//! round 22). While the core is busy (the history read), events wait in the kernel's
//! queue; one that overflows is a rescan, as a full hint channel was.

use super::{Hint, HintTx};
use crate::diag;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

/// What a watch asks for: a file created, written, changed (mode, times), removed or
/// renamed in the directory, and the directory itself removed or renamed.
const MASK: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF);

/// Bytes read at once: about a thousand events with their names (the kernel's queue
/// holds 16,384 events by default).
const READ_BUF: usize = 64 * 1024;

/// Why a watch could not be added.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The OS limit on watches is reached (`ENOSPC` from inotify_add_watch).
    #[error("the OS limit on file watches is reached (raise fs.inotify.max_user_watches)")]
    Limit,
    /// The path went away before the watch was added.
    #[error("the path is gone")]
    Gone,
    #[error("{0}")]
    Other(#[source] std::io::Error),
}

/// The watched paths by watch descriptor. One copy of each path, shared with the
/// watched tree, which keeps each directory's descriptor for [`Native::unwatch`] (a map
/// of path → descriptor here was 1.6 MB at 38,000 directories).
type Paths = HashMap<i32, Arc<Path>>;

/// A watch descriptor: inotify numbers its watches from 1.
pub type Wd = std::num::NonZeroI32;

/// The native watcher handle.
pub struct Native {
    fd: OwnedFd,
    paths: Paths,
    /// For a rescan (an overflow, a read error) and the counters.
    hints: HintTx,
    /// Test hook: every event is counted and thrown away.
    drop_events: bool,
    /// Test hook: behave as if the OS allowed only this many watches.
    max_watches: Option<usize>,
    buf: Vec<MaybeUninit<u8>>,
}

impl Native {
    /// Starts the watcher. With `drop_events` (a test hook) every native event is
    /// counted and thrown away, so only polling can notice changes.
    pub fn new(
        hints: HintTx,
        drop_events: bool,
        max_watches: Option<usize>,
    ) -> std::io::Result<Self> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Native {
            fd,
            paths: Paths::default(),
            hints,
            drop_events,
            max_watches,
            buf: Vec::new(),
        })
    }

    /// The descriptor to wait on: readable when events wait.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Reads the events waiting (until none is left, or `out` holds `max` and what one
    /// read took from the kernel is used up: dropped unread, it would be lost), each as
    /// its hint. Never blocks.
    pub fn read(&mut self, out: &mut Vec<Hint>, max: usize) {
        let Native {
            fd,
            paths,
            hints,
            drop_events,
            buf,
            ..
        } = self;
        if buf.is_empty() {
            buf.resize(READ_BUF, MaybeUninit::uninit());
        }
        let mut reader = inotify::Reader::new(&*fd, buf);
        while out.len() < max || !reader.is_buffer_empty() {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(e) => {
                    hints.rescan(diag::Rescan::WatcherError(&e.into()));
                    break;
                }
            };
            if *drop_events {
                diag::NativeEventDropped.emit(&hints.stats);
                continue;
            }
            if let Some(hint) = hint_for(ev.wd(), ev.events(), ev.file_name(), paths, hints) {
                out.push(hint);
            }
        }
    }

    /// Watches one directory (not its subdirectories), or one file. Again on a path
    /// already watched: the same watch, or a new one if the path is another directory
    /// now (the old one's watch went with it).
    pub fn watch(&mut self, path: &Path) -> Result<Wd, WatchError> {
        self.watch_shared(Arc::from(path))
    }

    /// [`Native::watch`], keeping the caller's copy of the path (the watched tree keeps
    /// the same one: at 38,000 directories a copy of each was 4 MB).
    /// The watch's descriptor: a path watched again (the same directory) gets the one
    /// it has.
    pub fn watch_shared(&mut self, path: Arc<Path>) -> Result<Wd, WatchError> {
        if self
            .max_watches
            .is_some_and(|max| self.paths.len() >= max && !self.paths.values().any(|p| *p == path))
        {
            return Err(WatchError::Limit);
        }
        let wd = inotify::add_watch(&self.fd, &*path, MASK).map_err(|e| match e {
            Errno::NOSPC => WatchError::Limit,
            Errno::NOENT => WatchError::Gone,
            e => WatchError::Other(e.into()),
        })?;
        let Some(id) = Wd::new(wd) else {
            return Err(WatchError::Other(std::io::Error::other(
                "inotify gave the watch descriptor 0",
            )));
        };
        self.paths.insert(wd, path);
        Ok(id)
    }

    /// Drops the watch `wd` on a path that is gone (the kernel drops it too; this keeps
    /// the tables small).
    pub fn unwatch(&mut self, path: &Path, wd: Wd) {
        let wd = wd.get();
        // A directory renamed within the tree keeps its watch: watched again under its
        // new name, the watch is that name's now, and stays.
        if self.paths.get(&wd).is_none_or(|p| **p != *path) {
            return;
        }
        self.paths.remove(&wd);
        // Already gone if the kernel dropped it.
        let _ = inotify::remove_watch(&self.fd, wd);
    }

    /// How many watches this watcher holds (those the kernel ended are forgotten as
    /// their end is read).
    pub fn watches(&self) -> usize {
        self.paths.len()
    }
}

/// The hint for one event, if it is one: the path it names (the watched directory's
/// entry, or the watched path itself), and whether that may be a directory (created,
/// renamed or removed), so the core knows a stat is worth it even when the name is not
/// a transcript's.
fn hint_for(
    wd: i32,
    flags: ReadFlags,
    name: Option<&std::ffi::CStr>,
    paths: &mut Paths,
    hints: &HintTx,
) -> Option<Hint> {
    if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
        hints.rescan(diag::Rescan::QueueOverflowed);
        return None;
    }
    if flags.contains(ReadFlags::IGNORED) {
        // The watch is gone (its directory removed, or unwatched): so is its path. The
        // removal itself came as DELETE_SELF before.
        paths.remove(&wd);
        return None;
    }
    let dir = paths.get(&wd)?;
    let path = match name.map(|n| n.to_bytes()).filter(|n| !n.is_empty()) {
        Some(n) => dir.join(OsStr::from_bytes(n)),
        None => dir.to_path_buf(),
    };
    let maybe_dir = flags.intersects(
        ReadFlags::ISDIR
            | ReadFlags::MOVED_FROM
            | ReadFlags::MOVED_TO
            | ReadFlags::DELETE_SELF
            | ReadFlags::MOVE_SELF
            | ReadFlags::UNMOUNT,
    );
    Some(Hint::Path { path, maybe_dir })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::path::PathBuf;
    use std::time::Duration;

    /// The hints that came within `wait`, as (path, maybe_dir): as the core reads them,
    /// waiting on the descriptor.
    fn hints_within(native: &mut Native, wait: Duration) -> Vec<(PathBuf, bool)> {
        let mut got = Vec::new();
        let until = std::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            let timeout = rustix::time::Timespec::try_from(left).unwrap();
            let mut fds = [rustix::event::PollFd::new(
                &native.fd,
                rustix::event::PollFlags::IN,
            )];
            if rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
                break;
            }
            let mut hints = Vec::new();
            native.read(&mut hints, usize::MAX);
            got.extend(hints.into_iter().filter_map(|h| match h {
                Hint::Path { path, maybe_dir } => Some((path, maybe_dir)),
                _ => None,
            }));
        }
        got
    }

    #[test]
    fn changes_are_hinted_and_reads_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("s.jsonl");
        std::fs::write(&file, b"{}\n").unwrap();
        let (tx, _rx) = super::super::channel(64).unwrap();
        let mut native = Native::new(tx, false, None).unwrap();
        let wd = native.watch(&dir).unwrap();
        assert_eq!(native.watches(), 1);
        let short = Duration::from_millis(300);

        // Opening and reading a file, as the daemon does, is no change.
        let mut s = String::new();
        std::fs::File::open(&file)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(hints_within(&mut native, short), []);

        // An append is a change to the file; a new directory may be a directory.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(b"{}\n").unwrap();
        drop(f);
        let got = hints_within(&mut native, short);
        assert!(
            !got.is_empty() && got.iter().all(|h| *h == (file.clone(), false)),
            "{got:?}"
        );
        std::fs::create_dir(dir.join("sub")).unwrap();
        assert_eq!(hints_within(&mut native, short), [(dir.join("sub"), true)]);

        // Unwatched, the directory says nothing more.
        native.unwatch(&dir, wd);
        assert_eq!(native.watches(), 0);
        std::fs::write(dir.join("t.jsonl"), b"{}\n").unwrap();
        assert_eq!(hints_within(&mut native, short), []);
    }

    /// Counted by the test hook, which sees every event read: a read of a watched file
    /// is none (with opens asked for, each open was one).
    #[test]
    fn a_read_is_no_event_at_all() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("s.jsonl");
        std::fs::write(&file, b"{}\n").unwrap();
        let (tx, rx) = super::super::channel(64).unwrap();
        let stats = tx.stats.clone();
        let mut native = Native::new(tx, true, None).unwrap();
        native.watch(tmp.path()).unwrap();
        for _ in 0..3 {
            std::fs::read(&file).unwrap();
        }
        assert_eq!(hints_within(&mut native, Duration::from_millis(300)), []);
        assert_eq!(stats.dropped_by_hook.get(), 0);
        std::fs::write(&file, b"{}\n{}\n").unwrap();
        assert_eq!(hints_within(&mut native, Duration::from_secs(1)), []);
        assert!(stats.dropped_by_hook.get() > 0);
        assert!(rx.rx.try_recv().is_err());
    }

    #[test]
    fn a_removed_directory_is_hinted_and_its_watch_ends() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let (tx, _rx) = super::super::channel(64).unwrap();
        let mut native = Native::new(tx, false, None).unwrap();
        native.watch(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        let got = hints_within(&mut native, Duration::from_millis(300));
        assert!(got.contains(&(dir.clone(), true)), "{got:?}");
        // Made again, the same path is watched anew.
        std::fs::create_dir(&dir).unwrap();
        native.watch(&dir).unwrap();
        assert_eq!(native.watches(), 1);
        std::fs::write(dir.join("s.jsonl"), b"{}\n").unwrap();
        let got = hints_within(&mut native, Duration::from_millis(300));
        assert!(got.contains(&(dir.join("s.jsonl"), false)), "{got:?}");
        assert_eq!(
            native
                .watch(&tmp.path().join("gone"))
                .err()
                .map(|e| e.to_string()),
            Some("the path is gone".to_owned())
        );
    }

    #[test]
    fn a_renamed_directory_keeps_its_watch_under_its_new_name() {
        let tmp = tempfile::tempdir().unwrap();
        let (old, new) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&old).unwrap();
        let (tx, _rx) = super::super::channel(64).unwrap();
        let mut native = Native::new(tx, false, None).unwrap();
        let wd = native.watch(&old).unwrap();
        std::fs::rename(&old, &new).unwrap();
        // As the tree does: the new name listed and watched, the old one dropped.
        assert_eq!(
            native.watch(&new).unwrap(),
            wd,
            "the same directory's watch"
        );
        native.unwatch(&old, wd);
        assert_eq!(native.watches(), 1);
        hints_within(&mut native, Duration::from_millis(100));
        std::fs::write(new.join("s.jsonl"), b"{}\n").unwrap();
        let got = hints_within(&mut native, Duration::from_millis(300));
        assert!(got.contains(&(new.join("s.jsonl"), false)), "{got:?}");
    }

    /// The kernel's flags, as hints: an overflow asks for a rescan, a directory or a
    /// rename may be a directory, a write is a file's, an ended watch forgets its path.
    #[test]
    fn each_kind_of_event_makes_its_hint() {
        let (tx, rx) = super::super::channel(4).unwrap();
        let mut paths = Paths::default();
        let dir: Arc<Path> = Arc::from(Path::new("/w/d"));
        paths.insert(7, dir.clone());
        let name = c"s.jsonl";
        let mut hint = |flags, name| match hint_for(7, flags, name, &mut paths, &tx) {
            Some(Hint::Path { path, maybe_dir }) => Some((path, maybe_dir)),
            _ => None,
        };
        let file = Some((dir.join("s.jsonl"), false));
        let maybe_dir = Some((dir.join("s.jsonl"), true));
        assert_eq!(hint(ReadFlags::MODIFY, Some(name)), file);
        assert_eq!(hint(ReadFlags::CREATE, Some(name)), file);
        assert_eq!(hint(ReadFlags::DELETE, Some(name)), file);
        assert_eq!(hint(ReadFlags::ATTRIB, Some(name)), file);
        assert_eq!(
            hint(ReadFlags::CREATE | ReadFlags::ISDIR, Some(name)),
            maybe_dir
        );
        assert_eq!(hint(ReadFlags::MOVED_FROM, Some(name)), maybe_dir);
        assert_eq!(hint(ReadFlags::MOVED_TO, Some(name)), maybe_dir);
        assert_eq!(
            hint(ReadFlags::DELETE_SELF, None),
            Some((dir.to_path_buf(), true))
        );
        assert!(!rx.take_rescan());
        assert_eq!(hint(ReadFlags::QUEUE_OVERFLOW, None), None);
        assert!(rx.take_rescan());
        assert_eq!(hint(ReadFlags::IGNORED, None), None);
        assert_eq!(hint(ReadFlags::MODIFY, Some(name)), None);
        assert!(paths.is_empty());
    }

    /// A read that stops at its most still hands on every event it took from the
    /// kernel; the rest wait there for the next read.
    #[test]
    fn a_read_cut_short_loses_no_event() {
        let tmp = tempfile::tempdir().unwrap();
        let (tx, _rx) = super::super::channel(4).unwrap();
        let mut native = Native::new(tx, false, None).unwrap();
        native.watch(tmp.path()).unwrap();
        let names: Vec<PathBuf> = (0..50)
            .map(|i| tmp.path().join(format!("{i}.jsonl")))
            .collect();
        for n in &names {
            std::fs::write(n, b"{}\n").unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        let mut reads = 0;
        loop {
            let mut out = Vec::new();
            native.read(&mut out, 1);
            if out.is_empty() {
                break;
            }
            reads += 1;
            seen.extend(out.into_iter().filter_map(|h| match h {
                Hint::Path { path, .. } => Some(path),
                _ => None,
            }));
        }
        assert_eq!(seen.len(), names.len(), "{seen:?}");
        assert!(reads >= 1);
    }

    #[test]
    fn the_watch_limit_hook_refuses_new_paths_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (tx, _rx) = super::super::channel(4).unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let mut native = Native::new(tx, false, Some(1)).unwrap();
        native.watch(tmp.path()).unwrap();
        native.watch(tmp.path()).unwrap();
        assert!(matches!(
            native.watch(&tmp.path().join("sub")),
            Err(WatchError::Limit)
        ));
        assert_eq!(native.watches(), 1);
    }
}
