//! The AEP Event: sixteen context attributes, extension attributes, and `data` (AEP-0001 §5).
//!
//! Absent optional attributes stay absent (never `null`), so an Event read from the wire
//! serializes back to the same members. The defaults of `epoch`, `severity` and `capture`
//! (AEP-0001 §5.1) are applied by the accessors [`Event::epoch`], [`Event::severity`] and
//! [`Event::capture`], which every consumer in this workspace reads through.

use std::borrow::Cow;
use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::level::{Capture, Severity};

mod parse;
pub use parse::{event_from_slice_strict, event_from_str_strict};

/// The envelope version this implementation speaks (AEP-0001 §5.1 #1).
pub const AEP_VERSION: &str = "0.1";

/// An `aep` member as held: this version's marker is shared, not allocated per event.
fn version(aep: String) -> Cow<'static, str> {
    if aep == AEP_VERSION { Cow::Borrowed(AEP_VERSION) } else { Cow::Owned(aep) }
}

/// The sixteen core context attribute names plus `data`, in wire order (AEP-0001 §5.1).
pub const CORE_ATTRIBUTES: [&str; 17] = [
    "aep",
    "id",
    "type",
    "subject",
    "time",
    "source",
    "agent",
    "session",
    "run",
    "step",
    "seq",
    "epoch",
    "cause",
    "traceparent",
    "severity",
    "capture",
    "data",
];

/// A rejected envelope: which attribute, which rule, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {message}")]
pub struct EnvelopeError {
    /// The violated rule, e.g. `AEP-0001 §5.1 #11`.
    pub rule: &'static str,
    /// A readable explanation naming the attribute.
    pub message: String,
}

impl EnvelopeError {
    pub(crate) fn new(rule: &'static str, message: impl Into<String>) -> Self {
        Self { rule, message: message.into() }
    }
}

/// One AEP Event (AEP-0001 §5).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// #1 envelope version. This version's marker is borrowed, not allocated per event
    /// (the OTLP path builds hundreds of thousands a second; each allocation costs there).
    pub aep: Cow<'static, str>,
    /// #2 id, unique per `source`.
    pub id: String,
    /// #3 bare type `{category}.{rest}` or `x.{vendor}.{category}.{rest}`.
    pub r#type: String,
    /// #4 the acted-upon entity.
    pub subject: Option<String>,
    /// #5 RFC 3339 time (display only; never ordering authority).
    pub time: String,
    /// #6 emitter URI, shared (the events of one session hold one allocation).
    pub source: Arc<str>,
    /// #7 logical agent identity; borrowed when it is a mapping's static vendor name.
    pub agent: Cow<'static, str>,
    /// #8 session key (session-scoped Events).
    pub session: Option<String>,
    /// #9 run within the session.
    pub run: Option<String>,
    /// #10 step within the run.
    pub step: Option<String>,
    /// #11 per-session monotonic counter.
    pub seq: Option<u64>,
    /// #12 restart generation as carried on the wire; read it with [`Event::epoch`].
    pub epoch: Option<u64>,
    /// #13 id of the causing Event.
    pub cause: Option<String>,
    /// #14 W3C traceparent.
    pub traceparent: Option<String>,
    /// #15 severity as carried; read it with [`Event::severity`].
    pub severity: Option<Severity>,
    /// #16 capture level as carried; read it with [`Event::capture`].
    pub capture: Option<Capture>,
    /// Extension attributes in arrival order (AEP-0001 §5.4).
    pub extensions: Map<String, Value>,
    /// #17 the type-specific payload.
    pub data: Option<Value>,
}

impl Event {
    /// The restart generation, `0` when absent.
    pub fn epoch(&self) -> u64 {
        self.epoch.unwrap_or(0)
    }

    /// The severity, `info` when absent.
    pub fn severity(&self) -> Severity {
        self.severity.unwrap_or_default()
    }

    /// The capture level, `metadata` when absent.
    pub fn capture(&self) -> Capture {
        self.capture.unwrap_or_default()
    }

