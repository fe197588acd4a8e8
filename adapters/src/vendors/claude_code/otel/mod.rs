#![doc = include_str!("README.md")]

mod content;
pub use content::CONTENT;

use serde_json::Value;

use crate::otel::{
    Field, Mode, OtelProfile, OtelRecord, companion, full, meta, non_empty, redacted, stamp, tool_object, unknown,
};
use crate::{EventDraft, MapContext};

/// The agent identity and namespace token.
pub const VENDOR: &str = "claude-code";

/// The Claude Code OTel profile.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeCodeOtel;

/// Attributes every event may carry beyond its own list.
const COMMON: &[Field] = &[
    meta("prompt.id"),
    meta("event.sequence"),
    full("user.email"),
    full("user.id"),
    full("user.account_uuid"),
    full("organization.id"),
];

/// Known events (bare names) and the attributes each forwards.
const KNOWN: &[(&str, &[Field])] = &[
    ("user_prompt", &[meta("prompt_length"), meta("command_name"), meta("command_source"), redacted("prompt")]),
    (
        "tool_result",
        &[
            meta("tool_name"),
            meta("tool_use_id"),
            meta("success"),
            meta("duration_ms"),
            meta("decision_source"),
            meta("decision_type"),
            meta("error_type"),
            meta("tool_input_size_bytes"),
            meta("tool_result_size_bytes"),
            meta("mcp_server_scope"),
            redacted("error"),
            full("tool_parameters"),
            full("tool_input"),
        ],
    ),
    (
        "tool_decision",
        &[meta("tool_name"), meta("tool_use_id"), meta("decision"), meta("source"), full("tool_parameters")],
    ),
    (
        "api_request",
        &[
            meta("model"),
            meta("input_tokens"),
            meta("output_tokens"),
            meta("cache_read_tokens"),
            meta("cache_creation_tokens"),
            meta("cost_usd"),
            meta("duration_ms"),
            meta("request_id"),
            meta("speed"),
            meta("query_source"),
            meta("effort"),
            meta("attempt"),
        ],
    ),
    (
        "api_error",
        &[
            meta("model"),
            meta("status_code"),
            meta("duration_ms"),
            meta("attempt"),
            meta("request_id"),
            meta("speed"),
            meta("query_source"),
            meta("effort"),
            redacted("error"),
        ],
    ),
    (
        "assistant_response",
        &[meta("response_length"), meta("request_id"), meta("model"), meta("query_source"), redacted("response")],
    ),
    (
        "compaction",
        &[
            meta("trigger"),
            meta("success"),
            meta("duration_ms"),
            meta("pre_tokens"),
            meta("post_tokens"),
            meta("precompute_reuse"),
        ],
    ),
    (
        "hook_execution_start",
        &[meta("hook_event"), meta("hook_name"), meta("num_hooks"), meta("hook_source"), meta("managed_only")],
    ),
    (
        "hook_execution_complete",
        &[
            meta("hook_event"),
            meta("hook_name"),
            meta("num_hooks"),
            meta("num_success"),
            meta("num_blocking"),
            meta("num_non_blocking_error"),
            meta("num_cancelled"),
            meta("total_duration_ms"),
            meta("hook_source"),
            meta("managed_only"),
        ],
    ),
    ("hook_registered", &[meta("hook_event"), meta("hook_type"), meta("hook_source"), meta("hook_matcher")]),
    // 2.1.332: configuration and background-subagent records (recorded attribute sets).
    (
        "managed_settings_resolved",
        &[
            meta("managed_settings.trigger"),
            meta("managed_settings.source_behavior"),
            meta("managed_settings.helper.state"),
            meta("managed_settings.helper.applied"),
        ],
    ),
    (
        "plugin_loaded",
        &[
            meta("plugin.name"),
            meta("marketplace.name"),
            meta("plugin.scope"),
            meta("enabled_via"),
            meta("plugin_id_hash"),
            meta("has_hooks"),
            meta("has_mcp"),
            meta("host_owned_mcp"),
            meta("skill_path_count"),
            meta("command_path_count"),
            meta("agent_path_count"),
            meta("safe_mode"),
        ],
    ),
    (
        "subagent_completed",
        &[
            meta("agent_id"),
            meta("agent_type"),
            meta("agent.source"),
            meta("is_built_in"),
            meta("is_async"),
            meta("total_tokens"),
            meta("total_tool_uses"),
            meta("duration_ms"),
            meta("model"),
            meta("final_model"),
            meta("model_swapped"),
        ],
    ),
    (
        "mcp_server_connection",
        &[
            meta("status"),
            meta("transport_type"),
            meta("server_scope"),
            meta("duration_ms"),
            meta("is_plugin"),
            meta("server_name"),
        ],
    ),
];

fn known(name: &str) -> Option<(&'static str, &'static [Field])> {
    KNOWN.iter().find(|(n, _)| *n == name).copied()
}

