//! A full disk under the event file loses nothing and tears nothing: a write lands as
//! whole lines or is undone; what cannot be written waits, journaled, and comes out in
//! order once there is room, while the other sinks go on delivering and `status` says
//! the stream is blocked. A torn last line found at start is cut before anything is
//! appended, and counted. `/dev/full` and a file baton may not write behave the same: a
//! warning at the first write, no exit, no hang.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::common::bus;
use crate::common::tmpfs;

use crate::common::{Claude, DEADLINE, Daemon, anomalies, append, is};
use serde_json::Value;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tmpfs::{Filler, Tmpfs};

fn write_config(d: &Daemon, toml: &str) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(cfg, toml).unwrap();
}

fn lines_of(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Every line of the event file, and the ones that do not parse as JSON objects.
fn file_lines(path: &Path) -> (Vec<Value>, Vec<String>) {
    let text = std::fs::read(path).unwrap();
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for l in text.split_inclusive(|&b| b == b'\n') {
        match serde_json::from_slice::<Value>(l) {
            Ok(v) if v.is_object() && l.ends_with(b"\n") => good.push(v),
            _ => bad.push(String::from_utf8_lossy(l).into_owned()),
        }
    }
    (good, bad)
}

/// The end line of a raw `status` request.
fn status_end(d: &Daemon) -> Value {
    let mut s = UnixStream::connect(d.runtime_dir().join("baton").join("baton.sock")).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    writeln!(s, "{{\"cmd\":\"status\"}}").unwrap();
    for l in BufReader::new(&s).lines() {
        let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
        if v["end"] == true {
            return v;
        }
    }
    panic!("status ended without its end line");
}

/// `baton status` as a person sees it.
fn status_text(d: &Daemon) -> String {
    let out = d.baton().arg("status").output().unwrap();
    common::assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const TURNS: usize = 40;

#[test]
fn a_full_event_disk_loses_nothing_tears_nothing_and_other_sinks_keep_delivering() {
    let name = "a_full_event_disk_loses_nothing_tears_nothing_and_other_sinks_keep_delivering";
    let mut d = Daemon::tree();
    let Some(fs) = Tmpfs::mount_or_skip(&d.dir.path().join("evfs"), "1m", name) else {
        return;
    };
    d.events = fs.path().join("events.jsonl");
    let exec_log = d.dir.path().join("exec.log");
    write_config(
        &d,
        &format!(
            "[on_event]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$0\\\"\", \"{}\"]\nconcurrency = 1\n",
            exec_log.display()
        ),
    );
    let bus = bus::Bus::start(d.dir.path(), false);
    if let Some(b) = &bus {
        d = d.env("DBUS_SESSION_BUS_ADDRESS", &b.addr);
    }
    let mut d = d.start(&[]);
    let filler = Filler::start(fs.path().join("filler"));
    filler.wait_full();

    // One turn at a time, each in its own session (no desktop cooldown between them),
    // each waited for at the exec hook and the desktop while the disk stays full.
    let dir = d.claude().join("-home-me-src-proj");
    std::fs::create_dir_all(&dir).unwrap();
    let mut turns = Vec::new();
    for i in 0..TURNS {
        let c = Claude::new();
        let (bytes, turn) = c.turn(&format!("task {i}"), &format!("done {i}"));
        append(&c.path_in(&dir), bytes.as_bytes());
        turns.push(turn);
        let start = Instant::now();
        while lines_of(&exec_log) <= i || bus.as_ref().is_some_and(|b| b.shown() <= i) {
            if start.elapsed() > DEADLINE || !d.running() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !d.running() {
            break;
        }
    }
    let exec_while_full = lines_of(&exec_log);
    let desktop_while_full = bus.as_ref().map(|b| b.shown());
    let alive_while_full = d.running();
    let (good_while_full, torn_while_full) = file_lines(&d.events);
    println!(
        "FIGURE full disk: delivered while full: exec {exec_while_full}/{TURNS}, desktop {}/{TURNS}; daemon {}",
        desktop_while_full.map_or("skipped (no dbus-daemon)".to_owned(), |n| n.to_string()),
        if alive_while_full {
            "running"
        } else {
            "exited"
        }
    );
    println!(
        "FIGURE full disk: the file while full: {} whole lines, {} torn {:?}",
        good_while_full.len(),
        torn_while_full.len(),
        torn_while_full
    );
    assert!(
        alive_while_full,
        "baton exited on a full event disk:\n{}",
        d.log_text()
    );
    assert_eq!(exec_while_full, TURNS, "the exec hook ran for every turn");
    if let Some(n) = desktop_while_full {
        assert_eq!(n, TURNS, "a notification for every turn");
    }
    assert!(
        torn_while_full.is_empty(),
        "torn lines: {torn_while_full:?}"
    );
    let end = status_end(&d);
    assert_eq!(end["stream"]["state"], "blocked", "{end}");
    assert!(
        end["stream"]["waiting"].as_u64().unwrap() >= TURNS as u64,
        "{end}"
    );
    let text = status_text(&d);
    assert!(text.contains("blocked"), "{text}");

    filler.free();
    for t in &turns {
        d.wait_for(
            "a turn written once there is room",
            is("turn_completed", t.clone()),
        );
    }
    let end = status_end(&d);
    assert!(end.get("stream").is_none(), "{end}");
    d.terminate();
    let log = d.log_text();
    let (good, torn) = file_lines(&d.events);
    let events = d.events();
    assert_eq!(
        events.last().map(|e| e["event"].clone()),
        Some(serde_json::json!("daemon_stopping"))
    );
    println!(
        "FIGURE full disk: after room came back: {} lines in the file, {} torn, {} turn_completed",
        good.len() + torn.len(),
        torn.len(),
        good.iter()
            .filter(|e| e["event"] == "turn_completed")
            .count()
    );
    assert!(torn.is_empty(), "torn lines: {torn:?}");
    assert_eq!(events.len(), good.len());
    // Each turn once, started before completed, and in the order they happened.
    let order: Vec<(String, String)> = good
        .iter()
        .filter(|e| e["provider"] == "claude")
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_owned(),
                e["turn"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = turns
        .iter()
        .flat_map(|t| {
            [
                ("turn_started".to_owned(), t.clone()),
                ("turn_completed".to_owned(), t.clone()),
            ]
        })
        .collect();
    assert_eq!(order, want);
    let ids: HashSet<&str> = good.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), good.len(), "an event written twice");
    // One warning for the spell (they are at most one a minute), and one when it ends.
    let warned = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("Cannot write the event stream"))
        .count();
    assert_eq!(warned, 1, "{log}");
    assert!(log.contains("The event stream is written again"), "{log}");
}

#[test]
fn a_torn_last_line_is_cut_before_anything_is_appended_and_counted() {
    let d = Daemon::tree();
    let whole = r#"{"v":1,"event":"daemon_stopping","provider":null,"session":null,"agent":null,"turn":null,"path":null,"line":null,"ts":"2026-01-01T00:00:00.000Z","record_ts":null,"reason":null,"message":null,"evidence":null,"id":"x1"}"#;
    let torn = r#"{"v":1,"event":"turn_started","provider":"claude","ses"#;
    std::fs::write(&d.events, format!("{whole}\n{torn}")).unwrap();
    let d = d.start(&[]);
    let (good, bad) = file_lines(&d.events);
    assert!(bad.is_empty(), "lines that do not parse: {bad:?}");
    assert_eq!(good[0]["id"], "x1", "the whole line before it stays");
    assert_eq!(anomalies(&good, "torn_event_line"), 1, "{good:?}");
    let events = d.stop();
    assert!(events.iter().any(|e| e["event"] == "daemon_ready"));
}

/// A daemon whose event stream cannot be written from the first write: it warns at once
/// (naming the file and the reason), stays up, says so in `status`, and stops on SIGTERM.
fn blocked_from_the_start(d: &mut Daemon, reason: &str) {
    let warning = d.wait_log("a warning about the event stream", |l| {
        l.contains("WARN") && l.contains("Cannot write the event stream")
    });
    println!("FIGURE warning: {warning}");
    assert!(
        warning.contains(&d.events.display().to_string()),
        "{warning}"
    );
    assert!(warning.contains(reason), "{warning}");
    let end = status_end(d);
    assert_eq!(end["stream"]["state"], "blocked", "{end}");
    assert!(
        end["stream"]["error"].as_str().unwrap().contains(reason),
        "{end}"
    );
}

fn stops_in_time(d: &mut Daemon, what: &str) {
    match d.sigterm_timed(Duration::from_secs(5)) {
        Some((took, status)) => {
            println!(
                "FIGURE stop [{what}]: exited {:.2} s after SIGTERM ({status})",
                took.as_secs_f64()
            );
            assert!(took <= Duration::from_secs(5), "{what}: {took:?}");
            assert!(status.success(), "{what}: {status}");
        }
        None => d.fail(&format!("{what}: still running 20 s after SIGTERM")),
    }
}

#[test]
fn dev_full_warns_at_the_first_write_and_stops_on_sigterm() {
    let mut d = Daemon::tree();
    d.events = "/dev/full".into();
    d.spawn(&[]);
    blocked_from_the_start(&mut d, "No space left on device");
    stops_in_time(&mut d, "--events /dev/full");
}

#[test]
fn a_file_baton_may_not_write_warns_and_is_written_once_it_may() {
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(setpriv) = setpriv else {
        eprintln!("skipped: no setpriv (util-linux) to drop the daemon's capabilities");
        return;
    };
    let mut d = Daemon::tree();
    std::fs::write(&d.events, "").unwrap();
    std::fs::set_permissions(&d.events, std::fs::Permissions::from_mode(0o444)).unwrap();
    // Root writes any file: drop the capabilities that let it.
    d.spawn_wrapped(
        &[
            setpriv,
            "--bounding-set=-dac_override,-dac_read_search,-fowner",
        ],
        &[],
    );
    blocked_from_the_start(&mut d, "Permission denied");
    let c = Claude::new();
    let (bytes, turn) = c.turn("hi", "done");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    std::thread::sleep(Duration::from_millis(300));
    std::fs::set_permissions(&d.events, std::fs::Permissions::from_mode(0o644)).unwrap();
    d.wait_for("daemon_ready, once the file may be written", |e| {
        e["event"] == "daemon_ready"
    });
    d.wait_for("the turn", is("turn_completed", turn));
    let events = d.stop();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "daemon_ready",
            "turn_started",
            "turn_completed",
            "daemon_stopping"
        ]
    );
}

