//! OpenCode sessions: rows of one SQLite database (`opencode.db`), not lines of a file.
//! The row source (`crate::rows`) runs this agent's query (`rows.rs`) and hands each
//! changed row here as one JSON record; this projector is the only code that reads the
//! rows' fields. Sources: sst/opencode `packages/opencode/src/session/message-v2.ts`
//! (message and part shapes), `session/processor.ts` and `session/prompt.ts` (the order
//! in which a turn's rows are written), as summarized in shared/docs/other-agents.md
//! "OpenCode (details)".
//!
//! A user message starts a turn (keyed by its id). The turn ends at the assistant
//! message whose `time.completed` is set with a `finish` other than `tool-calls` and
//! `unknown` (completed), or with an `error` (`MessageAbortedError`: interrupted; any
//! other: failed). A running `question` tool waits for the person. A child session
//! (`parent_id`) is a subagent of its parent.
//!
//! Every change is an upsert of the whole row, so one row is seen again at each update:
//! what was decided is remembered per session, and a row of a message already decided,
//! or older than the running turn, changes nothing.

mod descriptor;
mod rows;

use super::{Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector};
use crate::model::clip_message;
pub use descriptor::OpenCode;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

/// One row as the query writes it (`rows.rs`).
#[derive(Deserialize)]
struct Row<'a> {
    #[serde(borrow)]
    row: Cow<'a, str>,
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    session: Cow<'a, str>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    parent: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    dir: Option<Cow<'a, str>>,
    /// A part's message's role, as the query found it.
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    /// A message's last text part, as the query found it.
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    updated: Option<i64>,
    size: Option<u64>,
    /// The row's `data` column: JSON text, `None` when too large to take in.
    #[serde(default, borrow)]
    data: Option<Cow<'a, str>>,
}

/// A message's `data` (`MessageV2.Info` without its ids).
#[derive(Deserialize)]
struct MessageData<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(rename = "parentID", borrow)]
    parent_id: Option<Cow<'a, str>>,
    #[serde(default)]
    time: Times,
    #[serde(borrow)]
    finish: Option<Cow<'a, str>>,
    #[serde(borrow)]
    error: Option<ErrorData<'a>>,
}

#[derive(Deserialize, Default)]
struct Times {
    completed: Option<serde_json::Number>,
}

/// `NamedError.toObject()`: `{name, data: {message, statusCode, …}}`.
#[derive(Deserialize)]
struct ErrorData<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    data: Option<ErrorDetail<'a>>,
}

#[derive(Deserialize)]
struct ErrorDetail<'a> {
    #[serde(borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(rename = "statusCode")]
    status_code: Option<u16>,
}

/// A part's `data` (`MessageV2.Part` without its ids).
#[derive(Deserialize)]
struct PartData<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    synthetic: Option<bool>,
    #[serde(rename = "callID", borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool: Option<Cow<'a, str>>,
    #[serde(borrow)]
    state: Option<ToolState<'a>>,
}

#[derive(Deserialize)]
struct ToolState<'a> {
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow)]
    input: Option<QuestionInput<'a>>,
}

/// The `question` tool's input: `{questions: [{question, …}]}`.
#[derive(Deserialize)]
struct QuestionInput<'a> {
    #[serde(default, borrow)]
    questions: Vec<Question<'a>>,
}

#[derive(Deserialize)]
struct Question<'a> {
    #[serde(borrow)]
    question: Option<Cow<'a, str>>,
}

/// What is known of one session (saved whole).
#[derive(Serialize, Deserialize, Default, Debug, Clone, PartialEq)]
struct Ctx {
    /// The running turn's user message id (ids sort by creation).
    #[serde(default)]
    user: Option<String>,
    /// The newest assistant message whose outcome was decided.
    #[serde(default)]
    done: Option<String>,
    /// The last text the assistant wrote in the running turn.
    #[serde(default)]
    text: Option<String>,
    /// The start directory was passed on.
    #[serde(default)]
    dir_sent: bool,
}

