//! `baton check`: the transcript audit. Every file is streamed through the bounded line
//! reader (memory stays bounded per line whatever the file holds); the per-provider audits
//! live in `provider::audit`, which alone knows field names.

use crate::error::Error;
use crate::model::ProviderKind;
use crate::provider::audit::{self, Problem, Unresolved};
use crate::tail::{DEFAULT_MAX_LINE_BYTES, Item, LineReader};
use crate::watch::{self, Found, Root};
use clap::Args;
use serde::Serialize;
use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

/// Arguments of `baton check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// One JSON object per problem (`{path, line, kind, message}`) instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Longest line read, in bytes. Longer lines are streamed past and reported.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
    /// Read files as this provider's instead of detecting it (claude, codex, norma, sgme, cursor, copilot, pi, opencode, gemini, qwen).
    #[arg(long, value_name = "PROVIDER", value_parser = crate::model::ProviderKind::parse_arg)]
    pub provider: Option<ProviderKind>,
    /// Transcript files, Noa `state.json` files, or directories to search for them
    /// (default: the default roots that exist; see `baton --help`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub path: String,
    pub line: Option<u64>,
    pub kind: &'static str,
    pub message: String,
}

/// What an audit run saw.
#[derive(Debug, Default)]
pub struct Report {
    /// Files audited (transcripts and Noa states).
    pub files: usize,
    pub findings: Vec<Finding>,
    /// Files under a directory that no provider claims.
    pub skipped: usize,
}

/// Audits transcripts; returns true when problems were found.
pub fn main(args: CheckArgs) -> Result<bool, Error> {
    let roots: Vec<Root> = if args.paths.is_empty() {
        // As `scan`: the roots that are not there yet hold nothing to audit, and each
        // default root is read as its own agent's (unless `--provider` says otherwise).
        crate::config::default_roots()
            .into_iter()
            .filter(|r| r.path.is_dir())
            .map(|r| Root {
                provider: args.provider.or(r.provider),
                ..r
            })
            .collect()
    } else {
        args.paths
            .into_iter()
            .map(|path| Root {
                path,
                provider: args.provider,
            })
            .collect()
    };
    let report = run(&roots, args.max_line_bytes)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    if args.json {
        for f in &report.findings {
            let line = serde_json::to_string(f).unwrap_or_default();
            writeln!(out, "{line}").map_err(Error::Output)?;
        }
    } else {
        write!(out, "{}", human(&report)).map_err(Error::Output)?;
    }
    out.flush().map_err(Error::Output)?;
    Ok(!report.findings.is_empty())
}

/// Audits every transcript and Noa `state.json` under `roots`, each read as its
/// provider's (detected when `None`).
pub fn run(roots: &[Root], max_line: usize) -> Result<Report, Error> {
    let mut report = Report::default();
    for root in roots {
        let p = &root.path;
        if !p.exists() {
            return Err(Error::Missing(p.clone()));
        }
        let found = watch::find(root);
        let states = if p.is_dir() {
            find_named(p, "state.json")
        } else if p.file_name().is_some_and(|n| n == "state.json") {
            vec![p.clone()]
        } else {
            Vec::new()
        };
        if p.is_file() && found.is_empty() && states.is_empty() {
            report.files += 1;
            report.findings.push(Finding {
                path: display(p),
                line: None,
                kind: "unknown_format",
                message: "cannot tell which agent wrote this file (try --provider)".to_owned(),
            });
        }
        if p.is_dir() {
            report.skipped += count_unclaimed(p, &found);
        }
        for f in &found {
            report.files += 1;
            let problems = audit_file(f, max_line)?;
            report
                .findings
                .extend(problems.into_iter().map(|pr| finding(&f.path, pr)));
        }
        for s in &states {
            let problems = audit_state(s, max_line)?;
            if let Some(problems) = problems {
                report.files += 1;
                report
                    .findings
                    .extend(problems.into_iter().map(|pr| finding(s, pr)));
            }
        }
    }
    report
        .findings
        .sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    report.findings.dedup();
    Ok(report)
}

