//! Drift: what an agent sends that its adapter was not written for. A new release may add a
//! hook event, a field to a known event's payload, or an OTel event name; the mapping then
//! falls back (the `x.{vendor}.session.*` and `x.{vendor}.otel.unknown` types, AEP-0001 §6)
//! or leaves the field unread, and nothing says so until sessions come out wrong.
//!
//! Which events and fields are known is the vendor's knowledge: each adapter that was checked
//! against recorded payloads gives a [`Vocabulary`] ([`crate::HookAdapter::vocabulary`]).
//! This module is pure: it names the drift of one call ([`check`]), remembers per session what
//! it has already reported ([`observe`]), and builds the session's record of it, one
//! `x.{vendor}.session.drift` Event per new name (AEP-0002 §6: a vendor extension type, in the
//! vendor's namespace; only event and field *names* ride, which are structural). The bridge
//! counts and logs.

use aep_schemas::Severity;
use serde_json::{Value, json};

use crate::{EventDraft, HookAdapter, MapContext, SessionState};

/// Most names one call reports (a payload with thousands of new keys is reported by its first ones).
pub const MAX_NAMES: usize = 16;
/// Longest name kept, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Most names one session remembers as reported.
const MAX_SEEN: usize = 256;
/// `state.extra` key of the names a session has reported.
const SEEN: &str = "aep_drift_seen";

/// What kind of thing drifted (the `kind` label of the bridge's drift counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriftKind {
    /// A hook event the adapter does not know.
    HookEvent,
    /// A top-level field of a known hook event's payload the adapter does not know.
    HookField,
    /// An OTel event name the vendor's profile does not know.
    OtelEvent,
}

impl DriftKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::HookEvent => "hook_event",
            DriftKind::HookField => "hook_field",
            DriftKind::OtelEvent => "otel_event",
        }
    }
}

/// One drifted name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Drift {
    /// What drifted.
    pub kind: DriftKind,
    /// The event name (`hook_event`, `otel_event`) or `{event}.{field}` (`hook_field`).
    pub name: String,
}

/// The hook events and payload fields an adapter was written against (recorded from the
/// agent at the version its README names).
#[derive(Debug, Clone, Copy)]
pub struct Vocabulary {
    /// Every hook event the adapter maps or knowingly leaves to the fallback.
    pub events: &'static [&'static str],
    /// Fields every event may carry (`session_id`, `cwd`, ...).
    pub common: &'static [&'static str],
    /// The further fields of each event whose payload was recorded; an event absent here has
    /// its fields unchecked.
    pub fields: &'static [(&'static str, &'static [&'static str])],
    /// JSON pointer to the agent's version in a payload, when payloads carry it.
    pub version: Option<&'static str>,
}

impl Vocabulary {
    /// The agent version a payload names, if the vocabulary knows where.
    pub fn version_of<'a>(&self, payload: &'a Value) -> Option<&'a str> {
        payload.pointer(self.version?)?.as_str().filter(|v| !v.is_empty())
    }
}

fn clip(s: &str) -> String {
    s.chars().take(MAX_NAME_CHARS).collect()
}

/// The drift of one hook call: the event itself when unknown, else its unknown top-level
/// fields (at most [`MAX_NAMES`], in key order).
pub fn check(vocab: &Vocabulary, hook: &str, payload: &Value) -> Vec<Drift> {
    if !vocab.events.contains(&hook) {
        return vec![Drift { kind: DriftKind::HookEvent, name: clip(hook) }];
    }
    let Some((_, fields)) = vocab.fields.iter().find(|(e, _)| *e == hook) else { return Vec::new() };
    let Some(obj) = payload.as_object() else { return Vec::new() };
    let mut keys: Vec<&String> =
        obj.keys().filter(|k| !vocab.common.contains(&k.as_str()) && !fields.contains(&k.as_str())).collect();
    keys.sort_unstable();
    keys.into_iter()
        .take(MAX_NAMES)
        .map(|k| Drift { kind: DriftKind::HookField, name: clip(&format!("{hook}.{k}")) })
        .collect()
}

/// What one hook call drifted: every name (for counting), and the session's record of the
/// names this session had not reported yet.
#[derive(Debug, Default)]
pub struct Observed {
    /// Every drifted name of the call.
    pub drift: Vec<Drift>,
    /// The agent version the payload names, if it does.
    pub version: Option<String>,
    /// `x.{vendor}.session.drift` for the names new to this session, if any.
    pub draft: Option<EventDraft>,
}

