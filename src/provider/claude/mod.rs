//! Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl` and subagent
//! files). Rules: shared/docs/transcript-formats.md, Part A and C.

mod descriptor;
mod facts;
pub mod jobs;
pub mod registry;
use super::content::{StrOrList, reset_hint};
use super::{Evidence, Malformed, Obs, ObsKind, Projector, file_stem, parse_line};
use crate::clock::parse_rfc3339;
pub use descriptor::Claude;
pub use descriptor::is_claude;
use lru::LruCache;
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;
use std::path::Path;

mod prompt;
mod record;
mod rules;

use record::Version;
pub(crate) use record::{Block, Rec};

pub(crate) use prompt::may_defer;
use prompt::{Deferred, initiator_of};
pub use rules::KNOWN_TYPES;
pub(crate) use rules::looks_like_uuid;
use rules::{NEEDS_INPUT_TOOLS, TERMINAL_STOPS, push_capped, question_text};

/// Inline sidechain records remembered for chain lookups. A record's parent is almost
/// always a recent record, and `LruCache` allocates its capacity up front for every
/// warm file, so this stays small.
const SIDE_ROOTS: usize = 512;

pub struct ClaudeProjector {
    session: String,
    /// True once the session id is settled (from the path or a first record).
    session_fixed: bool,
    /// `Some` for a subagent file: every record belongs to this agent.
    file_agent: Option<String>,
    helper: bool,
    /// Inline sidechains (≤1.0.x) carry no agent id: follow the parent chain to its root.
    /// Made on the first inline sidechain record: newer files never need it.
    side_roots: Option<LruCache<String, String>>,
    last_caveat: Option<String>,
    /// The file stamps `stop_reason` on every block (a block with no tool call said
    /// `tool_use`): it writes explicit ends, so a text record with a null one is
    /// mid-response, never a final answer.
    explicit_stops: bool,
    /// Whether the session's starting directory was passed on (not saved: the reducer
    /// keeps the first one it is given).
    cwd_sent: bool,
    /// The branch last passed on (not saved: passed on again after a restart, to the
    /// same effect).
    branch_sent: Option<String>,
    /// A user record that is a turn only if the model answers it.
    deferred: Option<Deferred>,
}

/// What [`ClaudeProjector`] keeps between lines (the rest comes from the path).
#[derive(Serialize, Deserialize)]
struct Saved {
    session: String,
    fixed: bool,
    /// Oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    side: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    caveat: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stops: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deferred: Option<Deferred>,
}

fn side_roots() -> LruCache<String, String> {
    LruCache::new(NonZeroUsize::new(SIDE_ROOTS).unwrap_or(NonZeroUsize::MIN))
}

impl ClaudeProjector {
    pub fn new(path: &Path) -> Self {
        let stem = file_stem(path);
        let (file_agent, helper) = match stem.strip_prefix("agent-") {
            Some(id) => (Some(id.to_owned()), id.starts_with("acompact")),
            None => (None, false),
        };
        // The file is the session: a resumed session's file carries copies of earlier
        // records whose `sessionId` is the old session's, and they must not split it.
        // Main files are named `<sessionId>.jsonl`; `<session>/subagents/agent-x.jsonl`
        // names its session two levels up. Otherwise the first `sessionId` decides.
        let named = if file_agent.is_some() {
            super::subagents_session(path)
        } else {
            Some(stem.clone())
        };
        let (session, session_fixed) = match named.filter(|n| looks_like_uuid(n)) {
            Some(n) => (n, true),
            None => (stem, false),
        };
        ClaudeProjector {
            session,
            session_fixed,
            file_agent,
            helper,
            side_roots: None,
            last_caveat: None,
            explicit_stops: false,
            cwd_sent: false,
            branch_sent: None,
            deferred: None,
        }
    }

    fn agent_for(&mut self, rec: &Rec<'_>) -> Option<String> {
        if let Some(a) = &self.file_agent {
            return Some(a.clone());
        }
        if rec.sidechain != Some(true) {
            return None;
        }
        let agent = if let Some(a) = &rec.agent {
            a.to_string()
        } else {
            let inherited = rec
                .parent
                .as_deref()
                .and_then(|p| self.side_roots.as_mut()?.get(p).cloned());
            match (inherited, rec.uuid.as_deref()) {
                (Some(a), _) => a,
                (None, Some(u)) => format!("side-{}", u.get(..8).unwrap_or(u)),
                (None, None) => "sidechain".to_owned(),
            }
        };
        if let Some(u) = &rec.uuid {
            self.side_roots
                .get_or_insert_with(side_roots)
                .put(u.to_string(), agent.clone());
        }
        Some(agent)
    }

