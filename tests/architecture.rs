//! The layers of `src/`, checked (a tidy test, as rust-analyzer keeps them): every
//! `crate::` path in a top-level module's files names a module of its own layer or of a
//! lower one, and no two top-level modules import each other, however indirectly.
//!
//! The order is read from ARCHITECTURE.md's "Layers" section, so the document and the
//! test cannot disagree: each numbered line there is a layer, bottom first, and the
//! module names are the backticked words before its ` — `. Comments, string and char
//! literals and `#[cfg(test)]` items (inline test modules, `mod tests;` files) are not
//! read: tests may reach wherever they need.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers as ARCHITECTURE.md writes them: module → layer number (1 is the bottom).
fn layers(doc: &str) -> BTreeMap<String, usize> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("ARCHITECTURE.md has a \"## Layers\" section");
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let Some((num, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(layer) = num.trim().parse::<usize>() else {
            continue;
        };
        let names = rest.split(" — ").next().unwrap_or("");
        for name in names.split('`').skip(1).step_by(2) {
            let before = out.insert(name.to_owned(), layer);
            assert!(before.is_none(), "`{name}` is in two layers");
        }
    }
    out
}

/// The top-level modules `src/lib.rs` declares.
fn declared(lib: &str) -> BTreeSet<String> {
    code_of(lib)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

/// `src` with comments and the contents of string and char literals blanked, line
/// breaks kept (so positions still give line numbers).
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    // Copies `b[from..to]` as blanks, keeping its line breaks.
    let blank = |out: &mut String, from: usize, to: usize| {
        for &c in &b[from..to.min(b.len())] {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        let prev_ident = i > 0 && ident(b[i - 1]);
        if b[i..].starts_with(b"//") {
            let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if !prev_ident && raw_string_at(b, i).is_some() {
            let (open, hashes) = raw_string_at(b, i).unwrap();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = i + open;
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| body + n + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == b'"' || (c == b'b' && !prev_ident && b.get(i + 1) == Some(&b'"')) {
            let mut j = i + if c == b'b' { 2 } else { 1 };
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{1F600}', b'x'), else a lifetime or label.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 3..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|n| i + 4 + n)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&src[i..i + ch]);
            i += ch;
        }
    }
    out
}

/// At `i`, `r"`, `r#"`, `br#"` …: the length of the opening and its number of `#`.
fn raw_string_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let start = match (b.get(i), b.get(i + 1)) {
        (Some(b'r'), _) => i + 1,
        (Some(b'b'), Some(b'r')) => i + 2,
        _ => return None,
    };
    let hashes = b[start..].iter().take_while(|&&c| c == b'#').count();
    (b.get(start + hashes) == Some(&b'"')).then_some((start + hashes + 1 - i, hashes))
}

/// `code` without its `#[cfg(test)]` items, blanked as [`code_of`] does, plus the names
/// of the `#[cfg(test)] mod name;` files it declares.
fn without_tests(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let b = code.as_bytes();
    let mut out = code.to_owned().into_bytes();
    let mut files = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find(MARK) {
        let start = from + n;
        let mut i = start + MARK.len();
        // The item ends at the first `;` outside brackets, or with the `{…}` it opens.
        let mut depth = 0i32;
        while i < b.len() {
            match b[i] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => {
                    i += 1;
                    break;
                }
                b'{' if depth == 0 => {
                    let mut braces = 0;
                    while i < b.len() {
                        match b[i] {
                            b'{' => braces += 1,
                            b'}' => {
                                braces -= 1;
                                if braces == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let i = i.min(b.len());
        let item = &code[start + MARK.len()..i];
        let words: Vec<&str> = item
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ';'))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(p) = words.iter().position(|w| *w == "mod")
            && let Some(name) = words.get(p + 1).and_then(|w| w.strip_suffix(';'))
        {
            files.push(name.to_owned());
        }
        for c in &mut out[start..i] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = i;
    }
    (String::from_utf8(out).unwrap(), files)
}

/// Every top-level module a file's code names, with the line: `crate::x`, each name of
/// `crate::{x, y::z}`, and `super::` chains that climb out of the file's top-level
/// module. `depth` is how deep the file's module sits (1 for `src/x.rs` and
/// `src/x/mod.rs`, 2 for `src/x/y.rs`).
fn paths(code: &str, depth: usize) -> Vec<(String, usize)> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let word_at = |i: usize| -> &str {
        let end = b[i..]
            .iter()
            .position(|&c| !ident(c))
            .map_or(b.len(), |n| i + n);
        &code[i..end]
    };
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let line = |i: usize| code[..i].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !ident(b[i]) || (i > 0 && ident(b[i - 1])) {
            i += 1;
            continue;
        }
        let word = word_at(i);
        let mut j = i + word.len();
        if word == "crate" && code[j..].starts_with("::") {
            j = skip_ws(j + 2);
            if b.get(j) == Some(&b'{') {
                // Names at the group's top level: the first word after `{` or a `,`.
                let mut depth = 0;
                let mut expect = true;
                while j < b.len() {
                    match b[j] {
                        b'{' => {
                            depth += 1;
                            expect = depth == 1;
                            j += 1;
                        }
                        b'}' => {
                            depth -= 1;
                            j += 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        b',' if depth == 1 => {
                            expect = true;
                            j += 1;
                        }
                        c if ident(c) => {
                            let w = word_at(j);
                            if expect && depth == 1 && w != "self" {
                                out.push((w.to_owned(), line(j)));
                            }
                            expect = false;
                            j += w.len();
                        }
                        _ => j += 1,
                    }
                }
            } else if b.get(j).is_some_and(|&c| ident(c)) {
                out.push((word_at(j).to_owned(), line(j)));
            }
        } else if word == "super" {
            let mut ups = 1;
            while code[j..].starts_with("::super") {
                ups += 1;
                j += "::super".len();
            }
            if ups >= depth && code[j..].starts_with("::") {
                let k = skip_ws(j + 2);
                if b.get(k).is_some_and(|&c| ident(c)) {
                    out.push((word_at(k).to_owned(), line(k)));
                }
            }
        }
        i = j;
    }
    out
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
}

/// One import of a top-level module by another: where it is.
type Edges = BTreeMap<(String, String), Vec<String>>;

/// The imports between top-level modules in `src/` (files of test modules left out).
/// Every file of `src/` that is not a test module's, with its code (comments, strings
/// and `#[cfg(test)]` items left out).
fn non_test_code(src: &Path) -> BTreeMap<PathBuf, String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut code = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for f in &files {
        let (c, tests) = without_tests(&code_of(&fs::read_to_string(f).unwrap()));
        // `mod x;` in `a/mod.rs` (or `a.rs`) is `a/x.rs` or `a/x/mod.rs`.
        let dir = match f.file_stem().and_then(|s| s.to_str()) {
            Some("mod" | "lib" | "main") => f.parent().unwrap().to_path_buf(),
            _ => f.with_extension(""),
        };
        for t in tests {
            test_files.insert(dir.join(format!("{t}.rs")));
            test_files.insert(dir.join(&t));
        }
        code.insert(f.clone(), c);
    }
    code.retain(|f, _| !test_files.iter().any(|t| f.starts_with(t)));
    code
}

fn imports(src: &Path, modules: &BTreeSet<String>) -> Edges {
    let mut edges = Edges::new();
    for (f, c) in &non_test_code(src) {
        let rel = f.strip_prefix(src).unwrap();
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str().unwrap()).collect();
        let top = parts[0].trim_end_matches(".rs");
        if matches!(top, "lib" | "main") {
            continue;
        }
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
        for (name, line) in paths(c, depth) {
            if name != top && modules.contains(&name) {
                edges
                    .entry((top.to_owned(), name))
                    .or_default()
                    .push(format!("src/{}:{line}", rel.display()));
            }
        }
    }
    edges
}

/// The groups of top-level modules that import each other (strongly connected, two or
/// more), each sorted.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(m) = todo.pop() {
            for &n in next.get(m).into_iter().flatten() {
                if seen.insert(n) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let all: BTreeSet<&str> = edges.keys().map(|(a, _)| a.as_str()).collect();
    let reaches: BTreeMap<&str, BTreeSet<&str>> = all.iter().map(|&m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for &m in &all {
        let group: Vec<String> = all
            .iter()
            .filter(|&&n| reaches[m].contains(n) && reaches[n].contains(m))
            .map(|n| (*n).to_owned())
            .collect();
        if group.len() > 1 && !out.contains(&group) {
            out.push(group);
        }
    }
    out
}

#[test]
fn no_module_imports_one_above_it_and_none_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let layer = layers(&doc);
    let modules = declared(&fs::read_to_string(root.join("src/lib.rs")).unwrap());
    let mut report = String::new();
    for m in &modules {
        if !layer.contains_key(m) {
            writeln!(
                report,
                "`{m}` (src/lib.rs) is in no layer of ARCHITECTURE.md"
            )
            .unwrap();
        }
    }
    for m in layer.keys() {
        if !modules.contains(m) {
            writeln!(report, "`{m}` (ARCHITECTURE.md) is no module of src/lib.rs").unwrap();
        }
    }
    let edges = imports(&root.join("src"), &modules);
    // The graph itself, for a reader (`--no-capture`): one line per module, what it imports.
    let mut from_each: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        from_each.entry(from).or_default().push(to);
    }
    for (from, to) in &from_each {
        eprintln!(
            "{from} (layer {}) → {}",
            layer.get(*from).copied().unwrap_or(0),
            to.join(" ")
        );
    }
    for ((from, to), at) in &edges {
        if let (Some(&lf), Some(&lt)) = (layer.get(from), layer.get(to))
            && lt > lf
        {
            writeln!(
                report,
                "{from} (layer {lf}) imports {to} (layer {lt}), above it: {}",
                at.join(", ")
            )
            .unwrap();
        }
    }
    for group in cycles(&edges) {
        let links: Vec<String> = edges
            .iter()
            .filter(|((a, b), _)| group.contains(a) && group.contains(b))
            .map(|((a, b), at)| format!("{a} → {b} ({})", at[0]))
            .collect();
        writeln!(
            report,
            "cycle between {}: {}",
            group.join(", "),
            links.join("; ")
        )
        .unwrap();
    }
    assert!(report.is_empty(), "\n{report}");
}

#[test]
fn the_reader_finds_paths_and_skips_comments_strings_and_tests() {
    let src = r###"
use crate::model::{Event, ProviderKind};
use crate::{clock, text::cut as c, sink::{self, quiet::Mute}};
// use crate::daemon;
/* crate::socket /* nested crate::cli */ crate::live */
fn f<'a>(x: &'a str) -> char {
    let _ = ("crate::config and \" crate::remote", '\'', '"', "crate::live");
    let _ = r#"crate::focus "quoted" "#;
    let _ = crate::people::view(x);
    let _ = super::super::watch::Root;
    'x'
}
#[cfg(test)]
mod tests {
    use crate::state;
}
#[cfg(test)]
mod more;
"###;
    let (code, test_files) = without_tests(&code_of(src));
    let found: Vec<(String, usize)> = paths(&code, 2);
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["model", "clock", "text", "sink", "people", "watch"],
        "{code}"
    );
    assert_eq!(found[4].1, 9, "line numbers survive the blanking");
    assert_eq!(test_files, ["more"]);
    // One level deep, `super::x` stays inside the file's own module.
    assert!(paths("use super::watch;", 2).is_empty());
    assert_eq!(paths("use super::watch;", 1), [("watch".to_owned(), 1)]);
}

