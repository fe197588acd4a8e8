#![doc = include_str!("README.md")]

pub mod spec;

use aep_schemas::Severity;
use serde_json::{Value, json};

use super::hook_family::{self as hf, Moment};
use crate::common::{self, begin_synth_run, end_run, fallback, ne, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "gemini-cli";

/// Scratch bucket of pending tool calls keyed by tool name (Gemini exposes no call id).
const PENDING_TOOLS: &str = "gemini_pending_tools";

/// The Gemini CLI hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(GeminiCliAdapter)
}

/// Gemini CLI hooks (AEP-0002 Annex A.3): observe-only; runs synthesized per
/// `BeforeAgent`/`AfterAgent` pair; tool calls paired in order per tool name.
/// The neutral reply is the trait's empty one: observe-only, no hook output is ever needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiCliAdapter;

/// The model id of a model-plane payload (`llm_request.model`).
fn model(p: &Value) -> Option<&str> {
    p.get("llm_request").and_then(|r| r.get("model")).and_then(Value::as_str)
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

impl HookAdapter for GeminiCliAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
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
                // No vendor call id: number the calls per session and pair in order per tool.
                let n = state.extra.get("gemini_tool_seq").and_then(Value::as_u64).unwrap_or(0) + 1;
                state.extra.insert("gemini_tool_seq".into(), json!(n));
                let key = format!("{}:{n}", common::tool_key(tool));
                common::push_queue(state, PENDING_TOOLS, tool, Value::String(key.clone()));
                for d in &mut m.drafts {
                    d.correlation_key = Some(key.clone());
                }
            }
            "AfterTool" => {
                if let Some(Value::String(key)) = common::pop_queue(state, PENDING_TOOLS, tool) {
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
