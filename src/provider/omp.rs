//! Oh My Pi (`omp`, a fork of Pi): what its session files hold beyond Pi's v3 records.
//! The files are Pi's format (a `session` header, then `message` entries with the same
//! roles and `stopReason`s), so they are read by the Pi projector, as `provider: "pi"`;
//! this module reads only the fork's own records. Sources, from its public source code
//! (can1357/oh-my-pi):
//!
//! - `packages/coding-agent/src/session/session-entries.ts` @ 01d016cac40ff3e15df51753e62af8b85e9fcf77:
//!   the record types `title` (a fixed-width 256-byte first-line slot holding the
//!   session's title, rewritten in place), `session_init` (a subagent's initial context),
//!   `credential_pin`, `custom` (`customType`, `data`), `model_usage`, `mode_change`, …
//! - `packages/coding-agent/src/session/exit-diagnostics.ts` @ 597ed2b26f9f645d2fdb9047090e8b253b5e87dd:
//!   `custom` records `tool_execution_start` (written as a tool starts running) and
//!   `session_exit` (`data: {reason, kind: normal|signal|fatal|process_exit, recordedAt,
//!   pendingToolCalls?}`, written at process teardown). Its
//!   `createInterruptedTurnAbortMessage` is the fork's own rule for a turn cut short: the
//!   last `session_exit` ends the turn as aborted ("Previous OMP process exited before
//!   completing the turn.") when its kind is not `normal` or it lists pending tool calls,
//!   and the conversation's tail is not terminal (not an answer without tool calls, not
//!   a tool result after an `error`/`aborted` answer).
//! - `packages/coding-agent/src/tools/yield.ts` @ 113208bf0557414045bd945df3a26d274ed321a7:
//!   a subagent hands its result back with the `yield` tool. Its `shouldTerminate` ends
//!   the subagent at a `yield` result that is not an error, unless it is an incremental
//!   one (`details.status` `success` with a non-empty array `details.type`); a result
//!   with `status:"aborted"` reports a failure.
//! - `packages/ai/src/types.ts` @ f56f4f749229d74305753a3c01f580bf03eb172c: a
//!   `UserMessage` may carry `steering: true` (typed while the agent worked and injected
//!   into its running turn), `synthetic` and `attribution`; `developer` is a role of its
//!   own (injected context, never a prompt).
//! - `packages/utils/src/dirs.ts` @ 0a6b4644b453d19908ecb7557ca77ccb2ed568e3: sessions live
//!   in `~/.omp/agent/sessions` (`PI_CONFIG_DIR`, `PI_CODING_AGENT_DIR`;
//!   `$XDG_DATA_HOME/omp/sessions` after `omp config migrate`).

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;

/// What a `yield` tool result's `details` say, read without keeping its `data` (the
/// subagent's whole result).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct YieldDetails {
    present: bool,
    status: Option<String>,
    /// A non-empty array `type`: an incremental section, not the end.
    incremental: bool,
    error: Option<String>,
}

/// A string, a list of strings, or anything else.
#[derive(Deserialize)]
#[serde(untagged)]
enum Field<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    List(#[serde(borrow)] Vec<Cow<'a, str>>),
    Other(IgnoredAny),
}

