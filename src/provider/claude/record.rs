//! What a Claude Code transcript line holds, as the projector reads it: the serde view
//! of a record, only the fields that can change a turn's state.

use super::super::content::{Clipped, StrOrList};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) uuid: Option<Cow<'a, str>>,
    #[serde(rename = "parentUuid", borrow)]
    pub(crate) parent: Option<Cow<'a, str>>,
    /// Read by `check` only: the record roots a chain after compaction.
    #[serde(rename = "logicalParentUuid")]
    pub(crate) logical_parent: Option<IgnoredAny>,
    #[serde(rename = "sessionId", borrow)]
    pub(super) session: Option<Cow<'a, str>>,
    #[serde(rename = "agentId", borrow)]
    pub(crate) agent: Option<Cow<'a, str>>,
    #[serde(rename = "isSidechain")]
    pub(crate) sidechain: Option<bool>,
    #[serde(rename = "isMeta")]
    pub(crate) meta: Option<bool>,
    #[serde(rename = "isCompactSummary")]
    pub(crate) compact_summary: Option<bool>,
    #[serde(rename = "isApiErrorMessage")]
    pub(super) api_error: Option<bool>,
    pub(super) error: Option<super::super::content::Tag>,
    #[serde(borrow)]
    pub(super) timestamp: Option<Cow<'a, str>>,
    /// The working directory (Windows paths come JSON-escaped: `C:\\Users\\me\\app`).
    #[serde(borrow)]
    pub(super) cwd: Option<super::super::content::AnyText<'a>>,
    #[serde(borrow)]
    pub(crate) message: Option<Msg<'a>>,
    #[serde(rename = "toolUseResult")]
    pub(crate) tool_use_result: Option<IgnoredAny>,
    #[serde(rename = "toolEndsTurn")]
    pub(super) tool_ends_turn: Option<bool>,
    #[serde(borrow)]
    pub(super) origin: Option<Origin<'a>>,
    /// Where the turn came from, in 2.1.27x and later (transcript-formats.md E.5).
    /// Read as a tag: a value of another shape is an unknown origin, not a bad line.
    #[serde(rename = "turnOrigin")]
    pub(super) turn_origin: Option<super::super::content::Tag>,
    /// A skill body delivered as a user record (E.5): never a prompt.
    #[serde(rename = "turnCompanion")]
    pub(super) turn_companion: Option<bool>,
    #[serde(rename = "preventedContinuation")]
    pub(super) prevented_continuation: Option<bool>,
    #[serde(rename = "compactMetadata")]
    pub(super) compact: Option<CompactMeta>,
    /// The git branch the session is on (every record of Claude Code's carries it).
    #[serde(rename = "gitBranch", borrow)]
    pub(super) git_branch: Option<Cow<'a, str>>,
    /// `progress` records: what is in progress (e.g. a Stop hook running).
    #[serde(borrow)]
    pub(super) data: Option<Progress<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Progress<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) ty: Option<Cow<'a, str>>,
    #[serde(rename = "hookEvent", borrow)]
    pub(super) hook_event: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct CompactMeta {
    #[serde(rename = "preTokens")]
    pub(super) pre_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct Origin<'a> {
    #[serde(borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
    /// A peer message's sender (the teammate's name).
    #[serde(borrow)]
    pub(super) from: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(crate) struct Msg<'a> {
    /// Read by `check` only: the model response this message is part of.
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) content: Option<StrOrList<'a, Block<'a>>>,
    #[serde(borrow)]
    pub(super) stop_reason: Option<Cow<'a, str>>,
    pub(super) usage: Option<Usage>,
}

#[derive(Deserialize)]
pub(super) struct Usage {
    pub(super) server_tool_use: Option<IgnoredAny>,
    pub(super) iterations: Option<IgnoredAny>,
}

#[derive(Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    // Only the start of a text is looked at; an answer can be megabytes.
    #[serde(borrow)]
    pub(crate) text: Option<Clipped<'a>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) input: Option<Input<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Input<'a> {
    #[serde(borrow)]
    pub(super) questions: Option<Vec<Question<'a>>>,
    #[serde(borrow)]
    pub(super) plan: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct Question<'a> {
    #[serde(borrow)]
    pub(super) question: Option<Cow<'a, str>>,
}
