//! Providers: the only place that knows transcript field names. Each projector turns one
//! line into zero or more provider-neutral [`Obs`]ervations for the reducer.

pub mod audit;
pub mod background;
pub mod claude;
pub mod codex;
mod content;
pub mod copilot;
#[cfg(test)]
mod corpus;
pub mod cursor;
pub mod descriptor;
mod detect;
pub mod gemini;
mod glued;
pub mod hook;
pub mod norma;
mod omp;
pub mod opencode;
pub mod pi;
pub mod qwen;
pub mod restart;
pub mod sgme;
pub mod signal;

use crate::model::ProviderKind;
pub use descriptor::{ALL, Agent, RowSchema, UNNAMED, Writer};
// Kept in `model`, which the events' `origin` field is read back in.
pub use crate::model::Origin;
pub use detect::{detect, detect_by_path, is_candidate, sniff};
pub use glued::{Around, glued_around, split_glued};
use std::path::Path;

/// Evidence that decided a completion (the `evidence` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// A terminal `stop_reason` on the final assistant record.
    StopReason,
    /// The final-usage block that only a message's last record carries.
    FinalUsage,
    /// A Stop-hook summary that let the turn end.
    StopHook,
    /// Claude Code's `turn_duration` marker.
    TurnDuration,
    /// Codex `task_complete`.
    TaskComplete,
    /// A tool result marked as ending the turn (`toolEndsTurn`).
    ToolEndsTurn,
    /// A whole assistant message with no tool call (providers that write whole messages).
    FinalMessage,
    /// Cursor's `turn_ended` record.
    TurnEnded,
    /// Copilot CLI's `assistant.turn_end` after a round with no tool request.
    TurnEnd,
    /// Qwen Code's `turn_result` record (`state:"completed"`).
    TurnResult,
    /// Nothing followed for the settle period.
    Quiet,
    /// The person sent the next prompt.
    NextPrompt,
    /// Claude Code's session registry said the session is idle (`idle` or `shell`).
    RegistryIdle,
    /// A Claude Code background job's `state.json` said `done`.
    JobDone,
    /// The agent's `Stop` hook (or Codex's `notify`) said the turn is over.
    HookStop,
}

impl Evidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StopReason => "stop_reason",
            Self::FinalUsage => "final_usage",
            Self::StopHook => "stop_hook",
            Self::TurnDuration => "turn_duration",
            Self::TaskComplete => "task_complete",
            Self::ToolEndsTurn => "tool_ends_turn",
            Self::FinalMessage => "final_message",
            Self::TurnEnded => "turn_ended",
            Self::TurnEnd => "turn_end",
            Self::TurnResult => "turn_result",
            Self::Quiet => "quiet",
            Self::NextPrompt => "next_prompt",
            Self::RegistryIdle => "registry_idle",
            Self::JobDone => "job_done",
            Self::HookStop => "hook_stop",
        }
    }
}

/// Who began a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initiator {
    Human,
    /// e.g. a Claude `<task-notification>` from a background task.
    System,
    /// A subagent's task, handed over by its parent agent.
    Agent,
}

impl Initiator {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::System => "system",
            Self::Agent => "agent",
        }
    }
}

