//! The seen-set: event ids already emitted, so re-reads and resumed copies stay silent.

use foldhash::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Default number of ids remembered.
pub const DEFAULT_SEEN: usize = 65_536;

/// Ids are kept as 64-bit hashes, not strings: a tenth of the memory, which matters when
/// every idle session holds a few. Two of the ids remembered share a hash with odds of
/// about 1 in 10^10, and then one event would be taken for a repeat.
///
/// Two generations instead of a strict LRU list: an id goes into the current one, and
/// one found in the previous moves up; when the current one holds `cap` ids it becomes
/// the previous one. So every id among the last `cap` distinct ones inserted or found is
/// remembered (what an LRU of `cap` keeps), at 9 bytes an id instead of an LRU's ~50.
pub struct Seen {
    current: HashSet<u64>,
    previous: HashSet<u64>,
    cap: usize,
}

fn id_hash(id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

impl Seen {
    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn new(capacity: usize) -> Self {
        Seen {
            current: HashSet::default(),
            previous: HashSet::default(),
            cap: capacity.max(1),
        }
    }

    /// True if `id` is new (and remembers it).
    pub fn insert(&mut self, id: &str) -> bool {
        self.insert_hash(id_hash(id))
    }

    /// [`Seen::insert`] for an id already hashed.
    pub fn insert_hash(&mut self, h: u64) -> bool {
        if self.current.contains(&h) {
            return false;
        }
        let known = self.previous.remove(&h);
        if self.current.len() >= self.cap {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(h);
        !known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_at_least_the_last_cap_ids_and_forgets_older_ones() {
        let mut s = Seen::new(3);
        for id in ["a", "b", "c", "d", "e"] {
            assert!(s.insert(id), "{id} is new");
        }
        // The last three are remembered, however the generations fall.
        for id in ["c", "d", "e"] {
            assert!(!s.insert(id), "{id} was seen");
        }
        // Finding an id keeps it: after three more new ids, "e" (found last) is still
        // there, while "a" and "b", never found again, are long gone.
        assert!(!s.insert("e"));
        for id in ["f", "g"] {
            assert!(s.insert(id));
        }
        assert!(!s.insert("e"));
        for id in ["a", "b"] {
            assert!(s.insert(id), "{id} was forgotten");
        }
    }

    #[test]
    fn memory_stays_bounded_by_two_generations() {
        let mut s = Seen::new(100);
        for i in 0..10_000 {
            s.insert(&i.to_string());
        }
        assert!(s.current.len() + s.previous.len() <= 200);
    }
}
