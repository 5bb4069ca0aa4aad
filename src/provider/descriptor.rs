//! What baton knows about each agent, behind one trait: each agent's folder implements
//! [`Agent`], and [`ALL`] lists them. The rest of the crate asks an agent's descriptor
//! ([`ProviderKind::descriptor`]) instead of matching on its kind, so adding an agent is
//! its folder, its `ProviderKind` variant and one line in [`ALL`].

use super::audit::Audit;
use super::restart::Restarts;
use super::{Projector, claude, codex, copilot, cursor, gemini, norma, opencode, pi, qwen, sgme};
use crate::model::ProviderKind;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Every agent, in the order of their `ProviderKind` variants: the order default roots
/// are listed in and the order detection asks them in (after [`Agent::detect_early`]).
pub static ALL: &[&dyn Agent] = &[
    &claude::Claude,
    &codex::Codex,
    &norma::Norma,
    &sgme::Sgme,
    &cursor::Cursor,
    &copilot::Copilot,
    &pi::Pi,
    &opencode::OpenCode,
    &gemini::Gemini,
    &qwen::Qwen,
];

/// Every agent's id, in registry order: `claude, codex, …` (for messages).
pub fn ids() -> String {
    ALL.iter().map(|a| a.id()).collect::<Vec<_>>().join(", ")
}

/// The agent recorded for an event that names none (daemon events) where a session key
/// needs one: the state journal has always written Claude there.
pub const UNNAMED: ProviderKind = ProviderKind::Claude;

/// How many of a process's arguments (the program, its script) tell what it is.
pub const WRITER_ARGS: usize = 2;

/// Who writes an agent's transcript while its session lives, as the liveness check
/// (`daemon/liveness.rs`, which owns the `/proc` reading) looks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// Some process holds the transcript open for writing.
    HoldsOpen,
    /// A process of the agent ([`Agent::is_writer_process`]) runs in the directory the
    /// session started in.
    RunsIn,
}

/// A first record's top-level keys, parsed once for every agent's
/// [`Agent::first_record_parsed`] (only presence is kept: the key names are common words
/// that may sit in any text, so a substring look would not do).
#[derive(Debug, Default, serde::Deserialize)]
pub struct FirstRecord<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: Option<std::borrow::Cow<'a, str>>,
    pub version: Option<serde::de::IgnoredAny>,
    pub cwd: Option<serde::de::IgnoredAny>,
    pub data: Option<serde::de::IgnoredAny>,
    pub id: Option<serde::de::IgnoredAny>,
    pub role: Option<serde::de::IgnoredAny>,
    pub message: Option<serde::de::IgnoredAny>,
    pub status: Option<serde::de::IgnoredAny>,
    pub timestamp: Option<serde::de::IgnoredAny>,
    pub uuid: Option<serde::de::IgnoredAny>,
    pub v: Option<serde::de::IgnoredAny>,
    pub pad: Option<serde::de::IgnoredAny>,
    #[serde(rename = "sessionId")]
    pub session_id: Option<serde::de::IgnoredAny>,
    #[serde(rename = "projectHash")]
    pub project_hash: Option<serde::de::IgnoredAny>,
}

/// Looks a directory up in the environment (set, not empty, absolute; `HOME` too).
pub type EnvDir<'a> = &'a dyn Fn(&str) -> Option<PathBuf>;

/// One agent's knowledge outside its projector.
pub trait Agent: Sync {
    fn kind(&self) -> ProviderKind;

    /// The id used in config, on the command line and in the event stream (`provider`).
    fn id(&self) -> &'static str;

    /// The agent's name as people know it.
    fn display_name(&self) -> &'static str;

    /// The agent's default transcript roots, from the environment variables that move
    /// them. A root that does not exist is looked for again on every sweep.
    fn default_roots(&self, _env: EnvDir<'_>) -> Vec<PathBuf> {
        Vec::new()
    }

    /// Whether a file under one of this agent's roots is a transcript, by its name.
    fn is_candidate(&self, path: &Path) -> bool {
        has_ext(path, ".jsonl")
    }

    /// Whether the file is one document rewritten whole on every change (by its name),
    /// not a log appended to: it is read whole again on each change, and its projector
    /// tells what is new against the version it read before.
    fn is_document(&self, _path: &Path) -> bool {
        false
    }

    /// Whether the path alone says this agent wrote the file.
    fn claims_path(&self, _path: &Path) -> bool {
        false
    }

    /// Asked before the other agents, for path and first-record rules broader than
    /// theirs.
    fn detect_early(&self) -> bool {
        false
    }

    /// Whether a first record (a JSON object) with these top-level keys is this agent's.
    /// Asked before [`Agent::first_record_raw`] of any agent.
    fn first_record_parsed(&self, _top: &FirstRecord<'_>) -> bool {
        false
    }

    /// Whether a first line's bytes are this agent's (a look for distinctive keys).
    fn first_record_raw(&self, _line: &[u8]) -> bool {
        false
    }

    /// A projector for the file at `path`.
    fn projector(&self, path: &Path) -> Box<dyn Projector>;