/// What one record means for turn state, in provider-neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub enum ObsKind {
    /// A new turn begins. `origin` is `None` where the transcript cannot tell (a
    /// subagent's task, formats that only know prompts).
    TurnStart {
        turn: String,
        initiator: Initiator,
        origin: Option<Origin>,
    },
    /// Assistant output with no tool call: a completion candidate, confirmed at once when
    /// `confirm` is set.
    Final {
        message: Option<String>,
        confirm: Option<Evidence>,
    },
    /// A marker that confirms a pending candidate (but is no completion on its own).
    Confirm(Evidence),
    /// The agent is still working: supersedes a pending candidate.
    Work,
    /// A tool call went out. `needs_input` names a tool that waits for the person.
    ToolCall {
        id: String,
        needs_input: Option<String>,
        message: Option<String>,
    },
    /// A tool call came back.
    ToolResult { id: String },
    /// An explicit end of turn (Codex `task_complete`).
    Completed {
        turn: Option<String>,
        message: Option<String>,
        evidence: Evidence,
    },
    /// The turn ended in an error.
    Failed {
        turn: Option<String>,
        reason: String,
        message: Option<String>,
        resets_at: Option<String>,
    },
    /// The turn was interrupted or aborted.
    Interrupted {
        turn: Option<String>,
        reason: String,
        message: Option<String>,
    },
    /// The agent took the turn `turn` out of its conversation (a rewind): an outcome
    /// it had is taken back, a pending answer is dropped.
    Retract { turn: String, reason: String },
    /// Context was compacted; the turn goes on.
    Compacted { pre_tokens: Option<u64> },
    /// Something in the transcript is wrong but the scan goes on.
    Anomaly { reason: String, message: String },
    /// A background task started, finished or was queued for delivery.
    Background(background::Background),
    /// The directory the agent process started in (Claude Code's first `cwd`, Codex's
    /// `session_meta`, Pi's header, Copilot's `session.start` context): where a live
    /// writer is looked for, and what the session's project is called.
    StartDir(String),
    /// The git branch the agent says the session is on (Claude Code's `gitBranch`,
    /// Codex's `session_meta.payload.git.branch`), when it says and it changed.
    Branch(String),
}

/// Longest branch name passed on; a longer one is not a branch name a person reads.
const BRANCH_MAX: usize = 200;

/// A branch name from a record, if it is one a person may read: not empty, not too long,
/// no control characters (terminal escapes included).
pub(crate) fn branch_name(b: &str) -> Option<String> {
    let b = b.trim();
    (!b.is_empty() && b.len() <= BRANCH_MAX && !b.chars().any(char::is_control))
        .then(|| b.to_owned())
}

/// The anomaly a projector reports for a line that [`parse_line!`] parsed only after
/// [`repair`] mended it (`reason` says how).
pub(crate) fn repaired(reason: &str) -> ObsKind {
    ObsKind::Anomaly {
        reason: reason.to_owned(),
        message: "line repaired before parsing".to_owned(),
    }
}

/// The observations a record starts with: the anomaly of a line that [`parse_line!`]
/// parsed only after mending it (`repaired`: how), or none.
pub(crate) fn first_kinds(repaired: Option<&str>) -> Vec<ObsKind> {
    repaired.map(self::repaired).into_iter().collect()
}

/// The time of an oversized record whose `timestamp` comes before its content, in the
/// head the reader kept.
pub(crate) fn head_time(head: &[u8]) -> Option<i64> {
    raw_str_field(head, "timestamp", false).and_then(crate::clock::parse_rfc3339)
}

/// A record's key: its own id, or where it has none, a hash of the line.
pub(crate) fn key_or_hash(id: Option<&str>, line: &[u8]) -> String {
    id.map_or_else(|| content_hash(&[line]), str::to_owned)
}

/// A plain tool call (one that asks the person nothing) for each of `ids`, in order;
/// whether there was one.
pub(crate) fn tool_calls(ids: impl IntoIterator<Item = String>, kinds: &mut Vec<ObsKind>) -> bool {
    let before = kinds.len();
    kinds.extend(ids.into_iter().map(|id| ObsKind::ToolCall {
        id,
        needs_input: None,
        message: None,
    }));
    kinds.len() > before
}

/// A header's start directory, passed on with the first observation after it: a header
/// alone makes no session.
pub(crate) fn with_start_dir(pending: &mut Option<String>, kinds: &mut Vec<ObsKind>) {
    if !kinds.is_empty()
        && let Some(dir) = pending.take()
    {
        kinds.insert(0, ObsKind::StartDir(dir));
    }
}

