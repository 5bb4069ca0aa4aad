//! What a person reads about a session, in one place: its title and headline, the
//! project's and the agent's names, the branch worth naming, the message as plain text,
//! markup escaping for notification bodies, and which event kinds a sink or a hook takes
//! ([`EventFilter`]). The sinks, the `scan`/`status` tables, the socket and the client
//! all name things through it, so they name them alike. Pure; untrusted text goes
//! through `text.rs`.

use crate::model::{Event, EventKind, ProviderKind};
use crate::reduce::SessionView;
use crate::text::strip_terminal;

/// Every event kind, for parsing configuration.
pub const EVENT_KINDS: [EventKind; 12] = [
    EventKind::TurnStarted,
    EventKind::TurnCompleted,
    EventKind::TurnFailed,
    EventKind::TurnInterrupted,
    EventKind::NeedsInput,
    EventKind::Anomaly,
    EventKind::DaemonReady,
    EventKind::DaemonStopping,
    EventKind::ContextCompacted,
    EventKind::TurnResumed,
    EventKind::NeedsInputResolved,
    EventKind::TurnRetracted,
];

/// The kinds that mean "the agent handed the turn back": the default for every sink.
pub const HANDBACK_KINDS: [EventKind; 3] = [
    EventKind::TurnCompleted,
    EventKind::TurnFailed,
    EventKind::NeedsInput,
];

/// Parses an event kind as written in the stream (`turn_completed`, …).
pub fn parse_event_kind(s: &str) -> Option<EventKind> {
    EVENT_KINDS.into_iter().find(|k| k.as_str() == s)
}

/// Which events an exec hook or a webhook receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter {
    /// Event kinds that pass (default: the hand-back kinds).
    pub kinds: Vec<EventKind>,
    /// Whether subagents' events pass too (default: no, they are noise on a phone).
    pub subagents: bool,
}

impl Default for EventFilter {
    fn default() -> Self {
        EventFilter {
            kinds: HANDBACK_KINDS.to_vec(),
            subagents: false,
        }
    }
}

impl EventFilter {
    pub fn matches(&self, ev: &Event) -> bool {
        self.kinds.contains(&ev.event) && (self.subagents || ev.agent.is_none())
    }
}

/// Escapes text for the notification body, which servers render as a subset of HTML:
/// transcript text must show as text, never as a link or markup.
pub fn escape_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The agent's name as people know it.
pub fn agent_name(p: Option<ProviderKind>) -> &'static str {
    p.map_or("baton", |p| p.descriptor().display_name())
}

/// Longest project name or reason shown in a title.
const TITLE_PART_MAX: usize = 40;

/// Untrusted text made fit for a one-line title: no escapes or control characters, capped.
fn title_part(s: &str) -> String {
    let clean = strip_terminal(s);
    let clean = clean.trim();
    if clean.chars().count() <= TITLE_PART_MAX {
        return clean.to_owned();
    }
    let mut cut: String = clean.chars().take(TITLE_PART_MAX - 1).collect();
    cut.push('…');
    cut
}

/// What a person calls the project a session belongs to:
///
/// - the event's `project`: the last component of the directory the agent started in,
///   as its transcript says (Claude Code, Codex, Copilot CLI, Pi);
/// - else the folder the transcript sits in, whole, where it names the project: Claude
///   Code's and Cursor's `projects/<cwd with '/' → '-'>/` (`home-me-src-my-web-app`:
///   the encoding is lossy, so no word of it is safe to drop) and Pi's
///   `sessions/--<cwd>--/`;
/// - else the last 8 characters of the session id (Codex thread ids are UUIDv7, whose
///   leading characters are a timestamp shared by sessions started together).
pub fn project_name(ev: &Event) -> String {
    if let Some(p) = ev.project.as_deref().map(title_part)
        && !p.is_empty()
    {
        return p;
    }
    path_project(ev.provider, ev.path.as_deref(), ev.session.as_deref())
}

/// `ev` with its `project` filled in as [`project_name`] found it, for hooks and
/// webhooks, which always name one.
pub fn with_project(ev: &Event, project: &str) -> Event {
    let mut ev = ev.clone();
    if ev.session.is_some() && ev.project.is_none() {
        ev.project = Some(project.to_owned());
    }
    ev
}

