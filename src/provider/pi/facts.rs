//! What a Pi record says for `baton check` (its `JsonRecords`), read through the
//! projector's own types.

use super::Rec;
use crate::provider::audit::{Facts, JsonRecords, Resp, blocks};

pub(super) struct PiRecords;

impl JsonRecords for PiRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        let r: Rec<'_> = serde_json::from_slice(line)?;
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

    /// Entries are keyed `id`, not `uuid`.
    fn ids_under_id_key(&self) -> bool {
        true
    }
}
