//! Webhooks against a tiny HTTP server on 127.0.0.1: delivery (JSON and ntfy-style), a
//! retry after a 500, no retry after a 400, and a bounded drop-oldest queue while the
//! server is down.

use crate::common;

use baton::model::{Event, EventKind};
use baton::sink::Sink;
use baton::sink::webhook::{Endpoint, Format, WebhookConfig, WebhookSink};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(30);

fn event(kind: EventKind, n: u32, message: &str) -> Event {
    common::sample_event(kind, n, message)
}

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Answers each request with the next scripted status (200 once the script runs out),
/// recording every request it read in full.
struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    fn start(listener: TcpListener, script: &[u16]) -> Server {
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let statuses = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
        let recorded = Arc::clone(&requests);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let status = statuses.lock().expect("lock").pop_front().unwrap_or(200);
                if let Some(req) = serve(conn, status) {
                    recorded.lock().expect("lock").push(req);
                }
            }
        });
        Server { addr, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("lock").clone()
    }

    fn wait_for(&self, n: usize) -> Vec<Request> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let got = self.requests();
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

fn serve(conn: TcpStream, status: u16) -> Option<Request> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    let mut conn = conn;
    let reply = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    conn.write_all(reply.as_bytes()).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8(body).ok()?,
    })
}

fn local() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind")
}

fn quick(endpoints: Vec<Endpoint>) -> WebhookConfig {
    let mut cfg = WebhookConfig::new(endpoints);
    cfg.backoff = Duration::from_millis(50);
    cfg.backoff_max = Duration::from_millis(200);
    cfg
}

#[test]
fn posts_the_event_json() {
    let server = Server::start(local(), &[]);
    let cfg = quick(vec![Endpoint::new(server.url("/hook"), Format::Json)]);
    let mut sink = WebhookSink::new(cfg).expect("sink");
    sink.deliver(&event(EventKind::Anomaly, 1, "not posted"));
    let ev = event(EventKind::TurnCompleted, 2, "All <done> & \"tested\"");
    sink.deliver(&ev);
    let got = server.wait_for(1);
    let (stats, done) = sink.close(PATIENCE);
    assert!(done);
    assert_eq!(stats.delivered, 1, "{stats:?}");
    let req = &got[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/hook");
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.body, ev.to_json());
    assert_eq!(server.requests().len(), 1, "the anomaly was posted");
}

#[test]
fn the_json_payload_always_names_the_project() {
    let server = Server::start(local(), &[]);
    let cfg = quick(vec![Endpoint::new(server.url("/hook"), Format::Json)]);
    let mut sink = WebhookSink::new(cfg).expect("sink");
    let mut ev = event(EventKind::TurnCompleted, 1, "done");
    ev.project = None;
    ev.path = Some("/home/me/.claude/projects/-home-me-work-api-server/s.jsonl".to_owned());
    sink.deliver(&ev);
    let got = server.wait_for(1);
    let (_, done) = sink.close(PATIENCE);
    assert!(done);
    let body: serde_json::Value = serde_json::from_str(&got[0].body).expect("JSON");
    assert_eq!(body["project"], "home-me-work-api-server");
    assert_eq!(body["id"], "id1");
}

#[test]
fn ntfy_style_has_a_title_and_a_plain_body() {
    let server = Server::start(local(), &[]);
    let mut ep = Endpoint::new(server.url("/mytopic"), Format::Ntfy);
    ep.headers
        .push(("Authorization".to_owned(), "Bearer tk_test".to_owned()));
    let mut sink = WebhookSink::new(quick(vec![ep])).expect("sink");
    sink.deliver(&event(
        EventKind::TurnCompleted,
        1,
        "Tests pass \u{1b}[32mgreen\u{1b}[0m",
    ));
    let mut failed = event(EventKind::TurnFailed, 2, "API Error: 529 Overloaded");
    failed.reason = Some("overloaded_error".to_owned());
    sink.deliver(&failed);
    let got = server.wait_for(2);
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!(stats.delivered, 2, "{stats:?}");
    assert_eq!(
        decode_rfc2047(got[0].header("title").expect("title")),
        "Claude Code · web: your turn"
    );
    assert_eq!(got[0].body, "Tests pass green");
    assert_eq!(got[0].header("priority"), None);
    assert_eq!(got[0].header("authorization"), Some("Bearer tk_test"));
    assert_eq!(
        decode_rfc2047(got[1].header("title").expect("title")),
        "Claude Code · web: turn failed (overloaded_error)"
    );
    assert_eq!(got[1].header("priority"), Some("high"));
    assert_eq!(got[1].body, "API Error: 529 Overloaded");
}

#[test]
fn retries_after_a_500() {
    let server = Server::start(local(), &[500]);
    let mut sink =
        WebhookSink::new(quick(vec![Endpoint::new(server.url("/"), Format::Json)])).expect("sink");
    let ev = event(EventKind::TurnFailed, 1, "Overloaded");
    sink.deliver(&ev);
    let got = server.wait_for(2);
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|r| r.body == ev.to_json()));
    assert_eq!((stats.delivered, stats.retried, stats.failed), (1, 1, 0));
}

