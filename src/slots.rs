//! Entries kept in one list and found by hash through a table of slot numbers: for
//! tables with an entry per file (100,000 at a year of heavy use), where a map's slots
//! would each hold a whole key and value (most of them empty), and a box per entry would
//! be a small allocation made among others that are freed, keeping their pages resident.
//! A slot number costs 4 bytes of the table; a freed slot is used again; once the last
//! entry goes, so does the room.

use hashbrown::HashTable;

/// Past this many slots the list grows by a sixteenth at a time, not twice over.
/// Doubling left up to half of a long list empty: at 117,758 files the frozen list held
/// 131,072 slots of 48 bytes and the parked index 131,072 of 32 (1.1 MB unused between
/// them, resident once the history read had touched it). A sixteenth leaves at most
/// 6 % unused, for about ten more copies of the list (each a `realloc`, often in place)
/// on the way from 65,536 to 120,000.
const GROW_BY_SIXTEENTHS_FROM: usize = 1 << 16;

pub struct Slots<T> {
    /// `None` where an entry was taken out; its number is in `free`.
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    index: HashTable<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
        }
    }
}

impl<T> Slots<T> {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The slot of the entry with this `hash` for which `eq` holds.
    pub fn find(&self, hash: u64, eq: impl Fn(&T) -> bool) -> Option<u32> {
        if self.index.is_empty() {
            return None;
        }
        let slots = &self.slots;
        self.index
            .find(hash, |&n| {
                slots
                    .get(n as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(&eq)
            })
            .copied()
    }

    pub fn get(&self, n: u32) -> Option<&T> {
        self.slots.get(n as usize).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, n: u32) -> Option<&mut T> {
        self.slots.get_mut(n as usize).and_then(Option::as_mut)
    }

    /// Adds `value` (not there yet) under `hash`, and returns its slot. `rehash` gives
    /// any entry's hash, for when the table grows.
    pub fn insert(&mut self, hash: u64, value: T, rehash: impl Fn(&T) -> u64) -> u32 {
        let n = match self.free.pop() {
            Some(n) => {
                self.slots[n as usize] = Some(value);
                n
            }
            None => {
                let len = self.slots.len();
                if len == self.slots.capacity() && len >= GROW_BY_SIXTEENTHS_FROM {
                    self.slots.reserve_exact(len / 16);
                }
                self.slots.push(Some(value));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let slots = &self.slots;
        self.index.insert_unique(hash, n, |&m| {
            slots
                .get(m as usize)
                .and_then(Option::as_ref)
                .map_or(0, &rehash)
        });
        n
    }

    /// Takes out the entry in slot `n`, whose hash is `hash`.
    pub fn remove(&mut self, n: u32, hash: u64) -> Option<T> {
        if let Ok(e) = self.index.find_entry(hash, |&m| m == n) {
            e.remove();
        }
        let value = self.slots.get_mut(n as usize)?.take()?;
        self.free.push(n);
        // After a burst of removals (a tree removed, every file brought back), the room
        // goes back too.
        if self.index.is_empty() {
            *self = Slots::default();
        }
        Some(value)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten()
    }

    /// Every entry, the room let go.
    pub fn into_values(self) -> impl Iterator<Item = T> {
        self.slots.into_iter().flatten()
    }

    /// How many slots the list has room for.
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// How many slots are in use or free to use again.
    pub fn span(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: u64) -> u64 {
        n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// A long list keeps at most a sixteenth of its slots unused, and every entry is
    /// still found in its slot.
    #[test]
    fn a_long_list_grows_by_a_sixteenth_and_finds_every_entry() {
        let mut s: Slots<u64> = Slots::default();
        let n: u64 = 117_758;
        let mut at = Vec::new();
        for i in 0..n {
            at.push(s.insert(hash(i), i, |&v| hash(v)));
        }
        assert_eq!(s.len(), 117_758);
        assert!(
            s.capacity() <= s.span() + s.span() / 16 + 1,
            "{} slots for {}",
            s.capacity(),
            s.span()
        );
        // Doubling would have given 131,072.
        assert!(s.capacity() < 131_072, "{}", s.capacity());
        for i in (0..n).step_by(997) {
            let slot = s.find(hash(i), |&v| v == i).expect("found");
            assert_eq!(slot, at[usize::try_from(i).expect("fits")]);
            assert_eq!(s.get(slot), Some(&i));
        }
        // A slot taken out is used again before the list grows.
        let cap = s.capacity();
        let freed = s.remove(at[5], hash(5)).expect("removed");
        assert_eq!(freed, 5);
        assert_eq!(s.insert(hash(5), 5, |&v| hash(v)), at[5]);
        assert_eq!(s.capacity(), cap);
    }
}
