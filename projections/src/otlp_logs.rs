//! OTLP export (AEP-0005 §3): AEP Events as OTLP LogRecords, in the OTLP/JSON encoding
//! (camelCase keys, hex trace/span ids, 64-bit integers as decimal strings, enums as
//! integers), ready for `opentelemetry-proto`'s serde or an OTLP/HTTP JSON peer.
//!
//! The `max_capture` ceiling (default `metadata`) is applied before projection (§3.3):
//! an Event whose payload does not survive the ceiling exports envelope-derived
//! attributes only, with no `body` and no hoisted `gen_ai.*` attributes.

use aep_schemas::{Capture, Event, Severity};
use serde_json::{Map, Value};

use crate::ce::TYPE_ROOT;

/// Exporter settings (AEP-0005 §3.3, §3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpOptions {
    /// The capture ceiling; payloads of Events above it (and of `capture: none` Events)
    /// are not exported. Default `metadata` (AEP-0005 §3.3).
    pub max_capture: Capture,
    /// Overrides the resource `service.name` (default: each Event's `agent`), for shared relays.
    pub service_name: Option<String>,
    /// Instrumentation scope name of every record.
    pub scope_name: String,
    /// Instrumentation scope version (omitted when `None`).
    pub scope_version: Option<String>,
    /// Also export AEP extension attributes (AEP-0001 §5.4) as `aep.ext.{name}` attributes.
    /// Off by default: AEP-0005 §3.2 maps no extension attributes.
    pub extension_attributes: bool,
}

impl Default for OtlpOptions {
    fn default() -> Self {
        Self {
            max_capture: Capture::Metadata,
            service_name: None,
            scope_name: "aep-bridge".into(),
            scope_version: Some(env!("CARGO_PKG_VERSION").into()),
            extension_attributes: false,
        }
    }
}

/// The OTLP `severity_text` and `severity_number` of an AEP severity (AEP-0005 §3.4).
pub fn severity_to_otlp(s: Severity) -> (&'static str, u8) {
    match s {
        Severity::Debug => ("DEBUG", 5),
        Severity::Info => ("INFO", 9),
        Severity::Notice => ("INFO2", 10),
        Severity::Warning => ("WARN", 13),
        Severity::Error => ("ERROR", 17),
        Severity::Critical => ("FATAL", 21),
    }
}

/// The inverse bucketing of an OTLP `severity_number` (AEP-0005 §3.4); `None` for 0
/// (unspecified) and out-of-range numbers.
pub fn severity_from_otlp(number: i32) -> Option<Severity> {
    Some(match number {
        1..=8 => Severity::Debug,
        9 => Severity::Info,
        10..=12 => Severity::Notice,
        13..=16 => Severity::Warning,
        17..=20 => Severity::Error,
        21..=24 => Severity::Critical,
        _ => return None,
    })
}

/// The parsed fields of a W3C `traceparent` (version `00` layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// 16 lowercase hex digits, not all zero.
    pub span_id: String,
    /// The trace-flags byte.
    pub flags: u8,
}

/// Parses a W3C Trace Context `traceparent` into hex ids (the shared parser,
/// [`aep_schemas::time::parse_traceparent`]).
pub fn parse_traceparent(tp: &str) -> Option<TraceContext> {
    let t = aep_schemas::time::parse_traceparent(tp)?;
    Some(TraceContext { trace_id: hex::encode(t.trace_id), span_id: hex::encode(t.span_id), flags: t.flags })
}

/// Converts an RFC 3339 timestamp to nanoseconds since the Unix epoch; `None` when it is
/// malformed or before 1970.
pub fn rfc3339_to_unix_nanos(t: &str) -> Option<u64> {
    aep_schemas::time::parse_rfc3339_nanos(t)
}

/// `true` when `t` is a well-formed RFC 3339 `date-time` (any year).
pub fn is_rfc3339(t: &str) -> bool {
    aep_schemas::time::parse_rfc3339(t).is_some()
}

