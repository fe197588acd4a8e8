//! The finished span and its OTLP encoding (ExportTraceServiceRequest).

use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1 as proto;
use serde_json::{Map, Value};

use crate::otlp::{ExportTraceServiceRequest, any_value, group_by, resource, scope};

use super::ids::{SpanContext, SpanId, TraceId};

/// The instrumentation scope name put on every exported span.
pub const SCOPE_NAME: &str = "aep-bridge.spans";

/// OTLP status codes (`Status.StatusCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusCode {
    /// `STATUS_CODE_UNSET` (0).
    #[default]
    Unset,
    /// `STATUS_CODE_OK` (1).
    Ok,
    /// `STATUS_CODE_ERROR` (2).
    Error,
}

impl StatusCode {
    /// The OTLP numeric code.
    pub fn as_i64(self) -> i64 {
        match self {
            StatusCode::Unset => 0,
            StatusCode::Ok => 1,
            StatusCode::Error => 2,
        }
    }
}

/// What a synthesized span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpanRole {
    /// The session root (`session {agent}`).
    #[default]
    Session,
    /// A run (`invoke_agent {agent}`).
    Run,
    /// A tool call (`execute_tool {tool}`).
    Tool,
    /// An attention request (`attention {kind}`).
    Attention,
    /// A subagent delegation (`invoke_agent {agent_type}`).
    Delegation,
    /// A model call (`chat {model}`, kind CLIENT), built from a vendor's record of it.
    ModelCall,
}

/// A timestamped annotation on a span (an AEP Event that opened no span of its own).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// Unix nanoseconds.
    pub time_unix_nanos: u64,
    /// The event name: the AEP type.
    pub name: String,
    /// Attributes (scalars or arrays of scalars).
    pub attributes: Map<String, Value>,
}

/// A link from a span to another span context.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanLink {
    /// The linked span.
    pub context: SpanContext,
    /// Attributes, e.g. `aep.link.kind`.
    pub attributes: Map<String, Value>,
}

/// One finished span, synthesized from AEP Events.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The resource `service.name`: the AEP `agent` (AEP-0005 §3.2).
    pub service_name: String,
    /// The trace.
    pub trace_id: TraceId,
    /// This span.
    pub span_id: SpanId,
    /// The parent span (in the same trace), if any.
    pub parent_span_id: Option<SpanId>,
    /// The span name, e.g. `execute_tool Bash`.
    pub name: String,
    /// What the span stands for (not exported: the name and attributes say it).
    pub role: SpanRole,
    /// Start, Unix nanoseconds.
    pub start_unix_nanos: u64,
    /// End, Unix nanoseconds (never before the start).
    pub end_unix_nanos: u64,
    /// Attributes; encoded in key order.
    pub attributes: Map<String, Value>,
    /// Span events, in session order.
    pub events: Vec<SpanEvent>,
    /// Span events not kept (over the per-span cap).
    pub dropped_events_count: u32,
    /// Links.
    pub links: Vec<SpanLink>,
    /// Status code.
    pub status: StatusCode,
    /// Status message (empty unless an error says why).
    pub status_message: String,
}

impl Span {
    /// `true` when the span was closed without its terminal Event (`aep.incomplete`).
    pub fn is_incomplete(&self) -> bool {
        self.attributes.get("aep.incomplete") == Some(&Value::Bool(true))
    }

