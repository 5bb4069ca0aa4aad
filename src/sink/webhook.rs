//! Webhooks: POST each matching event to configured URLs, as the event's JSON line or as
//! an ntfy-style plain-text message (`Title:` header, message as the body).
//!
//! Every endpoint has its own worker thread and bounded queue, so one dead server does
//! not delay another and never the core. A full queue drops its *oldest* event (counted):
//! after an outage the newest news matters most. A failed POST (connection error,
//! timeout, 408, 429 or 5xx) is retried with exponential backoff up to `attempts` times;
//! other statuses are final. Redirects are not followed.
//!
//! With `suppress_when_focused` (off by default), an event whose session is in front of
//! the person is not posted (see [`super::focused`]; counted, and noted for `status`).
//!
//! URLs often carry secrets (tokens in paths or queries), so logs name only the
//! endpoint's scheme, host and port.
//!
//! This file is the delivery: the lanes, the workers, the request and its retries. The
//! settings it is built from (`Format`, `Endpoint`, `WebhookConfig`) and the
//! `[[webhook]]` section are in [`super::webhook_config`], as the desktop's are, and
//! re-exported here, so `sink::webhook::WebhookConfig` still names them.

use super::SinkError;
use super::delivery::{Courier, Delivered, Drain, Stop, Workers};
use super::focused::{Check, Gate};
use super::quiet::HeldLog;
pub use super::webhook_config::{Endpoint, Format, WebhookConfig};
use crate::diag::{self, WebhookCounters};
use crate::model::Event;
use crate::naming::{headline, plain_message, title};
use crossbeam_channel::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};
use ureq::http::{HeaderName, HeaderValue, Uri};

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
    /// Events not posted: the session was in front of the person
    /// (`suppress_when_focused`; once per endpoint).
    pub focused: u64,
}

fn stats(c: &WebhookCounters) -> WebhookStats {
    WebhookStats {
        delivered: c.delivered.get(),
        retried: c.retried.get(),
        failed: c.failed.get(),
        dropped: c.dropped.get(),
        focused: c.focused.get(),
    }
}

/// One prepared request.
struct Job {
    body: String,
    title: Option<String>,
    /// ntfy `Priority` (1-5), from the kind's style.
    priority: Option<u8>,
    /// Set with `suppress_when_focused`: run on the worker, it may skip the post.
    check: Option<Check>,
}

/// One endpoint's lane of the workers.
struct Lane {
    format: Format,
    label: String,
}

/// Posts matching events to the configured URLs; see the module docs.
pub type WebhookSink = Delivered<Webhook>;

/// The webhook sink's formatting and IO (see [`Courier`]).
pub struct Webhook {
    gate: Gate,
    priorities: super::kinds::Styles,
    lanes: Vec<Lane>,
    workers: Workers<Job>,
    counters: Arc<WebhookCounters>,
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
    counters: Arc<WebhookCounters>,
    held: Arc<HeldLog>,
}

enum Outcome {
    Delivered,
    Retry(String),
    Final(String),
}

impl WebhookSink {
    /// Checks every URL and header and starts one worker thread per endpoint.
    pub fn new(cfg: WebhookConfig) -> Result<Self, SinkError> {
        Self::with_held(cfg, Arc::default())
    }

    /// [`WebhookSink::new`] noting the posts it skips in `held` (read by `status`).
    pub fn with_held(cfg: WebhookConfig, held: Arc<HeldLog>) -> Result<Self, SinkError> {
        let counters = Arc::new(WebhookCounters::default());
        let mut workers = Workers::new("webhook");
        let mut lanes = Vec::with_capacity(cfg.endpoints.len());
        for ep in &cfg.endpoints {
            let label = check_url(&ep.url)?;
            let headers = check_headers(&ep.headers)?;
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
                held: Arc::clone(&held),
            };
            workers.lane(
                cfg.queue,
                1,
                |_| "baton-webhook".to_owned(),
                move |jobs, stop: &Stop| worker.run(&jobs, stop),
            )?;
            lanes.push(Lane {
                format: ep.format,
                label,
            });
        }
        Ok(Delivered::with_courier(Webhook {
            gate: Gate::new(cfg.filter, cfg.suppress_when_focused),
            priorities: cfg.priorities,
            lanes,
            workers,
            counters,
        }))
    }
}

