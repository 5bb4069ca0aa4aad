//! Audit of SGME L0 Markdown: front matter and block validity (seed 002).

use super::{Audit, Problem, Unresolved, shown};
use crate::clock::parse_rfc3339;
use crate::provider::file_stem;
use crate::provider::sgme::{self, Area, Fence, FrontMatter, Role};
use std::collections::HashMap;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    FrontMatter { opened: u64, lines: usize },
    Body,
}

pub(super) struct SgmeAudit {
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
    pub(super) fn new(path: &Path) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid4() {
        assert!(is_uuid4("a1b2c3d4-0000-4000-8000-000000000000"));
        assert!(!is_uuid4("a1b2c3d4-0000-1000-8000-000000000000"));
        assert!(!is_uuid4("nope"));
    }
}
