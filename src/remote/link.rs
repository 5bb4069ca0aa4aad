//! One remote's thread: runs the child, reads its stream, hands events on, reconnects
//! with backoff.

use super::RemoteConfig;
use super::health::{Link, Links};
use crate::child::{Rest, Wiring, end_group, kill_group, wait_for};
use crate::model::Event;
use crate::recent::Recent;
use crate::shutdown::Shutdown;
use crate::state::remotes::{self, RemoteMark};
use crate::tail::reader::{Item, LineReader};
use rustix::event::{PollFd, PollFlags, poll};
use std::io::{self, Read};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest stream line taken; longer ones are skipped and counted (an event is < 4 KiB).
const MAX_LINE: usize = 64 * 1024;
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A connection that lasted this long starts the backoff afresh.
const LASTED: Duration = Duration::from_secs(60);
/// Ids saved beside the last one.
const SAVED_RECENT: usize = 256;
/// Ids remembered per remote for dropping repeats (the remote's own ring is smaller).
const SEEN: usize = 4096;
/// How long a child has to go after SIGTERM before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Hands a batch on to the sinks; false once they are gone (the daemon is stopping).
pub type HandOn = Box<dyn FnMut(Vec<Event>) -> bool + Send>;

/// Starts the remote's thread. It runs until `token` stops it (killing the child's
/// process group) or `hand_on` says the sinks are gone.
pub fn spawn(
    cfg: RemoteConfig,
    state_dir: PathBuf,
    links: Arc<Links>,
    token: Shutdown,
    hand_on: HandOn,
) -> io::Result<std::thread::JoinHandle<()>> {
    let mark = remotes::load(&state_dir, &cfg.name);
    let remote = Remote {
        seen: Recent::from_saved(SEEN, mark.recent),
        saved: mark.last.clone(),
        last: mark.last,
        cfg,
        state_dir,
        links,
        token,
        hand_on,
        bad_lines: 0,
        repeats: 0,
        save_failed: false,
    };
    std::thread::Builder::new()
        .name(format!("baton-remote-{}", remote.cfg.name))
        .spawn(move || remote.run())
}

struct Remote {
    cfg: RemoteConfig,
    state_dir: PathBuf,
    links: Arc<Links>,
    token: Shutdown,
    hand_on: HandOn,
    seen: Recent,
    /// The last id read and handed on: where the next connection resumes.
    last: Option<String>,
    /// The `last` on disk: a batch that moved nothing (every event a repeat) is not
    /// saved again.
    saved: Option<String>,
    bad_lines: u64,
    repeats: u64,
    save_failed: bool,
}

/// How a connection ended.
enum End {
    /// The token, or the sinks gone.
    Stopped,
    /// The child ended (or never started), and why; with how many events it brought.
    Ended { why: String, delivered: u64 },
}