impl Courier for Webhook {
    type Stats = WebhookStats;
    const NAME: &'static str = "webhook";

    fn page(&mut self, ev: &Event, _now: Instant) {
        let Some(check) = self.gate.admit(ev, &crate::naming::project_name(ev)) else {
            return;
        };
        for (i, lane) in self.lanes.iter().enumerate() {
            let mut job = prepare(lane.format, ev, self.priorities.priority(ev.event));
            job.check.clone_from(&check);
            let dropped = self.workers.push_out_oldest(i, job);
            for _ in 0..dropped {
                diag::WebhookDropped {
                    endpoint: &lane.label,
                }
                .emit(&self.counters);
            }
        }
    }

    fn stats(&self) -> WebhookStats {
        stats(&self.counters)
    }

    fn counters(&self) -> Arc<dyn diag::Deliveries> {
        self.counters.clone()
    }

    /// Stops retrying: the workers try each queued event once more until `deadline`.
    fn finish(self, deadline: Instant) -> (WebhookStats, bool) {
        let done = self.workers.close(deadline, None) == Drain::InTime;
        (stats(&self.counters), done)
    }
}

fn prepare(format: Format, ev: &Event, priority: Option<u8>) -> Job {
    match format {
        Format::Json => Job {
            body: crate::naming::with_project(ev, &crate::naming::project_name(ev)).to_json(),
            title: None,
            priority: None,
            check: None,
        },
        Format::Ntfy => {
            let mut body = plain_message(ev);
            if body.is_empty() {
                body = headline(ev);
            }
            Job {
                body,
                title: Some(title(ev)),
                priority,
                check: None,
            }
        }
    }
}

impl Worker {
    fn run(&self, jobs: &Receiver<Job>, stop: &Stop) {
        let mut healthy = true;
        for job in jobs {
            if job
                .check
                .as_ref()
                .is_some_and(|c| c.holds("webhook", &self.held))
            {
                diag::WebhookFocused.emit(&self.counters);
                continue;
            }
            let mut delay = self.backoff;
            let mut attempt = 1;
            loop {
                match self.post(&job) {
                    Outcome::Delivered => {
                        diag::WebhookDelivered {
                            endpoint: &self.label,
                            recovered: !healthy,
                        }
                        .emit(&self.counters);
                        healthy = true;
                        break;
                    }
                    Outcome::Final(why) => {
                        diag::WebhookRefused {
                            endpoint: &self.label,
                            error: &why,
                        }
                        .emit(&self.counters);
                        break;
                    }
                    Outcome::Retry(why) => {
                        diag::WebhookTryFailed {
                            endpoint: &self.label,
                            error: &why,
                            attempt,
                            first: healthy,
                        }
                        .emit();
                        healthy = false;
                        // A closing sink cuts the pause short: no more retries then.
                        if attempt >= self.attempts || !stop.pause(delay) {
                            diag::WebhookGaveUp {
                                endpoint: &self.label,
                                attempt,
                            }
                            .emit(&self.counters);
                            break;
                        }
                        diag::WebhookRetried.emit(&self.counters);
                        attempt += 1;
                        delay = (delay * 2).min(self.backoff_max);
                    }
                }
            }
        }
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
        if let Some(p) = job.priority {
            // ntfy's names for 1 to 5.
            let name = ["min", "low", "default", "high", "urgent"];
            req = req.header("Priority", name[usize::from(p.clamp(1, 5)) - 1]);
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
    fn ntfy_priority_by_kind() {
        let styles = super::super::kinds::Styles::default();
        let path = "/h/.claude/projects/-h-web/s.jsonl";
        let ev = |k| crate::naming::tests::event(k, crate::model::ProviderKind::Claude, path);
        let kind = crate::model::EventKind::NeedsInput;
        let job = prepare(Format::Ntfy, &ev(kind), styles.priority(kind));
        assert_eq!(job.priority, Some(4));
        let kind = crate::model::EventKind::TurnCompleted;
        assert_eq!(
            prepare(Format::Ntfy, &ev(kind), styles.priority(kind)).priority,
            None
        );
        // The JSON format carries the event only.
        let kind = crate::model::EventKind::NeedsInput;
        assert_eq!(
            prepare(Format::Json, &ev(kind), styles.priority(kind)).priority,
            None
        );
    }

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
