//! Help that tells the truth: every agent and default root named, every exit code listed,
//! a man page for each subcommand, and `check` reading the default roots as `scan` does.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn baton(args: &[&str], home: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("COPILOT_HOME")
        .env_remove("PI_CODING_AGENT_DIR")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("QWEN_RUNTIME_DIR")
        .env_remove("QWEN_HOME")
        .output()
        .unwrap()
}

const ROOTS: [&str; 8] = [
    "~/.claude/projects",
    "~/.codex/sessions",
    "~/.cursor/projects",
    "~/.copilot/session-state",
    "~/.pi/agent/sessions",
    "~/.omp/agent/sessions",
    "~/.gemini/tmp",
    "~/.qwen/projects",
];

#[test]
fn help_names_every_agent_root_and_exit_code() {
    let home = tempfile::tempdir().unwrap();
    let out = baton(&["--help"], home.path());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for agent in [
        "Claude Code",
        "Codex",
        "Cursor",
        "Copilot CLI",
        "Pi",
        "Oh My Pi",
        "Gemini CLI",
        "Qwen Code",
        "Norma",
        "SGME",
    ] {
        assert!(text.contains(agent), "--help lacks {agent}:\n{text}");
    }
    for root in ROOTS {
        assert!(text.contains(root), "--help lacks {root}:\n{text}");
    }
    for code in [
        "0 ok",
        "1 check",
        "2 usage",
        "3 cannot",
        "4 cannot",
        "5 another",
        "6 the state",
    ] {
        assert!(
            text.contains(code),
            "--help lacks exit code {code}:\n{text}"
        );
    }
    let text = String::from_utf8(baton(&["scan", "--help"], home.path()).stdout).unwrap();
    for root in ROOTS {
        assert!(text.contains(root), "scan --help lacks {root}:\n{text}");
    }
}

#[test]
fn man_prints_each_subcommands_page() {
    let home = tempfile::tempdir().unwrap();
    let out = baton(&["man"], home.path());
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains(".TH baton 1")
    );
    for sub in [
        "replay",
        "scan",
        "run",
        "check",
        "status",
        "tail",
        "config",
        "unit",
        "completions",
        "man",
    ] {
        let out = baton(&["man", sub], home.path());
        assert!(
            out.status.success(),
            "{sub}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let page = String::from_utf8(out.stdout).unwrap();
        assert!(
            page.starts_with(&format!(
                ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH baton-{sub} 1"
            )),
            "{sub}: {page}"
        );
    }
    let out = baton(&["man", "nope"], home.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no man page for `nope`"), "{err}");
}

#[test]
fn check_without_a_path_reads_the_default_roots() {
    let home = tempfile::tempdir().unwrap();
    // Nothing there yet: nothing to audit, no error.
    let out = baton(&["check"], home.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = home.path().join(".claude/projects/-home-me-src-my-web-app");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("11111111-0000-4000-8000-000000000001.jsonl"),
        "{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"sessionId\":\"11111111-0000-4000-8000-000000000001\",\"timestamp\":\"2026-03-01T10:00:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{not json\n",
    )
    .unwrap();
    let out = baton(&["check"], home.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The README's exit-code table has a row for every code baton exits with (the main
/// errors' 0–6 and 9, and `baton service`'s 7 and 8), as `--help` lists them.
#[test]
fn the_readme_lists_every_exit_code() {
    let readme = include_str!("../README.md");
    let table = readme
        .split("## Exit codes")
        .nth(1)
        .expect("an Exit codes section");
    // Before: the table stopped at 6.
    for code in 0..=9 {
        assert!(
            table.lines().any(|l| l.starts_with(&format!("| {code} |"))),
            "README's exit codes lack {code}"
        );
    }
    let home = tempfile::tempdir().unwrap();
    let text = String::from_utf8(baton(&["--help"], home.path()).stdout).unwrap();
    for code in [
        "7 no systemd user manager",
        "8 systemctl failed",
        "9 `baton run` could",
    ] {
        assert!(text.contains(code), "--help lacks {code}");
    }
}
