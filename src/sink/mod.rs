//! Sinks: everything a user sees. The JSON Lines stream is product output; diagnostics go
//! through `tracing` to stderr, never here.

pub mod jsonl;

pub use jsonl::JsonlSink;
