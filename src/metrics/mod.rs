//! Metrics for Prometheus: one [`Metrics`] of prometheus-client families behind an
//! `Arc`, and the loopback HTTP listener that serves it ([`serve`]).
//!
//! The turns, sessions, anomalies and latency live here: the core's fanout, the `status`
//! keeper and the core only `inc` or `observe` them (atomics; the histogram's
//! uncontended lock). The delivery counts and the two gauges are not fed in: they live
//! in `diag`, and each scrape reads them from the daemon's [`Readout`] before the text
//! is made, on the runtime thread.
//!
//! | series | type | labels | from |
//! |---|---|---|---|
//! | `baton_turns_total` | counter | `agent`, `outcome` | hand-back events of main conversations (the core's fanout) |
//! | `baton_sessions` | gauge | `agent`, `state` | the `status` keeper's table, main conversations |
//! | `baton_anomalies_total` | counter | `reason` | `anomaly` events (the core's fanout) |
//! | `baton_deliveries_total` | counter | `sink` | the delivery sinks' `diag` counters, read at each scrape |
//! | `baton_delivery_failures_total` | counter | `sink` | the same |
//! | `baton_append_to_event_seconds` | histogram | | the core: its read of the bytes to the event's flush |
//! | `baton_files_tracked` | gauge | | [`Readout::files_tracked`], set by the core |
//! | `baton_remotes_connected` | gauge | | [`Readout::remotes_connected`], set by the remotes' links |

pub mod serve;

use crate::diag::Readout;
use crate::model::{Event, EventKind, SessionState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex, PoisonError};

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
    /// What a scrape reads; the lock keeps two scrapes from raising a counter twice.
    diag: Mutex<Arc<Readout>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(Arc::default())
    }
}

impl Metrics {
    /// The families, reading the delivery counts and the gauges from `diag`.
    pub fn new(diag: Arc<Readout>) -> Self {
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
            diag: Mutex::new(diag),
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

    /// One event made from appended bytes left the core `ms` after they were read.
    pub fn observe_latency_ms(&self, ms: u64) {
        #[allow(clippy::cast_precision_loss)]
        self.latency.observe(ms as f64 / 1000.0);
    }

    /// The whole registry in the text format Prometheus scrapes (OpenMetrics 1.0), with
    /// what `diag` holds now.
    pub fn encode(&self) -> String {
        let diag = self.diag.lock().unwrap_or_else(PoisonError::into_inner);
        // `diag`'s counters only go up; a family's counter is raised to meet them.
        let raise = |c: &Counter, to: u64| c.inc_by(to.saturating_sub(c.get()));
        for (sink, delivered, failed) in diag.deliveries() {
            let labels = SinkLabels { sink };
            raise(&self.deliveries.get_or_create(&labels), delivered);
            raise(&self.delivery_failures.get_or_create(&labels), failed);
        }
        let level = |g: &Gauge, n: u64| g.set(i64::try_from(n).unwrap_or(i64::MAX));
        level(&self.files_tracked, diag.files_tracked.get());
        level(&self.remotes_connected, diag.remotes_connected.get());
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{self, ExecCounters, WebhookCounters};

    fn has(text: &str, sample: &str) {
        assert!(text.contains(sample), "no `{sample}` in:\n{text}");
    }

    #[test]
    fn deliveries_follow_the_sinks_counters_at_each_scrape() {
        let readout = Arc::new(Readout::default());
        let exec = Arc::new(ExecCounters::default());
        readout.add_sink("exec", exec.clone());
        let m = Metrics::new(Arc::clone(&readout));
        let text = m.encode();
        has(&text, "baton_deliveries_total{sink=\"exec\"} 0");
        diag::ExecSucceeded.emit(&exec);
        diag::ExecSucceeded.emit(&exec);
        diag::ExecDropped.emit(&exec);
        let text = m.encode();
        has(&text, "baton_deliveries_total{sink=\"exec\"} 2");
        has(&text, "baton_delivery_failures_total{sink=\"exec\"} 1");
        diag::ExecSucceeded.emit(&exec);
        readout.files_tracked.set(7);
        let text = m.encode();
        has(&text, "baton_deliveries_total{sink=\"exec\"} 3");
        has(&text, "baton_delivery_failures_total{sink=\"exec\"} 1");
        has(&text, "baton_files_tracked 7");
        has(&text, "baton_remotes_connected 0");
    }

    /// Two `[[webhook]]` sections are one `sink="webhook"` series: their counts add up.
    #[test]
    fn sinks_of_one_kind_add_up() {
        let readout = Arc::new(Readout::default());
        let (a, b) = (
            Arc::new(WebhookCounters::default()),
            Arc::new(WebhookCounters::default()),
        );
        readout.add_sink("webhook", a.clone());
        readout.add_sink("webhook", b.clone());
        let m = Metrics::new(readout);
        let delivered = |c: &WebhookCounters| {
            diag::WebhookDelivered {
                endpoint: "h",
                recovered: false,
            }
            .emit(c)
        };
        delivered(&a);
        delivered(&b);
        delivered(&b);
        let text = m.encode();
        has(&text, "baton_deliveries_total{sink=\"webhook\"} 3");
    }
}
