//! GenAI metrics for dashboards, read off the event stream: the instruments of the
//! OpenTelemetry GenAI semantic conventions (and the bridge's own `aep.*`), with their
//! bucket boundaries, on the bridge's meter provider. Which points an event yields is the
//! pure measurer's ([`aep_projections::genai`]); hook latency is `aep.hook.duration`,
//! recorded by the hook receiver ([`HookTimer`]).
//!
//! The metrics are a pipeline tap ([`GenAiTap`]): each event is measured as it is stamped,
//! on the thread that stamped it, and recorded into the SDK's in-memory aggregation (no
//! I/O). Handing the events to a task of their own cost more than measuring them: a queue
//! operation and a wake per batch, a reference per event, and the event freed on that
//! task's thread, which the allocator charges several times a local free. The tap keeps
//! the SDK's series bound for the label sets it has seen (a bounded number per instrument,
//! [`BOUND_SERIES`]): the SDK then neither sorts nor hashes the attributes again for each
//! point.

use std::collections::HashMap;
use std::sync::Arc;

use aep_projections::genai::{Instrument, Measurer};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{BoundCounter, BoundHistogram, Counter, Histogram, Meter};

use crate::pipeline::{Stamped, Tap};

/// `gen_ai.client.token.usage` boundaries (semantic conventions).
pub const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];
/// Duration boundaries of the GenAI duration histograms, in seconds (semantic conventions).
pub const DURATION_BUCKETS: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/// Human answer times, in seconds: a second to an hour.
pub const WAIT_BUCKETS: [f64; 11] = [1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0];
/// Hook handling times, in seconds (a held permission prompt waits for its human).
pub const HOOK_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 120.0];

/// The GenAI instruments on the bridge's meter provider.
#[derive(Debug, Clone)]
pub struct GenAiMetrics {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
    invoke_agent: Histogram<f64>,
    execute_tool: Histogram<f64>,
    tool_calls: Counter<u64>,
    resolutions: Counter<u64>,
    wait: Histogram<f64>,
}

impl GenAiMetrics {
    /// Registers the instruments on `meter`.
    pub fn new(meter: &Meter) -> Self {
        let secs = |name: &'static str, help: &'static str, buckets: &[f64]| {
            meter.f64_histogram(name).with_unit("s").with_description(help).with_boundaries(buckets.to_vec()).build()
        };
        Self {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: secs(
                "gen_ai.client.operation.duration",
                "GenAI operation duration.",
                &DURATION_BUCKETS,
            ),
            invoke_agent: secs(
                "gen_ai.invoke_agent.duration",
                "Duration of an agent invocation (a run).",
                &DURATION_BUCKETS,
            ),
            execute_tool: secs("gen_ai.execute_tool.duration", "Duration of a tool execution.", &DURATION_BUCKETS),
            tool_calls: meter
                .u64_counter("aep.tool.calls")
                .with_unit("{call}")
                .with_description("Tool calls by outcome.")
                .build(),
            resolutions: meter
                .u64_counter("aep.attention.resolutions")
                .with_unit("{request}")
                .with_description("Attention requests resolved, by resolution.")
                .build(),
            wait: secs("aep.attention.wait", "Time a human took to answer an attention request.", &WAIT_BUCKETS),
        }
    }

    /// Records one point: `value` on `instrument` with the label set `attrs`.
    pub fn record(&self, instrument: Instrument, value: f64, attrs: &[KeyValue]) {
        match instrument {
            Instrument::TokenUsage => self.token_usage.record(value as u64, attrs),
            Instrument::OperationDuration => self.operation_duration.record(value, attrs),
            Instrument::InvokeAgentDuration => self.invoke_agent.record(value, attrs),
            Instrument::ExecuteToolDuration => self.execute_tool.record(value, attrs),
            Instrument::ToolCalls => self.tool_calls.add(value as u64, attrs),
            Instrument::AttentionResolutions => self.resolutions.add(value as u64, attrs),
            Instrument::AttentionWait => self.wait.record(value, attrs),
        }
    }
}

/// Maps looked up per recorded point: foldhash, seeded per process (the keys come from
/// untrusted event fields).
type Fast<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Label sets per instrument whose SDK series the tap keeps bound. Beyond this a point is
/// recorded the ordinary way (the SDK looks its label set up). Well under the SDK's
/// per-instrument series limit: a bound series is never evicted under delta temporality
/// while the tap holds it, so the bound ones can only take a share of that limit.
pub const BOUND_SERIES: usize = 128;