impl OtelProfile for ClaudeCodeOtel {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn content(&self) -> &'static crate::otel::content::ContentTable {
        &CONTENT
    }

    /// `service.name` `claude-code` (or `claude_code`), or the scope `com.anthropic.claude_code*`.
    fn claims(&self, rec: &OtelRecord) -> bool {
        crate::otel::service_is(rec, &["claude-code", "claude_code"])
            || rec.scope_name.starts_with("com.anthropic.claude_code")
    }

    fn model_calls(&self) -> &'static [crate::otel::usage::ModelCallFields] {
        MODEL_CALLS
    }

    fn event_name(&self, rec: &OtelRecord) -> Option<String> {
        name_ref(rec).map(str::to_owned)
    }

    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        rec.attr_str("session.id").or_else(|| rec.resource_str("session.id")).filter(|s| !s.is_empty())
    }

    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        let mut out = Vec::with_capacity(1);
        self.map_record_into(rec, cx, mode, &mut out);
        out
    }

    fn map_record_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, drafts: &mut Vec<EventDraft>) {
        let name = name_ref(rec);
        let session = self.session_id(rec);
        let out = match name.and_then(known) {
            None => Some(unknown(VENDOR, name, cx)),
            Some((n, fields)) => match (mode, n) {
                (Mode::Primary, "tool_decision") => tool_denied(rec, cx),
                (Mode::Primary, "tool_result") => Some(
                    crate::otel::tool_outcome(rec, &TOOL_RESULT, cx)
                        .unwrap_or_else(|| companion(VENDOR, n, rec, fields, COMMON, cx)),
                ),
                _ => Some(companion(VENDOR, n, rec, fields, COMMON, cx)),
            },
        };
        // `prompt.id` is the run the hook channel names (its `prompt_id`), so both channels
        // of one turn land under the same AEP run.
        let run = rec.attr_str("prompt.id").filter(|p| !p.is_empty());
        drafts.extend(out.map(|mut d| {
            stamp(&mut d, rec, session);
            if d.run.is_none() {
                d.run = run.map(str::to_owned);
            }
            d
        }));
    }
}

/// The bare event name, borrowed: the `event.name` attribute (or field), else the body of
/// older builds (`claude_code.tool_result`), without the `claude_code.` prefix.
fn name_ref(rec: &OtelRecord) -> Option<&str> {
    let n = crate::otel::record_event_name_ref(rec)
        .or_else(|| rec.body.get().and_then(Value::as_str).filter(|b| b.starts_with("claude_code.")))?;
    Some(n.strip_prefix("claude_code.").unwrap_or(n))
}

/// `tool_decision` with `reject` from config or a hook -> `tool.denied by=policy`; a user
/// reject is a human decision (not a policy block) and maps to nothing, as does an accept.
fn tool_denied(rec: &OtelRecord, cx: &MapContext) -> Option<EventDraft> {
    if !matches!(rec.attr_str("decision")?.to_ascii_lowercase().as_str(), "reject" | "deny" | "denied") {
        return None;
    }
    if !matches!(rec.attr_str("source")?.to_ascii_lowercase().as_str(), "config" | "hook") {
        return None;
    }
    let tool = non_empty(rec.attributes.get("tool_name"))?;
    let ty = "tool.denied";
    let mut d = EventDraft::new(ty, cx.ceiling_for(ty));
    d.data.insert("tool".into(), tool_object(tool, non_empty(rec.attributes.get("tool_use_id"))));
    d.data.insert("by".into(), Value::String("policy".into()));
    d.subject = Some(tool.to_owned());
    Some(d)
}

/// The attributes of this vendor's tool-result record.
const TOOL_RESULT: crate::otel::ToolResultKeys = crate::otel::ToolResultKeys {
    name: "tool_name",
    call_id: "tool_use_id",
    error_type: "error_type",
    error_message: "error",
};

