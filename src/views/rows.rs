//! A parked session's `status` row: where it was put in the spill, how a `status`
//! answer reads many of them back, and what the table hands the asking thread.

use crate::model::{SessionKey, SessionState};
use crate::reduce::{ParkedView, SessionView, Spill, Spilled};
use std::sync::Arc;

/// How a parked session's `status` row is kept: formatted once, when it is parked, and
/// put in `spill`. It changes at most once while parked: a working session the liveness
/// check cannot judge turns stale at a time its parked view says, so its row is kept
/// both ways. A `status` call then copies it instead of reading back and parsing the
/// session's whole saved state and formatting it again. The rows of one batch go in
/// together, up to [`ROWS_PUT`] bytes a put: a handle per row would cost more memory
/// than the spill saves.
pub struct ParkedRows {
    pub spill: Arc<dyn Spill>,
    /// The row's bytes as of a time (Unix ms) with a quiet period after which such a
    /// session shows stale, without the line end (the socket's format: `views/` knows
    /// none).
    pub format: fn(&SessionView, i64, u64) -> Vec<u8>,
}

impl std::fmt::Debug for ParkedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedRows").finish_non_exhaustive()
    }
}

/// Bytes of parked rows put in one spill record, at most (past one row).
pub(super) const ROWS_PUT: usize = 64 * 1024;

/// A parked session's row: where it lies in the spill record its batch was put in.
#[derive(Debug, Clone)]
pub struct RowAt {
    pub(super) put: Arc<dyn Spilled>,
    pub(super) from: u32,
    pub(super) len: u32,
}

impl RowAt {
    fn read_into(&self, out: &mut Vec<u8>) -> bool {
        self.put
            .read_range_into(self.from as usize, self.len as usize, out)
    }
}

/// Reads parked rows for one `status` answer, in the table's order. Rows parked together
/// lie together in one put (see [`Table::park_rows`]): when two rows in a row come from
/// the same put, the whole put is read once and the rows after it are copied from
/// memory, instead of one read each (one `pread` per row was half of a `status` answer
/// at 100,000 sessions). Rows from scattered puts cost one read each, as before.
#[derive(Default)]
pub struct RowReads {
    /// The puts read whole, newest last.
    whole: Vec<(Arc<dyn Spilled>, Vec<u8>)>,
    /// The put of the last row read on its own.
    last: Option<Arc<dyn Spilled>>,
}

/// Puts [`RowReads`] holds at once: a few, as rows of a few batches may interleave.
const WHOLE_PUTS: usize = 4;

impl RowReads {
    fn read_into(&mut self, r: &RowAt, out: &mut Vec<u8>) -> bool {
        let range = r.from as usize..r.from as usize + r.len as usize;
        if let Some((_, bytes)) = self.whole.iter().find(|(p, _)| Arc::ptr_eq(p, &r.put)) {
            return match bytes.get(range) {
                Some(b) => {
                    out.extend_from_slice(b);
                    true
                }
                None => false,
            };
        }
        if self.last.as_ref().is_some_and(|p| Arc::ptr_eq(p, &r.put))
            && let Some(bytes) = r.put.read()
            && let Some(b) = bytes.get(range)
        {
            out.extend_from_slice(b);
            if self.whole.len() == WHOLE_PUTS {
                self.whole.remove(0);
            }
            self.whole.push((r.put.clone(), bytes));
            self.last = None;
            return true;
        }
        self.last = Some(r.put.clone());
        r.read_into(out)
    }
}

/// One session of a `status` answer, as the table keeps it: resolved into a row by the
/// asking thread, not the keeper.
#[derive(Debug, Clone)]
pub enum RowSource {
    View(Arc<SessionView>),
    /// A parked session's row, as formatted when it was parked.
    Row {
        key: SessionKey,
        state: SessionState,
        row: RowAt,
    },
    /// A parked session whose row could not be kept: its view is read back from the
    /// parked form.
    Parked {
        key: SessionKey,
        view: ParkedView,
    },
}

impl RowSource {
    /// The row's bytes as formatted when parked; `None` for a live session, or if they
    /// cannot be read back (then format [`RowSource::view`]).
    pub fn row(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.row_into(&mut out).then_some(out)
    }

    /// [`RowSource::row`], appended to `out`; false (and `out` as it was) if there is none.
    pub fn row_into(&self, out: &mut Vec<u8>) -> bool {
        self.row_via(&mut RowReads::default(), out)
    }

    /// [`RowSource::row_into`] for one of many rows read in the table's order.
    pub fn row_via(&self, reads: &mut RowReads, out: &mut Vec<u8>) -> bool {
        match self {
            RowSource::Row { row, .. } => reads.read_into(row, out),
            RowSource::View(_) | RowSource::Parked { .. } => false,
        }
    }

    /// The session's view (a parked one read back from its saved form). For a parked
    /// row, or a parked form that cannot be read back, only its key and state: the row
    /// is what `status` prints of it, and this is what is left when it cannot be read.
    pub fn view(&self) -> Arc<SessionView> {
        match self {
            RowSource::View(v) => v.clone(),
            RowSource::Row { key, state, .. } => Arc::new(SessionView::bare(key, *state)),
            RowSource::Parked { key, view } => Arc::new(
                view.view(key)
                    .unwrap_or_else(|| SessionView::bare(key, view.state)),
            ),
        }
    }
}
