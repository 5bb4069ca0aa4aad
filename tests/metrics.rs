//! `metrics = "127.0.0.1:PORT"`: the daemon serves `/metrics` in the Prometheus text
//! format, counted from real transcripts; refused off loopback unless allowed; no
//! listener without it; and a real Prometheus server scrapes it.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, Codex, DEADLINE, Daemon, append};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn write_config(d: &Daemon, text: &str) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(cfg, text).unwrap();
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 GET over a plain socket: (status code, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(DEADLINE)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_owned();
    Some((code, body))
}

/// The value of one sample line, `name{labels} value`, if served.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// The transcript lines of three Claude sessions: one completed turn (with a malformed
/// line before it), one open question, one failed turn.
fn three_sessions(claude: &Path) -> usize {
    let done = Claude::new();
    let (bytes, _) = done.turn("hi", "done");
    append(
        &done.path_in(claude),
        ("{not json\n".to_owned() + &bytes).as_bytes(),
    );
    let asks = Claude::new();
    let (prompt, _) = asks.prompt("go");
    let ask = json!({
        "type": "assistant", "uuid": common::uuid(), "sessionId": asks.session,
        "timestamp": common::ts_now(),
        "message": {"role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "q1", "name": "AskUserQuestion",
                "input": {"questions": [{"question": "Pick one?"}]}}]}
    });
    append(&asks.path_in(claude), format!("{prompt}{ask}\n").as_bytes());
    let fails = Claude::new();
    let (prompt, _) = fails.prompt("go");
    let err = json!({
        "type": "assistant", "uuid": common::uuid(), "sessionId": fails.session,
        "timestamp": common::ts_now(), "error": "rate_limit", "isApiErrorMessage": true,
        "apiErrorStatus": 429,
        "message": {"id": common::uuid(), "model": "<synthetic>", "role": "assistant",
            "stop_reason": "stop_sequence", "content": [{"type": "text", "text": "API Error: 429"}]}
    });
    append(
        &fails.path_in(claude),
        format!("{prompt}{err}\n").as_bytes(),
    );
    3
}

