//! The bridge's own counters, exposed at `GET /metrics` in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Most label sets one family keeps; further new sets are counted under `other` so a
/// producer-controlled label (an external emitter's agent name) cannot grow memory unbounded.
const MAX_SERIES: usize = 512;

/// A labelled family of monotonic counters. Lookups compare borrowed labels in place, so
/// counting on the hot path allocates only the first time a label set is seen.
#[derive(Debug, Default)]
pub struct CounterVec {
    values: Mutex<Vec<Series>>,
}

/// One label set and its count.
type Series = (Vec<(&'static str, String)>, u64);

fn same(a: &[(&'static str, String)], b: &[(&'static str, &str)]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|((ka, va), (kb, vb))| ka == kb && va == vb)
}

impl CounterVec {
    /// Adds `n` to the counter with these labels.
    pub fn add(&self, labels: &[(&'static str, &str)], n: u64) {
        let Ok(mut m) = self.values.lock() else { return };
        if let Some((_, v)) = m.iter_mut().find(|(k, _)| same(k, labels)) {
            *v += n;
            return;
        }
        let key: Vec<(&'static str, String)> = if m.len() < MAX_SERIES {
            labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
        } else {
            labels.iter().map(|(k, _)| (*k, "other".to_owned())).collect()
        };
        match m.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v += n,
            None => m.push((key, n)),
        }
    }

    /// Adds one.
    pub fn inc(&self, labels: &[(&'static str, &str)]) {
        self.add(labels, 1);
    }

    /// The current value for these labels (0 when never touched).
    pub fn get(&self, labels: &[(&'static str, &str)]) -> u64 {
        self.values.lock().map(|m| m.iter().find(|(k, _)| same(k, labels)).map_or(0, |(_, v)| *v)).unwrap_or(0)
    }

    fn render(&self, name: &str, help: &str, kind: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        if let Ok(mut m) = self.values.lock().map(|m| m.clone()) {
            m.sort();
            for (labels, v) in m.iter() {
                let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
                let _ = writeln!(out, "{name}{{{}}} {v}", l.join(","));
            }
        }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Every counter and gauge the bridge exports.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Events entering the pipeline, by `input` (hook, collector, otlp) and `agent`.
    pub events_in: CounterVec,
    /// Events handed to a sink, by `sink`.
    pub events_out: CounterVec,
    /// Events a sink queue dropped, by `sink` and `severity`.
    pub dropped: CounterVec,
    /// Requests refused, by `receiver` and `reason`.
    pub rejected: CounterVec,
    /// Relay reconnect attempts, by `agent`.
    pub reconnects: CounterVec,
    /// Sink write errors, by `sink`.
    pub sink_errors: CounterVec,
    /// Current depth of each sink queue, by `sink` (gauge).
    pub queue_depth: CounterGauges,
    /// Connected SSE and WebSocket subscribers (gauge).
    pub subscribers: AtomicI64,
    /// Events admitted to the embedded collector's replay buffers.
    pub collector_admitted: AtomicU64,
}

/// Named gauges set by their owners.
#[derive(Debug, Default)]
pub struct CounterGauges {
    values: Mutex<BTreeMap<String, i64>>,
}

impl CounterGauges {
    /// Sets the gauge `name`.
    pub fn set(&self, name: &str, v: i64) {
        if let Ok(mut m) = self.values.lock() {
            m.insert(name.to_owned(), v);
        }
    }
}

impl Metrics {
    /// Renders the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        self.events_in.render("aep_bridge_events_in_total", "Events that entered the pipeline.", "counter", &mut out);
        self.events_out.render("aep_bridge_events_out_total", "Events handed to a sink.", "counter", &mut out);
        self.dropped.render(
            "aep_bridge_events_dropped_total",
            "Events dropped under backpressure.",
            "counter",
            &mut out,
        );
        self.rejected.render(
            "aep_bridge_requests_rejected_total",
            "Requests refused with a 4xx/5xx.",
            "counter",
            &mut out,
        );
        self.reconnects.render("aep_bridge_relay_reconnects_total", "Relay reconnect attempts.", "counter", &mut out);
        self.sink_errors.render("aep_bridge_sink_errors_total", "Sink write errors.", "counter", &mut out);
        let _ = writeln!(
            out,
            "# HELP aep_bridge_queue_depth Events waiting in a sink queue.\n# TYPE aep_bridge_queue_depth gauge"
        );
        if let Ok(m) = self.queue_depth.values.lock() {
            for (k, v) in m.iter() {
                let _ = writeln!(out, "aep_bridge_queue_depth{{sink=\"{}\"}} {v}", escape(k));
            }
        }
        let _ = writeln!(
            out,
            "# HELP aep_bridge_subscribers Connected SSE and WebSocket subscribers.\n# TYPE aep_bridge_subscribers gauge\naep_bridge_subscribers {}",
            self.subscribers.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP aep_bridge_collector_admitted_total Events admitted to the replay buffers.\n# TYPE aep_bridge_collector_admitted_total counter\naep_bridge_collector_admitted_total {}",
            self.collector_admitted.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_labelled_counters() {
        let m = Metrics::default();
        m.events_in.inc(&[("input", "hook"), ("agent", "codex")]);
        m.events_in.add(&[("input", "hook"), ("agent", "codex")], 2);
        m.dropped.inc(&[("sink", "relay"), ("severity", "de\"bug")]);
        let text = m.render();
        assert!(text.contains("aep_bridge_events_in_total{input=\"hook\",agent=\"codex\"} 3"), "{text}");
        assert!(text.contains("severity=\"de\\\"bug\""), "{text}");
        assert_eq!(m.events_in.get(&[("input", "hook"), ("agent", "codex")]), 3);
    }
}
