//! The agents' own hooks (shared/docs/transcript-formats.md, Part F.5), as `baton hook`
//! hands them to the daemon: Claude Code's `Notification`, `PermissionRequest`, `Stop`,
//! `UserPromptSubmit` and `PostToolUse` hooks, Codex's hooks (same event names) and its
//! legacy `notify` program (`agent-turn-complete`), and Gemini CLI's `Notification`
//! (`ToolPermission`), `AfterAgent`, `BeforeAgent` and `AfterTool` hooks (its transcript
//! writes a pending tool approval only once it is answered, and no end of turn). The input is untrusted: only the
//! fields below are read, from the parsed JSON, and what is not understood is no signal.

use crate::model::ProviderKind;
use crate::provider::signal::{SessionRef, Signal, SignalKind, SignalSource};
use serde::{Deserialize, Serialize};

/// The most of a hook's input `baton hook` reads and the daemon takes.
pub const MAX_HOOK_INPUT: usize = 256 * 1024;

#[derive(Deserialize, Serialize)]
struct Raw {
    #[serde(skip_serializing_if = "Option::is_none")]
    hook_event_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notification_type: Option<String>,
    /// A `Notification`'s text ("Claude needs your permission to use Bash").
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// Codex's legacy `notify` payload.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(rename = "thread-id", skip_serializing_if = "Option::is_none")]
    thread_id: Option<String>,
}

/// The longest field `slim` keeps.
const SLIM_FIELD: usize = 512;

/// A hook's input cut down to the fields read here, each at most [`SLIM_FIELD`] bytes,
/// so it fits one socket request whatever else the agent sent (a `Stop` hook carries
/// the whole last answer). `None` when it is not a JSON object.
pub fn slim(input: &[u8]) -> Option<serde_json::Value> {
    if input.len() > MAX_HOOK_INPUT {
        return None;
    }
    let mut raw: Raw = serde_json::from_slice(input).ok()?;
    for f in [
        &mut raw.hook_event_name,
        &mut raw.session_id,
        &mut raw.notification_type,
        &mut raw.message,
        &mut raw.kind,
        &mut raw.thread_id,
    ] {
        if let Some(v) = f.as_mut()
            && v.len() > SLIM_FIELD
        {
            let mut end = SLIM_FIELD;
            while !v.is_char_boundary(end) {
                end -= 1;
            }
            v.truncate(end);
        }
    }
    serde_json::to_value(raw).ok()
}

