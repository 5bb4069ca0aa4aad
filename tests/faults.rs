//! Faults around the daemon's core, end to end with the real binary: a descriptor limit
//! under a burst of files, a writer whose clock runs late, a same-size rewrite that puts
//! the old mtime back, a retargeted symlinked root, and log floods from a file truncated
//! over and over.
//!
//! Waits have deadlines but nothing asserts how fast an event came.

use crate::common::{Claude, Daemon, append, is, ts_ago};
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Open descriptors of a process.
fn fd_count(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The most descriptors baton may hold beyond its transcript handles: stdio, the event
/// stream, the log, the watcher, the runtime's and the state writer's own.
const FD_SLACK: usize = 40;
/// The cap on transcript handles (docs/reliability.md, "Following files": "At most 256 are
/// open at any moment").
const MAX_OPEN: usize = 256;

#[test]
fn the_handle_cap_holds_at_every_moment_under_a_1024_descriptor_limit() {
    if !Path::new("/usr/bin/prlimit").exists() && !Path::new("/bin/prlimit").exists() {
        eprintln!("skipped: no prlimit (util-linux) to set the descriptor limit");
        return;
    }
    const FILES: usize = 1500;
    let mut d = Daemon::tree();
    d.spawn_wrapped(&["prlimit", "--nofile=1024:1024"], &[]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let pid = d.pid();
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains("1024")),
        "the daemon does not run under the 1024 limit:\n{limits}"
    );
    // Sample the descriptor count all along.
    let peak = Arc::new(AtomicUsize::new(fd_count(pid)));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(fd_count(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let dir = d.claude().join("-home-burst");
    fs::create_dir_all(&dir).expect("mkdir");
    let sessions: Vec<Claude> = (0..FILES).map(|_| Claude::new()).collect();
    // A burst of new files, each with a prompt...
    for c in &sessions {
        let (p, _) = c.prompt("go");
        append(&c.path_in(&dir), p.as_bytes());
    }
    d.wait_count("turn_started", FILES, |e| e["event"] == "turn_started");
    // ...then every one of them wakes up again at once, with its answer.
    for c in &sessions {
        append(&c.path_in(&dir), c.answer("done").as_bytes());
    }
    d.wait_count("turn_completed", FILES, |e| e["event"] == "turn_completed");
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let peak = peak.load(Ordering::Relaxed);
    let (events, log) = d.stop_with_log();
    assert!(
        peak <= MAX_OPEN + FD_SLACK,
        "{peak} descriptors open at the peak (cap {MAX_OPEN} + slack {FD_SLACK})"
    );
    assert!(
        !log.contains("Too many open files"),
        "read errors from the descriptor limit:\n{}",
        log.lines()
            .filter(|l| l.contains("Too many open files"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let anomalies: Vec<_> = events.iter().filter(|e| e["event"] == "anomaly").collect();
    assert!(anomalies.is_empty(), "false anomalies: {anomalies:?}");
    for c in &sessions {
        let n = events
            .iter()
            .filter(|e| e["event"] == "turn_completed" && e["session"] == c.session.as_str())
            .count();
        assert_eq!(n, 1, "session {} completed {n} times", c.session);
    }
}

#[test]
fn a_writer_whose_clock_runs_late_still_pages_and_old_copies_stay_quiet() {
    let late = Duration::from_secs(15 * 60);
    let d = Daemon::tree();
    let dir = d.claude().join("-home-late");
    fs::create_dir_all(&dir).expect("mkdir");
    // Present at start: a session whose writer's clock is 15 minutes behind ours.
    let known = Claude::new();
    let (p, known_turn) = known.prompt_at("before the start", &ts_ago(late));
    append(&known.path_in(&dir), p.as_bytes());
    let mut d = d.start(&["--catch-up", "10m"]);
    // A file that appears with old records copied into it (a resumed session): history.
    let copied = Claude::new();
    let old = Duration::from_secs(2 * 3600);
    let (p, copied_turn) = copied.prompt_at("long ago", &ts_ago(old));
    let bytes = p + &copied.answer_at("long ago", &ts_ago(old));
    append(&copied.path_in(&dir), bytes.as_bytes());
    // A new session from the late writer: its prompt, then (a little later) its answer.
    let fresh = Claude::new();
    let (p, fresh_turn) = fresh.prompt_at("after the start", &ts_ago(late));
    append(&fresh.path_in(&dir), p.as_bytes());
    std::thread::sleep(Duration::from_millis(500));
    append(
        &fresh.path_in(&dir),
        fresh.answer_at("done", &ts_ago(late)).as_bytes(),
    );
    append(
        &known.path_in(&dir),
        known.answer_at("done", &ts_ago(late)).as_bytes(),
    );
    d.wait_for(
        "the known session's completion",
        is("turn_completed", known_turn),
    );
    d.wait_for(
        "the new session's completion",
        is("turn_completed", fresh_turn),
    );
    let events = d.stop();
    assert!(
        !events
            .iter()
            .any(|e| e["turn"] == copied_turn.as_str() && e["event"] == "turn_completed"),
        "a file of old copied records paged"
    );
}

#[test]
fn a_same_size_rewrite_that_restores_the_mtime_is_noticed() {
    let mut d = Daemon::tree().start(&["--poll-interval", "200ms", "--settle", "1h"]);
    let dir = d.claude().join("-home-rewrite");
    fs::create_dir_all(&dir).expect("mkdir");
    let c = Claude::new();
    let path = c.path_in(&dir);
    let (p, turn) = c.prompt("go");
    // An answer that does not end the turn (a tool call is due)...
    let pending = c
        .answer("working on it")
        .replace("\"end_turn\"", "\"tool_use\"");
    append(&path, (p + &pending).as_bytes());
    d.wait_for("turn_started", is("turn_started", turn.clone()));
    // Let the daemon read it all (a poll or two).
    std::thread::sleep(Duration::from_millis(600));
    // ...rewritten in place to one that does, same size, with the old mtime put back.
    let before = fs::metadata(&path).expect("stat");
    let text = fs::read_to_string(&path).expect("read");
    let rewritten = text.replace("\"tool_use\"", "\"end_turn\"");
    assert_eq!(rewritten.len(), text.len());
    let f = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(&f, rewritten.as_bytes(), 0).expect("rewrite");
    f.set_times(
        fs::FileTimes::new()
            .set_modified(before.modified().expect("mtime"))
            .set_accessed(before.accessed().expect("atime")),
    )
    .expect("restore mtime");
    drop(f);
    let after = fs::metadata(&path).expect("stat");
    assert_eq!(
        (after.len(), after.modified().ok()),
        (before.len(), before.modified().ok())
    );
    d.wait_for("the rewritten completion", is("turn_completed", turn));
    d.stop();
}

#[test]
fn a_retargeted_symlinked_root_shows_new_files_before_the_next_sweep() {
    let mut d = Daemon::tree();
    let base = d.dir.path().to_path_buf();
    let (a, b) = (base.join("target-a"), base.join("target-b"));
    fs::create_dir_all(a.join("-home-a")).expect("mkdir");
    fs::create_dir_all(b.join("-home-b")).expect("mkdir");
    let link = base.join("linked");
    std::os::unix::fs::symlink(&a, &link).expect("symlink");
    let root = format!("claude={}", link.display());
    // A sweep far away: only following the link can find the new file in time.
    d.spawn(&["--watch", &root, "--debug-sweep-interval", "1h"]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let first = Claude::new();
    let (t, first_turn) = first.turn("a", "done");
    append(&first.path_in(&link.join("-home-a")), t.as_bytes());
    d.wait_for(
        "a turn under the first target",
        is("turn_completed", first_turn),
    );
    // Retarget the link atomically, then a session appears under the new target.
    let tmp = base.join("linked.tmp");
    std::os::unix::fs::symlink(&b, &tmp).expect("symlink");
    fs::rename(&tmp, &link).expect("retarget");
    std::thread::sleep(Duration::from_millis(100));
    let second = Claude::new();
    let (t, second_turn) = second.turn("b", "done");
    append(&second.path_in(&b.join("-home-b")), t.as_bytes());
    d.wait_for(
        "a turn under the new target",
        is("turn_completed", second_turn),
    );
    d.stop();
}

#[test]
fn a_file_truncated_over_and_over_logs_its_re_read_once_a_minute() {
    let mut d = Daemon::tree().start(&[]);
    let dir = d.claude().join("-home-copytruncate");
    fs::create_dir_all(&dir).expect("mkdir");
    let c = Claude::new();
    let path = c.path_in(&dir);
    let mut last = String::new();
    for i in 0..12 {
        // copytruncate: the file is emptied in place, then the writer goes on.
        let f = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .expect("truncate");
        drop(f);
        let (t, turn) = c.turn(&format!("turn {i}"), "done");
        append(&path, t.as_bytes());
        d.wait_for(
            "the turn after a truncate",
            is("turn_completed", turn.clone()),
        );
        last = turn;
    }
    let (events, log) = d.stop_with_log();
    assert!(events.iter().any(|e| e["turn"] == last.as_str()));
    let infos = log
        .lines()
        .filter(|l| l.contains("INFO") && l.contains("Re-reading transcript from its start"))
        .count();
    assert!(
        infos <= 1,
        "{infos} INFO lines for one file's re-reads within a minute"
    );
}

#[test]
fn a_directory_unreadable_from_creation_warns_once_not_on_every_poll() {
    // Root reads any directory: drop the capabilities that let it, so the daemon sees
    // what a user's daemon would.
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(setpriv) = setpriv else {
        eprintln!("skipped: no setpriv (util-linux) to drop the daemon's capabilities");
        return;
    };
    let mut d = Daemon::tree();
    d.spawn_wrapped(
        &[setpriv, "--bounding-set=-dac_override,-dac_read_search"],
        &["--poll-interval", "100ms"],
    );
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let locked = d.claude().join("-home-locked");
    {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .mode(0o000)
            .create(&locked)
            .expect("mkdir");
    }
    // A dozen polls or more, while a neighbour goes on working.
    let open = d.claude().join("-home-open");
    fs::create_dir_all(&open).expect("mkdir");
    for i in 0..3 {
        let c = Claude::new();
        let (t, turn) = c.turn(&format!("turn {i}"), "done");
        append(&c.path_in(&open), t.as_bytes());
        d.wait_for("a neighbour's turn", is("turn_completed", turn));
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, log) = d.stop_with_log();
    let tried = log
        .lines()
        .filter(|l| l.contains("Cannot list directory") && l.contains("-home-locked"))
        .count();
    let warned = log
        .lines()
        .filter(|l| {
            l.contains("WARN") && l.contains("Cannot list directory") && l.contains("-home-locked")
        })
        .count();
    assert!(
        tried >= 5,
        "the unreadable directory was listed {tried} times: the test did not exercise the poll"
    );
    assert!(
        warned <= 1,
        "{warned} warnings for one unreadable directory"
    );
}
