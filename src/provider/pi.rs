//! Pi coding agent sessions (`~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl`),
//! session format v3. Sources: badlogic/pi-mono `packages/coding-agent/docs/session.md`
//! and `src/session-manager.ts`; a real v3 file in shared/corpus/pi.
//!
//! Pi writes whole messages, and every assistant message says why it stopped
//! (`stopReason`): `stop` and `length` hand the turn back, `toolUse` goes on, `error` and
//! `aborted` end it badly. So each outcome is exact, with no quiet period.

use super::content::StrOrList;
use super::{
    Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem,
    parse_line,
};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
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
}

impl PiProjector {
    pub fn new(path: &Path) -> Self {
        let stem = file_stem(path);
        let session = stem
            .rsplit_once('_')
            .map_or(stem.as_str(), |(_, id)| id)
            .to_owned();
        PiProjector { session }
    }

    fn message(&self, rec_id: &str, msg: &Msg<'_>, kinds: &mut Vec<ObsKind>) {
        let blocks: &[Block<'_>] = match &msg.content {
            Some(StrOrList::List(b)) => b,
            _ => &[],
        };
        match msg.role.as_deref() {
            Some("user") => kinds.push(ObsKind::TurnStart {
                turn: rec_id.to_owned(),
                initiator: Initiator::Human,
                origin: Some(Origin::Human),
            }),
            Some("assistant") => self.assistant(msg, blocks, kinds),
            Some("toolResult") => kinds.push(ObsKind::ToolResult {
                id: msg.tool_call_id.as_deref().unwrap_or_default().to_owned(),
            }),
            // `bashExecution` (the person ran `!cmd`), `custom`, summaries: no turn state.
            _ => {}
        }
    }

    fn assistant(&self, msg: &Msg<'_>, blocks: &[Block<'_>], kinds: &mut Vec<ObsKind>) {
        let error = msg.error_message.as_deref().unwrap_or_default();
        match msg.stop_reason.as_deref() {
            Some("stop" | "length") => {
                let text = match &msg.content {
                    Some(StrOrList::Str(s)) => Some(s.as_ref()),
                    _ => blocks
                        .iter()
                        .rev()
                        .filter(|b| b.ty.as_deref() == Some("text"))
                        .find_map(|b| b.text.as_deref()),
                };
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
                let mut called = false;
                for b in blocks
                    .iter()
                    .filter(|b| b.ty.as_deref() == Some("toolCall"))
                {
                    called = true;
                    kinds.push(ObsKind::ToolCall {
                        id: b.id.as_deref().unwrap_or_default().to_owned(),
                        needs_input: None,
                        message: None,
                    });
                }
                if !called {
                    kinds.push(ObsKind::Work);
                }
            }
        }
    }
}

impl Projector for PiProjector {
    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        let buf: Vec<u8>;
        let (rec, repaired) = parse_line!(line, buf, Rec<'_>);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        let mut kinds = Vec::new();
        if let Some(reason) = repaired {
            kinds.push(ObsKind::Anomaly {
                reason: reason.to_owned(),
                message: "line repaired before parsing".to_owned(),
            });
        }
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
            // model_change, thinking_level_change, label, session_info, custom entries.
            _ => {}
        }
        for kind in kinds {
            out.push(self.obs(key.clone(), record_ts, kind));
        }
        Ok(())
    }

    fn oversized(&mut self, head: &[u8], _tail: &[u8], key: String, out: &mut Vec<Obs>) {
        // `timestamp` is the fourth key of a message entry: the head keeps the clock.
        let record_ts = super::raw_str_field(head, "timestamp", false).and_then(parse_rfc3339);
        out.push(self.obs(key, record_ts, ObsKind::Work));
    }

    fn obs(&self, key: String, record_ts: Option<i64>, kind: ObsKind) -> Obs {
        Obs::new(&self.session, None, record_ts, key, kind)
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
