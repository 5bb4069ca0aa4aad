//! `baton run` end to end: the real binary on a temporary tree.
//!
//! Waits have deadlines but nothing asserts how fast an event came.

use crate::common;

use crate::common::{Claude, Codex, Daemon, append, count, is, ts_ago};
use std::fs;
use std::io::Write;
use std::time::Duration;

#[test]
fn session_in_a_new_nested_directory_after_start() {
    let mut d = Daemon::tree().start(&[]);
    // Directory and file in quick succession: the file may exist before the watch.
    let c = Claude::new();
    let dir = d.claude().join("-home-u-proj").join("deeper").join("still");
    fs::create_dir_all(&dir).unwrap();
    let (bytes, turn) = c.turn("hello", "all done");
    append(&c.path_in(&dir), bytes.as_bytes());
    let ev = d.wait_for("claude completion", is("turn_completed", turn.clone()));
    assert_eq!(ev["message"], "all done");
    assert_eq!(ev["provider"], "claude");

    let x = Codex::new();
    let dir = d.codex().join("2026").join("11").join("29");
    fs::create_dir_all(&dir).unwrap();
    let (bytes, cturn) = x.turn("codex done");
    append(&x.path_in(&dir), (x.meta() + &bytes).as_bytes());
    let ev = d.wait_for("codex completion", is("turn_completed", cturn.clone()));
    assert_eq!(ev["provider"], "codex");
    assert_eq!(ev["session"], x.session.as_str());

    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &turn), 1);
    assert_eq!(count(&events, "turn_completed", &cturn), 1);
}

#[test]
fn appends_in_small_chunks_splitting_lines_and_characters() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    let path = c.path_in(&dir);
    let answer = "Fertig — 完成しました ✅ naïve café 🎉";
    let (p, turn) = c.prompt("schreib était 😀");
    let bytes = p + &c.answer(answer);
    let mut f = fs::File::create(&path).unwrap();
    // Chunk sizes 1..=5 put many cuts inside multi-byte characters and every line end.
    let mut i = 0;
    let mut k = 0;
    while i < bytes.len() {
        let n = (k % 5 + 1).min(bytes.len() - i);
        f.write_all(&bytes.as_bytes()[i..i + n]).unwrap();
        i += n;
        k += 1;
        if k % 7 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let ev = d.wait_for("completion", is("turn_completed", turn.clone()));
    assert_eq!(ev["message"], answer, "characters survive being split");
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &turn), 1);
    let anomalies: Vec<_> = events.iter().filter(|e| e["event"] == "anomaly").collect();
    assert!(
        anomalies.is_empty(),
        "no partial line may be parsed: {anomalies:?}"
    );
}

#[test]
fn completion_in_a_file_truncated_and_rewritten() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    let path = c.path_in(&dir);
    let (turn_a, a) = c.turn("first", "answer A");
    append(&path, turn_a.as_bytes());
    d.wait_for("A", is("turn_completed", a.clone()));

    // Truncated to nothing, then rewritten with the old turn and a new one.
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (turn_b, b) = c.turn("second", "answer B");
    fs::write(&path, format!("{turn_a}{turn_b}")).unwrap();
    d.wait_for("B", is("turn_completed", b.clone()));

    // Rewritten in place (new bytes up front, same inode): the marker catches it.
    let (turn_c, cc) = c.turn("third", "answer C");
    let summary = "{\"type\":\"summary\",\"summary\":\"compacted\",\"leafUuid\":\"x\"}\n";
    fs::write(&path, format!("{summary}{turn_a}{turn_b}{turn_c}")).unwrap();
    d.wait_for("C", is("turn_completed", cc.clone()));

    let events = d.stop();
    for t in [&a, &b, &cc] {
        assert_eq!(count(&events, "turn_completed", t), 1, "turn {t}");
    }
}

fn open_fds_to(pid: u32, name: &str) -> Vec<String> {
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p.contains(name))
        .collect()
}

