//! The bounded line reader: bytes in, complete lines out, memory capped by
//! `max_line_bytes` whatever the file holds.

use std::io::{self, Read};

/// How much of an oversized line is kept at each end, for cheap field extraction.
pub const OVERSIZE_KEEP: usize = 64 * 1024;
const CHUNK: usize = 64 * 1024;
/// The most a finished line's buffer keeps between lines. A file that once had a
/// multi-MB line (Claude Code writes them: snapshots, images, tool output) must not hold
/// that much for the rest of its life; hundreds of files would each pin their largest.
const PARTIAL_KEEP: usize = 2 * CHUNK;
/// Room reserved at once for a long line (past it the buffer doubles). Above glibc's
/// largest dynamic mmap threshold (32 MiB), so it is always mapped on its own.
const RESERVE: usize = 40 * 1024 * 1024;

/// What the reader yields.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A complete line (without its newline).
    Line {
        offset: u64,
        line_no: u64,
        bytes: &'a [u8],
    },
    /// A line longer than the limit, streamed past. Only its two ends were kept.
    Oversized {
        offset: u64,
        line_no: u64,
        len: u64,
        head: &'a [u8],
        tail: &'a [u8],
    },
}

#[derive(Debug, Default)]
struct Skip {
    len: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Skip {
    fn absorb(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        let room = OVERSIZE_KEEP.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        let from = bytes.len().saturating_sub(OVERSIZE_KEEP);
        self.tail.extend_from_slice(&bytes[from..]);
        if self.tail.len() > 2 * OVERSIZE_KEEP {
            let excess = self.tail.len() - OVERSIZE_KEEP;
            self.tail.drain(..excess);
        }
    }

    fn tail(&self) -> &[u8] {
        &self.tail[self.tail.len().saturating_sub(OVERSIZE_KEEP)..]
    }
}

/// Splits a byte stream into lines.
///
/// `offset()` is the commit point: the start of the first line not yet complete. It only
/// ever sits at a line start, so a checkpoint taken from it never lands inside a record.
#[derive(Debug)]
pub struct LineReader {
    max_line: usize,
    /// Where the next byte fed sits in the file.
    pos: u64,
    /// Start of the first incomplete line.
    commit: u64,
    /// 1-based number of the line that starts at `commit`.
    line_no: u64,
    partial: Vec<u8>,
    skip: Option<Skip>,
    /// After line `.0`, skip straight to offset `.1`, whose line is `.2`.
    jump: Option<(u64, u64, u64)>,
}

impl LineReader {
    /// A reader at the start of a file.
    pub fn new(max_line: usize) -> Self {
        Self::resume(0, 1, max_line)
    }

    /// A reader that continues at a saved line-start offset, whose line is `line_no`.
    pub fn resume(offset: u64, line_no: u64, max_line: usize) -> Self {
        LineReader {
            max_line: max_line.max(1),
            pos: offset,
            commit: offset,
            line_no: line_no.max(1),
            partial: Vec::new(),
            skip: None,
            jump: None,
        }
    }

    /// Once the line now next is complete, skips the bytes up to `to` (a line start,
    /// whose line is `to_line`) unread: they are read past, never framed.
    pub fn jump_after_next_line(&mut self, to: u64, to_line: u64) {
        self.jump = Some((self.line_no, to, to_line));
    }

    /// The commit point (start of the first incomplete line).
    pub fn offset(&self) -> u64 {
        self.commit
    }

    /// The 1-based line number of the line at the commit point.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// Where the next read must start: past any bytes held for an unfinished line.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Bytes read past the commit point and held (or skipped) for an unfinished line.
    pub fn pending(&self) -> u64 {
        self.pos - self.commit
    }

