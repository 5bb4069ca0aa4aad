//! `baton check`: every problem planted in tests/fixtures/check is found, clean fixtures
//! give nothing, and the real corpus (../shared/corpus) gives exactly what reading it
//! by hand found.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn check(args: &[&str], paths: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("check")
        .args(args)
        .args(paths)
        .output()
        .expect("runs baton")
}

/// `check --json` findings as `path-suffix:line kind`, with paths relative to `base`.
fn findings(args: &[&str], base: &Path, paths: &[PathBuf]) -> (i32, Vec<String>) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = check(&all, paths);
    let code = out.status.code().unwrap_or(-1);
    let rows = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("one JSON object per line");
            let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
            assert_eq!(keys, ["kind", "line", "message", "path"]);
            assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
            let path = v["path"].as_str().expect("path");
            let rel = Path::new(path)
                .strip_prefix(base)
                .map_or(path.to_owned(), |p| p.to_string_lossy().into_owned());
            let line = v["line"].as_u64().map_or("-".to_owned(), |l| l.to_string());
            format!("{rel}:{line} {}", v["kind"].as_str().expect("kind"))
        })
        .collect();
    (code, rows)
}

#[test]
fn finds_every_planted_problem_and_nothing_else() {
    let base = repo("tests/fixtures/check");
    let (code, got) = findings(
        &["--max-line-bytes", "4096"],
        &base,
        std::slice::from_ref(&base),
    );
    let claude = "claude/6b1e0c2a-3d4f-4a5b-8c6d-7e8f9a0b1c2d.jsonl";
    let codex = "codex/rollout-2026-08-03T10-00-00-019c0000-0000-7000-8000-000000000001.jsonl";
    let sgme = "sgme/raw/sessions/8c0e2a4c-6e8a-4c0e-a2c4-e6a8c0e2a4c6.md";
    let external = "sgme/raw/external/4e6a8c0e-2a4c-4e8a-8c0e-2a4c6e8a0c2e.md";
    let expected = [
        // Line 8 (compact_boundary: parentUuid null, logicalParentUuid unknown) is allowed.
        format!("{claude}:4 dangling_tool_call"),
        format!("{claude}:5 malformed_line"),
        format!("{claude}:7 duplicate_uuid"),
        format!("{claude}:10 parent_chain_break"),
        format!("{claude}:11 nul_bytes"),
        format!("{claude}:12 partial_line"),
        // call_3's result is on the oversized line: glimpsed, so not dangling.
        format!("{codex}:6 dangling_tool_call"),
        format!("{codex}:8 malformed_line"),
        format!("{codex}:10 oversized_line"),
        "noa/archive/S1/state.json:- state_version".to_owned(),
        "noa/archive/S1/state.json:- archive_missing".to_owned(),
        "noa/archive/S1/state.json:- archive_outside".to_owned(),
        "noa/archive/S1/state.json:- archive_missing".to_owned(),
        "noa/archive/S1/state.json:- archive_outside".to_owned(),
        "noa/archive/S2/state.json:3 malformed_state".to_owned(),
        // Line 5 (boundary with an unknown parent) is allowed; line 10's parent sits on
        // the malformed line 9 and is glimpsed; its open call at EOF is the last one.
        "norma/sess-bad.jsonl:2 dangling_tool_call".to_owned(),
        "norma/sess-bad.jsonl:4 session_mismatch".to_owned(),
        "norma/sess-bad.jsonl:7 duplicate_uuid".to_owned(),
        "norma/sess-bad.jsonl:8 parent_chain_break".to_owned(),
        "norma/sess-bad.jsonl:9 malformed_line".to_owned(),
        format!("{external}:5 frontmatter_field"),
        format!("{external}:7 bad_frontmatter"),
        format!("{sgme}:3 frontmatter_field"),
        format!("{sgme}:7 frontmatter_field"),
        format!("{sgme}:8 frontmatter_field"),
        format!("{sgme}:11 stray_content"),
        format!("{sgme}:13 heading_level"),
        format!("{sgme}:17 ambiguous_heading"),
        format!("{sgme}:19 tool_block"),
        format!("{sgme}:23 heading_level"),
        format!("{sgme}:23 block_time"),
        format!("{sgme}:25 unclosed_fence"),
    ];
    assert_eq!(got, expected);
    assert_eq!(code, 1);
}

