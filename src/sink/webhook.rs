//! Webhooks: POST each matching event to configured URLs, as the event's JSON line or as
//! an ntfy-style plain-text message (`Title:` header, message as the body).
//!
//! Every endpoint has its own worker thread and bounded queue, so one dead server does
//! not delay another and never the core. A full queue drops its *oldest* event (counted):
//! after an outage the newest news matters most. A failed POST (connection error,
//! timeout, 408, 429 or 5xx) is retried with exponential backoff up to `attempts` times;
//! other statuses are final. Redirects are not followed.
//!
//! URLs often carry secrets (tokens in paths or queries), so logs name only the
//! endpoint's scheme, host and port.

use super::hold::Hold;
use super::{EventFilter, Finished, Sink, SinkError, headline, plain_message, title};
use crate::model::{Event, EventKind};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use ureq::http::{HeaderName, HeaderValue, Uri};

/// What a webhook's request body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// The event's JSON line, `Content-Type: application/json`.
    #[default]
    Json,
    /// ntfy-style: a `Title` header ("Claude Code · web: your turn"), the message as a
    /// plain-text body, and `Priority: high` for failures.
    Ntfy,
}

impl Format {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "json" => Some(Format::Json),
            "ntfy" => Some(Format::Ntfy),
            _ => None,
        }
    }
}

/// One URL to POST to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub format: Format,
    /// Extra request headers (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
}

impl Endpoint {
    pub fn new(url: impl Into<String>, format: Format) -> Self {
        Endpoint {
            url: url.into(),
            format,
            headers: Vec::new(),
        }
    }
}

/// Settings of the webhook sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    pub endpoints: Vec<Endpoint>,
    /// Which events are posted.
    pub filter: EventFilter,
    /// Events waiting per endpoint; when full, the oldest is dropped.
    pub queue: usize,
    /// Tries per event, the first included.
    pub attempts: u32,
    /// Delay before the first retry; doubled after each failure up to `backoff_max`.
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// Limit for one request, connection included.
    pub timeout: Duration,
}

impl WebhookConfig {
    /// The defaults, for `endpoints`.
    pub fn new(endpoints: Vec<Endpoint>) -> Self {
        WebhookConfig {
            endpoints,
            filter: EventFilter::default(),
            queue: 64,
            attempts: 5,
            backoff: Duration::from_secs(2),
            backoff_max: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }
}

/// What the webhook sink has done so far, over all endpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookStats {
    /// Requests answered with 2xx.
    pub delivered: u64,
    /// Failed tries that were tried again.
    pub retried: u64,
    /// Events given up on (final status, or out of attempts).
    pub failed: u64,
    /// Events dropped from a full queue (the oldest first).
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    delivered: AtomicU64,
    retried: AtomicU64,
    failed: AtomicU64,
}

/// One prepared request.
struct Job {
    body: String,
    title: Option<String>,
    high: bool,
}

struct Lane {
    format: Format,
    label: String,
    tx: Sender<Job>,
    /// Kept to drop the oldest job when the queue is full.
    oldest: Receiver<Job>,
}

/// Posts matching events to the configured URLs; see the module docs.
pub struct WebhookSink {
    filter: EventFilter,
    hold: Hold,
    lanes: Vec<Lane>,
    counters: Arc<Counters>,
    /// Dropped (never sent on) by `close`: wakes workers out of a backoff wait.
    stop: Sender<()>,
    finished: Finished,
    dropped: u64,
}

struct Worker {
    agent: ureq::Agent,
    url: String,
    label: String,
    format: Format,
    headers: Vec<(HeaderName, HeaderValue)>,
    attempts: u32,
    backoff: Duration,
    backoff_max: Duration,
    counters: Arc<Counters>,
    stop: Receiver<()>,
}

enum Outcome {
    Delivered,
    Retry(String),
    Final(String),
}

