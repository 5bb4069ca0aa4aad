//! Parked sessions: the sessions of a file that went cold, kept in their saved form
//! instead of as live state.
//!
//! A daemon watching thousands of idle sessions would otherwise hold every one's full
//! state (its map entry, strings and index) although nothing can happen to it until its
//! file changes. A file's sessions are parked only when no timer needs them (no pending
//! answer) and what `status` shows of them cannot change while they wait; `status`
//! keeps showing them from its own table. They come back, exactly as saved, the moment
//! anything asks for them: a record from their file or for one of their keys, a save of
//! the file's checkpoint, a settle, or forgetting the file.
//!
//! Where the daemon asks for it ([`Reducer::park_open_turns`]), a turn still open parks
//! too: a fifth of the sessions on a heavy machine are working or waiting in files idle
//! for hours (at 100,000 sessions, 35 MiB of the daemon's resident memory). What time
//! can still do to them is kept beside the saved form ([`Open`]): when the liveness
//! check falls due, which brings them back to be asked about; and a hash of each main
//! session's id, so a signal naming one by a prefix of its id finds it.
//!
//! The saved form can itself be kept out of memory, in a [`Spill`] the daemon hands over
//! (a scratch file): it is most of what an idle session costs. Without one, or when the
//! spill cannot take it, it stays in memory.

use super::Reducer;
use super::liveness::{judged, quiet_for};
use super::park_index::Index;
use super::saved::SavedSession;
use super::session::Session;
use super::views::{ParkedView, SessionChange};
use crate::clock::Now;
use crate::model::{SessionKey, SessionState};
use foldhash::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// Somewhere outside memory for parked sessions' saved form. A trait so that `reduce/`
/// does no I/O of its own: the daemon's is a file (`state::spill`).
pub trait Spill: Send + Sync + std::fmt::Debug {
    /// Keeps `bytes`, and hands back how to read them; `None` if it cannot take them
    /// (they then stay in memory).
    fn put(&self, bytes: &[u8]) -> Option<Arc<dyn Spilled>>;

    /// [`Spill::put`] for a [`Kept`]: where the bytes lie, in something many puts may
    /// share (the daemon's scratch file), so that one kept text costs no handle of its
    /// own. By default, a put of its own read from its first byte.
    fn put_at(&self, bytes: &[u8]) -> Option<SpillAt> {
        let len = u32::try_from(bytes.len()).ok()?;
        Some(SpillAt {
            file: Shared::new(self.put(bytes)?),
            at: 0,
            len,
        })
    }
}

/// Where a [`Spill`] put bytes: `len` bytes from `at` of `file`.
#[derive(Debug, Clone)]
pub struct SpillAt {
    pub file: Shared,
    pub at: u32,
    pub len: u32,
}

/// A [`Spilled`] many holders share, one pointer wide where an `Arc<dyn Spilled>` is
/// two: every parked file's entry and every cold file's entry in the daemon's table holds
/// one (at 100,000 files, the pointer more was 2 MB). Made once per scratch file, so the
/// extra indirection costs one allocation per file, not per text.
#[derive(Debug, Clone)]
pub struct Shared(Arc<Box<dyn Spilled>>);

impl Shared {
    pub fn new(s: impl Spilled + 'static) -> Shared {
        Shared(Arc::new(Box::new(s)))
    }

    /// Whether both are the one handle.
    pub fn ptr_eq(a: &Shared, b: &Shared) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for Shared {
    type Target = dyn Spilled;
    fn deref(&self) -> &(dyn Spilled + 'static) {
        &**self.0
    }
}

/// Bytes a [`Spill`] took. Dropping the last handle lets their space go.
pub trait Spilled: Send + Sync + std::fmt::Debug {
    /// The bytes as put; `None` if they cannot be read back.
    fn read(&self) -> Option<Vec<u8>>;

    /// Appends the bytes as put to `out`; false, with `out` as it was, if they cannot be
    /// read back. For many small reads into one buffer (a `status` answer's rows).
    fn read_into(&self, out: &mut Vec<u8>) -> bool {
        match self.read() {
            Some(b) => {
                out.extend_from_slice(&b);
                true
            }
            None => false,
        }
    }