/// The expected samples, once all of them are there.
const EXPECTED: [(&str, f64); 11] = [
    (
        r#"baton_turns_total{agent="claude",outcome="completed"}"#,
        1.0,
    ),
    (
        r#"baton_turns_total{agent="claude",outcome="needs_input"}"#,
        1.0,
    ),
    (r#"baton_turns_total{agent="claude",outcome="failed"}"#, 1.0),
    (r#"baton_sessions{agent="claude",state="completed"}"#, 1.0),
    (r#"baton_sessions{agent="claude",state="needs_input"}"#, 1.0),
    (r#"baton_sessions{agent="claude",state="failed"}"#, 1.0),
    (r#"baton_anomalies_total{reason="malformed_line"}"#, 1.0),
    (r#"baton_deliveries_total{sink="exec"}"#, 2.0),
    (r#"baton_delivery_failures_total{sink="exec"}"#, 1.0),
    ("baton_files_tracked", 3.0),
    ("baton_remotes_connected", 0.0),
];

/// Scrapes until every expected sample has its value (the views and the hook's runs
/// land a moment after the events); the last scrape.
fn scrape_until_expected(d: &Daemon, port: u16) -> String {
    scrape_until(d, port, &EXPECTED)
}

/// Scrapes until every sample of `expected` has its value; the last scrape.
fn scrape_until(d: &Daemon, port: u16, expected: &[(&str, f64)]) -> String {
    let start = Instant::now();
    loop {
        let text = get(port, "/metrics").map(|(_, b)| b).unwrap_or_default();
        if expected.iter().all(|(s, v)| sample(&text, s) == Some(*v)) {
            return text;
        }
        if start.elapsed() > DEADLINE {
            let wrong: Vec<_> = EXPECTED
                .iter()
                .filter(|(s, v)| sample(&text, s) != Some(*v))
                .map(|(s, v)| format!("{s}: want {v}, got {:?}", sample(&text, s)))
                .collect();
            d.fail(&format!("metrics never matched: {wrong:#?}\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The hook pages two hand-backs and fails the third (the failed turn's).
const HOOK: &str = r#"on_event = ["sh", "-c", "test \"$BATON_EVENT\" != turn_failed"]"#;

fn metrics_config(port: u16) -> String {
    format!(
        "metrics = \"127.0.0.1:{port}\"\nneeds_input_grace = \"0s\"\n{HOOK}\n[desktop]\nenabled = false\n"
    )
}

/// The TCP sockets `pid` listens on, from /proc (no tool needed).
fn listening_sockets(pid: u32) -> usize {
    let mut listening = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for row in std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let cols: Vec<&str> = row.split_whitespace().collect();
            if cols.get(3) == Some(&"0A") {
                listening.insert(format!("socket:[{}]", cols[9]));
            }
        }
    }
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| listening.contains(&l.display().to_string()))
        .count()
}

#[test]
fn metrics_count_turns_sessions_anomalies_and_deliveries() {
    let port = free_port();
    let d = Daemon::tree();
    write_config(&d, &metrics_config(port));
    let mut d = d.start(&[]);
    assert_eq!(listening_sockets(d.pid()), 1, "the metrics listener");
    three_sessions(&d.claude());
    d.wait_for("the failed turn", |e| e["event"] == "turn_failed");
    let text = scrape_until_expected(&d, port);
    // Interrupted turns: none, so no series.
    assert!(!text.contains("outcome=\"interrupted\""), "{text}");
    // Every event a read made was timed (the daemon's own lifecycle events were not).
    let from_reads = d.events().iter().filter(|e| e["path"].is_string()).count();
    assert_eq!(
        sample(&text, "baton_append_to_event_seconds_count"),
        Some(from_reads as f64),
        "{text}"
    );
    assert!(text.contains("baton_append_to_event_seconds_bucket{le=\"0.001\"}"));
    assert!(text.ends_with("# EOF\n"), "{text}");
    // Only /metrics is served.
    assert_eq!(get(port, "/").map(|(c, _)| c), Some(404));
    assert_eq!(get(port, "/metrics/x").map(|(c, _)| c), Some(404));
    d.stop();
    // Stopped with the daemon.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// A first run's history makes events that are never sent: their read times must go
/// with them, or the first live flush times them too. `--debug-history-threads 1`
/// reads history on the core thread, where its events are dropped file by file.
#[test]
fn history_a_first_run_drops_is_not_timed() {
    let port = free_port();
    let d = Daemon::tree();
    write_config(&d, &metrics_config(port));
    // A Codex session, so the Claude series the scrape waits for stay as they are.
    let old = Codex::new();
    let (turn, _) = old.turn("answered before the start");
    std::fs::create_dir_all(d.codex()).unwrap();
    // A malformed line: its anomaly has no record time, so the history read makes an
    // event (discarded, as history is silent) that a read time stands for.
    append(
        &old.path_in(&d.codex()),
        (old.meta() + "{not json\n" + &turn).as_bytes(),
    );
    let mut d = d.start(&["--debug-history-threads", "1"]);
    three_sessions(&d.claude());
    d.wait_for("the failed turn", |e| e["event"] == "turn_failed");
    // The three turns counted, and the history session's file tracked too.
    let mut expected = EXPECTED[..3].to_vec();
    expected.push(("baton_files_tracked", 4.0));
    let text = scrape_until(&d, port, &expected);
    let from_reads = d.events().iter().filter(|e| e["path"].is_string()).count();
    assert_eq!(
        sample(&text, "baton_append_to_event_seconds_count"),
        Some(from_reads as f64),
        "{text}"
    );
    d.stop();
}

#[test]
fn no_listener_without_the_key() {
    let d = Daemon::tree();
    write_config(&d, "[desktop]\nenabled = false\n");
    let mut d = d.start(&[]);
    let c = Claude::new();
    let (bytes, turn) = c.turn("hi", "done");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    d.wait_for("turn_completed", common::is("turn_completed", turn));
    assert_eq!(listening_sockets(d.pid()), 0);
    d.stop();
}

#[test]
fn a_non_loopback_address_is_refused_unless_allowed() {
    let port = free_port();
    let d = Daemon::tree();
    write_config(&d, &format!("metrics = \"0.0.0.0:{port}\"\n"));
    let mut child = Reaped(
        d.command(&[])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the daemon started instead of refusing"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("`metrics`") && err.contains("not a loopback address"),
        "{err}"
    );
    assert!(err.contains("metrics_allow_remote = true"), "{err}");
    // Refused before the state directory was touched.
    assert!(!d.state_dir().exists());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());

    write_config(
        &d,
        &format!(
            "metrics = \"0.0.0.0:{port}\"\nmetrics_allow_remote = true\n[desktop]\nenabled = false\n"
        ),
    );
    let d = d.start(&[]);
    let (code, body) = get(port, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("# TYPE baton_files_tracked gauge"), "{body}");
    d.stop();
}

#[test]
fn baton_config_shows_both_keys() {
    let d = Daemon::tree();
    write_config(&d, "");
    let out = d.baton().arg("config").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("\n# metrics = \"127.0.0.1:9464\"\n"),
        "{text}"
    );
    assert!(
        text.contains("\n# metrics_allow_remote = false\n"),
        "{text}"
    );
    write_config(&d, "metrics = \"127.0.0.1:9999\"\n");
    let out = d.baton().arg("config").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\nmetrics = \"127.0.0.1:9999\"\n"), "{text}");
}

/// Kills the server when the test ends, pass or fail.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Prometheus's instant query: the first result's value, if any.
fn query(port: u16, promql: &str) -> Option<f64> {
    let q: String = promql
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (code, body) = get(port, &format!("/api/v1/query?query={q}"))?;
    if code != 200 {
        return None;
    }
    // Chunked or not, the JSON object is the body's outermost braces.
    let json = &body[body.find('{')?..=body.rfind('}')?];
    let v: Value = serde_json::from_str(json).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_real_prometheus_scrapes_the_series() {
    let Ok(prometheus) = which("prometheus") else {
        eprintln!("NOTICE: prometheus is not installed; skipping the Prometheus scrape test.");
        return;
    };
    let port = free_port();
    let d = Daemon::tree();
    write_config(&d, &metrics_config(port));
    let mut d = d.start(&[]);
    three_sessions(&d.claude());
    d.wait_for("the failed turn", |e| e["event"] == "turn_failed");

    let dir = d.dir.path().join("prometheus");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: baton\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let _server = Reaped(
        Command::new(prometheus)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    let (turns, waiting) = loop {
        let turns = query(web, r#"sum(baton_turns_total{outcome="completed"})"#);
        let waiting = query(web, r#"sum(baton_sessions{state="needs_input"})"#);
        if turns == Some(1.0) && waiting == Some(1.0) {
            break (turns, waiting);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
            d.fail(&format!(
                "Prometheus never had the series (turns {turns:?}, waiting {waiting:?}); its log:\n{log}"
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!((turns, waiting), (Some(1.0), Some(1.0)));
    // Every outcome is there, by agent.
    assert_eq!(query(web, "sum(baton_turns_total)"), Some(3.0));
    assert_eq!(
        query(web, r#"baton_turns_total{agent="claude",outcome="failed"}"#),
        Some(1.0)
    );
    d.stop();
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .ok_or(())
}
