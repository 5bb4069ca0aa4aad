//! Where a file can be read from other than its first byte: which records start a turn of
//! the file's main conversation with an id of their own (a safe restart point for a
//! fresh projector), and which records, earlier in the file, hold context a restart would
//! lose. Used by the tail-first read, which finds a session's state from its last turns
//! instead of every byte.

use super::background::LAUNCH_NEEDLES;
use super::{ObsKind, projector_for};
use crate::model::ProviderKind;
use memchr::memmem::Finder;
use std::path::Path;
use std::sync::LazyLock;

/// What one line means for a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// Not a turn start, or not one of the main conversation: read past it.
    No,
    /// Starts the main conversation's turn with this id, whatever came before it.
    At(String),
    /// Not a turn start here, but whether it is one depends on what came before (so a
    /// read that skips the records before it cannot tell).
    Maybe,
    /// Starts a turn whose identity depends on what came before (e.g. a turn counted by
    /// ordinal): the file must be read from its start.
    Unsafe(&'static str),
}

/// Why the file at `path` has no restart points at all (it is always read whole), if so.
pub fn unsupported(kind: ProviderKind, path: &Path) -> Option<&'static str> {
    match kind {
        ProviderKind::Claude => {
            // The path names the session (`<uuid>.jsonl`, `<uuid>/subagents/…`); in
            // other files the first record that carries a session id does, wherever it is.
            let session = projector_for(kind, path)
                .obs(String::new(), None, ObsKind::Work)
                .session;
            (!super::claude::looks_like_uuid(&session)).then_some("session_not_in_path")
        }
        ProviderKind::Codex => None,
        _ => Some("provider"),
    }
}

/// Patterns whose presence anywhere before a restart point (after the file's first line,
/// which the restarted read is shown) means the skipped part holds context the restart
/// cannot recover, each with the reason reported when it falls back.
pub fn hazards(kind: ProviderKind, path: &Path) -> &'static [(&'static [u8], &'static str)] {
    match kind {
        // A subagent file is one sidechain: every record is the file's agent's.
        ProviderKind::Claude if super::file_stem(path).starts_with("agent-") => &[],
        // Inline sidechains (Claude Code ≤ 1.0): sessions of their own, found by following
        // parent chains that may reach back anywhere.
        // Background tasks launched in an earlier turn are still counted when a later
        // turn ends: the launch must be seen.
        ProviderKind::Claude => &[
            (b"\"isSidechain\":true", "inline_sidechain"),
            (LAUNCH_NEEDLES[0], "background_task"),
            (LAUNCH_NEEDLES[1], "background_task"),
            (LAUNCH_NEEDLES[2], "background_task"),
            (LAUNCH_NEEDLES[3], "background_task"),
            (LAUNCH_NEEDLES[4], "background_task"),
        ],
        // A second header would change the session id from that line on.
        ProviderKind::Codex => &[(b"\"session_meta\"", "second_session_meta")],
        _ => &[],
    }
}

/// Whether, from this line on, a fresh reducer session ends up in the same state as one
/// that saw everything before, once the next turn starts: the line's first observation
/// (work, a tool call or result, an answer) reopens the turn and resets its pending
/// answer whatever came before, so only the open turn's id still differs, and that is
/// replaced at the next turn start. That holds only where no later record names its
/// turn (Claude's ends never do; Codex's `task_complete` does).
pub fn settles(kind: ProviderKind, path: &Path, line: &[u8]) -> bool {
    if kind != ProviderKind::Claude {
        return false;
    }
    let mut p = projector_for(kind, path);
    let main_agent = p.obs(String::new(), None, ObsKind::Work).agent;
    let mut out = Vec::new();
    if p.project(super::strip_nul(line), &mut out).is_err() {
        return false;
    }
    out.first().is_some_and(|o| {
        o.agent == main_agent
            && matches!(
                o.kind,
                ObsKind::Work
                    | ObsKind::ToolCall { .. }
                    | ObsKind::ToolResult { .. }
                    | ObsKind::Final { .. }
            )
    })
}

