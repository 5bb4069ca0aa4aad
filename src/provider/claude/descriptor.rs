//! Claude Code's descriptor: where its transcripts live and how they are told, its
//! restart points, and who writes a live session.

use super::rules::NEEDS_INPUT_TOOLS;
use super::{ClaudeProjector, looks_like_uuid, may_defer};
use crate::provider::audit::{self, Audit};
use crate::provider::background::LAUNCH_NEEDLES;
use crate::provider::descriptor::{
    Agent, EnvDir, WRITER_ARGS, Writer, agent_names, env_or_home, uuid_of,
};
use crate::provider::restart::{AnyOf, Hazard, Restart, Restarts, Word, finders};
use crate::provider::{ObsKind, Projector, file_stem};
use memchr::memmem::Finder;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

pub struct Claude;

impl Agent for Claude {
    agent_names!(Claude, "claude", "Claude Code");

    /// `$CLAUDE_CONFIG_DIR/projects` or `~/.claude/projects`.
    fn default_roots(&self, env: EnvDir<'_>) -> Vec<PathBuf> {
        env_or_home(env, "CLAUDE_CONFIG_DIR", ".claude", "projects")
    }

    fn claims_path(&self, path: &Path) -> bool {
        crate::provider::descriptor::has_ext(path, ".jsonl")
            && path.to_string_lossy().contains("/.claude/projects/")
    }

    fn first_record_raw(&self, line: &[u8]) -> bool {
        let has = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
        has(b"\"sessionId\"")
            || has(b"\"leafUuid\"")
            || has(b"\"file-history-snapshot\"")
            || has(b"\"queue-operation\"")
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(ClaudeProjector::new(path))
    }

    fn restarts(&self) -> Option<&'static dyn Restarts> {
        Some(&ClaudeRestarts)
    }

    fn project_marker(&self) -> Option<&'static str> {
        Some("projects")
    }

    /// Claude Code does not keep its transcript open.
    fn writer(&self) -> Option<Writer> {
        Some(Writer::RunsIn)
    }

    fn is_writer_process(&self, exe: Option<&Path>, argv: &[OsString]) -> bool {
        is_claude(exe, argv)
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&super::facts::ClaudeRecords, path)
    }

    fn record_id(&self, line: &[u8]) -> Option<String> {
        uuid_of(line, |r: super::Rec<'_>| r.uuid)
    }

    fn has_subagent_files(&self) -> bool {
        true
    }
}

/// Whether `exe` (the process's executable) and `argv` make a Claude Code process: its
/// executable or first two arguments are named `claude`, its executable lies under a
/// `claude/versions/` directory (the native installer), or its script is the npm
/// package's (`@anthropic-ai/claude-code`).
pub fn is_claude(exe: Option<&Path>, argv: &[OsString]) -> bool {
    let named = |p: &Path| p.file_name().is_some_and(|n| n == "claude");
    if let Some(exe) = exe
        && (named(exe) || exe.to_string_lossy().contains("/claude/versions/"))
    {
        return true;
    }
    argv.iter().take(WRITER_ARGS).any(|a| {
        let p = Path::new(a);
        named(p) || a.to_string_lossy().contains("@anthropic-ai/claude-code/")
    })
}

struct ClaudeRestarts;

/// A user record's type, as Claude Code writes it: near the start of the line.
static USER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"type\":\"user\""));
/// A call's type, or a tool call's stop; quoted, so never inside a text (where quotes
/// are escaped).
static TOOL_USE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tool_use\""));

