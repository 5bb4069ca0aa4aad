//! Sinks: everything a user sees. The JSON Lines stream is product output; diagnostics go
//! through `tracing` to stderr, never here.
//!
//! The delivery sinks (desktop, exec, webhook) stand on one scaffold ([`delivery`]): the
//! hold, then worker threads behind bounded queues. `deliver` only formats and
//! `try_send`s, so a slow D-Bus, a hung hook or a dead web server can never stall the
//! core. What does not fit is dropped and counted.

pub mod delivery;
pub mod desktop;
pub mod desktop_config;
pub mod exec;
pub mod focused;
pub mod hold;
pub mod jsonl;
pub mod kinds;
pub mod notifier;
pub mod quiet;
pub mod registry;
pub mod section;
pub mod webhook;
pub mod webhook_config;

pub use desktop::DesktopSink;
pub use exec::ExecSink;
pub use jsonl::JsonlSink;
pub use webhook::WebhookSink;

/// The registry: calls `$then!` with one `key => field: Kind` line per delivery sink, in
/// the order they are parsed, printed and built. `key` is the config file's section,
/// `field` the validated section's name in `Config`.
macro_rules! for_each_sink {
    ($then:ident) => {
        $then! {
            desktop => desktop: $crate::sink::desktop::Desktop,
            on_event => on_event: $crate::sink::exec::Exec,
            webhook => webhooks: $crate::sink::webhook::Webhook,
        }
    };
}
pub(crate) use for_each_sink;

use crate::model::Event;
use crate::reduce::SessionView;
use std::fmt;
use std::time::{Duration, Instant};

/// Something that shows events to a person or a program. Sinks never block the core:
/// one that needs IO hands the work to its own thread or task and drops (with a count)
/// what it cannot keep up with.
pub trait Sink: Send {
    /// A short name for logs.
    fn name(&self) -> &'static str;

    /// Delivers one event.
    fn deliver(&mut self, ev: &Event);

    /// The sessions' current state after a batch of changes (for `status`).
    fn state(&mut self, _views: &[SessionView]) {}

    /// Flushes buffered output (on shutdown and after each batch).
    fn flush(&mut self) {}

    /// Sends what falls due at `now` (pages held back for background tasks); returns
    /// when to call again, if ever.
    fn tick(&mut self, _now: Instant) -> Option<Instant> {
        None
    }

    /// Stops taking events and lets queued work finish for up to `grace`; says what the
    /// sink did, for the log.
    fn close(self: Box<Self>, grace: Duration) -> Closed;
}

/// What [`Sink::close`] reports.
pub struct Closed {
    /// The sink's final counts (its own stats type), for the log.
    pub stats: Box<dyn fmt::Debug + Send>,
    /// Whether everything queued was finished within the grace.
    pub done: bool,
}

/// Why a delivery sink could not be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("on_event: the command is empty (expected [\"program\", \"arg\", …])")]
    EmptyCommand,
    #[error("webhook url `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("{what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    #[error("cannot start the {sink} sink's worker thread: {source}")]
    Thread {
        sink: &'static str,
        #[source]
        source: std::io::Error,
    },
}
