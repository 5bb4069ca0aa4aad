//! The seen-set: event ids already emitted, so re-reads and resumed copies stay silent.

use lru::LruCache;
use std::num::NonZeroUsize;

/// Default number of ids remembered.
pub const DEFAULT_SEEN: usize = 65_536;

pub struct Seen {
    ids: LruCache<String, ()>,
}

impl Seen {
    pub fn new(capacity: usize) -> Self {
        Seen {
            ids: LruCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// True if `id` is new (and remembers it).
    pub fn insert(&mut self, id: &str) -> bool {
        if self.ids.get(id).is_some() {
            return false;
        }
        self.ids.put(id.to_owned(), ());
        true
    }
}
