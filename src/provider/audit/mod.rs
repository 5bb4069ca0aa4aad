//! Audit facts for `baton check`: what each agent's records say about their own
//! integrity (ids, parent links, tool calls and results), and the per-file checks built on
//! them. Pure: lines in, problems out; `check` owns the files.
//!
//! JSON Lines agents share one engine (`jsonl`): each agent's folder reads its records
//! into the engine's vocabulary (`Facts`) through its own `JsonRecords`, and its
//! descriptor hands that to `json_audit`.

mod jsonl;
mod noa;
mod sgme;

pub(crate) use jsonl::{
    Block, Facts, FileSession, JsonRecords, Resp, block_fields, blocks, message_facts,
};
pub use noa::{NoaBlock, NoaState, noa_state};

use super::file_stem;
use crate::model::{ProviderKind, clip_message};
use std::path::{Path, PathBuf};

/// One thing wrong with a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line, when the problem sits on one.
    pub line: Option<u64>,
    pub kind: &'static str,
    pub message: String,
}

impl Problem {
    pub(crate) fn at(line: u64, kind: &'static str, message: String) -> Self {
        Problem {
            line: Some(line),
            kind,
            message,
        }
    }
}

/// A parent link the file itself cannot resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub line: u64,
    pub parent: String,
}

/// A per-file audit, fed every line in order.
pub trait Audit {
    /// One complete line, as read (leading NULs not yet stripped).
    fn line(&mut self, line_no: u64, bytes: &[u8], out: &mut Vec<Problem>);
    /// A line too long to parse: only its ends are known. The caller reports it.
    fn oversized(&mut self, line_no: u64, head: &[u8], tail: &[u8]);
    /// End of file: cross-record problems, and parent links to resolve elsewhere.
    fn finish(&mut self, out: &mut Vec<Problem>) -> Vec<Unresolved>;
}

/// The audit for a file of `kind` at `path`.
pub fn auditor(kind: ProviderKind, path: &Path) -> Box<dyn Audit> {
    kind.descriptor().auditor(path)
}

/// The audit of a JSON Lines transcript, reading its records through `records`.
pub(crate) fn json_audit(records: &'static dyn JsonRecords, path: &Path) -> Box<dyn Audit> {
    Box::new(jsonl::JsonAudit::new(records, path))
}

/// The audit of an SGME Markdown file.
pub fn sgme_audit(path: &Path) -> Box<dyn Audit> {
    Box::new(sgme::SgmeAudit::new(path))
}

/// The record id of one line (for resolving links from another file), if it has one.
pub fn record_id(kind: ProviderKind, line: &[u8]) -> Option<String> {
    kind.descriptor().record_id(line)
}

/// Where a subagent file's parent links may legitimately point: its session's main file
/// (`<dir>/<session>/subagents/agent-x.jsonl` → `<dir>/<session>.jsonl`). Claude's
/// compaction helper forks from the main conversation, so its first records name parents
/// there. Derived from the path only.
pub fn main_file_of(kind: ProviderKind, path: &Path) -> Option<PathBuf> {
    if !kind.descriptor().has_subagent_files() {
        return None;
    }
    let subagents = path.parent()?;
    if subagents.file_name()? != "subagents" || !file_stem(path).starts_with("agent-") {
        return None;
    }
    let session_dir = subagents.parent()?;
    let mut name = session_dir.file_name()?.to_os_string();
    name.push(".jsonl");
    Some(session_dir.with_file_name(name))
}

/// Record ids glimpsed in bytes that cannot be parsed (an oversized line's ends, a
/// malformed line): best effort, for resolving links only.
pub fn glimpse_ids(bytes: &[u8]) -> Vec<String> {
    string_values(bytes, b"\"uuid\":\"")
}

/// String values following `key` (e.g. `"uuid":"`) anywhere in `bytes`: a best-effort
/// glimpse into lines that cannot be parsed. Only id-like values are kept.
pub(crate) fn string_values(bytes: &[u8], key: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for at in memchr::memmem::find_iter(bytes, key) {
        let rest = &bytes[at + key.len()..];
        let end = rest.iter().take(200).position(|b| *b == b'"');
        if let Some(end) = end {
            let v = &rest[..end];
            if !v.is_empty()
                && v.iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
            {
                out.push(String::from_utf8_lossy(v).into_owned());
            }
        }
    }
    out
}

/// A value from a record, made safe and short for a message.
pub(crate) fn shown(s: &str) -> String {
    format!("`{}`", clip_message(s).unwrap_or_default())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn audit(
        kind: ProviderKind,
        path: &str,
        lines: &[&str],
    ) -> (Vec<Problem>, Vec<Unresolved>) {
        let mut a = auditor(kind, Path::new(path));
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            a.line(i as u64 + 1, l.as_bytes(), &mut out);
        }
        let links = a.finish(&mut out);
        (out, links)
    }

    #[test]
    fn main_file_of_subagents() {
        assert_eq!(
            main_file_of(
                ProviderKind::Claude,
                Path::new("/p/abc/subagents/agent-x.jsonl")
            ),
            Some(PathBuf::from("/p/abc.jsonl"))
        );
        assert_eq!(
            main_file_of(ProviderKind::Claude, Path::new("/p/abc.jsonl")),
            None
        );
        assert_eq!(
            main_file_of(
                ProviderKind::Codex,
                Path::new("/p/abc/subagents/agent-x.jsonl")
            ),
            None
        );
    }
}
