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
    classify_open(path, root_provider).map(|(provider, _)| provider)
}

/// [`classify`], with the handle it opened to read the first line, if it opened one
/// (left past that line): a caller that reads the file next goes on with it.
pub fn classify_open(
    path: &Path,
    root_provider: Option<ProviderKind>,
) -> Option<(ProviderKind, Option<fs::File>)> {
    if let Some(p) = root_provider.or_else(|| provider::detect_by_path(path)) {
        return Some((p, None));
    }
    // As every transcript read, without moving its access time (`tail::open`). A file
    // that cannot be opened or read is told by its path alone.
    let mut file = crate::tail::open(path).ok();
    let first = file
        .as_mut()
        .and_then(|f| first_line_of(f).ok())
        .unwrap_or_default();
    provider::detect(path, &first).map(|p| (p, file))
}

/// The first line of an open file, as detection looks at it (at most [`SNIFF_LIMIT`]
/// bytes); the handle is left past it.
fn first_line_of(f: &mut fs::File) -> io::Result<Vec<u8>> {
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
    let mut cands = Vec::new();
    walk(root, &mut |w| {
        match w {
            Walked::Candidate(path) => cands.push(path),
            Walked::File(f) => out.push(f),
        }
        true
    });
    classify_all(cands, root.provider, &mut out);
    // In the walk's order already; sorted all the same, as promised.
    out.sort();
    out
}

/// What [`walk`] finds under a root, in the order [`find`] would return it.
#[derive(Debug, PartialEq, Eq)]
pub enum Walked {
    /// A candidate file name under a directory root, not yet told apart by its first
    /// line (see [`classify`]).
    Candidate(PathBuf),
    /// The root itself, a file, classified.
    File(Found),
}

/// [`find`] as the walk goes: each directory's entries sorted by name and each
/// subdirectory walked in its place, which is path order, so `each` gets the files in
/// the order `find` returns them without waiting for the whole walk (`scan` reads the
/// first files while it lists the rest). Candidates are handed on unclassified. `each`
/// returning false stops the walk.
pub fn walk(root: &Root, each: &mut dyn FnMut(Walked) -> bool) {
    let meta = match fs::metadata(&root.path) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(path = %root.path.display(), error = %e, "Root not readable.");
            return;
        }
    };
    if meta.is_file() {
        if let Some(provider) = classify(&root.path, root.provider) {
            each(Walked::File(Found {
                path: root.path.clone(),
                provider,
            }));
        }
        return;
    }
    // The entries still to visit of each open directory, last first.
    let mut stack = vec![sorted_entries(&root.path, root.provider)];
    while let Some(entries) = stack.last_mut() {
        let Some((path, is_dir)) = entries.pop() else {
            stack.pop();
            continue;
        };
        if is_dir {
            stack.push(sorted_entries(&path, root.provider));
        } else if !each(Walked::Candidate(path)) {
            return;
        }
    }
}

/// The subdirectories and candidate files of `dir` (as [`find`] takes them), sorted by
/// name, last first; an unreadable directory is logged and has none.
fn sorted_entries(dir: &Path, root_provider: Option<ProviderKind>) -> Vec<(PathBuf, bool)> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(path = %dir.display(), error = %e, "Cannot list directory.");
            return Vec::new();
        }
    };
    let mut out: Vec<(PathBuf, bool)> = entries
        .flatten()
        .filter_map(|entry| {
            let ft = entry.file_type().ok()?;
            let path = entry.path();
            if ft.is_dir() {
                return (!skip_dir(&path)).then_some((path, true));
            }
            ((ft.is_file() || ft.is_symlink() && path.is_file())
                && is_candidate(&path, root_provider))
            .then_some((path, false))
        })
        .collect();
    // Names compared as `find`'s sort compares these paths (one directory, so by their
    // last component).
    out.sort_unstable_by(|a, b| b.0.file_name().cmp(&a.0.file_name()));
    out
}

/// Below this many files, a root without a provider has their first lines read on the
/// calling thread: starting threads would cost more.
const SNIFF_ALONE: usize = 64;

/// Each candidate's provider, into `out` (in any order). Without the root's provider,
/// each file's first line is read: on every core, since a `scan` of a directory given
/// by path waited for that one file at a time before reading any.
fn classify_all(cands: Vec<PathBuf>, root_provider: Option<ProviderKind>, out: &mut Vec<Found>) {
    if root_provider.is_some() || cands.len() < SNIFF_ALONE {
        out.extend(cands.into_iter().filter_map(|path| {
            classify(&path, root_provider).map(|provider| Found { path, provider })
        }));
        return;
    }
    let threads = crate::pool::threads_for(cands.len());
    let mut kinds = Vec::with_capacity(cands.len());
    let _ = crate::pool::in_order(
        cands.len(),
        threads,
        threads * 16,
        |i| classify(&cands[i], None),
        |_, kind| {
            kinds.push(kind);
            Ok::<(), ()>(())
        },
    );
    out.extend(
        cands
            .into_iter()
            .zip(kinds)
            .filter_map(|(path, kind)| kind.map(|provider| Found { path, provider })),
    );
}

