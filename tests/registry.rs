//! Claude Code's session registry (`<config>/sessions/<pid>.json`) and background jobs
//! (`<config>/jobs/<id>/state.json`) as a second source beside the transcript, with the
//! real daemon: a permission prompt that the transcript does not show pages once, an
//! `idle` decides an answer with no end marker at once, a file whose process is gone
//! (or is another process) is ignored, and a job's `blocked` and `done`.
//!
//! The agent is a copy of `sleep` named `claude`, started in the session's directory, as
//! in tests/liveness.rs; its registry file names its pid and its start time.

#![allow(clippy::unwrap_used)]

use crate::common::{Daemon, Kill, append, ts_now, uuid};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// A copy of `sleep` named `claude` in `bin`, started in `cwd`: (pid, its start time as
/// `/proc/<pid>/stat` field 22, the process).
fn fake_claude(bin: &Path, cwd: &Path) -> (u32, String, Kill) {
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a sleep binary");
    fs::create_dir_all(bin).unwrap();
    let exe = bin.join("claude");
    if !exe.exists() {
        fs::copy(sleep, &exe).unwrap();
    }
    let child = Command::new(&exe)
        .arg("600")
        .current_dir(cwd)
        .spawn()
        .unwrap();
    let pid = child.id();
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_ascii_whitespace()
        .nth(19)
        .unwrap()
        .to_owned();
    (pid, start, Kill(child))
}

/// A Claude config directory in the daemon's tree: (its `projects` project folder, the
/// session's working directory).
struct Config {
    base: PathBuf,
    project: PathBuf,
    cwd: PathBuf,
}

impl Config {
    fn new(d: &Daemon) -> Config {
        let base = d.dir.path().join("cc");
        let cwd = d.dir.path().join("work").join("api-server");
        let project = base.join("projects").join("-work-api-server");
        fs::create_dir_all(&project).unwrap();
        fs::create_dir_all(base.join("sessions")).unwrap();
        fs::create_dir_all(&cwd).unwrap();
        Config { base, project, cwd }
    }

    fn watch(&self) -> String {
        format!("claude={}", self.base.join("projects").display())
    }

    /// Writes `<pid>.json` whole (a temporary file renamed over it, as a rewrite).
    fn registry(&self, pid: u32, v: &Value) {
        let dir = self.base.join("sessions");
        let tmp = dir.join(format!(".{pid}.tmp"));
        fs::write(&tmp, v.to_string()).unwrap();
        fs::rename(&tmp, dir.join(format!("{pid}.json"))).unwrap();
    }

    fn job(&self, id: &str, v: &Value) {
        let dir = self.base.join("jobs").join(id);
        fs::create_dir_all(&dir).unwrap();
        let tmp = dir.join("state.json.tmp");
        fs::write(&tmp, v.to_string()).unwrap();
        fs::rename(&tmp, dir.join("state.json")).unwrap();
    }
}

fn entry(pid: u32, start: &str, session: &str, cwd: &Path, status: &str) -> Value {
    let mut v = json!({"pid": pid, "sessionId": session, "cwd": cwd, "kind": "interactive",
        "tmux": "t1:@0.%0", "status": status, "statusUpdatedAt": 1_791_003_614_830_u64,
        "version": "2.1.289", "procStart": start});
    if status == "waiting" {
        v["waitingFor"] = json!("permission prompt");
    }
    v
}

/// Claude Code records of one session.
struct Session {
    id: String,
    cwd: PathBuf,
}

impl Session {
    fn rec(&self, mut v: Value) -> String {
        v["sessionId"] = json!(self.id);
        v["cwd"] = json!(self.cwd);
        v["timestamp"] = json!(ts_now());
        v["uuid"] = json!(uuid());
        format!("{v}\n")
    }

    fn prompt(&self, text: &str) -> (String, String) {
        let line = self.rec(json!({"type": "user",
            "message": {"role": "user", "content": text}}));
        let id: Value = serde_json::from_str(&line).unwrap();
        (line, id["uuid"].as_str().unwrap().to_owned())
    }

    fn tool_use(&self, id: &str, name: &str, input: Value) -> String {
        self.rec(json!({"type": "assistant", "message": {"role": "assistant",
            "id": uuid(), "model": "claude-test", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}}))
    }

