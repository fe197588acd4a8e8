//! The bridge's own metrics: OpenTelemetry instruments on an SDK `MeterProvider` (one per
//! bridge, not the global one, its resource `service.name = aep-bridge` with the bridge's
//! `service.version`), read at `GET /metrics` in the Prometheus text format through
//! `opentelemetry-prometheus`, and pushed over OTLP when `[export.otlp]` says so.
//!
//! One naming scheme, the OTel semantic conventions' (dotted names, a namespace per subject,
//! the unit on the instrument, counts annotated like `{event}`): `gen_ai.*` where the GenAI
//! conventions name the measurement (token usage, operation durations), `aep.*` for what
//! the agents did (`aep.tool.calls`, `aep.attention.*`, `aep.hook.duration`), and
//! `aep.bridge.*` for the bridge's own work (events in, out and dropped, refused requests,
//! sink errors, disabled exporters, queue depth). OTLP carries those names; Prometheus
//! renders them with its translation (dots to underscores, the unit as suffix, `_total` on
//! counters), so `/metrics` keeps `aep_bridge_events_in_total`, `aep_tool_calls_total` and
//! `gen_ai_client_operation_duration_seconds` as dashboards query them.
//!
//! The SDK bounds each instrument's label sets (its cardinality limit: further sets fold
//! into one `otel_metric_overflow` series), so a producer-controlled label (an external
//! emitter's agent name) cannot grow memory without bound. Recording is lock-free for a
//! label set seen before (a read lock and an atomic add inside the SDK).

pub mod drift;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Meter, MeterProvider as _, ObservableCounter, ObservableGauge};
use opentelemetry_sdk::metrics::{MeterProviderBuilder, SdkMeterProvider};
use prometheus::{Encoder as _, TextEncoder};

/// Installs one more reader on the provider being built.
type AddReader = Box<dyn FnOnce(MeterProviderBuilder) -> MeterProviderBuilder>;

/// The label naming the agent on every series that has one (the GenAI conventions' name,
/// `gen_ai_agent_name` in Prometheus), so one dashboard variable filters them all.
pub const AGENT: &str = "gen_ai.agent.name";

/// Most label sets one instrument keeps before folding new ones into the overflow series.
const MAX_SERIES: usize = 512;

/// A labelled family of monotonic counters.
#[derive(Debug, Clone)]
pub struct CounterVec {
    counter: Counter<u64>,
    /// The Prometheus exposition name, for [`CounterVec::get`].
    exposed: String,
    registry: prometheus::Registry,
}

