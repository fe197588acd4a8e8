//! GenAI measurements read off the event stream: which points each AEP event yields on
//! the OpenTelemetry GenAI semantic conventions' instruments and the bridge's own.
//!
//! - `gen_ai.client.token.usage` (`{token}`, by `gen_ai.token.type`): from the vendors' own
//!   model-call records (`gen_ai.operation.name = chat`, [`aep_adapters::otel::usage`]) and
//!   from `usage` on runs and tools (AEP-0002 §5.2, `invoke_agent` / `execute_tool`);
//! - `gen_ai.client.operation.duration` (s): the vendors' model calls;
//! - `gen_ai.invoke_agent.duration` (s): runs (`run.finished`, `run.failed`, `run.cancelled`);
//! - `gen_ai.execute_tool.duration` (s): tools (`tool.completed`, `tool.failed`);
//! - `aep.tool.calls` (by outcome), `aep.attention.resolutions` and `aep.attention.wait`
//!   (the human's answer time, AEP-0002 `attention.resolved.latency_ms`).
//!
//! Ids (session, run, call) never become attributes: a label set is a model, an agent, a
//! tool, an outcome. A duration the event does not carry is taken from its cause's time
//! (`tool.requested` -> `tool.completed`), remembered for a bounded number of open calls.
//! No clock: durations come from the events' own times. Label values are interned, so a
//! consumer recording through bound series (the daemon's metrics tap) can look a label set
//! up by the identity of its strings.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use aep_adapters::otel::usage::{count, member, number};
use aep_adapters::vendors::model_call;
use aep_schemas::Event;
use opentelemetry::{KeyValue, StringValue};
use serde_json::{Map, Value};

/// Open calls remembered for durations their completion does not carry.
pub const MAX_OPEN: usize = 16_384;

/// Which instrument a [`Point`] goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instrument {
    /// `gen_ai.client.token.usage`.
    TokenUsage,
    /// `gen_ai.client.operation.duration`.
    OperationDuration,
    /// `gen_ai.invoke_agent.duration`.
    InvokeAgentDuration,
    /// `gen_ai.execute_tool.duration`.
    ExecuteToolDuration,
    /// `aep.tool.calls`.
    ToolCalls,
    /// `aep.attention.resolutions`.
    AttentionResolutions,
    /// `aep.attention.wait`.
    AttentionWait,
}

/// One measurement, collected ([`Measurer::measure_into`]): an instrument, a value
/// (seconds for durations) and its attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The instrument.
    pub instrument: Instrument,
    /// The value.
    pub value: f64,
    /// Attributes, in a fixed order per instrument (names and values interned: recording
    /// a point allocates nothing for a label value seen before).
    pub attrs: Vec<KeyValue>,
}

/// Maps looked up once or twice per measured event: foldhash, seeded per process (the keys
/// are untrusted event fields).
type Fast<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The measurer's memory: the start times of open calls and the model of each session.
#[derive(Debug, Default)]
pub struct Measurer {
    started: Fast<String, i128>,
    order: VecDeque<String>,
    /// (agent, session) -> the session's model, interned.
    models: Fast<(String, String), StringValue>,
    /// Label values seen (agents, tools, models, error types), shared by every point.
    names: Fast<String, StringValue>,
}

fn obj(ev: &Event) -> Option<&Map<String, Value>> {
    ev.data.as_ref().and_then(Value::as_object)
}

fn str_at<'a>(d: Option<&'a Map<String, Value>>, path: &[&str]) -> Option<&'a str> {
    let (last, parents) = path.split_last()?;
    let mut cur = d?;
    for p in parents {
        cur = member(cur, p)?.as_object()?;
    }
    member(cur, last)?.as_str().filter(|s| !s.is_empty())
}

impl Measurer {
    /// `s` as a label value, interned (bounded: the SDK's cardinality limit caps the series
    /// anyway, and a flood of new values only costs a fresh allocation each).
    fn sv(&mut self, s: &str) -> StringValue {
        if let Some(v) = self.names.get(s) {
            return v.clone();
        }
        if self.names.len() >= MAX_OPEN {
            self.names.clear();
        }
        let v = StringValue::from(Arc::<str>::from(s));
        self.names.insert(s.to_owned(), v.clone());
        v
    }

    /// The points `ev` yields, appended to `out`, remembering what a later event needs
    /// ([`Measurer::measure_with`], each point collected with its own label set).
    pub fn measure_into(&mut self, ev: &Event, out: &mut Vec<Point>) {
        self.measure_with(ev, &mut |instrument, value, attrs| {
            out.push(Point { instrument, value, attrs: attrs.to_vec() })
        });
    }