/// Whether this line decides the session's message and resets its open turn's pending
/// answer whatever came before, leaving only the open turn's identity to the past: its
/// first observation reopens the turn (as [`settles`]) and one of them sets the message
/// (an answer with text, or a question to the person). A read may jump from the last
/// turn start straight to such a line.
pub fn resets(kind: ProviderKind, path: &Path, line: &[u8]) -> bool {
    // Only assistant records answer or ask; the rest are turned away before parsing (a
    // line turned away only makes the read start earlier).
    static ASSISTANT: LazyLock<[Finder<'static>; 2]> = LazyLock::new(|| {
        [
            Finder::new(b"\"type\":\"assistant\""),
            Finder::new(b"\"role\":\"assistant\""),
        ]
    });
    let wanted = match kind {
        ProviderKind::Claude => &ASSISTANT[0],
        ProviderKind::Codex => &ASSISTANT[1],
        _ => return false,
    };
    if wanted.find(line).is_none() {
        return false;
    }
    let mut p = projector_for(kind, path);
    let main_agent = p.obs(String::new(), None, ObsKind::Work).agent;
    let mut out = Vec::new();
    if p.project(super::strip_nul(line), &mut out).is_err() {
        return false;
    }
    let opens = out.first().is_some_and(|o| {
        o.agent == main_agent
            && matches!(
                o.kind,
                ObsKind::Work
                    | ObsKind::ToolCall { .. }
                    | ObsKind::ToolResult { .. }
                    | ObsKind::Final { .. }
            )
    });
    opens
        && out.iter().all(|o| o.agent == main_agent)
        && out.iter().any(|o| {
            matches!(
                &o.kind,
                ObsKind::Final {
                    message: Some(_),
                    ..
                } | ObsKind::ToolCall {
                    needs_input: Some(_),
                    ..
                }
            )
        })
}

/// Whether this line may decide its turn (an end marker, an error, an interrupt): a cheap
/// look for the words, never a parse, so it may say yes where a parse would say no.
pub fn may_end_turn(kind: ProviderKind, line: &[u8]) -> bool {
    static CLAUDE: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
        [
            &b"\"stop_reason\":\"end_turn\""[..],
            b"\"stop_reason\":\"stop_sequence\"",
            b"\"stop_reason\":\"max_tokens\"",
            b"\"stop_reason\":\"refusal\"",
            b"\"stop_hook_summary\"",
            b"\"turn_duration\"",
            b"\"hookEvent\":\"Stop\"",
            b"\"toolEndsTurn\":true",
            b"\"isApiErrorMessage\":true",
            b"[Request interrupted",
            b"usage limit reached",
        ]
        .into_iter()
        .map(Finder::new)
        .collect()
    });
    static CODEX: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
        [
            &b"\"task_complete\""[..],
            b"\"turn_complete\"",
            b"\"turn_aborted\"",
            b"\"type\":\"error\"",
            b"\"rate_limit_reached_type\":\"",
        ]
        .into_iter()
        .map(Finder::new)
        .collect()
    });
    let needles = match kind {
        ProviderKind::Claude => &CLAUDE,
        ProviderKind::Codex => &CODEX,
        _ => return true,
    };
    needles.iter().any(|n| n.find(line).is_some())
}

/// The turn a record names, if it names one (an end that names another turn than the
/// open one can make that turn current).
pub fn names_turn(kind: ProviderKind, line: &[u8]) -> Option<String> {
    static TURN_ID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"turn_id\""));
    match kind {
        // Most lines name none: look before building the field's needle.
        ProviderKind::Codex if TURN_ID.find(line).is_some() => {
            super::raw_str_field(line, "turn_id", false).map(str::to_owned)
        }
        _ => None,
    }
}

/// What a copy of the record that starts turn `turn` would contain: found before the
/// restart point, the turn may still be open there, and then its start is no new turn.
pub fn turn_needle(kind: ProviderKind, turn: &str) -> Vec<u8> {
    match kind {
        // Other records name a prompt too (`messageId` of file-history snapshots).
        ProviderKind::Claude => format!("\"uuid\":\"{turn}\"").into_bytes(),
        ProviderKind::Codex => format!("\"turn_id\":\"{turn}\"").into_bytes(),
        _ => turn.as_bytes().to_vec(),
    }
}

