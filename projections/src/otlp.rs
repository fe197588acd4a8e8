//! The OTLP message types both OTLP projections build (`opentelemetry-proto`'s, as its own
//! transform modules do), their common pieces, and an OTLP/JSON view of any of them.
//!
//! The projections return protobuf messages ready to encode or to send over tonic; the
//! JSON view ([`to_json`]) is the proto crate's own serde (camelCase, hex ids, 64-bit
//! integers as strings) with the fields at their proto3 defaults left out, the way OTLP/JSON
//! writers omit them, so offline output and the conformance pins read like a collector's.
//! [`logs_from_json`] and [`traces_from_json`] read such JSON back into the messages.

use opentelemetry_proto::tonic::common::v1::any_value::Value as Av;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::{Map, Value};

pub use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// A string `AnyValue`.
pub fn string(s: &str) -> AnyValue {
    AnyValue { value: Some(Av::StringValue(s.to_owned())) }
}

/// An integer `AnyValue` (OTLP integers are signed 64-bit; larger values saturate).
pub fn uint(n: u64) -> AnyValue {
    AnyValue { value: Some(Av::IntValue(i64::try_from(n).unwrap_or(i64::MAX))) }
}

/// A `KeyValue`.
pub fn key_value(key: &str, value: AnyValue) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(value), ..Default::default() }
}

/// A JSON value as an `AnyValue`: objects become key/value lists, integers `intValue`
/// (an unsigned one above `i64::MAX` the nearest double); `None` for `null`, and nulls
/// inside arrays and objects are left out (the span projection's rule).
pub fn any_value(v: &Value) -> Option<AnyValue> {
    convert::<false>(v)
}

/// [`any_value`], but `null` (at any depth) is the empty `AnyValue` (the LogRecord
/// projection's rule: a body keeps every member of the payload).
pub fn any_value_keep_null(v: &Value) -> AnyValue {
    convert::<true>(v).unwrap_or_default()
}

fn convert<const KEEP_NULL: bool>(v: &Value) -> Option<AnyValue> {
    let value = match v {
        Value::Null => return KEEP_NULL.then(AnyValue::default),
        Value::Bool(b) => Av::BoolValue(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Av::IntValue(i),
            None => Av::DoubleValue(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Av::StringValue(s.clone()),
        Value::Array(items) => {
            Av::ArrayValue(ArrayValue { values: items.iter().filter_map(convert::<KEEP_NULL>).collect() })
        }
        Value::Object(map) => Av::KvlistValue(KeyValueList {
            values: map
                .iter()
                .filter_map(|(k, v)| {
                    Some(KeyValue { key: k.clone(), value: Some(convert::<KEEP_NULL>(v)?), ..Default::default() })
                })
                .collect(),
        }),
    };
    Some(AnyValue { value: Some(value) })
}

/// The `Resource` of a `service.name`.
pub fn resource(service_name: &str) -> Resource {
    Resource { attributes: vec![key_value("service.name", string(service_name))], ..Default::default() }
}

/// Adds `extra` attributes to a resource where it does not carry the key already (the
/// deployment's `OTEL_RESOURCE_ATTRIBUTES`, e.g. `deployment.environment.name`, on records
/// whose resource names their own service).
pub fn add_resource_attributes(resource: &mut Option<Resource>, extra: &[(String, String)]) {
    if extra.is_empty() {
        return;
    }
    let r = resource.get_or_insert_with(Resource::default);
    for (k, v) in extra {
        if !r.attributes.iter().any(|a| &a.key == k) {
            r.attributes.push(key_value(k, string(v)));
        }
    }
}

/// An instrumentation scope.
pub fn scope(name: &str, version: Option<&str>) -> InstrumentationScope {
    InstrumentationScope {
        name: name.to_owned(),
        version: version.unwrap_or_default().to_owned(),
        ..Default::default()
    }
}

/// Groups `items` by a key in order of first appearance (one resource entry per
/// `service.name`, as OTLP requests are shaped).
pub fn group_by<'a, T, K: PartialEq + ?Sized>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> &'a K,
) -> Vec<(&'a K, Vec<T>)> {
    let mut groups: Vec<(&K, Vec<T>)> = Vec::new();
    for item in items {
        let k = key(&item);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, list)) => list.push(item),
            None => groups.push((k, vec![item])),
        }
    }
    groups
}

/// The OTLP/JSON encoding of an OTLP message, with proto3 defaults omitted.
pub fn to_json<T: serde::Serialize>(msg: &T) -> Value {
    let mut v = serde_json::to_value(msg).unwrap_or(Value::Null);
    strip_defaults(&mut v);
    v
}

