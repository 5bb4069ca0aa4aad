//! `baton status` and `baton tail`: clients of the daemon's socket (see `socket`).

use crate::clock::{parse_rfc3339, wall_now};
use crate::error::Error;
use crate::model::{Event, EventKind, ProviderKind};
use crate::naming::title;
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use crate::live::follow::{connect, request, socket_err};

mod answer;
use answer::{Piece, Step, each_line};

/// Text from the transcript, for a terminal: escapes stripped, one line, capped.
fn one_line(s: &str, max: usize) -> String {
    crate::text::cut(&crate::text::one_line(s), max)
}

/// "just now", "5 min ago", "3 h ago", "2 days ago".
fn ago(ms: i64) -> String {
    crate::clock::age(ms, wall_now())
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// Sends one request and reads the daemon's one-line reply; a reply that says `error` is
/// a bad request (the daemon's words).
fn ask(mut stream: std::os::unix::net::UnixStream, req: &Value) -> Result<Value, Error> {
    request(&mut stream, req)?;
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(socket_err)?;
    let v: Value = serde_json::from_str(&line).map_err(|e| socket_err(io::Error::other(e)))?;
    if let Some(e) = v["error"].as_str() {
        return Err(Error::Usage(format!("the daemon says: {e}")));
    }
    Ok(v)
}

/// Bytes of the daemon's answer read, and of rows written, at a time.
const STATUS_BUF: usize = 64 * 1024;

fn write_line(out: &mut impl Write, line: &[u8]) -> Result<(), Error> {
    out.write_all(line)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(Error::Output)
}

/// Prints every session the daemon knows: the person's table ([`crate::people`]), or
/// with `json` every row as the daemon sent it (only `table.filter` applied).
///
/// Both read the answer as it comes, one line at a time, so the client's memory does
/// not grow with the daemon's sessions: `--json` writes each row on as it is read, and
/// the table keeps only the rows it has room for (`table.rows`, [`people::Fit`]). A
/// daemon that hangs up mid-answer is an error after the rows already written.
pub fn status(
    socket: Option<&Path>,
    json: bool,
    table: &crate::people::Table,
    out: &mut impl Write,
) -> Result<(), Error> {
    use crate::people::{self, Fit, Matching, Row, StatusLine, Waiting};
    let mut stream = connect(socket)?;
    // `--json` with no filter passes every row on as it came: it asks for the rows in
    // frames, and copies each frame unread (a daemon from before frames sends lines,
    // and each line is then only checked for the end and a refusal, not read into a
    // row; at 100,000 sessions reading them was most of the client's time).
    let pass_all = json && table.filter.keeps_every_row();
    let ask = if pass_all {
        serde_json::json!({"cmd": "status", "frames": true})
    } else {
        serde_json::json!({"cmd": "status"})
    };
    request(&mut stream, &ask)?;
    let mut reader = BufReader::with_capacity(STATUS_BUF, stream);
    let mut out = io::BufWriter::with_capacity(STATUS_BUF, out);
    let mut fit = Fit::new(&table.filter, table.now, table.rows);
    let mut keep = Matching::new(&table.filter);
    let bad = |e: serde_json::Error| socket_err(io::Error::other(e));
    let end = each_line(&mut reader, |piece| {
        let text = match piece {
            Piece::Line(text) => text,
            Piece::Rows(rows) => {
                out.write_all(rows).map_err(Error::Output)?;
                return Ok(Step::Next);
            }
        };
        if pass_all && let Ok(mark) = serde_json::from_slice::<people::StatusMark<'_>>(text) {
            if mark.end {
                return serde_json::from_slice::<Value>(text)
                    .map(Step::Done)
                    .map_err(bad);
            }
            if let Some(e) = mark.error {
                return Err(Error::Usage(format!("the daemon says: {e}")));
            }
            if let Some(len) = mark.frame {
                return Ok(Step::Frame(len));
            }
            write_line(&mut out, text)?;
            return Ok(Step::Next);
        }
        // A line the typed reader cannot take (a field of another type, say) is read
        // the slow way, as it always was.
        // Checked for UTF-8 once, as a whole line: read from `&[u8]`, serde checks each
        // string of it on its own, a tenth of a table's time at 100,000 rows.
        let typed = std::str::from_utf8(text)
            .ok()
            .and_then(|t| serde_json::from_str::<StatusLine<'_>>(t).ok());
        // The table builds a row only if it may still show it ([`Fit::push_with`]).
        if !json
            && let Some(l) = &typed
            && !l.end
            && l.error.is_none()
            && let Some(head) = l.head()
        {
            fit.push_with(head, || Row::from_status_line(l));
            return Ok(Step::Next);
        }
        let (is_end, error, row) = match typed {
            Some(l) => {
                let row = Row::from_status_line(&l);
                (l.end, l.error.map(|e| e.into_owned()), row)
            }
            None => {
                let v: Value = serde_json::from_slice(text).map_err(bad)?;
                (
                    v["end"] == true,
                    v["error"].as_str().map(str::to_owned),
                    Row::from_status(&v),
                )
            }
        };
        if is_end {
            return serde_json::from_slice::<Value>(text)
                .map(Step::Done)
                .map_err(bad);
        }
        if let Some(e) = error {
            return Err(Error::Usage(format!("the daemon says: {e}")));
        }
        match (json, row) {
            // A line that is no session row is passed on as it came.
            (true, None) => write_line(&mut out, text)?,
            (true, Some(row)) => {
                if keep.matches(row) {
                    write_line(&mut out, text)?;
                }
            }
            (false, Some(row)) => fit.push(row),
            (false, None) => {}
        }
        Ok(Step::Next)
    })?;
    let blocked = blocked_line(&end["stream"]);
    let home = std::env::var("HOME").ok();
    let waiting = Waiting::from_end(&end, home.as_deref());
    let quiet = quiet_lines(&end);
    if json {
        // A fact about the desktop, not a session: a line of its own, after the rows.
        if let Some(why) = end["no_raise"].as_str() {
            let line = serde_json::json!({"no_raise": one_line(why, 300)});
            writeln!(out, "{line}").map_err(Error::Output)?;
        }
        // The rows stay a list of sessions; the warnings go beside them.
        for w in &waiting {
            let provider = w.provider.as_deref().unwrap_or("any agent");
            eprintln!("baton: waiting for {} ({provider})", one_line(&w.path, 200));
        }
        if let Some(b) = &blocked {
            eprintln!("baton: {b}");
        }
        return out.flush().map_err(Error::Output);
    }
    // The remotes' links go under the sessions, as the blocked stream does.
    let blocked = match (blocked, remote_lines(&end["remotes"])) {
        (Some(b), Some(r)) => Some(format!("{r}\n\n{b}")),
        (b, r) => r.or(b),
    };
    let none = fit.rows() == 0;
    let mut view = fit.finish();
    view.waiting = waiting;
    let text = people::render(&view, table.width, table.colour, table.now);
    let head = if none {
        Some("No sessions yet.")
    } else {
        (view.shown.is_empty() && view.older == 0).then_some("No sessions match.")
    };
    if let Some(h) = head {
        writeln!(out, "{h}").map_err(Error::Output)?;
        if !text.is_empty() {
            writeln!(out).map_err(Error::Output)?;
        }
    }
    write!(out, "{text}").map_err(Error::Output)?;
    for q in &quiet {
        writeln!(out, "{q}").map_err(Error::Output)?;
    }
    if let Some(why) = end["no_raise"].as_str() {
        writeln!(
            out,
            "Clicks on notifications switch the tmux pane but cannot raise the terminal: {}.",
            one_line(why, 300)
        )
        .map_err(Error::Output)?;
    }
    if let Some(b) = &blocked {
        writeln!(out, "\n{b}").map_err(Error::Output)?;
    }
    out.flush().map_err(Error::Output)
}

/// The lines under the table about pages not shown: "Muted: web (until 14:00), api"
/// and "Not shown: web (quiet_hours, 3 min ago)".
fn quiet_lines(end: &Value) -> Vec<String> {
    let now = wall_now();
    let mut out = Vec::new();
    let mutes: Vec<String> = end["mutes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let t = one_line(text(m, "target"), 40);
            match m["until_ms"].as_i64() {
                Some(u) => format!("{t} (until {})", crate::clock::local_time(u, now, false)),
                None => t,
            }
        })
        .collect();
    if !mutes.is_empty() {
        out.push(format!("Muted: {}", mutes.join(", ")));
    }
    let held: Vec<String> = end["held"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            let at = h["at_ms"].as_i64().map(ago).unwrap_or_default();
            format!(
                "{} ({}, {at})",
                one_line(text(h, "project"), 40),
                text(h, "reason")
            )
        })
        .collect();
    if !held.is_empty() {
        out.push(format!("Not shown: {}", held.join(", ")));
    }
    out
}

