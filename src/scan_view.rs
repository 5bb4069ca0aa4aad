//! How `scan` prints sessions: a table for people, JSON Lines for programs.

use crate::clock::format_rfc3339;
use crate::reduce::SessionView;
use serde::Serialize;

#[derive(Serialize)]
struct Row<'a> {
    provider: &'a str,
    session: &'a str,
    agent: Option<&'a str>,
    path: &'a str,
    state: &'a str,
    turn: Option<&'a str>,
    line: u64,
    record_ts: Option<String>,
    message: Option<&'a str>,
    evidence: Option<&'a str>,
}

/// One JSON object (no newline).
pub fn json_line(v: &SessionView) -> String {
    let row = Row {
        provider: v.key.provider.as_str(),
        session: &v.key.session,
        agent: v.key.agent.as_deref(),
        path: &v.path,
        state: v.state.as_str(),
        turn: v.turn.as_deref(),
        line: v.line,
        record_ts: v.record_ts.map(format_rfc3339),
        message: v.message.as_deref(),
        evidence: v.evidence,
    };
    serde_json::to_string(&row).unwrap_or_default()
}

/// Removes terminal escape sequences and other control characters: transcript text is
/// untrusted and must not drive the terminal.
pub fn strip_terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte; OSC: ESC ] … BEL or ESC \; others: ESC + one.
            match chars.peek() {
                Some('[') => {
                    chars.next();
                    for n in chars.by_ref() {
                        if ('@'..='~').contains(&n) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    while let Some(n) = chars.next() {
                        if n == '\u{7}' || (n == '\u{1b}' && chars.peek() == Some(&'\\')) {
                            if n == '\u{1b}' {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            }
        } else if c.is_control() || ('\u{80}'..='\u{9f}').contains(&c) {
            continue;
        } else {
            out.push(c);
        }
    }
    out
}

fn cell(s: &str, width: usize) -> String {
    let s = strip_terminal(s);
    if s.chars().count() <= width {
        format!("{s:<width$}")
    } else {
        let cut: String = s.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A readable table, one session a row.
pub fn table(views: &[SessionView]) -> String {
    let mut out = format!(
        "{:<12} {:<7} {:<13} {:<12} {:<20} {}\n",
        "STATE", "AGENT", "SESSION", "SUBAGENT", "SINCE", "LAST MESSAGE"
    );
    for v in views {
        let since = v
            .record_ts
            .map(format_rfc3339)
            .map(|t| t[..19].replace('T', " "))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<12} {:<7} {} {} {:<20} {}\n",
            v.state.as_str(),
            v.key.provider.as_str(),
            cell(&v.key.session, 13),
            cell(v.key.agent.as_deref().unwrap_or("-"), 12),
            since,
            cell(v.message.as_deref().unwrap_or(""), 60).trim_end(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_escapes() {
        assert_eq!(strip_terminal("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(strip_terminal("x\u{1b}]0;title\u{7}y"), "xy");
        assert_eq!(strip_terminal("x\u{1b}]8;;http://e\u{1b}\\y"), "xy");
        assert_eq!(strip_terminal("bell\u{7}"), "bell");
    }
}