    fn tool_result(&self, id: &str, text: &str) -> String {
        self.rec(json!({"type": "user", "message": {"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]}}))
    }

    /// An answer with no end marker (`stop_reason: null`).
    fn unmarked_answer(&self, text: &str) -> String {
        self.rec(json!({"type": "assistant", "message": {"role": "assistant",
            "id": uuid(), "model": "claude-test", "stop_reason": null,
            "content": [{"type": "text", "text": text}]}}))
    }
}

fn wall_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(d.as_millis()).unwrap()
}

/// How long after `written` (Unix ms) the daemon decided `event` (its `ts`): for the
/// latency figure printed with --nocapture, never asserted.
fn decided_after(written: i64, event: &Value) -> i64 {
    baton::clock::parse_rfc3339(event["ts"].as_str().unwrap()).unwrap() - written
}

fn count(events: &[Value], kind: &str, session: &str) -> usize {
    events
        .iter()
        .filter(|e| e["event"] == kind && e["session"] == session)
        .count()
}

fn of(kind: &'static str, session: String) -> impl Fn(&Value) -> bool {
    move |e| e["event"] == kind && e["session"] == session.as_str()
}

/// busy → waiting (permission prompt) → busy → idle while the transcript ends on a
/// pending Bash tool call: one `needs_input` (reason `permission prompt`), resolved,
/// then the answer with no end marker is `turn_completed` by `registry_idle` at once.
#[test]
fn permission_prompt_pages_once_and_idle_completes_the_answer() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &c.cwd);
    let s = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    let mut d = tree.start(&["--watch", &c.watch()]);
    let path = c.project.join(format!("{}.jsonl", s.id));
    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "busy"));
    let (p, turn) = s.prompt("restart the test server");
    append(
        &path,
        (p + &s.tool_use(
            "toolu_1",
            "Bash",
            json!({"command": "systemctl restart api"}),
        ))
            .as_bytes(),
    );
    d.wait_for("turn_started", of("turn_started", s.id.clone()));

    let (t0, w0) = (Instant::now(), wall_ms());
    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "waiting"));
    let wait = d.wait_for("needs_input", of("needs_input", s.id.clone()));
    eprintln!(
        "registry waiting -> needs_input: seen by the test after {:?}, decided (ts) after {} ms",
        t0.elapsed(),
        decided_after(w0, &wait)
    );
    assert_eq!(wait["reason"], "permission prompt");
    assert_eq!(wait["turn"], turn.as_str());
    // The transcript's file and line: the pending tool call's.
    assert_eq!(wait["path"], path.to_str().unwrap());
    assert_eq!(wait["line"], 2);

    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "busy"));
    d.wait_for(
        "needs_input_resolved",
        of("needs_input_resolved", s.id.clone()),
    );
    append(
        &path,
        (s.tool_result("toolu_1", "restarted") + &s.unmarked_answer("The server is back up."))
            .as_bytes(),
    );
    // Read before the idle write (the watcher is far faster than this), so the idle
    // decides it, not the answer arriving after it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (t1, w1) = (Instant::now(), wall_ms());
    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "idle"));
    let done = d.wait_for("turn_completed", of("turn_completed", s.id.clone()));
    eprintln!(
        "registry idle -> turn_completed: seen by the test after {:?}, decided (ts) after {} ms",
        t1.elapsed(),
        decided_after(w1, &done)
    );
    assert_eq!(done["evidence"], "registry_idle");
    assert_eq!(done["turn"], turn.as_str());
    assert_eq!(done["message"], "The server is back up.");
    assert_eq!(done["line"], 4);
    let events = d.stop();
    assert_eq!(count(&events, "needs_input", &s.id), 1, "{events:#?}");
    assert_eq!(count(&events, "turn_completed", &s.id), 1);
    assert_eq!(count(&events, "turn_resumed", &s.id), 0);
}

/// The agent says idle before baton has read its answer: the answer is decided as it
/// arrives, still by `registry_idle` (no 90 s settle).
#[test]
fn idle_before_the_answer_is_read_decides_it_on_arrival() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &c.cwd);
    let s = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    let mut d = tree.start(&["--watch", &c.watch()]);
    let path = c.project.join(format!("{}.jsonl", s.id));
    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "busy"));
    let (p, turn) = s.prompt("say hi");
    append(&path, p.as_bytes());
    d.wait_for("turn_started", of("turn_started", s.id.clone()));
    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "idle"));
    // Give the reader a pass or two to send it (it lists every 200 ms).
    std::thread::sleep(std::time::Duration::from_millis(800));
    append(&path, s.unmarked_answer("hi").as_bytes());
    let done = d.wait_for("turn_completed", of("turn_completed", s.id.clone()));
    assert_eq!(done["evidence"], "registry_idle");
    assert_eq!(done["turn"], turn.as_str());
    d.stop();
}

