//! How `scan` prints sessions: a table for people, JSON Lines for programs.

use crate::clock::format_rfc3339;
use crate::reduce::SessionView;
use serde::Serialize;

#[derive(Serialize)]
struct Row<'a> {
    provider: &'a str,
    session: &'a str,
    agent: Option<&'a str>,
    project: String,
    path: &'a str,
    state: &'a str,
    turn: Option<&'a str>,
    line: u64,
    record_ts: Option<String>,
    message: Option<&'a str>,
    evidence: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "is_zero")]
    background_tasks: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    branch: Option<&'a str>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One JSON object (no newline); `now` (Unix ms) and `after_ms` decide `stale`.
pub fn json_line(v: &SessionView, now: i64, after_ms: u64) -> String {
    let row = Row {
        provider: v.key.provider.as_str(),
        session: &v.key.session,
        agent: v.key.agent.as_deref(),
        project: crate::naming::view_project(v, 1),
        path: &v.path,
        state: v.shown_state(now, after_ms),
        turn: v.turn.as_deref(),
        line: v.line,
        record_ts: v.record_ts.map(format_rfc3339),
        message: v.message.as_deref(),
        evidence: v.evidence,
        reason: v.reason,
        background_tasks: v.background_tasks,
        branch: v.branch.as_deref(),
    };
    serde_json::to_string(&row).unwrap_or_default()
}

/// `scan`'s output: JSON Lines (the filter applied, nothing else left out) or the
/// person's table ([`crate::people`]); a working session silent for `after_ms` that
/// liveness cannot judge shows as `stale`.
pub fn write(
    views: &[SessionView],
    json: bool,
    table: &crate::people::Table,
    after_ms: u64,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    use crate::people::{self, Row};
    let now = table.now;
    let rows: Vec<Row> = views
        .iter()
        .map(|v| Row::from_view(v, now, after_ms))
        .collect();
    if json {
        for (v, keep) in views.iter().zip(people::matching(&rows, &table.filter)) {
            if keep {
                writeln!(out, "{}", json_line(v, now, after_ms))?;
            }
        }
        return Ok(());
    }
    if views.is_empty() {
        return writeln!(out, "No sessions found.");
    }
    let view = people::view(rows, &table.filter, table.now);
    let text = people::render(&view, table.width, table.colour, table.now);
    if text.is_empty() {
        return writeln!(out, "No sessions match.");
    }
    write!(out, "{text}")
}