    /// Hands each point `ev` yields to `emit`: its instrument, value and label set, which
    /// `emit` only borrows (the tap records through a bound series, nothing copied),
    /// remembering what a later event needs. Pure apart from that bounded memory (no clock:
    /// durations come from the events' own times).
    pub fn measure_with(&mut self, ev: &Event, emit: &mut Emit<'_>) {
        let d = obj(ev);
        let ty = ev.r#type.as_str();
        match ty {
            "session.started" => {
                if let (Some(s), Some(m)) = (&ev.session, str_at(d, &["gen_ai.request.model"])) {
                    if self.models.len() >= MAX_OPEN {
                        self.models.clear();
                    }
                    let m = self.sv(m);
                    self.models.insert((ev.agent.to_string(), s.clone()), m);
                }
            }
            "session.ended" => {
                if let Some(s) = &ev.session {
                    self.models.remove(&(ev.agent.to_string(), s.clone()));
                }
            }
            "run.started" | "tool.requested" => {
                self.remember(ev);
                self.usage(ev, d, emit);
            }
            t @ ("run.finished" | "run.failed" | "run.cancelled") => {
                let mut attrs = vec![KeyValue::new("gen_ai.operation.name", "invoke_agent"), self.agent(ev)];
                if let Some(m) = self.model(ev) {
                    attrs.push(KeyValue::new("gen_ai.request.model", m));
                }
                if t != "run.finished" {
                    let err = str_at(d, &["error", "type"]).or(str_at(d, &["reason"])).unwrap_or(&t[4..]);
                    attrs.push(KeyValue::new("error.type", self.sv(err)));
                }
                if let Some(secs) = self.duration(ev, d) {
                    emit(Instrument::InvokeAgentDuration, secs, &attrs);
                }
                self.usage(ev, d, emit);
            }
            t @ ("tool.completed" | "tool.failed" | "tool.denied") => {
                let tool = self.sv(str_at(d, &["tool", "name"]).unwrap_or("unknown"));
                let outcome = match t {
                    "tool.completed" => "completed",
                    "tool.failed" => "failed",
                    _ => "denied",
                };
                let agent = self.agent(ev);
                let mut attrs = vec![KeyValue::new("gen_ai.operation.name", "execute_tool"), agent.clone()];
                attrs.push(KeyValue::new("gen_ai.tool.name", tool.clone()));
                if t == "tool.failed" {
                    attrs.push(KeyValue::new(
                        "error.type",
                        self.sv(str_at(d, &["error", "type"]).unwrap_or("tool_error")),
                    ));
                }
                if t != "tool.denied"
                    && let Some(secs) = self.duration(ev, d)
                {
                    emit(Instrument::ExecuteToolDuration, secs, &attrs);
                } else if let Some(c) = &ev.cause {
                    self.forget(c);
                }
                let calls = [agent, KeyValue::new("gen_ai.tool.name", tool), KeyValue::new("aep.outcome", outcome)];
                emit(Instrument::ToolCalls, 1.0, &calls);
                self.usage(ev, d, emit);
            }
            "attention.resolved" => {
                let resolution = self.sv(str_at(d, &["resolution"]).unwrap_or("unknown"));
                let attrs = [self.agent(ev), KeyValue::new("aep.attention.resolution", resolution)];
                if let Some(ms) = d.and_then(|d| member(d, "latency_ms")).and_then(number).filter(|v| *v >= 0.0) {
                    emit(Instrument::AttentionWait, ms / 1000.0, &attrs);
                }
                emit(Instrument::AttentionResolutions, 1.0, &attrs);
            }
            // A vendor's own record measures only as a model call (`model_call` knows no other
            // type); any other event yields nothing, and no label is made for it.
            _ => {
                if let Some(call) = d.and_then(|d| model_call(ty, d)) {
                    // Room for the model, then the token type or the error type.
                    let mut attrs = Vec::with_capacity(4);
                    attrs.extend([KeyValue::new("gen_ai.operation.name", call.operation), self.agent(ev)]);
                    let model = match call.model {
                        Some(m) => Some(self.sv(m)),
                        None => self.model(ev),
                    };
                    if let Some(m) = model {
                        attrs.push(KeyValue::new("gen_ai.request.model", m));
                    }
                    tokens(call.input_tokens, call.output_tokens, &mut attrs, emit);
                    // GenAI semantic conventions: a failed call's duration carries `error.type`.
                    if let Some(t) = &call.error_type {
                        attrs.push(KeyValue::new("error.type", self.sv(t)));
                    }
                    if let Some(ms) = call.duration_ms {
                        emit(Instrument::OperationDuration, ms / 1000.0, &attrs);
                    }
                }
            }
        }
    }