    /// The category: the first dot token of a core type, the third of an `x.{vendor}.*` type.
    pub fn category(&self) -> &str {
        category_of(&self.r#type)
    }

    /// `true` for `agent.*` Events, which carry no session (AEP-0001 §5.2).
    pub fn is_agent_scoped(&self) -> bool {
        is_agent_scoped(&self.r#type)
    }

    /// The `(epoch, seq)` position, when the Event is sequenced.
    pub fn position(&self) -> Option<(u64, u64)> {
        self.seq.map(|s| (self.epoch(), s))
    }

    /// Parses an Event from a JSON value, checking the JSON type of every core attribute.
    ///
    /// Semantic rules (scoping, type grammar, payload schemas) are checked by
    /// [`crate::validate`]; this only refuses what cannot be represented.
    pub fn from_value(value: Value) -> Result<Event, EnvelopeError> {
        let Value::Object(map) = value else {
            return Err(EnvelopeError::new("AEP-0001 §5", "an Event is a JSON object"));
        };
        Event::from_map(map)
    }

    /// Parses an Event from one JSON text (one JSONL line).
    pub fn from_json(text: &str) -> Result<Event, EnvelopeError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| EnvelopeError::new("AEP-0001 §5", format!("not JSON: {e}")))?;
        Event::from_value(value)
    }

    /// Parses an Event from a JSON object.
    pub fn from_map(map: Map<String, Value>) -> Result<Event, EnvelopeError> {
        let mut b = EventBuilder::default();
        for (key, value) in map {
            b.member(MemberKey::Owned(key), value)?;
        }
        b.finish()
    }

    /// The Event as a JSON value, members in wire order.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }

    /// The Event as a JSON object, members in wire order, absent optionals omitted.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let s = |v: &str| Value::String(v.to_owned());
        m.insert("aep".into(), s(&self.aep));
        m.insert("id".into(), s(&self.id));
        m.insert("type".into(), s(&self.r#type));
        if let Some(v) = &self.subject {
            m.insert("subject".into(), s(v));
        }
        m.insert("time".into(), s(&self.time));
        m.insert("source".into(), s(&self.source));
        m.insert("agent".into(), s(&self.agent));
        for (k, v) in [("session", &self.session), ("run", &self.run), ("step", &self.step)] {
            if let Some(v) = v {
                m.insert(k.into(), s(v));
            }
        }
        if let Some(v) = self.seq {
            m.insert("seq".into(), v.into());
        }
        if let Some(v) = self.epoch {
            m.insert("epoch".into(), v.into());
        }
        for (k, v) in [("cause", &self.cause), ("traceparent", &self.traceparent)] {
            if let Some(v) = v {
                m.insert(k.into(), s(v));
            }
        }
        if let Some(v) = self.severity {
            m.insert("severity".into(), s(v.as_str()));
        }
        if let Some(v) = self.capture {
            m.insert("capture".into(), s(v.as_str()));
        }
        for (k, v) in &self.extensions {
            m.insert(k.clone(), v.clone());
        }
        if let Some(d) = &self.data {
            m.insert("data".into(), d.clone());
        }
        m
    }

    /// One compact JSON line (no trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `true` for a type in the `agent` category: the only Events without a session (AEP-0001 §5.2).
pub fn is_agent_scoped(ty: &str) -> bool {
    category_of(ty) == "agent"
}

/// The category of a type string (see [`Event::category`]).
pub fn category_of(ty: &str) -> &str {
    // Runs several times for every stamped event: byte loops over short strings (a `char`
    // search sets up memchr, which costs more than these few bytes).
    let rest = match ty.strip_prefix("x.") {
        Some(vendor_on) => match vendor_on.bytes().position(|c| c == b'.') {
            Some(i) => &vendor_on[i + 1..],
            None => return "",
        },
        None if ty == "x" => return "",
        None => ty,
    };
    match rest.bytes().position(|c| c == b'.') {
        Some(i) => &rest[..i],
        None => rest,
    }
}

/// A member name as read: borrowed from the input where it can be (a core attribute's
/// name is matched without allocating), owned otherwise.
#[derive(Debug)]
pub(crate) enum MemberKey<'a> {
    /// Borrowed from the input.
    Borrowed(&'a str),
    /// Unescaped into its own string.
    Owned(String),
}

impl MemberKey<'_> {
    /// The name.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            MemberKey::Borrowed(s) => s,
            MemberKey::Owned(s) => s,
        }
    }

    fn into_owned(self) -> String {
        match self {
            MemberKey::Borrowed(s) => s.to_owned(),
            MemberKey::Owned(s) => s,
        }
    }
}

