//! Audit of the JSON Lines agents (Claude, Codex, Norma, Pi, Copilot CLI, Cursor): ids,
//! parent links, tool calls and their results.
//!
//! Records are read through each projector's own serde types, so a record's shape is written
//! once, and `check` calls a line malformed exactly when the projector cannot read it.
//!
//! This file is the shared engine: what it remembers across a file's lines (ids seen,
//! calls still open, the session named by the file, a fork's copied history) and the
//! problems that follow. What each agent's record says is read in its own folder, by its
//! [`JsonRecords`], into the vocabulary of [`facts`]; the engine never looks at an agent's
//! fields itself, and asks the records type, never an agent kind, what else to check.

mod facts;

pub(crate) use facts::{Block, Facts, Resp, block_fields, blocks, message_facts};

use super::{Audit, Problem, Unresolved, glimpse_ids, shown, string_values};
use crate::provider::{Malformed, repair, strip_nul};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// How one JSON Lines agent's records read for the audit: an agent's folder implements it
/// and passes it to [`super::json_audit`].
pub(crate) trait JsonRecords: Sync {
    /// What one line's record says; an error when the agent's projector could not read it.
    fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error>;

    /// Whether record ids sit under a bare `id` key (as well as `uuid`): a line that
    /// cannot be parsed is glimpsed for those too.
    fn ids_under_id_key(&self) -> bool {
        false
    }

    /// Whether a forked file begins with a copy of its parent's history (Codex: another
    /// thread's `session_meta`, then records with one timestamp), whose calls were
    /// answered in the parent's file.
    fn forks_copy_history(&self) -> bool {
        false
    }

    /// The session the file at `path` names, when records claim a session of their own
    /// (Norma): a record that claims another one is reported. `None`: claims are not
    /// checked.
    fn file_session(&self, _path: &Path) -> Option<FileSession> {
        None
    }
}

/// The session a file names, and the subagent whose file it is, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileSession {
    pub(crate) session: String,
    pub(crate) agent: Option<String>,
}

#[derive(Debug)]
struct OpenCall {
    id: String,
    line: u64,
    resp: Option<String>,
    scope: Option<String>,
    superseded: bool,
}

/// How many distinct disagreeing session ids a file reports.
const SESSION_REPORTS: usize = 8;

pub(super) struct JsonAudit {
    records: &'static dyn JsonRecords,
    /// The session named by the file, when records claim one.
    session: Option<FileSession>,
    ids: HashMap<String, u64>,
    /// Ids and result links glimpsed in lines that could not be parsed: they may resolve
    /// a link, but never count as duplicates.
    weak_ids: HashSet<String>,
    weak_results: HashSet<String>,
    /// Oversized lines whose ends showed no record id: the id sits in the part that was
    /// streamed past, so a link to the record just before the next line cannot be told.
    blind: HashSet<u64>,
    links: Vec<Unresolved>,
    open: Vec<OpenCall>,
    batch: u64,
    reported_sessions: Vec<String>,
    /// Unknown record types: first line and count, listed at the end of the file.
    unknown: std::collections::BTreeMap<String, (u64, u64)>,
    /// Forks that copy history: the file's own thread, from its first `session_meta`.
    own_thread: Option<String>,
    /// A forked child is copying its parent's history (another thread's `session_meta`,
    /// then records with one timestamp): the line it began at, and the copy's timestamp
    /// once seen.
    copy: Option<(u64, Option<String>)>,
}

impl JsonAudit {
    pub(super) fn new(records: &'static dyn JsonRecords, path: &Path) -> Self {
        JsonAudit {
            records,
            session: records.file_session(path),
            ids: HashMap::new(),
            weak_ids: HashSet::new(),
            weak_results: HashSet::new(),
            blind: HashSet::new(),
            links: Vec::new(),
            open: Vec::new(),
            batch: 0,
            reported_sessions: Vec::new(),
            unknown: std::collections::BTreeMap::new(),
            own_thread: None,
            copy: None,
        }
    }

