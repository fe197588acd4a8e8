//! Model calls among the companion events (`x.<vendor>.otel.*`): which of a vendor's own
//! telemetry records describe one call to a model, and where their model, token counts and
//! duration sit. The GenAI metrics (`gen_ai.client.token.usage`,
//! `gen_ai.client.operation.duration`) are read from them, so the fields of a vendor live
//! in its profile folder (`vendors::<vendor>::otel::MODEL_CALLS`, returned by
//! [`crate::otel::OtelProfile::model_calls`]), beside the attribute lists that forward them.
//!
//! Pure: no clock, no I/O. Values are read as numbers or numeric strings (Claude Code sends
//! its counts as strings).

use serde_json::{Map, Value};

/// Where one vendor event carries a model call's figures (attribute names, as forwarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelCallFields {
    /// The companion suffix (`api_request` for `x.claude-code.otel.api_request`).
    pub event: &'static str,
    /// Only records whose `when.0` attribute equals `when.1` (Codex `sse_event` kinds).
    pub when: Option<(&'static str, &'static str)>,
    /// The model name.
    pub model: Option<&'static str>,
    /// Input (prompt) tokens.
    pub input_tokens: Option<&'static str>,
    /// Output (completion) tokens.
    pub output_tokens: Option<&'static str>,
    /// The call's duration in milliseconds.
    pub duration_ms: Option<&'static str>,
    /// The GenAI operation (`chat` for a chat-completions style call).
    pub operation: &'static str,
    /// The provider's id of the response (`gen_ai.response.id`).
    pub response_id: Option<&'static str>,
    /// Why the model stopped: a string or an array of strings.
    pub finish_reasons: Option<&'static str>,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: Option<&'static str>,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_tokens: Option<&'static str>,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: Option<&'static str>,
    /// The call's HTTP status code.
    pub status_code: Option<&'static str>,
    /// `gen_ai.provider.name` by a record attribute's value, `(attribute, value, provider)`:
    /// named only where the record says which API answered (a CLI may front several).
    pub provider: &'static [(&'static str, &'static str, &'static str)],
    /// The record opens a call whose counts arrive in a later record (Codex logs
    /// `api_request` when the response starts, then `sse_event` `response.completed`): its
    /// time minus its duration is when that call began.
    pub opens: bool,
    /// The record reports a call that failed (`api_error`): it counts as a call without
    /// token counts, with an error type.
    pub failed: bool,
    /// The attribute naming the failure's type (low cardinality, e.g. `ApiError`).
    pub error_type: Option<&'static str>,
}

impl ModelCallFields {
    /// No fields: what a vendor's entry leaves out (`..ModelCallFields::EMPTY`).
    pub const EMPTY: ModelCallFields = ModelCallFields {
        event: "",
        when: None,
        model: None,
        input_tokens: None,
        output_tokens: None,
        duration_ms: None,
        operation: "chat",
        response_id: None,
        finish_reasons: None,
        cache_read_tokens: None,
        cache_creation_tokens: None,
        reasoning_tokens: None,
        status_code: None,
        provider: &[],
        opens: false,
        failed: false,
        error_type: None,
    };
}

/// One model call's figures, as the vendor reported them.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall<'a> {
    /// The vendor (agent identity).
    pub vendor: &'a str,
    /// `gen_ai.operation.name`.
    pub operation: &'static str,
    /// `gen_ai.request.model`, when named.
    pub model: Option<&'a str>,
    /// Input tokens, when counted.
    pub input_tokens: Option<u64>,
    /// Output tokens, when counted.
    pub output_tokens: Option<u64>,
    /// Duration, when measured.
    pub duration_ms: Option<f64>,
    /// The response id, when given.
    pub response_id: Option<&'a str>,
    /// The finish reasons, when given.
    pub finish_reasons: Vec<&'a str>,
    /// Input tokens read from the prompt cache, when counted.
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache, when counted.
    pub cache_creation_tokens: Option<u64>,
    /// Reasoning output tokens, when counted.
    pub reasoning_tokens: Option<u64>,
    /// The HTTP status code, when given.
    pub status_code: Option<u64>,
    /// The provider, when the record names it (see [`ModelCallFields::provider`]).
    pub provider: Option<&'static str>,
    /// The record opens a call completed by a later record ([`ModelCallFields::opens`]).
    pub opens: bool,
    /// The call failed ([`ModelCallFields::failed`]): its `error.type` (GenAI semantic
    /// conventions), the record's error type, else its HTTP status code, else `_OTHER`.
    pub error_type: Option<std::borrow::Cow<'a, str>>,
}