/// Builds an Event member by member, in arrival order: the first member that cannot be
/// represented is the error, then the required attributes are checked (AEP-0001 §5.1).
/// Shared by [`Event::from_map`] and the direct parser [`event_from_str_strict`],
/// so both refuse the same input with the same first error.
#[derive(Debug, Default)]
pub(crate) struct EventBuilder {
    ev: Event,
    /// aep, id, type, time seen (source and agent are checked for emptiness).
    have: [bool; 4],
    /// Core attributes read so far, one bit each ([`CORE_ATTRIBUTES`] order).
    seen: u32,
    /// The first member that could not be represented; later members are only checked
    /// for repetition.
    failed: Option<EnvelopeError>,
}

impl EventBuilder {
    /// Reads one member as a parser does: a key already read (a repeated member) is handed
    /// back; otherwise the member is set, or only noted once an earlier member failed.
    pub(crate) fn read<'k>(&mut self, key: MemberKey<'k>, value: Value) -> Result<(), MemberKey<'k>> {
        match core_index(key.as_str()) {
            Some(i) => {
                if self.seen & (1 << i) != 0 {
                    return Err(key);
                }
                self.seen |= 1 << i;
            }
            None if self.ev.extensions.contains_key(key.as_str()) => return Err(key),
            None if self.failed.is_some() => {
                self.ev.extensions.insert(key.into_owned(), Value::Null);
                return Ok(());
            }
            None => {}
        }
        if self.failed.is_none()
            && let Err(e) = self.member(key, value)
        {
            self.failed = Some(e);
        }
        Ok(())
    }

    /// [`EventBuilder::finish`] after [`EventBuilder::read`]: the first failed member, if any.
    pub(crate) fn finish_read(mut self) -> Result<Event, EnvelopeError> {
        match self.failed.take() {
            Some(e) => Err(e),
            None => self.finish(),
        }
    }

    /// Sets one member.
    pub(crate) fn member(&mut self, key: MemberKey<'_>, value: Value) -> Result<(), EnvelopeError> {
        let ev = &mut self.ev;
        let k = key.as_str();
        match k {
            "aep" => {
                ev.aep = version(req_string(k, value)?);
                self.have[0] = true;
            }
            "id" => {
                ev.id = req_string(k, value)?;
                self.have[1] = true;
            }
            "type" => {
                ev.r#type = req_string(k, value)?;
                self.have[2] = true;
            }
            "time" => {
                ev.time = req_string(k, value)?;
                self.have[3] = true;
            }
            "source" => ev.source = req_string(k, value)?.into(),
            "agent" => ev.agent = req_string(k, value)?.into(),
            "subject" => ev.subject = Some(req_string(k, value)?),
            "session" => ev.session = Some(req_string(k, value)?),
            "run" => ev.run = Some(req_string(k, value)?),
            "step" => ev.step = Some(req_string(k, value)?),
            "cause" => ev.cause = Some(req_string(k, value)?),
            "traceparent" => ev.traceparent = Some(req_string(k, value)?),
            "seq" => ev.seq = Some(req_uint("AEP-0001 §5.1 #11", k, value)?),
            "epoch" => ev.epoch = Some(req_uint("AEP-0001 §5.1 #12", k, value)?),
            "severity" => {
                let s = req_string(k, value)?;
                ev.severity = Some(
                    s.parse()
                        .map_err(|e: crate::level::UnknownLevel| EnvelopeError::new("AEP-0001 §8.1", e.to_string()))?,
                );
            }
            "capture" => {
                let s = req_string(k, value)?;
                ev.capture = Some(
                    s.parse()
                        .map_err(|e: crate::level::UnknownLevel| EnvelopeError::new("AEP-0001 §8.2", e.to_string()))?,
                );
            }
            "data" => match value {
                Value::Object(_) => ev.data = Some(value),
                Value::Null => return Err(null_attr(k)),
                _ => return Err(EnvelopeError::new("AEP-0001 §5.1 #17", "`data` must be a JSON object")),
            },
            _ => {
                ev.extensions.insert(key.into_owned(), value);
            }
        }
        Ok(())
    }

    /// The Event, once every member is in: the required attributes must be present.
    pub(crate) fn finish(self) -> Result<Event, EnvelopeError> {
        for (present, name) in self.have.iter().zip(["aep", "id", "type", "time"]) {
            if !present {
                return Err(EnvelopeError::new("AEP-0001 §5.1", format!("required attribute `{name}` is missing")));
            }
        }
        let ev = self.ev;
        if ev.source.is_empty() {
            return Err(EnvelopeError::new("AEP-0001 §5.1 #6", "required attribute `source` is missing or empty"));
        }
        if ev.agent.is_empty() {
            return Err(EnvelopeError::new("AEP-0001 §5.1 #7", "required attribute `agent` is missing or empty"));
        }
        Ok(ev)
    }
}

