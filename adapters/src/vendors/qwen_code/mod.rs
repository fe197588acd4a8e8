#![doc = include_str!("README.md")]

pub mod otel;
pub mod spec;

use serde_json::Value;

use super::hook_family::{self as hf, Moment};
use crate::common::{self, Builder, begin_synth_run, end_run, fallback, ne, s, u};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "qwen-code";

/// `state.extra` keys: the session has been seen (its start emitted, real or synthesized);
/// it was first seen without a `SessionStart`, so the vendor will not end it either.
const SEEN: &str = "qwen_seen";
const HEADLESS: &str = "qwen_headless";

/// The Qwen Code hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(QwenCodeAdapter)
}

/// Qwen Code hooks (AEP-0002 Annex A.4): `session_id` = session, runs synthesized per
/// prompt, tools paired by `tool_use_id`.
/// The neutral reply is the trait's empty one: Qwen Code proceeds with its own flow (fail-open).
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
        "SessionEnd" => vec![hf::session_ended(p, cx)],
        "UserPromptSubmit" => vec![hf::run_started(ne(p, "prompt"), cx)],
        "Stop" => vec![
            Builder::new("run.finished", cx)
                .meta_opt("gen_ai.usage.input_tokens", u(p, "input_tokens"))
                .meta_opt("gen_ai.usage.output_tokens", u(p, "output_tokens"))
                .build(),
        ],
        "StopFailure" => vec![hf::run_failed(p, cx)],
        "PreToolUse" => vec![common::tool_requested(tool(), call(), p.get("tool_input"), cx)],
        "PostToolUse" => vec![common::tool_completed(tool(), call(), p.get("tool_response"), u(p, "duration_ms"), cx)],
        "PostToolUseFailure" => vec![hf::tool_failure(tool(), call(), p, cx)],
        "PermissionRequest" => vec![common::permission_request(VENDOR, tool(), p.get("tool_input"), cx)],
        "SubagentStart" => vec![hf::subagent("delegation.subagent.started", p, cx)],
        "SubagentStop" => vec![hf::subagent("delegation.subagent.stopped", p, cx)],
        // Paired concept; emitted once at PostCompact (documented deviation).
        "PreCompact" => Vec::new(),
        "PostCompact" => vec![hf::compacted(p, cx)],
        // Suppressed: the first-class PermissionRequest hook carries this moment.
        "Notification" if s(p, "notification_type") == Some("permission_prompt") => Vec::new(),
        "Notification" => vec![hf::status(p, cx)],
        // Every todo hook fires in a `validation` phase and again at `postWrite`: the
        // persisted write is the fact, the validation firing is the silent pre-moment.
        "TodoCreated" | "TodoCompleted" if s(p, "phase") == Some("validation") => Vec::new(),
        "TodoCreated" | "TodoCompleted" => {
            let ty = if hook == "TodoCreated" { "progress.task.planned" } else { "progress.task.completed" };
            vec![hf::task(ty, ne(p, "todo_id"), ne(p, "todo_content"), cx)]
        }
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// The hook events and payload fields this adapter was written against: the install plan's
/// events and every field of the recorded payloads (`adapters/tests/data/qwen-code/`: 0.15.10
/// and 0.24.4, which adds `permission_mode` to every hook, `prompt_id`, the model's
/// `tool_call_id` beside `tool_use_id`, and the context figures on `Stop`).
pub static VOCABULARY: crate::drift::Vocabulary = crate::drift::Vocabulary {
    events: &[
        "Notification",
        "PermissionRequest",
        "PostCompact",
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PreToolUse",
        "SessionEnd",
        "SessionStart",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "UserPromptSubmit",
    ],
    common: &["cwd", "hook_event_name", "permission_mode", "session_id", "timestamp", "transcript_path"],
    fields: &[
        ("Notification", &["message", "notification_type", "title"]),
        (
            "PostToolUse",
            &["duration_ms", "prompt_id", "tool_call_id", "tool_input", "tool_name", "tool_response", "tool_use_id"],
        ),
        (
            "PostToolUseFailure",
            &[
                "duration_ms",
                "error",
                "is_interrupt",
                "prompt_id",
                "tool_call_id",
                "tool_input",
                "tool_name",
                "tool_use_id",
            ],
        ),
        ("PreToolUse", &["prompt_id", "tool_call_id", "tool_input", "tool_name", "tool_use_id"]),
        ("SessionStart", &["model", "source"]),
        (
            "Stop",
            &[
                "background_tasks",
                "context_limit",
                "context_usage",
                "crons",
                "input_tokens",
                "last_assistant_message",
                "prompt_id",
                "stop_hook_active",
            ],
        ),
        ("UserPromptSubmit", &["prompt", "prompt_id", "submitted_prompt"]),
    ],
    version: None,
};

impl HookAdapter for QwenCodeAdapter {
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
        // Headless Qwen (`-p`) fires no SessionStart: the session starts on first sight, as
        // Annex A.11 does for Antigravity, with only what this payload says.
        if state.extra.insert(SEEN.into(), Value::Bool(true)).is_none() && m.hook != "SessionStart" {
            state.extra.insert(HEADLESS.into(), Value::Bool(true));
            let start = common::session_started(VENDOR, None, None, cx)
                .meta_opt("permission_mode", s(m.p, "permission_mode"))
                .text("cwd", s(m.p, "cwd"))
                .build();
            m.before.push(start);
        }
        match m.hook.as_str() {
            // Qwen fires UserPromptSubmit again on every model turn with an empty prompt:
            // inside an open run that is a continuation, not a new run.
            "UserPromptSubmit" if state.current_run.is_some() && ne(m.p, "prompt").is_none() => {
                m.drafts = vec![common::vendor_draft(VENDOR, "run.model_turn", cx).build()];
            }
            "UserPromptSubmit" => {
                begin_synth_run(state, sess, &mut m.drafts, &mut m.before, cx);
            }
            "Stop" | "StopFailure" => {
                end_run(state, sess, &mut m.drafts);
            }
            "SessionEnd" => {
                m.drain_open_run(state, cx);
                // The vendor ended it: nothing to close when idle; a later hook is a first sight.
                state.extra.remove(SEEN);
                state.extra.remove(HEADLESS);
            }
            _ => {}
        }
        Ok(m.finish_timed(state))
    }

    /// A headless session never fires SessionEnd: once idle it ends as `timeout` (the
    /// AEP-0002 §5 reason for an end the emitter inferred, never `normal`), with the runs it
    /// had. A run still open gets no terminal: how it ended is unknown (zero terminals is
    /// legal, AEP-0002 §2 convention 5). Once per session: the flag is taken.
    fn close_idle(&self, session: &str, state: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
        if state.extra.remove(HEADLESS).is_none() {
            return Vec::new();
        }
        state.extra.remove(SEEN);
        let mut d =
            Builder::new("session.ended", cx).meta("reason", "timeout").meta("runs", state.runs_synthesized).build();
        d.session = Some(session.to_owned());
        vec![d]
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
        assert_eq!(a[0].r#type, "session.started", "first sight");
        assert_eq!(a[1].run.as_deref(), Some("r1"));
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
        assert_eq!(c[0].cause_key, a[1].correlation_key);
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
