#![doc = include_str!("README.md")]

mod content;
pub use content::CONTENT;

use serde_json::Value;

use crate::otel::{
    Field, Mode, OtelProfile, OtelRecord, ToolResultKeys, companion, full, meta, non_empty, redacted, stamp,
    tool_outcome, unknown,
};
use crate::{EventDraft, MapContext};

/// The agent identity and namespace token (the hook adapter's, so both channels share a log).
pub const VENDOR: &str = super::VENDOR;

/// The Gemini CLI OTel profile.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiCliOtel;

/// The GenAI standard inference record Gemini CLI emits beside its own `api_*` records.
const INFERENCE_DETAILS: &str = "gen_ai.client.inference.operation.details";

/// Attributes every event may carry beyond its own list: the per-installation id is a stable
/// pseudonymous user identifier, and `user.email` is PII, so both ride at `full` only.
const COMMON: &[Field] = &[full("installation.id"), full("user.email")];

/// The known events as Gemini CLI 0.61 sends them: those in the captures, plus `api_error`,
/// `chat_compression`, `conversation_finished` and `agent.start` / `agent.finish` read from
/// the pinned 0.61.0 package's own event classes (their `toOpenTelemetryAttributes`): the
/// full event name, the type suffix after `x.gemini-cli.otel.`, and the attributes each
/// forwards.
const KNOWN: &[(&str, &str, &[Field])] = &[
    (
        "gemini_cli.config",
        "config",
        &[
            meta("model"),
            meta("embedding_model"),
            meta("approval_mode"),
            meta("sandbox_enabled"),
            meta("core_tools_enabled"),
            meta("api_key_enabled"),
            meta("vertex_ai_enabled"),
            meta("log_user_prompts_enabled"),
            meta("file_filtering_respect_git_ignore"),
            meta("debug_mode"),
            meta("mcp_servers"),
            meta("mcp_servers_count"),
            meta("mcp_tools"),
            meta("mcp_tools_count"),
            meta("output_format"),
            meta("extensions"),
            meta("extensions_count"),
            meta("extension_ids"),
            meta("worktree_active"),
            meta("interactive"),
            meta("auth_type"),
        ],
    ),
    ("gemini_cli.user_prompt", "user_prompt", &[meta("prompt_length"), meta("prompt_id"), redacted("prompt")]),
    (
        "gemini_cli.tool_call",
        "tool_call",
        &[
            meta("function_name"),
            meta("duration_ms"),
            meta("success"),
            meta("decision"),
            meta("prompt_id"),
            meta("tool_type"),
            meta("content_length"),
            meta("mcp_server_name"),
            meta("extension_name"),
            meta("extension_id"),
            meta("start_time"),
            meta("end_time"),
            meta("error_type"),
            meta("error.type"),
            // Line counts and exit codes (`{"exitCode": 2, "isError": true}`), not content.
            meta("metadata"),
            redacted("error"),
            redacted("error.message"),
            // The call's arguments (paths, commands, file content): content.
            full("function_args"),
        ],
    ),
    (
        "gemini_cli.file_operation",
        "file_operation",
        &[
            meta("tool_name"),
            meta("operation"),
            meta("lines"),
            meta("mimetype"),
            meta("extension"),
            meta("programming_language"),
        ],
    ),
    (
        "gemini_cli.api_request",
        "api_request",
        // The whole request (system prompt, history, tool output): content at `full`.
        &[meta("model"), meta("prompt_id"), meta("role"), full("request_text")],
    ),
    (
        "gemini_cli.api_response",
        "api_response",
        &[
            meta("model"),
            meta("duration_ms"),
            meta("status_code"),
            meta("http.status_code"),
            meta("input_token_count"),
            meta("output_token_count"),
            meta("cached_content_token_count"),
            meta("thoughts_token_count"),
            meta("tool_token_count"),
            meta("total_token_count"),
            meta("finish_reasons"),
            meta("prompt_id"),
            meta("role"),
            meta("auth_type"),
            redacted("response_text"),
        ],
    ),
    (
        "gemini_cli.api_error",
        "api_error",
        &[
            meta("model"),
            meta("error.type"),
            meta("status_code"),
            meta("http.status_code"),
            meta("duration_ms"),
            meta("prompt_id"),
            meta("role"),
            meta("auth_type"),
            redacted("error"),
            redacted("error.message"),
        ],
    ),
    ("gemini_cli.conversation_finished", "conversation_finished", &[meta("approvalMode"), meta("turnCount")]),
    ("gemini_cli.agent.start", "agent.start", &[meta("agent_id"), meta("agent_name")]),
    (
        "gemini_cli.agent.finish",
        "agent.finish",
        &[meta("agent_id"), meta("agent_name"), meta("duration_ms"), meta("turn_count"), meta("terminate_reason")],
    ),
    (
        "gemini_cli.hook_call",
        "hook_call",
        &[
            meta("hook_event_name"),
            meta("hook_type"),
            meta("duration_ms"),
            meta("success"),
            meta("exit_code"),
            // A command line may carry paths or secrets: free text.
            redacted("hook_name"),
            redacted("stdout"),
            redacted("stderr"),
            // The hook's stdin payload and reply (prompts, tool input and output): content.
            full("hook_input"),
            full("hook_output"),
        ],
    ),
    (
        "gemini_cli.model_routing",
        "model_routing",
        &[
            meta("decision_model"),
            meta("decision_source"),
            meta("routing_latency_ms"),
            meta("failed"),
            meta("approval_mode"),
            meta("enable_numerical_routing"),
            meta("classifier_threshold"),
            redacted("reasoning"),
            redacted("error_message"),
        ],
    ),
    ("gemini_cli.chat_compression", "chat_compression", &[meta("tokens_before"), meta("tokens_after")]),
    (
        "gemini_cli.startup_stats",
        "startup_stats",
        &[meta("phases"), meta("os_platform"), meta("os_release"), meta("is_docker")],
    ),
    ("gemini_cli.ripgrep_fallback", "ripgrep_fallback", &[redacted("error")]),
    ("gemini_cli.plan.approval_mode_duration", "plan.approval_mode_duration", &[meta("mode"), meta("duration_ms")]),
    (
        INFERENCE_DETAILS,
        "inference_details",
        &[
            meta("gen_ai.operation.name"),
            meta("gen_ai.provider.name"),
            meta("gen_ai.request.model"),
            meta("gen_ai.response.model"),
            meta("gen_ai.response.id"),
            meta("gen_ai.response.finish_reasons"),
            meta("gen_ai.request.temperature"),
            meta("gen_ai.request.top_p"),
            meta("gen_ai.request.top_k"),
            meta("gen_ai.request.max_tokens"),
            meta("gen_ai.usage.input_tokens"),
            meta("gen_ai.usage.output_tokens"),
            meta("server.address"),
            meta("server.port"),
            meta("error.type"),
            // Message content: redacted+ (as the VS Code profile gates the same record).
            redacted("gen_ai.input.messages"),
            redacted("gen_ai.output.messages"),
            redacted("gen_ai.system_instructions"),
        ],
    ),
];

