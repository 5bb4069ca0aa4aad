//! Pi coding agent sessions (`~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl`),
//! session format v3. Sources: badlogic/pi-mono `packages/coding-agent/docs/session.md`
//! and `src/session-manager.ts`; a real v3 file in shared/corpus/pi.
//!
//! Pi writes whole messages, and every assistant message says why it stopped
//! (`stopReason`): `stop` and `length` hand the turn back, `toolUse` goes on, `error` and
//! `aborted` end it badly. So each outcome is exact, with no quiet period.
//!
//! Oh My Pi, a fork, writes the same format with records of its own (see `omp.rs` for
//! its sources): a subagent's turn ends with its `yield` result, a process exit in the
//! middle of a turn ends that turn as interrupted, typed-ahead input (`steering`) stays
//! in the running turn, and `developer` messages, `title`, `session_init`,
//! `credential_pin` and the other `custom` records start or end nothing.

mod descriptor;
mod facts;
use super::content::StrOrList;
use super::omp::{self, YieldDetails, YieldEnd};
use super::{
    Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem,
};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
pub use descriptor::Pi;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::Path;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    /// Read by `check` only: the link that chains entries.
    #[serde(rename = "parentId", borrow)]
    pub(crate) parent: Option<Cow<'a, str>>,
    #[serde(borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) message: Option<Msg<'a>>,
    /// `compaction` entries: tokens before compacting.
    #[serde(rename = "tokensBefore")]
    tokens_before: Option<u64>,
    /// Oh My Pi's `custom` records: which one.
    #[serde(rename = "customType", borrow)]
    custom_type: Option<Cow<'a, str>>,
    /// The header's working directory.
    #[serde(borrow)]
    cwd: Option<super::content::AnyText<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct Msg<'a> {
    #[serde(borrow)]
    pub(crate) role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) content: Option<StrOrList<'a, Block<'a>>>,
    #[serde(rename = "stopReason", borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(rename = "errorMessage", borrow)]
    error_message: Option<Cow<'a, str>>,
    #[serde(rename = "toolCallId", borrow)]
    pub(crate) tool_call_id: Option<Cow<'a, str>>,
    #[serde(rename = "toolName", borrow)]
    tool_name: Option<Cow<'a, str>>,
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    details: Option<YieldDetails>,
    /// Oh My Pi: a user message typed while the agent worked, delivered into its run.
    steering: Option<bool>,
}

#[derive(Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
}

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct PiProjector {
    /// From the header's `id`, else the file name's `<uuid>` part.
    session: String,
    /// Whether a turn is running: a prompt came and no answer, error or abort ended it
    /// (a tool result after an error or an abort does not reopen it).
    #[serde(default)]
    open: bool,
    /// Oh My Pi: the subagent handed its result back with `yield`; what its run writes
    /// after that is no new work.
    #[serde(default)]
    yielded: bool,
    /// The last text the assistant wrote in the running turn: a `yield` hands it back.
    #[serde(default)]
    last_text: Option<String>,
    /// Oh My Pi: the file is a subagent's (it has a `session_init`), whose prompt is the
    /// task its parent gave it.
    #[serde(default)]
    subagent: bool,
    /// The header's `cwd`, until an observation carries it.
    #[serde(default)]
    start_dir: Option<String>,
}

impl PiProjector {
    pub fn new(path: &Path) -> Self {
        let stem = file_stem(path);
        let session = stem
            .rsplit_once('_')
            .map_or(stem.as_str(), |(_, id)| id)
            .to_owned();
        PiProjector {
            session,
            open: false,
            yielded: false,
            last_text: None,
            subagent: false,
            start_dir: None,
        }
    }

    fn message(&mut self, rec_id: &str, msg: &Msg<'_>, kinds: &mut Vec<ObsKind>) {
        let blocks: &[Block<'_>] = match &msg.content {
            Some(StrOrList::List(b)) => b,
            _ => &[],
        };
        match msg.role.as_deref() {
            Some("user") if msg.steering == Some(true) && self.open => kinds.push(ObsKind::Work),
            Some("user") => {
                self.open = true;
                self.yielded = false;
                self.last_text = None;
                let (initiator, origin) = if self.subagent {
                    (Initiator::Agent, None)
                } else {
                    (Initiator::Human, Some(Origin::Human))
                };
                kinds.push(ObsKind::TurnStart {
                    turn: rec_id.to_owned(),
                    initiator,
                    origin,
                });
            }
            Some("assistant") if self.yielded => {}
            Some("assistant") => self.assistant(msg, blocks, kinds),
            Some("toolResult") if self.open => {
                kinds.push(ObsKind::ToolResult {
                    id: msg.tool_call_id.as_deref().unwrap_or_default().to_owned(),
                });
                self.yielded_end(msg, kinds);
            }
            // A result after the turn ended (an aborted call's) ends nothing new;
            // `developer` messages (Oh My Pi's injected context), `bashExecution` (the
            // person ran `!cmd`), `custom`, summaries: no turn state.
            _ => {}
        }
    }

