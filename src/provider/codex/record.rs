//! What a Codex rollout line holds, as the projector reads it: the serde view of a
//! record (only the fields that can change a turn's state), and the record types known,
//! for `check`.

use super::super::content::{StrOrList, Tag};
use serde::Deserialize;
use std::borrow::Cow;

/// `response_item` payload types that are the agent at work, nothing more (the fast path
/// in `plain.rs` reads the same list).
pub(super) const WORK_ITEMS: [&str; 5] = [
    "reasoning",
    "web_search_call",
    "image_generation_call",
    "tool_search_call",
    "tool_search_output",
];

#[derive(Deserialize)]
pub(crate) struct Line<'a> {
    #[serde(borrow)]
    pub(crate) timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) payload: Option<Payload<'a>>,
    /// Legacy (pre-wrapper) header: `{"id","timestamp","instructions"}`.
    #[serde(borrow)]
    pub(super) id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(crate) struct Payload<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    pub(super) source: Option<Source<'a>>,
    #[serde(borrow)]
    pub(super) parent_thread_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) turn_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) last_agent_message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) error: Option<ErrorInfo<'a>>,
    #[serde(borrow)]
    pub(super) reason: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) message: Option<StrOrList<'a, serde::de::IgnoredAny>>,
    #[serde(borrow)]
    pub(crate) role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) phase: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) content: Option<StrOrList<'a, ContentItem<'a>>>,
    #[serde(borrow)]
    pub(crate) call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    /// A function call's arguments: a JSON document in a string.
    #[serde(borrow)]
    pub(super) arguments: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) forked_from_id: Option<Cow<'a, str>>,
    /// `session_meta`: where the session started.
    #[serde(borrow)]
    pub(super) cwd: Option<Cow<'a, str>>,
    /// `session_meta`: the repository it started in (`git.branch`).
    #[serde(borrow)]
    pub(super) git: Option<Git<'a>>,
    pub(super) codex_error_info: Option<Tag>,
    pub(super) rate_limits: Option<RateLimits<'a>>,
    /// `turn_context`: whether and when Codex asks the person before it runs a command
    /// (`never`, `on-request`, `untrusted`, `on-failure`, or a granular object).
    pub(super) approval_policy: Option<Tag>,
}

/// `session_meta.payload.git`.
#[derive(Deserialize)]
pub(super) struct Git<'a> {
    #[serde(borrow)]
    pub(super) branch: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct ErrorInfo<'a> {
    #[serde(borrow)]
    pub(super) message: Option<Cow<'a, str>>,
    pub(super) codex_error_info: Option<Tag>,
}

#[derive(Deserialize)]
pub(super) struct ContentItem<'a> {
    #[serde(borrow)]
    pub(super) text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct RateLimits<'a> {
    #[serde(borrow)]
    pub(super) rate_limit_reached_type: Option<Cow<'a, str>>,
    pub(super) primary: Option<Window>,
    pub(super) secondary: Option<Window>,
}

#[derive(Deserialize)]
pub(super) struct Window {
    pub(super) used_percent: Option<f64>,
    pub(super) resets_at: Option<i64>,
}

/// `session_meta.payload.source`: a string (`cli`, `vscode`, `exec`) or an object such as
/// `{"subagent":{"thread_spawn":{"parent_thread_id":…}}}` or `{"subagent":"review"}`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Source<'a> {
    Sub {
        #[serde(borrow)]
        subagent: SubSource<'a>,
    },
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum SubSource<'a> {
    Name(#[serde(borrow)] Cow<'a, str>),
    Spawn {
        #[serde(borrow)]
        thread_spawn: Spawn<'a>,
    },
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
pub(super) struct Spawn<'a> {
    #[serde(borrow)]
    pub(super) parent_thread_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) agent_nickname: Option<Cow<'a, str>>,
}

/// `request_user_input` arguments: the questions put to the person.
#[derive(Deserialize)]
pub(super) struct AskArgs<'a> {
    #[serde(borrow)]
    pub(super) questions: Option<Vec<Ask<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct Ask<'a> {
    #[serde(borrow)]
    pub(super) question: Option<Cow<'a, str>>,
}

/// The function Codex calls to put a question to the person and wait for the answer.
pub(super) const ASK_TOOL: &str = "request_user_input";

/// The shell tools whose call may ask the person to let a command run outside the
/// sandbox (transcript-formats.md, F.4).
pub(super) const ESCALATING: [&str; 3] = ["exec_command", "shell", "shell_command"];

/// Approval policies under which an escalation request waits for the person (`never`
/// approves nothing and asks nothing; `on-failure` asks only after a sandboxed run
/// failed, which writes no request).
pub(super) const ASKING_POLICIES: [&str; 3] = ["on-request", "untrusted", "granular"];

/// A shell call's arguments, as far as escalation goes: 0.15x's `sandbox_permissions`,
/// and the older `with_escalated_permissions` flag.
#[derive(Deserialize)]
pub(super) struct ShellArgs<'a> {
    #[serde(borrow)]
    pub(super) sandbox_permissions: Option<Cow<'a, str>>,
    pub(super) with_escalated_permissions: Option<bool>,
    #[serde(borrow)]
    pub(super) justification: Option<Cow<'a, str>>,
}

/// Whether the projector reads `line` as a `turn_context` record (mended as it mends a
/// line: invalid UTF-8, a clobbered head).
pub(super) fn is_turn_context(line: &[u8]) -> bool {
    crate::provider::line_is!(line, Line<'_>, |l| l.ty.as_deref() == Some("turn_context"))
}

/// Top-level record types Codex writes that are understood or deliberately ignored
/// (legacy pre-wrapper files put response items at the top level). `check` lists others.
pub const KNOWN_TYPES: [&str; 12] = [
    "session_meta",
    "token_usage_record",
    "event_msg",
    "response_item",
    "turn_context",
    "compacted",
    "world_state",
    "inter_agent_communication_metadata",
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
];

/// `event_msg` payload types understood or deliberately ignored.
pub const KNOWN_EVENTS: [&str; 31] = [
    "task_started",
    "turn_started",
    "task_complete",
    "turn_complete",
    "turn_aborted",
    "error",
    "warning",
    "stream_error",
    "agent_reasoning",
    "agent_reasoning_raw_content",
    "agent_reasoning_section_break",
    "user_message",
    "agent_message",
    "token_count",
    "context_compacted",
    "sub_agent_activity",
    "thread_settings_applied",
    "item_completed",
    "item_started",
    "mcp_tool_call_begin",
    "mcp_tool_call_end",
    "exec_command_begin",
    "exec_command_end",
    "patch_apply_begin",
    "patch_apply_end",
    "web_search_begin",
    "web_search_end",
    "plan_update",
    "turn_diff",
    "entered_review_mode",
    "exited_review_mode",
];

/// `response_item` payload types understood or deliberately ignored.
pub const KNOWN_ITEMS: [&str; 14] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
    "image_generation_call",
    "agent_message",
    "tool_search_call",
    "tool_search_output",
    "ghost_snapshot",
];
