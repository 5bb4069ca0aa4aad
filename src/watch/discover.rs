//! Finding transcript files under roots. Listing only: never reads past a first line.

use crate::model::ProviderKind;
use crate::provider;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// A transcript file and the provider that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Found {
    pub path: PathBuf,
    pub provider: ProviderKind,
}

/// A root to search, with the provider it belongs to when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub path: PathBuf,
    pub provider: Option<ProviderKind>,
}

/// How far into a file detection may look for the end of the first line.
const SNIFF_LIMIT: u64 = 64 * 1024;

/// Is `path` a transcript file name for `provider` (or any provider when `None`)?
pub use crate::provider::is_candidate;

/// The provider of one file: the root's, else from its path and first line.
pub fn classify(path: &Path, root_provider: Option<ProviderKind>) -> Option<ProviderKind> {
    if let Some(p) = root_provider {
        return Some(p);
    }
    let first = first_line(path).unwrap_or_default();
    provider::detect(path, &first)
}

fn first_line(path: &Path) -> io::Result<Vec<u8>> {
    let f = fs::File::open(path)?;
    let mut r = BufReader::new(f.take(SNIFF_LIMIT));
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    Ok(line)
}

/// Every transcript under `root` (or `root` itself if it is a file), sorted by path.
/// Unreadable directories are logged and skipped; symlinked directories are not
/// followed, so a link loop cannot trap the walk.
pub fn find(root: &Root) -> Vec<Found> {
    let mut out = Vec::new();
    let meta = match fs::metadata(&root.path) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(path = %root.path.display(), error = %e, "Root not readable.");
            return out;
        }
    };
    if meta.is_file() {
        if let Some(provider) = classify(&root.path, root.provider) {
            out.push(Found {
                path: root.path.clone(),
                provider,
            });
        }
        return out;
    }
    let mut stack = vec![root.path.clone()];
    while let Some(dir) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(path = %dir.display(), error = %e, "Cannot list directory.");
                continue;
            }
        };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            if ft.is_dir() {
                if !skip_dir(&path) {
                    stack.push(path);
                }
            } else if (ft.is_file() || ft.is_symlink() && path.is_file())
                && is_candidate(&path, root.provider)
                && let Some(provider) = classify(&path, root.provider)
            {
                out.push(Found { path, provider });
            }
        }
    }
    out.sort();
    out
}

/// Directories that hold no transcripts (SGME archives are compressed history).
pub fn skip_dir(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "archive" || n == "node_modules" || n == ".git")
}
