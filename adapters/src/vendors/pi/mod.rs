#![doc = include_str!("README.md")]

pub mod spec;

use aep_schemas::Severity;
use aep_schemas::digest::digest;
use serde_json::{Value, json};

use crate::common::tool_key;
use crate::vendors::plugin_common::{
    close_run, draft, error_info, gate_text, gate_value, put_args, put_result, put_text, stamp, start_run, tool_ref,
    x_type,
};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "pi";

/// The pi extension-bus adapter (observe-only by non-subscription).
#[derive(Debug, Clone, Copy, Default)]
pub struct PiAdapter {
    /// The `AEP_PI_DELTAS` opt-in: stream updates as `x.pi.message.delta` / `x.pi.tool.update`.
    pub deltas: bool,
}

/// The pi adapter at the default posture (deltas off).
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(PiAdapter::default())
}

/// The pi adapter with the stream-update opt-in set as given.
pub fn adapter_with_deltas(deltas: bool) -> Box<dyn HookAdapter> {
    Box::new(PiAdapter { deltas })
}

/// `turnIndex` (or any number / string) as the envelope step, stringified.
fn as_step(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn put_usage(d: &mut EventDraft, msg: &Value) {
    if let Some(n) = msg.pointer("/usage/input").and_then(Value::as_u64) {
        d.data.insert("gen_ai.usage.input_tokens".into(), json!(n));
    }
    if let Some(n) = msg.pointer("/usage/output").and_then(Value::as_u64) {
        d.data.insert("gen_ai.usage.output_tokens".into(), json!(n));
    }
}

/// Message content: `content_digest` over the original text (a string content, or the
/// text blocks concatenated; the raw value when it has no text), the text at redacted+.
fn put_content(d: &mut EventDraft, cx: &MapContext, msg: &Value) {
    let Some(c) = msg.get("content") else { return };
    let text = match c {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            let parts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            (!parts.is_empty()).then(|| parts.concat())
        }
        _ => None,
    };
    let original = text.as_ref().map(|t| json!(t)).unwrap_or_else(|| c.clone());
    d.data.insert("content_digest".into(), json!(digest(&original)));
    if let Some(v) = gate_value(d, cx, &original) {
        d.data.insert("content".into(), v);
    }
}

