#![doc = include_str!("README.md")]

pub mod spec;

use serde_json::{Value, json};

use super::hook_family::{self as hf, Moment, unpaired};
use crate::common::{self, Builder, end_run, fallback, ne, open_synth_run, run_key, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "droid";

/// Scratch bucket of pending tool calls (no call id on the hooks): see [`unpaired`].
const PENDING_TOOLS: &str = "droid_pending_tools";

/// The Factory Droid hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(DroidAdapter)
}

/// Factory Droid hooks (Claude Code's contract: `hook_event_name`, `session_id`,
/// `tool_name`/`tool_input`): a prompt, or in `droid exec` the first tool of the turn, opens a
/// synthesized run that `Stop` closes; tools pair by name and input digest. The neutral reply
/// is empty (no decision).
#[derive(Debug, Clone, Copy, Default)]
pub struct DroidAdapter;

/// The stateless per-hook mapping: type, data and subject of each hook at the ceilings of `cx`.
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    match hook {
        "SessionStart" => {
            vec![common::session_started(VENDOR, s(p, "source"), None, cx).text("cwd", s(p, "cwd")).build()]
        }
        "SessionEnd" => vec![hf::session_ended(p, cx)],
        "UserPromptSubmit" => vec![hf::run_started(ne(p, "prompt"), cx)],
        "Stop" => vec![Builder::new("run.finished", cx).build()],
        "PreToolUse" => vec![common::tool_requested(tool(), None, p.get("tool_input"), cx)],
        "PostToolUse" => {
            let result = p.get("tool_response");
            let mut d = common::tool_completed(tool(), None, result, None, cx);
            if let Some(code) = result.and_then(Value::as_str).and_then(hf::trailing_exit_code) {
                d.data.insert("exit_code".into(), json!(code));
            }
            vec![d]
        }
        "PostToolUseFailure" => vec![hf::tool_failure(tool(), None, p, cx)],
        "SubagentStart" => vec![hf::subagent("delegation.subagent.started", p, cx)],
        "SubagentStop" => vec![hf::subagent("delegation.subagent.stopped", p, cx)],
        "PreCompact" => vec![hf::compacted(p, cx)],
        "Notification" => vec![hf::status(p, cx)],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// A run for a turn Droid opened without a prompt hook (`droid exec` fires none): `run.started`
/// (`trigger: user`, the exec prompt being the user's) pushed to `before`.
fn ensure_run(state: &mut SessionState, session: Option<&str>, before: &mut Vec<EventDraft>, cx: &MapContext) {
    if state.current_run.is_some() {
        return;
    }
    let (id, _) = open_synth_run(state);
    let mut d = Builder::new("run.started", cx).meta("trigger", "user").build();
    d.run = Some(id.clone());
    d.correlation_key = Some(run_key(session, &id));
    before.push(d);
}

/// Every call still pending when the turn ends: Droid fires no PostToolUse (nor
/// PostToolUseFailure) for a tool that failed, so each ends `tool.failed` here.
fn close_unreported(state: &mut SessionState, out: &mut Vec<EventDraft>, cx: &MapContext) {
    let run = state.current_run.clone();
    for (tool, key) in unpaired::drain(state, PENDING_TOOLS) {
        let mut d = common::tool_failed(&tool, None, "unreported", None, None, cx);
        d.cause_key = Some(key);
        d.run = run.clone();
        out.push(d);
    }
}

/// The hook events and payload fields this adapter was written against: the install plan's
/// events and every field of the recorded payloads (`adapters/tests/data/droid/`).
pub static VOCABULARY: crate::drift::Vocabulary = crate::drift::Vocabulary {
    events: &[
        "Notification",
        "PostToolUse",
        "PreCompact",
        "PreToolUse",
        "SessionEnd",
        "SessionStart",
        "Stop",
        "SubagentStop",
        "UserPromptSubmit",
    ],
    common: &["cwd", "hook_event_name", "permission_mode", "session_id", "transcript_path"],
    fields: &[
        ("PostToolUse", &["tool_input", "tool_name", "tool_response"]),
        ("PreToolUse", &["tool_input", "tool_name"]),
        ("SessionEnd", &["message_count", "message_id", "reason", "session_duration_ms"]),
        ("SessionStart", &["CLAUDE_ENV_FILE", "source"]),
        ("Stop", &["elapsed_time", "message_id", "stop_hook_active", "tool_execution_count"]),
    ],
    version: None,
};

impl HookAdapter for DroidAdapter {
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
        let tool = ne(m.p, "tool_name").unwrap_or("unknown");
        match m.hook.as_str() {
            "UserPromptSubmit" => {
                common::begin_synth_run(state, sess, &mut m.drafts, &mut m.before, cx);
            }
            "PreToolUse" => {
                ensure_run(state, sess, &mut m.before, cx);
                let key = unpaired::push(state, PENDING_TOOLS, tool, m.p.get("tool_input"));
                for d in &mut m.drafts {
                    d.correlation_key = Some(key.clone());
                }
            }
            "PostToolUse" | "PostToolUseFailure" => {
                if let Some(key) = unpaired::take(state, PENDING_TOOLS, tool, m.p.get("tool_input")) {
                    for d in &mut m.drafts {
                        d.cause_key = Some(key.clone());
                    }
                }
            }
            "Stop" => {
                ensure_run(state, sess, &mut m.before, cx);
                close_unreported(state, &mut m.before, cx);
                end_run(state, sess, &mut m.drafts);
            }
            "SessionEnd" => {
                close_unreported(state, &mut m.before, cx);
                m.drain_open_run(state, cx);
            }
            _ => {}
        }
        Ok(m.finish(state))
    }
}

#[cfg(test)]
mod tests;
