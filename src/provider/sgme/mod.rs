//! SGME L0 raw session Markdown (`raw/sessions/{file_id}.md`, plus `raw/uploads/` and
//! `raw/external/`). Rules: seed 002 (the SGME L0 layout, front matter and blocks).
//!
//! The projector sees one line at a time, in order, so it must be fed from the file's
//! first byte: the front matter names the session, and blocks are numbered from 1.

mod descriptor;
use super::{Initiator, Malformed, Obs, ObsKind, Origin, Projector, content_hash, file_stem};
use crate::clock::parse_rfc3339;
use crate::model::clip_message;
pub use descriptor::Sgme;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// `source_type` values (seed 002 §2).
pub(crate) const SOURCE_TYPES: [&str; 3] = ["session", "upload", "external"];
/// Front matter fields SGME requires besides `format_version`.
pub(crate) const REQUIRED: [&str; 5] = [
    "file_id",
    "session_key",
    "agent_id",
    "source_type",
    "started_at",
];
const ROLES: [&str; 4] = ["user", "assistant", "tool", "system"];
/// A front matter longer than this is taken to be unterminated.
pub(crate) const MAX_FRONTMATTER_LINES: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Role {
    User,
    Assistant,
    Tool,
    System,
}

/// A block heading: `# {ISO time} {role}` (first block) or `## {ISO time} {role}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Heading {
    pub level: u8,
    pub ts: i64,
    pub role: Role,
}

/// Parses a block heading. Stricter than SGME's own regex (`^#{1,2} .* (role)$`): the
/// time must be one token that parses, so `## Notes for the user` in a message body is
/// not taken for a block.
pub(crate) fn heading(line: &str) -> Option<Heading> {
    let line = line.trim_end();
    let (level, rest) = if let Some(r) = line.strip_prefix("## ") {
        (2, r)
    } else if let Some(r) = line.strip_prefix("# ") {
        (1, r)
    } else {
        return None;
    };
    let (time, role) = rest.split_once(' ')?;
    let role = match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        "system" => Role::System,
        _ => return None,
    };
    if time.is_empty() || time.contains(char::is_whitespace) {
        return None;
    }
    Some(Heading {
        level,
        ts: parse_rfc3339(time)?,
        role,
    })
}

/// Would SGME's own block regex split here? (`^#{1,2} .* (user|assistant|tool|system)$`)
pub(crate) fn heading_like(line: &str) -> bool {
    let rest = line.strip_prefix("## ").or_else(|| line.strip_prefix("# "));
    rest.is_some_and(|r| {
        ROLES
            .iter()
            .any(|role| r.strip_suffix(role).is_some_and(|head| head.ends_with(' ')))
    })
}

/// Tracks CommonMark fenced code blocks (``` or ~~~), so heading-like lines inside them
/// are not taken for blocks.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct Fence {
    open: Option<(u8, usize)>,
}

