//! Audit of the JSON Lines providers (Claude, Codex, Norma, Pi, Copilot CLI, Cursor): ids,
//! parent links, tool calls and their results.
//!
//! Records are read through each projector's own serde types, so a record's shape is written
//! once, and `check` calls a line malformed exactly when the projector cannot read it.

use super::{Audit, Problem, Unresolved, glimpse_ids, main_file_of, shown, string_values};
use crate::model::ProviderKind;
use crate::provider::content::StrOrList;
use crate::provider::{Malformed, file_stem, repair, strip_nul};
use crate::provider::{claude, codex, copilot, cursor, norma, pi};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The record id of one line (for resolving links from another file), if it has one.
pub fn record_id(kind: ProviderKind, line: &[u8]) -> Option<String> {
    let line = strip_nul(line);
    match kind {
        ProviderKind::Claude => serde_json::from_slice::<claude::Rec<'_>>(line)
            .ok()?
            .uuid
            .map(Cow::into_owned),
        ProviderKind::Norma => serde_json::from_slice::<norma::Rec<'_>>(line)
            .ok()?
            .uuid
            .map(Cow::into_owned),
        ProviderKind::Codex
        | ProviderKind::Sgme
        | ProviderKind::Cursor
        | ProviderKind::Copilot
        | ProviderKind::Pi => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavor {
    Claude,
    Codex,
    Norma,
    Pi,
    Copilot,
    /// Cursor writes no ids and no tool results: only that lines parse is checked.
    Cursor,
}

/// Which model response a record belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resp {
    Key(String),
    /// Codex items carry no response id: consecutive calls belong to one response.
    Current,
}

/// What one record says, in audit terms.
#[derive(Debug, Default)]
struct Facts {
    id: Option<String>,
    parent: Option<String>,
    /// A chain root by design (a compaction boundary): its parent is not checked.
    boundary: bool,
    /// Sidechain scope: calls are superseded only by activity in the same conversation.
    scope: Option<String>,
    calls: Vec<String>,
    results: Vec<String>,
    /// Model output of this response.
    response: Option<Resp>,
    /// Codex: this item ends the current run of calls.
    new_batch: bool,
    /// A new prompt: the conversation moved past every open call.
    prompt: bool,
    /// Norma: the session the record claims.
    session: Option<String>,
    /// A record type the projector neither reads nor deliberately ignores.
    unknown: Option<String>,
    /// Codex: the thread a `session_meta` names, and the record's timestamp.
    meta: Option<String>,
    stamp: Option<String>,
}

/// The content blocks of Claude, Norma and Pi, as the audit reads them: each provider's
/// own serde type, seen through the few fields that carry ids and prompt text.
trait Block {
    fn ty(&self) -> Option<&str>;
    fn id(&self) -> Option<&str>;
    /// The tool call a `tool_result` block answers.
    fn answers(&self) -> Option<&str>;
    fn text(&self) -> Option<&str>;
}

/// Claude's and Norma's blocks have the same fields.
macro_rules! block {
    ($($t:ty),*) => {$(
        impl Block for $t {
            fn ty(&self) -> Option<&str> {
                self.ty.as_deref()
            }
            fn id(&self) -> Option<&str> {
                self.id.as_deref()
            }
            fn answers(&self) -> Option<&str> {
                self.tool_use_id.as_deref()
            }
            fn text(&self) -> Option<&str> {
                self.text.as_deref()
            }
        }
    )*};
}
block!(claude::Block<'_>, norma::Block<'_>);

fn blocks<'b, B>(c: Option<&'b StrOrList<'_, B>>) -> &'b [B] {
    match c {
        Some(StrOrList::List(b)) => b,
        _ => &[],
    }
}

fn has_text<B: Block>(c: Option<&StrOrList<'_, B>>) -> bool {
    match c {
        Some(StrOrList::Str(s)) => !s.trim().is_empty(),
        Some(StrOrList::List(b)) => b
            .iter()
            .any(|b| b.ty() == Some("text") && b.text().is_some_and(|t| !t.trim().is_empty())),
        _ => false,
    }
}

/// The ids (`id` or `answers`) of the blocks of type `ty`.
fn ids_of<B: Block>(bs: &[B], ty: &str, f: impl Fn(&B) -> Option<&str>) -> Vec<String> {
    bs.iter()
        .filter(|b| b.ty() == Some(ty))
        .filter_map(|b| f(b).map(str::to_owned))
        .collect()
}

fn claude_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: claude::Rec<'_> = serde_json::from_slice(line)?;
    let content = r.message.as_ref().and_then(|m| m.content.as_ref());
    let bs = blocks(content);
    let mut f = Facts {
        id: r.uuid.as_deref().map(str::to_owned),
        parent: r.parent.as_deref().map(str::to_owned),
        boundary: r.subtype.as_deref() == Some("compact_boundary") || r.logical_parent.is_some(),
        scope: match (&r.agent, r.sidechain) {
            (Some(a), _) => Some(a.to_string()),
            (None, Some(true)) => Some("sidechain".to_owned()),
            _ => None,
        },
        unknown: r
            .ty
            .as_deref()
            .filter(|t| !crate::provider::claude::KNOWN_TYPES.contains(t))
            .map(str::to_owned),
        ..Facts::default()
    };
    match r.ty.as_deref() {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", Block::id);
            let key = r
                .message
                .as_ref()
                .and_then(|m| m.id.as_deref())
                .or(r.uuid.as_deref())
                .unwrap_or_default();
            f.response = Some(Resp::Key(key.to_owned()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", Block::answers);
            f.prompt = f.results.is_empty()
                && r.tool_use_result.is_none()
                && r.meta != Some(true)
                && r.compact_summary != Some(true)
                && has_text(content);
        }
        _ => {}
    }
    Ok(f)
}

fn codex_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    use crate::provider::codex::{KNOWN_EVENTS, KNOWN_ITEMS, KNOWN_TYPES};
    let l: codex::Line<'_> = serde_json::from_slice(line)?;
    let inner = l.payload.as_ref().and_then(|p| p.ty.as_deref());
    let unknown = match (l.ty.as_deref(), inner) {
        (Some(t), _) if !KNOWN_TYPES.contains(&t) => Some(t.to_owned()),
        (Some("event_msg"), Some(e)) if !KNOWN_EVENTS.contains(&e) => {
            Some(format!("event_msg/{e}"))
        }
        (Some("response_item"), Some(i)) if !KNOWN_ITEMS.contains(&i) => {
            Some(format!("response_item/{i}"))
        }
        _ => None,
    };
    let mut f = Facts {
        unknown,
        stamp: l.timestamp.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    let Some(p) = &l.payload else { return Ok(f) };
    if l.ty.as_deref() == Some("session_meta") {
        f.meta = p.id.as_deref().map(str::to_owned);
    }
    let call = || {
        p.call_id
            .as_deref()
            .map(str::to_owned)
            .into_iter()
            .collect()
    };
    match (l.ty.as_deref(), p.ty.as_deref()) {
        (Some("response_item"), Some("function_call" | "custom_tool_call")) => {
            f.calls = call();
            f.response = Some(Resp::Current);
        }
        (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
            f.results = call();
            f.new_batch = true;
        }
        (Some("response_item"), Some("reasoning")) => {
            f.new_batch = true;
            f.response = Some(Resp::Current);
        }
        (Some("response_item"), Some("message")) => {
            f.new_batch = true;
            if p.role.as_deref() == Some("assistant") {
                f.response = Some(Resp::Current);
            }
        }
        (Some("event_msg"), Some("task_started" | "turn_started" | "user_message")) => {
            f.new_batch = true;
            f.prompt = true;
        }
        _ => {}
    }
    Ok(f)
}

fn norma_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: norma::Rec<'_> = serde_json::from_slice(line)?;
    let content = r.message.as_ref().and_then(|m| m.content.as_ref());
    let bs = blocks(content);
    let mut f = Facts {
        id: r.uuid.as_deref().map(str::to_owned),
        parent: r.parent_uuid.as_deref().map(str::to_owned),
        boundary: r.ty.as_deref() == Some("boundary")
            || bs.iter().any(|b| b.ty() == Some("compact_boundary")),
        scope: (r.is_sidechain == Some(true) || r.agent_id.is_some())
            .then(|| r.agent_id.as_deref().unwrap_or("sidechain").to_owned()),
        session: r.session_id.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    match r.message.as_ref().and_then(|m| m.role.as_deref()) {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", Block::id);
            f.response = Some(Resp::Key(f.id.clone().unwrap_or_default()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", Block::answers);
            let skill = bs.iter().any(|b| b.ty() == Some("skill"));
            f.prompt = !skill && has_text(content);
        }
        _ => {}
    }
    Ok(f)
}

fn pi_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: pi::Rec<'_> = serde_json::from_slice(line)?;
    let mut f = Facts {
        id: r.id.as_deref().map(str::to_owned),
        parent: r.parent.as_deref().map(str::to_owned),
        // The header starts the tree; its id is the session's, not an entry's.
        boundary: r.ty.as_deref() == Some("session"),
        ..Facts::default()
    };
    if f.boundary {
        f.id = None;
    }
    let Some(m) = &r.message else { return Ok(f) };
    match m.role.as_deref() {
        Some("assistant") => {
            f.calls = blocks(m.content.as_ref())
                .iter()
                .filter(|b| b.ty.as_deref() == Some("toolCall"))
                .filter_map(|b| b.id.as_deref().map(str::to_owned))
                .collect();
            f.response = Some(Resp::Key(f.id.clone().unwrap_or_default()));
        }
        Some("toolResult") => {
            f.results = m
                .tool_call_id
                .as_deref()
                .map(str::to_owned)
                .into_iter()
                .collect();
        }
        Some("user") => f.prompt = true,
        _ => {}
    }
    Ok(f)
}

fn copilot_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: copilot::Rec<'_> = serde_json::from_slice(line)?;
    let mut f = Facts {
        id: r.id.as_deref().map(str::to_owned),
        parent: r.parent.as_deref().map(str::to_owned),
        scope: r.agent_id.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    let Some(d) = &r.data else { return Ok(f) };
    match r.ty.as_deref() {
        Some("assistant.message") => {
            f.calls = d
                .tool_requests
                .iter()
                .flatten()
                .filter_map(|c| c.tool_call_id.as_deref().map(str::to_owned))
                .collect();
            let key = d
                .message_id
                .as_deref()
                .or(r.id.as_deref())
                .unwrap_or_default();
            f.response = Some(Resp::Key(key.to_owned()));
        }
        Some("tool.execution_complete") => {
            f.results = d
                .tool_call_id
                .as_deref()
                .map(str::to_owned)
                .into_iter()
                .collect();
        }
        Some("user.message") => f.prompt = d.delivery.as_deref() != Some("steering"),
        _ => {}
    }
    Ok(f)
}

fn cursor_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    serde_json::from_slice::<cursor::Rec<'_>>(line)?;
    Ok(Facts::default())
}

