//! Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`). Rules:
//! shared/docs/transcript-formats.md, Part B and C.

mod descriptor;
mod facts;
pub use descriptor::Codex;
mod plain;
mod record;
#[cfg(test)]
mod tests;

use record::{
    ASK_TOOL, ASKING_POLICIES, AskArgs, ESCALATING, Payload, RateLimits, ShellArgs, Source,
    SubSource, WORK_ITEMS,
};
pub(crate) use record::{KNOWN_EVENTS, KNOWN_ITEMS, KNOWN_TYPES, Line};

use super::content::{StrOrList, Tag};
use super::{
    Evidence, Fnv, Initiator, Malformed, Obs, ObsKind, Origin, Projector, file_stem, parse_line,
};
use crate::clock::{format_rfc3339, parse_rfc3339};
use crate::model::clip_message;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct CodexProjector {
    session: String,
    agent: Option<String>,
    /// Files from before Feb 2026 have no task events: turns are counted from prompts.
    has_task_events: bool,
    ordinal: u64,
    /// Legacy files: a prompt arrived and no final answer has followed yet.
    awaiting_answer: bool,
    /// The file's own thread id, from its first `session_meta`.
    #[serde(default)]
    own_id: Option<String>,
    /// The first `session_meta` names a thread this one was forked from.
    #[serde(default)]
    forked: bool,
    /// A forked child rollout is copying its parent's history: nothing here is a turn of
    /// the child.
    #[serde(default)]
    copying: bool,
    /// The copy's timestamp, once its first record is seen.
    #[serde(default)]
    copy_stamp: Option<String>,
    /// The key hash after `session` (the first part of every key), and the session it
    /// was taken for: 37 of the few hundred bytes hashed per line.
    #[serde(skip)]
    keyed: Option<(String, Fnv)>,
    /// The first `session_meta`'s `cwd`, until an observation carries it.
    #[serde(default)]
    start_dir: Option<String>,
    /// The last `turn_context`'s approval policy asks the person before a command runs
    /// outside the sandbox: an escalation request is then a wait.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    asks_approval: bool,
    /// The first `session_meta`'s `git.branch`, until an observation carries it.
    #[serde(default)]
    branch: Option<String>,
}

impl CodexProjector {
    pub fn new(path: &Path) -> Self {
        // `rollout-<date>-<uuid>`: the thread id is the last 36 characters.
        let stem = file_stem(path);
        let session = stem
            .get(stem.len().saturating_sub(36)..)
            .filter(|s| s.len() == 36 && s.matches('-').count() == 4)
            .map_or(stem.clone(), str::to_owned);
        CodexProjector {
            session,
            agent: None,
            has_task_events: false,
            ordinal: 0,
            awaiting_answer: false,
            own_id: None,
            forked: false,
            copying: false,
            copy_stamp: None,
            keyed: None,
            start_dir: None,
            asks_approval: false,
            branch: None,
        }
    }

    fn meta(&mut self, p: &Payload<'_>) {
        let own = p.id.as_deref().map(str::to_owned);
        if let Some(first) = &self.own_id {
            // A later `session_meta` of another thread: a forked child's copy of its
            // parent's history begins here (the parent's meta, then the parent's records).
            if own.as_ref().is_some_and(|o| o != first) && (self.agent.is_some() || self.forked) {
                self.copying = true;
                self.copy_stamp = None;
            }
            return;
        }
        self.own_id.clone_from(&own);
        self.forked = p.forked_from_id.is_some();
        let parent = p.parent_thread_id.as_deref().map(str::to_owned);
        match &p.source {
            Some(Source::Sub { subagent }) => {
                let (spawn_parent, nick) = match subagent {
                    SubSource::Spawn { thread_spawn } => (
                        thread_spawn.parent_thread_id.as_deref().map(str::to_owned),
                        thread_spawn.agent_nickname.as_deref().map(str::to_owned),
                    ),
                    SubSource::Name(n) => (None, Some(n.to_string())),
                    SubSource::Other(_) => (None, None),
                };
                // A child session: group it under its parent when the parent is known,
                // so its events never look like the parent's own.
                match spawn_parent.or(parent) {
                    Some(parent) => {
                        self.agent = own.or(nick).or_else(|| Some("subagent".to_owned()));
                        self.session = parent;
                    }
                    None => {
                        self.agent = nick.or_else(|| Some("subagent".to_owned()));
                        if let Some(own) = own {
                            self.session = own;
                        }
                    }
                }
            }
            _ => {
                if let Some(own) = own {
                    self.session = own;
                }
            }
        }
    }