/// The tool record's attributes. The channel has no call id: `call_id` is never sent, so the
/// core `tool` object carries the name only.
const TOOL_CALL: ToolResultKeys =
    ToolResultKeys { name: "function_name", call_id: "call_id", error_type: "error_type", error_message: "error" };

/// One Gemini-shaped OTel channel: Gemini CLI and its fork Qwen Code send the same record
/// shapes (`<prefix>.config`, `<prefix>.tool_call`, ...) under their own event prefix, so
/// they share this mapping and differ in their tables.
pub(crate) struct Family {
    /// The agent identity and `x.<vendor>.otel.*` token.
    pub vendor: &'static str,
    /// Known events: full name, type suffix, forwarded attributes.
    pub known: &'static [(&'static str, &'static str, &'static [Field])],
    /// Attributes any event may carry.
    pub common: &'static [Field],
    /// The event whose record opens a session (`<prefix>.config`).
    pub config: &'static str,
    /// The tool-call record (`<prefix>.tool_call`).
    pub tool_call: &'static str,
    /// Its attribute keys.
    pub tool_keys: &'static ToolResultKeys,
}

/// This profile's family entry.
pub(crate) const GEMINI: Family = Family {
    vendor: VENDOR,
    known: KNOWN,
    common: COMMON,
    config: "gemini_cli.config",
    tool_call: "gemini_cli.tool_call",
    tool_keys: &TOOL_CALL,
};

