//! The tracked-file table's storage: each file's name and [`Tracked`] entry in one list,
//! found by path through a table of slot numbers.
//!
//! Sized for 100,000 files. As a map of name → boxed entry it took a 128-byte allocation
//! per file, made while the history read allocated and freed the sessions around it, and
//! 262,144 slots of 24 bytes at 117,758 files (6.6 MB). Here the entries are one list (a
//! slot of 136 bytes, freed slots reused) and the map a table of 5-byte slots. A file
//! idle for long moves to a second list, its entry in the spill and 48 bytes a slot
//! ([`Frozen`]): most files are idle, and their 136-byte slots were 17.8 MB at 100,000
//! sessions.

use super::name::FileName;
use super::tracked::{Frozen, Tracked};
use crate::reduce::Spill;
use crate::slots::Slots;
use crate::tail::{Change, Stat};
use foldhash::fast::RandomState;
use std::hash::BuildHasher;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

// A slot of the list: at 131,072 slots (117,758 files), every 8 bytes more is 1 MB.
const _: () = assert!(size_of::<Option<(FileName, Tracked)>>() <= 136);
// A frozen file's slot: most files, once the history is read.
const _: () = assert!(size_of::<Option<(FileName, Frozen)>>() <= 48);

#[derive(Default)]
pub(super) struct Table {
    entries: Slots<(FileName, Tracked)>,
    /// Files idle for long, their entry kept in the spill ([`Frozen`]). A path is in
    /// one list or the other, never both.
    frozen: Slots<(FileName, Frozen)>,
    hasher: RandomState,
}

/// An entry read from the table: the table's own, or one read back from the spill.
pub(super) enum Got<'a> {
    Here(&'a Tracked),
    Back(Box<Tracked>),
}

impl Deref for Got<'_> {
    type Target = Tracked;
    fn deref(&self) -> &Tracked {
        match self {
            Got::Here(t) => t,
            Got::Back(t) => t,
        }
    }
}

impl Table {
    pub fn len(&self) -> usize {
        self.entries.len() + self.frozen.len()
    }

    /// How many files are frozen.
    pub fn frozen_len(&self) -> usize {
        self.frozen.len()
    }

    /// The slot of `path` in the list of entries not frozen, by its hash.
    fn find_at(&self, h: u64, path: &Path) -> Option<u32> {
        self.entries.find(h, |(name, _)| name.path() == path)
    }

    fn find_frozen_at(&self, h: u64, path: &Path) -> Option<u32> {
        self.frozen.find(h, |(name, _)| name.path() == path)
    }

    pub fn contains_key(&self, path: &Path) -> bool {
        let h = self.hasher.hash_one(path);
        self.find_at(h, path).is_some() || self.find_frozen_at(h, path).is_some()
    }

    /// When `path` last changed (monotonic ms), if tracked.
    pub fn last_change(&self, path: &Path) -> Option<i64> {
        let h = self.hasher.hash_one(path);
        if let Some(n) = self.find_at(h, path) {
            return self.entries.get(n).map(|(_, t)| t.last_change);
        }
        let n = self.find_frozen_at(h, path)?;
        self.frozen.get(n).map(|(_, f)| f.last_change())
    }

    /// Whether `now` is the stat `path`'s tail state was last at (its compare says
    /// `Same`); `None` if `path` is not tracked. One lookup: the slow safety net asks
    /// this of every file every 30 s.
    pub fn same_stat(&self, path: &Path, now: &Stat) -> Option<bool> {
        let h = self.hasher.hash_one(path);
        if let Some(n) = self.find_at(h, path) {
            return self
                .entries
                .get(n)
                .map(|(_, t)| t.tail.compare(now) == Change::Same);
        }
        self.frozen_same_at(h, path, now)
    }

    /// Whether `path` is frozen and `now` is the stat it was frozen at: such a file
    /// stays frozen.
    pub fn frozen_same(&self, path: &Path, now: &Stat) -> bool {
        self.frozen_same_at(self.hasher.hash_one(path), path, now) == Some(true)
    }

