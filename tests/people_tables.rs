//! The `scan` and `status` tables as a person reads them, golden-tested on one fixture
//! tree (tests/fixtures/people: Claude Code projects with subagents, Codex sessions, one
//! session in each state, one 454 days old) under `TZ=Europe/Madrid`, `COLUMNS=100` and a
//! fixed now (`BATON_NOW_MS`, 2026-03-01T12:00:00Z). The expected tables are in
//! tests/people/; `BATON_BLESS=1` rewrites them (review the diff).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// 2026-03-01T12:00:00Z.
const NOW_MS: &str = "1772366400000";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/people")
}

/// A `baton` whose tables do not depend on the machine: zone, width, clock, colour.
fn person(mut c: Command) -> Command {
    c.env("TZ", "Europe/Madrid")
        .env("COLUMNS", "100")
        .env("BATON_NOW_MS", NOW_MS)
        .env_remove("NO_COLOR");
    c
}

/// `scan` as a person runs it, but with the liveness check kept off: the fixture's clock
/// is fixed (`BATON_NOW_MS`, in March) while /proc is judged at the real now, which
/// would end its working sessions as `writer_gone` (tests/liveness_scan.rs covers that).
fn scan(args: &[&str]) -> Output {
    person(Command::new(env!("CARGO_BIN_EXE_baton")))
        .arg("scan")
        .args(["--liveness-after", "1000000h"])
        .args(args)
        .arg(fixture())
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Compares `got` with tests/people/`name`, or writes it there under `BATON_BLESS`.
fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/people")
        .join(name);
    if std::env::var_os("BATON_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (BATON_BLESS=1 writes it)", path.display()));
    assert_eq!(got, want, "{name} differs; got:\n{got}\nwant:\n{want}");
}

fn row<'a>(table: &'a str, project: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split("  ").any(|c| c.trim() == project))
        .unwrap_or_else(|| panic!("no {project} row in\n{table}"))
}

#[test]
fn scan_table_as_a_person_reads_it() {
    let table = ok(&scan(&[]));
    golden("scan.txt", &table);
    // What the golden file holds, said plainly.
    let states: Vec<&str> = table
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "needs_input",
            "failed",
            "completed",
            "completed",
            "working",
            "interrupted"
        ],
        "{table}"
    );
    assert!(
        row(&table, "src/my-web-app").contains("3 min ago   +2 subagents working · Keep the old"),
        "{table}"
    );
    assert!(row(&table, "forks/my-web-app").starts_with("completed    Codex "));
    assert!(table.ends_with("\n1 older session: --all\n"), "{table}");
    assert!(!table.contains("old-thing"), "{table}");
    assert!(!table.contains('\u{1b}'), "{table:?}");
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
}

#[test]
fn scan_all_shows_old_sessions() {
    let table = ok(&scan(&["--all"]));
    golden("scan-all.txt", &table);
    assert!(
        row(&table, "old-thing").contains("454 days ago  Hello! What shall we build?"),
        "{table}"
    );
    assert!(!table.contains("older session"), "{table}");
}

#[test]
fn scan_fits_the_width_it_is_given() {
    let out = person(Command::new(env!("CARGO_BIN_EXE_baton")))
        .env("COLUMNS", "72")
        .arg("scan")
        .args(["--liveness-after", "1000000h"])
        .arg(fixture())
        .output()
        .unwrap();
    let table = ok(&out);
    assert!(table.lines().all(|l| l.chars().count() <= 72), "{table}");
    assert!(row(&table, "cli-tool").ends_with('…'), "{table}");
}