/// A `waiting` file whose pid is dead, and one whose pid lives but is another process
/// (`procStart` differs), are ignored and counted; a live one beside them pages.
#[test]
fn a_dead_or_reused_pid_waiting_file_is_ignored() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &c.cwd);
    let dead = {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let sessions: Vec<Session> = (0..3)
        .map(|_| Session {
            id: uuid(),
            cwd: c.cwd.clone(),
        })
        .collect();
    let mut d = tree.start(&["--watch", &c.watch()]);
    for s in &sessions {
        let path = c.project.join(format!("{}.jsonl", s.id));
        let (p, _) = s.prompt("deploy");
        append(
            &path,
            (p + &s.tool_use("toolu_9", "Bash", json!({"command": "make deploy"}))).as_bytes(),
        );
        d.wait_for("turn_started", of("turn_started", s.id.clone()));
    }
    c.registry(
        dead,
        &entry(dead, "12345", &sessions[0].id, &c.cwd, "waiting"),
    );
    // Same live pid under another name: a registry file for a reused pid.
    let mut reused = entry(pid, "1", &sessions[1].id, &c.cwd, "waiting");
    reused["pid"] = json!(pid);
    fs::write(
        c.base
            .join("sessions")
            .join(format!("{}.json", pid + 100_000)),
        {
            // The file name does not decide; its pid and procStart do.
            reused.to_string()
        },
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    c.registry(pid, &entry(pid, &start, &sessions[2].id, &c.cwd, "waiting"));
    d.wait_for("needs_input", of("needs_input", sessions[2].id.clone()));
    // One more pass of the reader after the live file: every file was looked at.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (events, log) = d.stop_with_log();
    assert_eq!(count(&events, "needs_input", &sessions[0].id), 0);
    assert_eq!(count(&events, "needs_input", &sessions[1].id), 0);
    assert_eq!(count(&events, "needs_input", &sessions[2].id), 1);
    assert!(log.contains("stale=2"), "{log}");
}

/// A wait the registry reported first and the transcript's pending question for the same
/// moment are one `needs_input`.
#[test]
fn a_question_the_registry_reported_first_is_one_wait() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &c.cwd);
    let s = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    let mut d = tree.start(&["--watch", &c.watch()]);
    let path = c.project.join(format!("{}.jsonl", s.id));
    let (p, _) = s.prompt("pick a database");
    append(&path, p.as_bytes());
    d.wait_for("turn_started", of("turn_started", s.id.clone()));
    let mut waiting = entry(pid, &start, &s.id, &c.cwd, "waiting");
    waiting["waitingFor"] = json!("input needed");
    c.registry(pid, &waiting);
    let w = d.wait_for("needs_input", of("needs_input", s.id.clone()));
    assert_eq!(w["reason"], "input needed");
    let q = json!({"questions": [{"question": "Postgres or SQLite?", "header": "DB",
        "options": [{"label": "Postgres"}, {"label": "SQLite"}], "multiSelect": false}]});
    append(
        &path,
        s.tool_use("toolu_q", "AskUserQuestion", q).as_bytes(),
    );
    append(&path, s.tool_result("toolu_q", "Postgres").as_bytes());
    d.wait_for(
        "needs_input_resolved",
        of("needs_input_resolved", s.id.clone()),
    );
    let events = d.stop();
    assert_eq!(count(&events, "needs_input", &s.id), 1, "{events:#?}");
    assert_eq!(count(&events, "needs_input_resolved", &s.id), 1);
}

