//! The webhook sink's settings and its section of the config file, `[[webhook]]`: the
//! endpoints (URL, body format, headers) with the queue, retry and timeout settings a
//! sink is built from, and the [`SinkKind`] impl that parses, prints and builds them
//! (see [`super::registry`]). Apart from the delivery, as the desktop's section is, so
//! that what a person writes is read in one file and what the workers do in another.

use super::SinkError;
use super::desktop::Board;
use super::registry::{SinkKind, Sinks};
use super::section::{Bad, parse_kinds, toml_kinds, toml_str};
use super::webhook::{Webhook, WebhookSink};
use crate::naming::EventFilter;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// What a webhook's request body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// The event's JSON line, `Content-Type: application/json`.
    #[default]
    Json,
    /// ntfy-style: a `Title` header ("Claude Code · web: your turn"), the message as a
    /// plain-text body, and a `Priority` per kind (4, high, for questions and failures).
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
    /// Each kind's ntfy priority (`[desktop.kinds.KIND] priority`).
    pub priorities: super::kinds::Styles,
    /// Nothing posted while the event's session is in front of the person.
    pub suppress_when_focused: bool,
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
            priorities: super::kinds::Styles::default(),
            suppress_when_focused: false,
        }
    }
}

/// One `[[webhook]]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    pub url: String,
    pub format: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub events: Option<Vec<String>>,
    pub suppress_when_focused: Option<bool>,
}

/// The `[[webhook]]` tables: one sink each, with its own filter.
impl SinkKind for Webhook {
    type Raw = Vec<RawWebhook>;
    type Config = Vec<WebhookConfig>;

    fn parse(raw: Vec<RawWebhook>, c: &mut Vec<WebhookConfig>, earlier: &Sinks) -> Result<(), Bad> {
        for (i, w) in raw.into_iter().enumerate() {
            let key = |k: &str| format!("webhook[{i}].{k}");
            let format = match w.format.as_deref() {
                None => Format::Json,
                Some(f) => Format::parse(f).ok_or_else(|| {
                    (
                        key("format"),
                        format!("unknown format `{f}` (json or ntfy)"),
                    )
                })?,
            };
            if !(w.url.starts_with("http://") || w.url.starts_with("https://")) {
                return Err((key("url"), format!("`{}` is not an http(s) URL", w.url)));
            }
            let mut ep = Endpoint::new(w.url, format);
            ep.headers = w.headers.unwrap_or_default().into_iter().collect();
            let mut cfg = WebhookConfig::new(vec![ep]);
            // ntfy priorities are set per kind in `[desktop.kinds.KIND]`.
            cfg.priorities = earlier.desktop.sink.styles.clone();
            if let Some(ev) = w.events {
                cfg.filter.kinds = parse_kinds(&ev).map_err(|e| (key("events"), e))?;
            }
            cfg.suppress_when_focused = w.suppress_when_focused.unwrap_or(false);
            c.push(cfg);
        }
        Ok(())
    }

    fn write(c: &Vec<WebhookConfig>, o: &mut String) {
        let q = toml_str;
        if c.is_empty() {
            o.push_str(
                "# Webhooks (none): [[webhook]] with url, format (\"json\" or \"ntfy\"), headers,\n\
                 # events, suppress_when_focused.\n",
            );
        }
        for w in c {
            for ep in &w.endpoints {
                let format = match ep.format {
                    Format::Json => "json",
                    Format::Ntfy => "ntfy",
                };
                let headers: Vec<String> = ep
                    .headers
                    .iter()
                    .map(|(k, v)| format!("{} = {}", q(k), q(v)))
                    .collect();
                let _ = writeln!(
                    o,
                    "# POST each matching event here (retried with backoff; never blocks).\n\
                     [[webhook]]\n\
                     url = {}\n\
                     # \"json\": the event's JSON line; \"ntfy\": plain-text message, Title header.\n\
                     format = {}\n\
                     # Extra request headers, e.g. Authorization.\n\
                     headers = {{ {} }}\n\
                     # Which events are posted (main conversations only).\n\
                     events = {}\n\
                     # Nothing posted while the session is in front of you (as desktop's).\n\
                     suppress_when_focused = {}\n",
                    q(&ep.url),
                    q(format),
                    headers.join(", "),
                    toml_kinds(&w.filter.kinds),
                    w.suppress_when_focused
                );
            }
        }
    }

    fn build(c: &Vec<WebhookConfig>, board: &Board) -> Result<Vec<WebhookSink>, SinkError> {
        c.iter()
            .map(|cfg| WebhookSink::with_held(cfg.clone(), board.held.clone()))
            .collect()
    }
}
