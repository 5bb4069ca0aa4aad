//! What the reducer hands to durable state and takes back: each file's sessions, saved
//! with that file's checkpoint so a restart continues the file instead of re-reading it,
//! and the ids it decided, for the ledger. Sessions are indexed by the file that last fed
//! them, so saving, restoring and forgetting cost that file's sessions, not all of them.
//! Monotonic time does not survive a restart, so deadlines cross over on the wall clock.
//! Nothing here touches the state directory: the daemon writes what it gets from here.

use super::Reducer;
use super::session::{Session, confirm};
use super::views::mark;
use crate::clock::Now;
use crate::model::{Event, SessionKey};
use crate::provider::Evidence;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One session's state, saved with the checkpoint of the file that feeds it, so the
/// file can be continued from there instead of re-read (see [`Reducer::save_path`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSession {
    pub(super) key: SessionKey,
    pub(super) state: Session,
}

/// An event id the reducer decided (emitted, or absorbed as history): what the daemon's
/// durable ledger remembers.
#[derive(Debug, Clone)]
pub struct Decided {
    pub id: String,
    pub session: SessionKey,
    /// The file that fed the session: a decision absorbed as history (no event) still
    /// changed the session, so its checkpoint is due all the same.
    pub path: Arc<str>,
    pub record_ts: Option<i64>,
}

impl Reducer {
    /// From now on, keep every decided id for [`Reducer::take_decided`].
    pub fn record_decided(&mut self) {
        self.decided.get_or_insert_with(Vec::new);
    }

    /// The ids decided since the last call.
    pub fn take_decided(&mut self) -> Vec<Decided> {
        self.decided
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Treats `id` as already decided (restored from durable state).
    pub fn mark_seen(&mut self, id: &str) {
        self.seen.insert(id);
    }

    /// Forgets a session (its file is gone).
    pub fn forget(&mut self, key: &SessionKey) {
        if let Some(path) = self.parked.path_of(key) {
            self.unpark(&path, Now::virtual_at(0));
        }
        if let Some(s) = self.sessions.remove(key) {
            mark(&mut self.changed, key);
            self.unindex(&s.path, key);
            self.repeats.clear();
        }
    }

    pub(super) fn unindex(&mut self, path: &str, key: &SessionKey) {
        if let Some(keys) = self.by_path.get_mut(path) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.by_path.remove(path);
            }
        }
    }

    /// Forgets every session last fed from `path`: the file is gone, or is about to be
    /// re-read from its first byte (the seen-set keeps that re-read silent).
    pub fn forget_path(&mut self, path: &str) {
        // Brought back first, so `status` hears of their removal like any other's.
        self.unpark(path, Now::virtual_at(0));
        // If they could not be, nothing is left to re-read: they go with the file.
        self.parked.lost.retain(|(p, _)| &**p != path);
        // The file may be read again from its first byte: its records are new then.
        self.repeats.clear();
        for key in self.by_path.remove(path).unwrap_or_default() {
            if self.sessions.remove(&key).is_some() {
                mark(&mut self.changed, &key);
            }
        }
    }

    /// The state of every session last fed from `path`, as of `now`; `None` if they are
    /// parked and cannot be read back (the file is then to be read again from its start).
    pub fn save_path(&self, path: &str, now: Now) -> Option<Vec<SavedSession>> {
        if let Some(saved) = self.parked.saved(path).ok()? {
            return Some(saved);
        }
        if self.parked.is_lost(path) {
            return None;
        }
        let keys = self.by_path.get(path).map_or(&[][..], Vec::as_slice);
        let mut out: Vec<SavedSession> = keys
            .iter()
            .filter_map(|k| Some((k, self.sessions.get(k)?)))
            .map(|(k, s)| {
                let mut state = Session::clone(s);
                if let Some(c) = state.turn.as_mut().and_then(|t| t.cand.as_mut()) {
                    let left = i64::try_from(c.deadline.saturating_sub(now.mono)).unwrap_or(0);
                    c.deadline = u64::try_from(now.wall.saturating_add(left)).unwrap_or(0);
                }
                SavedSession {
                    key: k.clone(),
                    state,
                }
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Some(out)
    }

    /// Takes back sessions [`Reducer::save_path`] gave for `path`. A pending completion
    /// keeps its deadline on the wall clock: one that fell due while nobody was
    /// watching fires on the next tick.
    pub fn restore_path(&mut self, path: &Arc<str>, saved: Vec<SavedSession>, now: Now) {
        for SavedSession { key, mut state } in saved {
            state.path = path.clone();
            state.last_seen = now.mono;
            if let Some(c) = state.turn.as_mut().and_then(|t| t.cand.as_mut()) {
                let due = i64::try_from(c.deadline).unwrap_or(i64::MAX);
                // Never longer than a whole settle period: the wall clock may have been
                // set back while nobody was watching.
                let left = u64::try_from(due.saturating_sub(now.wall))
                    .unwrap_or(0)
                    .min(self.settle_ms);
                c.deadline = now.mono.saturating_add(left);
            }
            self.forget(&key);
            self.by_path
                .entry(path.clone())
                .or_insert_with(|| Vec::with_capacity(1))
                .push(key.clone());
            mark(&mut self.changed, &key);
            self.sessions.insert(key.clone(), Box::new(state));
            self.schedule(&key);
        }
    }

    /// After `path` was read at start: if the file has been idle (`idle_ms`, from its
    /// modification time) for at least the settle period, every answer it left pending
    /// is complete — the quiet period passed while nobody watched. Events about records
    /// older than `live_before` are absorbed as history, like the read itself.
    pub fn settle_idle(
        &mut self,
        path: &str,
        idle_ms: i64,
        live_before: i64,
        now: Now,
        out: &mut Vec<Event>,
    ) {
        if idle_ms < i64::try_from(self.settle_ms).unwrap_or(i64::MAX) {
            return;
        }
        let keys = self.by_path.get(path).cloned().unwrap_or_default();
        let keep = self.history_before;
        self.history_before = Some(live_before);
        for key in keys {
            let Some(sess) = self.sessions.get_mut(&key) else {
                continue;
            };
            let Some(d) = confirm(sess, Evidence::Quiet, now.wall) else {
                continue;
            };
            let path = sess.path.clone();
            mark(&mut self.changed, &key);
            out.extend(self.finish(&key, &path, d));
        }
        self.history_before = keep;
    }
}
