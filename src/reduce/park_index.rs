//! Where the parked files are: each one's saved form, found by its path, and which file
//! each parked key belongs to.
//!
//! Sized for 100,000 idle files. As two maps (path → saved form, key hash → path) it took
//! 17.3 MB at 117,758 files: each map just past 7/8 of 131,072 slots, so 262,144, of 40
//! and 24 bytes. Here the files are one list (a slot of 32 bytes each, grown as a `Vec`),
//! found by path through a table of slot numbers (5 bytes a bucket), and by key through
//! a sorted list of key hashes and slots (12 bytes a key, [`KeySlots`]): about 6.5 MB in
//! all.

use super::key_slots::KeySlots;
use crate::slots::Slots;
use foldhash::fast::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;

/// A parked file: its name and its sessions as saved (`K`: the parked form's
/// [`super::park::Kept`]).
struct Slot<K> {
    path: Arc<str>,
    kept: K,
}

/// The parked files and their keys.
pub(super) struct Index<K> {
    /// The files, found by path.
    files: Slots<Slot<K>>,
    hasher: RandomState,
    /// A hash of each parked key, with its file's slot. A hash, not the key: the index
    /// must cost far less than the state it stands for, and a collision only brings a
    /// file back early.
    by_key: KeySlots,
}

impl<K> Default for Index<K> {
    fn default() -> Self {
        Index {
            files: Slots::default(),
            hasher: RandomState::default(),
            by_key: KeySlots::default(),
        }
    }
}

impl<K> Index<K> {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// How many keys are parked.
    pub fn keys(&self) -> usize {
        self.by_key.len()
    }

    /// The slot of the file parked at `path`.
    pub fn find(&self, path: &str) -> Option<u32> {
        self.find_at(self.hasher.hash_one(path), path)
    }

    /// [`Index::find`] with the path's hash already made.
    fn find_at(&self, h: u64, path: &str) -> Option<u32> {
        self.files.find(h, |s| &*s.path == path)
    }

    /// The path of the file in slot `n`.
    pub fn path(&self, n: u32) -> Option<&Arc<str>> {
        self.files.get(n).map(|s| &s.path)
    }

    /// The saved form of the file parked at `path`.
    pub fn get(&self, path: &str) -> Option<&K> {
        self.find(path)
            .and_then(|n| self.files.get(n))
            .map(|s| &s.kept)
    }

