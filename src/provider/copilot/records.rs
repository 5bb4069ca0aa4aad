//! The fields of Copilot CLI's event records that the projector and `check` read.

use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    /// Read by `check` only: the link that chains events.
    #[serde(rename = "parentId", borrow)]
    pub(crate) parent: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "agentId", borrow)]
    pub(crate) agent_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) data: Option<Data<'a>>,
}

#[derive(Deserialize, Default)]
pub(crate) struct Data<'a> {
    #[serde(borrow)]
    pub(super) content: Option<Cow<'a, str>>,
    /// `session.start`: where the session runs (`context.cwd`).
    #[serde(borrow)]
    pub(super) context: Option<Context<'a>>,
    #[serde(rename = "toolRequests", borrow)]
    pub(crate) tool_requests: Option<Vec<ToolRequest<'a>>>,
    #[serde(rename = "toolCallId", borrow)]
    pub(crate) tool_call_id: Option<Cow<'a, str>>,
    #[serde(rename = "parentToolCallId", borrow)]
    pub(super) parent_tool_call_id: Option<Cow<'a, str>>,
    #[serde(rename = "interactionId", borrow)]
    pub(super) interaction_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) delivery: Option<Cow<'a, str>>,
    /// Read by `check` only: the model response an `assistant.message` belongs to.
    #[serde(rename = "messageId", borrow)]
    pub(crate) message_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) source: Option<Cow<'a, str>>,
    #[serde(rename = "errorType", borrow)]
    pub(super) error_type: Option<Cow<'a, str>>,
    #[serde(rename = "statusCode")]
    pub(super) status_code: Option<i64>,
    #[serde(borrow)]
    pub(super) message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) reason: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) summary: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) error: Option<ErrorText<'a>>,
    #[serde(rename = "requestId", borrow)]
    pub(super) request_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) question: Option<Cow<'a, str>>,
    #[serde(rename = "permissionRequest", borrow)]
    pub(super) permission: Option<Permission<'a>>,
    #[serde(rename = "preCompactionTokens")]
    pub(super) pre_compaction_tokens: Option<u64>,
    /// Set on the instructions a subagent is started with (`instruction-discovery`).
    #[serde(rename = "parentAgentTaskId")]
    pub(crate) parent_agent_task: Option<IgnoredAny>,
}

#[derive(Deserialize)]
pub(crate) struct ToolRequest<'a> {
    #[serde(rename = "toolCallId", borrow)]
    pub(crate) tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) arguments: Mode,
}

/// The `mode` of a tool call's `arguments`, read without keeping the rest (a `write`
/// call's arguments hold whole files). Arguments of any other shape have no mode.
#[derive(Default)]
pub(super) struct Mode(pub(super) bool);

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Mode;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tool arguments")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Mode, A::Error> {
                let mut background = false;
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    if k == "mode" {
                        background = matches!(
                            m.next_value::<ErrorText<'de>>()?,
                            ErrorText::Text(v) if v == "background"
                        );
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Mode(background))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Mode, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Mode(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<Mode, E> {
                Ok(Mode(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Mode, E> {
                Ok(Mode(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Mode, E> {
                Ok(Mode(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Mode, E> {
                Ok(Mode(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Mode, E> {
                Ok(Mode(false))
            }
            fn visit_unit<E>(self) -> Result<Mode, E> {
                Ok(Mode(false))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
pub(super) struct Permission<'a> {
    #[serde(borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) intention: Option<Cow<'a, str>>,
    #[serde(rename = "fullCommandText", borrow)]
    pub(super) command: Option<Cow<'a, str>>,
}

/// A string, or anything else: `error` is a string on `subagent.failed` and
/// `{message, code}` on tool results.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum ErrorText<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Other(IgnoredAny),
}

/// Whether a `user.message` can be a prompt: typed-ahead input, system-injected text and
/// a subagent's instructions belong to a running turn, if any, and never start one.
pub(crate) fn is_prompt(d: &Data<'_>) -> bool {
    d.delivery.as_deref() != Some("steering")
        && !matches!(
            d.source.as_deref(),
            Some("system" | "instruction-discovery")
        )
        && d.parent_agent_task.is_none()
}

/// Tool call ids are short tokens (`toolu_01…`, `call_…`): anything else is not kept, so
/// a transcript cannot fill the background table with arbitrary text.
pub(super) fn task_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `session.start`'s `data.context`; a value of another shape is no context, not a bad
/// line.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Context<'a> {
    Obj {
        #[serde(borrow)]
        cwd: Option<super::super::content::AnyText<'a>>,
    },
    Other(IgnoredAny),
}

impl Context<'_> {
    /// The working directory, if it is a non-empty string.
    pub(super) fn cwd(&self) -> Option<&str> {
        match self {
            Context::Obj { cwd } => super::super::content::text_of(cwd.as_ref()),
            Context::Other(_) => None,
        }
    }
}