#[test]
fn filters_by_state_project_and_agent() {
    // Working: the two subagents show as rows of their own, since their parent (waiting
    // for the person) is not in view.
    let table = ok(&scan(&["--state", "working"]));
    golden("scan-working.txt", &table);
    assert_eq!(table.lines().count(), 4, "{table}");
    assert_eq!(table.matches("subagent a").count(), 2, "{table}");
    // Comma lists and repeats.
    for args in [
        &["--state", "needs_input,failed"][..],
        &["--state", "needs_input", "--state", "failed"][..],
    ] {
        let table = ok(&scan(args));
        let states: Vec<&str> = table
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(states, ["needs_input", "failed"], "{args:?}: {table}");
        // Only one my-web-app in view now: its short name.
        assert!(
            row(&table, "my-web-app").starts_with("needs_input"),
            "{table}"
        );
    }
    // A project by its name (any case): one directory, two agents.
    let table = ok(&scan(&["--project", "API-Server"]));
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(
        table.contains("Claude Code") && table.contains("Codex"),
        "{table}"
    );
    // The two-component name picks one checkout.
    let table = ok(&scan(&["--project", "forks/my-web-app"]));
    assert_eq!(table.lines().count(), 2, "{table}");
    // An agent by id or by name.
    for agent in ["codex", "Codex"] {
        let table = ok(&scan(&["--agent", agent]));
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(!table.contains("Claude Code"), "{table}");
    }
    let table = ok(&scan(&[
        "--agent",
        "claude code",
        "--project",
        "api-server",
    ]));
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.contains("failed"), "{table}");
    // Nothing left: said so.
    let table = ok(&scan(&["--agent", "pi"]));
    assert_eq!(table, "No sessions match.\n");
    // Unknown names are usage errors.
    for args in [&["--state", "done"][..], &["--agent", "gpt"][..]] {
        let out = scan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn json_keeps_every_row_and_field_and_takes_the_filters() {
    let rows = |args: &[&str]| -> Vec<serde_json::Value> {
        ok(&scan(args))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let all = rows(&["--json"]);
    // Every session file, subagents and the old one too.
    assert_eq!(all.len(), 10);
    assert_eq!(all.iter().filter(|r| r["agent"].is_string()).count(), 3);
    assert!(all.iter().any(|r| r["project"] == "old-thing"));
    for key in [
        "provider", "session", "project", "path", "state", "turn", "line",
    ] {
        assert!(all.iter().all(|r| r.get(key).is_some()), "{key}");
    }
    let working = rows(&["--json", "--state", "working"]);
    assert_eq!(working.len(), 3);
    assert!(working.iter().all(|r| r["state"] == "working"));
}

#[test]
fn colour_on_request_never_in_a_pipe_and_not_with_no_color() {
    let always = ok(&scan(&["--color", "always"]));
    assert!(
        always.contains("\u{1b}[1;33mneeds_input\u{1b}[0m  "),
        "{always:?}"
    );
    assert!(
        always.contains("\u{1b}[1;31mfailed\u{1b}[0m  "),
        "{always:?}"
    );
    // Colour moves no column.
    let plain = ok(&scan(&["--color", "never"]));
    let stripped = always
        .replace("\u{1b}[0m", "")
        .replace("\u{1b}[1;33m", "")
        .replace("\u{1b}[1;31m", "")
        .replace("\u{1b}[32m", "")
        .replace("\u{1b}[36m", "")
        .replace("\u{1b}[35m", "");
    assert_eq!(stripped, plain);
    assert!(!plain.contains('\u{1b}'));
    // auto (the default) in a pipe: none.
    assert!(!ok(&scan(&[])).contains('\u{1b}'));
    // auto on a terminal: colour, unless NO_COLOR.
    let Some(tty) = on_a_terminal(&[]) else {
        eprintln!("skipped: no `script` to give baton a terminal");
        return;
    };
    assert!(tty.contains("\u{1b}[1;33mneeds_input"), "{tty:?}");
    let tty = on_a_terminal(&[("NO_COLOR", "1")]).unwrap();
    assert!(tty.contains("needs_input"), "{tty:?}");
    assert!(!tty.contains("\u{1b}["), "{tty:?}");
}

/// `baton scan` of the fixture with a terminal on stdout (util-linux `script`).
fn on_a_terminal(env: &[(&str, &str)]) -> Option<String> {
    Command::new("script").arg("--version").output().ok()?;
    let cmd = format!(
        "{} scan {}",
        env!("CARGO_BIN_EXE_baton"),
        fixture().display()
    );
    let mut c = person(Command::new("script"));
    c.args(["-q", "-e", "-c", &cmd, "/dev/null"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    Some(ok(&out))
}

/// The fixture tree under a running daemon, which also watches a root that is not there.
fn daemon() -> common::Daemon {
    let d = common::Daemon::tree();
    copy(&fixture().join("claude"), &d.claude());
    copy(&fixture().join("codex"), &d.codex());
    let typo = format!("claude={}", d.dir.path().join("claude/projcets").display());
    // Liveness an hour off: a working session with no writer stays working while the
    // test reads it.
    let d = d.start(&["--watch", &typo, "--liveness-after", "1000000h"]);
    let deadline = Instant::now() + common::DEADLINE;
    loop {
        let out = d.baton().args(["status", "--json"]).output().unwrap();
        if String::from_utf8_lossy(&out.stdout).lines().count() == 10 {
            return d;
        }
        if Instant::now() > deadline {
            d.fail("status never listed the 10 sessions");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

fn status(d: &common::Daemon, args: &[&str]) -> Output {
    person(d.baton())
        .env("HOME", d.dir.path())
        .arg("status")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn status_table_matches_scan_and_says_what_it_waits_for() {
    let d = daemon();
    let table = ok(&status(&d, &[]));
    golden("status.txt", &table);
    // The same rows as `scan` of the same tree, then the missing root.
    let scanned = ok(&scan(&[]));
    assert!(
        table.starts_with(&scanned),
        "status:\n{table}\nscan:\n{scanned}"
    );
    assert!(
        table.ends_with("1 older session: --all\nwaiting for ~/claude/projcets (claude)\n"),
        "{table}"
    );
    // --all, the filters and colour work on `status` too.
    let all = ok(&status(&d, &["--all"]));
    assert!(row(&all, "old-thing").contains("454 days ago"), "{all}");
    let working = ok(&status(&d, &["--state", "working", "--agent", "claude"]));
    assert_eq!(working.matches("subagent a").count(), 2, "{working}");
    assert!(!working.contains("Codex"), "{working}");
    let coloured = ok(&status(&d, &["--color", "always"]));
    assert!(
        coloured.contains("\u{1b}[36mworking\u{1b}[0m"),
        "{coloured:?}"
    );
    // --json: every row as the daemon sends it, two-component names beside the short.
    let json = ok(&status(&d, &["--json"]));
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 10);
    let web = rows
        .iter()
        .find(|r| r["project"] == "my-web-app" && r["provider"] == "codex")
        .unwrap();
    assert_eq!(web["project_long"], "forks/my-web-app");
    let json = ok(&status(&d, &["--json", "--project", "cli-tool"]));
    // The session and its subagent (its records name the directory too).
    assert_eq!(json.lines().count(), 2, "{json}");
    // Once the root appears it is no longer waited for.
    std::fs::create_dir_all(d.dir.path().join("claude/projcets")).unwrap();
    let table = ok(&status(&d, &[]));
    assert!(!table.contains("waiting for"), "{table}");
    d.stop();
}

/// At any number of sessions the `status` table shows what fits: the most urgent rows
/// (what waits for the person, then the newest), then how many more there are and how
/// to see them. A pipe gets 100 rows, a terminal its height; `--all` and `--json` get
/// every row.
#[test]
fn status_table_shows_what_fits_and_says_how_many_more() {
    let d = common::Daemon::tree();
    let dir = d.claude().join("-home-me-proj");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..105u64 {
        let c = common::Claude::new();
        let ts = common::ts_ago(Duration::from_secs(60 * (i + 1)));
        let (p, _) = c.prompt_at("go", &ts);
        let a = c.answer_at(&format!("answer {i}"), &ts);
        common::append(&c.path_in(&dir), (p + &a).as_bytes());
    }
    let d = d.start(&[]);
    let deadline = Instant::now() + common::DEADLINE;
    let json = loop {
        let json = ok(&d.baton().args(["status", "--json"]).output().unwrap());
        if json.lines().count() == 105 {
            break json;
        }
        if Instant::now() > deadline {
            d.fail("status never listed the 105 sessions");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(json.lines().all(|l| l.contains("\"session\"")), "{json}");

    let table = ok(&status(&d, &[]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + 100 + 2, "{table}");
    assert!(lines[0].starts_with("STATE"), "{table}");
    assert!(lines[1].ends_with("answer 0"), "the newest first:\n{table}");
    assert!(lines[100].ends_with("answer 99"), "{table}");
    assert_eq!(lines[101], "");
    assert_eq!(lines[102], "… and 5 more (baton status --all / --json)");

    let all = ok(&status(&d, &["--all"]));
    assert_eq!(all.lines().count(), 1 + 105, "{all}");
    assert!(all.lines().last().unwrap().ends_with("answer 104"), "{all}");

    // On a terminal of 12 lines: 7 rows and the line that says there are more.
    if Command::new("script").arg("--version").output().is_ok() {
        let cmd = format!("{} status --color never", env!("CARGO_BIN_EXE_baton"));
        let mut c = person(Command::new("script"));
        c.args(["-q", "-e", "-c", &cmd, "/dev/null"])
            .env("LINES", "12");
        for (k, v) in d.baton().get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let tty = ok(&c.output().unwrap()).replace('\r', "");
        let lines: Vec<&str> = tty.lines().collect();
        assert_eq!(lines.len(), 1 + 7 + 2, "{tty}");
        assert_eq!(lines[9], "… and 98 more (baton status --all / --json)");
    }
    d.stop();
}
