//! Metrics for Prometheus: one [`Metrics`] of prometheus-client families behind an
//! `Arc`, and the loopback HTTP listener that serves it ([`serve`]).
//!
//! The state lives here alone. The core, the sink task and the `status` keeper only
//! `inc`, `set` or `observe` (atomics; the histogram's uncontended lock); the text is
//! made at scrape time on the runtime thread.
//!
//! | series | type | labels | from |
//! |---|---|---|---|
//! | `baton_turns_total` | counter | `agent`, `outcome` | hand-back events of main conversations (sink task) |
//! | `baton_sessions` | gauge | `agent`, `state` | the `status` keeper's table, main conversations |
//! | `baton_anomalies_total` | counter | `reason` | `anomaly` events (sink task) |
//! | `baton_deliveries_total` | counter | `sink` | the delivery sinks' stats, read at each scrape |
//! | `baton_delivery_failures_total` | counter | `sink` | the same |
//! | `baton_append_to_event_seconds` | histogram | | the core: its read of the bytes to the event's flush |
//! | `baton_files_tracked` | gauge | | the core's file table |
//! | `baton_remotes_connected` | gauge | | [`Metrics::set_remotes_connected`] |

pub mod serve;

use crate::model::{Event, EventKind, SessionState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TurnLabels {
    agent: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    agent: &'static str,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabels {
    sink: &'static str,
}

/// Every series baton serves; see the module docs.
pub struct Metrics {
    registry: Registry,
    turns: Family<TurnLabels, Counter>,
    sessions: Family<SessionLabels, Gauge>,
    anomalies: Family<ReasonLabels, Counter>,
    deliveries: Family<SinkLabels, Counter>,
    delivery_failures: Family<SinkLabels, Counter>,
    latency: Histogram,
    files_tracked: Gauge,
    remotes_connected: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("baton");
        let turns = Family::<TurnLabels, Counter>::default();
        let sessions = Family::<SessionLabels, Gauge>::default();
        let anomalies = Family::<ReasonLabels, Counter>::default();
        let deliveries = Family::<SinkLabels, Counter>::default();
        let delivery_failures = Family::<SinkLabels, Counter>::default();
        // 1 ms (the core's clock ticks in ms) to about 33 s.
        let latency = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let files_tracked = Gauge::default();
        let remotes_connected = Gauge::default();
        registry.register(
            "turns",
            "Turns handed back, by agent and outcome (main conversations)",
            turns.clone(),
        );
        registry.register(
            "sessions",
            "Main conversations by agent and state, as `baton status` shows them",
            sessions.clone(),
        );
        registry.register(
            "anomalies",
            "Anomalies (bad input, caps, state trouble) by reason",
            anomalies.clone(),
        );
        registry.register(
            "deliveries",
            "Pages delivered, by delivery sink (desktop, exec, webhook)",
            deliveries.clone(),
        );
        registry.register(
            "delivery_failures",
            "Pages not delivered (failed, timed out, dropped from a full queue), by sink",
            delivery_failures.clone(),
        );
        registry.register(
            "append_to_event_seconds",
            "From the core's read of appended bytes to the event they made leaving the core",
            latency.clone(),
        );
        registry.register(
            "files_tracked",
            "Transcript files the daemon follows",
            files_tracked.clone(),
        );
        registry.register(
            "remotes_connected",
            "Remote machines whose event stream is connected",
            remotes_connected.clone(),
        );
        Metrics {
            registry,
            turns,
            sessions,
            anomalies,
            deliveries,
            delivery_failures,
            latency,
            files_tracked,
            remotes_connected,
        }
    }

    /// Counts what one event means: a turn handed back, or an anomaly.
    pub fn count_event(&self, ev: &Event) {
        let outcome = match ev.event {
            EventKind::TurnCompleted => "completed",
            EventKind::TurnFailed => "failed",
            EventKind::TurnInterrupted => "interrupted",
            EventKind::NeedsInput => "needs_input",
            EventKind::Anomaly => {
                let reason = ev.reason.clone().unwrap_or_default();
                self.anomalies.get_or_create(&ReasonLabels { reason }).inc();
                return;
            }
            _ => return,
        };
        if ev.agent.is_some() {
            return;
        }
        let agent = ev.provider.map_or("unknown", |p| p.as_str());
        self.turns
            .get_or_create(&TurnLabels { agent, outcome })
            .inc();
    }

    /// One main conversation entered (`+1`) or left (`-1`) a state.
    pub fn session(&self, agent: &'static str, state: SessionState, delta: i64) {
        let labels = SessionLabels {
            agent,
            state: state.as_str(),
        };
        self.sessions.get_or_create(&labels).inc_by(delta);
    }

    /// A delivery sink's totals so far (its stats count on its own threads).
    pub fn set_deliveries(&self, sink: &'static str, delivered: u64, failed: u64) {
        let raise = |c: &Counter, to: u64| {
            let now = c.get();
            if to > now {
                c.inc_by(to - now);
            }
        };
        let labels = SinkLabels { sink };
        raise(&self.deliveries.get_or_create(&labels), delivered);
        raise(&self.delivery_failures.get_or_create(&labels), failed);
    }

    /// One event made from appended bytes left the core `ms` after they were read.
    pub fn observe_latency_ms(&self, ms: u64) {
        #[allow(clippy::cast_precision_loss)]
        self.latency.observe(ms as f64 / 1000.0);
    }

    pub fn set_files_tracked(&self, n: usize) {
        self.files_tracked.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// For the remotes' task: how many remote streams are connected now.
    pub fn set_remotes_connected(&self, n: usize) {
        self.remotes_connected
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The whole registry in the text format Prometheus scrapes (OpenMetrics 1.0).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_follow_the_sinks_totals_and_never_go_down() {
        let m = Metrics::new();
        m.set_deliveries("exec", 2, 1);
        m.set_deliveries("exec", 3, 0);
        let text = m.encode();
        assert!(
            text.contains("baton_deliveries_total{sink=\"exec\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("baton_delivery_failures_total{sink=\"exec\"} 1"),
            "{text}"
        );
    }
}
