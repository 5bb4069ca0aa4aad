//! What the socket server answers: the request line read into a command, and the
//! answers themselves (`status`'s rows, a follower's stream, `mute`, `hook`, errors).
//! The loop decides when and on which thread; this decides what is written, so the
//! protocol's side of the server reads in one place.

use super::{Loop, Pending};
use crate::clock::wall_now;
use crate::socket::{Hub, MuteBy, Since, end_line, mute_reply, write_status_line};
use std::io::{self, BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A client must accept each write within this, or it is disconnected (its thread must
/// not live forever).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The buffer a `status` answer is written through: its rows are formatted into it and
/// written out whenever it fills, never gathered whole.
const STATUS_BUF: usize = 64 * 1024;
/// Replies written by the loop itself (errors, refusals) are tiny; it never waits on one
/// longer than this.
const INLINE_WRITE_TIMEOUT: Duration = Duration::from_millis(100);

#[derive(serde::Deserialize)]
struct Request {
    cmd: String,
    since_ms: Option<u64>,
    since_id: Option<String>,
    target: Option<String>,
    for_ms: Option<u64>,
    /// `hook`: which agent's hook (`claude`, `codex`) and its input as the agent gave it.
    agent: Option<String>,
    input: Option<serde_json::Value>,
    /// `mute --project`: the target is a project name.
    #[serde(default)]
    project: bool,
    /// `mute --branch`: the target is a git branch.
    #[serde(default)]
    branch: bool,
    /// `status`: the rows in frames (see [`answer_status`]).
    #[serde(default)]
    frames: bool,
}

impl Loop {
    /// Serves one request line.
    pub(super) fn request(&mut self, p: Pending) {
        let Pending { stream, buf, .. } = p;
        let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
        if line.iter().all(u8::is_ascii_whitespace) {
            // Hung up without a word, or an empty line.
            return;
        }
        let req: Request = match serde_json::from_slice(line) {
            Ok(r) => r,
            Err(e) => {
                let msg = serde_json::json!({"error": format!("bad request: {e}")});
                reply(&stream, &msg.to_string());
                return;
            }
        };
        match req.cmd.as_str() {
            "status" => self.status(stream, req.frames),
            "tail" => self.follow(
                stream,
                Since::from_request(req.since_ms, req.since_id, wall_now()),
            ),
            "mute" | "unmute" => {
                let line = mute_reply(
                    &self.hub,
                    &req.cmd,
                    req.target.as_deref(),
                    req.for_ms,
                    if req.branch {
                        MuteBy::Branch
                    } else if req.project {
                        MuteBy::Project
                    } else {
                        MuteBy::Any
                    },
                );
                reply(&stream, &line);
            }
            "hook" => {
                let line = self.hook(req.agent.as_deref(), req.input.as_ref());
                reply(&stream, &line);
            }
            other => {
                let msg = serde_json::json!({
                    "error": format!("unknown command `{other}` (status, tail, mute, unmute, hook)")
                });
                reply(&stream, &msg.to_string());
            }
        }
    }

    /// A hook's input (untrusted): read by the agent's hook reader into a signal for
    /// the core, which applies it like the registry's. Answers at once either way.
    fn hook(&self, agent: Option<&str>, input: Option<&serde_json::Value>) -> String {
        let Some(provider) = agent.and_then(crate::model::ProviderKind::parse) else {
            return serde_json::json!({"error": "hook: unknown agent"}).to_string();
        };
        let signal = input
            .and_then(|v| serde_json::to_vec(v).ok())
            .and_then(|b| crate::provider::hook::parse(provider, &b));
        let used = match (signal, &self.opts.hints) {
            (Some(s), Some(tx)) => tx.send(crate::watch::Hint::Signal(Box::new(s))),
            _ => false,
        };
        serde_json::json!({"ok": true, "signal": used}).to_string()
    }
}

/// A short reply from the loop itself, which must never wait long on a client.
pub(super) fn reply(stream: &UnixStream, line: &str) {
    let _ = stream.set_write_timeout(Some(INLINE_WRITE_TIMEOUT));
    let mut s = stream;
    let _ = writeln!(s, "{line}");
}

pub(super) fn answer_status(stream: &UnixStream, hub: &Hub, frames: bool) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    // Rows go out as they are formatted, through one bounded buffer: a parked row is
    // read from the spill straight into it.
    let mut out = Vec::with_capacity(STATUS_BUF + 4096);
    let mut stream = stream;
    let (now, after) = (crate::clock::wall_now(), hub.stale_after());
    let (mut n, mut in_buf) = (0, 0);
    let mut reads = crate::views::RowReads::default();
    for r in hub.views.rows().flatten() {
        // A parked session's row as formatted when it was parked; any other formatted now.
        if r.row_via(&mut reads, &mut out) {
            out.push(b'\n');
        } else {
            write_status_line(&r.view(), now, after, &mut out)?;
        }
        n += 1;
        in_buf += 1;
        if out.len() >= STATUS_BUF {
            send_rows(&mut stream, &out, in_buf, frames)?;
            out.clear();
            in_buf = 0;
        }
    }
    // Unframed, the last rows go out with the end line.
    if frames && in_buf > 0 {
        send_rows(&mut stream, &out, in_buf, frames)?;
        out.clear();
    }
    writeln!(out, "{}", end_line(n, hub))?;
    stream.write_all(&out)?;
    stream.flush()
}

/// Writes `rows` whole row lines. In frames (the request asked for them), a line
/// `{"frame":BYTES,"rows":N}` goes before them: a client that passes every row on as it
/// came (`status --json`) then copies the frame's bytes, where it would otherwise read
/// every line to tell a row from the end line (at 100,000 sessions, 70 MB and most of
/// the client's time).
fn send_rows(stream: &mut impl Write, rows: &[u8], n: usize, frames: bool) -> io::Result<()> {
    if frames {
        // Whole, in one write: `writeln!` on the socket would write each piece.
        let head = format!("{{\"frame\":{},\"rows\":{n}}}\n", rows.len());
        stream.write_all(head.as_bytes())?;
    }
    stream.write_all(rows)
}

pub(super) fn follow(
    stream: &UnixStream,
    backlog: Vec<Arc<str>>,
    rx: &crossbeam_channel::Receiver<Arc<str>>,
    slow: &std::sync::atomic::AtomicBool,
) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut out = BufWriter::new(stream);
    for l in backlog {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    // Ends when the hub lets go of this client: it hung up, fell behind, or the daemon
    // is stopping.
    for l in rx {
        writeln!(out, "{l}")?;
        out.flush()?;
    }
    if slow.load(Ordering::Acquire) {
        writeln!(
            out,
            "{{\"notice\":\"dropped: this client fell behind the event stream\"}}"
        )?;
        out.flush()?;
    }
    Ok(())
}