/// One instrument's handles bound to the label sets seen before, at most [`BOUND_SERIES`].
///
/// Looked up by the identity of the label strings (their address and length), not their
/// bytes: the measurer interns every label value, so a label set seen before arrives made
/// of the very strings stored here, and hashing a few addresses is much cheaper than
/// hashing the text. A stored label set holds its strings, so their addresses cannot be
/// reused while it is here; a lookup that finds a set with other addresses compares the
/// text before using its handle, and records unbound when the text differs too.
#[derive(Debug)]
struct BoundSet<H> {
    handles: Fast<u64, (Vec<KeyValue>, H)>,
    /// Seeded per process, like [`Fast`].
    ids: foldhash::fast::RandomState,
}

impl<H> Default for BoundSet<H> {
    fn default() -> Self {
        Self { handles: Fast::default(), ids: foldhash::fast::RandomState::default() }
    }
}

/// The address and length of a label string.
fn str_id(s: &str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

/// Whether `a` and `b` are made of the same strings (non-string values compared by value).
fn same_strings(a: &[KeyValue], b: &[KeyValue]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            str_id(x.key.as_str()) == str_id(y.key.as_str())
                && match (&x.value, &y.value) {
                    (opentelemetry::Value::String(u), opentelemetry::Value::String(v)) => {
                        str_id(u.as_str()) == str_id(v.as_str())
                    }
                    (u, v) => u == v,
                }
        })
}

impl<H> BoundSet<H> {
    /// A hash of the identity of `attrs`' strings (non-string values hashed by value).
    fn id(&self, attrs: &[KeyValue]) -> u64 {
        use std::hash::{BuildHasher as _, Hash as _, Hasher as _};
        let mut h = self.ids.build_hasher();
        for kv in attrs {
            str_id(kv.key.as_str()).hash(&mut h);
            match &kv.value {
                opentelemetry::Value::String(v) => str_id(v.as_str()).hash(&mut h),
                _ => kv.hash(&mut h),
            }
        }
        h.finish()
    }

    /// Calls `f` with the handle bound to `attrs`, binding it (`bind`) the first time while
    /// there is room; `false` when there is none (the caller records unbound).
    fn with(&mut self, attrs: &[KeyValue], bind: impl FnOnce(&[KeyValue]) -> H, f: impl FnOnce(&H)) -> bool {
        let id = self.id(attrs);
        if let Some((stored, h)) = self.handles.get(&id) {
            if same_strings(stored, attrs) || stored.as_slice() == attrs {
                f(h);
                return true;
            }
            return false;
        }
        if self.handles.len() >= BOUND_SERIES {
            return false;
        }
        let h = bind(attrs);
        f(&h);
        self.handles.insert(id, (attrs.to_vec(), h));
        true
    }
}

/// [`GenAiMetrics`] with their series bound per label set: what the tap records through
/// (the same series and values as [`GenAiMetrics::record`], without the SDK's attribute
/// lookup for a label set seen before).
#[derive(Debug)]
struct BoundRecorder {
    metrics: GenAiMetrics,
    token_usage: BoundSet<BoundHistogram<u64>>,
    operation_duration: BoundSet<BoundHistogram<f64>>,
    invoke_agent: BoundSet<BoundHistogram<f64>>,
    execute_tool: BoundSet<BoundHistogram<f64>>,
    tool_calls: BoundSet<BoundCounter<u64>>,
    resolutions: BoundSet<BoundCounter<u64>>,
    wait: BoundSet<BoundHistogram<f64>>,
}

impl BoundRecorder {
    fn new(metrics: GenAiMetrics) -> Self {
        Self {
            metrics,
            token_usage: BoundSet::default(),
            operation_duration: BoundSet::default(),
            invoke_agent: BoundSet::default(),
            execute_tool: BoundSet::default(),
            tool_calls: BoundSet::default(),
            resolutions: BoundSet::default(),
            wait: BoundSet::default(),
        }
    }

