//! How each remote's link stands, for `status`.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

#[derive(Debug, Clone)]
pub enum Link {
    Connected,
    /// The child ended; the next try is at `at`.
    Retrying {
        at: Instant,
        why: String,
    },
}

/// Every remote's link, by name; and, once the daemon gives it one, the gauge of those
/// connected.
#[derive(Debug, Default)]
pub struct Links(
    Mutex<BTreeMap<String, Link>>,
    std::sync::OnceLock<std::sync::Arc<crate::diag::Readout>>,
);

impl Links {
    pub fn set(&self, name: &str, link: Link) {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        g.insert(name.to_owned(), link);
        if let Some(d) = self.1.get() {
            let connected = g.values().filter(|l| matches!(l, Link::Connected)).count();
            d.remotes_connected.set(connected);
        }
    }

    /// Keeps `readout`'s `remotes_connected` (`baton_remotes_connected`) up to date from
    /// now on.
    pub fn count_into(&self, readout: std::sync::Arc<crate::diag::Readout>) {
        let _ = self.1.set(readout);
    }

    /// One JSON object per remote, as of `now`.
    pub fn rows(&self, now: Instant) -> Vec<serde_json::Value> {
        let g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        g.iter()
            .map(|(name, l)| match l {
                Link::Connected => serde_json::json!({"name": name, "state": "connected"}),
                Link::Retrying { at, why } => serde_json::json!({
                    "name": name,
                    "state": "retrying",
                    "retry_in_s": at.saturating_duration_since(now).as_secs_f64().ceil() as u64,
                    "why": why,
                }),
            })
            .collect()
    }
}
