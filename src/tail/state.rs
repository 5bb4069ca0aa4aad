//! Per-file tail state: everything the daemon knows about one file's bytes, in one place.
//!
//! It holds the file's identity (device, inode), how far it was read, the committed
//! offset (always the start of the first incomplete line) with its line number, and a
//! marker: a hash of the bytes just before the committed offset. A fresh `stat` plus the
//! marker tell an append (read on) from a truncation, a replacement or an in-place
//! rewrite (re-derive the file from its content). It also holds the open handle, which
//! the daemon closes when the file goes idle and reopens on change.

use super::LineReader;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// How many bytes before the committed offset the marker covers.
pub const MARKER_LEN: u64 = 64;

/// A file's identity: the same path may name another file after a replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// The parts of a `stat` that say whether a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub id: FileId,
    pub size: u64,
    /// Nanoseconds since the epoch, saturated at `i64`'s ends (the years 1677 and 2262):
    /// half the room of an `i128` in every tracked file's state.
    pub mtime_ns: i64,
    /// Status change time: moves on any write and any metadata change, and, unlike the
    /// mtime, cannot be set back (so a rewrite that restores the old mtime still shows).
    pub ctime_ns: i64,
}

/// A time of `stat(2)` in nanoseconds since the epoch, saturated.
fn nanos(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

impl Stat {
    /// The modification time in Unix ms.
    pub fn mtime_ms(&self) -> i64 {
        self.mtime_ns / 1_000_000
    }

    pub fn of(m: &Metadata) -> Self {
        Stat {
            id: FileId {
                dev: m.dev(),
                ino: m.ino(),
            },
            size: m.size(),
            mtime_ns: nanos(m.mtime(), m.mtime_nsec()),
            ctime_ns: nanos(m.ctime(), m.ctime_nsec()),
        }
    }
}

/// What a fresh stat says about a tailed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Same identity, size and modification time.
    Same,
    /// Same identity, and at least as long as what was read: probably an append; the
    /// marker decides.
    Changed,
    /// Shorter than what was read.
    Truncated,
    /// Another file now has this path.
    Replaced,
    /// Same identity and size, but the modification or status change time moved:
    /// written in place (perhaps with the old mtime put back: the ctime still moves),
    /// or only its metadata changed. Only a re-read can tell.
    Touched,
}

#[derive(Debug)]
pub struct TailState {
    id: FileId,
    /// How many bytes were read (the reader's position; bytes of an unfinished line
    /// included). A file shorter than this was truncated.
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    /// Committed offset: the start of the first incomplete line.
    offset: u64,
    /// 1-based number of the line at `offset`.
    line_no: u64,
    /// Hash of the up to [`MARKER_LEN`] bytes before `offset`.
    marker: u64,
    handle: Option<File>,
}

/// A closed tail state's numbers: what a file idle for long keeps outside memory
/// (`daemon/table.rs`), and is brought back from exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub id: FileId,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub offset: u64,
    pub line_no: u64,
    pub marker: u64,
}

impl Parts {
    /// The numbers as one line of space-separated decimals, appended to `out`;
    /// [`Parts::decode`] reads them back.
    pub fn encode(&self, out: &mut String) {
        use std::fmt::Write;
        // Taken apart in full, as `decode` builds them in full: a field added later
        // cannot be left out of one side.
        let Parts {
            id: FileId { dev, ino },
            size,
            mtime_ns,
            ctime_ns,
            offset,
            line_no,
            marker,
        } = *self;
        let _ = write!(
            out,
            "{dev} {ino} {size} {mtime_ns} {ctime_ns} {offset} {line_no} {marker}"
        );
    }

    /// The numbers [`Parts::encode`] wrote at the start of `text`, and what follows them
    /// (after one space, if there is more); `None` if they are not all there.
    pub fn decode(text: &str) -> Option<(Parts, &str)> {
        fn next<T: std::str::FromStr>(f: &mut std::str::SplitN<'_, char>) -> Option<T> {
            f.next()?.parse().ok()
        }
        let mut f = text.splitn(9, ' ');
        // Fields are evaluated in the order written, which is the order encoded.
        let parts = Parts {
            id: FileId {
                dev: next(&mut f)?,
                ino: next(&mut f)?,
            },
            size: next(&mut f)?,
            mtime_ns: next(&mut f)?,
            ctime_ns: next(&mut f)?,
            offset: next(&mut f)?,
            line_no: next(&mut f)?,
            marker: next(&mut f)?,
        };
        Some((parts, f.next().unwrap_or("")))
    }
}

