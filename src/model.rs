//! Boundary types: what leaves the process (the v1 event) and the provider-neutral
//! vocabulary the reducer speaks.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which agent wrote a transcript. Its names, parsing and everything else known per
/// agent are its descriptor's (`provider::descriptor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Claude,
    Codex,
    Norma,
    Sgme,
    /// Cursor's agent (IDE agent and `cursor-agent` CLI).
    Cursor,
    /// GitHub Copilot CLI.
    Copilot,
    /// The Pi coding agent (badlogic/pi-mono).
    Pi,
    /// OpenCode (sst/opencode), whose sessions are rows of one SQLite database.
    OpenCode,
    /// Google's Gemini CLI.
    Gemini,
    /// Qwen Code (QwenLM/qwen-code), a Gemini CLI fork.
    Qwen,
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `event` field of the v1 schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    TurnStarted,
    TurnCompleted,
    TurnFailed,
    TurnInterrupted,
    NeedsInput,
    Anomaly,
    DaemonReady,
    DaemonStopping,
    /// Additive (Norma boundary records): context was compacted mid-turn.
    ContextCompacted,
    /// Additive: activity in the same turn contradicted a `quiet` completion, which
    /// `supersedes` names; the turn is working again.
    TurnResumed,
    /// Additive: a `needs_input` wait ended inside its turn (answered, approved, timed
    /// out): the turn is working again.
    NeedsInputResolved,
    /// Additive: the agent took a decided turn out of its conversation (a rewind), so its
    /// outcome, which `supersedes` names, no longer stands.
    TurnRetracted,
}

impl EventKind {
    /// Whether an event of this kind ends its session's `needs_input` wait: the answer
    /// (`needs_input_resolved`), or the next prompt or the turn's end superseding it.
    pub fn ends_wait(self) -> bool {
        matches!(
            self,
            Self::NeedsInputResolved
                | Self::TurnStarted
                | Self::TurnCompleted
                | Self::TurnFailed
                | Self::TurnInterrupted
                | Self::TurnResumed
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::TurnStarted => "turn_started",
            Self::TurnCompleted => "turn_completed",
            Self::TurnFailed => "turn_failed",
            Self::TurnInterrupted => "turn_interrupted",
            Self::NeedsInput => "needs_input",
            Self::Anomaly => "anomaly",
            Self::DaemonReady => "daemon_ready",
            Self::DaemonStopping => "daemon_stopping",
            Self::ContextCompacted => "context_compacted",
            Self::TurnResumed => "turn_resumed",
            Self::NeedsInputResolved => "needs_input_resolved",
            Self::TurnRetracted => "turn_retracted",
        }
    }
}

/// One line of the event stream (schema v1). Every listed field is always present
/// (null when it does not apply) so consumers never need `has_key` checks; fields added
/// later are omitted when empty.
/// Deserializable so the state journal can deliver an event again after a crash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub v: u8,
    pub event: EventKind,
    pub provider: Option<ProviderKind>,
    pub session: Option<String>,
    pub agent: Option<String>,
    pub turn: Option<String>,
    pub path: Option<String>,
    pub line: Option<u64>,
    pub ts: String,
    pub record_ts: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub evidence: Option<String>,
    pub id: String,
    /// Additive: when a usage or rate limit resets, if the transcript says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// Additive: who began the turn (`human` or `system`), on `turn_started`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_initiator"
    )]
    pub initiator: Option<Known>,
    /// Additive: where the turn came from (`human`, `sdk`, `peer`, `task_notification`,
    /// `scheduled`, `bash`), on every event of a turn whose start said.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_origin"
    )]
    pub origin: Option<Known>,
    /// Additive: tokens before a compaction, on `context_compacted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_tokens: Option<u64>,
    /// Additive: on `turn_resumed`, the `id` of the completion it takes back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// Additive: on `turn_completed`, how many background tasks the session launched
    /// are still running or waiting to report back (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background_tasks: Option<u32>,
    /// Additive, on pages only (never on the event stream): how many background tasks
    /// finished while a completion was held back for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background_finished: Option<u32>,
    /// Additive: what the session's project is called: the last component of the
    /// directory the agent started in, when the transcript says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Additive: the `[[remote]]` an event came from (absent on local events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Additive: the git branch the session is on, where the agent records it (Claude
    /// Code's `gitBranch`, Codex's `session_meta.payload.git.branch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Additive: the agent's own name for the session, where it gives one (a Claude Code
    /// background job's `name`, from its `state.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Additive: set on a re-delivery after a crash (same `id`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
}