#[test]
fn noa_archive_paths_never_leave_the_state_directory() {
    let base = repo("tests/fixtures/check");
    let out = check(&[], &[base.join("noa/archive/S1/state.json")]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.contains("`../../../../../../../etc/passwd` climbs out"),
        "{text}"
    );
    assert!(
        text.contains("`/etc/hostname` is an absolute path outside"),
        "{text}"
    );
    assert!(
        text.contains("blocks[3] (blockId 4) has no archivePath"),
        "{text}"
    );
    assert!(
        !text.contains("blocks[0]"),
        "block 0's archive exists: {text}"
    );
}

#[test]
fn clean_fixtures_have_no_problems() {
    let norma = repo("tests/fixtures/norma");
    let sgme = repo("tests/fixtures/sgme/raw");
    let paths = [
        norma.join("sess-tools.jsonl"),
        norma.join("sess-compact.jsonl"),
        norma.join("sess-sub.jsonl"),
        norma.join("sess-sub"),
        sgme.join("sessions/0f8e2c1a-5b7d-4e3f-9a2b-1c3d5e7f9a0b.md"),
        sgme.join("uploads/3c5e7a9b-1d2f-4e4a-8b6c-8d0f2a4c6e8f.md"),
        sgme.join("external"),
        repo("tests/fixtures/check/clean"),
    ];
    let (code, got) = findings(&[], Path::new("/"), &paths);
    assert_eq!(got, Vec::<String>::new());
    assert_eq!(code, 0);
    let out = check(&[], &paths);
    assert_eq!(
        String::from_utf8(out.stdout).expect("utf-8"),
        "No problems found in 8 files.\n"
    );
}

#[test]
fn scenario_fixtures_show_what_they_were_written_to_show() {
    let base = repo("tests/fixtures");
    let (code, got) = findings(&[], &base, &[base.join("norma"), base.join("sgme")]);
    assert_eq!(
        got,
        vec![
            // The resume-abandon case leaves a dangling call in the file for good.
            "norma/sess-resume.jsonl:2 dangling_tool_call",
            "sgme/raw/sessions/5d2c9b4e-7a1f-4c3b-8e6d-2f4a6b8c0d1e.md:2 bad_frontmatter",
            "sgme/raw/sessions/9b1d3f5a-2c4e-4a6b-9d8f-0e2a4c6e8a0c.md:1 bad_frontmatter",
            "sgme/raw/uploads/7e9a1c3d-5f2b-4d6e-a8c0-4b6d8f0a2c4e.md:6 bad_frontmatter",
            "sgme/raw/uploads/7e9a1c3d-5f2b-4d6e-a8c0-4b6d8f0a2c4e.md:6 bad_frontmatter",
        ]
    );
    assert_eq!(code, 1);
}

#[test]
fn human_summary_counts_problems_and_files() {
    let base = repo("tests/fixtures/check");
    let out = check(&["--max-line-bytes", "4096"], &[base.join("norma")]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .is_some_and(|l| l.ends_with("norma/sess-bad.jsonl"))
    );
    assert!(text.contains("       2  dangling_tool_call   tool call `call_n1` never got a result"));
    assert!(text.ends_with("5 problems in 1 of 1 file.\n"), "{text}");
}