impl TailState {
    /// A file not read yet.
    pub fn new(id: FileId) -> Self {
        TailState {
            id,
            size: 0,
            mtime_ns: i64::MIN,
            ctime_ns: i64::MIN,
            offset: 0,
            line_no: 1,
            marker: marker_hash(&[]),
            handle: None,
        }
    }

    /// A file committed up to `offset` by an earlier run (restored from a checkpoint):
    /// [`TailState::marker_matches`] then tells whether it was only appended to since.
    pub fn resumed(id: FileId, offset: u64, line_no: u64, marker: u64) -> Self {
        TailState {
            id,
            size: offset,
            mtime_ns: i64::MIN,
            ctime_ns: i64::MIN,
            offset,
            line_no,
            marker,
            handle: None,
        }
    }

    /// The numbers of this state (not its handle).
    pub fn parts(&self) -> Parts {
        Parts {
            id: self.id,
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            offset: self.offset,
            line_no: self.line_no,
            marker: self.marker,
        }
    }

    /// The state `parts` describe, with no handle open.
    pub fn from_parts(p: Parts) -> Self {
        TailState {
            id: p.id,
            size: p.size,
            mtime_ns: p.mtime_ns,
            ctime_ns: p.ctime_ns,
            offset: p.offset,
            line_no: p.line_no,
            marker: p.marker,
            handle: None,
        }
    }

    pub fn marker(&self) -> u64 {
        self.marker
    }

