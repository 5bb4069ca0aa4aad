//! `baton hooks install|uninstall`: baton's entries in an agent's own hook settings
//! (shared/docs/transcript-formats.md, Part F.5): Claude Code's `settings.json` `hooks`
//! key and Codex's `hooks.json`, both `{"hooks": {EVENT: [{"hooks": [{"type":
//! "command", "command": …}]}]}}`. Each event gets one group whose only hook runs
//! `baton hook --agent AGENT`; `install` adds it where it is missing (idempotent),
//! `uninstall` removes exactly such groups and the keys left empty by it. The person's
//! file keeps its key order and everything else; the diff is shown, and the file as it
//! was is kept beside it as `FILE.baton-backup`.

mod ordered;

use crate::cli::{HooksAction, HooksArgs};
use crate::error::Error;
use ordered::Ordered;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The hook events baton listens to, per agent.
fn events(agent: &str) -> &'static [&'static str] {
    match agent {
        "codex" => &["PermissionRequest", "Stop"],
        _ => &["Notification", "PermissionRequest", "Stop"],
    }
}

/// The agent's hook settings file by default.
fn default_file(agent: &str) -> Option<PathBuf> {
    let env_dir = |k: &str| {
        std::env::var_os(k)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let home = env_dir("HOME");
    match agent {
        "codex" => env_dir("CODEX_HOME")
            .or_else(|| home.map(|h| h.join(".codex")))
            .map(|d| d.join("hooks.json")),
        _ => env_dir("CLAUDE_CONFIG_DIR")
            .or_else(|| home.map(|h| h.join(".claude")))
            .map(|d| d.join("settings.json")),
    }
}

/// The command the hook runs: this binary by its path when that needs no quoting in a
/// shell, else `baton` from `PATH`.
fn command(agent: &str) -> String {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned))
        .filter(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
        })
        .unwrap_or_else(|| "baton".to_owned());
    format!("{exe} hook --agent {agent}")
}

/// Whether `cmd` is a command `install` writes for `agent` (by any path to baton).
fn is_ours(cmd: &str, agent: &str) -> bool {
    cmd == command(agent)
        || cmd
            .strip_suffix(&format!(" hook --agent {agent}"))
            .is_some_and(|exe| Path::new(exe).file_name().is_some_and(|n| n == "baton"))
}

/// Whether a group (`{"hooks": [...]}`) holds only baton's hook.
fn is_our_group(group: &Ordered, agent: &str) -> bool {
    let Some(hooks) = group.get("hooks").and_then(Ordered::as_array) else {
        return false;
    };
    !hooks.is_empty()
        && hooks.iter().all(|h| {
            h.get("command")
                .and_then(Ordered::as_str)
                .is_some_and(|c| is_ours(c, agent))
        })
}

fn our_group(agent: &str) -> Ordered {
    Ordered::Obj(vec![(
        "hooks".to_owned(),
        Ordered::Arr(vec![Ordered::Obj(vec![
            ("type".to_owned(), Ordered::Str("command".to_owned())),
            ("command".to_owned(), Ordered::Str(command(agent))),
            ("timeout".to_owned(), Ordered::Num(5.into())),
        ])]),
    )])
}

/// Adds baton's group to every event that lacks one.
pub fn install(doc: &mut Ordered, agent: &str) -> Result<(), String> {
    let hooks = doc.entry_obj("hooks").ok_or("`hooks` is not an object")?;
    for ev in events(agent) {
        let list = hooks
            .entry_arr(ev)
            .ok_or_else(|| format!("`hooks.{ev}` is not a list"))?;
        if !list.iter().any(|g| is_our_group(g, agent)) {
            list.push(our_group(agent));
        }
    }
    Ok(())
}

/// Removes baton's groups, and the event lists and `hooks` object that leaves empty.
pub fn uninstall(doc: &mut Ordered) {
    let Some(Ordered::Obj(hooks)) = doc.get_mut("hooks") else {
        return;
    };
    for (_, list) in hooks.iter_mut() {
        if let Ordered::Arr(groups) = list {
            let before = groups.len();
            groups.retain(|g| !["claude", "codex"].iter().any(|a| is_our_group(g, a)));
            if before != groups.len() && groups.is_empty() {
                *list = Ordered::Null;
            }
        }
    }
    hooks.retain(|(_, v)| *v != Ordered::Null);
    if hooks.is_empty() {
        doc.remove("hooks");
    }
}