#[derive(Debug)]
struct OpenCall {
    id: String,
    line: u64,
    resp: Option<String>,
    scope: Option<String>,
    superseded: bool,
}

/// How many distinct disagreeing session ids a Norma file reports.
const SESSION_REPORTS: usize = 8;

pub(super) struct JsonAudit {
    flavor: Flavor,
    /// Norma: the session named by the file, and the subagent id if any.
    session: String,
    agent: Option<String>,
    ids: HashMap<String, u64>,
    /// Ids and result links glimpsed in lines that could not be parsed: they may resolve
    /// a link, but never count as duplicates.
    weak_ids: HashSet<String>,
    weak_results: HashSet<String>,
    links: Vec<Unresolved>,
    open: Vec<OpenCall>,
    batch: u64,
    reported_sessions: Vec<String>,
    /// Unknown record types: first line and count, listed at the end of the file.
    unknown: std::collections::BTreeMap<String, (u64, u64)>,
    /// Codex: the file's own thread, from its first `session_meta`.
    own_thread: Option<String>,
    /// Codex: a forked child is copying its parent's history (another thread's
    /// `session_meta`, then records with one timestamp): the line it began at, and the
    /// copy's timestamp once seen.
    copy: Option<(u64, Option<String>)>,
}

impl JsonAudit {
    pub(super) fn new(flavor: Flavor, path: &Path) -> Self {
        let stem = file_stem(path);
        let (session, agent) = match (
            main_file_of(ProviderKind::Norma, path),
            stem.strip_prefix("agent-"),
        ) {
            (Some(main), Some(a)) => (file_stem(&main), Some(a.to_owned())),
            _ => (stem.clone(), None),
        };
        JsonAudit {
            flavor,
            session,
            agent,
            ids: HashMap::new(),
            weak_ids: HashSet::new(),
            weak_results: HashSet::new(),
            links: Vec::new(),
            open: Vec::new(),
            batch: 0,
            reported_sessions: Vec::new(),
            unknown: std::collections::BTreeMap::new(),
            own_thread: None,
            copy: None,
        }
    }

    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        match self.flavor {
            Flavor::Claude => claude_facts(line),
            Flavor::Codex => codex_facts(line),
            Flavor::Norma => norma_facts(line),
            Flavor::Pi => pi_facts(line),
            Flavor::Copilot => copilot_facts(line),
            Flavor::Cursor => cursor_facts(line),
        }
    }

    fn glimpse(&mut self, bytes: &[u8]) {
        for id in glimpse_ids(bytes) {
            self.weak_ids.insert(id);
        }
        if matches!(self.flavor, Flavor::Pi | Flavor::Copilot) {
            for id in string_values(bytes, b"\"id\":\"") {
                self.weak_ids.insert(id);
            }
        }
        for key in [
            &b"\"tool_use_id\":\""[..],
            b"\"call_id\":\"",
            b"\"toolCallId\":\"",
        ] {
            for id in string_values(bytes, key) {
                self.weak_results.insert(id);
            }
        }
    }

    /// Codex fork copies: the parent's calls in the copy were answered in the parent's
    /// file, not here, so when the copy ends its open calls are dropped.
    fn fork_copy(&mut self, line_no: u64, f: &Facts) {
        if let Some(meta) = &f.meta {
            match &self.own_thread {
                None => self.own_thread = Some(meta.clone()),
                Some(own) if own != meta && self.copy.is_none() => {
                    self.copy = Some((line_no, None));
                }
                Some(_) => {}
            }
            return;
        }
        let Some((start, stamp)) = self.copy.as_mut() else {
            return;
        };
        match (stamp.as_deref(), f.stamp.as_deref()) {
            (None, Some(t)) => *stamp = Some(t.to_owned()),
            (Some(s), Some(t)) if s != t => {
                let start = *start;
                self.open.retain(|c| c.line < start);
                self.copy = None;
            }
            _ => {}
        }
    }

    fn apply(&mut self, line_no: u64, f: Facts, out: &mut Vec<Problem>) {
        if self.flavor == Flavor::Codex {
            self.fork_copy(line_no, &f);
        }
        if let Some(ty) = f.unknown {
            self.unknown.entry(ty).or_insert((line_no, 0)).1 += 1;
        }
        if let Some(id) = f.id.filter(|id| !id.is_empty()) {
            if let Some(first) = self.ids.get(&id) {
                out.push(Problem::at(
                    line_no,
                    "duplicate_uuid",
                    format!("uuid {} already used on line {first}", shown(&id)),
                ));
            } else {
                self.ids.insert(id, line_no);
            }
        }
        if !f.boundary
            && let Some(parent) = f.parent.filter(|p| !p.is_empty())
        {
            self.links.push(Unresolved {
                line: line_no,
                parent,
            });
        }
        if let Some(claimed) = f.session {
            self.session_claim(line_no, claimed, out);
        }
        for id in &f.results {
            self.open.retain(|c| &c.id != id);
        }
        if f.new_batch {
            self.batch += 1;
        }
        let resp = f.response.map(|r| match r {
            Resp::Key(k) => k,
            Resp::Current => format!("#{}", self.batch),
        });
        for c in &mut self.open {
            if c.scope != f.scope {
                continue;
            }
            if f.prompt || resp.as_ref().is_some_and(|r| c.resp.as_ref() != Some(r)) {
                c.superseded = true;
            }
        }
        for id in f.calls {
            self.open.push(OpenCall {
                id,
                line: line_no,
                resp: resp.clone(),
                scope: f.scope.clone(),
                superseded: false,
            });
        }
    }

    fn session_claim(&mut self, line_no: u64, claimed: String, out: &mut Vec<Problem>) {
        if self.flavor != Flavor::Norma
            || claimed == self.session
            || self.agent.as_deref() == Some(claimed.as_str())
            || self.reported_sessions.contains(&claimed)
            || self.reported_sessions.len() >= SESSION_REPORTS
        {
            return;
        }
        out.push(Problem::at(
            line_no,
            "session_mismatch",
            format!(
                "record session_id {} differs from the file's session {}",
                shown(&claimed),
                shown(&self.session)
            ),
        ));
        self.reported_sessions.push(claimed);
    }
}

