//! Gemini CLI's descriptor: where its sessions live and how they are told.

use super::GeminiProjector;
use crate::model::ProviderKind;
use crate::provider::Projector;
use crate::provider::agent::{Agent, EnvDir, FirstRecord, has_ext};
use crate::provider::audit::{self, Audit, Facts, JsonRecords};
use std::path::{Path, PathBuf};

pub struct Gemini;

impl Agent for Gemini {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Gemini
    }

    fn id(&self) -> &'static str {
        "gemini"
    }

    fn display_name(&self) -> &'static str {
        "Gemini CLI"
    }

    /// `$GEMINI_CLI_HOME/.gemini/tmp` or `~/.gemini/tmp` (`GEMINI_CLI_HOME` stands in
    /// for the home directory).
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env("GEMINI_CLI_HOME")
            .or_else(|| env("HOME"))
            .map(|h| h.join(".gemini").join("tmp"))
            .into_iter()
            .collect()
    }

    /// Sessions are `<slug>/chats/session-*.jsonl`, subagents
    /// `<slug>/chats/<parent>/<id>.jsonl`; `logs.json` and the rest are no transcripts.
    fn is_candidate(&self, path: &Path) -> bool {
        has_ext(path, ".jsonl") && path.components().any(|c| c.as_os_str() == "chats")
    }

    fn claims_path(&self, path: &Path) -> bool {
        self.is_candidate(path) && path.to_string_lossy().contains("/.gemini/tmp/")
    }

    /// The header: `{sessionId, projectHash, startTime, lastUpdated, kind}`.
    fn first_record_parsed(&self, t: &FirstRecord<'_>) -> bool {
        t.project_hash.is_some() && t.session_id.is_some() && t.ty.is_none()
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(GeminiProjector::new(path))
    }

    /// `tmp/<slug>/chats/…`: the slug is the project root's lower-cased base name (v0.29+).
    fn project_marker(&self) -> Option<&'static str> {
        Some("tmp")
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&GeminiRecords, path)
    }
}

/// Gemini's ids repeat by design (upserts) and link nothing: only that lines parse is
/// checked.
struct GeminiRecords;

impl JsonRecords for GeminiRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        serde_json::from_slice::<super::Rec<'_>>(line)?;
        Ok(Facts::default())
    }
}
