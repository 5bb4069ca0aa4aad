//! A stop always stops: `baton run` exits within 5 s of SIGTERM whatever state it is in
//! (its socket file or the runtime directory removed, its event file on a full disk, a
//! notification server that never answers, a webhook that hangs, hooks still running),
//! and a socket file removed while it runs is made again at the next sweep.
//!
//! The 5 s is a bound on correctness (under systemd a stop that hangs costs a 90 s
//! timeout and a SIGKILL), not a measure of speed. Each test prints the time it saw.

#![allow(clippy::unwrap_used)]

use crate::common::bus;
use crate::common::tmpfs;

use crate::common::{Claude, DEADLINE, Daemon, append, is, process_alive, read_pid};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a stop may take.
const STOP_LIMIT: Duration = Duration::from_secs(5);

fn write_config(d: &Daemon, toml: &str) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(cfg, toml).unwrap();
}

/// Completes a turn in a new session; waits for it in the stream unless `wait` is false.
fn complete_a_turn(d: &mut Daemon, wait: bool) {
    let dir = d.claude().join("-home-me-src-proj");
    std::fs::create_dir_all(&dir).unwrap();
    let c = Claude::new();
    let (bytes, turn) = c.turn("hi", "done");
    append(&c.path_in(&dir), bytes.as_bytes());
    if wait {
        d.wait_for("turn_completed", is("turn_completed", turn));
    }
}

/// SIGTERM; asserts a clean exit within [`STOP_LIMIT`] and prints how long it took.
fn stops_in_time(mut d: Daemon, state: &str) {
    match d.sigterm_timed(STOP_LIMIT) {
        Some((took, status)) => {
            println!(
                "FIGURE stop [{state}]: exited {:.2} s after SIGTERM ({status})",
                took.as_secs_f64()
            );
            if took > STOP_LIMIT {
                d.fail(&format!(
                    "[{state}] exited {:.1} s after SIGTERM, over {STOP_LIMIT:?}",
                    took.as_secs_f64()
                ));
            }
            if !status.success() {
                d.fail(&format!("[{state}] exited with {status}"));
            }
        }
        None => {
            println!("FIGURE stop [{state}]: still running 20 s after SIGTERM (killed)");
            d.fail(&format!("[{state}] still running 20 s after SIGTERM"));
        }
    }
}

#[test]
fn stops_with_its_socket_file_removed() {
    let d = Daemon::tree().start(&[]);
    let sock = d.runtime_dir().join("baton").join("baton.sock");
    std::fs::remove_file(&sock).unwrap();
    stops_in_time(d, "socket file removed");
}

#[test]
fn stops_with_its_runtime_directory_removed() {
    let d = Daemon::tree().start(&[]);
    std::fs::remove_dir_all(d.runtime_dir()).unwrap();
    stops_in_time(d, "runtime directory removed");
}

#[test]
fn stops_with_its_event_file_on_a_full_disk() {
    let mut d = Daemon::tree();
    let Some(fs) = tmpfs::Tmpfs::mount_or_skip(
        &d.dir.path().join("evfs"),
        "1m",
        "stops_with_its_event_file_on_a_full_disk",
    ) else {
        return;
    };
    d.events = fs.path().join("events.jsonl");
    let mut d = d.start(&[]);
    let filler = tmpfs::Filler::start(fs.path().join("filler"));
    filler.wait_full();
    // The event file's last page may still hold a few lines: turns until one is held.
    let blocked = |d: &Daemon| {
        d.log_text()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("Cannot write the event stream"))
    };
    let start = Instant::now();
    while !blocked(&d) {
        if !d.running() || start.elapsed() > DEADLINE {
            d.fail("the event stream never said it was blocked");
        }
        complete_a_turn(&mut d, false);
        std::thread::sleep(Duration::from_millis(100));
    }
    stops_in_time(d, "event file on a full disk");
    drop(filler);
}

#[test]
fn stops_while_the_notification_server_never_answers() {
    let d = Daemon::tree();
    let Some(bus) = bus::Bus::start(d.dir.path(), true) else {
        return;
    };
    let mut d = d.env("DBUS_SESSION_BUS_ADDRESS", &bus.addr).start(&[]);
    complete_a_turn(&mut d, true);
    let start = Instant::now();
    while bus.taken.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < DEADLINE, "no notification was sent");
        std::thread::sleep(Duration::from_millis(10));
    }
    stops_in_time(d, "notification server silent");
}

