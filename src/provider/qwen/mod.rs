//! Qwen Code sessions: `<runtime>/projects/<cwd, non-alphanumerics as ->/chats/<id>.jsonl`
//! (`<runtime>`: `$QWEN_RUNTIME_DIR`, `$QWEN_HOME`, else `~/.qwen`); background subagents
//! at `projects/<…>/subagents/<session>/agent-<id>.jsonl`. Source: QwenLM/qwen-code's
//! recording service, as shared/docs/other-agents.md "Qwen Code (details)" records it.
//!
//! Records are Claude-like (`uuid`, `parentUuid`, `type`, `message.parts`). A model
//! response is written whole, its `functionCall` parts before the tools run, so an
//! `ask_user_question` waiting for its answer is visible (`needs_input`). Newer builds end
//! every turn with a `system` `turn_result` (`completed`, `cancelled`, `error`), which
//! decides it; older ones write no end, and an answer with no function call is a
//! candidate that quiet (the settle) or the next prompt decides. `/rewind` writes a
//! `system` `rewind` record re-rooted at the record before the rewound prompt: the turns
//! from that prompt on are on a dead branch and are taken back ([`ObsKind::Retract`]).

mod descriptor;
mod records;
use super::{
    Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem,
};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
pub use descriptor::Qwen;
pub(crate) use records::Rec;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How many prompts a file remembers for `/rewind`.
const PROMPTS_KEPT: usize = 64;

/// The tool whose call waits for the person's answer.
const ASK: &str = "ask_user_question";

/// A prompt: the record that began a turn, and the record it hangs off.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Prompt {
    uuid: String,
    parent: Option<String>,
}

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct QwenProjector {
    session: String,
    /// A background subagent's id when the file is one.
    agent: Option<String>,
    /// The turns begun in this file, the newest last.
    prompts: Vec<Prompt>,
    /// The first `cwd`, until an observation carries it.
    start_dir: Option<String>,
    /// Whether the start directory was passed on already.
    #[serde(default)]
    dir_sent: bool,
}

impl QwenProjector {
    pub fn new(path: &Path) -> Self {
        let stem = file_stem(path);
        // `subagents/<session>/agent-<id>.jsonl`.
        let parent = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        let (session, agent) = match (stem.strip_prefix("agent-"), parent) {
            (Some(id), Some(p)) => (p, Some(id.to_owned())),
            _ => (stem, None),
        };
        QwenProjector {
            session,
            agent,
            prompts: Vec::new(),
            start_dir: None,
            dir_sent: false,
        }
    }

    fn user(&mut self, rec: &Rec<'_>, turn: &str, kinds: &mut Vec<ObsKind>) {
        let Some(msg) = &rec.message else { return };
        let results: Vec<String> = msg
            .parts
            .iter()
            .filter_map(|p| p.function_response.as_ref())
            .map(|r| r.id.as_deref().unwrap_or_default().to_owned())
            .collect();
        if !results.is_empty() {
            kinds.extend(results.into_iter().map(|id| ObsKind::ToolResult { id }));
            return;
        }
        if msg.text().is_none() {
            return;
        }
        let (initiator, origin) = if self.agent.is_some() {
            (Initiator::Agent, None)
        } else if rec.provenance.as_deref() == Some("system") {
            (Initiator::System, Some(Origin::TaskNotification))
        } else {
            (Initiator::Human, Some(Origin::Human))
        };
        if self.prompts.len() >= PROMPTS_KEPT {
            self.prompts.remove(0);
        }
        self.prompts.push(Prompt {
            uuid: turn.to_owned(),
            parent: rec.parent.as_deref().map(str::to_owned),
        });
        kinds.push(ObsKind::TurnStart {
            turn: turn.to_owned(),
            initiator,
            origin,
        });
    }

    fn assistant(rec: &Rec<'_>, kinds: &mut Vec<ObsKind>) {
        let Some(msg) = &rec.message else { return };
        let text = msg.text().and_then(clip_message);
        let mut called = false;
        for call in msg.parts.iter().filter_map(|p| p.function_call.as_ref()) {
            called = true;
            let ask = call.name.as_deref() == Some(ASK);
            let question = call.args.as_ref().and_then(records::Args::question);
            kinds.push(ObsKind::ToolCall {
                id: call.id.as_deref().unwrap_or_default().to_owned(),
                needs_input: ask.then(|| ASK.to_owned()),
                message: if ask {
                    question.and_then(clip_message).or_else(|| text.clone())
                } else {
                    None
                },
            });
        }
        if !called {
            kinds.push(match text {
                Some(message) => ObsKind::Final {
                    message: Some(message),
                    confirm: None,
                },
                None => ObsKind::Work,
            });
        }
    }

