#![doc = include_str!("README.md")]

mod content;
pub use content::CONTENT;

use aep_schemas::Capture;
use serde_json::Value;

use crate::otel::{
    Field, Mode, OtelProfile, OtelRecord, as_bool, as_u64, companion, full, gated_text, meta, non_empty, redacted,
    stamp, tool_object, unknown,
};
use crate::{EventDraft, MapContext};

/// The agent identity and namespace token.
pub const VENDOR: &str = "codex";

/// The Codex OTel profile.
#[derive(Debug, Clone, Copy, Default)]
pub struct CodexOtel;

/// Attributes every Codex event may carry beyond its own list.
const COMMON: &[Field] = &[full("user.email"), full("user.account_id")];

/// The known events: name suffix after `codex.` and the attributes each forwards.
const KNOWN: &[(&str, &[Field])] = &[
    (
        "conversation_starts",
        &[
            meta("model"),
            meta("approval_policy"),
            meta("sandbox_policy"),
            meta("reasoning_effort"),
            meta("reasoning_summary"),
            meta("provider_name"),
            meta("context_window"),
            meta("auto_compact_token_limit"),
            meta("mcp_servers"),
        ],
    ),
    ("user_prompt", &[meta("prompt_length"), redacted("prompt")]),
    ("tool_decision", &[meta("tool_name"), meta("tool_namespace"), meta("call_id"), meta("decision"), meta("source")]),
    (
        "tool_result",
        &[
            meta("tool_name"),
            meta("tool_namespace"),
            meta("call_id"),
            meta("success"),
            meta("duration_ms"),
            meta("output_truncated"),
            meta("mcp_server"),
            meta("mcp_server_origin"),
            meta("tool_result_seq"),
            redacted("error"),
            full("arguments"),
            full("output"),
        ],
    ),
    (
        "api_request",
        &[
            meta("status"),
            meta("http.response.status_code"),
            meta("duration_ms"),
            meta("attempts"),
            meta("attempt"),
            meta("endpoint"),
            meta("model"),
            redacted("error"),
            redacted("error.message"),
        ],
    ),
    (
        "sse_event",
        &[
            meta("kind"),
            meta("event.kind"),
            meta("success"),
            meta("duration_ms"),
            meta("ttft_ms"),
            meta("input_token_count"),
            meta("output_token_count"),
            meta("cached_token_count"),
            meta("cache_write_token_count"),
            meta("reasoning_token_count"),
            meta("tool_token_count"),
            meta("model"),
            redacted("error"),
            redacted("error.message"),
        ],
    ),
    (
        "websocket_request",
        &[meta("duration_ms"), meta("success"), meta("status"), redacted("error"), redacted("error.message")],
    ),
    (
        "websocket_event",
        &[
            meta("kind"),
            meta("event.kind"),
            meta("duration_ms"),
            meta("success"),
            redacted("error"),
            redacted("error.message"),
        ],
    ),
    ("startup_phase", &[meta("startup.phase"), meta("startup.status"), meta("duration_ms")]),
    ("turn_ttft", &[meta("duration_ms")]),
];

fn known(name: &str) -> Option<(&'static str, &'static [Field])> {
    let suffix = name.strip_prefix("codex.")?;
    KNOWN.iter().find(|(s, _)| *s == suffix).copied()
}

impl OtelProfile for CodexOtel {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn content(&self) -> &'static crate::otel::content::ContentTable {
        &CONTENT
    }

    /// `service.name` `codex*` (`codex_exec`, `codex-app-server`, ...).
    fn claims(&self, rec: &OtelRecord) -> bool {
        crate::otel::service_starts_with(rec, "codex")
    }

    fn model_calls(&self) -> &'static [crate::otel::usage::ModelCallFields] {
        MODEL_CALLS
    }

    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str> {
        // Design record "Identity": session = the per-record `conversation.id`.
        rec.attr_str("conversation.id").filter(|s| !s.is_empty())
    }

    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        let mut out = Vec::with_capacity(1);
        self.map_record_into(rec, cx, mode, &mut out);
        out
    }

    fn map_record_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, drafts: &mut Vec<EventDraft>) {
        // The default `event_name`, borrowed (no copy per record).
        let name = crate::otel::record_event_name_ref(rec);
        // `session_id`, borrowed.
        let session = rec.attr_str("conversation.id").filter(|s| !s.is_empty());
        let Some((suffix, fields)) = name.and_then(known) else {
            let mut d = unknown(VENDOR, name, cx);
            stamp(&mut d, rec, session);
            drafts.push(d);
            return;
        };
        let out = match mode {
            Mode::Companion => Some(companion(VENDOR, suffix, rec, fields, COMMON, cx)),
            Mode::Primary => match suffix {
                "conversation_starts" => Some(session_started(rec, cx)),
                "tool_decision" => tool_denied(rec, cx),
                "tool_result" => {
                    Some(tool_outcome(rec, cx).unwrap_or_else(|| companion(VENDOR, suffix, rec, fields, COMMON, cx)))
                }
                _ => Some(companion(VENDOR, suffix, rec, fields, COMMON, cx)),
            },
        };
        drafts.extend(out.map(|mut d| {
            stamp(&mut d, rec, session);
            d
        }));
    }
}

