//! Qwen Code's descriptor: where its sessions live and how they are told.

use super::QwenProjector;
use crate::provider::Projector;
use crate::provider::audit::{self, Audit, Facts, JsonRecords};
use crate::provider::descriptor::{Agent, EnvDir, WRITER_ARGS, Writer, agent_names, has_ext};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub struct Qwen;

impl Agent for Qwen {
    agent_names!(Qwen, "qwen", "Qwen Code");

    /// `$QWEN_RUNTIME_DIR/projects`, `$QWEN_HOME/projects` or `~/.qwen/projects`.
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env("QWEN_RUNTIME_DIR")
            .or_else(|| env("QWEN_HOME"))
            .or_else(|| env("HOME").map(|h| h.join(".qwen")))
            .map(|d| d.join("projects"))
            .into_iter()
            .collect()
    }

    fn claims_path(&self, path: &Path) -> bool {
        has_ext(path, ".jsonl") && path.to_string_lossy().contains("/.qwen/projects/")
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(QwenProjector::new(path))
    }

    /// The project is named from the records' `cwd`; the folder is its mangled path.
    fn project_marker(&self) -> Option<&'static str> {
        None
    }

    /// Qwen Code does not keep its transcript open.
    fn writer(&self) -> Option<Writer> {
        Some(Writer::RunsIn)
    }

    /// `qwen`, or node running `@qwen-code/qwen-code`'s script.
    fn is_writer_process(&self, exe: Option<&Path>, argv: &[OsString]) -> bool {
        let named = |p: &Path| p.file_name().is_some_and(|n| n == "qwen");
        exe.is_some_and(named)
            || argv.iter().take(WRITER_ARGS).any(|a| {
                named(Path::new(a)) || a.to_string_lossy().contains("@qwen-code/qwen-code/")
            })
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&QwenRecords, path)
    }
}

/// Qwen's records chain by `uuid`/`parentUuid`; a rewind leaves dead branches, which are
/// still well-linked.
struct QwenRecords;

impl JsonRecords for QwenRecords {
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        let r: super::Rec<'_> = serde_json::from_slice(line)?;
        Ok(Facts {
            id: r.uuid.as_deref().map(str::to_owned),
            parent: r.parent.as_deref().map(str::to_owned),
            ..Facts::default()
        })
    }
}