fn attributes(labels: &[(&'static str, &str)]) -> Vec<KeyValue> {
    labels.iter().map(|(k, v)| KeyValue::new(*k, (*v).to_owned())).collect()
}

impl CounterVec {
    /// Adds `n` to the counter with these labels.
    pub fn add(&self, labels: &[(&'static str, &str)], n: u64) {
        self.counter.add(n, &attributes(labels));
    }

    /// Adds one.
    pub fn inc(&self, labels: &[(&'static str, &str)]) {
        self.add(labels, 1);
    }

    /// The current value for exactly these labels (0 when never touched), read back from
    /// the exposition (for tests and the load tools; not a hot path).
    pub fn get(&self, labels: &[(&'static str, &str)]) -> u64 {
        series_value(&self.registry, &self.exposed, labels).map_or(0, |v| v as u64)
    }
}

/// Gauges keyed by one `sink` label, set by their owners.
#[derive(Debug, Clone)]
pub struct SinkGauges {
    gauge: Gauge<i64>,
}

impl SinkGauges {
    /// Sets the gauge of sink `name`.
    pub fn set(&self, name: &str, v: i64) {
        self.gauge.record(v, &[KeyValue::new("sink", name.to_owned())]);
    }
}

/// Every instrument the bridge exports.
#[derive(Debug)]
pub struct Metrics {
    provider: SdkMeterProvider,
    registry: prometheus::Registry,
    /// Events entering the pipeline, by `input` (hook, collector, otlp) and [`AGENT`].
    pub events_in: CounterVec,
    /// Events handed to a sink, by `sink`.
    pub events_out: CounterVec,
    /// Events a sink lost, by `sink` and `severity`: its queue was full, its batch was given
    /// up after the retries or refused, or its exporter is off because the peer refused the
    /// signal.
    pub dropped: CounterVec,
    /// Requests refused, by `receiver` and `reason`.
    pub rejected: CounterVec,
    /// Relay reconnect attempts, by [`AGENT`].
    pub reconnects: CounterVec,
    /// Sink write errors, by `sink`.
    pub sink_errors: CounterVec,
    /// Collector subscribers cut for falling behind on notice+ events, by the `bound` they
    /// overran (`events` or `bytes`): each is a consumer that had to reconnect and resume.
    pub subscribers_cut: CounterVec,
    /// OTLP exporters turned off because their peer refused the signal (gRPC
    /// `UNIMPLEMENTED`, HTTP 404/405), by `sink` and `signal`: at most one each per process.
    pub export_disabled: CounterVec,
    /// What agents sent that their adapters do not know, by `vendor`, `version` and `kind`
    /// (`hook_event`, `hook_field`, `otel_event`): see [`crate::metrics::drift`].
    pub drift: crate::metrics::drift::DriftCounter,
    /// Events a durable exporter can no longer send, by `sink` and `reason`: `rotated`, the
    /// JSONL rotation deleted a log generation before the exporter read it.
    pub export_lost: CounterVec,
    /// Lines of the JSONL logs a durable exporter skipped because they are no event (a line
    /// torn by a crash), by `sink`.
    pub export_unreadable: CounterVec,
    /// Times a durable exporter's peer stayed away past the retry budget, by `sink`: it holds
    /// its batch, retries, and reads on once the peer is back (nothing is dropped).
    pub export_stalled: CounterVec,
    /// Values the capture ceiling removed (`action="withheld"`) or redacted
    /// (`action="redacted"`) from the agents' own telemetry before it left, by `sink`.
    pub capture_gated: CounterVec,
    /// Current depth of each sink queue, by `sink`.
    pub queue_depth: SinkGauges,
    /// Connected SSE and WebSocket subscribers (observed at collection).
    pub subscribers: Arc<AtomicI64>,
    /// Events admitted to the embedded collector's replay buffers (observed at collection).
    pub collector_admitted: Arc<AtomicU64>,
    _observed: (ObservableGauge<i64>, ObservableCounter<u64>),
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of instruments on a meter provider of its own.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// [`Metrics::new`], with `reader` collecting too (the OTLP metrics exporter's
    /// `PeriodicReader`, beside the Prometheus reader of `/metrics`).
    pub fn with_reader(reader: impl opentelemetry_sdk::metrics::reader::MetricReader) -> Self {
        Self::build(Some(Box::new(move |b: MeterProviderBuilder| b.with_reader(reader))))
    }

    /// Flushes and stops the readers (the last OTLP collection is exported). Blocking:
    /// call it off the async workers.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "Meter provider shutdown.");
        }
    }

    fn build(extra: Option<AddReader>) -> Self {
        let registry = prometheus::Registry::new();
        let reader = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .scope_info_enabled(false)
            .without_target_info()
            .build();
        // Without a resource of its own the SDK reports `unknown_service:aep-bridge`.
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("aep-bridge")
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let mut builder = SdkMeterProvider::builder().with_resource(resource).with_view(
            |_: &opentelemetry_sdk::metrics::Instrument| {
                opentelemetry_sdk::metrics::Stream::builder().with_cardinality_limit(MAX_SERIES).build().ok()
            },
        );
        match reader {
            Ok(r) => builder = builder.with_reader(r),
            // Only a name clash in a fresh registry fails here; metrics then read as empty.
            Err(e) => tracing::error!(error = %e, "Cannot set up the metrics exporter."),
        }
        if let Some(add) = extra {
            builder = add(builder);
        }
        let provider = builder.build();
        let meter = provider.meter("aep-bridge");
        let counter = |name: &'static str, unit: &'static str, help: &'static str| CounterVec {
            counter: meter.u64_counter(name).with_unit(unit).with_description(help).build(),
            exposed: prometheus_counter_name(name),
            registry: registry.clone(),
        };
        let subscribers = Arc::new(AtomicI64::new(0));
        let collector_admitted = Arc::new(AtomicU64::new(0));
        let observed = (observe_gauge(&meter, &subscribers), observe_counter(&meter, &collector_admitted));
        Self {
            events_in: counter("aep.bridge.events.in", "{event}", "Events that entered the pipeline."),
            events_out: counter("aep.bridge.events.out", "{event}", "Events handed to a sink."),
            dropped: counter(
                "aep.bridge.events.dropped",
                "{event}",
                "Events a sink lost: its queue full, its batch given up or refused, or its signal refused by the peer.",
            ),
            rejected: counter("aep.bridge.requests.rejected", "{request}", "Requests refused with a 4xx/5xx."),
            reconnects: counter("aep.bridge.relay.reconnects", "{reconnect}", "Relay reconnect attempts."),
            sink_errors: counter("aep.bridge.sink.errors", "{error}", "Sink write errors."),
            export_disabled: counter(
                "aep.bridge.export.disabled",
                "{signal}",
                "OTLP exporters turned off because the peer refused their signal.",
            ),
            export_lost: counter(
                "aep.bridge.export.lost",
                "{event}",
                "Events a durable exporter can no longer send: rotated out of the JSONL log unread.",
            ),
            export_unreadable: counter(
                "aep.bridge.export.unreadable",
                "{line}",
                "JSONL log lines a durable exporter skipped because they are no event.",
            ),
            export_stalled: counter(
                "aep.bridge.export.stalled",
                "{stall}",
                "Times a durable exporter's peer stayed away past the retry budget (it holds and retries).",
            ),
            subscribers_cut: counter(
                "aep.bridge.subscribers.cut",
                "{subscriber}",
                "Collector subscribers cut for falling behind on notice+ events.",
            ),
            drift: crate::metrics::drift::DriftCounter::new(counter(
                "aep.bridge.drift",
                "{name}",
                "Hook events, hook fields and OTel event names an agent sent that its adapter does not know.",
            )),
            capture_gated: counter(
                "aep.bridge.capture.gated",
                "{value}",
                "Values of the agents' own telemetry withheld or redacted by the capture ceiling before it left.",
            ),
            queue_depth: SinkGauges {
                gauge: meter
                    .i64_gauge("aep.bridge.queue.depth")
                    .with_unit("{event}")
                    .with_description("Events waiting in a sink queue.")
                    .build(),
            },
            subscribers,
            collector_admitted,
            _observed: observed,
            provider,
            registry,
        }
    }

    /// The provider's meter, for instruments of other components.
    pub fn meter(&self, name: &'static str) -> Meter {
        self.provider.meter(name)
    }

    /// Renders the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = Vec::with_capacity(4096);
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "Cannot render the metrics.");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

fn observe_gauge(meter: &Meter, v: &Arc<AtomicI64>) -> ObservableGauge<i64> {
    let v = v.clone();
    meter
        .i64_observable_gauge("aep.bridge.subscribers")
        .with_unit("{subscriber}")
        .with_description("Connected SSE and WebSocket subscribers.")
        .with_callback(move |o| o.observe(v.load(Ordering::Relaxed), &[]))
        .build()
}

fn observe_counter(meter: &Meter, v: &Arc<AtomicU64>) -> ObservableCounter<u64> {
    let v = v.clone();
    meter
        .u64_observable_counter("aep.bridge.collector.admitted")
        .with_unit("{event}")
        .with_description("Events admitted to the replay buffers.")
        .with_callback(move |o| o.observe(v.load(Ordering::Relaxed), &[]))
        .build()
}

/// How the Prometheus exporter renders a counter whose unit is an annotation (`{event}`):
/// dots become underscores and `_total` is appended (`aep.bridge.events.in` ->
/// `aep_bridge_events_in_total`).
fn prometheus_counter_name(name: &str) -> String {
    format!("{}_total", name.replace('.', "_"))
}

/// The value of the series `name` whose labels are exactly `labels`.
fn series_value(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let families = registry.gather();
    let family = families.iter().find(|f| f.name() == name)?;
    let counter = family.get_field_type() == prometheus::proto::MetricType::COUNTER;
    // Prometheus renders a dotted attribute key with underscores.
    let labels: Vec<(String, &str)> = labels.iter().map(|(k, v)| (k.replace('.', "_"), *v)).collect();
    family.get_metric().iter().find_map(|m| {
        let got = m.get_label();
        let same = got.len() == labels.len()
            && labels.iter().all(|(k, v)| got.iter().any(|l| l.name() == k && l.value() == *v));
        same.then(|| if counter { m.get_counter().get_value() } else { m.get_gauge().get_value() })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_labelled_counters_and_gauges() {
        let m = Metrics::default();
        m.events_in.inc(&[("input", "hook"), (AGENT, "codex")]);
        m.events_in.add(&[("input", "hook"), (AGENT, "codex")], 2);
        m.dropped.inc(&[("sink", "relay"), ("severity", "de\"bug")]);
        m.queue_depth.set("jsonl", 7);
        m.subscribers.fetch_add(2, Ordering::Relaxed);
        let text = m.render();
        assert!(text.contains("aep_bridge_events_in_total{gen_ai_agent_name=\"codex\",input=\"hook\"} 3"), "{text}");
        assert!(text.contains("severity=\"de\\\"bug\""), "{text}");
        assert!(text.contains("aep_bridge_queue_depth{sink=\"jsonl\"} 7"), "{text}");
        assert!(text.contains("aep_bridge_subscribers 2"), "{text}");
        assert_eq!(m.events_in.get(&[("input", "hook"), (AGENT, "codex")]), 3);
        assert_eq!(m.events_in.get(&[("input", "hook")]), 0, "labels must match exactly");
    }

    /// The OTel names render as the Prometheus names dashboards query (unchanged since the
    /// instruments were named in Prometheus style).
    #[test]
    fn otel_names_render_as_the_stable_prometheus_names() {
        let m = Metrics::default();
        for c in
            [&m.events_in, &m.events_out, &m.dropped, &m.rejected, &m.reconnects, &m.sink_errors, &m.export_disabled]
        {
            c.inc(&[("sink", "x")]);
        }
        m.queue_depth.set("x", 1);
        m.collector_admitted.fetch_add(1, Ordering::Relaxed);
        let text = m.render();
        let families: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        let want = [
            "aep_bridge_collector_admitted_total counter",
            "aep_bridge_events_dropped_total counter",
            "aep_bridge_events_in_total counter",
            "aep_bridge_events_out_total counter",
            "aep_bridge_export_disabled_total counter",
            "aep_bridge_queue_depth gauge",
            "aep_bridge_relay_reconnects_total counter",
            "aep_bridge_requests_rejected_total counter",
            "aep_bridge_sink_errors_total counter",
            "aep_bridge_subscribers gauge",
        ];
        let mut got = families.clone();
        got.sort_unstable();
        assert_eq!(got, want, "{text}");
        assert_eq!(m.export_disabled.get(&[("sink", "x")]), 1);
    }

    #[test]
    fn a_producer_controlled_label_cannot_grow_without_bound() {
        let m = Metrics::default();
        for i in 0..(MAX_SERIES * 2) {
            m.events_in.inc(&[("input", "collector"), (AGENT, &format!("a{i}"))]);
        }
        let series = m.render().lines().filter(|l| l.starts_with("aep_bridge_events_in_total{")).count();
        assert!(series <= MAX_SERIES + 1, "{series} series");
    }
}