impl<'de> Deserialize<'de> for YieldDetails {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = YieldDetails;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tool result details")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<YieldDetails, A::Error> {
                let mut out = YieldDetails {
                    present: true,
                    ..YieldDetails::default()
                };
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    match k.as_ref() {
                        "status" | "type" | "error" => {
                            let v = m.next_value::<Field<'de>>()?;
                            match (k.as_ref(), v) {
                                ("status", Field::Text(s)) => out.status = Some(s.into_owned()),
                                ("error", Field::Text(s)) => out.error = Some(s.into_owned()),
                                ("type", Field::List(l)) => out.incremental = !l.is_empty(),
                                _ => {}
                            }
                        }
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
            // Anything but an object: as if there were no details.
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<YieldDetails, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(YieldDetails::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<YieldDetails, E> {
                Ok(YieldDetails::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<YieldDetails, E> {
                Ok(YieldDetails::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<YieldDetails, E> {
                Ok(YieldDetails::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<YieldDetails, E> {
                Ok(YieldDetails::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<YieldDetails, E> {
                Ok(YieldDetails::default())
            }
            fn visit_unit<E>(self) -> Result<YieldDetails, E> {
                Ok(YieldDetails::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// How a subagent's `yield` result ends its turn, if it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum YieldEnd {
    /// The result was handed back.
    Done,
    /// The subagent reported a failure (`{"result":{"error":…}}`), with its text.
    Failed(String),
}

/// The `yield` tool's `shouldTerminate`, for a tool result of `tool` with `is_error`.
pub(crate) fn yield_end(
    tool: Option<&str>,
    is_error: Option<bool>,
    details: Option<&YieldDetails>,
) -> Option<YieldEnd> {
    if tool != Some("yield") || is_error == Some(true) {
        return None;
    }
    let Some(d) = details.filter(|d| d.present) else {
        return Some(YieldEnd::Done);
    };
    match d.status.as_deref() {
        Some("success") if d.incremental => None,
        Some("aborted") => Some(YieldEnd::Failed(d.error.clone().unwrap_or_default())),
        _ => Some(YieldEnd::Done),
    }
}

#[derive(Deserialize)]
struct ExitRec<'a> {
    #[serde(borrow)]
    data: Option<ExitData<'a>>,
}

#[derive(Deserialize)]
struct ExitData<'a> {
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
    #[serde(rename = "pendingToolCalls")]
    pending: Option<Vec<IgnoredAny>>,
}

/// A `session_exit` that cuts an unfinished turn short, by the fork's own rule: its
/// teardown reason. `None` for a normal exit with no tool call pending, or a record the
/// fork itself would not read as an exit.
pub(crate) fn cut_short(line: &[u8]) -> Option<String> {
    let rec: ExitRec<'_> = serde_json::from_slice(line).ok()?;
    let d = rec.data?;
    let kind = d.kind.as_deref()?;
    if !matches!(kind, "normal" | "signal" | "fatal" | "process_exit") {
        return None;
    }
    let pending = d.pending.as_ref().is_some_and(|p| !p.is_empty());
    (kind != "normal" || pending).then(|| d.reason.as_deref().unwrap_or(kind).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn details(json: &str) -> YieldDetails {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn yield_ends_unless_incremental_or_an_error() {
        let done = details(r#"{"data":{"x":[1,2]},"status":"success"}"#);
        assert_eq!(
            yield_end(Some("yield"), Some(false), Some(&done)),
            Some(YieldEnd::Done)
        );
        let typed = details(r#"{"status":"success","type":"result","useLastTurn":true}"#);
        assert_eq!(
            yield_end(Some("yield"), None, Some(&typed)),
            Some(YieldEnd::Done)
        );
        let section = details(r#"{"data":{},"status":"success","type":["findings"]}"#);
        assert_eq!(yield_end(Some("yield"), Some(false), Some(&section)), None);
        let failed = details(r#"{"status":"aborted","error":"no access"}"#);
        assert_eq!(
            yield_end(Some("yield"), Some(false), Some(&failed)),
            Some(YieldEnd::Failed("no access".into()))
        );
        assert_eq!(yield_end(Some("yield"), Some(true), Some(&done)), None);
        assert_eq!(yield_end(Some("bash"), Some(false), Some(&done)), None);
        // No details, or details that are no object: the tool's rule ends the run.
        assert_eq!(yield_end(Some("yield"), None, None), Some(YieldEnd::Done));
        let odd = details(r#""text""#);
        assert_eq!(
            yield_end(Some("yield"), None, Some(&odd)),
            Some(YieldEnd::Done)
        );
    }

    #[test]
    fn session_exit_cuts_short_only_when_the_fork_says_so() {
        let exit = |data: &str| {
            cut_short(
                format!(r#"{{"type":"custom","customType":"session_exit","data":{data}}}"#)
                    .as_bytes(),
            )
        };
        assert_eq!(
            exit(r#"{"reason":"SIGTERM","kind":"signal","recordedAt":"t"}"#).as_deref(),
            Some("SIGTERM")
        );
        assert_eq!(
            exit(r#"{"reason":"dispose","kind":"normal","recordedAt":"t"}"#),
            None
        );
        assert_eq!(
            exit(r#"{"reason":"quit","kind":"normal","recordedAt":"t","pendingToolCalls":[{"toolName":"bash"}]}"#)
                .as_deref(),
            Some("quit")
        );
        assert_eq!(exit(r#"{"reason":"completed","kind":"subagent"}"#), None);
        assert_eq!(exit(r#""gone""#), None);
    }
}