#[test]
fn deletion_releases_the_file_and_a_new_file_at_that_path_is_read() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    let path = c.path_in(&dir);
    let (turn_a, a) = c.turn("first", "answer A");
    append(&path, turn_a.as_bytes());
    d.wait_for("A", is("turn_completed", a.clone()));

    // A completion written just before the delete still counts.
    let (turn_b, b) = c.turn("second", "answer B");
    append(&path, turn_b.as_bytes());
    fs::remove_file(&path).unwrap();
    d.wait_for("B", is("turn_completed", b.clone()));

    // The handle is released.
    let pid = d.pid();
    let deadline = std::time::Instant::now() + common::DEADLINE;
    loop {
        let held = open_fds_to(pid, &c.session);
        if held.is_empty() {
            break;
        }
        if std::time::Instant::now() > deadline {
            d.fail(&format!("deleted file still open: {held:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // The same path again: a new file, read from its first byte.
    let (turn_c, cc) = c.turn("third", "answer C");
    append(&path, turn_c.as_bytes());
    d.wait_for("C", is("turn_completed", cc.clone()));
    let events = d.stop();
    for t in [&a, &b, &cc] {
        assert_eq!(count(&events, "turn_completed", t), 1, "turn {t}");
    }
}

#[test]
fn history_at_start_gives_no_events() {
    let d = Daemon::tree();
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    // Recent turns: only "present at start" makes them history.
    let mut paths = Vec::new();
    for _ in 0..3 {
        let c = Claude::new();
        let (t1, _) = c.turn("one", "done one");
        let (t2, _) = c.turn("two", "done two");
        append(
            &c.path_in(&dir),
            format!("{t1}not json at all\n{t2}").as_bytes(),
        );
        paths.push(c.path_in(&dir));
    }
    let x = Codex::new();
    let cdir = d.codex().join("2026/11/29");
    fs::create_dir_all(&cdir).unwrap();
    let (t, _) = x.turn("codex answer");
    append(&x.path_in(&cdir), (x.meta() + &t).as_bytes());
    // A session whose turn is still open at start.
    let open = Claude::new();
    let (p, open_turn) = open.prompt("still working on it");
    append(&open.path_in(&dir), p.as_bytes());

    let mut d = d.start(&[]);
    let before = d.events();
    assert_eq!(before.len(), 1, "only daemon_ready: {before:?}");

    // Going live continues from the state history left: the open turn completes.
    append(&open.path_in(&dir), open.answer("finished").as_bytes());
    d.wait_for("open turn", is("turn_completed", open_turn.clone()));
    let events = d.stop();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        ["daemon_ready", "turn_completed", "daemon_stopping"],
        "{events:?}"
    );
}

#[test]
fn a_late_file_full_of_old_turns_pages_nobody() {
    let mut d = Daemon::tree().start(&[]);
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    let old = Claude::new();
    let hour = ts_ago(Duration::from_secs(3600));
    let (p, old_turn) = old.prompt_at("long ago", &hour);
    append(
        &old.path_in(&dir),
        (p + &old.answer_at("old answer", &hour)).as_bytes(),
    );
    // A fresh turn after it, in the same file: live.
    let (t, new_turn) = old.turn("now", "new answer");
    append(&old.path_in(&dir), t.as_bytes());
    d.wait_for("new turn", is("turn_completed", new_turn.clone()));
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &old_turn), 0);
    assert_eq!(count(&events, "turn_started", &old_turn), 0);
}

/// A daemon that sees only what it polls: every native event thrown away, live files
/// polled every 200 ms and everything swept every second.
const BLIND: [&str; 5] = [
    "--debug-drop-native-events",
    "--poll-interval",
    "200ms",
    "--debug-sweep-interval",
    "1s",
];

/// Seed 004 test 8, with a hook that throws away every native event.
#[test]
fn polling_recovers_missed_watcher_events_hook() {
    let d = Daemon::tree();
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    let c = Claude::new();
    let (t, _) = c.turn("before start", "old");
    append(&c.path_in(&dir), t.as_bytes());
    let mut d = d.start(&BLIND);
    // A live file: found by the poll of live files.
    let (t, a) = c.turn("after start", "seen by polling");
    append(&c.path_in(&dir), t.as_bytes());
    d.wait_for("append to a known file", is("turn_completed", a.clone()));
    // A new file in a new directory: found by the sweep.
    let n = Claude::new();
    let ndir = d.claude().join("other").join("deep");
    fs::create_dir_all(&ndir).unwrap();
    let (t, b) = n.turn("new file", "seen by the sweep");
    append(&n.path_in(&ndir), t.as_bytes());
    d.wait_for("new file", is("turn_completed", b.clone()));
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &a), 1);
    assert_eq!(count(&events, "turn_completed", &b), 1);
}