    /// Feeds bytes that follow `pos()` in the file.
    pub fn feed(&mut self, chunk: &[u8], mut out: impl FnMut(Item<'_>)) {
        let mut rest = chunk;
        while !rest.is_empty() {
            if let Some((after, to, to_line)) = self.jump
                && self.line_no > after
            {
                let n = usize::try_from(to.saturating_sub(self.pos))
                    .unwrap_or(usize::MAX)
                    .min(rest.len());
                self.pos += n as u64;
                rest = &rest[n..];
                if self.pos >= to {
                    self.commit = self.pos;
                    self.line_no = to_line;
                    self.jump = None;
                }
                continue;
            }
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                self.hold(rest);
                self.pos += rest.len() as u64;
                return;
            };
            let piece = &rest[..nl];
            let offset = self.commit;
            let line_no = self.line_no;
            if self.skip.is_none() && self.partial.is_empty() && piece.len() <= self.max_line {
                // The whole line is in this chunk: handed on without a copy.
                out(Item::Line {
                    offset,
                    line_no,
                    bytes: piece,
                });
            } else {
                self.hold(piece);
                if let Some(skip) = self.skip.take() {
                    out(Item::Oversized {
                        offset,
                        line_no,
                        len: skip.len,
                        head: &skip.head,
                        tail: skip.tail(),
                    });
                } else {
                    out(Item::Line {
                        offset,
                        line_no,
                        bytes: &self.partial,
                    });
                    self.partial.clear();
                    if self.partial.capacity() > PARTIAL_KEEP {
                        self.release_partial();
                    }
                }
            }
            self.pos += nl as u64 + 1;
            self.commit = self.pos;
            self.line_no += 1;
            rest = &rest[nl + 1..];
        }
    }

    /// Takes in bytes of the line now next: into the skip once the line is too long (with
    /// the bytes held so far), else onto the bytes held.
    fn hold(&mut self, bytes: &[u8]) {
        if let Some(skip) = &mut self.skip {
            skip.absorb(bytes);
        } else if self.partial.len() + bytes.len() > self.max_line {
            let mut skip = Skip::default();
            skip.absorb(&self.partial);
            skip.absorb(bytes);
            self.release_partial();
            self.skip = Some(skip);
        } else {
            self.grow(bytes.len());
            self.partial.extend_from_slice(bytes);
        }
    }

    /// Makes room for `more` bytes of an unfinished line. A line past `PARTIAL_KEEP` gets
    /// `RESERVE` bytes of room in one step: doubling would leave a trail of freed smaller
    /// buffers and copy the line several times, about three times its size at the peak.
    /// Pages of the room that the line never reaches are never touched, so they cost
    /// address space, not memory. The room is that large on purpose: allocators map a
    /// block that size on its own and unmap it when it is freed, so the memory goes back
    /// to the system at once instead of staying in the heap where the next file's buffer,
    /// placed a little further on, would touch new pages.
    fn grow(&mut self, more: usize) {
        let need = self.partial.len() + more;
        if need <= self.partial.capacity() {
            return;
        }
        let want = if need <= PARTIAL_KEEP {
            need.next_power_of_two().min(PARTIAL_KEEP)
        } else if need <= RESERVE {
            RESERVE
        } else {
            need.next_power_of_two()
        };
        self.partial.reserve_exact(want - self.partial.len());
    }

    fn release_partial(&mut self) {
        // Give the memory back: one huge line must not pin its buffer for the file's life.
        self.partial = Vec::new();
    }

