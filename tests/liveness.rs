//! Liveness with real processes: a working session whose writer lives stays working; once
//! the writer exits, the next check ends its turn as interrupted (`writer_gone`).
//!
//! Codex: a child process holds the rollout open for appending, as Codex does (a
//! process that only reads it does not count). Claude Code: a process
//! runs in the session's starting directory and is recognised as Claude Code by its
//! executable's name, `claude` (a copy of `sleep`: the native installer's binary is
//! such a file named `claude`). A process with any other name there does not count.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::Kill;
use baton::clock::{Now, parse_rfc3339};
use baton::daemon::liveness;
use baton::model::{Event, EventKind, ProviderKind, SessionState};
use baton::reduce::Reducer;
use baton::replay::{self, AtEof};
use baton::watch::Found;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const AFTER_MS: u64 = 120_000;

fn uid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// Reads `path` into a reducer, with the clock stopped at its last record.
fn load(path: &Path, provider: ProviderKind, last: &str) -> Reducer {
    let end = Now::virtual_at(parse_rfc3339(last).unwrap());
    let found = [Found {
        path: path.to_path_buf(),
        provider,
    }];
    replay::run(
        &found,
        &common::options(common::SETTLE_MS),
        AtEof::StopAt(end),
        |_| Ok(()),
    )
    .unwrap()
}

/// One liveness check at `now`, as the daemon's sweep makes it.
fn check(reducer: &mut Reducer, now: Now) -> Vec<Event> {
    let mut out = Vec::new();
    let quiet = reducer.quiet_working(now, AFTER_MS);
    liveness::check(
        Path::new("/proc"),
        uid(),
        AFTER_MS,
        quiet,
        reducer,
        now,
        &mut out,
    );
    out
}

fn state(reducer: &Reducer) -> SessionState {
    let views = reducer.sessions();
    assert_eq!(views.len(), 1);
    views[0].state
}

