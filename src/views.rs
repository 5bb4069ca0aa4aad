//! Every session's latest view, for `status` and systemd's STATUS= line, kept off the
//! core thread.
//!
//! The core sends only the sessions that changed ([`Reducer::take_changes`]), so what it
//! pays per publish follows what changed, not how many sessions exist. The keeper thread
//! owns the full table, sorted by key; a `status` client asks it for its rows (shared
//! views, not copies) and formats the rows on its own thread. Neither the core nor the
//! runtime thread that delivers events ever walks every session for `status`.
//!
//! [`Reducer::take_changes`]: crate::reduce::Reducer::take_changes

mod key;
mod puts;
mod rows;

use crate::model::{SessionKey, SessionState};
use crate::reduce::{ParkedView, SessionChange, SessionView};
use crossbeam_channel::{Receiver, Sender, never, select};
use key::Key;
use puts::{Kept, Puts};
use rows::ROWS_PUT;
pub use rows::{ParkedRows, RowAt, RowReads, RowSource};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use tokio::sync::watch;

/// The sessions that changed in one publish, as the core sends them.
pub type Batch = Vec<SessionChange>;

/// Every session's view, sorted by key.
pub type Snapshot = Vec<Arc<SessionView>>;

/// How many main sessions (not subagents) are in each state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts([usize; 5]);

impl Counts {
    fn slot(state: SessionState) -> usize {
        match state {
            SessionState::Working => 0,
            SessionState::Completed => 1,
            SessionState::Failed => 2,
            SessionState::Interrupted => 3,
            SessionState::NeedsInput => 4,
        }
    }

    pub fn get(&self, state: SessionState) -> usize {
        self.0[Self::slot(state)]
    }

    fn add(&mut self, key: &SessionKey, state: SessionState) {
        if key.agent.is_none() {
            self.0[Self::slot(state)] += 1;
        }
    }

    fn sub(&mut self, key: &SessionKey, state: SessionState) {
        if key.agent.is_none() {
            let n = &mut self.0[Self::slot(state)];
            *n = n.saturating_sub(1);
        }
    }
}

/// One session in the table: its view, or for a parked session its `status` row (most
/// sessions are idle, and this costs a fraction of a view).
#[derive(Debug)]
enum Entry {
    Live(Arc<SessionView>),
    /// Parked, its row kept: the row is all `status` prints of it and the state all the
    /// counts need. The parked view beside it made an entry 80 bytes, a handle to the
    /// row's put 32, and the put's number ([`Puts`]) 16 (there is one entry per parked
    /// session: 100,000 at a year of heavy use).
    Row(SessionState, Kept),
    /// Parked, its row not kept (no spill, or the spill refused it): the view is read
    /// back from the parked form when asked. Boxed: rare, and it must not widen the rest.
    Parked(Box<ParkedView>),
    /// Parked working, its row kept as it shows until it turns stale and after. Boxed:
    /// only sessions the liveness check cannot judge.
    Turning(SessionState, Box<Turning>),
}

/// A parked row that turns stale at `at` (Unix ms): `working` until then, `stale` after.
#[derive(Debug)]
struct Turning {
    at: i64,
    working: RowAt,
    stale: RowAt,
}

const _: () = assert!(size_of::<Entry>() <= 16);

impl Entry {
    fn state(&self) -> SessionState {
        match self {
            Entry::Live(v) => v.state,
            Entry::Row(state, _) => *state,
            Entry::Parked(p) => p.state,
            Entry::Turning(state, _) => *state,
        }
    }
}

/// The full table, brought up to date one batch at a time.
#[derive(Debug, Default)]
pub struct Table {
    sessions: BTreeMap<Key, Entry>,
    counts: Counts,
    /// `baton_sessions`, kept with `counts`.
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Where parked sessions' rows are kept, if anywhere.
    rows: Option<ParkedRows>,
    /// The puts those rows lie in.
    puts: Puts,
    /// Sessions added since the table was last packed ([`Table::pack`]).
    added: usize,
}

