//! Draws a [`View`] into a frame: a header line, the table, a footer with the keys.

use super::state::{Link, Table, View};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table as TableWidget};

fn state_style(state: &str) -> Style {
    let color = match state.split(' ').next().unwrap_or("") {
        "needs_input" => Color::Magenta,
        "failed" => Color::Red,
        "completed" => Color::Green,
        "working" => Color::Yellow,
        _ => Color::Gray,
    };
    Style::default().fg(color)
}

/// The view at `now` (wall ms).
pub fn draw(frame: &mut Frame<'_>, view: &View, now: i64) {
    let table = view.table(now);
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header(view, &table)), head);
    frame.render_widget(rows(&table), body);
    frame.render_widget(Paragraph::new(footer(view, &table)), foot);
}

fn header(view: &View, t: &Table) -> Line<'static> {
    let link = match &view.link {
        Link::Connecting => "connecting…".to_owned(),
        Link::Live => "live".to_owned(),
        Link::Down(why) => format!("reconnecting: {why}"),
    };
    let n = t.rows.len();
    let mut s = format!(
        "baton · {n} session{} · {link}",
        if n == 1 { "" } else { "s" }
    );
    for r in view.remote_lines() {
        s.push_str(&format!(" · {r}"));
    }
    if !view.filter.is_empty() {
        s.push_str(&format!(" · filter “{}”", view.filter));
    }
    Line::styled(s, Style::default().add_modifier(Modifier::BOLD))
}

fn footer(view: &View, t: &Table) -> Line<'static> {
    if let Some(typed) = &view.editing {
        return Line::from(format!("filter: {typed}▏  (Enter to apply, Esc to cancel)"));
    }
    let mut s = String::new();
    if t.older > 0 {
        let noun = if t.older == 1 { "session" } else { "sessions" };
        s.push_str(&format!("{} older {noun}: a to show  ·  ", t.older));
    }
    if t.filtered > 0 {
        s.push_str(&format!("{} filtered out  ·  ", t.filtered));
    }
    s.push_str(if view.show_all {
        "/ filter  a recent only  q quit"
    } else {
        "/ filter  a all  q quit"
    });
    Line::styled(s, Style::default().fg(Color::DarkGray))
}

fn rows(t: &Table) -> TableWidget<'static> {
    let header = Row::new(["STATE", "AGENT", "PROJECT", "AGE", "LAST MESSAGE"])
        .style(Style::default().add_modifier(Modifier::BOLD));
    let state_width = t
        .rows
        .iter()
        .map(|r| r.state.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(11, 40);
    let body: Vec<Row> = t
        .rows
        .iter()
        .map(|r| {
            Row::new([
                Cell::from(r.state.clone()).style(state_style(&r.state)),
                Cell::from(r.agent.clone()),
                Cell::from(r.project.clone()),
                Cell::from(r.age.clone()),
                Cell::from(r.message.clone()),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(u16::try_from(state_width).unwrap_or(11)),
        Constraint::Length(11),
        Constraint::Length(20),
        Constraint::Length(12),
        Constraint::Fill(1),
    ];
    TableWidget::new(body, widths).header(header)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000_000;

    fn screen(view: &View) -> Vec<String> {
        let mut term = Terminal::new(TestBackend::new(100, 8)).unwrap();
        term.draw(|f| draw(f, view, NOW)).unwrap();
        let buf = term.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_owned())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn the_screen_shows_rows_under_a_header_and_the_keys_below() {
        let mut v = View::default();
        v.link = Link::Live;
        v.set_status(&[
            json!({"provider": "codex", "session": "s", "project": "api-server",
            "state": "needs_input", "since": crate::clock::format_rfc3339(NOW - 120_000),
            "message": "Run the migration?"}),
        ]);
        let s = screen(&v);
        assert_eq!(s[0], "baton · 1 session · live");
        assert!(s[1].starts_with("STATE"), "{s:?}");
        assert!(s[2].starts_with("needs_input"), "{s:?}");
        for want in ["Codex", "api-server", "2 min ago", "Run the migration?"] {
            assert!(s[2].contains(want), "{want} not in {:?}", s[2]);
        }
        assert_eq!(s[7], "/ filter  a all  q quit");
        v.link = Link::Down("the daemon stopped".into());
        v.editing = Some("api".into());
        let s = screen(&v);
        assert!(
            s[0].ends_with("reconnecting: the daemon stopped"),
            "{}",
            s[0]
        );
        assert!(s[7].starts_with("filter: api"), "{}", s[7]);
    }

    #[test]
    fn a_remote_session_reads_project_at_remote_beside_its_link() {
        let mut v = View::default();
        v.link = Link::Live;
        v.set_status(&[]);
        v.set_remotes(&json!({"end": true, "remotes": [
            {"name": "devbox", "state": "retrying", "retry_in_s": 8, "why": "ssh: refused"}]}));
        assert_eq!(
            screen(&v)[0],
            "baton · 0 sessions · live · remote devbox: retrying in 8 s: ssh: refused"
        );
        // Before: a plain `api` row, as if local, and no line for the link.
        v.apply(
            &json!({"event": "turn_completed", "provider": "claude", "session": "s1",
            "agent": null, "ts": crate::clock::format_rfc3339(NOW - 60_000),
            "record_ts": null, "project": "api", "remote": "devbox", "message": "Done."}),
        );
        v.apply(
            &json!({"event": "turn_started", "provider": "claude", "session": "s1",
            "agent": null, "ts": crate::clock::format_rfc3339(NOW - 30_000),
            "record_ts": null, "project": "api", "message": null}),
        );
        let s = screen(&v);
        assert_eq!(s[0], "baton · 2 sessions · live · remote devbox: connected");
        let remote = s.iter().find(|l| l.contains("Done.")).unwrap();
        assert!(remote.contains("api@devbox"), "{remote}");
        assert!(
            s.iter()
                .any(|l| l.starts_with("working") && l.contains("api ")),
            "{s:?}"
        );
    }

    #[test]
    fn one_older_session_is_one_session() {
        let mut v = View::default();
        v.link = Link::Live;
        let old = |s: &str, ago: i64| {
            json!({"provider": "codex", "session": s, "project": "api-server",
            "state": "completed", "since": crate::clock::format_rfc3339(NOW - ago),
            "message": "Done."})
        };
        v.set_status(&[old("new", 60_000), old("a", 8 * 86_400_000)]);
        // Before: "1 older sessions".
        assert!(
            screen(&v)[7].starts_with("1 older session: a to show"),
            "{:?}",
            screen(&v)[7]
        );
        v.set_status(&[old("a", 8 * 86_400_000), old("b", 9 * 86_400_000)]);
        assert!(
            screen(&v)[7].starts_with("2 older sessions: a to show"),
            "{:?}",
            screen(&v)[7]
        );
    }
}
