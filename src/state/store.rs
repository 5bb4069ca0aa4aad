//! The state on disk: a base in two generations, plus logs of what changed since.
//!
//! A base generation (`state.json`) is one header line (`baton-state <version> <crc32>
//! <length>`, fixed width) and a body of JSON lines: a `meta` line, one `file` line per
//! transcript, and a `ledger` line. It is streamed to a temporary file (the header is
//! patched in last), fsync'ed, renamed over the current file (the current one becoming
//! the previous generation first) and the directory is fsync'ed, so a crash leaves
//! either generation whole. Loading checks the length and the checksum before trusting
//! a byte of the body.
//!
//! Between bases, changes are appended to numbered logs (`state-log-N.jsonl`), one line
//! per changed file, removed file or decided id, each with its own checksum and fsync'ed
//! per write. A base names the last log merged into it; loading applies the later ones.
//! Each line stands alone (one file's checkpoint is consistent by itself), so a torn
//! last write loses only its unfinished lines. Memory and writes are O(what changed),
//! not O(files), except when a base is written, which streams.

use super::Decision;
use super::crc::{Crc, crc32};
use super::ledger::Ledger;
use crate::model::ProviderKind;
use crate::reduce::SavedSession;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub const VERSION: u32 = 2;
const MAGIC: &str = "baton-state";
pub const CURRENT: &str = "state.json";
pub const PREVIOUS: &str = "state.json.prev";
pub const TMP: &str = "state.json.tmp";

/// Where one transcript was committed: enough to tell an append from a rewrite, and
/// to go on from there without re-reading what came before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
    /// Always the start of a line.
    pub offset: u64,
    /// 1-based line number at `offset`.
    pub line: u64,
    /// Hash of the bytes just before `offset` (see `tail::state`).
    pub marker: u64,
    /// The file's reading context at `offset`. Absent (a state file from before it was
    /// kept): the file is re-read from its first byte, silently up to `offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
}

/// What the pipeline knew about a file at its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub provider: ProviderKind,
    /// The projector's context (see `Projector::save`).
    pub projector: String,
    /// The reducer's sessions last fed from this file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SavedSession>,
}

/// What a base generation says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub generation: u64,
    /// Unix ms.
    pub written_at: i64,
    /// The last log merged into this generation.
    pub log: u64,
    /// When the first run began (Unix ms): what transcripts held before it is history.
    /// A file this state has no checkpoint for is read from its start, live only for
    /// records since then (and within the catch-up window).
    #[serde(default)]
    pub since: i64,
}

/// One line of a base or a log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Line {
    Meta(Meta),
    File(Checkpoint),
    /// A transcript no longer tracked (logs only).
    Removed(String),
    /// An event id decided (logs only; a base has the whole ledger).
    Decided(Decision),
    Ledger(Ledger),
}

impl Line {
    pub fn encode(&self) -> Vec<u8> {
        // Plain numbers and strings: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// `Line::Ledger(ledger.clone()).encode()` without the clone: a full ledger is a
    /// few MB, and the clone outlived the write in the allocator's pages.
    pub fn encode_ledger(ledger: &Ledger) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "lowercase")]
        enum Borrowed<'a> {
            Ledger(&'a Ledger),
        }
        serde_json::to_vec(&Borrowed::Ledger(ledger)).unwrap_or_default()
    }
}

/// Only what is needed to tell which file a line is about.
#[derive(Deserialize)]
struct PathOf<'a> {
    #[serde(borrow)]
    file: Option<FilePath<'a>>,
    #[serde(borrow)]
    removed: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct FilePath<'a> {
    #[serde(borrow)]
    path: Cow<'a, str>,
}

/// The path a `file` or `removed` line is about, and whether the file is gone.
pub fn path_of(line: &str) -> Option<(String, bool)> {
    let p: PathOf<'_> = serde_json::from_str(line).ok()?;
    match (p.file, p.removed) {
        (Some(f), _) => Some((f.path.into_owned(), false)),
        (None, Some(r)) => Some((r.into_owned(), true)),
        (None, None) => None,
    }
}

/// A loaded state: a base generation with the later logs applied. File lines stay raw
/// (parsed when their transcript is found), so loading 10,000 checkpoints costs their
/// bytes, not their parsed form.
#[derive(Debug, Default)]
pub struct Base {
    pub meta: Meta,
    pub files: HashMap<String, Box<str>>,
    pub ledger: Ledger,
    /// Decided lines from the logs, for the ledger (they need the catch-up window).
    pub decided: Vec<Decision>,
}