    fn event(&mut self, p: &Payload<'_>, kinds: &mut Vec<ObsKind>) {
        let turn = p.turn_id.as_deref().map(str::to_owned);
        match p.ty.as_deref() {
            Some("task_started" | "turn_started") => {
                self.has_task_events = true;
                self.ordinal += 1;
                let turn = turn.unwrap_or_else(|| format!("#{}", self.ordinal));
                kinds.push(ObsKind::TurnStart {
                    turn,
                    initiator: Initiator::Human,
                    origin: Some(Origin::Human),
                });
            }
            Some("task_complete" | "turn_complete") => {
                self.has_task_events = true;
                if let Some(err) = &p.error {
                    let text = err.message.as_deref().unwrap_or_default();
                    kinds.push(failed(turn, err.codex_error_info.as_ref(), text));
                } else {
                    kinds.push(ObsKind::Completed {
                        turn,
                        message: p.last_agent_message.as_deref().and_then(clip_message),
                        evidence: Evidence::TaskComplete,
                    });
                }
            }
            Some("turn_aborted") => kinds.push(ObsKind::Interrupted {
                turn,
                reason: p.reason.as_deref().unwrap_or("interrupted").to_owned(),
                message: None,
            }),
            Some("error") => {
                let text = message_str(p).unwrap_or_default();
                kinds.push(failed(turn, p.codex_error_info.as_ref(), text));
            }
            // Reconnecting: the turn goes on.
            Some("stream_error" | "agent_reasoning") => kinds.push(ObsKind::Work),
            Some("user_message") => self.prompt(kinds),
            // The same text as the assistant `response_item` message, which is what
            // decides: taking both would see every answer twice.
            Some("agent_message") => {}
            Some("token_count") => {
                if let Some(rl) = &p.rate_limits
                    && let Some(kind) = &rl.rate_limit_reached_type
                {
                    kinds.push(ObsKind::Failed {
                        turn: None,
                        reason: kind.to_string(),
                        message: Some("Rate limit reached".to_owned()),
                        resets_at: limit_reset(rl),
                    });
                }
            }
            // The `compacted` item records the same compaction; report it once.
            Some("context_compacted") => {}
            _ => {}
        }
    }

    fn prompt(&mut self, kinds: &mut Vec<ObsKind>) {
        if self.has_task_events || self.awaiting_answer {
            // Inside an open turn a prompt is steering; with task events, turns are
            // delimited by task_started alone.
            kinds.push(ObsKind::Work);
            return;
        }
        self.ordinal += 1;
        self.awaiting_answer = true;
        kinds.push(ObsKind::TurnStart {
            turn: format!("#{}", self.ordinal),
            initiator: Initiator::Human,
            origin: Some(Origin::Human),
        });
    }

    fn answer(&mut self, phase: Option<&str>, text: Option<&str>, kinds: &mut Vec<ObsKind>) {
        if phase == Some("commentary") {
            kinds.push(ObsKind::Work);
            return;
        }
        self.awaiting_answer = false;
        kinds.push(ObsKind::Final {
            message: text.and_then(clip_message),
            confirm: None,
        });
    }

    fn response(&mut self, p: &Payload<'_>, kinds: &mut Vec<ObsKind>) {
        let call = p.call_id.as_deref().unwrap_or_default().to_owned();
        match p.ty.as_deref() {
            Some("message") if p.role.as_deref() == Some("assistant") => {
                let text = match &p.content {
                    Some(StrOrList::List(items)) => {
                        items.iter().rev().find_map(|i| i.text.as_deref())
                    }
                    Some(StrOrList::Str(s)) => Some(s.as_ref()),
                    _ => None,
                };
                self.answer(p.phase.as_deref(), text, kinds);
            }
            Some("function_call" | "custom_tool_call" | "local_shell_call") => {
                if !self.has_task_events {
                    self.awaiting_answer = true;
                }
                let name = p.name.as_deref();
                let (needs_input, message) = if name == Some(ASK_TOOL) {
                    let q = p.arguments.as_deref().and_then(first_question);
                    (Some(ASK_TOOL.to_owned()), q)
                } else if let Some(why) = self.escalation(name, p.arguments.as_deref()) {
                    (Some(APPROVAL.to_owned()), why)
                } else {
                    (None, None)
                };
                kinds.push(ObsKind::ToolCall {
                    id: call,
                    needs_input,
                    message,
                });
            }
            Some(
                "function_call_output" | "custom_tool_call_output" | "local_shell_call_output",
            ) => {
                kinds.push(ObsKind::ToolResult { id: call });
            }
            Some(t) if WORK_ITEMS.contains(&t) => kinds.push(ObsKind::Work),
            // `agent_message` items pass between agents; they are no answer to the person.
            _ => {}
        }
    }
}

