//! What one record of a JSON Lines agent says, in audit terms ([`Facts`]): ids, parent
//! links, tool calls and results, prompts, the session it claims. This is the vocabulary
//! each agent's folder reads its records into (its `JsonRecords`), through its projector's
//! own serde types, so a record's shape is written once and a line the projector cannot
//! read is malformed here too. Holds no state across lines: the checks that span a file
//! (dangling calls, duplicate ids, broken links) are the engine's, in `mod.rs`.

use crate::provider::content::StrOrList;

/// Which model response a record belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resp {
    Key(String),
    /// Codex items carry no response id: consecutive calls belong to one response.
    Current,
}

/// What one record says, in audit terms.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub(crate) id: Option<String>,
    pub(crate) parent: Option<String>,
    /// A chain root by design (a compaction boundary): its parent is not checked.
    pub(crate) boundary: bool,
    /// Sidechain scope: calls are superseded only by activity in the same conversation.
    pub(crate) scope: Option<String>,
    pub(crate) calls: Vec<String>,
    pub(crate) results: Vec<String>,
    /// Model output of this response.
    pub(crate) response: Option<Resp>,
    /// This item ends the current run of calls (Codex, whose calls name no response).
    pub(crate) new_batch: bool,
    /// A new prompt: the conversation moved past every open call.
    pub(crate) prompt: bool,
    /// The session the record claims (checked only for records that claim one, Norma's).
    pub(crate) session: Option<String>,
    /// A record type the projector neither reads nor deliberately ignores.
    pub(crate) unknown: Option<String>,
    /// For forks that copy history (Codex): the thread a `session_meta` names, and the
    /// record's timestamp.
    pub(crate) meta: Option<String>,
    pub(crate) stamp: Option<String>,
}

/// Content blocks (Claude's, Norma's), as the audit reads them: each agent's own serde
/// type, seen through the few fields that carry ids and prompt text.
pub(crate) trait Block {
    fn ty(&self) -> Option<&str>;
    fn id(&self) -> Option<&str>;
    /// The tool call a `tool_result` block answers.
    fn answers(&self) -> Option<&str>;
    fn text(&self) -> Option<&str>;
}

/// [`Block`] for a serde block type with `ty`, `id`, `tool_use_id` and `text` fields
/// (`Option<Cow<str>>` or `Option<String>`), as Claude's and Norma's are.
macro_rules! block_fields {
    ($t:ty) => {
        impl $crate::provider::audit::Block for $t {
            fn ty(&self) -> Option<&str> {
                self.ty.as_deref()
            }
            fn id(&self) -> Option<&str> {
                self.id.as_deref()
            }
            fn answers(&self) -> Option<&str> {
                self.tool_use_id.as_deref()
            }
            fn text(&self) -> Option<&str> {
                self.text.as_deref()
            }
        }
    };
}
pub(crate) use block_fields;

pub(crate) fn blocks<'b, B>(c: Option<&'b StrOrList<'_, B>>) -> &'b [B] {
    match c {
        Some(StrOrList::List(b)) => b,
        _ => &[],
    }
}

pub(crate) fn has_text<B: Block>(c: Option<&StrOrList<'_, B>>) -> bool {
    match c {
        Some(StrOrList::Str(s)) => !s.trim().is_empty(),
        Some(StrOrList::List(b)) => b
            .iter()
            .any(|b| b.ty() == Some("text") && b.text().is_some_and(|t| !t.trim().is_empty())),
        _ => false,
    }
}

/// The ids (`id` or `answers`) of the blocks of type `ty`.
pub(crate) fn ids_of<B: Block>(bs: &[B], ty: &str, f: impl Fn(&B) -> Option<&str>) -> Vec<String> {
    bs.iter()
        .filter(|b| b.ty() == Some(ty))
        .filter_map(|b| f(b).map(str::to_owned))
        .collect()
}

/// What a record of Claude-style content blocks (Claude's, Norma's) says as `role`: an
/// assistant's tool calls and the response they belong to (`response`), a user's tool
/// results, and whether it holds text (a prompt, where the agent's own rules agree).
pub(crate) fn message_facts<B: Block>(
    role: Option<&str>,
    content: Option<&StrOrList<'_, B>>,
    response: impl FnOnce() -> String,
) -> Facts {
    let bs = blocks(content);
    let mut f = Facts::default();
    match role {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", B::id);
            f.response = Some(Resp::Key(response()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", B::answers);
            f.prompt = has_text(content);
        }
        _ => {}
    }
    f
}
