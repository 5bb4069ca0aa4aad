//! GitHub Copilot CLI's descriptor: where its sessions live and how they are told.

use super::CopilotProjector;
use crate::provider::Projector;
use crate::provider::audit::{self, Audit};
use crate::provider::descriptor::{Agent, EnvDir, FirstRecord, agent_names, env_or_home, has_ext};
use std::path::{Path, PathBuf};

pub struct Copilot;

impl Agent for Copilot {
    agent_names!(Copilot, "copilot", "Copilot CLI");

    /// `$COPILOT_HOME/session-state` or `~/.copilot/session-state`.
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env_or_home(env, "COPILOT_HOME", ".copilot", "session-state")
    }

    fn claims_path(&self, path: &Path) -> bool {
        has_ext(path, ".jsonl") && path.to_string_lossy().contains("/.copilot/session-state/")
    }

    /// Every record is `{type, data, id, …}` with a dotted type (`session.start`).
    fn first_record_parsed(&self, t: &FirstRecord<'_>) -> bool {
        t.ty.as_deref().is_some_and(|ty| ty.contains('.')) && t.data.is_some() && t.id.is_some()
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(CopilotProjector::new(path))
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&super::facts::CopilotRecords, path)
    }
}