/// A sweep over more files and directories than it stats at a time (it goes in steps,
/// between batches of live events) still reaches every one: a turn appended to an idle
/// file and a new file in a known directory, neither seen by the watcher, both come out.
#[test]
fn a_sweep_in_steps_reaches_every_file_and_directory() {
    let d = Daemon::tree();
    let old = ts_ago(Duration::from_secs(3 * 3600));
    let mut idle = Vec::new();
    for i in 0..300 {
        let dir = d.claude().join(format!("proj{i:03}"));
        fs::create_dir_all(&dir).unwrap();
        for _ in 0..2 {
            let c = Claude::new();
            let (p, _) = c.prompt_at("before start", &old);
            let path = c.path_in(&dir);
            fs::write(&path, p + &c.answer_at("old", &old)).unwrap();
            // Idle for hours: not in the live set the poll stats.
            fs::File::open(&path)
                .unwrap()
                .set_modified(std::time::SystemTime::now() - Duration::from_secs(3 * 3600))
                .unwrap();
            idle.push((c, dir.clone()));
        }
    }
    let mut d = d.start(&BLIND);
    let (c, dir) = &idle[331];
    let (t, a) = c.turn("after start", "seen by the sweep's file pass");
    append(&c.path_in(dir), t.as_bytes());
    let n = Claude::new();
    let (t, b) = n.turn("new file", "seen by the sweep's directory pass");
    append(&n.path_in(&idle[517].1), t.as_bytes());
    d.wait_for("idle file", is("turn_completed", a.clone()));
    d.wait_for("new file", is("turn_completed", b.clone()));
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &a), 1);
    assert_eq!(count(&events, "turn_completed", &b), 1);
}

/// Seed 004 test 8, black-box: inotify on the watched directory does not see a write
/// made through a hard link in another directory; polling must.
#[test]
fn polling_recovers_a_write_through_a_hard_link() {
    let mut d = Daemon::tree().start(&["--poll-interval", "200ms"]);
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    let c = Claude::new();
    let (t, a) = c.turn("first", "via the watched path");
    append(&c.path_in(&dir), t.as_bytes());
    d.wait_for("A", is("turn_completed", a.clone()));

    let elsewhere = d.dir.path().join("unwatched");
    fs::create_dir_all(&elsewhere).unwrap();
    let link = elsewhere.join("link.jsonl");
    fs::hard_link(c.path_in(&dir), &link).unwrap();
    let (t, b) = c.turn("second", "via the hard link");
    append(&link, t.as_bytes());
    d.wait_for("B", is("turn_completed", b.clone()));
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &b), 1);
}