#[test]
fn does_not_retry_a_400() {
    let server = Server::start(local(), &[400]);
    let mut sink =
        WebhookSink::new(quick(vec![Endpoint::new(server.url("/"), Format::Json)])).expect("sink");
    sink.deliver(&event(EventKind::TurnCompleted, 1, "hi"));
    // A second event after it shows the worker moved on without retrying the first.
    sink.deliver(&event(EventKind::TurnCompleted, 2, "hi again"));
    let got = server.wait_for(2);
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!(got.len(), 2);
    assert!(got[0].body.contains("\"id1\"") && got[1].body.contains("\"id2\""));
    assert_eq!((stats.delivered, stats.retried, stats.failed), (1, 0, 1));
}

#[test]
fn queue_is_bounded_while_the_server_is_down_and_drains_after() {
    // Reserve a port, then close it: connections are refused until the server starts.
    let port = local().local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let mut cfg = quick(vec![Endpoint::new(url, Format::Json)]);
    cfg.queue = 3;
    cfg.attempts = 10_000;
    let mut sink = WebhookSink::new(cfg).expect("sink");
    for n in 0..10 {
        sink.deliver(&event(EventKind::TurnCompleted, n, "hi"));
    }
    // One event may be in the worker's hands; the queue holds three more at most.
    let dropped = sink.stats().dropped;
    assert!((6..=7).contains(&dropped), "dropped {dropped}");
    assert_eq!(sink.stats().delivered, 0);
    // Let the worker find the server down (a retry is scheduled) before it comes up.
    let deadline = Instant::now() + PATIENCE;
    while sink.stats().retried == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert!(sink.stats().retried > 0, "never tried while down");

    let listener = TcpListener::bind(("127.0.0.1", port)).expect("rebind the port");
    let server = Server::start(listener, &[]);
    let expected = (10 - dropped) as usize;
    let got = server.wait_for(expected);
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!(got.len(), expected, "{got:?}");
    assert_eq!(stats.delivered, 10 - dropped, "{stats:?}");
    let ids: Vec<String> = got
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.body).expect("json");
            v["id"].as_str().expect("id").to_owned()
        })
        .collect();
    // The oldest were dropped: the newest three always arrive, in order.
    assert_eq!(ids[ids.len() - 3..], ["id7", "id8", "id9"], "{ids:?}");
}

/// Decodes `=?UTF-8?B?…?=` (or returns plain ASCII as is).
fn decode_rfc2047(s: &str) -> String {
    let Some(b64) = s
        .strip_prefix("=?UTF-8?B?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return s.to_owned();
    };
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in b64.as_bytes().chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let n = data
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | (val(c) << (18 - 6 * i)));
        for i in 0..data.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    String::from_utf8(out).expect("utf-8")
}

/// The hold, on a fake clock: a completion with a background task running posts
/// nothing; the system turn answering the task's notification posts once, saying so;
/// a second hold that runs out posts the held completion, saying the task still runs.
#[test]
fn held_for_background_tasks() {
    let server = Server::start(local(), &[]);
    let cfg = quick(vec![Endpoint::new(server.url("/t"), Format::Ntfy)]);
    let mut sink = WebhookSink::new(cfg)
        .expect("sink")
        .with_hold(Duration::from_secs(600));
    let t0 = Instant::now();
    let mut held = event(EventKind::TurnCompleted, 1, "Started it in the background.");
    held.background_tasks = Some(1);
    sink.deliver_at(&held, t0);
    let mut system = event(EventKind::TurnStarted, 2, "");
    system.initiator = Some("system");
    sink.deliver_at(&system, t0 + Duration::from_secs(60));
    let done = event(EventKind::TurnCompleted, 3, "The tests pass.");
    sink.deliver_at(&done, t0 + Duration::from_secs(65));
    // Another round whose task never ends.
    let mut human = event(EventKind::TurnStarted, 4, "");
    human.initiator = Some("human");
    sink.deliver_at(&human, t0 + Duration::from_secs(100));
    let mut server_up = event(EventKind::TurnCompleted, 5, "The dev server is up.");
    server_up.background_tasks = Some(1);
    sink.deliver_at(&server_up, t0 + Duration::from_secs(110));
    assert_eq!(
        sink.tick_at(t0 + Duration::from_secs(709)),
        Some(t0 + Duration::from_secs(710))
    );
    assert_eq!(sink.tick_at(t0 + Duration::from_secs(710)), None);
    let got = server.wait_for(2);
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!(stats.delivered, 2, "{stats:?}");
    assert_eq!(
        decode_rfc2047(got[0].header("title").expect("title")),
        "Claude Code · web: your turn — 1 background task finished"
    );
    assert_eq!(got[0].body, "The tests pass.");
    assert_eq!(
        decode_rfc2047(got[1].header("title").expect("title")),
        "Claude Code · web: your turn — 1 background task still running"
    );
    assert_eq!(got[1].body, "The dev server is up.");
}