    fn assistant(&mut self, rec: &Rec<'_>, kinds: &mut Vec<ObsKind>) {
        let Some(msg) = &rec.message else { return };
        let mut text = String::new();
        let mut calls = Vec::new();
        if let Some(StrOrList::List(blocks)) = &msg.content {
            for b in blocks {
                match b.ty.as_deref() {
                    Some("text") => {
                        if let Some(t) = &b.text {
                            push_capped(&mut text, t);
                        }
                    }
                    Some("tool_use" | "server_tool_use") => calls.push(b),
                    _ => {}
                }
            }
        } else if let Some(StrOrList::Str(s)) = &msg.content {
            push_capped(&mut text, s);
        }
        let synthetic = msg.model.as_deref() == Some("<synthetic>");
        if text
            .trim_start()
            .starts_with("Claude AI usage limit reached")
        {
            // The legacy (1.0.x) limit record, `<synthetic>` or not.
            kinds.push(ObsKind::Failed {
                turn: None,
                reason: "usage_limit".to_owned(),
                resets_at: reset_hint(&text),
                message: crate::model::clip_message(text.split('|').next().unwrap_or_default()),
            });
            return;
        }
        let error_kind = rec.error.as_ref().and_then(|t| t.0.clone());
        if rec.api_error == Some(true) || (synthetic && error_kind.is_some()) {
            kinds.push(ObsKind::Failed {
                turn: None,
                reason: error_kind.unwrap_or_else(|| "api_error".to_owned()),
                resets_at: reset_hint(&text),
                message: crate::model::clip_message(&text),
            });
            return;
        }
        if synthetic {
            // e.g. "No response requested." written on resume or after a queued no-op:
            // never a real answer.
            return;
        }
        if !calls.is_empty() {
            for b in calls {
                let name = b.name.as_deref().unwrap_or_default();
                let waits = NEEDS_INPUT_TOOLS.contains(&name);
                let message = if waits {
                    question_text(b).or_else(|| crate::model::clip_message(&text))
                } else {
                    None
                };
                kinds.push(ObsKind::ToolCall {
                    id: b.id.as_deref().unwrap_or_default().to_owned(),
                    needs_input: waits.then(|| name.to_owned()),
                    message,
                });
            }
            return;
        }
        let stop = msg.stop_reason.as_deref();
        let has_text = !text.trim().is_empty();
        if stop == Some("tool_use") {
            // A text or thinking block stamped with the stop of the tool call that follows
            // it: this writer stamps every block (2.1.23x), not only a message's last
            // (1.0.x stamps the last block alone, so never a block without the call).
            self.explicit_stops = true;
        }
        // The record's version, where it tells, decides alone: a read that starts after
        // the file's stamped blocks (tail-first) knows as much as one that saw them.
        let explicit = Version::of(rec.version.as_ref())
            .stamps_every_block()
            .unwrap_or(self.explicit_stops);
        if !has_text
            || matches!(stop, Some("tool_use" | "pause_turn"))
            || (stop.is_none() && explicit)
        {
            // Thinking, an empty lead-in block, or (in a file that writes explicit ends)
            // text with no end yet: the response is still streaming.
            kinds.push(ObsKind::Work);
            return;
        }
        let final_usage = msg
            .usage
            .as_ref()
            .is_some_and(|u| u.server_tool_use.is_some() && u.iterations.is_some());
        let confirm = if stop.is_some_and(|s| TERMINAL_STOPS.contains(&s)) {
            Some(Evidence::StopReason)
        } else if final_usage {
            Some(Evidence::FinalUsage)
        } else {
            None
        };
        kinds.push(ObsKind::Final {
            message: crate::model::clip_message(&text),
            confirm,
        });
    }

    /// Stop hooks run only once the model has ended its turn: their progress confirms it.
    fn progress(rec: &Rec<'_>, kinds: &mut Vec<ObsKind>) {
        if let Some(d) = &rec.data
            && d.ty.as_deref() == Some("hook_progress")
            && d.hook_event.as_deref() == Some("Stop")
        {
            kinds.push(ObsKind::Confirm(Evidence::StopHook));
        }
    }

    fn system(rec: &Rec<'_>, kinds: &mut Vec<ObsKind>) {
        match rec.subtype.as_deref() {
            Some("turn_duration") => kinds.push(ObsKind::Confirm(Evidence::TurnDuration)),
            Some("stop_hook_summary") => kinds.push(if rec.prevented_continuation == Some(true) {
                // The hook sent the model back to work.
                ObsKind::Work
            } else {
                ObsKind::Confirm(Evidence::StopHook)
            }),
            // A retry notice: the turn is still running.
            Some("api_error") => kinds.push(ObsKind::Work),
            Some("compact_boundary") => kinds.push(ObsKind::Compacted {
                pre_tokens: rec.compact.as_ref().and_then(|c| c.pre_tokens),
            }),
            _ => {}
        }
    }
}