/// A header's branch, passed on with the first observation after it (as
/// [`with_start_dir`]).
pub(crate) fn with_branch(pending: &mut Option<String>, kinds: &mut Vec<ObsKind>) {
    if !kinds.is_empty()
        && let Some(b) = pending.take()
    {
        kinds.insert(0, ObsKind::Branch(b));
    }
}

/// One observation from one record.
#[derive(Debug, Clone, PartialEq)]
pub struct Obs {
    pub session: String,
    pub agent: Option<String>,
    /// The record's own time, Unix ms.
    pub record_ts: Option<i64>,
    /// Content-derived key of the record (its uuid, or a hash of its bytes). Event ids are
    /// built from it, never from file offsets.
    pub key: String,
    pub kind: ObsKind,
}

impl Obs {
    /// An observation of the session `session` (`agent`: `None` for the main
    /// conversation).
    pub fn new(
        session: &str,
        agent: Option<&str>,
        record_ts: Option<i64>,
        key: String,
        kind: ObsKind,
    ) -> Self {
        Obs {
            session: session.to_owned(),
            agent: agent.map(str::to_owned),
            record_ts,
            key,
            kind,
        }
    }
}

/// A parse failure on one line; the caller reports it and moves on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

/// Turns lines of one file into observations. One projector per file: it may keep small
/// per-file context (the session id from a header record, open sidechains).
pub trait Projector: Send {
    /// Projects one complete line (leading NULs already stripped, never empty).
    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed>;

    /// A line too long to parse: only its two ends are known. The default says only that
    /// something happened in the session, which keeps a pending completion from being
    /// confirmed by quiet.
    fn oversized(&mut self, _head: &[u8], _tail: &[u8], key: String, out: &mut Vec<Obs>) {
        out.push(self.obs(key, None, ObsKind::Work));
    }

    /// This file's current session scope: the session, and the agent (`None` for the
    /// main conversation).
    fn scope(&self) -> (&str, Option<&str>);

    /// An observation in this file's current session scope.
    fn obs(&self, key: String, record_ts: Option<i64>, kind: ObsKind) -> Obs {
        let (session, agent) = self.scope();
        Obs::new(session, agent, record_ts, key, kind)
    }

    /// False for files that hold no user-facing conversation (compaction helpers).
    fn is_conversation(&self) -> bool {
        true
    }

    /// The per-file context as compact JSON: with a line-start offset, what lets the file
    /// be continued later (after a restart, or after its projector went cold) without
    /// re-reading what came before.
    fn save(&self) -> String;

    /// Takes back what [`Projector::save`] gave for the same path. False if it cannot
    /// (another version's format): the caller re-reads the file from its first byte.
    fn restore(&mut self, saved: &str) -> bool;
}

/// Serializes a projector's saved context (plain fields: cannot fail).
pub(crate) fn save_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// `save` and `restore` for a projector saved whole (every field is per-file context).
macro_rules! saved_whole {
    () => {
        fn save(&self) -> String {
            $crate::provider::save_json(self)
        }

        fn restore(&mut self, saved: &str) -> bool {
            match $crate::provider::load_json::<Self>(saved) {
                Some(s) => {
                    *self = s;
                    true
                }
                None => false,
            }
        }
    };
}
pub(crate) use saved_whole;

/// Parses a projector's saved context.
pub(crate) fn load_json<T: serde::de::DeserializeOwned>(saved: &str) -> Option<T> {
    serde_json::from_str(saved).ok()
}

/// A projector for the file at `path`.
pub fn projector_for(kind: ProviderKind, path: &Path) -> Box<dyn Projector> {
    kind.descriptor().projector(path)
}

/// The file name without its extension.
pub fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The session folder a subagent's file sits in: `<session>` for
/// `<session>/subagents/<file>`, `None` for a file elsewhere.
pub(crate) fn subagents_session(path: &Path) -> Option<String> {
    path.parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "subagents"))
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
}