#[test]
fn bad_input_under_load_does_not_hide_the_next_completion() {
    let mut d = Daemon::tree().start(&[]);
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();

    // Load: other sessions finishing turns all the while.
    let load_dir = dir.clone();
    let load = std::thread::spawn(move || {
        let sessions: Vec<Claude> = (0..20).map(|_| Claude::new()).collect();
        let mut turns = Vec::new();
        for round in 0..15 {
            for s in &sessions {
                let (t, id) = s.turn(&format!("round {round}"), "ok");
                append(&s.path_in(&load_dir), t.as_bytes());
                turns.push(id);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        turns
    });

    let c = Claude::new();
    let path = c.path_in(&dir);
    // A malformed line.
    let (p, t1) = c.prompt("one");
    append(&path, p.as_bytes());
    append(&path, b"{\"type\":\"assistant\",\"message\":{oops\n");
    append(&path, c.answer("after malformed").as_bytes());
    // A 50 MiB line (over the 16 MiB limit), written in 1 MiB pieces.
    let (p, t2) = c.prompt("two");
    append(&path, p.as_bytes());
    {
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        f.write_all(b"{\"type\":\"user\",\"message\":{\"content\":\"")
            .unwrap();
        for _ in 0..50 {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\"}}\n").unwrap();
    }
    append(&path, c.answer("after huge").as_bytes());
    // A NUL run (a writer that crashed mid-append), then a record.
    let (p, t3) = c.prompt("three");
    append(&path, p.as_bytes());
    let mut nul = vec![0u8; 4096];
    nul.extend_from_slice(c.answer("after NULs").as_bytes());
    append(&path, &nul);

    for (t, msg) in [
        (&t1, "after malformed"),
        (&t2, "after huge"),
        (&t3, "after NULs"),
    ] {
        let ev = d.wait_for(msg, is("turn_completed", t.clone()));
        assert_eq!(ev["message"], msg);
    }
    let load_turns = load.join().unwrap();
    let ids = load_turns.clone();
    d.wait_count("load completions", load_turns.len(), move |e| {
        e["event"] == "turn_completed" && ids.iter().any(|t| e["turn"] == t.as_str())
    });
    let events = d.stop();
    for reason in ["malformed_line", "oversized_line", "nul_bytes"] {
        assert!(
            events
                .iter()
                .any(|e| e["event"] == "anomaly" && e["reason"] == reason),
            "no {reason} anomaly"
        );
    }
    for t in load_turns.iter().chain([&t1, &t2, &t3]) {
        assert_eq!(count(&events, "turn_completed", t), 1, "turn {t}");
    }
}

#[test]
fn missing_config_file_is_a_clear_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", "--config", "/nonexistent/baton.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read the config file /nonexistent/baton.toml"),
        "{err}"
    );
}

/// The watch limit hit by a root that is one file says so too (it was silent), and the
/// file is still followed, by polling.
#[test]
fn watch_limit_on_a_file_root_warns_and_the_file_is_polled() {
    let d = Daemon::tree();
    let solo = d.dir.path().join("solo");
    fs::create_dir_all(&solo).unwrap();
    let c = Claude::new();
    let file = c.path_in(&solo);
    let (p, _) = c.prompt("hi");
    append(&file, p.as_bytes());
    // Two watches: the tree's two folders take them, the file root finds none.
    let root = format!("claude={}", file.display());
    let mut d = d.start(&[
        "--watch",
        &root,
        "--debug-max-watches",
        "2",
        "--poll-interval",
        "200ms",
    ]);
    let log = d.wait_log("the watch limit warning", |l| {
        l.contains("falls back to polling")
    });
    assert!(log.contains(&file.display().to_string()), "{log}");
    assert!(log.contains("max_user_watches"), "{log}");
    let (t, id) = c.turn("again", "done");
    append(&file, t.as_bytes());
    d.wait_for("the file root's turn, by polling", is("turn_completed", id));
    let (_, log) = d.stop_with_log();
    assert_eq!(log.matches("falls back to polling").count(), 1, "{log}");
}

#[test]
fn watch_flag_names_the_bad_provider() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", "--no-default-roots", "--watch", "aider=/tmp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown provider `aider`"), "{err}");
}

/// Watch limit (ENOSPC from inotify_add_watch), simulated by a test hook: the root falls
/// back to polling with one warning, and sessions in unwatched directories still report.
#[test]
fn watch_limit_falls_back_to_polling() {
    let mut d = Daemon::tree().start(&["--debug-max-watches", "3", "--poll-interval", "200ms"]);
    let mut turns = Vec::new();
    for i in 0..4 {
        let dir = d.claude().join(format!("proj{i}")).join("sub");
        fs::create_dir_all(&dir).unwrap();
        let c = Claude::new();
        let (t, id) = c.turn("hi", "done");
        append(&c.path_in(&dir), t.as_bytes());
        d.wait_for(
            "completion in a new directory",
            is("turn_completed", id.clone()),
        );
        // And an append to the same file later.
        let (t, id2) = c.turn("again", "done again");
        append(&c.path_in(&dir), t.as_bytes());
        d.wait_for("append", is("turn_completed", id2.clone()));
        turns.extend([id, id2]);
    }
    let (events, log) = d.stop_with_log();
    for t in &turns {
        assert_eq!(count(&events, "turn_completed", t), 1, "turn {t}");
    }
    let warnings = log.matches("falls back to polling").count();
    assert_eq!(warnings, 1, "exactly one warning per root:\n{log}");
}