/// Turns while the event disk is full, then the daemon stopped (`kill`: SIGKILL, else
/// SIGTERM), the space freed and the daemon started again: every turn is in the file
/// once, or again only with `replay: true`, and no line is torn.
fn stopped_while_full_then_restarted(kill: bool, name: &str) {
    let mut d = Daemon::tree();
    let Some(fs) = Tmpfs::mount_or_skip(&d.dir.path().join("evfs"), "1m", name) else {
        return;
    };
    d.events = fs.path().join("events.jsonl");
    let mut d = d.start(&["--no-desktop"]);
    let filler = Filler::start(fs.path().join("filler"));
    filler.wait_full();
    let dir = d.claude().join("-home-me-src-proj");
    std::fs::create_dir_all(&dir).unwrap();
    let mut turns = Vec::new();
    let start = Instant::now();
    // Turns until some are held (the file's last page may take a few), then ten more.
    let mut after_block = 0;
    while after_block < 10 {
        assert!(start.elapsed() < DEADLINE, "the stream never blocked");
        let c = Claude::new();
        let (bytes, turn) = c.turn("task", "done");
        append(&c.path_in(&dir), bytes.as_bytes());
        turns.push(turn);
        std::thread::sleep(Duration::from_millis(50));
        if d.log_text().contains("Cannot write the event stream") {
            after_block += 1;
        }
    }
    // Every turn reached the daemon's journal before it stops.
    std::thread::sleep(Duration::from_millis(500));
    if kill {
        d.kill();
    } else {
        d.terminate();
    }
    filler.free();
    d.restart(&["--no-desktop"]);
    for t in &turns {
        d.wait_for(
            "every turn, after the restart",
            is("turn_completed", t.clone()),
        );
    }
    let (good, torn) = file_lines(&d.events);
    assert!(torn.is_empty(), "torn lines: {torn:?}");
    for t in &turns {
        let copies: Vec<&Value> = good
            .iter()
            .filter(|e| e["event"] == "turn_completed" && e["turn"] == t.as_str())
            .collect();
        let plain = copies.iter().filter(|e| e["replay"] != true).count();
        assert!(
            plain <= 1,
            "turn {t} delivered twice without replay: {copies:?}"
        );
    }
    println!(
        "FIGURE {name}: {} turns, all in the file after the restart; {} lines, {} flagged replay",
        turns.len(),
        good.len(),
        good.iter().filter(|e| e["replay"] == true).count()
    );
    d.stop();
}

#[test]
fn a_sigterm_while_the_event_disk_is_full_loses_nothing_across_the_restart() {
    stopped_while_full_then_restarted(
        false,
        "a_sigterm_while_the_event_disk_is_full_loses_nothing_across_the_restart",
    );
}

#[test]
fn a_sigkill_while_the_event_disk_is_full_loses_nothing_across_the_restart() {
    stopped_while_full_then_restarted(
        true,
        "a_sigkill_while_the_event_disk_is_full_loses_nothing_across_the_restart",
    );
}

/// Stdout whose reader exits is not a full disk: nothing can ever read it again, so the
/// daemon stops (exit 0, as a pipeline's writer does) instead of holding events for it.
#[test]
fn stdout_whose_reader_exits_stops_the_daemon() {
    let mut d = Daemon::tree();
    d.events = "-".into();
    let mut child = d
        .command(&["--no-desktop"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.contains("daemon_ready"), "{first}");
    drop(out);
    let c = Claude::new();
    let (bytes, _) = c.turn("hi", "done");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("baton kept running with nobody reading its stdout");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}
