#![doc = include_str!("README.md")]

use serde_json::Value;

use crate::common::{self, Builder, begin_synth_run, end_run, fallback, hook_name, ne, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

/// The vendor token.
pub const VENDOR: &str = "vscode";

/// The session a payload without `session_id` lands in (the field is optional here).
pub const UNKNOWN_SESSION: &str = "unknown";

/// The VS Code agent hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(VscodeAdapter)
}

/// VS Code agent hooks (AEP-0002 Annex A.5): the 8-event VSCode-target Preview surface.
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
        "UserPromptSubmit" => {
            vec![Builder::new("run.started", cx).meta("trigger", "user").text("prompt", ne(p, "prompt")).build()]
        }
        "Stop" => vec![Builder::new("run.finished", cx).build()],
        "PreToolUse" => vec![common::tool_requested(tool(), call(), p.get("tool_input"), cx)],
        // Fires on success only: tool.failed has no vendor moment on this surface.
        "PostToolUse" => vec![common::tool_completed(tool(), call(), p.get("tool_response"), None, cx)],
        // Documented deviation: the only compaction moment this surface exposes is the pre one.
        "PreCompact" => vec![Builder::new("session.compacted", cx).meta_opt("trigger", s(p, "trigger")).build()],
        "SubagentStart" => vec![
            Builder::new("delegation.subagent.started", cx)
                .meta_opt("agent_type", ne(p, "agent_type"))
                .subject(s(p, "agent_id"))
                .build(),
        ],
        // stop_hook_active is loop plumbing, not forwarded.
        "SubagentStop" => vec![
            Builder::new("delegation.subagent.stopped", cx)
                .meta_opt("agent_type", ne(p, "agent_type"))
                .subject(s(p, "agent_id"))
                .build(),
        ],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

impl HookAdapter for VscodeAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// Empty: the VS Code agent proceeds with its own approval flow (fail-open).
    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        NeutralReply::Empty
    }

    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        hook_name(call, "hook_event_name")
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
        let p = call.payload;
        common::object(p)?;
        let hook = self.hook_name(call)?;
        let session = self.session_id(call);
        let sess = session.as_deref();
        let mut out = Vec::new();
        let mut drafts = map_pinned(&hook, p, cx);
        match hook.as_str() {
            "UserPromptSubmit" => {
                begin_synth_run(state, sess, &mut drafts, &mut out, cx);
            }
            "Stop" => {
                end_run(state, sess, &mut drafts);
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