    /// AEP-0002 §5.2 `usage` on runs and tools: flat `gen_ai.usage.*` fields.
    fn usage(&mut self, ev: &Event, d: Option<&Map<String, Value>>, emit: &mut Emit<'_>) {
        let Some(d) = d else { return };
        let (i, o) = (
            member(d, "gen_ai.usage.input_tokens").and_then(count),
            member(d, "gen_ai.usage.output_tokens").and_then(count),
        );
        if i.is_none() && o.is_none() {
            return;
        }
        let op = if ev.r#type.starts_with("tool.") { "execute_tool" } else { "invoke_agent" };
        // Room for the model and the token type.
        let mut attrs = Vec::with_capacity(4);
        attrs.extend([KeyValue::new("gen_ai.operation.name", op), self.agent(ev)]);
        if let Some(m) = self.model(ev) {
            attrs.push(KeyValue::new("gen_ai.request.model", m));
        }
        tokens(i, o, &mut attrs, emit);
    }

    /// The `gen_ai.agent.name` label of `ev`.
    fn agent(&mut self, ev: &Event) -> KeyValue {
        KeyValue::new("gen_ai.agent.name", self.sv(&ev.agent))
    }

    fn model(&self, ev: &Event) -> Option<StringValue> {
        self.models.get(&(ev.agent.to_string(), ev.session.clone()?)).cloned()
    }

    fn remember(&mut self, ev: &Event) {
        let Some(t) = aep_schemas::time::parse_rfc3339(&ev.time) else { return };
        if self.started.insert(ev.id.clone(), t).is_none() {
            self.order.push_back(ev.id.clone());
        }
        while self.order.len() > MAX_OPEN {
            if let Some(old) = self.order.pop_front() {
                self.started.remove(&old);
            }
        }
    }

    fn forget(&mut self, id: &str) {
        self.started.remove(id);
    }

    /// The event's own `duration_ms`, else the time since its cause started (seconds).
    fn duration(&mut self, ev: &Event, d: Option<&Map<String, Value>>) -> Option<f64> {
        let started = ev.cause.as_deref().and_then(|c| self.started.remove(c));
        if let Some(ms) = d.and_then(|d| member(d, "duration_ms")).and_then(number).filter(|v| *v >= 0.0) {
            return Some(ms / 1000.0);
        }
        let end = aep_schemas::time::parse_rfc3339(&ev.time)?;
        let ns = end.checked_sub(started?)?;
        (ns >= 0).then(|| ns as f64 / 1e9)
    }
}

/// Where [`Measurer::measure_with`] hands each point: instrument, value, label set.
pub type Emit<'a> = dyn FnMut(Instrument, f64, &[KeyValue]) + 'a;