/// What `baton mute` / `baton unmute` asks.
pub struct MuteRequest<'a> {
    /// A project name as `status` shows it, or a session id.
    pub target: &'a str,
    /// `Some(None)`: mute for good; `Some(Some(ms))`: for a while; `None`: unmute.
    pub for_ms: Option<Option<u64>>,
    /// `mute --project`: `target` is a project name.
    pub project_only: bool,
    /// `mute --branch`: `target` is a git branch.
    pub branch: bool,
}

/// `baton mute` and `baton unmute`. A mute that names no session the daemon knows is
/// still set (the project may start later), with a warning on stderr.
pub fn mute(socket: Option<&Path>, m: &MuteRequest<'_>, out: &mut impl Write) -> Result<(), Error> {
    let target = m.target;
    let stream = connect(socket)?;
    let req = match m.for_ms {
        Some(ms) => serde_json::json!({"cmd": "mute", "target": target, "for_ms": ms,
                                       "project": m.project_only, "branch": m.branch}),
        None => serde_json::json!({"cmd": "unmute", "target": target}),
    };
    let v = ask(stream, &req)?;
    let said = match (m.for_ms, v["changed"].as_bool()) {
        (Some(_), _) => format!("Muted {}.", one_line(target, 60)),
        (None, Some(true)) => format!("Unmuted {}.", one_line(target, 60)),
        (None, _) => format!("{} was not muted.", one_line(target, 60)),
    };
    if v["matched"].as_u64() == Some(0) {
        let what = if m.branch {
            "session on the branch"
        } else if m.project_only {
            "project"
        } else {
            "project or session"
        };
        eprintln!(
            "warning: the daemon knows no {what} called `{}` (names as `baton status` shows them); the mute waits for one.",
            one_line(target, 60)
        );
    }
    writeln!(out, "{said}").map_err(Error::Output)?;
    for q in quiet_lines(&v) {
        writeln!(out, "{q}").map_err(Error::Output)?;
    }
    out.flush().map_err(Error::Output)
}