impl Restarts for ClaudeRestarts {
    fn unsupported(&self, path: &Path) -> Option<&'static str> {
        // The path names the session (`<uuid>.jsonl`, `<uuid>/subagents/…`); in other
        // files the first record that carries a session id does, wherever it is.
        let session = ClaudeProjector::new(path)
            .obs(String::new(), None, ObsKind::Work)
            .session;
        (!looks_like_uuid(&session)).then_some("session_not_in_path")
    }

    fn hazards(&self, path: &Path) -> &'static [Hazard] {
        // A subagent file is one sidechain: every record is the file's agent's.
        if file_stem(path).starts_with("agent-") {
            return &[];
        }
        // Inline sidechains (Claude Code ≤ 1.0): sessions of their own, found by
        // following parent chains that may reach back anywhere.
        // Background tasks launched in an earlier turn are still counted when a later
        // turn ends: the launch must be seen.
        // Three of the launch needles share "background": one key finds them all. Each
        // key is rare (`":tr` is not in `"isSidechain":false`, which every record has).
        const HAZARDS: [Hazard; 4] = [
            Hazard {
                key: b":tr",
                needles: &[b"\"isSidechain\":true"],
                why: "inline_sidechain",
            },
            Hazard {
                key: b"kgr",
                needles: &[LAUNCH_NEEDLES[0], LAUNCH_NEEDLES[1], LAUNCH_NEEDLES[4]],
                why: "background_task",
            },
            Hazard {
                key: b"aun",
                needles: &[LAUNCH_NEEDLES[2]],
                why: "background_task",
            },
            Hazard {
                key: b"awn",
                needles: &[LAUNCH_NEEDLES[3]],
                why: "background_task",
            },
        ];
        &HAZARDS
    }

    /// Claude's ends never name their turn.
    fn may_settle(&self) -> bool {
        true
    }

    fn answer_needle(&self) -> &'static Finder<'static> {
        static ASSISTANT: LazyLock<Finder<'static>> =
            LazyLock::new(|| Finder::new(b"\"type\":\"assistant\""));
        &ASSISTANT
    }

    fn may_reset(&self, line: &[u8]) -> bool {
        // An answer has text (a text block, or the content as one string) and a question
        // is a call of a tool that waits for the person: a line of other tool calls
        // alone, most of a working turn's assistant lines, has neither and is not parsed.
        static SAYS: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
            let mut needles: Vec<&'static [u8]> = vec![b"\"text\"", b"\"content\":\""];
            needles.extend(NEEDS_INPUT_TOOLS.iter().map(|t| t.as_bytes()));
            finders(&needles)
        });
        SAYS.iter().any(|f| f.find(line).is_some())
    }

    fn end_needles(&self) -> &'static AnyOf {
        static ENDS: LazyLock<AnyOf> = LazyLock::new(|| {
            // Each key is the needle's rarest three bytes in the corpus (every assistant
            // record names `stop_sequence`, so that one's key is common; a hit only costs a
            // comparison).
            AnyOf::new(&[
                Word::new(b"_tu", &[b"\"stop_reason\":\"end_turn\""]),
                Word::new(b"ce\"", &[b"\"stop_reason\":\"stop_sequence\""]),
                Word::new(b"x_t", &[b"\"stop_reason\":\"max_tokens\""]),
                Word::new(b"sal", &[b"\"stop_reason\":\"refusal\""]),
                Word::new(b"k_s", &[b"\"stop_hook_summary\""]),
                Word::new(b"n_d", &[b"\"turn_duration\""]),
                Word::new(b"op\"", &[b"\"hookEvent\":\"Stop\""]),
                Word::new(b"lEn", &[b"\"toolEndsTurn\":true"]),
                Word::new(b"sAp", &[b"\"isApiErrorMessage\":true"]),
                Word::new(b"[Re", &[b"[Request interrupted"]),
                Word::new(b"lim", &[b"usage limit reached"]),
            ])
        });
        &ENDS
    }

    fn turn_needle(&self, turn: &str) -> Vec<u8> {
        // Other records name a prompt too (`messageId` of file-history snapshots).
        format!("\"uuid\":\"{turn}\"").into_bytes()
    }

    fn before_parse(&self, line: &[u8]) -> Option<Restart> {
        static NEEDLES: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
            finders(&[b"\"tool_use_id\"", b"\"toolUseResult\"", b"<command-name>"])
        });
        let has = |i: usize| NEEDLES[i].find(line).is_some();
        // Tool results (blocks or the record's own field) never start a turn; they are
        // the big records, so they are turned away before parsing.
        if USER.find(line).is_none() || has(0) || has(1) {
            return Some(Restart::No);
        }
        // Whether a slash command is a turn depends on the caveat record before it.
        has(2).then_some(Restart::Maybe)
    }

    fn may_defer(&self, line: &[u8]) -> bool {
        may_defer(line)
    }

    /// A block stamped with a tool call's stop that holds no call: the file stamps
    /// every block, so a later text without a stop is no answer.
    fn sets_context(&self, line: &[u8]) -> bool {
        // The looks only spare the parse of lines that cannot be one (a call's record
        // names `"tool_use"` as its type too; a user record, most of the bytes, its key
        // near the start, is none); the record decides. A stamp they miss (written with
        // spaces) only makes the read start earlier or read whole.
        if USER.find(line).is_some() {
            return false;
        }
        let mut hits = TOOL_USE.find_iter(line);
        let Some(at) = hits.next() else {
            return false;
        };
        hits.next().is_none()
            && line[..at].ends_with(b"\"stop_reason\":")
            && super::record::stamps_without_call(line)
    }

    /// An assistant record without a stop whose version does not tell whether its
    /// writer stamps every block (none, or one between those known;
    /// [`super::record::Version`]): whether its text is an answer depends on a stamped
    /// block before it.
    fn needs_context(&self, line: &[u8]) -> bool {
        static ASSISTANT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"assistant"));
        static VERSION: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"version\""));
        // The looks only spare the parse of lines that cannot be one; the record decides.
        // A user record (most of the bytes, its key near the start) asks nothing. The
        // string `"tool_use"` (quoted, so never inside a text, where quotes are escaped)
        // is a call's type, whose reading needs no context, or a stop.
        if USER.find(line).is_some()
            || ASSISTANT.find(line).is_none()
            || TOOL_USE.find(line).is_some()
        {
            return false;
        }
        // A line that names one version, one that tells, needs nothing either: Claude
        // Code writes `version` at the top of every record, and an assistant record
        // without a call holds no other object that names one. (The parse of every
        // text record was a twentieth of `scan` on a generated tree of Claude Code
        // sessions.)
        let mut keys = VERSION.find_iter(line);
        let once = match (keys.next(), keys.next()) {
            (Some(at), None) => super::record::Version::named_at(line, at),
            _ => None,
        };
        once.is_none_or(|v| v.stamps_every_block().is_none()) && super::record::needs_stamps(line)
    }

    fn context_hazard(&self) -> Option<Hazard> {
        Some(Hazard::plain(
            b"\"stop_reason\":\"tool_use\"",
            "context_before_restart",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_text_without_a_stop_needs_the_context_unless_its_version_tells() {
        let text = |stop: &str, version: &str| {
            format!(
                r#"{{"type":"assistant",{version}"message":{{"role":"assistant","content":[{{"type":"text","text":"hi"}}],"stop_reason":{stop}}}}}"#
            )
        };
        for (line, needs) in [
            (text("null", r#""version":"2.1.39","#), false),
            (text("null", r#""version":"2.1.239","#), false),
            (text("null", r#""version":"2.1.200","#), true),
            (text("null", ""), true),
            (text("null", r#""version": "2.1.39","#), false),
            (text(r#""end_turn""#, ""), false),
            (text(r#""tool_use""#, ""), false),
            // Two versions: the record decides (the top one, 2.1.200, does not tell).
            (
                text("null", r#""version":"2.1.200","x":{"version":"2.1.39"},"#),
                true,
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}],"stop_reason":null}}"#.to_owned(),
                false,
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":"hi"}}"#.to_owned(),
                false,
            ),
            (
                r#"{"type": "user","message":{"role":"user","content":"hi"}}"#.to_owned(),
                false,
            ),
        ] {
            assert_eq!(ClaudeRestarts.needs_context(line.as_bytes()), needs, "{line}");
        }
    }

    #[test]
    fn tells_claude_code_processes() {
        let native = Path::new("/home/me/.local/share/claude/versions/2.1.39");
        assert!(is_claude(Some(native), &args(&["claude"])));
        assert!(is_claude(Some(native), &args(&["2.1.39"])));
        assert!(is_claude(
            Some(Path::new("/usr/bin/node")),
            &args(&["node", "/usr/local/bin/claude", "--resume"])
        ));
        assert!(is_claude(
            Some(Path::new("/usr/bin/node")),
            &args(&[
                "node",
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"
            ])
        ));
        assert!(!is_claude(
            Some(Path::new("/usr/bin/node")),
            &args(&["node", "server.js"])
        ));
        // Only the program and its script count, not a later argument.
        assert!(!is_claude(
            Some(Path::new("/usr/bin/vim")),
            &args(&["vim", "notes", "claude"])
        ));
        assert!(!is_claude(
            Some(Path::new("/usr/bin/claude-monitor")),
            &args(&["claude-monitor"])
        ));
    }
}
