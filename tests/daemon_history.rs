//! A first run reads history on worker threads (open, tail-first plan, read, project)
//! while the core thread applies each file's result in the order the walk found it. What
//! the daemon knows after `daemon_ready` (`status`), the events that follow an append,
//! and the state it saves must be those of the one-thread read, which reads each file as
//! the walk finds it (`--debug-history-threads 1`).

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, Codex, DEADLINE, append};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `baton run` on a shared tree, with its own events, state and socket.
struct Run {
    child: Option<Child>,
    dir: PathBuf,
    events: PathBuf,
    log: PathBuf,
}

impl Run {
    /// Starts a first run on `roots` (provider, dir) and waits for `daemon_ready`.
    fn start(work: &Path, tag: &str, roots: &[(&str, PathBuf)], threads: &str) -> Run {
        let dir = work.join(tag);
        fs::create_dir_all(dir.join("run")).unwrap();
        let events = dir.join("events.jsonl");
        let log = dir.join("baton.log");
        let mut cmd = Run::baton(&dir);
        cmd.arg("run").arg("--no-default-roots");
        for (provider, path) in roots {
            cmd.arg("--watch")
                .arg(format!("{provider}={}", path.display()));
        }
        cmd.arg("--events")
            .arg(&events)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(["--no-desktop", "--debug-history-threads", threads])
            .env("BATON_LOG", "baton=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        let mut run = Run {
            child: Some(cmd.spawn().unwrap()),
            dir,
            events,
            log,
        };
        // Debug builds read a corpus slowly: wait longer than the usual deadline.
        run.wait("daemon_ready", 6 * DEADLINE, |evs| {
            evs.iter().any(|e| e["event"] == "daemon_ready")
        });
        run
    }

    /// `baton` isolated to this run's runtime, config and state directories.
    fn baton(dir: &Path) -> Command {
        common::baton_in(dir, "xdg-state")
    }

