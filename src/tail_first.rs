//! Tail-first reads: a session's state depends only on its last turn, at the end of its
//! file, so `scan` (and the daemon's first history read) reads backwards to a restart
//! point near the last turn start, counts the newlines before it (for line numbers),
//! and parses from there only.
//!
//! A turn start keeps the message the session showed before it (the previous turn's
//! answer), which only records before it tell. So the read either starts at the last
//! turn start and jumps, after it, straight to a later line that decides the message and
//! the pending answer anew ([`restart::resets`]: an answer, a question to the person),
//! skipping the turn's middle unparsed; or, when no such line follows or something in
//! the middle could change which turn is open, it starts at the first line before the
//! last turn start that starts a turn too or leaves the state independent of everything
//! before it but the open turn's id ([`restart::settles`]). What a fresh projector and
//! reducer session cannot rebuild from there is named by the provider too
//! ([`restart::hazards`]); a file with any of it before the restart point, or with no
//! restart point, is read whole, and the reason is counted.

use crate::feed::FileFeed;
use crate::model::ProviderKind;
use crate::provider::restart;
use crate::tail::scratch;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

mod prefix;
mod search;
use prefix::scan_prefix;
use search::{Found, Search};

/// Chunk for the backward search (turns are usually near the end).
const BACK_CHUNK: usize = 64 * 1024;
/// The bytes read backwards are kept for the forward parse up to this much; a longer
/// tail is read again.
const KEEP_MAX: usize = 4 * 1024 * 1024;
/// Longer lines are never taken as restart points (a prompt is short; skipping one only
/// moves the restart point back a turn).
const PROBE_MAX: usize = 256 * 1024;
/// The first line (a header) is shown to the restarted projector if it is at most this
/// long.
const HEAD_MAX: usize = 1024 * 1024;

/// Where to start reading a file.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// From a restart point, with the file from there to its end when the backward
    /// read kept it (at most KEEP_MAX): the parse need not read it again.
    Tail {
        start: Start,
        tail: Option<KeptTail>,
    },
    /// From the first byte, for this reason.
    Full(&'static str),
}

/// A restart point and what a feed starting there is shown first.
#[derive(Debug, PartialEq, Eq)]
pub struct Start {
    /// A line start, whose line is `line_no`.
    pub offset: u64,
    pub line_no: u64,
    /// The file's first line, when it lies before `offset`.
    pub head: Option<Vec<u8>>,
    /// The last line the jump skips that sets the projector's context.
    pub context: Option<Vec<u8>>,
    /// After the line at `offset` (a turn start), skip unread to this line start and
    /// line number.
    pub jump: Option<(u64, u64)>,
}

impl Start {
    /// A feed for the file at `path` that reads on from here.
    pub fn feed(&self, path: &Path, provider: ProviderKind, max_line: usize) -> FileFeed {
        self.feed_named(crate::feed::name_of(path), path, provider, max_line)
    }

    /// [`Start::feed`] under a name made already ([`FileFeed::resume_named`]).
    pub fn feed_named(
        &self,
        name: Arc<str>,
        path: &Path,
        provider: ProviderKind,
        max_line: usize,
    ) -> FileFeed {
        let mut feed =
            FileFeed::resume_named(name, path, provider, max_line, self.offset, self.line_no);
        for line in self.head.iter().chain(&self.context) {
            feed.prime(line);
        }
        if let Some((to, to_line)) = self.jump {
            feed.jump_after_next_line(to, to_line);
        }
        feed
    }

    /// Where parsing proper starts: past the jump, if any.
    pub fn parse_from(&self) -> u64 {
        self.jump.map_or(self.offset, |(to, _)| to)
    }
}

/// Decides where to read `file` (a transcript of `kind` at `path`) from.
pub fn plan<F: Read + Seek>(file: &mut F, kind: ProviderKind, path: &Path) -> io::Result<Plan> {
    plan_keeping(file, kind, path, true)
}