/// Classifies one complete line (newline excluded) of a file of `kind` at `path`.
pub fn classify(kind: ProviderKind, path: &Path, line: &[u8]) -> Restart {
    // Built once: every line of a file's last turns passes through here.
    static NEEDLES: LazyLock<[Finder<'static>; 7]> = LazyLock::new(|| {
        [
            Finder::new(b"\"type\":\"user\""),
            Finder::new(b"\"tool_use_id\""),
            Finder::new(b"\"toolUseResult\""),
            Finder::new(b"<command-name>"),
            Finder::new(b"\"task_started\""),
            Finder::new(b"\"turn_started\""),
            Finder::new(b"\"turn_id\":\""),
        ]
    });
    let has = |i: usize| NEEDLES[i].find(line).is_some();
    match kind {
        ProviderKind::Claude => {
            // Tool results (blocks or the record's own field) never start a turn; they
            // are the big records, so they are turned away before parsing.
            if !has(0) || has(1) || has(2) {
                return Restart::No;
            }
            // Whether a slash command is a turn depends on the caveat record before it.
            if has(3) {
                return Restart::Maybe;
            }
        }
        ProviderKind::Codex => {
            if !has(4) && !has(5) {
                return Restart::No;
            }
            // Without its own id, a turn is named by its ordinal in the file.
            if !has(6) {
                return Restart::Unsafe("turn_ordinal");
            }
        }
        _ => return Restart::No,
    }
    // The projector decides: a fresh one, so that nothing but this line counts.
    let mut p = projector_for(kind, path);
    let main_agent = p.obs(String::new(), None, ObsKind::Work).agent;
    let mut out = Vec::new();
    if p.project(super::strip_nul(line), &mut out).is_err() {
        return Restart::No;
    }
    let mut starts = out.iter().filter_map(|o| match &o.kind {
        ObsKind::TurnStart { turn, .. } if o.agent == main_agent => Some(turn.clone()),
        _ => None,
    });
    // Where the session started (for liveness) is context, not activity.
    let activity = out
        .iter()
        .filter(|o| !matches!(o.kind, ObsKind::StartDir(_)))
        .count();
    match (starts.next(), activity) {
        (Some(turn), 1) => Restart::At(turn),
        // A turn start that brings other news (a teammate's or a task's end): not a clean
        // restart point, and no read may jump over it.
        (Some(_), _) => Restart::Maybe,
        // A record that starts a turn only if the model answers it (a `<bash-input>`, a
        // teammate's idle notification): a read that skipped it would miss the turn.
        (None, _) if kind == ProviderKind::Claude && super::claude::may_defer(line) => {
            Restart::Maybe
        }
        _ => Restart::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_prompt_is_a_restart_point_but_tool_results_and_sidechains_are_not() {
        let p = Path::new("/p/11111111-2222-4333-8444-555555555555.jsonl");
        let prompt = br#"{"type":"user","uuid":"u1","isSidechain":false,"message":{"role":"user","content":"hi"}}"#;
        assert_eq!(
            classify(ProviderKind::Claude, p, prompt),
            Restart::At("u1".into())
        );
        let result = br#"{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}}"#;
        assert_eq!(classify(ProviderKind::Claude, p, result), Restart::No);
        let side = br#"{"type":"user","uuid":"u3","isSidechain":true,"message":{"role":"user","content":"task"}}"#;
        assert_eq!(classify(ProviderKind::Claude, p, side), Restart::No);
    }

    #[test]
    fn codex_turn_needs_its_own_id() {
        let p =
            Path::new("/s/rollout-2026-01-01T00-00-00-019c0000-0000-7000-8000-000000000001.jsonl");
        let with = br#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#;
        assert_eq!(
            classify(ProviderKind::Codex, p, with),
            Restart::At("t1".into())
        );
        let without = br#"{"type":"event_msg","payload":{"type":"task_started"}}"#;
        assert_eq!(
            classify(ProviderKind::Codex, p, without),
            Restart::Unsafe("turn_ordinal")
        );
        let prompt = br#"{"type":"event_msg","payload":{"type":"user_message","message":"x"}}"#;
        assert_eq!(classify(ProviderKind::Codex, p, prompt), Restart::No);
    }
}
