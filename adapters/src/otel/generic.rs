//! The opt-in profile for a service no built-in profile knows (`[otlp_in.generic]`): its
//! records map to `x.<vendor>.otel.<event>` under a vendor name the operator configured,
//! instead of being refused in `partial_success`.
//!
//! Nothing is guessed (design record, non-goals: "foreign LogRecords fall to
//! `x.<vendor>.otel.unknown` rather than guessing"): no core types in either mode, and the
//! attributes of an unknown vendor are content of unknown sensitivity, so below the `full`
//! ceiling only the event name rides along (AEP-0003 §9 rule 1); at `full` the attributes
//! ride verbatim (at most [`MAX_ATTRIBUTES`]).

use serde_json::{Map, Value};

use super::{BatchOutcome, MappedDraft, Mode, OtelProfile, OtelRecord, record_event_name_ref, stamp};
use crate::{EventDraft, MapContext, snake_case};

/// Most attributes a generic event carries at `full`.
pub const MAX_ATTRIBUTES: usize = 64;

/// Most dot-separated segments of the event name kept in the type.
const MAX_SEGMENTS: usize = 6;

/// A configured vendor name: a lowercase token (`[a-z0-9_-]`, starting with a letter or
/// digit, at most 64 bytes), the AEP-0001 §6 vendor segment of `x.<vendor>.otel.*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct VendorName(String);

impl VendorName {
    /// The name, checked.
    pub fn new(name: &str) -> Result<Self, String> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name.as_bytes()[0].is_ascii_alphanumeric()
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(name.to_owned()))
        } else {
            Err(format!("{name:?} is not a vendor name (lowercase letters, digits, `-` and `_`, at most 64)"))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for VendorName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        VendorName::new(&s).map_err(serde::de::Error::custom)
    }
}

/// The generic profile of one configured vendor name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenericOtel {
    vendor: &'static str,
}

impl GenericOtel {
    /// The profile for `name`. The name is leaked once: profiles live for the process (as
    /// the bridge's custom hook adapters do), and drafts name their vendor as `&'static str`.
    pub fn leak(name: &VendorName) -> Self {
        Self { vendor: Box::leak(name.0.clone().into_boxed_str()) }
    }

    /// The type suffix for an event name: its dot-separated segments snake-cased, a leading
    /// segment naming the vendor dropped (`my_agent.tool.run` -> `tool.run`), at most
    /// [`MAX_SEGMENTS`] of at most 64 bytes; `None` when nothing is left.
    fn suffix(&self, name: &str) -> Option<String> {
        let vendor = snake_case(self.vendor);
        let mut segs: Vec<String> = name.split('.').map(snake_case).filter(|s| !s.is_empty()).collect();
        if segs.len() > 1 && segs[0] == vendor {
            segs.remove(0);
        }
        segs.truncate(MAX_SEGMENTS);
        for s in &mut segs {
            s.truncate(64);
        }
        (!segs.is_empty()).then(|| segs.join("."))
    }
}

impl OtelProfile for GenericOtel {
    fn vendor(&self) -> &'static str {
        self.vendor
    }

    /// Never by detection: a generic profile applies only to the services the config
    /// names for it (`[otlp_in.generic]`).
    fn claims(&self, _rec: &OtelRecord) -> bool {
        false
    }

    /// The OTel semantic-conventions `session.id`, on the record or its resource.
    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        rec.attr_str("session.id").or_else(|| rec.resource_str("session.id")).filter(|s| !s.is_empty())
    }

    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, _mode: Mode) -> Vec<EventDraft> {
        let name = record_event_name_ref(rec);
        let suffix = name.and_then(|n| self.suffix(n)).unwrap_or_else(|| "unknown".to_owned());
        let ty = format!("x.{}.otel.{suffix}", self.vendor);
        let ceiling = cx.ceiling_for(&ty);
        let mut d = EventDraft::new(ty, ceiling);
        if let Some(n) = name {
            d.data.insert("event.name".into(), Value::String(n.chars().take(256).collect()));
        }
        if ceiling >= aep_schemas::Capture::Full {
            let attrs: Map<String, Value> = rec
                .attributes
                .iter()
                .filter(|(k, v)| !matches!(*k, "event.name" | "session.id") && !v.is_null())
                .take(MAX_ATTRIBUTES)
                .map(|(k, v)| (k.to_owned(), v.clone()))
                .collect();
            d.data.extend(attrs);
        }
        stamp(&mut d, rec, self.session_id(rec));
        vec![d]
    }
}