#[test]
fn unknown_files_are_a_problem_when_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mystery.jsonl");
    std::fs::write(&path, "{\"hello\":1}\n").expect("write");
    let (code, got) = findings(&[], dir.path(), std::slice::from_ref(&path));
    assert_eq!(got, vec!["mystery.jsonl:- unknown_format"]);
    assert_eq!(code, 1);
    // Under a directory it is skipped with a note instead.
    let out = check(&[], &[dir.path().to_path_buf()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("1 file skipped"), "{text}");
}

#[test]
fn a_huge_line_is_streamed_past_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s1.jsonl");
    let big = "y".repeat(3 << 20);
    let body = format!(
        "{{\"uuid\":\"u1\",\"session_id\":\"s1\",\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"hi\"}}]}}}}\n\
         {{\"uuid\":\"u2\",\"parent_uuid\":\"u1\",\"session_id\":\"s1\",\"type\":\"message\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{big}\"}}]}}}}\n\
         {{\"uuid\":\"u3\",\"parent_uuid\":\"u2\",\"session_id\":\"s1\",\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"again\"}}]}}}}\n"
    );
    std::fs::write(&path, body).expect("write");
    let (code, got) = findings(&["--max-line-bytes", "65536"], dir.path(), &[path]);
    // u2's id is read from the line's head, so u3's parent link holds.
    assert_eq!(got, vec!["s1.jsonl:2 oversized_line"]);
    assert_eq!(code, 1);
}

#[test]
fn real_corpus_findings() {
    let corpus = repo("../shared/corpus");
    if !corpus.is_dir() {
        eprintln!("SKIPPED: {} is absent", corpus.display());
        return;
    }
    let (code, got) = findings(&[], &corpus, std::slice::from_ref(&corpus));
    // Read by hand: in rollout 12-47-42, turn 6 ends in a function_call with no output
    // (line 826) and the app then starts a new task: a dangling call. Rollout 13-19-38
    // ends on an open call (its last, so not dangling). Claude's compaction helpers name
    // parents in their session's main file, which resolves them. Entire's head-sliced
    // copies (PROVENANCE.md: 33/210c2e180b and b0/2936744f3b) begin with a
    // `stop_hook_summary` whose parent is in the part Entire left out: a true chain
    // break at line 1. Nothing else (`pr-link` in 6d/63c3a51594 is known bookkeeping).
    assert_eq!(
        got,
        vec![
            "claude/entireio__cli/33/210c2e180b/0/full.jsonl:1 parent_chain_break",
            "claude/entireio__cli/b0/2936744f3b/0/full.jsonl:1 parent_chain_break",
            "codex/madshn__localpush/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl:826 dangling_tool_call",
        ]
    );
    assert_eq!(code, 1);
    let out = check(&[], std::slice::from_ref(&corpus));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    // The Pi session (corpus/pi) is audited as Pi's, and clean (read by hand: every
    // toolCall has its toolResult, every parentId names the entry before it); nothing is
    // skipped.
    assert!(text.ends_with("3 problems in 3 of 43 files.\n"), "{text}");

    // With a small line limit, the long lines are reported and nothing else changes: ids
    // and tool results on them are glimpsed from their ends.
    let (_, small) = findings(
        &["--max-line-bytes", "20000"],
        &corpus,
        std::slice::from_ref(&corpus),
    );
    let other: Vec<&String> = small
        .iter()
        .filter(|f| !f.ends_with("oversized_line"))
        .collect();
    assert_eq!(other, got.iter().collect::<Vec<_>>());
    assert!(small.len() > 10, "{small:#?}");
}

