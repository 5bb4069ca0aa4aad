//! What one record of a JSON Lines provider says, in audit terms ([`Facts`]): ids, parent
//! links, tool calls and results, prompts, the session it claims. Each provider's line is
//! read through its projector's own serde types, so a record's shape is written once and
//! a line the projector cannot read is malformed here too. Holds no state across lines:
//! the checks that span a file (dangling calls, duplicate ids, broken links) are the
//! engine's, in `mod.rs`.

use crate::provider::content::StrOrList;
use crate::provider::{claude, codex, copilot, cursor, norma, pi};

/// Which model response a record belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resp {
    Key(String),
    /// Codex items carry no response id: consecutive calls belong to one response.
    Current,
}

/// What one record says, in audit terms.
#[derive(Debug, Default)]
pub(super) struct Facts {
    pub(super) id: Option<String>,
    pub(super) parent: Option<String>,
    /// A chain root by design (a compaction boundary): its parent is not checked.
    pub(super) boundary: bool,
    /// Sidechain scope: calls are superseded only by activity in the same conversation.
    pub(super) scope: Option<String>,
    pub(super) calls: Vec<String>,
    pub(super) results: Vec<String>,
    /// Model output of this response.
    pub(super) response: Option<Resp>,
    /// Codex: this item ends the current run of calls.
    pub(super) new_batch: bool,
    /// A new prompt: the conversation moved past every open call.
    pub(super) prompt: bool,
    /// Norma: the session the record claims.
    pub(super) session: Option<String>,
    /// A record type the projector neither reads nor deliberately ignores.
    pub(super) unknown: Option<String>,
    /// Codex: the thread a `session_meta` names, and the record's timestamp.
    pub(super) meta: Option<String>,
    pub(super) stamp: Option<String>,
}

/// The content blocks of Claude, Norma and Pi, as the audit reads them: each provider's
/// own serde type, seen through the few fields that carry ids and prompt text.
pub(super) trait Block {
    fn ty(&self) -> Option<&str>;
    fn id(&self) -> Option<&str>;
    /// The tool call a `tool_result` block answers.
    fn answers(&self) -> Option<&str>;
    fn text(&self) -> Option<&str>;
}

