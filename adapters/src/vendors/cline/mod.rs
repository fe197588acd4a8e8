#![doc = include_str!("README.md")]

pub mod spec;

use aep_schemas::Severity;
use serde_json::{Value, json};

use crate::common::tool_key;
use crate::vendors::plugin_common::{
    dotted_fallback, draft, error_info, ptr_str, put_args, put_result, put_text, scratch, stamp, tool_ref, x_type,
};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "cline";
/// `state.extra` key: the run each agent id has open (`agent_id` -> run id).
const RUNS: &str = "cline_runs";

/// The Cline subprocess-hook adapter (observe-only).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClineAdapter;

/// The Cline adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(ClineAdapter)
}

impl HookAdapter for ClineAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        crate::common::hook_name(call, "hookName")
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        // Annex A.9: taskId is the session.
        crate::common::ne(call.payload, "taskId").map(str::to_owned)
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        let p = call.payload;
        crate::common::object(p)?;
        let hook = self.hook_name(call)?;
        let session = self.session_id(call);
        let agent = p.get("agent_id").and_then(Value::as_str).unwrap_or("");
        let parent = p.get("parent_agent_id").and_then(Value::as_str).filter(|s| !s.is_empty());
        // The per-turn iteration counter stamps the envelope step (Annex A.9), as a string.
        let step = p.get("iteration").and_then(|i| match i {
            Value::Number(n) => Some(n.to_string()),
            Value::String(s) => Some(s.clone()),
            _ => None,
        });
        let mut out = Vec::new();
        match hook.as_str() {
            "agent_start" | "agent_resume" => {
                if let Some(_parent) = parent {
                    let mut d = draft("delegation.subagent.started", cx);
                    d.subject = Some(agent.to_owned());
                    out.push(d);
                }
                let run = open_agent_run(state, agent);
                let mut d = draft("run.started", cx);
                let trigger = if hook == "agent_resume" { "resume" } else { "user" };
                d.data.insert("trigger".into(), json!(trigger));
                d.run = Some(run);
                d.step = step;
                out.push(d);
            }
            "agent_end" | "agent_abort" | "agent_error" => {
                let run = close_agent_run(state, agent);
                let mut d = match hook.as_str() {
                    "agent_end" => draft("run.finished", cx),
                    "agent_abort" => {
                        // a cancellation, not a failure: the vendor's abort/error split is kept
                        let mut d = draft("run.cancelled", cx);
                        d.data.insert("by".into(), json!("user"));
                        put_text(&mut d, cx, "reason", p.get("reason").and_then(Value::as_str));
                        d
                    }
                    _ => {
                        let mut d = draft("run.failed", cx);
                        let name = ptr_str(p, "/error/name").filter(|s| !s.is_empty()).unwrap_or("error");
                        d.data.insert("reason".into(), json!(name));
                        let err = error_info(&d, cx, name, ptr_str(p, "/error/message"));
                        d.data.insert("error".into(), err);
                        d
                    }
                };
                d.run = run.clone();
                d.step = step;
                out.push(d);
                if parent.is_some() {
                    let mut d = draft("delegation.subagent.stopped", cx);
                    d.subject = Some(agent.to_owned());
                    d.run = run;
                    out.push(d);
                }
            }
            "tool_call" => {
                let tc =
                    p.get("tool_call").ok_or(AdapterError::MissingField { field: "tool_call", expected: "object" })?;
                let name = tc
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(AdapterError::MissingField { field: "tool_call.name", expected: "string" })?;
                let id = tc.get("id").and_then(Value::as_str);
                let mut d = draft("tool.requested", cx);
                d.subject = Some(name.to_owned());
                d.data.insert("tool".into(), tool_ref(name, id));
                put_args(&mut d, cx, tc.get("input").unwrap_or(&Value::Null));
                d.correlation_key = id.map(tool_key);
                d.run = agent_run(state, agent);
                d.step = step;
                out.push(d);
            }
            "tool_result" => {
                let tr = p
                    .get("tool_result")
                    .ok_or(AdapterError::MissingField { field: "tool_result", expected: "object" })?;
                let name = tr
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(AdapterError::MissingField { field: "tool_result.name", expected: "string" })?;
                let id = tr.get("id").and_then(Value::as_str);
                // The typed ToolCallRecord.error splits the outcome honestly (Annex A.9). Cline
                // 3.x's `run_commands` reports a command that failed in its own result items
                // (`{success: false, error}`), never on the record: that is a failure too.
                let error = tr.get("error").filter(|e| !e.is_null() && e.as_str() != Some(""));
                let failed_item = (error.is_none())
                    .then(|| tr.get("output").and_then(Value::as_array))
                    .flatten()
                    .and_then(|items| items.iter().find(|i| i.get("success") == Some(&Value::Bool(false))));
                let failed = error.is_some() || failed_item.is_some();
                let mut d = draft(if failed { "tool.failed" } else { "tool.completed" }, cx);
                d.subject = Some(name.to_owned());
                d.data.insert("tool".into(), tool_ref(name, id));
                if let Some(ms) = tr.get("durationMs").and_then(Value::as_u64) {
                    d.data.insert("duration_ms".into(), json!(ms));
                }
                match (error, failed_item) {
                    (Some(e), _) => {
                        let msg = e.as_str().map(str::to_owned).unwrap_or_else(|| e.to_string());
                        let err = error_info(&d, cx, "tool_error", Some(&msg));
                        d.data.insert("error".into(), err);
                    }
                    (None, Some(item)) => {
                        let msg = item.get("error").and_then(Value::as_str);
                        let err = error_info(&d, cx, "command_failed", msg);
                        d.data.insert("error".into(), err);
                    }
                    (None, None) => {
                        if let Some(o) = tr.get("output").filter(|o| !o.is_null()) {
                            put_result(&mut d, cx, o);
                        }
                    }
                }
                d.cause_key = id.map(tool_key);
                d.run = agent_run(state, agent);
                d.step = step;
                out.push(d);
            }
            "prompt_submit" => {
                // message.user.submitted is reserved: the fact rides vendor-scoped at debug.
                let mut d = draft(x_type(VENDOR, "prompt.submitted"), cx);
                d.severity = Some(Severity::Debug);
                put_text(&mut d, cx, "prompt", p.get("prompt").and_then(Value::as_str));
                d.run = agent_run(state, agent);
                out.push(d);
            }
            "pre_compact" => {
                // The vendor's only compaction moment is the PRE moment (deviation, Annex A.9).
                let pc = p.get("preCompact").cloned().unwrap_or(Value::Null);
                let mut d = draft("session.compacted", cx);
                if let Some(s) = pc.get("compactionStrategy").and_then(Value::as_str) {
                    d.data.insert("strategy".into(), json!(s));
                }
                if let Some(n) = pc.get("tokensIn").and_then(Value::as_u64) {
                    d.data.insert("gen_ai.usage.input_tokens".into(), json!(n));
                }
                if let Some(n) = pc.get("tokensOut").and_then(Value::as_u64) {
                    d.data.insert("gen_ai.usage.output_tokens".into(), json!(n));
                }
                out.push(d);
            }
            "session_shutdown" => {
                // vendor free-text reasons do not enter the session.ended enum
                let mut d = draft("session.ended", cx);
                d.data.insert("reason".into(), json!("normal"));
                out.push(d);
            }
            other => {
                let mut d = draft(dotted_fallback(VENDOR, other), cx);
                d.severity = Some(Severity::Debug);
                out.push(d);
            }
        }
        stamp(&mut out, session.as_deref(), state, |_| false);
        Ok(out)
    }

    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        // An empty SubprocessHookControl: no cancel, review, context or overrides, ever.
        NeutralReply::Body("{}")
    }
}

fn agent_run(state: &mut SessionState, agent: &str) -> Option<String> {
    scratch(state, RUNS).get(agent).and_then(Value::as_str).map(str::to_owned).or_else(|| state.current_run.clone())
}

fn open_agent_run(state: &mut SessionState, agent: &str) -> String {
    state.runs_synthesized += 1;
    let run = format!("r{}", state.runs_synthesized);
    scratch(state, RUNS).insert(agent.to_owned(), json!(run));
    state.current_run = Some(run.clone());
    run
}

fn close_agent_run(state: &mut SessionState, agent: &str) -> Option<String> {
    let run = scratch(state, RUNS).remove(agent).and_then(|v| v.as_str().map(str::to_owned));
    if run.is_some() && state.current_run == run {
        // the parent's run (if any) becomes current again
        state.current_run = scratch(state, RUNS).values().next_back().and_then(Value::as_str).map(str::to_owned);
    }
    run
}

#[cfg(test)]
mod tests;