    /// [`Spilled::read_into`] for `len` bytes from `from` of what was put: one of many
    /// small records put together (a batch of `status` rows).
    fn read_range_into(&self, from: usize, len: usize, out: &mut Vec<u8>) -> bool {
        match self.read() {
            Some(b) => match b.get(from..from.saturating_add(len)) {
                Some(r) => {
                    out.extend_from_slice(r);
                    true
                }
                None => false,
            },
            None => false,
        }
    }
}

/// A shared [`Spilled`] reads as what it shares ([`Shared`] wraps a scratch file's).
impl<T: Spilled + ?Sized> Spilled for Arc<T> {
    fn read(&self) -> Option<Vec<u8>> {
        (**self).read()
    }

    fn read_into(&self, out: &mut Vec<u8>) -> bool {
        (**self).read_into(out)
    }

    fn read_range_into(&self, from: usize, len: usize, out: &mut Vec<u8>) -> bool {
        (**self).read_range_into(from, len, out)
    }
}

/// Saved text kept for later: in memory, or spilled when a [`Spill`] takes it. A parked
/// file's sessions (`SavedSession` JSON), and the daemon's cold projector contexts.
///
/// 16 bytes and no allocation of its own when spilled: where the text lies in the
/// scratch file it shares with every other spilled text. With a handle of its own per
/// text (a 32-byte allocation) there were two per file, 6.8 MB at 100,000 files. Kept
/// in memory, the text is a [`Spilled`] of its own ([`Here`]). One shape for both, so
/// that `Option<Kept>` (the daemon's file entry holds one) needs no more room than
/// `Kept`.
#[derive(Debug, Clone)]
pub struct Kept(SpillAt);

const _: () = assert!(size_of::<Kept>() == 16 && size_of::<Option<Kept>>() == 16);

/// A text kept in memory, read as a [`Spilled`]: the whole text whatever the range (it
/// is all there is in it, and may be longer than a range can say).
#[derive(Debug)]
struct Here(String);

impl Spilled for Here {
    fn read(&self) -> Option<Vec<u8>> {
        Some(self.0.as_bytes().to_vec())
    }

    fn read_range_into(&self, _from: usize, _len: usize, out: &mut Vec<u8>) -> bool {
        out.extend_from_slice(self.0.as_bytes());
        true
    }
}

impl Kept {
    pub fn new(text: String, spill: Option<&Arc<dyn Spill>>) -> Kept {
        match spill.and_then(|s| s.put_at(text.as_bytes())) {
            Some(at) => Kept(at),
            None => Kept(SpillAt {
                file: Shared::new(Here(text)),
                at: 0,
                len: 0,
            }),
        }
    }

    /// The bytes as kept; `None` if they cannot be read back.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        let SpillAt { file, at, len } = &self.0;
        let mut out = Vec::with_capacity(*len as usize);
        file.read_range_into(*at as usize, *len as usize, &mut out)
            .then_some(out)
    }

    /// The text as kept; `None` if it cannot be read back.
    pub fn text(&self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }

    /// A parked file's sessions, as saved.
    pub(super) fn saved(&self) -> Result<Vec<SavedSession>, String> {
        let bytes = self.bytes().ok_or("the spill could not be read back")?;
        // `from_slice` checks UTF-8 as it parses: no second pass over the bytes.
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    }
}

/// Every parked file's sessions, and which file each parked key belongs to.
#[derive(Default)]
pub(super) struct Parked {
    /// Each parked file's sessions as saved (shared with the views of `status`, which
    /// read a parked session back from it when asked), by path and by key.
    index: Index<Kept>,
    /// Views of sessions parked before their change was published.
    pub(super) views: Vec<SessionChange>,
    /// Where the saved form goes, if anywhere but memory.
    spill: Option<Arc<dyn Spill>>,
    /// Files whose parked sessions could not be read back, with the history cut-off then
    /// in effect: each must be read again from its first byte ([`Reducer::take_lost`]),
    /// and until then its records are left for that re-read.
    pub(super) lost: Vec<(Arc<str>, Option<i64>)>,
    /// Parked files with a turn still open (their slots in `index`).
    pub(super) open_files: HashSet<u32>,
    /// What time can do to their main sessions on an open turn (see [`Open`]). One flat
    /// list, not an allocation per file: made as a file's sessions are freed, small
    /// allocations of their own would each keep one of those pages in use (at 100,000
    /// sessions 30 MiB resident for 3 MB of entries).
    pub(super) open: Vec<Open>,
}

