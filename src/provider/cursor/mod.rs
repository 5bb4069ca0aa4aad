//! Cursor agent transcripts (IDE agent and `cursor-agent` CLI):
//! `~/.cursor/projects/<slug>/agent-transcripts/<id>/<id>.jsonl`, subagents at
//! `<id>/subagents/<sub>.jsonl`. No real file is public; the shapes come from other tools'
//! parsers (docs.rs `ctx-agent` `ctx::surface::cursor`; getagentseal/codeburn
//! `docs/providers/cursor-agent.md`; cristicretu/diri pull request 156).
//!
//! Lines are `{"role":"user"|"assistant","message":{"content":[text|tool_use]}}`, one per
//! assistant block, and newer builds add `{"type":"turn_ended","status":…,"error":…}` after
//! every turn. No timestamps, ids or tool results are written: records have no time of
//! their own, turns are numbered in file order, and keys hash the bytes.

mod descriptor;
use super::content::StrOrList;
use super::{
    Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem,
};
use crate::model::clip_message;
pub use descriptor::Cursor;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::Path;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Msg<'a>>,
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow)]
    error: Option<StrOrList<'a, serde::de::IgnoredAny>>,
}

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    content: Option<StrOrList<'a, Block<'a>>>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
}

/// What Cursor writes when the person stops a turn.
const ABORTED: &str = "user aborted request";

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct CursorProjector {
    session: String,
    agent: Option<String>,
    /// Prompts so far: turn ids are `#<n>` (the file has no ids).
    ordinal: u64,
    /// Records since the last prompt, so identical lines in one turn get distinct keys.
    seq: u64,
    /// The file has shown a `turn_ended`: only that record ends a turn, and assistant text
    /// is no completion candidate. Older files have none and settle on quiet.
    has_turn_ended: bool,
    /// The last assistant text of the open turn (the completion's message).
    last_text: Option<String>,
}

impl CursorProjector {
    pub fn new(path: &Path) -> Self {
        let stem = file_stem(path);
        let (session, agent) = match super::subagents_session(path) {
            Some(parent) => (parent, Some(stem)),
            None => (stem, None),
        };
        CursorProjector {
            session,
            agent,
            ordinal: 0,
            seq: 0,
            has_turn_ended: false,
            last_text: None,
        }
    }

    fn user(&mut self, blocks: &[Block<'_>], text: &str, kinds: &mut Vec<ObsKind>) {
        if text.trim().is_empty() && blocks.is_empty() {
            return;
        }
        self.ordinal += 1;
        self.seq = 0;
        self.last_text = None;
        kinds.push(ObsKind::TurnStart {
            turn: format!("#{}", self.ordinal),
            initiator: if self.agent.is_some() {
                Initiator::Agent
            } else {
                Initiator::Human
            },
            origin: self.agent.is_none().then_some(Origin::Human),
        });
    }

    fn assistant(&mut self, blocks: &[Block<'_>], text: &str, kinds: &mut Vec<ObsKind>) {
        let mut called = false;
        for (i, b) in blocks
            .iter()
            .filter(|b| b.ty.as_deref() == Some("tool_use"))
            .enumerate()
        {
            called = true;
            let id = b.id.as_deref().map_or_else(
                || format!("#{}.{}.{i}", self.ordinal, self.seq),
                str::to_owned,
            );
            kinds.push(ObsKind::ToolCall {
                id,
                needs_input: None,
                message: None,
            });
        }
        if called {
            return;
        }
        if !text.trim().is_empty() {
            self.last_text = clip_message(text);
        }
        if self.has_turn_ended {
            kinds.push(ObsKind::Work);
        } else {
            kinds.push(ObsKind::Final {
                message: clip_message(text),
                confirm: None,
            });
        }
    }

    fn turn_ended(&mut self, status: Option<&str>, error: &str, kinds: &mut Vec<ObsKind>) {
        self.has_turn_ended = true;
        let message = self.last_text.take();
        match status {
            Some("success") => kinds.push(ObsKind::Completed {
                turn: None,
                message,
                evidence: Evidence::TurnEnded,
            }),
            _ if is_abort(error) => kinds.push(ObsKind::Interrupted {
                turn: None,
                reason: "aborted".to_owned(),
                message: clip_message(error),
            }),
            Some("aborted" | "cancelled") => kinds.push(ObsKind::Interrupted {
                turn: None,
                reason: "aborted".to_owned(),
                message: clip_message(error),
            }),
            other => kinds.push(ObsKind::Failed {
                turn: None,
                reason: other.unwrap_or("error").to_owned(),
                message: clip_message(error),
                resets_at: super::content::reset_hint(error),
            }),
        }
    }
}

/// Whether `path` may be a transcript: under Cursor's own `projects` folder (the default
/// root) only files below an `agent-transcripts` folder are; elsewhere (a `--watch`
/// folder of its own) every JSONL file is.
pub fn is_transcript(path: &Path) -> bool {
    let under = |name: &str| {
        path.ancestors()
            .skip(1)
            .any(|a| a.file_name().is_some_and(|n| n == name))
    };
    let in_cursor_projects = path.ancestors().skip(1).any(|a| {
        a.file_name().is_some_and(|n| n == "projects")
            && a.parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == ".cursor")
    });
    !in_cursor_projects || under("agent-transcripts")
}

fn is_abort(text: &str) -> bool {
    let t = text.trim().trim_end_matches('.');
    t.len() < 64 && t.to_ascii_lowercase().contains(ABORTED)
}

/// Text blocks joined, and the blocks.
fn content<'m, 'a>(msg: Option<&'m Msg<'a>>) -> (&'m [Block<'a>], String) {
    super::content::blocks_and_text(msg.and_then(|m| m.content.as_ref()), |b| {
        b.text
            .as_deref()
            .filter(|_| b.ty.as_deref() == Some("text"))
    })
}

