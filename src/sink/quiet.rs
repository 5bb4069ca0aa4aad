//! When a page is not shown although its event goes out: a muted project or session or
//! quiet hours (the desktop's), or the session in front of the person (see
//! [`crate::focus`]; the desktop's, and the exec hook's or a webhook's that ask). Pure:
//! times are arguments.

// A mute lives with its file, in `state` (below the sinks); named here too for old paths.
pub use crate::state::mutes::Mute;
use serde::Serialize;

/// A daily span of local time, `22:00-07:30` (it may cross midnight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietHours {
    /// Minutes after local midnight; the span is `[start, end)`.
    pub start: u16,
    pub end: u16,
}

fn minute_of(s: &str) -> Option<u16> {
    let (h, m) = s.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

impl QuietHours {
    /// Parses `HH:MM-HH:MM` (24-hour local time).
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not HH:MM-HH:MM (24-hour local time, e.g. 22:00-07:30)");
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let (start, end) = (minute_of(a).ok_or_else(bad)?, minute_of(b).ok_or_else(bad)?);
        if start == end {
            return Err(format!("`{s}` is an empty span"));
        }
        Ok(QuietHours { start, end })
    }

    /// Whether `minute` (after local midnight) falls in the span.
    pub fn contains(self, minute: u16) -> bool {
        if self.start < self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }

    pub fn to_text(self) -> String {
        format!(
            "{:02}:{:02}-{:02}:{:02}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60
        )
    }
}

/// The local minute of the day at Unix ms `ms` in zone `tz`.
pub fn local_minute(tz: &jiff::tz::TimeZone, ms: i64) -> Option<u16> {
    let t = jiff::Timestamp::from_millisecond(ms).ok()?;
    let dt = t.to_zoned_datetime(tz.clone()).datetime();
    u16::try_from(i32::from(dt.hour()) * 60 + i32::from(dt.minute())).ok()
}

/// Why a page was not shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// `mute` in the config file.
    Muted,
    /// `baton mute`.
    MutedFor,
    QuietHours,
    /// The session is in front of the person.
    Focused,
}

impl Held {
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Muted => "muted",
            Held::MutedFor => "muted_for",
            Held::QuietHours => "quiet_hours",
            Held::Focused => "focused",
        }
    }
}

/// A page that was not shown, for `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldPage {
    pub session: String,
    pub project: String,
    pub reason: Held,
    /// Unix ms.
    pub at_ms: i64,
    /// The sinks that held it back: `desktop`, `exec`, `webhook`.
    pub sinks: Vec<&'static str>,
    /// The event it was the page of, so that a second sink holding the same page joins
    /// `sinks` instead of listing it twice.
    #[serde(skip)]
    pub event: String,
}

impl HeldPage {
    pub fn new(
        sink: &'static str,
        reason: Held,
        session: &str,
        project: &str,
        event: &str,
        at_ms: i64,
    ) -> Self {
        HeldPage {
            session: session.to_owned(),
            project: project.to_owned(),
            reason,
            at_ms,
            sinks: vec![sink],
            event: event.to_owned(),
        }
    }
}

/// Pages recently held back, newest last.
const HELD_KEPT: usize = 32;

/// The recent pages held back, shared by the sinks (which write) and `status` (which
/// reads). One entry per session: its latest.
#[derive(Debug, Default)]
pub struct HeldLog(std::sync::Mutex<std::collections::VecDeque<HeldPage>>);

impl HeldLog {
    /// Notes `page`. When the session's latest entry is the same page held for the same
    /// reason by another sink, that sink joins it; else `page` replaces it.
    pub fn record(&self, mut page: HeldPage) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = g.iter().position(|h| h.session == page.session)
            && let Some(old) = g.remove(i)
            && old.event == page.event
            && old.reason == page.reason
        {
            let mut sinks = old.sinks;
            for s in page.sinks {
                if !sinks.contains(&s) {
                    sinks.push(s);
                }
            }
            page.sinks = sinks;
        }
        if g.len() == HELD_KEPT {
            g.pop_front();
        }
        g.push_back(page);
    }

    /// Forgets `session`'s entry: a later page of it was shown, so "not shown" is over.
    pub fn shown(&self, session: &str) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|h| h.session != session);
    }

    pub fn recent(&self) -> Vec<HeldPage> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// The config-file half of the decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Projects or sessions never shown (`mute = [...]`).
    pub mute: Vec<String>,
    pub quiet_hours: Option<QuietHours>,
}

