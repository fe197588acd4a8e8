//! The CloudEvents bridge (AEP-0005 §1-§2): AEP Event ⇄ CloudEvents 1.0, JSON format,
//! structured mode (`application/cloudevents+json`), plus the batch format
//! (`application/cloudevents-batch+json`).
//!
//! The mapping is mechanical and reversible: [`from_cloudevent`] of [`to_cloudevent`]
//! gives back the original Event, extension attributes in order included.

use aep_schemas::Event;
use serde_json::{Map, Value};

/// The frozen reverse-DNS root prepended to AEP types at the bridges (AEP-0005 §1 B3).
pub const TYPE_ROOT: &str = "dev.aep.";

/// Media type of one structured-mode CloudEvent.
pub const CE_CONTENT_TYPE: &str = "application/cloudevents+json";

/// Media type of a JSON batch of structured-mode CloudEvents.
pub const CE_BATCH_CONTENT_TYPE: &str = "application/cloudevents-batch+json";

/// The CloudEvents spec version this bridge emits and accepts (AEP-0005 §1 B1).
pub const SPEC_VERSION: &str = "1.0";

/// The B4/B5 table (AEP-0005 §1): AEP attribute name → CE attribute name.
pub const ATTRIBUTE_TABLE: [(&str, &str); 11] = [
    ("aep", "aepversion"),
    ("agent", "aepagentid"),
    ("session", "aepsessionid"),
    ("run", "aeprunid"),
    ("step", "aepstep"),
    ("seq", "aepsequence"),
    ("epoch", "aepepoch"),
    ("cause", "aepcausationid"),
    ("severity", "aepseverity"),
    ("capture", "aepcapture"),
    ("traceparent", "traceparent"),
];

/// CE context attributes (core and JSON-format members) an AEP extension may not shadow.
const CE_RESERVED: [&str; 9] =
    ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data", "data_base64"];

/// Why an inbound CloudEvent cannot become an AEP Event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CeError {
    /// The input is not a JSON object.
    #[error("a structured-mode CloudEvent is a JSON object")]
    NotObject,
    /// A batch is not a JSON array.
    #[error("a CloudEvents batch is a JSON array")]
    NotArray,
    /// `specversion` is missing or is not `1.0`.
    #[error("unsupported specversion {0:?} (expected \"1.0\")")]
    SpecVersion(String),
    /// The `type` does not begin with the frozen root: a foreign CE event (AEP-0005 §2 rule 3).
    #[error("foreign CloudEvent type {0:?}: only `dev.aep.*` events map back to AEP (AEP-0005 §2 rule 3)")]
    ForeignType(String),
    /// A mapped attribute has a value the AEP envelope cannot hold.
    #[error("attribute `{attribute}`: {message}")]
    Attribute {
        /// The CE attribute name.
        attribute: String,
        /// What is wrong with it.
        message: String,
    },
    /// The mapped envelope is not a valid AEP Event.
    #[error("the mapped envelope is not an AEP Event: {0}")]
    Envelope(#[from] aep_schemas::EnvelopeError),
    /// The Event carries an extension that would shadow a CloudEvents attribute.
    #[error("extension attribute `{0}` collides with a CloudEvents attribute of the mapping")]
    Collision(String),
    /// The output violates the CloudEvents 1.0 JSON format.
    #[error("not a valid CloudEvents 1.0 event: {0}")]
    Invalid(String),
}

/// The result of mapping one inbound CloudEvent: the Event and its diagnostics, or why not.
pub type Inbound = Result<(Event, Vec<Diagnostic>), CeError>;

/// A non-fatal finding of the inverse mapping: an attribute dropped or coerced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The inbound CE attribute concerned.
    pub attribute: String,
    /// The rule applied, e.g. `AEP-0005 §2 rule 2`.
    pub rule: &'static str,
    /// What happened and why.
    pub message: String,
}

impl Diagnostic {
    fn new(attribute: &str, rule: &'static str, message: impl Into<String>) -> Self {
        Self { attribute: attribute.to_owned(), rule, message: message.into() }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: `{}` {}", self.rule, self.attribute, self.message)
    }
}

