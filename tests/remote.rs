//! `[[remote]]`: another machine's baton followed through a command (here: a second real
//! daemon's `baton tail`, restarted mid-stream) or a real `sshd` on 127.0.0.1; the link's
//! row in `status` when the command fails; bad lines and repeated ids from a remote.

#![allow(clippy::unwrap_used)]

use crate::common::{Claude, DEADLINE, Daemon, append};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BATON: &str = env!("CARGO_BIN_EXE_baton");

fn socket(d: &Daemon) -> PathBuf {
    d.runtime_dir().join("baton").join("baton.sock")
}

fn toml_list(items: &[&str]) -> String {
    let q: Vec<String> = items.iter().map(|s| toml_str(s)).collect();
    format!("[{}]", q.join(", "))
}

fn toml_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// A tree whose daemon will read `config` (written to its config home).
fn tree_with(config: &str) -> Daemon {
    let d = Daemon::tree();
    let dir = d.config_home().join("baton");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("config.toml"), config).unwrap();
    d
}

/// A daemon following `a` through `baton tail` as `[[remote]] name = "box"`.
fn follower_of(a: &Daemon) -> Daemon {
    let sock = socket(a).display().to_string();
    tree_with(&format!(
        "[[remote]]\nname = \"box\"\ncommand = {}\n",
        toml_list(&[BATON, "tail", "--json", "--follow", "--socket", &sock])
    ))
}

fn completed(turn: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["event"] == "turn_completed" && v["turn"] == turn && v["remote"] == "box"
}

/// Every remote event's id in `events` once; returns how many there are.
fn assert_no_repeats(events: &[Value]) -> usize {
    let mut ids: Vec<&str> = events
        .iter()
        .filter(|v| v["remote"].is_string() && v["provider"].is_string())
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        n,
        "a remote event was delivered twice: {events:#?}"
    );
    n
}