/// Directories that hold no transcripts (SGME archives are compressed history).
pub fn skip_dir(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "archive" || n == "node_modules" || n == ".git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_without_a_provider_has_each_file_told_by_path_or_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("proj");
        let codex = dir.path().join("sessions/2026/12/04");
        fs::create_dir_all(&claude).unwrap();
        fs::create_dir_all(&codex).unwrap();
        let mut want = Vec::new();
        let mut add = |path: PathBuf, first: &str, provider| {
            fs::write(&path, first).unwrap();
            want.push(Found { path, provider });
        };
        // More than SNIFF_ALONE files to sniff, so the threads read them.
        for i in 0..SNIFF_ALONE + 20 {
            let first = "{\"type\":\"user\",\"sessionId\":\"s\"}\n{}\n";
            add(
                claude.join(format!("{i:03}.jsonl")),
                first,
                ProviderKind::Claude,
            );
        }
        // The path names Codex; the first line is never read.
        for i in 0..10 {
            add(
                codex.join(format!("rollout-{i}.jsonl")),
                "not json\n",
                ProviderKind::Codex,
            );
        }
        for i in 0..5 {
            fs::write(claude.join(format!("other-{i}.jsonl")), "{\"foo\":1}\n").unwrap();
        }
        fs::write(claude.join("empty.jsonl"), "").unwrap();
        want.sort();
        let root = |provider| Root {
            path: dir.path().to_path_buf(),
            provider,
        };
        assert_eq!(find(&root(None)), want);
        // Given the provider, every file it would write is that provider's, unread.
        let all = find(&root(Some(ProviderKind::Claude)));
        assert_eq!(all.len(), SNIFF_ALONE + 20 + 10 + 5 + 1);
        assert!(all.iter().all(|f| f.provider == ProviderKind::Claude));
    }

    /// What `walk` hands on, classified as `find` classifies: in `find`'s order.
    fn walked(root: &Root) -> Vec<Found> {
        let mut out = Vec::new();
        walk(root, &mut |w| {
            match w {
                Walked::Candidate(path) => {
                    if let Some(provider) = classify(&path, root.provider) {
                        out.push(Found { path, provider });
                    }
                }
                Walked::File(f) => out.push(f),
            }
            true
        });
        out
    }

    #[test]
    fn the_walk_finds_what_find_finds_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("projects");
        let claude = "{\"type\":\"user\",\"sessionId\":\"s\"}\n";
        // Names whose order as paths differs from their order as strings ("a/…" sorts
        // before "a-b.jsonl" as a path, after it as a string), nested directories, a
        // directory skipped, a symlinked file and a symlinked directory (not followed).
        for d in ["a", "a/z", "a-b", "B", "b", "b/archive", "b/c/d", ".hidden"] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        for f in [
            "a/1.jsonl",
            "a/z/2.jsonl",
            "a-b.jsonl",
            "a-b/3.jsonl",
            "a.jsonl",
            "B/4.jsonl",
            "b/5.jsonl",
            "b/archive/6.jsonl",
            "b/c/d/7.jsonl",
            "b/c/8.jsonl",
            ".hidden/9.jsonl",
            "Z.jsonl",
            "é.jsonl",
        ] {
            fs::write(base.join(f), claude).unwrap();
        }
        fs::write(base.join("b/notes.txt"), "x").unwrap();
        fs::write(base.join("b/other.jsonl"), "{\"foo\":1}\n").unwrap();
        std::os::unix::fs::symlink(base.join("a/1.jsonl"), base.join("b/link.jsonl")).unwrap();
        std::os::unix::fs::symlink(base.join("a"), base.join("b/dirlink")).unwrap();
        for provider in [None, Some(ProviderKind::Claude)] {
            let root = Root {
                path: base.clone(),
                provider,
            };
            let found = find(&root);
            assert!(found.len() >= 12, "{found:?}");
            assert_eq!(walked(&root), found, "provider {provider:?}");
        }
        // `find` is the walk's, classified: the walk's order, spelled out (bytes of each
        // name; a directory's files in its place; the archive, the symlinked directory
        // and the text file left out).
        let all: Vec<String> = walked(&Root {
            path: base.clone(),
            provider: Some(ProviderKind::Claude),
        })
        .iter()
        .map(|f| f.path.strip_prefix(&base).unwrap().display().to_string())
        .collect();
        assert_eq!(
            all,
            [
                ".hidden/9.jsonl",
                "B/4.jsonl",
                "Z.jsonl",
                "a/1.jsonl",
                "a/z/2.jsonl",
                "a-b/3.jsonl",
                "a-b.jsonl",
                "a.jsonl",
                "b/5.jsonl",
                "b/c/8.jsonl",
                "b/c/d/7.jsonl",
                "b/link.jsonl",
                "b/other.jsonl",
                "é.jsonl",
            ]
        );
        // A root that is a file; one that is not there.
        let file = Root {
            path: base.join("a.jsonl"),
            provider: None,
        };
        assert_eq!(walked(&file), find(&file));
        assert_eq!(walked(&file).len(), 1);
        let gone = Root {
            path: dir.path().join("gone"),
            provider: None,
        };
        assert!(walked(&gone).is_empty());
        // Told to stop, the walk stops.
        let mut seen = 0;
        walk(
            &Root {
                path: base,
                provider: None,
            },
            &mut |_| {
                seen += 1;
                seen < 3
            },
        );
        assert_eq!(seen, 3);
    }
}
