//! Which Claude Code user records are prompts, and where each prompt came from: the
//! person, the SDK, a teammate, a background task, a schedule or bash mode
//! (transcript-formats.md A.5, E.1 and E.5).

use super::super::background::{self, Background};
use super::rules::LOCAL_COMMANDS;
use super::{ClaudeProjector, Rec};
use crate::provider::content::StrOrList;
use crate::provider::{Evidence, Initiator, ObsKind, Origin};
use serde::{Deserialize, Serialize};

/// A user record that starts a turn only once the model answers it: a `<bash-input>`
/// (bash mode; unanswered, it is a local command) or a teammate's idle notification.
/// Deciding at the answer needs no look-ahead. The turn is keyed by the deferred
/// record's uuid; its `turn_started` has the line and time of the first record of the
/// answer (the record that made it a turn). The next prompt or interrupt drops it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Deferred {
    pub(super) turn: String,
    pub(super) origin: Origin,
}

/// Whether a user line may be a [`Deferred`] turn start (for restarts, which look at one
/// line alone).
pub(crate) fn may_defer(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"<bash-input>").is_some()
        || memchr::memmem::find(line, b"idle_notification").is_some()
}

/// How a peer message (agent teams) written as a plain user record begins.
const PEER_PREFIX: &str = "Another Claude session sent a message:";

/// A `/compact` the person typed, written as plain text (2.1.23x): compaction follows,
/// no model turn.
fn typed_compact(t: &str) -> bool {
    let t = t.trim_end();
    t == "/compact" || t.starts_with("/compact ")
}

/// Who began a turn of the main conversation, from where it came from: the person for
/// what they typed or sent through the SDK (a program waits on its answer as the person
/// would), the system for what a teammate, a background task or a schedule sent, and for
/// an origin nobody knows.
pub(super) fn initiator_of(origin: Option<Origin>) -> Initiator {
    match origin {
        Some(Origin::Human | Origin::Sdk | Origin::Bash) => Initiator::Human,
        Some(Origin::Peer | Origin::TaskNotification | Origin::Scheduled) | None => {
            Initiator::System
        }
    }
}

/// A transcript value fit for a log line: short, plain characters only.
fn shown(v: &str) -> String {
    v.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .take(40)
        .collect()
}