    fn system(&mut self, rec: &Rec<'_>, kinds: &mut Vec<ObsKind>) {
        match rec.subtype.as_deref() {
            Some("turn_result") => {
                let Some(p) = &rec.payload else { return };
                let error = p.error.as_ref();
                let text = error.and_then(|e| e.message.as_deref()).unwrap_or_default();
                match p.state.as_deref() {
                    Some("completed") => kinds.push(ObsKind::Completed {
                        turn: None,
                        message: None,
                        evidence: Evidence::TurnResult,
                    }),
                    Some("cancelled") => kinds.push(ObsKind::Interrupted {
                        turn: None,
                        reason: "user".to_owned(),
                        message: clip_message(text),
                    }),
                    Some("error") => {
                        let code = error
                            .and_then(|e| e.code.as_ref())
                            .and_then(|c| c.0.as_deref());
                        let lower = text.to_ascii_lowercase();
                        let limit = code == Some("429")
                            || lower.contains("quota")
                            || lower.contains("rate limit");
                        kinds.push(ObsKind::Failed {
                            turn: None,
                            reason: if limit { "usage_limit" } else { "api_error" }.to_owned(),
                            message: clip_message(text),
                            resets_at: super::content::reset_hint(text),
                        });
                    }
                    _ => {}
                }
            }
            Some("rewind") => {
                // Re-rooted at the record the rewound prompt hung off: that prompt and
                // every later one are on a dead branch now.
                let root = rec.parent.as_deref();
                let Some(at) = self
                    .prompts
                    .iter()
                    .rposition(|p| p.parent.as_deref() == root)
                else {
                    return;
                };
                for p in self.prompts.drain(at..) {
                    kinds.push(ObsKind::Retract {
                        turn: p.uuid,
                        reason: "rewound".to_owned(),
                    });
                }
            }
            // `ui_telemetry`, `notification` (its `user` record starts the turn), others.
            _ => {}
        }
    }
}

impl Projector for QwenProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, self.agent.as_deref())
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        super::parse_record!(rec, kinds, line, Rec<'_>);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        if self.agent.is_none()
            && let Some(s) = rec.session_id.as_deref().filter(|s| !s.is_empty())
            && s != self.session
        {
            s.clone_into(&mut self.session);
        }
        // A sidechain record in a main file is its subagent's.
        let side = (self.agent.is_none() && rec.sidechain == Some(true))
            .then(|| rec.agent_id.as_deref().map(str::to_owned))
            .flatten();
        if !self.dir_sent && self.start_dir.is_none() {
            self.start_dir = rec
                .cwd
                .as_deref()
                .filter(|d| !d.is_empty())
                .map(str::to_owned);
        }
        let uuid = rec.uuid.as_deref().unwrap_or_default();
        let key = if uuid.is_empty() {
            content_hash(&[self.session.as_bytes(), line])
        } else {
            format!("{}:{uuid}", self.session)
        };
        match rec.ty.as_deref() {
            Some("user") if side.is_some() => {
                let turn = if uuid.is_empty() { key.as_str() } else { uuid };
                kinds.push(ObsKind::TurnStart {
                    turn: turn.to_owned(),
                    initiator: Initiator::Agent,
                    origin: None,
                });
            }
            Some("user") => {
                let turn = if uuid.is_empty() { key.as_str() } else { uuid };
                self.user(&rec, turn, &mut kinds);
            }
            Some("assistant") => Self::assistant(&rec, &mut kinds),
            Some("tool_result") => {
                let id = rec
                    .tool_call_result
                    .as_ref()
                    .and_then(|r| r.call_id.as_deref())
                    .unwrap_or_default();
                kinds.push(ObsKind::ToolResult { id: id.to_owned() });
            }
            Some("system") => self.system(&rec, &mut kinds),
            _ => {}
        }
        if !kinds.is_empty() && !self.dir_sent && self.start_dir.is_some() {
            self.dir_sent = true;
            super::with_start_dir(&mut self.start_dir, &mut kinds);
        }
        let agent = side.as_deref().or(self.agent.as_deref());
        for kind in kinds {
            out.push(Obs::new(&self.session, agent, record_ts, key.clone(), kind));
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
