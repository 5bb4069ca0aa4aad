//! One transcript file's path through the pipeline: bounded reader → projector →
//! observations. Time and the reducer stay with the caller (replay runs on record time,
//! the daemon on the machine clock).

use crate::model::ProviderKind;
use crate::provider::{self, Obs, ObsKind, Projector, content_hash, strip_nul};
use crate::reduce::Src;
use crate::tail::{Item, LineReader};
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

/// The name a file's events carry: its path as text (lossy where it is not UTF-8).
pub fn name_of(path: &Path) -> Arc<str> {
    Arc::from(path.to_string_lossy().as_ref())
}

/// How much of a bad line is hashed into its anomaly key.
const KEY_PREFIX: usize = 4096;

pub struct FileFeed {
    pub path: Arc<str>,
    pub provider: ProviderKind,
    projector: Box<dyn Projector>,
    reader: LineReader,
    max_line: usize,
    buf: Vec<Obs>,
    /// Context the header shown by [`FileFeed::prime`] gave (where the agent process
    /// runs), passed on with the first line read.
    primed: Vec<Obs>,
    /// The file is one document rewritten whole ([`crate::provider::Agent::is_document`]):
    /// every read starts at its first byte and hands it to the projector as one record.
    document: bool,
    /// The size of the last version read when it did not parse (a rewrite caught half
    /// written): held like a partial line until its next version.
    held: u64,
}

impl FileFeed {
    pub fn new(path: &Path, provider: ProviderKind, max_line: usize) -> Self {
        Self::resume(path, provider, max_line, 0, 1)
    }

    /// [`FileFeed::new`] under a name made already ([`FileFeed::resume_named`]).
    pub fn named(name: Arc<str>, path: &Path, provider: ProviderKind, max_line: usize) -> Self {
        Self::resume_named(name, path, provider, max_line, 0, 1)
    }

    /// A feed that continues at a saved line-start offset.
    pub fn resume(
        path: &Path,
        provider: ProviderKind,
        max_line: usize,
        offset: u64,
        line_no: u64,
    ) -> Self {
        Self::resume_named(name_of(path), path, provider, max_line, offset, line_no)
    }

    /// [`FileFeed::resume`] under a name made already: the daemon's file table hands
    /// every holder its own, so a feed makes no copy (at 100,000 files, the copies
    /// made and dropped during the history read left holes among the names kept).
    pub fn resume_named(
        name: Arc<str>,
        path: &Path,
        provider: ProviderKind,
        max_line: usize,
        offset: u64,
        line_no: u64,
    ) -> Self {
        FileFeed {
            path: name,
            provider,
            projector: provider::projector_for(provider, path),
            reader: LineReader::resume(offset, line_no, max_line),
            max_line,
            buf: Vec::new(),
            primed: Vec::new(),
            document: provider.descriptor().is_document(path),
            held: 0,
        }
    }

    /// A feed that continues at a saved line-start offset with the projector context
    /// [`FileFeed::save`] gave there; `None` if that context cannot be taken back.
    pub fn restore(
        path: &Path,
        provider: ProviderKind,
        max_line: usize,
        at: (u64, u64),
        saved: &str,
    ) -> Option<Self> {
        Self::resume(path, provider, max_line, at.0, at.1).restored(saved)
    }

    /// This feed (made to resume where `saved` was saved: [`FileFeed::resume_named`])
    /// with the projector context [`FileFeed::save`] gave; `None` if that context cannot
    /// be taken back.
    pub fn restored(mut self, saved: &str) -> Option<Self> {
        self.projector.restore(saved).then_some(self)
    }

    /// The projector's context after the last complete line, i.e. at
    /// `reader().offset()`: a line still in progress has not reached the projector.
    pub fn save(&self) -> String {
        self.projector.save()
    }

    /// Shows the projector a line from before the point this feed resumes at (a file's
    /// header), for the context it sets; what it observes there is dropped.
    pub fn prime(&mut self, line: &[u8]) {
        let clean = strip_nul(line);
        if !clean.iter().all(u8::is_ascii_whitespace) {
            let _ = self.projector.project(clean, &mut self.buf);
        }
        // The projector passes the start directory and the branch on once, from the
        // first record (the branch again only when it changes): from the header, they
        // are context like the session id, not activity to drop.
        self.primed.extend(
            self.buf
                .drain(..)
                .filter(|o| matches!(o.kind, ObsKind::StartDir(_) | ObsKind::Branch(_))),
        );
        self.buf.clear();
    }

    /// Once the next line is read, skips unread to `to` (a line start, line `to_line`).
    pub fn jump_after_next_line(&mut self, to: u64, to_line: u64) {
        self.reader.jump_after_next_line(to, to_line);
    }

