//! `baton mute` by every name `status` shows: a longer project name (`src/my-web-app`,
//! shown when two projects share `my-web-app`) mutes that project's sessions and not the
//! other's; `--project`; a warning when no session matches; `--for` needs a unit; and
//! `--socket`/`--state-dir` as `status` takes them. Through a real daemon and a private
//! D-Bus with a recording notification server.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::common::bus;

use crate::common::{Daemon, append};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn turn_bytes(session: &str, cwd: &str, answer: &str) -> String {
    turn_on(session, cwd, answer, "main")
}

fn turn_on(session: &str, cwd: &str, answer: &str, branch: &str) -> String {
    turn_at(session, cwd, answer, branch, &common::ts_now())
}

fn turn_at(session: &str, cwd: &str, answer: &str, branch: &str, ts: &str) -> String {
    let u = json!({"type": "user", "uuid": common::uuid(), "sessionId": session,
                   "timestamp": ts, "cwd": cwd, "gitBranch": branch,
                   "message": {"role": "user", "content": "go"}});
    let a = json!({"type": "assistant", "uuid": common::uuid(), "sessionId": session,
                   "timestamp": ts, "cwd": cwd, "gitBranch": branch,
                   "message": {"role": "assistant", "model": "claude-test",
                               "content": [{"type": "text", "text": answer}],
                               "stop_reason": "end_turn"}});
    format!("{u}\n{a}\n")
}

struct Project {
    session: String,
    cwd: String,
    path: PathBuf,
}

