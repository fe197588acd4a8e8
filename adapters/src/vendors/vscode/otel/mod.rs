#![doc = include_str!("README.md")]

mod content;
pub use content::CONTENT;

use serde_json::Value;

use crate::otel::{Field, Mode, OtelProfile, OtelRecord, companion, full, meta, non_empty, redacted, stamp, unknown};
use crate::{EventDraft, MapContext};

/// The agent identity and namespace token.
pub const VENDOR: &str = "vscode";

/// The GenAI standard inference record the agent emits.
const INFERENCE_DETAILS: &str = "gen_ai.client.inference.operation.details";

/// The VS Code agent OTel profile.
#[derive(Debug, Clone, Copy, Default)]
pub struct VscodeOtel;

/// Attributes every event may carry beyond its own list.
const COMMON: &[Field] = &[full("user.email")];

/// Known events: the type suffix after `x.vscode.otel.` and the attributes each forwards.
const KNOWN: &[(&str, &str, &[Field])] = &[
    ("copilot_chat.session.start", "session.start", &[meta("gen_ai.request.model"), meta("gen_ai.agent.name")]),
    (
        "copilot_chat.tool.call",
        "tool.call",
        &[
            meta("gen_ai.tool.name"),
            meta("gen_ai.tool.call.id"),
            meta("duration_ms"),
            meta("success"),
            meta("error.type"),
            redacted("error.message"),
        ],
    ),
    (
        "copilot_chat.agent.turn",
        "agent.turn",
        &[
            meta("turn.index"),
            meta("gen_ai.usage.input_tokens"),
            meta("gen_ai.usage.output_tokens"),
            meta("tool_call_count"),
            meta("gen_ai.request.model"),
        ],
    ),
    (
        "copilot_chat.edit.feedback",
        "edit.feedback",
        &[
            meta("outcome"),
            meta("language_id"),
            meta("participant"),
            meta("request_id"),
            meta("edit_surface"),
            meta("has_remaining_edits"),
            meta("is_notebook"),
        ],
    ),
    (
        INFERENCE_DETAILS,
        "inference_details",
        &[
            meta("gen_ai.operation.name"),
            meta("gen_ai.request.model"),
            meta("gen_ai.response.model"),
            meta("gen_ai.response.id"),
            meta("gen_ai.response.finish_reasons"),
            meta("gen_ai.usage.input_tokens"),
            meta("gen_ai.usage.output_tokens"),
            meta("gen_ai.usage.cache_read.input_tokens"),
            meta("gen_ai.usage.cache_creation.input_tokens"),
            meta("gen_ai.usage.reasoning.output_tokens"),
            meta("error.type"),
            // Message content: redacted+ (the gate visible in the pin).
            redacted("gen_ai.input.messages"),
            redacted("gen_ai.output.messages"),
            redacted("gen_ai.system_instructions"),
        ],
    ),
];

fn known(name: &str) -> Option<(&'static str, &'static [Field])> {
    KNOWN.iter().find(|(n, _, _)| *n == name).map(|(_, s, f)| (*s, *f))
}

impl OtelProfile for VscodeOtel {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn content(&self) -> &'static crate::otel::content::ContentTable {
        &CONTENT
    }

    /// `service.name` `copilot*` (`copilot-chat`) or `vscode*`.
    fn claims(&self, rec: &OtelRecord) -> bool {
        crate::otel::service_starts_with(rec, "copilot") || crate::otel::service_starts_with(rec, "vscode")
    }

    fn model_calls(&self) -> &'static [crate::otel::usage::ModelCallFields] {
        MODEL_CALLS
    }

    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        // AEP-0002 Annex A.5: the exporter stamps `session.id` at the RESOURCE level.
        rec.resource_str("session.id").or_else(|| rec.attr_str("session.id")).filter(|s| !s.is_empty())
    }

    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        let mut out = Vec::with_capacity(1);
        self.map_record_into(rec, cx, mode, &mut out);
        out
    }

    fn map_record_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, out: &mut Vec<EventDraft>) {
        // The default `event_name`, borrowed (no copy per record).
        let name = crate::otel::record_event_name_ref(rec);
        let session = self.session_id(rec);
        let mut d = match name.and_then(known) {
            None => unknown(VENDOR, name, cx),
            Some((suffix, fields)) => {
                let core = match (mode, suffix) {
                    (Mode::Primary, "session.start") => Some(session_started(rec, cx)),
                    (Mode::Primary, "tool.call") => crate::otel::tool_outcome(rec, &TOOL_CALL, cx),
                    _ => None,
                };
                core.unwrap_or_else(|| companion(VENDOR, suffix, rec, fields, COMMON, cx))
            }
        };
        stamp(&mut d, rec, session);
        out.push(d);
    }
}