    pub fn reader(&self) -> &LineReader {
        &self.reader
    }

    /// False for files with no user-facing conversation in them.
    pub fn is_conversation(&self) -> bool {
        self.projector.is_conversation()
    }

    /// Whether the file is a document read whole on each change.
    pub fn is_document(&self) -> bool {
        self.document
    }

    /// Where a read must start: `reader().pos()`, or a document's first byte.
    pub fn start(&self) -> u64 {
        if self.document { 0 } else { self.reader.pos() }
    }

    /// Bytes read but not parsed yet: a partial last line, or a document that did not
    /// parse (half written).
    pub fn pending(&self) -> u64 {
        if self.document {
            self.held
        } else {
            self.reader.pending()
        }
    }

    /// The read is over for good (replay, scan): a document still half written is a
    /// malformed record now, as nothing will complete it.
    pub fn finish(&mut self, mut sink: impl FnMut(&Src, Obs)) {
        if self.document && self.held > 0 {
            let src = self.src(1);
            let msg = format!("document of {} bytes does not parse", self.held);
            let key = self.held.to_le_bytes();
            sink(&src, self.anomaly(&src, "malformed_line", msg, &key));
            self.held = 0;
        }
    }

    /// Reads `r` (positioned at [`FileFeed::start`]) to its end, calling `sink` for every
    /// observation in file order.
    pub fn read_to_end<R: Read>(
        &mut self,
        r: &mut R,
        mut sink: impl FnMut(&Src, Obs),
    ) -> io::Result<u64> {
        if self.document {
            let mut doc = Vec::new();
            let bound = u64::try_from(self.max_line)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            let head = io::Read::take(&mut *r, bound).read_to_end(&mut doc)? as u64;
            // Past the bound only the size is kept (a counted anomaly, bounded memory).
            let rest = io::copy(r, &mut io::sink())?;
            self.document(&doc, head + rest, &mut sink);
            return Ok(head + rest);
        }
        let mut reader = std::mem::replace(&mut self.reader, LineReader::new(1));
        let res = reader.read_to_end(r, |item| self.item(item, &mut sink));
        self.reader = reader;
        res
    }

    /// Feeds bytes directly (they follow `reader().pos()`; a document's are all of it).
    pub fn feed(&mut self, bytes: &[u8], mut sink: impl FnMut(&Src, Obs)) {
        if self.document {
            if !bytes.is_empty() {
                self.document(bytes, bytes.len() as u64, &mut sink);
            }
            return;
        }
        let mut reader = std::mem::replace(&mut self.reader, LineReader::new(1));
        reader.feed(bytes, |item| self.item(item, &mut sink));
        self.reader = reader;
    }

    fn item(&mut self, item: Item<'_>, sink: &mut impl FnMut(&Src, Obs)) {
        let line_no = match item {
            Item::Line { line_no, .. } | Item::Oversized { line_no, .. } => line_no,
        };
        let src = Src {
            provider: self.provider,
            path: self.path.clone(),
            line: line_no,
        };
        match item {
            Item::Line { bytes, .. } => {
                let clean = strip_nul(bytes);
                if clean.len() != bytes.len() {
                    let msg = format!("{} NUL bytes stripped", bytes.len() - clean.len());
                    sink(&src, self.anomaly(&src, "nul_bytes", msg, bytes));
                }
                if clean.iter().all(u8::is_ascii_whitespace) {
                    return;
                }
                let glued = if self.provider.descriptor().glues_records() {
                    provider::split_glued(clean)
                } else {
                    None
                };
                let Some(parts) = glued else {
                    return self.project(&src, clean, sink);
                };
                // Each record is projected on its own, all with this line's number.
                let msg = format!("{} records on one line, split", parts.len());
                tracing::debug!(path = %self.path, line = line_no, records = parts.len(), "Glued records split.");
                sink(&src, self.anomaly(&src, "glued_records", msg, clean));
                for part in parts {
                    self.project(&src, part, sink);
                }
            }
            Item::Oversized {
                len, head, tail, ..
            } => {
                tracing::warn!(path = %self.path, line = line_no, bytes = len, limit = self.max_line, "Oversized line skipped.");
                // Records glued before or after the oversized one are read whole.
                let provider::Around {
                    before,
                    head,
                    tail,
                    after,
                } = if self.provider.descriptor().glues_records() {
                    provider::glued_around(head, tail, len)
                } else {
                    provider::Around {
                        head,
                        tail,
                        ..Default::default()
                    }
                };
                if !before.is_empty() || !after.is_empty() {
                    let msg = format!(
                        "{} records on one line, split",
                        before.len() + 1 + after.len()
                    );
                    sink(&src, self.anomaly(&src, "glued_records", msg, head));
                }
                for part in before {
                    self.project(&src, part, sink);
                }
                let key = content_hash(&[
                    b"oversized",
                    self.path.as_bytes(),
                    &line_no.to_le_bytes(),
                    &len.to_le_bytes(),
                    head,
                ]);
                self.projector.oversized(head, tail, key, &mut self.buf);
                // The projector could tell from the line's ends that it ends a turn: say
                // so, since the event that follows has no message.
                let ends_turn = self
                    .buf
                    .iter()
                    .any(|o| matches!(o.kind, ObsKind::Final { .. } | ObsKind::Completed { .. }));
                let (reason, msg) = if ends_turn {
                    let msg = format!(
                        "final answer of {len} bytes too large to read (limit {}); the turn ends without its text",
                        self.max_line
                    );
                    ("oversized_final", msg)
                } else {
                    let msg = format!("line of {len} bytes skipped (limit {})", self.max_line);
                    ("oversized_line", msg)
                };
                let mut anomaly = self.anomaly(&src, reason, msg, head);
                // Whatever time the line's ends told, so the anomaly sits in time order.
                anomaly.record_ts = self.buf.iter().find_map(|o| o.record_ts);
                sink(&src, anomaly);
                for obs in self.buf.drain(..) {
                    sink(&src, tidy(obs));
                }
                for part in after {
                    self.project(&src, part, sink);
                }
            }
        }
    }

