//! The slow safety net in steps: every known directory's mtime and every tracked file's
//! stat, 128 at a time between the core's batches of hints, so that at 100,000 sessions
//! (about 0.6 s of `stat`) the events of the moment are not kept waiting for it.

use super::apply::{Looker, Reduce};
use super::files::Files;
use super::name::FileName;
use super::read::Mode;
use crate::watch::tree::Tree;
use std::path::Path;
use std::sync::Arc;

/// Files and directories a sweep stats between two looks at the hints: about half a
/// millisecond, the longest a sweep holds up a live event.
const STEP: usize = 128;

/// A sweep under way: what it has still to stat.
pub(super) struct Sweeping {
    dirs: Vec<Arc<Path>>,
    files: Vec<FileName>,
    /// Another sweep was asked for meanwhile: it starts when this one ends.
    pub again: bool,
}

impl Sweeping {
    /// Begins a sweep: the missing roots now, the rest in [`Sweeping::step`]s.
    pub fn start(tree: &mut Tree, files: &mut Files, reduce: &mut Reduce) -> Sweeping {
        let dirs = tree.sweep_start(&mut Looker::live(files, reduce));
        Sweeping {
            dirs,
            files: files.names(),
            again: false,
        }
    }

    /// The next [`STEP`] directories, then files; true once none is left (the caller
    /// then ends the sweep, [`Reduce::end_sweep`]).
    pub fn step(&mut self, tree: &mut Tree, files: &mut Files, reduce: &mut Reduce) -> bool {
        let mut v = Looker::live(files, reduce);
        for _ in 0..STEP {
            if let Some(dir) = self.dirs.pop() {
                tree.check_dir(&dir, &mut v);
            } else if let Some(name) = self.files.pop() {
                if v.files.changed_one(&name) {
                    v.reduce.look(v.files, name.path(), Mode::Live);
                }
            } else {
                break;
            }
        }
        self.dirs.is_empty() && self.files.is_empty()
    }
}
