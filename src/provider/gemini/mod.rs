//! Gemini CLI sessions: `~/.gemini/tmp/<slug>/chats/session-<time>-<id8>.jsonl`
//! (`$GEMINI_CLI_HOME` replaces `~`), subagents at `chats/<parentSessionId>/<id>.jsonl`.
//! Source: google-gemini/gemini-cli `packages/core/src/services/chatRecordingService.ts`
//! (v0.39+ JSON Lines), as shared/docs/other-agents.md "Gemini CLI (details)" records it.
//! v0.29–v0.38 wrote `chats/session-….json` instead: one document with the whole
//! `messages` list, rewritten in place; its feed reads it whole on each change
//! ([`crate::provider::Agent::is_document`]) and it is diffed like a checkpoint, with a
//! changed copy read as an upsert.
//!
//! The file is a log of updates to a message list, not a list of events:
//! - a message whose `id` was seen is appended again when it changes (a model answer comes
//!   back with its `toolCalls` once the tools finished) and the last copy wins. A copy
//!   that says nothing new is skipped; a changed one is read as that message's next
//!   state, under a key of its own, so its events are new events;
//! - `{"$set":{"messages":[…]}}` replaces the list (the session-context checkpoint, the
//!   rollback of a cancelled or failed prompt): messages not seen before are read, the
//!   ones it leaves out are forgotten, and nothing is taken back: the turn a rollback
//!   removes was already decided by its `info` or `error` record (or is, by the `error`
//!   that follows the rollback);
//! - `{"$rewindTo":"<id>"}` drops that message and all after it: the turns it drops are
//!   taken back ([`ObsKind::Retract`]), so a decided one is retracted and never paged
//!   again.
//!
//! No record ends a turn, and a tool call waiting for approval is not written until it
//! completes, so a `gemini` record with text and no tool call is only a candidate:
//! quiet (the settle) decides it, and the copy re-appended with `toolCalls` when the tools
//! come back takes a quiet completion back (`turn_resumed`).

mod descriptor;
mod records;
use super::{Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, parse_line};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
pub use descriptor::Gemini;
pub(crate) use records::Rec;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How many messages a file remembers (their ids and last states): the reach of an
/// upsert and of a rewind. A rewind past them takes nothing back (those turns were
/// followed by later prompts long ago).
const MESSAGES_KEPT: usize = 512;

/// How many tool call ids one message remembers (a response's parallel calls).
const CALLS_KEPT: usize = 256;

/// What the projector remembers of one message.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Seen {
    id: String,
    /// Hash of what decides turn state in its last copy (type, text, tool calls).
    digest: String,
    /// Whether it started a turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    prompt: bool,
    /// Tool call ids already observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    calls: Vec<String>,
}

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct GeminiProjector {
    session: String,
    /// A subagent's id (its file name) when the file is a subagent's.
    agent: Option<String>,
    /// The messages in list order, the newest last.
    messages: Vec<Seen>,
    /// The project root (from `.project_root` or `projects.json`), until an observation
    /// carries it.
    #[serde(default)]
    start_dir: Option<String>,
}

/// How a message reached the projector.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Appended,
    Checkpoint,
}

impl GeminiProjector {
    pub fn new(path: &Path) -> Self {
        let stem = super::file_stem(path);
        let parent = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        // `chats/<parentSessionId>/<agentId>.jsonl`: the parent session's subagent.
        match parent {
            Some(p) if p != "chats" && !stem.starts_with("session-") => GeminiProjector {
                session: p,
                agent: Some(stem),
                messages: Vec::new(),
                start_dir: None,
            },
            _ => GeminiProjector {
                session: stem,
                agent: None,
                messages: Vec::new(),
                start_dir: None,
            },
        }
    }

    /// The project root the CLI recorded beside the session (the file names only a
    /// hash of it): where a live `gemini` runs, and what the project is called.
    pub fn with_root(mut self, root: Option<String>) -> Self {
        self.start_dir = root;
        self
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.messages.iter().rposition(|m| m.id == id)
    }