/// A parked main session on an open turn: which one (its key's hash, and a hash of its
/// id's first block, so that a signal naming it by a prefix of its id finds it), and,
/// for one the liveness check judges, what tells when the check falls due. The saved
/// form keeps neither clock: `last_seen` is monotonic, and restoring counts from the
/// restore.
#[derive(Debug)]
pub(super) struct Open {
    /// Its file's slot in the index.
    slot: u32,
    key: u64,
    head: u64,
    pub(super) last_seen: u64,
    pub(super) last_ts: Option<i64>,
    /// Working, with no answer pending, and judged by the liveness check.
    pub(super) checked: bool,
}

/// Parked sessions that could not be read back (logged where it is found).
#[derive(Debug)]
pub(super) struct Unreadable;

fn key_hash(key: &SessionKey) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// A hash of `provider` and `id` up to its first `-`: every id a prefix signal
/// ([`crate::provider::signal::SessionRef::Prefix`]) names has its prefix's.
fn head_hash(provider: crate::model::ProviderKind, id: &str) -> u64 {
    let head = id.split('-').next().unwrap_or(id);
    let mut h = DefaultHasher::new();
    (provider, head).hash(&mut h);
    h.finish()
}

impl Parked {
    pub(super) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.index.keys()
    }

    /// The file a parked `key` may belong to.
    pub(super) fn path_of(&self, key: &SessionKey) -> Option<Arc<str>> {
        self.index.path_of_key(key_hash(key)).cloned()
    }

    /// The sessions parked for `path`, as saved; `Ok(None)` if none are.
    pub(super) fn saved(&self, path: &str) -> Result<Option<Vec<SavedSession>>, Unreadable> {
        let Some(blob) = self.index.get(path) else {
            return Ok(None);
        };
        blob.saved().map(Some).map_err(|e| {
            // Written by this process: only a failing disk under the spill, or a bug.
            tracing::error!(path = %path, error = %e,
                "Parked sessions unreadable; the transcript will be read again from its start.");
            Unreadable
        })
    }

    /// Every parked session, as saved (none of a file that cannot be read back).
    pub(super) fn all(&self) -> Vec<(Arc<str>, SavedSession)> {
        self.index
            .iter()
            .flat_map(|(p, _)| {
                self.saved(p)
                    .ok()
                    .flatten()
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |s| (p.clone(), s))
            })
            .collect()
    }

    /// True while records from `path` must wait for its re-read.
    pub(super) fn is_lost(&self, path: &str) -> bool {
        !self.lost.is_empty() && self.lost.iter().any(|(p, _)| &**p == path)
    }

    pub(super) fn has_views(&self) -> bool {
        !self.views.is_empty()
    }

    pub(super) fn has(&self, path: &str) -> bool {
        self.index.find(path).is_some()
    }

    /// The paths of the parked files whose slots `open` names (each once).
    fn paths_of<'a>(&self, open: impl Iterator<Item = &'a Open>) -> Vec<Arc<str>> {
        let mut slots: Vec<u32> = open.map(|o| o.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        slots
            .into_iter()
            .filter_map(|n| self.index.path(n).cloned())
            .collect()
    }
}

impl Reducer {
    /// Keeps parked sessions' saved form in `spill` from now on, not in memory.
    pub fn spill_parked(&mut self, spill: Arc<dyn Spill>) {
        self.parked.spill = Some(spill);
    }

    /// Parks open turns too from now on (the daemon's choice; see the module's note):
    /// `liveness_after_ms` is the liveness check's quiet period, which also decides when
    /// a working session shows as stale.
    pub fn park_open_turns(&mut self, liveness_after_ms: u64) {
        self.open_after = Some(liveness_after_ms);
    }