/// The signal a hook's input gives for `provider`'s session, if any.
pub fn parse(provider: ProviderKind, input: &[u8]) -> Option<Signal> {
    if input.len() > MAX_HOOK_INPUT {
        return None;
    }
    let raw: Raw = serde_json::from_slice(input).ok()?;
    let message = raw.message.clone().filter(|m| !m.trim().is_empty());
    let waiting = |reason: &str| SignalKind::Waiting {
        reason: reason.to_owned(),
        message: message.clone(),
    };
    let (session, kind) = match (raw.hook_event_name.as_deref(), raw.kind.as_deref()) {
        (Some(event), _) => {
            let kind = match (event, raw.notification_type.as_deref()) {
                ("Notification", Some("permission_prompt")) => waiting("permission prompt"),
                ("Notification", Some("elicitation_dialog")) => waiting("input needed"),
                ("Notification", Some("idle_prompt")) | ("Stop", _) => SignalKind::Idle,
                ("PermissionRequest", _) => match provider {
                    ProviderKind::Codex => waiting("approval"),
                    _ => waiting("permission prompt"),
                },
                ("UserPromptSubmit" | "PostToolUse", _) => SignalKind::Busy,
                // Gemini CLI: a tool waits for the person's permission; the agent loop
                // ended its turn; a prompt went in, or a tool came back.
                ("Notification", Some("ToolPermission")) => waiting("permission prompt"),
                ("AfterAgent", _) => SignalKind::Idle,
                ("BeforeAgent" | "AfterTool", _) => SignalKind::Busy,
                _ => return None,
            };
            (raw.session_id?, kind)
        }
        // Codex's legacy notify: the turn ended.
        (None, Some("agent-turn-complete")) => (raw.thread_id?, SignalKind::Idle),
        _ => return None,
    };
    if session.is_empty() || session.len() > 256 {
        return None;
    }
    Some(Signal {
        provider,
        session: SessionRef::Id(session),
        kind,
        source: SignalSource::Hook,
        name: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(p: ProviderKind, s: &str) -> Option<SignalKind> {
        parse(p, s.as_bytes()).map(|s| s.kind)
    }

    #[test]
    fn gemini_hooks() {
        let g = ProviderKind::Gemini;
        let base = r#""session_id":"g1","transcript_path":"/h/.gemini/tmp/app/chats/session-x.jsonl","cwd":"/w/app","timestamp":"2026-11-20T10:00:00Z""#;
        let permission = format!(
            r#"{{{base},"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Allow run_shell_command: npm test?","details":{{"tool":"run_shell_command"}}}}"#
        );
        let s = parse(g, permission.as_bytes()).unwrap();
        assert_eq!(s.provider, g);
        assert_eq!(s.session, SessionRef::Id("g1".to_owned()));
        assert_eq!(
            s.kind,
            SignalKind::Waiting {
                reason: "permission prompt".to_owned(),
                message: Some("Allow run_shell_command: npm test?".to_owned())
            }
        );
        let after = format!(
            r#"{{{base},"hook_event_name":"AfterAgent","prompt":"fix it","prompt_response":"Fixed.","stop_hook_active":false}}"#
        );
        assert_eq!(kind(g, &after), Some(SignalKind::Idle));
        for busy in ["BeforeAgent", "AfterTool"] {
            let ev = format!(r#"{{{base},"hook_event_name":"{busy}"}}"#);
            assert_eq!(kind(g, &ev), Some(SignalKind::Busy), "{busy}");
        }
        let other = format!(r#"{{{base},"hook_event_name":"PreCompress","trigger":"auto"}}"#);
        assert_eq!(kind(g, &other), None);
    }

    #[test]
    fn claude_hooks() {
        let c = ProviderKind::Claude;
        assert_eq!(
            kind(
                c,
                r#"{"hook_event_name":"Notification","notification_type":"permission_prompt","session_id":"s1","cwd":"/x","transcript_path":"/x/s1.jsonl","message":"Claude needs your permission to use Bash"}"#
            ),
            Some(SignalKind::Waiting {
                reason: "permission prompt".into(),
                message: Some("Claude needs your permission to use Bash".into())
            })
        );
        assert_eq!(
            kind(
                c,
                r#"{"hook_event_name":"Stop","session_id":"s1","stop_hook_active":false}"#
            ),
            Some(SignalKind::Idle)
        );
        assert_eq!(
            kind(c, r#"{"hook_event_name":"PreToolUse","session_id":"s1"}"#),
            None
        );
        assert_eq!(kind(c, r#"{"hook_event_name":"Stop"}"#), None);
        assert_eq!(kind(c, "not json"), None);
    }

    #[test]
    fn slim_keeps_what_is_read_and_fits_a_request() {
        let long = "x".repeat(100_000);
        let input = serde_json::json!({"hook_event_name": "Stop", "session_id": "s1",
            "last_assistant_message": long, "message": "é".repeat(1000)});
        let v = slim(input.to_string().as_bytes()).unwrap();
        assert!(v.to_string().len() < 2048);
        assert!(v.get("last_assistant_message").is_none());
        let again = parse(ProviderKind::Claude, v.to_string().as_bytes()).unwrap();
        assert_eq!(again.kind, SignalKind::Idle);
        assert!(slim(b"[1,2]").is_none());
    }

    #[test]
    fn codex_notify_and_hooks() {
        let x = ProviderKind::Codex;
        let s = parse(
            x,
            br#"{"type":"agent-turn-complete","thread-id":"0199-abc","turn-id":"1","last-assistant-message":"done"}"#,
        )
        .unwrap();
        assert_eq!(s.session, SessionRef::Id("0199-abc".into()));
        assert_eq!(s.kind, SignalKind::Idle);
        assert_eq!(
            kind(
                x,
                r#"{"hook_event_name":"PermissionRequest","session_id":"t"}"#
            ),
            Some(SignalKind::Waiting {
                reason: "approval".into(),
                message: None
            })
        );
    }
}
