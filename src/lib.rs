//! baton: knows when an AI coding agent hands the turn back to its human.
//!
//! ```text
//! watch (paths, hints) ─▶ tail (bounded lines) ─▶ provider (projection) ─▶ reduce (turns, dedup) ─▶ sink (events)
//! ```
//!
//! The reader, projectors and reducer are synchronous and pure: bytes, observations and a
//! `now` in, events out. `replay` runs them on the records' own time.
//!
//! Known problems: inotify cannot see writes on NFS and other network filesystems (use
//! polling there); a transcript rewritten in place is re-derived from its content.

pub mod check;
pub mod child;
pub mod cli;
pub mod client;
pub mod clock;
pub mod completions;
pub mod config;
pub mod daemon;
pub mod diag;
pub mod error;
pub mod feed;
pub mod focus;
pub mod hooks_cmd;
pub mod live;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod naming;
pub mod people;
pub mod pool;
pub mod process;
pub mod provider;
pub mod recent;
pub mod reduce;
pub mod remote;
pub mod replay;
pub mod rows;
pub mod scan_view;
pub mod service_cmd;
pub mod session_row;
pub mod shutdown;
pub mod sink;
pub mod slots;
pub mod socket;
pub mod state;
pub mod tail;
pub mod tail_first;
pub mod text;
pub mod unit;
pub mod views;
pub mod watch;

pub use error::Error;
