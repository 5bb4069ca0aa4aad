//! GitHub Copilot CLI sessions: `~/.copilot/session-state/<uuid>/events.jsonl`
//! (`$COPILOT_HOME`), or `<uuid>.jsonl` before 1.0.11. The CLI is closed source; the
//! event names and fields are those of the public SDK schema (github/copilot-sdk
//! `docs/features/streaming-events.md`), and shared/docs/other-agents.md records what real
//! 1.0.12–1.0.74 files hold.
//!
//! Every line is `{type, data, id, timestamp, parentId, agentId?}`. `assistant.turn_start`
//! and `assistant.turn_end` wrap each model round, not each user turn: the turn ends at the
//! `turn_end` of a round whose `assistant.message` asked for no tool. `session.idle`, the
//! SDK's own end signal, is never saved.
//!
//! 1.0.7x files (shared/docs/transcript-formats.md, Part E.3) add three shapes. Hook
//! records (`hook.start`/`hook.end`) are written before the prompt they belong to: they
//! are no prompt and no activity. A `task` call in `mode:"background"` runs a subagent
//! that the main agent does not wait for: from `subagent.started` to `subagent.completed`
//! or `subagent.failed` it is background work of the main session. And once such a
//! subagent reports, a `system.notification` makes the idle main agent go on in the same
//! `interactionId`: a turn nobody typed, keyed by the notification's `id`.

mod descriptor;
mod facts;
use super::background::Background;
use super::{
    Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem,
};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
pub use descriptor::Copilot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

mod records;

pub(crate) use records::{Data, Rec, is_prompt};
use records::{ErrorText, task_id};

/// How many subagent tool calls a file remembers (their agent ids, for failures; the
/// background ones, until they finish).
const SUBAGENTS_KEPT: usize = 64;

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct CopilotProjector {
    session: String,
    /// The open user turn's `interactionId` (typed-ahead messages share it).
    interaction: Option<String>,
    /// Per scope (main = ""), whether the last `assistant.message` asked for no tool.
    final_round: BTreeMap<String, bool>,
    /// Subagent tool call id → the agent id its records carry.
    subagents: BTreeMap<String, String>,
    /// Subagents whose turn has begun (their first record was seen).
    started: Vec<String>,
    ordinal: u64,
    /// Whether the main agent is in a round of its turn (false once a round ends with no
    /// tool request, or the turn failed or was aborted): records that are no prompt
    /// count as its activity only then, so they never reopen a finished turn.
    #[serde(default)]
    active: bool,
    /// `task` calls made in `mode:"background"`, by tool call id, until their subagent
    /// finishes.
    #[serde(default)]
    background: Vec<String>,
    /// A `system.notification` that reached the idle main agent: the next round of the
    /// main agent is the turn it started, keyed by the notification's id.
    #[serde(default)]
    notified: Option<String>,
    /// `session.start`'s `context.cwd`, until an observation of the main agent carries
    /// it.
    #[serde(default)]
    start_dir: Option<String>,
}

impl CopilotProjector {
    pub fn new(path: &Path) -> Self {
        // `<uuid>/events.jsonl`, or the older flat `<uuid>.jsonl`.
        let stem = file_stem(path);
        let session = if stem == "events" {
            path.parent()
                .and_then(Path::file_name)
                .map_or(stem, |n| n.to_string_lossy().into_owned())
        } else {
            stem
        };
        CopilotProjector {
            session,
            interaction: None,
            final_round: BTreeMap::new(),
            subagents: BTreeMap::new(),
            started: Vec::new(),
            ordinal: 0,
            active: false,
            background: Vec::new(),
            notified: None,
            start_dir: None,
        }
    }

    fn user(&mut self, d: &Data<'_>, scope: &str, kinds: &mut Vec<ObsKind>) {
        let not_prompt = !is_prompt(d) || !scope.is_empty();
        let same = d.interaction_id.is_some()
            && d.interaction_id.as_deref() == self.interaction.as_deref();
        if not_prompt || same {
            if self.active || !scope.is_empty() {
                kinds.push(ObsKind::Work);
            }
            return;
        }
        self.ordinal += 1;
        let turn = d
            .interaction_id
            .as_deref()
            .map_or_else(|| format!("#{}", self.ordinal), str::to_owned);
        self.interaction = d.interaction_id.as_deref().map(str::to_owned);
        self.final_round.clear();
        self.active = true;
        self.notified = None;
        kinds.push(ObsKind::TurnStart {
            turn,
            initiator: Initiator::Human,
            origin: Some(Origin::Human),
        });
    }