/// `data[key]`, found by a scan when the map is small: a payload carries a handful of
/// members, and comparing a few short keys costs less than hashing one with the map's
/// SipHash (this runs for every companion event the GenAI metrics tap measures).
pub fn member<'a>(data: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if data.len() <= 16 { data.iter().find_map(|(k, v)| (k == key).then_some(v)) } else { data.get(key) }
}

/// The model call an event of type `ty` with payload `data` reports, if it is one;
/// `fields_of` names a vendor's [`ModelCallFields`] (the registry's
/// [`crate::vendors::model_call`] passes its own lookup).
pub fn model_call_in<'a>(
    ty: &'a str,
    data: &'a Map<String, Value>,
    fields_of: impl Fn(&str) -> &'static [ModelCallFields],
) -> Option<ModelCall<'a>> {
    // `x.{vendor}.otel.{suffix}`; the profiled vendors' names have no dot. Split on single
    // bytes: this runs for every companion event the GenAI metrics tap measures.
    let (vendor, rest) = ty.strip_prefix("x.")?.split_once('.')?;
    let suffix = rest.strip_prefix("otel.")?;
    let f = fields_of(vendor).iter().find(|f| {
        f.event == suffix && f.when.is_none_or(|(k, v)| member(data, k).and_then(Value::as_str) == Some(v))
    })?;
    let get = |k: Option<&'static str>| k.and_then(|k| member(data, k));
    let mut call = ModelCall {
        vendor,
        operation: f.operation,
        model: get(f.model).and_then(Value::as_str).filter(|m| !m.is_empty()),
        input_tokens: get(f.input_tokens).and_then(count),
        output_tokens: get(f.output_tokens).and_then(count),
        duration_ms: get(f.duration_ms).and_then(number).filter(|d| *d >= 0.0),
        response_id: get(f.response_id).and_then(Value::as_str).filter(|s| !s.is_empty()),
        finish_reasons: get(f.finish_reasons).map(strings).unwrap_or_default(),
        cache_read_tokens: get(f.cache_read_tokens).and_then(count),
        cache_creation_tokens: get(f.cache_creation_tokens).and_then(count),
        reasoning_tokens: get(f.reasoning_tokens).and_then(count),
        status_code: get(f.status_code).and_then(count),
        provider: f
            .provider
            .iter()
            .find(|(k, v, _)| member(data, k).and_then(Value::as_str) == Some(*v))
            .map(|(_, _, p)| *p),
        opens: f.opens,
        error_type: None,
    };
    if f.failed {
        call.error_type =
            Some(match (get(f.error_type).and_then(Value::as_str).filter(|s| !s.is_empty()), call.status_code) {
                (Some(t), _) => std::borrow::Cow::Borrowed(t),
                (None, Some(code)) => std::borrow::Cow::Owned(code.to_string()),
                (None, None) => std::borrow::Cow::Borrowed("_OTHER"),
            });
    }
    let any = call.input_tokens.is_some()
        || call.output_tokens.is_some()
        || call.duration_ms.is_some()
        || call.error_type.is_some();
    any.then_some(call)
}

/// The non-empty strings of a string or an array of strings.
fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) if !s.is_empty() => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).filter(|s| !s.is_empty()).collect(),
        _ => Vec::new(),
    }
}