    fn events(&self) -> Vec<Value> {
        fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn wait(&mut self, what: &str, deadline: Duration, done: impl Fn(&[Value]) -> bool) {
        let start = Instant::now();
        while !done(&self.events()) {
            let exited = self.child.as_mut().unwrap().try_wait().unwrap();
            if exited.is_some() || start.elapsed() > deadline {
                let log = fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "{}: no {what} ({exited:?})\n{}",
                    self.dir.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `status --json`, one row a session.
    fn status(&self) -> Vec<Value> {
        // The daemon of that state directory listens in it.
        let out = Run::baton(&self.dir)
            .args(["status", "--json", "--state-dir"])
            .arg(self.dir.join("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// SIGTERM and wait for a clean exit.
    fn stop(&mut self) {
        let mut child = self.child.take().unwrap();
        let killed = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let start = Instant::now();
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                assert!(s.success(), "{}: exit {s}", self.dir.display());
                return;
            }
            assert!(start.elapsed() < DEADLINE, "baton did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The saved state, as the next start would load it: every file's checkpoint, the
    /// ids in the ledger, and the ids decided since. Times taken from the clock (settle
    /// deadlines; how long the ledger keeps an id that has no record time) differ by
    /// when each run started, and are left out.
    fn saved(&self) -> (BTreeMap<String, Value>, Value, Value) {
        use baton::state::store;
        let dir = self.dir.join("state");
        let mut base = store::read(&dir, "state.json").unwrap().unwrap();
        store::apply_logs(&dir, &mut base).unwrap();
        let files = base
            .files
            .into_iter()
            .map(|(p, l)| {
                let mut v = serde_json::from_str(&l).unwrap();
                no_deadlines(&mut v);
                (p, v)
            })
            .collect();
        let mut ledger = serde_json::to_value(&base.ledger).unwrap();
        for ids in ledger["sessions"].as_object_mut().unwrap().values_mut() {
            // [id, keep until] pairs.
            for pair in ids.as_array_mut().unwrap() {
                *pair = pair[0].take();
            }
        }
        let mut decided: Vec<Value> = base
            .decided
            .iter()
            .map(|d| serde_json::to_value(d).unwrap())
            .collect();
        decided.sort_by_key(Value::to_string);
        (files, ledger, Value::Array(decided))
    }

    /// The transcript events, without the time they were sent.
    fn turn_events(&self) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| !e["provider"].is_null())
            .map(|mut e| {
                e.as_object_mut().unwrap().remove("ts");
                e
            })
            .collect()
    }

    fn tally(&self) -> (usize, usize) {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        (
            log.matches("History read from its last turn").count(),
            log.matches("History read whole").count(),
        )
    }
}

fn no_deadlines(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if k == "deadline" && v.is_number() {
                    *v = Value::Null;
                } else {
                    no_deadlines(v);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(no_deadlines),
        _ => {}
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs a parallel and a one-thread first start on `roots`, side by side, and compares
/// them: `status` at `daemon_ready`, the events after a turn is appended to `claude`
/// and to `codex` (transcripts in the tree), and the state each saves when stopped.
fn compare(work: &Path, roots: &[(&str, PathBuf)], claude: &Path, codex: &Path) {
    let mut par = Run::start(work, "par", roots, "3");
    let mut one = Run::start(work, "one", roots, "1");
    let status = par.status();
    assert!(status.len() > 10, "the tree has sessions: {status:?}");
    assert_eq!(status, one.status(), "status at daemon_ready");
    // The same files took the tail-first path, and the same fell back to a whole read.
    assert_eq!(par.tally(), one.tally());
    assert!(par.tally().0 > 0, "some files were read tail-first");

    let c = Claude::new();
    let (bytes, claude_turn) = c.turn("more", "done");
    append(claude, bytes.as_bytes());
    let x = Codex::new();
    let (bytes, codex_turn) = x.turn("done too");
    append(codex, bytes.as_bytes());
    for run in [&mut par, &mut one] {
        run.wait("the appended turns", DEADLINE, |evs| {
            [&claude_turn, &codex_turn].iter().all(|t| {
                evs.iter()
                    .any(|e| e["event"] == "turn_completed" && e["turn"] == t.as_str())
            })
        });
    }
    par.stop();
    one.stop();
    let events = par.turn_events();
    assert!(events.len() >= 4, "{events:?}");
    assert_eq!(events, one.turn_events(), "events after the append");
    let (files, ledger, decided) = par.saved();
    let (one_files, one_ledger, one_decided) = one.saved();
    assert!(files.len() > 10);
    assert_eq!(files.len(), one_files.len(), "files checkpointed");
    for (p, line) in &files {
        assert_eq!(Some(line), one_files.get(p), "checkpoint of {p}");
    }
    assert_eq!(ledger, one_ledger, "ledger");
    assert_eq!(decided, one_decided, "decided ids");
}

/// Sets every other file under `dir` two days back: idle sessions (settled at start, sent
/// cold) beside recent ones (kept warm), as on a real machine.
fn backdate(dir: &Path) {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in fs::read_dir(d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let then = std::time::SystemTime::now() - Duration::from_secs(2 * 86_400);
    for path in files.iter().step_by(2) {
        let f = fs::OpenOptions::new().append(true).open(path).unwrap();
        f.set_modified(then).unwrap();
    }
}

/// Copies every file under `from` into `to`.
fn copy_tree(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            fs::create_dir_all(&dest).unwrap();
            copy_tree(&entry.path(), &dest);
        } else {
            fs::copy(entry.path(), dest).unwrap();
        }
    }
}

#[test]
fn parallel_first_start_equals_one_thread_on_the_corpus() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let mut roots = Vec::new();
    for provider in ["claude", "codex", "pi"] {
        let dir = tree.join(provider);
        fs::create_dir_all(&dir).unwrap();
        copy_tree(&corpus.join(provider), &dir);
        roots.push((provider, dir));
    }
    let claude = tree.join("claude/marot__spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl");
    let codex = tree.join(
        "codex/madshn__localpush/rollout-2026-02-23T12-47-42-019c8a53-a0dd-7130-bcd7-95445d84846a.jsonl",
    );
    assert!(claude.is_file() && codex.is_file());
    backdate(&tree);
    compare(tmp.path(), &roots, &claude, &codex);
}

#[test]
fn parallel_first_start_equals_one_thread_on_a_generated_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let args = [
        "--mib",
        "4",
        "--sessions",
        "60",
        "--seed",
        "11",
        "--huge-every",
        "15",
    ];
    let Some(manifest) = common::generate(&tree, &args) else {
        return;
    };
    let pick = |provider: &str| {
        let s = manifest["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["provider"] == provider)
            .unwrap();
        tree.join(s["path"].as_str().unwrap())
    };
    let (claude, codex) = (pick("claude"), pick("codex"));
    extras(&tree.join("claude/projects/-home-USER-src-extra"));
    backdate(&tree);
    let roots = vec![
        ("claude", tree.join("claude")),
        ("codex", tree.join("codex")),
    ];
    compare(tmp.path(), &roots, &claude, &codex);
}

/// Files beside the generated ones: one read whole that is longer than a worker reads
/// (the core thread reads the rest), and one with bad lines.
fn extras(dir: &Path) {
    use crate::common::claude as c;
    fs::create_dir_all(dir).unwrap();
    let session = c::SESSION;
    let mut big = vec![c::prompt("p1", 0, "one long turn")];
    let filler = "x".repeat(1000);
    let mut n = 0;
    // One turn (no restart point before it): read whole, past what a worker reads (4 MiB).
    while big.iter().map(String::len).sum::<usize>() < 9 * 1024 * 1024 {
        n += 1;
        big.push(c::text(
            &format!("a{n}"),
            1,
            &format!("m{n}"),
            &format!("{filler} {n}"),
            None,
        ));
    }
    big.push(c::text("end", 2, "mend", "the answer", Some("end_turn")));
    fs::write(dir.join(format!("{session}.jsonl")), common::lines(&big)).unwrap();
    let bad = [
        c::prompt("q1", 0, "first"),
        "{not json".to_owned(),
        c::text("q2", 1, "m1", "an answer", Some("end_turn")),
        "\0\0\0{\"type\":\"user\"".to_owned(),
        c::prompt("q3", 2, "second"),
    ];
    fs::write(
        dir.join("22222222-2222-4333-8444-555555555555.jsonl"),
        common::lines(&bad),
    )
    .unwrap();
}