/// One of a fixed set of names. Written as an alias because serde would take a field
/// spelled `Option<&'static str>` as borrowed from the input (and ask the input to live
/// for ever); [`known_initiator`] and [`known_origin`] read these fields back instead.
pub type Known = &'static str;

/// The initiators the reducer writes, read back; anything else reads back as unknown.
fn known_initiator<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'static str>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|s| match s.as_str() {
        "human" => "human",
        "system" => "system",
        "agent" => "agent",
        _ => "unknown",
    }))
}

/// An origin read back: one the reducer writes, or none.
fn known_origin<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
    Ok(Option::<String>::deserialize(d)?
        .as_deref()
        .and_then(Origin::parse)
        .map(Origin::as_str))
}

impl Event {
    /// A daemon lifecycle event, not tied to any transcript.
    pub fn lifecycle(event: EventKind, ts: String, id: String) -> Self {
        Event {
            v: 1,
            event,
            provider: None,
            session: None,
            agent: None,
            turn: None,
            path: None,
            line: None,
            ts,
            record_ts: None,
            reason: None,
            message: None,
            evidence: None,
            id,
            resets_at: None,
            initiator: None,
            origin: None,
            pre_tokens: None,
            supersedes: None,
            background_tasks: None,
            background_finished: None,
            project: None,
            remote: None,
            branch: None,
            job: None,
            replay: false,
        }
    }

    /// Serializes to one JSON line (without the newline).
    pub fn to_json(&self) -> String {
        // Serializing plain strings and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Where a conversation lives: one reducer state per key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionKey {
    pub provider: ProviderKind,
    pub session: String,
    pub agent: Option<String>,
}

/// The state `scan` and `status` report for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Working,
    Completed,
    Failed,
    Interrupted,
    NeedsInput,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
            Self::NeedsInput => "needs_input",
        }
    }
}

/// Messages in events are capped so one record cannot flood a notification or a dashboard.
pub const MESSAGE_MAX_CHARS: usize = 280;

/// Trims, collapses whitespace runs, drops control characters and caps the result at
/// [`MESSAGE_MAX_CHARS`] characters (ending in `…` when cut).
pub fn clip_message(s: &str) -> Option<String> {
    // Folded as the text is cleaned, stopping at the cap: cleaning up to eight times the
    // cap first, then splitting it into words, was a few per cent of `scan`'s time.
    let look = &s.as_bytes()[..s.len().min(MESSAGE_MAX_CHARS * 8)];
    if look
        .iter()
        .all(|&b| matches!(b, b' '..=b'~' | b'\t' | b'\n' | b'\r'))
    {
        // Printable ASCII and whitespace, as most messages are: nothing to clean, and
        // each byte is a character (cleaning it char by char was 3 % of a first start).
        return fold_words(look.iter().map(|&b| char::from(b)));
    }
    fold_words(crate::text::Printable::new(s.chars()).take(MESSAGE_MAX_CHARS * 8))
}

/// [`clip_message`] of the clean characters `chars`.
fn fold_words(chars: impl Iterator<Item = char>) -> Option<String> {
    let mut out = String::new();
    let mut n = 0;
    let mut cut = false;
    // A space is owed between words: it is written only before the next word.
    let mut space = false;
    for c in chars {
        if c.is_whitespace() {
            space = n > 0;
            continue;
        }
        if n == MESSAGE_MAX_CHARS {
            cut = true;
            break;
        }
        if space {
            out.push(' ');
            n += 1;
            space = false;
            if n == MESSAGE_MAX_CHARS {
                cut = true;
                break;
            }
        }
        out.push(c);
        n += 1;
    }
    clipped(out, n, cut)
}

