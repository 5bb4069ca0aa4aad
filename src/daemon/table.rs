//! The tracked-file table's storage: each file's name and [`Tracked`] entry in one list,
//! found by path through a table of slot numbers.
//!
//! Sized for 100,000 files. As a map of name → boxed entry it took a 128-byte allocation
//! per file, made while the history read allocated and freed the sessions around it, and
//! 262,144 slots of 24 bytes at 117,758 files (6.6 MB). Here the entries are one list (a
//! slot of 136 bytes, freed slots reused) and the map a table of 5-byte slots.

use super::name::FileName;
use super::tracked::Tracked;
use crate::slots::Slots;
use foldhash::fast::RandomState;
use std::hash::BuildHasher;
use std::path::Path;

// A slot of the list: at 131,072 slots (117,758 files), every 8 bytes more is 1 MB.
const _: () = assert!(size_of::<Option<(FileName, Tracked)>>() <= 136);

#[derive(Default)]
pub(super) struct Table {
    entries: Slots<(FileName, Tracked)>,
    hasher: RandomState,
}

impl Table {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn find(&self, path: &Path) -> Option<u32> {
        self.find_at(self.hasher.hash_one(path), path)
    }

    /// [`Table::find`] with the path's hash already made.
    fn find_at(&self, h: u64, path: &Path) -> Option<u32> {
        self.entries.find(h, |(name, _)| name.path() == path)
    }

    pub fn contains_key(&self, path: &Path) -> bool {
        self.find(path).is_some()
    }

    pub fn get_key_value(&self, path: &Path) -> Option<(&FileName, &Tracked)> {
        let n = self.find(path)?;
        self.entries.get(n).map(|(k, t)| (k, t))
    }

    pub fn get(&self, path: &Path) -> Option<&Tracked> {
        self.get_key_value(path).map(|(_, t)| t)
    }

    pub fn get_mut(&mut self, path: &Path) -> Option<&mut Tracked> {
        self.get_named_mut(path).map(|(_, t)| t)
    }

    /// The entry for `path`, with the name the table holds it by (a feed made for it
    /// shares that name).
    pub fn get_named_mut(&mut self, path: &Path) -> Option<(&FileName, &mut Tracked)> {
        let n = self.find(path)?;
        self.entries.get_mut(n).map(|(k, t)| (&*k, t))
    }

    /// Tracks `name` (replacing its entry if it was tracked).
    pub fn insert(&mut self, name: FileName, t: Tracked) {
        let h = self.hasher.hash_one(name.path());
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
        let n = self.find_at(h, path)?;
        self.entries.remove(n, h).map(|(_, t)| t)
    }

    pub fn keys(&self) -> impl Iterator<Item = &FileName> {
        self.iter().map(|(k, _)| k)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&FileName, &Tracked)> {
        self.entries.iter().map(|(k, t)| (k, t))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&FileName, &mut Tracked)> {
        self.entries.iter_mut().map(|(k, t)| (&*k, t))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProviderKind;
    use crate::tail::{FileId, TailState};

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
            assert_eq!(t.get(Path::new(&p)).map(ino), kept.then_some(i));
            if kept {
                let (k, _) = t.get_key_value(Path::new(&p)).unwrap();
                assert_eq!(&**k.name(), p);
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
        assert_eq!(t.get(Path::new("/a")).map(ino), Some(2));
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
        assert_eq!(t.get(Path::new("/c")).map(ino), Some(3));
    }
}
