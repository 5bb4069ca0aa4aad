//! Records applied twice: a record whose key (its uuid, or Codex's, Copilot's or Pi's
//! record id) was already applied to a session is not new work. A writer that appends a
//! decided turn's answer again (same `uuid`, same `message.id`) must neither start a turn
//! nor decide one: without this, the copy made a system turn and paged a second time.
//!
//! One line yields several observations under one key (a tool call per block, a start
//! directory beside a prompt), so a key counts as seen only once its line is over. The
//! keys live in a bounded seen-set of their own (never the event ids' set, which the
//! ledger fills at a start and must not be churned out by records), and the set is
//! emptied when a file's sessions are forgotten, so a file re-read from its first byte
//! after a truncation or replacement is applied again.

use super::dedup::Seen;
use crate::model::SessionKey;
use crate::provider::ObsKind;
use std::hash::{DefaultHasher, Hash, Hasher};

/// How many record keys are remembered: a copy comes soon after its original.
pub(super) const RECORDS_SEEN: usize = 16_384;

pub(super) struct Repeats {
    seen: Seen,
    /// The session and line being applied, and the keys first seen on that line.
    line: Option<(u64, u64)>,
    on_line: Vec<u64>,
}

fn hash(v: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// The observations that are a record's work or outcome: what a copy must not redo.
/// A start directory, background bookkeeping, compaction and anomalies stay harmless.
fn is_work(kind: &ObsKind) -> bool {
    matches!(
        kind,
        ObsKind::TurnStart { .. }
            | ObsKind::Final { .. }
            | ObsKind::Confirm(_)
            | ObsKind::Work
            | ObsKind::ToolCall { .. }
            | ObsKind::ToolResult { .. }
            | ObsKind::Completed { .. }
            | ObsKind::Failed { .. }
            | ObsKind::Interrupted { .. }
    )
}

impl Repeats {
    pub(super) fn new(capacity: usize) -> Self {
        Repeats {
            seen: Seen::new(capacity),
            line: None,
            on_line: Vec::new(),
        }
    }

    /// Whether this observation repeats a record already applied to the session on an
    /// earlier line (and so must be dropped); remembers its key otherwise.
    pub(super) fn is_repeat(
        &mut self,
        key: &SessionKey,
        line: u64,
        record: &str,
        kind: &ObsKind,
    ) -> bool {
        if !is_work(kind) {
            return false;
        }
        let sess = hash(key);
        if self.line != Some((sess, line)) {
            self.line = Some((sess, line));
            self.on_line.clear();
        }
        let h = hash((sess, record));
        if self.on_line.contains(&h) {
            return false;
        }
        if !self.seen.insert_hash(h) {
            return true;
        }
        self.on_line.push(h);
        false
    }

    /// Forgets every key: a file's sessions were forgotten and it may be read again.
    pub(super) fn clear(&mut self) {
        *self = Repeats::new(self.seen.capacity());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProviderKind;
    use crate::provider::Evidence;

    fn key(s: &str) -> SessionKey {
        SessionKey {
            provider: ProviderKind::Claude,
            session: s.to_owned(),
            agent: None,
        }
    }

    #[test]
    fn a_key_is_a_repeat_only_on_a_later_line_of_the_same_session() {
        let mut r = Repeats::new(8);
        let work = ObsKind::Work;
        let done = ObsKind::Confirm(Evidence::StopReason);
        assert!(!r.is_repeat(&key("s"), 3, "a1", &work));
        // The same record's other observations, on its own line.
        assert!(!r.is_repeat(&key("s"), 3, "a1", &done));
        assert!(!r.is_repeat(&key("s"), 3, "u1", &work));
        assert!(!r.is_repeat(&key("s"), 3, "a1", &work));
        // Its copy, appended later.
        assert!(r.is_repeat(&key("s"), 9, "a1", &done));
        // Another session may hold the same key.
        assert!(!r.is_repeat(&key("t"), 9, "a1", &done));
        // Harmless kinds are never dropped.
        assert!(!r.is_repeat(&key("s"), 10, "a1", &ObsKind::StartDir("/w".into())));
        r.clear();
        assert!(!r.is_repeat(&key("s"), 3, "a1", &work));
    }
}
