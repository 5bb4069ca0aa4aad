//! The ids a remote handed on lately: an id seen again is dropped.

use std::collections::{HashSet, VecDeque};

/// How many ids are remembered per remote (the remote's own ring is smaller).
const KEEP: usize = 4096;

#[derive(Debug, Default)]
pub(super) struct Recent {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Recent {
    pub fn from_saved(ids: Vec<String>) -> Recent {
        let mut r = Recent::default();
        for id in ids {
            r.insert(&id);
        }
        r
    }

    /// False when `id` was seen already.
    pub fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == KEEP
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.order.push_back(id.to_owned());
        self.set.insert(id.to_owned());
        true
    }

    /// The newest `n`, oldest first (what is saved).
    pub fn newest(&self, n: usize) -> Vec<String> {
        let skip = self.order.len().saturating_sub(n);
        self.order.iter().skip(skip).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_repeats_and_forgets_the_oldest() {
        let mut r = Recent::from_saved(vec!["a".to_owned()]);
        assert!(!r.insert("a"));
        assert!(r.insert("b"));
        for i in 0..KEEP {
            r.insert(&i.to_string());
        }
        assert!(r.insert("a"), "the oldest is forgotten past KEEP");
        assert_eq!(r.newest(2), vec![(KEEP - 1).to_string(), "a".to_owned()]);
    }
}
