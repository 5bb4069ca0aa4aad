//! How each hand-back kind looks and sounds: urgency, sound, timeout, and the priority
//! webhooks (ntfy) give it. A question must be seen, so by default it is critical (it
//! stays until dismissed) with a sound of its own; a finished turn is normal; a failure
//! is critical.

use crate::model::EventKind;
use std::path::PathBuf;

/// A notification's urgency (the freedesktop `urgency` hint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    Low,
    Normal,
    Critical,
}

impl Urgency {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "low" => Some(Urgency::Low),
            "normal" => Some(Urgency::Normal),
            "critical" => Some(Urgency::Critical),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::Low => "low",
            Urgency::Normal => "normal",
            Urgency::Critical => "critical",
        }
    }

    /// The hint's byte value.
    pub fn level(self) -> u8 {
        match self {
            Urgency::Low => 0,
            Urgency::Normal => 1,
            Urgency::Critical => 2,
        }
    }
}

/// One kind's look and sound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Style {
    pub urgency: Urgency,
    /// A freedesktop sound theme name (`sound-name` hint).
    pub sound_name: Option<String>,
    /// A sound file to play instead (`sound-file` hint).
    pub sound_file: Option<PathBuf>,
    /// How long the notification stays, in ms; `None`: the server decides, 0: until
    /// dismissed.
    pub timeout_ms: Option<u32>,
    /// ntfy priority, 1 (min) to 5 (max); `None`: the server's default (3).
    pub priority: Option<u8>,
    /// The freedesktop `category` hint.
    pub category: &'static str,
}

/// The kinds that can have a style, as written in config.
pub const STYLED: [EventKind; 3] = [
    EventKind::TurnCompleted,
    EventKind::NeedsInput,
    EventKind::TurnFailed,
];

/// Every hand-back kind's style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Styles {
    pub completed: Style,
    pub needs_input: Style,
    pub failed: Style,
}

impl Default for Styles {
    fn default() -> Self {
        Styles {
            completed: Style {
                urgency: Urgency::Normal,
                sound_name: Some("complete".to_owned()),
                sound_file: None,
                timeout_ms: None,
                priority: None,
                category: "im.received",
            },
            needs_input: Style {
                urgency: Urgency::Critical,
                sound_name: Some("dialog-question".to_owned()),
                sound_file: None,
                timeout_ms: Some(0),
                priority: Some(4),
                category: "im.received",
            },
            failed: Style {
                urgency: Urgency::Critical,
                sound_name: Some("dialog-error".to_owned()),
                sound_file: None,
                timeout_ms: Some(0),
                priority: Some(4),
                category: "im.error",
            },
        }
    }
}

impl Styles {
    /// The style of `kind`, if it is a hand-back kind.
    pub fn get(&self, kind: EventKind) -> Option<&Style> {
        match kind {
            EventKind::TurnCompleted => Some(&self.completed),
            EventKind::NeedsInput => Some(&self.needs_input),
            EventKind::TurnFailed => Some(&self.failed),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, kind: EventKind) -> Option<&mut Style> {
        match kind {
            EventKind::TurnCompleted => Some(&mut self.completed),
            EventKind::NeedsInput => Some(&mut self.needs_input),
            EventKind::TurnFailed => Some(&mut self.failed),
            _ => None,
        }
    }

    /// The ntfy priority of `kind`, if it has one.
    pub fn priority(&self, kind: EventKind) -> Option<u8> {
        self.get(kind).and_then(|s| s.priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_critical_and_stays_done_is_normal() {
        let s = Styles::default();
        let q = s.get(EventKind::NeedsInput).expect("styled");
        assert_eq!((q.urgency, q.timeout_ms), (Urgency::Critical, Some(0)));
        let d = s.get(EventKind::TurnCompleted).expect("styled");
        assert_eq!(d.urgency, Urgency::Normal);
        assert_ne!(q.sound_name, d.sound_name);
        assert_eq!(
            s.get(EventKind::TurnFailed).map(|f| f.urgency),
            Some(Urgency::Critical)
        );
        assert_eq!(s.get(EventKind::Anomaly), None);
        assert_eq!(s.priority(EventKind::NeedsInput), Some(4));
        assert_eq!(s.priority(EventKind::TurnCompleted), None);
    }
}