/// A `claude --bg` job: `state.json` `blocked` is `needs_input` (reason `blocked`, the
/// job's detail as message), `done` completes its unmarked answer (`job_done`).
#[test]
fn a_background_job_blocked_then_done() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let job = "5ab1d332";
    let s = Session {
        id: format!("{job}-1c2d-4e5f-8a9b-0c1d2e3f4a5b"),
        cwd: c.cwd.clone(),
    };
    let mut d = tree.start(&["--watch", &c.watch()]);
    let path = c.project.join(format!("{}.jsonl", s.id));
    let (p, turn) = s.prompt("push the release branch");
    append(
        &path,
        (p + &s.tool_use("toolu_b", "Bash", json!({"command": "git push"}))).as_bytes(),
    );
    d.wait_for("turn_started", of("turn_started", s.id.clone()));
    c.job(
        job,
        &json!({"state": "blocked", "detail": "needs approval for git push", "tempo": "idle",
            "name": "release \u{1b}[31mpush", "inFlight": {"tasks": 0, "queued": 0}}),
    );
    let w = d.wait_for("needs_input", of("needs_input", s.id.clone()));
    assert_eq!(w["reason"], "blocked");
    assert_eq!(w["message"], "needs approval for git push");
    // The job's name (`claude --bg -n NAME`), its terminal escape stripped.
    assert_eq!(w["job"], "release push");
    c.job(job, &json!({"state": "running", "detail": "pushing"}));
    d.wait_for(
        "needs_input_resolved",
        of("needs_input_resolved", s.id.clone()),
    );
    append(
        &path,
        (s.tool_result("toolu_b", "pushed") + &s.unmarked_answer("Pushed.")).as_bytes(),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    c.job(
        job,
        &json!({"state": "done", "detail": "replied", "output": {"result": "Pushed."}}),
    );
    let done = d.wait_for("turn_completed", of("turn_completed", s.id.clone()));
    assert_eq!(done["evidence"], "job_done");
    assert_eq!(done["job"], "release push");
    assert_eq!(done["turn"], turn.as_str());
    let events = d.stop();
    assert_eq!(count(&events, "needs_input", &s.id), 1);
}

/// `baton hook` with a hook's JSON on stdin (as Claude Code runs it).
fn run_hook(d: &Daemon, agent: &str, input: &Value) -> std::process::Output {
    use std::io::Write;
    let mut child = d
        .baton()
        .args(["hook", "--agent", agent])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A Claude Code `Notification` hook (`permission_prompt`) on `baton hook`'s stdin
/// reaches the daemon: `needs_input` with the hook's message; a second witness of the
/// same wait (the registry) adds nothing; a `Stop` hook completes the unmarked answer
/// (`hook_stop`). With no daemon, `baton hook` still exits 0.
#[test]
fn a_hook_on_stdin_reaches_the_daemon() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &c.cwd);
    let s = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    // No daemon yet: nothing to hand it to, and still success.
    let none = run_hook(
        &tree,
        "claude",
        &json!({"hook_event_name": "Stop", "session_id": s.id}),
    );
    assert!(none.status.success());
    assert!(none.stdout.is_empty());

    let mut d = tree.start(&["--watch", &c.watch()]);
    let path = c.project.join(format!("{}.jsonl", s.id));
    let (p, turn) = s.prompt("delete the build folder");
    append(
        &path,
        (p + &s.tool_use("toolu_h", "Bash", json!({"command": "rm -r build"}))).as_bytes(),
    );
    d.wait_for("turn_started", of("turn_started", s.id.clone()));
    let out = run_hook(
        &d,
        "claude",
        &json!({"hook_event_name": "Notification", "notification_type": "permission_prompt",
            "session_id": s.id, "cwd": c.cwd, "transcript_path": path,
            "message": "Claude needs your permission to use Bash\u{1b}[31m"}),
    );
    assert!(out.status.success());
    let w = d.wait_for("needs_input", of("needs_input", s.id.clone()));
    assert_eq!(w["reason"], "permission prompt");
    assert_eq!(w["message"], "Claude needs your permission to use Bash");
    assert_eq!(w["turn"], turn.as_str());
    // The registry says the same wait.
    c.registry(pid, &entry(pid, &start, &s.id, &c.cwd, "waiting"));
    std::thread::sleep(std::time::Duration::from_millis(600));
    append(
        &path,
        (s.tool_result("toolu_h", "done") + &s.unmarked_answer("Removed build/.")).as_bytes(),
    );
    d.wait_for(
        "needs_input_resolved",
        of("needs_input_resolved", s.id.clone()),
    );
    let out = run_hook(
        &d,
        "claude",
        &json!({"hook_event_name": "Stop", "session_id": s.id, "stop_hook_active": false,
            "last_assistant_message": "Removed build/.".repeat(2000)}),
    );
    assert!(out.status.success());
    let done = d.wait_for("turn_completed", of("turn_completed", s.id.clone()));
    assert_eq!(done["evidence"], "hook_stop");
    let events = d.stop();
    assert_eq!(count(&events, "needs_input", &s.id), 1, "{events:#?}");
}

