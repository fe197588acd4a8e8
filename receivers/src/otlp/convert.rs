//! OTLP log records -> the adapters' neutral [`OtelRecord`] (attributes flattened to JSON, the
//! form the vendor profiles and the Annex A pins use).

use std::sync::Arc;

use aep_adapters::otel::{Attributes, OtelRecord};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Av;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use serde_json::{Map, Value};

/// Every log record of `req`, each with its resource attributes (shared per `ResourceLogs`)
/// and scope, in request order.
pub fn to_otel_records(req: &ExportLogsServiceRequest) -> Vec<OtelRecord> {
    let mut out = Vec::with_capacity(super::decode::count_logs(req));
    for rl in &req.resource_logs {
        let resource = Arc::new(rl.resource.as_ref().map(|r| attributes(&r.attributes)).unwrap_or_default());
        for sl in &rl.scope_logs {
            let (scope_name, scope_version): (Arc<str>, Arc<str>) =
                sl.scope.as_ref().map(|s| (s.name.as_str().into(), s.version.as_str().into())).unwrap_or_default();
            for r in &sl.log_records {
                out.push(OtelRecord {
                    resource: Arc::clone(&resource),
                    scope_name: scope_name.clone(),
                    scope_version: scope_version.clone(),
                    event_name: (!r.event_name.is_empty()).then(|| r.event_name.as_str().into()),
                    attributes: r
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), kv.value.as_ref().map(any_value).unwrap_or(Value::Null)))
                        .collect::<Attributes>(),
                    body: r.body.as_ref().map(any_value).into(),
                    time_unix_nano: r.time_unix_nano,
                    observed_time_unix_nano: r.observed_time_unix_nano,
                    severity_number: r.severity_number,
                    severity_text: r.severity_text.as_str().into(),
                    trace_id: hex_id(&r.trace_id, 16),
                    span_id: hex_id(&r.span_id, 8),
                    flags: r.flags,
                });
            }
        }
    }
    out
}

/// Every log record of `req`, as [`to_otel_records`], taking the request apart instead of
/// copying it: keys and string values move into the records (no per-attribute allocation).
pub fn into_otel_records(req: ExportLogsServiceRequest) -> Vec<OtelRecord> {
    let mut out = Vec::with_capacity(super::decode::count_logs(&req));
    let mut keys = super::fast::KeyCache::default();
    for rl in req.resource_logs {
        let resource = Arc::new(rl.resource.map(|r| attributes_owned(r.attributes)).unwrap_or_default());
        for sl in rl.scope_logs {
            let (scope_name, scope_version): (Arc<str>, Arc<str>) =
                sl.scope.map(|s| (s.name.into(), s.version.into())).unwrap_or_default();
            for r in sl.log_records {
                out.push(OtelRecord {
                    resource: Arc::clone(&resource),
                    scope_name: scope_name.clone(),
                    scope_version: scope_version.clone(),
                    event_name: (!r.event_name.is_empty()).then(|| r.event_name.into()),
                    attributes: r
                        .attributes
                        .into_iter()
                        .enumerate()
                        .map(|(i, kv)| (keys.owned(i, kv.key), kv.value.map(any_value_owned).unwrap_or(Value::Null)))
                        .collect(),
                    body: r.body.map(any_value_owned).into(),
                    time_unix_nano: r.time_unix_nano,
                    observed_time_unix_nano: r.observed_time_unix_nano,
                    severity_number: r.severity_number,
                    severity_text: r.severity_text.into(),
                    trace_id: hex_id(&r.trace_id, 16),
                    span_id: hex_id(&r.span_id, 8),
                    flags: r.flags,
                });
            }
        }
    }
    out
}

/// Key-value list -> JSON object (a later duplicate key wins, as in most SDKs' maps).
pub fn attributes(kvs: &[KeyValue]) -> Map<String, Value> {
    kvs.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map(any_value).unwrap_or(Value::Null))).collect()
}