/// [`plan`]; the tail read backwards is kept for the caller only when `keep`.
fn plan_keeping<F: Read + Seek>(
    file: &mut F,
    kind: ProviderKind,
    path: &Path,
    keep: bool,
) -> io::Result<Plan> {
    if let Some(reason) = restart::unsupported(kind, path) {
        return Ok(Plan::Full(reason));
    }
    let len = file.seek(SeekFrom::End(0))?;
    let mut kept = Kept::new(keep, len);
    let found = match restart_point(file, len, kind, path, &mut kept)? {
        Ok(s) => s,
        Err(reason) => return Ok(Plan::Full(reason)),
    };
    if found.offset == 0 {
        return Ok(Plan::Full("few_turns"));
    }
    let Some(head) = read_head(file, found.offset)? else {
        return Ok(Plan::Full("long_head"));
    };
    let head_end = head.len() as u64 + 1;
    let needle = restart::turn_needle(kind, &found.turn);
    let skipped_to = found.jump.unwrap_or(found.offset);
    let context = found
        .uncovered
        .then(|| restart::context_hazard(kind))
        .flatten();
    let counted = scan_prefix(
        file,
        (found.offset, skipped_to),
        head_end,
        (kind, path, context),
        (&needle, found.turn.as_bytes()),
        kept.range(found.offset, skipped_to),
    )?;
    match counted {
        Ok((before, all)) => Ok(Plan::Tail {
            start: Start {
                offset: found.offset,
                line_no: before + 1,
                head: Some(head),
                context: found.context,
                jump: found.jump.map(|to| (to, all + 1)),
            },
            tail: kept.from(found.offset),
        }),
        Err(reason) => Ok(Plan::Full(reason)),
    }
}

/// Reads backwards from the end (an unfinished last line is not a line yet) to the
/// restart point: the last turn start when the read can jump from it to a later line
/// that decides the state ([`restart::resets`]), else the first line before it that
/// starts a turn too or after which the state no longer depends on what came before
/// ([`restart::settles`]).
fn restart_point<F: Read + Seek>(
    file: &mut F,
    len: u64,
    kind: ProviderKind,
    path: &Path,
    kept: &mut Kept,
) -> io::Result<Result<Found, &'static str>> {
    scratch::with(scratch::Use::Back, BACK_CHUNK, |buf| {
        restart_point_in(file, len, kind, path, kept, buf)
    })
}

fn restart_point_in<F: Read + Seek>(
    file: &mut F,
    len: u64,
    kind: ProviderKind,
    path: &Path,
    kept: &mut Kept,
    buf: &mut [u8],
) -> io::Result<Result<Found, &'static str>> {
    let mut search = Search::new(kind, path);
    let mut pos = len;
    // The newline that ends the line being collected; `None` while still in the
    // unfinished tail.
    let mut line_end: Option<u64> = None;
    // That line's bytes from `pos` to `line_end`, unless it grew past PROBE_MAX, once
    // the file's end is no longer kept (while it is, a line is read from what is kept).
    let mut carry = Carry::default();
    while pos > 0 {
        let lo = pos.saturating_sub(BACK_CHUNK as u64);
        let n = usize::try_from(pos - lo).unwrap_or(BACK_CHUNK);
        if kept.keeping() && !kept.fits(n) {
            if let Some(open) = line_end.and_then(|end| kept.range(pos, end)) {
                carry.put_before(open);
            }
            kept.stop();
        }
        file.seek(SeekFrom::Start(lo))?;
        let chunk = if kept.read(file, lo, n)? {
            kept.range(lo, pos).unwrap_or_default()
        } else {
            file.read_exact(&mut buf[..n])?;
            &buf[..n]
        };
        let mut j = chunk.len();
        while let Some(nl) = memchr::memrchr(b'\n', &chunk[..j]) {
            if let Some(end) = line_end {
                let start = lo + nl as u64 + 1;
                let piece = &chunk[nl + 1..j];
                let line = if kept.keeping() {
                    kept.range(start, end)
                } else if carry.is_empty() {
                    Some(piece)
                } else {
                    carry.put_before(piece);
                    carry.line()
                };
                let line = line.filter(|l| l.len() <= PROBE_MAX);
                if let Some(done) = search.line(line, start) {
                    return Ok(done);
                }
            }
            line_end = Some(lo + nl as u64);
            carry.clear();
            j = nl;
        }
        if line_end.is_some() && !kept.keeping() {
            carry.put_before(&chunk[..j]);
        }
        pos = lo;
    }
    if let Some(end) = line_end {
        let line = if kept.keeping() {
            kept.range(0, end)
        } else {
            carry.line()
        };
        if let Some(done) = search.line(line.filter(|l| l.len() <= PROBE_MAX), 0) {
            return Ok(done);
        }
    }
    Ok(Err("few_turns"))
}

