//! What a Norma record says for `baton check` (its `JsonRecords`), read through the
//! projector's own types. Norma's records name their session, so a record that names
//! another one than its file is reported.

use super::{Block, Rec};
use crate::model::ProviderKind;
// The block trait's methods, beside the block type of the same name.
use crate::provider::audit::Block as _;
use crate::provider::audit::{
    self, Facts, FileSession, JsonRecords, blocks, main_file_of, message_facts,
};
use crate::provider::file_stem;
use std::path::Path;

pub(super) struct NormaRecords;

// Claude's and Norma's blocks carry the same four fields.
audit::block_fields!(Block<'_>);

impl JsonRecords for NormaRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        let r: Rec<'_> = serde_json::from_slice(line)?;
        let content = r.message.as_ref().and_then(|m| m.content.as_ref());
        let bs = blocks(content);
        let role = r.message.as_ref().and_then(|m| m.role.as_deref());
        let response = || r.uuid.as_deref().unwrap_or_default().to_owned();
        let mut f = Facts {
            id: r.uuid.as_deref().map(str::to_owned),
            parent: r.parent_uuid.as_deref().map(str::to_owned),
            boundary: r.ty.as_deref() == Some("boundary")
                || bs.iter().any(|b| b.ty() == Some("compact_boundary")),
            scope: (r.is_sidechain == Some(true) || r.agent_id.is_some())
                .then(|| r.agent_id.as_deref().unwrap_or("sidechain").to_owned()),
            session: r.session_id.as_deref().map(str::to_owned),
            ..message_facts(role, content, response)
        };
        // A skill's text is the skill's, not the person's.
        f.prompt &= !bs.iter().any(|b| b.ty() == Some("skill"));
        Ok(f)
    }

    /// `<session>.jsonl`, or a subagent's `<session>/subagents/agent-<id>.jsonl`, whose
    /// records may claim either the session or the subagent's id.
    fn file_session(&self, path: &Path) -> Option<FileSession> {
        let stem = file_stem(path);
        Some(
            match (
                main_file_of(ProviderKind::Norma, path),
                stem.strip_prefix("agent-"),
            ) {
                (Some(main), Some(a)) => FileSession {
                    session: file_stem(&main),
                    agent: Some(a.to_owned()),
                },
                _ => FileSession {
                    session: stem.clone(),
                    agent: None,
                },
            },
        )
    }
}