/// `copilot_chat.session.start` -> `session.started`.
fn session_started(rec: &OtelRecord, cx: &MapContext) -> EventDraft {
    let ty = "session.started";
    let mut d = EventDraft::new(ty, cx.ceiling_for(ty));
    d.data.insert("client".into(), serde_json::json!({ "name": VENDOR }));
    if let Some(m) = non_empty(rec.attributes.get("gen_ai.request.model")) {
        d.data.insert("gen_ai.request.model".into(), Value::String(m.to_owned()));
    }
    d
}

/// The attributes of this vendor's tool-result record.
const TOOL_CALL: crate::otel::ToolResultKeys = crate::otel::ToolResultKeys {
    name: "gen_ai.tool.name",
    call_id: "gen_ai.tool.call.id",
    error_type: "error.type",
    error_message: "error.message",
};

/// The model calls among this profile's events, for the GenAI metrics
/// ([`crate::otel::usage`]).
pub const MODEL_CALLS: &[crate::otel::usage::ModelCallFields] = &[crate::otel::usage::ModelCallFields {
    event: "inference_details",
    when: None,
    model: Some("gen_ai.request.model"),
    input_tokens: Some("gen_ai.usage.input_tokens"),
    output_tokens: Some("gen_ai.usage.output_tokens"),
    duration_ms: None,
    operation: "chat",
    response_id: Some("gen_ai.response.id"),
    finish_reasons: Some("gen_ai.response.finish_reasons"),
    cache_read_tokens: Some("gen_ai.usage.cache_read.input_tokens"),
    cache_creation_tokens: Some("gen_ai.usage.cache_creation.input_tokens"),
    reasoning_tokens: Some("gen_ai.usage.reasoning.output_tokens"),
    ..crate::otel::usage::ModelCallFields::EMPTY
}];

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;
    use serde_json::{Map, json};
    use std::sync::Arc;

    fn rec(attrs: Value) -> OtelRecord {
        OtelRecord {
            resource: Arc::new(Map::from_iter([
                ("service.name".to_owned(), json!("copilot-chat")),
                ("session.id".to_owned(), json!("vsc-1")),
            ])),
            attributes: attrs.as_object().cloned().unwrap_or_default().into(),
            ..Default::default()
        }
    }

    fn map(r: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        VscodeOtel.map_record(r, cx, mode)
    }

    #[test]
    fn session_comes_from_the_resource() {
        let out = map(
            &rec(json!({"event.name": "copilot_chat.agent.turn", "turn.index": 1})),
            &MapContext::default(),
            Mode::Companion,
        );
        assert_eq!(out[0].session.as_deref(), Some("vsc-1"));
        assert_eq!(out[0].r#type, "x.vscode.otel.agent.turn");
        assert_eq!(out[0].time, None);
    }

    #[test]
    fn inference_messages_are_redacted_gated() {
        let r = rec(json!({
            "event.name": INFERENCE_DETAILS, "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": "[{\"role\":\"user\",\"content\":\"token=abc123 please\"}]"
        }));
        let meta_out = map(&r, &MapContext::default(), Mode::Companion);
        assert!(!meta_out[0].data.contains_key("gen_ai.input.messages"));
        let red = MapContext { capture: Capture::Redacted, ..Default::default() };
        let red_out = map(&r, &red, Mode::Companion);
        let text = red_out[0].data["gen_ai.input.messages"].as_str().unwrap().to_owned();
        assert!(!text.contains("abc123"), "{text}");
        assert_eq!(red_out[0].capture, Capture::Redacted);
    }

    #[test]
    fn never_emits_denied_or_ended() {
        for name in ["copilot_chat.tool.denied", "copilot_chat.session.end"] {
            let out = map(&rec(json!({"event.name": name})), &MapContext::default(), Mode::Primary);
            assert_eq!(out[0].r#type, "x.vscode.otel.unknown");
        }
    }

    #[test]
    fn failed_tool_without_error_type_synthesizes_one() {
        let r = rec(json!({"event.name": "copilot_chat.tool.call", "gen_ai.tool.name": "x", "success": false}));
        let out = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(out[0].data["error"], json!({"type": "tool_error"}));
    }
}