/// The place of a core attribute's name in [`CORE_ATTRIBUTES`].
fn core_index(name: &str) -> Option<u32> {
    Some(match name {
        "aep" => 0,
        "id" => 1,
        "type" => 2,
        "subject" => 3,
        "time" => 4,
        "source" => 5,
        "agent" => 6,
        "session" => 7,
        "run" => 8,
        "step" => 9,
        "seq" => 10,
        "epoch" => 11,
        "cause" => 12,
        "traceparent" => 13,
        "severity" => 14,
        "capture" => 15,
        "data" => 16,
        _ => return None,
    })
}

fn null_attr(key: &str) -> EnvelopeError {
    EnvelopeError::new("AEP-0001 §5.1", format!("`{key}` is null: absent optional attributes are omitted, never null"))
}

fn req_string(key: &str, value: Value) -> Result<String, EnvelopeError> {
    match value {
        Value::String(s) => Ok(s),
        Value::Null => Err(null_attr(key)),
        other => Err(EnvelopeError::new("AEP-0001 §5.1", format!("`{key}` must be a string, got {other}"))),
    }
}

fn req_uint(rule: &'static str, key: &str, value: Value) -> Result<u64, EnvelopeError> {
    match &value {
        Value::Number(n) => {
            n.as_u64().ok_or_else(|| EnvelopeError::new(rule, format!("`{key}` must be an integer >= 0, got {n}")))
        }
        Value::Null => Err(null_attr(key)),
        other => Err(EnvelopeError::new(rule, format!("`{key}` must be an integer >= 0, got {other}"))),
    }
}

impl Event {
    /// Appends the event as compact JSON, byte-for-byte what `serde_json::to_writer` makes
    /// of it (members in wire order), with the faster escaper of [`crate::json`]: the JSONL
    /// line of every event is written here.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_with(out, None);
    }

    /// The members `source`, `agent` and `session` of an event as [`Event::write_json`]
    /// writes them (`,"source":…,"agent":…,"session":…`): a stamper builds them once per
    /// session and hands them to [`Event::write_json_with`] for every event it stamps.
    pub fn envelope_members(source: &str, agent: &str, session: &str) -> Vec<u8> {
        use crate::json::write_str;
        let mut out = Vec::with_capacity(source.len() + agent.len() + session.len() + 32);
        out.extend_from_slice(b",\"source\":");
        write_str(&mut out, source);
        out.extend_from_slice(b",\"agent\":");
        write_str(&mut out, agent);
        out.extend_from_slice(b",\"session\":");
        write_str(&mut out, session);
        out
    }

    /// [`Event::write_json`], with `source`, `agent` and `session` written as the given
    /// [`Event::envelope_members`] of this very event (the caller vouches that they are its
    /// own: the bytes are identical to writing the members one by one).
    pub fn write_json_with(&self, out: &mut Vec<u8>, envelope: Option<&[u8]>) {
        use crate::json::{write_str, write_u64, write_value};
        fn member(out: &mut Vec<u8>, key: &[u8]) {
            out.push(b',');
            out.push(b'"');
            out.extend_from_slice(key);
            out.extend_from_slice(b"\":");
        }
        if self.aep == AEP_VERSION {
            out.extend_from_slice(b"{\"aep\":\"0.1\"");
        } else {
            out.extend_from_slice(b"{\"aep\":");
            write_str(out, &self.aep);
        }
        member(out, b"id");
        write_str(out, &self.id);
        member(out, b"type");
        write_str(out, &self.r#type);
        if let Some(v) = &self.subject {
            member(out, b"subject");
            write_str(out, v);
        }
        member(out, b"time");
        write_str(out, &self.time);
        let session = match envelope {
            Some(members) if self.session.is_some() => {
                out.extend_from_slice(members);
                &None
            }
            _ => {
                member(out, b"source");
                write_str(out, &self.source);
                member(out, b"agent");
                write_str(out, &self.agent);
                &self.session
            }
        };
        for (k, v) in [(&b"session"[..], session), (b"run", &self.run), (b"step", &self.step)] {
            if let Some(v) = v {
                member(out, k);
                write_str(out, v);
            }
        }
        if let Some(v) = self.seq {
            member(out, b"seq");
            write_u64(out, v);
        }
        if let Some(v) = self.epoch {
            member(out, b"epoch");
            write_u64(out, v);
        }
        for (k, v) in [(&b"cause"[..], &self.cause), (b"traceparent", &self.traceparent)] {
            if let Some(v) = v {
                member(out, k);
                write_str(out, v);
            }
        }
        if let Some(v) = self.severity {
            member(out, b"severity");
            write_str(out, v.as_str());
        }
        if let Some(v) = self.capture {
            member(out, b"capture");
            write_str(out, v.as_str());
        }
        for (k, v) in &self.extensions {
            out.push(b',');
            write_str(out, k);
            out.push(b':');
            write_value(out, v);
        }
        if let Some(d) = &self.data {
            member(out, b"data");
            write_value(out, d);
        }
        out.push(b'}');
    }
}