/// `codex.conversation_starts` -> `session.started` (policies stay on the companion family).
fn session_started(rec: &OtelRecord, cx: &MapContext) -> EventDraft {
    let ty = "session.started";
    let mut d = EventDraft::new(ty, cx.ceiling_for(ty));
    d.data.insert("client".into(), serde_json::json!({ "name": VENDOR }));
    if let Some(m) = non_empty(rec.attributes.get("model")) {
        d.data.insert("gen_ai.request.model".into(), Value::String(m.to_owned()));
    }
    d
}

/// `codex.tool_decision`: only a deny from config (`by: policy`) or automation (`by: runtime`)
/// is a `tool.denied`; a user deny is a human decision, not a policy block, and maps to
/// nothing, as does any approval (pin `tool_decision_user_deny`).
fn tool_denied(rec: &OtelRecord, cx: &MapContext) -> Option<EventDraft> {
    let decision = rec.attr_str("decision")?.to_ascii_lowercase();
    if !matches!(decision.as_str(), "deny" | "denied") {
        return None;
    }
    let by = match rec.attr_str("source")?.to_ascii_lowercase().as_str() {
        "config" => "policy",
        "automation" | "auto" | "automated" => "runtime",
        _ => return None,
    };
    let tool = non_empty(rec.attributes.get("tool_name"))?;
    let ty = "tool.denied";
    let mut d = EventDraft::new(ty, cx.ceiling_for(ty));
    d.data.insert("tool".into(), tool_object(tool, non_empty(rec.attributes.get("call_id"))));
    d.data.insert("by".into(), Value::String(by.into()));
    d.subject = Some(tool.to_owned());
    Some(d)
}

/// `codex.tool_result` -> `tool.completed` / `tool.failed` by the success flag; `None` when the
/// record lacks the tool name or a readable flag (the companion draft is used instead).
fn tool_outcome(rec: &OtelRecord, cx: &MapContext) -> Option<EventDraft> {
    let tool = non_empty(rec.attributes.get("tool_name"))?;
    let ok = as_bool(rec.attributes.get("success"))?;
    let call_id = non_empty(rec.attributes.get("call_id"));
    let ty = if ok { "tool.completed" } else { "tool.failed" };
    let ceiling = cx.ceiling_for(ty);
    let mut d = EventDraft::new(ty, ceiling);
    d.data.insert("tool".into(), tool_object(tool, call_id));
    d.subject = Some(tool.to_owned());
    if ok {
        if let Some(ms) = as_u64(rec.attributes.get("duration_ms")) {
            d.data.insert("duration_ms".into(), ms.into());
        }
        // Tool output is content: verbatim at `full` only (design record "Mapping").
        if ceiling >= Capture::Full
            && let Some(out) = rec.attributes.get("output").filter(|v| !v.is_null())
        {
            d.data.insert("result".into(), out.clone());
        }
    } else {
        // The channel exposes free text, not a taxonomy: the type is synthesized; the text is
        // redacted-gated (pin `tool_result_fail`).
        let mut err = serde_json::Map::new();
        err.insert("type".into(), Value::String("tool_error".into()));
        if let Some(msg) = gated_text(rec.attributes.get("error"), ceiling, cx) {
            err.insert("message".into(), Value::String(msg));
        }
        d.data.insert("error".into(), Value::Object(err));
    }
    Some(d)
}

