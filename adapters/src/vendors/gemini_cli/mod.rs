#![doc = include_str!("README.md")]

pub mod otel;
pub mod spec;

use aep_schemas::Severity;
use serde_json::{Value, json};

use super::hook_family::{self as hf, Moment};
use crate::common::{self, begin_synth_run, end_run, fallback, ne, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "gemini-cli";

/// Scratch bucket of pending tool calls keyed by tool name (Gemini exposes no call id):
/// `{key, input}` per call, `input` the digest of its `tool_input`.
const PENDING_TOOLS: &str = "gemini_pending_tools";

/// The Gemini CLI hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(GeminiCliAdapter)
}

/// Gemini CLI hooks (AEP-0002 Annex A.3): observe-only; runs synthesized per
/// `BeforeAgent`/`AfterAgent` pair; tool calls paired by tool name and input digest.
/// The neutral reply is the trait's empty one: observe-only, no hook output is ever needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiCliAdapter;

/// The model id of a model-plane payload (`llm_request.model`).
fn model(p: &Value) -> Option<&str> {
    p.get("llm_request").and_then(|r| r.get("model")).and_then(Value::as_str)
}

/// The digest of a payload's `tool_input` (canonical JSON, so key order does not matter).
fn input_digest(p: &Value) -> Option<String> {
    p.get("tool_input").map(aep_schemas::digest::digest)
}

/// Takes the pending call of `tool` an AfterTool completes: the earliest one whose input
/// digest is the AfterTool's (Gemini runs tool calls concurrently and repeats `tool_input`
/// on AfterTool), else, when the input is absent or matches none, the earliest of that
/// tool (the only order left). Returns its correlation key.
fn take_pending(state: &mut SessionState, tool: &str, input: Option<&str>) -> Option<String> {
    let queue = state.extra.get_mut(PENDING_TOOLS)?.as_object_mut()?.get_mut(tool)?.as_array_mut()?;
    let by_input = input.and_then(|d| queue.iter().position(|e| e.get("input").and_then(Value::as_str) == Some(d)));
    let i = by_input.or_else(|| (!queue.is_empty()).then_some(0))?;
    queue.remove(i).get("key").and_then(Value::as_str).map(str::to_owned)
}