impl Fence {
    /// Feeds one line; true when the line is a fence delimiter or inside a fence.
    pub fn step(&mut self, line: &str) -> bool {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = &line[indent..];
        let marker = body.bytes().next().filter(|b| *b == b'`' || *b == b'~');
        let run = marker.map_or(0, |m| body.bytes().take_while(|b| *b == m).count());
        match self.open {
            Some((m, n)) => {
                if indent <= 3 && marker == Some(m) && run >= n && body[run..].trim().is_empty() {
                    self.open = None;
                }
                true
            }
            None => {
                let Some(m) = marker.filter(|_| indent <= 3 && run >= 3) else {
                    return false;
                };
                // A backtick fence's info string may not hold a backtick.
                if m == b'`' && body[run..].contains('`') {
                    return false;
                }
                self.open = Some((m, run));
                true
            }
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

/// The front matter's top-level `key: value` pairs, in order. SGME writes flat YAML with
/// one nested `metadata` map, so no YAML library is needed: nested lines are skipped.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct FrontMatter {
    pub fields: Vec<(String, String)>,
}

impl FrontMatter {
    /// Feeds one line between the two `---` lines.
    pub fn line(&mut self, line: &str) {
        if line.starts_with([' ', '\t', '#', '-']) || line.trim().is_empty() {
            return;
        }
        if let Some((k, v)) = line.split_once(':') {
            let k = k.trim();
            if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                self.fields
                    .push((k.to_owned(), unquote(v.trim()).to_owned()));
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// What makes SGME itself mark the file `status=error`: an unknown format version or a
    /// missing required field. Each with the field it is about.
    pub fn errors(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        match self.get("format_version") {
            None => out.push(("format_version", "format_version is missing".to_owned())),
            Some("1") => {}
            Some(v) => out.push((
                "format_version",
                format!(
                    "unknown format_version `{}`",
                    clip_message(v).unwrap_or_default()
                ),
            )),
        }
        for key in REQUIRED {
            if self.get(key).is_none() {
                out.push((key, format!("{key} is missing")));
            }
        }
        out
    }
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// Which `raw/` subdirectory a file sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    Sessions,
    Uploads,
    External,
    Other,
}

impl Area {
    pub fn of(path: &Path) -> Self {
        match path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
        {
            Some("sessions") => Area::Sessions,
            Some("uploads") => Area::Uploads,
            Some("external") => Area::External,
            _ => Area::Other,
        }
    }

    /// The `source_type` a file here must have, if the directory decides it.
    pub fn source_type(self) -> Option<&'static str> {
        match self {
            Area::Sessions => Some("session"),
            Area::Uploads => Some("upload"),
            Area::External => Some("external"),
            Area::Other => None,
        }
    }
}

/// Is `path` an L0 file (`{sessions,uploads,external}/*.md`)? Archives (`*.md.zst`) and
/// other Markdown are not.
pub fn is_l0_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "md") && Area::of(path) != Area::Other
}

/// One line's decoded text: invalid UTF-8 is replaced, a trailing CR dropped.
pub(crate) fn text(line: &[u8]) -> std::borrow::Cow<'_, str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Phase {
    /// Nothing seen yet.
    Start,
    /// Inside the front matter, this many lines in.
    FrontMatter(usize),
    Body,
}

/// Saved whole: every field is per-file context.
#[derive(Serialize, Deserialize)]
pub struct SgmeProjector {
    stem: String,
    phase: Phase,
    fm: FrontMatter,
    session: String,
    file_id: String,
    /// False for uploads/external files: they hold no conversation.
    conversation: bool,
    fence: Fence,
    seq: u64,
    /// The current block is an assistant block whose first body line is still to come.
    answer: Option<(String, i64)>,
    /// A user block has been seen: before it there is no turn to report on.
    prompted: bool,
    /// The role of the block being read.
    block: Option<Role>,
}

impl SgmeProjector {
    pub fn new(path: &Path) -> Self {
        let stem = file_stem(path);
        let area = Area::of(path);
        SgmeProjector {
            session: stem.clone(),
            file_id: stem.clone(),
            stem,
            phase: Phase::Start,
            fm: FrontMatter::default(),
            conversation: !matches!(area, Area::Uploads | Area::External),
            fence: Fence::default(),
            seq: 0,
            answer: None,
            prompted: false,
            block: None,
        }
    }

    fn anomaly(&self, message: String) -> Obs {
        let key = content_hash(&[b"bad_frontmatter", self.stem.as_bytes(), message.as_bytes()]);
        self.obs(
            key,
            None,
            ObsKind::Anomaly {
                reason: "bad_frontmatter".to_owned(),
                message,
            },
        )
    }

    /// The front matter ended (or was given up on): settle identity, report what is wrong.
    fn close_frontmatter(&mut self, unterminated: bool, out: &mut Vec<Obs>) {
        self.phase = Phase::Body;
        if let Some(k) = self.fm.get("session_key") {
            self.session = k.to_owned();
        }
        if let Some(id) = self.fm.get("file_id") {
            self.file_id = id.to_owned();
        }
        if matches!(self.fm.get("source_type"), Some("upload" | "external")) {
            self.conversation = false;
        }
        let mut errors: Vec<String> = self.fm.errors().into_iter().map(|(_, e)| e).collect();
        if unterminated {
            errors.insert(0, "front matter has no closing `---` line".to_owned());
        }
        if !errors.is_empty() {
            out.push(self.anomaly(errors.join("; ")));
        }
    }