/// Why a generation cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("no header line")]
    NoHeader,
    #[error("not a baton state file")]
    Magic,
    #[error("state format version {0} is not supported (this baton reads {VERSION})")]
    Version(String),
    #[error("length mismatch: header says {want}, body has {got} bytes (truncated?)")]
    Length { want: String, got: u64 },
    #[error("checksum mismatch")]
    Checksum,
    #[error("body: {0}")]
    Body(String),
    #[error("{0}")]
    Io(#[from] io::Error),
}

const HEADER_LEN: usize = MAGIC.len() + 1 + 1 + 1 + 8 + 1 + 16 + 1;

fn header(crc: u32, len: u64) -> String {
    format!("{MAGIC} {VERSION} {crc:08x} {len:016}\n")
}

/// Checks a base's header, length and checksum, streaming; leaves `f` after the header.
fn verify(f: &mut File) -> Result<(), DecodeError> {
    let mut r = BufReader::new(&mut *f);
    let mut head = Vec::new();
    r.by_ref().take(256).read_until(b'\n', &mut head)?;
    if head.last() != Some(&b'\n') {
        return Err(DecodeError::NoHeader);
    }
    let head = std::str::from_utf8(&head[..head.len() - 1]).map_err(|_| DecodeError::Magic)?;
    let mut parts = head.split(' ');
    if parts.next() != Some(MAGIC) {
        return Err(DecodeError::Magic);
    }
    let version = parts.next().unwrap_or_default();
    if version != VERSION.to_string() {
        return Err(DecodeError::Version(version.to_owned()));
    }
    let crc = parts.next().unwrap_or_default();
    let len = parts.next().unwrap_or_default();
    let mut c = Crc::default();
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        c.update(&buf[..n]);
        got += n as u64;
    }
    if len.parse::<u64>().ok() != Some(got) {
        return Err(DecodeError::Length {
            want: len.to_owned(),
            got,
        });
    }
    if u32::from_str_radix(crc, 16).ok() != Some(c.finish()) {
        return Err(DecodeError::Checksum);
    }
    let body_at = (head.len() + 1) as u64;
    f.seek(SeekFrom::Start(body_at))?;
    Ok(())
}

/// Calls `each` with every body line of a verified base.
pub fn for_each_line(
    path: &Path,
    mut each: impl FnMut(&str) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut f = File::open(path)?;
    verify(&mut f)?;
    for line in BufReader::new(f).lines() {
        each(&line?)?;
    }
    Ok(())
}

