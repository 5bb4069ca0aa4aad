//! What a Codex rollout line says for `baton check` (its `JsonRecords`), read through the
//! projector's own types. Codex items carry no response id, so consecutive calls are one
//! response; and a forked rollout begins with a copy of its parent's history.

use super::{KNOWN_EVENTS, KNOWN_ITEMS, KNOWN_TYPES, Line};
use crate::provider::audit::{Facts, JsonRecords, Resp};

pub(super) struct CodexRecords;

impl JsonRecords for CodexRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        let l: Line<'_> = serde_json::from_slice(line)?;
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

    fn forks_copy_history(&self) -> bool {
        true
    }
}