    fn glimpse(&mut self, bytes: &[u8]) {
        for id in glimpse_ids(bytes) {
            self.weak_ids.insert(id);
        }
        if self.records.ids_under_id_key() {
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

    /// Fork copies: the parent's calls in the copy were answered in the parent's
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
        if self.records.forks_copy_history() {
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
        let Some(file) = &self.session else { return };
        if claimed == file.session
            || file.agent.as_deref() == Some(claimed.as_str())
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
                shown(&file.session)
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
        let facts = match self.records.facts(clean) {
            Ok(f) => f,
            Err(e) => {
                let records = self.records;
                let parses = |b: &[u8]| records.facts(b).is_ok();
                match repair(clean, parses, &e) {
                    Ok((fixed, why)) => {
                        // The clobbered head may have held the real record's id.
                        self.glimpse(clean);
                        out.push(Problem::at(
                            line_no,
                            why,
                            "line is damaged but its record could be recovered".to_owned(),
                        ));
                        match self.records.facts(&fixed) {
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

    fn oversized(&mut self, line_no: u64, head: &[u8], tail: &[u8]) {
        if glimpse_ids(head).is_empty() && glimpse_ids(tail).is_empty() {
            self.blind.insert(line_no);
        }
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
            // A record names the one before it: if that one was a blind oversized line,
            // the link may well hold, and saying it breaks would be a guess.
            .filter(|l| !self.blind.contains(&l.line.saturating_sub(1)))
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

    /// A records type of no real agent: what the engine checks beyond ids and calls is
    /// what the records type says, so a new agent turns a check on from its own folder.
    struct Toy {
        bare_ids: bool,
        forks: bool,
        claims: bool,
    }

    #[derive(serde::Deserialize)]
    struct ToyRec {
        id: Option<String>,
        parent: Option<String>,
        session: Option<String>,
        meta: Option<String>,
        stamp: Option<String>,
        call: Option<String>,
        #[serde(default)]
        prompt: bool,
    }

    impl JsonRecords for Toy {
        fn facts(&self, line: &[u8]) -> Result<Facts, serde_json::Error> {
            let r: ToyRec = serde_json::from_slice(line)?;
            Ok(Facts {
                id: r.id,
                parent: r.parent,
                session: r.session,
                meta: r.meta,
                stamp: r.stamp,
                calls: r.call.into_iter().collect(),
                prompt: r.prompt,
                ..Facts::default()
            })
        }
        fn ids_under_id_key(&self) -> bool {
            self.bare_ids
        }
        fn forks_copy_history(&self) -> bool {
            self.forks
        }
        fn file_session(&self, path: &Path) -> Option<FileSession> {
            self.claims.then(|| FileSession {
                session: crate::provider::file_stem(path),
                agent: None,
            })
        }
    }

    static PLAIN: Toy = Toy {
        bare_ids: false,
        forks: false,
        claims: false,
    };
    static ALL_ON: Toy = Toy {
        bare_ids: true,
        forks: true,
        claims: true,
    };

    fn toy_audit(records: &'static Toy, lines: &[&str]) -> (Vec<&'static str>, Vec<Unresolved>) {
        let mut a = JsonAudit::new(records, Path::new("/x/s.jsonl"));
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            a.line(i as u64 + 1, l.as_bytes(), &mut out);
        }
        let links = a.finish(&mut out);
        (out.iter().map(|p| p.kind).collect(), links)
    }

    #[test]
    fn records_that_claim_a_session_are_checked_against_the_files() {
        let lines = [
            r#"{"id":"a","session":"s"}"#,
            r#"{"id":"b","parent":"a","session":"other"}"#,
        ];
        assert_eq!(toy_audit(&PLAIN, &lines), (vec![], vec![]));
        assert_eq!(
            toy_audit(&ALL_ON, &lines),
            (vec!["session_mismatch"], vec![])
        );
    }

    #[test]
    fn a_bare_id_glimpsed_in_a_broken_line_resolves_a_link_when_ids_sit_there() {
        let lines = [
            r#"{"id":"a"}"#,
            r#"{"id":"c","parent":"a","te"#,
            r#"{"id":"d","parent":"c"}"#,
        ];
        let broken = Unresolved {
            line: 3,
            parent: "c".to_owned(),
        };
        assert_eq!(
            toy_audit(&PLAIN, &lines),
            (vec!["malformed_line"], vec![broken])
        );
        assert_eq!(toy_audit(&ALL_ON, &lines), (vec!["malformed_line"], vec![]));
    }

    #[test]
    fn calls_in_a_forks_copied_history_are_not_dangling_when_forks_copy() {
        let lines = [
            r#"{"meta":"own","stamp":"t0"}"#,
            r#"{"meta":"parent","stamp":"t1"}"#,
            r#"{"call":"k","stamp":"t1"}"#,
            r#"{"prompt":true,"stamp":"t1"}"#,
            r#"{"prompt":true,"stamp":"t2"}"#,
        ];
        assert_eq!(
            toy_audit(&PLAIN, &lines),
            (vec!["dangling_tool_call"], vec![])
        );
        assert_eq!(toy_audit(&ALL_ON, &lines), (vec![], vec![]));
    }
}