    /// Every parked file, with its saved form.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &K)> {
        self.files.iter().map(|s| (&s.path, &s.kept))
    }

    /// Parks a file not parked yet; its slot's number.
    pub fn insert(&mut self, path: Arc<str>, kept: K) -> u32 {
        let h = self.hasher.hash_one(&*path);
        let hasher = &self.hasher;
        self.files
            .insert(h, Slot { path, kept }, |s| hasher.hash_one(&*s.path))
    }

    /// Takes the file parked at `path` out (not its keys: see [`Index::remove_key`] and
    /// [`Index::drop_keys`]); its slot's number and its path.
    pub fn remove(&mut self, path: &str) -> Option<(u32, Arc<str>)> {
        let h = self.hasher.hash_one(path);
        let n = self.find_at(h, path)?;
        let slot = self.files.remove(n, h)?;
        if self.files.is_empty() {
            // No file is parked: no key is either, and the room goes back.
            self.by_key = KeySlots::default();
        }
        Some((n, slot.path))
    }

    /// Notes that `key_hash`'s session is parked in slot `n`.
    pub fn add_key(&mut self, key_hash: u64, n: u32) {
        self.by_key.insert(key_hash, n);
    }

    /// The path of the file a parked key may belong to.
    pub fn path_of_key(&self, key_hash: u64) -> Option<&Arc<str>> {
        self.path(self.by_key.get(key_hash)?)
    }

    /// Forgets `key_hash` if it belongs to slot `n`.
    pub fn remove_key(&mut self, key_hash: u64, n: u32) {
        self.by_key.remove(key_hash, n);
    }

    /// Forgets every key of slot `n` (whose saved form could not be read back: which keys
    /// it had is not known).
    pub fn drop_keys(&mut self, n: u32) {
        self.by_key.remove_slot(n);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn kept(text: &str) -> String {
        text.to_owned()
    }

    fn text(i: &Index<String>, path: &str) -> Option<String> {
        i.get(path).cloned()
    }

    /// Files come and go, slots are used again, and each lookup finds its own file's
    /// saved form: by path, and through its keys.
    #[test]
    fn files_and_keys_are_found_after_others_come_and_go() {
        let mut i = Index::<String>::default();
        let mut slots = Vec::new();
        for f in 0..1000u64 {
            let n = i.insert(Arc::from(format!("/t/{f}.jsonl")), kept(&format!("s{f}")));
            i.add_key(f * 2, n);
            i.add_key(f * 2 + 1, n);
            slots.push(n);
        }
        assert_eq!(i.keys(), 2000);
        // Every third file comes back, its keys with it.
        for f in (0..1000u64).step_by(3) {
            let (n, path) = i.remove(&format!("/t/{f}.jsonl")).unwrap();
            assert_eq!(n, slots[f as usize]);
            assert_eq!(&*path, format!("/t/{f}.jsonl"));
            i.remove_key(f * 2, n);
            i.remove_key(f * 2 + 1, n);
        }
        // New files take the freed slots.
        for f in 1000..1100u64 {
            let n = i.insert(Arc::from(format!("/t/{f}.jsonl")), kept(&format!("s{f}")));
            assert!((n as usize) < 1000, "slot {n} is a freed one");
            i.add_key(f * 2, n);
        }
        for f in 0..1100u64 {
            let path = format!("/t/{f}.jsonl");
            let parked = f >= 1000 || f % 3 != 0;
            assert_eq!(i.find(&path).is_some(), parked, "{path}");
            assert_eq!(text(&i, &path), parked.then(|| format!("s{f}")));
            assert_eq!(
                i.path_of_key(f * 2).map(|p| p.to_string()),
                parked.then_some(path)
            );
        }
        assert_eq!(i.iter().count(), 1000 - 334 + 100);
        assert_eq!(i.keys(), 2 * (1000 - 334) + 100);
    }

    /// A key forgotten for a slot it does not belong to stays; one whose file could not
    /// be read back goes with all its file's keys.
    #[test]
    fn keys_are_forgotten_only_for_their_own_file() {
        let mut i = Index::<String>::default();
        let a = i.insert(Arc::from("/a"), kept("a"));
        let b = i.insert(Arc::from("/b"), kept("b"));
        i.add_key(7, a);
        i.add_key(8, b);
        i.add_key(9, b);
        i.remove_key(7, b);
        assert_eq!(i.path_of_key(7).map(|p| p.to_string()), Some("/a".into()));
        i.drop_keys(b);
        assert_eq!(i.path_of_key(8), None);
        assert_eq!(i.path_of_key(9), None);
        assert_eq!(i.keys(), 1);
        // The same hash parked again later points at its new file.
        i.add_key(7, b);
        assert_eq!(i.path_of_key(7).map(|p| p.to_string()), Some("/b".into()));
        assert_eq!(i.keys(), 1);
    }

    /// Once every file is back, the index starts again empty, and works as before.
    #[test]
    fn the_room_goes_back_once_every_file_is_back() {
        let mut i = Index::<String>::default();
        for f in 0..5000 {
            let n = i.insert(Arc::from(format!("/t/{f}")), kept("x"));
            i.add_key(f, n);
        }
        for f in 0..5000 {
            let (n, _) = i.remove(&format!("/t/{f}")).unwrap();
            i.remove_key(f, n);
        }
        assert!(i.is_empty());
        assert_eq!(i.files.capacity(), 0);
        assert_eq!(i.by_key.capacity(), 0);
        let n = i.insert(Arc::from("/again"), kept("y"));
        assert_eq!(n, 0);
        assert_eq!(text(&i, "/again").as_deref(), Some("y"));
        assert_eq!(i.remove("/t/3"), None);
    }
}