    /// Records one point through its bound series, or unbound when its instrument has no
    /// room for another.
    fn record(&mut self, instrument: Instrument, v: f64, a: &[KeyValue]) {
        let m = &self.metrics;
        let bound = match instrument {
            Instrument::TokenUsage => self.token_usage.with(a, |a| m.token_usage.bind(a), |h| h.record(v as u64)),
            Instrument::OperationDuration => {
                self.operation_duration.with(a, |a| m.operation_duration.bind(a), |h| h.record(v))
            }
            Instrument::InvokeAgentDuration => self.invoke_agent.with(a, |a| m.invoke_agent.bind(a), |h| h.record(v)),
            Instrument::ExecuteToolDuration => self.execute_tool.with(a, |a| m.execute_tool.bind(a), |h| h.record(v)),
            Instrument::ToolCalls => self.tool_calls.with(a, |a| m.tool_calls.bind(a), |h| h.add(v as u64)),
            Instrument::AttentionResolutions => {
                self.resolutions.with(a, |a| m.resolutions.bind(a), |h| h.add(v as u64))
            }
            Instrument::AttentionWait => self.wait.with(a, |a| m.wait.bind(a), |h| h.record(v)),
        };
        if !bound {
            m.record(instrument, v, a);
        }
    }
}

/// The GenAI metrics as a pipeline [`Tap`]: every event is measured as it is stamped and
/// its points recorded at once (see the module's notes for why not on a task of its own).
#[derive(Debug)]
pub struct GenAiTap {
    state: std::sync::Mutex<TapState>,
}

#[derive(Debug)]
struct TapState {
    measurer: Measurer,
    recorder: BoundRecorder,
}

impl GenAiTap {
    /// A tap recording into `metrics`.
    pub fn new(metrics: GenAiMetrics) -> Self {
        let state = TapState { measurer: Measurer::default(), recorder: BoundRecorder::new(metrics) };
        Self { state: std::sync::Mutex::new(state) }
    }
}

impl Tap for GenAiTap {
    fn admit(&self, ev: &Arc<Stamped>) -> u64 {
        // Under the pipeline's stamper, so uncontended; a poisoned lock (a panic while
        // recording) only stops the metrics.
        let Ok(mut st) = self.state.lock() else { return 0 };
        let TapState { measurer, recorder } = &mut *st;
        measurer.measure_with(&ev.event, &mut |instrument, value, attrs| recorder.record(instrument, value, attrs));
        0
    }

    fn sink(&self) -> &'static str {
        "genai_metrics"
    }
}

/// `aep.hook.duration`: how long the bridge took to answer a hook call (a held permission
/// prompt includes its human's answer), by vendor and whether it was answered or refused.
#[derive(Debug, Clone)]
pub struct HookTimer {
    hist: Histogram<f64>,
}

impl HookTimer {
    /// Registers the instrument on `meter`.
    pub fn new(meter: &Meter) -> Self {
        Self {
            hist: meter
                .f64_histogram("aep.hook.duration")
                .with_unit("s")
                .with_description("Time the bridge took to answer a hook call.")
                .with_boundaries(HOOK_BUCKETS.to_vec())
                .build(),
        }
    }