    /// Parks the sessions last fed from `path` if no timer needs any of them and what
    /// `status` shows of them cannot change while parked; true if it did. The file must
    /// be read up to a line's end (its projector saved): a record arriving later brings
    /// them back first.
    pub fn park_path(&mut self, path: &str, now: Now) -> bool {
        let Some(keys) = self.by_path.get(path) else {
            return false;
        };
        let still = keys.iter().all(|k| {
            self.sessions
                .get(k)
                .is_some_and(|s| parkable(k, s, now, self.open_after))
        });
        if !still || self.parked.has(path) {
            return false;
        }
        // Every open turn keeps the file among the live set's; a main session's is kept
        // beside the saved form too (see [`Open`]).
        let mut any_open = false;
        let mut open = Vec::new();
        for (k, s) in keys.iter().filter_map(|k| Some((k, self.sessions.get(k)?))) {
            if !s.turn.as_ref().is_some_and(|t| t.open) {
                continue;
            }
            any_open = true;
            if k.agent.is_none() {
                open.push(Open {
                    slot: 0,
                    key: key_hash(k),
                    head: head_hash(k.provider, &k.session),
                    last_seen: s.last_seen,
                    last_ts: s.last_ts,
                    checked: s.state == SessionState::Working && judged(k.provider, s),
                });
            }
        }
        let Some(saved) = self.save_path(path, now) else {
            return false;
        };
        let Ok(json) = serde_json::to_string(&saved) else {
            return false;
        };
        let Some((path, keys)) = self.by_path.remove_entry(path) else {
            return false;
        };
        let blob = Kept::new(json, self.parked.spill.as_ref());
        let mut hashes = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(sess) = self.sessions.remove(&key) else {
                continue;
            };
            if let Some(changed) = self.changed.as_mut() {
                // The view goes out in parked form, replacing whatever the table held of
                // it (or nothing, if its last change was not published yet).
                changed.remove(&key);
                let pv = ParkedView {
                    path: path.clone(),
                    state: sess.state,
                    stale_at: self
                        .open_after
                        .and_then(|after| stale_at(&key, &sess, after)),
                    blob: blob.clone(),
                };
                self.parked
                    .views
                    .push(SessionChange::Parked(key.clone(), pv));
            }
            hashes.push(key_hash(&key));
        }
        let n = self.parked.index.insert(path, blob);
        for h in hashes {
            self.parked.index.add_key(h, n);
        }
        if any_open {
            self.parked.open_files.insert(n);
            self.parked
                .open
                .extend(open.into_iter().map(|o| Open { slot: n, ..o }));
        }
        true
    }

    /// Brings back the sessions parked for `path`, if any. If they cannot be read back,
    /// the file is marked lost: read again from its first byte, its sessions come back
    /// as they were, and the seen-set keeps that re-read silent.
    pub(super) fn unpark(&mut self, path: &str, now: Now) {
        let read = self.parked.saved(path);
        let Some((n, path)) = self.parked.index.remove(path) else {
            return;
        };
        let mut open = Vec::new();
        if self.parked.open_files.remove(&n) {
            self.parked.open.retain(|o| {
                let mine = o.slot == n;
                if mine {
                    open.push((o.key, o.last_seen));
                }
                !mine
            });
            // After a burst of wake-ups, the room goes back too.
            if self.parked.open.capacity() > 4 * self.parked.open.len().max(256) {
                self.parked.open.shrink_to(2 * self.parked.open.len());
            }
        }
        let Ok(saved) = read else {
            self.parked.index.drop_keys(n);
            if !self.parked.is_lost(&path) {
                self.parked.lost.push((path, self.history_before));
            }
            return;
        };
        let saved = saved.unwrap_or_default();
        for s in &saved {
            self.parked.index.remove_key(key_hash(&s.key), n);
        }
        // Coming back changes nothing `status` shows: not a change to publish.
        let changed = self.changed.take();
        self.restore_path(&path, saved, now);
        self.changed = changed;
        // Quiet since it was last fed, not since now: the liveness check stays due.
        if !open.is_empty() {
            let keys = self.by_path.get(&path).cloned().unwrap_or_default();
            for k in keys {
                let h = key_hash(&k);
                if let Some(&(_, seen)) = open.iter().find(|(key, _)| *key == h)
                    && let Some(s) = self.sessions.get_mut(&k)
                {
                    s.last_seen = seen;
                }
            }
        }
    }

    /// Brings back the parked files whose liveness check fell due by `now`, so that
    /// [`Reducer::quiet_working`] asks about them as about any live session.
    pub(super) fn unpark_due(&mut self, now: Now, after_ms: u64) {
        let due = self.parked.paths_of(
            self.parked
                .open
                .iter()
                .filter(|o| o.checked && quiet_for(o.last_seen, o.last_ts, now, after_ms)),
        );
        for p in due {
            self.unpark(&p, now);
        }
    }

    /// Brings back the parked files with a main session of `provider` on an open turn
    /// whose id may start with `prefix` and a `-` (a signal that names no whole id; a
    /// few more, where hashes collide: the caller matches the ids).
    pub(super) fn unpark_prefixed(
        &mut self,
        provider: crate::model::ProviderKind,
        prefix: &str,
        now: Now,
    ) {
        let head = head_hash(provider, prefix);
        let found = self
            .parked
            .paths_of(self.parked.open.iter().filter(|o| o.head == head));
        for p in found {
            self.unpark(&p, now);
        }
    }

    /// Paths of parked files with a turn still open.
    pub(super) fn parked_open_paths(&self) -> impl Iterator<Item = &Arc<str>> {
        self.parked
            .open_files
            .iter()
            .filter_map(|&n| self.parked.index.path(n))
    }

    /// Brings back whatever a record for `key` from `path` may touch.
    pub(super) fn unpark_for(&mut self, key: &SessionKey, path: &str, now: Now) {
        if self.parked.is_empty() {
            return;
        }
        if self.parked.has(path) {
            self.unpark(path, now);
        }
        if let Some(other) = self.parked.path_of(key) {
            self.unpark(&other, now);
        }
    }

    /// How many sessions are parked.
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// The files whose parked sessions could not be read back, each with the history
    /// cut-off to read it again with (see [`Reducer::set_history_before`]). The caller
    /// reads each again from its first byte; from now on its records are taken again.
    pub fn take_lost(&mut self) -> Vec<(Arc<str>, Option<i64>)> {
        std::mem::take(&mut self.parked.lost)
    }
}