    /// A main-agent record of a model round: if the agent was idle and a notification
    /// reached it, this round is the turn the notification started.
    fn round(&mut self, scope: &str, kinds: &mut Vec<ObsKind>) {
        if !scope.is_empty() {
            return;
        }
        if !self.active
            && let Some(turn) = self.notified.take()
        {
            self.final_round.clear();
            kinds.push(ObsKind::TurnStart {
                turn,
                initiator: Initiator::System,
                origin: Some(Origin::TaskNotification),
            });
        }
        self.active = true;
    }

    fn assistant(&mut self, d: &Data<'_>, scope: &str, kinds: &mut Vec<ObsKind>) {
        for t in d.tool_requests.iter().flatten() {
            if t.name.as_deref() == Some("task")
                && t.arguments.0
                && let Some(call) = t.tool_call_id.as_deref().filter(|c| task_id(c))
                && self.background.len() < SUBAGENTS_KEPT
                && !self.background.iter().any(|c| c == call)
            {
                self.background.push(call.to_owned());
            }
        }
        let calls: Vec<String> = d
            .tool_requests
            .iter()
            .flatten()
            .map(|t| t.tool_call_id.as_deref().unwrap_or_default().to_owned())
            .collect();
        self.final_round.insert(scope.to_owned(), calls.is_empty());
        if calls.is_empty() {
            kinds.push(ObsKind::Final {
                message: d.content.as_deref().and_then(clip_message),
                confirm: None,
            });
        }
        super::tool_calls(calls, kinds);
    }

    fn event(&mut self, ty: &str, key: &str, d: &Data<'_>, scope: &str, kinds: &mut Vec<ObsKind>) {
        match ty {
            "user.message" => self.user(d, scope, kinds),
            "assistant.turn_start"
            | "assistant.reasoning"
            | "tool.execution_start"
            | "session.compaction_start" => {
                self.round(scope, kinds);
                kinds.push(ObsKind::Work);
            }
            "assistant.message" => {
                self.round(scope, kinds);
                self.assistant(d, scope, kinds);
            }
            "assistant.turn_end" if self.final_round.remove(scope) == Some(true) => {
                if scope.is_empty() {
                    self.active = false;
                }
                kinds.push(ObsKind::Confirm(Evidence::TurnEnd));
            }
            // A round that asked for tools: the turn goes on.
            "assistant.turn_end" => {}
            // The subagent works on its own records; the main agent may be idle.
            "subagent.started" => {
                if let Some(call) = self.background_call(d) {
                    kinds.push(ObsKind::Background(Background::Started(call)));
                }
            }
            // Idle, or in a round that already answered with no tool request (its
            // `turn_end` may come after the notification): the next round is its turn.
            "system.notification"
                if scope.is_empty()
                    && (!self.active || self.final_round.get("") == Some(&true)) =>
            {
                self.notified = Some(key.to_owned());
            }
            // A result that reaches the idle main agent (a background task's) is no
            // round of its own: what follows it decides.
            "tool.execution_complete" if scope.is_empty() && !self.active => {}
            "tool.execution_complete" => {
                kinds.push(ObsKind::ToolResult {
                    id: d.tool_call_id.as_deref().unwrap_or_default().to_owned(),
                });
            }
            // Autopilot mode ends a task with a `task_complete` tool call and this event.
            "session.task_complete" => {
                self.idle(scope);
                kinds.push(ObsKind::Completed {
                    turn: None,
                    message: d.summary.as_deref().and_then(clip_message),
                    evidence: Evidence::TaskComplete,
                });
            }
            "session.error" => {
                self.idle(scope);
                let text = d.message.as_deref().unwrap_or_default();
                let kind = d.error_type.as_deref().unwrap_or("error");
                let reason = match d.status_code {
                    Some(code) => format!("{kind} {code}"),
                    None => kind.to_owned(),
                };
                kinds.push(ObsKind::Failed {
                    turn: None,
                    reason,
                    message: clip_message(text),
                    resets_at: super::content::reset_hint(text),
                });
            }
            "abort" => {
                self.idle(scope);
                kinds.push(ObsKind::Interrupted {
                    turn: None,
                    reason: d.reason.as_deref().unwrap_or("abort").to_owned(),
                    message: None,
                });
            }
            "session.compaction_complete" => kinds.push(ObsKind::Compacted {
                pre_tokens: d.pre_compaction_tokens,
            }),
            "permission.requested" => {
                let p = d.permission.as_ref();
                let what = p
                    .and_then(|p| p.intention.as_deref().or(p.command.as_deref()))
                    .and_then(clip_message);
                let kind = p.and_then(|p| p.kind.as_deref()).unwrap_or("permission");
                kinds.push(ObsKind::ToolCall {
                    id: d.request_id.as_deref().unwrap_or_default().to_owned(),
                    needs_input: Some(format!("permission:{kind}")),
                    message: what,
                });
            }
            "user_input.requested" | "elicitation.requested" => {
                let text = d.question.as_deref().or(d.message.as_deref());
                kinds.push(ObsKind::ToolCall {
                    id: d.request_id.as_deref().unwrap_or_default().to_owned(),
                    needs_input: Some("question".to_owned()),
                    message: text.and_then(clip_message),
                });
            }
            // The wait is over (by a person or by a rule): the same call, answered.
            "permission.completed" | "user_input.completed" | "elicitation.completed" => {
                kinds.push(ObsKind::ToolResult {
                    id: d.request_id.as_deref().unwrap_or_default().to_owned(),
                });
            }
            // Hooks run around prompts and tools (`userPromptSubmitted` is written before
            // its prompt), and new event types arrive often: none of them changes a turn.
            _ => {}
        }
    }