/// A line collected backwards, chunk by chunk: each piece is put in front of what is
/// held, in a buffer filled from its end, so a byte is copied once however many chunks
/// the line spans (gathering it anew at every chunk copied a long line many times).
#[derive(Default)]
struct Carry {
    buf: Vec<u8>,
    /// Where the held bytes start in `buf`: they run to its end.
    start: usize,
    /// The line grew past PROBE_MAX: it is not looked at.
    big: bool,
}

impl Carry {
    fn is_empty(&self) -> bool {
        !self.big && self.start == self.buf.len()
    }

    fn clear(&mut self) {
        self.start = self.buf.len();
        self.big = false;
    }

    fn put_before(&mut self, piece: &[u8]) {
        let held = self.buf.len() - self.start;
        if self.big || held + piece.len() > PROBE_MAX {
            self.big = true;
            return;
        }
        if self.start < piece.len() {
            // Doubling room, the held bytes moved to its end; never past PROBE_MAX.
            let room = (held + piece.len())
                .next_power_of_two()
                .clamp(4096, PROBE_MAX);
            let mut grown = vec![0u8; room];
            grown[room - held..].copy_from_slice(&self.buf[self.start..]);
            self.buf = grown;
            self.start = room - held;
        }
        self.start -= piece.len();
        self.buf[self.start..self.start + piece.len()].copy_from_slice(piece);
    }

    /// The line held, unless it is too long to look at.
    fn line(&self) -> Option<&[u8]> {
        (!self.big).then(|| &self.buf[self.start..])
    }
}

/// The file's end as read backwards, while it fits in KEEP_MAX: the bytes from `from`
/// to `end` at the end of one buffer, each chunk read straight into its place. Copying
/// every chunk into a buffer of its own, then gathering them, was a tenth of `scan`'s
/// instructions; and a line that spans chunks is read from here, not gathered.
struct Kept {
    buf: Option<scratch::Owned>,
    from: u64,
    end: u64,
    keeping: bool,
}

impl Kept {
    fn new(keep: bool, end: u64) -> Self {
        Kept {
            buf: None,
            from: end,
            end,
            keeping: keep,
        }
    }

    fn keeping(&self) -> bool {
        self.keeping
    }

    fn held(&self) -> usize {
        usize::try_from(self.end - self.from).unwrap_or(usize::MAX)
    }

    /// Whether `n` more bytes would still fit.
    fn fits(&self, n: usize) -> bool {
        self.held().saturating_add(n) <= KEEP_MAX
    }

    fn stop(&mut self) {
        self.keeping = false;
        self.buf = None;
    }

    /// While keeping, reads the `n` bytes before those held (at `at`, where `file`
    /// stands) into their place; `false` (nothing read) otherwise.
    fn read<F: Read>(&mut self, file: &mut F, at: u64, n: usize) -> io::Result<bool> {
        if !self.keeping {
            return Ok(false);
        }
        let held = self.held();
        let buf = self
            .buf
            .get_or_insert_with(|| scratch::Owned::at_least(BACK_CHUNK));
        let room = buf.bytes().len();
        if room - held < n {
            // Twice the room (the bytes held move to its end): at least what is needed,
            // and past KEEP_MAX only if that is (the caller stops keeping before).
            let need = held + n;
            let mut grown = scratch::Owned::at_least((2 * room).clamp(need, KEEP_MAX.max(need)));
            let new_room = grown.bytes().len();
            grown.bytes_mut()[new_room - held..].copy_from_slice(&buf.bytes()[room - held..]);
            *buf = grown;
        }
        let room = buf.bytes().len();
        let start = room - held - n;
        file.read_exact(&mut buf.bytes_mut()[start..start + n])?;
        self.from = at;
        Ok(true)
    }

