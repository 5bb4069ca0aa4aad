//! The socket file: its private directory, its binding, and its upkeep while the
//! daemon runs (made again if it is removed, left alone if someone else's file took
//! its place). Apart from the loop because it is about the path, not the clients.

use super::Loop;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;

/// Creates `dir` (and parents) and makes it 0700.
pub(super) fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Binds `path` (mode 0600) and returns the listener with the file's identity.
pub(super) fn bind(path: &Path) -> io::Result<(UnixListener, (u64, u64))> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let meta = std::fs::symlink_metadata(path)?;
    Ok((listener, (meta.dev(), meta.ino())))
}

impl Loop {
    /// Makes the socket file again if it is gone; leaves a file someone else put there.
    pub(super) fn check_file(&mut self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.bound => {}
            Ok(_) => {
                if !self.warned_other {
                    self.warned_other = true;
                    tracing::warn!(path = %self.path.display(), "The socket path now holds another file; leaving it (status and tail cannot reach this daemon).");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.rebind(),
            Err(e) => {
                tracing::debug!(path = %self.path.display(), error = %e, "Cannot check the socket file.");
            }
        }
    }

    fn rebind(&mut self) {
        // Only the socket's own directory is made again: a runtime directory that is gone
        // (the session ended) is not ours to make.
        if let Some(dir) = self.path.parent()
            && !dir.exists()
        {
            let made = std::fs::DirBuilder::new().mode(0o700).create(dir);
            if let Err(e) = made {
                tracing::debug!(dir = %dir.display(), error = %e, "Cannot make the socket's directory again.");
                return;
            }
        }
        match bind(&self.path) {
            Ok((listener, id)) => {
                self.listener = listener;
                self.bound = id;
                self.warned_other = false;
                tracing::warn!(path = %self.path.display(), "The socket file was gone; made it again.");
            }
            Err(e) => {
                tracing::debug!(path = %self.path.display(), error = %e, "Cannot make the socket file again.");
            }
        }
    }
}