    /// Records one answered call.
    pub fn record(&self, vendor: &str, ok: bool, secs: f64) {
        let outcome = if ok { "answered" } else { "refused" };
        self.hist.record(
            secs,
            &[KeyValue::new(crate::metrics::AGENT, vendor.to_owned()), KeyValue::new("aep.outcome", outcome)],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_projections::genai::Point;
    use aep_schemas::Event;
    use serde_json::{Value, json};

    fn ev(ty: &str, id: &str, time: &str, cause: Option<&str>, data: Value) -> Event {
        Event {
            r#type: ty.into(),
            id: id.into(),
            time: time.into(),
            agent: "claude-code".into(),
            session: Some("s1".into()),
            cause: cause.map(Into::into),
            data: Some(data),
            ..Default::default()
        }
    }

    /// The tap records each event's points as it is admitted, into the metrics a scrape
    /// reads: tool calls counted per tool, a model call's tokens and duration; a stream
    /// chunk and an unmeasured type record nothing.
    #[test]
    fn the_tap_records_what_each_event_measures() {
        let out = crate::metrics::Metrics::new();
        let tap = GenAiTap::new(GenAiMetrics::new(&out.meter("aep-bridge")));
        let admit = |e: Event| assert_eq!(tap.admit(&Arc::new(Stamped::new(e))), 0, "a tap that drops nothing");
        for (i, tool) in ["Bash", "Read", "Bash", "Bash"].iter().enumerate() {
            let data = json!({"tool": {"name": tool}, "duration_ms": 10});
            admit(ev("tool.completed", &format!("c{i}"), "2026-12-01T10:00:03Z", None, data));
        }
        let data =
            json!({"model": "claude-opus-4-8", "input_tokens": "1200", "output_tokens": "25", "duration_ms": "113"});
        admit(ev("x.claude-code.otel.api_request", "m", "2026-12-01T10:00:04Z", None, data));
        admit(ev("x.codex.otel.sse_event", "k", "2026-12-01T10:00:04Z", None, json!({"event.kind": "delta"})));
        admit(ev("message.user", "u", "2026-12-01T10:00:04Z", None, json!({"text": "hi"})));
        let text = out.render();
        let line = |prefix: &str, has: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix) && l.contains(has))
                .and_then(|l| l.rsplit(' ').next())
                .unwrap_or_else(|| panic!("no {prefix} with {has} in\n{text}"))
                .to_owned()
        };
        assert_eq!(line("aep_tool_calls_total{", "gen_ai_tool_name=\"Bash\""), "3");
        assert_eq!(line("aep_tool_calls_total{", "gen_ai_tool_name=\"Read\""), "1");
        assert_eq!(line("gen_ai_execute_tool_duration_seconds_count{", "Bash"), "3");
        assert_eq!(line("gen_ai_client_token_usage_sum{", "gen_ai_token_type=\"input\""), "1200");
        assert_eq!(line("gen_ai_client_operation_duration_seconds_count{", "claude-opus-4-8"), "1");
        assert!(!text.contains("delta") && !text.contains("message"), "nothing from the chunk or the message");
    }

    #[test]
    fn bound_series_export_what_unbound_recording_does() {
        let mut m = Measurer::default();
        let mut points = Vec::new();
        m.measure_into(
            &ev("session.started", "s", "2026-12-01T10:00:00Z", None, json!({"gen_ai.request.model": "opus"})),
            &mut points,
        );
        for (i, model) in ["claude-opus-4-8", "claude-haiku-4-5", "claude-opus-4-8"].iter().enumerate() {
            let data = json!({"model": model, "input_tokens": 100 + i, "output_tokens": 7, "duration_ms": 90 + i});
            m.measure_into(&ev("x.claude-code.otel.api_request", "c", "2026-12-01T10:00:01Z", None, data), &mut points);
        }
        // More tools than an instrument binds: the last ones are recorded unbound.
        for i in 0..BOUND_SERIES + 5 {
            for t in ["tool.completed", "tool.failed"] {
                let data = json!({"tool": {"name": format!("t{}", i % (BOUND_SERIES + 5))}, "duration_ms": i});
                m.measure_into(&ev(t, "d", "2026-12-01T10:00:02Z", None, data), &mut points);
            }
        }
        let data = json!({"duration_ms": 9000, "gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 30});
        m.measure_into(&ev("run.finished", "r", "2026-12-01T10:00:09Z", None, data), &mut points);
        let data = json!({"resolution": "answered", "latency_ms": 4200});
        m.measure_into(&ev("attention.resolved", "a", "2026-12-01T10:00:09Z", None, data), &mut points);
        // Twice over: the second pass records every label set through an existing handle.
        let (plain_out, bound_out) = (crate::metrics::Metrics::new(), crate::metrics::Metrics::new());
        let plain = GenAiMetrics::new(&plain_out.meter("aep-bridge"));
        let mut bound = BoundRecorder::new(GenAiMetrics::new(&bound_out.meter("aep-bridge")));
        for p in points.iter().chain(&points) {
            plain.record(p.instrument, p.value, &p.attrs);
            bound.record(p.instrument, p.value, &p.attrs);
        }
        assert_eq!(bound.execute_tool.handles.len(), BOUND_SERIES);
        assert_eq!(bound.token_usage.handles.len(), 6, "2 models + the run, by token type");
        // Label text not interned (fresh strings each time): still the same series.
        for i in 0..3 {
            let p = Point {
                instrument: Instrument::AttentionResolutions,
                value: 1.0,
                attrs: vec![KeyValue::new(crate::metrics::AGENT, format!("agent-{}", i % 2))],
            };
            plain.record(p.instrument, p.value, &p.attrs);
            bound.record(p.instrument, p.value, &p.attrs);
        }
        // The SDK lists a family's series in no fixed order.
        let lines = |t: String| {
            let mut l: Vec<String> = t.lines().map(str::to_owned).collect();
            l.sort();
            l
        };
        let (want, got) = (lines(plain_out.render()), lines(bound_out.render()));
        assert!(want.iter().any(|l| l.starts_with("gen_ai_client_operation_duration_seconds_count{")));
        assert!(want.iter().any(|l| l.starts_with("aep_attention_wait_seconds_sum{")));
        assert_eq!(want, got);
    }
}
