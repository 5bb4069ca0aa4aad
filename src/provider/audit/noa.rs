//! Norma Noa `state.json` v1 (seed 000 §Noa state.json v1): what `check` needs from it.

use crate::model::clip_message;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// What `check` needs from a Noa `state.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoaState {
    /// The `version` value as written, when it is not 1.
    pub bad_version: Option<String>,
    /// Per block: its index, `blockId` (as text) and `archivePath`.
    pub blocks: Vec<NoaBlock>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoaBlock {
    pub index: usize,
    pub id: Option<String>,
    pub archive_path: Option<String>,
}

#[derive(Deserialize)]
struct RawState {
    version: Option<serde_json::Value>,
    #[serde(rename = "sessionId")]
    session_id: Option<IgnoredAny>,
    #[serde(rename = "nextBlockId")]
    next_block_id: Option<IgnoredAny>,
    #[serde(rename = "messageRefs")]
    message_refs: Option<IgnoredAny>,
    blocks: Option<Vec<RawBlock>>,
}

#[derive(Deserialize)]
struct RawBlock {
    #[serde(rename = "blockId")]
    block_id: Option<serde_json::Value>,
    #[serde(rename = "archivePath")]
    archive_path: Option<String>,
}

/// Reads a `state.json`. `Ok(None)`: valid JSON but not a Noa state (no Noa keys).
/// `Err((line, why))` when it does not parse.
pub fn noa_state(bytes: &[u8]) -> Result<Option<NoaState>, (u64, String)> {
    let raw: RawState =
        serde_json::from_slice(bytes).map_err(|e| (e.line() as u64, e.to_string()))?;
    let noa = raw.version.is_some()
        || raw.session_id.is_some()
        || raw.next_block_id.is_some()
        || raw.message_refs.is_some()
        || raw.blocks.is_some();
    if !noa {
        return Ok(None);
    }
    let bad_version = match &raw.version {
        Some(v) if v.as_u64() == Some(1) => None,
        Some(v) => Some(clip_message(&v.to_string()).unwrap_or_default()),
        None => Some("missing".to_owned()),
    };
    let blocks = raw
        .blocks
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, b)| NoaBlock {
            index,
            id: b.block_id.map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }),
            archive_path: b.archive_path,
        })
        .collect();
    Ok(Some(NoaState {
        bad_version,
        blocks,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noa_state_versions() {
        assert_eq!(noa_state(br#"{"a":1}"#), Ok(None));
        let s = noa_state(br#"{"version":2,"blocks":[{"blockId":3,"archivePath":"t/x.md"}]}"#)
            .expect("parses")
            .expect("noa");
        assert_eq!(s.bad_version.as_deref(), Some("2"));
        assert_eq!(s.blocks[0].id.as_deref(), Some("3"));
        assert!(noa_state(b"{").is_err());
    }
}