/// The stateless per-hook mapping (what `conformance/fixtures/mappings/gemini-cli.json` pins).
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    match hook {
        "SessionStart" => {
            vec![common::session_started(VENDOR, s(p, "source"), None, cx).text("cwd", s(p, "cwd")).build()]
        }
        // exit|clear|logout|prompt_input_exit|other collapse to `normal`.
        "SessionEnd" => vec![hf::session_ended(p, cx)],
        "BeforeAgent" => vec![hf::run_started(ne(p, "prompt"), cx)],
        // The response text is message-stream territory (AEP-0007): not on the run terminal.
        "AfterAgent" => vec![common::Builder::new("run.finished", cx).build()],
        "BeforeTool" => vec![common::tool_requested(tool(), None, p.get("tool_input"), cx)],
        "AfterTool" => {
            let response = p.get("tool_response");
            match response.and_then(|r| r.get("error")).filter(|e| !e.is_null()) {
                // tool_response.error is an honest failure split (Annex A.3).
                Some(err) => {
                    let ty = err.get("type").and_then(Value::as_str).unwrap_or("tool_error");
                    let msg = err.get("message").and_then(Value::as_str).or_else(|| err.as_str());
                    vec![common::tool_failed(tool(), None, ty, msg, None, cx)]
                }
                None => vec![common::tool_completed(tool(), None, response, None, cx)],
            }
        }
        // The model plane fails the fleet-observer test: vendor namespace, model id only.
        "BeforeModel" | "AfterModel" | "BeforeToolSelection" => {
            let mut d = common::vendor_draft(VENDOR, &format!("session.{}", crate::snake_case(hook)), cx)
                .meta_opt("model", model(p))
                .build();
            if hook == "AfterModel" {
                // Fires per streamed chunk.
                d.severity = Some(Severity::Debug);
            }
            vec![d]
        }
        // Documented deviation: the vendor's only compaction moment is the pre one.
        "PreCompress" => vec![hf::compacted(p, cx)],
        // Observability-only: it can neither grant nor deny, so never attention.requested.
        "Notification" => vec![hf::status(p, cx)],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// The hook events and payload fields this adapter was written against: the install plan's
/// events and every field of the recorded payloads (`adapters/tests/data/gemini-cli/`).
pub static VOCABULARY: crate::drift::Vocabulary = crate::drift::Vocabulary {
    events: &[
        "AfterAgent",
        "AfterModel",
        "AfterTool",
        "BeforeAgent",
        "BeforeModel",
        "BeforeTool",
        "BeforeToolSelection",
        "Notification",
        "PreCompress",
        "SessionEnd",
        "SessionStart",
    ],
    common: &["cwd", "hook_event_name", "session_id", "timestamp", "transcript_path"],
    fields: &[
        ("AfterAgent", &["prompt", "prompt_response", "stop_hook_active"]),
        ("AfterModel", &["llm_request", "llm_response"]),
        ("AfterTool", &["tool_input", "tool_name", "tool_response"]),
        ("BeforeAgent", &["prompt"]),
        ("BeforeModel", &["llm_request"]),
        ("BeforeTool", &["tool_input", "tool_name"]),
        ("BeforeToolSelection", &["llm_request"]),
        ("PreCompress", &["trigger"]),
        ("SessionEnd", &["reason"]),
        ("SessionStart", &["source"]),
    ],
    version: None,
};

impl HookAdapter for GeminiCliAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn vocabulary(&self) -> Option<&'static crate::drift::Vocabulary> {
        Some(&VOCABULARY)
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        let mut m = Moment::open(self, call, cx, map_pinned)?;
        let sess = m.session.as_deref();
        let tool = ne(m.p, "tool_name").unwrap_or("unknown");
        match m.hook.as_str() {
            "BeforeAgent" => {
                begin_synth_run(state, sess, &mut m.drafts, &mut m.before, cx);
            }
            "AfterAgent" => {
                end_run(state, sess, &mut m.drafts);
            }
            "BeforeTool" => {
                // No vendor call id: number the calls per session; remember each with the
                // digest of its input, which AfterTool repeats.
                let n = state.extra.get("gemini_tool_seq").and_then(Value::as_u64).unwrap_or(0) + 1;
                state.extra.insert("gemini_tool_seq".into(), json!(n));
                let key = format!("{}:{n}", common::tool_key(tool));
                let pending = json!({"key": key, "input": input_digest(m.p)});
                common::push_queue(state, PENDING_TOOLS, tool, pending);
                for d in &mut m.drafts {
                    d.correlation_key = Some(key.clone());
                }
            }
            "AfterTool" => {
                if let Some(key) = take_pending(state, tool, input_digest(m.p).as_deref()) {
                    for d in &mut m.drafts {
                        d.cause_key = Some(key.clone());
                    }
                }
            }
            "SessionEnd" => m.drain_open_run(state, cx),
            _ => {}
        }
        Ok(m.finish_timed(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(st: &mut SessionState, p: Value) -> Vec<EventDraft> {
        GeminiCliAdapter.map(&HookCall { event: None, payload: &p }, st, &MapContext::default()).unwrap()
    }

    #[test]
    fn tools_pair_in_order_per_name_and_runs_synthesize() {
        let mut st = SessionState::default();
        let a = run(&mut st, json!({"hook_event_name": "BeforeAgent", "session_id": "s", "prompt": "x"}));
        assert_eq!(a[0].run.as_deref(), Some("r1"));
        let r1 = run(
            &mut st,
            json!({"hook_event_name": "BeforeTool", "session_id": "s", "tool_name": "read_file", "tool_input": {}}),
        );
        let r2 = run(
            &mut st,
            json!({"hook_event_name": "BeforeTool", "session_id": "s", "tool_name": "read_file", "tool_input": {"a": 1}}),
        );
        assert_ne!(r1[0].correlation_key, r2[0].correlation_key);
        let c1 = run(
            &mut st,
            json!({"hook_event_name": "AfterTool", "session_id": "s", "tool_name": "read_file", "tool_response": {}}),
        );
        assert_eq!(c1[0].cause_key, r1[0].correlation_key);
        assert_eq!(c1[0].run.as_deref(), Some("r1"));
        let f = run(&mut st, json!({"hook_event_name": "AfterAgent", "session_id": "s"}));
        assert_eq!(f[0].cause_key, a[0].correlation_key);
        let m =
            run(&mut st, json!({"hook_event_name": "AfterModel", "session_id": "s", "llm_request": {"model": "g"}}));
        assert_eq!(m[0].severity, Some(Severity::Debug));
        assert_eq!(m[0].run, None);
    }
}