/// The table is packed once it has grown by a quarter (and at least this many sessions)
/// since it last was.
const PACK_AFTER: usize = 1024;

impl Table {
    /// A table that keeps parked sessions' rows in `rows` (see [`ParkedRows`]).
    pub fn with_parked_rows(rows: ParkedRows) -> Table {
        Table {
            rows: Some(rows),
            ..Table::default()
        }
    }

    /// Applies one batch of changes: costs the batch, not the table.
    pub fn apply(&mut self, batch: Batch) {
        let mut rows = self.park_rows(&batch).into_iter();
        let mut held = puts::Batch::new();
        for change in batch {
            let (key, entry) = match change {
                SessionChange::Updated(v) => (v.key.clone(), Some(Entry::Live(Arc::new(v)))),
                SessionChange::Parked(key, p) => {
                    let entry = match (rows.next(), p.stale_at) {
                        (Some((Some(working), Some(stale))), Some(at)) => {
                            Entry::Turning(p.state, Box::new(Turning { at, working, stale }))
                        }
                        (Some((Some(row), None)), None) => match self.puts.hold(&row, &mut held) {
                            Some(kept) => Entry::Row(p.state, kept),
                            None => Entry::Parked(Box::new(p)),
                        },
                        _ => Entry::Parked(Box::new(p)),
                    };
                    (key, Some(entry))
                }
                SessionChange::Removed(key) => (key, None),
            };
            let at = Key::new(&key);
            let old = match entry {
                Some(e) => {
                    self.counts.add(&key, e.state());
                    self.gauge(&key, e.state(), 1);
                    self.sessions.insert(at, e)
                }
                None => self.sessions.remove(&at),
            };
            match old {
                Some(old) => {
                    self.counts.sub(&key, old.state());
                    self.gauge(&key, old.state(), -1);
                    if let Entry::Row(_, kept) = old {
                        self.puts.release(kept);
                    }
                }
                None => self.added += 1,
            }
        }
        if self.added >= PACK_AFTER.max(self.sessions.len() / 4) {
            self.pack();
        }
    }

    /// Builds the B-tree again from its sorted entries, which fills every node. Sessions
    /// arrive in no order (a history read publishes them as their files are read), and a
    /// B-tree grown that way keeps its nodes about two thirds full: at 100,000 sessions a
    /// third of its 10 MB held nothing. Packing after each growth by a quarter costs a
    /// few copies of the table in all, on this thread, while it grows.
    fn pack(&mut self) {
        self.sessions = std::mem::take(&mut self.sessions).into_iter().collect();
        self.added = 0;
    }

    /// The rows of the sessions `batch` parks, in its order, one for each (and for one
    /// that turns stale, its row after too): formatted and put in the spill a few hundred
    /// at a time, in key order. A `status` answer walks the table in key order too, so a
    /// put then holds a run of neighbouring rows, which [`RowReads`] reads at once (a
    /// history read parks most sessions in one batch).
    fn park_rows(&self, batch: &Batch) -> Vec<(Option<RowAt>, Option<RowAt>)> {
        let parked: Vec<(&SessionKey, &ParkedView)> = batch
            .iter()
            .filter_map(|c| match c {
                SessionChange::Parked(key, p) => Some((key, p)),
                _ => None,
            })
            .collect();
        let Some(r) = &self.rows else {
            return parked.iter().map(|_| (None, None)).collect();
        };
        let mut out = vec![(None, None); parked.len()];
        let mut order: Vec<usize> = (0..parked.len()).collect();
        order.sort_by_key(|&i| parked[i].0);
        // Rows formatted but not put yet: their bytes, and (index in `out`, whether the
        // row after it turns stale, from, len).
        let mut buf = Vec::new();
        let mut pending: Vec<(usize, bool, u32, u32)> = Vec::new();
        type Out = Vec<(Option<RowAt>, Option<RowAt>)>;
        let put = |buf: &mut Vec<u8>, pending: &mut Vec<(usize, bool, u32, u32)>, out: &mut Out| {
            if let Some(p) = (!buf.is_empty()).then(|| r.spill.put(buf)).flatten() {
                for &(i, stale, from, len) in pending.iter() {
                    let at = Some(RowAt {
                        put: p.clone(),
                        from,
                        len,
                    });
                    if stale {
                        out[i].1 = at;
                    } else {
                        out[i].0 = at;
                    }
                }
            }
            buf.clear();
            pending.clear();
        };
        for i in order {
            let (key, p) = parked[i];
            let Some(view) = p.view(key) else {
                continue;
            };
            // As of a time past every record, with no quiet period, a row shows stale if
            // it ever will; as of the epoch with the longest, never.
            let rows = match p.stale_at {
                Some(_) => vec![
                    (false, (r.format)(&view, 0, u64::MAX)),
                    (true, (r.format)(&view, i64::MAX, 0)),
                ],
                None => vec![(false, (r.format)(&view, i64::MAX, 0))],
            };
            for (stale, row) in rows {
                let (Ok(from), Ok(len)) = (u32::try_from(buf.len()), u32::try_from(row.len()))
                else {
                    continue;
                };
                buf.extend_from_slice(&row);
                pending.push((i, stale, from, len));
            }
            if buf.len() >= ROWS_PUT {
                put(&mut buf, &mut pending, &mut out);
            }
        }
        put(&mut buf, &mut pending, &mut out);
        out
    }

