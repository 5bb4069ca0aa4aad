//! Background tasks a session launched and has not seen finish, and the liveness
//! decision for a quiet working session. Pure: records and `now` in, state out.

use crate::provider::background::Background;
use serde::{Deserialize, Serialize};

/// At most this many task ids are remembered per session (oldest forgotten first), so a
/// transcript cannot grow the table without bound.
const MAX_TASKS: usize = 64;

/// The tasks of one session. A task counts from its start until its notification is
/// delivered or it is killed; a finished task whose notification is only queued still
/// counts, since its delivery will start a turn on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tasks {
    /// Started, not yet seen finish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    running: Vec<String>,
    /// Finished, notification queued but not yet delivered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    queued: Vec<String>,
}

fn remove(v: &mut Vec<String>, id: &str) -> bool {
    let before = v.len();
    v.retain(|x| x != id);
    v.len() != before
}

fn add(v: &mut Vec<String>, id: String) {
    if !v.contains(&id) {
        if v.len() >= MAX_TASKS {
            v.remove(0);
        }
        v.push(id);
    }
}

impl Tasks {
    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty() && self.queued.is_empty()
    }

    /// Applies one record's news. An id never seen start is ignored when it finishes, so
    /// the count never goes below zero.
    pub(crate) fn apply(&mut self, op: Background) {
        match op {
            Background::Started(id) => {
                remove(&mut self.queued, &id);
                add(&mut self.running, id);
            }
            Background::Queued(id) => {
                // A queued notification means a turn will come, whether or not the start
                // was seen (the file may begin after it).
                remove(&mut self.running, &id);
                add(&mut self.queued, id);
            }
            Background::Finished(id) => {
                remove(&mut self.running, &id);
                remove(&mut self.queued, &id);
            }
            Background::Stopped(id) => {
                // A killed task's own notification, if one is already queued, still comes.
                remove(&mut self.running, &id);
            }
        }
    }

    /// How many tasks are running or waiting to report back.
    pub(crate) fn count(&self) -> u32 {
        u32::try_from(self.running.len() + self.queued.len()).unwrap_or(u32::MAX)
    }
}

/// Whether a working session quiet since `last_seen` (monotonic ms) is due a check for a
/// live writer at `now`.
pub(crate) fn liveness_due(last_seen: u64, now_mono: u64, after_ms: u64) -> bool {
    now_mono.saturating_sub(last_seen) >= after_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> String {
        x.to_owned()
    }

    #[test]
    fn counts_what_has_not_reported_back() {
        let mut t = Tasks::default();
        t.apply(Background::Started(s("bash_1")));
        t.apply(Background::Started(s("be613ab")));
        t.apply(Background::Started(s("be613ab")));
        assert_eq!(t.count(), 2);
        // Finished while a turn ran: queued, still counted.
        t.apply(Background::Queued(s("be613ab")));
        assert_eq!(t.count(), 2);
        t.apply(Background::Finished(s("be613ab")));
        assert_eq!(t.count(), 1);
        t.apply(Background::Stopped(s("bash_1")));
        assert_eq!(t.count(), 0);
        assert!(t.is_empty());
    }

    #[test]
    fn unknown_ids_never_go_below_zero() {
        let mut t = Tasks::default();
        t.apply(Background::Finished(s("nope")));
        t.apply(Background::Stopped(s("nope")));
        assert_eq!(t.count(), 0);
        // A queued notification for a start before the file began still counts.
        t.apply(Background::Queued(s("old")));
        assert_eq!(t.count(), 1);
        t.apply(Background::Finished(s("old")));
        assert_eq!(t.count(), 0);
    }

    #[test]
    fn bounded() {
        let mut t = Tasks::default();
        for i in 0..1000 {
            t.apply(Background::Started(format!("t{i}")));
        }
        assert_eq!(t.count(), MAX_TASKS as u32);
    }
}
