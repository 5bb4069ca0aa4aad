//! What the reducer shows of its sessions: the [`SessionView`] that `scan`, `status` and
//! the socket read, and the change set that lets the daemon send only the sessions that
//! changed. Read-only over the sessions, apart from the change set itself; nothing here
//! decides an event.

use super::Reducer;
use super::session::Session;
use crate::model::{SessionKey, SessionState};
use crate::provider::Evidence;
use foldhash::HashSet;
use std::sync::Arc;

/// A change set that grew past this many entries is shrunk when it is drained.
const SHRINK_PAST: usize = 4096;

/// What `scan` and `status` show for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub key: SessionKey,
    pub path: Arc<str>,
    pub state: SessionState,
    pub turn: Option<String>,
    pub line: u64,
    pub record_ts: Option<i64>,
    /// Shared with the session's own copy.
    pub message: Option<Arc<str>>,
    pub evidence: Option<&'static str>,
    /// Background tasks still running or waiting to report back.
    pub background_tasks: u32,
    /// The directory the session started in, if its transcript says (see
    /// `naming::project_name`).
    pub start_dir: Option<String>,
    /// The git branch, where the agent records it.
    pub branch: Option<String>,
    /// Why its turn ended, where the view alone cannot tell: `writer_gone` for a turn
    /// ended because no process was left to write it.
    pub reason: Option<&'static str>,
    /// Whether the liveness check can judge it while it works (a main session of an
    /// agent with a writer rule, on an open turn with no answer pending): where it
    /// cannot, a long silence shows as [`STALE`] instead.
    pub judged: bool,
}

/// The view state of a working session whose file has been silent for longer than
/// `liveness_after` past its last record, where the liveness check cannot tell whether
/// anything still writes it. A view state only: no event says it.
pub const STALE: &str = "stale";

impl SessionView {
    /// The state as `scan` and `status` show it at `now` (Unix ms): the session's own, or
    /// [`STALE`] for a working one silent for longer than `after_ms` that the liveness
    /// check cannot judge.
    pub fn shown_state(&self, now: i64, after_ms: u64) -> &'static str {
        let silent = self.record_ts.is_some_and(|t| {
            u64::try_from(now.saturating_sub(t)).is_ok_and(|quiet| quiet > after_ms)
        });
        if self.state == SessionState::Working && !self.judged && silent {
            STALE
        } else {
            self.state.as_str()
        }
    }

    /// A session known only by its key and state (a parked `status` row that cannot be
    /// read back): shown, rather than left out.
    pub fn bare(key: &SessionKey, state: SessionState) -> SessionView {
        SessionView {
            key: key.clone(),
            path: Arc::from(""),
            state,
            turn: None,
            line: 0,
            record_ts: None,
            message: None,
            evidence: None,
            background_tasks: 0,
            start_dir: None,
            branch: None,
            reason: None,
            judged: true,
        }
    }
}

/// What became of one session since the last [`Reducer::take_changes`].
#[derive(Debug, Clone)]
pub enum SessionChange {
    Updated(SessionView),
    Removed(SessionKey),
    /// The session was parked with its file: its view is unchanged, and can be read back
    /// from the parked form when asked for, so a table need not hold it.
    Parked(SessionKey, ParkedView),
}

/// A parked session's view, in the parked form its reducer keeps (shared, not copied).
#[derive(Debug, Clone)]
pub struct ParkedView {
    pub path: Arc<str>,
    pub state: SessionState,
    /// For a working session the liveness check cannot judge, when (Unix ms) its shown
    /// state turns [`STALE`] while it waits: `status` keeps its row both ways.
    pub stale_at: Option<i64>,
    /// The file's parked sessions, as saved.
    pub(super) blob: super::park::Kept,
}

impl ParkedView {
    /// The view of `key`, read back from the parked form.
    pub fn view(&self, key: &SessionKey) -> Option<SessionView> {
        let saved = self.blob.saved().ok()?;
        let mut s = saved.into_iter().find(|s| s.key == *key)?;
        s.state.path = self.path.clone();
        Some(view(key, &s.state))
    }
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
        start_dir: s.cwd.clone(),
        branch: s.branch.clone(),
        reason: super::liveness::writer_gone_shown(s).then_some("writer_gone"),
        judged: key.agent.is_none() && super::liveness::judged(key.provider, s),
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
        self.changed.as_ref().is_some_and(|c| !c.is_empty()) || self.parked.has_views()
    }

    /// The current view of each session changed since the last call (or its removal),
    /// sorted by key. Costs what changed, not what there is.
    pub fn take_changes(&mut self) -> Vec<SessionChange> {
        let Some(changed) = self.changed.as_mut() else {
            return Vec::new();
        };
        let mut keys: Vec<SessionKey> = changed.drain().collect();
        if changed.capacity() > SHRINK_PAST {
            // A first publish holds every session: its room must not stay for good.
            changed.shrink_to_fit();
        }
        keys.sort();
        // Views of sessions parked since: older than anything below, so first.
        let mut out = super::park::take_parked_views(self);
        out.extend(keys.into_iter().map(|k| match self.sessions.get(&k) {
            Some(s) => SessionChange::Updated(view(&k, s)),
            None => SessionChange::Removed(k),
        }));
        out
    }

    /// Every session's current state, sorted by key.
    pub fn sessions(&self) -> Vec<SessionView> {
        let parked = self.parked.all();
        let mut v: Vec<SessionView> = self.sessions.iter().map(|(k, s)| view(k, s)).collect();
        v.extend(parked.into_iter().map(|(path, mut s)| {
            s.state.path = path;
            view(&s.key, &s.state)
        }));
        v.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }
}
