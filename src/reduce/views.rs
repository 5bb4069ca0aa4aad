//! What the reducer shows of its sessions: the [`SessionView`] that `scan`, `status` and
//! the socket read, and the change set that lets the daemon send only the sessions that
//! changed. Read-only over the sessions, apart from the change set itself; nothing here
//! decides an event.

use super::Reducer;
use super::session::Session;
use crate::model::{SessionKey, SessionState};
use crate::provider::Evidence;
use std::collections::HashSet;
use std::sync::Arc;

/// What `scan` and `status` show for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub key: SessionKey,
    pub path: Arc<str>,
    pub state: SessionState,
    pub turn: Option<String>,
    pub line: u64,
    pub record_ts: Option<i64>,
    pub message: Option<String>,
    pub evidence: Option<&'static str>,
    /// Background tasks still running or waiting to report back.
    pub background_tasks: u32,
}

/// What became of one session since the last [`Reducer::take_changes`].
#[derive(Debug, Clone)]
pub enum SessionChange {
    Updated(SessionView),
    Removed(SessionKey),
}

/// Notes that `key` changed, if changes are tracked. Every change to a session goes
/// through here, so [`Reducer::take_changes`] misses none.
pub(super) fn mark(changed: &mut Option<HashSet<SessionKey>>, key: &SessionKey) {
    if let Some(set) = changed
        && !set.contains(key)
    {
        set.insert(key.clone());
    }
}

pub(super) fn view(key: &SessionKey, s: &Session) -> SessionView {
    let working = s.state == SessionState::Working;
    SessionView {
        key: key.clone(),
        path: s.path.clone(),
        state: s.state,
        turn: s.turn.as_ref().map(|t| t.id.clone()),
        line: if working { s.last_line } else { s.decided_line },
        record_ts: if working { s.last_ts } else { s.decided_ts },
        message: s.message.clone(),
        evidence: s.evidence.map(Evidence::as_str),
        background_tasks: s.bg.count(),
    }
}

impl Reducer {
    /// From now on, keep track of which sessions change, for [`Reducer::take_changes`];
    /// every session there is counts as changed.
    pub fn track_changes(&mut self) {
        if self.changed.is_none() {
            self.changed = Some(self.sessions.keys().cloned().collect());
        }
    }

    /// Whether a session changed since the last [`Reducer::take_changes`].
    pub fn has_changes(&self) -> bool {
        self.changed.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// The current view of each session changed since the last call (or its removal),
    /// sorted by key. Costs what changed, not what there is.
    pub fn take_changes(&mut self) -> Vec<SessionChange> {
        let Some(changed) = self.changed.as_mut() else {
            return Vec::new();
        };
        let mut keys: Vec<SessionKey> = changed.drain().collect();
        keys.sort();
        keys.into_iter()
            .map(|k| match self.sessions.get(&k) {
                Some(s) => SessionChange::Updated(view(&k, s)),
                None => SessionChange::Removed(k),
            })
            .collect()
    }

    /// Every session's current state, sorted by key.
    pub fn sessions(&self) -> Vec<SessionView> {
        let mut v: Vec<SessionView> = self.sessions.iter().map(|(k, s)| view(k, s)).collect();
        v.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }
}