    /// The file's bytes `[a, b)`, if they are all held.
    fn range(&self, a: u64, b: u64) -> Option<&[u8]> {
        if !self.keeping || a < self.from || b > self.end || a > b {
            return None;
        }
        let buf = self.buf.as_ref()?.bytes();
        let start = buf.len() - self.held() + usize::try_from(a - self.from).ok()?;
        buf.get(start..start + usize::try_from(b - a).ok()?)
    }

    /// The bytes from `offset` to the end, if they are all held.
    fn from(mut self, offset: u64) -> Option<KeptTail> {
        let len = self.range(offset, self.end)?.len();
        let buf = self.buf.take()?;
        let start = buf.bytes().len() - len;
        Some(KeptTail { buf, start })
    }
}

/// A file's end from a restart point, as the backward read kept it.
#[derive(Debug)]
pub struct KeptTail {
    buf: scratch::Owned,
    start: usize,
}

impl KeptTail {
    pub fn bytes(&self) -> &[u8] {
        &self.buf.bytes()[self.start..]
    }
}

/// Equal when the bytes are.
impl PartialEq for KeptTail {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for KeptTail {}

/// The first line (without its newline), if it ends within HEAD_MAX bytes; `limit` (a
/// later line start) bounds the read. Read in small steps: headers are usually a few KB.
fn read_head<F: Read + Seek>(file: &mut F, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let limit = usize::try_from(limit).unwrap_or(HEAD_MAX).min(HEAD_MAX);
    let mut head = Vec::new();
    let mut step = 16 * 1024;
    file.seek(SeekFrom::Start(0))?;
    while head.len() < limit {
        let from = head.len();
        let want = step.min(limit - from);
        head.resize(from + want, 0);
        file.read_exact(&mut head[from..])?;
        if let Some(nl) = memchr::memchr(b'\n', &head[from..]) {
            head.truncate(from + nl);
            return Ok(Some(head));
        }
        step *= 2;
    }
    Ok(None)
}

/// A feed for the file at `path` that starts at its restart point, its projector shown
/// the file's first line; `None` when the file is to be read whole (or cannot be read
/// now: the caller's read then reports that). For the daemon's first history read,
/// under the name its file table holds.
pub fn open_feed(
    name: Arc<str>,
    path: &Path,
    provider: ProviderKind,
    max_line: usize,
) -> Option<FileFeed> {
    let mut file = crate::tail::open(path).ok()?;
    // The daemon reads from its own handle: nothing to keep.
    start_feed(&mut file, name, path, provider, max_line, false).map(|(feed, _)| feed)
}

/// [`open_feed`] on `file` (the transcript at `path`), with the bytes from the restart
/// point to the end as the backward read found them, when it kept them: fed first, they
/// save reading them again (the file is then read on from the feed's position).
pub fn feed_keeping(
    file: &mut std::fs::File,
    name: Arc<str>,
    path: &Path,
    provider: ProviderKind,
    max_line: usize,
) -> Option<(FileFeed, Option<KeptTail>)> {
    start_feed(file, name, path, provider, max_line, true)
}

fn start_feed(
    file: &mut std::fs::File,
    name: Arc<str>,
    path: &Path,
    provider: ProviderKind,
    max_line: usize,
    keep: bool,
) -> Option<(FileFeed, Option<KeptTail>)> {
    match plan_keeping(file, provider, path, keep) {
        Ok(Plan::Tail { start, tail }) => {
            tracing::debug!(path = %path.display(), line = start.line_no, offset = start.offset, "History read from its last turn.");
            Some((start.feed_named(name, path, provider, max_line), tail))
        }
        Ok(Plan::Full(reason)) => {
            tracing::debug!(path = %path.display(), reason, "History read whole (tail-first does not apply).");
            None
        }
        Err(_) => None,
    }
}
