//! Norma transcripts (`<dir>/<sessionID>.jsonl`, subagents at
//! `<dir>/<sessionID>/subagents/agent-<agentID>.jsonl`). Rules: seed 000 §Transcript JSONL,
//! seed 001 §Transcript and §Cold resume.
//!
//! Norma writes whole messages, so an assistant message without a tool call is the end of
//! the agent loop: it completes the turn at once, no quiet period needed.

mod descriptor;
mod facts;
use super::content::StrOrList;
use super::{
    Evidence, Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem,
};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
pub use descriptor::Norma;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::path::Path;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(borrow)]
    pub(crate) uuid: Option<Cow<'a, str>>,
    /// Read by `check` only: the link that chains records.
    #[serde(borrow)]
    pub(crate) parent_uuid: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) agent_id: Option<Cow<'a, str>>,
    pub(crate) is_sidechain: Option<bool>,
    #[serde(borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) message: Option<Msg<'a>>,
    boundary: Option<Boundary>,
}

#[derive(Deserialize)]
pub(crate) struct Msg<'a> {
    #[serde(borrow)]
    pub(crate) role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) content: Option<StrOrList<'a, Block<'a>>>,
}

#[derive(Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) tool_use_id: Option<Cow<'a, str>>,
    /// Tool input (skipped) or, on `compact_boundary`, the boundary meta or a legacy bare
    /// pre-token count.
    input: Option<PreTokens>,
}

#[derive(Deserialize)]
struct Boundary {
    pre_tokens: Option<PreTokens>,
}

/// A token count that may be written as a number, or an object holding `pre_tokens`;
/// anything else reads as unknown rather than failing the line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreTokens(pub Option<u64>);

