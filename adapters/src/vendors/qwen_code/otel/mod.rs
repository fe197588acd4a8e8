#![doc = include_str!("README.md")]

mod content;
pub use content::CONTENT;

use crate::otel::{Field, Mode, OtelProfile, OtelRecord, ToolResultKeys, full, meta, redacted};
use crate::vendors::gemini_cli::otel::Family;
use crate::{EventDraft, MapContext};

/// The agent identity and namespace token (the hook adapter's, so both channels share a log).
pub const VENDOR: &str = super::VENDOR;

/// The Qwen Code OTel profile.
#[derive(Debug, Clone, Copy, Default)]
pub struct QwenCodeOtel;

/// Attributes every event may carry beyond its own list (`user.email` is PII: `full` only).
const COMMON: &[Field] = &[full("user.email")];

/// The known events as Qwen Code 0.15.10 sends them: those in the captures, plus
/// `api_error`, `chat_compression`, `conversation_finished` and `subagent_execution` read
/// from the pinned 0.15.10 package's own loggers; and those 0.24.4 added (recorded): full
/// name, type suffix after `x.qwen-code.otel.`, forwarded attributes.
const KNOWN: &[(&str, &str, &[Field])] = &[
    // 0.24.4: the session's bounds, `session.id` and the time only (headless `-p` too, where
    // no `SessionEnd` hook fires).
    ("session.start", "session_start", &[]),
    ("session.end", "session_end", &[]),
    (
        "qwen-code.memory.recall.delivery",
        "memory.recall.delivery",
        &[
            meta("phase"),
            meta("delivery_point"),
            meta("strategy"),
            meta("docs_selected"),
            meta("latency_ms"),
            meta("discard_reason"),
        ],
    ),
    // The spawn error names a local path: text, redacted+.
    (
        "qwen-code.ripgrep_fallback",
        "ripgrep_fallback",
        &[meta("use_ripgrep"), meta("use_builtin_ripgrep"), redacted("error")],
    ),
    (
        "qwen-code.config",
        "config",
        &[
            meta("model"),
            meta("sandbox_enabled"),
            meta("core_tools_enabled"),
            meta("approval_mode"),
            meta("file_filtering_respect_git_ignore"),
            meta("debug_mode"),
            meta("truncate_tool_output_threshold"),
            meta("truncate_tool_output_lines"),
            meta("mcp_servers"),
            meta("mcp_servers_count"),
            meta("mcp_tools"),
            meta("mcp_tools_count"),
            meta("hooks"),
            meta("ide_enabled"),
            meta("interactive_shell_enabled"),
            meta("output_format"),
            meta("skills"),
            meta("subagents"),
        ],
    ),
    ("qwen-code.auth", "auth", &[meta("auth_type"), meta("action_type"), meta("status"), redacted("error_message")]),
    (
        "qwen-code.user_prompt",
        "user_prompt",
        &[meta("prompt_length"), meta("prompt_id"), meta("auth_type"), redacted("prompt")],
    ),
    (
        "qwen-code.memory.recall",
        "memory.recall",
        &[meta("query_length"), meta("docs_scanned"), meta("docs_selected"), meta("strategy"), meta("duration_ms")],
    ),
    (
        "qwen-code.api_request",
        "api_request",
        // The whole request (system prompt, history, tool output): content at `full`.
        &[meta("model"), meta("prompt_id"), meta("subagent_name"), full("request_text")],
    ),
    (
        "qwen-code.api_response",
        "api_response",
        &[
            meta("response_id"),
            meta("model"),
            meta("status_code"),
            meta("http.status_code"),
            meta("duration_ms"),
            meta("input_token_count"),
            meta("output_token_count"),
            meta("cached_content_token_count"),
            meta("thoughts_token_count"),
            meta("total_token_count"),
            meta("prompt_id"),
            meta("auth_type"),
            meta("subagent_name"),
            redacted("response_text"),
        ],
    ),
    (
        "qwen-code.api_error",
        "api_error",
        &[
            meta("response_id"),
            meta("model"),
            meta("error_type"),
            meta("error.type"),
            meta("status_code"),
            meta("http.status_code"),
            meta("duration_ms"),
            meta("prompt_id"),
            meta("auth_type"),
            meta("subagent_name"),
            redacted("error_message"),
            redacted("error.message"),
        ],
    ),
    ("qwen-code.chat_compression", "chat_compression", &[meta("tokens_before"), meta("tokens_after")]),
    ("qwen-code.conversation_finished", "conversation_finished", &[meta("approvalMode"), meta("turnCount")]),
    (
        "qwen-code.subagent_execution",
        "subagent_execution",
        // The subagent's `result` and `execution_summary` are its answer: content.
        &[meta("subagent_name"), meta("status"), meta("terminate_reason"), full("result"), full("execution_summary")],
    ),
    (
        "qwen-code.tool_call",
        "tool_call",
        &[
            meta("function_name"),
            meta("duration_ms"),
            meta("status"),
            meta("success"),
            meta("decision"),
            meta("error_type"),
            meta("prompt_id"),
            meta("response_id"),
            meta("tool_type"),
            meta("content_length"),
            meta("mcp_server_name"),
            // Changed-line and character counts, not content.
            meta("metadata"),
            redacted("error"),
            // The call's arguments (paths, commands, file content): content.
            full("function_args"),
        ],
    ),
    (
        "qwen-code.file_operation",
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
];

/// The tool record's attributes (no call id on this channel: `call_id` is never sent).
const TOOL_CALL: ToolResultKeys =
    ToolResultKeys { name: "function_name", call_id: "call_id", error_type: "error_type", error_message: "error" };

/// This profile's entry in the Gemini-shaped family.
const QWEN: Family = Family {
    vendor: VENDOR,
    known: KNOWN,
    common: COMMON,
    config: "qwen-code.config",
    tool_call: "qwen-code.tool_call",
    tool_keys: &TOOL_CALL,
};

impl OtelProfile for QwenCodeOtel {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn content(&self) -> &'static crate::otel::content::ContentTable {
        &CONTENT
    }

    /// `service.name` `qwen-code` (or `qwen_code`), or the scope `qwen-code`.
    fn claims(&self, rec: &OtelRecord) -> bool {
        crate::otel::service_is(rec, &["qwen-code", "qwen_code"]) || &*rec.scope_name == "qwen-code"
    }

    fn model_calls(&self) -> &'static [crate::otel::usage::ModelCallFields] {
        MODEL_CALLS
    }

    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        QWEN.session_id(rec)
    }

    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        let mut out = Vec::with_capacity(1);
        QWEN.map_into(rec, cx, mode, &mut out);
        out
    }

    fn map_record_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, out: &mut Vec<EventDraft>) {
        QWEN.map_into(rec, cx, mode, out);
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
        response_id: Some("response_id"),
        cache_read_tokens: Some("cached_content_token_count"),
        reasoning_tokens: Some("thoughts_token_count"),
        status_code: Some("status_code"),
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
    crate::otel::usage::ModelCallFields {
        event: "api_error",
        model: Some("model"),
        duration_ms: Some("duration_ms"),
        response_id: Some("response_id"),
        status_code: Some("status_code"),
        failed: true,
        error_type: Some("error_type"),
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;
    use serde_json::{Map, Value, json};
    use std::sync::Arc;

    /// Shaped like the real Qwen Code 0.15.10 export (see the captures).
    fn rec(attrs: Value) -> OtelRecord {
        let mut attrs = attrs.as_object().cloned().unwrap_or_default();
        attrs.insert("session.id".into(), json!("q-1"));
        OtelRecord {
            resource: Arc::new(Map::from_iter([
                ("service.name".to_owned(), json!("qwen-code")),
                ("service.version".to_owned(), json!("0.15.10")),
                ("session.id".to_owned(), json!("q-1")),
            ])),
            scope_name: "qwen-code".into(),
            attributes: attrs.into(),
            time_unix_nano: 1_796_011_458_198_000_000,
            ..Default::default()
        }
    }

    fn map(r: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        QwenCodeOtel.map_record(r, cx, mode)
    }

    #[test]
    fn tool_call_in_both_modes() {
        let r = rec(json!({
            "event.name": "qwen-code.tool_call", "function_name": "run_shell_command", "duration_ms": 3761,
            "status": "success", "success": true, "decision": "auto_accept", "prompt_id": "590ef74a7fc5b",
            "response_id": "chatcmpl-1", "function_args": "{\"command\": \"echo hi\"}",
            "metadata": {"model_added_lines": 1}
        }));
        let c = map(&r, &MapContext::default(), Mode::Companion);
        assert_eq!(c[0].r#type, "x.qwen-code.otel.tool_call");
        assert_eq!(c[0].session.as_deref(), Some("q-1"));
        assert_eq!(c[0].data["metadata"], json!({"model_added_lines": 1}));
        assert!(!c[0].data.contains_key("function_args"));
        let p = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(p[0].r#type, "tool.completed");
        assert_eq!(p[0].data["tool"], json!({"name": "run_shell_command"}));
        let cancelled = rec(json!({
            "event.name": "qwen-code.tool_call", "function_name": "write_file", "status": "cancelled",
            "success": false, "decision": "auto_accept"
        }));
        assert_eq!(map(&cancelled, &MapContext::default(), Mode::Primary)[0].r#type, "x.qwen-code.otel.tool_call");
    }

    #[test]
    fn names_keep_their_dotted_tail() {
        let r = rec(json!({"event.name": "qwen-code.memory.recall", "strategy": "none", "duration_ms": 31}));
        let out = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(out[0].r#type, "x.qwen-code.otel.memory.recall");
        assert_eq!(out[0].data["duration_ms"], json!(31));
        let gemini = rec(json!({"event.name": "gemini_cli.tool_call", "function_name": "x", "success": true}));
        assert_eq!(map(&gemini, &MapContext::default(), Mode::Primary)[0].r#type, "x.qwen-code.otel.unknown");
    }

    /// What 0.24.4 added, as recorded (`qwen -p` with telemetry to a local sink): named,
    /// metadata only at the default ceiling.
    #[test]
    fn the_0_24_records_are_known() {
        for (name, attrs, ty) in [
            ("session.start", json!({}), "session_start"),
            ("session.end", json!({}), "session_end"),
            (
                "qwen-code.memory.recall.delivery",
                json!({"phase": "refined", "delivery_point": "discarded", "strategy": "none", "docs_selected": 0,
                       "latency_ms": 45, "discard_reason": "no_relevant_results"}),
                "memory.recall.delivery",
            ),
            (
                "qwen-code.ripgrep_fallback",
                json!({"use_ripgrep": true, "use_builtin_ripgrep": true, "error": "spawn /opt/rg EACCES"}),
                "ripgrep_fallback",
            ),
        ] {
            let mut a = attrs.as_object().cloned().unwrap();
            a.insert("event.name".into(), json!(name));
            let out = map(&rec(Value::Object(a)), &MapContext::default(), Mode::Companion);
            assert_eq!(out[0].r#type, format!("x.qwen-code.otel.{ty}"), "{name}");
            assert_eq!(out[0].session.as_deref(), Some("q-1"));
            assert!(!out[0].data.contains_key("error"), "the path rides at redacted+ only");
            for (k, v) in attrs.as_object().unwrap().iter().filter(|(k, _)| *k != "error") {
                assert_eq!(out[0].data.get(k), Some(v), "{name}.{k}");
            }
        }
    }

    #[test]
    fn config_opens_the_session_in_primary_mode() {
        let r = rec(json!({"event.name": "qwen-code.config", "model": "qwen3-coder-plus"}));
        let p = map(&r, &MapContext { capture: Capture::Full, ..Default::default() }, Mode::Primary);
        assert_eq!(p[0].r#type, "session.started");
        assert_eq!(p[0].data["client"], json!({"name": "qwen-code"}));
        assert_eq!(p[0].data["gen_ai.request.model"], json!("qwen3-coder-plus"));
    }
}
