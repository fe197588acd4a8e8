//! The `clarify` form overlay (AEP-0006 `kind: "form"`, observed, `respond_via: ["oob"]`):
//! the ask-the-user tool's card beside its pinned tool events, every fact payload-derived.

use serde_json::{Map, Value, json};

use crate::common::{attention_key, tool_key};
use crate::vendors::plugin_common::{choices, draft, gate_value, star_label};
use crate::{EventDraft, MapContext};

/// The vendor's `MAX_CHOICES`.
const MAX_CHOICES: usize = 4;

/// Return-contract sentinels (static vendor strings at the pinned tag).
const CLI_TIMEOUT: &str = "The user did not provide a response within the time limit. Use your best judgement to make the choice and proceed.";
const CLI_CANCEL: &str = "The user cancelled. Use your best judgement to proceed.";
const UNDELIVERABLE: &str = "[clarify prompt could not be delivered]";

/// The vendor's entry-point choice normalization (`_flatten_choice`): dict unwrap
/// `label`/`description`/`text`/`title`, trim, join lists, drop empties, cap 4.
pub fn normalize_choices(raw: &Value) -> Vec<String> {
    fn flat(v: &Value) -> String {
        match v {
            Value::String(s) => s.trim().to_owned(),
            Value::Object(m) => ["label", "description", "text", "title"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
            Value::Array(items) => items.iter().map(flat).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(", "),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
        }
    }
    raw.as_array()
        .map(|items| items.iter().map(flat).filter(|s| !s.is_empty()).take(MAX_CHOICES).collect())
        .unwrap_or_default()
}

/// The `attention.requested` form card of a clarify call; `None` when the question is
/// missing or empty (a question-less clarify mints no card).
pub fn card(tool_input: &Value, call_id: Option<&str>, cx: &MapContext) -> Option<EventDraft> {
    let question = tool_input.get("question").and_then(Value::as_str).map(str::trim).filter(|q| !q.is_empty())?;
    let labels = normalize_choices(tool_input.get("choices").unwrap_or(&Value::Null));
    let mut d = draft("attention.requested", cx);
    d.subject = call_id.map(str::to_owned);
    d.data.insert("kind".into(), json!("form"));
    // structural at every ceiling
    d.data.insert("prompt".into(), json!("hermes asks a question"));
    let mut f = Map::new();
    f.insert("id".into(), json!("1"));
    f.insert("type".into(), json!(if labels.is_empty() { "string" } else { "select" }));
    f.insert("label".into(), json!(star_label(&d, cx, 1, question)));
    f.insert("required".into(), json!(true));
    if !labels.is_empty() {
        // the UI always appends "Other (type your answer)"
        f.insert("other".into(), json!(true));
        f.insert("choices".into(), choices(&d, cx, &labels));
    }
    d.data.insert("fields".into(), json!([Value::Object(f)]));
    d.data.insert("respond_via".into(), json!(["oob"]));
    d.cause_key = call_id.map(tool_key);
    d.correlation_key = call_id.map(attention_key);
    Some(d)
}

fn is_gateway_timeout(s: &str) -> bool {
    // `[user did not respond within {N}m]`
    s.strip_prefix("[user did not respond within ")
        .and_then(|r| r.strip_suffix("m]"))
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The overlay's terminal for a clarify `post_tool_call`, classified from the result and
/// never fabricating an answer: blocked/error -> `attention.resolved` (dismissed); the
/// timeout sentinels -> `attention.timeout`; cancel, undeliverable, empty ->
/// dismissed; anything else -> `attention.answered { answer: {values: {"1": ...}}, via: "oob" }`
/// (a picked choice as its structural 1-based id, other text gated at `redacted` minimum).
/// An unparseable ok-result makes no claim.
pub fn outcome(status: &str, result: Option<&Value>, call_id: Option<&str>, cx: &MapContext) -> Vec<EventDraft> {
    let settle = |ty: &str, resolution: Option<&str>| {
        let mut d = draft(ty, cx);
        if let Some(r) = resolution {
            d.data.insert("resolution".into(), json!(r));
        }
        d.subject = call_id.map(str::to_owned);
        d.cause_key = call_id.map(attention_key);
        vec![d]
    };
    if status == "blocked" || status == "error" {
        return settle("attention.resolved", Some("dismissed"));
    }
    let parsed: Option<Value> = match result {
        Some(Value::String(s)) => serde_json::from_str(s).ok(),
        Some(v @ Value::Object(_)) => Some(v.clone()),
        _ => None,
    };
    let Some(parsed) = parsed.filter(Value::is_object) else { return Vec::new() };
    if parsed.get("error").is_some() {
        return settle("attention.resolved", Some("dismissed"));
    }
    let response = parsed.get("user_response").and_then(Value::as_str).unwrap_or("").trim().to_owned();
    if response == CLI_TIMEOUT || is_gateway_timeout(&response) {
        return settle("attention.timeout", None);
    }
    if response.is_empty() || response == CLI_CANCEL || response == UNDELIVERABLE {
        return settle("attention.resolved", Some("dismissed"));
    }
    let offered = normalize_choices(parsed.get("choices_offered").unwrap_or(&Value::Null));
    let mut d = draft("attention.answered", cx);
    let mut values = Map::new();
    match offered.iter().position(|c| *c == response) {
        // a picked choice is its structural id: metadata-legal at any ceiling
        Some(i) => {
            values.insert("1".into(), json!((i + 1).to_string()));
        }
        // Other / open-ended text follows answer.text's redacted minimum (AEP-0006)
        None => {
            if let Some(v) = gate_value(&d, cx, &json!(response)) {
                values.insert("1".into(), v);
            }
        }
    }
    d.data.insert("answer".into(), json!({"values": Value::Object(values)}));
    d.data.insert("via".into(), json!("oob"));
    d.subject = call_id.map(str::to_owned);
    d.cause_key = call_id.map(attention_key);
    vec![d]
}
