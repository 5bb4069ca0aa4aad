//! The native watcher (inotify on Linux, via `notify`'s recommended watcher).
//!
//! Each directory gets its own non-recursive watch, added by the core when it first
//! lists the directory: add the watch, *then* list, so a file created in between is seen
//! by one or the other. notify's own recursive mode adds watches for new directories on
//! its thread after reporting them, which leaves a window where a file created in the
//! new directory is reported by neither.
//!
//! The callback runs on notify's thread and only turns events into [`Hint`]s.

use super::{Hint, HintTx};
use crate::diag;
use notify::event::{CreateKind, EventKind, ModifyKind, RemoveKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::path::Path;

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
    Other(#[source] notify::Error),
}

/// The native watcher handle. Dropping it stops notify's thread.
pub struct Native {
    watcher: RecommendedWatcher,
    /// Test hook: behave as if the OS allowed only this many watches.
    max_watches: Option<usize>,
    /// Watches held (added and not dropped).
    added: usize,
}

impl Native {
    /// Starts the watcher. With `drop_events` (a test hook) every native event is
    /// counted and thrown away, so only polling can notice changes.
    pub fn new(
        hints: HintTx,
        drop_events: bool,
        max_watches: Option<usize>,
    ) -> Result<Self, notify::Error> {
        let watcher = notify::recommended_watcher(move |res| {
            if drop_events {
                diag::NativeEventDropped.emit(&hints.stats);
                return;
            }
            on_event(res, &hints);
        })?;
        Ok(Native {
            watcher,
            max_watches,
            added: 0,
        })
    }

    /// Watches one directory (not its subdirectories), or one file.
    pub fn watch(&mut self, path: &Path) -> Result<(), WatchError> {
        if self.max_watches.is_some_and(|max| self.added >= max) {
            return Err(WatchError::Limit);
        }
        let done = self.watcher.watch(path, RecursiveMode::NonRecursive);
        if done.is_ok() {
            self.added += 1;
        }
        done.map_err(|e| match e.kind {
            notify::ErrorKind::MaxFilesWatch => WatchError::Limit,
            notify::ErrorKind::PathNotFound => WatchError::Gone,
            notify::ErrorKind::Io(ref io) if io.kind() == std::io::ErrorKind::NotFound => {
                WatchError::Gone
            }
            _ => WatchError::Other(e),
        })
    }

    /// Drops the watch on a path that is gone (the kernel drops it too; this keeps
    /// notify's table small).
    pub fn unwatch(&mut self, path: &Path) {
        if self.watcher.unwatch(path).is_ok() {
            self.added = self.added.saturating_sub(1);
        }
    }

    /// How many watches this watcher holds.
    pub fn watches(&self) -> usize {
        self.added
    }
}

fn on_event(res: notify::Result<notify::Event>, hints: &HintTx) {
    let ev = match res {
        Ok(ev) => ev,
        Err(e) => {
            hints.rescan(diag::Rescan::WatcherError(&e));
            return;
        }
    };
    if ev.need_rescan() {
        hints.rescan(diag::Rescan::QueueOverflowed);
    }
    let maybe_dir = match ev.kind {
        // Opens, reads and closes: our own reads show up here, and a write is always
        // reported as a modification too.
        EventKind::Access(_) => return,
        EventKind::Create(CreateKind::File)
        | EventKind::Remove(RemoveKind::File)
        | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_)) => false,
        _ => true,
    };
    for path in ev.paths {
        if !hints.send(Hint::Path { path, maybe_dir }) {
            return;
        }
    }
}
