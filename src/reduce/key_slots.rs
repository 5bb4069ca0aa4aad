//! Parked keys by hash, each with its file's slot: a sorted list, and a small table of
//! the keys added since the list was last built.
//!
//! As one hash table it took 3.41 MB at 117,758 keys: a table fills at most 7/8 of its
//! buckets, so one just past a power of two (114,688) doubles to 262,144 buckets of 13
//! bytes, 45 % of them used. The sorted list holds 12 bytes a key and nothing empty; the
//! table beside it holds at most [`RECENT`] keys, and is merged into the list when full
//! (one pass over the list, every few thousand keys parked). A lookup is a binary search.

use hashbrown::HashTable;

/// Keys added since the list was built, at most: the table stays under 110 KB, and a
/// merge (a copy of the list) comes once per this many keys parked.
const RECENT: usize = 4096;

/// A key's hash (as two halves, so that the entry is 12 bytes, not 16) and its file's
/// slot; [`GONE`] in a sorted entry whose key was forgotten.
#[derive(Clone, Copy)]
struct KeyAt([u32; 3]);

/// The slot of a sorted entry whose key was forgotten (dropped at the next merge).
const GONE: u32 = u32::MAX;

impl KeyAt {
    fn new(hash: u64, slot: u32) -> KeyAt {
        // Splitting the hash in halves: the truncations are the point.
        #[allow(clippy::cast_possible_truncation)]
        KeyAt([hash as u32, (hash >> 32) as u32, slot])
    }

    fn hash(self) -> u64 {
        u64::from(self.0[0]) | (u64::from(self.0[1]) << 32)
    }

    fn slot(self) -> u32 {
        self.0[2]
    }
}

pub(super) struct KeySlots {
    /// Sorted by hash, one entry per hash.
    sorted: Vec<KeyAt>,
    /// Entries of `sorted` marked [`GONE`].
    gone: usize,
    /// Keys not in `sorted` (never one that is, marked gone or not).
    recent: HashTable<KeyAt>,
    /// [`RECENT`], but for tests.
    recent_max: usize,
}

impl Default for KeySlots {
    fn default() -> Self {
        KeySlots::with_recent(RECENT)
    }
}

impl KeySlots {
    fn with_recent(recent_max: usize) -> Self {
        KeySlots {
            sorted: Vec::new(),
            gone: 0,
            recent: HashTable::new(),
            recent_max,
        }
    }

    /// How many keys are held.
    pub fn len(&self) -> usize {
        self.sorted.len() - self.gone + self.recent.len()
    }

