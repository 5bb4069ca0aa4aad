//! The spill records ("puts") that parked sessions' rows lie in, each held once by the
//! `status` table, with a count of its rows there.
//!
//! A parked row names its put by number, 4 bytes, where a handle to it took 16: the
//! table's entry falls from 32 bytes to 16, and a B-tree node of eleven entries from
//! 632 bytes to 456, which the allocator rounds to 512 rather than 640 (1.4 MB less at
//! 117,758 sessions, one node per eleven).

use super::rows::RowAt;
use crate::reduce::Spilled;
use std::collections::HashMap;
use std::sync::Arc;

/// A parked row as the table keeps it: which put, and where in it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kept {
    put: u32,
    from: u32,
    len: u32,
}

/// The held puts: a slot each, used again once its last row is gone.
#[derive(Debug, Default)]
pub(super) struct Puts {
    held: Vec<Option<(Arc<dyn Spilled>, u32)>>,
    free: Vec<u32>,
}

/// The puts held while one batch is applied, by address: a batch's rows come in the
/// batch's order, not their puts', so one put's rows do not all come in a row.
pub(super) type Batch = HashMap<usize, u32>;

impl Puts {
    /// Holds `row`'s put for one more row; `None` if no number is left (never, in
    /// practice: every put holds a row).
    pub fn hold(&mut self, row: &RowAt, batch: &mut Batch) -> Option<Kept> {
        let addr = Arc::as_ptr(&row.put).cast::<()>().addr();
        // The number the batch gave this put, if it still holds it: a put whose rows were
        // all let go within the batch gave its number up, perhaps to another put.
        let known = batch.get(&addr).copied().filter(|&n| {
            self.held
                .get(n as usize)
                .and_then(Option::as_ref)
                .is_some_and(|(p, _)| Arc::ptr_eq(p, &row.put))
        });
        let put = match known {
            Some(n) => n,
            None => {
                let n = match self.free.pop() {
                    Some(n) => n,
                    None => {
                        self.held.push(None);
                        u32::try_from(self.held.len() - 1).ok()?
                    }
                };
                self.held[n as usize] = Some((row.put.clone(), 0));
                batch.insert(addr, n);
                n
            }
        };
        let (_, rows) = self.held.get_mut(put as usize)?.as_mut()?;
        *rows += 1;
        Some(Kept {
            put,
            from: row.from,
            len: row.len,
        })
    }

    /// A row of `kept`'s put is gone; the last one lets the put go (its room in the
    /// spill with it).
    pub fn release(&mut self, kept: Kept) {
        let Some(slot) = self.held.get_mut(kept.put as usize) else {
            return;
        };
        if let Some((_, rows)) = slot.as_mut() {
            *rows = rows.saturating_sub(1);
            if *rows == 0 {
                *slot = None;
                self.free.push(kept.put);
            }
        }
    }

    /// The row `kept` names, with a handle to its put, for an answer read on another
    /// thread.
    pub fn row(&self, kept: Kept) -> Option<RowAt> {
        let (put, _) = self.held.get(kept.put as usize)?.as_ref()?;
        Some(RowAt {
            put: put.clone(),
            from: kept.from,
            len: kept.len,
        })
    }

    /// How many puts are held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.held.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Bytes(Vec<u8>);

    impl Spilled for Bytes {
        fn read(&self) -> Option<Vec<u8>> {
            Some(self.0.clone())
        }
    }

    fn row(put: &Arc<dyn Spilled>, from: u32, len: u32) -> RowAt {
        RowAt {
            put: put.clone(),
            from,
            len,
        }
    }

    fn read(puts: &Puts, kept: Kept) -> Vec<u8> {
        let r = puts.row(kept).unwrap();
        let mut out = Vec::new();
        assert!(
            r.put
                .read_range_into(r.from as usize, r.len as usize, &mut out)
        );
        out
    }

    /// Rows of one put, held in any order and over two batches, share one handle; the
    /// put is let go with its last row, and its number is used again.
    #[test]
    fn a_put_is_held_once_and_let_go_with_its_last_row() {
        let a: Arc<dyn Spilled> = Arc::new(Bytes(b"row-onerow-two".to_vec()));
        let b: Arc<dyn Spilled> = Arc::new(Bytes(b"other".to_vec()));
        let mut puts = Puts::default();
        let mut batch = Batch::new();
        let one = puts.hold(&row(&a, 0, 7), &mut batch).unwrap();
        let other = puts.hold(&row(&b, 0, 5), &mut batch).unwrap();
        let two = puts.hold(&row(&a, 7, 7), &mut batch).unwrap();
        assert_eq!(puts.len(), 2);
        // The table's one handle, and this test's.
        assert_eq!(Arc::strong_count(&a), 2);
        assert_eq!(read(&puts, two), b"row-two");
        // Another batch holding a row of `a` takes a second slot for it: correct, if
        // not the fewest handles.
        let again = puts.hold(&row(&a, 0, 7), &mut Batch::new()).unwrap();
        assert_eq!(puts.len(), 3);
        puts.release(again);
        puts.release(one);
        assert_eq!(Arc::strong_count(&a), 2, "one row of `a` is still held");
        puts.release(two);
        assert_eq!(Arc::strong_count(&a), 1, "`a` let go with its last row");
        assert!(puts.row(one).is_none());
        assert_eq!(puts.len(), 1);
        // A freed number is used again.
        let c: Arc<dyn Spilled> = Arc::new(Bytes(b"c".to_vec()));
        let held = puts.hold(&row(&c, 0, 1), &mut Batch::new()).unwrap();
        assert!(held.put < 3);
        assert_eq!(read(&puts, other), b"other");
    }

    /// A put let go within a batch gives its number up; a later row of it in the same
    /// batch takes a number of its own, not the one another put took since.
    #[test]
    fn a_number_given_up_within_a_batch_is_not_taken_for_the_old_put() {
        let a: Arc<dyn Spilled> = Arc::new(Bytes(b"aaaa".to_vec()));
        let b: Arc<dyn Spilled> = Arc::new(Bytes(b"bbbb".to_vec()));
        let mut puts = Puts::default();
        let mut batch = Batch::new();
        let first = puts.hold(&row(&a, 0, 2), &mut batch).unwrap();
        puts.release(first);
        let of_b = puts.hold(&row(&b, 0, 4), &mut batch).unwrap();
        assert_eq!(of_b.put, first.put, "the freed number is used again");
        let again = puts.hold(&row(&a, 2, 2), &mut batch).unwrap();
        assert_ne!(again.put, of_b.put);
        assert_eq!(read(&puts, again), b"aa");
        assert_eq!(read(&puts, of_b), b"bbbb");
    }
}
