#![doc = include_str!("README.md")]

pub mod spec;

use serde_json::{Value, json};

use super::hook_family::{self as hf, Moment, unpaired};
use crate::common::{self, Builder, begin_synth_run, end_run, fallback, ne, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "copilot-cli";

/// Scratch bucket of pending tool calls (no call id on any hook): see [`unpaired`].
const PENDING_TOOLS: &str = "copilot_pending_tools";
/// Scratch flag: `session.started` is out for this session.
const STARTED: &str = "copilot_started";

/// The GitHub Copilot CLI hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(CopilotCliAdapter)
}

/// GitHub Copilot CLI hooks in their Claude Code-compatible form (PascalCase events,
/// `hook_event_name`, `session_id`, RFC 3339 `timestamp`): a prompt is a synthesized run,
/// tools pair by name and input digest. The neutral reply is empty: exit 0 with no output is
/// "no decision" to Copilot, so the tool goes on under its own permission rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopilotCliAdapter;

/// The shell result's text (`tool_result.text_result_for_llm`).
fn result_text(p: &Value) -> Option<&str> {
    p.pointer("/tool_result/text_result_for_llm").and_then(Value::as_str)
}

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
            let result = p.get("tool_result");
            match s(p.get("tool_result").unwrap_or(&Value::Null), "result_type") {
                // A tool Copilot itself reports as failed or refused on this hook.
                Some(t @ ("failure" | "error" | "rejected" | "denied")) => {
                    vec![common::tool_failed(tool(), None, t, result_text(p), None, cx)]
                }
                // A shell command exiting non-zero is still `success` to Copilot: the exit
                // code rides as metadata, the call completed.
                _ => {
                    let mut d = common::tool_completed(tool(), None, result, None, cx);
                    if let Some(code) = result_text(p).and_then(hf::trailing_exit_code) {
                        d.data.insert("exit_code".into(), json!(code));
                    }
                    vec![d]
                }
            }
        }
        "PostToolUseFailure" => vec![hf::tool_failure(tool(), None, p, cx)],
        "SubagentStart" => vec![hf::subagent("delegation.subagent.started", p, cx)],
        "SubagentStop" => vec![hf::subagent("delegation.subagent.stopped", p, cx)],
        // The vendor's only compaction moment is the pre one.
        "PreCompact" => vec![hf::compacted(p, cx)],
        "Notification" => vec![hf::status(p, cx)],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// The hook events and payload fields this adapter was written against: the install plan's
/// events and every field of the recorded payloads (`adapters/tests/data/copilot-cli/`).
pub static VOCABULARY: crate::drift::Vocabulary = crate::drift::Vocabulary {
    events: &[
        "Notification",
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PreToolUse",
        "SessionEnd",
        "SessionStart",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "UserPromptSubmit",
    ],
    common: &["cwd", "hook_event_name", "session_id", "timestamp"],
    fields: &[
        ("PostToolUse", &["tool_input", "tool_name", "tool_result"]),
        ("PostToolUseFailure", &["error", "tool_input", "tool_name"]),
        ("PreToolUse", &["tool_input", "tool_name"]),
        ("SessionEnd", &["reason"]),
        ("SessionStart", &["initial_prompt", "source"]),
        ("Stop", &["stop_hook_active", "stop_reason", "transcript_path"]),
        ("UserPromptSubmit", &["prompt"]),
    ],
    version: None,
};

impl HookAdapter for CopilotCliAdapter {
    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn vocabulary(&self) -> Option<&'static crate::drift::Vocabulary> {
        Some(&VOCABULARY)
    }

    /// `hook_event_name`, else the native `hookName` (Copilot sends `PermissionRequest` in its
    /// camelCase form whatever the file's shape).
    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        hf::hook_name(call).or_else(|e| ne(call.payload, "hookName").map(str::to_owned).ok_or(e))
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        hf::session_id(call).or_else(|| ne(call.payload, "sessionId").map(str::to_owned))
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
        let started = state.extra.contains_key(STARTED);
        match m.hook.as_str() {
            // Copilot runs the sessionStart and userPromptSubmitted hooks concurrently: when
            // the prompt arrives first it opened the session, and the late start is kept in
            // the vendor namespace.
            "SessionStart" if started => m.drafts = vec![fallback(VENDOR, "SessionStart", None, cx)],
            "SessionStart" => {
                state.extra.insert(STARTED.into(), json!(true));
            }
            "UserPromptSubmit" => {
                if !started {
                    state.extra.insert(STARTED.into(), json!(true));
                    let opened = common::session_started(VENDOR, s(m.p, "source"), None, cx).build();
                    m.before.push(opened);
                }
                begin_synth_run(state, sess, &mut m.drafts, &mut m.before, cx);
            }
            "Stop" => {
                end_run(state, sess, &mut m.drafts);
            }
            "PreToolUse" => {
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
            "SessionEnd" => m.drain_open_run(state, cx),
            _ => {}
        }
        Ok(m.finish_timed(state))
    }
}

#[cfg(test)]
mod tests;
