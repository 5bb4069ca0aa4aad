//! The seen-set: event ids already emitted, so re-reads and resumed copies stay silent.

use lru::LruCache;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Default number of ids remembered.
pub const DEFAULT_SEEN: usize = 65_536;

/// Ids are kept as 64-bit hashes, not strings: a tenth of the memory, which matters when
/// every idle session holds a few. Two of 65,536 remembered ids share a hash with odds
/// of about 1 in 10^10, and then one event would be taken for a repeat.
pub struct Seen {
    /// Grows as ids come, up to `cap`: a daemon with few sessions never pays for the
    /// whole table up front.
    ids: LruCache<u64, ()>,
    cap: usize,
}

fn id_hash(id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

impl Seen {
    pub fn new(capacity: usize) -> Self {
        Seen {
            ids: LruCache::unbounded(),
            cap: capacity.max(1),
        }
    }

    /// True if `id` is new (and remembers it).
    pub fn insert(&mut self, id: &str) -> bool {
        let h = id_hash(id);
        if self.ids.get(&h).is_some() {
            return false;
        }
        if self.ids.len() >= self.cap {
            self.ids.pop_lru();
        }
        self.ids.put(h, ());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_least_recently_seen_past_its_capacity() {
        let mut s = Seen::new(2);
        assert!(s.insert("a"));
        assert!(s.insert("b"));
        assert!(!s.insert("a"));
        assert!(s.insert("c"));
        // "b" was the least recently seen: forgotten, so new again.
        assert!(s.insert("b"));
        assert!(!s.insert("b"));
    }
}
