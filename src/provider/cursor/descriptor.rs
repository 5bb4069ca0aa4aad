//! Cursor's descriptor: where its agent transcripts live and how they are told.

use super::{CursorProjector, Rec, is_transcript};
use crate::provider::Projector;
use crate::provider::audit::{self, Audit, Facts, JsonRecords};
use crate::provider::descriptor::{Agent, EnvDir, FirstRecord, agent_names, has_ext};
use std::path::{Path, PathBuf};

pub struct Cursor;

impl Agent for Cursor {
    agent_names!(Cursor, "cursor", "Cursor");

    /// `~/.cursor/projects` (only its `agent-transcripts` folders are read).
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env("HOME")
            .map(|h| h.join(".cursor").join("projects"))
            .into_iter()
            .collect()
    }

    /// The default root is `~/.cursor/projects`, whose other folders hold no transcripts.
    fn is_candidate(&self, path: &Path) -> bool {
        has_ext(path, ".jsonl") && is_transcript(path)
    }

    fn claims_path(&self, path: &Path) -> bool {
        has_ext(path, ".jsonl") && path.to_string_lossy().contains("/agent-transcripts/")
    }

    /// `{role, message}` records, or a `turn_ended` one, with no time and no id.
    fn first_record_parsed(&self, t: &FirstRecord<'_>) -> bool {
        let ty = t.ty.as_deref();
        (t.role.is_some() && t.message.is_some() && ty.is_none()
            || ty == Some("turn_ended") && t.status.is_some())
            && t.timestamp.is_none()
            && t.uuid.is_none()
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(CursorProjector::new(path))
    }

    fn records_have_time(&self) -> bool {
        false
    }

    /// Cursor keeps sessions under `projects/<slug>/` as Claude Code does.
    fn project_marker(&self) -> Option<&'static str> {
        Some("projects")
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&CursorRecords, path)
    }
}

/// Cursor writes no ids and no tool results: only that lines parse is checked.
struct CursorRecords;

impl JsonRecords for CursorRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        serde_json::from_slice::<Rec<'_>>(line)?;
        Ok(Facts::default())
    }
}
