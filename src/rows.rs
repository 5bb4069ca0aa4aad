//! The source of rows, beside the source of lines (`tail/`, `feed.rs`): for an agent
//! whose sessions are rows of a SQLite database (its descriptor's [`Agent::rows`]).
//!
//! A row feed reads what changed since its position, hands each row (one JSON record the
//! agent's query builds) to the agent's projector, and moves its position on; what comes
//! out are the same observations, with the same [`Src`], that a file feed gives, so the
//! reducer and the event path cannot tell where they came from. The position is the
//! newest `updated` value read plus the rows already read in the last
//! [`OVERLAP_MS`] before it: each read starts that far back and skips what it has seen,
//! so a row committed late by a second writer (whose clock read came before another's
//! commit) is still read once. The position and the projector's context save as one
//! JSON text, like a file's checkpoint.
//!
//! The database is never disturbed: opened read-only with `query_only`, each page of
//! rows one short statement in its own read transaction (a WAL checkpoint waits for no
//! long reader), and a small busy timeout. A busy, locked, corrupt or unreadable
//! database, or one whose tables are not the ones the query names, is one anomaly and
//! no move of the position: the next read tries again from the same place.
//!
//! [`Agent::rows`]: crate::provider::Agent::rows

use crate::model::ProviderKind;
use crate::provider::{self, Obs, ObsKind, Projector, RowSchema, content_hash};
use crate::reduce::Src;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How far back each read looks again for rows committed late.
pub const OVERLAP_MS: i64 = 10_000;
/// Rows per statement.
const PAGE: i64 = 500;
/// How long one statement waits for a lock before the read is given up (and retried on
/// the next wake): never long, the core thread is waiting.
const BUSY: Duration = Duration::from_millis(50);

/// Where a row feed stands: the newest `updated` read and the rows read since
/// `high - OVERLAP_MS` (by content hash, with their `updated`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RowPos {
    pub high: Option<i64>,
    #[serde(default)]
    seen: HashMap<String, i64>,
}

impl RowPos {
    /// Where the next read starts.
    fn from(&self) -> i64 {
        self.high.map_or(i64::MIN, |h| h.saturating_sub(OVERLAP_MS))
    }

    /// Takes a row in; false if this version of it was read before.
    fn admit(&mut self, updated: i64, record: &str, wall: i64) -> bool {
        let hash = content_hash(&[record.as_bytes()]);
        if self.seen.contains_key(&hash) {
            return false;
        }
        self.seen.insert(hash, updated);
        // A row stamped ahead of this machine's clock moves the position no further than
        // now: one row from a wrong clock must not hide every row after it (it stays in
        // `seen` while it is ahead, so it is read once).
        let at = updated.min(wall);
        self.high = Some(self.high.map_or(at, |h| h.max(at)));
        true
    }

    fn prune(&mut self) {
        let from = self.from();
        self.seen.retain(|_, t| *t >= from);
    }
}

/// Why a read of the database failed; the position did not move.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    #[error("database busy or locked: {0}")]
    Busy(String),
    #[error("database corrupt or not a database: {0}")]
    Corrupt(String),
    #[error("database cannot be opened: {0}")]
    Open(String),
    #[error("database schema not as expected (a newer version?): {0}")]
    Schema(String),
}

impl RowError {
    /// The anomaly's `reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Busy(_) => "db_busy",
            Self::Corrupt(_) => "db_corrupt",
            Self::Open(_) => "db_unreadable",
            Self::Schema(_) => "db_schema",
        }
    }

    fn of(e: &rusqlite::Error) -> Self {
        let text = e.to_string();
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Self::Busy(text),
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Self::Corrupt(text),
            Some(
                ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::SystemIoFailure
                | ErrorCode::ReadOnly,
            ) => Self::Open(text),
            // "no such table", "no such column": SQL the schema does not answer.
            _ => Self::Schema(text),
        }
    }
}

/// How one read went.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RowRead {
    /// Rows handed to the projector (new row versions).
    pub rows: u64,
    /// Bytes of their records.
    pub bytes: u64,
}

/// One database's path through the pipeline: query → projector → observations.
pub struct RowFeed {
    pub path: Arc<str>,
    pub provider: ProviderKind,
    schema: &'static dyn RowSchema,
    projector: Box<dyn Projector>,
    pos: RowPos,
    max_row: usize,
    /// Kept between reads (no transaction stays open); dropped after an error.
    conn: Option<Connection>,
    /// `PRAGMA data_version` at the start of the last whole read on `conn`: while it
    /// stays the same no other connection committed, and a wake costs no query.
    version: Option<i64>,
    buf: Vec<Obs>,
}

/// What [`RowFeed::save`] writes.
#[derive(Serialize, Deserialize)]
struct Saved {
    pos: RowPos,
    projector: String,
}

impl RowFeed {
    /// A feed from the first row; `None` for an agent that writes files.
    pub fn new(path: &Path, provider: ProviderKind, max_row: usize) -> Option<Self> {
        let schema = provider.descriptor().rows()?;
        Some(RowFeed {
            path: Arc::from(path.to_string_lossy().as_ref()),
            provider,
            schema,
            projector: provider::projector_for(provider, path),
            pos: RowPos::default(),
            max_row,
            conn: None,
            version: None,
            buf: Vec::new(),
        })
    }