    /// Oh My Pi: a subagent's `yield` result that ends its run ends its turn.
    fn yielded_end(&mut self, msg: &Msg<'_>, kinds: &mut Vec<ObsKind>) {
        let Some(end) =
            omp::yield_end(msg.tool_name.as_deref(), msg.is_error, msg.details.as_ref())
        else {
            return;
        };
        self.open = false;
        self.yielded = true;
        kinds.push(match end {
            YieldEnd::Done => ObsKind::Completed {
                turn: None,
                message: self.last_text.take(),
                evidence: Evidence::ToolEndsTurn,
            },
            YieldEnd::Failed(text) => ObsKind::Failed {
                turn: None,
                reason: "yield_aborted".to_owned(),
                message: clip_message(&text),
                resets_at: None,
            },
        });
    }

    fn assistant(&mut self, msg: &Msg<'_>, blocks: &[Block<'_>], kinds: &mut Vec<ObsKind>) {
        let error = msg.error_message.as_deref().unwrap_or_default();
        let text = match &msg.content {
            Some(StrOrList::Str(s)) => Some(s.as_ref()),
            _ => blocks
                .iter()
                .rev()
                .filter(|b| b.ty.as_deref() == Some("text"))
                .find_map(|b| b.text.as_deref()),
        };
        let stop = msg.stop_reason.as_deref();
        self.open = !matches!(stop, Some("stop" | "length" | "error" | "aborted"));
        match stop {
            Some("stop" | "length") => {
                kinds.push(ObsKind::Final {
                    message: text.and_then(clip_message),
                    confirm: Some(Evidence::StopReason),
                });
            }
            Some("error") => kinds.push(ObsKind::Failed {
                turn: None,
                reason: "error".to_owned(),
                message: clip_message(error),
                resets_at: super::content::reset_hint(error),
            }),
            Some("aborted") => kinds.push(ObsKind::Interrupted {
                turn: None,
                reason: "aborted".to_owned(),
                message: clip_message(error),
            }),
            // `toolUse`, or a stop reason this version does not know: still working.
            _ => {
                if let Some(t) = text.and_then(clip_message) {
                    self.last_text = Some(t);
                }
                let calls = blocks
                    .iter()
                    .filter(|b| b.ty.as_deref() == Some("toolCall"))
                    .map(|b| b.id.as_deref().unwrap_or_default().to_owned());
                if !super::tool_calls(calls, kinds) {
                    kinds.push(ObsKind::Work);
                }
            }
        }
    }

    /// Oh My Pi's `custom` records: a tool starting is work of the running turn, and a
    /// process exit may cut the running turn short.
    fn custom(&mut self, custom: Option<&str>, line: &[u8], kinds: &mut Vec<ObsKind>) {
        match custom {
            Some("tool_execution_start") if self.open => kinds.push(ObsKind::Work),
            Some("session_exit") if self.open => {
                if let Some(reason) = omp::cut_short(line) {
                    self.open = false;
                    kinds.push(ObsKind::Interrupted {
                        turn: None,
                        reason: "session_exit".to_owned(),
                        message: clip_message(&reason),
                    });
                }
            }
            _ => {}
        }
    }
}