impl WebhookSink {
    /// Checks every URL and header and starts one worker thread per endpoint.
    pub fn new(cfg: WebhookConfig) -> Result<Self, SinkError> {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
        let counters = Arc::new(Counters::default());
        let mut lanes = Vec::with_capacity(cfg.endpoints.len());
        for ep in &cfg.endpoints {
            let label = check_url(&ep.url)?;
            let headers = check_headers(&ep.headers)?;
            let (tx, rx) = crossbeam_channel::bounded::<Job>(cfg.queue.max(1));
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(cfg.timeout))
                .http_status_as_error(false)
                .max_redirects(0)
                .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
                .build()
                .into();
            let worker = Worker {
                agent,
                url: ep.url.clone(),
                label: label.clone(),
                format: ep.format,
                headers,
                attempts: cfg.attempts.max(1),
                backoff: cfg.backoff,
                backoff_max: cfg.backoff_max.max(cfg.backoff),
                counters: Arc::clone(&counters),
                stop: stop_rx.clone(),
            };
            let jobs = rx.clone();
            let done = done_tx.clone();
            thread::Builder::new()
                .name("baton-webhook".to_owned())
                .spawn(move || {
                    let _done = done;
                    worker.run(&jobs);
                })
                .map_err(|source| SinkError::Thread {
                    sink: "webhook",
                    source,
                })?;
            lanes.push(Lane {
                format: ep.format,
                label,
                tx,
                oldest: rx,
            });
        }
        Ok(WebhookSink {
            filter: cfg.filter,
            hold: Hold::default(),
            lanes,
            counters,
            stop: stop_tx,
            finished: Finished(done_rx),
            dropped: 0,
        })
    }

    /// Holds completions back for background tasks for up to `period` (see [`Hold`]).
    pub fn with_hold(mut self, period: Duration) -> Self {
        self.hold.set_period(period);
        self
    }

    /// Sets the grace of questions and whether scheduled turns page (see [`Hold`]).
    pub fn with_pages(mut self, pages: super::hold::Pages) -> Self {
        self.hold.set_pages(pages);
        self
    }

    /// Delivers `ev` as if at `now` (held completions are timed on it).
    pub fn deliver_at(&mut self, ev: &Event, now: Instant) {
        if let Some(ev) = self.hold.offer(ev, now) {
            self.post(&ev);
        }
    }

    /// Posts the held completions due at `now`; returns when the next one is.
    pub fn tick_at(&mut self, now: Instant) -> Option<Instant> {
        for ev in self.hold.due(now) {
            self.post(&ev);
        }
        self.hold.next_due()
    }

    pub fn stats(&self) -> WebhookStats {
        WebhookStats {
            delivered: self.counters.delivered.load(Ordering::Relaxed),
            retried: self.counters.retried.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            dropped: self.dropped,
        }
    }

    /// Stops taking events and retrying; the workers try each queued event once more, and
    /// are waited for up to `grace`. Returns the final counts and whether they finished.
    pub fn close(mut self, grace: Duration) -> (WebhookStats, bool) {
        // A question still in its grace was not answered: it pages now, not never.
        for ev in self.hold.take_waits() {
            self.post(&ev);
        }
        let deadline = Instant::now() + grace;
        let WebhookSink {
            lanes,
            counters,
            stop,
            finished,
            dropped,
            ..
        } = self;
        drop(stop);
        drop(lanes);
        let done = finished.wait(deadline);
        let stats = WebhookStats {
            delivered: counters.delivered.load(Ordering::Relaxed),
            retried: counters.retried.load(Ordering::Relaxed),
            failed: counters.failed.load(Ordering::Relaxed),
            dropped,
        };
        (stats, done)
    }
}

impl Sink for WebhookSink {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn deliver(&mut self, ev: &Event) {
        self.deliver_at(ev, Instant::now());
    }

    fn tick(&mut self, now: Instant) -> Option<Instant> {
        self.tick_at(now)
    }
}

impl WebhookSink {
    fn post(&mut self, ev: &Event) {
        if !self.filter.matches(ev) {
            return;
        }
        for lane in &self.lanes {
            let mut job = prepare(lane.format, ev);
            // Only this thread sends, so after one pop there is room (or the worker took
            // a job meanwhile): two rounds suffice.
            let mut sent = false;
            for _ in 0..2 {
                match lane.tx.try_send(job) {
                    Ok(()) => {
                        sent = true;
                        break;
                    }
                    Err(TrySendError::Full(j)) => {
                        job = j;
                        if lane.oldest.try_recv().is_ok() {
                            note_drop(&mut self.dropped, &lane.label);
                        }
                    }
                    Err(TrySendError::Disconnected(_)) => break,
                }
            }
            if !sent {
                note_drop(&mut self.dropped, &lane.label);
            }
        }
    }
}

fn note_drop(dropped: &mut u64, label: &str) {
    *dropped += 1;
    let msg = "Webhook queue full; oldest event dropped.";
    // Logarithmic: a long outage must not become a flood of log lines.
    if dropped.is_power_of_two() {
        tracing::warn!(endpoint = %label, dropped = *dropped, "{msg}");
    } else {
        tracing::debug!(endpoint = %label, dropped = *dropped, "{msg}");
    }
}

fn prepare(format: Format, ev: &Event) -> Job {
    match format {
        Format::Json => Job {
            body: super::with_project(ev, &super::project_name(ev)).to_json(),
            title: None,
            high: false,
        },
        Format::Ntfy => {
            let mut body = plain_message(ev);
            if body.is_empty() {
                body = headline(ev);
            }
            Job {
                body,
                title: Some(title(ev)),
                high: ev.event == EventKind::TurnFailed,
            }
        }
    }
}