#[test]
fn a_claude_record_after_a_huge_line_keeps_its_parent_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = "y".repeat(200_000);
    let rec = |uuid: &str, parent: &str, text: &str, head: bool| {
        let parent = if parent.is_empty() {
            "null".to_owned()
        } else {
            format!("\"{parent}\"")
        };
        // Claude writes `uuid` after the message; some writers put it first.
        let (first, last) = if head {
            (format!("\"uuid\":\"{uuid}\","), String::new())
        } else {
            (String::new(), format!(",\"uuid\":\"{uuid}\""))
        };
        format!(
            "{{{first}\"parentUuid\":{parent},\"isSidechain\":false,\"sessionId\":\"s\",\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}{last},\"timestamp\":\"2026-01-01T00:00:00.000Z\"}}\n"
        )
    };
    for head in [true, false] {
        let path = dir.path().join(format!("s-{head}.jsonl"));
        let body = [
            rec("u1", "", "hi", head),
            rec("u2", "u1", &big, head),
            rec("u3", "u2", "again", head),
        ]
        .concat();
        std::fs::write(&path, body).expect("write");
        let (_, got) = findings(
            &["--provider", "claude", "--max-line-bytes", "65536"],
            dir.path(),
            &[path],
        );
        assert_eq!(got, vec![format!("s-{head}.jsonl:2 oversized_line")]);
    }
}

#[test]
fn unknown_record_types_are_listed_per_file() {
    let base = repo("tests/fixtures/part-d");
    let (_, claude) = findings(
        &["--provider", "claude"],
        &base,
        &[base.join("synthetic-claude-21230-explicit-stops.jsonl")],
    );
    assert_eq!(
        claude,
        vec!["synthetic-claude-21230-explicit-stops.jsonl:11 unknown_record_type"]
    );
    let (_, codex) = findings(
        &["--provider", "codex"],
        &base,
        &[base.join("synthetic-codex-0146-new-types.jsonl")],
    );
    assert_eq!(
        codex,
        vec![
            "synthetic-codex-0146-new-types.jsonl:9 unknown_record_type",
            "synthetic-codex-0146-new-types.jsonl:10 unknown_record_type",
        ]
    );
    // A forked child's copy of its parent's history holds the parent's open call (the
    // spawn); it is answered in the parent's file, so it is no dangling call here.
    let (code, forked) = findings(
        &["--provider", "codex"],
        &base,
        &[base.join("synthetic-codex-0145-forked-child.jsonl")],
    );
    assert_eq!((code, forked), (0, Vec::<String>::new()));
    // Every type Part D documents is known: the other fixtures list nothing unknown.
    for (name, provider) in [
        ("synthetic-codex-0145-request-user-input.jsonl", "codex"),
        ("synthetic-codex-0145-forked-child.jsonl", "codex"),
        ("synthetic-claude-2076-exit-resume.jsonl", "claude"),
        ("synthetic-claude-2139-stop-hook-progress.jsonl", "claude"),
    ] {
        let (_, got) = findings(&["--provider", provider], &base, &[base.join(name)]);
        assert!(
            got.iter().all(|g| !g.ends_with("unknown_record_type")),
            "{name}: {got:?}"
        );
    }
}

/// Without paths, `check` reads each default root as its own agent's, as `scan` and the
/// daemon do: in a Pi root moved by `PI_CODING_AGENT_SESSION_DIR` (so no path rule names
/// it), a session whose first record is damaged is still audited as Pi's, not skipped as
/// a file no agent claims.
#[test]
fn default_roots_are_read_as_their_agents() {
    let home = tempfile::tempdir().expect("tempdir");
    let root = home.path().join("pi-sessions");
    let dir = root.join("--work-web--");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("2026-11-29T10-00-00-000Z_abc.jsonl"),
        concat!(
            "{\"type\":\"session\",\"id\":\"abc\",\"cwd\":\"/work/web\n",
            "{\"type\":\"message\",\"id\":\"m1\",\"timestamp\":\"2026-11-29T10:00:01Z\",",
            "\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        ),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["check", "--json"])
        .env_clear()
        .env("HOME", home.path())
        .env("PI_CODING_AGENT_SESSION_DIR", &root)
        .output()
        .expect("runs baton");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("_abc.jsonl") && l.contains("\"malformed_line\"")),
        "stdout: {text}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1));
}