    fn body(&mut self, line: &str, out: &mut Vec<Obs>) {
        if self.fence.step(line) {
            if !line.trim_start().starts_with(['`', '~']) {
                self.answer_line(line, out);
            }
            return;
        }
        let Some(h) = heading(line) else {
            self.answer_line(line, out);
            return;
        };
        self.seq += 1;
        self.answer = None;
        self.block = Some(h.role);
        if !self.conversation {
            return;
        }
        let key = format!("{}:{}", self.file_id, self.seq);
        let kind = match h.role {
            Role::User => {
                self.prompted = true;
                ObsKind::TurnStart {
                    turn: key.clone(),
                    initiator: Initiator::Human,
                    origin: Some(Origin::Human),
                }
            }
            _ if !self.prompted => return,
            Role::Assistant => {
                self.answer = Some((key.clone(), h.ts));
                ObsKind::Final {
                    message: None,
                    confirm: None,
                }
            }
            Role::Tool | Role::System => ObsKind::Work,
        };
        out.push(self.obs(key, Some(h.ts), kind));
    }

    /// The first body line of an assistant block becomes the candidate's message.
    fn answer_line(&mut self, line: &str, out: &mut Vec<Obs>) {
        let Some(message) = clip_message(line) else {
            return;
        };
        if let Some((key, ts)) = self.answer.take() {
            let kind = ObsKind::Final {
                message: Some(message),
                confirm: None,
            };
            out.push(self.obs(key, Some(ts), kind));
        }
    }
}

impl Projector for SgmeProjector {
    fn scope(&self) -> (&str, Option<&str>) {
        (&self.session, None)
    }

    fn project(&mut self, line: &[u8], out: &mut Vec<Obs>) -> Result<(), Malformed> {
        let line = text(line);
        let line = line.as_ref();
        match self.phase {
            Phase::Start => {
                if line.trim_start_matches('\u{feff}').trim_end() == "---" {
                    self.phase = Phase::FrontMatter(0);
                } else {
                    self.phase = Phase::Body;
                    out.push(self.anomaly("the file has no front matter".to_owned()));
                    self.body(line, out);
                }
            }
            Phase::FrontMatter(n) => {
                if line.trim_end() == "---" {
                    self.close_frontmatter(false, out);
                } else if heading(line).is_some() || n >= MAX_FRONTMATTER_LINES {
                    self.close_frontmatter(true, out);
                    self.body(line, out);
                } else {
                    self.fm.line(line);
                    self.phase = Phase::FrontMatter(n + 1);
                }
            }
            Phase::Body => self.body(line, out),
        }
        Ok(())
    }

    /// A huge line is body text: it starts and ends nothing. Inside an answer it is part
    /// of that answer; elsewhere it is activity.
    fn oversized(&mut self, _head: &[u8], _tail: &[u8], key: String, out: &mut Vec<Obs>) {
        let answering = self.block == Some(Role::Assistant);
        if self.conversation && self.prompted && !answering && self.phase == Phase::Body {
            out.push(self.obs(key, None, ObsKind::Work));
        }
    }

    super::saved_whole!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings() {
        let h = heading("## 2026-08-03T11:20:00Z assistant").expect("heading");
        assert_eq!((h.level, h.role), (2, Role::Assistant));
        assert!(heading("# 2026-08-03T11:18:06Z user").is_some());
        assert!(heading("### 2026-08-03T11:18:06Z user").is_none());
        assert!(heading("## Notes for the user").is_none());
        assert!(heading("## 2026-08-03T11:18:06Z robot").is_none());
        assert!(heading_like("## Notes for the user"));
        assert!(!heading_like("## Notes for users"));
        assert!(!heading_like("##2026-08-03T11:18:06Z user"));
    }

