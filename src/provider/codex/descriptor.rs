//! Codex's descriptor: where its rollouts live and how they are told, its restart
//! points, and who writes a live session.

use super::CodexProjector;
use crate::provider::Projector;
use crate::provider::audit::{self, Audit};
use crate::provider::descriptor::{Agent, EnvDir, Writer, agent_names, env_or_home, has_ext};
use crate::provider::restart::{AnyOf, Hazard, Restart, Restarts, Word, around};
use memchr::memmem::Finder;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

pub struct Codex;

impl Agent for Codex {
    agent_names!(Codex, "codex", "Codex");

    /// `$CODEX_HOME/sessions` or `~/.codex/sessions`.
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env_or_home(env, "CODEX_HOME", ".codex", "sessions")
    }

    fn claims_path(&self, path: &Path) -> bool {
        let s = path.to_string_lossy();
        let rollout = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"));
        has_ext(path, ".jsonl") && (s.contains("/.codex/") || (rollout && s.contains("/sessions/")))
    }

    /// A rollout's folder and records are named more loosely than Claude Code's.
    fn detect_early(&self) -> bool {
        true
    }

    fn first_record_raw(&self, line: &[u8]) -> bool {
        let has = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
        has(b"\"payload\"")
            && (has(b"\"session_meta\"")
                || has(b"\"event_msg\"")
                || has(b"\"response_item\"")
                || has(b"\"turn_context\""))
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(CodexProjector::new(path))
    }

    fn restarts(&self) -> Option<&'static dyn Restarts> {
        Some(&CodexRestarts)
    }

    /// Codex keeps its rollout open while the session lives.
    fn writer(&self) -> Option<Writer> {
        Some(Writer::HoldsOpen)
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&super::facts::CodexRecords, path)
    }
}

struct CodexRestarts;

impl Restarts for CodexRestarts {
    fn hazards(&self, _path: &Path) -> &'static [Hazard] {
        // A second header would change the session id from that line on.
        const HAZARDS: [Hazard; 1] = [Hazard {
            key: b"n_m",
            needles: &[b"\"session_meta\""],
            why: "second_session_meta",
        }];
        &HAZARDS
    }

    fn answer_needle(&self) -> &'static Finder<'static> {
        static ASSISTANT: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new(b"\"role\":\"assistant\""));
        &ASSISTANT
    }

    fn end_needles(&self) -> &'static AnyOf {
        static ENDS: LazyLock<AnyOf> = LazyLock::new(|| {
            // Keys as for Claude's end words (`descriptor.rs` there).
            AnyOf::new(&[
                Word::new(b"omp", &[b"\"task_complete\"", b"\"turn_complete\""]),
                Word::new(b"n_a", &[b"\"turn_aborted\""]),
                Word::new(b"or\"", &[b"\"type\":\"error\""]),
                Word::new(b"d_t", &[b"\"rate_limit_reached_type\":\""]),
            ])
        });
        &ENDS
    }

    fn names_turn(&self, line: &[u8]) -> Option<String> {
        static TURN_ID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"turn_id\""));
        // Most lines name none: look before building the field's needle.
        TURN_ID.find(line)?;
        crate::provider::raw_str_field(line, "turn_id", false).map(str::to_owned)
    }

    fn sets_context(&self, line: &[u8]) -> bool {
        static CONTEXT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"turn_context"));
        // The look only spares the parse of lines that cannot be one; the type decides.
        CONTEXT.find(line).is_some() && super::record::is_turn_context(line)
    }

    fn needs_context(&self, line: &[u8]) -> bool {
        // In `require_escalated` and `with_escalated_permissions`, quoted or not.
        static ESCALATED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"escalated"));
        ESCALATED.find(line).is_some()
    }

    fn context_hazard(&self) -> Option<Hazard> {
        Some(Hazard::plain(b"\"turn_context\"", "context_before_restart"))
    }

    fn turn_needle(&self, turn: &str) -> Vec<u8> {
        format!("\"turn_id\":\"{turn}\"").into_bytes()
    }

    fn before_parse(&self, line: &[u8]) -> Option<Restart> {
        // Both turn starts end in `_started"`: one pass over the line for that, then a
        // look at what stands before it (two passes, one per name, were 2 % of `scan`).
        const END: &[u8] = b"_started\"";
        const NAMES: [&[u8]; 2] = [b"\"task_started\"", b"\"turn_started\""];
        static STARTED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(END));
        static TURN_ID: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new(b"\"turn_id\":\""));
        let starts = STARTED.find_iter(line).any(|hit| {
            NAMES
                .iter()
                .any(|n| around(line, hit, (n, n.len() - END.len())).is_some())
        });
        if !starts {
            return Some(Restart::No);
        }
        // Without its own id, a turn is named by its ordinal in the file.
        TURN_ID
            .find(line)
            .is_none()
            .then_some(Restart::Unsafe("turn_ordinal"))
    }
}