/// The keys of a JSON `AnyValue`: inside one, a zero, `false` or `""` is the value itself.
const ANY_VALUE_KEYS: [&str; 7] =
    ["stringValue", "boolValue", "intValue", "doubleValue", "bytesValue", "arrayValue", "kvlistValue"];

fn strip_defaults(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let any_value = m.len() == 1 && m.keys().all(|k| ANY_VALUE_KEYS.contains(&k.as_str()));
            if !any_value {
                m.retain(|k, v| !is_default(k, v));
            }
            for x in m.values_mut() {
                strip_defaults(x);
            }
            // `"value": null` of a KeyValue whose AnyValue is empty reads as `{}`.
            if let Some(Value::Null) = m.get("value") {
                m.insert("value".into(), Value::Object(Map::new()));
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_defaults),
        _ => {}
    }
}

fn is_default(key: &str, v: &Value) -> bool {
    match v {
        Value::Null => key != "value",
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        // Hex ids of empty bytes and 64-bit integers encoded as strings.
        Value::String(s) => s.is_empty() || s == "0",
        // Attribute lists are always written (empty when there are none).
        Value::Array(a) => a.is_empty() && key != "attributes",
        Value::Object(_) => false,
    }
}

/// Why an OTLP/JSON value could not become a request.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The JSON does not match the OTLP message.
    #[error("OTLP/JSON does not decode: {0}")]
    Json(#[from] serde_json::Error),
    /// A trace or span id has the wrong length (opentelemetry-proto's serde accepts any).
    #[error("bad id length: {0}")]
    IdLength(String),
}

fn check_id(bytes: &[u8], len: usize, what: &str) -> Result<(), ConvertError> {
    if bytes.is_empty() || bytes.len() == len {
        Ok(())
    } else {
        Err(ConvertError::IdLength(format!("{what} has {} bytes, wanted {len}", bytes.len())))
    }
}

/// OTLP/JSON logs (as [`to_json`] writes them) to the protobuf message, ids checked.
pub fn logs_from_json(v: Value) -> Result<ExportLogsServiceRequest, ConvertError> {
    let req: ExportLogsServiceRequest = serde_json::from_value(v)?;
    for r in req.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records) {
        check_id(&r.trace_id, 16, "traceId")?;
        check_id(&r.span_id, 8, "spanId")?;
    }
    Ok(req)
}

/// OTLP/JSON traces (as [`to_json`] writes them) to the protobuf message, ids checked.
pub fn traces_from_json(v: Value) -> Result<ExportTraceServiceRequest, ConvertError> {
    let req: ExportTraceServiceRequest = serde_json::from_value(v)?;
    for s in req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
        check_id(&s.trace_id, 16, "traceId")?;
        check_id(&s.span_id, 8, "spanId")?;
        check_id(&s.parent_span_id, 8, "parentSpanId")?;
        for l in &s.links {
            check_id(&l.trace_id, 16, "link traceId")?;
            check_id(&l.span_id, 8, "link spanId")?;
        }
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rejects_bad_id_lengths_and_snake_case_is_not_silently_empty() {
        let bad =
            json!({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"0af7651916cd43dd8448eb211c8031"}]}]}]});
        assert!(matches!(logs_from_json(bad), Err(ConvertError::IdLength(_))));
        let snake = json!({"resource_logs":[{"scope_logs":[{"log_records":[{}]}]}]});
        assert!(logs_from_json(snake).unwrap().resource_logs.is_empty());
    }

    #[test]
    fn json_view_omits_defaults_but_keeps_zero_values() {
        let kv = KeyValue {
            key: "k".into(),
            value: Some(AnyValue {
                value: Some(Av::KvlistValue(KeyValueList {
                    values: vec![
                        key_value("zero", AnyValue { value: Some(Av::IntValue(0)) }),
                        key_value("no", AnyValue { value: Some(Av::BoolValue(false)) }),
                        key_value("empty", string("")),
                        KeyValue { key: "null".into(), value: None, ..Default::default() },
                    ],
                })),
            }),
            ..Default::default()
        };
        assert_eq!(
            to_json(&kv),
            json!({"key": "k", "value": {"kvlistValue": {"values": [
                {"key": "zero", "value": {"intValue": "0"}},
                {"key": "no", "value": {"boolValue": false}},
                {"key": "empty", "value": {"stringValue": ""}},
                {"key": "null", "value": {}},
            ]}}})
        );
        assert_eq!(
            to_json(&resource("svc")),
            json!({"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]})
        );
    }

    #[test]
    fn groups_keep_first_appearance_order() {
        let g = group_by(["a1", "b1", "a2"], |s: &&'static str| -> &'static str { &s[..1] });
        assert_eq!(g, [("a", vec!["a1", "a2"]), ("b", vec!["b1"])]);
    }
}
