//! The tail layer: owns byte offsets and line framing, knows nothing about JSON.

pub mod reader;

pub use reader::{Item, LineReader, OVERSIZE_KEEP};

/// Default cap on one line's size (`--max-line-bytes`).
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