/// Waits (bounded) until `pid` shows `what` in /proc, so the check cannot race the
/// child's start.
fn wait_for(pid: u32, what: impl Fn(&Path) -> bool) {
    let dir = PathBuf::from(format!("/proc/{pid}"));
    for _ in 0..500 {
        if what(&dir) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("process {pid} never got ready");
}

fn at(ts: &str, plus_ms: i64) -> Now {
    Now::virtual_at(parse_rfc3339(ts).unwrap() + plus_ms)
}

#[test]
fn codex_turn_is_interrupted_only_after_the_rollout_is_closed() {
    use crate::common::codex;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout-2026-03-01T10-00-00-x.jsonl");
    // A turn that started and is working (a tool call went out), no end.
    let bytes = common::lines(&[
        codex::meta(0),
        codex::started(1, "t1"),
        codex::user(1, "refactor it"),
        codex::call(5, "c1"),
    ]);
    std::fs::write(&path, bytes).unwrap();
    let last = "2026-03-01T10:00:05.000Z";
    let mut reducer = load(&path, ProviderKind::Codex, last);
    assert_eq!(state(&reducer), SessionState::Working);

    // The writer: a process holding the rollout open.
    let writer = common::writer_of(&path);

    // Quiet, but not for long enough: not even looked at.
    assert!(check(&mut reducer, at(last, 60_000)).is_empty());
    // Quiet long enough, writer alive: still working.
    assert!(check(&mut reducer, at(last, 180_000)).is_empty());
    assert_eq!(state(&reducer), SessionState::Working);

    // A reader (as baton itself, or `tail -f`) holds it open too, and stays.
    let reader = Command::new("sh")
        .args(["-c", "exec 3<\"$0\"; exec sleep 600"])
        .arg(&path)
        .spawn()
        .unwrap();
    let rpid = reader.id();
    let _reader = Kill(reader);
    let real = std::fs::canonicalize(&path).unwrap();
    wait_for(rpid, |d| {
        std::fs::read_link(d.join("exe")).is_ok_and(|e| e.ends_with("sleep"))
            && std::fs::read_link(d.join("fd/3")).is_ok_and(|t| t == real)
    });

    writer.exit();
    let out = check(&mut reducer, at(last, 210_000));
    assert_eq!(common::kinds(&out), ["turn_interrupted"]);
    assert_eq!(out[0].reason.as_deref(), Some("writer_gone"));
    assert_eq!(out[0].turn.as_deref(), Some("t1"));
    assert_eq!(out[0].line, Some(4));
    assert_eq!(state(&reducer), SessionState::Interrupted);
    // Decided once.
    assert!(check(&mut reducer, at(last, 300_000)).is_empty());
}

/// A copy of `sleep` named `name` in `bin`, started in `cwd`.
fn sleeper(bin: &Path, name: &str, cwd: &Path) -> (u32, Kill) {
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a sleep binary");
    std::fs::create_dir_all(bin).unwrap();
    let exe = bin.join(name);
    if !exe.exists() {
        std::fs::copy(sleep, &exe).unwrap();
    }
    let child = Command::new(&exe)
        .arg("600")
        .current_dir(cwd)
        .spawn()
        .unwrap();
    let pid = child.id();
    let cwd = std::fs::canonicalize(cwd).unwrap();
    wait_for(pid, |d| {
        std::fs::read_link(d.join("exe")).is_ok_and(|e| e.ends_with(name))
            && std::fs::read_link(d.join("cwd")).is_ok_and(|c| c == cwd)
    });
    (pid, Kill(child))
}

#[test]
fn claude_turn_is_interrupted_only_after_claude_leaves_the_start_directory() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap().join("work");
    let elsewhere = work.with_file_name("elsewhere");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let cwd = work.display().to_string();
    let session = "11111111-2222-4333-8444-555555555555";
    let rec = |uuid: &str, ts: &str, cwd: &str, body: serde_json::Value| {
        let mut v = serde_json::json!({"uuid":uuid,"sessionId":session,"cwd":cwd,"timestamp":ts,"isSidechain":false});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        v.to_string()
    };
    // The session starts in `work`; a later record follows a `cd` in the Bash tool.
    let bytes = common::lines(&[
        rec(
            "u1",
            "2026-03-01T10:00:00.000Z",
            &cwd,
            serde_json::json!({"type":"user","message":{"role":"user","content":"build it"}}),
        ),
        rec(
            "a1",
            "2026-03-01T10:00:05.000Z",
            &format!("{cwd}/sub"),
            serde_json::json!({"type":"assistant","message":{"id":"m1","model":"claude-opus-4-6","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}],"stop_reason":null}}),
        ),
    ]);
    let path = dir
        .path()
        .join("projects/-work")
        .join(format!("{session}.jsonl"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let last = "2026-03-01T10:00:05.000Z";
    let mut reducer = load(&path, ProviderKind::Claude, last);
    assert_eq!(state(&reducer), SessionState::Working);
    let bin = dir.path().join("bin");

    // Claude Code in the start directory: alive.
    let (_, claude) = sleeper(&bin, "claude", &work);
    // Noise that must not count: another program there, and `claude` elsewhere.
    let (_, _other) = sleeper(&bin, "node-server", &work);
    let (_, _away) = sleeper(&bin, "claude", &elsewhere);
    assert!(check(&mut reducer, at(last, 180_000)).is_empty());
    assert_eq!(state(&reducer), SessionState::Working);

    claude.exit();
    let out = check(&mut reducer, at(last, 210_000));
    assert_eq!(common::kinds(&out), ["turn_interrupted"]);
    assert_eq!(out[0].reason.as_deref(), Some("writer_gone"));
    assert_eq!(state(&reducer), SessionState::Interrupted);
    assert_eq!(out[0].event, EventKind::TurnInterrupted);
}

/// Feeds `records` (all stamped by their own time) into `reducer`, as lines `from..`.
fn feed(
    reducer: &mut Reducer,
    proj: &mut dyn baton::provider::Projector,
    path: &Path,
    records: &[String],
    from: u64,
) -> Vec<Event> {
    let src_path: std::sync::Arc<str> = path.display().to_string().into();
    let mut out = Vec::new();
    for (i, rec) in records.iter().enumerate() {
        let mut obs = Vec::new();
        proj.project(rec.as_bytes(), &mut obs).unwrap();
        let ts = serde_json::from_str::<serde_json::Value>(rec).unwrap()["timestamp"]
            .as_str()
            .map(|t| parse_rfc3339(t).unwrap())
            .unwrap();
        let src = baton::reduce::Src {
            provider: ProviderKind::Codex,
            path: src_path.clone(),
            line: from + i as u64,
        };
        for o in obs {
            reducer.apply(&src, o, Now::virtual_at(ts), &mut out);
        }
    }
    out
}

#[test]
fn a_later_record_continues_the_session() {
    use crate::common::codex;
    let path = PathBuf::from("/nonexistent/rollout-2026-03-01T10-00-00-y.jsonl");
    let mut reducer = Reducer::new(common::SETTLE_MS, 1024);
    let mut proj = baton::provider::projector_for(ProviderKind::Codex, &path);
    let first = [
        codex::meta(0),
        codex::started(1, "t1"),
        codex::user(1, "go"),
        codex::call(5, "c1"),
    ];
    let out = feed(&mut reducer, proj.as_mut(), &path, &first, 1);
    assert_eq!(common::kinds(&out), ["turn_started"]);
    // The writer is gone (the reducer's decision, given that answer).
    let last = "2026-03-01T10:00:05.000Z";
    let key = reducer.quiet_working(at(last, 180_000), AFTER_MS)[0]
        .key
        .clone();
    let mut out = Vec::new();
    reducer.writer_gone(&key, at(last, 180_000), AFTER_MS, &mut out);
    assert_eq!(common::kinds(&out), ["turn_interrupted"]);
    assert_eq!(state(&reducer), SessionState::Interrupted);
    // The process was only slow (or was resumed): its next record takes the interrupt
    // back (one outcome per turn: only a retraction reopens a decided turn), and the
    // turn then completes as usual.
    let interrupt = out[0].id.clone();
    let more = [
        codex::output(200, "c1"),
        codex::complete(201, "t1", "Done."),
    ];
    let out = feed(&mut reducer, proj.as_mut(), &path, &more, 5);
    assert_eq!(common::kinds(&out), ["turn_resumed", "turn_completed"]);
    assert_eq!(out[0].supersedes.as_deref(), Some(interrupt.as_str()));
    assert_eq!(out[0].turn.as_deref(), Some("t1"));
    assert_eq!(state(&reducer), SessionState::Completed);
}

/// `scan` reads the processes once, before it judges (`Procs`): what that finds for a
/// question is what the daemon's own pass over /proc finds, writers and pids alike, and
/// a reader, another program in the directory or a `claude` elsewhere still do not count.
#[test]
fn processes_read_beforehand_find_what_a_sweep_finds() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let rollout = base.join("rollout-2026-03-01T10-00-00-x.jsonl");
    let unwritten = base.join("rollout-2026-03-01T11-00-00-y.jsonl");
    std::fs::write(&rollout, b"").unwrap();
    std::fs::write(&unwritten, b"").unwrap();
    let (work, elsewhere, empty) = (base.join("work"), base.join("away"), base.join("empty"));
    for d in [&work, &elsewhere, &empty] {
        std::fs::create_dir_all(d).unwrap();
    }
    let writer = common::writer_of(&rollout);
    let reader = Command::new("sh")
        .args(["-c", "exec 3<\"$0\"; exec sleep 600"])
        .arg(&unwritten)
        .spawn()
        .unwrap();
    let rpid = reader.id();
    let _reader = Kill(reader);
    wait_for(rpid, |d| {
        std::fs::read_link(d.join("fd/3")).is_ok_and(|t| t == unwritten)
    });
    let bin = base.join("bin");
    let (claude_pid, claude) = sleeper(&bin, "claude", &work);
    let (_, _other) = sleeper(&bin, "node-server", &empty);
    let (_, _away) = sleeper(&bin, "claude", &elsewhere);

    let mut want = baton::process::Wanted::default();
    want.open.insert(rollout.clone());
    want.open.insert(unwritten.clone());
    want.cwds.insert((ProviderKind::Claude, work.clone()));
    want.cwds.insert((ProviderKind::Claude, empty.clone()));
    let proc = Path::new("/proc");
    let found = baton::process::Procs::read(proc, uid())
        .unwrap()
        .find(&want);
    assert_eq!(found, baton::process::scan(proc, uid(), &want).unwrap());
    assert_eq!(found.open.iter().collect::<Vec<_>>(), [&rollout]);
    assert_eq!(
        found.cwds.into_iter().collect::<Vec<_>>(),
        [(ProviderKind::Claude, work.clone())]
    );
    assert_eq!(found.pids.get(&work), Some(&claude_pid));

    writer.exit();
    claude.exit();
    let found = baton::process::Procs::read(proc, uid())
        .unwrap()
        .find(&want);
    assert_eq!(found, baton::process::scan(proc, uid(), &want).unwrap());
    assert!(found.open.is_empty() && found.cwds.is_empty());
}