#[test]
fn stops_while_a_webhook_hangs() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let accepted = Arc::new(AtomicUsize::new(0));
    {
        let (held, accepted) = (Arc::clone(&held), Arc::clone(&accepted));
        // Takes every connection and never answers.
        std::thread::spawn(move || {
            for conn in server.incoming().flatten() {
                held.lock().unwrap().push(conn);
                accepted.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let d = Daemon::tree();
    write_config(
        &d,
        &format!("[[webhook]]\nurl = \"http://127.0.0.1:{port}/hook\"\n"),
    );
    let mut d = d.start(&["--no-desktop"]);
    complete_a_turn(&mut d, true);
    let start = Instant::now();
    while accepted.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < DEADLINE, "the webhook was never called");
        std::thread::sleep(Duration::from_millis(10));
    }
    stops_in_time(d, "webhook hanging");
}

/// A hook that starts a child in the background and then sleeps for an hour (as
/// itself, by `exec`): both pids are written next to `base`.
fn long_hook(base: &std::path::Path, timeout: &str) -> String {
    format!(
        "[on_event]\ncommand = [\"sh\", \"-c\", \"echo $$ > \\\"$0.leader\\\"; sleep 3600 & echo $! > \\\"$0.bg\\\"; exec sleep 3600\", \"{}\"]\ntimeout = \"{timeout}\"\n",
        base.display()
    )
}

/// Waits up to the deadline for the processes to go; returns how many are left.
fn left_after(pids: &[u32]) -> usize {
    let start = Instant::now();
    loop {
        let left = pids.iter().filter(|p| process_alive(**p)).count();
        if left == 0 || start.elapsed() > DEADLINE {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stops_while_hooks_run_and_leaves_none_of_their_processes() {
    let d = Daemon::tree();
    let base = d.dir.path().join("hook");
    write_config(&d, &long_hook(&base, "1h"));
    let mut d = d.start(&["--no-desktop"]);
    complete_a_turn(&mut d, true);
    let leader = read_pid(&base.with_extension("leader"));
    let bg = read_pid(&base.with_extension("bg"));
    assert!(process_alive(leader) && process_alive(bg));
    stops_in_time(d, "hooks running");
    let left = left_after(&[leader, bg]);
    println!("FIGURE hooks [shutdown]: {left} of 2 hook processes left after the daemon exited");
    assert_eq!(left, 0, "hook processes outlived the daemon");
}

#[test]
fn a_hook_past_its_timeout_takes_its_background_child_with_it() {
    let d = Daemon::tree();
    let base = d.dir.path().join("hook");
    write_config(&d, &long_hook(&base, "1s"));
    let mut d = d.start(&["--no-desktop"]);
    complete_a_turn(&mut d, true);
    let leader = read_pid(&base.with_extension("leader"));
    let bg = read_pid(&base.with_extension("bg"));
    d.wait_log("the hook timed out", |l| l.contains("timed out"));
    let left = left_after(&[leader, bg]);
    println!("FIGURE hooks [timeout]: {left} of 2 hook processes left after the timeout");
    assert_eq!(left, 0, "the hook's processes outlived its timeout");
    d.stop();
}

/// `baton status` answers (exit 0).
fn status_answers(d: &Daemon) -> bool {
    d.baton()
        .arg("status")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn wait_status(d: &Daemon, what: &str) -> Duration {
    let start = Instant::now();
    while !status_answers(d) {
        if start.elapsed() > DEADLINE {
            d.fail(&format!("status never answered again after {what}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

#[test]
fn a_removed_socket_is_made_again_at_the_next_sweep() {
    let d = Daemon::tree().start(&["--debug-sweep-interval", "1s"]);
    let sock = d.runtime_dir().join("baton").join("baton.sock");
    assert!(status_answers(&d));
    std::fs::remove_file(&sock).unwrap();
    let took = wait_status(&d, "the socket file was removed");
    println!(
        "FIGURE socket: status answered again {:.1} s after the socket file was removed",
        took.as_secs_f64()
    );
    std::fs::remove_dir_all(sock.parent().unwrap()).unwrap();
    wait_status(&d, "the socket's directory was removed");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    stops_in_time(d, "after the socket was made again");
}
