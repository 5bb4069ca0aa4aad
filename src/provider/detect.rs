//! Which agent wrote a transcript: by its path first, then by its first record. Each
//! agent's rules are its descriptor's ([`Agent`]); this asks them in
//! [`detection_order`].

use super::descriptor::{Agent, FirstRecord, detection_order, has_ext};
use super::strip_nul;
use crate::model::ProviderKind;
use std::path::Path;

/// Guesses the provider of a transcript from its path and, failing that, its first line.
pub fn detect(path: &Path, first_line: &[u8]) -> Option<ProviderKind> {
    if let Some(kind) = detect_by_path(path) {
        return Some(kind);
    }
    // Markdown is told by its path alone.
    if !has_ext(path, ".jsonl") {
        return None;
    }
    sniff(first_line)
}

/// The provider the path alone names, if any: then the file need not be opened.
pub fn detect_by_path(path: &Path) -> Option<ProviderKind> {
    path.file_name()?;
    detection_order()
        .find(|a| a.claims_path(path))
        .map(|a| a.kind())
}

/// Content detection from one record's top-level keys.
pub fn sniff(line: &[u8]) -> Option<ProviderKind> {
    let line = strip_nul(line);
    // Parsed first: Copilot's `session.start` data holds a `sessionId`, which the raw
    // look takes for Claude Code's. Only first lines of files no path rule claimed get
    // here, at most 64 KiB each.
    let top = line
        .starts_with(b"{")
        .then(|| serde_json::from_slice::<FirstRecord<'_>>(line).ok())
        .flatten();
    let parsed = |a: &&dyn Agent| top.as_ref().is_some_and(|t| a.first_record_parsed(t));
    detection_order()
        .find(parsed)
        .or_else(|| detection_order().find(|a| a.first_record_raw(line)))
        .map(|a| a.kind())
}

/// Is `path` a transcript file name for `provider` (or any provider when `None`)?
pub fn is_candidate(path: &Path, provider: Option<ProviderKind>) -> bool {
    match provider {
        Some(p) => p.descriptor().is_candidate(path),
        None => has_ext(path, ".jsonl") || (has_ext(path, ".md") && detect(path, b"").is_some()),
    }
}