/// The token counts as `gen_ai.client.token.usage` points: `attrs` with the token type
/// added for each (and taken off again).
fn tokens(input: Option<u64>, output: Option<u64>, attrs: &mut Vec<KeyValue>, emit: &mut Emit<'_>) {
    for (kind, n) in [("input", input), ("output", output)] {
        if let Some(n) = n {
            attrs.push(KeyValue::new("gen_ai.token.type", kind));
            emit(Instrument::TokenUsage, n as f64, attrs);
            attrs.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    impl Measurer {
        /// [`Measurer::measure_into`] into a fresh vector.
        fn measure(&mut self, ev: &Event) -> Vec<Point> {
            let mut out = Vec::new();
            self.measure_into(ev, &mut out);
            out
        }
    }

    fn attr<'a>(p: &'a Point, k: &str) -> Option<&'a str> {
        match &p.attrs.iter().find(|kv| kv.key.as_str() == k)?.value {
            opentelemetry::Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }

    #[test]
    fn a_tool_without_its_own_duration_is_timed_from_its_request() {
        let mut m = Measurer::default();
        m.measure(&ev(
            "session.started",
            "e0",
            "2026-12-01T10:00:00.000Z",
            None,
            json!({"gen_ai.request.model": "opus"}),
        ));
        let req = ev("tool.requested", "e1", "2026-12-01T10:00:01.000Z", None, json!({"tool": {"name": "Bash"}}));
        assert!(m.measure(&req).is_empty());
        assert!(m.started.contains_key("e1"), "the request is remembered for its completion");
        let done =
            ev("tool.completed", "e2", "2026-12-01T10:00:03.500Z", Some("e1"), json!({"tool": {"name": "Bash"}}));
        let pts = m.measure(&done);
        assert_eq!(pts.len(), 2);
        assert_eq!((pts[0].instrument, pts[0].value), (Instrument::ExecuteToolDuration, 2.5));
        assert_eq!(attr(&pts[0], "gen_ai.tool.name"), Some("Bash"));
        assert_eq!((pts[1].instrument, attr(&pts[1], "aep.outcome")), (Instrument::ToolCalls, Some("completed")));
        assert!(m.started.is_empty(), "the open call is forgotten once completed");
        // Ids never become attributes.
        assert!(pts.iter().flat_map(|p| &p.attrs).all(|kv| kv.value.as_str() != "s1" && kv.value.as_str() != "e1"));
    }

    #[test]
    fn failures_carry_an_error_type_and_runs_their_model() {
        let mut m = Measurer::default();
        m.measure(&ev(
            "session.started",
            "e0",
            "2026-12-01T10:00:00.000Z",
            None,
            json!({"gen_ai.request.model": "opus"}),
        ));
        let pts = m.measure(&ev(
            "tool.failed",
            "e3",
            "2026-12-01T10:00:03Z",
            None,
            json!({"tool": {"name": "Read"}, "error": {"type": "not_found"}, "duration_ms": 40}),
        ));
        assert_eq!(pts[0].value, 0.04);
        assert_eq!(attr(&pts[0], "error.type"), Some("not_found"));
        assert_eq!(attr(&pts[1], "aep.outcome"), Some("failed"));
        let pts = m.measure(&ev(
            "run.finished",
            "e4",
            "2026-12-01T10:00:09Z",
            None,
            json!({"duration_ms": 9000, "gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 30}),
        ));
        let kinds: Vec<_> = pts.iter().map(|p| (p.instrument, p.value, attr(p, "gen_ai.token.type"))).collect();
        assert_eq!(
            kinds,
            [
                (Instrument::InvokeAgentDuration, 9.0, None),
                (Instrument::TokenUsage, 900.0, Some("input")),
                (Instrument::TokenUsage, 30.0, Some("output"))
            ]
        );
        assert!(pts.iter().all(|p| attr(p, "gen_ai.request.model") == Some("opus")));
        let denied =
            m.measure(&ev("tool.denied", "e5", "2026-12-01T10:00:10Z", None, json!({"tool": {"name": "Bash"}})));
        assert_eq!(denied.len(), 1, "a denied tool never ran: counted, not timed");
    }

    #[test]
    fn vendor_model_calls_and_human_waits() {
        let mut m = Measurer::default();
        // A real Claude Code `api_request` (counts as strings).
        let call = ev(
            "x.claude-code.otel.api_request",
            "e6",
            "2026-12-01T10:00:00Z",
            None,
            json!({"model": "claude-opus-4-8", "input_tokens": "1200", "output_tokens": "25", "duration_ms": "113"}),
        );
        let pts = m.measure(&call);
        let got: Vec<_> = pts.iter().map(|p| (p.instrument, p.value)).collect();
        assert_eq!(
            got,
            [(Instrument::TokenUsage, 1200.0), (Instrument::TokenUsage, 25.0), (Instrument::OperationDuration, 0.113)]
        );
        assert!(pts.iter().all(|p| attr(p, "gen_ai.operation.name") == Some("chat")));
        let chunk = ev(
            "x.codex.otel.sse_event",
            "e7",
            "2026-12-01T10:00:00Z",
            None,
            json!({"event.kind": "response.output_text.delta"}),
        );
        assert!(m.measure(&chunk).is_empty(), "stream chunks measure nothing");
        let wait = ev(
            "attention.resolved",
            "e8",
            "2026-12-01T10:00:00Z",
            None,
            json!({"resolution": "answered", "latency_ms": 4200}),
        );
        let pts = m.measure(&wait);
        assert_eq!((pts[0].instrument, pts[0].value), (Instrument::AttentionWait, 4.2));
        assert_eq!(attr(&pts[1], "aep.attention.resolution"), Some("answered"));
    }

    #[test]
    fn open_calls_are_bounded() {
        let mut m = Measurer::default();
        for i in 0..(MAX_OPEN + 10) {
            m.measure(&ev("tool.requested", &format!("r{i}"), "2026-12-01T10:00:00Z", None, json!({})));
        }
        assert_eq!((m.started.len(), m.order.len()), (MAX_OPEN, MAX_OPEN));
        assert!(!m.started.contains_key("r0"));
    }
}
