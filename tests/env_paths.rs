//! Paths from the environment are absolute or ignored: a relative `HOME` or `XDG_*`
//! value counts as unset (as the XDG Base Directory spec says), so nothing is ever made
//! or read relative to the working directory; with nothing absolute left, a clear error.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::DEADLINE;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// `baton ARGS` in `cwd` with only the given environment (and PATH).
fn baton_in(cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("BATON_LOG", "baton=info")
        .args(args)
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// What is in `dir` (names), sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Runs `baton run` and waits for it to exit (killing it at the deadline): the exit
/// code (`None`: it kept running) and stderr.
fn run_until_exit(mut cmd: Command) -> (Option<i32>, String) {
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(err.reopen().unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (code, std::fs::read_to_string(err.path()).unwrap())
}

#[test]
fn a_relative_home_makes_nothing_in_the_working_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("cwd");
    let root = tmp.path().join("claude");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let watch = format!("claude={}", root.display());
    let events = tmp.path().join("events.jsonl");
    let args = [
        "run",
        "--no-default-roots",
        "--watch",
        &watch,
        "--events",
        events.to_str().unwrap(),
        "--no-desktop",
    ];
    // HOME and every XDG directory relative: no state directory is left.
    let env = [
        ("HOME", "home"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_RUNTIME_DIR", "run"),
        ("XDG_CONFIG_HOME", "config"),
    ];
    let (code, err) = run_until_exit(baton_in(&cwd, &env, &args));
    println!(
        "FIGURE relative HOME: exit {code:?}; made in the working directory: {:?}",
        entries(&cwd)
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("absolute"), "{err}");
    assert!(err.contains("HOME"), "{err}");
    assert!(entries(&cwd).is_empty(), "made {:?}", entries(&cwd));

    // An absolute XDG_STATE_HOME is used; the relative HOME still makes nothing.
    let state_home = tmp.path().join("xdg-state");
    let env = [
        ("HOME", "home"),
        ("XDG_STATE_HOME", state_home.to_str().unwrap()),
        ("XDG_RUNTIME_DIR", "run"),
    ];
    let mut child = baton_in(&cwd, &env, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sock = state_home.join("baton").join("baton.sock");
    let start = Instant::now();
    while !sock.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "baton exited with an absolute XDG_STATE_HOME"
        );
        assert!(
            start.elapsed() < DEADLINE,
            "no socket at {}",
            sock.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // `status` finds it the same way.
    let out = baton_in(&cwd, &env, &["status"]).output().unwrap();
    common::assert_ok(&out);
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
    assert!(state_home.join("baton").join("lock").exists());
    assert!(entries(&cwd).is_empty(), "made {:?}", entries(&cwd));
}

#[test]
fn a_relative_config_home_is_not_read_from_the_working_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    // A config file where a relative XDG_CONFIG_HOME (or HOME) would point.
    for dir in ["config/baton", "home/.config/baton"] {
        std::fs::create_dir_all(cwd.join(dir)).unwrap();
        std::fs::write(cwd.join(dir).join("config.toml"), "settle = \"77s\"\n").unwrap();
    }
    let env = [("HOME", "home"), ("XDG_CONFIG_HOME", "config")];
    let out = baton_in(cwd, &env, &["config"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    common::assert_ok(&out);
    assert!(text.contains("no config file"), "{text}");
    assert!(!text.contains("77s"), "{text}");
}

#[test]
fn status_with_only_relative_directories_says_there_is_no_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let env = [
        ("HOME", "home"),
        ("XDG_RUNTIME_DIR", "run"),
        ("XDG_STATE_HOME", "state"),
    ];
    let out = baton_in(tmp.path(), &env, &["status"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("absolute"), "{err}");
    assert!(entries(tmp.path()).is_empty());
}
