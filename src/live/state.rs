//! What the live view shows, as plain data: the daemon's `status` rows, kept up to date
//! by its events, and what the person typed. No terminal here; `now` is an argument.
//!
//! The table is the person's: main conversations only (a session's subagents are counted
//! on its row), sorted needs_input, failed, completed, working, interrupted, then newest
//! first; sessions idle for over a week are one line unless `a` shows them all.

use crate::clock::parse_rfc3339;
use crate::model::ProviderKind;
use crate::people;
use serde_json::Value;
use std::collections::HashMap;

pub use people::OLD_MS;

/// (provider, session, subagent).
type Key = (String, String, Option<String>);

/// Whether the view is fed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Connecting,
    Live,
    /// Lost; the text says why. The view keeps what it had.
    Down(String),
}

/// A key, as the view understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Char(char),
    Enter,
    Esc,
    Backspace,
    CtrlC,
}

/// A row of the table, ready to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub state: String,
    pub agent: String,
    pub project: String,
    pub age: String,
    pub message: String,
}

/// The table at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub rows: Vec<Row>,
    /// Sessions hidden for being older than [`OLD_MS`].
    pub older: usize,
    /// Sessions hidden by the filter.
    pub filtered: usize,
}

#[derive(Debug)]
pub struct View {
    sessions: HashMap<Key, people::Row>,
    /// The filter in force (case-insensitive, on state, agent, project and message).
    pub filter: String,
    /// While typing a filter: the text so far.
    pub editing: Option<String>,
    pub show_all: bool,
    pub link: Link,
    /// Each `[[remote]]`'s name and its link's line ("remote devbox: connected").
    remotes: Vec<(String, String)>,
}

impl Default for View {
    fn default() -> Self {
        View {
            sessions: HashMap::new(),
            filter: String::new(),
            editing: None,
            show_all: false,
            link: Link::Connecting,
            remotes: Vec::new(),
        }
    }
}

fn text(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_owned()
}

fn key_of(v: &Value) -> Option<Key> {
    // Another machine's session is its own row, even with a session id seen here.
    let session = match v["remote"].as_str() {
        Some(r) => format!("{}@{r}", v["session"].as_str()?),
        None => v["session"].as_str()?.to_owned(),
    };
    Some((
        v["provider"].as_str()?.to_owned(),
        session,
        v["agent"].as_str().map(str::to_owned),
    ))
}

/// The session state an event leaves behind, for the kinds that move one.
fn state_after(event: &str) -> Option<&'static str> {
    Some(match event {
        "turn_started" | "turn_resumed" | "needs_input_resolved" | "context_compacted" => "working",
        "turn_completed" => "completed",
        "turn_failed" => "failed",
        "turn_interrupted" => "interrupted",
        "needs_input" => "needs_input",
        _ => return None,
    })
}

impl View {
    /// Replaces what is known with a `status` answer (at each (re)connection).
    pub fn set_status(&mut self, rows: &[Value]) {
        self.sessions.clear();
        for r in rows {
            let (Some(key), Some(row)) = (key_of(r), people::Row::from_status(r)) else {
                continue;
            };
            self.sessions.insert(key, row);
        }
    }

    /// The remotes' links as the `status` end line says (at each (re)connection).
    pub fn set_remotes(&mut self, end: &Value) {
        self.remotes = remote_states(&end["remotes"])
            .into_iter()
            .zip(end["remotes"].as_array().into_iter().flatten())
            .map(|(line, r)| {
                (
                    crate::text::one_line(r["name"].as_str().unwrap_or("")),
                    line,
                )
            })
            .collect();
    }

    /// A remote whose events arrive is connected, whatever `status` said before.
    fn remote_seen(&mut self, name: &str) {
        let line = format!("remote {name}: connected");
        match self.remotes.iter_mut().find(|(n, _)| n == name) {
            Some((_, l)) => *l = line,
            None => self.remotes.push((name.to_owned(), line)),
        }
    }

    /// One line per remote link: "remote devbox: connected".
    pub fn remote_lines(&self) -> Vec<&str> {
        self.remotes.iter().map(|(_, l)| l.as_str()).collect()
    }