fn status_text(d: &Daemon) -> String {
    let out = d.baton().arg("status").output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn status_until(d: &Daemon, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let s = status_text(d);
        if pred(&s) {
            return s;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "status never showed {what}:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A first link without a last id follows from when the remote `tail` started (after
/// the child's start, or an ssh handshake): probe turns until one crosses.
fn linked(b: &Daemon, c: &Claude, path: &Path) {
    let start = Instant::now();
    loop {
        let (bytes, probe) = c.turn("probe", "probe");
        append(path, bytes.as_bytes());
        std::thread::sleep(Duration::from_millis(500));
        if b.events().iter().any(|v| completed(&probe)(v)) {
            return;
        }
        if start.elapsed() > DEADLINE {
            b.fail("no probe turn crossed");
        }
    }
}

#[test]
fn a_remote_daemons_turns_arrive_once_across_both_restarts() {
    let mut a = Daemon::tree().start(&[]);
    let mut b = follower_of(&a).start(&[]);
    let c = Claude::new();
    let path = c.path_in(&a.claude());
    linked(&b, &c, &path);

    let (bytes, t1) = c.turn("one", "first answer");
    append(&path, bytes.as_bytes());
    let ev = b.wait_for("the remote's first turn", completed(&t1));
    assert_eq!(ev["provider"], "claude");
    status_until(&b, "the link connected", |s| {
        s.contains("remote box: connected")
    });

    // The remote daemon restarts; a turn is written while it is down.
    a.terminate();
    let (bytes, t2) = c.turn("two", "written while the remote daemon is down");
    append(&path, bytes.as_bytes());
    a.restart(&[]);
    b.wait_for("the turn written while the remote was down", completed(&t2));

    // The local daemon restarts; a turn is written while it is down.
    b.terminate();
    let (bytes, t3) = c.turn("three", "written while the local daemon is down");
    append(&path, bytes.as_bytes());
    a.wait_for("the remote daemon's own third turn", |v| {
        v["event"] == "turn_completed" && v["turn"] == t3
    });
    b.restart(&[]);
    b.wait_for(
        "the turn written while the local daemon was down",
        completed(&t3),
    );
    let (bytes, t4) = c.turn("four", "after both restarts");
    append(&path, bytes.as_bytes());
    b.wait_for("the turn after both restarts", completed(&t4));
    // Whatever else would come (a repeat) has time to.
    std::thread::sleep(Duration::from_millis(1500));

    let events = b.events();
    for t in [&t1, &t2, &t3, &t4] {
        let n = events.iter().filter(|v| completed(t)(v)).count();
        assert_eq!(n, 1, "turn {t} completed {n} times on the local stream");
    }
    let n = assert_no_repeats(&events);
    let started = |t: &str| {
        events
            .iter()
            .filter(|v| v["event"] == "turn_started" && v["remote"] == "box" && v["turn"] == t)
            .count()
    };
    for t in [&t1, &t2, &t3, &t4] {
        assert_eq!(started(t), 1, "turn {t} started once on the local stream");
    }
    assert!(n >= 8);
    // The remote's own lifecycle stays there: one daemon_ready per local start.
    let ready = events
        .iter()
        .filter(|v| v["event"] == "daemon_ready")
        .count();
    assert_eq!(
        ready, 2,
        "the remote's daemon_ready leaked into the local stream"
    );
    // Local events have no `remote` field at all.
    assert!(
        events
            .iter()
            .filter(|v| v["event"] == "daemon_ready")
            .all(|v| v.get("remote").is_none())
    );
    let mark = fs::read_to_string(b.state_dir().join("remote-box.json")).unwrap();
    let mark: Value = serde_json::from_str(&mark).unwrap();
    assert!(mark["last"].is_string(), "{mark}");
    b.stop();
    a.stop();
}

#[test]
fn status_says_why_a_failing_remote_is_retrying() {
    let b = tree_with("[[remote]]\nname = \"down\"\ncommand = [\"false\"]\n").start(&[]);
    let s = status_until(&b, "the link retrying", |s| {
        s.contains("remote down: retrying in ")
    });
    assert!(
        s.contains("`false` exited (exit status: 1)"),
        "the reason is the exit status:\n{s}"
    );
    // A command that says why on stderr: its last line is the reason, sanitized.
    let b2 = tree_with(
        "[[remote]]\nname = \"loud\"\ncommand = [\"sh\", \"-c\", \"echo first >&2; printf 'no route \\\\033[31mto devbox\\\\n' >&2; exit 255\"]\n",
    )
    .start(&[]);
    let s = status_until(&b2, "the link retrying with a reason", |s| {
        s.contains("remote loud: retrying in ")
    });
    assert!(s.contains(": no route to devbox"), "{s}");
    assert!(
        !s.contains('\u{1b}'),
        "terminal escapes reached status: {s:?}"
    );
    b.stop();
    b2.stop();
}

/// An event line as a remote baton prints it.
fn event_line(id: &str, turn: &str) -> String {
    serde_json::json!({
        "v": 1, "event": "turn_completed", "provider": "claude", "session": "s1",
        "agent": null, "turn": turn, "path": "/home/me/.claude/projects/-home-me-api/s1.jsonl",
        "line": 2, "ts": "2026-12-01T10:00:00.000Z", "record_ts": null, "reason": "end_turn",
        "message": "done", "evidence": null, "id": id, "project": "api"
    })
    .to_string()
}

#[test]
fn bad_lines_are_counted_and_a_repeated_id_is_delivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("stream");
    // Garbage, an oversized line, an event twice, a NUL-filled line, then the same event
    // again on every reconnect (the script ignores --since-id).
    let big = "x".repeat(100 * 1024);
    let body = format!(
        "garbage\n{big}\n{e1}\n{e1}\n\0\0\0\n{e2}\n",
        e1 = event_line("id-1", "t1"),
        e2 = event_line("id-2", "t2")
    );
    fs::write(dir.path().join("body"), body).unwrap();
    fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat {}\nexit 3\n",
            dir.path().join("body").display()
        ),
    )
    .unwrap();
    let hook_out = dir.path().join("hook.txt");
    let hook = format!(
        "echo \"$BATON_REMOTE $BATON_PROJECT $BATON_EVENT\" >> {}",
        hook_out.display()
    );
    let d = tree_with(&format!(
        "on_event = {}\n[[remote]]\nname = \"box\"\ncommand = [\"sh\", {}]\n",
        toml_list(&["sh", "-c", &hook]),
        toml_str(&script.display().to_string())
    ));
    let mut d = d.start(&[]);
    d.wait_for("the second event", |v| v["id"] == "id-2");
    // The script runs again after its backoff (1 s): its events are not delivered again.
    status_until(&d, "a reconnect", |s| {
        s.contains("retrying in 2 s") || s.contains("retrying in 1 s")
    });
    std::thread::sleep(Duration::from_millis(3500));
    let events = d.events();
    assert_eq!(assert_no_repeats(&events), 2);
    let ev = events.iter().find(|v| v["id"] == "id-1").unwrap();
    assert_eq!(ev["remote"], "box");
    let bad = events
        .iter()
        .filter(|v| v["event"] == "anomaly" && v["reason"] == "remote_bad_line")
        .count();
    assert!(bad >= 2, "bad lines are counted as anomalies: {events:#?}");
    // What a person reads names the machine.
    let line = baton::client::human_line(ev).unwrap();
    assert!(line.contains("Claude Code · api@box: your turn"), "{line}");
    d.stop();
    // The exec hook ran once per event, told which remote.
    let hooks = fs::read_to_string(&hook_out).unwrap();
    let mut runs: Vec<&str> = hooks.lines().collect();
    runs.sort_unstable();
    assert_eq!(
        runs,
        ["box api turn_completed", "box api turn_completed"],
        "{hooks}"
    );
}

