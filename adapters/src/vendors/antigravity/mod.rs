#![doc = include_str!("README.md")]

pub mod spec;

use aep_schemas::Severity;
use serde_json::{Value, json};

use crate::common::tool_key;
use crate::vendors::plugin_common::{
    draft, error_info, put_args, put_text, scratch, stamp, start_run, tool_ref, x_type,
};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "antigravity";
/// `state.extra` keys: the (conversationId, stepIdx) join table, first-sight flag, open invocation.
const JOIN: &str = "antigravity_join";
const SEEN: &str = "antigravity_seen";
const STEP: &str = "antigravity_step";

/// The byte-exact observe-only reply of `PreToolUse` and `Stop`: the vendor's own
/// safely-handled empty decision (CLI >= 1.0.16), never a named decision, never `continue`.
pub const EMPTY_DECISION: &str = r#"{"decision": ""}"#;

/// The Antigravity hooks.json adapter (observe-only).
#[derive(Debug, Clone, Copy, Default)]
pub struct AntigravityAdapter;

/// The Antigravity adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(AntigravityAdapter)
}

/// The fallback for a future hook name: `x.antigravity.hook.<name>` (lowercased, `[a-z0-9]` only).
pub fn fallback_type(hook: &str) -> String {
    let name: String = hook.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    x_type(VENDOR, &format!("hook.{}", if name.is_empty() { "unknown" } else { &name }))
}

fn step_idx(p: &Value) -> Option<u64> {
    p.get("stepIdx").and_then(Value::as_u64)
}

impl HookAdapter for AntigravityAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// No payload names its own hook: the registration argv (the URL segment) does. A
    /// shim may also put the name in the body's `hook` field.
    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        crate::common::hook_name(call, "hook")
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        crate::common::ne(call.payload, "conversationId").map(str::to_owned)
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
        let mut out = Vec::new();
        // session.started is synthesized on first sight; no session end is ever exposed.
        if state.extra.insert(SEEN.into(), Value::Bool(true)).is_none() {
            let mut d = draft("session.started", cx);
            d.data.insert("client".into(), json!({"name": host_name(p)}));
            out.push(d);
        }
        let join_key = |idx: u64| format!("{}:{idx}", session.as_deref().unwrap_or(""));
        match hook.as_str() {
            "PreToolUse" => {
                let name = p
                    .pointer("/toolCall/name")
                    .and_then(Value::as_str)
                    .ok_or(AdapterError::MissingField { field: "toolCall.name", expected: "string" })?;
                let idx = step_idx(p);
                let mut d = draft("tool.requested", cx);
                d.subject = Some(name.to_owned());
                d.data.insert("tool".into(), tool_ref(name, None));
                if let Some(i) = idx {
                    // step_idx IS the join key, said so
                    d.data.insert("step_idx".into(), json!(i));
                    scratch(state, JOIN).insert(i.to_string(), json!(name));
                    d.correlation_key = Some(tool_key(&join_key(i)));
                }
                put_args(&mut d, cx, p.pointer("/toolCall/args").unwrap_or(&Value::Null));
                out.push(d);
            }
            "PostToolUse" => {
                let idx = step_idx(p);
                let error = p.get("error").and_then(Value::as_str).unwrap_or("");
                let joined = idx.and_then(|i| scratch(state, JOIN).remove(&i.to_string()));
                match joined.as_ref().and_then(Value::as_str) {
                    Some(name) => {
                        let mut d = draft(if error.is_empty() { "tool.completed" } else { "tool.failed" }, cx);
                        d.subject = Some(name.to_owned());
                        d.data.insert("tool".into(), tool_ref(name, None));
                        if let Some(i) = idx {
                            d.data.insert("step_idx".into(), json!(i));
                            d.cause_key = Some(tool_key(&join_key(i)));
                        }
                        if !error.is_empty() {
                            let err = error_info(&d, cx, "tool_error", Some(error));
                            d.data.insert("error".into(), err);
                        }
                        out.push(d);
                    }
                    None => {
                        // unjoined: the honest-absence fallback, a tool name is never invented
                        let mut d = draft(x_type(VENDOR, "step.completed"), cx);
                        d.severity = Some(Severity::Debug);
                        d.data.insert("failed".into(), json!(!error.is_empty()));
                        if let Some(i) = idx {
                            d.data.insert("step_idx".into(), json!(i));
                        }
                        if !error.is_empty() {
                            put_text(&mut d, cx, "error_message", Some(error));
                        }
                        out.push(d);
                    }
                }
            }
            "PreInvocation" => {
                // the run opens at the first invocation boundary
                out.extend(start_run(state, cx));
                let n = p.get("invocationNum").and_then(Value::as_u64);
                let mut d = draft("run.step.started", cx);
                if let Some(s) = p.get("initialNumSteps").and_then(Value::as_u64) {
                    d.data.insert("initial_num_steps".into(), json!(s));
                }
                d.step = n.map(|n| n.to_string());
                match &d.step {
                    Some(s) => state.extra.insert(STEP.into(), json!(s)),
                    None => state.extra.remove(STEP),
                };
                out.push(d);
            }
            "PostInvocation" => {
                let mut d = draft("run.step.finished", cx);
                d.step = p.get("invocationNum").and_then(Value::as_u64).map(|n| n.to_string());
                state.extra.remove(STEP);
                out.push(d);
            }
            "Stop" => {
                let reason = p.get("terminationReason").and_then(Value::as_str).unwrap_or("");
                let mut d = if reason == "error" {
                    let mut d = draft("run.failed", cx);
                    d.data.insert("reason".into(), json!("error"));
                    let msg = p.get("error").and_then(Value::as_str);
                    let err = error_info(&d, cx, "error", msg);
                    d.data.insert("error".into(), err);
                    d
                } else {
                    // bounded terminations are completions, the reason as metadata
                    let mut d = draft("run.finished", cx);
                    if !reason.is_empty() {
                        d.data.insert("termination_reason".into(), json!(reason));
                    }
                    d
                };
                if let Some(n) = p.get("executionNum").and_then(Value::as_u64) {
                    d.data.insert("execution_num".into(), json!(n));
                }
                if let Some(b) = p.get("fullyIdle").and_then(Value::as_bool) {
                    d.data.insert("fully_idle".into(), json!(b));
                }
                d.run = state.current_run.take();
                // entries clear at Stop (bounded memory)
                state.extra.remove(JOIN);
                state.extra.remove(STEP);
                out.push(d);
            }
            other => {
                let mut d = draft(fallback_type(other), cx);
                d.severity = Some(Severity::Debug);
                out.push(d);
            }
        }
        let open_step = state.extra.get(STEP).and_then(Value::as_str).map(str::to_owned);
        for d in &mut out {
            if d.step.is_none() && (d.r#type.starts_with("tool.") || d.r#type.starts_with("x.")) {
                d.step = open_step.clone();
            }
        }
        stamp(&mut out, session.as_deref(), state, |_| false);
        Ok(out)
    }

    fn neutral_reply(&self, hook: &str) -> NeutralReply {
        match hook {
            "PreToolUse" | "Stop" => NeutralReply::Body(EMPTY_DECISION),
            // never injectSteps, never terminationBehavior
            _ => NeutralReply::Body("{}"),
        }
    }
}

/// The host marker: the CLI's app data directory is `antigravity-cli`, the desktop's `antigravity`.
fn host_name(p: &Value) -> &'static str {
    let path = p.get("transcriptPath").and_then(Value::as_str).unwrap_or("");
    if path.contains("/antigravity-cli/") { "antigravity-cli" } else { "antigravity" }
}

#[cfg(test)]
mod tests;