    fn gauge(&self, key: &SessionKey, state: SessionState, delta: i64) {
        if let Some(m) = &self.metrics
            && key.agent.is_none()
        {
            m.session(key.provider.as_str(), state, delta);
        }
    }

    /// Every session's view, sorted by key, for a table that keeps no parked rows
    /// (made without [`Table::with_parked_rows`]): parked sessions are read back here. A
    /// parked session whose row is kept has only its key and state here; its row is in
    /// [`Table::rows`].
    pub fn snapshot(&self) -> Snapshot {
        // The time only picks a parked row, and a view carries none.
        self.rows(0).iter().map(RowSource::view).collect()
    }

    /// Every session's row source as of `now` (Unix ms), sorted by key: cheap (shared
    /// handles), so the keeper is free again at once and the asking thread does the
    /// reading.
    pub fn rows(&self, now: i64) -> Vec<RowSource> {
        self.sessions
            .iter()
            .map(|e| row_source(&self.puts, e, now))
            .collect()
    }

    /// [`Table::rows`] handed to `send` [`ROWS_CHUNK`] at a time, until it says stop.
    fn rows_in_chunks(&self, now: i64, mut send: impl FnMut(Vec<RowSource>) -> bool) {
        let mut it = self.sessions.iter();
        loop {
            let chunk: Vec<RowSource> = it
                .by_ref()
                .take(ROWS_CHUNK)
                .map(|e| row_source(&self.puts, e, now))
                .collect();
            if chunk.is_empty() || !send(chunk) {
                return;
            }
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

fn row_source(puts: &Puts, (key, e): (&Key, &Entry), now: i64) -> RowSource {
    let key = key.key();
    match e {
        Entry::Live(v) => RowSource::View(v.clone()),
        Entry::Row(state, kept) => match puts.row(*kept) {
            Some(row) => RowSource::Row {
                key,
                state: *state,
                row,
            },
            // Never: a kept row holds its put. Its key and state are what is left.
            None => RowSource::View(Arc::new(SessionView::bare(&key, *state))),
        },
        Entry::Turning(state, t) => RowSource::Row {
            key,
            state: *state,
            row: if now > t.at { &t.stale } else { &t.working }.clone(),
        },
        Entry::Parked(p) => RowSource::Parked {
            key,
            view: (**p).clone(),
        },
    }
}

/// Row sources sent to a `status` answer at a time: the answer's first row goes out as
/// soon as the first of them are made, not after every one is (at 100,000 sessions,
/// 30-45 ms of the keeper's time).
const ROWS_CHUNK: usize = 4096;

/// Where the core sends its batches.
pub type ChangeTx = Sender<Batch>;

/// Asks the keeper for the table's rows; cheap to clone.
#[derive(Clone)]
pub struct Client {
    requests: Sender<Request>,
}

/// What a [`Client`] asks the keeper for: every session's row source.
struct Request(Sender<Vec<RowSource>>);

impl Client {
    /// Every session's row source (for `status` and `mute`), as of every batch the core
    /// sent before this call, in key order, a chunk at a time as the keeper makes them
    /// (it makes them all at once: the answer is one moment's table); none once the
    /// keeper is gone (at shutdown).
    pub fn rows(&self) -> impl Iterator<Item = Vec<RowSource>> {
        // Unbounded: the keeper never waits for a slow client.
        let (tx, rx) = crossbeam_channel::unbounded();
        let asked = self.requests.send(Request(tx)).is_ok();
        asked.then_some(rx).into_iter().flatten()
    }
}

/// Starts the keeper thread. It publishes the counts on `counts` whenever they change,
/// and ends when both the core's sender and every [`Client`] are gone. Not on the
/// shutdown token itself: `status` is answered until the socket closes, and the core and
/// the socket server, which hold those ends, stop on the token. With `metrics`, it keeps
/// `baton_sessions` there too; with `rows`, it keeps parked sessions' rows there.
pub fn spawn(
    counts: watch::Sender<Counts>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    rows: Option<ParkedRows>,
) -> io::Result<(ChangeTx, Client)> {
    // Unbounded: the core must never wait for `status`. The keeper drains it at once,
    // so it holds at most the batches of one scheduling delay.
    let (change_tx, changes) = crossbeam_channel::unbounded();
    let (requests_tx, requests) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("baton-views".to_owned())
        .spawn(move || keep(&changes, &requests, &counts, metrics, rows))?;
    Ok((
        change_tx,
        Client {
            requests: requests_tx,
        },
    ))
}

fn keep(
    changes: &Receiver<Batch>,
    requests: &Receiver<Request>,
    counts: &watch::Sender<Counts>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    rows: Option<ParkedRows>,
) {
    let mut table = Table {
        metrics,
        rows,
        ..Table::default()
    };
    let (no_changes, no_requests) = (never(), never());
    let (mut changes, mut requests) = (Some(changes), Some(requests));
    let publish = |table: &Table| {
        let c = table.counts();
        counts.send_if_modified(|old| std::mem::replace(old, c) != c);
    };
    while changes.is_some() || requests.is_some() {
        select! {
            recv(changes.unwrap_or(&no_changes)) -> b => match b {
                Ok(b) => {
                    table.apply(b);
                    drain(changes, &mut table);
                    publish(&table);
                }
                Err(_) => changes = None,
            },
            recv(requests.unwrap_or(&no_requests)) -> r => match r {
                Ok(reply) => {
                    // What the core sent before the request was made counts.
                    drain(changes, &mut table);
                    publish(&table);
                    let Request(tx) = reply;
                    let now = crate::clock::wall_now();
                    table.rows_in_chunks(now, |chunk| tx.send(chunk).is_ok());
                }
                Err(_) => requests = None,
            },
        }
    }
}

fn drain(changes: Option<&Receiver<Batch>>, table: &mut Table) {
    if let Some(rx) = changes {
        for b in rx.try_iter() {
            table.apply(b);
        }
    }
}

/// A session view for tests.
#[cfg(test)]
pub(crate) fn test_view(session: &str, agent: Option<&str>, state: SessionState) -> SessionView {
    let key = SessionKey {
        provider: crate::model::ProviderKind::Claude,
        session: session.to_owned(),
        agent: agent.map(str::to_owned),
    };
    SessionView {
        path: "/p".into(),
        line: 1,
        ..SessionView::bare(&key, state)
    }
}

#[cfg(test)]
mod tests {
    use super::test_view as view;
    use super::*;

    fn sessions(s: &Snapshot) -> Vec<(&str, SessionState)> {
        s.iter()
            .map(|v| (v.key.session.as_str(), v.state))
            .collect()
    }

    #[test]
    fn table_keeps_the_latest_view_sorted_and_counts_main_sessions() {
        use SessionState::*;
        let mut t = Table::default();
        t.apply(vec![
            SessionChange::Updated(view("b", None, Working)),
            SessionChange::Updated(view("a", None, Working)),
            SessionChange::Updated(view("a", Some("sub"), Working)),
            SessionChange::Updated(view("c", None, Failed)),
        ]);
        assert_eq!(
            sessions(&t.snapshot()),
            [
                ("a", Working),
                ("a", Working),
                ("b", Working),
                ("c", Failed)
            ]
        );
        assert_eq!(t.counts().get(Working), 2);
        t.apply(vec![
            SessionChange::Updated(view("b", None, Completed)),
            SessionChange::Removed(view("c", None, Failed).key),
            SessionChange::Removed(view("zz", None, Failed).key),
        ]);
        assert_eq!(
            sessions(&t.snapshot()),
            [("a", Working), ("a", Working), ("b", Completed)]
        );
        let c = t.counts();
        assert_eq!((c.get(Working), c.get(Completed), c.get(Failed)), (1, 1, 0));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_table_packed_as_it_grows_keeps_every_session_in_order() {
        use SessionState::*;
        let mut t = Table::default();
        let n = 5 * PACK_AFTER;
        // Far from key order, in batches of many sizes, with updates and removals.
        let names: Vec<String> = (0..n).map(|i| format!("s{:05}", (i * 7919) % n)).collect();
        let mut batches = Vec::new();
        let mut at = 0;
        for size in (1..).map(|k| k * 37) {
            if at >= n {
                break;
            }
            batches.push(&names[at..(at + size).min(n)]);
            at += size;
        }
        for names in &batches {
            let mut batch: Batch = names
                .iter()
                .map(|s| SessionChange::Updated(view(s, None, Working)))
                .collect();
            batch.extend(
                names
                    .iter()
                    .step_by(3)
                    .map(|s| SessionChange::Updated(view(s, None, Completed))),
            );
            batch.extend(
                names
                    .iter()
                    .step_by(10)
                    .map(|s| SessionChange::Removed(view(s, None, Working).key)),
            );
            t.apply(batch);
        }
        // Every session but each batch's tenth, completed where a third was.
        let mut want: Vec<(String, SessionState)> = Vec::new();
        for names in &batches {
            for (j, s) in names.iter().enumerate() {
                if j % 10 != 0 {
                    want.push((s.clone(), if j % 3 == 0 { Completed } else { Working }));
                }
            }
        }
        want.sort_by(|a, b| a.0.cmp(&b.0));
        let got: Vec<(String, SessionState)> = t
            .snapshot()
            .iter()
            .map(|v| (v.key.session.clone(), v.state))
            .collect();
        assert_eq!(got, want);
        let main = |st| want.iter().filter(|(_, s)| *s == st).count();
        assert_eq!(t.counts().get(Working), main(Working));
        assert_eq!(t.counts().get(Completed), main(Completed));
        assert_eq!(t.len(), want.len());
    }

    #[test]
    fn keeper_answers_with_every_batch_sent_before_the_request() {
        let (counts_tx, mut counts) = watch::channel(Counts::default());
        let (tx, client) = spawn(counts_tx, None, None).unwrap();
        for i in 0..100 {
            let name = format!("s{i:03}");
            tx.send(vec![SessionChange::Updated(view(
                &name,
                None,
                SessionState::Working,
            ))])
            .unwrap();
        }
        tx.send(vec![SessionChange::Updated(view(
            "s050",
            None,
            SessionState::Completed,
        ))])
        .unwrap();
        let snap: Snapshot = client.rows().flatten().map(|r| r.view()).collect();
        assert_eq!(snap.len(), 100);
        assert_eq!(snap[50].key.session, "s050");
        assert_eq!(snap[50].state, SessionState::Completed);
        let c = *counts.borrow_and_update();
        assert_eq!(c.get(SessionState::Working), 99);
        assert_eq!(c.get(SessionState::Completed), 1);

        // The core gone: the table is still served.
        drop(tx);
        assert_eq!(client.rows().flatten().count(), 100);
    }
}
