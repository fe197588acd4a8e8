#![doc = include_str!("README.md")]

pub mod otel;
pub mod spec;

use serde_json::Value;

use super::hook_family::{self as hf, Moment};
use crate::common::{self, Builder, begin_synth_run, end_run, fallback, ne, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "vscode";

/// The session a payload without `session_id` lands in (the field is optional here).
pub const UNKNOWN_SESSION: &str = "unknown";

/// The VS Code agent hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(VscodeAdapter)
}

/// VS Code agent hooks (AEP-0002 Annex A.5): the 8-event VSCode-target Preview surface.
/// The neutral reply is the trait's empty one: the VS Code agent proceeds with its own
/// approval flow (fail-open).
#[derive(Debug, Clone, Copy, Default)]
pub struct VscodeAdapter;

/// The stateless per-hook mapping (what `conformance/fixtures/mappings/vscode.json` pins).
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    let call = || s(p, "tool_use_id");
    match hook {
        // transcript_path (workstation-local) and the vendor timestamp never ride as data.
        "SessionStart" => vec![
            common::session_started(VENDOR, s(p, "source"), s(p, "model"), cx)
                .meta_opt("agent_type", ne(p, "agent_type"))
                .text("cwd", s(p, "cwd"))
                .build(),
        ],
        "UserPromptSubmit" => vec![hf::run_started(ne(p, "prompt"), cx)],
        "Stop" => vec![Builder::new("run.finished", cx).build()],
        "PreToolUse" => vec![common::tool_requested(tool(), call(), p.get("tool_input"), cx)],
        // Fires on success only: tool.failed has no vendor moment on this surface.
        "PostToolUse" => vec![common::tool_completed(tool(), call(), p.get("tool_response"), None, cx)],
        // Documented deviation: the only compaction moment this surface exposes is the pre one.
        "PreCompact" => vec![hf::compacted(p, cx)],
        "SubagentStart" => vec![hf::subagent("delegation.subagent.started", p, cx)],
        // stop_hook_active is loop plumbing, not forwarded.
        "SubagentStop" => vec![hf::subagent("delegation.subagent.stopped", p, cx)],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

impl HookAdapter for VscodeAdapter {
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
        let sess = m.session.as_deref();
        match m.hook.as_str() {
            "UserPromptSubmit" => {
                begin_synth_run(state, sess, &mut m.drafts, &mut m.before, cx);
            }
            "Stop" => {
                end_run(state, sess, &mut m.drafts);
            }
            _ => {}
        }
        Ok(m.finish_timed(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_session_lands_in_unknown_and_runs_synthesize() {
        let mut st = SessionState::default();
        let p = json!({"hook_event_name": "UserPromptSubmit", "prompt": "hi"});
        let out = VscodeAdapter.map(&HookCall { event: None, payload: &p }, &mut st, &MapContext::default()).unwrap();
        assert_eq!(out[0].session.as_deref(), Some("unknown"));
        assert_eq!(out[0].run.as_deref(), Some("r1"));
        let p = json!({"hook_event_name": "PostToolUse", "tool_name": "editFile", "tool_use_id": "c", "tool_response": "ok"});
        let out = VscodeAdapter.map(&HookCall { event: None, payload: &p }, &mut st, &MapContext::default()).unwrap();
        assert_eq!(out[0].run.as_deref(), Some("r1"));
        assert_eq!(out[0].cause_key.as_deref(), Some("tool:c"));
    }
}