impl Projector for PiProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, None)
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        super::parse_record!(rec, kinds, line, Rec<'_>);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        // Entry ids are 8 hex digits, unique within a session only.
        let rec_id = rec.id.as_deref().unwrap_or_default().to_owned();
        let key = if rec_id.is_empty() {
            content_hash(&[self.session.as_bytes(), line])
        } else {
            format!("{}:{rec_id}", self.session)
        };
        match (rec.ty.as_deref(), &rec.message) {
            (Some("session"), _) => {
                if !rec_id.is_empty() {
                    self.session = rec_id;
                }
                self.start_dir = super::content::text_of(rec.cwd.as_ref()).map(str::to_owned);
                return Ok(());
            }
            (Some("message"), Some(msg)) => {
                let turn = if rec_id.is_empty() {
                    key.clone()
                } else {
                    rec_id
                };
                self.message(&turn, msg, &mut kinds);
            }
            (Some("compaction"), _) => kinds.push(ObsKind::Compacted {
                pre_tokens: rec.tokens_before,
            }),
            (Some("custom"), _) => self.custom(rec.custom_type.as_deref(), line, &mut kinds),
            (Some("session_init"), _) => self.subagent = true,
            // model_change, thinking_level_change, label, session_info; Oh My Pi's
            // title, session_init, credential_pin, model_usage, mode_change.
            _ => {}
        }
        super::with_start_dir(&mut self.start_dir, &mut kinds);
        for kind in kinds {
            out.push(self.obs(key.clone(), record_ts, kind));
        }
        Ok(())
    }

    fn oversized(&mut self, head: &[u8], _tail: &[u8], key: String, out: &mut Vec<Obs>) {
        // `timestamp` is the fourth key of a message entry: the head keeps the clock.
        out.push(self.obs(key, super::head_time(head), ObsKind::Work));
    }

    super::saved_whole!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lines: &[&str]) -> Vec<ObsKind> {
        let mut p = PiProjector::new(Path::new("/s/--w--/2026-01-01T00-00-00-000Z_abc.jsonl"));
        let mut out = Vec::new();
        for l in lines {
            p.project(l.as_bytes(), &mut out).unwrap();
        }
        out.into_iter().map(|o| o.kind).collect()
    }

    #[test]
    fn session_from_file_name_then_header() {
        let p = PiProjector::new(Path::new("/s/--w--/2026-01-01T00-00-00-000Z_abc.jsonl"));
        assert_eq!(p.session, "abc");
        let mut p = p;
        let mut out = Vec::new();
        p.project(
            br#"{"type":"session","version":3,"id":"u-1","cwd":"/w"}"#,
            &mut out,
        )
        .unwrap();
        assert!(out.is_empty());
        assert_eq!(p.session, "u-1");
    }

    #[test]
    fn after_a_terminal_yield_the_run_writes_no_new_work() {
        let kinds = run(&[
            r#"{"type":"session_init","id":"i","task":"look","tools":["yield"]}"#,
            r#"{"type":"message","id":"u","message":{"role":"user","content":"look"}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"Seen."},{"type":"toolCall","id":"y1","name":"yield"}],"stopReason":"toolUse"}}"#,
            r#"{"type":"message","id":"r","message":{"role":"toolResult","toolCallId":"y1","toolName":"yield","details":{"status":"success","data":1},"isError":false}}"#,
            r#"{"type":"message","id":"b","message":{"role":"assistant","content":"late","stopReason":"stop"}}"#,
            r#"{"type":"custom","id":"x","customType":"session_exit","data":{"reason":"SIGINT","kind":"signal","recordedAt":"t"}}"#,
        ]);
        assert!(matches!(
            &kinds[0],
            ObsKind::TurnStart {
                initiator: Initiator::Agent,
                origin: None,
                ..
            }
        ));
        assert!(matches!(
            &kinds[3],
            ObsKind::Completed { message, evidence: Evidence::ToolEndsTurn, .. }
                if message.as_deref() == Some("Seen.")
        ));
        assert_eq!(kinds.len(), 4, "{kinds:?}");
    }

    #[test]
    fn stop_reasons() {
        let kinds = run(&[
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1"}],"stopReason":"toolUse"}}"#,
            r#"{"type":"message","id":"b","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded"}}"#,
            r#"{"type":"message","id":"c","message":{"role":"assistant","content":"hi","stopReason":"length"}}"#,
        ]);
        assert!(matches!(&kinds[0], ObsKind::ToolCall { id, .. } if id == "c1"));
        assert!(
            matches!(&kinds[1], ObsKind::Failed { reason, message, .. } if reason == "error" && message.as_deref() == Some("529 overloaded"))
        );
        assert!(
            matches!(&kinds[2], ObsKind::Final { message, confirm: Some(Evidence::StopReason) } if message.as_deref() == Some("hi"))
        );
    }
}
