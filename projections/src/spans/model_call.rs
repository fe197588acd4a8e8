//! One span per model call: `chat {model}`, kind CLIENT, under the run that made the call.
//!
//! GenAI trace UIs (Arize Phoenix, Langfuse, Grafana Tempo's LLM views) total tokens and cost
//! over a trace's model-call spans, not over agent spans; an agent that exports only log
//! records of its calls (Codex, Gemini CLI, Qwen Code, Claude Code without its beta spans)
//! would show no usage there. Which run a call belongs to is the caller's join (the
//! vendors' records lag their hooks); this module only builds the span, deterministically:
//! its id derives from the run span and the record's AEP id, so a replay yields the same span.
//!
//! Attributes: the GenAI client-span conventions (`gen_ai.operation.name = chat`,
//! `gen_ai.request.model`, `gen_ai.provider.name`, `gen_ai.usage.*`, `gen_ai.response.id`,
//! `gen_ai.response.finish_reasons`, `error.type`) and OpenInference's, which Phoenix reads
//! (`openinference.span.kind = LLM`, `llm.model_name`, `llm.token_count.*`,
//! `llm.cost.total`); identity as on the run (`gen_ai.conversation.id`, `aep.*`).

use serde_json::{Map, Value};

use super::ids::span_id;
use super::model::{Span, SpanRole, StatusCode};

/// What a vendor reported of one model call, as the caller joined it to a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCall {
    /// The AEP id of the record that reported the call (the span id derives from it).
    pub event_id: String,
    /// When the call began, Unix nanoseconds.
    pub start_unix_nanos: u64,
    /// When the call ended (its record's time), Unix nanoseconds.
    pub end_unix_nanos: u64,
    /// The model asked for.
    pub model: Option<String>,
    /// `gen_ai.provider.name`, when the record says which API answered.
    pub provider: Option<String>,
    /// Input tokens, as the vendor counts them.
    pub input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_tokens: Option<u64>,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: Option<u64>,
    /// The provider's response id.
    pub response_id: Option<String>,
    /// Why the model stopped.
    pub finish_reasons: Vec<String>,
    /// The call's HTTP status code.
    pub status_code: Option<u64>,
    /// The vendor's cost figure, USD.
    pub cost_usd: Option<f64>,
    /// How the call was joined to its run (`aep.usage.join`: `run_id`, `time`, `sole_run`).
    pub join: Option<&'static str>,
    /// The call failed: its `error.type` (the vendor's error type, else the HTTP status).
    pub error_type: Option<String>,
}

/// Identity attributes a call span shares with its run.
const SHARED: [&str; 8] = [
    "gen_ai.agent.name",
    "aep.agent_id",
    "gen_ai.conversation.id",
    "session.id",
    "aep.source",
    "aep.session_id",
    "aep.run_id",
    "aep.continuation",
];

fn put(m: &mut Map<String, Value>, k: &str, v: impl Into<Value>) {
    m.insert(k.to_owned(), v.into());
}

fn put_count(m: &mut Map<String, Value>, keys: &[&str], n: Option<u64>) {
    if let Some(n) = n {
        for k in keys {
            put(m, k, n);
        }
    }
}