/// [`project_name`] for a `scan`/`status` row: `components` path components of its
/// start directory (2 where another row shares the name).
pub fn view_project(v: &SessionView, components: usize) -> String {
    match v
        .start_dir
        .as_deref()
        .and_then(|d| crate::text::dir_name(d, components))
    {
        Some(name) => name,
        None => path_project(Some(v.key.provider), Some(&v.path), Some(&v.key.session)),
    }
}

/// The project as the transcript's *path* names it (record contents are never read
/// for it).
fn path_project(
    provider: Option<ProviderKind>,
    path: Option<&str>,
    session: Option<&str>,
) -> String {
    // The agent's folder of the form `<marker>/<project>/…`, if it keeps one.
    let marker = provider.and_then(|p| p.descriptor().project_marker());
    if let Some(marker) = marker
        && let Some(path) = path
    {
        let mut parts = path.split('/');
        while let Some(p) = parts.next() {
            if p == marker {
                if let Some(dir) = parts.next()
                    && parts.next().is_some()
                {
                    let name = title_part(dir.trim_matches('-'));
                    if !name.is_empty() {
                        return name;
                    }
                }
                break;
            }
        }
    }
    short_session(session.unwrap_or(""))
}

fn short_session(session: &str) -> String {
    let chars: Vec<char> = session
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let start = chars.len().saturating_sub(8);
    let short: String = chars[start..].iter().collect();
    if short.is_empty() {
        "session".to_owned()
    } else {
        short
    }
}

/// An RFC 3339 reset time in the system's zone (`10:24 CET`, with the date when it is
/// not the day the event was decided); a free-text hint ("5:40pm (Europe/Madrid)") as
/// written.
fn reset_time(resets_at: &str, decided: &str) -> String {
    match crate::clock::parse_rfc3339(resets_at) {
        Some(ms) => {
            let now = crate::clock::parse_rfc3339(decided).unwrap_or(ms);
            crate::clock::local_time(ms, now, false)
        }
        None => title_part(resets_at),
    }
}

/// "1 background task finished", "3 background tasks still running".
fn tasks(n: u32, what: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} background task{s} {what}")
}

/// What happened, in a few words, for a title.
pub fn headline(ev: &Event) -> String {
    match ev.event {
        EventKind::TurnCompleted => match (ev.background_finished, ev.background_tasks) {
            (Some(n), _) => format!("your turn — {}", tasks(n, "finished")),
            (None, Some(n)) if n > 0 => format!("your turn — {}", tasks(n, "still running")),
            _ => "your turn".to_owned(),
        },
        EventKind::NeedsInput => "needs your answer".to_owned(),
        EventKind::TurnFailed => {
            let reason = ev.reason.as_deref().unwrap_or("");
            if reason.contains("limit") {
                match ev.resets_at.as_deref() {
                    Some(at) => format!("usage limit until {}", reset_time(at, &ev.ts)),
                    None => "usage limit reached".to_owned(),
                }
            } else if reason.is_empty() {
                "turn failed".to_owned()
            } else {
                format!("turn failed ({})", title_part(reason))
            }
        }
        EventKind::TurnInterrupted => "interrupted".to_owned(),
        EventKind::TurnStarted => "working".to_owned(),
        EventKind::ContextCompacted => "context compacted".to_owned(),
        EventKind::TurnResumed => "working again".to_owned(),
        EventKind::NeedsInputResolved => "answered".to_owned(),
        EventKind::TurnRetracted => "rewound".to_owned(),
        EventKind::Anomaly => match ev.reason.as_deref() {
            Some(r) => format!("anomaly ({})", title_part(r)),
            None => "anomaly".to_owned(),
        },
        EventKind::DaemonReady => "started".to_owned(),
        EventKind::DaemonStopping => "stopping".to_owned(),
    }
}