    /// A frozen entry says "unchanged" by its fingerprint, with nothing read back but
    /// for one that cannot tell.
    fn frozen_same_at(&self, h: u64, path: &Path, now: &Stat) -> Option<bool> {
        let (k, f) = self.frozen.get(self.find_frozen_at(h, path)?)?;
        Some(
            f.unchanged(now)
                .unwrap_or_else(|| f.thaw(k.path()).tail.compare(now) == Change::Same),
        )
    }

    /// The name the table holds `path` by.
    pub fn key(&self, path: &Path) -> Option<&FileName> {
        let h = self.hasher.hash_one(path);
        if let Some(n) = self.find_at(h, path) {
            return self.entries.get(n).map(|(k, _)| k);
        }
        let n = self.find_frozen_at(h, path)?;
        self.frozen.get(n).map(|(k, _)| k)
    }

    /// The entry for `path`; a frozen one is read back, and stays frozen.
    pub fn get(&self, path: &Path) -> Option<Got<'_>> {
        let h = self.hasher.hash_one(path);
        if let Some(n) = self.find_at(h, path) {
            return self.entries.get(n).map(|(_, t)| Got::Here(t));
        }
        let n = self.find_frozen_at(h, path)?;
        let (k, f) = self.frozen.get(n)?;
        Some(Got::Back(Box::new(f.thaw(k.path()))))
    }

    /// The entry for `path` if it is not frozen: for what a frozen entry never has (an
    /// open handle, a projector), with nothing read back.
    pub fn here_mut(&mut self, path: &Path) -> Option<&mut Tracked> {
        let n = self.find_at(self.hasher.hash_one(path), path)?;
        self.entries.get_mut(n).map(|(_, t)| t)
    }

    /// Whether `path` is tracked (`None` if not) with a handle open; a frozen entry has
    /// none.
    pub fn is_open(&self, path: &Path) -> Option<bool> {
        let h = self.hasher.hash_one(path);
        match self.find_at(h, path) {
            Some(n) => self.entries.get(n).map(|(_, t)| t.tail.is_open()),
            None => self.find_frozen_at(h, path).map(|_| false),
        }
    }

    pub fn get_mut(&mut self, path: &Path) -> Option<&mut Tracked> {
        self.get_named_mut(path).map(|(_, t)| t)
    }

    /// The entry for `path` (thawed if it was frozen), with the name the table holds it
    /// by (a feed made for it shares that name).
    pub fn get_named_mut(&mut self, path: &Path) -> Option<(&FileName, &mut Tracked)> {
        let h = self.hasher.hash_one(path);
        let n = match self.find_at(h, path) {
            Some(n) => n,
            None => self.thaw_at(h, path)?,
        };
        self.entries.get_mut(n).map(|(k, t)| (&*k, t))
    }

    /// Moves a frozen entry back into the list; its slot there.
    fn thaw_at(&mut self, h: u64, path: &Path) -> Option<u32> {
        let n = self.find_frozen_at(h, path)?;
        let (name, f) = self.frozen.remove(n, h)?;
        let t = f.thaw(name.path());
        let hasher = &self.hasher;
        Some(
            self.entries
                .insert(h, (name, t), |(k, _)| hasher.hash_one(k.path())),
        )
    }

    /// Tracks `name` (replacing its entry if it was tracked).
    pub fn insert(&mut self, name: FileName, t: Tracked) {
        let h = self.hasher.hash_one(name.path());
        if let Some(n) = self.find_frozen_at(h, name.path()) {
            self.frozen.remove(n, h);
        }
        if let Some(n) = self.find_at(h, name.path())
            && let Some(e) = self.entries.get_mut(n)
        {
            *e = (name, t);
            return;
        }
        let hasher = &self.hasher;
        self.entries
            .insert(h, (name, t), |(k, _)| hasher.hash_one(k.path()));
    }

    pub fn remove(&mut self, path: &Path) -> Option<Tracked> {
        let h = self.hasher.hash_one(path);
        if let Some(n) = self.find_at(h, path) {
            return self.entries.remove(n, h).map(|(_, t)| t);
        }
        let n = self.find_frozen_at(h, path)?;
        self.frozen.remove(n, h).map(|(k, f)| f.thaw(k.path()))
    }

    /// Keeps the entry of `path` in the spill, if it can go (no handle; a projector or a
    /// saved context) and the spill gives it back. True if it went.
    pub fn freeze(&mut self, path: &Path, spill: &Arc<dyn Spill>) -> bool {
        let h = self.hasher.hash_one(path);
        let Some(n) = self.find_at(h, path) else {
            return false;
        };
        if !self
            .entries
            .get(n)
            .is_some_and(|(_, t)| !t.tail.is_open() && (t.feed.is_some() || t.cold.is_some()))
        {
            return false;
        }
        let Some((name, t)) = self.entries.remove(n, h) else {
            return false;
        };
        let hasher = &self.hasher;
        match Frozen::freeze(t, spill) {
            Ok(f) => {
                self.frozen
                    .insert(h, (name, f), |(k, _)| hasher.hash_one(k.path()));
                true
            }
            Err(t) => {
                self.entries
                    .insert(h, (name, t), |(k, _)| hasher.hash_one(k.path()));
                false
            }
        }
    }

    /// Gives back the room of the list's free slots once most of them are free (after
    /// the files read at start are frozen, the list had a slot for each).
    pub fn repack(&mut self) {
        let (span, len) = (self.entries.span(), self.entries.len());
        if span < 1024 || span < 4 * len {
            return;
        }
        let old = std::mem::take(&mut self.entries);
        let hasher = &self.hasher;
        for (k, t) in old.into_values() {
            let h = hasher.hash_one(k.path());
            self.entries
                .insert(h, (k, t), |(k, _)| hasher.hash_one(k.path()));
        }
    }

    /// Every tracked file's name.
    pub fn keys(&self) -> impl Iterator<Item = &FileName> {
        self.entries
            .iter()
            .map(|(k, _)| k)
            .chain(self.frozen.iter().map(|(k, _)| k))
    }

    /// Every tracked file's name and last change (monotonic ms).
    pub fn changes(&self) -> impl Iterator<Item = (&FileName, i64)> {
        self.entries
            .iter()
            .map(|(k, t)| (k, t.last_change))
            .chain(self.frozen.iter().map(|(k, f)| (k, f.last_change())))
    }

    /// The entries not frozen.
    pub fn iter(&self) -> impl Iterator<Item = (&FileName, &Tracked)> {
        self.entries.iter().map(|(k, t)| (k, t))
    }

    /// The entries not frozen.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&FileName, &mut Tracked)> {
        self.entries.iter_mut().map(|(k, t)| (&*k, t))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProviderKind;
    use crate::reduce::Kept;
    use crate::state::spill::SpillFile;
    use crate::tail::{FileId, Parts, TailState};

    fn tracked(ino: u64) -> Tracked {
        Tracked {
            provider: ProviderKind::Claude,
            tail: TailState::new(FileId { dev: 1, ino }),
            feed: None,
            cold: None,
            last_change: 0,
            warned_s: i32::MIN,
            skew_ms: 0,
        }
    }

    fn ino(t: &Tracked) -> u64 {
        t.tail.id().ino
    }

    /// Files come and go, slots are used again, and each lookup finds its own entry,
    /// under the name it was tracked by.
    #[test]
    fn entries_are_found_after_others_come_and_go() {
        let mut t = Table::default();
        let path = |i: u64| format!("/t/p{}/{i}.jsonl", i % 7);
        for i in 0..2000 {
            t.insert(FileName::new(Path::new(&path(i))), tracked(i));
        }
        for i in (0..2000).step_by(3) {
            assert_eq!(t.remove(Path::new(&path(i))).map(|x| ino(&x)), Some(i));
        }
        for i in 2000..2300 {
            t.insert(FileName::new(Path::new(&path(i))), tracked(i));
        }
        assert_eq!(t.entries.span(), 2000, "new files took the freed slots");
        for i in 0..2300 {
            let p = path(i);
            let kept = i >= 2000 || i % 3 != 0;
            assert_eq!(t.contains_key(Path::new(&p)), kept, "{p}");
            assert_eq!(t.get(Path::new(&p)).map(|x| ino(&x)), kept.then_some(i));
            if kept {
                assert_eq!(&**t.key(Path::new(&p)).unwrap().name(), p);
            }
        }
        assert_eq!(t.len(), 2300 - 667);
        assert_eq!(t.iter().count(), t.len());
        assert_eq!(t.keys().count(), t.len());
        // A change through `get_mut` or `iter_mut` stays.
        t.get_mut(Path::new(&path(1))).unwrap().last_change = 42;
        for (_, x) in t.iter_mut() {
            x.skew_ms += 1;
        }
        let one = t.get(Path::new(&path(1))).unwrap();
        assert_eq!((one.last_change, one.skew_ms), (42, 1));
    }

    /// Tracking a name again replaces its entry; once every file is let go the table
    /// starts again empty.
    #[test]
    fn a_name_tracked_again_replaces_and_the_room_goes_back() {
        let mut t = Table::default();
        t.insert(FileName::new(Path::new("/a")), tracked(1));
        t.insert(FileName::new(Path::new("/a")), tracked(2));
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(Path::new("/a")).map(|x| ino(&x)), Some(2));
        for i in 0..100 {
            t.insert(FileName::new(Path::new(&format!("/b{i}"))), tracked(i));
        }
        for i in 0..100 {
            t.remove(Path::new(&format!("/b{i}")));
        }
        t.remove(Path::new("/a"));
        assert_eq!(t.len(), 0);
        assert_eq!(t.entries.capacity(), 0);
        assert!(t.remove(Path::new("/a")).is_none());
        t.insert(FileName::new(Path::new("/c")), tracked(3));
        assert_eq!(t.get(Path::new("/c")).map(|x| ino(&x)), Some(3));
    }

    /// A file read up to some point and gone cold, as the caps leave it.
    fn cold(ino: u64) -> Tracked {
        let mut t = tracked(ino);
        t.tail = TailState::from_parts(Parts {
            id: FileId { dev: 7, ino },
            size: 5000 + ino,
            mtime_ns: -3,
            ctime_ns: 1_700_000_000_123_456_789,
            offset: 4990 + ino,
            line_no: 40,
            marker: u64::MAX - ino,
        });
        t.cold = Some(Kept::new(
            format!("{{\"context\":{ino}}}\n second line"),
            None,
        ));
        t.last_change = -77_000;
        t.warned_s = 12;
        t.skew_ms = 1500;
        t
    }

    fn same(a: &Tracked, b: &Tracked) -> bool {
        a.provider == b.provider
            && a.tail.parts() == b.tail.parts()
            && a.cold.as_ref().and_then(Kept::text) == b.cold.as_ref().and_then(Kept::text)
            && (a.last_change, a.warned_s, a.skew_ms) == (b.last_change, b.warned_s, b.skew_ms)
            && a.feed.is_none() == b.feed.is_none()
    }

    /// A frozen entry reads back as it was, stays frozen when only read, and comes back
    /// into the list when changed; its slot in the list is given back.
    #[test]
    fn a_frozen_entry_reads_back_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let spill: Arc<dyn Spill> = Arc::new(SpillFile::new(dir.path()).unwrap());
        let mut t = Table::default();
        let path = |i: u64| format!("/t/{i}.jsonl");
        for i in 0..3000 {
            t.insert(FileName::new(Path::new(&path(i))), cold(i));
        }
        // One with no saved context (to be read from its first byte) stays.
        t.get_mut(Path::new(&path(5))).unwrap().cold = None;
        for i in 0..3000 {
            t.freeze(Path::new(&path(i)), &spill);
        }
        t.repack();
        assert_eq!((t.len(), t.frozen_len()), (3000, 2999));
        assert!(t.entries.capacity() < 64, "{}", t.entries.capacity());
        assert!(
            t.find_frozen_at(t.hasher.hash_one(Path::new(&path(5))), Path::new(&path(5)))
                .is_none()
        );
        for i in (0..3000).filter(|&i| i != 5) {
            let p = path(i);
            assert!(same(&t.get(Path::new(&p)).unwrap(), &cold(i)), "{p}");
            assert_eq!(t.last_change(Path::new(&p)), Some(-77_000));
            assert_eq!(&**t.key(Path::new(&p)).unwrap().name(), p);
        }
        assert_eq!(t.frozen_len(), 2999, "reading leaves them frozen");
        // A stat is told from the one it was frozen at without a read back.
        let mut stat = cold(3).tail.same_stat().unwrap();
        assert!(t.frozen_same(Path::new(&path(3)), &stat));
        assert_eq!(t.same_stat(Path::new(&path(3)), &stat), Some(true));
        for change in [
            |s: &mut crate::tail::Stat| s.size += 1,
            |s: &mut crate::tail::Stat| s.ctime_ns += 1,
            |s: &mut crate::tail::Stat| s.mtime_ns -= 1,
            |s: &mut crate::tail::Stat| s.id.ino += 1,
        ] {
            let mut other = stat;
            change(&mut other);
            assert!(!t.frozen_same(Path::new(&path(3)), &other));
            assert_eq!(t.same_stat(Path::new(&path(3)), &other), Some(false));
        }
        // Path 5 is not frozen: its own entry answers, and an untracked path has none.
        stat = crate::tail::Stat {
            id: FileId { dev: 1, ino: 5 },
            size: 0,
            mtime_ns: i64::MIN,
            ctime_ns: i64::MIN,
        };
        assert!(!t.frozen_same(Path::new(&path(5)), &stat));
        assert_eq!(t.same_stat(Path::new(&path(5)), &stat), Some(false));
        assert_eq!(t.same_stat(Path::new("/t/none.jsonl"), &stat), None);
        assert_eq!(t.keys().count(), 3000);
        assert_eq!(t.changes().filter(|&(_, l)| l == -77_000).count(), 3000);
        let back = t.get_mut(Path::new(&path(9))).unwrap();
        assert!(same(back, &cold(9)));
        back.skew_ms = 1;
        assert_eq!(t.frozen_len(), 2998);
        assert_eq!(t.get(Path::new(&path(9))).unwrap().skew_ms, 1);
        // Tracking a frozen path again replaces it; removing one takes it out.
        t.insert(FileName::new(Path::new(&path(10))), tracked(10));
        assert!(t.get(Path::new(&path(10))).unwrap().cold.is_none());
        assert_eq!(t.remove(Path::new(&path(11))).map(|x| ino(&x)), Some(11));
        assert!(!t.contains_key(Path::new(&path(11))));
        assert_eq!((t.len(), t.frozen_len()), (2999, 2996));
    }

    /// An entry with a handle or a projector is not frozen; one the spill cannot give
    /// back comes back as a file no stat matches, with no context, so it is read again
    /// from its first byte.
    #[test]
    fn what_cannot_be_read_back_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let gone: Arc<dyn Spill> = Arc::new(SpillFile::new(dir.path()).unwrap().unreadable(true));
        let mut t = Table::default();
        let mut one = cold(1);
        one.last_change = -77_001;
        t.insert(FileName::new(Path::new("/a")), one);
        assert!(t.freeze(Path::new("/a"), &gone));
        // Kept to the second, rounded down.
        assert_eq!(t.last_change(Path::new("/a")), Some(-78_000));
        // A state never stat'ed after a read cannot say "unchanged": it is read back.
        let mut never = cold(2);
        never.tail = TailState::resumed(FileId { dev: 7, ino: 2 }, 10, 2, 0);
        t.insert(FileName::new(Path::new("/b")), never);
        assert!(t.freeze(Path::new("/b"), &gone));
        let stat = crate::tail::Stat {
            id: FileId { dev: 7, ino: 2 },
            size: 10,
            mtime_ns: i64::MIN,
            ctime_ns: i64::MIN,
        };
        // So it is read back; this spill cannot give it back, which is a change (a
        // fingerprint would have said "unchanged").
        assert!(!t.frozen_same(Path::new("/b"), &stat));
        assert_eq!(t.same_stat(Path::new("/b"), &stat), Some(false));
        let back = t.get_mut(Path::new("/a")).unwrap();
        assert_eq!(back.tail.id(), FileId { dev: 0, ino: 0 });
        assert_eq!(back.tail.offset(), 0);
        assert!(back.cold.is_none());
        assert_eq!(back.last_change, -78_000);
        let fresh = crate::tail::Stat {
            id: FileId { dev: 7, ino: 1 },
            size: 5001,
            mtime_ns: -3,
            ctime_ns: 1_700_000_000_123_456_789,
        };
        assert_eq!(back.tail.compare(&fresh), crate::tail::Change::Replaced);
    }
}