/// Claude's and Norma's blocks have the same fields.
macro_rules! block {
    ($($t:ty),*) => {$(
        impl Block for $t {
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
    )*};
}
block!(claude::Block<'_>, norma::Block<'_>);

pub(super) fn blocks<'b, B>(c: Option<&'b StrOrList<'_, B>>) -> &'b [B] {
    match c {
        Some(StrOrList::List(b)) => b,
        _ => &[],
    }
}

pub(super) fn has_text<B: Block>(c: Option<&StrOrList<'_, B>>) -> bool {
    match c {
        Some(StrOrList::Str(s)) => !s.trim().is_empty(),
        Some(StrOrList::List(b)) => b
            .iter()
            .any(|b| b.ty() == Some("text") && b.text().is_some_and(|t| !t.trim().is_empty())),
        _ => false,
    }
}

/// The ids (`id` or `answers`) of the blocks of type `ty`.
pub(super) fn ids_of<B: Block>(bs: &[B], ty: &str, f: impl Fn(&B) -> Option<&str>) -> Vec<String> {
    bs.iter()
        .filter(|b| b.ty() == Some(ty))
        .filter_map(|b| f(b).map(str::to_owned))
        .collect()
}

pub(super) fn claude_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: claude::Rec<'_> = serde_json::from_slice(line)?;
    let content = r.message.as_ref().and_then(|m| m.content.as_ref());
    let bs = blocks(content);
    let mut f = Facts {
        id: r.uuid.as_deref().map(str::to_owned),
        parent: r.parent.as_deref().map(str::to_owned),
        boundary: r.subtype.as_deref() == Some("compact_boundary") || r.logical_parent.is_some(),
        scope: match (&r.agent, r.sidechain) {
            (Some(a), _) => Some(a.to_string()),
            (None, Some(true)) => Some("sidechain".to_owned()),
            _ => None,
        },
        unknown: r
            .ty
            .as_deref()
            .filter(|t| !crate::provider::claude::KNOWN_TYPES.contains(t))
            .map(str::to_owned),
        ..Facts::default()
    };
    match r.ty.as_deref() {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", Block::id);
            let key = r
                .message
                .as_ref()
                .and_then(|m| m.id.as_deref())
                .or(r.uuid.as_deref())
                .unwrap_or_default();
            f.response = Some(Resp::Key(key.to_owned()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", Block::answers);
            f.prompt = f.results.is_empty()
                && r.tool_use_result.is_none()
                && r.meta != Some(true)
                && r.compact_summary != Some(true)
                && has_text(content);
        }
        _ => {}
    }
    Ok(f)
}

pub(super) fn codex_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    use crate::provider::codex::{KNOWN_EVENTS, KNOWN_ITEMS, KNOWN_TYPES};
    let l: codex::Line<'_> = serde_json::from_slice(line)?;
    let inner = l.payload.as_ref().and_then(|p| p.ty.as_deref());
    let unknown = match (l.ty.as_deref(), inner) {
        (Some(t), _) if !KNOWN_TYPES.contains(&t) => Some(t.to_owned()),
        (Some("event_msg"), Some(e)) if !KNOWN_EVENTS.contains(&e) => {
            Some(format!("event_msg/{e}"))
        }
        (Some("response_item"), Some(i)) if !KNOWN_ITEMS.contains(&i) => {
            Some(format!("response_item/{i}"))
        }
        _ => None,
    };
    let mut f = Facts {
        unknown,
        stamp: l.timestamp.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    let Some(p) = &l.payload else { return Ok(f) };
    if l.ty.as_deref() == Some("session_meta") {
        f.meta = p.id.as_deref().map(str::to_owned);
    }
    let call = || {
        p.call_id
            .as_deref()
            .map(str::to_owned)
            .into_iter()
            .collect()
    };
    match (l.ty.as_deref(), p.ty.as_deref()) {
        (Some("response_item"), Some("function_call" | "custom_tool_call")) => {
            f.calls = call();
            f.response = Some(Resp::Current);
        }
        (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
            f.results = call();
            f.new_batch = true;
        }
        (Some("response_item"), Some("reasoning")) => {
            f.new_batch = true;
            f.response = Some(Resp::Current);
        }
        (Some("response_item"), Some("message")) => {
            f.new_batch = true;
            if p.role.as_deref() == Some("assistant") {
                f.response = Some(Resp::Current);
            }
        }
        (Some("event_msg"), Some("task_started" | "turn_started" | "user_message")) => {
            f.new_batch = true;
            f.prompt = true;
        }
        _ => {}
    }
    Ok(f)
}

pub(super) fn norma_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: norma::Rec<'_> = serde_json::from_slice(line)?;
    let content = r.message.as_ref().and_then(|m| m.content.as_ref());
    let bs = blocks(content);
    let mut f = Facts {
        id: r.uuid.as_deref().map(str::to_owned),
        parent: r.parent_uuid.as_deref().map(str::to_owned),
        boundary: r.ty.as_deref() == Some("boundary")
            || bs.iter().any(|b| b.ty() == Some("compact_boundary")),
        scope: (r.is_sidechain == Some(true) || r.agent_id.is_some())
            .then(|| r.agent_id.as_deref().unwrap_or("sidechain").to_owned()),
        session: r.session_id.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    match r.message.as_ref().and_then(|m| m.role.as_deref()) {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", Block::id);
            f.response = Some(Resp::Key(f.id.clone().unwrap_or_default()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", Block::answers);
            let skill = bs.iter().any(|b| b.ty() == Some("skill"));
            f.prompt = !skill && has_text(content);
        }
        _ => {}
    }
    Ok(f)
}

pub(super) fn pi_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: pi::Rec<'_> = serde_json::from_slice(line)?;
    let mut f = Facts {
        id: r.id.as_deref().map(str::to_owned),
        parent: r.parent.as_deref().map(str::to_owned),
        // The header starts the tree; its id is the session's, not an entry's.
        boundary: r.ty.as_deref() == Some("session"),
        ..Facts::default()
    };
    if f.boundary {
        f.id = None;
    }
    let Some(m) = &r.message else { return Ok(f) };
    match m.role.as_deref() {
        Some("assistant") => {
            f.calls = blocks(m.content.as_ref())
                .iter()
                .filter(|b| b.ty.as_deref() == Some("toolCall"))
                .filter_map(|b| b.id.as_deref().map(str::to_owned))
                .collect();
            f.response = Some(Resp::Key(f.id.clone().unwrap_or_default()));
        }
        Some("toolResult") => {
            f.results = m
                .tool_call_id
                .as_deref()
                .map(str::to_owned)
                .into_iter()
                .collect();
        }
        Some("user") => f.prompt = true,
        _ => {}
    }
    Ok(f)
}

pub(super) fn copilot_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: copilot::Rec<'_> = serde_json::from_slice(line)?;
    let mut f = Facts {
        id: r.id.as_deref().map(str::to_owned),
        parent: r.parent.as_deref().map(str::to_owned),
        scope: r.agent_id.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    let Some(d) = &r.data else { return Ok(f) };
    match r.ty.as_deref() {
        Some("assistant.message") => {
            f.calls = d
                .tool_requests
                .iter()
                .flatten()
                .filter_map(|c| c.tool_call_id.as_deref().map(str::to_owned))
                .collect();
            let key = d
                .message_id
                .as_deref()
                .or(r.id.as_deref())
                .unwrap_or_default();
            f.response = Some(Resp::Key(key.to_owned()));
        }
        Some("tool.execution_complete") => {
            f.results = d
                .tool_call_id
                .as_deref()
                .map(str::to_owned)
                .into_iter()
                .collect();
        }
        Some("user.message") => f.prompt = copilot::is_prompt(d),
        _ => {}
    }
    Ok(f)
}

pub(super) fn cursor_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    serde_json::from_slice::<cursor::Rec<'_>>(line)?;
    Ok(Facts::default())
}