/// An Event reads as itself where a caller takes anything that holds one (the daemon's
/// stamped events carry their serialized line beside the Event).
impl AsRef<Event> for Event {
    fn as_ref(&self) -> &Event {
        self
    }
}

impl Serialize for Event {
    /// Writes members in wire order straight from the fields (no intermediate map: this is
    /// the hot path of every sink).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        out.serialize_entry("aep", &self.aep)?;
        out.serialize_entry("id", &self.id)?;
        out.serialize_entry("type", &self.r#type)?;
        if let Some(v) = &self.subject {
            out.serialize_entry("subject", v)?;
        }
        out.serialize_entry("time", &self.time)?;
        out.serialize_entry("source", &*self.source)?;
        out.serialize_entry("agent", &self.agent)?;
        for (k, v) in [("session", &self.session), ("run", &self.run), ("step", &self.step)] {
            if let Some(v) = v {
                out.serialize_entry(k, v)?;
            }
        }
        if let Some(v) = self.seq {
            out.serialize_entry("seq", &v)?;
        }
        if let Some(v) = self.epoch {
            out.serialize_entry("epoch", &v)?;
        }
        for (k, v) in [("cause", &self.cause), ("traceparent", &self.traceparent)] {
            if let Some(v) = v {
                out.serialize_entry(k, v)?;
            }
        }
        if let Some(v) = self.severity {
            out.serialize_entry("severity", v.as_str())?;
        }
        if let Some(v) = self.capture {
            out.serialize_entry("capture", v.as_str())?;
        }
        for (k, v) in &self.extensions {
            out.serialize_entry(k, v)?;
        }
        if let Some(d) = &self.data {
            out.serialize_entry("data", d)?;
        }
        out.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Event::from_value(value).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_keeps_extensions_in_order() {
        let raw = json!({"aep":"0.1","id":"a","type":"tool.completed","subject":"Bash","time":"2026-07-03T10:15:04.221Z",
            "source":"aep://h/agent/x/session/s","agent":"x","session":"s","seq":3,"acmezone":"eu","acmeflag":true,
            "data":{"tool":{"name":"Bash"}}});
        let ev = Event::from_value(raw.clone()).unwrap();
        assert_eq!(ev.to_value(), raw);
        assert_eq!(ev.extensions.keys().collect::<Vec<_>>(), ["acmezone", "acmeflag"]);
        assert_eq!(ev.epoch(), 0);
        assert_eq!(ev.severity(), Severity::Info);
        assert_eq!(ev.capture(), Capture::Metadata);
        assert!(!ev.to_json().contains("null"));
        // This version's marker is the static one; another version is kept as sent.
        assert!(matches!(ev.aep, Cow::Borrowed(AEP_VERSION)));
        let other =
            Event::from_value(json!({"aep":"9.0","id":"b","type":"run.started","time":"t","source":"s","agent":"x"}));
        assert_eq!(other.map(|e| e.aep.into_owned()).ok().as_deref(), Some("9.0"));
    }

    #[test]
    fn direct_serialization_matches_the_map_form() {
        let raw = json!({"aep":"0.1","id":"a","type":"run.started","subject":"x","time":"t","source":"s","agent":"a",
            "session":"s","run":"r","step":"p","seq":1,"epoch":2,"cause":"c","traceparent":"tp","severity":"notice",
            "capture":"full","acmex":1,"data":{"k":"v"}});
        let ev = Event::from_value(raw).unwrap();
        assert_eq!(ev.to_json(), serde_json::to_string(&ev.to_value()).unwrap());
    }

    #[test]
    fn category_of_core_and_vendor_types() {
        for (ty, want) in [
            ("tool.completed", "tool"),
            ("agent", "agent"),
            ("", ""),
            ("x", ""),
            ("x.codex", ""),
            ("x.codex.otel", "otel"),
            ("x.codex.otel.turn_ttft", "otel"),
            ("x..a.b", "a"),
            ("xy.z", "xy"),
        ] {
            assert_eq!(category_of(ty), want, "{ty:?}");
        }
    }

    #[test]
    fn the_line_writer_matches_serde_json_byte_for_byte() {
        let full = json!({"aep":"0.1","id":"01J\"x","type":"run.started","subject":"x\ny","time":"t","source":"aep://h/a b",
            "agent":"a\\b","session":"s\u{1}","run":"r","step":"p","seq":18446744073709551615u64,"epoch":0,"cause":"c",
            "traceparent":"tp","severity":"notice","capture":"full","acme\"x":[1,-2,1.5,null],"acmey":{"k":"é✓"},
            "data":{"k":"v\t","n":{"deep":[true,false,"\u{7f}"]},"f":-0.25}});
        let minimal = json!({"aep":"0.1","id":"a","type":"agent.heartbeat","time":"t","source":"s","agent":"a"});
        let no_data = json!({"aep":"0.1","id":"a","type":"run.started","time":"t","source":"s","agent":"a","session":"s","seq":0});
        let other_version = json!({"aep":"0.2\"","id":"a","type":"run.started","time":"t","source":"s","agent":"a"});
        for raw in [full, minimal, no_data, other_version] {
            let ev = Event::from_value(raw).unwrap();
            let mut ours = Vec::new();
            ev.write_json(&mut ours);
            let serde = serde_json::to_string(&ev).unwrap();
            assert_eq!(String::from_utf8(ours).unwrap(), serde);
            // With the session's members written ahead (as a stamper does): the same bytes.
            if let Some(s) = &ev.session {
                let members = Event::envelope_members(&ev.source, &ev.agent, s);
                let mut with = Vec::new();
                ev.write_json_with(&mut with, Some(&members));
                assert_eq!(String::from_utf8(with).unwrap(), serde);
            }
        }
    }

    #[test]
    fn names_the_rule_on_bad_attributes() {
        let base = json!({"aep":"0.1","id":"a","type":"run.started","time":"t","source":"s","agent":"a","session":"s"});
        let mut v = base.clone();
        v["seq"] = json!(-1);
        assert_eq!(Event::from_value(v).unwrap_err().rule, "AEP-0001 §5.1 #11");
        let mut v = base.clone();
        v["severity"] = json!("loud");
        assert_eq!(Event::from_value(v).unwrap_err().rule, "AEP-0001 §8.1");
        let mut v = base.clone();
        v["run"] = Value::Null;
        assert!(Event::from_value(v).unwrap_err().message.contains("null"));
        let mut v = base;
        v.as_object_mut().unwrap().remove("id");
        assert!(Event::from_value(v).unwrap_err().message.contains("`id`"));
    }

    #[test]
    fn category_of_vendor_types() {
        assert_eq!(category_of("x.claude-code.session.config_change"), "session");
        assert_eq!(category_of("run.step.started"), "run");
    }
}
