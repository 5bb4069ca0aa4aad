//! `baton run` with delivery sinks configured in its config file: the exec hook runs and
//! the webhook is posted for a real completion.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, DEADLINE, Daemon, append};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn write_config(d: &Daemon, text: &str) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(cfg, text).unwrap();
}

#[test]
fn exec_hook_runs_for_a_completion_with_the_event_on_stdin() {
    let d = Daemon::tree();
    let out = d.dir.path().join("hook.out");
    let script = d.dir.path().join("hook.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n{ echo \"$BATON_EVENT $#\"; cat; } >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let canary = d.dir.path().join("pwned");
    write_config(
        &d,
        &format!(
            "on_event = [\"{}\", \"{}\"]\n",
            script.display(),
            out.display()
        ),
    );
    let mut d = d.start(&[]);
    let c = Claude::new();
    let evil = format!("done; touch {0} $(touch {0}) `touch {0}`", canary.display());
    let (bytes, turn) = c.turn("hi", &evil);
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    d.wait_for("turn_completed", common::is("turn_completed", turn.clone()));

    let start = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.lines().count() >= 2 {
            break text;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "hook never ran; log:\n{}",
            std::fs::read_to_string(&d.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut lines = text.lines();
    // argv is exactly the configured one (one argument); the kind is in the environment.
    assert_eq!(lines.next(), Some("turn_completed 1"));
    let ev: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(ev["event"], "turn_completed");
    assert_eq!(ev["turn"], turn.as_str());
    assert_eq!(ev["message"], evil.as_str());
    assert!(!canary.exists(), "transcript text was run");
    // Only the hand-back ran the hook (turn_started, queued before it, did not).
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    d.stop();
}

struct Posted {
    request_line: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// Reads one HTTP request and answers 200.
fn serve(conn: TcpStream) -> Option<Posted> {
    conn.set_read_timeout(Some(DEADLINE)).ok()?;
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    let mut conn = conn;
    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .ok()?;
    Some(Posted {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body: String::from_utf8(body).ok()?,
    })
}

fn server() -> (String, mpsc::Receiver<Posted>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            if let Some(p) = serve(conn)
                && tx.send(p).is_err()
            {
                break;
            }
        }
    });
    (format!("http://{addr}"), rx)
}

#[test]
fn webhooks_receive_the_post_for_a_completion() {
    let (json_url, json_rx) = server();
    let (ntfy_url, ntfy_rx) = server();
    let d = Daemon::tree();
    write_config(
        &d,
        &format!(
            "[[webhook]]\nurl = \"{json_url}/hook\"\nheaders = {{ X-Test = \"yes\" }}\n\n\
             [[webhook]]\nurl = \"{ntfy_url}/topic\"\nformat = \"ntfy\"\n"
        ),
    );
    let mut d = d.start(&[]);
    let c = Claude::new();
    let (bytes, turn) = c.turn("hi", "Shipped it");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    d.wait_for("turn_completed", common::is("turn_completed", turn.clone()));

    let p = json_rx
        .recv_timeout(DEADLINE)
        .expect("no JSON webhook POST");
    assert_eq!(p.request_line, "POST /hook HTTP/1.1");
    assert!(p.headers.contains(&("x-test".to_owned(), "yes".to_owned())));
    let ev: Value = serde_json::from_str(&p.body).unwrap();
    assert_eq!(ev["event"], "turn_completed");
    assert_eq!(ev["turn"], turn.as_str());

    let p = ntfy_rx
        .recv_timeout(DEADLINE)
        .expect("no ntfy webhook POST");
    assert_eq!(p.request_line, "POST /topic HTTP/1.1");
    assert_eq!(p.body, "Shipped it");
    let title = p
        .headers
        .iter()
        .find(|(k, _)| k == "title")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    // "Claude Code · …: your turn", RFC 2047-encoded because of the "·".
    assert!(title.starts_with("=?UTF-8?B?"), "title {title:?}");

    d.stop();
    // turn_started is not a hand-back: nothing more was posted.
    assert!(json_rx.try_recv().is_err());
}

#[test]
fn systemd_hears_ready_status_and_stopping() {
    let d = Daemon::tree();
    let path = d.dir.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut d = d.env("NOTIFY_SOCKET", path.to_str().unwrap()).start(&[]);
    let next = || {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).expect("a notification from baton");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let first = next();
    assert!(first.contains("READY=1\n"), "{first:?}");
    assert!(first.contains("STATUS=no sessions\n"), "{first:?}");

    let c = Claude::new();
    let (bytes, turn) = c.turn("hi", "done");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    d.wait_for("turn_completed", common::is("turn_completed", turn));
    let start = Instant::now();
    loop {
        let msg = next();
        if msg == "STATUS=1 waiting for you\n" {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "last status {msg:?}");
    }
    let pid = d.pid();
    std::process::Command::new("kill")
        .arg(pid.to_string())
        .status()
        .unwrap();
    loop {
        let msg = next();
        if msg.contains("STOPPING=1") {
            break;
        }
    }
}

/// `needs_input_grace` in a running daemon: a question answered at once (as a rule
/// approves a tool) never runs the exec hook, though the stream has both events; one
/// left unanswered runs it once its grace is over.
#[test]
fn a_question_answered_at_once_pages_nothing_and_an_open_one_pages() {
    let d = Daemon::tree();
    let out = d.dir.path().join("hook.out");
    let script = d.dir.path().join("hook.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"$BATON_EVENT\" >> \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_config(
        &d,
        &format!(
            "needs_input_grace = \"1500ms\"\non_event = [\"{}\", \"{}\"]\n",
            script.display(),
            out.display()
        ),
    );
    let mut d = d.start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let record = |v: serde_json::Value| format!("{v}\n");
    let ask = |tool: &str| {
        record(serde_json::json!({
            "type": "assistant", "uuid": common::uuid(), "sessionId": c.session,
            "timestamp": common::ts_now(),
            "message": {"role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
                "content": [{"type": "tool_use", "id": tool, "name": "AskUserQuestion",
                    "input": {"questions": [{"question": format!("Pick {tool}?")}]}}]}
        }))
    };
    let answer = |tool: &str| {
        record(serde_json::json!({
            "type": "user", "uuid": common::uuid(), "sessionId": c.session,
            "timestamp": common::ts_now(),
            "message": {"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": tool, "content": "A"}]}
        }))
    };
    let (prompt, turn) = c.prompt("go");
    // Asked and answered in one write: well inside the grace.
    append(&path, (prompt + &ask("q1") + &answer("q1")).as_bytes());
    d.wait_for(
        "the answer",
        common::is("needs_input_resolved", turn.clone()),
    );
    // Asked, and nobody answers.
    append(&path, ask("q2").as_bytes());
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.lines().count() >= 1 {
            assert_eq!(text, "needs_input\n", "only the open question paged");
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the open question never paged");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Nothing more runs it: the answered question stays silent.
    std::thread::sleep(Duration::from_millis(2000));
    let text = std::fs::read_to_string(&out).unwrap();
    let events = d.stop();
    let asked = events
        .iter()
        .filter(|e| e["event"] == "needs_input" && e["turn"] == turn.as_str())
        .count();
    assert_eq!(asked, 2, "the stream has both questions");
    assert_eq!(text, "needs_input\n", "{text}");
}

