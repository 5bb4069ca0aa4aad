//! Gemini CLI's records, as serde reads them (packages/core `chatRecordingService.ts`
//! shapes, v0.39+ JSON Lines; shared/docs/other-agents.md "Gemini CLI (details)").

use crate::provider::content::StrOrList;
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

/// One line: the header, a message record, or an update (`$set`, `$rewindTo`).
#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) timestamp: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) content: Option<StrOrList<'a, Part<'a>>>,
    #[serde(rename = "toolCalls", borrow)]
    pub(crate) tool_calls: Option<Vec<ToolCall<'a>>>,
    /// The header's.
    #[serde(rename = "sessionId", borrow)]
    pub(crate) session_id: Option<Cow<'a, str>>,
    #[serde(rename = "projectHash")]
    pub(crate) project_hash: Option<IgnoredAny>,
    /// The legacy whole-file document's list (v0.29–v0.38 `session-….json`).
    #[serde(borrow)]
    pub(crate) messages: Option<Vec<Rec<'a>>>,
    #[serde(rename = "$set", borrow)]
    pub(crate) set: Option<Set<'a>>,
    #[serde(rename = "$rewindTo", borrow)]
    pub(crate) rewind_to: Option<Cow<'a, str>>,
}

/// A `$set` update: metadata (`lastUpdated`), or the whole message list (a checkpoint).
#[derive(Deserialize)]
pub(crate) struct Set<'a> {
    #[serde(borrow)]
    pub(crate) messages: Option<Vec<Rec<'a>>>,
}

/// A content part (`@google/genai` `Part`): text, or a tool's answer.
#[derive(Deserialize)]
pub(crate) struct Part<'a> {
    #[serde(borrow)]
    pub(crate) text: Option<Cow<'a, str>>,
    pub(crate) thought: Option<bool>,
    #[serde(rename = "functionResponse")]
    pub(crate) function_response: Option<IgnoredAny>,
}

/// A tool call on a `gemini` record, written once the call completed.
#[derive(Deserialize)]
pub(crate) struct ToolCall<'a> {
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) status: Option<Cow<'a, str>>,
}

impl Rec<'_> {
    /// The message's text: the string, or its non-thought text parts joined.
    pub(crate) fn text(&self) -> String {
        match &self.content {
            Some(StrOrList::Str(s)) => s.as_ref().to_owned(),
            Some(StrOrList::List(parts)) => parts
                .iter()
                .filter(|p| p.thought != Some(true))
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }

    /// Whether the content holds a tool's answer (`functionResponse` parts): such a
    /// `user` record is no prompt.
    pub(crate) fn has_function_response(&self) -> bool {
        matches!(&self.content, Some(StrOrList::List(parts))
            if parts.iter().any(|p| p.function_response.is_some()))
    }
}

/// The status inside Gemini's error text, `[API Error: … (Status: RESOURCE_EXHAUSTED)]`.
pub(crate) fn error_status(text: &str) -> Option<&str> {
    let at = text.rfind("(Status: ")? + "(Status: ".len();
    let rest = &text[at..];
    let end = rest.find(')')?;
    Some(rest[..end].trim()).filter(|s| !s.is_empty())
}

/// Whether an error is a usage limit: HTTP 429, `RESOURCE_EXHAUSTED` or a quota message.
pub(crate) fn is_limit(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    error_status(text).is_some_and(|s| s == "RESOURCE_EXHAUSTED" || s == "429")
        || lower.contains("quota")
        || lower.contains("429")
        || lower.contains("rate limit")
}

/// When a quota resets, from Gemini's "Your quota will reset after 2h13m45s." and the
/// error's own time (Unix ms).
pub(crate) fn quota_reset(text: &str, at: Option<i64>) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let from = lower.find("reset after ")? + "reset after ".len();
    let mut secs: i64 = 0;
    let mut num: i64 = 0;
    let mut any = false;
    for c in lower[from..].chars() {
        match c {
            '0'..='9' => {
                num = num
                    .saturating_mul(10)
                    .saturating_add(i64::from(c as u8 - b'0'))
            }
            'h' | 'm' | 's' => {
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                secs = secs.saturating_add(num.saturating_mul(unit));
                num = 0;
                any = true;
            }
            _ => break,
        }
    }
    let at = at?;
    any.then(|| crate::clock::format_rfc3339(at.saturating_add(secs.saturating_mul(1000))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_status_is_read_from_the_bracketed_tail() {
        assert_eq!(
            error_status("[API Error: exhausted (Status: RESOURCE_EXHAUSTED)]"),
            Some("RESOURCE_EXHAUSTED")
        );
        assert_eq!(error_status("[API Error: boom]"), None);
        assert!(is_limit("[API Error: x (Status: RESOURCE_EXHAUSTED)]"));
        assert!(is_limit("You exceeded your current quota."));
        assert!(!is_limit(
            "[API Error: bad request (Status: INVALID_ARGUMENT)]"
        ));
        assert_eq!(
            quota_reset("Your quota will reset after 2h13m5s.", Some(0)).as_deref(),
            Some("1970-01-01T02:13:05.000Z")
        );
        assert_eq!(
            quota_reset("Please wait and try again later.", Some(0)),
            None
        );
    }
}