/// A JSON value as an OTLP/JSON `AnyValue` (objects become `kvlistValue`, integers
/// `intValue` strings, `null` the empty AnyValue).
pub fn any_value(v: &Value) -> Value {
    match v {
        Value::Null => Value::Object(Map::new()),
        Value::Bool(b) => obj1("boolValue", Value::Bool(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => obj1("intValue", Value::String(i.to_string())),
            // u64 above i64::MAX or a float: the nearest double.
            None => obj1("doubleValue", n.as_f64().map_or(Value::Null, Value::from)),
        },
        Value::String(s) => str_value(s),
        Value::Array(a) => obj1("arrayValue", obj1("values", Value::Array(a.iter().map(any_value).collect()))),
        Value::Object(o) => obj1(
            "kvlistValue",
            obj1("values", Value::Array(o.iter().map(|(k, v)| key_value(k, any_value(v))).collect())),
        ),
    }
}

/// A one-member JSON object, built without the serializer round trip of `json!`.
fn obj1(key: &str, value: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(key.to_owned(), value);
    Value::Object(m)
}

fn key_value(key: &str, value: Value) -> Value {
    let mut m = Map::with_capacity(2);
    m.insert("key".into(), Value::String(key.to_owned()));
    m.insert("value".into(), value);
    Value::Object(m)
}

fn str_value(s: &str) -> Value {
    obj1("stringValue", Value::String(s.to_owned()))
}

fn uint_value(n: u64) -> Value {
    obj1("intValue", Value::String(n.to_string()))
}

/// The payload that survives the ceiling (AEP-0005 §3.3): none for `capture: none` Events
/// and for Events above `max_capture`. The fixture corpus pins this envelope-only
/// projection for above-ceiling Events (the declared `aep.capture` is kept as evidence).
pub fn surviving_data(ev: &Event, max_capture: Capture) -> Option<&Map<String, Value>> {
    let capture = ev.capture();
    if capture == Capture::None || capture > max_capture {
        return None;
    }
    ev.data.as_ref().and_then(Value::as_object)
}

/// The resource `service.name` of an Event (AEP-0005 §3.2: the agent, unless overridden).
pub fn service_name<'a>(ev: &'a Event, opts: &'a OtlpOptions) -> &'a str {
    opts.service_name.as_deref().unwrap_or(&ev.agent)
}

/// One Event as an OTLP/JSON `LogRecord` (AEP-0005 §3.2), the ceiling applied first.
pub fn log_record(ev: &Event, opts: &OtlpOptions) -> Value {
    let mut rec = Map::new();
    // RFC 3339 → epoch nanos; an unparseable time stays 0 (unknown) by omission.
    if let Some(ns) = rfc3339_to_unix_nanos(&ev.time) {
        rec.insert("timeUnixNano".into(), Value::String(ns.to_string()));
    }
    // AEP-0005 §3.4: severity defaults to info through the accessor.
    let (text, number) = severity_to_otlp(ev.severity());
    rec.insert("severityNumber".into(), number.into());
    rec.insert("severityText".into(), text.into());

    let data = surviving_data(ev, opts.max_capture);
    // `gen_ai.*` members hoist to attributes verbatim; the rest is the body.
    let mut body = Vec::new();
    let mut gen_ai = Vec::new();
    if let Some(d) = data {
        for (k, v) in d {
            let kv = key_value(k, any_value(v));
            if k.starts_with("gen_ai.") { gen_ai.push(kv) } else { body.push(kv) }
        }
    }
    if !body.is_empty() {
        rec.insert("body".into(), obj1("kvlistValue", obj1("values", Value::Array(body))));
    }

    let mut attrs = vec![key_value("aep.agent_id", str_value(&ev.agent)), key_value("aep.event_id", str_value(&ev.id))];
    if let Some(c) = ev.capture {
        attrs.push(key_value("aep.capture", str_value(c.as_str())));
    }
    attrs.push(key_value("aep.source", str_value(&ev.source)));
    for (k, v) in [("aep.session_id", &ev.session), ("aep.run_id", &ev.run), ("aep.step", &ev.step)] {
        if let Some(v) = v {
            attrs.push(key_value(k, str_value(v)));
        }
    }
    if let Some(v) = ev.seq {
        attrs.push(key_value("aep.sequence", uint_value(v)));
    }
    if let Some(v) = ev.epoch {
        attrs.push(key_value("aep.epoch", uint_value(v)));
    }
    if let Some(v) = &ev.cause {
        attrs.push(key_value("aep.causation_id", str_value(v)));
    }
    if let Some(v) = &ev.subject {
        attrs.push(key_value("aep.subject", str_value(v)));
    }
    attrs.extend(gen_ai);
    if opts.extension_attributes {
        for (k, v) in &ev.extensions {
            attrs.push(key_value(&format!("aep.ext.{k}"), any_value(v)));
        }
    }
    rec.insert("attributes".into(), Value::Array(attrs));

    // Events land on existing traces: parsed W3C fields (AEP-0005 §3.2).
    if let Some(tc) = ev.traceparent.as_deref().and_then(parse_traceparent) {
        rec.insert("flags".into(), tc.flags.into());
        rec.insert("traceId".into(), tc.trace_id.into());
        rec.insert("spanId".into(), tc.span_id.into());
    }
    rec.insert("eventName".into(), Value::String(format!("{TYPE_ROOT}{}", ev.r#type)));
    Value::Object(rec)
}

/// The OTLP/JSON `Resource` of a `service.name`.
pub fn resource(service_name: &str) -> Value {
    obj1("attributes", Value::Array(vec![key_value("service.name", str_value(service_name))]))
}

fn scope(opts: &OtlpOptions) -> Value {
    let mut s = Map::new();
    s.insert("name".into(), opts.scope_name.clone().into());
    if let Some(v) = &opts.scope_version {
        s.insert("version".into(), v.clone().into());
    }
    Value::Object(s)
}

/// A whole OTLP/JSON `ExportLogsServiceRequest`: one `resourceLogs` entry per distinct
/// `service.name` (first-seen order), one scope each, records in input order.
pub fn logs_request(events: &[Event], opts: &OtlpOptions) -> Value {
    let mut groups: Vec<(&str, Vec<Value>)> = Vec::new();
    for ev in events {
        let name = service_name(ev, opts);
        let rec = log_record(ev, opts);
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, recs)) => recs.push(rec),
            None => groups.push((name, vec![rec])),
        }
    }
    let resource_logs = groups
        .into_iter()
        .map(|(name, recs)| {
            let mut scope_logs = Map::with_capacity(2);
            scope_logs.insert("scope".into(), scope(opts));
            scope_logs.insert("logRecords".into(), Value::Array(recs));
            let mut rl = Map::with_capacity(2);
            rl.insert("resource".into(), resource(name));
            rl.insert("scopeLogs".into(), Value::Array(vec![Value::Object(scope_logs)]));
            Value::Object(rl)
        })
        .collect();
    obj1("resourceLogs", Value::Array(resource_logs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(v: Value) -> Event {
        Event::from_value(v).unwrap()
    }

    fn attr<'a>(rec: &'a Value, key: &str) -> Option<&'a Value> {
        rec["attributes"].as_array()?.iter().find(|kv| kv["key"] == key).map(|kv| &kv["value"])
    }

    fn completed() -> Event {
        event(
            json!({"aep":"0.1","id":"e9","type":"tool.completed","subject":"Edit","time":"2026-01-02T03:04:05.5+01:00",
            "source":"aep://h/agent/codex/session/s1","agent":"codex","session":"s1","run":"r1","seq":4,"epoch":1,
            "severity":"notice","capture":"metadata",
            "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
            "data":{"tool":{"name":"Edit","call_id":"c1"},"ok":true,"ratio":0.25,"tags":["a",null],
                "gen_ai.usage.input_tokens":12,"gen_ai.request.model":"m-1"}}),
        )
    }

    #[test]
    fn severity_table_and_inverse_buckets() {
        for s in Severity::ALL {
            let (_, n) = severity_to_otlp(s);
            assert_eq!(severity_from_otlp(i32::from(n)), Some(s));
        }
        assert_eq!(severity_to_otlp(Severity::Notice), ("INFO2", 10));
        assert_eq!(severity_to_otlp(Severity::Critical), ("FATAL", 21));
        assert_eq!(severity_from_otlp(8), Some(Severity::Debug));
        assert_eq!(severity_from_otlp(12), Some(Severity::Notice));
        assert_eq!(severity_from_otlp(16), Some(Severity::Warning));
        assert_eq!(severity_from_otlp(20), Some(Severity::Error));
        assert_eq!(severity_from_otlp(24), Some(Severity::Critical));
        assert_eq!(severity_from_otlp(0), None);
        assert_eq!(severity_from_otlp(25), None);
    }

    #[test]
    fn parses_rfc3339() {
        assert_eq!(rfc3339_to_unix_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_to_unix_nanos("1970-01-02T00:00:01.5Z"), Some(86_401_500_000_000));
        // 2000-03-01 is day 11017 (leap-year February crossed).
        assert_eq!(rfc3339_to_unix_nanos("2000-03-01T00:00:00Z"), Some(11_017 * 86_400 * 1_000_000_000));
        assert_eq!(rfc3339_to_unix_nanos("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(rfc3339_to_unix_nanos("1970-01-01T00:00:00.123456789123-00:30"), Some(1_800_123_456_789));
        assert!(is_rfc3339("1969-12-31T23:59:59Z"));
        assert!(!is_rfc3339("1969-12-31"));
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z",
            "1969-12-31T23:59:59Z",
            "2026-01-01T00:00:00+1:00",
            "２０２６-01-01T00:00:00Z",
        ] {
            assert_eq!(rfc3339_to_unix_nanos(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_traceparent() {
        let tc = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        assert_eq!(tc.flags, 1);
        assert_eq!(tc.span_id, "b7ad6b7169203331");
        for bad in [
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",
            "garbage",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        assert!(parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future").is_some());
    }

    #[test]
    fn projects_fields_hoists_gen_ai_and_encodes_otlp_json() {
        let rec = log_record(&completed(), &OtlpOptions::default());
        // 2026-01-02T02:04:05.5Z
        let expect = rfc3339_to_unix_nanos("2026-01-02T02:04:05.5Z").unwrap();
        assert_eq!(rec["timeUnixNano"], expect.to_string());
        assert_eq!(rec["severityText"], "INFO2");
        assert_eq!(rec["severityNumber"], 10);
        assert_eq!(rec["eventName"], "dev.aep.tool.completed");
        assert_eq!(rec["traceId"], "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(rec["spanId"], "b7ad6b7169203331");
        assert_eq!(rec["flags"], 3);
        assert_eq!(attr(&rec, "aep.sequence"), Some(&json!({"intValue":"4"})));
        assert_eq!(attr(&rec, "aep.epoch"), Some(&json!({"intValue":"1"})));
        assert_eq!(attr(&rec, "aep.subject"), Some(&json!({"stringValue":"Edit"})));
        assert_eq!(attr(&rec, "aep.step"), None);
        assert_eq!(attr(&rec, "gen_ai.usage.input_tokens"), Some(&json!({"intValue":"12"})));
        assert_eq!(attr(&rec, "gen_ai.request.model"), Some(&json!({"stringValue":"m-1"})));
        let body = &rec["body"]["kvlistValue"]["values"];
        let keys: Vec<_> = body.as_array().unwrap().iter().map(|kv| kv["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["tool", "ok", "ratio", "tags"]);
        assert_eq!(body[1]["value"], json!({"boolValue": true}));
        assert_eq!(body[2]["value"], json!({"doubleValue": 0.25}));
        assert_eq!(body[3]["value"], json!({"arrayValue":{"values":[{"stringValue":"a"},{}]}}));
        assert!(!rec["body"].to_string().contains("gen_ai"));
    }

    #[test]
    fn ceiling_strips_payload_before_projection() {
        let mut ev = completed();
        ev.capture = Some(Capture::Full);
        let rec = log_record(&ev, &OtlpOptions::default());
        assert!(rec.get("body").is_none());
        assert!(attr(&rec, "gen_ai.usage.input_tokens").is_none());
        assert_eq!(attr(&rec, "aep.capture"), Some(&json!({"stringValue":"full"})));
        let full = OtlpOptions { max_capture: Capture::Full, ..OtlpOptions::default() };
        assert!(log_record(&ev, &full).get("body").is_some());
        ev.capture = Some(Capture::None);
        assert!(log_record(&ev, &full).get("body").is_none());
        // Absent capture means metadata: it passes the default ceiling.
        ev.capture = None;
        let rec = log_record(&ev, &OtlpOptions::default());
        assert!(rec.get("body").is_some());
        assert!(attr(&rec, "aep.capture").is_none());
        let none = OtlpOptions { max_capture: Capture::None, ..OtlpOptions::default() };
        assert!(log_record(&ev, &none).get("body").is_none());
    }

    #[test]
    fn defaults_and_bad_fields_degrade_quietly() {
        let ev = event(json!({"aep":"0.1","id":"m","type":"agent.presence","time":"not a time",
            "source":"aep://h/agent/a","agent":"a","traceparent":"junk","acmezone":"eu"}));
        let rec = log_record(&ev, &OtlpOptions::default());
        assert_eq!(rec["severityText"], "INFO");
        assert!(rec.get("timeUnixNano").is_none());
        assert!(rec.get("traceId").is_none());
        assert!(rec.get("body").is_none());
        assert!(attr(&rec, "aep.ext.acmezone").is_none());
        let with_ext = OtlpOptions { extension_attributes: true, ..OtlpOptions::default() };
        assert_eq!(attr(&log_record(&ev, &with_ext), "aep.ext.acmezone"), Some(&json!({"stringValue":"eu"})));
    }

    #[test]
    fn request_groups_by_service_name() {
        let a1 = completed();
        let mut b = completed();
        b.agent = "claude-code".into();
        b.id = "b".into();
        let mut a2 = completed();
        a2.id = "a2".into();
        let req = logs_request(&[a1, b.clone(), a2], &OtlpOptions::default());
        let rl = req["resourceLogs"].as_array().unwrap();
        assert_eq!(rl.len(), 2);
        assert_eq!(rl[0]["resource"]["attributes"][0], json!({"key":"service.name","value":{"stringValue":"codex"}}));
        let recs = rl[0]["scopeLogs"][0]["logRecords"].as_array().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(attr(&recs[1], "aep.event_id"), Some(&json!({"stringValue":"a2"})));
        assert_eq!(rl[1]["scopeLogs"][0]["scope"]["name"], "aep-bridge");
        let shared = OtlpOptions { service_name: Some("relay".into()), ..OtlpOptions::default() };
        let req = logs_request(&[completed(), b], &shared);
        assert_eq!(req["resourceLogs"].as_array().unwrap().len(), 1);
        assert_eq!(logs_request(&[], &shared), json!({"resourceLogs": []}));
    }
}
