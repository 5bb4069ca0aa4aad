//! Sinks: everything a user sees. The JSON Lines stream is product output; diagnostics go
//! through `tracing` to stderr, never here.

pub mod jsonl;

pub use jsonl::JsonlSink;

use crate::model::Event;
use crate::reduce::SessionView;

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
}