/// A throwaway sshd on 127.0.0.1 as this user, whose sessions see `env`.
struct Sshd {
    child: Child,
    port: u16,
    key: PathBuf,
}

impl Sshd {
    fn start(dir: &Path, env: &[(&str, String)]) -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            eprintln!(
                "NOTICE: /usr/sbin/sshd is missing; the ssh test is skipped (install openssh-server)."
            );
            return None;
        }
        // Privilege separation wants its directory (made by the service unit, not here).
        let privsep = Path::new("/run/sshd");
        if !privsep.exists() && fs::create_dir_all(privsep).is_err() {
            eprintln!("NOTICE: /run/sshd is missing and cannot be made; the ssh test is skipped.");
            return None;
        }
        let keygen = |name: &str| {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(name))
                .status()
                .unwrap()
                .success();
            assert!(ok, "ssh-keygen failed");
        };
        keygen("host");
        keygen("client");
        fs::copy(dir.join("client.pub"), dir.join("authorized_keys")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let setenv: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let config = format!(
            "HostKey {d}/host\nAuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n\
             StrictModes no\nUsePAM no\nListenAddress 127.0.0.1\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nSetEnv {}\n",
            setenv.join(" "),
            d = dir.display()
        );
        fs::write(dir.join("sshd_config"), config).unwrap();
        let log = fs::File::create(dir.join("sshd.log")).unwrap();
        let child = Command::new(sshd)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(dir.join("sshd_config"))
            .arg("-p")
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < DEADLINE, "sshd never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Sshd {
            child,
            port,
            key: dir.join("client"),
        })
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_remote_over_real_ssh() {
    let mut a = Daemon::tree().start(&[]);
    let dir = tempfile::tempdir().unwrap();
    // The remote's shell finds its socket as a login on the dev box would.
    let Some(sshd) = Sshd::start(
        dir.path(),
        &[("XDG_RUNTIME_DIR", a.runtime_dir().display().to_string())],
    ) else {
        return;
    };
    let port = sshd.port.to_string();
    let key = sshd.key.display().to_string();
    let options = toml_list(&[
        "-F",
        "/dev/null",
        "-i",
        &key,
        "-p",
        &port,
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
    ]);
    let mut b = tree_with(&format!(
        "[[remote]]\nname = \"box\"\nssh = \"127.0.0.1\"\nssh_options = {options}\nremote_baton = {}\n",
        toml_str(BATON)
    ))
    .start(&[]);
    let c = Claude::new();
    let path = c.path_in(&a.claude());
    linked(&b, &c, &path);
    let (bytes, t1) = c.turn("over ssh", "it crossed");
    append(&path, bytes.as_bytes());
    let ev = b.wait_for("the turn over ssh", completed(&t1));
    assert_eq!(ev["message"], "it crossed");
    // A restart of the remote daemon: ssh stays, the remote tail resumes.
    a.terminate();
    let (bytes, t2) = c.turn("again", "after the remote restart");
    append(&path, bytes.as_bytes());
    a.restart(&[]);
    b.wait_for("the turn after the remote restart", completed(&t2));
    std::thread::sleep(Duration::from_millis(500));
    assert_no_repeats(&b.events());
    b.stop();
    a.stop();
    drop(sshd);
}
