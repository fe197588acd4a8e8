#![doc = include_str!("README.md")]

pub mod forms;
pub mod otel;
pub mod spec;
pub mod transcript;

use aep_schemas::Severity;
use serde_json::{Value, json};

use super::hook_family::{self as hf, Moment};
use crate::common::{self, Builder, end_run, fallback, ne, open_vendor_run, run_key, s, u};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "claude-code";

/// Scratch bucket of pending MCP elicitations, keyed by server name.
const PENDING_ELICITATIONS: &str = "cc_pending_elicitations";
/// Scratch bucket: the run each running subagent (by `agent_id`) was started in.
const SUBAGENT_RUNS: &str = "cc_subagent_runs";

/// The Claude Code hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(ClaudeCodeAdapter)
}

/// Claude Code hooks (AEP-0002 Annex A.1): `session_id` = session, a prompt (turn) = run.
/// The neutral reply is the trait's empty one: Claude Code then applies its own permission /
/// question dialog (fail-open).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeCodeAdapter;

/// The elicitation's requested schema (`requested_schema` on the hook, `requestedSchema` in MCP).
fn requested_schema(p: &Value) -> Option<&Value> {
    p.get("requested_schema").or_else(|| p.get("requestedSchema"))
}

/// Most of Claude Code's `permission_suggestions` a card offers.
const MAX_SUGGESTIONS: usize = 4;

/// The option id answering a PermissionRequest with its `n`-th (1-based) permission
/// suggestion: allow, and apply the suggestion (`updatedPermissions`, see [`spec`]).
pub fn suggestion_option(n: usize) -> String {
    format!("always-{n}")
}

/// A PermissionRequest as an answerable permission card: allow and deny, then one option per
/// "always allow"-style suggestion Claude Code sends (`permission_suggestions`: a rule to add,
/// a mode to switch to, directories to add), id [`suggestion_option`], its label saying
/// what answering with it does (a rule's content and a directory's path only at
/// `redacted`+: the `options[].label` `[metadata*]` exception, AEP-0006).
fn permission_request(tool: &str, p: &Value, cx: &MapContext) -> EventDraft {
    let mut d = common::permission_request(VENDOR, tool, p.get("tool_input"), cx);
    let ceiling = d.capture;
    if let Some(Value::Array(options)) = d.data.get_mut("options") {
        let suggestions = p.get("permission_suggestions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        for (i, s) in suggestions.iter().enumerate() {
            if options.len() >= 2 + MAX_SUGGESTIONS {
                break;
            }
            if let Some(label) = suggestion_label(s, ceiling, cx) {
                options.push(json!({"id": suggestion_option(i + 1), "label": label}));
            }
        }
    }
    d
}

/// What answering with permission suggestion `s` does, in words; `None` for a kind a card
/// does not offer (only what grants: allow rules, a mode, working directories).
fn suggestion_label(s: &Value, ceiling: aep_schemas::Capture, cx: &MapContext) -> Option<String> {
    let dest = match s.get("destination").and_then(Value::as_str)? {
        "session" => "for this session",
        "localSettings" => "in local settings",
        "projectSettings" => "in project settings",
        "userSettings" => "in user settings",
        _ => return None,
    };
    match s.get("type").and_then(Value::as_str)? {
        "addRules" if s.get("behavior").and_then(Value::as_str) == Some("allow") => {
            let rules: Vec<String> = s
                .get("rules")?
                .as_array()?
                .iter()
                .filter_map(|r| {
                    let tool = r.get("toolName")?.as_str()?;
                    let content = r.get("ruleContent").and_then(Value::as_str);
                    Some(match content.map(|c| common::gate_text(c, ceiling, cx)) {
                        None => tool.to_owned(),
                        Some(Some(c)) => format!("{tool}({c})"),
                        Some(None) => format!("{tool}(…)"),
                    })
                })
                .collect();
            (!rules.is_empty()).then(|| format!("Allow, and always allow {} {dest}", rules.join(", ")))
        }
        "setMode" => {
            let mode = s.get("mode")?.as_str()?;
            // The mode is one of Claude Code's enum values: structural, never content.
            matches!(mode, "default" | "auto" | "acceptEdits" | "dontAsk" | "bypassPermissions" | "plan" | "manual")
                .then(|| format!("Allow, and switch to {mode} mode {dest}"))
        }
        "addDirectories" => {
            let dirs: Vec<&str> = s.get("directories")?.as_array()?.iter().filter_map(Value::as_str).collect();
            let shown: Vec<String> = dirs.iter().filter_map(|d| common::gate_text(d, ceiling, cx)).collect();
            match (dirs.len(), shown.is_empty()) {
                (0, _) => None,
                (n, true) => {
                    Some(format!("Allow, and add {n} working director{} {dest}", if n == 1 { "y" } else { "ies" }))
                }
                (1, false) => Some(format!("Allow, and add {} as a working directory {dest}", shown[0])),
                (_, false) => Some(format!("Allow, and add {} as working directories {dest}", shown.join(", "))),
            }
        }
        _ => None,
    }
}

