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