/// How long `baton hook` waits for the daemon, at most, for each of connect, write and
/// answer: an agent runs its hooks in its own path, so this never holds it up for long.
const HOOK_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// `baton hook`: hands a hook's input (its JSON, untrusted) for `agent` to the running
/// daemon and returns whether the daemon took a signal from it. Every failure (no
/// daemon, a slow one, input that is not a hook's) is an `Err` the caller only logs:
/// `baton hook` always exits 0 so it never blocks or fails the agent.
pub fn hook(socket: Option<&Path>, agent: ProviderKind, input: &[u8]) -> Result<bool, Error> {
    let slim = crate::provider::hook::slim(input)
        .ok_or_else(|| Error::Usage("hook input is not a JSON object".to_owned()))?;
    let stream = connect(socket)?;
    stream
        .set_write_timeout(Some(HOOK_WAIT))
        .and_then(|()| stream.set_read_timeout(Some(HOOK_WAIT)))
        .map_err(socket_err)?;
    let req = serde_json::json!({"cmd": "hook", "agent": agent.as_str(), "input": slim});
    let v = ask(stream, &req)?;
    Ok(v["signal"].as_bool().unwrap_or(false))
}

/// One line per `[[remote]]`: "remote devbox: connected" or "remote devbox: retrying
/// in 8 s: why".
fn remote_lines(remotes: &Value) -> Option<String> {
    let lines = crate::live::state::remote_states(remotes);
    (!lines.is_empty()).then(|| lines.join("\n"))
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
    let kind = crate::naming::parse_event_kind(v["event"].as_str()?)?;
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
    ev.remote = s("remote");
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

/// What `baton tail` follows, and how.
#[derive(Debug, Default, Clone)]
pub struct TailOptions {
    /// JSON Lines instead of one line per event for a person.
    pub json: bool,
    /// Replay the events of this last while first.
    pub since_ms: Option<u64>,
    /// Start after this event id (wins over `since_ms`).
    pub since_id: Option<String>,
    /// Keep going across daemon restarts (and before it is up).
    pub follow: bool,
}

/// Follows the daemon's events until it stops (or drops this client for being slow);
/// with `follow`, reconnects and resumes after the last event printed instead.
pub fn tail(socket: Option<&Path>, opts: &TailOptions, out: &mut impl Write) -> Result<(), Error> {
    use crate::live::follow::{End, Follower, Line};
    // Following from before the daemon is up: what it emits once there is ours too.
    let since_ms = opts.since_ms.or(opts.follow.then_some(0));
    let mut f = Follower::new(
        socket.map(Path::to_path_buf),
        since_ms,
        opts.since_id.clone(),
    );
    // Said once per outage, not per attempt.
    let mut down = false;
    loop {
        let why = match f.connect() {
            Ok(reader) => {
                let end = f.pump(reader, |line| {
                    match line {
                        Line::Event(raw, v) => {
                            if opts.json {
                                writeln!(out, "{raw}").map_err(Error::Output)?;
                            } else if let Some(h) = human_line(v) {
                                writeln!(out, "{h}").map_err(Error::Output)?;
                            }
                            out.flush().map_err(Error::Output)?;
                        }
                        Line::Notice(n) => eprintln!("baton: the daemon says: {n}"),
                    }
                    down = false;
                    Ok(())
                })?;
                match end {
                    End::Closed if !opts.follow => {
                        eprintln!("baton: the daemon stopped.");
                        return Ok(());
                    }
                    End::Closed => "the daemon stopped".to_owned(),
                    End::Refused(n) if !opts.follow => {
                        let why = n.trim_start_matches("refused: ");
                        return Err(Error::Refused(format!(
                            "the daemon refused to add this client: {why}; that many `baton \
                             tail` clients follow it already (`max_followers` in its config); \
                             try again later"
                        )));
                    }
                    End::Refused(n) => format!("the daemon {n}"),
                    End::Dropped(n) if !opts.follow => {
                        return Err(Error::Output(io::Error::other(format!(
                            "the daemon {n}; run `baton tail` again"
                        ))));
                    }
                    End::Dropped(n) => format!("the daemon {n}"),
                }
            }
            Err(e @ Error::NotRunning { .. }) if opts.follow => e.to_string(),
            Err(e) => return Err(e),
        };
        if !down {
            down = true;
            eprintln!("baton: {why}; reconnecting (resuming after the last event printed).");
        }
        std::thread::sleep(f.next_backoff());
    }
}

#[cfg(test)]
mod tests {
    use super::answer::tests::{END, ROWS, framed};
    use super::*;
    use crate::people::{Filter, Table};
    use std::os::unix::net::UnixListener;

    /// `status` against a daemon that answers with `answer` (written in small pieces);
    /// what it prints, and whether it asked for frames.
    fn status_against(answer: String, json: bool) -> (Result<(), Error>, String, bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = String::new();
            BufReader::new(&s).read_line(&mut req).unwrap();
            for piece in answer.as_bytes().chunks(5) {
                if s.write_all(piece).is_err() {
                    break;
                }
            }
            serde_json::from_str::<Value>(&req).unwrap()["frames"] == true
        });
        let table = Table {
            filter: Filter::default(),
            colour: false,
            width: 100,
            now: 0,
            rows: None,
        };
        let mut out = Vec::new();
        let got = status(Some(&path), json, &table, &mut out);
        let asked = server.join().unwrap();
        (got, String::from_utf8(out).unwrap(), asked)
    }

    #[test]
    fn status_json_passes_framed_and_plain_answers_on_as_they_came() {
        // A daemon with frames, and one from before them (lines only).
        for answer in [framed(), format!("{ROWS}{END}")] {
            let (got, out, asked) = status_against(answer.clone(), true);
            got.unwrap();
            assert!(asked, "--json with no filter asks for frames");
            assert_eq!(out, ROWS, "{answer}");
        }
        // The table asks for lines, and reads them as rows.
        let (got, out, asked) = status_against(format!("{ROWS}{END}"), false);
        got.unwrap();
        assert!(!asked);
        for project in ["web", "api"] {
            assert!(out.contains(project), "{out}");
        }
        // A refusal is the daemon's words; a daemon gone mid-frame is an error.
        let (got, _, _) = status_against("{\"error\":\"busy\"}\n".to_owned(), true);
        assert!(
            matches!(&got, Err(Error::Usage(m)) if m.contains("busy")),
            "{got:?}"
        );
        let answer = framed();
        let (got, out, _) =
            status_against(answer[..answer.len() - END.len() - 10].to_owned(), true);
        assert!(
            matches!(&got, Err(Error::Output(e)) if e.to_string().contains("hung up")),
            "{got:?}"
        );
        assert!(ROWS.starts_with(&out), "{out}");
    }
}