impl Projector for CursorProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, self.agent.as_deref())
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        super::parse_record!(rec, kinds, line, Rec<'_>);
        let (blocks, text) = content(rec.message.as_ref());
        match (rec.ty.as_deref(), rec.role.as_deref()) {
            (Some("turn_ended"), _) => {
                let error = match &rec.error {
                    Some(StrOrList::Str(s)) => s.as_ref(),
                    _ => "",
                };
                self.turn_ended(rec.status.as_deref(), error, &mut kinds);
            }
            // An abort said in the user's or the assistant's words ends the turn alike.
            (_, Some("user" | "assistant")) if is_abort(&text) => {
                kinds.push(ObsKind::Interrupted {
                    turn: None,
                    reason: "aborted".to_owned(),
                    message: None,
                });
            }
            (_, Some("user")) => self.user(blocks, &text, &mut kinds),
            (_, Some("assistant")) => self.assistant(blocks, &text, &mut kinds),
            _ => {}
        }
        // No ids and no times: the key is the bytes in their place in the turn, which a
        // re-read from the first byte computes again.
        self.seq += 1;
        let key = content_hash(&[
            self.session.as_bytes(),
            self.agent.as_deref().unwrap_or_default().as_bytes(),
            &self.ordinal.to_le_bytes(),
            &self.seq.to_le_bytes(),
            line,
        ]);
        for kind in kinds {
            out.push(self.obs(key.clone(), None, kind));
        }
        Ok(())
    }

    super::saved_whole!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_from_the_path() {
        let p = CursorProjector::new(Path::new("/p/x/agent-transcripts/abc/abc.jsonl"));
        assert_eq!((p.session.as_str(), p.agent.as_deref()), ("abc", None));
        let p = CursorProjector::new(Path::new("/p/x/agent-transcripts/abc/subagents/s1.jsonl"));
        assert_eq!(
            (p.session.as_str(), p.agent.as_deref()),
            ("abc", Some("s1"))
        );
    }

    #[test]
    fn transcripts_under_cursor_projects() {
        let t = |p: &str| is_transcript(Path::new(p));
        assert!(t("/h/.cursor/projects/x/agent-transcripts/a/a.jsonl"));
        assert!(!t("/h/.cursor/projects/x/terminals/a.jsonl"));
        assert!(t("/elsewhere/a.jsonl"));
    }

    #[test]
    fn abort_text() {
        assert!(is_abort("User aborted request."));
        assert!(is_abort("  user aborted request "));
        assert!(!is_abort(
            "The user aborted request handling in the retry loop, so I changed it"
        ));
    }
}