/// A stable 128-bit FNV-1a hash, hex-encoded: content keys and event ids.
pub fn content_hash(parts: &[&[u8]]) -> String {
    parts.iter().fold(Fnv::new(), |h, p| h.part(p)).hex()
}

/// [`content_hash`] one part at a time, for keys whose first parts repeat: the state
/// after them can be kept and continued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv(u128);

impl Fnv {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    pub const fn new() -> Self {
        Fnv(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d)
    }

    /// The state after one more part.
    #[must_use]
    pub fn part(self, part: &[u8]) -> Self {
        let mut h = self.0;
        for b in part {
            h ^= u128::from(*b);
            h = h.wrapping_mul(Self::PRIME);
        }
        // Separator so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        Fnv(h.wrapping_mul(Self::PRIME))
    }

    /// The hash, hex-encoded.
    pub fn hex(self) -> String {
        // By hand: `format!("{:032x}")` cost more than the hash of a short line.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, c) in out.iter_mut().rev().enumerate() {
            *c = HEX[((self.0 >> (i * 4)) & 0xf) as usize];
        }
        // Always ASCII: never the empty default.
        std::str::from_utf8(&out)
            .map(str::to_owned)
            .unwrap_or_default()
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

/// The value of a plain string field (`"name":"value"`, no escapes in the value) in a
/// fragment of a line: the last occurrence when `last`, else the first. For oversized
/// lines, where only the two ends are kept and full parsing is impossible.
pub fn raw_str_field<'a>(hay: &'a [u8], name: &str, last: bool) -> Option<&'a str> {
    let needle = format!("\"{name}\":\"");
    let at = if last {
        memchr::memmem::rfind(hay, needle.as_bytes())
    } else {
        memchr::memmem::find(hay, needle.as_bytes())
    }?;
    let start = at + needle.len();
    let len = memchr::memchr2(b'"', b'\\', &hay[start..])?;
    if hay[start + len] != b'"' || len > 128 {
        return None;
    }
    std::str::from_utf8(&hay[start..start + len]).ok()
}

/// Strips a leading run of NUL bytes (left by writers that crashed mid-append).
pub fn strip_nul(line: &[u8]) -> &[u8] {
    let n = line.iter().take_while(|b| **b == 0).count();
    &line[n..]
}

/// Repairs what writers get wrong, for a line that did not parse: invalid UTF-8 is
/// replaced, and a line whose head was clobbered by another write is cut back to the
/// first later object start that parses. Returns the repaired bytes and the anomaly
/// reason, or the original error.
pub fn repair(
    line: &[u8],
    parses: impl Fn(&[u8]) -> bool,
    err: &serde_json::Error,
) -> Result<(Vec<u8>, &'static str), Malformed> {
    if std::str::from_utf8(line).is_err() {
        let fixed = String::from_utf8_lossy(line).into_owned().into_bytes();
        if parses(&fixed) {
            return Ok((fixed, "invalid_utf8"));
        }
    }
    // A splice: a write landed inside an unfinished line, e.g.
    // `{"type":"us{"type":"assistant",...}`. The clobbered head is short, so try the
    // first few later object starts; a nested object never parses on its own because
    // its parent's closing braces follow it. Bounded: a few O(n) attempts at most.
    let mut from = 1;
    for _ in 0..8 {
        let Some(i) = line
            .get(from..)
            .and_then(|rest| memchr::memmem::find(rest, b"{\""))
            .map(|i| i + from)
        else {
            break;
        };
        if parses(&line[i..]) {
            return Ok((line[i..].to_vec(), "spliced_line"));
        }
        from = i + 1;
    }
    Err(Malformed(err.to_string()))
}