/// A one-line title naming the agent and the project, e.g.
/// "Claude Code · my-web-app: your turn" or "Codex · 3f9c2a1b: usage limit until 23:45 CET".
pub fn title(ev: &Event) -> String {
    if ev.session.is_none() {
        return format!("baton: {}", headline(ev));
    }
    let agent = agent_name(ev.provider);
    let mut project = project_name(ev);
    // Another machine's session reads as `project@remote`.
    if let Some(r) = ev.remote.as_deref() {
        project = format!("{project}@{}", title_part(r));
    }
    // A branch other than the default one is worth reading: `my-web-app (feat/login)`.
    if let Some(b) = shown_branch(ev.branch.as_deref()) {
        project = format!("{project} ({})", title_part(b));
    }
    // A background job's name says which of them handed back (`claude --bg -n NAME`).
    if let Some(j) = ev.job.as_deref() {
        project = format!("{project} · job {}", title_part(j));
    }
    match ev.agent.as_deref() {
        Some(sub) => format!(
            "{agent} · {project} · subagent {}: {}",
            title_part(sub),
            headline(ev)
        ),
        None => format!("{agent} · {project}: {}", headline(ev)),
    }
}

/// The branch a title names: not the default one (`main`, `master`), nor a detached
/// `HEAD`.
pub fn shown_branch(branch: Option<&str>) -> Option<&str> {
    branch.filter(|b| !b.is_empty() && !matches!(*b, "main" | "master" | "HEAD"))
}