fn project(d: &Daemon, cwd: &str) -> Project {
    let session = common::uuid();
    let dir = d.claude().join(cwd.replace('/', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    Project {
        path: dir.join(format!("{session}.jsonl")),
        session,
        cwd: cwd.to_owned(),
    }
}

fn completed(d: &Daemon, session: &str) -> usize {
    d.events()
        .iter()
        .filter(|e| e["event"] == "turn_completed" && e["session"] == session)
        .count()
}

fn run_turn(d: &mut Daemon, p: &Project, answer: &str) {
    let before = completed(d, &p.session);
    append(&p.path, turn_bytes(&p.session, &p.cwd, answer).as_bytes());
    let s = p.session.clone();
    d.wait_count("turn_completed", before + 1, move |e| {
        e["event"] == "turn_completed" && e["session"] == s.as_str()
    });
}

/// The end line of the daemon's `status` answer (`status --json` prints the rows only).
fn status_end(d: &Daemon) -> Value {
    let sock = d.runtime_dir().join("baton").join("baton.sock");
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    writeln!(s, "{{\"cmd\":\"status\"}}").unwrap();
    let lines: Vec<String> = BufReader::new(s).lines().map(Result::unwrap).collect();
    serde_json::from_str(lines.last().unwrap()).unwrap()
}

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < common::DEADLINE,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn held_reason(d: &Daemon, session: &str) -> Option<String> {
    status_end(d)["held"]
        .as_array()?
        .iter()
        .find(|h| h["session"] == session)
        .and_then(|h| h["reason"].as_str().map(str::to_owned))
}

fn write_config(d: &Daemon, toml: &str) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(cfg, toml).unwrap();
}

#[test]
fn mute_by_the_longer_name_status_shows_mutes_that_project_only() {
    let d = Daemon::tree();
    let Some(bus) = bus::Bus::start(d.dir.path(), false) else {
        return;
    };
    write_config(&d, "[desktop]\ncooldown = \"0s\"\n");
    let mut d = d.env("DBUS_SESSION_BUS_ADDRESS", &bus.addr).start(&[]);
    let src = project(&d, "/home/me/src/my-web-app");
    let forks = project(&d, "/home/me/forks/my-web-app");
    run_turn(&mut d, &src, "src one");
    run_turn(&mut d, &forks, "forks one");
    wait("two pages", || (bus.shown() == 2).then_some(()));
    wait("status naming both by their longer names", || {
        let out = d.baton().arg("status").output().unwrap();
        let table = String::from_utf8(out.stdout).unwrap();
        (table.contains("src/my-web-app") && table.contains("forks/my-web-app")).then_some(())
    });

    // Before: "Muted src/my-web-app." and the next page of it still showed.
    let out = d
        .baton()
        .args(["mute", "src/my-web-app", "--for", "1h"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Muted src/my-web-app."));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run_turn(&mut d, &src, "src two");
    run_turn(&mut d, &forks, "forks two");
    wait("the src page held back as muted", || {
        (held_reason(&d, &src.session).as_deref() == Some("muted_for")).then_some(())
    });
    wait("the forks page shown", || (bus.shown() == 3).then_some(()));
    assert_eq!(held_reason(&d, &forks.session), None);
    let out = d
        .baton()
        .args(["unmute", "src/my-web-app"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Unmuted src/my-web-app."));

    // `--project`, any case: the short name covers both.
    let out = d
        .baton()
        .args(["mute", "--project", "My-Web-App"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert_eq!(status_end(&d)["mutes"][0]["target"], "my-web-app");
    run_turn(&mut d, &forks, "forks three");
    wait("the forks page held back", || {
        (held_reason(&d, &forks.session).as_deref() == Some("muted_for")).then_some(())
    });
    assert_eq!(bus.shown(), 3);
    // A session id given to `--project` names no project.
    let out = d
        .baton()
        .args(["mute", "--project", &src.session])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: the daemon knows no project"));
    d.stop();
}

#[test]
fn mute_warns_on_no_match_wants_a_unit_and_finds_its_daemon() {
    let mut d = Daemon::tree().start(&[]);
    let p = project(&d, "/home/me/src/cli-tool");
    run_turn(&mut d, &p, "done");

    // Before: "Muted nosuchproject." and nothing else.
    let out = d.baton().args(["mute", "nosuchproject"]).output().unwrap();
    common::assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: the daemon knows no project or session called `nosuchproject`"),
        "{err}"
    );
    // A session id and a project name match: no warning.
    for target in [p.session.as_str(), "cli-tool"] {
        let out = d.baton().args(["mute", target]).output().unwrap();
        common::assert_ok(&out);
        assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
    }

    // Before: `--for 10` meant ten seconds.
    let out = d
        .baton()
        .args(["mute", "cli-tool", "--for", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no unit"));

    // `--socket` and `--state-dir`, as `status` takes them, from a client that would
    // otherwise look elsewhere.
    let socket = d.runtime_dir().join("baton/baton.sock");
    let elsewhere = |args: &[&str]| {
        let mut c = d.baton();
        c.env("XDG_RUNTIME_DIR", d.dir.path().join("nowhere"));
        c.args(args).output().unwrap()
    };
    let out = elsewhere(&[
        "mute",
        "cli-tool",
        "--for",
        "5m",
        "--socket",
        socket.to_str().unwrap(),
    ]);
    common::assert_ok(&out);
    let out = elsewhere(&["unmute", "cli-tool", "--socket", socket.to_str().unwrap()]);
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Unmuted cli-tool."));
    let out = elsewhere(&["mute", "--state-dir", "/nonexistent/state", "cli-tool"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.stop();
}

#[test]
fn mute_by_branch_holds_that_branchs_pages_only() {
    let d = Daemon::tree();
    let Some(bus) = bus::Bus::start(d.dir.path(), false) else {
        return;
    };
    write_config(&d, "[desktop]\ncooldown = \"0s\"\n");
    let mut d = d.env("DBUS_SESSION_BUS_ADDRESS", &bus.addr).start(&[]);
    let feat = project(&d, "/home/me/src/web");
    let other = project(&d, "/home/me/src/api");
    let turn = |d: &mut Daemon, p: &Project, branch: &str, answer: &str| {
        let before = completed(d, &p.session);
        append(
            &p.path,
            turn_on(&p.session, &p.cwd, answer, branch).as_bytes(),
        );
        let s = p.session.clone();
        d.wait_count("turn_completed", before + 1, move |e| {
            e["event"] == "turn_completed" && e["session"] == s.as_str()
        });
    };
    turn(&mut d, &feat, "feat/login", "one");
    turn(&mut d, &other, "main", "one");
    wait("two pages", || (bus.shown() == 2).then_some(()));
    // Before: no `--branch` (exit 2).
    let out = d
        .baton()
        .args(["mute", "--branch", "feat/login", "--for", "1h"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Muted feat/login."));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
    turn(&mut d, &feat, "feat/login", "two");
    turn(&mut d, &other, "main", "two");
    wait("the feat/login page held back", || {
        (held_reason(&d, &feat.session).as_deref() == Some("muted_for")).then_some(())
    });
    wait("the main page shown", || (bus.shown() == 3).then_some(()));
    let out = d.baton().args(["unmute", "feat/login"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Unmuted feat/login."));
    turn(&mut d, &feat, "feat/login", "three");
    wait("the feat/login page shown again", || {
        (bus.shown() == 4).then_some(())
    });
    // A branch no session is on: a warning.
    let out = d
        .baton()
        .args(["mute", "--branch", "nope"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
    d.stop();
}

/// Sends one request over the daemon's socket; returns its one-line answer.
fn ask(d: &Daemon, req: Value) -> Value {
    let sock = d.runtime_dir().join("baton").join("baton.sock");
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    writeln!(s, "{req}").unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// Sessions parked by the history read (files idle for an hour) are known to `status` by
/// the row kept for each, not by a view: `mute` still finds them by every name.
#[test]
fn mute_finds_parked_sessions_by_every_name() {
    let d = Daemon::tree();
    let old = common::ts_ago(Duration::from_secs(2 * 3600));
    let mut sessions = Vec::new();
    for (cwd, branch) in [
        ("/home/me/src/my-web-app", "feat/x"),
        ("/home/me/forks/my-web-app", "main"),
        ("/srv/tool", "feat/x"),
    ] {
        let p = project(&d, cwd);
        std::fs::write(&p.path, turn_at(&p.session, cwd, "done", branch, &old)).unwrap();
        std::fs::File::open(&p.path)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
        sessions.push(p.session);
    }
    let d = d.start(&["--no-desktop"]);
    wait("three sessions in status", || {
        (status_end(&d)["sessions"] == 3).then_some(())
    });
    for (req, matched) in [
        (json!({"cmd": "mute", "target": "src/my-web-app"}), 1),
        (
            json!({"cmd": "mute", "target": "my-web-app", "project": true}),
            2,
        ),
        (
            json!({"cmd": "mute", "target": "feat/x", "branch": true}),
            2,
        ),
        (json!({"cmd": "mute", "target": "tool"}), 1),
        (json!({"cmd": "mute", "target": sessions[1]}), 1),
        (json!({"cmd": "mute", "target": "nosuchproject"}), 0),
    ] {
        let answer = ask(&d, req.clone());
        assert_eq!(answer["matched"], matched, "{req} → {answer}");
    }
    d.stop();
}