/// Key-value list -> JSON object, by move.
fn attributes_owned(kvs: Vec<KeyValue>) -> Map<String, Value> {
    kvs.into_iter().map(|kv| (kv.key, kv.value.map(any_value_owned).unwrap_or(Value::Null))).collect()
}

/// `AnyValue` -> JSON by move, as [`any_value`].
fn any_value_owned(v: AnyValue) -> Value {
    match v.value {
        None => Value::Null,
        Some(Av::StringValue(s)) => Value::String(s),
        Some(Av::ArrayValue(a)) => Value::Array(a.values.into_iter().map(any_value_owned).collect()),
        Some(Av::KvlistValue(kv)) => Value::Object(attributes_owned(kv.values)),
        Some(other) => any_value(&AnyValue { value: Some(other) }),
    }
}

/// `AnyValue` -> JSON: ints as numbers, bytes as lowercase hex, non-finite doubles as null.
pub fn any_value(v: &AnyValue) -> Value {
    match &v.value {
        None => Value::Null,
        Some(Av::StringValue(s)) => Value::String(s.clone()),
        Some(Av::BoolValue(b)) => Value::Bool(*b),
        Some(Av::IntValue(i)) => Value::from(*i),
        Some(Av::DoubleValue(d)) => serde_json::Number::from_f64(*d).map(Value::Number).unwrap_or(Value::Null),
        Some(Av::ArrayValue(a)) => Value::Array(a.values.iter().map(any_value).collect()),
        Some(Av::KvlistValue(kv)) => Value::Object(attributes(&kv.values)),
        Some(Av::BytesValue(b)) => Value::String(hex::encode(b)),
        // Dictionary indexes exist only in the profiles signal; no table to resolve them here.
        Some(_) => Value::Null,
    }
}

/// A trace or span id as lowercase hex; `None` when absent, of the wrong length, or all zero.
fn hex_id(id: &[u8], len: usize) -> Option<String> {
    (id.len() == len && id.iter().any(|b| *b != 0)).then(|| super::fast::hex_lower(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, InstrumentationScope, KeyValueList};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use serde_json::json;

    fn kv(k: &str, v: Av) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
    }

    #[test]
    fn flattens_values_and_shares_the_resource() {
        let rec = LogRecord {
            event_name: "event otel/src/x.rs:1".into(),
            observed_time_unix_nano: 7,
            attributes: vec![
                kv("s", Av::StringValue("x".into())),
                kv("i", Av::IntValue(-3)),
                kv("d", Av::DoubleValue(f64::NAN)),
                kv("b", Av::BytesValue(vec![0xab, 0x01])),
                kv("a", Av::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(Av::BoolValue(true)) }] })),
                kv("m", Av::KvlistValue(KeyValueList { values: vec![kv("k", Av::IntValue(1))] })),
            ],
            trace_id: vec![0; 16],
            span_id: vec![1, 2, 3, 4, 5, 6, 7, 8],
            ..Default::default()
        };
        let req = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", Av::StringValue("codex_exec".into()))],
                    ..Default::default()
                }),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope { name: "sc".into(), ..Default::default() }),
                    log_records: vec![rec.clone(), rec],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let out = to_otel_records(&req);
        assert_eq!(into_otel_records(req.clone()), out, "the moving conversion is the same");
        assert_eq!(out.len(), 2);
        assert!(Arc::ptr_eq(&out[0].resource, &out[1].resource));
        let r = &out[0];
        assert_eq!(r.service_name(), Some("codex_exec"));
        assert_eq!(&*r.scope_name, "sc");
        assert_eq!(
            Value::Object(r.attributes.to_map()),
            json!({"s": "x", "i": -3, "d": null, "b": "ab01", "a": [true], "m": {"k": 1}})
        );
        assert_eq!(r.trace_id, None, "all-zero trace id is absent");
        assert_eq!(r.span_id.as_deref(), Some("0102030405060708"));
        assert_eq!(r.observed_time_unix_nano, 7);
    }
}