/// The `reason` of a wait for the person's approval of an escalation request.
const APPROVAL: &str = "approval";

impl CodexProjector {
    /// Whether a call asks the person to let a command run outside the sandbox, under
    /// a policy that asks: `Some(justification)` (the question, for the notification).
    fn escalation(&self, name: Option<&str>, args: Option<&str>) -> Option<Option<String>> {
        if !self.asks_approval || !name.is_some_and(|n| ESCALATING.contains(&n)) {
            return None;
        }
        let a: ShellArgs<'_> = serde_json::from_str(args?).ok()?;
        let escalated = a.sandbox_permissions.as_deref() == Some("require_escalated")
            || a.with_escalated_permissions == Some(true);
        escalated.then(|| a.justification.as_deref().and_then(clip_message))
    }

    /// A `turn_context`'s approval policy, as written (`None`: not said, or not a word).
    fn policy(&mut self, policy: Option<&str>) {
        self.asks_approval = policy.is_some_and(|p| ASKING_POLICIES.contains(&p));
    }
}

/// The first question of a `request_user_input` call, for the notification.
fn first_question(args: &str) -> Option<String> {
    let a: AskArgs<'_> = serde_json::from_str(args).ok()?;
    a.questions?
        .iter()
        .find_map(|q| q.question.as_deref().and_then(clip_message))
}

/// A failed turn: its reason is the error's `codex_error_info`, else "error"; a limit
/// reset named in the text is kept.
fn failed(turn: Option<String>, info: Option<&Tag>, text: &str) -> ObsKind {
    ObsKind::Failed {
        turn,
        reason: info
            .and_then(|t| t.0.clone())
            .unwrap_or_else(|| "error".to_owned()),
        message: clip_message(text),
        resets_at: super::content::reset_hint(text),
    }
}

fn message_str<'p>(p: &'p Payload<'_>) -> Option<&'p str> {
    match &p.message {
        Some(StrOrList::Str(s)) => Some(s),
        _ => None,
    }
}

fn limit_reset(rl: &RateLimits) -> Option<String> {
    let windows = [rl.primary.as_ref(), rl.secondary.as_ref()];
    let full = windows
        .iter()
        .flatten()
        .filter(|w| w.used_percent.is_some_and(|u| u >= 100.0))
        .find_map(|w| w.resets_at);
    let any = windows.iter().flatten().filter_map(|w| w.resets_at).min();
    full.or(any).map(|s| format_rfc3339(s * 1000))
}

impl CodexProjector {
    /// The key of a line. Codex records have no id: their timestamp (first 40 bytes) and
    /// their two ends identify them, since hashing whole lines (tool output, images)
    /// would cost more than parsing them. Hashed only for a record that says something:
    /// most say nothing, and the hash costs more than their parse.
    fn key(&mut self, line: &[u8]) -> String {
        let session = match &self.keyed {
            Some((s, h)) if *s == self.session => *h,
            _ => {
                let h = Fnv::new().part(self.session.as_bytes());
                self.keyed = Some((self.session.clone(), h));
                h
            }
        };
        let ends = 256.min(line.len());
        session
            .part(&(line.len() as u64).to_le_bytes())
            .part(&line[..ends])
            .part(&line[line.len() - ends..])
            .hex()
    }

    /// Whether `rec` belongs to a forked child's copy of its parent's history. The copy
    /// is written at the fork, all with one timestamp; it ends at the first record with
    /// a later one, or at `thread_settings_applied` (written before the child's own turn).
    fn in_copy(&mut self, rec: &Line<'_>) -> bool {
        if !self.copying {
            return false;
        }
        if rec.ty.as_deref() == Some("session_meta") {
            return true;
        }
        let settings = rec.ty.as_deref() == Some("event_msg")
            && rec.payload.as_ref().and_then(|p| p.ty.as_deref())
                == Some("thread_settings_applied");
        let ts = rec.timestamp.as_deref();
        let same = match (self.copy_stamp.as_deref(), ts) {
            (None, Some(t)) => {
                self.copy_stamp = Some(t.to_owned());
                true
            }
            (Some(s), Some(t)) => s == t,
            (_, None) => true,
        };
        if same && !settings {
            return true;
        }
        self.copying = false;
        self.copy_stamp = None;
        false
    }
}