    /// Whether a line may hold several records written onto one another (JSON Lines
    /// writers); false for formats whose lines are text.
    fn glues_records(&self) -> bool {
        true
    }

    /// Whether each line is one record, named by its key (JSON Lines): then a key
    /// applied again on a later line is a copy of the record, and changes nothing. False
    /// for formats whose records span lines (a Markdown block and its body).
    fn one_record_a_line(&self) -> bool {
        true
    }

    /// False for agents whose records carry no timestamp: replay then takes the file's
    /// modification time as the records' time.
    fn records_have_time(&self) -> bool {
        true
    }

    /// Where a file can be read from other than its first byte (tail-first); `None`
    /// when its files are always read whole.
    fn restarts(&self) -> Option<&'static dyn Restarts> {
        None
    }

    /// The path component after which the agent's folder names the project (`projects`
    /// in `projects/<slug>/<session>.jsonl`), when it has one.
    fn project_marker(&self) -> Option<&'static str> {
        None
    }

    /// Who writes a live session's transcript; `None`: never judged.
    fn writer(&self) -> Option<Writer> {
        None
    }

    /// For [`Writer::RunsIn`]: whether the process with executable `exe` and first
    /// [`WRITER_ARGS`] arguments `argv` is this agent.
    fn is_writer_process(&self, _exe: Option<&Path>, _argv: &[OsString]) -> bool {
        false
    }

    /// The audit `baton check` runs on the file at `path`.
    fn auditor(&self, path: &Path) -> Box<dyn Audit>;

    /// The record id of one line (for resolving links from another file), if it has one.
    fn record_id(&self, _line: &[u8]) -> Option<String> {
        None
    }

    /// Whether subagents write files of their own beside the session's
    /// (`<session>/subagents/agent-x.jsonl`), whose parent links may point into it.
    fn has_subagent_files(&self) -> bool {
        false
    }

    /// For an agent whose sessions are rows of a database, not lines of files: how its
    /// rows are read (`rows.rs` reads them and keeps the row position). `None` for the
    /// agents that write transcript files.
    fn rows(&self) -> Option<&'static dyn RowSchema> {
        None
    }
}

/// An agent's [`Agent::kind`], [`Agent::id`] and [`Agent::display_name`], inside its
/// `impl Agent`: `agent_names!(Claude, "claude", "Claude Code");` (the `ProviderKind`
/// variant, the id, the name people know).
macro_rules! agent_names {
    ($kind:ident, $id:literal, $name:literal) => {
        fn kind(&self) -> $crate::model::ProviderKind {
            $crate::model::ProviderKind::$kind
        }

        fn id(&self) -> &'static str {
            $id
        }

        fn display_name(&self) -> &'static str {
            $name
        }
    };
}
pub(crate) use agent_names;

/// The agent's side of a row source: the query that hands over what changed. The row
/// source (`crate::rows`) owns the connection, the position and the retries; only the
/// agent knows its tables and columns.
pub trait RowSchema: Sync {
    /// SQL returning `(updated INTEGER, key TEXT, record TEXT)` for every row version
    /// with `updated >= ?1` whose `(updated, key)` is after `(?1, ?2)`, ordered by
    /// `(updated, key)`, at most `?3` rows. `record` is the row as one JSON object (the
    /// projector's "line"); a value longer than `?4` bytes is left out of it.
    fn changed_since(&self) -> &'static str;
}

impl ProviderKind {
    /// This agent's descriptor.
    pub fn descriptor(self) -> &'static dyn Agent {
        // Listed in variant order (a test holds it), so the variant indexes the list.
        ALL[self as usize]
    }

    pub fn as_str(self) -> &'static str {
        self.descriptor().id()
    }

    pub fn parse(s: &str) -> Option<Self> {
        ALL.iter().find(|a| a.id() == s).map(|a| a.kind())
    }

    /// [`ProviderKind::parse`] for a flag or key, with an error that lists the ids.
    pub fn parse_arg(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| format!("unknown provider `{s}` ({})", ids()))
    }

    /// See [`Agent::records_have_time`].
    pub fn records_have_time(self) -> bool {
        self.descriptor().records_have_time()
    }
}

/// `$var/sub`, else `~/dot/sub`: the usual shape of an agent's default root.
pub(crate) fn env_or_home(env: EnvDir<'_>, var: &str, dot: &str, sub: &str) -> Vec<PathBuf> {
    env(var)
        .or_else(|| env("HOME").map(|h| h.join(dot)))
        .map(|d| d.join(sub))
        .into_iter()
        .collect()
}

/// A line's record id from a record type that reads its `uuid`, for [`Agent::record_id`].
pub(crate) fn uuid_of<'a, R: serde::Deserialize<'a>>(
    line: &'a [u8],
    uuid: impl FnOnce(R) -> Option<std::borrow::Cow<'a, str>>,
) -> Option<String> {
    let rec = serde_json::from_slice::<R>(super::strip_nul(line)).ok()?;
    uuid(rec).map(std::borrow::Cow::into_owned)
}