    fn src(&self, line: u64) -> Src {
        Src {
            provider: self.provider,
            path: self.path.clone(),
            line,
        }
    }

    /// One version of a document, `len` bytes long (`doc` is its first bytes, all of it
    /// unless it is over the line limit): one record, on line 1. The reader stands at
    /// its end, so the tail's size is the version's and a change shows as one.
    fn document(&mut self, doc: &[u8], len: u64, sink: &mut impl FnMut(&Src, Obs)) {
        self.reader = LineReader::resume(len, 1, self.max_line);
        self.held = 0;
        let src = self.src(1);
        if doc.len() as u64 != len || doc.len() > self.max_line {
            tracing::warn!(path = %self.path, bytes = len, limit = self.max_line, "Oversized document skipped.");
            let msg = format!("document of {len} bytes skipped (limit {})", self.max_line);
            let head = &doc[..doc.len().min(KEY_PREFIX)];
            let key = [head, &len.to_le_bytes()].concat();
            sink(&src, self.anomaly(&src, "oversized_line", msg, &key));
            return;
        }
        let clean = strip_nul(doc);
        if clean.iter().all(u8::is_ascii_whitespace) {
            // Emptied for a rewrite: the next version says what the session is.
            self.held = len;
            return;
        }
        // Caught mid-rewrite: not an anomaly while a later version can still complete it.
        if serde_json::from_slice::<serde::de::IgnoredAny>(clean).is_err() {
            tracing::debug!(path = %self.path, bytes = len, "Document does not parse (yet); read again on its next change.");
            self.held = len;
            return;
        }
        self.project(&src, clean, sink);
    }

    fn project(&mut self, src: &Src, line: &[u8], sink: &mut impl FnMut(&Src, Obs)) {
        let res = self.projector.project(line, &mut self.buf);
        for obs in std::mem::take(&mut self.primed) {
            sink(src, obs);
        }
        for obs in self.buf.drain(..) {
            sink(src, tidy(obs));
        }
        if let Err(e) = res {
            tracing::debug!(path = %self.path, line = src.line, error = %e, "Malformed line.");
            let msg = format!("not a JSON record: {e}");
            sink(src, self.anomaly(src, "malformed_line", msg, line));
        }
    }

    fn anomaly(&self, src: &Src, reason: &str, message: String, bytes: &[u8]) -> Obs {
        let prefix = &bytes[..bytes.len().min(KEY_PREFIX)];
        let key = content_hash(&[
            reason.as_bytes(),
            self.path.as_bytes(),
            &src.line.to_le_bytes(),
            prefix,
        ]);
        self.projector.obs(
            key,
            None,
            ObsKind::Anomaly {
                reason: reason.to_owned(),
                message: clip_anomaly(&message),
            },
        )
    }
}

/// An anomaly's message can quote the transcript (a parse error shows the string it
/// choked on): it is capped and cleaned like any message.
fn clip_anomaly(message: &str) -> String {
    crate::model::clip_message(message).unwrap_or_default()
}

/// Observations leave the feed with clean anomaly messages, whichever projector made
/// them.
fn tidy(mut obs: Obs) -> Obs {
    if let ObsKind::Anomaly { message, .. } = &mut obs.kind {
        *message = clip_anomaly(message);
    }
    obs
}
