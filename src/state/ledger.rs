//! The ledger: ids of events already decided (emitted, or absorbed as history), per
//! session, so a restarted daemon never re-emits one, even when it re-reads a file.
//!
//! It only needs to remember what could come out again. A turn whose record time is
//! older than the catch-up window is history whatever happens, so an id expires at its
//! record time + catch-up (+ a margin for clock skew). An event without a record time
//! could come out on any re-read, so it is kept for a day. Sessions keep at most
//! [`PER_SESSION`] ids and the whole ledger at most [`TOTAL`]: it never grows without
//! bound.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const PER_SESSION: usize = 256;
pub const TOTAL: usize = 16_384;
const MARGIN_MS: i64 = 3_600_000;
const NO_TIME_TTL_MS: i64 = 24 * 3_600_000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ledger {
    /// Session → (id, expiry in Unix ms), oldest first.
    sessions: BTreeMap<String, Vec<(String, i64)>>,
    #[serde(skip)]
    len: usize,
}

/// When an id decided now about a record of `record_ts` can no longer come out again.
fn expiry(record_ts: Option<i64>, now: i64, catch_up: i64) -> i64 {
    match record_ts {
        Some(t) => t.saturating_add(catch_up).saturating_add(MARGIN_MS),
        None => now.saturating_add(NO_TIME_TTL_MS),
    }
}

/// Whether the ledger would keep such an id at all (most of a first run's history is
/// older, and need not travel to the state writer).
pub fn worth_keeping(record_ts: Option<i64>, now: i64, catch_up: i64) -> bool {
    expiry(record_ts, now, catch_up) > now
}

impl Ledger {
    /// Remembers `id` until it can no longer come out again.
    pub fn record(
        &mut self,
        session: &str,
        id: String,
        record_ts: Option<i64>,
        now: i64,
        catch_up: i64,
    ) {
        let expires = expiry(record_ts, now, catch_up);
        if expires <= now {
            return;
        }
        let ids = self.sessions.entry(session.to_owned()).or_default();
        if ids.iter().any(|(i, _)| *i == id) {
            return;
        }
        ids.push((id, expires));
        self.len += 1;
        if ids.len() > PER_SESSION {
            ids.remove(0);
            self.len -= 1;
        }
        if self.len > TOTAL {
            self.prune(now);
        }
        if self.len > TOTAL {
            self.evict(TOTAL - TOTAL / 10);
        }
    }

    /// Drops expired ids and empty sessions.
    pub fn prune(&mut self, now: i64) {
        self.sessions.retain(|_, ids| {
            ids.retain(|(_, exp)| *exp > now);
            !ids.is_empty()
        });
        self.recount();
    }

    /// Keeps the `keep` ids that expire last.
    fn evict(&mut self, keep: usize) {
        let mut all: Vec<i64> = self
            .sessions
            .values()
            .flat_map(|v| v.iter().map(|e| e.1))
            .collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&cut) = all.get(keep) else {
            return;
        };
        self.sessions.retain(|_, ids| {
            ids.retain(|(_, exp)| *exp > cut);
            !ids.is_empty()
        });
        self.recount();
    }

    fn recount(&mut self) {
        self.len = self.sessions.values().map(Vec::len).sum();
    }

    /// After loading: the length is not stored.
    pub fn loaded(mut self) -> Self {
        self.recount();
        self
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, id: &str) -> bool {
        self.sessions.values().flatten().any(|(i, _)| i == id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.sessions.values().flatten().map(|(i, _)| i.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATCH_UP: i64 = 600_000;

    #[test]
    fn old_records_are_not_kept_and_entries_expire() {
        let mut l = Ledger::default();
        let now = 10_000_000_000;
        l.record(
            "s",
            "old".into(),
            Some(now - CATCH_UP - MARGIN_MS - 1),
            now,
            CATCH_UP,
        );
        l.record("s", "new".into(), Some(now), now, CATCH_UP);
        l.record("s", "new".into(), Some(now), now, CATCH_UP);
        l.record("s", "untimed".into(), None, now, CATCH_UP);
        assert!(!l.contains("old"));
        assert_eq!(l.len(), 2);
        l.prune(now + CATCH_UP + MARGIN_MS);
        assert_eq!(l.ids().collect::<Vec<_>>(), ["untimed"]);
        l.prune(now + NO_TIME_TTL_MS);
        assert!(l.is_empty());
    }

    #[test]
    fn bounded_per_session_and_in_total() {
        let mut l = Ledger::default();
        let now = 10_000_000_000;
        for i in 0..(PER_SESSION + 10) {
            l.record("one", format!("a{i}"), Some(now), now, CATCH_UP);
        }
        assert_eq!(l.len(), PER_SESSION);
        assert!(!l.contains("a0"), "the oldest goes first");
        for i in 0..(TOTAL * 2) {
            l.record(
                &format!("s{i}"),
                format!("b{i}"),
                Some(now + i as i64),
                now,
                CATCH_UP,
            );
            assert!(l.len() <= TOTAL);
        }
        assert!(
            l.contains(&format!("b{}", TOTAL * 2 - 1)),
            "the newest stays"
        );
    }
}