impl CodexProjector {
    /// [`Projector::project`], with the fast path for plain records ([`plain`]) tried
    /// on the lines `gate` lets through, or with the full parse alone when `gate` is
    /// `None`: all must give the same observations.
    fn project_with(
        &mut self,
        line: &[u8],
        out: &mut Vec<Obs>,
        gate: Option<fn(&[u8]) -> bool>,
    ) -> Result<(), Malformed> {
        // Inside a forked child's copy every record's time counts: the full parse then.
        if gate.is_some_and(|g| g(line))
            && !self.copying
            && let Some((stamp, what)) = plain::plain(line, self.asks_approval)
        {
            let kind = match what {
                plain::Plain::Quiet => return Ok(()),
                plain::Plain::Context(policy) => {
                    self.policy(policy.as_deref());
                    return Ok(());
                }
                plain::Plain::Work => ObsKind::Work,
                plain::Plain::Call(id) => {
                    // As `response` does for a call.
                    if !self.has_task_events {
                        self.awaiting_answer = true;
                    }
                    ObsKind::ToolCall {
                        id,
                        needs_input: None,
                        message: None,
                    }
                }
                plain::Plain::ToolResult(id) => ObsKind::ToolResult { id },
            };
            let record_ts = stamp.and_then(parse_rfc3339);
            let key = self.key(line);
            let mut kinds = vec![kind];
            super::with_start_dir(&mut self.start_dir, &mut kinds);
            super::with_branch(&mut self.branch, &mut kinds);
            for kind in kinds {
                out.push(self.obs(key.clone(), record_ts, kind));
            }
            return Ok(());
        }
        self.project_full(line, out)
    }

    fn project_full(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        let buf: Vec<u8>;
        let (rec, repaired) = parse_line!(line, buf, Line<'_>);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        if self.in_copy(&rec) {
            return Ok(());
        }
        // The key takes the session as it was before this record: a repaired
        // `session_meta` changes it below, after its anomaly is recorded.
        let early_key = repaired.map(|_| self.key(line));
        let mut kinds = super::first_kinds(repaired);
        match (rec.ty.as_deref(), &rec.payload) {
            (Some("session_meta"), Some(p)) => {
                if self.own_id.is_none() {
                    self.start_dir = p
                        .cwd
                        .as_deref()
                        .filter(|d| !d.is_empty())
                        .map(str::to_owned);
                    self.branch = p
                        .git
                        .as_ref()
                        .and_then(|g| g.branch.as_deref())
                        .and_then(super::branch_name);
                }
                self.meta(p);
            }
            (Some("turn_context"), Some(p)) => {
                self.policy(p.approval_policy.as_ref().and_then(|t| t.0.as_deref()));
            }
            (Some("event_msg"), Some(p)) => self.event(p, &mut kinds),
            (Some("response_item"), Some(p)) => self.response(p, &mut kinds),
            (Some("compacted"), _) => kinds.push(ObsKind::Compacted { pre_tokens: None }),
            (None, None) => {
                if let Some(id) = rec.id.as_deref() {
                    self.session = id.to_owned();
                }
            }
            _ => {}
        }
        if kinds.is_empty() {
            return Ok(());
        }
        super::with_start_dir(&mut self.start_dir, &mut kinds);
        super::with_branch(&mut self.branch, &mut kinds);
        let key = early_key.unwrap_or_else(|| self.key(line));
        for kind in kinds {
            out.push(self.obs(key.clone(), record_ts, kind));
        }
        Ok(())
    }
}

impl Projector for CodexProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, self.agent.as_deref())
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        self.project_with(line, out, Some(plain::looks_plain))
    }

    fn oversized(&mut self, head: &[u8], _tail: &[u8], key: String, out: &mut Vec<Obs>) {
        // Codex puts `timestamp` first: the head keeps the clock right.
        let record_ts = super::head_time(head);
        // A `task_complete` whose last message is too large to read still ends its turn;
        // the turn id comes before the message, in the head.
        let has = |needle: &[u8]| memchr::memmem::find(head, needle).is_some();
        let kind = if has(b"\"type\":\"event_msg\"") && has(b"\"type\":\"task_complete\"") {
            ObsKind::Completed {
                turn: super::raw_str_field(head, "turn_id", false).map(str::to_owned),
                message: None,
                evidence: Evidence::TaskComplete,
            }
        } else {
            ObsKind::Work
        };
        out.push(self.obs(key, record_ts, kind));
    }

    super::saved_whole!();
}