    /// Reads `r` (positioned at `pos()`) to its end, feeding every chunk. Returns the
    /// number of bytes read.
    pub fn read_to_end<R: Read>(
        &mut self,
        r: &mut R,
        mut out: impl FnMut(Item<'_>),
    ) -> io::Result<u64> {
        super::scratch::with(super::scratch::Use::Read, CHUNK, |buf| {
            let mut total = 0u64;
            loop {
                let n = match r.read(buf) {
                    Ok(0) => return Ok(total),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                total += n as u64;
                self.feed(&buf[..n], &mut out);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, PartialEq, Eq, Clone)]
    enum Got {
        Line(u64, u64, Vec<u8>),
        Big(u64, u64, u64),
    }

    fn collect(r: &mut LineReader, chunks: &[&[u8]]) -> Vec<Got> {
        let mut got = Vec::new();
        for c in chunks {
            r.feed(c, |it| match it {
                Item::Line {
                    offset,
                    line_no,
                    bytes,
                } => got.push(Got::Line(offset, line_no, bytes.to_vec())),
                Item::Oversized {
                    offset,
                    line_no,
                    len,
                    ..
                } => got.push(Got::Big(offset, line_no, len)),
            });
        }
        got
    }

    #[test]
    fn partial_line_waits_for_its_newline() {
        let mut r = LineReader::new(100);
        let got = collect(&mut r, &[b"{\"a\":1}\n{\"b\"", b":2"]);
        assert_eq!(got, vec![Got::Line(0, 1, b"{\"a\":1}".to_vec())]);
        assert_eq!(r.offset(), 8);
        assert_eq!(r.pos(), 14);
        let got = collect(&mut r, &[b"}\n"]);
        assert_eq!(got, vec![Got::Line(8, 2, b"{\"b\":2}".to_vec())]);
        assert_eq!(r.offset(), 16);
        assert_eq!(r.line_no(), 3);
    }

    #[test]
    fn oversized_line_is_streamed_past_and_keeps_ends() {
        let mut r = LineReader::new(10);
        let mut big = b"HEAD".to_vec();
        big.extend(std::iter::repeat_n(b'x', 300_000));
        big.extend_from_slice(b"TAIL\nok\n");
        let mut heads = Vec::new();
        let mut lines = Vec::new();
        for chunk in big.chunks(7777) {
            r.feed(chunk, |it| match it {
                Item::Oversized {
                    len,
                    head,
                    tail,
                    line_no,
                    ..
                } => {
                    heads.push((
                        len,
                        head.starts_with(b"HEAD"),
                        tail.ends_with(b"TAIL"),
                        line_no,
                    ));
                }
                Item::Line { bytes, line_no, .. } => lines.push((bytes.to_vec(), line_no)),
            });
            assert!(r.partial.len() <= 10, "held more than the limit");
        }
        assert_eq!(heads, vec![(300_008, true, true, 1)]);
        assert_eq!(lines, vec![(b"ok".to_vec(), 2)]);
        assert_eq!(r.offset(), big.len() as u64);
    }

    #[test]
    fn resume_from_saved_offset_picks_up_missed_bytes() {
        let data = b"one\ntwo\nthree\n";
        let mut first = LineReader::new(64);
        let got = collect(&mut first, &[&data[..6]]);
        assert_eq!(got, vec![Got::Line(0, 1, b"one".to_vec())]);
        // A new reader from the committed offset re-reads the unfinished line whole.
        let mut again = LineReader::resume(first.offset(), first.line_no(), 64);
        let got = collect(&mut again, &[&data[first.offset() as usize..]]);
        assert_eq!(
            got,
            vec![
                Got::Line(4, 2, b"two".to_vec()),
                Got::Line(8, 3, b"three".to_vec())
            ]
        );
    }

    #[test]
    fn a_jump_skips_unread_to_its_target_after_the_next_line() {
        let data = b"one\ntwo\nthree\nfour\n";
        for size in 1..data.len() {
            let mut r = LineReader::new(64);
            r.jump_after_next_line(14, 4);
            let chunks: Vec<&[u8]> = data.chunks(size).collect();
            let got = collect(&mut r, &chunks);
            assert_eq!(
                got,
                vec![
                    Got::Line(0, 1, b"one".to_vec()),
                    Got::Line(14, 4, b"four".to_vec())
                ],
                "chunks of {size}"
            );
            assert_eq!((r.offset(), r.line_no()), (data.len() as u64, 5));
        }
    }

    proptest! {
        #[test]
        fn any_chunking_yields_the_same_lines(
            lines in proptest::collection::vec(proptest::collection::vec(0u8..255, 0..40), 0..20),
            cuts in proptest::collection::vec(1usize..17, 1..40),
            max in 1usize..48,
        ) {
            let lines: Vec<Vec<u8>> = lines.into_iter().map(|l| l.into_iter().filter(|b| *b != b'\n').collect()).collect();
            let mut data = Vec::new();
            for l in &lines { data.extend_from_slice(l); data.push(b'\n'); }
            let mut expect = Vec::new();
            let mut off = 0u64;
            for (i, l) in lines.iter().enumerate() {
                let n = i as u64 + 1;
                if l.len() > max { expect.push(Got::Big(off, n, l.len() as u64)); } else { expect.push(Got::Line(off, n, l.clone())); }
                off += l.len() as u64 + 1;
            }
            let mut r = LineReader::new(max);
            let mut chunks = Vec::new();
            let mut at = 0;
            let mut ci = 0;
            while at < data.len() {
                let n = cuts[ci % cuts.len()].min(data.len() - at);
                chunks.push(&data[at..at + n]);
                at += n;
                ci += 1;
            }
            let got = collect(&mut r, &chunks);
            prop_assert_eq!(got, expect);
            prop_assert_eq!(r.offset(), data.len() as u64);
            prop_assert_eq!(r.pending(), 0);
            prop_assert!(r.partial.capacity() <= max.max(64) * 2 + 64);
        }
    }
}
