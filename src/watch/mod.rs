//! Discovery and (with the daemon) watching. This layer names paths; it never reads
//! transcript contents beyond a first line for provider detection.

pub mod discover;

pub use discover::{Found, Root, find};