/// The `chat {model}` span of `call`, a child of `run` in its trace. Its model and provider
/// fall back to the run's (the session's) when the record names none; a failed call (its
/// `error_type`), or a status code of 400 or more, makes it an ERROR with `error.type`.
pub fn chat_span(run: &Span, call: &ModelCall) -> Span {
    let mut a = Map::new();
    for k in SHARED {
        if let Some(v) = run.attributes.get(k) {
            a.insert(k.to_owned(), v.clone());
        }
    }
    let run_str = |k: &str| run.attributes.get(k).and_then(Value::as_str).map(str::to_owned);
    put(&mut a, "gen_ai.operation.name", "chat");
    put(&mut a, "openinference.span.kind", "LLM");
    put(&mut a, "aep.event_id", call.event_id.as_str());
    let model = call.model.clone().or_else(|| run_str("gen_ai.request.model"));
    if let Some(m) = &model {
        put(&mut a, "gen_ai.request.model", m.as_str());
        put(&mut a, "llm.model_name", m.as_str());
    }
    if let Some(p) = call.provider.clone().or_else(|| run_str("gen_ai.provider.name")) {
        put(&mut a, "gen_ai.provider.name", p);
    }
    put_count(&mut a, &["gen_ai.usage.input_tokens", "llm.token_count.prompt"], call.input_tokens);
    put_count(&mut a, &["gen_ai.usage.output_tokens", "llm.token_count.completion"], call.output_tokens);
    if call.input_tokens.is_some() || call.output_tokens.is_some() {
        let total = call.input_tokens.unwrap_or(0).saturating_add(call.output_tokens.unwrap_or(0));
        put(&mut a, "llm.token_count.total", total);
    }
    put_count(
        &mut a,
        &["gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read"],
        call.cache_read_tokens,
    );
    put_count(
        &mut a,
        &["gen_ai.usage.cache_creation.input_tokens", "llm.token_count.prompt_details.cache_write"],
        call.cache_creation_tokens,
    );
    put_count(
        &mut a,
        &["gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning"],
        call.reasoning_tokens,
    );
    if let Some(id) = &call.response_id {
        put(&mut a, "gen_ai.response.id", id.as_str());
    }
    if !call.finish_reasons.is_empty() {
        put(
            &mut a,
            "gen_ai.response.finish_reasons",
            call.finish_reasons.iter().map(|s| Value::from(s.as_str())).collect::<Vec<_>>(),
        );
    }
    if let Some(cost) = call.cost_usd {
        put(&mut a, "aep.cost.total", cost);
        put(&mut a, "aep.cost.currency", "USD");
        put(&mut a, "llm.cost.total", cost);
    }
    if let Some(how) = call.join {
        put(&mut a, "aep.usage.join", how);
    }
    if let Some(code) = call.status_code.filter(|_| call.error_type.is_some()) {
        put(&mut a, "http.response.status_code", code);
    }
    let (status, message) = match call.status_code {
        // A record of a failed call (`api_error`).
        _ if call.error_type.is_some() => {
            let ty = call.error_type.clone().unwrap_or_default();
            put(&mut a, "error.type", ty.as_str());
            let message = call.status_code.map_or_else(|| ty.clone(), |code| format!("HTTP {code}"));
            (StatusCode::Error, message)
        }
        Some(code) if code >= 400 => {
            put(&mut a, "error.type", code.to_string());
            put(&mut a, "http.response.status_code", code);
            (StatusCode::Error, format!("HTTP {code}"))
        }
        Some(code) => {
            put(&mut a, "http.response.status_code", code);
            (StatusCode::Ok, String::new())
        }
        // A record of a call that returned counts: the call answered.
        None => (StatusCode::Ok, String::new()),
    };
    let start = call.start_unix_nanos.min(call.end_unix_nanos);
    let run_id: String = run.span_id.iter().map(|b| format!("{b:02x}")).collect();
    let source = run_str("aep.source").unwrap_or_default();
    let session = run_str("aep.session_id").unwrap_or_default();
    Span {
        service_name: run.service_name.clone(),
        trace_id: run.trace_id,
        span_id: span_id("chat", &[&source, &session, &run_id, &call.event_id]),
        parent_span_id: Some(run.span_id),
        name: model.map_or_else(|| "chat".to_owned(), |m| format!("chat {m}")),
        role: SpanRole::ModelCall,
        start_unix_nanos: start,
        end_unix_nanos: call.end_unix_nanos,
        attributes: a,
        events: Vec::new(),
        dropped_events_count: 0,
        links: Vec::new(),
        status,
        status_message: message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::{SpanConfig, assemble};
    use aep_schemas::event::Event;
    use serde_json::json;

    fn run() -> Span {
        let ev = |id: &str, ty: &str, seq: u64, run: Option<&str>| {
            let mut v = json!({"aep":"0.1","id":id,"type":ty,"time":format!("2026-07-03T10:00:0{seq}Z"),
                "source":"aep://h/agent/codex/session/s1","agent":"codex","session":"s1","seq":seq,
                "data":{"gen_ai.request.model":"gpt-5"}});
            if let Some(r) = run {
                v["run"] = r.into();
            }
            Event::from_value(v).unwrap()
        };
        let events = [
            ev("e0", "session.started", 0, None),
            ev("e1", "run.started", 1, Some("t1")),
            ev("e2", "run.finished", 2, Some("t1")),
        ];
        assemble(&events, SpanConfig::default()).into_iter().find(|s| s.role == SpanRole::Run).unwrap()
    }

    fn call() -> ModelCall {
        ModelCall {
            event_id: "r1".into(),
            start_unix_nanos: 1_000,
            end_unix_nanos: 1_500,
            model: Some("gpt-5-codex".into()),
            input_tokens: Some(1200),
            output_tokens: Some(25),
            cache_read_tokens: Some(200),
            reasoning_tokens: Some(5),
            finish_reasons: vec!["stop".into()],
            join: Some("sole_run"),
            ..ModelCall::default()
        }
    }

    #[test]
    fn a_call_is_a_client_chat_span_under_its_run() {
        let run = run();
        let s = chat_span(&run, &call());
        assert_eq!((s.name.as_str(), s.role, s.status), ("chat gpt-5-codex", SpanRole::ModelCall, StatusCode::Ok));
        assert_eq!((s.trace_id, s.parent_span_id), (run.trace_id, Some(run.span_id)));
        assert_eq!((s.start_unix_nanos, s.end_unix_nanos), (1_000, 1_500));
        let a = &s.attributes;
        for (k, v) in [
            ("gen_ai.operation.name", json!("chat")),
            ("openinference.span.kind", json!("LLM")),
            ("gen_ai.request.model", json!("gpt-5-codex")),
            ("llm.model_name", json!("gpt-5-codex")),
            ("gen_ai.usage.input_tokens", json!(1200)),
            ("gen_ai.usage.output_tokens", json!(25)),
            ("llm.token_count.prompt", json!(1200)),
            ("llm.token_count.completion", json!(25)),
            ("llm.token_count.total", json!(1225)),
            ("gen_ai.usage.cache_read.input_tokens", json!(200)),
            ("gen_ai.usage.reasoning.output_tokens", json!(5)),
            ("gen_ai.response.finish_reasons", json!(["stop"])),
            ("gen_ai.conversation.id", json!("s1")),
            ("aep.run_id", json!("t1")),
            ("aep.usage.join", json!("sole_run")),
        ] {
            assert_eq!(a.get(k), Some(&v), "{k}");
        }
        assert!(a.get("error.type").is_none() && a.get("gen_ai.response.id").is_none(), "nothing it did not say");
        let otlp = s.to_otlp();
        assert_eq!(otlp.kind, opentelemetry_proto::tonic::trace::v1::span::SpanKind::Client as i32);
        assert_eq!(chat_span(&run, &call()), s, "deterministic");
        let other = ModelCall { event_id: "r2".into(), ..call() };
        assert_ne!(chat_span(&run, &other).span_id, s.span_id, "one span per record");
    }

    #[test]
    fn an_error_status_and_the_runs_model_when_the_record_names_none() {
        let run = run();
        let s = chat_span(&run, &ModelCall { status_code: Some(429), model: None, ..call() });
        assert_eq!((s.status, s.status_message.as_str()), (StatusCode::Error, "HTTP 429"));
        assert_eq!(s.attributes.get("error.type"), Some(&json!("429")));
        assert_eq!(s.name, "chat gpt-5", "the session's model");
        let s = chat_span(&run, &ModelCall { start_unix_nanos: 2_000, ..call() });
        assert_eq!(s.start_unix_nanos, s.end_unix_nanos, "never a start after the end");
    }
}