fn finding(path: &Path, p: Problem) -> Finding {
    Finding {
        path: display(path),
        line: p.line,
        kind: p.kind,
        message: p.message,
    }
}

fn display(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn read_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Read {
        path: path.to_owned(),
        source,
    }
}

/// Audits a database of rows: every row read, each anomaly a problem (`line`: the row's
/// `time_updated`).
fn audit_rows(mut feed: crate::rows::RowFeed) -> Vec<Problem> {
    let mut out = Vec::new();
    let _ = feed.read(|src, o| {
        if let crate::provider::ObsKind::Anomaly { reason, message } = o.kind {
            let kind = match reason.as_str() {
                "db_busy" => "db_busy",
                "db_corrupt" => "db_corrupt",
                "db_unreadable" => "db_unreadable",
                "db_schema" => "db_schema",
                "malformed_row" => "malformed_row",
                "oversized_row" => "oversized_row",
                _ => "anomaly",
            };
            out.push(Problem {
                line: Some(src.line),
                kind,
                message,
            });
        }
    });
    out
}

/// Audits one transcript.
pub fn audit_file(f: &Found, max_line: usize) -> Result<Vec<Problem>, Error> {
    if let Some(feed) = crate::rows::RowFeed::new(&f.path, f.provider, max_line) {
        return Ok(audit_rows(feed));
    }
    let mut file = crate::tail::open(&f.path).map_err(read_err(&f.path))?;
    let mut a = audit::auditor(f.provider, &f.path);
    let mut out = Vec::new();
    let mut reader = LineReader::new(max_line);
    reader
        .read_to_end(&mut file, |item| match item {
            Item::Line { line_no, bytes, .. } => a.line(line_no, bytes, &mut out),
            Item::Oversized {
                line_no,
                len,
                head,
                tail,
                ..
            } => {
                out.push(Problem {
                    line: Some(line_no),
                    kind: "oversized_line",
                    message: format!("line of {len} bytes is over the {max_line}-byte limit"),
                });
                a.oversized(line_no, head, tail);
            }
        })
        .map_err(read_err(&f.path))?;
    if reader.pending() > 0 {
        out.push(Problem {
            line: Some(reader.line_no()),
            kind: "partial_line",
            message: format!(
                "the file ends in {} bytes with no newline: a torn write, or a record still \
                 being written",
                reader.pending()
            ),
        });
    }
    let mut links = a.finish(&mut out);
    let main = audit::main_file_of(f.provider, &f.path).filter(|m| m.is_file());
    if !links.is_empty()
        && let Some(main) = &main
    {
        let ids = ids_in(main, f.provider, max_line)?;
        links.retain(|l| !ids.contains(&l.parent));
    }
    let where_ = if main.is_some() {
        "this file or its session's main file"
    } else {
        "this file"
    };
    for Unresolved { line, parent } in links {
        out.push(Problem {
            line: Some(line),
            kind: "parent_chain_break",
            message: format!(
                "parent `{}` is not in {where_}",
                crate::model::clip_message(&parent).unwrap_or_default()
            ),
        });
    }
    out.sort_by_key(|p| p.line);
    Ok(out)
}

/// Every record id in `path` (a subagent's main session file).
fn ids_in(path: &Path, kind: ProviderKind, max_line: usize) -> Result<HashSet<String>, Error> {
    let mut file = crate::tail::open(path).map_err(read_err(path))?;
    let mut ids = HashSet::new();
    LineReader::new(max_line)
        .read_to_end(&mut file, |item| match item {
            Item::Line { bytes, .. } => match audit::record_id(kind, bytes) {
                Some(id) => {
                    ids.insert(id);
                }
                None => ids.extend(audit::glimpse_ids(bytes)),
            },
            Item::Oversized { head, tail, .. } => {
                ids.extend(audit::glimpse_ids(head));
                ids.extend(audit::glimpse_ids(tail));
            }
        })
        .map_err(read_err(path))?;
    Ok(ids)
}