    /// One message record: what it says that was not said before.
    fn message(&mut self, rec: &Rec<'_>, line: &[u8], via: Via, out: &mut Vec<Obs>) {
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        let ty = rec.ty.as_deref().unwrap_or_default();
        let text = rec.text();
        let calls: Vec<(&str, &str)> = rec
            .tool_calls
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.id.as_deref().unwrap_or_default(),
                    c.status.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        let mut digest = super::Fnv::new()
            .part(ty.as_bytes())
            .part(text.as_bytes())
            .part(&[u8::from(rec.has_function_response())]);
        for (id, status) in &calls {
            digest = digest.part(id.as_bytes()).part(status.as_bytes());
        }
        let digest = digest.hex();
        let id = rec.id.as_deref().unwrap_or_default();
        let (key, earlier) = if id.is_empty() {
            (content_hash(&[self.session.as_bytes(), line]), None)
        } else {
            match self.position(id) {
                Some(i) if self.messages[i].digest == digest => return,
                // A checkpoint's changed copy of an old message (a compressed history)
                // is no news of the running turn.
                Some(_) if via == Via::Checkpoint => return,
                Some(i) => {
                    let prev = self.messages[i].clone();
                    self.messages[i].digest = digest.clone();
                    (format!("{}:{id}:{digest}", self.session), Some(prev))
                }
                None => {
                    self.remember(Seen {
                        id: id.to_owned(),
                        digest,
                        prompt: false,
                        calls: Vec::new(),
                    });
                    (format!("{}:{id}", self.session), None)
                }
            }
        };
        let mut kinds = Vec::new();
        match ty {
            "user" if rec.has_function_response() => kinds.push(ObsKind::Work),
            // Gemini's own context, the first checkpoint of every session (v0.44+).
            "user" if text.trim_start().starts_with("<session_context>") => {}
            "user" if earlier.is_some() || text.trim().is_empty() => {}
            "user" => {
                if let Some(m) = self.messages.iter_mut().rev().find(|m| m.id == id) {
                    m.prompt = true;
                }
                let turn = if id.is_empty() {
                    key.clone()
                } else {
                    id.to_owned()
                };
                let (initiator, origin) = match self.agent {
                    Some(_) => (Initiator::Agent, None),
                    None => (Initiator::Human, Some(Origin::Human)),
                };
                kinds.push(ObsKind::TurnStart {
                    turn,
                    initiator,
                    origin,
                });
            }
            "gemini" => {
                let known = earlier.map(|e| e.calls).unwrap_or_default();
                let new: Vec<String> = calls
                    .iter()
                    .map(|(c, _)| (*c).to_owned())
                    .filter(|c| !known.contains(c))
                    .collect();
                for c in &new {
                    // Recorded only once complete: the call and its end at once.
                    kinds.push(ObsKind::ToolCall {
                        id: c.clone(),
                        needs_input: None,
                        message: None,
                    });
                    kinds.push(ObsKind::ToolResult { id: c.clone() });
                }
                if let Some(m) = self.messages.iter_mut().rev().find(|m| m.id == id) {
                    m.calls.extend(new);
                    let over = m.calls.len().saturating_sub(CALLS_KEPT);
                    m.calls.drain(..over);
                }
                if calls.is_empty() {
                    kinds.push(match clip_message(&text) {
                        Some(message) => ObsKind::Final {
                            message: Some(message),
                            confirm: None,
                        },
                        None => ObsKind::Work,
                    });
                } else if kinds.is_empty() {
                    kinds.push(ObsKind::Work);
                }
            }
            "error" => kinds.push(ObsKind::Failed {
                turn: None,
                reason: if records::is_limit(&text) {
                    "usage_limit"
                } else {
                    "api_error"
                }
                .to_owned(),
                message: clip_message(&text),
                resets_at: records::quota_reset(&text, record_ts)
                    .or_else(|| super::content::reset_hint(&text)),
            }),
            "info" if is_cancel(&text) => kinds.push(ObsKind::Interrupted {
                turn: None,
                reason: "user".to_owned(),
                message: clip_message(text.trim()),
            }),
            // Other `info` (a model switch), `warning`: no turn state.
            _ => {}
        }
        super::with_start_dir(&mut self.start_dir, &mut kinds);
        for kind in kinds {
            out.push(self.obs(key.clone(), record_ts, kind));
        }
    }