/// Whether the file name ends with `ext` (`.jsonl`).
pub(crate) fn has_ext(path: &Path, ext: &str) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(ext))
}

/// The agents in the order detection asks them.
pub(crate) fn detection_order() -> impl Iterator<Item = &'static dyn Agent> {
    let early = ALL.iter().filter(|a| a.detect_early());
    let rest = ALL.iter().filter(|a| !a.detect_early());
    early.chain(rest).copied()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn registry_is_in_variant_order_with_distinct_ids() {
        for (i, a) in ALL.iter().enumerate() {
            assert_eq!(a.kind() as usize, i, "{}", a.id());
            assert_eq!(ProviderKind::parse(a.id()), Some(a.kind()));
        }
        assert_eq!(ProviderKind::parse("claude"), Some(ProviderKind::Claude));
        assert_eq!(ProviderKind::parse("nope"), None);
    }

    #[test]
    fn ids_are_the_event_streams_provider_names() {
        for a in ALL {
            let wire = serde_json::to_string(&a.kind()).unwrap();
            assert_eq!(wire, format!("\"{}\"", a.id()));
        }
    }

    /// Every agent's roots, in registry order, under an environment of `vars`.
    fn roots(vars: &[(&str, &str)]) -> Vec<(ProviderKind, PathBuf)> {
        let env = |v: &str| {
            vars.iter()
                .find(|(k, _)| *k == v)
                .map(|(_, p)| PathBuf::from(p))
        };
        ALL.iter()
            .flat_map(|a| a.default_roots(&env).into_iter().map(|p| (a.kind(), p)))
            .collect()
    }

    #[test]
    fn default_roots_follow_home_and_each_agents_variables() {
        use ProviderKind::{Claude, Codex, Copilot, Cursor, Gemini, OpenCode, Pi, Qwen};
        let p = PathBuf::from;
        assert_eq!(
            roots(&[("HOME", "/h")]),
            [
                (Claude, p("/h/.claude/projects")),
                (Codex, p("/h/.codex/sessions")),
                (Cursor, p("/h/.cursor/projects")),
                (Copilot, p("/h/.copilot/session-state")),
                (Pi, p("/h/.pi/agent/sessions")),
                (Pi, p("/h/.omp/agent/sessions")),
                (OpenCode, p("/h/.local/share/opencode/opencode.db")),
                (Gemini, p("/h/.gemini/tmp")),
                (Qwen, p("/h/.qwen/projects")),
            ]
        );
        let moved = roots(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("COPILOT_HOME", "/g"),
            ("PI_CODING_AGENT_DIR", "/pi"),
            ("GEMINI_CLI_HOME", "/gh"),
            ("QWEN_HOME", "/qh"),
        ]);
        assert_eq!(
            moved[6],
            (OpenCode, p("/h/.local/share/opencode/opencode.db"))
        );
        assert_eq!(moved[7], (Gemini, p("/gh/.gemini/tmp")));
        assert_eq!(moved[8], (Qwen, p("/qh/projects")));
        let runtime = roots(&[("QWEN_RUNTIME_DIR", "/qr"), ("QWEN_HOME", "/qh")]);
        assert_eq!(runtime, [(Qwen, p("/qr/projects"))]);
        assert_eq!(moved[0], (Claude, p("/c/projects")));
        assert_eq!(moved[1], (Codex, p("/x/sessions")));
        assert_eq!(moved[3], (Copilot, p("/g/session-state")));
        assert_eq!(moved[4], (Pi, p("/pi/sessions")));
        let session_dir = roots(&[
            ("PI_CODING_AGENT_SESSION_DIR", "/s"),
            ("PI_CODING_AGENT_DIR", "/pi"),
            ("XDG_DATA_HOME", "/x"),
        ]);
        assert!(
            roots(&[("HOME", "/h"), ("OPENCODE_DB", "/d/my.db")])
                .contains(&(OpenCode, p("/d/my.db")))
        );
        assert_eq!(
            session_dir,
            [(Pi, p("/s")), (OpenCode, p("/x/opencode/opencode.db"))]
        );
    }

    #[test]
    fn detection_asks_codex_before_claude_code() {
        use super::super::detect;
        use std::path::Path;
        // A path both rules claim, and a first line both looks take.
        let both = Path::new("/w/.codex/x/.claude/projects/a.jsonl");
        assert_eq!(detect(both, b""), Some(ProviderKind::Codex));
        let line = br#"{"type":"event_msg","payload":{"type":"x"},"sessionId":"s"}"#;
        assert_eq!(
            detect(Path::new("/w/a.jsonl"), line),
            Some(ProviderKind::Codex)
        );
        // Parsed first-record rules come before the raw looks.
        let copilot = br#"{"type":"session.start","data":{"sessionId":"s"},"id":"i"}"#;
        assert_eq!(
            detect(Path::new("/w/a.jsonl"), copilot),
            Some(ProviderKind::Copilot)
        );
        assert_eq!(
            detect(Path::new("/w/raw/sessions/a.md"), b""),
            Some(ProviderKind::Sgme)
        );
        assert_eq!(detect(Path::new("/w/a.md"), copilot), None);
    }
}