impl Ctx {
    /// The start of the turn of prompt `id`, unless that turn or a later one started.
    fn start(&mut self, id: &str, child: bool) -> Option<ObsKind> {
        if not_after(id, self.user.as_deref()) {
            return None;
        }
        self.user = Some(id.to_owned());
        self.text = None;
        let (initiator, origin) = if child {
            (Initiator::Agent, None)
        } else {
            (Initiator::Human, Some(Origin::Human))
        };
        Some(ObsKind::TurnStart {
            turn: id.to_owned(),
            initiator,
            origin,
        })
    }
}

/// One projector for a whole database: every session's context, by session id.
#[derive(Serialize, Deserialize, Default)]
pub struct OpenCodeProjector {
    sessions: HashMap<String, Ctx>,
}

impl OpenCodeProjector {
    pub fn new(_path: &Path) -> Self {
        Self::default()
    }
}

/// Whether message id `a` was created at or before `b` (OpenCode's ids are ascending:
/// a time-based prefix, then randomness).
fn not_after(a: &str, b: Option<&str>) -> bool {
    b.is_some_and(|b| a <= b)
}

/// The reason and whether a failed message's error is a usage limit.
fn failure_reason(name: &str, detail: Option<&ErrorDetail<'_>>) -> &'static str {
    let msg = detail
        .and_then(|d| d.message.as_deref())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let limited = detail.is_some_and(|d| d.status_code == Some(429))
        || msg.contains("quota")
        || msg.contains("usage limit")
        || msg.contains("rate limit");
    if limited {
        return "usage_limit";
    }
    match name {
        "APIError" => "api_error",
        "ProviderAuthError" => "auth_error",
        "MessageOutputLengthError" => "output_length",
        "ContextOverflowError" => "context_overflow",
        _ => "error",
    }
}

impl OpenCodeProjector {
    fn message(&mut self, row: &Row<'_>, data: &MessageData<'_>, kinds: &mut Vec<ObsKind>) {
        let id = row.id.as_ref();
        let child = row.parent.is_some();
        let ctx = self.sessions.entry(row.session.to_string()).or_default();
        match data.role.as_deref() {
            Some("user") => {
                // An update of the running turn's prompt or an older one (OpenCode
                // writes its summary back onto it) starts nothing.
                if let Some(start) = ctx.start(id, child) {
                    kinds.push(start);
                }
            }
            Some("assistant") => {
                if not_after(id, ctx.done.as_deref())
                    || data
                        .parent_id
                        .as_deref()
                        .is_some_and(|p| ctx.user.as_deref().is_some_and(|u| p < u))
                {
                    return;
                }
                // The prompt's row may come later (rewritten after the turn) or not at
                // all (read from the middle): the answer names its turn.
                if let Some(start) = data.parent_id.as_deref().and_then(|p| ctx.start(p, child)) {
                    kinds.push(start);
                }
                if let Some(err) = &data.error {
                    ctx.done = Some(id.to_owned());
                    let name = err.name.as_deref().unwrap_or_default();
                    let detail = err.data.as_ref();
                    let text = detail.and_then(|d| d.message.as_deref()).unwrap_or(name);
                    kinds.push(if name == "MessageAbortedError" {
                        ObsKind::Interrupted {
                            turn: None,
                            reason: "aborted".to_owned(),
                            message: clip_message(text),
                        }
                    } else {
                        ObsKind::Failed {
                            turn: None,
                            reason: failure_reason(name, detail).to_owned(),
                            message: clip_message(text),
                            resets_at: super::content::reset_hint(text),
                        }
                    });
                    return;
                }
                let ends = data.time.completed.is_some()
                    && data
                        .finish
                        .as_deref()
                        .is_some_and(|f| f != "tool-calls" && f != "unknown");
                if ends {
                    ctx.done = Some(id.to_owned());
                    let text = row.text.as_deref().and_then(clip_message);
                    kinds.push(ObsKind::Final {
                        message: text.or_else(|| ctx.text.take()),
                        confirm: Some(Evidence::StopReason),
                    });
                } else {
                    kinds.push(ObsKind::Work);
                }
            }
            _ => {}
        }
    }

    fn part(&mut self, row: &Row<'_>, data: &PartData<'_>, kinds: &mut Vec<ObsKind>) {
        let ctx = self.sessions.entry(row.session.to_string()).or_default();
        let msg = row.message.as_deref().unwrap_or_default();
        // The prompt's own parts, parts before any turn, and late rewrites of a
        // decided or older message.
        if row.role.as_deref() != Some("assistant")
            || ctx.user.is_none()
            || not_after(msg, ctx.user.as_deref())
            || not_after(msg, ctx.done.as_deref())
        {
            return;
        }
        match data.ty.as_deref() {
            Some("text") => {
                if data.synthetic != Some(true)
                    && let Some(t) = data.text.as_deref().and_then(clip_message)
                {
                    ctx.text = Some(t);
                }
                kinds.push(ObsKind::Work);
            }
            Some("tool") => {
                let id = data
                    .call_id
                    .as_deref()
                    .unwrap_or(row.id.as_ref())
                    .to_owned();
                let state = data.state.as_ref();
                match state.and_then(|s| s.status.as_deref()) {
                    Some("completed" | "error") => kinds.push(ObsKind::ToolResult { id }),
                    status => {
                        let asks =
                            data.tool.as_deref() == Some("question") && status == Some("running");
                        let message = asks
                            .then(|| state.and_then(|s| s.input.as_ref()))
                            .flatten()
                            .and_then(|i| i.questions.iter().find_map(|q| q.question.as_deref()))
                            .and_then(clip_message);
                        kinds.push(ObsKind::ToolCall {
                            id,
                            needs_input: asks.then(|| "question".to_owned()),
                            message,
                        });
                    }
                }
            }
            _ => kinds.push(ObsKind::Work),
        }
    }
}

impl Projector for OpenCodeProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        // Anomalies about the database itself: no session of OpenCode's.
        ("opencode", None)
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        let row: Row<'_> =
            serde_json::from_slice(line).map_err(|e| Malformed(format!("row: {e}")))?;
        // One observation scope per session: a child session is its parent's subagent.
        let (session, agent) = match row.parent.as_deref() {
            Some(parent) => (parent, Some(row.session.as_ref())),
            None => (row.session.as_ref(), None),
        };
        // The row's version: an event decided on it is the same on every read.
        let key = format!("opencode:{}:{}", row.row, row.id);
        let record_ts = row.updated;
        let mut kinds = Vec::new();
        match (row.row.as_ref(), row.data.as_deref()) {
            (_, None) => {
                let size = row.size.unwrap_or(0);
                out.push(Obs::new(
                    session,
                    agent,
                    record_ts,
                    format!("{key}:oversized"),
                    ObsKind::Anomaly {
                        reason: "oversized_row".to_owned(),
                        message: format!("row of {size} bytes skipped"),
                    },
                ));
                kinds.push(ObsKind::Work);
            }
            ("message", Some(text)) => {
                let data: MessageData<'_> = serde_json::from_str(text)
                    .map_err(|e| Malformed(format!("message {}: {e}", row.id)))?;
                self.message(&row, &data, &mut kinds);
            }
            ("part", Some(text)) => {
                let data: PartData<'_> = serde_json::from_str(text)
                    .map_err(|e| Malformed(format!("part {}: {e}", row.id)))?;
                self.part(&row, &data, &mut kinds);
            }
            _ => {}
        }
        if !kinds.is_empty()
            && let Some(ctx) = self.sessions.get_mut(row.session.as_ref())
            && !ctx.dir_sent
            && let Some(dir) = row.dir.as_deref().filter(|d| !d.is_empty())
        {
            ctx.dir_sent = true;
            kinds.insert(0, ObsKind::StartDir(dir.to_owned()));
        }
        for kind in kinds {
            // A turn's start is keyed by its prompt, whichever row told of it.
            let key = match &kind {
                ObsKind::TurnStart { turn, .. } => format!("opencode:turn:{turn}"),
                _ => key.clone(),
            };
            out.push(Obs::new(session, agent, record_ts, key, kind));
        }
        Ok(())
    }

    super::saved_whole!();
}