impl Remote {
    fn run(mut self) {
        let name = self.cfg.name.clone();
        let mut backoff = BACKOFF_FIRST;
        let mut failures: u64 = 0;
        while !self.token.is_stopped() {
            let started = Instant::now();
            let (why, delivered) = match self.connect() {
                End::Stopped => break,
                End::Ended { why, delivered } => (why, delivered),
            };
            if delivered > 0 || started.elapsed() > LASTED {
                backoff = BACKOFF_FIRST;
                failures = 0;
            }
            failures += 1;
            // Logarithmic: a remote down for a day is not a log flood.
            if failures.is_power_of_two() {
                tracing::warn!(remote = %name, why = %why, retry_in_s = backoff.as_secs(), "Remote link ended; retrying.");
            } else {
                tracing::debug!(remote = %name, why = %why, "Remote link ended again.");
            }
            self.links.set(
                &name,
                Link::Retrying {
                    at: Instant::now() + backoff,
                    why,
                },
            );
            if self.token.wait_timeout(backoff) {
                break;
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// One run of the child, to its end or the stop.
    fn connect(&mut self) -> End {
        let argv = self.cfg.argv(self.last.as_deref());
        let wiring = Wiring {
            stdin: Stdio::null(),
            stdout: Stdio::piped(),
            stderr: Stdio::piped(),
        };
        // A group of its own: ending it ends what it started (ssh's helpers).
        let spawned = crate::child::start(&argv, &[], wiring);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                return End::Ended {
                    why: clean(&format!("cannot start `{}`: {e}", argv[0])),
                    delivered: 0,
                };
            }
        };
        self.links.set(&self.cfg.name, Link::Connected);
        tracing::info!(remote = %self.cfg.name, resume_after = ?self.last, "Remote link started.");
        let pumped = self.pump(&mut child);
        let status = end_child(&mut child, matches!(pumped, Pumped::Eof { .. }));
        match pumped {
            Pumped::Stopped => End::Stopped,
            Pumped::Eof { stderr, delivered } => {
                let why = if stderr.is_empty() {
                    format!("`{}` exited ({status})", argv[0])
                } else {
                    stderr
                };
                End::Ended {
                    why: clean(&why),
                    delivered,
                }
            }
        }
    }

    fn pump(&mut self, child: &mut Child) -> Pumped {
        let mut out = child.stdout.take();
        let mut err = child.stderr.take();
        let mut lines = LineReader::new(MAX_LINE);
        let mut last_err = String::new();
        let mut err_partial: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut delivered = 0;
        loop {
            if out.is_none() && err.is_none() {
                return Pumped::Eof {
                    stderr: last_err,
                    delivered,
                };
            }
            let (stop, out_ready, err_ready) = {
                let stop = self.token.fd();
                let mut fds = vec![PollFd::new(&stop, PollFlags::IN)];
                if let Some(o) = &out {
                    fds.push(PollFd::new(o, PollFlags::IN));
                }
                if let Some(e) = &err {
                    fds.push(PollFd::new(e, PollFlags::IN));
                }
                match poll(&mut fds, None) {
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => {
                        return Pumped::Eof {
                            stderr: format!("poll: {e}"),
                            delivered,
                        };
                    }
                }
                let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
                let out_at = usize::from(out.is_some());
                let err_at = out_at + 1;
                (
                    ready[0],
                    out.is_some() && ready[out_at],
                    err.is_some() && ready[err_at],
                )
            };
            if stop || self.token.is_stopped() {
                return Pumped::Stopped;
            }
            if out_ready && let Some(o) = &mut out {
                match o.read(&mut buf) {
                    Ok(0) | Err(_) => out = None,
                    Ok(n) => {
                        let batch = self.take(&mut lines, &buf[..n]);
                        if !self.hand(batch, &mut delivered) {
                            return Pumped::Stopped;
                        }
                    }
                }
            }
            if err_ready && let Some(e) = &mut err {
                match e.read(&mut buf) {
                    Ok(0) | Err(_) => err = None,
                    Ok(n) => {
                        err_partial.extend_from_slice(&buf[..n]);
                        while let Some(at) = err_partial.iter().position(|&b| b == b'\n') {
                            let line: Vec<u8> = err_partial.drain(..=at).collect();
                            let text = String::from_utf8_lossy(&line);
                            let text = text.trim();
                            if !text.is_empty() {
                                tracing::debug!(remote = %self.cfg.name, stderr = %clean(text), "Remote says.");
                                last_err = text.chars().take(512).collect();
                            }
                        }
                        // A stderr line with no end is kept to a bound.
                        if err_partial.len() > 4096 {
                            err_partial.clear();
                        }
                    }
                }
            }
        }
    }

    /// The events in `bytes` (with what came before them), each marked with the
    /// remote's name; ids already handed on are dropped.
    fn take(&mut self, lines: &mut LineReader, bytes: &[u8]) -> Vec<Event> {
        let mut batch = Vec::new();
        let mut bad: Vec<String> = Vec::new();
        lines.feed(bytes, |item| match item {
            Item::Line { bytes, .. } => {
                if bytes.iter().all(u8::is_ascii_whitespace) {
                    return;
                }
                match serde_json::from_slice::<Event>(bytes) {
                    Ok(ev) => batch.push(ev),
                    Err(e) => bad.push(format!("a line that is not an event ({e})")),
                }
            }
            Item::Oversized { len, .. } => {
                bad.push(format!("a line of {len} bytes (over {MAX_LINE})"));
            }
        });
        let mut out = Vec::with_capacity(batch.len());
        for why in bad {
            self.bad_lines += 1;
            tracing::warn!(remote = %self.cfg.name, bad_lines = self.bad_lines, "Remote sent {why}; skipped.");
            // Counted always, on the stream now and then: a remote spewing garbage
            // must not flood it.
            if self.bad_lines.is_power_of_two() {
                let mut a = crate::state::anomaly(
                    "remote_bad_line",
                    format!(
                        "remote {} sent {why}; {} such lines so far",
                        self.cfg.name, self.bad_lines
                    ),
                    &self.cfg.name,
                );
                a.remote = Some(self.cfg.name.clone());
                out.push(a);
            }
        }
        for mut ev in batch {
            self.last = Some(ev.id.clone());
            // The other machine's own lifecycle and anomalies stay there: its
            // `daemon_ready` is not this daemon's.
            if ev.provider.is_none() {
                continue;
            }
            if !self.seen.insert(&ev.id) {
                self.repeats += 1;
                tracing::debug!(remote = %self.cfg.name, id = %ev.id, repeats = self.repeats, "Remote event seen already; dropped.");
                continue;
            }
            ev.remote = Some(self.cfg.name.clone());
            // The remote is trusted no more than a transcript: the contract's cap holds.
            ev.message = ev.message.as_deref().and_then(crate::model::clip_message);
            out.push(ev);
        }
        out
    }

    /// Hands `batch` on, then saves where the stream stands. False when the sinks are
    /// gone.
    fn hand(&mut self, batch: Vec<Event>, delivered: &mut u64) -> bool {
        let n = batch.iter().filter(|e| e.provider.is_some()).count() as u64;
        if !batch.is_empty() && !(self.hand_on)(batch) {
            return false;
        }
        *delivered += n;
        if self.last == self.saved && !self.save_failed {
            return true;
        }
        let mark = RemoteMark {
            last: self.last.clone(),
            recent: self.seen.newest(SAVED_RECENT),
        };
        match remotes::save(&self.state_dir, &self.cfg.name, &mark) {
            Ok(()) => {
                self.save_failed = false;
                self.saved = self.last.clone();
            }
            Err(e) if !self.save_failed => {
                self.save_failed = true;
                tracing::warn!(remote = %self.cfg.name, error = %e, "Cannot save where the remote's stream stands; a restart may show its recent events again.");
            }
            Err(_) => {}
        }
        true
    }
}

enum Pumped {
    Stopped,
    Eof { stderr: String, delivered: u64 },
}

/// Ends the child's process group (SIGTERM, then SIGKILL past the grace) and reaps it.
/// A child whose output ended (`eof`) is first given the grace to exit by itself, so its
/// own exit status is what `status` shows.
fn end_child(child: &mut Child, eof: bool) -> String {
    let by_itself = if eof { KILL_GRACE } else { Duration::ZERO };
    let ended = match wait_for(child, Instant::now() + by_itself, None) {
        Ok(Some(status)) => {
            // What it left behind in its group goes too.
            kill_group(child);
            Ok(status)
        }
        _ => end_group(child, KILL_GRACE, Rest::Kill),
    };
    match ended {
        Ok(s) => s.to_string(),
        Err(e) => e.to_string(),
    }
}

/// A reason for `status`: one printable line, capped.
fn clean(s: &str) -> String {
    crate::text::one_line(s).chars().take(200).collect()
}
