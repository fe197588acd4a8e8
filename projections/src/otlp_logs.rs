//! OTLP export (AEP-0005 §3): AEP Events as OTLP LogRecords, built as
//! `opentelemetry-proto` messages (encode with prost, send with tonic, or read as OTLP/JSON
//! through [`crate::otlp::to_json`]).
//!
//! The `max_capture` ceiling (default `metadata`) is applied before projection (§3.3):
//! an Event whose payload does not survive the ceiling exports envelope-derived
//! attributes only, with no `body` and no hoisted `gen_ai.*` attributes.

use aep_schemas::{Capture, Event, Severity};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Av;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValueList};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use serde_json::{Map, Value};

use crate::ce::TYPE_ROOT;
use crate::otlp::{ExportLogsServiceRequest, any_value_keep_null, group_by, key_value, resource, scope, string, uint};

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

/// Converts an RFC 3339 timestamp to nanoseconds since the Unix epoch; `None` when it is
/// malformed or before 1970.
pub fn rfc3339_to_unix_nanos(t: &str) -> Option<u64> {
    aep_schemas::time::parse_rfc3339_nanos(t)
}

/// `true` when `t` is a well-formed RFC 3339 `date-time` (any year).
pub fn is_rfc3339(t: &str) -> bool {
    aep_schemas::time::parse_rfc3339(t).is_some()
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

/// One Event as an OTLP `LogRecord` (AEP-0005 §3.2), the ceiling applied first.
pub fn log_record(ev: &Event, opts: &OtlpOptions) -> LogRecord {
    log_record_on(ev, opts, None)
}

/// [`log_record`] placed on a synthesized span: with `span`, the record carries that span's
/// trace and span ids (instead of the Event's own `traceparent`), so a backend can jump
/// from the log line to the span the bridge exported for it ([`crate::spans::LogSpans`]).
pub fn log_record_on(ev: &Event, opts: &OtlpOptions, span: Option<crate::spans::SpanContext>) -> LogRecord {
    // RFC 3339 → epoch nanos; an unparseable time stays 0 (unknown).
    let time_unix_nano = rfc3339_to_unix_nanos(&ev.time).unwrap_or(0);
    // AEP-0005 §3.4: severity defaults to info through the accessor.
    let (text, number) = severity_to_otlp(ev.severity());

    let data = surviving_data(ev, opts.max_capture);
    // `gen_ai.*` members hoist to attributes verbatim; the rest is the body.
    let mut body = Vec::new();
    let mut gen_ai = Vec::new();
    if let Some(d) = data {
        for (k, v) in d {
            let kv = key_value(k, any_value_keep_null(v));
            if k.starts_with("gen_ai.") { gen_ai.push(kv) } else { body.push(kv) }
        }
    }
    let body = (!body.is_empty()).then_some(AnyValue { value: Some(Av::KvlistValue(KeyValueList { values: body })) });

    let mut attrs = Vec::with_capacity(12 + gen_ai.len());
    attrs.push(key_value("aep.agent_id", string(&ev.agent)));
    attrs.push(key_value("aep.event_id", string(&ev.id)));
    // The effective level (AEP-0001 §8: absent means `metadata`), as the reference projection writes it.
    attrs.push(key_value("aep.capture", string(ev.capture().as_str())));
    attrs.push(key_value("aep.source", string(&ev.source)));
    for (k, v) in [("aep.session_id", &ev.session), ("aep.run_id", &ev.run), ("aep.step", &ev.step)] {
        if let Some(v) = v {
            attrs.push(key_value(k, string(v)));
        }
    }
    if let Some(v) = ev.seq {
        attrs.push(key_value("aep.sequence", uint(v)));
    }
    if let Some(v) = ev.epoch {
        attrs.push(key_value("aep.epoch", uint(v)));
    }
    if let Some(v) = &ev.cause {
        attrs.push(key_value("aep.causation_id", string(v)));
    }
    if let Some(v) = &ev.subject {
        attrs.push(key_value("aep.subject", string(v)));
    }
    attrs.extend(gen_ai);
    if opts.extension_attributes {
        for (k, v) in &ev.extensions {
            attrs.push(key_value(&format!("aep.ext.{k}"), any_value_keep_null(v)));
        }
    }

    let mut rec = LogRecord {
        time_unix_nano,
        severity_number: i32::from(number),
        severity_text: text.to_owned(),
        body,
        attributes: attrs,
        event_name: format!("{TYPE_ROOT}{}", ev.r#type),
        ..Default::default()
    };
    // Events land on existing traces: the parsed W3C fields (AEP-0005 §3.2).
    let tp = ev.traceparent.as_deref().and_then(aep_schemas::time::parse_traceparent);
    if let Some(c) = span {
        // The synthesized span is exported sampled (its traceparent's flags when it joined one).
        rec.flags = u32::from(tp.map_or(1, |t| t.flags));
        rec.trace_id = c.trace_id.to_vec();
        rec.span_id = c.span_id.to_vec();
    } else if let Some(t) = tp {
        rec.flags = u32::from(t.flags);
        rec.trace_id = t.trace_id.to_vec();
        rec.span_id = t.span_id.to_vec();
    }
    rec
}

/// A whole OTLP `ExportLogsServiceRequest`: one `resourceLogs` entry per distinct
/// `service.name` (first-seen order), one scope each, records in input order. Events are
/// read where they are (no copy of a batch before projecting it).
pub fn logs_request<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    opts: &'a OtlpOptions,
) -> ExportLogsServiceRequest {
    let resource_logs = group_by(events, |ev| service_name(ev, opts))
        .into_iter()
        .map(|(name, evs)| ResourceLogs {
            resource: Some(resource(name)),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope(&opts.scope_name, opts.scope_version.as_deref())),
                log_records: evs.into_iter().map(|ev| log_record(ev, opts)).collect(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    ExportLogsServiceRequest { resource_logs }
}

/// [`logs_request`] with every record placed on its synthesized span by `spans` (Events it
/// does not place keep their own `traceparent`).
pub fn logs_request_on_spans<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    opts: &'a OtlpOptions,
    spans: &mut crate::spans::LogSpans,
) -> ExportLogsServiceRequest {
    let resource_logs = group_by(events, |ev| service_name(ev, opts))
        .into_iter()
        .map(|(name, evs)| ResourceLogs {
            resource: Some(resource(name)),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope(&opts.scope_name, opts.scope_version.as_deref())),
                log_records: evs.into_iter().map(|ev| log_record_on(ev, opts, spans.context(ev))).collect(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    ExportLogsServiceRequest { resource_logs }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The OTLP/JSON view the assertions read.
    fn log_record(ev: &Event, opts: &OtlpOptions) -> Value {
        crate::otlp::to_json(&super::log_record(ev, opts))
    }

    fn logs_request(evs: &[Event], opts: &OtlpOptions) -> Value {
        crate::otlp::to_json(&super::logs_request(evs, opts))
    }

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
        assert_eq!(attr(&rec, "aep.capture"), Some(&json!({"stringValue":"metadata"})), "the effective level");
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
        assert_eq!(logs_request(&[], &shared), json!({}), "an empty request is all defaults");
    }
}
