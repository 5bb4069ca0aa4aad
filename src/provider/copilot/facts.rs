//! What a Copilot CLI event says for `baton check` (its `JsonRecords`), read through the
//! projector's own types.

use super::{Rec, is_prompt};
use crate::provider::audit::{Facts, JsonRecords, Resp};

pub(super) struct CopilotRecords;

impl JsonRecords for CopilotRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        let r: Rec<'_> = serde_json::from_slice(line)?;
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
            Some("user.message") => f.prompt = is_prompt(d),
            _ => {}
        }
        Ok(f)
    }

    /// Events are keyed `id`, not `uuid`.
    fn ids_under_id_key(&self) -> bool {
        true
    }
}
