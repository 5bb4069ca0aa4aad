//! `baton status` and `baton tail`: clients of the daemon's socket (see `socket`).

use crate::clock::{parse_rfc3339, wall_now};
use crate::error::Error;
use crate::model::{Event, EventKind, ProviderKind};
use crate::sink::{agent_name, title};
use crate::text::strip_terminal;
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

fn connect(socket: Option<&Path>) -> Result<UnixStream, Error> {
    let Some(path) = socket else {
        return Err(Error::NotRunning {
            socket: "(no socket path: XDG_RUNTIME_DIR, XDG_STATE_HOME and HOME are unset or not absolute)".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        });
    };
    UnixStream::connect(path).map_err(|source| Error::NotRunning {
        socket: path.to_path_buf(),
        source,
    })
}

fn request(stream: &mut UnixStream, req: &Value) -> Result<(), Error> {
    writeln!(stream, "{req}").map_err(|e| Error::Output(io::Error::other(format!("socket: {e}"))))
}

fn socket_err(e: io::Error) -> Error {
    Error::Output(io::Error::other(format!("reading from the daemon: {e}")))
}

/// Text from the transcript, for a terminal: escapes stripped, one line, capped.
fn one_line(s: &str, max: usize) -> String {
    let clean = strip_terminal(s);
    let flat: String = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// "just now", "5 min ago", "3 h ago", "2 days ago".
fn ago(ms: i64) -> String {
    crate::clock::age(ms, wall_now())
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// Prints every session the daemon knows.
pub fn status(socket: Option<&Path>, json: bool, out: &mut impl Write) -> Result<(), Error> {
    let mut stream = connect(socket)?;
    request(&mut stream, &serde_json::json!({"cmd": "status"}))?;
    let mut rows = Vec::new();
    let mut ended = None;
    for line in BufReader::new(stream).lines() {
        let line = line.map_err(socket_err)?;
        let v: Value = serde_json::from_str(&line).map_err(|e| socket_err(io::Error::other(e)))?;
        if v["end"] == true {
            ended = Some(v);
            break;
        }
        if let Some(e) = v["error"].as_str() {
            return Err(Error::Usage(format!("the daemon says: {e}")));
        }
        if json {
            writeln!(out, "{line}").map_err(Error::Output)?;
        } else {
            rows.push(v);
        }
    }
    let Some(end) = ended else {
        return Err(socket_err(io::Error::other(
            "the daemon hung up mid-answer",
        )));
    };
    let blocked = blocked_line(&end["stream"]);
    if json {
        // The rows stay a list of sessions; the warning goes beside them.
        if let Some(b) = &blocked {
            eprintln!("baton: {b}");
        }
        return out.flush().map_err(Error::Output);
    }
    if rows.is_empty() {
        writeln!(out, "No sessions yet.").map_err(Error::Output)?;
        if let Some(b) = &blocked {
            writeln!(out, "\n{b}").map_err(Error::Output)?;
        }
        return out.flush().map_err(Error::Output);
    }
    let w = |s: &str, n: usize| {
        let c = one_line(s, n);
        format!("{c:<n$}")
    };
    writeln!(
        out,
        "{:<12} {:<11} {:<18} {:<10} {:<12} LAST MESSAGE",
        "STATE", "AGENT", "PROJECT", "TURN", "AGE"
    )
    .map_err(Error::Output)?;
    for r in &rows {
        let provider = ProviderKind::parse(text(r, "provider"));
        let mut project = text(r, "project").to_owned();
        if let Some(a) = r["agent"].as_str() {
            project = format!("{project}/{a}");
        }
        let since = r["since"]
            .as_str()
            .and_then(parse_rfc3339)
            .map(ago)
            .unwrap_or_default();
        // Wider than its column when background tasks are named: never cut.
        let mut state = crate::scan_view::state_text(
            text(r, "state"),
            r["background_tasks"].as_u64().unwrap_or(0),
        );
        if let Some(reason) = r["reason"].as_str() {
            state = format!("{state} ({})", one_line(reason, 20));
        }
        let line = format!(
            "{} {} {} {} {} {}",
            w(&state, state.chars().count().max(12)),
            w(agent_name(provider), 11),
            w(&project, 18),
            w(text(r, "turn"), 10),
            w(&since, 12),
            one_line(text(r, "message"), 70)
        );
        writeln!(out, "{}", line.trim_end()).map_err(Error::Output)?;
    }
    if let Some(b) = &blocked {
        writeln!(out, "\n{b}").map_err(Error::Output)?;
    }
    out.flush().map_err(Error::Output)
}

/// "The event stream is blocked since …", from the end line's `stream`, if it is.
fn blocked_line(stream: &Value) -> Option<String> {
    if stream["state"] != "blocked" {
        return None;
    }
    let since = stream["since"]
        .as_str()
        .and_then(parse_rfc3339)
        .map(|ms| {
            format!(
                "{} ({})",
                crate::clock::local_time(ms, wall_now(), true),
                ago(ms)
            )
        })
        .unwrap_or_default();
    Some(format!(
        "The event stream is blocked since {since}: cannot write {}: {}. {} events wait, in \
         order, and are written once it can be.",
        one_line(text(stream, "target"), 200).trim_start_matches("the "),
        one_line(text(stream, "error"), 200),
        stream["waiting"].as_u64().unwrap_or(0)
    ))
}

/// The event fields a human line needs, from a stream line.
fn event_from(v: &Value) -> Option<Event> {
    let kind = crate::sink::parse_event_kind(v["event"].as_str()?)?;
    let s = |k: &str| v[k].as_str().map(str::to_owned);
    let mut ev = Event::lifecycle(
        kind,
        s("ts").unwrap_or_default(),
        s("id").unwrap_or_default(),
    );
    ev.provider = v["provider"].as_str().and_then(ProviderKind::parse);
    ev.session = s("session");
    ev.agent = s("agent");
    ev.turn = s("turn");
    ev.path = s("path");
    ev.reason = s("reason");
    ev.message = s("message");
    ev.evidence = s("evidence");
    ev.resets_at = s("resets_at");
    ev.project = s("project");
    Some(ev)
}

/// One line for a person: the local time of day with its zone, title, message.
pub fn human_line(v: &Value) -> Option<String> {
    let ev = event_from(v)?;
    let time = parse_rfc3339(&ev.ts)
        .map(|ms| crate::clock::local_time(ms, ms, true))
        .unwrap_or_default();
    let mut line = format!("{time}  {}", one_line(&title(&ev), 120));
    if matches!(
        ev.event,
        EventKind::TurnCompleted | EventKind::TurnFailed | EventKind::NeedsInput
    ) && let Some(m) = ev.message.as_deref()
        && !m.trim().is_empty()
    {
        line.push_str(" — ");
        line.push_str(&one_line(m, 100));
    }
    Some(line)
}

/// Follows the daemon's events until it stops (or drops this client for being slow).
pub fn tail(
    socket: Option<&Path>,
    json: bool,
    since_ms: Option<u64>,
    out: &mut impl Write,
) -> Result<(), Error> {
    let mut stream = connect(socket)?;
    let mut req = serde_json::json!({"cmd": "tail"});
    if let Some(ms) = since_ms {
        req["since_ms"] = ms.into();
    }
    request(&mut stream, &req)?;
    for line in BufReader::new(stream).lines() {
        let line = line.map_err(socket_err)?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(n) = v["notice"].as_str()
            && v["refused"] == true
        {
            let why = one_line(n.trim_start_matches("refused: "), 200);
            return Err(Error::Refused(format!(
                "the daemon refused to add this client: {why}; that many `baton tail` clients \
                 follow it already (`max_followers` in its config); try again later"
            )));
        }
        if let Some(n) = v["notice"].as_str() {
            return Err(Error::Output(io::Error::other(format!(
                "the daemon {n}; run `baton tail` again"
            ))));
        }
        if let Some(e) = v["error"].as_str() {
            return Err(Error::Usage(format!("the daemon says: {e}")));
        }
        if json {
            writeln!(out, "{line}").map_err(Error::Output)?;
        } else if let Some(h) = human_line(&v) {
            writeln!(out, "{h}").map_err(Error::Output)?;
        }
        out.flush().map_err(Error::Output)?;
    }
    eprintln!("baton: the daemon stopped.");
    Ok(())
}
