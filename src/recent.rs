//! A bounded set of the ids seen last, for dropping what a stream sends again: the
//! followers of `tail --follow` and `status --watch`, and the remote links.

use std::collections::{HashSet, VecDeque};

#[derive(Debug)]
pub struct Recent {
    cap: usize,
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Recent {
    /// Remembers at most `cap` ids (at least one), oldest forgotten first.
    pub fn new(cap: usize) -> Recent {
        Recent {
            cap: cap.max(1),
            order: VecDeque::new(),
            set: HashSet::new(),
        }
    }

    /// [`Recent::new`] holding `ids` (oldest first, as [`Recent::newest`] gives them).
    pub fn from_saved(cap: usize, ids: Vec<String>) -> Recent {
        let mut r = Recent::new(cap);
        for id in ids {
            r.insert(&id);
        }
        r
    }

    /// Adds `id`; false if it was there already.
    pub fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == self.cap
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
        const CAP: usize = 100;
        let mut r = Recent::from_saved(CAP, vec!["a".to_owned()]);
        assert!(!r.insert("a"));
        assert!(r.insert("b"));
        for i in 0..CAP {
            assert!(r.insert(&i.to_string()));
        }
        assert!(!r.insert(&(CAP - 1).to_string()));
        assert!(r.insert("a"), "the oldest is forgotten past the cap");
        assert_eq!(r.order.len(), CAP);
        assert_eq!(r.newest(2), vec![(CAP - 1).to_string(), "a".to_owned()]);
    }
}