/// Maps `records` through `profile` (every one of them), leaving out drafts without a
/// session as [`super::map_batch`] does.
pub fn map_batch(records: &[OtelRecord], profile: &GenericOtel, cx: &MapContext, mode: Mode) -> BatchOutcome {
    let mut out = BatchOutcome { drafts: Vec::with_capacity(records.len()), ..Default::default() };
    for rec in records {
        for draft in profile.map_record(rec, cx, mode) {
            // AEP-0001 §5.1: every event but `agent.*` belongs to a session.
            if draft.session.as_deref().is_none_or(str::is_empty) {
                out.sessionless += 1;
                continue;
            }
            out.drafts.push(MappedDraft { vendor: profile.vendor, draft });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;
    use serde_json::json;
    use std::sync::Arc;

    fn rec(name: &str, session: Option<&str>) -> OtelRecord {
        let mut attrs = vec![
            ("event.name".to_owned(), json!(name)),
            ("prompt".to_owned(), json!("secret plans")),
            ("tokens".to_owned(), json!(12)),
        ];
        if let Some(s) = session {
            attrs.push(("session.id".to_owned(), json!(s)));
        }
        OtelRecord {
            resource: Arc::new(Map::from_iter([("service.name".to_owned(), json!("my-agent"))])),
            attributes: attrs.into_iter().collect(),
            time_unix_nano: 1_796_011_454_699_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn names_become_types_and_only_the_name_rides_below_full() {
        let p = GenericOtel::leak(&VendorName::new("my-agent").unwrap());
        let cx = MapContext::default();
        let out =
            map_batch(&[rec("my_agent.Tool.Run", Some("s1")), rec("weird name!", Some("s1"))], &p, &cx, Mode::Primary);
        let types: Vec<&str> = out.drafts.iter().map(|m| m.draft.r#type.as_str()).collect();
        assert_eq!(types, ["x.my-agent.otel.tool.run", "x.my-agent.otel.weird_name"]);
        for m in &out.drafts {
            assert_eq!(m.vendor, "my-agent");
            assert_eq!(m.draft.data.len(), 1, "{:?}", m.draft.data);
            assert_eq!(m.draft.session.as_deref(), Some("s1"));
            aep_schemas::validate::check_type(&m.draft.r#type).unwrap();
        }
        let full = MapContext { capture: Capture::Full, ..Default::default() };
        let out = map_batch(&[rec("my_agent.tool", Some("s1"))], &p, &full, Mode::Companion);
        assert_eq!(out.drafts[0].draft.data["prompt"], json!("secret plans"));
        assert_eq!(out.drafts[0].draft.data["tokens"], json!(12));
        assert!(!out.drafts[0].draft.data.contains_key("session.id"));
    }

    #[test]
    fn sessionless_records_and_bad_names_are_left_out() {
        let p = GenericOtel::leak(&VendorName::new("a1").unwrap());
        let out = map_batch(&[rec("x", None)], &p, &MapContext::default(), Mode::Companion);
        assert_eq!((out.drafts.len(), out.sessionless), (0, 1));
        assert_eq!(p.suffix("..."), None);
        for bad in ["", "My-Agent", "-x", "a b", &"a".repeat(65)] {
            assert!(VendorName::new(bad).is_err(), "{bad:?}");
        }
        assert!(serde_json::from_value::<VendorName>(json!("UPPER")).is_err());
    }
}