#[test]
fn a_cycle_is_found_however_long() {
    let mut edges = Edges::new();
    for (a, b) in [
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("e", "f"),
        ("f", "e"),
    ] {
        edges.insert((a.to_owned(), b.to_owned()), vec![String::new()]);
    }
    assert_eq!(cycles(&edges), [vec!["a", "b", "c"], vec!["e", "f"]]);
}

/// The names ARCHITECTURE.md's code map must hold for one file under `src/` (its path
/// relative to `src/`): a folder's `mod.rs` by the folder (`daemon/`); a file in an
/// agent's folder by that folder and its own name (`provider/claude/` and `record.rs`,
/// since the map describes the agents' folders once, by their common parts); any other
/// file by its path (`daemon/apply.rs`).
fn map_names(rel: &str) -> Vec<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    let is_agent_folder =
        parts.len() == 3 && parts[0] == "provider" && !matches!(parts[1], "audit");
    if is_agent_folder {
        return vec![
            format!("`provider/{}/`", parts[1]),
            format!("`{}`", parts[2]),
        ];
    }
    match rel.strip_suffix("mod.rs") {
        Some(dir) if !dir.is_empty() => vec![format!("`{dir}`")],
        _ => vec![format!("`{rel}`")],
    }
}

/// ARCHITECTURE.md's code map names every file under `src/`, so a new module, a rename
/// or a removal cannot leave the map behind.
#[test]
fn the_code_map_names_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let map = doc
        .split("\n## Code map")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a `## Code map` section");
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut missing = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        for name in map_names(&rel) {
            if !map.contains(&name) {
                missing.push(format!("{rel}: the code map does not name {name}"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // And it names nothing that is gone: every backticked path ending in `.rs` exists.
    let mut gone = Vec::new();
    for piece in map.split('`').skip(1).step_by(2) {
        if piece.ends_with(".rs")
            && piece.contains('/')
            && !src.join(piece).exists()
            && !root.join(piece).exists()
        {
            gone.push(piece.to_owned());
        }
    }
    assert!(
        gone.is_empty(),
        "the code map names files that do not exist: {gone:?}"
    );
}

#[test]
fn the_code_map_rule_for_each_kind_of_file() {
    assert_eq!(map_names("daemon/mod.rs"), ["`daemon/`"]);
    assert_eq!(map_names("daemon/apply.rs"), ["`daemon/apply.rs`"]);
    assert_eq!(map_names("lib.rs"), ["`lib.rs`"]);
    assert_eq!(
        map_names("provider/claude/record.rs"),
        ["`provider/claude/`", "`record.rs`"]
    );
    assert_eq!(
        map_names("provider/audit/sgme.rs"),
        ["`provider/audit/sgme.rs`"]
    );
    assert_eq!(
        map_names("provider/audit/jsonl/mod.rs"),
        ["`provider/audit/jsonl/`"]
    );
}

/// The atomics outside `diag.rs` that are added to, and why none of them is a
/// diagnostic counter (ARCHITECTURE.md, "Counters live in `diag.rs`").
const NOT_COUNTERS: &[(&str, &str)] = &[
    (
        "src/daemon/files.rs",
        "the core's heartbeat: the watchdog only asks whether it moved",
    ),
    (
        "src/daemon/outbox.rs",
        "the core's heartbeat, as in files.rs",
    ),
    (
        "src/daemon/writer.rs",
        "the messages on the event writer's queue not handled yet: taken off as it handles them",
    ),
    (
        "src/socket/server.rs",
        "the request and follower slots: they bound concurrency and are given back",
    ),
];

#[test]
fn counters_live_in_diag_and_nothing_else_keeps_a_counting_atomic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut report = String::new();
    let mut seen = BTreeSet::new();
    for (f, c) in &non_test_code(&src) {
        let rel = format!("src/{}", f.strip_prefix(&src).unwrap().display());
        for (n, line) in c.lines().enumerate() {
            if !line.contains("fetch_add") || rel == "src/diag.rs" {
                continue;
            }
            seen.insert(rel.clone());
            if !NOT_COUNTERS.iter().any(|(p, _)| *p == rel) {
                writeln!(
                    report,
                    "{rel}:{}: an atomic counted outside diag.rs (add a counter set and \
                     an event there, or say in NOT_COUNTERS why it is no counter)",
                    n + 1
                )
                .unwrap();
            }
        }
    }
    for (p, _) in NOT_COUNTERS {
        if !seen.contains(*p) {
            writeln!(
                report,
                "{p} adds to no atomic any more: take it off NOT_COUNTERS"
            )
            .unwrap();
        }
    }
    assert!(report.is_empty(), "\n{report}");
}
