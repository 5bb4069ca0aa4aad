//! How `scan` prints sessions: a table for people, JSON Lines for programs.

use crate::clock::format_rfc3339;
use crate::reduce::SessionView;
use crate::text::strip_terminal;
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
    /// Why the turn ended, where the state alone does not say (`writer_gone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "is_zero")]
    background_tasks: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A state as people read it: `completed (2 background tasks running)` while tasks the
/// session launched have not reported back.
pub fn state_text(state: &str, background_tasks: u64) -> String {
    match background_tasks {
        0 => state.to_owned(),
        1 => format!("{state} (1 background task running)"),
        n => format!("{state} ({n} background tasks running)"),
    }
}

/// A state as people read it, with the reason where the state alone does not say:
/// `interrupted (writer_gone)`.
pub fn state_cell(v: &SessionView, now: i64, after_ms: u64) -> String {
    let state = state_text(v.shown_state(now, after_ms), u64::from(v.background_tasks));
    match v.reason {
        Some(r) => format!("{state} ({r})"),
        None => state,
    }
}

/// One JSON object (no newline); `now` (Unix ms) and `after_ms` decide `stale`.
pub fn json_line(v: &SessionView, now: i64, after_ms: u64) -> String {
    let row = Row {
        provider: v.key.provider.as_str(),
        session: &v.key.session,
        agent: v.key.agent.as_deref(),
        project: crate::sink::view_project(v, 1),
        path: &v.path,
        state: v.shown_state(now, after_ms),
        turn: v.turn.as_deref(),
        line: v.line,
        record_ts: v.record_ts.map(format_rfc3339),
        message: v.message.as_deref(),
        evidence: v.evidence,
        reason: v.reason,
        background_tasks: v.background_tasks,
    };
    serde_json::to_string(&row).unwrap_or_default()
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

/// Each row's project name: the last component of its start directory, or the last two
/// where another project in view has the same name.
pub fn project_names(views: &[SessionView]) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    let short: Vec<String> = views
        .iter()
        .map(|v| crate::sink::view_project(v, 1))
        .collect();
    let mut dirs: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (v, name) in views.iter().zip(&short) {
        if let Some(d) = v.start_dir.as_deref() {
            dirs.entry(name)
                .or_default()
                .insert(d.trim_end_matches('/'));
        }
    }
    views
        .iter()
        .zip(&short)
        .map(|(v, name)| match dirs.get(name.as_str()) {
            Some(set) if set.len() > 1 => crate::sink::view_project(v, 2),
            _ => name.clone(),
        })
        .collect()
}

/// A readable table, one session a row; ages are counted to `now` (Unix ms), and a
/// working session silent for `after_ms` that liveness cannot judge is `stale`.
pub fn table(views: &[SessionView], now: i64, after_ms: u64) -> String {
    let mut out = format!(
        "{:<12} {:<11} {:<20} {:<13} {:<12} {:<12} {}\n",
        "STATE", "AGENT", "PROJECT", "SESSION", "SUBAGENT", "AGE", "LAST MESSAGE"
    );
    let projects = project_names(views);
    for (v, project) in views.iter().zip(&projects) {
        let since = v
            .record_ts
            .map(|t| crate::clock::age(t, now))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<12} {:<11} {} {} {} {:<12} {}\n",
            state_cell(v, now, after_ms),
            crate::sink::agent_name(Some(v.key.provider)),
            cell(project, 20),
            cell(&v.key.session, 13),
            cell(v.key.agent.as_deref().unwrap_or("-"), 12),
            since,
            cell(v.message.as_deref().unwrap_or(""), 60).trim_end(),
        ));
    }
    out
}
