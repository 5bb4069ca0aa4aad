//! An OpenCode database as OpenCode writes it, for tests: its tables as its migrations
//! create them, and a turn's rows inserted and updated in OpenCode's order.
//!
//! The DDL follows OpenCode 1.15.13 (`packages/core/src/database/migration/`: the
//! `session`, `message` and `part` tables with their columns, types and indexes; the
//! `project` table; the `migration` table that records them), written here from those
//! migrations, not copied. Connections are opened as OpenCode opens them: WAL,
//! `synchronous=NORMAL`, `busy_timeout=5000`, foreign keys on.

use rusqlite::{Connection, params};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub const DDL: &str = "
CREATE TABLE migration (id TEXT PRIMARY KEY, time_created INTEGER NOT NULL);
CREATE TABLE project (
  id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, name TEXT,
  icon_url TEXT, icon_color TEXT,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_initialized INTEGER,
  sandboxes TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE session (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  workspace_id TEXT,
  parent_id TEXT,
  slug TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL,
  share_url TEXT,
  summary_additions INTEGER, summary_deletions INTEGER, summary_files INTEGER,
  summary_diffs TEXT, revert TEXT, permission TEXT,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  time_compacting INTEGER, time_archived INTEGER
);
CREATE INDEX session_project_idx ON session(project_id);
CREATE INDEX session_workspace_idx ON session(workspace_id);
CREATE INDEX session_parent_idx ON session(parent_id);
CREATE TABLE message (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX message_session_time_created_id_idx ON message(session_id, time_created, id);
CREATE TABLE part (
  id TEXT PRIMARY KEY,
  message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  session_id TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX part_message_id_id_idx ON part(message_id, id);
CREATE INDEX part_session_idx ON part(session_id);
";

/// A writer of one OpenCode database.
pub struct Db {
    pub path: PathBuf,
    pub conn: Connection,
}

impl Db {
    /// Creates `dir/opencode.db` with OpenCode's tables.
    pub fn create(dir: &Path) -> Db {
        std::fs::create_dir_all(dir).unwrap();
        let db = Db::open(&dir.join("opencode.db"));
        db.conn.execute_batch(DDL).unwrap();
        db.conn
            .execute(
                "INSERT INTO project (id, worktree, time_created, time_updated) VALUES ('p1', '/w', 0, 0)",
                [],
            )
            .unwrap();
        db
    }

    /// Opens an existing database as OpenCode does.
    pub fn open(path: &Path) -> Db {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=ON;",
        )
        .unwrap();
        Db {
            path: path.to_owned(),
            conn,
        }
    }

    pub fn session(&self, id: &str, parent: Option<&str>, dir: &str, t: i64) {
        self.conn
            .execute(
                "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated)
                 VALUES (?1, 'p1', ?2, 'slug', ?3, 'title', '1.15.13', ?4, ?4)",
                params![id, parent, dir, t],
            )
            .unwrap();
    }

    /// OpenCode's upsert of a message: one `BEGIN IMMEDIATE` transaction.
    pub fn message(&self, id: &str, session: &str, created: i64, updated: i64, data: &Value) {
        self.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        self.conn
            .execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(id) DO UPDATE SET time_updated = excluded.time_updated, data = excluded.data",
                params![id, session, created, updated, data.to_string()],
            )
            .unwrap();
        self.conn.execute_batch("COMMIT").unwrap();
    }

    /// OpenCode's upsert of a part.
    pub fn part(
        &self,
        id: &str,
        msg: &str,
        session: &str,
        created: i64,
        updated: i64,
        data: &Value,
    ) {
        self.part_text(id, msg, session, created, updated, &data.to_string());
    }

    /// A part whose `data` is any text (a damaged row).
    pub fn part_text(
        &self,
        id: &str,
        msg: &str,
        session: &str,
        created: i64,
        updated: i64,
        data: &str,
    ) {
        self.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        self.conn
            .execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(id) DO UPDATE SET time_updated = excluded.time_updated, data = excluded.data",
                params![id, msg, session, created, updated, data],
            )
            .unwrap();
        self.conn.execute_batch("COMMIT").unwrap();
    }

    /// A prompt: the user message and its text part.
    pub fn prompt(&self, session: &str, id: &str, t: i64, text: &str) {
        let data = json!({"role":"user","time":{"created":t},"agent":"build",
            "model":{"providerID":"anthropic","modelID":"claude"}});
        self.message(id, session, t, t, &data);
        let part = json!({"type":"text","text":text});
        self.part(&format!("prt_{id}"), id, session, t, t, &part);
    }

    fn assistant_data(parent: &str, t: i64, extra: Value) -> Value {
        let mut data = json!({"role":"assistant","time":{"created":t},"parentID":parent,
            "modelID":"claude","providerID":"anthropic","mode":"build","agent":"build",
            "path":{"cwd":"/w","root":"/w"},"cost":0,
            "tokens":{"input":0,"output":0,"reasoning":0,"cache":{"read":0,"write":0}}});
        if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                d.insert(k.clone(), v.clone());
            }
        }
        data
    }

    /// The assistant message as first inserted: no `finish`, zero tokens; then its
    /// `step-start` part.
    pub fn assistant(&self, session: &str, id: &str, parent: &str, t: i64) {
        self.message(
            id,
            session,
            t,
            t,
            &Self::assistant_data(parent, t, json!({})),
        );
        self.part(
            &format!("prt_{id}_step"),
            id,
            session,
            t,
            t,
            &json!({"type":"step-start"}),
        );
    }

    /// A text part inserted empty and rewritten once with the whole text.
    pub fn text(&self, session: &str, msg: &str, part: &str, t: i64, text: &str) {
        self.part(part, msg, session, t, t, &json!({"type":"text","text":""}));
        self.part(
            part,
            msg,
            session,
            t,
            t + 1,
            &json!({"type":"text","text":text}),
        );
    }

    /// A tool part in state `status`.
    #[allow(clippy::too_many_arguments)]
    pub fn tool(
        &self,
        session: &str,
        msg: &str,
        part: &str,
        created: i64,
        t: i64,
        tool: &str,
        status: &str,
        input: Value,
    ) {
        let data = json!({"type":"tool","callID":format!("call_{part}"),"tool":tool,
            "state":{"status":status,"input":input,"time":{"start":created}}});
        self.part(part, msg, session, created, t, &data);
    }

    /// A round's end: the `step-finish` part, the message's `finish`, then the update
    /// that sets `time.completed`.
    pub fn finish(
        &self,
        session: &str,
        id: &str,
        parent: &str,
        created: i64,
        t: i64,
        finish: &str,
    ) {
        self.part(
            &format!("prt_{id}_fin"),
            id,
            session,
            t,
            t,
            &json!({"type":"step-finish","reason":finish}),
        );
        let data = Self::assistant_data(parent, created, json!({"finish":finish}));
        self.message(id, session, created, t, &data);
        let data = Self::assistant_data(
            parent,
            created,
            json!({"finish":finish,"time":{"created":created,"completed":t + 1}}),
        );
        self.message(id, session, created, t + 1, &data);
    }

    /// An errored or aborted message: `time.completed` and `error`, no `finish`.
    pub fn error(&self, session: &str, id: &str, parent: &str, created: i64, t: i64, error: Value) {
        let data = Self::assistant_data(
            parent,
            created,
            json!({"error":error,"time":{"created":created,"completed":t}}),
        );
        self.message(id, session, created, t, &data);
    }
}

impl Db {
    /// An assistant message inserted inside a transaction the caller holds open.
    pub fn assistant_in_tx(&self, session: &str, id: &str, parent: &str, t: i64) {
        self.conn
            .execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                params![id, session, t, Self::assistant_data(parent, t, json!({})).to_string()],
            )
            .unwrap();
    }
}