impl<'de> Deserialize<'de> for PreTokens {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PreTokens;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a token count")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PreTokens, E> {
                Ok(PreTokens(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PreTokens, E> {
                Ok(PreTokens(u64::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<PreTokens, E> {
                // Counts are integers; a float one is only trusted when it is whole.
                let ok = v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9.0e15;
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok(PreTokens(ok.then_some(v as u64)))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<PreTokens, E> {
                Ok(PreTokens(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<PreTokens, E> {
                Ok(PreTokens(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<PreTokens, E> {
                Ok(PreTokens(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<PreTokens, E> {
                Ok(PreTokens(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<PreTokens, D::Error> {
                PreTokens::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PreTokens, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(PreTokens(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PreTokens, A::Error> {
                let mut found = None;
                while let Some(k) = map.next_key::<Cow<'de, str>>()? {
                    if k == "pre_tokens" {
                        found = map.next_value::<PreTokens>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(PreTokens(found))
            }
        }
        d.deserialize_any(V)
    }
}

/// How many distinct disagreeing `session_id` values one file reports before going quiet.
const MISMATCH_REPORTS: usize = 8;

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct NormaProjector {
    /// From the file name: record contents never decide identity (seed 000: `session_id`
    /// is the writer's unvalidated claim).
    session: String,
    /// `Some` for a subagent file: every record belongs to this agent.
    file_agent: Option<String>,
    reported: Vec<String>,
    /// A compaction happened and no assistant message has followed yet: skill messages now
    /// are re-injections (seed 001 §Built-in compaction), not prompts.
    after_compaction: bool,
    /// The previous record was a `boundary` record, so a `compact_boundary` message right
    /// after it is the same compaction.
    prev_boundary: bool,
}

impl NormaProjector {
    pub fn new(path: &Path) -> Self {
        let (session, file_agent) = identity(path);
        NormaProjector {
            session,
            file_agent,
            reported: Vec::new(),
            after_compaction: false,
            prev_boundary: false,
        }
    }

    fn agent_for(&self, rec: &Rec<'_>) -> Option<String> {
        if let Some(a) = &self.file_agent {
            return Some(a.clone());
        }
        if rec.is_sidechain == Some(true) || rec.agent_id.is_some() {
            return Some(
                rec.agent_id
                    .as_deref()
                    .filter(|a| !a.is_empty())
                    .unwrap_or("sidechain")
                    .to_owned(),
            );
        }
        None
    }

    /// A disagreeing `session_id`, reported once per distinct value.
    fn mismatch(&mut self, rec: &Rec<'_>) -> Option<String> {
        let claimed = rec.session_id.as_deref()?;
        let own_agent = self.file_agent.as_deref() == Some(claimed);
        if claimed == self.session || own_agent || self.reported.iter().any(|r| r == claimed) {
            return None;
        }
        if self.reported.len() >= MISMATCH_REPORTS {
            return None;
        }
        self.reported.push(claimed.to_owned());
        let shown = clip_message(claimed).unwrap_or_default();
        Some(format!(
            "record session_id `{shown}` differs from the file's session `{}`",
            self.session
        ))
    }

    fn user(&mut self, blocks: &[Block<'_>], text: &str, uuid: &str, kinds: &mut Vec<ObsKind>) {
        let mut skill = false;
        for b in blocks {
            match b.ty.as_deref() {
                Some("tool_result") => kinds.push(ObsKind::ToolResult {
                    id: b.tool_use_id.as_deref().unwrap_or_default().to_owned(),
                }),
                Some("skill") => skill = true,
                _ => {}
            }
        }
        if skill && self.after_compaction {
            return;
        }
        if !text.trim().is_empty() {
            kinds.push(ObsKind::TurnStart {
                turn: uuid.to_owned(),
                initiator: Initiator::Human,
                origin: Some(Origin::Human),
            });
        }
    }

    fn assistant(&mut self, blocks: &[Block<'_>], text: &str, kinds: &mut Vec<ObsKind>) {
        self.after_compaction = false;
        let calls = blocks
            .iter()
            .filter(|b| b.ty.as_deref() == Some("tool_use"))
            .map(|b| b.id.as_deref().unwrap_or_default().to_owned());
        if !super::tool_calls(calls, kinds) {
            kinds.push(ObsKind::Final {
                message: clip_message(text),
                confirm: Some(Evidence::FinalMessage),
            });
        }
    }
}

/// Session and agent from the path alone.
fn identity(path: &Path) -> (String, Option<String>) {
    let stem = file_stem(path);
    if let Some(agent) = stem.strip_prefix("agent-")
        && let Some(session) = super::subagents_session(path)
    {
        return (session, Some(agent.to_owned()));
    }
    (stem, None)
}

fn compact_tokens(blocks: &[Block<'_>]) -> Option<Option<u64>> {
    blocks
        .iter()
        .find(|b| b.ty.as_deref() == Some("compact_boundary"))
        .map(|b| b.input.and_then(|i| i.0))
}

impl Projector for NormaProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, self.file_agent.as_deref())
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        super::parse_record!(rec, kinds, line, Rec<'_>);
        let key = super::key_or_hash(rec.uuid.as_deref(), line);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        let agent = self.agent_for(&rec);
        if let Some(message) = self.mismatch(&rec) {
            kinds.push(ObsKind::Anomaly {
                reason: "session_mismatch".to_owned(),
                message,
            });
        }
        let was_boundary = std::mem::take(&mut self.prev_boundary);
        match (rec.ty.as_deref(), &rec.message) {
            (Some("boundary"), _) => {
                self.prev_boundary = true;
                self.after_compaction = true;
                kinds.push(ObsKind::Compacted {
                    pre_tokens: rec.boundary.as_ref().and_then(|b| b.pre_tokens?.0),
                });
            }
            (Some("message") | None, Some(msg)) => {
                let (blocks, text) =
                    super::content::blocks_and_text(msg.content.as_ref(), |b: &Block<'_>| {
                        b.text
                            .as_deref()
                            .filter(|_| b.ty.as_deref() == Some("text"))
                    });
                if let Some(pre_tokens) = compact_tokens(blocks) {
                    self.after_compaction = true;
                    if !was_boundary {
                        kinds.push(ObsKind::Compacted { pre_tokens });
                    }
                } else {
                    match msg.role.as_deref() {
                        Some("user") => self.user(blocks, &text, &key, &mut kinds),
                        Some("assistant") => self.assistant(blocks, &text, &mut kinds),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for kind in kinds {
            // Anomalies of one record must not share an event id with each other.
            let key = match &kind {
                ObsKind::Anomaly { reason, .. } => {
                    content_hash(&[reason.as_bytes(), key.as_bytes()])
                }
                _ => key.clone(),
            };
            out.push(Obs {
                session: self.session.clone(),
                agent: agent.clone(),
                record_ts,
                key,
                kind,
            });
        }
        Ok(())
    }

    super::saved_whole!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(path: &str, lines: &[&str]) -> Vec<Obs> {
        let mut p = NormaProjector::new(Path::new(path));
        let mut out = Vec::new();
        for l in lines {
            p.project(l.as_bytes(), &mut out).expect("parses");
        }
        out
    }

    #[test]
    fn identity_comes_from_the_path() {
        assert_eq!(identity(Path::new("/t/s1.jsonl")), ("s1".to_owned(), None));
        assert_eq!(
            identity(Path::new("/t/s1/subagents/agent-a7.jsonl")),
            ("s1".to_owned(), Some("a7".to_owned()))
        );
        // `agent-` outside a subagents dir is just a session named so.
        assert_eq!(
            identity(Path::new("/t/agent-x.jsonl")),
            ("agent-x".to_owned(), None)
        );
    }

    #[test]
    fn compact_boundary_input_forms() {
        let obs = run(
            "/t/s.jsonl",
            &[
                r#"{"uuid":"a","type":"message","message":{"role":"user","content":[{"type":"compact_boundary","input":{"trigger":"auto","pre_tokens":900}}]}}"#,
                r#"{"uuid":"b","type":"message","message":{"role":"user","content":[{"type":"compact_boundary","input":1234}]}}"#,
            ],
        );
        let kinds: Vec<_> = obs.into_iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            vec![
                ObsKind::Compacted {
                    pre_tokens: Some(900)
                },
                ObsKind::Compacted {
                    pre_tokens: Some(1234)
                }
            ]
        );
    }

    #[test]
    fn boundary_then_its_message_is_one_compaction() {
        let obs = run(
            "/t/s.jsonl",
            &[
                r#"{"uuid":"a","type":"boundary","boundary":{"pre_tokens":5}}"#,
                r#"{"uuid":"b","type":"message","message":{"role":"user","content":[{"type":"compact_boundary","input":5}]}}"#,
            ],
        );
        assert_eq!(obs.len(), 1);
    }

    #[test]
    fn skill_reinjection_after_compaction_is_no_prompt() {
        let skill = r#"{"uuid":"s","type":"message","message":{"role":"user","content":[{"type":"skill","name":"x"},{"type":"text","text":"skill body"}]}}"#;
        let before = run("/t/s.jsonl", &[skill]);
        assert!(matches!(before[0].kind, ObsKind::TurnStart { .. }));
        let after = run(
            "/t/s.jsonl",
            &[
                r#"{"uuid":"a","type":"boundary","boundary":{"pre_tokens":5}}"#,
                skill,
            ],
        );
        assert_eq!(after.len(), 1, "{after:?}");
    }

    #[test]
    fn session_mismatch_is_reported_once_per_value() {
        let obs = run(
            "/t/s.jsonl",
            &[
                r#"{"uuid":"a","session_id":"other","type":"message","message":{"role":"assistant","content":[]}}"#,
                r#"{"uuid":"b","session_id":"other","type":"message","message":{"role":"assistant","content":[]}}"#,
                r#"{"uuid":"c","session_id":"s","type":"message","message":{"role":"assistant","content":[]}}"#,
            ],
        );
        let anomalies = obs
            .iter()
            .filter(|o| matches!(&o.kind, ObsKind::Anomaly { reason, .. } if reason == "session_mismatch"))
            .count();
        assert_eq!(anomalies, 1);
    }
}
