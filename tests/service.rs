//! systemd notifications (`Type=notify`) against a stand-in for systemd: a datagram
//! socket named by `NOTIFY_SOCKET`, and `WATCHDOG_USEC`/`WATCHDOG_PID` set as systemd
//! sets them. The watchdog ping must follow the core thread's progress: an idle daemon
//! keeps pinging, a hung core stops.

#![allow(clippy::unwrap_used)]

use crate::common::{Claude, DEADLINE, Daemon, append};
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Pings every 1 s (half of this), so the core beats every 500 ms.
const WATCHDOG_USEC: &str = "2000000";

struct Notified {
    child: Child,
    sock: UnixDatagram,
}

impl Notified {
    /// Starts `baton run` on `d`'s tree as systemd would, with its watchdog on.
    fn start(d: &Daemon, extra: &[&str]) -> Notified {
        let path = d.dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let base = d.command(extra);
        // WATCHDOG_PID must be the daemon's own pid: the shell's, which exec keeps.
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("WATCHDOG_PID=$$; export WATCHDOG_PID; exec \"$0\" \"$@\"")
            .arg(base.get_program())
            .args(base.get_args());
        for (k, v) in base.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&d.log)
            .unwrap();
        let child = cmd
            .env("NOTIFY_SOCKET", &path)
            .env("WATCHDOG_USEC", WATCHDOG_USEC)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Notified { child, sock }
    }

    /// The next notification line, if one comes within the read timeout.
    fn next(&self) -> Vec<String> {
        let mut buf = [0u8; 4096];
        match self.sock.recv(&mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n])
                .lines()
                .map(str::to_owned)
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Reads notifications until one line satisfies `pred`; panics at the deadline
    /// with the log.
    fn wait_for(&self, d: &Daemon, what: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
        let start = Instant::now();
        let mut seen = Vec::new();
        while start.elapsed() < DEADLINE {
            for l in self.next() {
                let hit = pred(&l);
                seen.push(l);
                if hit {
                    return seen;
                }
            }
        }
        let log = std::fs::read_to_string(&d.log).unwrap_or_default();
        panic!("never notified {what}; got {seen:?}\n--- log ---\n{log}");
    }

    /// Waits for `n` watchdog pings.
    fn pings(&self, d: &Daemon, n: usize) {
        for i in 0..n {
            self.wait_for(d, &format!("watchdog ping {}", i + 1), |l| {
                l == "WATCHDOG=1"
            });
        }
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_idle_daemon_keeps_pinging_and_reports_session_counts() {
    let d = Daemon::tree();
    // Nothing to poll: the core only wakes up for its heartbeat.
    let n = Notified::start(&d, &[]);
    n.wait_for(&d, "READY=1", |l| l == "READY=1");
    n.pings(&d, 3);

    // A session shows up in the status line, by state.
    let c = Claude::new();
    let (bytes, _) = c.turn("hi", "done");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    n.wait_for(&d, "one session waiting", |l| {
        l == "STATUS=1 waiting for you"
    });
    let (p, _) = c.prompt("more");
    append(&c.path_in(&d.claude()), p.as_bytes());
    n.wait_for(&d, "one session working", |l| l == "STATUS=1 working");
    n.pings(&d, 1);
    let log = std::fs::read_to_string(&d.log).unwrap();
    assert!(!log.contains("withholding"), "{log}");
}

#[test]
fn a_hung_core_stops_the_watchdog_pings() {
    let d = Daemon::tree();
    let n = Notified::start(&d, &["--debug-hang-core-on", "hang.jsonl"]);
    n.wait_for(&d, "READY=1", |l| l == "READY=1");
    n.pings(&d, 2);

    append(&d.claude().join("hang.jsonl"), b"{}\n");
    let start = Instant::now();
    loop {
        let log = std::fs::read_to_string(&d.log).unwrap_or_default();
        if log.contains("withholding") {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "pings never withheld\n{log}");
        let _ = n.next();
    }
    // Three ping periods more: none comes.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let got = n.next();
        assert!(
            !got.iter().any(|l| l == "WATCHDOG=1"),
            "pinged with a hung core: {got:?}"
        );
    }
}
