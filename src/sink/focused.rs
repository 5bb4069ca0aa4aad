//! "Quiet while you are looking" for the exec hook and webhooks (their own
//! `suppress_when_focused`, off by default: a hook or a phone hears about every turn
//! unless asked). The rule is the desktop's, [`crate::focus::session_in_front`]. It reads
//! `/proc` and runs tmux, so a sink only prepares a [`Check`] with the page and its
//! worker thread runs it when the page's turn comes, never the core.

use super::quiet::{Held, HeldLog, HeldPage};
use crate::model::{Event, ProviderKind};
use crate::naming::EventFilter;
use std::path::Path;

/// The page side of the exec hook and the webhooks: which events they take (`events`)
/// and whether a page carries a [`Check`] for its worker (`suppress_when_focused`).
#[derive(Debug, Clone)]
pub struct Gate {
    filter: EventFilter,
    suppress_when_focused: bool,
}

impl Gate {
    pub fn new(filter: EventFilter, suppress_when_focused: bool) -> Self {
        Gate {
            filter,
            suppress_when_focused,
        }
    }

    /// `None` when the sink does not take `ev`; else the check its worker runs before
    /// sending (none when not asked for, or as [`Check::of`] says), for `ev`'s page of
    /// `project`.
    pub fn admit(&self, ev: &Event, project: &str) -> Option<Option<Check>> {
        if !self.filter.matches(ev) {
            return None;
        }
        Some(
            self.suppress_when_focused
                .then(|| Check::of(ev, project))
                .flatten(),
        )
    }
}

/// What a worker needs to tell whether a page's session is in front of the person, and
/// to note the page held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    provider: Option<ProviderKind>,
    path: String,
    session: String,
    project: String,
    event: String,
}

impl Check {
    /// For `ev`'s page (of `project`, as the sink names it). `None` when it cannot be
    /// in front here: no session or transcript path (a daemon event), or another
    /// machine's session.
    pub fn of(ev: &Event, project: &str) -> Option<Check> {
        if ev.remote.is_some() {
            return None;
        }
        Some(Check {
            provider: ev.provider,
            path: ev.path.clone().filter(|p| !p.is_empty())?,
            session: ev.session.clone()?,
            project: project.to_owned(),
            event: ev.id.clone(),
        })
    }

    /// For a desktop note's session and event id; `None` as for [`Check::of`].
    pub fn of_click(s: &crate::focus::click::Session, event: &str) -> Option<Check> {
        if s.remote.is_some() || s.path.is_empty() {
            return None;
        }
        Some(Check {
            provider: ProviderKind::parse(&s.provider),
            path: s.path.clone(),
            session: s.session.clone(),
            project: s.project.clone(),
            event: event.to_owned(),
        })
    }

    /// Whether the session is in front of the person; if so the page is noted in `held`
    /// as held back by `sink`, for `status`.
    pub fn holds(&self, sink: &'static str, held: &HeldLog) -> bool {
        if !crate::focus::session_in_front(self.provider, Path::new(&self.path), false) {
            return false;
        }
        held.record(HeldPage::new(
            sink,
            Held::Focused,
            &self.session,
            &self.project,
            &self.event,
            crate::clock::wall_now(),
        ));
        tracing::debug!(sink, session = %self.session, "Not sent: the session is in front of the person.");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventKind;

    #[test]
    fn only_a_local_session_with_a_path_is_checked() {
        let path = "/h/.claude/projects/-h-web/s.jsonl";
        let mut ev =
            crate::naming::tests::event(EventKind::TurnCompleted, ProviderKind::Claude, path);
        let c = Check::of(&ev, "web").expect("a local session");
        assert_eq!((c.path.as_str(), c.project.as_str()), (path, "web"));
        // No agent runs this transcript: not in front, nothing noted.
        let held = HeldLog::default();
        assert!(!c.holds("exec", &held));
        assert!(held.recent().is_empty());
        ev.remote = Some("devbox".to_owned());
        assert_eq!(Check::of(&ev, "web"), None);
        ev.remote = None;
        ev.path = None;
        assert_eq!(Check::of(&ev, "web"), None);
        ev.path = Some(path.to_owned());
        ev.session = None;
        assert_eq!(Check::of(&ev, "web"), None);
    }

    #[test]
    fn a_desktop_note_is_checked_as_its_event_would_be() {
        let path = "/h/.claude/projects/-h-web/s.jsonl";
        let ev = crate::naming::tests::event(EventKind::TurnCompleted, ProviderKind::Claude, path);
        let mut s = crate::focus::click::Session {
            provider: "claude".to_owned(),
            session: ev.session.clone().unwrap_or_default(),
            project: "web".to_owned(),
            path: path.to_owned(),
            remote: None,
        };
        assert_eq!(Check::of_click(&s, &ev.id), Check::of(&ev, "web"));
        s.remote = Some("devbox".to_owned());
        assert_eq!(Check::of_click(&s, &ev.id), None);
        s.remote = None;
        s.path = String::new();
        assert_eq!(Check::of_click(&s, &ev.id), None);
    }
}