    /// The span as an OTLP `Span`: kind CLIENT for a model call (a request to a model
    /// provider, as the GenAI client-span conventions have it), INTERNAL for the agent's own
    /// work (sessions, runs, tools, attention, delegations).
    pub fn to_otlp(&self) -> proto::Span {
        let kind = match self.role {
            SpanRole::ModelCall => proto::span::SpanKind::Client,
            _ => proto::span::SpanKind::Internal,
        };
        proto::Span {
            trace_id: self.trace_id.to_vec(),
            span_id: self.span_id.to_vec(),
            parent_span_id: self.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
            name: self.name.clone(),
            kind: kind as i32,
            start_time_unix_nano: self.start_unix_nanos,
            end_time_unix_nano: self.end_unix_nanos,
            attributes: attributes(&self.attributes),
            events: self
                .events
                .iter()
                .map(|e| proto::span::Event {
                    time_unix_nano: e.time_unix_nanos,
                    name: e.name.clone(),
                    attributes: attributes(&e.attributes),
                    ..Default::default()
                })
                .collect(),
            dropped_events_count: self.dropped_events_count,
            links: self
                .links
                .iter()
                .map(|l| proto::span::Link {
                    trace_id: l.context.trace_id.to_vec(),
                    span_id: l.context.span_id.to_vec(),
                    attributes: attributes(&l.attributes),
                    ..Default::default()
                })
                .collect(),
            status: Some(proto::Status { message: self.status_message.clone(), code: self.status.as_i64() as i32 }),
            ..Default::default()
        }
    }

    /// The span's OTLP/JSON encoding (through [`crate::otlp::to_json`]).
    pub fn to_otlp_json(&self) -> Value {
        crate::otlp::to_json(&self.to_otlp())
    }
}

/// An OTLP `ExportTraceServiceRequest` for `spans`: one `resourceSpans` entry per
/// `service.name` (the agent), in order of first appearance, one scope each.
pub fn traces_request<'a>(spans: impl IntoIterator<Item = &'a Span>) -> ExportTraceServiceRequest {
    let resource_spans = group_by(spans, |s| s.service_name.as_str())
        .into_iter()
        .map(|(service, spans)| proto::ResourceSpans {
            resource: Some(resource(service)),
            scope_spans: vec![proto::ScopeSpans {
                scope: Some(scope(SCOPE_NAME, Some(env!("CARGO_PKG_VERSION")))),
                spans: spans.into_iter().map(Span::to_otlp).collect(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest { resource_spans }
}

/// Attributes as OTLP `KeyValue`s, sorted by key (deterministic output); `null`s are left out.
pub fn attributes(attrs: &Map<String, Value>) -> Vec<KeyValue> {
    let mut pairs: Vec<(&String, &Value)> = attrs.iter().collect();
    pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
    pairs
        .into_iter()
        .filter_map(|(k, v)| Some(KeyValue { key: k.clone(), value: Some(any_value(v)?), ..Default::default() }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_otlp_json() {
        let mut attributes = Map::new();
        attributes.insert("b".into(), json!(3));
        attributes.insert("a".into(), json!("x"));
        attributes.insert("c".into(), json!(1.5));
        let span = Span {
            service_name: "agent".into(),
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_span_id: None,
            name: "n".into(),
            role: SpanRole::Tool,
            start_unix_nanos: 5,
            end_unix_nanos: 7,
            attributes,
            events: vec![],
            dropped_events_count: 0,
            links: vec![],
            status: StatusCode::Error,
            status_message: "boom".into(),
        };
        let v = span.to_otlp_json();
        assert_eq!(v["traceId"], "01010101010101010101010101010101");
        assert!(v.get("parentSpanId").is_none());
        assert_eq!(v["startTimeUnixNano"], "5");
        assert_eq!(v["attributes"][0], json!({"key":"a","value":{"stringValue":"x"}}));
        assert_eq!(v["attributes"][1], json!({"key":"b","value":{"intValue":"3"}}));
        assert_eq!(v["attributes"][2], json!({"key":"c","value":{"doubleValue":1.5}}));
        assert_eq!(v["status"], json!({"message":"boom","code":2}));
        let mut other = span.clone();
        other.service_name = "other".into();
        let req = crate::otlp::to_json(&traces_request(&[span.clone(), other, span]));
        assert_eq!(req["resourceSpans"].as_array().unwrap().len(), 2);
        assert_eq!(req["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().unwrap().len(), 2);
    }
}