impl Rules {
    /// Whether a page of `project` / `session` is held back at local `minute`, given the
    /// mutes set at run time that are still live. Pure.
    pub fn hold(
        &self,
        project: &str,
        session: &str,
        minute: Option<u16>,
        live: &[Mute],
    ) -> Option<Held> {
        if self.mute.iter().any(|m| m == project || m == session) {
            return Some(Held::Muted);
        }
        if live
            .iter()
            .any(|m| m.branch.is_none() && m.covers(project, session))
        {
            return Some(Held::MutedFor);
        }
        if let (Some(q), Some(m)) = (self.quiet_hours, minute)
            && q.contains(m)
        {
            return Some(Held::QuietHours);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_hours_cross_midnight() {
        let q = QuietHours::parse("22:00-07:30").expect("parses");
        assert!(q.contains(22 * 60));
        assert!(q.contains(3 * 60));
        assert!(q.contains(7 * 60 + 29));
        assert!(!q.contains(7 * 60 + 30));
        assert!(!q.contains(12 * 60));
        assert!(!q.contains(21 * 60 + 59));
        let day = QuietHours::parse("9:00-17:00").expect("parses");
        assert!(day.contains(12 * 60) && !day.contains(17 * 60) && !day.contains(8 * 60));
        assert_eq!(q.to_text(), "22:00-07:30");
        for bad in [
            "22:00",
            "25:00-07:00",
            "22:60-07:00",
            "22-07",
            "10:00-10:00",
            "a:bc-d",
        ] {
            assert!(QuietHours::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mutes_hold_by_project_or_session_until_they_expire() {
        let rules = Rules {
            mute: vec!["noisy".to_owned()],
            quiet_hours: QuietHours::parse("22:00-07:30").ok(),
        };
        assert_eq!(rules.hold("noisy", "s1", Some(600), &[]), Some(Held::Muted));
        assert_eq!(rules.hold("web", "s1", Some(600), &[]), None);
        let m = Mute {
            target: "s1".to_owned(),
            until_ms: Some(1_000),
            sessions: Vec::new(),
            branch: None,
        };
        assert!(m.live(999) && !m.live(1_000));
        assert_eq!(
            rules.hold("web", "s1", Some(600), &[m]),
            Some(Held::MutedFor)
        );
        assert_eq!(
            rules.hold("web", "s1", Some(23 * 60), &[]),
            Some(Held::QuietHours)
        );
        assert_eq!(rules.hold("web", "s1", None, &[]), None);
    }

    #[test]
    fn a_page_held_by_two_sinks_is_listed_once_with_both() {
        let log = HeldLog::default();
        let page =
            |sink, reason, event: &str, at| HeldPage::new(sink, reason, "s1", "web", event, at);
        log.record(page("desktop", Held::Focused, "e1", 1));
        log.record(page("exec", Held::Focused, "e1", 2));
        log.record(page("exec", Held::Focused, "e1", 3));
        log.record(HeldPage::new(
            "webhook",
            Held::Focused,
            "s2",
            "api",
            "e9",
            4,
        ));
        let got = log.recent();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].sinks.as_slice(), got[0].at_ms),
            (&["desktop", "exec"][..], 3)
        );
        assert_eq!(got[1].sinks, ["webhook"]);
        // The session's next page replaces it, and is newest.
        log.record(page("desktop", Held::Focused, "e2", 5));
        let got = log.recent();
        assert_eq!(
            (got[1].session.as_str(), got[1].sinks.as_slice()),
            ("s1", &["desktop"][..])
        );
        // So does the same page held for another reason.
        log.record(page("exec", Held::MutedFor, "e2", 6));
        assert_eq!(log.recent()[1].sinks, ["exec"]);
        let json = serde_json::to_value(&log.recent()[1]).unwrap_or_default();
        assert_eq!(json["sinks"][0], "exec");
        assert!(json.get("event").is_none(), "{json}");
    }

    #[test]
    fn local_minute_in_a_zone() {
        let utc = jiff::tz::TimeZone::UTC;
        // 2026-01-01T22:15:00Z
        assert_eq!(local_minute(&utc, 1_767_305_700_000), Some(22 * 60 + 15));
    }
}
