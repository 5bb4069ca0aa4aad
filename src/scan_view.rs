//! How `scan` prints sessions: a table for people, JSON Lines for programs.

use crate::reduce::SessionView;

/// One JSON object (no newline); `now` (Unix ms) and `after_ms` decide `stale`. The
/// row is `status`'s too ([`crate::session_row`]), with `record_ts` for its time.
pub fn json_line(v: &SessionView, now: i64, after_ms: u64) -> String {
    crate::session_row::json_line(v, now, after_ms, crate::session_row::Command::Scan)
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
