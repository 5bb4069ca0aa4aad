//! OpenCode's descriptor: where its database lives, how it is told, and its rows.

use super::{OpenCodeProjector, rows::OpenCodeRows};
use crate::provider::Projector;
use crate::provider::audit::{Audit, Problem, Unresolved};
use crate::provider::descriptor::{Agent, EnvDir, RowSchema, Writer, agent_names};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub struct OpenCode;

impl Agent for OpenCode {
    agent_names!(OpenCode, "opencode", "OpenCode");

    /// `$OPENCODE_DB`, else the databases in `$XDG_DATA_HOME/opencode` or
    /// `~/.local/share/opencode` (`packages/core/src/global.ts`): `opencode.db` and the
    /// channel databases `opencode-<channel>.db` that exist, or `opencode.db` to be
    /// looked for on every sweep when none does. The databases themselves, not their
    /// folder, which also holds OpenCode's logs, snapshots and old JSON storage.
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        if let Some(db) = env("OPENCODE_DB") {
            return vec![db];
        }
        let Some(dir) = env("XDG_DATA_HOME")
            .or_else(|| env("HOME").map(|h| h.join(".local").join("share")))
            .map(|d| d.join("opencode"))
        else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| is_database_name(p))
            .collect();
        found.sort();
        if found.is_empty() {
            found.push(dir.join("opencode.db"));
        }
        found
    }

    fn is_candidate(&self, path: &Path) -> bool {
        is_database_name(path)
    }

    fn claims_path(&self, path: &Path) -> bool {
        is_database_name(path)
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(OpenCodeProjector::new(path))
    }

    fn glues_records(&self) -> bool {
        false
    }

    /// A row is updated in place (a tool part goes pending → running → completed under
    /// one id): its next version is news, not a copy.
    fn one_record_a_line(&self) -> bool {
        false
    }

    /// OpenCode holds its database open for its whole life, whatever session runs: a
    /// session is alive while an `opencode` process runs in its directory.
    fn writer(&self) -> Option<Writer> {
        Some(Writer::RunsIn)
    }

    fn is_writer_process(&self, exe: Option<&Path>, argv: &[OsString]) -> bool {
        let named = |p: &Path| p.file_name().is_some_and(|n| n == "opencode");
        exe.is_some_and(named) || argv.iter().any(|a| named(Path::new(a)))
    }

    fn auditor(&self, _path: &Path) -> Box<dyn Audit> {
        Box::new(RowsAudit)
    }

    fn rows(&self) -> Option<&'static dyn RowSchema> {
        Some(&OpenCodeRows)
    }
}

/// `opencode.db` or `opencode-<channel>.db` (not their `-wal` and `-shm` companions).
pub(super) fn is_database_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    name == "opencode.db"
        || name
            .strip_prefix("opencode-")
            .and_then(|rest| rest.strip_suffix(".db"))
            .is_some_and(|channel| !channel.is_empty() && !channel.contains('.'))
}

/// A database has no lines for the JSON Lines audit: `check` reads its rows through the
/// row source instead, so the line audit finds nothing to say.
struct RowsAudit;

impl Audit for RowsAudit {
    fn line(&mut self, _line_no: u64, _bytes: &[u8], _out: &mut Vec<Problem>) {}
    fn oversized(&mut self, _line_no: u64, _head: &[u8], _tail: &[u8]) {}
    fn finish(&mut self, _out: &mut Vec<Problem>) -> Vec<Unresolved> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names() {
        for yes in [
            "/d/opencode.db",
            "/d/opencode-beta.db",
            "/d/opencode-local.db",
        ] {
            assert!(is_database_name(Path::new(yes)), "{yes}");
        }
        for no in [
            "/d/opencode.db-wal",
            "/d/opencode.db-shm",
            "/d/opencode-.db",
            "/d/opencode-beta.db-wal",
            "/d/other.db",
            "/d/opencode.jsonl",
        ] {
            assert!(!is_database_name(Path::new(no)), "{no}");
        }
    }
}