/// Audits a Noa `state.json`; `None` when the file is JSON but no Noa state.
pub fn audit_state(path: &Path, max_line: usize) -> Result<Option<Vec<Problem>>, Error> {
    let len = fs::metadata(path).map_err(read_err(path))?.len();
    if len > max_line as u64 {
        return Ok(Some(vec![Problem {
            line: None,
            kind: "oversized_state",
            message: format!("state.json of {len} bytes is over the {max_line}-byte limit"),
        }]));
    }
    let bytes = fs::read(path).map_err(read_err(path))?;
    let state = match audit::noa_state(&bytes) {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(None),
        Err((line, why)) => {
            return Ok(Some(vec![Problem {
                line: Some(line).filter(|l| *l > 0),
                kind: "malformed_state",
                message: format!("state.json does not parse: {why}"),
            }]));
        }
    };
    let mut out = Vec::new();
    if let Some(v) = &state.bad_version {
        out.push(Problem {
            line: None,
            kind: "state_version",
            message: format!("version is {v}; only version 1 is known"),
        });
    }
    let root = path.parent().unwrap_or(Path::new("."));
    for b in &state.blocks {
        let name = match &b.id {
            Some(id) => format!(
                "blocks[{}] (blockId {})",
                b.index,
                crate::model::clip_message(id).unwrap_or_default()
            ),
            None => format!("blocks[{}]", b.index),
        };
        let Some(rel) = b.archive_path.as_deref().filter(|p| !p.is_empty()) else {
            out.push(Problem {
                line: None,
                kind: "archive_missing",
                message: format!("{name} has no archivePath"),
            });
            continue;
        };
        let shown = crate::model::clip_message(rel).unwrap_or_default();
        match resolve_inside(root, rel) {
            Err(why) => out.push(Problem {
                line: None,
                kind: "archive_outside",
                message: format!("{name}: archivePath `{shown}` {why}; not followed"),
            }),
            Ok(p) if p.is_file() => {}
            Ok(_) => out.push(Problem {
                line: None,
                kind: "archive_missing",
                message: format!("{name}: archive `{shown}` does not exist"),
            }),
        }
    }
    Ok(Some(out))
}

/// How many symbolic links one archive path may pass through.
const MAX_LINK_HOPS: usize = 16;

/// Resolves `rel` (from a record: untrusted) against `root` without ever leaving the
/// tree: `..` above the root, absolute paths elsewhere and symbolic links pointing out are
/// refused. Links are read (`readlink`) but nothing outside the root is ever opened or
/// stat-ed. Returns the resolved path, which may not exist.
pub fn resolve_inside(root: &Path, rel: &str) -> Result<PathBuf, &'static str> {
    let abs_root = std::path::absolute(root).map_err(|_| "cannot be placed")?;
    let given = Path::new(rel);
    let inner = if given.is_absolute() {
        given
            .strip_prefix(&abs_root)
            .map_err(|_| "is an absolute path outside the state's directory")?
    } else {
        given
    };
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_components(&mut todo, inner)?;
    let mut stack: Vec<OsString> = Vec::new();
    let mut hops = 0;
    while let Some(c) = todo.pop_front() {
        if c == ".." {
            stack.pop().ok_or("climbs out of the state's directory")?;
            continue;
        }
        stack.push(c);
        let here: PathBuf = stack.iter().fold(root.to_path_buf(), |p, c| p.join(c));
        let Ok(meta) = fs::symlink_metadata(&here) else {
            continue;
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        hops += 1;
        if hops > MAX_LINK_HOPS {
            return Err("passes through too many symbolic links");
        }
        let target = fs::read_link(&here).map_err(|_| "passes through an unreadable link")?;
        stack.pop();
        let target = if target.is_absolute() {
            stack.clear();
            target
                .strip_prefix(&abs_root)
                .map_err(|_| "passes through a link that points outside the state's directory")?
                .to_path_buf()
        } else {
            target
        };
        let mut rest = VecDeque::new();
        push_components(&mut rest, &target)?;
        rest.extend(todo.drain(..));
        todo = rest;
    }
    Ok(stack.iter().fold(root.to_path_buf(), |p, c| p.join(c)))
}