impl ClaudeProjector {
    pub(super) fn user(
        &mut self,
        rec: &Rec<'_>,
        uuid: &str,
        in_agent: bool,
        kinds: &mut Vec<ObsKind>,
    ) {
        let Some(msg) = &rec.message else { return };
        let mut text: Option<&str> = None;
        match &msg.content {
            Some(StrOrList::Str(s)) => text = Some(s),
            Some(StrOrList::List(blocks)) => {
                for b in blocks {
                    match b.ty.as_deref() {
                        Some("tool_result") => kinds.push(ObsKind::ToolResult {
                            id: b.tool_use_id.as_deref().unwrap_or_default().to_owned(),
                        }),
                        Some("text") if text.is_none() => text = b.text.as_deref(),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if kinds.is_empty() && rec.tool_use_result.is_some() {
            kinds.push(ObsKind::Work);
        }
        if !kinds.is_empty() {
            if rec.tool_ends_turn == Some(true) {
                kinds.push(ObsKind::Completed {
                    turn: None,
                    message: None,
                    evidence: Evidence::ToolEndsTurn,
                });
            }
            return;
        }
        let Some(text) = text else { return };
        let t = text.trim_start();
        if t.starts_with("<local-command-caveat>") {
            self.last_caveat = Some(uuid.to_owned());
            return;
        }
        if rec.turn_companion == Some(true) || rec.compact_summary == Some(true) {
            return;
        }
        let declared = rec.turn_origin.as_ref().and_then(|o| o.0.as_deref());
        let kind = rec.origin.as_ref().and_then(|o| o.kind.as_deref());
        let peer = declared.map_or_else(
            || {
                kind == Some("peer")
                    || t.starts_with(PEER_PREFIX)
                    || t.starts_with("<teammate-message")
            },
            |d| d == "peer",
        );
        if peer {
            // A teammate that reports or goes idle has finished its background work.
            let from = rec.origin.as_ref().and_then(|o| o.from.as_deref());
            for name in background::teammates(t, from) {
                kinds.push(ObsKind::Background(Background::Finished(name)));
            }
        }
        // Meta records are expansions of a prompt (skill text, reminders), except the
        // ones a teammate or a schedule sends on their own.
        if rec.meta == Some(true) && !peer && declared.is_none_or(|d| matches!(d, "human" | "sdk"))
        {
            return;
        }
        if t.starts_with("[Request interrupted by user") {
            self.deferred = None;
            let reason = if t.contains("for tool use") {
                "tool_use_rejected"
            } else {
                "user"
            };
            kinds.push(ObsKind::Interrupted {
                turn: None,
                reason: reason.to_owned(),
                message: crate::model::clip_message(t),
            });
            return;
        }
        if t.starts_with("<bash-input>") {
            // Bash mode: a turn only if the model answers it (see `Deferred`).
            if !in_agent {
                self.deferred = Some(Deferred {
                    turn: uuid.to_owned(),
                    origin: Origin::Bash,
                });
            }
            return;
        }
        if t.starts_with("<local-command-std") || t.starts_with("<bash-") {
            return;
        }
        if self.local_command(rec, t) || typed_compact(t) {
            // A local slash command (/exit, /mcp, /model…): no model turn follows.
            return;
        }
        let origin = match declared {
            Some(d) => Origin::parse(d).or_else(|| {
                kinds.push(ObsKind::Anomaly {
                    reason: "unknown_turn_origin".to_owned(),
                    message: format!(
                        "turnOrigin \"{}\" is not known: the turn is started with no origin",
                        shown(d)
                    ),
                });
                None
            }),
            None if t.starts_with("<task-notification>")
                || t.starts_with("<agent-notification>")
                || matches!(kind, Some("task-notification" | "task_notification")) =>
            {
                Some(Origin::TaskNotification)
            }
            None if peer => Some(Origin::Peer),
            // Another kind of origin than the person's: nobody typed it.
            None if kind.is_some_and(|k| k != "human") => None,
            None => Some(Origin::Human),
        };
        if in_agent {
            self.deferred = None;
            kinds.push(ObsKind::TurnStart {
                turn: uuid.to_owned(),
                initiator: Initiator::Agent,
                origin: None,
            });
            return;
        }
        if origin == Some(Origin::Peer) && background::only_idle(t) {
            // A teammate saying it went idle: a turn only if the model answers it.
            self.deferred = Some(Deferred {
                turn: uuid.to_owned(),
                origin: Origin::Peer,
            });
            return;
        }
        self.deferred = None;
        kinds.push(ObsKind::TurnStart {
            turn: uuid.to_owned(),
            initiator: initiator_of(origin),
            origin,
        });
    }

    /// Whether a user record names a slash command that runs locally. Claude Code writes
    /// these as a caveat, the command, and its `<local-command-stdout>`; the command record
    /// leads with `<command-name>` (a command that prompts the model leads with
    /// `<command-message>`), follows the caveat, or names a built-in local command.
    fn local_command(&self, rec: &Rec<'_>, t: &str) -> bool {
        let Some(at) = t.find("<command-name>") else {
            return false;
        };
        if at == 0 || (rec.parent.is_some() && rec.parent.as_deref() == self.last_caveat.as_deref())
        {
            return true;
        }
        if !t.starts_with("<command-") {
            // A prompt that merely quotes a command tag.
            return false;
        }
        let name = &t[at + "<command-name>".len()..];
        let name = name
            .split("</command-name>")
            .next()
            .unwrap_or_default()
            .trim();
        LOCAL_COMMANDS.contains(&name)
    }
}