/// The stateless per-hook mapping: type, data and subject of each hook at the ceilings of
/// `cx`. Run identity, cause links and the elicitation settle are added by [`ClaudeCodeAdapter`].
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    let call = || s(p, "tool_use_id");
    match hook {
        // A `compact` SessionStart re-fires inside the live session after compaction: the
        // compaction is carried by session.compacted, so this is no new session.
        "SessionStart" if s(p, "source") == Some("compact") => vec![fallback(VENDOR, hook, None, cx)],
        "SessionStart" => {
            vec![common::session_started(VENDOR, s(p, "source"), s(p, "model"), cx).text("cwd", s(p, "cwd")).build()]
        }
        "SessionEnd" => vec![hf::session_ended(p, cx)],
        "UserPromptSubmit" => vec![hf::run_started(ne(p, "prompt"), cx)],
        "Stop" => vec![Builder::new("run.finished", cx).build()],
        "StopFailure" => vec![hf::run_failed(p, cx)],
        "PreToolUse" => vec![common::tool_requested(tool(), call(), p.get("tool_input"), cx)],
        "PostToolUse" => vec![common::tool_completed(tool(), call(), p.get("tool_response"), u(p, "duration_ms"), cx)],
        "PostToolUseFailure" => vec![hf::tool_failure(tool(), call(), p, cx)],
        // The agent asking the human is a form, not a permission gate (AEP-0006 deviation).
        "PermissionRequest" if tool() == "AskUserQuestion" => vec![forms::ask_user_question(p.get("tool_input"), cx)],
        "PermissionRequest" => vec![permission_request(tool(), p, cx)],
        // The auto-mode classifier or a permission rule blocked the call.
        "PermissionDenied" => {
            let mut d = Builder::new("tool.denied", cx).tool(tool(), call()).meta("by", "policy").build();
            d.cause_key = call().map(common::tool_key);
            vec![d]
        }
        // Deduped against the first-class PermissionRequest / Elicitation hooks.
        "Notification" if matches!(s(p, "notification_type"), Some("permission_prompt" | "elicitation_dialog")) => {
            Vec::new()
        }
        "Notification" => vec![hf::status(p, cx)],
        "SubagentStart" => vec![hf::subagent("delegation.subagent.started", p, cx)],
        "SubagentStop" => vec![hf::subagent("delegation.subagent.stopped", p, cx)],
        // Paired concept; emitted once at PostCompact (documented deviation).
        "PreCompact" => Vec::new(),
        "PostCompact" => vec![hf::compacted(p, cx)],
        "TaskCreated" | "TaskCompleted" => {
            let ty = if hook == "TaskCreated" { "progress.task.planned" } else { "progress.task.completed" };
            vec![hf::task(ty, ne(p, "task_id"), ne(p, "task_subject"), cx)]
        }
        // Agent-scoped: no session on agent.*.
        "TeammateIdle" => vec![Builder::new("agent.idle", cx).subject(ne(p, "teammate_name")).build()],
        "Elicitation" => {
            vec![forms::elicitation(ne(p, "message"), requested_schema(p), ne(p, "mcp_server_name"), cx)]
        }
        // Settled against the pending request by the adapter; nothing on its own.
        "ElicitationResult" => Vec::new(),
        // Mid-turn streaming fails the fleet-observer test: vendor namespace, debug.
        "MessageDisplay" => {
            let mut d = fallback(VENDOR, hook, None, cx);
            d.severity = Some(Severity::Debug);
            vec![d]
        }
        // InstructionsLoaded, PostToolBatch, CwdChanged, FileChanged, WorktreeCreate,
        // WorktreeRemove, ConfigChange, Setup and any future hook: no core equivalent.
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// The settle of a pending elicitation by its `ElicitationResult` (the parallel-surface
/// case: the answer came from Claude Code's own dialog, so `via: oob`).
fn settle_elicitation(p: &Value, pending: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let key = pending.get("key").and_then(Value::as_str).map(str::to_owned);
    let resolved = |resolution: &str| {
        let mut d = Builder::new("attention.resolved", cx).meta("resolution", resolution).build();
        d.cause_key = key.clone();
        d
    };
    match s(p, "action") {
        Some("accept") => {
            let b = Builder::new("attention.answered", cx);
            let structural: Vec<String> = pending
                .get("structural")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            let empty = serde_json::Map::new();
            let content = p.get("content").and_then(Value::as_object).unwrap_or(&empty);
            let values = forms::gate_values(content, &structural, b.ceiling(), cx);
            let mut answered = b.meta("answer", json!({ "values": values })).meta("via", "oob").build();
            answered.cause_key = key.clone();
            vec![answered, resolved("answered")]
        }
        Some("decline") => {
            let mut answered = Builder::new("attention.answered", cx)
                .meta("answer", json!({ "option": "decline" }))
                .meta("via", "oob")
                .build();
            answered.cause_key = key.clone();
            vec![answered, resolved("answered")]
        }
        _ => vec![resolved("dismissed")],
    }
}

/// The hook events and payload fields this adapter was written against: the install plan's
/// events and every field of the recorded payloads (`adapters/tests/data/claude-code/`).
pub static VOCABULARY: crate::drift::Vocabulary = crate::drift::Vocabulary {
    events: &[
        "ConfigChange",
        "CwdChanged",
        "Elicitation",
        "ElicitationResult",
        "FileChanged",
        "InstructionsLoaded",
        "MessageDisplay",
        "Notification",
        "PermissionDenied",
        "PermissionRequest",
        "PostCompact",
        "PostToolBatch",
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PreToolUse",
        "SessionEnd",
        "SessionStart",
        "Setup",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "TaskCompleted",
        "TaskCreated",
        "TeammateIdle",
        "UserPromptExpansion",
        "UserPromptSubmit",
        "WorktreeCreate",
        "WorktreeRemove",
    ],
    common: &["cwd", "hook_event_name", "session_id", "transcript_path"],
    fields: &[
        ("Elicitation", &["mcp_server_name", "message", "mode", "prompt_id", "requested_schema"]),
        ("ElicitationResult", &["action", "mcp_server_name", "mode", "prompt_id"]),
        ("FileChanged", &["event", "file_path", "prompt_id"]),
        ("InstructionsLoaded", &["file_path", "load_reason", "memory_type"]),
        ("MessageDisplay", &["delta", "final", "index", "message_id", "prompt_id", "turn_id"]),
        ("Notification", &["message", "notification_type", "prompt_id"]),
        (
            "PermissionDenied",
            &["effort", "permission_mode", "prompt_id", "reason", "tool_input", "tool_name", "tool_use_id"],
        ),
        (
            "PermissionRequest",
            &["effort", "permission_mode", "permission_suggestions", "prompt_id", "tool_input", "tool_name"],
        ),
        ("PostCompact", &["compact_summary", "prompt_id", "trigger"]),
        ("PostToolBatch", &["effort", "permission_mode", "prompt_id", "tool_calls"]),
        (
            "PostToolUse",
            &[
                "duration_ms",
                "effort",
                "permission_mode",
                "prompt_id",
                "tool_input",
                "tool_name",
                "tool_response",
                "tool_use_id",
            ],
        ),
        (
            "PostToolUseFailure",
            &[
                "duration_ms",
                "effort",
                "error",
                "is_interrupt",
                "permission_mode",
                "prompt_id",
                "tool_input",
                "tool_name",
                "tool_use_id",
            ],
        ),
        ("PreCompact", &["custom_instructions", "prompt_id", "trigger"]),
        ("PreToolUse", &["effort", "permission_mode", "prompt_id", "tool_input", "tool_name", "tool_use_id"]),
        ("SessionEnd", &["prompt_id", "reason"]),
        ("SessionStart", &["model", "prompt_id", "source"]),
        (
            "Stop",
            &[
                "background_tasks",
                "effort",
                "last_assistant_message",
                "permission_mode",
                "prompt_id",
                "session_crons",
                "stop_hook_active",
            ],
        ),
        ("StopFailure", &["effort", "error", "last_assistant_message", "prompt_id"]),
        (
            "SubagentStop",
            &[
                "agent_id",
                "agent_transcript_path",
                "agent_type",
                "background_tasks",
                "effort",
                "last_assistant_message",
                "permission_mode",
                "prompt_id",
                "session_crons",
                "stop_hook_active",
            ],
        ),
        ("TaskCompleted", &["prompt_id", "task_description", "task_id", "task_subject"]),
        ("TaskCreated", &["prompt_id", "task_description", "task_id", "task_subject"]),
        ("UserPromptSubmit", &["permission_mode", "prompt", "prompt_id"]),
    ],
    version: None,
};

/// A prompt Claude Code wrote itself to hand a background task's result (an async subagent's)
/// to the model: `<task-notification><task-id>...` (2.1.3xx).
fn task_notification(p: &Value) -> bool {
    ne(p, "prompt").is_some_and(|t| t.trim_start().starts_with("<task-notification>"))
}

impl HookAdapter for ClaudeCodeAdapter {
    fn history(&self) -> Option<&'static crate::history::HistorySpec> {
        Some(&transcript::HISTORY)
    }

    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn vocabulary(&self) -> Option<&'static crate::drift::Vocabulary> {
        Some(&VOCABULARY)
    }

    /// GitHub Copilot CLI also runs a project's `.claude/settings.json` hooks, Claude Code's
    /// shape, with `COPILOT_CLI=1` in their environment: those calls are Copilot's sessions
    /// (wired on their own by `install copilot-cli`), not Claude Code's. Claude Code names its
    /// own session in `CLAUDE_CODE_SESSION_ID` (2.1.3xx) and sets `CLAUDECODE=1`, so a Claude
    /// Code started from inside a Copilot session (the variable inherited) stays Claude Code's.
    fn ran_by_other(&self, call: &HookCall<'_>, env: &dyn Fn(&str) -> Option<String>) -> Option<&'static str> {
        if env("COPILOT_CLI").as_deref() != Some("1") {
            return None;
        }
        let ours = match env("CLAUDE_CODE_SESSION_ID") {
            Some(own) => hf::session_id(call).is_some_and(|s| s == own),
            None => env("CLAUDECODE").as_deref() == Some("1"),
        };
        (!ours).then_some(crate::vendors::copilot_cli::VENDOR)
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
            // The open turn submitting again (a background task's notification folded into
            // it, see below): a continuation of the run, not a second start of it.
            "UserPromptSubmit"
                if ne(p, "prompt_id").is_some() && state.current_run.as_deref() == ne(p, "prompt_id") =>
            {
                let by = if task_notification(p) { "task_notification" } else { "prompt" };
                let mut d = common::vendor_draft(VENDOR, "run.continued", cx).meta("by", by).build();
                d.run = state.current_run.clone();
                m.drafts = vec![d];
            }
            "UserPromptSubmit" => {
                // Claude Code 2.1.3xx runs subagents in the background and hands their result
                // to the model as a prompt of its own: a run the agent started, not the user.
                if task_notification(p) {
                    for d in m.drafts.iter_mut().filter(|d| d.r#type == "run.started") {
                        d.data.insert("trigger".into(), json!("agent"));
                    }
                }
                // CC turn = AEP run: the vendor's prompt_id names it; synthesized without one.
                let run = match ne(p, "prompt_id") {
                    Some(id) => {
                        if let Some(stale) = open_vendor_run(state, id) {
                            m.before.push(common::drain_run(&stale, sess, cx));
                        }
                        id.to_owned()
                    }
                    None => common::begin_synth_run(state, sess, &mut [], &mut m.before, cx),
                };
                for d in &mut m.drafts {
                    d.run = Some(run.clone());
                    d.correlation_key = Some(run_key(sess, &run));
                }
            }
            // A background subagent (2.1.3xx) may stop after the turn that started it ended:
            // its stop belongs to the run its start was in, so the delegation closes there.
            "SubagentStart" => {
                if let (Some(id), Some(run)) = (ne(p, "agent_id"), state.current_run.clone()) {
                    common::remember(state, SUBAGENT_RUNS, id, json!(run));
                }
            }
            "SubagentStop" => {
                let started_in = ne(p, "agent_id").and_then(|id| common::take(state, SUBAGENT_RUNS, id));
                if let Some(run) = started_in.as_ref().and_then(Value::as_str) {
                    for d in &mut m.drafts {
                        d.run = Some(run.to_owned());
                    }
                }
            }
            "Stop" | "StopFailure" => {
                end_run(state, sess, &mut m.drafts);
            }
            "SessionEnd" => m.drain_open_run(state, cx),
            "Elicitation" => {
                let server = ne(p, "mcp_server_name").unwrap_or("");
                let key = common::attention_key(&format!("elicitation:{server}"));
                for d in &mut m.drafts {
                    d.correlation_key = Some(key.clone());
                }
                let structural = forms::structural_fields(requested_schema(p));
                common::remember(state, PENDING_ELICITATIONS, server, json!({ "key": key, "structural": structural }));
            }
            "ElicitationResult" => {
                // An orphan result (no pending request) emits nothing: one terminal per request.
                let server = ne(p, "mcp_server_name").unwrap_or("");
                if let Some(pending) = common::take(state, PENDING_ELICITATIONS, server) {
                    m.drafts = settle_elicitation(p, &pending, cx);
                }
            }
            _ => {}
        }
        Ok(m.finish(state))
    }
}