    /// Applies one event from the stream; true if the table may have changed.
    pub fn apply(&mut self, ev: &Value) -> bool {
        let Some(state) = ev["event"].as_str().and_then(state_after) else {
            return false;
        };
        let Some(key) = key_of(ev) else {
            return false;
        };
        let remote = ev["remote"].as_str().map(crate::text::one_line);
        if let Some(r) = &remote {
            // Events arriving is the link working.
            self.remote_seen(r);
        }
        let since = ev["record_ts"]
            .as_str()
            .or(ev["ts"].as_str())
            .and_then(parse_rfc3339);
        let s = self.sessions.entry(key).or_insert_with(|| people::Row {
            state: String::new(),
            provider: ProviderKind::parse(&text(ev, "provider")),
            session: text(ev, "session"),
            subagent: ev["agent"].as_str().map(str::to_owned),
            project: String::new(),
            project_long: String::new(),
            at: None,
            message: String::new(),
            background_tasks: 0,
            reason: None,
            branch: None,
        });
        s.state = state.to_owned();
        s.reason = ev["reason"]
            .as_str()
            .filter(|r| *r == "writer_gone")
            .map(str::to_owned);
        if since.is_some() {
            s.at = since;
        }
        let project = match (ev["project"].as_str(), &remote) {
            (Some(p), None) => Some(p.to_owned()),
            // Another machine's session reads `project@remote`, as its pages do.
            (p, Some(r)) => Some(format!("{}@{r}", p.unwrap_or(""))),
            (None, None) => None,
        };
        if let Some(p) = project {
            s.project.clone_from(&p);
            if s.project_long.is_empty() || remote.is_some() {
                s.project_long = p;
            }
        }
        if let Some(b) = ev["branch"].as_str() {
            s.branch = Some(b.to_owned());
        }
        if let Some(m) = ev["message"].as_str() {
            s.message = m.to_owned();
        }
        true
    }

    /// The person's view of the sessions known, under `filter` (no typed filter): what
    /// the status bar sums up ([`super::bar`]).
    pub fn people_view(&self, filter: &people::Filter, now: i64) -> people::View {
        people::view(self.sessions.values().cloned().collect(), filter, now)
    }

    /// Handles a key; true when the person asked to quit.
    pub fn key(&mut self, k: Input) -> bool {
        if let Some(typed) = &mut self.editing {
            match k {
                Input::Enter => {
                    self.filter = std::mem::take(typed);
                    self.editing = None;
                }
                Input::Esc => self.editing = None,
                Input::Backspace => {
                    typed.pop();
                }
                Input::Char(c) if !c.is_control() && typed.chars().count() < 80 => typed.push(c),
                Input::CtrlC => return true,
                Input::Char(_) => {}
            }
            return false;
        }
        match k {
            Input::Char('q') | Input::Esc | Input::CtrlC => return true,
            Input::Char('/') => self.editing = Some(self.filter.clone()),
            Input::Char('a') => self.show_all = !self.show_all,
            _ => {}
        }
        false
    }

    /// The table as it stands at `now` (wall ms): the person's table of `status`
    /// ([`people::view`]), then the typed filter on what its cells show.
    pub fn table(&self, now: i64) -> Table {
        let filter = people::Filter {
            all: self.show_all,
            ..people::Filter::default()
        };
        let view = people::view(self.sessions.values().cloned().collect(), &filter, now);
        let needle = self.filter.to_lowercase();
        let mut filtered = 0;
        let mut rows = Vec::new();
        for shown in &view.shown {
            let [state, agent, project, age, message] = people::cells(shown, now);
            let hit = needle.is_empty()
                || [&state, &agent, &project, &message]
                    .iter()
                    .any(|f| f.to_lowercase().contains(&needle));
            if !hit {
                filtered += 1;
                continue;
            }
            rows.push(Row {
                state,
                agent,
                project,
                age,
                message,
            });
        }
        Table {
            rows,
            older: view.older,
            filtered,
        }
    }
}

