//! The finished span and its OTLP/JSON encoding (ExportTraceServiceRequest).

use serde_json::{Map, Value};

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

    /// The span as one OTLP/JSON `Span` object (camelCase, hex ids, int64 as strings).
    pub fn to_otlp_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("traceId".into(), hex::encode(self.trace_id).into());
        m.insert("spanId".into(), hex::encode(self.span_id).into());
        if let Some(p) = self.parent_span_id {
            m.insert("parentSpanId".into(), hex::encode(p).into());
        }
        m.insert("name".into(), self.name.clone().into());
        m.insert("kind".into(), 1.into()); // SPAN_KIND_INTERNAL: agent and tool spans are INTERNAL.
        m.insert("startTimeUnixNano".into(), self.start_unix_nanos.to_string().into());
        m.insert("endTimeUnixNano".into(), self.end_unix_nanos.to_string().into());
        m.insert("attributes".into(), attributes_json(&self.attributes));
        if !self.events.is_empty() {
            let events = self
                .events
                .iter()
                .map(|e| {
                    let mut m = Map::with_capacity(3);
                    m.insert("timeUnixNano".into(), e.time_unix_nanos.to_string().into());
                    m.insert("name".into(), e.name.clone().into());
                    m.insert("attributes".into(), attributes_json(&e.attributes));
                    Value::Object(m)
                })
                .collect();
            m.insert("events".into(), Value::Array(events));
        }
        if self.dropped_events_count > 0 {
            m.insert("droppedEventsCount".into(), self.dropped_events_count.into());
        }
        if !self.links.is_empty() {
            let links = self
                .links
                .iter()
                .map(|l| {
                    let mut m = Map::with_capacity(3);
                    m.insert("traceId".into(), hex::encode(l.context.trace_id).into());
                    m.insert("spanId".into(), hex::encode(l.context.span_id).into());
                    m.insert("attributes".into(), attributes_json(&l.attributes));
                    Value::Object(m)
                })
                .collect();
            m.insert("links".into(), Value::Array(links));
        }
        let mut status = Map::new();
        if !self.status_message.is_empty() {
            status.insert("message".into(), self.status_message.clone().into());
        }
        if self.status != StatusCode::Unset {
            status.insert("code".into(), self.status.as_i64().into());
        }
        m.insert("status".into(), Value::Object(status));
        Value::Object(m)
    }
}

/// An OTLP/JSON `ExportTraceServiceRequest` for `spans`: one `resourceSpans` entry per
/// `service.name` (the agent), in order of first appearance, one scope each.
pub fn traces_request(spans: &[Span]) -> Value {
    let mut groups: Vec<(&str, Vec<Value>)> = Vec::new();
    for span in spans {
        let json = span.to_otlp_json();
        match groups.iter_mut().find(|(name, _)| *name == span.service_name) {
            Some((_, list)) => list.push(json),
            None => groups.push((&span.service_name, vec![json])),
        }
    }
    let resource_spans: Vec<Value> = groups
        .into_iter()
        .map(|(service, spans)| {
            // Built by hand: `json!` would re-serialize every span value.
            let resource =
                obj1("attributes", Value::Array(vec![key_value("service.name", obj1("stringValue", service.into()))]));
            let mut scope = Map::with_capacity(2);
            scope.insert("name".into(), SCOPE_NAME.into());
            scope.insert("version".into(), env!("CARGO_PKG_VERSION").into());
            let mut scope_spans = Map::with_capacity(2);
            scope_spans.insert("scope".into(), Value::Object(scope));
            scope_spans.insert("spans".into(), Value::Array(spans));
            let mut rs = Map::with_capacity(2);
            rs.insert("resource".into(), resource);
            rs.insert("scopeSpans".into(), Value::Array(vec![Value::Object(scope_spans)]));
            Value::Object(rs)
        })
        .collect();
    obj1("resourceSpans", Value::Array(resource_spans))
}

/// A one-member JSON object, built without `json!` (which re-serializes its arguments).
fn obj1(k: &str, v: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(k.to_owned(), v);
    Value::Object(m)
}

/// An OTLP/JSON `KeyValue`.
fn key_value(k: &str, v: Value) -> Value {
    let mut m = Map::with_capacity(2);
    m.insert("key".to_owned(), Value::String(k.to_owned()));
    m.insert("value".to_owned(), v);
    Value::Object(m)
}

/// Attributes as an OTLP/JSON `KeyValue` list, sorted by key (deterministic output).
pub fn attributes_json(attrs: &Map<String, Value>) -> Value {
    let mut pairs: Vec<(&String, &Value)> = attrs.iter().collect();
    pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
    Value::Array(pairs.into_iter().filter_map(|(k, v)| any_value(v).map(|v| key_value(k, v))).collect())
}

/// A JSON value as an OTLP/JSON `AnyValue`; `None` for `null`.
pub fn any_value(v: &Value) -> Option<Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => obj1("boolValue", Value::Bool(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            // OTLP/JSON encodes int64 as a decimal string.
            (Some(i), _) => obj1("intValue", Value::String(i.to_string())),
            (None, Some(u)) => obj1("intValue", Value::String(u.to_string())),
            _ => obj1("doubleValue", n.as_f64().map_or(Value::Null, Value::from)),
        },
        Value::String(s) => obj1("stringValue", Value::String(s.clone())),
        Value::Array(items) => {
            obj1("arrayValue", obj1("values", Value::Array(items.iter().filter_map(any_value).collect())))
        }
        Value::Object(map) => {
            let values = map.iter().filter_map(|(k, v)| any_value(v).map(|v| key_value(k, v))).collect();
            obj1("kvlistValue", obj1("values", Value::Array(values)))
        }
    })
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
        let req = traces_request(&[span.clone(), other, span]);
        assert_eq!(req["resourceSpans"].as_array().unwrap().len(), 2);
        assert_eq!(req["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().unwrap().len(), 2);
    }
}
