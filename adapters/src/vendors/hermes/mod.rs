#![doc = include_str!("README.md")]

pub mod clarify;
pub mod spec;

use aep_schemas::Severity;
use aep_schemas::digest::digest;
use serde_json::{Value, json};

use crate::common::{attention_key, tool_key};
use crate::vendors::plugin_common::{
    dotted_fallback, draft, error_info, gate_text, put_args, put_result, put_text, scratch, stamp, synth_prompt,
    tool_ref, x_type,
};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "hermes";

/// The `extra.telemetry_schema_version` this mapping was pinned against (the drift sentinel).
pub const SCHEMA_SENTINEL: &str = "hermes.observer.v1";

/// The Hermes Agent shell-hook adapter (observe-only).
#[derive(Debug, Clone, Copy, Default)]
pub struct HermesAdapter;

/// The Hermes adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(HermesAdapter)
}

fn extra(p: &Value) -> &Value {
    static NULL: Value = Value::Null;
    p.get("extra").unwrap_or(&NULL)
}

fn xs<'a>(p: &'a Value, key: &str) -> Option<&'a str> {
    extra(p).get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// True when the payload names a telemetry schema other than [`SCHEMA_SENTINEL`]: the
/// re-verify trigger of the source-pinned mapping (the mapping still runs).
pub fn schema_drifted(payload: &Value) -> bool {
    matches!(xs(payload, "telemetry_schema_version"), Some(v) if v != SCHEMA_SENTINEL)
}

