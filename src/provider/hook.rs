//! The agents' own hooks (shared/docs/transcript-formats.md, Part F.5), as `baton hook`
//! hands them to the daemon: Claude Code's `Notification`, `PermissionRequest`, `Stop`,
//! `UserPromptSubmit` and `PostToolUse` hooks, Codex's hooks (same event names) and its
//! legacy `notify` program (`agent-turn-complete`). The input is untrusted: only the
//! fields below are read, from the parsed JSON, and what is not understood is no signal.

use crate::model::ProviderKind;
use crate::provider::signal::{SessionRef, Signal, SignalKind, SignalSource};
use serde::Deserialize;

/// The most of a hook's input `baton hook` reads and the daemon takes.
pub const MAX_HOOK_INPUT: usize = 256 * 1024;

#[derive(Deserialize)]
struct Raw {
    hook_event_name: Option<String>,
    session_id: Option<String>,
    notification_type: Option<String>,
    /// Codex's legacy `notify` payload.
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "thread-id")]
    thread_id: Option<String>,
}

/// The signal a hook's input gives for `provider`'s session, if any.
pub fn parse(provider: ProviderKind, input: &[u8]) -> Option<Signal> {
    if input.len() > MAX_HOOK_INPUT {
        return None;
    }
    let raw: Raw = serde_json::from_slice(input).ok()?;
    let waiting = |reason: &str| SignalKind::Waiting {
        reason: reason.to_owned(),
        message: None,
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(p: ProviderKind, s: &str) -> Option<SignalKind> {
        parse(p, s.as_bytes()).map(|s| s.kind)
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
                message: None
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
