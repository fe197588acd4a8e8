//! The OCSF projection (AEP-0005 §4): AEP's security-relevant families (`session.started`
//! / `session.ended`, the `tool.*` outcomes, the `attention.*` lifecycle) become OCSF
//! 1.8.0 records of Authentication (3002), Process Activity (1007) and Detection Finding
//! (2004). Every other Event projects to nothing (§4.1): the OCSF channel is the
//! security signal, not the telemetry firehose.
//!
//! Records are built from the envelope plus the capture-surviving payload only (§4.3):
//! an Event whose `capture` is `none` or above [`OcsfOptions::max_capture`] projects
//! envelope-only (§4.6), so `unmapped.data`, the tool call id and payload-derived
//! dispositions are absent. Dispositions are claimed only where the wire asserts the
//! outcome (§4.5); `unmapped.aep` carries the whole envelope verbatim.

use aep_schemas::{Capture, Event, Severity};
use serde_json::{Map, Value, json};

/// The pinned OCSF schema version (AEP-0005 §4.1).
pub const OCSF_VERSION: &str = "1.8.0";

/// The OCSF profile under which `disposition_id` rides (AEP-0005 §4.3).
pub const SECURITY_CONTROL_PROFILE: &str = "security_control";

/// Settings of the projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OcsfOptions {
    /// Highest capture level whose payload may reach the record (AEP-0005 §4.6); default
    /// `metadata`. Events above it project envelope-only.
    pub max_capture: Capture,
}

impl Default for OcsfOptions {
    fn default() -> Self {
        Self { max_capture: Capture::Metadata }
    }
}

/// The OCSF event classes the projection targets (AEP-0005 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OcsfClass {
    /// Authentication (3002), category 3 Identity & Access Management.
    Authentication,
    /// Process Activity (1007), category 1 System Activity.
    ProcessActivity,
    /// Detection Finding (2004), category 2 Findings.
    DetectionFinding,
}

impl OcsfClass {
    /// `class_uid`.
    pub fn uid(self) -> u32 {
        match self {
            OcsfClass::Authentication => 3002,
            OcsfClass::ProcessActivity => 1007,
            OcsfClass::DetectionFinding => 2004,
        }
    }

    /// `category_uid` (AEP-0005 §4.2).
    pub fn category_uid(self) -> u32 {
        match self {
            OcsfClass::Authentication => 3,
            OcsfClass::ProcessActivity => 1,
            OcsfClass::DetectionFinding => 2,
        }
    }
}

/// One row of the AEP-0005 §4.2 class mapping table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassMapping {
    /// The target class.
    pub class: OcsfClass,
    /// `activity_id`.
    pub activity_id: u32,
    /// `status_id`, when the row asserts one.
    pub status_id: Option<u32>,
    /// `disposition_id` the type itself asserts (`attention.resolved` is payload-dependent,
    /// see [`to_ocsf`]).
    pub disposition_id: Option<u32>,
}

/// OCSF disposition 2 Blocked.
const BLOCKED: u32 = 2;
/// OCSF disposition 16 No Action.
const NO_ACTION: u32 = 16;

/// The AEP-0005 §4.2 row for a type, `None` for types outside the three families.
pub fn class_mapping(ty: &str) -> Option<ClassMapping> {
    use OcsfClass::*;
    let row =
        |class, activity_id, status_id, disposition_id| ClassMapping { class, activity_id, status_id, disposition_id };
    Some(match ty {
        "session.started" => row(Authentication, 1, Some(1), None),
        "session.ended" => row(Authentication, 2, Some(1), None),
        "tool.requested" => row(ProcessActivity, 1, None, None),
        "tool.completed" => row(ProcessActivity, 2, Some(1), None),
        "tool.failed" => row(ProcessActivity, 2, Some(2), None),
        "tool.denied" => row(ProcessActivity, 1, Some(2), Some(BLOCKED)),
        "attention.requested" => row(DetectionFinding, 1, Some(1), None),
        "attention.answered" => row(DetectionFinding, 2, Some(2), None),
        "attention.resolved" => row(DetectionFinding, 3, Some(4), None),
        "attention.timeout" => row(DetectionFinding, 3, None, Some(NO_ACTION)),
        _ => return None,
    })
}

/// OCSF `severity_id` for an AEP severity (AEP-0005 §4.4).
pub fn severity_id(s: Severity) -> u32 {
    match s {
        Severity::Debug | Severity::Info => 1,
        Severity::Notice => 2,
        Severity::Warning => 3,
        Severity::Error => 4,
        Severity::Critical => 5,
    }
}