impl Family {
    /// The session: the record's `session.id` (the hook channel's `session_id`), else the
    /// resource's.
    pub(crate) fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        rec.attr_str("session.id").or_else(|| rec.resource_str("session.id")).filter(|s| !s.is_empty())
    }

    /// Maps one record (see the README's table).
    pub(crate) fn map_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, out: &mut Vec<EventDraft>) {
        let name = crate::otel::record_event_name_ref(rec);
        let session = self.session_id(rec);
        let Some(&(full_name, suffix, fields)) = name.and_then(|n| self.known.iter().find(|(k, _, _)| *k == n)) else {
            let mut d = unknown(self.vendor, name, cx);
            stamp(&mut d, rec, session);
            out.push(d);
            return;
        };
        let core = match mode {
            Mode::Companion => None,
            Mode::Primary if full_name == self.config => Some(self.session_started(rec, cx)),
            Mode::Primary if full_name == self.tool_call && ran(rec) => tool_outcome(rec, self.tool_keys, cx),
            Mode::Primary => None,
        };
        let mut d = core.unwrap_or_else(|| companion(self.vendor, suffix, rec, fields, self.common, cx));
        stamp(&mut d, rec, session);
        out.push(d);
    }

    /// `<prefix>.config` -> `session.started` (the configuration stays on the companion family).
    fn session_started(&self, rec: &OtelRecord, cx: &MapContext) -> EventDraft {
        let ty = "session.started";
        let mut d = EventDraft::new(ty, cx.ceiling_for(ty));
        d.data.insert("client".into(), serde_json::json!({ "name": self.vendor }));
        if let Some(m) = non_empty(rec.attributes.get("model")) {
            d.data.insert("gen_ai.request.model".into(), Value::String(m.to_owned()));
        }
        d
    }
}

/// Whether a tool-call record is a tool that ran: a call the user rejected or cancelled did
/// not run and did not fail, so it is no `tool.completed`/`tool.failed` (it stays in the
/// companion family; a user's "no" is a human decision, not a policy block, so no
/// `tool.denied` either).
fn ran(rec: &OtelRecord) -> bool {
    let no = |k: &str, vals: &[&str]| rec.attr_str(k).is_some_and(|v| vals.iter().any(|x| v.eq_ignore_ascii_case(x)));
    !no("decision", &["reject", "cancel", "cancelled"]) && !no("status", &["cancelled", "canceled"])
}

impl OtelProfile for GeminiCliOtel {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn content(&self) -> &'static crate::otel::content::ContentTable {
        &CONTENT
    }

    /// `service.name` `gemini-cli` (or `gemini_cli`), or the scope `gemini-cli`.
    fn claims(&self, rec: &OtelRecord) -> bool {
        crate::otel::service_is(rec, &["gemini-cli", "gemini_cli"]) || &*rec.scope_name == "gemini-cli"
    }

    fn model_calls(&self) -> &'static [crate::otel::usage::ModelCallFields] {
        MODEL_CALLS
    }

    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        GEMINI.session_id(rec)
    }

    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        let mut out = Vec::with_capacity(1);
        GEMINI.map_into(rec, cx, mode, &mut out);
        out
    }

    fn map_record_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, out: &mut Vec<EventDraft>) {
        GEMINI.map_into(rec, cx, mode, out);
    }
}