    fn idle(&mut self, scope: &str) {
        if scope.is_empty() {
            self.active = false;
        }
    }

    /// The tool call id of a background `task` whose subagent this record is about.
    fn background_call(&self, d: &Data<'_>) -> Option<String> {
        let call = d.tool_call_id.as_deref()?;
        self.background
            .iter()
            .any(|c| c == call)
            .then(|| call.to_owned())
    }
}

impl Projector for CopilotProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, None)
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        super::parse_record!(rec, kinds, line, Rec<'_>);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        let key = rec.id.as_deref().map_or_else(
            || content_hash(&[self.session.as_bytes(), line]),
            str::to_owned,
        );
        let scope = rec.agent_id.as_deref().unwrap_or_default().to_owned();
        let empty = Data::default();
        let d = rec.data.as_ref().unwrap_or(&empty);
        if !scope.is_empty()
            && let Some(call) = d.parent_tool_call_id.as_deref()
            && self.subagents.len() < SUBAGENTS_KEPT
        {
            self.subagents
                .entry(call.to_owned())
                .or_insert_with(|| scope.clone());
        }
        // A subagent's records follow one another without a prompt of their own: its
        // first record begins its turn, named by its agent id.
        if !scope.is_empty()
            && !self.started.contains(&scope)
            && self.started.len() < SUBAGENTS_KEPT
        {
            self.started.push(scope.clone());
            kinds.push(ObsKind::TurnStart {
                turn: scope.clone(),
                initiator: Initiator::Agent,
                origin: None,
            });
        }
        if let Some(ty) = rec.ty.as_deref() {
            self.event(ty, &key, d, &scope, &mut kinds);
        }
        let mut extra = None;
        if rec.ty.as_deref() == Some("subagent.failed")
            && let Some(agent) = d
                .tool_call_id
                .as_deref()
                .and_then(|c| self.subagents.remove(c))
        {
            // The parent reports its subagent's failure: it ends the subagent's turn.
            let text = match &d.error {
                Some(ErrorText::Text(t)) => t.as_ref(),
                _ => "",
            };
            extra = Some(Obs {
                session: self.session.clone(),
                agent: Some(agent),
                record_ts,
                key: key.clone(),
                kind: ObsKind::Failed {
                    turn: None,
                    reason: "subagent_failed".to_owned(),
                    message: clip_message(text),
                    resets_at: None,
                },
            });
        } else if rec.ty.as_deref() == Some("subagent.completed")
            && let Some(call) = d.tool_call_id.as_deref()
        {
            self.subagents.remove(call);
        }
        if matches!(
            rec.ty.as_deref(),
            Some("subagent.completed" | "subagent.failed")
        ) && let Some(call) = self.background_call(d)
        {
            self.background.retain(|c| *c != call);
            kinds.push(ObsKind::Background(Background::Finished(call)));
        }
        if rec.ty.as_deref() == Some("session.start") {
            self.start_dir = d.context.as_ref().and_then(|c| c.cwd()).map(str::to_owned);
        }
        if scope.is_empty() {
            super::with_start_dir(&mut self.start_dir, &mut kinds);
        }
        let agent = (!scope.is_empty()).then_some(scope);
        for kind in kinds {
            // Background work is the main agent's: its completions carry the count.
            let agent = match kind {
                ObsKind::Background(_) => None,
                _ => agent.clone(),
            };
            out.push(Obs {
                session: self.session.clone(),
                agent,
                record_ts,
                key: key.clone(),
                kind,
            });
        }
        out.extend(extra);
        Ok(())
    }

    fn oversized(&mut self, head: &[u8], tail: &[u8], key: String, out: &mut Vec<Obs>) {
        // The envelope's `timestamp` and `agentId` come after `data`: look at the tail.
        let record_ts = super::raw_str_field(tail, "timestamp", true)
            .or_else(|| super::raw_str_field(head, "timestamp", false))
            .and_then(parse_rfc3339);
        let agent = super::raw_str_field(tail, "agentId", true).map(str::to_owned);
        out.push(Obs {
            session: self.session.clone(),
            agent,
            record_ts,
            key,
            kind: ObsKind::Work,
        });
    }

    super::saved_whole!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_from_the_directory_or_the_flat_name() {
        let p = CopilotProjector::new(Path::new("/h/.copilot/session-state/u-1/events.jsonl"));
        assert_eq!(p.session, "u-1");
        let p = CopilotProjector::new(Path::new("/h/.copilot/session-state/u-2.jsonl"));
        assert_eq!(p.session, "u-2");
    }

    #[test]
    fn a_notification_between_the_answer_and_its_turn_end_still_starts_the_next_turn() {
        let mut p = CopilotProjector::new(Path::new("/s/u/events.jsonl"));
        let mut out = Vec::new();
        for l in [
            r#"{"type":"user.message","id":"u","data":{"content":"go","interactionId":"i-1"}}"#,
            r#"{"type":"assistant.turn_start","id":"t0","data":{"turnId":"0"}}"#,
            r#"{"type":"assistant.message","id":"m","data":{"content":"Waiting.","toolRequests":[]}}"#,
            r#"{"type":"system.notification","id":"n","data":{"content":"Agent finished."}}"#,
            r#"{"type":"assistant.turn_end","id":"e0","data":{"turnId":"0"}}"#,
            r#"{"type":"assistant.turn_start","id":"t1","data":{"turnId":"1"}}"#,
        ] {
            p.project(l.as_bytes(), &mut out).unwrap();
        }
        let starts: Vec<_> = out
            .iter()
            .filter_map(|o| match &o.kind {
                ObsKind::TurnStart { turn, origin, .. } => Some((turn.as_str(), *origin)),
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            [
                ("i-1", Some(Origin::Human)),
                ("n", Some(Origin::TaskNotification))
            ]
        );
    }

    #[test]
    fn only_a_background_task_is_background_work() {
        let mut p = CopilotProjector::new(Path::new("/s/u/events.jsonl"));
        let mut out = Vec::new();
        for l in [
            r#"{"type":"assistant.message","id":"a","data":{"content":"","toolRequests":[
                {"toolCallId":"bg","name":"task","arguments":{"prompt":"x","mode":"background"}},
                {"toolCallId":"sync","name":"task","arguments":{"prompt":"y","mode":"sync"}},
                {"toolCallId":"odd","name":"task","arguments":"mode background"},
                {"toolCallId":"num","name":"task","arguments":{"mode":3,"list":[{"a":1}]}},
                {"toolCallId":"other","name":"bash","arguments":{"mode":"background"}}]}}"#,
            r#"{"type":"subagent.started","id":"s1","data":{"toolCallId":"sync"}}"#,
            r#"{"type":"subagent.started","id":"s2","data":{"toolCallId":"odd"}}"#,
            r#"{"type":"subagent.started","id":"s3","data":{"toolCallId":"num"}}"#,
            r#"{"type":"subagent.started","id":"s4","data":{"toolCallId":"bg"}}"#,
            r#"{"type":"subagent.completed","id":"s5","data":{"toolCallId":"sync"}}"#,
            r#"{"type":"subagent.completed","id":"s6","data":{"toolCallId":"bg"}}"#,
        ] {
            p.project(l.as_bytes(), &mut out).unwrap();
        }
        let bg: Vec<_> = out
            .iter()
            .filter_map(|o| match &o.kind {
                ObsKind::Background(b) => Some((o.key.as_str(), b.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            bg,
            [
                ("s4", Background::Started("bg".into())),
                ("s6", Background::Finished("bg".into()))
            ]
        );
    }
}