/// The model calls among this profile's events, for the GenAI metrics
/// ([`crate::otel::usage`]).
pub const MODEL_CALLS: &[crate::otel::usage::ModelCallFields] = &[
    crate::otel::usage::ModelCallFields {
        event: "api_request",
        when: None,
        model: Some("model"),
        input_tokens: Some("input_tokens"),
        output_tokens: Some("output_tokens"),
        duration_ms: Some("duration_ms"),
        operation: "chat",
        // The API's request id, which Claude Code's own `llm_request` span names `gen_ai.response.id`.
        response_id: Some("request_id"),
        cache_read_tokens: Some("cache_read_tokens"),
        cache_creation_tokens: Some("cache_creation_tokens"),
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
    crate::otel::usage::ModelCallFields {
        // A failed attempt (the real `s06_api_error_400`): a call without counts.
        event: "api_error",
        model: Some("model"),
        duration_ms: Some("duration_ms"),
        response_id: Some("request_id"),
        status_code: Some("status_code"),
        failed: true,
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;
    use serde_json::{Map, json};
    use std::sync::Arc;

    /// Shaped like the real Claude Code 2.1.197 export (see the captures).
    fn rec(attrs: Value) -> OtelRecord {
        OtelRecord {
            resource: Arc::new(Map::from_iter([("service.name".to_owned(), json!("claude-code"))])),
            scope_name: "com.anthropic.claude_code.events".into(),
            attributes: attrs.as_object().cloned().unwrap_or_default().into(),
            body: json!("claude_code.tool_result").into(),
            time_unix_nano: 1_796_011_510_093_000_000,
            ..Default::default()
        }
    }

    fn map(r: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        ClaudeCodeOtel.map_record(r, cx, mode)
    }

    #[test]
    fn tool_result_both_modes() {
        let r = rec(json!({
            "event.name": "tool_result", "session.id": "s-1", "prompt.id": "p-1", "tool_name": "Read",
            "tool_use_id": "toolu_1", "success": "false", "duration_ms": "204", "error_type": "TelemetrySafeError",
            "error": "File does not exist at /home/dev/x", "user.id": "abc", "tool_input": "{}"
        }));
        let c = map(&r, &MapContext::default(), Mode::Companion);
        assert_eq!(c[0].r#type, "x.claude-code.otel.tool_result");
        assert_eq!(c[0].session.as_deref(), Some("s-1"));
        assert_eq!(c[0].data["prompt.id"], json!("p-1"));
        assert_eq!(c[0].run.as_deref(), Some("p-1"), "the turn's run, as the hook channel names it");
        assert!(!c[0].data.contains_key("user.id") && !c[0].data.contains_key("error"));
        let p = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(p[0].r#type, "tool.failed");
        assert_eq!(p[0].data["error"], json!({"type": "TelemetrySafeError"}));
        assert_eq!(p[0].data["tool"], json!({"name": "Read", "call_id": "toolu_1"}));
        let red = MapContext { capture: Capture::Redacted, ..Default::default() };
        let p = map(&r, &red, Mode::Primary);
        assert!(p[0].data["error"]["message"].is_string());
    }

    #[test]
    fn prefixed_names_and_decisions() {
        let r = rec(
            json!({"event.name": "claude_code.tool_decision", "tool_name": "Bash", "decision": "reject", "source": "config"}),
        );
        assert_eq!(map(&r, &MapContext::default(), Mode::Primary)[0].r#type, "tool.denied");
        assert_eq!(map(&r, &MapContext::default(), Mode::Companion)[0].r#type, "x.claude-code.otel.tool_decision");
        let u = rec(
            json!({"event.name": "tool_decision", "tool_name": "Bash", "decision": "reject", "source": "user_reject"}),
        );
        assert!(map(&u, &MapContext::default(), Mode::Primary).is_empty());
    }

    /// Claude Code 2.1.332's new records, their attributes as recorded (`claude -p` with
    /// `OTEL_LOGS_EXPORTER=otlp` against the e2e mock): named, not `unknown`, metadata only.
    #[test]
    fn the_2_1_332_records_are_known() {
        let common = json!({"user.id": "61a8b031", "session.id": "s-1", "terminal.type": "non-interactive"});
        let cases = [
            json!({"event.name": "managed_settings_resolved", "managed_settings.trigger": "startup",
                   "managed_settings.source_behavior": "first-wins", "managed_settings.helper.state": "none"}),
            json!({"event.name": "plugin_loaded", "plugin.name": "cc-plugin-privacy", "marketplace.name": "builtin",
                   "has_hooks": true, "skill_path_count": 0}),
            json!({"event.name": "subagent_completed", "prompt.id": "p-1", "agent_type": "general-purpose",
                   "is_async": true, "total_tokens": 110, "duration_ms": 624, "agent_id": "ad4fcaef94aac410c"}),
        ];
        for case in cases {
            let mut attrs = common.as_object().unwrap().clone();
            attrs.extend(case.as_object().unwrap().clone());
            let rec = rec(Value::Object(attrs));
            let name = case["event.name"].as_str().unwrap();
            let d = ClaudeCodeOtel.map_record(&rec, &MapContext::default(), Mode::Companion);
            assert_eq!(d.len(), 1, "{name}");
            assert_eq!(d[0].r#type, format!("x.claude-code.otel.{name}"));
            assert_eq!(d[0].session.as_deref(), Some("s-1"));
            assert!(d[0].data.get("user.id").is_none(), "user.id is full-only");
            for (k, v) in
                case.as_object().unwrap().iter().filter(|(k, _)| !["event.name", "prompt.id"].contains(&k.as_str()))
            {
                assert_eq!(d[0].data.get(k), Some(v), "{name}.{k}");
            }
        }
    }
}