    pub fn id(&self) -> FileId {
        self.id
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The file's modification time when it was last read (ns since the epoch).
    pub fn mtime_ns(&self) -> i64 {
        self.mtime_ns
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    pub fn is_open(&self) -> bool {
        self.handle.is_some()
    }

    /// The one stat [`TailState::compare`] calls `Same`; `None` for a state that has no
    /// modification time yet (resumed from a checkpoint, not stat'ed since), which no
    /// stat matches.
    pub fn same_stat(&self) -> Option<Stat> {
        (self.mtime_ns != i64::MIN).then_some(Stat {
            id: self.id,
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
        })
    }

    /// Compares a fresh stat of the path with what was read.
    pub fn compare(&self, now: &Stat) -> Change {
        if now.id != self.id {
            Change::Replaced
        } else if now.size < self.size {
            Change::Truncated
        } else if now.size == self.size && self.mtime_ns != i64::MIN {
            // No byte was added, so any write was in place: an append always grows it.
            if now.mtime_ns == self.mtime_ns && now.ctime_ns == self.ctime_ns {
                Change::Same
            } else {
                Change::Touched
            }
        } else {
            Change::Changed
        }
    }

    /// The open handle, opening `path` if needed. `None` when the file at `path` is no
    /// longer the one this state describes.
    pub fn handle(&mut self, path: &Path) -> io::Result<Option<&mut File>> {
        if self.handle.is_none() {
            let f = super::open(path)?;
            if Stat::of(&f.metadata()?).id != self.id {
                return Ok(None);
            }
            self.handle = Some(f);
        }
        Ok(self.handle.as_mut())
    }

    /// The open handle, if any (a deleted file can still be drained through it).
    pub fn open_handle(&mut self) -> Option<&mut File> {
        self.handle.as_mut()
    }

    /// Closes the handle; the next read reopens the path.
    pub fn close(&mut self) {
        self.handle = None;
    }

    /// Do the bytes before the committed offset still match what was read?
    pub fn marker_matches(&mut self, path: &Path) -> io::Result<bool> {
        let (offset, marker) = (self.offset, self.marker);
        let Some(f) = self.handle(path)? else {
            return Ok(false);
        };
        Ok(read_marker(f, offset)? == Some(marker))
    }

    /// Records how far `reader` got in the open file: offsets, size read, the marker and
    /// the modification time as of now.
    pub fn commit(&mut self, reader: &LineReader) -> io::Result<()> {
        let Some(f) = self.handle.as_ref() else {
            return Ok(());
        };
        self.size = reader.pos();
        if reader.offset() != self.offset {
            self.offset = reader.offset();
            self.marker = read_marker(f, self.offset)?.unwrap_or(0);
        }
        self.line_no = reader.line_no();
        let stat = Stat::of(&f.metadata()?);
        self.mtime_ns = stat.mtime_ns;
        self.ctime_ns = stat.ctime_ns;
        Ok(())
    }
}

/// The marker of the bytes before `offset`, or `None` if the file is now shorter.
fn read_marker(f: &File, offset: u64) -> io::Result<Option<u64>> {
    let len = offset.min(MARKER_LEN);
    let mut buf = [0u8; MARKER_LEN as usize];
    let buf = &mut buf[..usize::try_from(len).unwrap_or(0)];
    match f.read_exact_at(buf, offset - len) {
        Ok(()) => Ok(Some(marker_hash(buf))),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// FNV-1a, 64 bits: enough to tell a rewrite from an append.
fn marker_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state's numbers written as text read back as they were, extremes included,
    /// with what follows them; a short or garbled text reads back as nothing.
    #[test]
    fn parts_read_back_from_their_text() {
        for p in [
            Parts {
                id: FileId { dev: 1, ino: 2 },
                size: 3,
                mtime_ns: i64::MIN,
                ctime_ns: -4,
                offset: 5,
                line_no: 6,
                marker: u64::MAX,
            },
            TailState::new(FileId { dev: 0, ino: 0 }).parts(),
        ] {
            let mut text = String::new();
            p.encode(&mut text);
            assert_eq!(Parts::decode(&text), Some((p, "")));
            text.push_str(" 7 8\n{\"a\": 1}");
            assert_eq!(Parts::decode(&text), Some((p, "7 8\n{\"a\": 1}")));
        }
        assert_eq!(Parts::decode("1 2 3 4 5 6 7"), None);
        assert_eq!(Parts::decode("1 2 3 4 x 6 7 8"), None);
        assert_eq!(
            Parts::decode("-1 2 3 4 5 6 7 8"),
            None,
            "a device is never negative"
        );
    }
    use std::io::{Seek, SeekFrom};

    fn stat(p: &Path) -> Stat {
        Stat::of(&std::fs::metadata(p).unwrap())
    }

    /// Reads the file the way the daemon does and commits.
    fn read(st: &mut TailState, r: &mut LineReader, p: &Path) {
        let f = st.handle(p).unwrap().unwrap();
        f.seek(SeekFrom::Start(r.pos())).unwrap();
        r.read_to_end(f, |_| {}).unwrap();
        st.commit(r).unwrap();
    }

    #[test]
    fn append_truncate_replace_and_rewrite_are_told_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("s.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut st = TailState::new(stat(&p).id);
        let mut r = LineReader::new(1024);
        read(&mut st, &mut r, &p);
        assert_eq!((st.offset(), st.line_no(), st.size()), (8, 2, 13));
        assert_eq!(st.compare(&stat(&p)), Change::Same);
        assert_eq!(st.same_stat(), Some(stat(&p)));
        let resumed = TailState::resumed(st.id(), st.offset(), st.line_no(), st.marker());
        assert_eq!(resumed.same_stat(), None, "no stat matches a resumed state");
        assert_ne!(resumed.compare(&stat(&p)), Change::Same);

        // Append: same file, longer, marker intact.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, b"2}\n").unwrap();
        assert_eq!(st.compare(&stat(&p)), Change::Changed);
        assert!(st.marker_matches(&p).unwrap());
        read(&mut st, &mut r, &p);
        assert_eq!((st.offset(), st.line_no()), (16, 3));

        // Rewrite in place, same length: the marker no longer matches.
        std::fs::write(&p, b"{\"x\":1}\n{\"y\":2}\n").unwrap();
        assert!(!st.marker_matches(&p).unwrap());

        // Truncation.
        std::fs::write(&p, b"{}\n").unwrap();
        assert_eq!(st.compare(&stat(&p)), Change::Truncated);

        // Replacement: a new inode at the same path.
        let q = tmp.path().join("new.jsonl");
        std::fs::write(&q, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        std::fs::rename(&q, &p).unwrap();
        assert_eq!(st.compare(&stat(&p)), Change::Replaced);
        st.close();
        assert!(st.handle(&p).unwrap().is_none(), "a reopen must notice");
    }

    #[test]
    fn a_same_size_rewrite_with_the_old_mtime_put_back_is_not_same() {
        use std::os::unix::fs::FileExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("s.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        let mut st = TailState::new(stat(&p).id);
        let mut r = LineReader::new(1024);
        read(&mut st, &mut r, &p);
        assert_eq!(st.compare(&stat(&p)), Change::Same);
        let before = std::fs::metadata(&p).unwrap();
        // The status change time has a coarse tick: let it move.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(b"{\"a\":3}", 0).unwrap();
        f.set_modified(before.modified().unwrap()).unwrap();
        let now = stat(&p);
        assert_eq!(
            (now.size, now.mtime_ns),
            (13 + 3, Stat::of(&before).mtime_ns)
        );
        assert_eq!(st.compare(&now), Change::Touched);
    }
}