impl Worker {
    fn run(&self, jobs: &Receiver<Job>) {
        let mut healthy = true;
        for job in jobs {
            let mut delay = self.backoff;
            let mut attempt = 1;
            loop {
                match self.post(&job) {
                    Outcome::Delivered => {
                        self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                        if !healthy {
                            healthy = true;
                            tracing::info!(endpoint = %self.label, "Webhook delivers again.");
                        }
                        break;
                    }
                    Outcome::Final(why) => {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(endpoint = %self.label, error = %why, "Webhook refused the event; not retrying.");
                        break;
                    }
                    Outcome::Retry(why) => {
                        if healthy {
                            healthy = false;
                            tracing::warn!(endpoint = %self.label, error = %why, "Webhook failed; retrying with backoff.");
                        } else {
                            tracing::debug!(endpoint = %self.label, error = %why, attempt, "Webhook failed again.");
                        }
                        if attempt >= self.attempts || !self.pause(delay) {
                            self.counters.failed.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(endpoint = %self.label, attempt, "Webhook event given up.");
                            break;
                        }
                        self.counters.retried.fetch_add(1, Ordering::Relaxed);
                        attempt += 1;
                        delay = (delay * 2).min(self.backoff_max);
                    }
                }
            }
        }
    }

    /// Waits `delay`; false when the sink is closing (no more retries then).
    fn pause(&self, delay: Duration) -> bool {
        matches!(
            self.stop.recv_timeout(delay),
            Err(RecvTimeoutError::Timeout)
        )
    }

    fn post(&self, job: &Job) -> Outcome {
        let mut req = self.agent.post(&self.url);
        req = match self.format {
            Format::Json => req.header("Content-Type", "application/json"),
            Format::Ntfy => req.header("Content-Type", "text/plain; charset=utf-8"),
        };
        if let Some(t) = &job.title {
            req = req.header("Title", header_text(t));
        }
        if job.high {
            req = req.header("Priority", "high");
        }
        for (k, v) in &self.headers {
            req = req.header(k.clone(), v.clone());
        }
        match req.send(job.body.as_bytes()) {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match status {
                    200..=299 => Outcome::Delivered,
                    408 | 429 | 500..=599 => Outcome::Retry(format!("HTTP {status}")),
                    _ => Outcome::Final(format!("HTTP {status}")),
                }
            }
            Err(e @ (ureq::Error::BadUri(_) | ureq::Error::Http(_))) => {
                Outcome::Final(e.to_string())
            }
            Err(e) => Outcome::Retry(e.to_string()),
        }
    }
}

/// `scheme://host[:port]` of a valid http(s) URL, for logs.
fn check_url(url: &str) -> Result<String, SinkError> {
    let bad = |reason: &str| SinkError::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: Uri = url.parse().map_err(|_| bad("not a valid URL"))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if scheme != "http" && scheme != "https" {
        return Err(bad("only http:// and https:// are supported"));
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("no host"))?;
    Ok(match uri.port_u16() {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

fn check_headers(
    headers: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, SinkError> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::try_from(k.as_str()).map_err(|_| SinkError::Invalid {
                what: "webhook header",
                reason: format!("`{k}` is not a valid header name"),
            })?;
            let value = HeaderValue::try_from(v.as_str()).map_err(|_| SinkError::Invalid {
                what: "webhook header",
                reason: format!("the value of `{k}` is not a valid header value"),
            })?;
            Ok((name, value))
        })
        .collect()
}

/// A header value carrying any text: ASCII as is, anything else as an RFC 2047
/// encoded word (which ntfy decodes), since raw UTF-8 in headers is not portable.
fn header_text(s: &str) -> String {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        s.to_owned()
    } else {
        format!("=?UTF-8?B?{}?=", base64(s.as_bytes()))
    }
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
        assert_eq!(header_text("plain"), "plain");
        assert_eq!(header_text("a · b"), "=?UTF-8?B?YSDCtyBi?=");
    }

    #[test]
    fn urls_are_checked_and_redacted() {
        assert_eq!(
            check_url("https://user:secret@ntfy.example/topic?auth=x").unwrap(),
            "https://ntfy.example"
        );
        assert_eq!(
            check_url("http://127.0.0.1:8080/h").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert!(matches!(
            check_url("ftp://x/"),
            Err(SinkError::BadUrl { .. })
        ));
        assert!(matches!(
            check_url("nonsense"),
            Err(SinkError::BadUrl { .. })
        ));
        assert!(check_headers(&[("Bad Name".into(), "v".into())]).is_err());
        assert!(check_headers(&[("Authorization".into(), "Bearer x".into())]).is_ok());
    }
}
