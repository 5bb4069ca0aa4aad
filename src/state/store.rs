//! The state file: two generations, each versioned and checksummed, replaced atomically.
//!
//! A generation is one header line (`baton-state <version> <crc32> <length>`) and a JSON
//! body. It is written to a temporary file, fsync'ed, renamed over the current file
//! (the current one becoming the previous generation first) and the directory is
//! fsync'ed, so a crash leaves either generation whole. Loading checks the header, the
//! length and the checksum before trusting a byte of the body.

use super::ledger::Ledger;
use crate::model::ProviderKind;
use crate::reduce::SavedSession;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub const VERSION: u32 = 1;
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

/// One generation of the state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// Assigned when written; journals are numbered after the generation they follow.
    pub generation: u64,
    /// Unix ms.
    pub written_at: i64,
    pub files: Vec<Checkpoint>,
    pub ledger: Ledger,
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE), table-driven: with every file's reading context the state of 10,000
/// transcripts is a few MiB.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc = (crc >> 8) ^ CRC_TABLE[((crc ^ u32::from(b)) & 0xff) as usize];
    }
    !crc
}

pub fn encode(snap: &Snapshot) -> Vec<u8> {
    encode_parts(
        snap.generation,
        snap.written_at,
        snap.files.iter(),
        &snap.ledger,
    )
}

/// Encodes a generation from its parts, so the writer need not gather its checkpoints
/// into one [`Snapshot`] (a copy of all of them) first.
pub fn encode_parts<'a>(
    generation: u64,
    written_at: i64,
    files: impl Iterator<Item = &'a Checkpoint>,
    ledger: &Ledger,
) -> Vec<u8> {
    let mut body = format!("{{\"generation\":{generation},\"written_at\":{written_at},\"files\":[")
        .into_bytes();
    for (i, cp) in files.enumerate() {
        if i > 0 {
            body.push(b',');
        }
        // Serializing plain numbers and strings cannot fail.
        let _ = serde_json::to_writer(&mut body, cp);
    }
    body.extend_from_slice(b"],\"ledger\":");
    let _ = serde_json::to_writer(&mut body, ledger);
    body.push(b'}');
    let mut out = format!("{MAGIC} {VERSION} {:08x} {}\n", crc32(&body), body.len()).into_bytes();
    out.extend_from_slice(&body);
    out
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
    Length { want: String, got: usize },
    #[error("checksum mismatch")]
    Checksum,
    #[error("body: {0}")]
    Body(#[from] serde_json::Error),
}

pub fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    let nl = memchr::memchr(b'\n', bytes).ok_or(DecodeError::NoHeader)?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| DecodeError::Magic)?;
    let body = &bytes[nl + 1..];
    let mut parts = header.split(' ');
    if parts.next() != Some(MAGIC) {
        return Err(DecodeError::Magic);
    }
    let version = parts.next().unwrap_or_default();
    if version != VERSION.to_string() {
        return Err(DecodeError::Version(version.to_owned()));
    }
    let crc = parts.next().unwrap_or_default();
    let len = parts.next().unwrap_or_default();
    if len.parse::<usize>().ok() != Some(body.len()) {
        return Err(DecodeError::Length {
            want: len.to_owned(),
            got: body.len(),
        });
    }
    if u32::from_str_radix(crc, 16).ok() != Some(crc32(body)) {
        return Err(DecodeError::Checksum);
    }
    Ok(serde_json::from_slice(body)?)
}

/// Reads one generation. `Ok(None)`: the file does not exist.
pub fn read(dir: &Path, name: &str) -> Result<Option<Snapshot>, String> {
    match fs::read(dir.join(name)) {
        Ok(bytes) => decode(&bytes).map(Some).map_err(|e| e.to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Writes `snap` as the new current generation, keeping the old one as the previous.
/// `before_dir_sync` runs after the renames and before the directory fsync (the caller
/// creates the next journal there, so one directory fsync covers both).
pub fn write(
    dir: &Path,
    encoded: &[u8],
    before_dir_sync: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    let tmp = dir.join(TMP);
    // A leftover (or planted) temporary file or symlink goes; create_new never follows
    // a symlink.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(encoded)?;
    f.sync_all()?;
    drop(f);
    let current = dir.join(CURRENT);
    match fs::rename(&current, dir.join(PREVIOUS)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::rename(&tmp, &current)?;
    before_dir_sync()?;
    sync_dir(dir)
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        let mut ledger = Ledger::default();
        ledger.record("claude/s1", "id1".to_owned(), Some(1_000), 1_000, 600_000);
        Snapshot {
            generation: 3,
            written_at: 1,
            files: vec![Checkpoint {
                path: "/a/b.jsonl".to_owned(),
                dev: 1,
                ino: 2,
                offset: 300,
                line: 4,
                marker: u64::MAX,
                resume: None,
            }],
            ledger,
        }
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn round_trip_and_every_truncation_is_rejected() {
        let bytes = encode(&snap());
        let back = decode(&bytes).unwrap();
        assert_eq!(back.files, snap().files);
        assert!(back.ledger.contains("id1"));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 0x01;
        assert!(decode(&flipped).is_err());
        assert!(decode(b"garbage\n{}").is_err());
        assert!(decode(b"").is_err());
    }

    #[test]
    fn write_keeps_the_previous_generation() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = snap();
        write(tmp.path(), &encode(&s), || Ok(())).unwrap();
        s.generation = 4;
        write(tmp.path(), &encode(&s), || Ok(())).unwrap();
        assert_eq!(read(tmp.path(), CURRENT).unwrap().unwrap().generation, 4);
        assert_eq!(read(tmp.path(), PREVIOUS).unwrap().unwrap().generation, 3);
        assert!(!tmp.path().join(TMP).exists());
    }
}
