#![doc = include_str!("README.md")]

pub mod observer;
pub mod route;
pub mod spec;
pub mod web;

use aep_schemas::Capture;
use serde_json::{Value, json};

use super::hook_family::{self as hf, Moment};
use crate::common::{self, Builder, begin_synth_run, end_run, fallback, gate_text, ne, s, u};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "kimi-code";

/// The session of payloads without `session_id` (the subagent hooks carry none).
pub const UNKNOWN_SESSION: &str = "unknown";

/// The Kimi Code CLI hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(KimiCodeAdapter)
}

/// Kimi Code CLI external hooks (AEP-0002 Annex A.6): observe-only by default.
#[derive(Debug, Clone, Copy, Default)]
pub struct KimiCodeAdapter;

/// The prompt text: a content-part array (text parts joined) or a plain string.
fn prompt_text(p: &Value) -> Option<String> {
    match p.get("prompt")? {
        Value::String(t) => Some(t.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            Some(texts.join("\n"))
        }
        _ => None,
    }
    .filter(|t| !t.is_empty())
}

/// The stateless per-hook mapping (what the `hooks` and `fallback` blocks of
/// `conformance/fixtures/mappings/kimi-code.json` pin). The permission-pair companions
/// (`attention.resolved`, `tool.denied`) and run synthesis are added by [`KimiCodeAdapter`].
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    let call = || s(p, "tool_call_id");
    match hook {
        // cwd (workstation-local) never rides.
        "SessionStart" => vec![Builder::new("session.started", cx).meta_opt("trigger", s(p, "source")).build()],
        "SessionEnd" => vec![hf::session_ended(p, cx)],
        // A steer rides the running turn: no run boundary exists at this moment.
        "UserPromptSubmit" if p.get("is_steer").and_then(Value::as_bool) == Some(true) => {
            vec![common::vendor_draft(VENDOR, "run.steer_submitted", cx).build()]
        }
        "UserPromptSubmit" => vec![hf::run_started(prompt_text(p).as_deref(), cx)],
        // stop_hook_active is the vendor's continuation-loop plumbing: never forwarded.
        "Stop" => vec![Builder::new("run.finished", cx).build()],
        "StopFailure" => {
            let ty = ne(p, "error_type").unwrap_or("unknown");
            vec![Builder::new("run.failed", cx).meta("reason", ty).error(ty, ne(p, "error_message")).build()]
        }
        // Fired only for the user's own cancellation (reason "cancelled").
        "Interrupt" => vec![Builder::new("run.cancelled", cx).meta("by", "user").build()],
        "PreToolUse" => vec![common::tool_requested(tool(), call(), p.get("tool_input"), cx)],
        "PostToolUse" => vec![common::tool_completed(tool(), call(), p.get("tool_output"), None, cx)],
        "PostToolUseFailure" => {
            let err = p.get("error");
            let ty = err.and_then(|e| e.get("name")).and_then(Value::as_str).unwrap_or("tool_error");
            let msg = err.and_then(|e| e.get("message").and_then(Value::as_str).or_else(|| e.as_str()));
            vec![common::tool_failed(tool(), call(), ty, msg, None, cx)]
        }
        // The vendor's own TUI prompt is opening: observe-only, no options claimed (AEP-0008).
        "PermissionRequest" => {
            let b = Builder::new("attention.requested", cx);
            let prompt = ne(p, "display")
                .and_then(|d| gate_text(d, b.ceiling(), cx))
                .unwrap_or_else(|| common::synthesized_prompt(VENDOR, "permission", tool()));
            let mut d = b
                .meta("kind", "permission")
                .meta("prompt", prompt)
                .meta("respond_via", json!(["oob"]))
                .subject(Some(tool()))
                .build();
            d.cause_key = call().map(common::tool_key);
            d.correlation_key = call().map(common::attention_key);
            vec![d]
        }
        "PermissionResult" => permission_result(p, cx),
        "SubagentStart" => vec![Builder::new("delegation.subagent.started", cx).subject(ne(p, "agent_name")).build()],
        "SubagentStop" => vec![Builder::new("delegation.subagent.stopped", cx).subject(ne(p, "agent_name")).build()],
        // The post moment is the truthful carrier: the pre moment degrades, never drops.
        "PreCompact" => {
            let mut d = fallback(VENDOR, hook, None, cx);
            if d.capture >= Capture::Metadata {
                if let Some(t) = s(p, "trigger") {
                    d.data.insert("trigger".into(), json!(t));
                }
                if let Some(n) = u(p, "token_count") {
                    d.data.insert("token_count".into(), json!(n));
                }
            }
            vec![d]
        }
        "PostCompact" => vec![
            Builder::new("session.compacted", cx)
                .meta_opt("trigger", s(p, "trigger"))
                .meta_opt("estimated_token_count", u(p, "estimated_token_count"))
                .build(),
        ],
        // Background-task status only, never an attention loop.
        "Notification" => vec![
            Builder::new("progress.status", cx)
                .meta_opt("severity", ne(p, "severity"))
                .text("message", ne(p, "title"))
                .subject(ne(p, "notification_type"))
                .build(),
        ],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// `PermissionResult`: the observed answer of the vendor's own approval prompt.
fn permission_result(p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let call = s(p, "tool_call_id");
    let decision = ne(p, "decision");
    let mut d = match decision {
        // An internal gate failure, not an answer: degrade, never invent an outcome.
        None | Some("error") => return vec![fallback(VENDOR, "PermissionResult", None, cx)],
        Some("cancelled") => Builder::new("attention.resolved", cx).meta("resolution", "dismissed").build(),
        Some(option) => {
            let b = Builder::new("attention.answered", cx);
            let mut answer = serde_json::Map::new();
            answer.insert("option".into(), json!(option));
            if let Some(t) = ne(p, "feedback").and_then(|f| gate_text(f, b.ceiling(), cx)) {
                answer.insert("text".into(), json!(t));
            }
            b.meta("answer", Value::Object(answer))
                .meta("via", "oob")
                .meta_opt("label", ne(p, "selected_label"))
                .build()
        }
    };
    d.cause_key = call.map(common::attention_key);
    vec![d]
}

impl HookAdapter for KimiCodeAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        Some(ne(call.payload, "session_id").unwrap_or(UNKNOWN_SESSION).to_owned())
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        let mut m = Moment::open(self, call, cx, map_pinned)?;
        let (p, sess) = (m.p, m.session.as_deref());
        match m.hook.as_str() {
            "UserPromptSubmit" if m.drafts.iter().any(|d| d.r#type == "run.started") => {
                begin_synth_run(state, sess, &mut m.drafts, &mut m.before, cx);
            }
            "Stop" | "StopFailure" | "Interrupt" => {
                end_run(state, sess, &mut m.drafts);
            }
            "SessionEnd" => m.drain_open_run(state, cx),
            "PermissionResult" => {
                // Companions (envelope wiring): the answered moment resolves the request;
                // a rejection is also the runtime's enforcement fact on the tool.
                if let Some(answered) = m.drafts.iter().find(|d| d.r#type == "attention.answered").cloned() {
                    let mut resolved = Builder::new("attention.resolved", cx).meta("resolution", "answered").build();
                    resolved.cause_key = answered.cause_key.clone();
                    let rejected = s(p, "decision") == Some("rejected");
                    m.drafts.push(resolved);
                    if rejected {
                        let tool = ne(p, "tool_name").unwrap_or("unknown");
                        let mut denied = Builder::new("tool.denied", cx)
                            .tool(tool, s(p, "tool_call_id"))
                            .meta("by", "runtime")
                            .build();
                        denied.cause_key = s(p, "tool_call_id").map(common::attention_key);
                        m.drafts.push(denied);
                    }
                }
            }
            _ => {}
        }
        Ok(m.finish(state))
    }

    /// The default posture replies an empty object everywhere.
    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        NeutralReply::Body("{}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(st: &mut SessionState, p: Value) -> Vec<EventDraft> {
        KimiCodeAdapter.map(&HookCall { event: None, payload: &p }, st, &MapContext::default()).unwrap()
    }

    fn types(d: &[EventDraft]) -> Vec<&str> {
        d.iter().map(|d| d.r#type.as_str()).collect()
    }

    #[test]
    fn steer_never_opens_a_run_and_interrupt_closes_it() {
        let mut st = SessionState::default();
        let a = run(
            &mut st,
            json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": [{"type": "text", "text": "go"}]}),
        );
        assert_eq!(a[0].run.as_deref(), Some("r1"));
        let b = run(
            &mut st,
            json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "more", "is_steer": true}),
        );
        assert_eq!(types(&b), ["x.kimi-code.run.steer_submitted"]);
        assert_eq!(b[0].run.as_deref(), Some("r1"));
        let c = run(
            &mut st,
            json!({"hook_event_name": "Interrupt", "session_id": "s", "turn_id": "turn_9", "reason": "cancelled"}),
        );
        assert_eq!(c[0].run.as_deref(), Some("r1"));
        assert_eq!(st.current_run, None);
    }

    #[test]
    fn rejected_permission_lands_companions() {
        let mut st = SessionState::default();
        let p = json!({"hook_event_name": "PermissionResult", "session_id": "s", "tool_name": "Bash", "tool_call_id": "c", "decision": "rejected"});
        let out = run(&mut st, p);
        assert_eq!(types(&out), ["attention.answered", "attention.resolved", "tool.denied"]);
        assert_eq!(out[2].data["by"], "runtime");
        let p = json!({"hook_event_name": "PermissionResult", "session_id": "s", "tool_call_id": "c", "decision": "approved"});
        assert_eq!(types(&run(&mut st, p)), ["attention.answered", "attention.resolved"]);
        let p = json!({"hook_event_name": "SubagentStart", "agent_name": "explore"});
        assert_eq!(run(&mut st, p)[0].session.as_deref(), Some("unknown"));
    }

    #[test]
    fn metadata_ceiling_synthesizes_the_permission_prompt() {
        let cx = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
        let out = map_pinned("PermissionRequest", &json!({"tool_name": "Bash", "display": "Run `rm -rf /`?"}), &cx);
        assert_eq!(out[0].data["prompt"], "kimi-code requests permission: Bash");
    }
}