    fn remember(&mut self, seen: Seen) {
        if self.messages.len() >= MESSAGES_KEPT {
            self.messages.remove(0);
        }
        self.messages.push(seen);
    }

    /// A checkpoint (`via` [`Via::Checkpoint`]) or a new version of a legacy document
    /// ([`Via::Appended`]: a changed copy is news, as an upsert is): the list is now
    /// `list`.
    fn checkpoint(&mut self, list: &[Rec<'_>], line: &[u8], via: Via, out: &mut Vec<Obs>) {
        let ids: std::collections::HashSet<&str> =
            list.iter().filter_map(|m| m.id.as_deref()).collect();
        // Messages listed before the last one this file knows are old history (beyond
        // the ones kept, in a long session): only the ones after it can be news.
        let from = list
            .iter()
            .rposition(|m| {
                m.id.as_deref()
                    .is_some_and(|id| self.position(id).is_some())
            })
            .unwrap_or(0);
        self.messages.retain(|m| ids.contains(m.id.as_str()));
        for m in &list[from..] {
            self.message(m, line, via, out);
        }
    }

    /// `$rewindTo`: the message `id` and all after it are gone; so are their turns.
    fn rewind(&mut self, id: &str, line: &[u8], out: &mut Vec<Obs>) {
        let Some(at) = self.position(id) else { return };
        let key = content_hash(&[self.session.as_bytes(), line]);
        let dropped: Vec<Seen> = self.messages.drain(at..).collect();
        for m in dropped.into_iter().filter(|m| m.prompt) {
            let kind = ObsKind::Retract {
                turn: m.id,
                reason: "rewound".to_owned(),
            };
            out.push(self.obs(key.clone(), None, kind));
        }
    }
}

/// Gemini's cancellation notes (`info` records).
fn is_cancel(text: &str) -> bool {
    matches!(
        text.trim(),
        "Request cancelled." | "User cancelled the request."
    )
}

impl Projector for GeminiProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, self.agent.as_deref())
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        let buf: Vec<u8>;
        let (rec, repaired) = parse_line!(line, buf, Rec<'_>);
        if let Some(reason) = repaired {
            let key = content_hash(&[self.session.as_bytes(), line]);
            out.push(self.obs(key, None, super::repaired(reason)));
        }
        if let Some(to) = rec.rewind_to.as_deref() {
            self.rewind(to, line, out);
        } else if let Some(set) = &rec.set {
            if let Some(list) = &set.messages {
                self.checkpoint(list, line, Via::Checkpoint, out);
            }
        } else if rec.project_hash.is_some() && rec.ty.is_none() {
            // The header. A subagent's names its own session; it is kept under its
            // parent's (from the folder).
            if self.agent.is_none()
                && let Some(s) = rec.session_id.as_deref().filter(|s| !s.is_empty())
            {
                s.clone_into(&mut self.session);
            }
            // A legacy document (read whole on each change): its list, diffed against
            // the version read before.
            if let Some(list) = &rec.messages {
                self.checkpoint(list, line, Via::Appended, out);
            }
        } else if rec.ty.is_some() {
            self.message(&rec, line, Via::Appended, out);
        }
        Ok(())
    }

    fn oversized(&mut self, head: &[u8], _tail: &[u8], key: String, out: &mut Vec<Obs>) {
        out.push(self.obs(key, super::head_time(head), ObsKind::Work));
    }

    super::saved_whole!();
}

#[cfg(test)]
mod tests;