/// The model calls among this profile's events, for the GenAI metrics
/// ([`crate::otel::usage`]).
pub const MODEL_CALLS: &[crate::otel::usage::ModelCallFields] = &[
    crate::otel::usage::ModelCallFields {
        event: "api_request",
        when: None,
        model: Some("model"),
        input_tokens: None,
        output_tokens: None,
        duration_ms: Some("duration_ms"),
        operation: "chat",
        opens: true,
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
    crate::otel::usage::ModelCallFields {
        event: "sse_event",
        when: Some(("event.kind", "response.completed")),
        model: Some("model"),
        input_tokens: Some("input_token_count"),
        output_tokens: Some("output_token_count"),
        duration_ms: None,
        operation: "chat",
        cache_read_tokens: Some("cached_token_count"),
        cache_creation_tokens: Some("cache_write_token_count"),
        reasoning_tokens: Some("reasoning_token_count"),
        ..crate::otel::usage::ModelCallFields::EMPTY
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};
    use std::sync::Arc;

    /// A record shaped like the real Codex 0.171.0 export (see the captures).
    fn rec(attrs: Value) -> OtelRecord {
        OtelRecord {
            resource: Arc::new(Map::from_iter([("service.name".to_owned(), json!("codex_exec"))])),
            scope_name: "codex_otel.log_only".into(),
            event_name: Some("event otel/src/tool_result.rs:54".into()),
            attributes: attrs.as_object().cloned().unwrap_or_default().into(),
            observed_time_unix_nano: 1_796_011_452_165_000_000,
            trace_id: Some("f265d907520a2f7507b8e0326c8769db".into()),
            span_id: Some("00f067aa0ba902b7".into()),
            flags: 1,
            ..Default::default()
        }
    }

    fn map(r: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft> {
        CodexOtel.map_record(r, cx, mode)
    }

    #[test]
    fn real_tool_result_maps_in_both_modes() {
        let r = rec(json!({
            "event.name": "codex.tool_result", "tool_name": "exec_command", "call_id": "call_1",
            "duration_ms": "61", "success": "true", "arguments": "{\"cmd\":\"echo hi\"}",
            "output": "hi", "conversation.id": "conv-1", "originator": "codex_exec"
        }));
        let cx = MapContext::default();
        let c = map(&r, &cx, Mode::Companion);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].r#type, "x.codex.otel.tool_result");
        assert_eq!(c[0].session.as_deref(), Some("conv-1"));
        assert_eq!(c[0].time.as_deref(), Some("2026-11-30T04:04:12.165Z"));
        assert_eq!(c[0].traceparent.as_deref(), Some("00-f265d907520a2f7507b8e0326c8769db-00f067aa0ba902b7-01"));
        assert!(!c[0].data.contains_key("output"), "output is full-gated");
        assert!(!c[0].data.contains_key("originator"));
        let p = map(&r, &cx, Mode::Primary);
        assert_eq!(p[0].r#type, "tool.completed");
        assert_eq!(p[0].data["duration_ms"], json!(61));
        assert_eq!(p[0].data["tool"], json!({"name": "exec_command", "call_id": "call_1"}));
        let full_cx = MapContext { capture: Capture::Full, ..Default::default() };
        let p = map(&r, &full_cx, Mode::Primary);
        assert_eq!(p[0].data["result"], json!("hi"));
        assert_eq!(p[0].capture, Capture::Full);
    }

    #[test]
    fn prompt_needs_vendor_flag_and_ceiling() {
        let logged = rec(json!({"event.name": "codex.user_prompt", "prompt": "fix the bug", "prompt_length": "11"}));
        let hidden = rec(json!({"event.name": "codex.user_prompt", "prompt": "[REDACTED]", "prompt_length": "11"}));
        let meta_cx = MapContext::default();
        let red_cx = MapContext { capture: Capture::Redacted, ..Default::default() };
        assert!(!map(&logged, &meta_cx, Mode::Companion)[0].data.contains_key("prompt"));
        assert_eq!(map(&logged, &red_cx, Mode::Companion)[0].data["prompt"], json!("fix the bug"));
        assert!(!map(&hidden, &red_cx, Mode::Companion)[0].data.contains_key("prompt"));
    }

    #[test]
    fn user_email_only_at_full() {
        let r = rec(json!({"event.name": "codex.api_request", "user.email": "dev@example.com", "status": "200"}));
        let red = MapContext { capture: Capture::Redacted, ..Default::default() };
        let full = MapContext { capture: Capture::Full, ..Default::default() };
        assert!(!map(&r, &red, Mode::Companion)[0].data.contains_key("user.email"));
        assert_eq!(map(&r, &full, Mode::Companion)[0].data["user.email"], json!("dev@example.com"));
    }

    #[test]
    fn decisions_in_primary_mode() {
        let d = |decision: &str, source: &str| {
            map(
                &rec(
                    json!({"event.name": "codex.tool_decision", "tool_name": "shell", "decision": decision, "source": source}),
                ),
                &MapContext::default(),
                Mode::Primary,
            )
        };
        assert_eq!(d("deny", "config")[0].data["by"], json!("policy"));
        assert_eq!(d("denied", "automation")[0].data["by"], json!("runtime"));
        assert!(d("deny", "user").is_empty());
        assert!(d("approved", "Config").is_empty());
    }

    #[test]
    fn unnamed_and_unknown_records_fall_to_unknown() {
        let r = rec(json!({"detail": "x"}));
        let out = map(&r, &MapContext::default(), Mode::Primary);
        assert_eq!(out[0].r#type, "x.codex.otel.unknown");
        assert!(out[0].data.is_empty());
        let r = rec(json!({"event.name": "codex.brand_new", "detail": "x"}));
        let out = map(&r, &MapContext::default(), Mode::Companion);
        assert_eq!(out[0].data, Map::from_iter([("event.name".to_owned(), json!("codex.brand_new"))]));
    }
}
