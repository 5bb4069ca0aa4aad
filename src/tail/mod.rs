//! The tail layer: owns byte offsets, line framing and file identity, knows nothing about
//! JSON.

pub mod open;
pub mod reader;
pub mod scratch;
pub mod state;

pub use open::open;
pub use reader::{Item, LineReader, OVERSIZE_KEEP};
pub use state::{Change, FileId, Parts, Stat, TailState};

/// Default cap on one line's size (`--max-line-bytes`).
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
