//! Gemini CLI's descriptor: where its sessions live and how they are told.

use super::GeminiProjector;
use crate::provider::Projector;
use crate::provider::audit::{self, Audit, Facts, JsonRecords};
use crate::provider::descriptor::{
    Agent, EnvDir, FirstRecord, WRITER_ARGS, Writer, agent_names, has_ext,
};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of `.project_root` or `projects.json` read.
const ROOT_FILE_MAX: u64 = 1 << 20;

pub struct Gemini;

impl Agent for Gemini {
    agent_names!(Gemini, "gemini", "Gemini CLI");

    /// `$GEMINI_CLI_HOME/.gemini/tmp` or `~/.gemini/tmp` (`GEMINI_CLI_HOME` stands in
    /// for the home directory).
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env("GEMINI_CLI_HOME")
            .or_else(|| env("HOME"))
            .map(|h| h.join(".gemini").join("tmp"))
            .into_iter()
            .collect()
    }

    /// Sessions are `<slug>/chats/session-*.jsonl` (v0.29–v0.38: `session-*.json`),
    /// subagents `<slug>/chats/<parent>/<id>.jsonl`; `logs.json` and the rest are no
    /// transcripts.
    fn is_candidate(&self, path: &Path) -> bool {
        (has_ext(path, ".jsonl") && path.components().any(|c| c.as_os_str() == "chats"))
            || self.is_document(path)
    }

    /// The legacy `chats/session-*.json`: one document rewritten in place on every change.
    fn is_document(&self, path: &Path) -> bool {
        has_ext(path, ".json")
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
            && path
                .parent()
                .and_then(|p| p.file_name())
                .is_some_and(|n| n == "chats")
    }

    fn claims_path(&self, path: &Path) -> bool {
        self.is_candidate(path) && path.to_string_lossy().contains("/.gemini/tmp/")
    }

    /// The header: `{sessionId, projectHash, startTime, lastUpdated, kind}`.
    fn first_record_parsed(&self, t: &FirstRecord<'_>) -> bool {
        t.project_hash.is_some() && t.session_id.is_some() && t.ty.is_none()
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(GeminiProjector::new(path).with_root(project_root(path)))
    }

    /// `tmp/<slug>/chats/…`: the slug is the project root's lower-cased base name (v0.29+).
    fn project_marker(&self) -> Option<&'static str> {
        Some("tmp")
    }

    /// Gemini CLI does not keep its transcript open.
    fn writer(&self) -> Option<Writer> {
        Some(Writer::RunsIn)
    }

    /// `gemini`, or node running `@google/gemini-cli`'s script.
    fn is_writer_process(&self, exe: Option<&Path>, argv: &[OsString]) -> bool {
        let named = |p: &Path| p.file_name().is_some_and(|n| n == "gemini");
        exe.is_some_and(named)
            || argv
                .iter()
                .take(WRITER_ARGS)
                .any(|a| named(Path::new(a)) || a.to_string_lossy().contains("@google/gemini-cli/"))
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

/// The project root of the session file at `path` (`tmp/<slug>/chats/…`): the absolute
/// path in `tmp/<slug>/.project_root`, else the key `projects.json` (beside `tmp/`) maps
/// to `<slug>`. The session records hold only a hash of it. Read once, when the file's
/// projector is made (a few bytes, bounded); the text is untrusted like any record: it
/// names a project and is compared with processes' directories, never opened or run.
fn project_root(path: &Path) -> Option<String> {
    let chats = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?;
    let slug_dir = chats.parent()?;
    let slug = slug_dir.file_name()?.to_string_lossy().into_owned();
    let read = |p: PathBuf| -> Option<String> {
        let mut s = String::new();
        std::fs::File::open(p)
            .ok()?
            .take(ROOT_FILE_MAX)
            .read_to_string(&mut s)
            .ok()?;
        Some(s)
    };
    let absolute = |s: &str| Some(s.trim().to_owned()).filter(|s| s.starts_with('/'));
    if let Some(root) = read(slug_dir.join(".project_root"))
        .as_deref()
        .and_then(absolute)
    {
        return Some(root);
    }
    #[derive(serde::Deserialize)]
    struct Projects {
        projects: std::collections::BTreeMap<String, String>,
    }
    let json = read(slug_dir.parent()?.parent()?.join("projects.json"))?;
    let projects: Projects = serde_json::from_str(&json).ok()?;
    projects
        .projects
        .into_iter()
        .find(|(_, s)| *s == slug)
        .and_then(|(root, _)| absolute(&root))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn project_root_from_the_marker_file_else_projects_json() {
        let home = tempfile::tempdir().unwrap();
        let gem = home.path().join(".gemini");
        let chats = gem.join("tmp/web/chats");
        std::fs::create_dir_all(chats.join("s-1")).unwrap();
        let main = chats.join("session-2026-12-01T10-00-s1.jsonl");
        let sub = chats.join("s-1/agent-1.jsonl");
        assert_eq!(project_root(&main), None);
        std::fs::write(
            gem.join("projects.json"),
            r#"{"projects":{"/home/u/other":"other","/home/u/web":"web"}}"#,
        )
        .unwrap();
        assert_eq!(project_root(&main).as_deref(), Some("/home/u/web"));
        std::fs::write(gem.join("tmp/web/.project_root"), "/srv/web").unwrap();
        assert_eq!(project_root(&main).as_deref(), Some("/srv/web"));
        assert_eq!(project_root(&sub).as_deref(), Some("/srv/web"));
    }
}
