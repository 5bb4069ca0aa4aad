//! The ledger: ids of events already decided (emitted, or absorbed as history), per
//! session, so a restarted daemon never re-emits one, even when it re-reads a file.
//!
//! It only needs to remember what could come out again. A turn whose record time is
//! older than the catch-up window is history whatever happens, so an id expires at its
//! record time + catch-up (+ a margin for clock skew). An event without a record time
//! could come out on any re-read, so it is kept for a day. Sessions keep at most
//! [`PER_SESSION`] ids and the whole ledger at most [`TOTAL`]: it never grows without
//! bound.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

pub const PER_SESSION: usize = 256;
pub const TOTAL: usize = 16_384;
const MARGIN_MS: i64 = 3_600_000;
const NO_TIME_TTL_MS: i64 = 24 * 3_600_000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ledger {
    /// Session → (id, expiry in Unix ms), oldest first. Each list is kept at its length:
    /// most sessions hold one or two ids, and the ledger is full on a busy machine.
    sessions: BTreeMap<Box<str>, Vec<(Id, i64)>>,
    #[serde(skip)]
    len: usize,
}

/// An id as the ledger holds it: the 32 hex digits of a content hash (every id baton
/// makes) in 16 bytes, any other id as its text. It is written back as the same text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Id {
    Hash([u8; 16]),
    Text(Box<str>),
}

impl Id {
    fn new(s: &str) -> Self {
        Self::hash(s).map_or_else(|| Id::Text(s.into()), Id::Hash)
    }

    /// The 16 bytes of 32 lowercase hex digits: only those are written back the same
    /// (`from_str_radix` would take uppercase digits and a sign too).
    fn hash(s: &str) -> Option<[u8; 16]> {
        // The digits first: an id that is not one is not parsed at all.
        if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let n = u128::from_str_radix(s, 16).ok()?;
        Some(n.to_be_bytes())
    }

    fn text(&self) -> String {
        match self {
            // Not a hot path (a base's write, a start): the standard formatter serves.
            Id::Hash(h) => format!("{:032x}", u128::from_be_bytes(*h)),
            Id::Text(t) => t.to_string(),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Text(t) => s.serialize_str(t),
            Id::Hash(_) => s.serialize_str(&self.text()),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event id")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::new(v))
            }
        }
        d.deserialize_str(V)
    }
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
        let ids = match self.sessions.get_mut(session) {
            Some(ids) => ids,
            None => self.sessions.entry(session.into()).or_default(),
        };
        // Every id is made by `Id::new`, so one text has one form.
        let id = Id::new(&id);
        if ids.iter().any(|(i, _)| *i == id) {
            return;
        }
        // One more place, not the four a first push takes (see `sessions`).
        ids.reserve_exact(1);
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
            ids.shrink_to_fit();
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
            ids.shrink_to_fit();
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
        let id = Id::new(id);
        self.sessions.values().flatten().any(|(i, _)| *i == id)
    }

    pub fn ids(&self) -> impl Iterator<Item = String> {
        self.sessions.values().flatten().map(|(i, _)| i.text())
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

    #[test]
    fn ids_are_written_back_as_they_were_read_whatever_their_form() {
        let hash = "0123456789abcdef00ff10a0b0c0d0e0";
        let json = format!(
            r#"{{"sessions":{{"claude/s":[["{hash}",5],["0123456789ABCDEF00FF10A0B0C0D0E0",6],["short",7],["{hash}0",8]]}}}}"#
        );
        let l: Ledger = serde_json::from_str::<Ledger>(&json).unwrap().loaded();
        assert_eq!(l.len(), 4);
        assert!(l.contains(hash) && l.contains("short"));
        assert!(!l.contains("0123456789abcdef00ff10a0b0c0d0e1"));
        assert_eq!(serde_json::to_string(&l).unwrap(), json);
        // Baton's own ids are held in 16 bytes; any other text as it is.
        assert!(matches!(Id::new(hash), Id::Hash(_)));
        assert!(matches!(
            Id::new("0123456789ABCDEF00FF10A0B0C0D0E0"),
            Id::Text(_)
        ));
        assert_eq!(Id::new(hash).text(), hash);
    }

    #[test]
    fn a_hash_id_is_found_by_its_text() {
        let mut l = Ledger::default();
        let now = 10_000_000_000;
        let id = crate::provider::content_hash(&[b"claude", b"turn_completed", b"t1"]);
        l.record("s", id.clone(), Some(now), now, CATCH_UP);
        l.record("s", id.clone(), Some(now), now, CATCH_UP);
        assert_eq!(l.len(), 1);
        assert!(l.contains(&id));
        assert_eq!(l.ids().collect::<Vec<_>>(), [id]);
    }
}