    /// Room held, in entries.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.sorted.capacity() + self.recent.capacity()
    }

    fn at(&self, hash: u64) -> Option<usize> {
        self.sorted.binary_search_by_key(&hash, |k| k.hash()).ok()
    }

    /// The slot `hash` belongs to.
    pub fn get(&self, hash: u64) -> Option<u32> {
        if let Some(k) = self.recent.find(hash, |k| k.hash() == hash) {
            return Some(k.slot());
        }
        let k = self.sorted[self.at(hash)?];
        (k.slot() != GONE).then_some(k.slot())
    }

    /// `hash` belongs to `slot` now (whatever it belonged to before).
    pub fn insert(&mut self, hash: u64, slot: u32) {
        if let Some(k) = self.recent.find_mut(hash, |k| k.hash() == hash) {
            *k = KeyAt::new(hash, slot);
            return;
        }
        if let Some(i) = self.at(hash) {
            if self.sorted[i].slot() == GONE {
                self.gone -= 1;
            }
            self.sorted[i] = KeyAt::new(hash, slot);
            return;
        }
        self.recent
            .insert_unique(hash, KeyAt::new(hash, slot), |k| k.hash());
        if self.recent.len() >= self.recent_max {
            self.merge();
        }
    }

    /// Forgets `hash` if it belongs to `slot`.
    pub fn remove(&mut self, hash: u64, slot: u32) {
        if let Ok(e) = self
            .recent
            .find_entry(hash, |k| k.hash() == hash && k.slot() == slot)
        {
            e.remove();
        } else if let Some(i) = self.at(hash)
            && self.sorted[i].slot() == slot
        {
            self.forget(i);
        }
        self.settle();
    }

    /// Forgets every key of `slot`.
    pub fn remove_slot(&mut self, slot: u32) {
        self.recent.retain(|k| k.slot() != slot);
        for i in 0..self.sorted.len() {
            if self.sorted[i].slot() == slot {
                self.forget(i);
            }
        }
        self.settle();
    }

    fn forget(&mut self, i: usize) {
        self.sorted[i] = KeyAt::new(self.sorted[i].hash(), GONE);
        self.gone += 1;
    }

    /// With no key left the room goes back; with a quarter of the list forgotten, the
    /// list is built again without them.
    fn settle(&mut self) {
        if self.len() == 0 {
            *self = KeySlots::with_recent(self.recent_max);
        } else if self.gone > self.sorted.len() / 4 {
            self.merge();
        }
    }

    /// Builds the list again from what it holds and the recent keys, exactly as long as
    /// it needs to be.
    fn merge(&mut self) {
        let mut recent: Vec<KeyAt> = self.recent.drain().collect();
        recent.sort_unstable_by_key(|k| k.hash());
        let old = std::mem::take(&mut self.sorted);
        let mut out = Vec::with_capacity(old.len() - self.gone + recent.len());
        let mut old = old.into_iter().filter(|k| k.slot() != GONE).peekable();
        let mut new = recent.into_iter().peekable();
        // No hash is in both (an insert finds it in the list first).
        while let (Some(a), Some(b)) = (old.peek(), new.peek()) {
            if a.hash() < b.hash() {
                out.extend(old.next());
            } else {
                out.extend(new.next());
            }
        }
        out.extend(old);
        out.extend(new);
        self.sorted = out;
        self.gone = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64, u32),
        RemoveSlot(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few hashes and slots, so that inserts meet keys already held and removes
        // meet their own and others' slots.
        let hash = 0u64..500;
        let slot = 0u32..40;
        prop_oneof![
            6 => (hash.clone(), slot.clone()).prop_map(|(h, s)| Op::Insert(h.wrapping_mul(0x9e37_79b9_7f4a_7c15), s)),
            3 => (hash, slot.clone()).prop_map(|(h, s)| Op::Remove(h.wrapping_mul(0x9e37_79b9_7f4a_7c15), s)),
            1 => slot.prop_map(Op::RemoveSlot),
        ]
    }

    proptest! {
        /// Whatever is added and forgotten, in whatever order, across merges: the keys
        /// answer as a plain map of hash → slot would.
        #[test]
        fn answers_as_a_map_would(
            ops in prop::collection::vec(op(), 0..3000),
            recent in prop_oneof![Just(1usize), Just(7), Just(64), Just(RECENT)],
        ) {
            // A small recent table merges often, so the list is searched, marked and
            // built again many times over.
            let mut k = KeySlots::with_recent(recent);
            let mut model: HashMap<u64, u32> = HashMap::new();
            for op in &ops {
                match *op {
                    Op::Insert(h, s) => {
                        k.insert(h, s);
                        model.insert(h, s);
                    }
                    Op::Remove(h, s) => {
                        k.remove(h, s);
                        if model.get(&h) == Some(&s) {
                            model.remove(&h);
                        }
                    }
                    Op::RemoveSlot(s) => {
                        k.remove_slot(s);
                        model.retain(|_, v| *v != s);
                    }
                }
            }
            prop_assert_eq!(k.len(), model.len());
            for h in (0u64..500).map(|h| h.wrapping_mul(0x9e37_79b9_7f4a_7c15)) {
                prop_assert_eq!(k.get(h), model.get(&h).copied());
            }
        }
    }

    /// At 117,758 keys the list holds exactly them, and the recent table what came after
    /// the last merge: far less room than one table's 262,144 buckets.
    #[test]
    fn many_keys_take_about_their_own_room() {
        let mut k = KeySlots::default();
        for i in 0..117_758u64 {
            k.insert(
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                u32::try_from(i % 1000).unwrap(),
            );
        }
        assert_eq!(k.len(), 117_758);
        assert!(k.capacity() < 117_758 + 2 * RECENT, "{}", k.capacity());
        for i in (0..117_758u64).step_by(101) {
            assert_eq!(
                k.get(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                Some(u32::try_from(i % 1000).unwrap())
            );
        }
        // Every key of slot 7 forgotten; the rest stay.
        k.remove_slot(7);
        assert_eq!(k.len(), 117_758 - 118);
        assert_eq!(k.get(7u64.wrapping_mul(0x9e37_79b9_7f4a_7c15)), None);
        assert_eq!(k.get(8u64.wrapping_mul(0x9e37_79b9_7f4a_7c15)), Some(8));
    }
}
