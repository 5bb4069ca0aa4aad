//! One daemon per state directory, and only files that are really ours.

use crate::error::Error;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

pub const LOCK: &str = "lock";

/// Takes the exclusive lock on `dir`; held until the returned file is dropped (or the
/// process dies: the kernel releases it, so a SIGKILL leaves no stale lock).
pub fn lock(dir: &Path) -> Result<File, Error> {
    let path = dir.join(LOCK);
    check_owned(&path)?;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Error::State(format!("cannot open the lock file {}: {e}", path.display())))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(TryLockError::WouldBlock) => Err(Error::StateLocked(dir.to_path_buf())),
        Err(TryLockError::Error(e)) => Err(Error::State(format!(
            "cannot lock the state directory {}: {e}",
            dir.display()
        ))),
    }
}

/// The effective user id: the owner of this process's /proc entry.
fn euid() -> Option<u32> {
    fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Refuses a state file that is a symlink or belongs to another user (someone could
/// make us read, or overwrite, a file of their choosing). A missing file is fine.
pub fn check_owned(path: &Path) -> Result<(), Error> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(Error::State(format!("cannot stat {}: {e}", path.display())));
        }
    };
    if meta.file_type().is_symlink() {
        return Err(Error::State(format!(
            "refusing the state file {}: it is a symbolic link (remove it, or choose \
             another --state-dir)",
            path.display()
        )));
    }
    if let Some(me) = euid()
        && meta.uid() != me
    {
        return Err(Error::State(format!(
            "refusing the state file {}: it belongs to user {} and baton runs as user {me}",
            path.display(),
            meta.uid()
        )));
    }
    Ok(())
}

/// What the lock file records about the state directory. The lock is the one state file
/// the running daemon holds open for writing, and its few bytes are written once at
/// start and then only overwritten in place, so it can still be written when the
/// directory cannot: made read-only (new files cannot be created) or full (no new
/// blocks).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// A state generation was written here: if none is found later, the state was lost,
    /// and this is no first run.
    pub had_state: bool,
    /// Since when (Unix ms) events may have been delivered without a journal record: a
    /// restart cannot tell which of the events it derives again were delivered, so it
    /// flags them `replay`. Cleared once the saved state covers them.
    pub outage_since: Option<i64>,
}

const MARK_MAGIC: &str = "baton-lock";

impl Mark {
    /// A fixed-width line, so that rewriting it never changes the file's length.
    fn encode(self) -> String {
        format!(
            "{MARK_MAGIC} 1 state={} outage={:020}\n",
            u8::from(self.had_state),
            self.outage_since.unwrap_or(0).max(0)
        )
    }

    fn decode(text: &str) -> Mark {
        let mut mark = Mark::default();
        let mut parts = text.trim_end().split(' ');
        if parts.next() != Some(MARK_MAGIC) || parts.next() != Some("1") {
            return mark;
        }
        for p in parts {
            match p.split_once('=') {
                Some(("state", v)) => mark.had_state = v == "1",
                Some(("outage", v)) => {
                    mark.outage_since = v.parse::<i64>().ok().filter(|&t| t > 0);
                }
                _ => {}
            }
        }
        mark
    }
}

/// Reads the mark of a lock file (a file written by an older baton is empty: no mark).
pub fn read_mark(lock: &File) -> Mark {
    let mut buf = [0u8; 128];
    let n = std::os::unix::fs::FileExt::read_at(lock, &mut buf, 0).unwrap_or(0);
    Mark::decode(&String::from_utf8_lossy(&buf[..n]))
}

/// Overwrites the mark in place (not fsync'ed: it must survive a crash of baton, which
/// what reached the kernel does).
pub fn write_mark(lock: &File, mark: Mark) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(lock, mark.encode().as_bytes(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_round_trips_at_a_fixed_width() {
        let marks = [
            Mark::default(),
            Mark {
                had_state: true,
                outage_since: Some(1_764_500_000_000),
            },
        ];
        let widths: Vec<usize> = marks.iter().map(|m| m.encode().len()).collect();
        assert_eq!(widths[0], widths[1]);
        for m in marks {
            assert_eq!(Mark::decode(&m.encode()), m);
        }
        assert_eq!(Mark::decode(""), Mark::default());
    }
}