impl Projector for ClaudeProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, self.file_agent.as_deref())
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        let buf: Vec<u8>;
        let (rec, repaired) = parse_line!(line, buf, Rec<'_>);
        let key = super::key_or_hash(rec.uuid.as_deref(), line);
        let record_ts = rec.timestamp.as_deref().and_then(parse_rfc3339);
        if !self.session_fixed
            && let Some(s) = &rec.session
        {
            self.session = s.to_string();
            self.session_fixed = true;
        }
        if let Some(reason) = repaired {
            out.push(self.obs(key.clone(), record_ts, super::repaired(reason)));
        }
        if self.helper {
            return Ok(());
        }
        // Every sidechain record registers in the chain map, even ones that change no
        // state, so that its children find their root.
        let agent = self.agent_for(&rec);
        let mut kinds = Vec::new();
        match rec.ty.as_deref() {
            Some("user") => self.user(&rec, &key, agent.is_some(), &mut kinds),
            Some("assistant") => self.assistant(&rec, &mut kinds),
            Some("system") => Self::system(&rec, &mut kinds),
            Some("progress") => Self::progress(&rec, &mut kinds),
            _ => {}
        }
        if agent.is_none()
            && !self.cwd_sent
            && matches!(rec.ty.as_deref(), Some("user" | "assistant" | "system"))
            && let Some(dir) = super::content::text_of(rec.cwd.as_ref())
        {
            // The first record's `cwd` is where the process runs; later ones follow `cd`.
            // First among the record's observations, so that the turn it starts already
            // names its project (as Codex's header does).
            self.cwd_sent = true;
            kinds.insert(0, ObsKind::StartDir(dir.to_owned()));
        }
        if agent.is_none()
            && matches!(rec.ty.as_deref(), Some("user" | "assistant" | "system"))
            && let Some(b) = rec.git_branch.as_deref().and_then(super::branch_name)
            && self.branch_sent.as_deref() != Some(b.as_str())
        {
            // Before the record's own observations, so that the turn it starts names it.
            self.branch_sent = Some(b.clone());
            kinds.insert(0, ObsKind::Branch(b));
        }
        let mut tasks = Vec::new();
        super::background::claude(rec.ty.as_deref(), line, &mut tasks);
        kinds.extend(tasks.into_iter().map(ObsKind::Background));
        // The model at work (an answer, a retry notice) makes a deferred record a turn.
        let answers = agent.is_none()
            && match rec.ty.as_deref() {
                Some("assistant") => kinds
                    .iter()
                    .any(|k| !matches!(k, ObsKind::StartDir(_) | ObsKind::Branch(_))),
                Some("system") => rec.subtype.as_deref() == Some("api_error"),
                _ => false,
            };
        if answers && let Some(d) = self.deferred.take() {
            out.push(Obs {
                session: self.session.clone(),
                agent: None,
                record_ts,
                kind: ObsKind::TurnStart {
                    turn: d.turn.clone(),
                    initiator: initiator_of(Some(d.origin)),
                    origin: Some(d.origin),
                },
                key: d.turn,
            });
        }
        for kind in kinds {
            out.push(Obs {
                session: self.session.clone(),
                agent: agent.clone(),
                record_ts,
                key: key.clone(),
                kind,
            });
        }
        Ok(())
    }

    fn oversized(&mut self, head: &[u8], tail: &[u8], key: String, out: &mut Vec<Obs>) {
        // Claude writes `uuid` and `timestamp` after the (huge) message, so they sit in
        // the tail; `isSidechain` comes first, in the head.
        if self.helper
            || (self.file_agent.is_none()
                && memchr::memmem::find(head, b"\"isSidechain\":true").is_some())
        {
            // A sidechain's activity never bears on the main conversation.
            return;
        }
        let key = super::raw_str_field(tail, "uuid", true).map_or(key, str::to_owned);
        let record_ts = super::raw_str_field(tail, "timestamp", true).and_then(parse_rfc3339);
        // A final answer too large to read still ends the turn: its text is lost, not the
        // handback. The record's own `type` and the message's `stop_reason` follow the
        // content, so the tail holds them.
        let terminal = super::raw_str_field(tail, "type", true) == Some("assistant")
            && super::raw_str_field(tail, "stop_reason", true)
                .is_some_and(|s| TERMINAL_STOPS.contains(&s))
            && memchr::memmem::find(tail, b"\"isApiErrorMessage\":true").is_none()
            && memchr::memmem::find(head, b"\"model\":\"<synthetic>\"").is_none();
        let kind = if terminal {
            ObsKind::Final {
                message: None,
                confirm: Some(Evidence::StopReason),
            }
        } else {
            ObsKind::Work
        };
        out.push(self.obs(key, record_ts, kind));
    }

    fn is_conversation(&self) -> bool {
        !self.helper
    }

    fn save(&self) -> String {
        let side = self.side_roots.as_ref().map_or_else(Vec::new, |l| {
            l.iter()
                .rev()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        super::save_json(&Saved {
            session: self.session.clone(),
            fixed: self.session_fixed,
            side,
            caveat: self.last_caveat.clone(),
            stops: self.explicit_stops,
            deferred: self.deferred.clone(),
        })
    }

    fn restore(&mut self, saved: &str) -> bool {
        let Some(s) = super::load_json::<Saved>(saved) else {
            return false;
        };
        self.session = s.session;
        self.session_fixed = s.fixed;
        self.last_caveat = s.caveat;
        self.explicit_stops = s.stops;
        self.deferred = s.deferred;
        self.side_roots = (!s.side.is_empty()).then(|| {
            let mut l = side_roots();
            for (k, v) in s.side {
                l.put(k, v);
            }
            l
        });
        true
    }
}