/// A non-negative integer, as a number or a numeric string.
pub fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A finite number, as a number or a numeric string.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vendors::model_call;
    use serde_json::json;

    fn data(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn member_agrees_with_get_on_small_and_large_maps() {
        for n in [0usize, 3, 16, 17, 40] {
            let m: Map<String, Value> = (0..n).map(|i| (format!("k{i}"), json!(i))).collect();
            for k in ["k0", "k2", "k16", "k39", "nope", ""] {
                assert_eq!(member(&m, k), m.get(k), "{n} members, key {k}");
            }
        }
    }

    #[test]
    fn claude_code_api_request_as_recorded() {
        // The attribute set of a real Claude Code 2.x `api_request` (captures/claude-code/o_http_protobuf).
        let d = data(json!({"model": "claude-opus-4-8", "input_tokens": "1200", "output_tokens": "25",
                            "cost_usd": 0.006625, "duration_ms": "113", "prompt.id": "87b6"}));
        let c = model_call("x.claude-code.otel.api_request", &d).unwrap();
        assert_eq!(
            c,
            ModelCall {
                vendor: "claude-code",
                operation: "chat",
                model: Some("claude-opus-4-8"),
                input_tokens: Some(1200),
                output_tokens: Some(25),
                duration_ms: Some(113.0),
                response_id: None,
                finish_reasons: vec![],
                cache_read_tokens: None,
                cache_creation_tokens: None,
                reasoning_tokens: None,
                status_code: None,
                provider: None,
                opens: false,
                error_type: None,
            }
        );
    }

    /// A failed attempt is a call without counts, with its `error.type`: the vendor's error
    /// type where it names one, else the HTTP status (Claude Code's real `s06_api_error_400`).
    #[test]
    fn failed_calls_are_calls_with_an_error_type() {
        let d = data(json!({"model": "claude-opus-4-8[1m]", "status_code": 400, "duration_ms": 30, "attempt": 1,
            "request_id": "req_mock_563e47b5f77a"}));
        let c = model_call("x.claude-code.otel.api_error", &d).unwrap();
        assert_eq!((c.input_tokens, c.output_tokens, c.duration_ms), (None, None, Some(30.0)));
        assert_eq!((c.error_type.as_deref(), c.response_id), (Some("400"), Some("req_mock_563e47b5f77a")));
        let g =
            data(json!({"model": "gemini-2.5-pro", "error.type": "ApiError", "status_code": 500, "duration_ms": 12}));
        assert_eq!(model_call("x.gemini-cli.otel.api_error", &g).unwrap().error_type.as_deref(), Some("ApiError"));
        let q = data(json!({"model": "qwen3-coder-plus", "duration_ms": 5}));
        assert_eq!(model_call("x.qwen-code.otel.api_error", &q).unwrap().error_type.as_deref(), Some("_OTHER"));
        let ok = data(json!({"model": "claude-opus-4-8", "input_tokens": "1", "output_tokens": "2"}));
        assert_eq!(model_call("x.claude-code.otel.api_request", &ok).unwrap().error_type, None);
    }

    #[test]
    fn codex_tokens_ride_on_response_completed_only() {
        let done = data(
            json!({"event.kind": "response.completed", "input_token_count": 3021, "output_token_count": 12, "model": "gpt-5"}),
        );
        let c = model_call("x.codex.otel.sse_event", &done).unwrap();
        assert_eq!((c.input_tokens, c.output_tokens, c.model), (Some(3021), Some(12), Some("gpt-5")));
        let delta = data(json!({"event.kind": "response.output_text.delta", "duration_ms": 3}));
        assert_eq!(model_call("x.codex.otel.sse_event", &delta), None, "a stream chunk is not a call");
        let req = data(json!({"duration_ms": 840, "model": "gpt-5", "status": "200"}));
        let c = model_call("x.codex.otel.api_request", &req).unwrap();
        assert_eq!((c.duration_ms, c.input_tokens), (Some(840.0), None));
    }

    #[test]
    fn gemini_and_qwen_api_responses() {
        let d = data(
            json!({"model": "gemini-2.5-pro", "input_token_count": 5120, "output_token_count": 64, "duration_ms": 950}),
        );
        for ty in ["x.gemini-cli.otel.api_response", "x.qwen-code.otel.api_response"] {
            let c = model_call(ty, &d).unwrap();
            assert_eq!((c.input_tokens, c.output_tokens, c.duration_ms), (Some(5120), Some(64), Some(950.0)), "{ty}");
        }
        assert_eq!(model_call("x.gemini-cli.otel.api_request", &d), None, "the request half carries no figures");
    }

    /// The call details a model-call span shows, from the attributes the real exports carry
    /// (captures `s01_tools_bypass_json`, `c01_exec_json`, `g01_tools_yolo_http`, `q01_tools_yolo_http`).
    #[test]
    fn call_details_as_recorded() {
        let cc = data(json!({"model": "claude-opus-4-8", "input_tokens": 1200, "output_tokens": 25,
            "cache_read_tokens": 7, "cache_creation_tokens": 3, "request_id": "req_mock_b74dd30f3b4d"}));
        let c = model_call("x.claude-code.otel.api_request", &cc).unwrap();
        assert_eq!(
            (c.response_id, c.cache_read_tokens, c.cache_creation_tokens, c.provider, c.opens),
            (Some("req_mock_b74dd30f3b4d"), Some(7), Some(3), None, false)
        );
        let req = data(json!({"duration_ms": "15", "http.response.status_code": "200", "model": "gpt-5-codex-mock"}));
        assert!(model_call("x.codex.otel.api_request", &req).unwrap().opens, "its completion comes later");
        let done = data(json!({"event.kind": "response.completed", "input_token_count": "1200",
            "output_token_count": "25", "cached_token_count": "200", "cache_write_token_count": "0",
            "reasoning_token_count": "5"}));
        let c = model_call("x.codex.otel.sse_event", &done).unwrap();
        assert_eq!(
            (c.cache_read_tokens, c.cache_creation_tokens, c.reasoning_tokens, c.opens),
            (Some(200), Some(0), Some(5), false)
        );
        let gm = data(json!({"model": "gemini-2.5-pro", "duration_ms": 420, "input_token_count": 1200,
            "output_token_count": 25, "cached_content_token_count": 0, "thoughts_token_count": 0, "status_code": 200,
            "finish_reasons": ["stop"], "auth_type": "gemini-api-key"}));
        let c = model_call("x.gemini-cli.otel.api_response", &gm).unwrap();
        assert_eq!(
            (c.finish_reasons.as_slice(), c.status_code, c.provider, c.reasoning_tokens),
            (&["stop"][..], Some(200), Some("gcp.gemini"), Some(0))
        );
        let qw = data(json!({"response_id": "chatcmpl-mock52876f28e4", "input_token_count": 1200,
            "status_code": 200, "auth_type": "openai"}));
        let c = model_call("x.qwen-code.otel.api_response", &qw).unwrap();
        assert_eq!((c.response_id, c.status_code, c.provider), (Some("chatcmpl-mock52876f28e4"), Some(200), None));
    }

    #[test]
    fn other_events_and_empty_records_are_not_calls() {
        let d = data(json!({"duration_ms": "5"}));
        assert_eq!(model_call("x.claude-code.otel.tool_result", &d), None);
        assert_eq!(model_call("tool.completed", &d), None);
        assert_eq!(model_call("x.nobody.otel.api_request", &d), None);
        assert_eq!(model_call("x.claude-code.otel.api_request", &data(json!({"model": "m"}))), None);
        assert_eq!(count(&json!("-3")), None);
        assert_eq!(number(&json!("NaN")), None);
    }
}