/// Reads one base generation. `Ok(None)`: the file does not exist.
pub fn read(dir: &Path, name: &str) -> Result<Option<Base>, String> {
    let path = dir.join(name);
    if !path.exists() {
        return Ok(None);
    }
    let mut base = Base::default();
    let mut seen_meta = false;
    for_each_line(&path, |line| {
        if line.starts_with("{\"file\":") {
            let (p, _) = path_of(line)
                .ok_or_else(|| DecodeError::Body("a file line without a path".into()))?;
            base.files.insert(p, line.into());
            return Ok(());
        }
        match serde_json::from_str::<Line>(line).map_err(|e| DecodeError::Body(e.to_string()))? {
            Line::Meta(m) => {
                base.meta = m;
                seen_meta = true;
            }
            Line::Ledger(l) => base.ledger = l.loaded(),
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    if !seen_meta {
        return Err("no meta line".to_owned());
    }
    Ok(Some(base))
}

/// Applies the logs after `base.meta.log`, in order. A line that fails its checksum
/// ends that log (a torn write); the lines before it stand.
pub fn apply_logs(dir: &Path, base: &mut Base) -> io::Result<()> {
    for (n, path) in list_logs(dir)? {
        if n <= base.meta.log {
            continue;
        }
        read_log(&path, |line, _| {
            if let Some((p, gone)) = path_of(line) {
                if gone {
                    base.files.remove(&p);
                } else {
                    base.files.insert(p, line.into());
                }
            } else if let Ok(Line::Decided(d)) = serde_json::from_str::<Line>(line) {
                base.decided.push(d);
            }
        })?;
    }
    Ok(())
}

/// Streams a new base generation into the temporary file.
pub struct BaseWriter {
    out: BufWriter<File>,
    crc: Crc,
    len: u64,
}

impl BaseWriter {
    pub fn create(dir: &Path) -> io::Result<BaseWriter> {
        let tmp = dir.join(TMP);
        // A leftover (or planted) temporary file or symlink goes; create_new never
        // follows a symlink.
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut out = BufWriter::with_capacity(64 * 1024, f);
        out.write_all(&[b' '; HEADER_LEN])?;
        Ok(BaseWriter {
            out,
            crc: Crc::default(),
            len: 0,
        })
    }

    /// Appends one body line (without its newline).
    pub fn line(&mut self, bytes: &[u8]) -> io::Result<()> {
        for part in [bytes, b"\n"] {
            self.out.write_all(part)?;
            self.crc.update(part);
            self.len += part.len() as u64;
        }
        Ok(())
    }

    /// Patches the header in, fsyncs, makes it the current generation and fsyncs the
    /// directory. The current one becomes the previous, unless `over_current`: then the
    /// current one is unusable (the base was loaded from the previous generation), and
    /// the previous generation stays what it is, the last good one.
    pub fn finish(self, dir: &Path, over_current: bool) -> io::Result<u64> {
        let f = self
            .out
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        let head = header(self.crc.finish(), self.len);
        debug_assert_eq!(head.len(), HEADER_LEN);
        f.write_all_at(head.as_bytes(), 0)?;
        f.sync_all()?;
        drop(f);
        let current = dir.join(CURRENT);
        if !over_current {
            match fs::rename(&current, dir.join(PREVIOUS)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        fs::rename(dir.join(TMP), &current)?;
        sync_dir(dir)?;
        Ok(self.len)
    }
}

/// Deletes what a failed write left of the temporary file: on a small filesystem it may
/// hold the very space the next try needs.
pub fn discard_tmp(dir: &Path) {
    let _ = fs::remove_file(dir.join(TMP));
}

/// Whether a write failed for want of space (the disk or the quota is full).
pub fn is_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/file` with `bytes` whole or not at all: written to `dir/tmp`, fsynced,
/// renamed over it, and the directory fsynced (the small state files: mutes, remotes).
pub fn write_atomic(dir: &Path, file: &str, tmp: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, dir.join(file))?;
    sync_dir(dir)
}

pub fn log_name(n: u64) -> String {
    format!("state-log-{n}.jsonl")
}

/// Every log in `dir`, by number.
pub fn list_logs(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    super::numbered(dir, "state-log-", ".jsonl")
}

/// Calls `each` with the JSON of every intact line of a log and the offset where that
/// JSON starts, up to the first bad line.
pub fn read_log(path: &Path, mut each: impl FnMut(&str, u64)) -> io::Result<()> {
    let f = File::open(path)?;
    let mut at = 0u64;
    for line in BufReader::new(f).split(b'\n') {
        let line = line?;
        let start = at + 9;
        at += line.len() as u64 + 1;
        let Some((crc, json)) = line.split_at_checked(8) else {
            break;
        };
        let json = json.strip_prefix(b" ").unwrap_or_default();
        let ok = std::str::from_utf8(crc)
            .ok()
            .and_then(|c| u32::from_str_radix(c, 16).ok())
            == Some(crc32(json));
        let Some(json) = ok.then(|| std::str::from_utf8(json).ok()).flatten() else {
            break;
        };
        each(json, start);
    }
    Ok(())
}

/// Appends checksummed lines to one log.
pub struct LogWriter {
    file: File,
    pub number: u64,
    /// Bytes written by this process.
    pub written: u64,
    /// The length the file had when opened.
    start: u64,
}

impl LogWriter {
    pub fn open(dir: &Path, number: u64) -> io::Result<LogWriter> {
        let file = super::open_append(&dir.join(log_name(number)))?;
        let start = file.metadata()?.len();
        Ok(LogWriter {
            file,
            number,
            written: 0,
            start,
        })
    }

    /// Appends `lines` (JSON, no newlines) durably.
    pub fn append<'a>(&mut self, lines: impl Iterator<Item = &'a [u8]>) -> io::Result<()> {
        let mut buf = Vec::new();
        for json in lines {
            buf.extend_from_slice(format!("{:08x} ", crc32(json)).as_bytes());
            buf.extend_from_slice(json);
            buf.push(b'\n');
        }
        let res = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = res {
            // What a failed write left is a torn line (which would end the log when it
            // is read) taking space that may be short: cut it off.
            let _ = self.file.set_len(self.start + self.written);
            return Err(e);
        }
        self.written += buf.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A checkpoint of `path` at `offset` (the saver's tests use it too).
    pub(in crate::state) fn cp(path: &str, offset: u64) -> Checkpoint {
        Checkpoint {
            path: path.to_owned(),
            dev: 1,
            ino: 2,
            offset,
            line: 4,
            marker: u64::MAX,
            resume: None,
        }
    }

    fn write_base(dir: &Path, generation: u64, log: u64, files: &[Checkpoint]) -> Vec<u8> {
        let mut ledger = Ledger::default();
        ledger.record("claude/s1", "id1".to_owned(), Some(1_000), 1_000, 600_000);
        let mut w = BaseWriter::create(dir).unwrap();
        let meta = Meta {
            generation,
            written_at: 1,
            log,
            since: 1,
        };
        w.line(&Line::Meta(meta).encode()).unwrap();
        for f in files {
            w.line(&Line::File(f.clone()).encode()).unwrap();
        }
        let line = Line::encode_ledger(&ledger);
        assert_eq!(line, Line::Ledger(ledger).encode());
        w.line(&line).unwrap();
        w.finish(dir, false).unwrap();
        fs::read(dir.join(CURRENT)).unwrap()
    }

    #[test]
    fn round_trip_and_every_truncation_is_rejected() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = write_base(tmp.path(), 3, 0, &[cp("/a/b.jsonl", 300)]);
        let back = read(tmp.path(), CURRENT).unwrap().unwrap();
        assert_eq!(back.meta.generation, 3);
        let line = &back.files["/a/b.jsonl"];
        match serde_json::from_str::<Line>(line).unwrap() {
            Line::File(c) => assert_eq!(c, cp("/a/b.jsonl", 300)),
            other => panic!("{other:?}"),
        }
        assert!(back.ledger.contains("id1"));
        let bad = tmp.path().join("bad");
        for cut in 0..bytes.len() {
            fs::write(&bad, &bytes[..cut]).unwrap();
            assert!(read(tmp.path(), "bad").is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0x01;
        fs::write(&bad, &flipped).unwrap();
        assert!(read(tmp.path(), "bad").is_err());
        fs::write(&bad, b"garbage\n{}").unwrap();
        assert!(read(tmp.path(), "bad").is_err());
    }

    #[test]
    fn writing_keeps_the_previous_generation() {
        let tmp = tempfile::tempdir().unwrap();
        write_base(tmp.path(), 3, 0, &[]);
        write_base(tmp.path(), 4, 0, &[]);
        assert_eq!(
            read(tmp.path(), CURRENT).unwrap().unwrap().meta.generation,
            4
        );
        assert_eq!(
            read(tmp.path(), PREVIOUS).unwrap().unwrap().meta.generation,
            3
        );
        assert!(!tmp.path().join(TMP).exists());
    }

    #[test]
    fn writing_over_an_unusable_current_keeps_the_good_previous_one() {
        let tmp = tempfile::tempdir().unwrap();
        write_base(tmp.path(), 3, 0, &[]);
        write_base(tmp.path(), 4, 0, &[]);
        fs::write(tmp.path().join(CURRENT), b"baton-state 2 trunc").unwrap();
        let mut w = BaseWriter::create(tmp.path()).unwrap();
        let meta = Meta {
            generation: 5,
            ..Meta::default()
        };
        w.line(&Line::Meta(meta).encode()).unwrap();
        w.finish(tmp.path(), true).unwrap();
        let generation = |name| read(tmp.path(), name).unwrap().unwrap().meta.generation;
        assert_eq!(generation(CURRENT), 5);
        assert_eq!(generation(PREVIOUS), 3, "the damaged one is not kept");
    }

    #[test]
    fn later_logs_apply_in_order_and_a_torn_line_ends_its_log() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_base(dir, 1, 1, &[cp("/a", 10), cp("/b", 10)]);
        // Log 1 is merged into the base already: ignored.
        let mut l1 = LogWriter::open(dir, 1).unwrap();
        l1.append(
            [Line::Removed("/a".into()).encode()]
                .iter()
                .map(Vec::as_slice),
        )
        .unwrap();
        let mut l2 = LogWriter::open(dir, 2).unwrap();
        let lines = [
            Line::File(cp("/a", 20)).encode(),
            Line::Removed("/b".into()).encode(),
            Line::File(cp("/c", 5)).encode(),
        ];
        l2.append(lines.iter().map(Vec::as_slice)).unwrap();
        let torn = Line::File(cp("/c", 99)).encode();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(log_name(2)))
            .unwrap();
        f.write_all(format!("{:08x} ", crc32(&torn)).as_bytes())
            .unwrap();
        f.write_all(&torn[..torn.len() / 2]).unwrap();
        let mut base = read(dir, CURRENT).unwrap().unwrap();
        apply_logs(dir, &mut base).unwrap();
        let offset = |p: &str| match serde_json::from_str::<Line>(&base.files[p]).unwrap() {
            Line::File(c) => c.offset,
            _ => 0,
        };
        assert_eq!(offset("/a"), 20);
        assert!(!base.files.contains_key("/b"));
        assert_eq!(offset("/c"), 5);
    }
}
