//! Following the daemon's event stream across its restarts: `baton tail --follow` and
//! `baton status --watch` both stand on this.
//!
//! Each connection asks for the events after the last id printed (`since_id`), so a
//! restart loses nothing the new daemon holds; the ids printed lately are kept, so what
//! the daemon sends again (its whole ring, when it does not hold that id) is dropped
//! rather than printed twice.

use crate::error::Error;
use crate::recent::Recent;
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Ids remembered for dropping repeats: above the daemon's ring (all it can send again).
const SEEN: usize = 4 * crate::socket::RING;
/// The first wait before connecting again; it doubles up to [`BACKOFF_MAX`].
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// How a connection ended.
#[derive(Debug)]
pub enum End {
    /// The daemon closed the stream (it stopped, or restarts).
    Closed,
    /// The daemon let this client go (it fell behind); the text says why.
    Dropped(String),
    /// The daemon refused this client (too many followers); the text says why.
    Refused(String),
}

/// One line from the stream, for the caller.
pub enum Line<'a> {
    /// An event not seen before: the line as sent, and parsed.
    Event(&'a str, &'a Value),
    /// A notice for the person (already one line, escapes stripped).
    Notice(String),
}

pub fn connect(socket: Option<&Path>) -> Result<UnixStream, Error> {
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

/// Sends one request line to the daemon.
pub(crate) fn request(stream: &mut UnixStream, req: &Value) -> Result<(), Error> {
    writeln!(stream, "{req}").map_err(|e| Error::Output(io::Error::other(format!("socket: {e}"))))
}

pub(crate) fn socket_err(e: io::Error) -> Error {
    Error::Output(io::Error::other(format!("reading from the daemon: {e}")))
}

/// Text from the daemon, for a terminal: escapes stripped, one line, capped.
fn clean(s: &str) -> String {
    crate::text::one_line(s).chars().take(300).collect()
}

/// One follower of the stream, across connections.
#[derive(Debug)]
pub struct Follower {
    socket: Option<PathBuf>,
    seen: Recent,
    /// The last event id handed out (or the `--since-id` given): where the next
    /// connection resumes.
    last_id: Option<String>,
    /// While no id is known: ask for the events published since this wall time (ms).
    /// Set at the first connection when not given, so a reconnection that knows no id
    /// asks for what came since then.
    from: Option<i64>,
    /// The last event printed was a daemon's last (`daemon_stopping`): that run was
    /// followed to its end, so a new daemon that does not hold the id left no gap.
    saw_stop: bool,
    backoff: Duration,
}

impl Follower {
    /// `since_ms`: replay the events of this last while (counted from now) while no id
    /// is known.
    pub fn new(socket: Option<PathBuf>, since_ms: Option<u64>, since_id: Option<String>) -> Self {
        let now = crate::clock::wall_now();
        Follower {
            socket,
            seen: Recent::new(SEEN),
            last_id: since_id,
            from: since_ms.map(|ms| now.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX))),
            saw_stop: false,
            backoff: BACKOFF_MIN,
        }
    }

    /// The request for the next connection.
    pub fn request(&self, now: i64) -> Value {
        let mut req = serde_json::json!({"cmd": "tail"});
        if let Some(id) = &self.last_id {
            req["since_id"] = id.as_str().into();
        } else if let Some(t) = self.from {
            req["since_ms"] = u64::try_from(now.saturating_sub(t)).unwrap_or(0).into();
        }
        req
    }

    /// Connects and asks for the stream.
    pub fn connect(&mut self) -> Result<BufReader<UnixStream>, Error> {
        let mut stream = connect(self.socket.as_deref())?;
        let now = crate::clock::wall_now();
        let req = self.request(now);
        request(&mut stream, &req)?;
        self.from.get_or_insert(now);
        Ok(BufReader::new(stream))
    }

    /// Reads one connection to its end, handing each new event (and each notice) to
    /// `on`. Errors from `on` (the output is gone) end it; a broken connection is
    /// [`End::Closed`].
    pub fn pump(
        &mut self,
        reader: impl BufRead,
        mut on: impl FnMut(Line<'_>) -> Result<(), Error>,
    ) -> Result<End, Error> {
        for line in reader.lines() {
            let Ok(line) = line else {
                return Ok(End::Closed);
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // A connection that sent something is a working one.
            self.backoff = BACKOFF_MIN;
            if let Some(e) = v["error"].as_str() {
                return Err(Error::Usage(format!("the daemon says: {}", clean(e))));
            }
            if let Some(n) = v["notice"].as_str() {
                let n = clean(n);
                if v["refused"] == true {
                    return Ok(End::Refused(n));
                }
                if n.starts_with("dropped") {
                    return Ok(End::Dropped(n));
                }
                if v["since_id_missing"] != true {
                    on(Line::Notice(n))?;
                } else if v["gap"] == true || !self.saw_stop {
                    // Repeats are dropped here anyway, so a resume from an id the daemon
                    // does not hold is silent, unless events may be missing: the daemon
                    // let some go, or the last run was not followed to its end.
                    on(Line::Notice(format!(
                        "{n}; events between the last one printed and these may be missing"
                    )))?;
                }
                continue;
            }
            if let Some(id) = v["id"].as_str() {
                if !self.seen.insert(id) {
                    continue;
                }
                self.last_id = Some(id.to_owned());
            }
            self.saw_stop = v["event"] == "daemon_stopping";
            on(Line::Event(&line, &v))?;
        }
        Ok(End::Closed)
    }

    /// The wait before the next attempt; each call doubles the next, up to the cap.
    pub fn next_backoff(&mut self) -> Duration {
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        wait
    }

    pub fn socket(&self) -> Option<&Path> {
        self.socket.as_deref()
    }
}

/// The daemon's `status` answer: one row per session, and its end line.
pub fn status_rows(socket: Option<&Path>) -> Result<(Vec<Value>, Value), Error> {
    let mut stream = connect(socket)?;
    request(&mut stream, &serde_json::json!({"cmd": "status"}))?;
    let mut rows = Vec::new();
    for line in BufReader::new(stream).lines() {
        let line = line.map_err(socket_err)?;
        let v: Value = serde_json::from_str(&line).map_err(|e| socket_err(io::Error::other(e)))?;
        if v["end"] == true {
            return Ok((rows, v));
        }
        if let Some(e) = v["error"].as_str() {
            return Err(Error::Usage(format!("the daemon says: {}", clean(e))));
        }
        rows.push(v);
    }
    Err(socket_err(io::Error::other(
        "the daemon hung up mid-answer",
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn feed(f: &mut Follower, text: &str) -> (Vec<String>, Vec<String>, End) {
        let (mut events, mut notices) = (Vec::new(), Vec::new());
        let end = f
            .pump(text.as_bytes(), |l| {
                match l {
                    Line::Event(raw, _) => events.push(raw.to_owned()),
                    Line::Notice(n) => notices.push(n),
                }
                Ok(())
            })
            .unwrap();
        (events, notices, end)
    }

    #[test]
    fn repeats_are_dropped_and_the_next_request_resumes_after_the_last_id() {
        let mut f = Follower::new(None, Some(60_000), None);
        let now = crate::clock::wall_now();
        assert!(f.request(now)["since_ms"].as_u64().unwrap() >= 60_000);
        let (ev, _, end) = feed(&mut f, "{\"id\":\"a\"}\n{\"id\":\"b\"}\n");
        assert_eq!(ev.len(), 2);
        assert!(matches!(end, End::Closed));
        assert_eq!(f.request(0)["since_id"], "b");
        feed(&mut f, "{\"id\":\"s\",\"event\":\"daemon_stopping\"}\n");
        let again = "{\"notice\":\"since_id not held\",\"since_id_missing\":true,\"gap\":false}\n\
                     {\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
        let (ev, notices, _) = feed(&mut f, again);
        assert_eq!(ev, ["{\"id\":\"c\"}"]);
        assert!(
            notices.is_empty(),
            "the last run was seen to its end: no gap"
        );
        assert_eq!(f.request(0)["since_id"], "c");
        // Not seen to its end this time (a crash, or this client was away).
        let (_, notices, _) = feed(
            &mut f,
            "{\"notice\":\"since_id not held\",\"since_id_missing\":true,\"gap\":false}\n",
        );
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].contains("may be missing"));
    }

    #[test]
    fn a_possible_gap_is_said_and_a_drop_ends_the_connection() {
        let mut f = Follower::new(None, None, Some("x".into()));
        assert_eq!(f.request(0)["since_id"], "x");
        let text = "{\"notice\":\"since_id not held \\u001b[31m\",\"since_id_missing\":true,\"gap\":true}\n\
                    {\"notice\":\"dropped: this client fell behind the event stream\"}\n{\"id\":\"z\"}\n";
        let (ev, notices, end) = feed(&mut f, text);
        assert!(ev.is_empty());
        assert_eq!(notices.len(), 1);
        assert!(!notices[0].contains('\u{1b}'));
        assert!(matches!(end, End::Dropped(_)));
    }

    #[test]
    fn without_an_id_a_reconnect_asks_for_what_came_since_the_first_connection() {
        let mut f = Follower::new(None, None, None);
        assert!(f.request(0).get("since_ms").is_none());
        f.from = Some(1_000);
        assert_eq!(f.request(4_000)["since_ms"], 3_000);
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_a_working_connection_resets_it() {
        let mut f = Follower::new(None, None, None);
        let waits: Vec<Duration> = (0..7).map(|_| f.next_backoff()).collect();
        assert_eq!(waits[0], BACKOFF_MIN);
        assert_eq!(waits[1], BACKOFF_MIN * 2);
        assert_eq!(waits[6], BACKOFF_MAX);
        feed(&mut f, "{\"id\":\"a\"}\n");
        assert_eq!(f.next_backoff(), BACKOFF_MIN);
    }
}