    /// A feed that goes on from what [`RowFeed::save`] gave; `None` if that cannot be
    /// taken back (the database is then read from its first row).
    pub fn restore(
        path: &Path,
        provider: ProviderKind,
        max_row: usize,
        saved: &str,
    ) -> Option<Self> {
        let saved: Saved = serde_json::from_str(saved).ok()?;
        let mut feed = Self::new(path, provider, max_row)?;
        feed.pos = saved.pos;
        feed.projector.restore(&saved.projector).then_some(feed)
    }

    /// The position and the projector's context, as one JSON text.
    pub fn save(&self) -> String {
        provider::save_json(&Saved {
            pos: self.pos.clone(),
            projector: self.projector.save(),
        })
    }

    /// The newest `updated` read (the `line` of the last row), if any.
    pub fn position(&self) -> Option<i64> {
        self.pos.high
    }

    fn connect(&mut self) -> Result<&Connection, RowError> {
        if self.conn.is_none() {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(self.path.as_ref(), flags)
                .map_err(|e| RowError::of(&e))?;
            conn.busy_timeout(BUSY).map_err(|e| RowError::of(&e))?;
            conn.pragma_update(None, "query_only", true)
                .map_err(|e| RowError::of(&e))?;
            self.conn = Some(conn);
            self.version = None;
        }
        self.conn
            .as_ref()
            .ok_or_else(|| RowError::Open("no connection".to_owned()))
    }

    /// Reads every row changed since the position, calling `sink` for each observation
    /// in row order. On an error, what was read before it stays read (its position
    /// kept), an anomaly goes to `sink`, and the error is returned.
    pub fn read(&mut self, mut sink: impl FnMut(&Src, Obs)) -> Result<RowRead, RowError> {
        let res = self.changed().and_then(|version| {
            let Some(version) = version else {
                return Ok(RowRead::default());
            };
            let read = self.read_pages(&mut sink)?;
            self.version = Some(version);
            Ok(read)
        });
        self.pos.prune();
        if let Err(e) = &res {
            self.conn = None;
            tracing::warn!(path = %self.path, error = %e, "Database read failed; retried on the next change.");
            let at = self.pos.high.unwrap_or(0);
            let key = content_hash(&[
                e.reason().as_bytes(),
                self.path.as_bytes(),
                &at.to_le_bytes(),
            ]);
            let src = self.src(at);
            let message = crate::model::clip_message(&e.to_string()).unwrap_or_default();
            let kind = ObsKind::Anomaly {
                reason: e.reason().to_owned(),
                message,
            };
            sink(&src, self.projector.obs(key, None, kind));
        }
        res
    }

    /// The database's `data_version` if another connection committed since the last
    /// read (always on a new connection), else `None`.
    fn changed(&mut self) -> Result<Option<i64>, RowError> {
        let last = self.version;
        let conn = self.connect()?;
        let now: i64 = conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| RowError::of(&e))?;
        Ok((last != Some(now)).then_some(now))
    }

    fn src(&self, updated: i64) -> Src {
        Src {
            provider: self.provider,
            path: self.path.clone(),
            line: u64::try_from(updated).unwrap_or(0),
        }
    }

    fn read_pages(&mut self, sink: &mut impl FnMut(&Src, Obs)) -> Result<RowRead, RowError> {
        let mut done = RowRead::default();
        let (mut from, mut after) = (self.pos.from(), String::new());
        let max_row = i64::try_from(self.max_row).unwrap_or(i64::MAX);
        let wall = crate::clock::wall_now();
        loop {
            let page = self.page(from, &after, max_row)?;
            let full = page.len() == usize::try_from(PAGE).unwrap_or(usize::MAX);
            if let Some((updated, key, _)) = page.last() {
                (from, after) = (*updated, key.clone());
            }
            for (updated, _, record) in page {
                if !self.pos.admit(updated, &record, wall) {
                    continue;
                }
                done.rows += 1;
                done.bytes += record.len() as u64;
                self.project(updated, &record, sink);
            }
            if !full {
                return Ok(done);
            }
        }
    }

    /// One page: a single statement, so its read transaction ends with it.
    fn page(
        &mut self,
        from: i64,
        after: &str,
        max_row: i64,
    ) -> Result<Vec<(i64, String, String)>, RowError> {
        let sql = self.schema.changed_since();
        let conn = self.connect()?;
        let mut stmt = conn.prepare_cached(sql).map_err(|e| RowError::of(&e))?;
        let rows = stmt
            .query_map(rusqlite::params![from, after, PAGE, max_row], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                ))
            })
            .map_err(|e| RowError::of(&e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| RowError::of(&e))
    }

    fn project(&mut self, updated: i64, record: &str, sink: &mut impl FnMut(&Src, Obs)) {
        let src = self.src(updated);
        let res = self.projector.project(record.as_bytes(), &mut self.buf);
        for obs in self.buf.drain(..) {
            sink(&src, obs);
        }
        if let Err(e) = res {
            tracing::debug!(path = %self.path, updated, error = %e, "Malformed row.");
            let key = content_hash(&[b"malformed_row", self.path.as_bytes(), record.as_bytes()]);
            let message = crate::model::clip_message(&format!("not a readable row: {e}"));
            let kind = ObsKind::Anomaly {
                reason: "malformed_row".to_owned(),
                message: message.unwrap_or_default(),
            };
            sink(&src, self.projector.obs(key, Some(updated), kind));
        }
    }
}