fn push_components(out: &mut VecDeque<OsString>, p: &Path) -> Result<(), &'static str> {
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push_back(n.to_os_string()),
            Component::ParentDir => out.push_back(OsString::from("..")),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err("is an absolute path outside the state's directory");
            }
        }
    }
    Ok(())
}

/// Files named `name` under `root`, sorted. Symlinked directories are not followed.
fn find_named(root: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            tracing::warn!(path = %dir.display(), "Cannot list directory.");
            continue;
        };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            if ft.is_dir() {
                if !entry.file_name().eq_ignore_ascii_case(".git")
                    && entry.file_name() != "node_modules"
                {
                    stack.push(path);
                }
            } else if ft.is_file() && entry.file_name() == name {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `.jsonl` and `.md` files under `root` that no provider claimed (logged, counted).
fn count_unclaimed(root: &Path, found: &[Found]) -> usize {
    let claimed: HashSet<&Path> = found.iter().map(|f| f.path.as_path()).collect();
    let mut n = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            if ft.is_dir() {
                if !crate::watch::discover::skip_dir(&path) {
                    stack.push(path);
                }
            } else if ft.is_file()
                && path.extension().is_some_and(|e| e == "jsonl")
                && !claimed.contains(path.as_path())
            {
                tracing::warn!(path = %path.display(), "Cannot tell which agent wrote this file; skipped (try --provider).");
                n += 1;
            }
        }
    }
    n
}

/// The readable summary.
pub fn human(report: &Report) -> String {
    let mut s = String::new();
    let mut last_path: Option<&str> = None;
    for f in &report.findings {
        if last_path != Some(f.path.as_str()) {
            s.push_str(&format!("{}\n", clean(&f.path)));
            last_path = Some(&f.path);
        }
        let at = f.line.map_or_else(|| "-".to_owned(), |l| l.to_string());
        s.push_str(&format!(
            "  {at:>6}  {:<20} {}\n",
            f.kind,
            clean(&f.message)
        ));
    }
    let bad: HashSet<&str> = report.findings.iter().map(|f| f.path.as_str()).collect();
    let files = plural(report.files, "file");
    if report.findings.is_empty() {
        s.push_str(&format!("No problems found in {files}."));
    } else {
        s.push_str(&format!(
            "{} in {} of {files}.",
            plural(report.findings.len(), "problem"),
            bad.len()
        ));
    }
    if report.skipped > 0 {
        s.push_str(&format!(
            " {} skipped: no provider recognized (try --provider).",
            plural(report.skipped, "file")
        ));
    }
    s.push('\n');
    s
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Drops control characters (terminal escapes) from text bound for a terminal.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_refuses_to_leave_the_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("s");
        fs::create_dir_all(root.join("tier1")).expect("mkdir");
        fs::write(root.join("tier1/a.md"), "x").expect("write");
        assert_eq!(
            resolve_inside(&root, "tier1/a.md").expect("inside"),
            root.join("tier1/a.md")
        );
        assert!(resolve_inside(&root, "tier1/../tier1/a.md").is_ok());
        assert!(resolve_inside(&root, "../s/tier1/a.md").is_err());
        assert!(resolve_inside(&root, "/etc/passwd").is_err());
        let abs = root.join("tier1/a.md");
        assert!(resolve_inside(&root, &abs.to_string_lossy()).is_ok());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", root.join("out")).expect("symlink");
            assert!(resolve_inside(&root, "out/passwd").is_err());
            std::os::unix::fs::symlink("tier1", root.join("t")).expect("symlink");
            assert_eq!(
                resolve_inside(&root, "t/a.md").expect("inside"),
                root.join("tier1/a.md")
            );
            std::os::unix::fs::symlink("../..", root.join("tier1/up")).expect("symlink");
            assert!(resolve_inside(&root, "tier1/up/x").is_err());
        }
    }

    #[test]
    fn clean_strips_escapes() {
        assert_eq!(clean("a\u{1b}[31mb\n"), "a[31mb");
    }
}