/// "remote devbox: connected", one per entry of the `status` end line's `remotes`
/// (for the live view and `baton status`).
pub fn remote_states(remotes: &Value) -> Vec<String> {
    remotes
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or("");
            let one_line = |s: &str, max| crate::text::cut(&crate::text::one_line(s), max);
            let name = one_line(text("name"), 40);
            match text("state") {
                "retrying" => format!(
                    "remote {name}: retrying in {} s: {}",
                    r["retry_in_s"].as_u64().unwrap_or(0),
                    one_line(text("why"), 200)
                ),
                state => format!("remote {name}: {}", one_line(state, 20)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000_000;

    fn ts(ms: i64) -> String {
        crate::clock::format_rfc3339(ms)
    }

    fn row(session: &str, agent: Option<&str>, state: &str, ago_ms: i64) -> Value {
        json!({"provider": "claude", "session": session, "agent": agent,
               "project": format!("p-{session}"), "state": state,
               "since": ts(NOW - ago_ms), "message": format!("m {session}")})
    }

    fn states(t: &Table) -> Vec<String> {
        t.rows
            .iter()
            .map(|r| format!("{} {}", r.state, r.project))
            .collect()
    }

    #[test]
    fn sorted_for_the_person_with_subagents_on_their_parent() {
        let mut v = View::default();
        v.set_status(&[
            row("w", None, "working", 1_000),
            row("c1", None, "completed", 5_000),
            row("c2", None, "completed", 2_000),
            row("n", None, "needs_input", 9_000),
            row("i", None, "interrupted", 1_000),
            row("f", None, "failed", 9_000),
            row("w", Some("a1"), "working", 1_000),
            row("w", Some("a2"), "working", 1_000),
            row("w", Some("a3"), "completed", 1_000),
            row("old", None, "completed", OLD_MS + 1),
        ]);
        let t = v.table(NOW);
        assert_eq!(
            states(&t),
            [
                "needs_input p-n",
                "failed p-f",
                "completed p-c2",
                "completed p-c1",
                "working p-w",
                "interrupted p-i",
            ]
        );
        assert_eq!(t.older, 1);
        assert_eq!(t.rows[0].agent, "Claude Code");
        assert!(t.rows[4].message.starts_with("+2 subagents working"));
        v.key(Input::Char('a'));
        assert_eq!(v.table(NOW).rows.len(), 7);
        assert_eq!(v.table(NOW).older, 0);
    }

    #[test]
    fn events_move_a_row_and_add_new_sessions() {
        let mut v = View::default();
        v.set_status(&[row("s", None, "working", 60_000)]);
        let done = json!({"event": "turn_completed", "provider": "claude", "session": "s",
                          "agent": null, "ts": ts(NOW), "record_ts": ts(NOW - 1_000),
                          "message": "all \u{1b}[31mdone\nnow", "project": "web"});
        assert!(v.apply(&done));
        let t = v.table(NOW);
        assert_eq!(t.rows[0].state, "completed");
        assert_eq!(t.rows[0].project, "web");
        assert_eq!(t.rows[0].message, "all done now");
        assert_eq!(t.rows[0].age, crate::clock::age(NOW - 1_000, NOW));
        let other = json!({"event": "needs_input", "provider": "codex", "session": "x",
                           "ts": ts(NOW)});
        assert!(v.apply(&other));
        assert_eq!(v.table(NOW).rows[0].agent, "Codex");
        assert!(!v.apply(&json!({"event": "daemon_ready", "ts": ts(NOW)})));
        assert!(!v.apply(&json!({"event": "anomaly", "provider": "claude", "session": "s"})));
        assert_eq!(v.table(NOW).rows.len(), 2);
    }

    #[test]
    fn filter_keys_and_quit() {
        let mut v = View::default();
        v.set_status(&[
            row("alpha", None, "working", 1),
            row("beta", None, "failed", 1),
        ]);
        assert!(!v.key(Input::Char('/')));
        for c in "ALP".chars() {
            v.key(Input::Char(c));
        }
        assert_eq!(v.table(NOW).rows.len(), 2, "not in force before Enter");
        v.key(Input::Backspace);
        v.key(Input::Char('p'));
        assert!(!v.key(Input::Char('q')), "q is text while typing");
        v.key(Input::Backspace);
        v.key(Input::Enter);
        assert_eq!(v.filter, "ALp");
        let t = v.table(NOW);
        assert_eq!(states(&t), ["working p-alpha"]);
        assert_eq!(t.filtered, 1);
        v.key(Input::Char('/'));
        v.key(Input::Esc);
        assert_eq!(v.filter, "ALp", "Esc leaves the filter as it was");
        assert!(v.key(Input::Char('q')));
        assert!(v.key(Input::Esc));
        assert!(v.key(Input::CtrlC));
    }
}
