//! One session as a program reads it: the row `scan --json` and `status --json` print,
//! one JSON object per line, the schema in docs/events.md ("Session rows"). One type
//! for both commands, so they cannot drift apart; where they differ it is a field:
//! `scan` names the last record's time `record_ts` (as the events do), `status` names it
//! `since`, only `status` adds `project_long` (its table tells two projects of one
//! name apart by it), and `scan` writes `branch` last where `status` writes it after
//! the project (the bytes each command has always printed).

use crate::clock::format_rfc3339;
use crate::reduce::SessionView;
use serde::{Deserialize, Serialize};

/// Which command prints the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Scan,
    Status,
}

/// One session's row. Fields that are `Option<Option<_>>` are absent (outer `None`) for
/// the command that does not print them and `null` (inner `None`) when there is no value.
#[derive(Serialize)]
struct Row<'a> {
    provider: &'a str,
    session: &'a str,
    agent: Option<&'a str>,
    /// From the start directory, else the transcript's path (see `naming::project_name`).
    project: String,
    /// `status`: the last two components of the start directory, where they say more
    /// than `project`.
    #[serde(skip_serializing_if = "Option::is_none")]
    project_long: Option<String>,
    /// `status`: the git branch, where the agent records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    branch: Option<&'a str>,
    path: &'a str,
    state: &'a str,
    turn: Option<&'a str>,
    line: u64,
    /// `scan`: the last deciding record's own time.
    #[serde(skip_serializing_if = "Option::is_none")]
    record_ts: Option<Option<String>>,
    /// `status`: the same time, under the name `status` has always used.
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<Option<String>>,
    message: Option<&'a str>,
    evidence: Option<&'a str>,
    /// Why the turn ended, where the state alone does not say (`writer_gone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// Background tasks still running or waiting to report back (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    background_tasks: u32,
    /// `scan`: the same branch, in the place `scan` has always written it.
    #[serde(rename = "branch", skip_serializing_if = "Option::is_none")]
    branch_last: Option<&'a str>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One row as `command` prints it (one JSON object, no newline), as of `now` (Unix
/// ms): a working session silent for `after_ms` that the liveness check cannot judge is
/// `stale`.
pub fn json_line(v: &SessionView, now: i64, after_ms: u64, command: Command) -> String {
    let mut line = Vec::with_capacity(512);
    // Serializing these fields cannot fail, and into a Vec writing cannot either.
    let _ = write_line(v, now, after_ms, command, &mut line);
    line.pop();
    String::from_utf8(line).unwrap_or_default()
}

/// [`json_line`] written to `out`, with its newline, without a string of its own
/// (`status` writes 100,000 of them into one buffer).
pub fn write_line(
    v: &SessionView,
    now: i64,
    after_ms: u64,
    command: Command,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let project = crate::naming::view_project(v, 1);
    let project_long = match command {
        Command::Scan => None,
        Command::Status => longer_project(v, &project),
    };
    let time = v.record_ts.map(format_rfc3339);
    let branch = v.branch.as_deref();
    let (record_ts, since, branch, branch_last) = match command {
        Command::Scan => (Some(time), None, None, branch),
        Command::Status => (None, Some(time), branch, None),
    };
    let row = Row {
        provider: v.key.provider.as_str(),
        session: &v.key.session,
        agent: v.key.agent.as_deref(),
        project,
        project_long,
        branch,
        path: &v.path,
        state: v.shown_state(now, after_ms),
        turn: v.turn.as_deref(),
        line: v.line,
        record_ts,
        since,
        message: v.message.as_deref(),
        evidence: v.evidence,
        reason: v.reason,
        background_tasks: v.background_tasks,
        branch_last,
    };
    serde_json::to_writer(&mut *out, &row).map_err(std::io::Error::from)?;
    out.write_all(b"\n")
}

/// `status`'s `project_long`: the last two components of the start directory, where
/// they say more than `project`.
fn longer_project(v: &SessionView, project: &str) -> Option<String> {
    Some(crate::naming::view_project(v, 2)).filter(|l| l != project)
}

/// What `mute` tells sessions apart by, as the `status` row names them: read from a
/// view, or back from a row formatted when its session was parked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Names {
    pub session: String,
    pub agent: Option<String>,
    pub project: String,
    /// Absent from a row where it says no more than `project`.
    #[serde(default)]
    project_long: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
}

impl Names {
    pub fn of(v: &SessionView) -> Names {
        let project = crate::naming::view_project(v, 1);
        let project_long = longer_project(v, &project);
        Names {
            session: v.key.session.clone(),
            agent: v.key.agent.clone(),
            project,
            project_long,
            branch: v.branch.clone(),
        }
    }