impl Audit for JsonAudit {
    fn line(&mut self, line_no: u64, bytes: &[u8], out: &mut Vec<Problem>) {
        let clean = strip_nul(bytes);
        if clean.len() != bytes.len() {
            out.push(Problem::at(
                line_no,
                "nul_bytes",
                format!("{} NUL bytes before the record", bytes.len() - clean.len()),
            ));
        }
        if clean.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let facts = match self.facts(clean) {
            Ok(f) => f,
            Err(e) => {
                let flavor = self.flavor;
                let parses = |b: &[u8]| match flavor {
                    Flavor::Claude => claude_facts(b).is_ok(),
                    Flavor::Codex => codex_facts(b).is_ok(),
                    Flavor::Norma => norma_facts(b).is_ok(),
                    Flavor::Pi => pi_facts(b).is_ok(),
                    Flavor::Copilot => copilot_facts(b).is_ok(),
                    Flavor::Cursor => cursor_facts(b).is_ok(),
                };
                match repair(clean, parses, &e) {
                    Ok((fixed, why)) => {
                        // The clobbered head may have held the real record's id.
                        self.glimpse(clean);
                        out.push(Problem::at(
                            line_no,
                            why,
                            "line is damaged but its record could be recovered".to_owned(),
                        ));
                        match self.facts(&fixed) {
                            Ok(f) => f,
                            Err(_) => return,
                        }
                    }
                    Err(Malformed(msg)) => {
                        out.push(Problem::at(
                            line_no,
                            "malformed_line",
                            format!("not a JSON record: {msg}"),
                        ));
                        self.glimpse(clean);
                        return;
                    }
                }
            }
        };
        self.apply(line_no, facts, out);
    }