/// Parses one line as `$ty` (a borrowing serde type), repairing it if needed. Evaluates
/// to `(record, Option<repair reason>)`; `$buf` must be a `Vec<u8>` that outlives the
/// record, since the record may borrow from the repaired bytes.
macro_rules! parse_line {
    ($line:expr, $buf:ident, $ty:ty) => {
        match serde_json::from_slice::<$ty>($line) {
            Ok(rec) => (rec, None),
            Err(e) => {
                let (fixed, why) = $crate::provider::repair(
                    $line,
                    |b| serde_json::from_slice::<$ty>(b).is_ok(),
                    &e,
                )?;
                $buf = fixed;
                let rec = serde_json::from_slice::<$ty>(&$buf)
                    .map_err(|e| $crate::provider::Malformed(e.to_string()))?;
                (rec, Some(why))
            }
        }
    };
}
pub(crate) use parse_line;

/// Whether `$line`, parsed as `$ty` and mended as a projector mends it ([`parse_line!`]),
/// passes `$test` (`|rec| bool`); a line that cannot be read does not. For the restart
/// rules' questions about one line, which must see it as the projector will.
macro_rules! line_is {
    ($line:expr, $ty:ty, |$rec:ident| $test:expr) => {
        (|| -> Result<bool, $crate::provider::Malformed> {
            let buf: Vec<u8>;
            let ($rec, _) = $crate::provider::parse_line!($line, buf, $ty);
            Ok($test)
        })()
        .unwrap_or(false)
    };
}
pub(crate) use line_is;

/// The start of most projectors' `project`: parses `$line` as `$ty` into `$rec` (with
/// [`parse_line!`], repairing it if needed) and starts `$kinds`, the record's
/// observations, with the repair anomaly when the line was mended ([`first_kinds`]).
macro_rules! parse_record {
    ($rec:ident, $kinds:ident, $line:expr, $ty:ty) => {
        let buf: Vec<u8>;
        let ($rec, repaired) = $crate::provider::parse_line!($line, buf, $ty);
        let mut $kinds = $crate::provider::first_kinds(repaired);
    };
}
pub(crate) use parse_record;

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a as first written, whose values event ids and saved keys carry.
    fn reference(parts: &[&[u8]]) -> String {
        const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
        const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
        let mut h = OFFSET;
        for part in parts {
            for b in *part {
                h ^= u128::from(*b);
                h = h.wrapping_mul(PRIME);
            }
            h ^= 0xff;
            h = h.wrapping_mul(PRIME);
        }
        format!("{h:032x}")
    }

    #[test]
    fn sniff_knows_pi_headers_without_version_and_oh_my_pi_title_slots() {
        let pi = |l: &str| sniff(l.as_bytes());
        assert_eq!(
            pi(r#"{"type":"session","version":3,"id":"u","timestamp":"t","cwd":"/w"}"#),
            Some(ProviderKind::Pi)
        );
        // Written through Entire: no `version` (Part E.4).
        assert_eq!(
            pi(r#"{"type":"session","id":"u","timestamp":"t","cwd":"/w"}"#),
            Some(ProviderKind::Pi)
        );
        // Oh My Pi's first line is its fixed-width title slot.
        assert_eq!(
            pi(r#"{"type":"title","v":1,"title":"x","updatedAt":"t","pad":"    "}"#),
            Some(ProviderKind::Pi)
        );
        assert_eq!(pi(r#"{"type":"title","title":"x"}"#), None);
        assert_eq!(pi(r#"{"type":"session","cwd":"/w"}"#), None);
    }

    #[test]
    fn content_hash_keeps_its_values_and_steps_agree() {
        let cases: [&[&[u8]]; 4] = [&[], &[b""], &[b"ab", b"c"], &[b"a", b"bc", &[0, 255, 7]]];
        for parts in cases {
            assert_eq!(content_hash(parts), reference(parts));
            let stepped = parts.iter().fold(Fnv::new(), |h, p| h.part(p)).hex();
            assert_eq!(stepped, reference(parts));
        }
        assert_ne!(content_hash(&[b"ab", b"c"]), content_hash(&[b"a", b"bc"]));
    }
}