/// The model calls among this profile's events, for the GenAI metrics
/// ([`crate::otel::usage`]).
pub const MODEL_CALLS: &[crate::otel::usage::ModelCallFields] = &[
    crate::otel::usage::ModelCallFields {
        event: "api_response",
        when: None,
        model: Some("model"),
        input_tokens: Some("input_token_count"),
        output_tokens: Some("output_token_count"),
        duration_ms: Some("duration_ms"),
        operation: "chat",
        finish_reasons: Some("finish_reasons"),
        cache_read_tokens: Some("cached_content_token_count"),
        reasoning_tokens: Some("thoughts_token_count"),
        status_code: Some("status_code"),
        // The Gemini API by key or through Vertex AI; other sign-ins reach other endpoints.
        provider: &[("auth_type", "gemini-api-key", "gcp.gemini"), ("auth_type", "vertex-ai", "gcp.vertex_ai")],
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
    crate::otel::usage::ModelCallFields {
        event: "api_error",
        model: Some("model"),
        duration_ms: Some("duration_ms"),
        status_code: Some("status_code"),
        failed: true,
        error_type: Some("error.type"),
        provider: &[("auth_type", "gemini-api-key", "gcp.gemini"), ("auth_type", "vertex-ai", "gcp.vertex_ai")],
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;
    use serde_json::{Map, json};
    use std::sync::Arc;

    /// Shaped like the real Gemini CLI 0.61 export (see the captures): `session.id` on the
    /// resource and on every record, the name in the `event.name` attribute.
    fn rec(attrs: Value) -> OtelRecord {
        let mut attrs = attrs.as_object().cloned().unwrap_or_default();
        attrs.insert("session.id".into(), json!("g-1"));
        attrs.insert("installation.id".into(), json!("inst-1"));
        OtelRecord {
            resource: Arc::new(Map::from_iter([
                ("service.name".to_owned(), json!("gemini-cli")),
                ("session.id".to_owned(), json!("g-1")),
            ])),
            scope_name: "gemini-cli".into(),
            attributes: attrs.into(),
            time_unix_nano: 1_796_011_454_699_000_000,
            ..Default::default()
        }
    }

    fn map(r: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        GeminiCliOtel.map_record(r, cx, mode)
    }

    #[test]
    fn tool_call_in_both_modes() {
        let r = rec(json!({
            "event.name": "gemini_cli.tool_call", "function_name": "run_shell_command", "duration_ms": 593,
            "success": true, "decision": "accept", "prompt_id": "g-1", "tool_type": "native",
            "function_args": "{\"command\": \"echo hi\"}", "metadata": "{\"exitCode\": 0}"
        }));
        let c = map(&r, &MapContext::default(), Mode::Companion);
        assert_eq!(c[0].r#type, "x.gemini-cli.otel.tool_call");
        assert_eq!(c[0].session.as_deref(), Some("g-1"));
        assert_eq!(c[0].time.as_deref(), Some("2026-11-30T04:04:14.699Z"));
        assert_eq!(c[0].data["duration_ms"], json!(593));
        assert!(!c[0].data.contains_key("function_args") && !c[0].data.contains_key("installation.id"));
        let full_cx = MapContext { capture: Capture::Full, ..Default::default() };
        let c = map(&r, &full_cx, Mode::Companion);
        assert_eq!(c[0].data["function_args"], json!("{\"command\": \"echo hi\"}"));
        assert_eq!(c[0].data["installation.id"], json!("inst-1"));
        let p = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(p[0].r#type, "tool.completed");
        assert_eq!(p[0].data["tool"], json!({"name": "run_shell_command"}));
        assert_eq!(p[0].data["duration_ms"], json!(593));
    }

    #[test]
    fn a_failed_call_fails_and_a_rejected_one_does_not() {
        let failed = rec(json!({
            "event.name": "gemini_cli.tool_call", "function_name": "read_file", "success": false,
            "decision": "accept", "error": "File not found: /home/dev/x", "error_type": "file_not_found"
        }));
        let p = map(&failed, &MapContext::default(), Mode::Primary);
        assert_eq!(p[0].r#type, "tool.failed");
        assert_eq!(p[0].data["error"], json!({"type": "file_not_found"}));
        let rejected = rec(json!({
            "event.name": "gemini_cli.tool_call", "function_name": "run_shell_command", "success": false,
            "decision": "reject"
        }));
        let p = map(&rejected, &MapContext::default(), Mode::Primary);
        assert_eq!(p[0].r#type, "x.gemini-cli.otel.tool_call");
    }

    #[test]
    fn config_opens_the_session_in_primary_mode_only() {
        let r = rec(json!({"event.name": "gemini_cli.config", "model": "gemini-2.5-pro", "approval_mode": "yolo"}));
        let c = map(&r, &MapContext::default(), Mode::Companion);
        assert_eq!(c[0].r#type, "x.gemini-cli.otel.config");
        assert_eq!(c[0].data["approval_mode"], json!("yolo"));
        let p = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(p[0].r#type, "session.started");
        assert_eq!(p[0].data["client"], json!({"name": "gemini-cli"}));
        assert_eq!(p[0].data["gen_ai.request.model"], json!("gemini-2.5-pro"));
    }

    #[test]
    fn prompt_text_needs_the_redacted_ceiling() {
        let r = rec(json!({"event.name": "gemini_cli.user_prompt", "prompt": "mail a@b.example", "prompt_length": 16}));
        assert!(!map(&r, &MapContext::default(), Mode::Companion)[0].data.contains_key("prompt"));
        let red = MapContext { capture: Capture::Redacted, ..Default::default() };
        let out = map(&r, &red, Mode::Companion);
        let text = out[0].data["prompt"].as_str().unwrap();
        assert!(!text.contains("a@b.example"), "{text}");
    }

    #[test]
    fn unknown_names_carry_only_the_name() {
        let r = rec(json!({"event.name": "gemini_cli.brand_new", "secret": "x"}));
        let out = map(&r, &MapContext { capture: Capture::Full, ..Default::default() }, Mode::Primary);
        assert_eq!(out[0].r#type, "x.gemini-cli.otel.unknown");
        assert_eq!(out[0].data, Map::from_iter([("event.name".to_owned(), json!("gemini_cli.brand_new"))]));
    }
}