    fn oversized(&mut self, _line_no: u64, head: &[u8], tail: &[u8]) {
        self.glimpse(head);
        self.glimpse(tail);
    }

    fn finish(&mut self, out: &mut Vec<Problem>) -> Vec<Unresolved> {
        for (ty, (first, n)) in std::mem::take(&mut self.unknown) {
            let records = if n == 1 { "record" } else { "records" };
            out.push(Problem::at(
                first,
                "unknown_record_type",
                format!(
                    "record type {} ({n} {records}) is not known: ignored",
                    shown(&ty)
                ),
            ));
        }
        for c in std::mem::take(&mut self.open) {
            if c.superseded && !self.weak_results.contains(&c.id) {
                out.push(Problem::at(
                    c.line,
                    "dangling_tool_call",
                    format!(
                        "tool call {} never got a result, and the conversation went on",
                        shown(&c.id)
                    ),
                ));
            }
        }
        let links = std::mem::take(&mut self.links);
        links
            .into_iter()
            .filter(|l| !self.ids.contains_key(&l.parent) && !self.weak_ids.contains(&l.parent))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::audit;
    use super::*;
    use crate::model::ProviderKind;

    #[test]
    fn parallel_calls_open_at_eof_are_not_dangling() {
        let (p, _) = audit(
            ProviderKind::Codex,
            "/x/rollout.jsonl",
            &[
                r#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"t"}}"#,
                r#"{"type":"response_item","payload":{"type":"reasoning"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call","call_id":"a"}}"#,
                r#"{"type":"event_msg","payload":{"type":"token_count"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call","call_id":"b"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"a"}}"#,
            ],
        );
        assert_eq!(p, vec![]);
    }

    #[test]
    fn a_call_the_model_moved_past_is_dangling() {
        let (p, _) = audit(
            ProviderKind::Codex,
            "/x/rollout.jsonl",
            &[
                r#"{"type":"response_item","payload":{"type":"function_call","call_id":"a"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call","call_id":"b"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"b"}}"#,
                r#"{"type":"response_item","payload":{"type":"reasoning"}}"#,
            ],
        );
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].line, p[0].kind), (Some(1), "dangling_tool_call"));
    }

    /// The audit reads records through the projectors' own types, so it calls a line
    /// malformed exactly when the projector cannot read it, e.g. a field of the wrong type.
    #[test]
    fn a_line_is_malformed_for_check_when_the_projector_rejects_it() {
        let cases = [
            (
                ProviderKind::Claude,
                "/x/s.jsonl",
                r#"{"type":"user","uuid":"a","message":{"content":"hi"}}"#,
                r#"{"type":"assistant","uuid":"b","timestamp":5}"#,
            ),
            (
                ProviderKind::Codex,
                "/x/rollout.jsonl",
                r#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"t"}}"#,
                r#"{"type":"event_msg","payload":{"type":"error","error":"boom"}}"#,
            ),
            (
                ProviderKind::Norma,
                "/x/s.jsonl",
                r#"{"uuid":"a","session_id":"s","type":"message"}"#,
                r#"{"uuid":"b","session_id":"s","timestamp":5}"#,
            ),
            (
                ProviderKind::Pi,
                "/x/s.jsonl",
                r#"{"type":"message","id":"a","message":{"role":"user","content":"hi"}}"#,
                r#"{"type":"compaction","id":"b","tokensBefore":"many"}"#,
            ),
            (
                ProviderKind::Copilot,
                "/x/events.jsonl",
                r#"{"type":"user.message","id":"a","data":{"content":"hi"}}"#,
                r#"{"type":"session.error","id":"b","data":{"statusCode":"x"}}"#,
            ),
            (
                ProviderKind::Cursor,
                "/x/c.jsonl",
                r#"{"role":"user","message":{"content":"hi"}}"#,
                r#"{"type":"turn_ended","status":5}"#,
            ),
        ];
        for (kind, path, good, bad) in cases {
            for (line, rejected) in [(good, false), (bad, true)] {
                let mut p = crate::provider::projector_for(kind, Path::new(path));
                let projector = p.project(line.as_bytes(), &mut Vec::new()).is_err();
                let (problems, _) = audit(kind, path, &[line]);
                let check = problems.iter().any(|p| p.kind == "malformed_line");
                assert_eq!((projector, check), (rejected, rejected), "{kind:?}: {line}");
            }
        }
    }

    #[test]
    fn glimpsed_ids_resolve_links_but_never_duplicate() {
        let (p, links) = audit(
            ProviderKind::Norma,
            "/x/s.jsonl",
            &[
                r#"{"uuid":"a1","session_id":"s","type":"message","message":{"role":"user","content":[{"type":"te"#,
                r#"{"uuid":"b2","parent_uuid":"a1","session_id":"s","type":"message"}"#,
                r#"{"uuid":"c3","parent_uuid":"zz","session_id":"s","type":"message"}"#,
            ],
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].kind, "malformed_line");
        assert_eq!(
            links,
            vec![Unresolved {
                line: 3,
                parent: "zz".to_owned()
            }]
        );
    }
}