/// `baton hooks install --agent claude --file F` adds the three hooks once (twice is
/// the same file), keeps a backup and the person's own settings; `uninstall` gives the
/// original file's content back.
#[test]
fn hooks_install_and_uninstall_edit_the_settings_file() {
    let tree = Daemon::tree();
    let file = tree.dir.path().join("settings.json");
    let orig = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"say done\"\n          }\n        ]\n      }\n    ]\n  }\n}\n";
    fs::write(&file, orig).unwrap();
    let hooks = |args: &[&str]| {
        let out = tree
            .baton()
            .arg("hooks")
            .args(args)
            .args(["--agent", "claude", "--file"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let said = hooks(&["install"]);
    assert!(said.contains("+ "), "{said}");
    let installed = fs::read_to_string(&file).unwrap();
    let v: Value = serde_json::from_str(&installed).unwrap();
    for ev in ["Notification", "PermissionRequest", "Stop"] {
        let cmd = v["hooks"][ev].as_array().unwrap().last().unwrap()["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(cmd.ends_with("baton hook --agent claude"), "{cmd}");
    }
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
    let backup = tree.dir.path().join("settings.json.baton-backup");
    assert_eq!(fs::read_to_string(&backup).unwrap(), orig);
    assert!(hooks(&["install"]).contains("nothing to change"));
    assert_eq!(fs::read_to_string(&file).unwrap(), installed);
    hooks(&["uninstall"]);
    assert_eq!(fs::read_to_string(&file).unwrap(), orig);
    assert!(hooks(&["uninstall"]).contains("nothing to change"));
}

/// The registry's pid feeds liveness: a working session whose registry file names a
/// live process of its own stays working even though no `claude` runs in the directory
/// its transcript names; the same session without a registry file ends `writer_gone`.
#[test]
fn a_live_registry_process_keeps_its_session_working() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let elsewhere = tree.dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &elsewhere);
    let listed = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    let unlisted = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    c.registry(pid, &entry(pid, &start, &listed.id, &elsewhere, "busy"));
    let mut d = tree.start(&[
        "--watch",
        &c.watch(),
        "--liveness-after",
        "1s",
        "--debug-sweep-interval",
        "500ms",
    ]);
    for s in [&listed, &unlisted] {
        let path = c.project.join(format!("{}.jsonl", s.id));
        let (p, _) = s.prompt("long build");
        append(
            &path,
            (p + &s.tool_use("toolu_l", "Bash", json!({"command": "make"}))).as_bytes(),
        );
        d.wait_for("turn_started", of("turn_started", s.id.clone()));
    }
    d.wait_for("writer_gone", of("turn_interrupted", unlisted.id.clone()));
    // Another sweep or two.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let events = d.stop();
    assert_eq!(
        count(&events, "turn_interrupted", &listed.id),
        0,
        "{events:#?}"
    );
}

/// A registry file read half-written (the agent rewrites it in place), or full of NULs,
/// is counted and retried on its next change; the complete file then pages as usual.
#[test]
fn a_half_written_registry_file_is_retried() {
    let tree = Daemon::tree();
    let c = Config::new(&tree);
    let (pid, start, _claude) = fake_claude(&tree.dir.path().join("bin"), &c.cwd);
    let s = Session {
        id: uuid(),
        cwd: c.cwd.clone(),
    };
    let mut d = tree.start(&["--watch", &c.watch()]);
    let path = c.project.join(format!("{}.jsonl", s.id));
    let (p, _) = s.prompt("migrate the database");
    append(
        &path,
        (p + &s.tool_use("toolu_m", "Bash", json!({"command": "make migrate"}))).as_bytes(),
    );
    d.wait_for("turn_started", of("turn_started", s.id.clone()));
    let file = c.base.join("sessions").join(format!("{pid}.json"));
    let full = entry(pid, &start, &s.id, &c.cwd, "waiting").to_string();
    fs::write(&file, &full.as_bytes()[..full.len() / 2]).unwrap();
    fs::write(c.base.join("sessions").join("4242.json"), [0u8; 300]).unwrap();
    // Let the reader see both as they are.
    std::thread::sleep(std::time::Duration::from_millis(600));
    fs::write(&file, full.as_bytes()).unwrap();
    let w = d.wait_for("needs_input", of("needs_input", s.id.clone()));
    assert_eq!(w["reason"], "permission prompt");
    let (events, log) = d.stop_with_log();
    assert_eq!(count(&events, "needs_input", &s.id), 1);
    assert!(log.contains("unreadable=2"), "{log}");
}
