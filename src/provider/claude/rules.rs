//! The fixed knowledge the Claude Code projector decides by: which tools wait for the
//! person, which stop reasons end a response, which slash commands never reach the model,
//! which record types exist; and the small text helpers its rules share.

use super::Block;
use crate::provider::content::TEXT_KEEP;

/// Tools that park the turn until the person answers.
pub(super) const NEEDS_INPUT_TOOLS: [&str; 2] = ["AskUserQuestion", "ExitPlanMode"];
/// Stop reasons that end a response for good (max_tokens and refusal: done, but degraded).
pub(super) const TERMINAL_STOPS: [&str; 4] = ["end_turn", "stop_sequence", "max_tokens", "refusal"];

/// Built-in slash commands that run locally: no model turn follows them, however the
/// record that names them is chained or ordered.
pub(super) const LOCAL_COMMANDS: [&str; 34] = [
    "/exit",
    "/quit",
    "/clear",
    "/reset",
    "/new",
    "/model",
    "/mcp",
    "/config",
    "/settings",
    "/cost",
    "/usage",
    "/status",
    "/help",
    "/login",
    "/logout",
    "/resume",
    "/doctor",
    "/memory",
    "/permissions",
    "/allowed-tools",
    "/hooks",
    "/agents",
    "/ide",
    "/vim",
    "/theme",
    "/terminal-setup",
    "/export",
    "/add-dir",
    "/bashes",
    "/tasks",
    "/context",
    "/statusline",
    "/output-style",
    "/rewind",
];

/// Record types Claude Code writes that are understood (the projector reads them) or
/// deliberately ignored (bookkeeping, no model activity). `check` lists any other type.
pub const KNOWN_TYPES: [&str; 16] = [
    "user",
    "assistant",
    "system",
    "progress",
    "attachment",
    "summary",
    "file-history-snapshot",
    "file-history-delta",
    "queue-operation",
    "last-prompt",
    "mode",
    "permission-mode",
    "atis-latch",
    "custom-title",
    // Bookkeeping of 2.1.3x and later (transcript-formats.md E.1): a pull request's
    // link, a generated title.
    "pr-link",
    "ai-title",
];

/// Appends `t` to `text` up to [`TEXT_KEEP`] bytes (on a character boundary).
pub(super) fn push_capped(text: &mut String, t: &str) {
    if text.trim().is_empty() {
        // Leading whitespace shows nowhere; it must not use up the room.
        text.clear();
    }
    let room = TEXT_KEEP.saturating_sub(text.len());
    let mut end = room.min(t.len());
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    text.push_str(&t[..end]);
}

pub(crate) fn looks_like_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        })
}

pub(super) fn question_text(b: &Block<'_>) -> Option<String> {
    let input = b.input.as_ref()?;
    if let Some(q) = input
        .questions
        .as_ref()
        .and_then(|qs| qs.iter().find_map(|q| q.question.as_deref()))
    {
        return crate::model::clip_message(q);
    }
    input.plan.as_deref().and_then(crate::model::clip_message)
}