/// `baton hooks install|uninstall`.
pub fn run(args: &HooksArgs, out: &mut impl Write) -> Result<(), Error> {
    let (t, installing) = match &args.action {
        HooksAction::Install(t) => (t, true),
        HooksAction::Uninstall(t) => (t, false),
    };
    let file = match &t.file {
        Some(f) => f.clone(),
        None => default_file(&t.agent).ok_or_else(|| {
            Error::Usage("no home directory: name the settings file with --file".to_owned())
        })?,
    };
    let usage = |what: String| Error::Usage(format!("{}: {what}", file.display()));
    let old = match std::fs::read_to_string(&file) {
        Ok(s) => Some(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(usage(format!("cannot read it: {e}"))),
    };
    let mut doc = match old.as_deref().filter(|s| !s.trim().is_empty()) {
        Some(s) => serde_json::from_str::<Ordered>(s)
            .map_err(|e| usage(format!("not JSON ({e}); left as it is")))?,
        None => Ordered::Obj(Vec::new()),
    };
    if !matches!(doc, Ordered::Obj(_)) {
        return Err(usage("not a JSON object; left as it is".to_owned()));
    }
    let before = doc.clone();
    if installing {
        install(&mut doc, &t.agent).map_err(usage)?;
    } else {
        uninstall(&mut doc);
    }
    let w = |e| Error::Output(e);
    if doc == before {
        writeln!(out, "{}: nothing to change.", file.display()).map_err(w)?;
        return Ok(());
    }
    let old_text = old.clone().unwrap_or_default();
    let new_text = pretty(&doc);
    writeln!(out, "--- {}\n+++ {}", file.display(), file.display()).map_err(w)?;
    for line in diff(&pretty_or(&old_text, &before), &new_text) {
        writeln!(out, "{line}").map_err(w)?;
    }
    if t.dry_run {
        writeln!(out, "(dry run: nothing written)").map_err(w)?;
        return Ok(());
    }
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| usage(format!("cannot create its folder: {e}")))?;
    }
    if old.is_some() {
        let backup = backup_path(&file);
        std::fs::copy(&file, &backup)
            .map_err(|e| usage(format!("cannot keep a backup at {}: {e}", backup.display())))?;
        writeln!(out, "Backup: {}", backup.display()).map_err(w)?;
    }
    let tmp = file.with_extension("baton-tmp");
    std::fs::write(&tmp, new_text.as_bytes())
        .and_then(|()| {
            if let Ok(m) = std::fs::metadata(&file) {
                std::fs::set_permissions(&tmp, m.permissions())?;
            }
            std::fs::rename(&tmp, &file)
        })
        .map_err(|e| usage(format!("cannot write it: {e}")))?;
    let done = if installing { "Installed" } else { "Removed" };
    writeln!(
        out,
        "{done} baton's {} hooks in {}.",
        t.agent,
        file.display()
    )
    .map_err(w)?;
    if installing && t.agent == "codex" {
        writeln!(
            out,
            "Codex reads hooks.json only with `[features] codex_hooks = true` in its config.toml."
        )
        .map_err(w)?;
    }
    Ok(())
}

fn backup_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".baton-backup");
    PathBuf::from(s)
}

fn pretty(doc: &Ordered) -> String {
    let mut s = serde_json::to_string_pretty(doc).unwrap_or_default();
    s.push('\n');
    s
}

/// The old file as the diff shows it: as written when `install` would write it the
/// same way, else re-printed (so a diff shows only what changed, not the spacing).
fn pretty_or(old: &str, parsed: &Ordered) -> String {
    let p = pretty(parsed);
    if old.is_empty() || old == p {
        old.to_owned()
    } else {
        p
    }
}

/// A line diff: `-` removed, `+` added, two-space context (longest common subsequence;
/// settings files are small).
fn diff(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut l = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            l[i][j] = if a[i] == b[j] {
                l[i + 1][j + 1] + 1
            } else {
                l[i + 1][j].max(l[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || l[i][j + 1] >= l[i + 1][j]) {
            out.push(format!("+ {}", b[j]));
            j += 1;
        } else {
            out.push(format!("- {}", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(s: &str) -> Ordered {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn install_is_idempotent_and_uninstall_removes_exactly_it() {
        let orig = r#"{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]},"permissions":{"deny":[],"allow":["Bash(ls)"]}}"#;
        let mut doc = parse(orig);
        install(&mut doc, "claude").unwrap();
        let once = doc.clone();
        install(&mut doc, "claude").unwrap();
        assert_eq!(doc, once);
        let text = serde_json::to_string(&doc).unwrap();
        // The person's keys keep their order; their own Stop hook stays first.
        assert!(text.starts_with(r#"{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]},"#));
        assert!(text.contains(r#""permissions":{"deny":[],"allow":["Bash(ls)"]}"#));
        for ev in ["Notification", "PermissionRequest", "Stop"] {
            let n = doc
                .get("hooks")
                .unwrap()
                .get(ev)
                .unwrap()
                .as_array()
                .unwrap();
            assert_eq!(n.iter().filter(|g| is_our_group(g, "claude")).count(), 1);
        }
        uninstall(&mut doc);
        assert_eq!(serde_json::to_string(&doc).unwrap(), orig);
        // From nothing and back to nothing.
        let mut empty = Ordered::Obj(Vec::new());
        install(&mut empty, "codex").unwrap();
        uninstall(&mut empty);
        assert_eq!(empty, Ordered::Obj(Vec::new()));
    }

    #[test]
    fn ours_by_any_path_only() {
        assert!(is_ours("/usr/bin/baton hook --agent claude", "claude"));
        assert!(is_ours("baton hook --agent codex", "codex"));
        assert!(!is_ours("notbaton hook --agent claude", "claude"));
        assert!(!is_ours("baton hook --agent claude; rm -rf /", "claude"));
    }

    #[test]
    fn a_bad_shape_is_an_error_not_a_rewrite() {
        let mut doc = parse(r#"{"hooks":[1]}"#);
        assert!(install(&mut doc, "claude").is_err());
        let mut doc = parse(r#"{"hooks":{"Stop":{"x":1}}}"#);
        assert!(install(&mut doc, "claude").is_err());
    }

    #[test]
    fn diff_marks_added_lines() {
        let d = diff("{\n  \"a\": 1\n}\n", "{\n  \"a\": 1,\n  \"b\": 2\n}\n");
        assert!(d.contains(&"+   \"b\": 2".to_owned()));
        assert!(d.contains(&"-   \"a\": 1".to_owned()));
    }
}