/// Marks every parked view as published: `take_changes` hands them out first.
pub(super) fn take_parked_views(r: &mut Reducer) -> Vec<SessionChange> {
    std::mem::take(&mut r.parked.views)
}

/// Whether `s` may be parked at `now`: no timer needs it. A closed turn always; an open
/// one only where the daemon parks open turns (`open_after`, the liveness check's quiet
/// period), and only if no signal was heard for it (that memory is not saved), and, for
/// a working session the check judges, if the check is not due yet (one due, or found
/// alive, stays live for the sweeps to ask again, rather than being woken at each). One
/// the check cannot judge parks with the time it turns stale ([`stale_at`]).
fn parkable(k: &SessionKey, s: &Session, now: Now, open_after: Option<u64>) -> bool {
    if s.turn.as_ref().is_some_and(|t| t.cand.is_some()) {
        return false;
    }
    let open = s.turn.as_ref().is_some_and(|t| t.open);
    if s.state != SessionState::Working && !open {
        return true;
    }
    let Some(after) = open_after else {
        return false;
    };
    if s.heard != super::signal::Heard::default() {
        return false;
    }
    if s.state != SessionState::Working {
        return true;
    }
    !(k.agent.is_none() && judged(k.provider, s) && quiet_for(s.last_seen, s.last_ts, now, after))
}

/// When a working session the liveness check cannot judge shows as stale: `after_ms`
/// past its last record's time (see `SessionView::shown_state`); `None` for any other.
fn stale_at(k: &SessionKey, s: &Session, after_ms: u64) -> Option<i64> {
    let judged = k.agent.is_none() && judged(k.provider, s);
    if s.state != SessionState::Working || judged {
        return None;
    }
    Some(
        s.last_ts?
            .saturating_add(i64::try_from(after_ms).unwrap_or(i64::MAX)),
    )
}