/// The event's message as plain text for people: terminal escapes stripped.
pub fn plain_message(ev: &Event) -> String {
    ev.message
        .as_deref()
        .map(strip_terminal)
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn event(kind: EventKind, provider: ProviderKind, path: &str) -> Event {
        let mut e = Event::lifecycle(
            kind,
            "2026-01-01T00:00:00.000Z".to_owned(),
            "id1".to_owned(),
        );
        e.provider = Some(provider);
        e.session = Some("0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_owned());
        e.turn = Some("t1".to_owned());
        e.path = Some(path.to_owned());
        e.line = Some(3);
        e.message = Some("done".to_owned());
        e
    }

    const CLAUDE: &str = "/home/me/.claude/projects/-home-me-src-myproject/0199.jsonl";
    const CODEX: &str = "/home/me/.codex/sessions/2026/01/01/rollout-x.jsonl";

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape_markup(r#"<b>x</b> & <a href="u">'y'</a>"#),
            "&lt;b&gt;x&lt;/b&gt; &amp; &lt;a href=&quot;u&quot;&gt;&#39;y&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn project_from_the_session_else_the_whole_folder_else_short_session() {
        let mut ev = event(EventKind::TurnCompleted, ProviderKind::Claude, CLAUDE);
        assert_eq!(project_name(&ev), "home-me-src-myproject");
        ev.project = Some("my-web\u{1b}[31m-app".to_owned());
        assert_eq!(project_name(&ev), "my-web-app");
        let sub = "/h/.claude/projects/-h-web/abc/subagents/agent-1.jsonl";
        assert_eq!(
            project_name(&event(EventKind::TurnCompleted, ProviderKind::Claude, sub)),
            "h-web"
        );
        let mut ev = event(EventKind::TurnCompleted, ProviderKind::Codex, CODEX);
        assert_eq!(project_name(&ev), "2e3f4a5b");
        ev.project = Some("api-server".to_owned());
        assert_eq!(project_name(&ev), "api-server");
        assert_eq!(
            with_project(&ev, "x").project.as_deref(),
            Some("api-server")
        );
        ev.project = None;
        assert_eq!(with_project(&ev, "x").project.as_deref(), Some("x"));
        // A file directly under projects/ has no project directory.
        let odd = "/x/projects/file.jsonl";
        let ev = event(EventKind::TurnCompleted, ProviderKind::Claude, odd);
        assert_eq!(project_name(&ev), "2e3f4a5b");
    }

    #[test]
    fn titles() {
        let mut ev = event(EventKind::TurnCompleted, ProviderKind::Claude, CLAUDE);
        ev.project = Some("myproject".to_owned());
        assert_eq!(title(&ev), "Claude Code · myproject: your turn");
        ev.remote = Some("devbox".to_owned());
        assert_eq!(title(&ev), "Claude Code · myproject@devbox: your turn");
        ev.remote = None;
        ev.job = Some("nightly <b>sync</b>".to_owned());
        assert_eq!(
            title(&ev),
            "Claude Code · myproject · job nightly <b>sync</b>: your turn"
        );
        ev.job = None;
        ev.background_tasks = Some(1);
        assert_eq!(
            title(&ev),
            "Claude Code · myproject: your turn — 1 background task still running"
        );
        ev.background_tasks = None;
        ev.background_finished = Some(3);
        assert_eq!(
            title(&ev),
            "Claude Code · myproject: your turn — 3 background tasks finished"
        );
        let mut ev = event(EventKind::TurnFailed, ProviderKind::Codex, CODEX);
        ev.reason = Some("usage_limit_exceeded".to_owned());
        ev.resets_at = Some("2026-01-01T22:45:00.000Z".to_owned());
        // In the system's zone (exact strings under a fixed TZ: tests/desktop.rs).
        let local = crate::clock::local_time(
            crate::clock::parse_rfc3339("2026-01-01T22:45:00.000Z").unwrap_or_default(),
            crate::clock::parse_rfc3339(&ev.ts).unwrap_or_default(),
            false,
        );
        assert_eq!(
            title(&ev),
            format!("Codex · 2e3f4a5b: usage limit until {local}")
        );
        ev.resets_at = None;
        assert_eq!(title(&ev), "Codex · 2e3f4a5b: usage limit reached");
        ev.reason = Some("overloaded\u{1b}[31m_error".to_owned());
        assert_eq!(
            title(&ev),
            "Codex · 2e3f4a5b: turn failed (overloaded_error)"
        );
        let mut ev = event(EventKind::NeedsInput, ProviderKind::Claude, CLAUDE);
        ev.project = Some("myproject".to_owned());
        ev.agent = Some("a88134".to_owned());
        assert_eq!(
            title(&ev),
            "Claude Code · myproject · subagent a88134: needs your answer"
        );
    }

    #[test]
    fn titles_name_cursor_copilot_and_pi() {
        let cursor = "/h/.cursor/projects/Users-me-src-myproject/agent-transcripts/a/a.jsonl";
        let ev = event(EventKind::TurnCompleted, ProviderKind::Cursor, cursor);
        assert_eq!(title(&ev), "Cursor · Users-me-src-myproject: your turn");
        let copilot = "/h/.copilot/session-state/0199a1b2/events.jsonl";
        let ev = event(EventKind::TurnInterrupted, ProviderKind::Copilot, copilot);
        assert_eq!(title(&ev), "Copilot CLI · 2e3f4a5b: interrupted");
        let pi = "/h/.pi/agent/sessions/--home-me-web--/2026-01-01T00-00-00-000Z_x.jsonl";
        let ev = event(EventKind::TurnCompleted, ProviderKind::Pi, pi);
        assert_eq!(title(&ev), "Pi · home-me-web: your turn");
    }

    #[test]
    fn filter_defaults_to_main_handbacks() {
        let f = EventFilter::default();
        let mut ev = event(EventKind::TurnCompleted, ProviderKind::Claude, CLAUDE);
        assert!(f.matches(&ev));
        ev.agent = Some("a1".to_owned());
        assert!(!f.matches(&ev));
        let ev = event(EventKind::Anomaly, ProviderKind::Claude, CLAUDE);
        assert!(!f.matches(&ev));
        for k in EVENT_KINDS {
            assert_eq!(parse_event_kind(k.as_str()), Some(k));
        }
        assert_eq!(parse_event_kind("nope"), None);
    }

    /// Fails to compile when a kind is added, as a reminder to extend [`EVENT_KINDS`].
    #[allow(dead_code)]
    fn all_kinds_listed(k: EventKind) -> usize {
        match k {
            EventKind::TurnStarted
            | EventKind::TurnCompleted
            | EventKind::TurnFailed
            | EventKind::TurnInterrupted
            | EventKind::NeedsInput
            | EventKind::Anomaly
            | EventKind::DaemonReady
            | EventKind::DaemonStopping
            | EventKind::ContextCompacted
            | EventKind::TurnResumed
            | EventKind::NeedsInputResolved
            | EventKind::TurnRetracted => EVENT_KINDS.len(),
        }
    }
}
