//! Pi's descriptor (Oh My Pi, its fork, is read as Pi): where its sessions live and how
//! they are told.

use super::PiProjector;
use crate::provider::Projector;
use crate::provider::audit::{self, Audit};
use crate::provider::descriptor::{Agent, EnvDir, FirstRecord, agent_names, has_ext};
use std::path::{Path, PathBuf};

pub struct Pi;

impl Agent for Pi {
    agent_names!(Pi, "pi", "Pi");

    /// `$PI_CODING_AGENT_SESSION_DIR`, `$PI_CODING_AGENT_DIR/sessions` or
    /// `~/.pi/agent/sessions`, and Oh My Pi's `~/.omp/agent/sessions`.
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        let pi = env("PI_CODING_AGENT_SESSION_DIR")
            .or_else(|| env("PI_CODING_AGENT_DIR").map(|d| d.join("sessions")))
            .or_else(|| env("HOME").map(|h| h.join(".pi").join("agent").join("sessions")));
        // Oh My Pi, the Pi fork (read as Pi): its own folder, `omp`'s default.
        let omp = env("HOME").map(|h| h.join(".omp").join("agent").join("sessions"));
        pi.into_iter().chain(omp).collect()
    }

    fn claims_path(&self, path: &Path) -> bool {
        let s = path.to_string_lossy();
        has_ext(path, ".jsonl")
            && (s.contains("/.pi/agent/sessions/") || s.contains("/.omp/agent/sessions/"))
    }

    /// Pi's header (written through Entire it has no `version`), or Oh My Pi's
    /// fixed-width title slot, which comes before the header (can1357/oh-my-pi
    /// `packages/coding-agent/src/session/session-entries.ts`).
    fn first_record_parsed(&self, t: &FirstRecord<'_>) -> bool {
        let ty = t.ty.as_deref();
        ty == Some("session") && (t.version.is_some() || t.id.is_some()) && t.cwd.is_some()
            || ty == Some("title") && t.v.is_some() && t.pad.is_some()
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(PiProjector::new(path))
    }

    /// Pi keeps sessions under `sessions/--<cwd with '/' → '-'>--/`.
    fn project_marker(&self) -> Option<&'static str> {
        Some("sessions")
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&super::facts::PiRecords, path)
    }
}
