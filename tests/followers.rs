//! The socket always answers: `baton tail` followers are capped (`max_followers`, 64 by
//! default) and cannot take the slot of a request such as `status`; a refused follower
//! is told why and exits 4; a follower's slot is free again as soon as it hangs up, with
//! no event needed to notice.

#![allow(clippy::unwrap_used)]

use crate::common::{DEADLINE, Daemon};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn socket(d: &Daemon) -> PathBuf {
    d.runtime_dir().join("baton").join("baton.sock")
}

/// What became of one raw follower.
#[derive(Debug, PartialEq, Eq)]
enum Follow {
    /// It got the recent events: it is following.
    Served,
    /// It was refused, with this line.
    Refused(String),
    /// It got nothing readable (reset, or closed without a word).
    Cut(String),
}

/// Connects, asks to follow with the recent events, and reads the first line.
fn follow(d: &Daemon) -> (UnixStream, Follow) {
    let mut s = UnixStream::connect(socket(d)).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = writeln!(s, "{{\"cmd\":\"tail\",\"since_ms\":600000}}");
    let mut line = String::new();
    let got = match BufReader::new(&s).read_line(&mut line) {
        Ok(0) => Follow::Cut("closed".to_owned()),
        Ok(_) => {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["event"].is_string() {
                Follow::Served
            } else {
                Follow::Refused(line.trim().to_owned())
            }
        }
        Err(e) => Follow::Cut(e.to_string()),
    };
    (s, got)
}

/// `baton status`: exit code and stderr.
fn status(d: &Daemon) -> (Option<i32>, String) {
    let out = d.baton().arg("status").output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn served(list: &[(UnixStream, Follow)]) -> usize {
    list.iter().filter(|(_, f)| *f == Follow::Served).count()
}

#[test]
fn five_hundred_followers_leave_status_answering_and_free_their_slots_on_hangup() {
    let d = Daemon::tree().start(&[]);
    let followers: Vec<(UnixStream, Follow)> = (0..500).map(|_| follow(&d)).collect();
    let refused: Vec<&String> = followers
        .iter()
        .filter_map(|(_, f)| match f {
            Follow::Refused(l) => Some(l),
            _ => None,
        })
        .collect();
    let cut = followers
        .iter()
        .filter(|(_, f)| matches!(f, Follow::Cut(_)))
        .count();
    println!(
        "FIGURE followers: {} served, {} refused with a reason, {cut} cut off",
        served(&followers),
        refused.len()
    );
    let (code, err) = status(&d);
    println!(
        "FIGURE status with 500 followers connected: exit {code:?} {}",
        err.trim()
    );
    // A real `baton tail` past the cap.
    let out = d.baton().arg("tail").output().unwrap();
    let tail_err = String::from_utf8_lossy(&out.stderr).into_owned();
    println!(
        "FIGURE tail past the cap: exit {:?}: {}",
        out.status.code(),
        tail_err.trim()
    );
    assert_eq!(served(&followers), 64, "followers served");
    assert_eq!(refused.len(), 436, "followers refused with a reason");
    assert!(
        refused
            .iter()
            .all(|l| l.contains("too many followers (64)")),
        "{:?}",
        refused.first()
    );
    assert_eq!(code, Some(0), "status with 500 followers: {err}");
    assert_eq!(out.status.code(), Some(4), "{tail_err}");
    assert!(tail_err.contains("too many followers (64)"), "{tail_err}");

    // Every follower hangs up; nothing is written to the stream after that.
    drop(followers);
    let events_before = d.events().len();
    let (code, err) = status(&d);
    println!(
        "FIGURE status after the followers left (idle): exit {code:?} {}",
        err.trim()
    );
    assert_eq!(code, Some(0), "status on an idle daemon: {err}");
    // Their slots are free again without any event: 64 new followers are served.
    let start = Instant::now();
    let mut again = Vec::new();
    while again.len() < 64 {
        let (s, f) = follow(&d);
        match f {
            Follow::Served => again.push(s),
            other => {
                if start.elapsed() > DEADLINE {
                    panic!(
                        "only {} new followers served after the others hung up; then {other:?}",
                        again.len()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    println!(
        "FIGURE followers after the others hung up: {} served",
        again.len()
    );
    let (code, err) = status(&d);
    assert_eq!(code, Some(0), "status with 64 new followers: {err}");
    assert_eq!(d.events().len(), events_before, "the daemon stayed idle");
    drop(again);
    d.stop();
}

#[test]
fn the_follower_cap_is_a_config_key() {
    let d = Daemon::tree();
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "max_followers = 2\n").unwrap();
    let shown = d.baton().arg("config").output().unwrap();
    assert!(shown.status.success());
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("\nmax_followers = 2\n"),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    let d = d.start(&[]);
    let a = follow(&d);
    let b = follow(&d);
    let c = follow(&d);
    assert_eq!((&a.1, &b.1), (&Follow::Served, &Follow::Served));
    match &c.1 {
        Follow::Refused(l) => assert!(l.contains("too many followers (2)"), "{l}"),
        other => panic!("the third follower: {other:?}"),
    }
    assert_eq!(status(&d).0, Some(0));
    drop((a, b, c));
    d.stop();
    // Zero followers would make `tail` useless: a mistake, like any bad value.
    let d = Daemon::tree();
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "max_followers = 0\n").unwrap();
    let out = d.baton().arg("config").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("max_followers"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