    /// The names in a `status` row (the bytes [`write_line`] wrote for
    /// [`Command::Status`]); `None` if they are not such a row.
    pub fn from_row(row: &[u8]) -> Option<Names> {
        serde_json::from_slice(row).ok()
    }

    /// The last two components of the start directory (`project` where they say no more).
    pub fn project_long(&self) -> &str {
        self.project_long.as_deref().unwrap_or(&self.project)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionState;
    use serde_json::Value;

    fn parsed(v: &SessionView, command: Command) -> serde_json::Map<String, Value> {
        match serde_json::from_str(&json_line(v, 10_000, 60_000, command)) {
            Ok(Value::Object(m)) => m,
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn a_status_row_gives_back_the_names_of_its_view() {
        let mut v = crate::views::test_view("s1", Some("sub"), SessionState::Completed);
        v.branch = Some("main".to_owned());
        for dir in ["/home/me/src/web", "/srv/web"] {
            v.start_dir = Some(dir.to_owned());
            let row = json_line(&v, 0, u64::MAX, Command::Status);
            let back = Names::from_row(row.as_bytes()).unwrap();
            assert_eq!(back, Names::of(&v), "{row}");
            assert_eq!(back.project_long(), crate::naming::view_project(&v, 2));
        }
        v.branch = None;
        v.start_dir = None;
        let row = json_line(&v, 0, u64::MAX, Command::Status);
        assert_eq!(Names::from_row(row.as_bytes()).unwrap(), Names::of(&v));
        assert_eq!(Names::from_row(b"{\"end\":true}"), None);
    }

    #[test]
    fn scan_and_status_differ_only_in_the_documented_fields() {
        let mut v = crate::views::test_view("s1", None, SessionState::Completed);
        v.start_dir = Some("/home/me/src/web".to_owned());
        v.record_ts = Some(5_000);
        let mut scan = parsed(&v, Command::Scan);
        let mut status = parsed(&v, Command::Status);
        assert_eq!(
            scan.remove("record_ts"),
            Some("1970-01-01T00:00:05.000Z".into())
        );
        assert_eq!(
            status.remove("since"),
            Some("1970-01-01T00:00:05.000Z".into())
        );
        assert_eq!(status.remove("project_long"), Some("src/web".into()));
        assert_eq!(scan, status);
        assert_eq!(scan["project"], "web");
    }

    #[test]
    fn each_command_prints_the_bytes_it_printed_before_the_row_was_shared() {
        let mut v = crate::views::test_view("s1", None, SessionState::Interrupted);
        v.start_dir = Some("/home/me/src/web".to_owned());
        v.record_ts = Some(5_000);
        v.turn = Some("t1".to_owned());
        v.message = Some("m".into());
        v.branch = Some("feat/x".to_owned());
        v.background_tasks = 2;
        v.reason = Some("writer_gone");
        assert_eq!(
            json_line(&v, 10_000, 60_000, Command::Scan),
            r#"{"provider":"claude","session":"s1","agent":null,"project":"web","path":"/p","state":"interrupted","turn":"t1","line":1,"record_ts":"1970-01-01T00:00:05.000Z","message":"m","evidence":null,"reason":"writer_gone","background_tasks":2,"branch":"feat/x"}"#
        );
        assert_eq!(
            json_line(&v, 10_000, 60_000, Command::Status),
            r#"{"provider":"claude","session":"s1","agent":null,"project":"web","project_long":"src/web","branch":"feat/x","path":"/p","state":"interrupted","turn":"t1","line":1,"since":"1970-01-01T00:00:05.000Z","message":"m","evidence":null,"reason":"writer_gone","background_tasks":2}"#
        );
    }

    #[test]
    fn empty_values_are_null_or_absent_as_documented() {
        let mut v = crate::views::test_view("s1", None, SessionState::Working);
        v.record_ts = None;
        v.background_tasks = 0;
        v.branch = None;
        v.reason = None;
        for (command, time) in [(Command::Scan, "record_ts"), (Command::Status, "since")] {
            let row = parsed(&v, command);
            assert_eq!(row[time], Value::Null, "{command:?}");
            for absent in ["branch", "reason", "background_tasks", "project_long"] {
                assert!(!row.contains_key(absent), "{command:?} {absent}");
            }
            for null in ["agent", "turn", "message", "evidence"] {
                assert!(row.contains_key(null), "{command:?} {null}");
            }
        }
        v.background_tasks = 2;
        v.branch = Some("feat/x".to_owned());
        let row = parsed(&v, Command::Scan);
        assert_eq!(row["background_tasks"], 2);
        assert_eq!(row["branch"], "feat/x");
    }
}
