//! Audit facts for `baton check`: what each provider's records say about their own
//! integrity (ids, parent links, tool calls and results), and the per-file checks built on
//! them. Pure: lines in, problems out; `check` owns the files.

use super::content::StrOrList;
use super::sgme::{self, Area, Fence, FrontMatter, Role};
use super::{Malformed, file_stem, repair, strip_nul};
use crate::clock::parse_rfc3339;
use crate::model::{ProviderKind, clip_message};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// One thing wrong with a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line, when the problem sits on one.
    pub line: Option<u64>,
    pub kind: &'static str,
    pub message: String,
}

impl Problem {
    fn at(line: u64, kind: &'static str, message: String) -> Self {
        Problem {
            line: Some(line),
            kind,
            message,
        }
    }
}

/// A parent link the file itself cannot resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub line: u64,
    pub parent: String,
}

/// A per-file audit, fed every line in order.
pub trait Audit {
    /// One complete line, as read (leading NULs not yet stripped).
    fn line(&mut self, line_no: u64, bytes: &[u8], out: &mut Vec<Problem>);
    /// A line too long to parse: only its ends are known. The caller reports it.
    fn oversized(&mut self, line_no: u64, head: &[u8], tail: &[u8]);
    /// End of file: cross-record problems, and parent links to resolve elsewhere.
    fn finish(&mut self, out: &mut Vec<Problem>) -> Vec<Unresolved>;
}

/// The audit for a file of `kind` at `path`.
pub fn auditor(kind: ProviderKind, path: &Path) -> Box<dyn Audit> {
    match kind {
        ProviderKind::Claude => Box::new(JsonAudit::new(Flavor::Claude, path)),
        ProviderKind::Codex => Box::new(JsonAudit::new(Flavor::Codex, path)),
        ProviderKind::Norma => Box::new(JsonAudit::new(Flavor::Norma, path)),
        ProviderKind::Sgme => Box::new(SgmeAudit::new(path)),
    }
}

/// Where a subagent file's parent links may legitimately point: its session's main file
/// (`<dir>/<session>/subagents/agent-x.jsonl` → `<dir>/<session>.jsonl`). Claude's
/// compaction helper forks from the main conversation, so its first records name parents
/// there. Derived from the path only.
pub fn main_file_of(kind: ProviderKind, path: &Path) -> Option<PathBuf> {
    if !matches!(kind, ProviderKind::Claude | ProviderKind::Norma) {
        return None;
    }
    let subagents = path.parent()?;
    if subagents.file_name()? != "subagents" || !file_stem(path).starts_with("agent-") {
        return None;
    }
    let session_dir = subagents.parent()?;
    let mut name = session_dir.file_name()?.to_os_string();
    name.push(".jsonl");
    Some(session_dir.with_file_name(name))
}

/// The record id of one line (for resolving links from another file), if it has one.
pub fn record_id(kind: ProviderKind, line: &[u8]) -> Option<String> {
    let line = strip_nul(line);
    match kind {
        ProviderKind::Claude => serde_json::from_slice::<ClaudeRec<'_>>(line)
            .ok()?
            .uuid
            .map(Cow::into_owned),
        ProviderKind::Norma => serde_json::from_slice::<NormaRec<'_>>(line)
            .ok()?
            .uuid
            .map(Cow::into_owned),
        ProviderKind::Codex | ProviderKind::Sgme => None,
    }
}

/// Record ids glimpsed in bytes that cannot be parsed (an oversized line's ends, a
/// malformed line): best effort, for resolving links only.
pub fn glimpse_ids(bytes: &[u8]) -> Vec<String> {
    string_values(bytes, b"\"uuid\":\"")
}

// ---------------------------------------------------------------------------------------
// JSON Lines providers.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Claude,
    Codex,
    Norma,
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
}

#[derive(Deserialize)]
struct ClaudeRec<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    uuid: Option<Cow<'a, str>>,
    #[serde(rename = "parentUuid", borrow)]
    parent: Option<Cow<'a, str>>,
    #[serde(rename = "logicalParentUuid")]
    logical_parent: Option<IgnoredAny>,
    #[serde(rename = "isSidechain")]
    sidechain: Option<bool>,
    #[serde(rename = "agentId", borrow)]
    agent: Option<Cow<'a, str>>,
    #[serde(rename = "isMeta")]
    meta: Option<bool>,
    #[serde(rename = "isCompactSummary")]
    compact_summary: Option<bool>,
    #[serde(rename = "toolUseResult")]
    tool_use_result: Option<IgnoredAny>,
    #[serde(borrow)]
    message: Option<ClaudeMsg<'a>>,
}