/// `true` when `name` is a legal AEP extension name: `[a-z0-9]{1,20}` (AEP-0001 §5.4).
pub fn is_legal_extension_name(name: &str) -> bool {
    (1..=20).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn ce_name_of(aep: &str) -> Option<&'static str> {
    ATTRIBUTE_TABLE.iter().find(|(a, _)| *a == aep).map(|(_, c)| *c)
}

fn aep_name_of(ce: &str) -> Option<&'static str> {
    ATTRIBUTE_TABLE.iter().find(|(_, c)| *c == ce).map(|(a, _)| *a)
}

/// `true` when an AEP extension named `name` would shadow a CE attribute this mapping writes.
fn collides(name: &str) -> bool {
    CE_RESERVED.contains(&name) || aep_name_of(name).is_some()
}

/// Forward map (AEP-0005 §1): one Event as a structured-mode CloudEvents 1.0 JSON object.
///
/// Absent optional attributes produce no CE attribute. An extension attribute that would
/// shadow a CE attribute of the mapping (only possible on a hand-built Event that skipped
/// AEP-0001 §5.4 validation) is left out; [`to_cloudevent_checked`] refuses it instead.
pub fn to_cloudevent(ev: &Event) -> Value {
    let mut m = Map::new();
    let s = |v: &str| Value::String(v.to_owned());
    // B1 constants, B2 pass-through, B3 type root.
    m.insert("specversion".into(), s(SPEC_VERSION));
    m.insert("id".into(), s(&ev.id));
    m.insert("source".into(), s(&ev.source));
    m.insert("type".into(), Value::String(format!("{TYPE_ROOT}{}", ev.r#type)));
    if let Some(v) = &ev.subject {
        m.insert("subject".into(), s(v));
    }
    m.insert("time".into(), s(&ev.time));
    if ev.data.is_some() {
        m.insert("datacontenttype".into(), s("application/json"));
    }
    // B4 prefixed extensions, B5 traceparent, in the table's order; absent stays absent.
    m.insert("aepversion".into(), s(&ev.aep));
    m.insert("aepagentid".into(), s(&ev.agent));
    let strings = [("session", &ev.session), ("run", &ev.run), ("step", &ev.step)];
    for (k, v) in strings {
        if let (Some(v), Some(name)) = (v, ce_name_of(k)) {
            m.insert(name.into(), s(v));
        }
    }
    if let Some(v) = ev.seq {
        m.insert("aepsequence".into(), v.into());
    }
    if let Some(v) = ev.epoch {
        m.insert("aepepoch".into(), v.into());
    }
    if let Some(v) = &ev.cause {
        m.insert("aepcausationid".into(), s(v));
    }
    if let Some(v) = ev.severity {
        m.insert("aepseverity".into(), s(v.as_str()));
    }
    if let Some(v) = ev.capture {
        m.insert("aepcapture".into(), s(v.as_str()));
    }
    if let Some(v) = &ev.traceparent {
        m.insert("traceparent".into(), s(v));
    }
    // B4: AEP extension attributes pass through verbatim.
    for (k, v) in &ev.extensions {
        if !collides(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    if let Some(d) = &ev.data {
        m.insert("data".into(), d.clone());
    }
    Value::Object(m)
}

/// Like [`to_cloudevent`], but refuses an Event whose extension attributes would shadow a
/// CE attribute of the mapping instead of leaving them out.
pub fn to_cloudevent_checked(ev: &Event) -> Result<Value, CeError> {
    if let Some(k) = ev.extensions.keys().find(|k| collides(k)) {
        return Err(CeError::Collision(k.clone()));
    }
    Ok(to_cloudevent(ev))
}

/// Inverse map (AEP-0005 §2): a `dev.aep.*` structured-mode CloudEvent back to an Event.
///
/// Rule 1: the B1 constants are dropped, the B3 root stripped, the B4/B5 table reversed.
/// Rule 2: unknown extension attributes with legal AEP names and scalar values are kept
/// as AEP extension attributes; any other is dropped with a [`Diagnostic`].
/// Rule 3: a foreign `type` is an error ([`CeError::ForeignType`]).
pub fn from_cloudevent(ce: &Value) -> Inbound {
    let Value::Object(obj) = ce else {
        return Err(CeError::NotObject);
    };
    match obj.get("specversion") {
        Some(Value::String(v)) if v == SPEC_VERSION => {}
        Some(Value::String(v)) => return Err(CeError::SpecVersion(v.clone())),
        Some(other) => return Err(CeError::SpecVersion(other.to_string())),
        None => return Err(CeError::SpecVersion(String::new())),
    }
    let bare_type = match obj.get("type") {
        Some(Value::String(t)) => match t.strip_prefix(TYPE_ROOT) {
            Some(rest) => rest.to_owned(),
            // AEP-0005 §2 rule 3: foreign CE events are out of scope.
            None => return Err(CeError::ForeignType(t.clone())),
        },
        Some(other) => return Err(CeError::ForeignType(other.to_string())),
        None => return Err(CeError::ForeignType(String::new())),
    };

    let mut diags = Vec::new();
    let mut core = Map::new();
    let mut exts = Map::new();
    for (name, value) in obj {
        match name.as_str() {
            "specversion" => {}
            "type" => {
                core.insert("type".into(), Value::String(bare_type.clone()));
            }
            "datacontenttype" => {
                // B1 constant: dropped. A non-JSON media type cannot describe an AEP payload.
                if !is_json_media_type(value) {
                    diags.push(Diagnostic::new(
                        name,
                        "AEP-0005 §1 B1",
                        format!("dropped: {value} is not the JSON media type the mapping writes"),
                    ));
                }
            }
            "data_base64" => {
                return Err(CeError::Attribute {
                    attribute: name.clone(),
                    message: "binary data cannot ride an AEP Event (`data` is a JSON object, AEP-0001 §5.1 #17)".into(),
                });
            }
            // B2 pass-through.
            "id" | "source" | "subject" | "time" | "data" => {
                core.insert(name.clone(), value.clone());
            }
            "aepsequence" | "aepepoch" => {
                let aep = aep_name_of(name).unwrap_or("seq");
                core.insert(aep.into(), uint_attr(name, value, &mut diags)?);
            }
            _ => {
                if let Some(aep) = aep_name_of(name) {
                    // B4/B5 reversed; value types are checked by Event::from_map.
                    core.insert(aep.into(), value.clone());
                } else if let Some(d) = extension_problem(name, value) {
                    // AEP-0005 §2 rule 2: illegal names / values are dropped with a diagnostic.
                    diags.push(d);
                } else {
                    exts.insert(name.clone(), value.clone());
                }
            }
        }
    }
    let mut ev = Event::from_map(core)?;
    ev.extensions = exts;
    Ok((ev, diags))
}

fn is_json_media_type(v: &Value) -> bool {
    let Value::String(s) = v else { return false };
    let base = s.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    base == "application/json" || base.ends_with("+json")
}

fn uint_attr(name: &str, value: &Value, diags: &mut Vec<Diagnostic>) -> Result<Value, CeError> {
    match value {
        Value::Number(n) if n.as_u64().is_some() => Ok(value.clone()),
        // Binary-mode hops carry every attribute as a string: accept the canonical decimal form.
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => match s.parse::<u64>() {
            Ok(n) => {
                diags.push(Diagnostic::new(name, "AEP-0005 §1 B4", "coerced from a decimal string to an integer"));
                Ok(n.into())
            }
            Err(_) => Err(CeError::Attribute { attribute: name.into(), message: format!("{s:?} is out of range") }),
        },
        other => {
            Err(CeError::Attribute { attribute: name.into(), message: format!("must be an integer >= 0, got {other}") })
        }
    }
}

/// Why an unknown CE attribute cannot ride the envelope as an extension, if it cannot.
fn extension_problem(name: &str, value: &Value) -> Option<Diagnostic> {
    const RULE: &str = "AEP-0005 §2 rule 2";
    if !is_legal_extension_name(name) {
        return Some(Diagnostic::new(name, RULE, "dropped: name violates the AEP-0001 §5.4 grammar [a-z0-9]{1,20}"));
    }
    if aep_schemas::event::CORE_ATTRIBUTES.contains(&name) {
        return Some(Diagnostic::new(name, RULE, "dropped: name collides with a core AEP attribute (AEP-0001 §5.4)"));
    }
    let scalar = match value {
        Value::String(_) | Value::Bool(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    if !scalar {
        return Some(Diagnostic::new(
            name,
            RULE,
            format!("dropped: value {value} is not a string, integer or boolean (AEP-0001 §5.4)"),
        ));
    }
    None
}

/// Forward-maps a batch as one `application/cloudevents-batch+json` array.
pub fn to_cloudevents_batch(events: &[Event]) -> Value {
    Value::Array(events.iter().map(to_cloudevent).collect())
}

/// Inverse-maps an `application/cloudevents-batch+json` array, one result per member.
pub fn from_cloudevents_batch(batch: &Value) -> Result<Vec<Inbound>, CeError> {
    match batch {
        Value::Array(items) => Ok(items.iter().map(from_cloudevent).collect()),
        _ => Err(CeError::NotArray),
    }
}

/// Checks a structured-mode CloudEvent against the CloudEvents 1.0 core and JSON format
/// rules (AEP-0005 §5 item 2): required attributes, attribute-name legality, and the JSON
/// types of every context attribute (extension integers in CE's 32-bit range).
pub fn validate_cloudevent(ce: &Value) -> Result<(), CeError> {
    let bad = |m: String| Err(CeError::Invalid(m));
    let Value::Object(obj) = ce else {
        return Err(CeError::NotObject);
    };
    for req in ["specversion", "id", "source", "type"] {
        match obj.get(req) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(other) => return bad(format!("`{req}` must be a non-empty string, got {other}")),
            None => return bad(format!("required attribute `{req}` is missing")),
        }
    }
    if obj.get("specversion").and_then(Value::as_str) != Some(SPEC_VERSION) {
        return bad("`specversion` must be \"1.0\"".into());
    }
    if obj.contains_key("data") && obj.contains_key("data_base64") {
        return bad("`data` and `data_base64` are mutually exclusive".into());
    }
    for (name, value) in obj {
        match name.as_str() {
            "data" => {}
            "data_base64" => {
                if !value.is_string() {
                    return bad("`data_base64` must be a string".into());
                }
            }
            "time" => match value.as_str() {
                Some(t) if aep_schemas::time::parse_rfc3339(t).is_some() => {}
                _ => return bad(format!("`time` must be an RFC 3339 timestamp, got {value}")),
            },
            "subject" | "datacontenttype" | "dataschema" => {
                if value.as_str().is_none_or(str::is_empty) {
                    return bad(format!("`{name}` must be a non-empty string, got {value}"));
                }
            }
            _ => {
                if !is_legal_extension_name(name) {
                    return bad(format!("attribute name `{name}` is not [a-z0-9]{{1,20}}"));
                }
                match value {
                    Value::String(_) | Value::Bool(_) => {}
                    Value::Number(n) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {}
                    Value::Number(n) => return bad(format!("`{name}`: {n} is not a CE Integer (32-bit signed)")),
                    other => return bad(format!("`{name}`: {other} is not a CE attribute value")),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(v: Value) -> Event {
        Event::from_value(v).unwrap()
    }

    fn sample() -> Event {
        event(json!({"aep":"0.1","id":"e1","type":"tool.completed","subject":"Read","time":"2026-01-02T03:04:05.678Z",
            "source":"aep://h/agent/codex/session/s1","agent":"codex","session":"s1","run":"r1","step":"st1",
            "seq":7,"epoch":2,"cause":"e0","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
            "severity":"warning","capture":"full","zzvendor":"x","acmecount":3,"acmeflag":false,
            "data":{"tool":{"name":"Read"},"gen_ai.usage.input_tokens":5}}))
    }

    #[test]
    fn forward_applies_b1_to_b5() {
        let ce = to_cloudevent(&sample());
        assert_eq!(ce["specversion"], "1.0");
        assert_eq!(ce["type"], "dev.aep.tool.completed");
        assert_eq!(ce["datacontenttype"], "application/json");
        assert_eq!(ce["aepversion"], "0.1");
        assert_eq!(ce["aepagentid"], "codex");
        assert_eq!(ce["aepsessionid"], "s1");
        assert_eq!(ce["aeprunid"], "r1");
        assert_eq!(ce["aepstep"], "st1");
        assert_eq!(ce["aepsequence"], 7);
        assert_eq!(ce["aepepoch"], 2);
        assert_eq!(ce["aepcausationid"], "e0");
        assert_eq!(ce["aepseverity"], "warning");
        assert_eq!(ce["aepcapture"], "full");
        assert_eq!(ce["traceparent"], sample().traceparent.unwrap());
        assert_eq!(ce["acmecount"], 3);
        assert_eq!(ce["data"], sample().data.unwrap());
        for aep in ["agent", "session", "seq", "severity", "capture", "aep"] {
            assert!(ce.get(aep).is_none(), "{aep} must be renamed");
        }
        validate_cloudevent(&ce).unwrap();
    }

    #[test]
    fn absent_optionals_stay_absent() {
        let ev = event(json!({"aep":"0.1","id":"m","type":"progress.status","time":"2026-01-02T03:04:05Z",
            "source":"aep://h/agent/bash","agent":"bash","session":"s","seq":0}));
        let ce = to_cloudevent(&ev);
        let keys: Vec<_> = ce.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            ["specversion", "id", "source", "type", "time", "aepversion", "aepagentid", "aepsessionid", "aepsequence"]
        );
        let (back, diags) = from_cloudevent(&ce).unwrap();
        assert_eq!(back, ev);
        assert!(diags.is_empty());
    }

    #[test]
    fn round_trip_is_identity_including_extension_order() {
        let ev = sample();
        let (back, diags) = from_cloudevent(&to_cloudevent(&ev)).unwrap();
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(back, ev);
        assert_eq!(back.extensions.keys().collect::<Vec<_>>(), ["zzvendor", "acmecount", "acmeflag"]);
        assert_eq!(back.to_json(), ev.to_json());
    }

    #[test]
    fn round_trips_every_envelope_shape() {
        let shapes = [
            json!({"aep":"0.1","id":"p","type":"agent.presence","time":"2026-01-02T03:04:05Z",
                "source":"aep://h/agent/a","agent":"a","severity":"debug","capture":"metadata","data":{"state":"online"}}),
            json!({"aep":"0.1","id":"v","type":"x.claude-code.session.config_change","time":"2026-01-02T03:04:05Z",
                "source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":9,"epoch":0}),
            json!({"aep":"0.1","id":"c","type":"control.cancel","subject":"r1","time":"2026-01-02T03:04:05.1-07:00",
                "source":"aep://other/agent/ui","agent":"ui","session":"s","data":{"reason":"user"}}),
            json!({"aep":"0.2","id":"n","type":"run.started","time":"2026-01-02T03:04:05Z","source":"urn:x",
                "agent":"a","session":"s","run":"r","seq":18446744073709551615u64,"capture":"none","data":{}}),
        ];
        for raw in shapes {
            let ev = event(raw.clone());
            let ce = to_cloudevent(&ev);
            let (back, diags) = from_cloudevent(&ce).unwrap();
            assert!(diags.is_empty());
            assert_eq!(back, ev);
            assert_eq!(back.to_value(), raw);
        }
    }

    #[test]
    fn inbound_preserves_legal_and_drops_illegal_with_diagnostics() {
        let mut ce = to_cloudevent(&sample());
        let o = ce.as_object_mut().unwrap();
        o.insert("aepnewthing".into(), json!("v2"));
        o.insert("plainext".into(), json!(true));
        o.insert("aep_bad".into(), json!("x"));
        o.insert("Upper".into(), json!("x"));
        o.insert("objext".into(), json!({"a":1}));
        o.insert("floatext".into(), json!(1.5));
        o.insert("session".into(), json!("shadow"));
        o.insert("dataschema".into(), json!("https://example.invalid/s"));
        let (ev, diags) = from_cloudevent(&ce).unwrap();
        assert_eq!(ev.extensions["aepnewthing"], "v2");
        assert_eq!(ev.extensions["plainext"], true);
        assert_eq!(ev.extensions["dataschema"], "https://example.invalid/s");
        assert_eq!(ev.session.as_deref(), Some("s1"));
        let dropped: Vec<_> = diags.iter().map(|d| d.attribute.as_str()).collect();
        assert_eq!(dropped, ["aep_bad", "Upper", "objext", "floatext", "session"]);
        for k in &dropped {
            assert!(!ev.extensions.contains_key(*k));
        }
        assert!(diags.iter().all(|d| d.rule == "AEP-0005 §2 rule 2"));
    }

    #[test]
    fn inbound_refuses_foreign_and_broken_events() {
        let good = to_cloudevent(&sample());
        let mut foreign = good.clone();
        foreign["type"] = json!("com.example.thing");
        assert!(matches!(from_cloudevent(&foreign), Err(CeError::ForeignType(_))));
        let mut v = good.clone();
        v["specversion"] = json!("0.3");
        assert!(matches!(from_cloudevent(&v), Err(CeError::SpecVersion(_))));
        let mut v = good.clone();
        v.as_object_mut().unwrap().remove("aepagentid");
        assert!(matches!(from_cloudevent(&v), Err(CeError::Envelope(_))));
        let mut v = good.clone();
        v["aepsequence"] = json!(-1);
        assert!(matches!(from_cloudevent(&v), Err(CeError::Attribute { .. })));
        let mut v = good.clone();
        v["aepseverity"] = json!("loud");
        assert!(matches!(from_cloudevent(&v), Err(CeError::Envelope(_))));
        let mut v = good.clone();
        v["data"] = json!("text");
        assert!(from_cloudevent(&v).is_err());
        let mut v = good;
        v.as_object_mut().unwrap().remove("data");
        v["data_base64"] = json!("AAAA");
        assert!(matches!(from_cloudevent(&v), Err(CeError::Attribute { .. })));
        assert_eq!(from_cloudevent(&json!([1])).unwrap_err(), CeError::NotObject);
    }

    #[test]
    fn inbound_coerces_decimal_string_positions() {
        let mut ce = to_cloudevent(&sample());
        ce["aepsequence"] = json!("7");
        let (ev, diags) = from_cloudevent(&ce).unwrap();
        assert_eq!(ev.seq, Some(7));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].attribute, "aepsequence");
    }

    #[test]
    fn colliding_extensions_are_left_out_or_refused() {
        let mut ev = sample();
        ev.extensions.insert("aepsequence".into(), json!(99));
        ev.extensions.insert("specversion".into(), json!("2.0"));
        let ce = to_cloudevent(&ev);
        assert_eq!(ce["aepsequence"], 7);
        assert_eq!(ce["specversion"], "1.0");
        assert!(matches!(to_cloudevent_checked(&ev), Err(CeError::Collision(_))));
        assert!(to_cloudevent_checked(&sample()).is_ok());
    }

    #[test]
    fn batch_round_trips_and_reports_per_member() {
        let a = sample();
        let mut b = sample();
        b.id = "e2".into();
        b.data = None;
        let batch = to_cloudevents_batch(&[a.clone(), b.clone()]);
        assert!(batch[1].get("datacontenttype").is_none());
        let mut items = from_cloudevents_batch(&batch).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items.remove(0).unwrap().0, a);
        assert_eq!(items.remove(0).unwrap().0, b);
        let mixed = json!([to_cloudevent(&a), {"specversion":"1.0","id":"x","source":"s","type":"other"}]);
        let items = from_cloudevents_batch(&mixed).unwrap();
        assert!(items[0].is_ok() && items[1].is_err());
        assert_eq!(from_cloudevents_batch(&json!({})).unwrap_err(), CeError::NotArray);
    }

    #[test]
    fn validator_rejects_what_ce_rejects() {
        let ce = to_cloudevent(&sample());
        validate_cloudevent(&ce).unwrap();
        for (k, v) in [
            ("id", json!("")),
            ("time", json!("yesterday")),
            ("Bad", json!("x")),
            ("toolongextensionname21", json!("x")),
            ("obj", json!({})),
            ("big", json!(1u64 << 40)),
            ("flt", json!(0.5)),
        ] {
            let mut v2 = ce.clone();
            v2[k] = v;
            assert!(validate_cloudevent(&v2).is_err(), "{k} should be invalid");
        }
        let mut v2 = ce;
        v2.as_object_mut().unwrap().remove("source");
        assert!(validate_cloudevent(&v2).is_err());
    }
}