impl HookAdapter for HermesAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        let p = call.payload;
        // Approval fire sites pass session_id "": identity rides as extra.session_key;
        // subagent hooks fall back to the parent (delegation lands on the parent).
        p.get("session_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or_else(|| xs(p, "session_key"))
            .or_else(|| xs(p, "parent_session_id"))
            .map(str::to_owned)
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
        // The REAL per-turn id rides verbatim as the run (Annex A.10).
        let turn = xs(p, "turn_id").map(str::to_owned);
        let tool = p.get("tool_name").and_then(Value::as_str).filter(|s| !s.is_empty());
        let call_id = xs(p, "tool_call_id");
        let mut out = Vec::new();
        match hook.as_str() {
            "on_session_start" => {
                let mut d = draft("session.started", cx);
                d.data.insert("client".into(), json!({"name": VENDOR}));
                put_text(&mut d, cx, "cwd", p.get("cwd").and_then(Value::as_str));
                out.push(d);
            }
            "pre_llm_call" => {
                if let Some(t) = &turn {
                    state.current_run = Some(t.clone());
                }
                let mut d = draft("run.started", cx);
                d.run = turn.clone();
                d.data.insert("trigger".into(), json!("user"));
                if let Some(msg) = extra(p).get("user_message").filter(|m| !m.is_null()) {
                    // digest before redaction (AEP-0003 §9 rule 3); text at redacted+
                    d.data.insert("message_digest".into(), json!(digest(msg)));
                    put_text(&mut d, cx, "prompt", msg.as_str());
                }
                out.push(d);
            }
            "pre_tool_call" => {
                let name = tool.ok_or(AdapterError::MissingField { field: "tool_name", expected: "string" })?;
                let mut d = draft("tool.requested", cx);
                d.subject = Some(name.to_owned());
                d.data.insert("tool".into(), tool_ref(name, call_id));
                if let Some(args) = p.get("tool_input").filter(|a| !a.is_null()) {
                    put_args(&mut d, cx, args);
                }
                d.correlation_key = call_id.map(tool_key);
                d.run = turn.clone();
                out.push(d);
                if name == "clarify" {
                    match clarify::card(p.get("tool_input").unwrap_or(&Value::Null), call_id, cx) {
                        Some(mut card) => {
                            card.run = turn.clone();
                            out.push(card);
                        }
                        None => {
                            // a question-less clarify mints no card: its post settles nothing
                            if let Some(id) = call_id {
                                scratch(state, "clarify_no_card").insert(id.to_owned(), Value::Bool(true));
                            }
                        }
                    }
                }
            }
            "post_tool_call" => {
                let name = tool.ok_or(AdapterError::MissingField { field: "tool_name", expected: "string" })?;
                let status = xs(p, "status").unwrap_or("ok");
                // The three-state result splits three ways (Annex A.10).
                let ty = match status {
                    "error" => "tool.failed",
                    "blocked" => "tool.denied",
                    _ => "tool.completed",
                };
                let mut d = draft(ty, cx);
                d.subject = Some(name.to_owned());
                d.data.insert("tool".into(), tool_ref(name, call_id));
                if let Some(ms) = extra(p).get("duration_ms").and_then(Value::as_u64) {
                    d.data.insert("duration_ms".into(), json!(ms));
                }
                match status {
                    "error" => {
                        let ety = xs(p, "error_type").unwrap_or("error");
                        let err = error_info(&d, cx, ety, xs(p, "error_message"));
                        d.data.insert("error".into(), err);
                    }
                    "blocked" => {
                        // a blocking policy hook, no human loop; the message is the rule at redacted+
                        d.data.insert("by".into(), json!("policy"));
                        put_text(&mut d, cx, "rule", xs(p, "error_message"));
                    }
                    _ => {
                        if let Some(r) = extra(p).get("result").filter(|r| !r.is_null()) {
                            put_result(&mut d, cx, r);
                            // `terminal` reports `{"output", "exit_code", "error"}` and calls a
                            // non-zero exit `ok`: the code is metadata the split does not carry.
                            if let Some(code) = exit_code(r) {
                                d.data.insert("exit_code".into(), json!(code));
                            }
                        }
                    }
                }
                d.cause_key = call_id.map(tool_key);
                d.run = turn.clone();
                out.push(d);
                let no_card = call_id.is_some_and(|id| scratch(state, "clarify_no_card").remove(id).is_some());
                if name == "clarify" && !no_card {
                    out.extend(clarify::outcome(status, extra(p).get("result"), call_id, cx).into_iter().map(
                        |mut o| {
                            o.run = turn.clone();
                            o
                        },
                    ));
                }
            }
            "pre_approval_request" => {
                let pattern = xs(p, "pattern_key").unwrap_or("approval");
                let mut d = draft("attention.requested", cx);
                d.subject = Some(pattern.to_owned());
                d.data.insert("kind".into(), json!("permission"));
                let prompt = match xs(p, "command").and_then(|c| gate_text(&d, cx, c)) {
                    Some(c) => format!("Approval requested: {c}"),
                    None => synth_prompt(VENDOR, "permission", pattern),
                };
                d.data.insert("prompt".into(), json!(prompt));
                // The vendor's return contract (once/session/always/deny) as data; the
                // card is observed, answered in the agent's own UI (AEP-0008).
                d.data.insert(
                    "options".into(),
                    json!([
                        {"id": "once", "label": "Allow once"},
                        {"id": "session", "label": "Allow for this session"},
                        {"id": "always", "label": "Add to permanent allowlist"},
                        {"id": "deny", "label": "Deny"}
                    ]),
                );
                d.data.insert("respond_via".into(), json!(["oob"]));
                d.correlation_key = Some(approval_key(session.as_deref(), pattern));
                d.run = turn.clone();
                out.push(d);
            }
            "post_approval_response" => {
                let pattern = xs(p, "pattern_key").unwrap_or("approval");
                let choice = xs(p, "choice").unwrap_or("deny");
                let mut d = if choice == "timeout" {
                    draft("attention.timeout", cx)
                } else {
                    let mut d = draft("attention.answered", cx);
                    d.data.insert("answer".into(), json!({"option": choice}));
                    d.data.insert("via".into(), json!("oob"));
                    d
                };
                d.subject = Some(pattern.to_owned());
                d.cause_key = Some(approval_key(session.as_deref(), pattern));
                d.run = turn.clone();
                out.push(d);
            }
            "on_session_end" => {
                // Fires PER TURN: closes the run, never the session (Annex A.10).
                let interrupted = extra(p).get("interrupted").and_then(Value::as_bool) == Some(true);
                let mut d = if interrupted {
                    let mut d = draft("run.cancelled", cx);
                    d.data.insert("by".into(), json!("user"));
                    d
                } else {
                    draft("run.finished", cx)
                };
                d.run = turn.clone().or_else(|| state.current_run.clone());
                if state.current_run == d.run {
                    state.current_run = None;
                }
                out.push(d);
            }
            "subagent_start" | "subagent_stop" => {
                let child = xs(p, "child_session_id");
                let start = hook == "subagent_start";
                let mut d =
                    draft(if start { "delegation.subagent.started" } else { "delegation.subagent.stopped" }, cx);
                d.subject = child.map(str::to_owned);
                if let Some(c) = child {
                    d.data.insert("child".into(), json!({"session": c}));
                }
                if start {
                    if let Some(r) = xs(p, "child_role") {
                        d.data.insert("role".into(), json!(r));
                    }
                } else {
                    if let Some(s) = xs(p, "child_status") {
                        d.data.insert("status".into(), json!(s));
                    }
                    if let Some(ms) = extra(p).get("duration_ms").and_then(Value::as_u64) {
                        d.data.insert("duration_ms".into(), json!(ms));
                    }
                }
                d.run = xs(p, "parent_turn_id").map(str::to_owned);
                out.push(d);
            }
            "api_request_error" => {
                let mut d = draft(x_type(VENDOR, "api.error"), cx);
                d.severity = Some(Severity::Error);
                for k in ["status_code", "retry_count"] {
                    if let Some(v) = extra(p).get(k).filter(|v| v.is_number()) {
                        d.data.insert(k.into(), v.clone());
                    }
                }
                if let Some(r) = xs(p, "reason") {
                    d.data.insert("reason".into(), json!(r));
                }
                put_text(&mut d, cx, "message", extra(p).pointer("/error/message").and_then(Value::as_str));
                d.run = turn.clone();
                out.push(d);
            }
            "on_session_finalize" => {
                let mut d = draft("session.ended", cx);
                d.data.insert("reason".into(), json!("normal"));
                out.push(d);
            }
            "on_session_reset" => {
                // Fires AFTER the vendor minted the successor id: not a session end.
                let mut d = draft(x_type(VENDOR, "session.reset"), cx);
                d.severity = Some(Severity::Debug);
                if let Some(r) = xs(p, "reason") {
                    d.data.insert("reason".into(), json!(r));
                }
                out.push(d);
            }
            other => {
                let mut d = draft(dotted_fallback(VENDOR, other), cx);
                d.severity = Some(Severity::Debug);
                d.run = turn.clone();
                out.push(d);
            }
        }
        stamp(&mut out, session.as_deref(), state, |_| false);
        Ok(out)
    }

    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        // Observe-only: never block, never inject context.
        NeutralReply::Body("{}")
    }
}

/// The approval pair's correlation key: the daemon pairs post to pre by `session|pattern_key`.
fn approval_key(session: Option<&str>, pattern: &str) -> String {
    attention_key(&format!("{}|{pattern}", session.unwrap_or("")))
}

/// The integer `exit_code` of a tool result (a JSON object, or a string holding one).
fn exit_code(result: &Value) -> Option<i64> {
    match result {
        Value::String(s) if s.trim_start().starts_with('{') => {
            serde_json::from_str::<Value>(s).ok()?.get("exit_code")?.as_i64()
        }
        v => v.get("exit_code")?.as_i64(),
    }
}

#[cfg(test)]
mod tests;