/// Text of a tool result's `content` blocks (for a gated error message).
fn result_text(result: &Value) -> Option<String> {
    let blocks = result.get("content")?.as_array()?;
    let text: Vec<&str> = blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

impl HookAdapter for PiAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// The URL segment, else the bus event's own `event.type`.
    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        if let Some(e) = call.event.filter(|e| !e.is_empty()) {
            return Ok(e.to_owned());
        }
        call.payload
            .pointer("/event/type")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or(AdapterError::NoHookName { field: "event.type" })
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        // read in-process from ctx.sessionManager by the shim and attached to every moment
        call.payload.get("session").and_then(|s| crate::common::ne(s, "id")).map(str::to_owned)
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
        let null = Value::Null;
        let ev = p.get("event").unwrap_or(&null);
        let s = |k: &str| ev.get(k).and_then(Value::as_str);
        let vendor_x = |rest: &str, cx: &MapContext| {
            let mut d = draft(x_type(VENDOR, rest), cx);
            d.severity = Some(Severity::Debug);
            d
        };
        let mut out = Vec::new();
        match hook.as_str() {
            "session_start" => {
                let mut d = draft("session.started", cx);
                d.data.insert("client".into(), json!({"name": VENDOR}));
                if let Some(r) = s("reason") {
                    d.data.insert("reason".into(), json!(r));
                }
                put_text(&mut d, cx, "cwd", p.pointer("/session/cwd").and_then(Value::as_str));
                out.push(d);
            }
            "session_shutdown" => {
                // every vendor teardown reason is orderly: normal, the vendor value alongside
                let mut d = draft("session.ended", cx);
                d.data.insert("reason".into(), json!("normal"));
                if let Some(r) = s("reason") {
                    d.data.insert("vendor_reason".into(), json!(r));
                }
                out.push(d);
            }
            "session_compact" => {
                let mut d = draft("session.compacted", cx);
                if let Some(r) = s("reason") {
                    d.data.insert("reason".into(), json!(r));
                }
                if let Some(b) = ev.get("willRetry").and_then(Value::as_bool) {
                    d.data.insert("will_retry".into(), json!(b));
                }
                out.push(d);
            }
            "agent_start" => {
                // one agent loop = one run; duplicate opens keep the live run
                out.extend(start_run(state, cx));
            }
            "agent_end" => {
                // no run open: dropped entirely (runtime state)
                if let Some(run) = close_run(state) {
                    let mut d = agent_end(ev, cx);
                    d.run = Some(run);
                    out.push(d);
                }
            }
            "agent_settled" => out.push(vendor_x("agent.settled", cx)),
            "turn_start" | "turn_end" => {
                let mut d = draft(if hook == "turn_start" { "run.step.started" } else { "run.step.finished" }, cx);
                d.step = as_step(ev.get("turnIndex"));
                out.push(d);
            }
            "message_start" => {
                let msg = ev.get("message").unwrap_or(&null);
                // the assistant boundary is taken once, at message_end
                if msg.get("role").and_then(Value::as_str) == Some("user") {
                    let mut d = vendor_x("message.submitted", cx);
                    put_content(&mut d, cx, msg);
                    out.push(d);
                }
            }
            "message_update" => {
                if self.deltas {
                    let mut d = vendor_x("message.delta", cx);
                    if let Some(k) = ev.pointer("/assistantMessageEvent/type").and_then(Value::as_str) {
                        d.data.insert("kind".into(), json!(k));
                    }
                    out.push(d);
                }
            }
            "message_end" => {
                let msg = ev.get("message").unwrap_or(&null);
                // toolResult messages belong to the tool trio: no double claim
                if msg.get("role").and_then(Value::as_str) == Some("assistant") {
                    let mut d = vendor_x("message.replied", cx);
                    if let Some(r) = msg.get("stopReason").and_then(Value::as_str) {
                        d.data.insert("stop_reason".into(), json!(r));
                    }
                    put_usage(&mut d, msg);
                    put_content(&mut d, cx, msg);
                    out.push(d);
                }
            }
            "tool_execution_start" | "tool_execution_update" | "tool_execution_end" => {
                let name =
                    s("toolName").ok_or(AdapterError::MissingField { field: "event.toolName", expected: "string" })?;
                let id = s("toolCallId");
                let mut d = match hook.as_str() {
                    "tool_execution_start" => {
                        let mut d = draft("tool.requested", cx);
                        put_args(&mut d, cx, ev.get("args").unwrap_or(&null));
                        d.correlation_key = id.map(tool_key);
                        d
                    }
                    "tool_execution_update" => {
                        if !self.deltas {
                            return Ok(Vec::new());
                        }
                        let mut d = vendor_x("tool.update", cx);
                        if let Some(part) = ev.get("partialResult") {
                            d.data.insert("partial_digest".into(), json!(digest(part)));
                        }
                        d.cause_key = id.map(tool_key);
                        d
                    }
                    _ => {
                        let result = ev.get("result").unwrap_or(&null);
                        // the vendor's own typed isError flag, never inferred
                        let mut d = if ev.get("isError").and_then(Value::as_bool) == Some(true) {
                            let mut d = draft("tool.failed", cx);
                            let err = error_info(&d, cx, "error", result_text(result).as_deref());
                            d.data.insert("error".into(), err);
                            d
                        } else {
                            let mut d = draft("tool.completed", cx);
                            put_result(&mut d, cx, result);
                            d
                        };
                        d.cause_key = id.map(tool_key);
                        d
                    }
                };
                d.subject = Some(name.to_owned());
                d.data.insert("tool".into(), tool_ref(name, id));
                out.push(d);
            }
            "session_info_changed" => {
                let mut d = vendor_x("session.info", cx);
                put_text(&mut d, cx, "name", s("name"));
                out.push(d);
            }
            "session_tree" => out.push(vendor_x("session.tree", cx)),
            "model_select" => {
                let mut d = vendor_x("model.select", cx);
                if let Some(src) = s("source") {
                    d.data.insert("source".into(), json!(src));
                }
                if let Some(m) = ev.pointer("/model/id").and_then(Value::as_str) {
                    d.data.insert("model".into(), json!(m));
                }
                out.push(d);
            }
            "thinking_level_select" => {
                let mut d = vendor_x("thinking.select", cx);
                if let Some(l) = s("level") {
                    d.data.insert("level".into(), json!(l));
                }
                out.push(d);
            }
            other => {
                // the `event` family keeps every fallback two segments deep in x.pi.*
                let name: String = other
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' })
                    .collect();
                out.push(vendor_x(&format!("event.{}", if name.is_empty() { "unknown" } else { &name }), cx));
            }
        }
        stamp(&mut out, session.as_deref(), state, |_| false);
        Ok(out)
    }

    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        // notification handlers return nothing; the shim ignores the reply body
        NeutralReply::Empty
    }
}

/// The run terminal typed by the LAST assistant message's `stopReason` (Annex A.12).
fn agent_end(ev: &Value, cx: &MapContext) -> EventDraft {
    let last = ev
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|ms| ms.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("assistant")));
    let Some(msg) = last else { return draft("run.finished", cx) };
    let reason = msg.get("stopReason").and_then(Value::as_str).unwrap_or("");
    match reason {
        "error" => {
            let mut d = draft("run.failed", cx);
            d.data.insert("reason".into(), json!("error"));
            d.data.insert("stop_reason".into(), json!(reason));
            let err = error_info(&d, cx, "error", msg.get("errorMessage").and_then(Value::as_str));
            d.data.insert("error".into(), err);
            d
        }
        "aborted" => {
            // user Esc and programmatic aborts are indistinguishable: no `by` claim
            let mut d = draft("run.cancelled", cx);
            d.data.insert("stop_reason".into(), json!(reason));
            d
        }
        _ => {
            let mut d = draft("run.finished", cx);
            if !reason.is_empty() {
                d.data.insert("stop_reason".into(), json!(reason));
            }
            put_usage(&mut d, msg);
            if let Some(t) = final_text(msg).and_then(|t| gate_text(&d, cx, &t)) {
                d.data.insert("summary".into(), json!(t));
            }
            d
        }
    }
}

fn final_text(msg: &Value) -> Option<String> {
    match msg.get("content")? {
        Value::String(s) => Some(s.clone()),
        other => result_text(&json!({"content": other})),
    }
}

#[cfg(test)]
mod tests;