/// Codex 0.153 escalation requests in a running daemon (issue 29): under `on-request`,
/// a request approved at once (by a rule) pages nothing, one left open pages once its
/// `needs_input_grace` is over, with its justification; under `never` the same request
/// asks nobody.
#[test]
fn a_codex_escalation_request_pages_after_its_grace_only_where_codex_asks() {
    let d = Daemon::tree();
    let out = d.dir.path().join("hook.out");
    let script = d.dir.path().join("hook.sh");
    std::fs::write(&script, "#!/bin/sh\ncat >> \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_config(
        &d,
        &format!(
            "needs_input_grace = \"1s\"\non_event = [\"{}\", \"{}\"]\n",
            script.display(),
            out.display()
        ),
    );
    let mut d = d.start(&[]);
    let rec = |ty: &str, payload: Value| {
        format!(
            "{}\n",
            serde_json::json!({"timestamp": common::ts_now(), "type": ty, "payload": payload})
        )
    };
    let codex_root = d.codex();
    let session = |policy: &str| {
        let c = common::Codex::new();
        let (path, turn) = c.working_in(&codex_root);
        let ctx = rec(
            "turn_context",
            serde_json::json!({"turn_id": turn, "cwd": "/tmp", "approval_policy": policy}),
        );
        append(&path, ctx.as_bytes());
        (path, turn)
    };
    let call = |id: &str, why: &str| {
        let args = serde_json::json!({"cmd": "npm run dev", "sandbox_permissions": "require_escalated",
            "justification": why});
        rec(
            "response_item",
            serde_json::json!({"type": "function_call", "name": "exec_command",
                "arguments": args.to_string(), "call_id": id}),
        )
    };
    let output = |id: &str| {
        rec(
            "response_item",
            serde_json::json!({"type": "function_call_output", "call_id": id, "output": "ok"}),
        )
    };
    let paged = || -> Vec<Value> {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (asks, turn) = session("on-request");
    // Approved within the grace (one write): the stream has the wait, nobody is paged.
    append(
        &asks,
        (call("c1", "Allow the dev server?") + &output("c1")).as_bytes(),
    );
    d.wait_for(
        "the approval",
        common::is("needs_input_resolved", turn.clone()),
    );
    // Left open: one page, once the grace is over.
    append(&asks, call("c2", "Allow deploying to staging?").as_bytes());
    let start = Instant::now();
    let page = loop {
        if let Some(p) = paged().into_iter().find(|e| e["event"] == "needs_input") {
            break p;
        }
        assert!(start.elapsed() < DEADLINE, "the open request never paged");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(page["reason"], "approval", "{page}");
    assert_eq!(page["turn"], turn.as_str());
    assert_eq!(page["message"], "Allow deploying to staging?");

    let (never, quiet_turn) = session("never");
    append(&never, call("c3", "Allow the dev server?").as_bytes());
    d.wait_for(
        "the never session",
        common::is("turn_started", quiet_turn.clone()),
    );
    // Past the grace and then some: still nothing asked for it.
    std::thread::sleep(Duration::from_millis(2500));
    let pages: Vec<_> = paged()
        .into_iter()
        .filter(|e| e["event"] == "needs_input")
        .collect();
    let events = d.stop();
    let asked = |t: &str| {
        events
            .iter()
            .filter(|e| e["event"] == "needs_input" && e["turn"] == t)
            .count()
    };
    assert_eq!(asked(&turn), 2, "the stream has both requests");
    assert_eq!(asked(&quiet_turn), 0, "under `never` nothing waits");
    assert_eq!(pages.len(), 1, "only the open request paged: {pages:?}");
}
