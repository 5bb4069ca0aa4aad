//! Which agent wrote a transcript: by its path first, then by its first record.

use super::{sgme, strip_nul};
use crate::model::ProviderKind;
use std::path::Path;

/// Guesses the provider of a transcript from its path and, failing that, its first line.
pub fn detect(path: &Path, first_line: &[u8]) -> Option<ProviderKind> {
    let name = path.file_name()?.to_string_lossy();
    if name.ends_with(".md") {
        // SGME L0: `raw/{sessions,uploads,external}/{file_id}.md`.
        let raw = path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|n| n == "raw");
        return (raw && sgme::is_l0_file(path)).then_some(ProviderKind::Sgme);
    }
    if !name.ends_with(".jsonl") {
        return None;
    }
    let s = path.to_string_lossy();
    if s.contains("/.codex/") || (name.starts_with("rollout-") && s.contains("/sessions/")) {
        return Some(ProviderKind::Codex);
    }
    if s.contains("/.claude/projects/") {
        return Some(ProviderKind::Claude);
    }
    if s.contains("/agent-transcripts/") {
        return Some(ProviderKind::Cursor);
    }
    if s.contains("/.copilot/session-state/") {
        return Some(ProviderKind::Copilot);
    }
    if s.contains("/.pi/agent/sessions/") || s.contains("/.omp/agent/sessions/") {
        return Some(ProviderKind::Pi);
    }
    sniff(first_line)
}

/// Content detection from one record's top-level keys.
pub fn sniff(line: &[u8]) -> Option<ProviderKind> {
    let line = strip_nul(line);
    let has = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
    // Before the others: Copilot's `session.start` data holds a `sessionId`.
    if let Some(kind) = sniff_newer(line) {
        return Some(kind);
    }
    if has(b"\"payload\"")
        && (has(b"\"session_meta\"")
            || has(b"\"event_msg\"")
            || has(b"\"response_item\"")
            || has(b"\"turn_context\""))
    {
        Some(ProviderKind::Codex)
    } else if has(b"\"sessionId\"")
        || has(b"\"leafUuid\"")
        || has(b"\"file-history-snapshot\"")
        || has(b"\"queue-operation\"")
    {
        Some(ProviderKind::Claude)
    } else if has(b"\"session_id\"") && (has(b"\"uuid\"") || has(b"\"parent_uuid\""))
        || has(b"\"is_sidechain\"")
    {
        // Norma's first record has no `parent_uuid` (seed 000), so `uuid` must do.
        Some(ProviderKind::Norma)
    } else {
        None
    }
}

/// Content detection for Pi, Copilot CLI and Cursor, by the first record's top-level
/// keys (parsed: their key names are common words that may sit in any text).
fn sniff_newer(line: &[u8]) -> Option<ProviderKind> {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(rename = "type", borrow)]
        ty: Option<std::borrow::Cow<'a, str>>,
        version: Option<serde::de::IgnoredAny>,
        cwd: Option<serde::de::IgnoredAny>,
        data: Option<serde::de::IgnoredAny>,
        id: Option<serde::de::IgnoredAny>,
        role: Option<serde::de::IgnoredAny>,
        message: Option<serde::de::IgnoredAny>,
        status: Option<serde::de::IgnoredAny>,
        timestamp: Option<serde::de::IgnoredAny>,
        uuid: Option<serde::de::IgnoredAny>,
        v: Option<serde::de::IgnoredAny>,
        pad: Option<serde::de::IgnoredAny>,
    }
    // Only first lines of files no path rule claimed get here, at most 64 KiB each.
    if !line.starts_with(b"{") {
        return None;
    }
    let t: Top<'_> = serde_json::from_slice(line).ok()?;
    let ty = t.ty.as_deref();
    // Pi's header (written through Entire it has no `version`), or Oh My Pi's fixed-width
    // title slot, which comes before the header (can1357/oh-my-pi
    // `packages/coding-agent/src/session/session-entries.ts`).
    if ty == Some("session") && (t.version.is_some() || t.id.is_some()) && t.cwd.is_some()
        || ty == Some("title") && t.v.is_some() && t.pad.is_some()
    {
        Some(ProviderKind::Pi)
    } else if ty.is_some_and(|ty| ty.contains('.')) && t.data.is_some() && t.id.is_some() {
        Some(ProviderKind::Copilot)
    } else if (t.role.is_some() && t.message.is_some() && ty.is_none()
        || ty == Some("turn_ended") && t.status.is_some())
        && t.timestamp.is_none()
        && t.uuid.is_none()
    {
        Some(ProviderKind::Cursor)
    } else {
        None
    }
}