#[derive(Deserialize)]
struct ClaudeMsg<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<StrOrList<'a, Block<'a>>>,
}

/// A content block, as Claude and Norma both write them.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct CodexLine<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    payload: Option<CodexPayload<'a>>,
}

#[derive(Deserialize)]
struct CodexPayload<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct NormaRec<'a> {
    #[serde(borrow)]
    uuid: Option<Cow<'a, str>>,
    #[serde(borrow)]
    parent_uuid: Option<Cow<'a, str>>,
    #[serde(borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    agent_id: Option<Cow<'a, str>>,
    is_sidechain: Option<bool>,
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<NormaMsg<'a>>,
}

#[derive(Deserialize)]
struct NormaMsg<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<StrOrList<'a, Block<'a>>>,
}

fn blocks<'b, 'a>(c: Option<&'b StrOrList<'a, Block<'a>>>) -> &'b [Block<'a>] {
    match c {
        Some(StrOrList::List(b)) => b,
        _ => &[],
    }
}

fn has_text(c: Option<&StrOrList<'_, Block<'_>>>) -> bool {
    match c {
        Some(StrOrList::Str(s)) => !s.trim().is_empty(),
        Some(StrOrList::List(b)) => b.iter().any(|b| {
            b.ty.as_deref() == Some("text")
                && b.text.as_deref().is_some_and(|t| !t.trim().is_empty())
        }),
        _ => false,
    }
}

fn ids_of(bs: &[Block<'_>], ty: &str, f: impl Fn(&Block<'_>) -> Option<String>) -> Vec<String> {
    bs.iter()
        .filter(|b| b.ty.as_deref() == Some(ty))
        .filter_map(f)
        .collect()
}

fn claude_facts(line: &[u8]) -> Result<Facts, serde_json::Error> {
    let r: ClaudeRec<'_> = serde_json::from_slice(line)?;
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
        ..Facts::default()
    };
    match r.ty.as_deref() {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", |b| b.id.as_deref().map(str::to_owned));
            let key = r
                .message
                .as_ref()
                .and_then(|m| m.id.as_deref())
                .or(r.uuid.as_deref())
                .unwrap_or_default();
            f.response = Some(Resp::Key(key.to_owned()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", |b| {
                b.tool_use_id.as_deref().map(str::to_owned)
            });
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
    let l: CodexLine<'_> = serde_json::from_slice(line)?;
    let mut f = Facts::default();
    let Some(p) = &l.payload else { return Ok(f) };
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
    let r: NormaRec<'_> = serde_json::from_slice(line)?;
    let content = r.message.as_ref().and_then(|m| m.content.as_ref());
    let bs = blocks(content);
    let mut f = Facts {
        id: r.uuid.as_deref().map(str::to_owned),
        parent: r.parent_uuid.as_deref().map(str::to_owned),
        boundary: r.ty.as_deref() == Some("boundary")
            || bs
                .iter()
                .any(|b| b.ty.as_deref() == Some("compact_boundary")),
        scope: (r.is_sidechain == Some(true) || r.agent_id.is_some())
            .then(|| r.agent_id.as_deref().unwrap_or("sidechain").to_owned()),
        session: r.session_id.as_deref().map(str::to_owned),
        ..Facts::default()
    };
    match r.message.as_ref().and_then(|m| m.role.as_deref()) {
        Some("assistant") => {
            f.calls = ids_of(bs, "tool_use", |b| b.id.as_deref().map(str::to_owned));
            f.response = Some(Resp::Key(f.id.clone().unwrap_or_default()));
        }
        Some("user") => {
            f.results = ids_of(bs, "tool_result", |b| {
                b.tool_use_id.as_deref().map(str::to_owned)
            });
            let skill = bs.iter().any(|b| b.ty.as_deref() == Some("skill"));
            f.prompt = !skill && has_text(content);
        }
        _ => {}
    }
    Ok(f)
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

struct JsonAudit {
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
}

impl JsonAudit {
    fn new(flavor: Flavor, path: &Path) -> Self {
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
        }
    }

    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
        match self.flavor {
            Flavor::Claude => claude_facts(line),
            Flavor::Codex => codex_facts(line),
            Flavor::Norma => norma_facts(line),
        }
    }

    fn glimpse(&mut self, bytes: &[u8]) {
        for id in glimpse_ids(bytes) {
            self.weak_ids.insert(id);
        }
        for key in [&b"\"tool_use_id\":\""[..], b"\"call_id\":\""] {
            for id in string_values(bytes, key) {
                self.weak_results.insert(id);
            }
        }
    }

    fn apply(&mut self, line_no: u64, f: Facts, out: &mut Vec<Problem>) {
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

/// String values following `key` (e.g. `"uuid":"`) anywhere in `bytes`: a best-effort
/// glimpse into lines that cannot be parsed. Only id-like values are kept.
fn string_values(bytes: &[u8], key: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for at in memchr::memmem::find_iter(bytes, key) {
        let rest = &bytes[at + key.len()..];
        let end = rest.iter().take(200).position(|b| *b == b'"');
        if let Some(end) = end {
            let v = &rest[..end];
            if !v.is_empty()
                && v.iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
            {
                out.push(String::from_utf8_lossy(v).into_owned());
            }
        }
    }
    out
}

/// A value from a record, made safe and short for a message.
fn shown(s: &str) -> String {
    format!("`{}`", clip_message(s).unwrap_or_default())
}

// ---------------------------------------------------------------------------------------
// SGME L0 Markdown.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    FrontMatter { opened: u64, lines: usize },
    Body,
}

struct SgmeAudit {
    stem: String,
    area: Area,
    phase: Phase,
    fm: FrontMatter,
    fm_lines: HashMap<String, u64>,
    /// Block checks apply: a session file (by directory and `source_type`).
    blocks_checked: bool,
    fence: Fence,
    fence_line: u64,
    blocks: u64,
    last_ts: Option<i64>,
    /// A tool block whose `**tool**: {name}` line is still to come.
    tool_pending: Option<u64>,
    stray_reported: bool,
}

impl SgmeAudit {
    fn new(path: &Path) -> Self {
        let area = Area::of(path);
        SgmeAudit {
            stem: file_stem(path),
            area,
            phase: Phase::Start,
            fm: FrontMatter::default(),
            fm_lines: HashMap::new(),
            blocks_checked: !matches!(area, Area::Uploads | Area::External),
            fence: Fence::default(),
            fence_line: 0,
            blocks: 0,
            last_ts: None,
            tool_pending: None,
            stray_reported: false,
        }
    }

    fn close_frontmatter(
        &mut self,
        line_no: u64,
        unterminated: Option<u64>,
        out: &mut Vec<Problem>,
    ) {
        self.phase = Phase::Body;
        if let Some(opened) = unterminated {
            out.push(Problem::at(
                opened,
                "bad_frontmatter",
                "front matter has no closing `---` line".to_owned(),
            ));
        }
        let at = |key: &str| self.fm_lines.get(key).copied().unwrap_or(line_no);
        for (key, e) in self.fm.errors() {
            out.push(Problem::at(at(key), "bad_frontmatter", e));
        }
        if let Some(id) = self.fm.get("file_id") {
            if !is_uuid4(id) {
                out.push(Problem::at(
                    at("file_id"),
                    "frontmatter_field",
                    format!("file_id {} is not a UUID4", shown(id)),
                ));
            }
            if id != self.stem {
                out.push(Problem::at(
                    at("file_id"),
                    "frontmatter_field",
                    format!(
                        "file_id {} differs from the file name {}",
                        shown(id),
                        shown(&self.stem)
                    ),
                ));
            }
        }
        if let Some(st) = self.fm.get("source_type") {
            if !sgme::SOURCE_TYPES.contains(&st) {
                out.push(Problem::at(
                    at("source_type"),
                    "frontmatter_field",
                    format!("unknown source_type {}", shown(st)),
                ));
            } else if let Some(want) = self.area.source_type().filter(|w| *w != st) {
                out.push(Problem::at(
                    at("source_type"),
                    "frontmatter_field",
                    format!(
                        "source_type {} in a directory for `{want}` files",
                        shown(st)
                    ),
                ));
            }
            if st != "session" {
                self.blocks_checked = false;
            }
        }
        if let Some(t) = self.fm.get("started_at") {
            let utc = t.ends_with(['Z', 'z']) || t.ends_with("+00:00");
            if parse_rfc3339(t).is_none() || !utc {
                out.push(Problem::at(
                    at("started_at"),
                    "frontmatter_field",
                    format!("started_at {} is not an ISO 8601 UTC time", shown(t)),
                ));
            }
        }
    }

    fn frontmatter_line(&mut self, line_no: u64, line: &str, out: &mut Vec<Problem>) {
        let before = self.fm.fields.len();
        self.fm.line(line);
        if self.fm.fields.len() > before
            && let Some((key, _)) = self.fm.fields.last()
        {
            if let Some(first) = self.fm_lines.get(key) {
                out.push(Problem::at(
                    line_no,
                    "frontmatter_field",
                    format!("{key} is set again (first on line {first})"),
                ));
            } else {
                self.fm_lines.insert(key.clone(), line_no);
            }
        }
    }

    fn body(&mut self, line_no: u64, line: &str, out: &mut Vec<Problem>) {
        let was_open = self.fence.is_open();
        if self.fence.step(line) {
            if !was_open {
                self.fence_line = line_no;
            }
            self.content(line_no, line, out);
            return;
        }
        if !self.blocks_checked {
            return;
        }
        let Some(h) = sgme::heading(line) else {
            if sgme::heading_like(line.trim_end()) {
                out.push(Problem::at(
                    line_no,
                    "ambiguous_heading",
                    "looks like a block heading but its time does not parse; SGME's own parser \
                     splits a block here, so block numbers differ"
                        .to_owned(),
                ));
            }
            self.content(line_no, line, out);
            return;
        };
        if let Some(tool) = self.tool_pending.take() {
            out.push(tool_problem(tool));
        }
        self.blocks += 1;
        let want = if self.blocks == 1 { 1 } else { 2 };
        if h.level != want {
            out.push(Problem::at(
                line_no,
                "heading_level",
                format!(
                    "block {} heading uses `{}`; the first block uses `#`, later ones `##`",
                    self.blocks,
                    "#".repeat(usize::from(h.level))
                ),
            ));
        }
        if let Some(prev) = self.last_ts
            && h.ts < prev
        {
            out.push(Problem::at(
                line_no,
                "block_time",
                format!("block {} is timed before the block above it", self.blocks),
            ));
        }
        self.last_ts = Some(h.ts);
        if h.role == Role::Tool {
            self.tool_pending = Some(line_no);
        }
    }

    /// A body line (not a heading).
    fn content(&mut self, line_no: u64, line: &str, out: &mut Vec<Problem>) {
        if line.trim().is_empty() || !self.blocks_checked {
            return;
        }
        if self.blocks == 0 {
            if !self.stray_reported {
                self.stray_reported = true;
                out.push(Problem::at(
                    line_no,
                    "stray_content",
                    "text before the first block heading belongs to no block".to_owned(),
                ));
            }
            return;
        }
        if let Some(tool) = self.tool_pending.take() {
            let named = line
                .trim()
                .strip_prefix("**tool**:")
                .is_some_and(|name| !name.trim().is_empty());
            if !named {
                out.push(tool_problem(tool));
            }
        }
    }
}

fn tool_problem(line: u64) -> Problem {
    Problem::at(
        line,
        "tool_block",
        "tool block body does not start with `**tool**: {name}`".to_owned(),
    )
}

fn is_uuid4(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
        && b[14] == b'4'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B')
}

impl Audit for SgmeAudit {
    fn line(&mut self, line_no: u64, bytes: &[u8], out: &mut Vec<Problem>) {
        if std::str::from_utf8(bytes).is_err() {
            out.push(Problem::at(
                line_no,
                "invalid_utf8",
                "line is not valid UTF-8".to_owned(),
            ));
        }
        let text = sgme::text(bytes);
        let line = text.as_ref();
        match self.phase {
            Phase::Start => {
                if line.trim().is_empty() {
                    return;
                }
                if line.trim_start_matches('\u{feff}').trim_end() == "---" {
                    self.phase = Phase::FrontMatter {
                        opened: line_no,
                        lines: 0,
                    };
                } else {
                    out.push(Problem::at(
                        line_no,
                        "bad_frontmatter",
                        "the file has no front matter (it must open with `---`)".to_owned(),
                    ));
                    self.phase = Phase::Body;
                    self.body(line_no, line, out);
                }
            }
            Phase::FrontMatter { opened, lines } => {
                if line.trim_end() == "---" {
                    self.close_frontmatter(line_no, None, out);
                } else if sgme::heading(line).is_some() || lines >= sgme::MAX_FRONTMATTER_LINES {
                    self.close_frontmatter(line_no, Some(opened), out);
                    self.body(line_no, line, out);
                } else {
                    self.frontmatter_line(line_no, line, out);
                    self.phase = Phase::FrontMatter {
                        opened,
                        lines: lines + 1,
                    };
                }
            }
            Phase::Body => self.body(line_no, line, out),
        }
    }

    fn oversized(&mut self, line_no: u64, head: &[u8], _tail: &[u8]) {
        // Body text, known only by its head: enough to tell a tool block's name line.
        if matches!(self.phase, Phase::Body) {
            let mut ignored = Vec::new();
            self.content(line_no, &sgme::text(head), &mut ignored);
        }
    }

    fn finish(&mut self, out: &mut Vec<Problem>) -> Vec<Unresolved> {
        match self.phase {
            Phase::Start => out.push(Problem {
                line: None,
                kind: "bad_frontmatter",
                message: "the file is empty: no front matter".to_owned(),
            }),
            Phase::FrontMatter { opened, .. } => {
                let end = opened;
                self.close_frontmatter(end, Some(opened), out);
            }
            Phase::Body => {}
        }
        if self.fence.is_open() && self.blocks_checked {
            out.push(Problem::at(
                self.fence_line,
                "unclosed_fence",
                "code fence never closes: any block heading after it is hidden".to_owned(),
            ));
        }
        Vec::new()
    }
}

// ---------------------------------------------------------------------------------------
// Norma Noa `state.json` v1 (seed 000 §Noa state.json v1).

/// What `check` needs from a Noa `state.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoaState {
    /// The `version` value as written, when it is not 1.
    pub bad_version: Option<String>,
    /// Per block: its index, `blockId` (as text) and `archivePath`.
    pub blocks: Vec<NoaBlock>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoaBlock {
    pub index: usize,
    pub id: Option<String>,
    pub archive_path: Option<String>,
}

#[derive(Deserialize)]
struct RawState {
    version: Option<serde_json::Value>,
    #[serde(rename = "sessionId")]
    session_id: Option<IgnoredAny>,
    #[serde(rename = "nextBlockId")]
    next_block_id: Option<IgnoredAny>,
    #[serde(rename = "messageRefs")]
    message_refs: Option<IgnoredAny>,
    blocks: Option<Vec<RawBlock>>,
}

#[derive(Deserialize)]
struct RawBlock {
    #[serde(rename = "blockId")]
    block_id: Option<serde_json::Value>,
    #[serde(rename = "archivePath")]
    archive_path: Option<String>,
}

/// Reads a `state.json`. `Ok(None)`: valid JSON but not a Noa state (no Noa keys).
/// `Err((line, why))` when it does not parse.
pub fn noa_state(bytes: &[u8]) -> Result<Option<NoaState>, (u64, String)> {
    let raw: RawState =
        serde_json::from_slice(bytes).map_err(|e| (e.line() as u64, e.to_string()))?;
    let noa = raw.version.is_some()
        || raw.session_id.is_some()
        || raw.next_block_id.is_some()
        || raw.message_refs.is_some()
        || raw.blocks.is_some();
    if !noa {
        return Ok(None);
    }
    let bad_version = match &raw.version {
        Some(v) if v.as_u64() == Some(1) => None,
        Some(v) => Some(clip_message(&v.to_string()).unwrap_or_default()),
        None => Some("missing".to_owned()),
    };
    let blocks = raw
        .blocks
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, b)| NoaBlock {
            index,
            id: b.block_id.map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }),
            archive_path: b.archive_path,
        })
        .collect();
    Ok(Some(NoaState {
        bad_version,
        blocks,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(kind: ProviderKind, path: &str, lines: &[&str]) -> (Vec<Problem>, Vec<Unresolved>) {
        let mut a = auditor(kind, Path::new(path));
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            a.line(i as u64 + 1, l.as_bytes(), &mut out);
        }
        let links = a.finish(&mut out);
        (out, links)
    }

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

    #[test]
    fn main_file_of_subagents() {
        assert_eq!(
            main_file_of(
                ProviderKind::Claude,
                Path::new("/p/abc/subagents/agent-x.jsonl")
            ),
            Some(PathBuf::from("/p/abc.jsonl"))
        );
        assert_eq!(
            main_file_of(ProviderKind::Claude, Path::new("/p/abc.jsonl")),
            None
        );
        assert_eq!(
            main_file_of(
                ProviderKind::Codex,
                Path::new("/p/abc/subagents/agent-x.jsonl")
            ),
            None
        );
    }

    #[test]
    fn noa_state_versions() {
        assert_eq!(noa_state(br#"{"a":1}"#), Ok(None));
        let s = noa_state(br#"{"version":2,"blocks":[{"blockId":3,"archivePath":"t/x.md"}]}"#)
            .expect("parses")
            .expect("noa");
        assert_eq!(s.bad_version.as_deref(), Some("2"));
        assert_eq!(s.blocks[0].id.as_deref(), Some("3"));
        assert!(noa_state(b"{").is_err());
    }

    #[test]
    fn uuid4() {
        assert!(is_uuid4("a1b2c3d4-0000-4000-8000-000000000000"));
        assert!(!is_uuid4("a1b2c3d4-0000-1000-8000-000000000000"));
        assert!(!is_uuid4("nope"));
    }
}
