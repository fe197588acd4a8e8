//! The two AEP-0006 form mappings of Claude Code: `AskUserQuestion` (one `kind: form`
//! request per tool call, one `field_spec` per question) and MCP `Elicitation` (the
//! requested schema's properties as fields). Both pinned by the Annex A mapping fixture at
//! both capture postures: labels are model/server content and degrade to structural
//! placeholders at `metadata` (the `field_spec.label` `[metadata*]` exception).

use aep_schemas::Capture;
use serde_json::{Map, Value, json};

use crate::EventDraft;
use crate::MapContext;
use crate::common::{Builder, gate_text};

use super::VENDOR;

/// `{id, label}` with the label gated: the real text at `redacted`+, `fallback` below.
fn labelled(id: &str, text: Option<&str>, fallback: &str, ceiling: Capture, cx: &MapContext) -> Value {
    let label = text.and_then(|t| gate_text(t, ceiling, cx)).unwrap_or_else(|| fallback.to_owned());
    json!({ "id": id, "label": label })
}

/// `AskUserQuestion`'s `tool_input` as one `attention.requested` (kind `form`), answerable
/// over control. Field and choice ids are 1-based indexes, so answers stay structural.
pub fn ask_user_question(tool_input: Option<&Value>, cx: &MapContext) -> EventDraft {
    let b = Builder::new("attention.requested", cx);
    let ceiling = b.ceiling();
    let questions: &[Value] =
        tool_input.and_then(|i| i.get("questions")).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let mut fields = Vec::with_capacity(questions.len());
    for (i, q) in questions.iter().enumerate() {
        let id = (i + 1).to_string();
        let question = q.get("question").and_then(Value::as_str);
        let text = match (q.get("header").and_then(Value::as_str).filter(|h| !h.is_empty()), question) {
            (Some(h), Some(q)) => Some(format!("{h}: {q}")),
            (None, Some(q)) => Some(q.to_owned()),
            (Some(h), None) => Some(h.to_owned()),
            (None, None) => None,
        };
        let options: &[Value] = q.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        let choices: Vec<Value> = options
            .iter()
            .enumerate()
            .map(|(j, o)| {
                let cid = (j + 1).to_string();
                labelled(&cid, o.get("label").and_then(Value::as_str), &cid, ceiling, cx)
            })
            .collect();
        let mut field = Map::new();
        field.insert("id".into(), json!(id));
        field.insert("type".into(), json!("select"));
        let label = labelled(&id, text.as_deref(), &id, ceiling, cx);
        field.insert("label".into(), label["label"].clone());
        field.insert("required".into(), json!(true));
        // The tool always offers a custom "Other" answer.
        field.insert("other".into(), json!(true));
        field.insert("choices".into(), Value::Array(choices));
        if q.get("multiSelect").and_then(Value::as_bool) == Some(true) {
            field.insert("multi".into(), json!(true));
        }
        fields.push(Value::Object(field));
    }
    let n = fields.len();
    let prompt = format!("{VENDOR} asks {n} question{}", if n == 1 { "" } else { "s" });
    b.meta("kind", "form")
        .meta("prompt", prompt)
        .meta("fields", Value::Array(fields))
        .meta("respond_via", json!(["control"]))
        .subject(Some("AskUserQuestion"))
        .build()
}

/// The field ids of an elicitation whose answers are structural (numbers, booleans, closed
/// enum values) and so stay at `metadata`; string answers follow `answer.text`'s rule.
pub fn structural_fields(schema: Option<&Value>) -> Vec<String> {
    properties(schema).filter(|(_, prop)| field_type(prop) != "string").map(|(k, _)| k.to_owned()).collect()
}

fn properties(schema: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    schema.and_then(|s| s.get("properties")).and_then(Value::as_object).into_iter().flatten()
}

/// MCP's four primitive shapes onto the four field types (enums are closed selects).
fn field_type(prop: &Value) -> &'static str {
    if prop.get("enum").is_some_and(Value::is_array) {
        return "select";
    }
    match prop.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => "number",
        Some("boolean") => "boolean",
        _ => "string",
    }
}

/// An MCP elicitation (`message` + requested schema) as one `attention.requested` (kind
/// `form`): field ids are the property keys, enum choice ids the enum values; no `other`.
pub fn elicitation(message: Option<&str>, schema: Option<&Value>, server: Option<&str>, cx: &MapContext) -> EventDraft {
    let b = Builder::new("attention.requested", cx);
    let ceiling = b.ceiling();
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = Vec::new();
    for (key, prop) in properties(schema) {
        let ty = field_type(prop);
        let title =
            prop.get("title").and_then(Value::as_str).or_else(|| prop.get("description").and_then(Value::as_str));
        let mut field = Map::new();
        field.insert("id".into(), json!(key));
        field.insert("type".into(), json!(ty));
        field.insert("label".into(), labelled(key, title, key, ceiling, cx)["label"].clone());
        field.insert("required".into(), json!(required.contains(&key.as_str())));
        if ty == "select" {
            let names = prop.get("enumNames").and_then(Value::as_array);
            let choices: Vec<Value> = prop
                .get("enum")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, v)| {
                    let id = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let name = names.and_then(|n| n.get(i)).and_then(Value::as_str);
                    labelled(&id, name, &id, ceiling, cx)
                })
                .collect();
            field.insert("choices".into(), Value::Array(choices));
        }
        for (from, to) in [("minimum", "min"), ("maximum", "max")] {
            if let Some(n) = prop.get(from).filter(|n| n.is_number()) {
                field.insert(to.into(), n.clone());
            }
        }
        fields.push(Value::Object(field));
    }
    let n = fields.len();
    let synthesized = format!("{VENDOR} requests input ({n} field{})", if n == 1 { "" } else { "s" });
    let prompt = message.and_then(|m| gate_text(m, ceiling, cx)).unwrap_or(synthesized);
    b.meta("kind", "form")
        .meta("prompt", prompt)
        .meta("fields", Value::Array(fields))
        .meta("respond_via", json!(["control"]))
        .subject(server)
        .build()
}

/// `answer.values` of an accepted elicitation, gated per key: structural values at any
/// ceiling, string values only at `redacted`+ (through the pipeline at `redacted`).
pub fn gate_values(content: &Map<String, Value>, structural: &[String], ceiling: Capture, cx: &MapContext) -> Value {
    let mut out = Map::new();
    for (k, v) in content {
        if structural.iter().any(|s| s == k) {
            if ceiling >= Capture::Metadata {
                out.insert(k.clone(), v.clone());
            }
        } else if let Some(g) = crate::common::gate_value(v, ceiling, cx) {
            out.insert(k.clone(), g);
        }
    }
    Value::Object(out)
}