/// The end of a clip: `out` (`n` characters) ends in `…` when it was `cut`, within the
/// cap; trailing whitespace goes, and nothing left is no message.
fn clipped(mut out: String, mut n: usize, cut: bool) -> Option<String> {
    if cut {
        while n >= MESSAGE_MAX_CHARS {
            out.pop();
            n -= 1;
        }
        out.push('…');
    }
    let trimmed = out.trim_end();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

/// Where a turn came from, when the transcript says: who or what put the prompt there.
/// Finer than [`crate::provider::Initiator`]; carried on every event of the turn (`origin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Typed by the person.
    Human,
    /// Sent by a program through the agent's SDK or `-p` mode.
    Sdk,
    /// A message from another agent session (Claude agent teams).
    Peer,
    /// A background task or subagent reporting back.
    TaskNotification,
    /// Fired by a schedule (`/loop`, cron jobs, wake-ups): nobody typed it.
    Scheduled,
    /// A shell command the person ran in the agent's bash mode, which the model answered.
    Bash,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Sdk => "sdk",
            Self::Peer => "peer",
            Self::TaskNotification => "task_notification",
            Self::Scheduled => "scheduled",
            Self::Bash => "bash",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Human,
            Self::Sdk,
            Self::Peer,
            Self::TaskNotification,
            Self::Scheduled,
            Self::Bash,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_caps_and_collapses() {
        assert_eq!(clip_message("  a \n\n b\t").as_deref(), Some("a b"));
        assert_eq!(clip_message("   "), None);
        let long = "x".repeat(1000);
        let c = clip_message(&long).unwrap();
        assert_eq!(c.chars().count(), MESSAGE_MAX_CHARS);
        assert!(c.ends_with('…'));
        let exact = "y".repeat(MESSAGE_MAX_CHARS);
        assert_eq!(clip_message(&exact).unwrap(), exact);
    }

    #[test]
    fn an_event_reads_back_as_it_was_written() {
        let mut ev = Event::lifecycle(EventKind::TurnStarted, "t".to_owned(), "i".to_owned());
        ev.initiator = Some("system");
        ev.origin = Some("scheduled");
        ev.replay = true;
        let back: Event = serde_json::from_str(&ev.to_json()).unwrap();
        assert_eq!(back, ev);
        // An initiator baton does not write reads back as unknown, an origin as none;
        // the additive fields may be missing or null.
        let mut json: serde_json::Value = serde_json::from_str(&ev.to_json()).unwrap();
        json["initiator"] = "robot".into();
        json["origin"] = "elsewhere".into();
        json.as_object_mut().unwrap().remove("replay");
        let back: Event = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            (back.initiator, back.origin, back.replay),
            (Some("unknown"), None, false)
        );
        json["initiator"] = serde_json::Value::Null;
        json.as_object_mut().unwrap().remove("origin");
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!((back.initiator, back.origin), (None, None));
    }

    #[test]
    fn clip_drops_control_chars() {
        assert_eq!(clip_message("a\u{1b}[31mb").as_deref(), Some("ab"));
    }

    /// The clip as it was: the text cleaned, split into words, the words joined (its
    /// end, [`clipped`], is shared).
    fn clip_by_words(s: &str) -> Option<String> {
        let clean: String = crate::text::Printable::new(s.chars())
            .take(MESSAGE_MAX_CHARS * 8)
            .collect();
        let mut out = String::new();
        let mut n = 0;
        let mut cut = false;
        'words: for word in clean.split_whitespace() {
            if n > 0 {
                if n == MESSAGE_MAX_CHARS {
                    cut = true;
                    break;
                }
                out.push(' ');
                n += 1;
            }
            for c in word.chars() {
                if n == MESSAGE_MAX_CHARS {
                    cut = true;
                    break 'words;
                }
                out.push(c);
                n += 1;
            }
        }
        clipped(out, n, cut)
    }

    /// The words and their spaces, joined, are clipped as [`clip_by_words`] clips them.
    fn folds_as_by_words(
        words: &[(String, String)],
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let s: String = words.iter().map(|(w, sp)| format!("{w}{sp}")).collect();
        proptest::prop_assert_eq!(clip_message(&s), clip_by_words(&s));
        Ok(())
    }

    proptest::proptest! {
        /// Folding while cleaning gives what splitting the cleaned text into words gave,
        /// at and around the cap.
        #[test]
        fn the_fold_agrees_with_splitting_into_words(
            words in proptest::collection::vec(
                ("[a-zé\u{1b}\u{200b}]{0,9}", "[ \t\n\u{a0}\u{3000}]{0,3}"),
                0..120,
            ),
        ) {
            folds_as_by_words(&words)?;
        }

        /// Plain ASCII (folded without cleaning) and ASCII with controls, escapes or
        /// DEL (cleaned), in texts longer and shorter than the part looked at.
        #[test]
        fn ascii_folds_as_any_text_does(
            words in proptest::collection::vec(
                ("[a-z.!~]{0,40}|[a-z\u{1b}\u{7f}\u{b}\u{c}\u{0}]{0,6}", "[ \t\n\r]{0,3}"),
                0..160,
            ),
        ) {
            folds_as_by_words(&words)?;
        }
    }

    #[test]
    fn a_word_that_ends_at_the_cap_is_cut_as_before() {
        for len in [
            MESSAGE_MAX_CHARS - 2,
            MESSAGE_MAX_CHARS - 1,
            MESSAGE_MAX_CHARS,
        ] {
            for tail in ["", " ", " b", "  bc d"] {
                let s = format!("{}{tail}", "a".repeat(len));
                assert_eq!(clip_message(&s), clip_by_words(&s), "{len} {tail:?}");
            }
        }
    }
}