    #[test]
    fn fences() {
        let mut f = Fence::default();
        assert!(!f.step("text"));
        assert!(f.step("```rust"));
        assert!(f.step("## 2026-08-03T11:20:00Z assistant"));
        assert!(
            f.step("~~~"),
            "a tilde line does not close a backtick fence"
        );
        assert!(f.step("````"));
        assert!(!f.is_open());
        assert!(!f.step("``` inline ` code```"), "not a fence");
        assert!(f.step("~~~~"));
        assert!(f.step("~~~"), "a shorter run does not close");
        assert!(f.step("~~~~~"));
        assert!(!f.is_open());
    }

    fn project(path: &str, text: &str) -> Vec<ObsKind> {
        let mut p = SgmeProjector::new(Path::new(path));
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            p.project(line.as_bytes(), &mut out)
                .expect("never malformed");
        }
        out.into_iter().map(|o| o.kind).collect()
    }

    #[test]
    fn unterminated_front_matter_gives_way_to_the_first_heading() {
        let kinds = project(
            "/raw/sessions/f.md",
            "---\nformat_version: 1\nfile_id: f\nsession_key: k\nagent_id: a\nsource_type: session\nstarted_at: 2026-08-03T11:18:06Z\n# 2026-08-03T11:18:06Z user\nhi\n",
        );
        assert!(
            matches!(&kinds[0], ObsKind::Anomaly { message, .. } if message == "front matter has no closing `---` line"),
            "{kinds:?}"
        );
        assert_eq!(
            kinds[1],
            ObsKind::TurnStart {
                turn: "f:1".to_owned(),
                initiator: Initiator::Human,
                origin: Some(Origin::Human),
            }
        );
    }

    #[test]
    fn blocks_before_the_first_prompt_and_in_uploads_say_nothing() {
        let body = "---\nformat_version: 1\nfile_id: f\nsession_key: k\nagent_id: a\nsource_type: session\nstarted_at: 2026-08-03T11:18:06Z\n---\n# 2026-08-03T11:18:06Z system\nboot\n## 2026-08-03T11:18:07Z assistant\nhello\n";
        assert_eq!(project("/raw/sessions/f.md", body), vec![]);
        let upload = body.replace("source_type: session", "source_type: upload")
            + "## 2026-08-03T11:18:08Z user\nq\n";
        assert_eq!(project("/raw/sessions/f.md", &upload), vec![]);
    }

    #[test]
    fn an_oversized_line_in_an_answer_keeps_it_pending() {
        let mut p = SgmeProjector::new(Path::new("/raw/sessions/f.md"));
        let mut out = Vec::new();
        for l in [
            "---",
            "format_version: 1",
            "---",
            "# 2026-08-03T11:18:06Z user",
            "q",
            "## 2026-08-03T11:18:07Z assistant",
            "a",
        ] {
            p.project(l.as_bytes(), &mut out).expect("never malformed");
        }
        out.clear();
        p.oversized(b"x", b"x", "k".to_owned(), &mut out);
        assert!(out.is_empty());
        p.project(b"## 2026-08-03T11:18:08Z tool", &mut out)
            .expect("never malformed");
        out.clear();
        p.oversized(b"x", b"x", "k".to_owned(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, ObsKind::Work);
    }

    #[test]
    fn frontmatter_errors() {
        let mut fm = FrontMatter::default();
        for l in [
            "format_version: 2",
            "file_id: \"abc\"",
            "metadata:",
            "  app: x",
        ] {
            fm.line(l);
        }
        assert_eq!(fm.get("file_id"), Some("abc"));
        assert_eq!(fm.get("app"), None);
        let e = fm.errors();
        assert_eq!(e[0].0, "format_version");
        assert!(e[0].1.contains("unknown format_version `2`"), "{e:?}");
        assert_eq!(e.len(), 5, "{e:?}");
    }
}
