#![doc = include_str!("README.md")]

use serde_json::Value;

use crate::common::{self, Builder, begin_synth_run, end_run, fallback, hook_name, ne, s, session_end_reason, u};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "qwen-code";

/// The Qwen Code hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(QwenCodeAdapter)
}

/// Qwen Code hooks (AEP-0002 Annex A.4): `session_id` = session, runs synthesized per
/// prompt, tools paired by `tool_use_id`.
#[derive(Debug, Clone, Copy, Default)]
pub struct QwenCodeAdapter;

/// The stateless per-hook mapping (what `conformance/fixtures/mappings/qwen-code.json` pins).
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    let call = || s(p, "tool_use_id");
    match hook {
        "SessionStart" => vec![
            common::session_started(VENDOR, s(p, "source"), s(p, "model"), cx)
                // A fleet-relevant security posture (yolo!), metadata.
                .meta_opt("permission_mode", s(p, "permission_mode"))
                .text("cwd", s(p, "cwd"))
                .build(),
        ],
        "SessionEnd" => {
            vec![Builder::new("session.ended", cx).meta("reason", session_end_reason(s(p, "reason"))).build()]
        }
        "UserPromptSubmit" => {
            vec![Builder::new("run.started", cx).meta("trigger", "user").text("prompt", ne(p, "prompt")).build()]
        }
        "Stop" => vec![
            Builder::new("run.finished", cx)
                .meta_opt("gen_ai.usage.input_tokens", u(p, "input_tokens"))
                .meta_opt("gen_ai.usage.output_tokens", u(p, "output_tokens"))
                .build(),
        ],
        "StopFailure" => {
            let reason = ne(p, "error").unwrap_or("unknown");
            let mut b = Builder::new("run.failed", cx).meta("reason", reason);
            if let Some(details) = ne(p, "error_details").filter(|_| b.ceiling() >= aep_schemas::Capture::Redacted) {
                b = b.error(reason, Some(details));
            }
            vec![b.build()]
        }
        "PreToolUse" => vec![common::tool_requested(tool(), call(), p.get("tool_input"), cx)],
        "PostToolUse" => vec![common::tool_completed(tool(), call(), p.get("tool_response"), u(p, "duration_ms"), cx)],
        "PostToolUseFailure" => {
            let ty =
                if p.get("is_interrupt").and_then(Value::as_bool) == Some(true) { "interrupt" } else { "tool_error" };
            vec![common::tool_failed(tool(), call(), ty, error_text(p).as_deref(), u(p, "duration_ms"), cx)]
        }
        "PermissionRequest" => vec![common::permission_request(VENDOR, tool(), p.get("tool_input"), cx)],
        "SubagentStart" => vec![
            Builder::new("delegation.subagent.started", cx)
                .meta_opt("agent_type", ne(p, "agent_type"))
                .subject(s(p, "agent_id"))
                .build(),
        ],
        "SubagentStop" => vec![
            Builder::new("delegation.subagent.stopped", cx)
                .meta_opt("agent_type", ne(p, "agent_type"))
                .subject(s(p, "agent_id"))
                .build(),
        ],
        // Paired concept; emitted once at PostCompact (documented deviation).
        "PreCompact" => Vec::new(),
        "PostCompact" => vec![Builder::new("session.compacted", cx).meta_opt("trigger", s(p, "trigger")).build()],
        // Suppressed: the first-class PermissionRequest hook carries this moment.
        "Notification" if s(p, "notification_type") == Some("permission_prompt") => Vec::new(),
        "Notification" => vec![
            Builder::new("progress.status", cx)
                .text("message", ne(p, "message"))
                .subject(ne(p, "notification_type"))
                .build(),
        ],
        // Every todo hook fires in a `validation` phase and again at `postWrite`: the
        // persisted write is the fact, the validation firing is the silent pre-moment.
        "TodoCreated" | "TodoCompleted" if s(p, "phase") == Some("validation") => Vec::new(),
        "TodoCreated" | "TodoCompleted" => {
            let ty = if hook == "TodoCreated" { "progress.task.planned" } else { "progress.task.completed" };
            let mut b = Builder::new(ty, cx).subject(ne(p, "todo_id"));
            if let Some(title) = ne(p, "todo_content").and_then(|t| common::gate_text(t, b.ceiling(), cx)) {
                b = b.meta("task", serde_json::json!({ "title": title }));
            }
            vec![b.build()]
        }
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// The error text of a failure payload (a string, or an object's `message`).
fn error_text(p: &Value) -> Option<String> {
    match p.get("error") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Object(o)) => o.get("message").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

impl HookAdapter for QwenCodeAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// Empty: Qwen Code proceeds with its own flow (fail-open).
    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        NeutralReply::Empty
    }

    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        hook_name(call, "hook_event_name")
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        ne(call.payload, "session_id").map(str::to_owned)
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        let p = call.payload;
        common::object(p)?;
        let hook = self.hook_name(call)?;
        let session = self.session_id(call);
        let sess = session.as_deref();
        let mut out = Vec::new();
        let mut drafts = map_pinned(&hook, p, cx);
        match hook.as_str() {
            // Qwen fires UserPromptSubmit again on every model turn with an empty prompt:
            // inside an open run that is a continuation, not a new run.
            "UserPromptSubmit" if state.current_run.is_some() && ne(p, "prompt").is_none() => {
                drafts = vec![common::vendor_draft(VENDOR, "run.model_turn", cx).build()];
            }
            "UserPromptSubmit" => {
                begin_synth_run(state, sess, &mut drafts, &mut out, cx);
            }
            "Stop" | "StopFailure" => {
                end_run(state, sess, &mut drafts);
            }
            "SessionEnd" => {
                if let Some(stale) = common::close_run(state) {
                    out.push(common::drain_run(&stale, sess, cx));
                }
            }
            _ => {}
        }
        out.extend(drafts);
        common::stamp_identity(&mut out, sess, state.current_run.as_deref());
        common::stamp_time(&mut out, p);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(st: &mut SessionState, p: Value) -> Vec<EventDraft> {
        QwenCodeAdapter.map(&HookCall { event: None, payload: &p }, st, &MapContext::default()).unwrap()
    }

    #[test]
    fn model_turn_refires_continue_the_open_run() {
        let mut st = SessionState::default();
        let a = run(&mut st, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "go"}));
        assert_eq!(a[0].run.as_deref(), Some("r1"));
        let b = run(&mut st, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": ""}));
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].r#type, "x.qwen-code.run.model_turn");
        assert_eq!(b[0].run.as_deref(), Some("r1"));
        let c = run(
            &mut st,
            json!({"hook_event_name": "Stop", "session_id": "s", "timestamp": "2026-11-30T04:04:20.447Z"}),
        );
        assert_eq!(c[0].r#type, "run.finished");
        assert_eq!(c[0].run.as_deref(), Some("r1"));
        assert_eq!(c[0].cause_key, a[0].correlation_key);
        assert_eq!(c[0].time.as_deref(), Some("2026-11-30T04:04:20.447Z"));
        // A new prompt after Stop opens r2.
        let d = run(&mut st, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "again"}));
        assert_eq!(d[0].run.as_deref(), Some("r2"));
    }

    #[test]
    fn interrupt_failure_type() {
        let out = map_pinned(
            "PostToolUseFailure",
            &json!({"tool_name": "Bash", "tool_use_id": "t", "error": "x", "is_interrupt": true}),
            &MapContext::default(),
        );
        assert_eq!(out[0].data["error"]["type"], "interrupt");
        assert!(out[0].data["error"].get("message").is_none());
    }
}
