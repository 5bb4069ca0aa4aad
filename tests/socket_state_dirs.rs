//! Two daemons, each with its own state directory, run at once on one machine (same
//! runtime directory): each listens in its own state directory, and `status` given that
//! directory (or the socket) answers for that daemon's tree. And `run` checks its
//! settings before it opens the state directory: a bad webhook URL is a usage error
//! (exit 2) even while another daemon holds that directory (which alone would be exit 5).

#![allow(clippy::unwrap_used)]

use crate::common::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `baton` isolated to `dir` (runtime, config and state homes shared by both daemons).
fn baton(dir: &Path) -> Command {
    baton_in(dir, "xdg-state")
}

struct Run {
    child: Child,
    events: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `baton run` on `root` with state directory `state` and no `--socket`.
fn start(dir: &Path, tag: &str) -> Run {
    let events = dir.join(format!("{tag}.jsonl"));
    let child = baton(dir)
        .args(["run", "--no-default-roots", "--no-desktop", "--watch"])
        .arg(format!("codex={}", dir.join(tag).display()))
        .arg("--state-dir")
        .arg(dir.join(format!("{tag}-state")))
        .arg("--events")
        .arg(&events)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(dir.join(format!("{tag}.log"))).unwrap())
        .spawn()
        .unwrap();
    let mut run = Run { child, events };
    let start = Instant::now();
    while !fs::read_to_string(&run.events).is_ok_and(|t| t.contains("daemon_ready")) {
        if let Ok(Some(status)) = run.child.try_wait() {
            let log = fs::read_to_string(dir.join(format!("{tag}.log"))).unwrap_or_default();
            panic!("daemon {tag} exited ({status}):\n{log}");
        }
        assert!(start.elapsed() < DEADLINE, "daemon {tag} never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    run
}

/// A Codex session in `dir/tag`, already done: its id.
fn session(dir: &Path, tag: &str) -> String {
    let x = Codex::new();
    let root = dir.join(tag);
    fs::create_dir_all(&root).unwrap();
    let (turn, _) = x.turn("done");
    append(&x.path_in(&root), format!("{}{turn}", x.meta()).as_bytes());
    x.session
}

fn sessions(out: &std::process::Output) -> Vec<String> {
    assert_ok(out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["session"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn two_daemons_with_two_state_dirs_answer_for_their_own_trees() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir_all(dir.join("run")).unwrap();
    let one = session(dir, "one");
    let two = session(dir, "two");
    let _a = start(dir, "one");
    let _b = start(dir, "two");
    assert!(dir.join("one-state/baton.sock").exists());
    assert!(dir.join("two-state/baton.sock").exists());

    let out = baton(dir)
        .args(["status", "--json", "--state-dir"])
        .arg(dir.join("one-state"))
        .output()
        .unwrap();
    assert_eq!(sessions(&out), [one]);
    let out = baton(dir)
        .args(["status", "--json", "--socket"])
        .arg(dir.join("two-state/baton.sock"))
        .output()
        .unwrap();
    assert_eq!(sessions(&out), [two]);
    // Neither took the default instance's socket.
    let out = baton(dir).args(["status", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn a_bad_setting_is_a_usage_error_before_the_state_dir_is_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir_all(dir.join("run")).unwrap();
    fs::create_dir_all(dir.join("one")).unwrap();
    let _a = start(dir, "one");
    let bad = dir.join("bad.toml");
    let cases = [
        ("[[webhook]]\nurl = \"ftp://example.com/hook\"\n", "webhook"),
        // Checked only where the sink is built: before the state directory all the same.
        ("[[webhook]]\nurl = \"http://\"\n", "not a valid url"),
        ("on_event = [\"\"]\n", "command"),
        ("[desktop]\ncooldown = \"3 weeks\"\n", "cooldown"),
    ];
    for (config, says) in cases {
        fs::write(&bad, config).unwrap();
        let out = baton(dir)
            .args(["run", "--no-default-roots", "--watch"])
            .arg(format!("codex={}", dir.join("one").display()))
            .arg("--state-dir")
            .arg(dir.join("one-state"))
            .arg("--config")
            .arg(&bad)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {err}");
        assert!(err.to_lowercase().contains(says), "{config}: {err}");
    }
    // A bad flag: clap's usage error, whatever holds the state directory.
    let out = baton(dir)
        .args(["run", "--settle", "30sek", "--state-dir"])
        .arg(dir.join("one-state"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--settle") && err.contains("--help"), "{err}");
}

/// A socket that cannot be made is a failure to start (exit 9, "cannot start: the
/// socket …"), not a bad command line (exit 2, which it was before the error classes).
#[test]
fn a_socket_that_cannot_be_made_is_a_start_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir_all(dir.join("root")).unwrap();
    // The socket's folder would be inside a regular file.
    fs::write(dir.join("not-a-dir"), "").unwrap();
    let out = baton(dir)
        .args(["run", "--no-default-roots", "--no-desktop", "--watch"])
        .arg(format!("codex={}", dir.join("root").display()))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--socket")
        .arg(dir.join("not-a-dir/run/baton.sock"))
        .arg("--events")
        .arg(dir.join("events.jsonl"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("cannot start: the socket"), "{err}");
}
