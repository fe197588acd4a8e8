//! Fixture class `otlp` (AEP-0005 §5 item 3): pinned LogRecord projections of golden
//! Events at the default `max_capture` (`metadata`): field mapping, the severity table,
//! `gen_ai.*` hoisting, traceparent parsing, and envelope-only export above the ceiling.
//!
//! The pins use the OTLP data model's field names with flat attribute maps; the projection
//! emits OTLP/JSON, so each check decodes the exported request back into that shape first.

use aep_projections::otlp::to_json;
use aep_projections::otlp_logs::{OtlpOptions, logs_request};
use aep_schemas::Event;
use serde_json::{Map, Value};

use crate::{Checks, Fixtures, diff};

/// Appends this class's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let golden = match fx.jsonl("golden/golden.jsonl") {
        Ok(g) => g,
        Err(e) => return out.fail("otlp: golden fixtures", e),
    };
    let pins = match fx.json("otlp/otlp-expected.json") {
        Ok(Value::Object(m)) => m,
        Ok(_) => return out.fail("otlp: otlp-expected fixtures", "not a JSON object keyed by golden index"),
        Err(e) => return out.fail("otlp: otlp-expected fixtures", e),
    };
    for (key, expected) in &pins {
        if key.starts_with('$') {
            continue; // `$comment` and the like
        }
        let raw = key.parse::<usize>().ok().and_then(|i| golden.get(i));
        let ty = raw.and_then(|r| r.get("type")).and_then(Value::as_str).unwrap_or("?");
        let result = match raw {
            None => Err(format!("no golden Event at index {key}")),
            Some(raw) => Event::from_value(raw.clone())
                .map_err(|e| format!("golden[{key}] does not parse: {e}"))
                .and_then(|ev| data_model(&to_json(&logs_request(&[ev], &OtlpOptions::default()))))
                .and_then(|actual| diff(expected, &actual)),
        };
        out.record(format!("otlp: golden[{key}] {ty}"), result);
    }
}

/// Decodes a one-record OTLP/JSON `ExportLogsServiceRequest` into the pins' shape.
fn data_model(req: &Value) -> Result<Value, String> {
    let one = |v: &Value, key: &str| -> Result<Value, String> {
        match v.get(key).and_then(Value::as_array).map(Vec::as_slice) {
            Some([x]) => Ok(x.clone()),
            _ => Err(format!("expected exactly one `{key}` entry in {v}")),
        }
    };
    let rl = one(req, "resourceLogs")?;
    let sl = one(&rl, "scopeLogs")?;
    let rec = one(&sl, "logRecords")?;
    let Value::Object(rec) = rec else { return Err("a LogRecord is a JSON object".into()) };
    let mut m = Map::new();
    m.insert("resource".into(), kv_map(rl.get("resource").and_then(|r| r.get("attributes")))?);
    for (key, value) in rec {
        let (name, decoded) = match key.as_str() {
            "timeUnixNano" | "observedTimeUnixNano" => {
                let n = value
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| format!("`{key}` must be a decimal string, got {value}"))?;
                (snake(&key), n.into())
            }
            "attributes" => ("attributes".into(), kv_map(Some(&value))?),
            "body" => ("body".into(), decode(&value)?),
            _ => (snake(&key), value),
        };
        m.insert(name, decoded);
    }
    Ok(Value::Object(m))
}

fn snake(camel: &str) -> String {
    let mut s = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            s.push('_');
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// An OTLP/JSON `KeyValue` list as a flat JSON object.
fn kv_map(list: Option<&Value>) -> Result<Value, String> {
    let mut m = Map::new();
    for kv in list.and_then(Value::as_array).ok_or("attributes must be a KeyValue array")? {
        let key = kv.get("key").and_then(Value::as_str).ok_or_else(|| format!("KeyValue without key: {kv}"))?;
        let value = decode(kv.get("value").unwrap_or(&Value::Null))?;
        if m.insert(key.to_owned(), value).is_some() {
            return Err(format!("duplicate attribute `{key}`"));
        }
    }
    Ok(Value::Object(m))
}

/// An OTLP/JSON `AnyValue` as plain JSON.
fn decode(any: &Value) -> Result<Value, String> {
    let Value::Object(o) = any else { return Err(format!("AnyValue must be an object, got {any}")) };
    let mut it = o.iter();
    let (Some((k, v)), None) = (it.next(), it.next()) else {
        return if o.is_empty() { Ok(Value::Null) } else { Err(format!("AnyValue with several members: {any}")) };
    };
    Ok(match (k.as_str(), v) {
        ("stringValue" | "bytesValue", Value::String(_)) | ("boolValue", Value::Bool(_)) => v.clone(),
        ("doubleValue", Value::Number(_)) => v.clone(),
        ("intValue", Value::String(s)) => s.parse::<i64>().map_err(|e| format!("intValue {s:?}: {e}"))?.into(),
        ("arrayValue", _) => {
            let vals = v.get("values").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            Value::Array(vals.iter().map(decode).collect::<Result<_, _>>()?)
        }
        ("kvlistValue", _) => kv_map(Some(v.get("values").unwrap_or(&Value::Array(vec![]))))?,
        _ => return Err(format!("not an OTLP/JSON AnyValue: {any}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_any_values() {
        let any = serde_json::json!({"kvlistValue":{"values":[{"key":"a","value":{"intValue":"7"}},
            {"key":"b","value":{"arrayValue":{"values":[{"boolValue":true},{}]}}}]}});
        assert_eq!(decode(&any).unwrap(), serde_json::json!({"a":7,"b":[true,null]}));
        assert!(decode(&serde_json::json!({"intValue":7})).is_err());
        assert_eq!(snake("timeUnixNano"), "time_unix_nano");
    }
}
