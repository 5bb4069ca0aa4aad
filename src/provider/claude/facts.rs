//! What a Claude Code record says for `baton check` (its `JsonRecords`), read through the
//! projector's own types.

use super::{Block, KNOWN_TYPES, Rec};
use crate::provider::audit::{self, Facts, JsonRecords, message_facts};

pub(super) struct ClaudeRecords;

// Claude's and Norma's blocks carry the same four fields.
audit::block_fields!(Block<'_>);

impl JsonRecords for ClaudeRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        let r: Rec<'_> = serde_json::from_slice(line)?;
        let content = r.message.as_ref().and_then(|m| m.content.as_ref());
        let response = || {
            let key = r.message.as_ref().and_then(|m| m.id.as_deref());
            key.or(r.uuid.as_deref()).unwrap_or_default().to_owned()
        };
        let mut f = Facts {
            id: r.uuid.as_deref().map(str::to_owned),
            parent: r.parent.as_deref().map(str::to_owned),
            boundary: r.subtype.as_deref() == Some("compact_boundary")
                || r.logical_parent.is_some(),
            scope: match (&r.agent, r.sidechain) {
                (Some(a), _) => Some(a.to_string()),
                (None, Some(true)) => Some("sidechain".to_owned()),
                _ => None,
            },
            unknown: r
                .ty
                .as_deref()
                .filter(|t| !KNOWN_TYPES.contains(t))
                .map(str::to_owned),
            ..message_facts(r.ty.as_deref(), content, response)
        };
        // A tool result, or a record the agent wrote itself (meta, a compaction summary),
        // is no prompt.
        f.prompt &= f.results.is_empty()
            && r.tool_use_result.is_none()
            && r.meta != Some(true)
            && r.compact_summary != Some(true);
        Ok(f)
    }
}
