//! Qwen Code's records, as serde reads them (QwenLM/qwen-code
//! `packages/core/src/services/chatRecordingService.ts`; shared/docs/other-agents.md
//! "Qwen Code (details)").

use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(borrow)]
    pub(crate) uuid: Option<Cow<'a, str>>,
    #[serde(rename = "parentUuid", borrow)]
    pub(crate) parent: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow)]
    pub(crate) session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) cwd: Option<Cow<'a, str>>,
    #[serde(rename = "agentId", borrow)]
    pub(crate) agent_id: Option<Cow<'a, str>>,
    #[serde(rename = "isSidechain")]
    pub(crate) sidechain: Option<bool>,
    /// `"system"` on a user record the agent itself wrote (a background task's report).
    #[serde(borrow)]
    pub(crate) provenance: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) message: Option<Msg<'a>>,
    #[serde(rename = "toolCallResult", borrow)]
    pub(crate) tool_call_result: Option<CallResult<'a>>,
    #[serde(rename = "systemPayload", borrow)]
    pub(crate) payload: Option<Payload<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct Msg<'a> {
    #[serde(borrow, default)]
    pub(crate) parts: Vec<Part<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct Part<'a> {
    #[serde(borrow)]
    pub(crate) text: Option<Cow<'a, str>>,
    pub(crate) thought: Option<bool>,
    #[serde(rename = "functionCall", borrow)]
    pub(crate) function_call: Option<Call<'a>>,
    #[serde(rename = "functionResponse", borrow)]
    pub(crate) function_response: Option<Call<'a>>,
}

/// A `functionCall` or `functionResponse`: `{id, name, args|response}`.
#[derive(Deserialize)]
pub(crate) struct Call<'a> {
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) name: Option<Cow<'a, str>>,
    pub(crate) args: Option<Args<'a>>,
}

/// The arguments of an `ask_user_question` call, where the question sits.
#[derive(Deserialize)]
pub(crate) struct Args<'a> {
    #[serde(borrow)]
    pub(crate) question: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) questions: Vec<Question<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct Question<'a> {
    #[serde(borrow)]
    pub(crate) question: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(crate) struct CallResult<'a> {
    #[serde(rename = "callId", borrow)]
    pub(crate) call_id: Option<Cow<'a, str>>,
}

/// A `turn_result`'s payload: `{promptId, state, stopReason?, error?{message, code?}}`.
#[derive(Deserialize)]
pub(crate) struct Payload<'a> {
    #[serde(borrow)]
    pub(crate) state: Option<Cow<'a, str>>,
    pub(crate) error: Option<ErrorInfo<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct ErrorInfo<'a> {
    #[serde(borrow)]
    pub(crate) message: Option<Cow<'a, str>>,
    /// A number (HTTP status) or a string code.
    pub(crate) code: Option<crate::provider::content::Tag>,
    #[serde(rename = "type")]
    pub(crate) _ty: Option<IgnoredAny>,
}

impl Msg<'_> {
    /// The last non-thought text part.
    pub(crate) fn text(&self) -> Option<&str> {
        self.parts
            .iter()
            .rev()
            .filter(|p| p.thought != Some(true))
            .find_map(|p| p.text.as_deref())
            .filter(|t| !t.trim().is_empty())
    }
}

impl Args<'_> {
    /// The question asked.
    pub(crate) fn question(&self) -> Option<&str> {
        self.question
            .as_deref()
            .or_else(|| self.questions.iter().find_map(|q| q.question.as_deref()))
    }
}