/// Checks one hook call of `adapter` against its vocabulary (nothing for an adapter without
/// one), remembering in `state` what this session has reported.
pub fn observe(
    adapter: &dyn HookAdapter,
    hook: &str,
    payload: &Value,
    state: &mut SessionState,
    cx: &MapContext,
) -> Observed {
    let Some(vocab) = adapter.vocabulary() else { return Observed::default() };
    let drift = check(vocab, hook, payload);
    let version = vocab.version_of(payload).map(clip);
    if drift.is_empty() {
        return Observed { drift, version, draft: None };
    }
    let seen = state.extra.entry(SEEN.to_owned()).or_insert_with(|| json!([]));
    if !seen.is_array() {
        *seen = json!([]);
    }
    let Value::Array(seen) = seen else { return Observed { drift, version, draft: None } };
    let mut fresh: Vec<&Drift> = Vec::new();
    for d in &drift {
        let key = format!("{}:{}", d.kind.as_str(), d.name);
        if !seen.iter().any(|s| s.as_str() == Some(key.as_str())) && seen.len() < MAX_SEEN {
            seen.push(Value::String(key));
            fresh.push(d);
        }
    }
    let draft = (!fresh.is_empty()).then(|| {
        let ty = format!("x.{}.session.drift", adapter.vendor());
        let mut d = EventDraft::new(ty.clone(), cx.ceiling_for(&ty));
        let kind = fresh[0].kind;
        d.data.insert("kind".into(), json!(kind.as_str()));
        d.data.insert("hook".into(), json!(clip(hook)));
        let names: Vec<&str> = fresh.iter().map(|d| d.name.as_str()).collect();
        d.data.insert("names".into(), json!(names));
        if let Some(v) = &version {
            d.data.insert("agent.version".into(), json!(v));
        }
        d.severity = Some(Severity::Debug);
        d
    });
    Observed { drift, version, draft }
}

/// Places the session's drift record among a hook's drafts: after a `session.started` that
/// opens them, else first (so it never follows the session's end), with their session.
pub fn place(drafts: &mut Vec<EventDraft>, mut record: EventDraft) {
    record.session = drafts.iter().find_map(|d| d.session.clone());
    if record.session.is_none() {
        return;
    }
    let at = usize::from(drafts.first().is_some_and(|d| d.r#type == "session.started"));
    drafts.insert(at, record);
}

/// The OTel drift of a mapped draft: an `x.{vendor}.otel.unknown` names an event the
/// vendor's profile does not know.
pub fn otel_drift(vendor: &str, draft: &EventDraft) -> Option<Drift> {
    let rest = draft.r#type.strip_prefix("x.")?.strip_prefix(vendor)?;
    if rest != ".otel.unknown" {
        return None;
    }
    let name = draft.data.get("event.name").and_then(Value::as_str).unwrap_or("(unnamed)");
    Some(Drift { kind: DriftKind::OtelEvent, name: clip(name) })
}

#[cfg(test)]
mod tests {
    use super::*;

    static VOCAB: Vocabulary = Vocabulary {
        events: &["Start", "Tool"],
        common: &["session_id"],
        fields: &[("Tool", &["tool_name"])],
        version: Some("/v"),
    };

    #[test]
    fn unknown_events_and_fields_are_named() {
        assert_eq!(check(&VOCAB, "New", &json!({})), [Drift { kind: DriftKind::HookEvent, name: "New".into() }]);
        assert!(
            check(&VOCAB, "Start", &json!({"anything": 1})).is_empty(),
            "an unrecorded event's fields are unchecked"
        );
        let d = check(&VOCAB, "Tool", &json!({"session_id": "s", "tool_name": "x", "zeta": 1, "alpha": 2}));
        let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["Tool.alpha", "Tool.zeta"]);
        let many: serde_json::Map<String, Value> = (0..100).map(|i| (format!("k{i:03}"), json!(1))).collect();
        assert_eq!(check(&VOCAB, "Tool", &Value::Object(many)).len(), MAX_NAMES);
        assert_eq!(check(&VOCAB, &"x".repeat(500), &json!({}))[0].name.len(), MAX_NAME_CHARS);
    }
}