/// Projects one Event to an OCSF record, `None` for Events outside the §4.2 families.
pub fn to_ocsf(ev: &Event, opts: &OcsfOptions) -> Option<Value> {
    let row = class_mapping(&ev.r#type)?;
    let class = row.class;
    // AEP-0005 §4.6: only a payload at or below the ceiling survives; `none` carries none.
    let capture = ev.capture();
    let payload =
        ev.data.as_ref().and_then(Value::as_object).filter(|_| capture != Capture::None && capture <= opts.max_capture);

    // AEP-0005 §4.5: dispositions only where the wire asserts the outcome.
    let disposition_id = match ev.r#type.as_str() {
        "attention.resolved" => payload
            .and_then(|d| d.get("resolution"))
            .and_then(Value::as_str)
            .filter(|r| *r == "dismissed")
            .map(|_| NO_ACTION),
        _ => row.disposition_id,
    };

    let mut rec = Map::with_capacity(16);
    rec.insert("class_uid".into(), class.uid().into());
    rec.insert("category_uid".into(), class.category_uid().into());
    rec.insert("activity_id".into(), row.activity_id.into());
    rec.insert("type_uid".into(), (class.uid() * 100 + row.activity_id).into());
    // §4.3: time as epoch milliseconds; an unparseable time is left out, never invented.
    if let Some(ms) = rfc3339_to_unix_ms(&ev.time) {
        rec.insert("time".into(), ms.into());
    }
    rec.insert("severity_id".into(), severity_id(ev.severity()).into());
    rec.insert("message".into(), Value::String(ev.r#type.clone()));

    let mut metadata = Map::with_capacity(6);
    metadata.insert("version".into(), OCSF_VERSION.into());
    metadata.insert("uid".into(), Value::String(ev.id.clone()));
    metadata.insert("original_time".into(), Value::String(ev.time.clone()));
    metadata.insert("product".into(), json!({ "name": ev.agent }));
    if let Some(cause) = &ev.cause {
        metadata.insert("correlation_uid".into(), Value::String(cause.clone()));
    }
    if disposition_id.is_some() {
        metadata.insert("profiles".into(), json!([SECURITY_CONTROL_PROFILE]));
    }
    rec.insert("metadata".into(), Value::Object(metadata));

    // §4.3 fidelity carrier: the envelope verbatim, plus the surviving payload.
    let mut unmapped = Map::with_capacity(2);
    unmapped.insert("aep".into(), Value::Object(envelope(ev)));
    if let Some(d) = payload.filter(|d| !d.is_empty()) {
        unmapped.insert("data".into(), Value::Object(d.clone()));
    }
    rec.insert("unmapped".into(), Value::Object(unmapped));

    if let Some(s) = row.status_id {
        rec.insert("status_id".into(), s.into());
    }
    if let Some(d) = disposition_id {
        rec.insert("disposition_id".into(), d.into());
    }

    match class {
        OcsfClass::Authentication => {
            rec.insert("user".into(), json!({ "name": ev.agent }));
            if let Some(s) = &ev.session {
                rec.insert("session".into(), json!({ "uid": s }));
            }
        }
        OcsfClass::ProcessActivity => {
            rec.insert("actor".into(), json!({ "app_name": ev.agent }));
            let mut device = Map::with_capacity(2);
            device.insert("type_id".into(), 0.into());
            match uri_host(&ev.source) {
                Some(host) => device.insert("hostname".into(), host.into()),
                None => device.insert("name".into(), Value::String(ev.source.to_string())),
            };
            rec.insert("device".into(), Value::Object(device));
            let tool = payload.and_then(|d| d.get("tool")).and_then(Value::as_object);
            let mut process = Map::with_capacity(2);
            // `process.name` is the subject; the surviving payload's tool name stands in
            // only when the Event has no subject.
            let name = ev.subject.as_deref().or_else(|| tool.and_then(|t| t.get("name")).and_then(Value::as_str));
            if let Some(n) = name {
                process.insert("name".into(), n.into());
            }
            // §4.3: the call id only when the payload survives; never an invented identifier.
            if let Some(id) = tool.and_then(|t| t.get("call_id")).and_then(Value::as_str) {
                process.insert("uid".into(), id.into());
            }
            rec.insert("process".into(), Value::Object(process));
        }
        OcsfClass::DetectionFinding => {
            // §4.2: one finding identity per lifecycle: the request's own id, then `subject`.
            let uid = if ev.r#type == "attention.requested" { Some(ev.id.as_str()) } else { ev.subject.as_deref() };
            let mut info = Map::with_capacity(2);
            if let Some(uid) = uid {
                info.insert("uid".into(), uid.into());
            }
            info.insert("title".into(), Value::String(ev.r#type.clone()));
            rec.insert("finding_info".into(), Value::Object(info));
        }
    }
    Some(Value::Object(rec))
}

/// Every envelope attribute except `data`, in wire order, extensions included (§4.3).
fn envelope(ev: &Event) -> Map<String, Value> {
    let mut m = Map::with_capacity(16 + ev.extensions.len());
    let s = |v: &str| Value::String(v.to_owned());
    m.insert("aep".into(), s(&ev.aep));
    m.insert("id".into(), s(&ev.id));
    m.insert("type".into(), s(&ev.r#type));
    if let Some(v) = &ev.subject {
        m.insert("subject".into(), s(v));
    }
    m.insert("time".into(), s(&ev.time));
    m.insert("source".into(), s(&ev.source));
    m.insert("agent".into(), s(&ev.agent));
    for (k, v) in [("session", &ev.session), ("run", &ev.run), ("step", &ev.step)] {
        if let Some(v) = v {
            m.insert(k.into(), s(v));
        }
    }
    if let Some(v) = ev.seq {
        m.insert("seq".into(), v.into());
    }
    if let Some(v) = ev.epoch {
        m.insert("epoch".into(), v.into());
    }
    for (k, v) in [("cause", &ev.cause), ("traceparent", &ev.traceparent)] {
        if let Some(v) = v {
            m.insert(k.into(), s(v));
        }
    }
    if let Some(v) = ev.severity {
        m.insert("severity".into(), s(v.as_str()));
    }
    if let Some(v) = ev.capture {
        m.insert("capture".into(), s(v.as_str()));
    }
    for (k, v) in &ev.extensions {
        m.insert(k.clone(), v.clone());
    }
    m
}

/// The host of a URI's authority (`aep://host-a/agent/...` → `host-a`), without userinfo
/// or port; `None` when the URI has no (or an empty) authority.
pub fn uri_host(uri: &str) -> Option<&str> {
    let (scheme, rest) = uri.split_once("://")?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
        return None;
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if hostport.starts_with('[') {
        // IPv6 literal: keep the brackets' content whole.
        &hostport[..hostport.find(']').map_or(hostport.len(), |i| i + 1)]
    } else {
        hostport.split_once(':').map_or(hostport, |(h, _)| h)
    };
    (!host.is_empty()).then_some(host)
}

/// RFC 3339 timestamp to milliseconds since the Unix epoch (sub-millisecond digits
/// truncated); `None` when malformed.
pub fn rfc3339_to_unix_ms(t: &str) -> Option<i64> {
    i64::try_from(aep_schemas::time::parse_rfc3339(t)?.div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(v: Value) -> Event {
        let mut base = json!({"aep":"0.1","id":"E1","time":"2026-07-03T10:15:04.221Z",
            "source":"aep://host-a/agent/pi/session/s1","agent":"pi","session":"s1","seq":1});
        for (k, x) in v.as_object().unwrap() {
            base[k] = x.clone();
        }
        Event::from_value(base).unwrap()
    }

    fn project(v: Value) -> Value {
        to_ocsf(&ev(v), &OcsfOptions::default()).unwrap()
    }

    #[test]
    fn times() {
        assert_eq!(rfc3339_to_unix_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_to_unix_ms("2026-07-03T10:15:04.221Z"), Some(1_783_073_704_221));
        assert_eq!(rfc3339_to_unix_ms("2026-07-03T12:15:04.2219+02:00"), Some(1_783_073_704_221));
        assert_eq!(rfc3339_to_unix_ms("1969-12-31T23:59:59.5Z"), Some(-500));
        for bad in ["2026-02-30T00:00:00Z", "2026-07-03T10:15:04", "2026-07-03T10:15:04.Z", "x", ""] {
            assert_eq!(rfc3339_to_unix_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn hosts() {
        assert_eq!(uri_host("aep://host-a/agent/x"), Some("host-a"));
        assert_eq!(uri_host("https://u:p@h.example:8443?q"), Some("h.example"));
        assert_eq!(uri_host("aep://[::1]:9/x"), Some("[::1]"));
        assert_eq!(uri_host("urn:aep:x"), None);
        assert_eq!(uri_host("file:///tmp"), None);
    }

    #[test]
    fn scope_and_classes() {
        for ty in ["run.started", "agent.heartbeat", "x.acme.tool.completed", "control.cancel", "message.delta"] {
            assert!(to_ocsf(&ev(json!({ "type": ty })), &OcsfOptions::default()).is_none(), "{ty}");
        }
        let r = project(json!({"type": "session.started", "acmeregion": "eu", "data": {"client": {"name": "pi"}}}));
        assert_eq!(
            (r["class_uid"].clone(), r["category_uid"].clone(), r["type_uid"].clone()),
            (json!(3002), json!(3), json!(300201))
        );
        assert_eq!(r["user"], json!({"name": "pi"}));
        assert_eq!(r["session"], json!({"uid": "s1"}));
        assert_eq!(r["unmapped"]["aep"]["acmeregion"], json!("eu"));
        assert!(r["unmapped"]["aep"].get("data").is_none());
        assert_eq!(r["unmapped"]["data"], json!({"client": {"name": "pi"}}));
        assert_eq!(r["time"], json!(1_783_073_704_221i64));
        assert!(r.get("disposition_id").is_none() && r["metadata"].get("profiles").is_none());
    }

    #[test]
    fn process_activity_and_ceiling() {
        let data = json!({"tool": {"name": "Bash", "call_id": "t1"}, "by": "policy"});
        let r = project(json!({"type": "tool.denied", "subject": "Bash", "severity": "warning", "data": data}));
        assert_eq!(r["disposition_id"], json!(2));
        assert_eq!(r["status_id"], json!(2));
        assert_eq!(r["severity_id"], json!(3));
        assert_eq!(r["metadata"]["profiles"], json!(["security_control"]));
        assert_eq!(r["process"], json!({"name": "Bash", "uid": "t1"}));
        assert_eq!(r["device"], json!({"type_id": 0, "hostname": "host-a"}));
        // Above the ceiling: envelope only, no call id, capture kept verbatim in unmapped.aep.
        let r = project(json!({"type": "tool.failed", "subject": "Write", "capture": "redacted", "data": data}));
        assert_eq!(r["process"], json!({"name": "Write"}));
        assert!(r["unmapped"].get("data").is_none());
        assert_eq!(r["unmapped"]["aep"]["capture"], json!("redacted"));
        let full = OcsfOptions { max_capture: Capture::Full };
        let r = to_ocsf(&ev(json!({"type": "tool.failed", "capture": "redacted", "data": data})), &full).unwrap();
        assert_eq!(r["process"], json!({"name": "Bash", "uid": "t1"}));
        let r = project(json!({"type": "tool.requested", "source": "local-pipe"}));
        assert_eq!(r["device"], json!({"type_id": 0, "name": "local-pipe"}));
        assert!(r.get("status_id").is_none());
    }

    #[test]
    fn findings_and_dispositions() {
        let r = project(json!({"type": "attention.requested", "severity": "notice", "capture": "redacted",
            "data": {"prompt": "secret text"}}));
        assert_eq!(r["finding_info"], json!({"uid": "E1", "title": "attention.requested"}));
        assert!(!r.to_string().contains("secret text"));
        let answered =
            project(json!({"type": "attention.resolved", "subject": "REQ", "data": {"resolution": "answered"}}));
        assert!(answered.get("disposition_id").is_none());
        assert_eq!(answered["status_id"], json!(4));
        assert_eq!(answered["finding_info"]["uid"], json!("REQ"));
        let dismissed =
            project(json!({"type": "attention.resolved", "subject": "REQ", "data": {"resolution": "dismissed"}}));
        assert_eq!(dismissed["disposition_id"], json!(16));
        let hidden =
            project(json!({"type": "attention.resolved", "capture": "full", "data": {"resolution": "dismissed"}}));
        assert!(hidden.get("disposition_id").is_none());
        let timeout = project(json!({"type": "attention.timeout", "subject": "REQ", "cause": "C"}));
        assert_eq!((timeout["disposition_id"].clone(), timeout.get("status_id")), (json!(16), None));
        assert_eq!(timeout["metadata"]["correlation_uid"], json!("C"));
        assert_eq!(project(json!({"type": "attention.answered"}))["activity_id"], json!(2));
    }
}
