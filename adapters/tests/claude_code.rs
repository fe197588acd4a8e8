//! Claude Code: golden cases for the hooks the Annex A fixture does not pin (expected
//! outputs written from the seed table and the spec), and every captured real payload.

mod common;

use aep_adapters::vendors::claude_code;
use aep_adapters::{EventDraft, HookCall, MapContext, SessionState};
use aep_schemas::Capture;
use serde_json::{Value, json};

use common::{all_at, check_postures, core, load, replay, types};

/// The core types beyond `common::LIFECYCLE` this vendor maps onto.
const MORE_CORE: &[&str] = &[
    "run.failed",
    "tool.failed",
    "tool.denied",
    "attention.requested",
    "attention.answered",
    "attention.resolved",
    "delegation.subagent.started",
    "delegation.subagent.stopped",
    "progress.status",
    "progress.task.planned",
    "progress.task.completed",
    "agent.idle",
];

const CAPTURES: &[&str] = &[
    include_str!("data/claude-code/i01_interactive_permission.jsonl"),
    include_str!("data/claude-code/o_http_protobuf.jsonl"),
    include_str!("data/claude-code/p_auto.jsonl"),
    include_str!("data/claude-code/p_default.jsonl"),
    include_str!("data/claude-code/s01_tools_bypass_json.jsonl"),
    include_str!("data/claude-code/s02_parallel_batch.jsonl"),
    include_str!("data/claude-code/s04_tasks.jsonl"),
    include_str!("data/claude-code/s06_api_error_400.jsonl"),
    include_str!("data/claude-code/s09_compact_resume.jsonl"),
    include_str!("data/claude-code/s14_mcp_elicitation.jsonl"),
    include_str!("data/claude-code/s15_2.1.332_async_agent.jsonl"),
    include_str!("data/claude-code/s16_2.1.337_e2e_session.jsonl"),
];

fn one(p: Value, cx: &MapContext) -> Vec<EventDraft> {
    claude_code::adapter().map(&HookCall { event: None, payload: &p }, &mut SessionState::default(), cx).unwrap()
}

/// `{type, data, subject?}` of a single draft.
fn pin(d: &EventDraft) -> Value {
    let mut v = json!({ "type": d.r#type, "data": Value::Object(d.data.clone()) });
    if let Some(s) = &d.subject {
        v["subject"] = json!(s);
    }
    v
}

fn golden(p: Value, expected: Value) {
    let out = one(p.clone(), &MapContext::default());
    let got: Vec<Value> = out.iter().map(pin).collect();
    let want = match expected {
        Value::Null => vec![],
        Value::Array(a) => a,
        one => vec![one],
    };
    assert_eq!(got, want, "for {p}");
}

#[test]
fn golden_session_and_run_hooks() {
    golden(
        json!({"hook_event_name": "SessionStart", "session_id": "s", "source": "startup", "model": "claude-opus-4-7", "cwd": "/home/u/p"}),
        json!({"type": "session.started", "data": {"client": {"name": "claude-code"}, "trigger": "startup", "gen_ai.request.model": "claude-opus-4-7"}}),
    );
    golden(
        json!({"hook_event_name": "SessionStart", "session_id": "s", "source": "compact"}),
        json!({"type": "x.claude-code.session.session_start", "data": {}}),
    );
    golden(
        json!({"hook_event_name": "SessionEnd", "session_id": "s", "reason": "prompt_input_exit"}),
        json!({"type": "session.ended", "data": {"reason": "normal"}}),
    );
    golden(
        json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": "p1", "prompt": "fix it"}),
        json!({"type": "run.started", "data": {"trigger": "user"}}),
    );
    golden(
        json!({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": "done"}),
        json!({"type": "run.finished", "data": {}}),
    );
    golden(
        json!({"hook_event_name": "StopFailure", "session_id": "s", "error": "rate_limit", "error_details": "retry later"}),
        json!({"type": "run.failed", "data": {"reason": "rate_limit"}}),
    );
    golden(json!({"hook_event_name": "PreCompact", "session_id": "s", "trigger": "manual"}), Value::Null);
    golden(
        json!({"hook_event_name": "PostCompact", "session_id": "s", "trigger": "manual", "compact_summary": "squeezed"}),
        json!({"type": "session.compacted", "data": {"trigger": "manual"}}),
    );
}

#[test]
fn golden_tool_hooks() {
    golden(
        json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "ls -la"}}),
        json!({"type": "tool.requested", "subject": "Bash", "data": {"tool": {"name": "Bash", "call_id": "t1"}, "args_digest": "1df8bccaec747dc615b50678f35bf5b5"}}),
    );
    golden(
        json!({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash", "tool_use_id": "t1", "tool_response": {"output": "total 0", "exit_code": 0}, "duration_ms": 12}),
        json!({"type": "tool.completed", "subject": "Bash", "data": {"tool": {"name": "Bash", "call_id": "t1"}, "duration_ms": 12, "result_digest": "23b8f930346a70ec5e43f5c98cc78c5e"}}),
    );
    golden(
        json!({"hook_event_name": "PostToolUseFailure", "session_id": "s", "tool_name": "Bash", "tool_use_id": "t2", "error": "Exit code 2", "is_interrupt": false}),
        json!({"type": "tool.failed", "subject": "Bash", "data": {"tool": {"name": "Bash", "call_id": "t2"}, "error": {"type": "tool_error"}}}),
    );
    golden(
        json!({"hook_event_name": "PermissionDenied", "session_id": "s", "tool_name": "Bash", "tool_use_id": "t3", "reason": "blocked"}),
        json!({"type": "tool.denied", "subject": "Bash", "data": {"tool": {"name": "Bash", "call_id": "t3"}, "by": "policy"}}),
    );
    golden(
        json!({"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": "rm -rf build", "description": "clean"}}),
        json!({"type": "attention.requested", "subject": "Bash", "data": {
            "kind": "permission", "prompt": "Permission requested: Bash — rm -rf build (clean)",
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}], "respond_via": ["control"]}}),
    );
}

/// The recorded PermissionRequests' `permission_suggestions` become options after allow and
/// deny; a rule's content names itself only at `redacted`+ (the label exception, AEP-0006).
#[test]
fn permission_suggestions_are_options_labelled_by_what_they_grant() {
    let requests: Vec<Value> =
        load(CAPTURES[0]).into_iter().filter(|(hook, _)| hook == "PermissionRequest").map(|(_, p)| p).collect();
    let options = |p: &Value, c: Capture| -> Value {
        let cx = MapContext { capture: c, attention_capture: c, ..MapContext::default() };
        one(p.clone(), &cx)[0].data["options"].clone()
    };
    assert_eq!(
        options(&requests[0], Capture::Redacted),
        json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"},
            {"id": "always-1", "label": "Allow, and always allow Bash(python3 -c 'print(6*7)') in local settings"}])
    );
    assert_eq!(
        options(&requests[0], Capture::Metadata)[2]["label"],
        "Allow, and always allow Bash(…) in local settings"
    );
    assert_eq!(
        options(&requests[1], Capture::Metadata)[2],
        json!({"id": "always-1", "label": "Allow, and switch to acceptEdits mode for this session"})
    );
    // What grants nothing, or names no known destination, is not offered.
    let odd = json!({"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash", "tool_input": {},
        "permission_suggestions": [{"type": "removeRules", "rules": [], "behavior": "allow", "destination": "session"},
            {"type": "setMode", "mode": "acceptEdits", "destination": "elsewhere"},
            {"type": "addDirectories", "directories": ["/srv/a"], "destination": "session"}]});
    assert_eq!(
        options(&odd, Capture::Metadata).as_array().unwrap()[2..],
        [json!({"id": "always-3", "label": "Allow, and add 1 working directory for this session"})]
    );
    assert_eq!(
        options(&odd, Capture::Redacted)[2]["label"],
        "Allow, and add /srv/a as a working directory for this session"
    );
}

#[test]
fn golden_notification_delegation_task_and_fallbacks() {
    golden(
        json!({"hook_event_name": "Notification", "session_id": "s", "notification_type": "permission_prompt", "message": "x"}),
        Value::Null,
    );
    golden(
        json!({"hook_event_name": "Notification", "session_id": "s", "notification_type": "idle_prompt", "message": "waiting"}),
        json!({"type": "progress.status", "subject": "idle_prompt", "data": {}}),
    );
    golden(
        json!({"hook_event_name": "SubagentStart", "session_id": "s", "agent_id": "a1", "agent_type": "Explore"}),
        json!({"type": "delegation.subagent.started", "subject": "a1", "data": {"agent_type": "Explore"}}),
    );
    golden(
        json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a1", "agent_type": ""}),
        json!({"type": "delegation.subagent.stopped", "subject": "a1", "data": {}}),
    );
    golden(
        json!({"hook_event_name": "TaskCreated", "session_id": "s", "task_id": "1", "task_subject": "Write test"}),
        json!({"type": "progress.task.planned", "subject": "1", "data": {}}),
    );
    golden(
        json!({"hook_event_name": "TaskCompleted", "session_id": "s", "task_id": "1", "task_subject": "Write test"}),
        json!({"type": "progress.task.completed", "subject": "1", "data": {}}),
    );
    golden(
        json!({"hook_event_name": "TeammateIdle", "session_id": "s", "teammate_name": "ana"}),
        json!({"type": "agent.idle", "subject": "ana", "data": {}}),
    );
    for (hook, tail) in [
        ("InstructionsLoaded", "instructions_loaded"),
        ("PostToolBatch", "post_tool_batch"),
        ("MessageDisplay", "message_display"),
        ("CwdChanged", "cwd_changed"),
        ("FileChanged", "file_changed"),
        ("WorktreeCreate", "worktree_create"),
        ("Setup", "setup"),
        ("SomeFutureHook", "some_future_hook"),
    ] {
        golden(
            json!({"hook_event_name": hook, "session_id": "s", "file_path": "/secret/path"}),
            json!({"type": format!("x.claude-code.session.{tail}"), "data": {}}),
        );
    }
    let agent = one(json!({"hook_event_name": "TeammateIdle", "session_id": "s"}), &MapContext::default());
    assert_eq!(agent[0].session, None);
}

#[test]
fn postures_gate_content() {
    let p = json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_use_id": "t", "tool_input": {"command": "echo sk=AKIAABCDEFGHIJKLMNOP"}});
    let full = one(p.clone(), &all_at(Capture::Full));
    assert_eq!(full[0].data["args"], p["tool_input"]);
    assert_eq!(full[0].capture, Capture::Full);
    let red = one(p.clone(), &all_at(Capture::Redacted));
    let shown = red[0].data["args_redacted"].to_string();
    assert!(!shown.contains("AKIAABCDEFGHIJKLMNOP"), "{shown}");
    // The digest is over the original, so it is the same at every ceiling.
    assert_eq!(full[0].data["args_digest"], red[0].data["args_digest"]);
    let perm = json!({"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}});
    let meta = one(perm, &all_at(Capture::Metadata));
    assert_eq!(meta[0].data["prompt"], "claude-code requests permission: Bash");
    let prompt = json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "mail me at a@b.example"});
    assert!(one(prompt.clone(), &MapContext::default())[0].data.get("prompt").is_none());
    assert_eq!(one(prompt.clone(), &all_at(Capture::Full))[0].data["prompt"], "mail me at a@b.example");
    let red = one(prompt, &all_at(Capture::Redacted));
    assert!(!red[0].data["prompt"].as_str().unwrap().contains("a@b.example"));
}

#[test]
fn ask_user_question_single_question_prompt() {
    let p = json!({"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "AskUserQuestion",
        "tool_input": {"questions": [{"question": "Pick", "header": "H", "multiSelect": false, "options": [{"label": "a"}]}]}});
    let out = one(p, &MapContext::default());
    assert_eq!(out[0].data["kind"], "form");
    assert_eq!(out[0].data["prompt"], "claude-code asks 1 question");
    assert_eq!(out[0].data["fields"][0]["label"], "H: Pick");
    assert!(out[0].data["fields"][0].get("multi").is_none());
}

#[test]
fn elicitation_settles_once() {
    let a = claude_code::adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let mut go = |p: Value| a.map(&HookCall { event: None, payload: &p }, &mut st, &cx).unwrap();
    let req = go(
        json!({"hook_event_name": "Elicitation", "session_id": "s", "mcp_server_name": "m", "message": "colour?",
        "requested_schema": {"type": "object", "properties": {"colour": {"type": "string"}, "n": {"type": "integer"}}, "required": ["colour"]}}),
    );
    assert_eq!(types(&req), ["attention.requested"]);
    assert_eq!(req[0].data["fields"][1]["type"], "number");
    let res = go(
        json!({"hook_event_name": "ElicitationResult", "session_id": "s", "mcp_server_name": "m", "action": "accept", "content": {"colour": "red", "n": 3}}),
    );
    assert_eq!(types(&res), ["attention.answered", "attention.resolved"]);
    assert_eq!(res[0].data["via"], "oob");
    // Attention ceiling is redacted by default: the string answer rides (redacted), the number too.
    assert_eq!(res[0].data["answer"]["values"], json!({"colour": "red", "n": 3}));
    assert_eq!(res[0].cause_key, req[0].correlation_key);
    // An orphan result emits nothing.
    assert!(go(json!({"hook_event_name": "ElicitationResult", "session_id": "s", "mcp_server_name": "m", "action": "cancel"})).is_empty());
    // At a metadata attention ceiling, string answers stay out.
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    let mut st = SessionState::default();
    let mut go = |p: Value| a.map(&HookCall { event: None, payload: &p }, &mut st, &meta).unwrap();
    go(json!({"hook_event_name": "Elicitation", "session_id": "s", "mcp_server_name": "m",
        "requested_schema": {"properties": {"colour": {"type": "string"}, "n": {"type": "integer"}}}}));
    let res = go(
        json!({"hook_event_name": "ElicitationResult", "session_id": "s", "mcp_server_name": "m", "action": "accept", "content": {"colour": "red", "n": 3}}),
    );
    assert_eq!(res[0].data["answer"]["values"], json!({"n": 3}));
}

#[test]
fn every_captured_payload_maps() {
    for capture in CAPTURES {
        check_postures(claude_code::adapter().as_ref(), "claude-code", capture, &core(MORE_CORE));
    }
}

#[test]
fn captured_auto_mode_session_reads_as_expected() {
    let drafts = replay(claude_code::adapter().as_ref(), &load(CAPTURES[2]), &MapContext::default());
    assert_eq!(
        types(&drafts),
        [
            "session.started",
            "x.claude-code.session.instructions_loaded",
            "run.started",
            "tool.requested",
            "tool.completed",
            "x.claude-code.session.post_tool_batch",
            "tool.requested",
            "tool.completed",
            "x.claude-code.session.post_tool_batch",
            "tool.requested",
            "tool.denied",
            "x.claude-code.session.post_tool_batch",
            "x.claude-code.session.message_display",
            "run.finished",
            "session.ended",
        ]
    );
    let run = drafts[2].run.clone();
    assert!(run.is_some());
    assert!(drafts[3..14].iter().filter(|d| !d.r#type.starts_with("x.")).all(|d| d.run == run));
    assert_eq!(drafts[14].run, None);
    // The interactive permission capture: the permission_prompt notifications are deduped.
    let i01 = replay(claude_code::adapter().as_ref(), &load(CAPTURES[0]), &MapContext::default());
    assert_eq!(i01.iter().filter(|d| d.r#type == "attention.requested").count(), 2);
    assert_eq!(i01.iter().filter(|d| d.r#type == "progress.status").count(), 1);
}

/// Wrong-typed fields on every known hook of the six hook vendors: errors or drafts, never a panic.
#[test]
fn malformed_payloads_never_panic() {
    use aep_adapters::vendors::{codex, gemini_cli, kimi_code, qwen_code, vscode};
    let hooks = [
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "Stop",
        "StopFailure",
        "Interrupt",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
        "PermissionResult",
        "PermissionDenied",
        "Notification",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "PreCompress",
        "TaskCreated",
        "TaskCompleted",
        "TodoCreated",
        "TodoCompleted",
        "TeammateIdle",
        "Elicitation",
        "ElicitationResult",
        "BeforeAgent",
        "AfterAgent",
        "BeforeTool",
        "AfterTool",
        "BeforeModel",
        "AfterModel",
        "MessageDisplay",
    ];
    let weird = [json!(1), json!("s"), json!([1]), json!({"a": {"b": [null]}}), json!(null), json!(true), json!({})];
    for adapter in [
        claude_code::adapter(),
        codex::adapter(),
        gemini_cli::adapter(),
        qwen_code::adapter(),
        vscode::adapter(),
        kimi_code::adapter(),
    ] {
        let mut st = SessionState::default();
        for hook in hooks {
            for w in &weird {
                let mut p = serde_json::Map::new();
                for k in [
                    "session_id",
                    "prompt",
                    "prompt_id",
                    "tool_name",
                    "tool_use_id",
                    "tool_call_id",
                    "tool_input",
                    "tool_response",
                    "tool_output",
                    "error",
                    "decision",
                    "questions",
                    "requested_schema",
                    "requestedSchema",
                    "content",
                    "action",
                    "mcp_server_name",
                    "notification_type",
                    "turn_id",
                    "is_interrupt",
                    "is_steer",
                    "source",
                    "reason",
                    "phase",
                    "llm_request",
                    "timestamp",
                ] {
                    p.insert(k.into(), w.clone());
                }
                p.insert("hook_event_name".into(), json!(hook));
                let p = Value::Object(p);
                for cx in [MapContext::default(), all_at(Capture::Full), all_at(Capture::None)] {
                    let _ = adapter.map(&HookCall { event: None, payload: &p }, &mut st, &cx);
                }
                let _ = adapter.map(&HookCall { event: Some(hook), payload: w }, &mut st, &MapContext::default());
            }
        }
    }
}

/// GitHub Copilot CLI runs a project's `.claude/settings.json` hooks too, with `COPILOT_CLI=1`:
/// such a call is Copilot's, unless Claude Code's own markers say the call is its own (a Claude
/// Code started from a Copilot session inherits `COPILOT_CLI`).
#[test]
fn a_call_copilot_made_through_claude_codes_wiring_is_told_apart() {
    let adapter = claude_code::adapter();
    let p = json!({"hook_event_name": "PreToolUse", "session_id": "s-1", "tool_name": "Bash", "tool_input": {}});
    let call = HookCall { event: None, payload: &p };
    let ran_by = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        adapter.ran_by_other(&call, &move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    };
    assert_eq!(ran_by(&[]), None, "no marker: Claude Code's");
    assert_eq!(ran_by(&[("CLAUDECODE", "1"), ("CLAUDE_CODE_SESSION_ID", "s-1")]), None);
    assert_eq!(ran_by(&[("COPILOT_CLI", "1")]), Some("copilot-cli"));
    // Copilot started from a Claude Code session: the inherited session id is another one.
    assert_eq!(
        ran_by(&[("COPILOT_CLI", "1"), ("CLAUDECODE", "1"), ("CLAUDE_CODE_SESSION_ID", "s-0")]),
        Some("copilot-cli")
    );
    // Claude Code started from a Copilot session: its own session (or, before it named one, its mark).
    assert_eq!(ran_by(&[("COPILOT_CLI", "1"), ("CLAUDECODE", "1"), ("CLAUDE_CODE_SESSION_ID", "s-1")]), None);
    assert_eq!(ran_by(&[("COPILOT_CLI", "1"), ("CLAUDECODE", "1")]), None);
}

/// Claude Code 2.1.332 (`claude -p`, every hook recorded): its Agent call returns at once
/// (`async_launched`), the subagent runs after it, and its result comes back as a prompt of
/// Claude Code's own (`<task-notification>`) under the open turn's `prompt_id`: one run, the
/// notification a continuation of it, the delegation inside it.
#[test]
fn an_async_subagent_and_its_task_notification_stay_in_the_turn() {
    let records = load(include_str!("data/claude-code/s15_2.1.332_async_agent.jsonl"));
    let ds = replay(claude_code::adapter().as_ref(), &records, &MapContext::default());
    let seen: Vec<&str> =
        types(&ds).into_iter().filter(|t| !t.starts_with("x.") || *t == "x.claude-code.run.continued").collect();
    assert_eq!(
        seen,
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.failed",
            "tool.requested",
            "tool.completed",
            "delegation.subagent.started",
            "delegation.subagent.stopped",
            "x.claude-code.run.continued",
            "run.finished",
            "session.ended"
        ]
    );
    let run = ds.iter().find(|d| d.r#type == "run.started").and_then(|d| d.run.clone());
    assert!(run.is_some());
    assert!(
        ds.iter()
            .filter(|d| d.r#type != "session.started"
                && d.r#type != "session.ended"
                && !d.r#type.starts_with("x.claude-code.session"))
            .all(|d| d.run == run),
        "everything but the session's own events is in the one turn"
    );
    let cont = ds.iter().find(|d| d.r#type == "x.claude-code.run.continued").unwrap();
    assert_eq!(cont.data["by"], "task_notification");
}

/// Claude Code 2.1.337 (the pin; every hook of the e2e `claude` run, recorded as the shim
/// received them): four tools (one failing), the Agent call answered at once, the subagent
/// stopping before the turn's `Stop`, then its `<task-notification>` after the turn, as a turn
/// of its own. Two runs, the second started by the agent; every call answered in its run.
#[test]
fn the_2_1_337_session_reads_as_its_turn_and_the_agent_started_one() {
    let records = load(include_str!("data/claude-code/s16_2.1.337_e2e_session.jsonl"));
    let ds = replay(claude_code::adapter().as_ref(), &records, &MapContext::default());
    let seen: Vec<&str> = types(&ds).into_iter().filter(|t| !t.starts_with("x.")).collect();
    assert_eq!(
        seen,
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.failed",
            "tool.requested",
            "tool.completed",
            "delegation.subagent.started",
            "delegation.subagent.stopped",
            "run.finished",
            "run.started",
            "run.finished",
            "session.ended"
        ]
    );
    let (user, agent) = ("d003ae2f-b493-4cdb-92c5-8d226b1f3248", "afa36b69-5a52-4f0c-ac50-5fa711dbb27b");
    let starts: Vec<_> = ds.iter().filter(|d| d.r#type == "run.started").collect();
    assert_eq!(starts[0].run.as_deref(), Some(user));
    assert_eq!(starts[0].data["trigger"], "user");
    assert_eq!(starts[1].run.as_deref(), Some(agent));
    assert_eq!(starts[1].data["trigger"], "agent");
    assert!(
        ds.iter()
            .filter(|d| d.r#type.starts_with("tool.") || d.r#type.starts_with("delegation."))
            .all(|d| d.run.as_deref() == Some(user)),
        "the calls and the delegation are the user's turn's"
    );
    common::assert_causal(&ds);
}

/// When the turn ended before the notification came (the other order, seen in the e2e run),
/// the notification's turn is a run of its own, started by the agent.
#[test]
fn a_task_notification_after_the_turn_is_a_run_the_agent_started() {
    let a = claude_code::adapter();
    let (mut st, cx) = (SessionState::default(), MapContext::default());
    let mut map = |p: Value| a.map(&HookCall { event: None, payload: &p }, &mut st, &cx).unwrap();
    map(json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": "p1", "prompt": "go"}));
    map(json!({"hook_event_name": "Stop", "session_id": "s", "prompt_id": "p1"}));
    let d = map(json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": "p2",
                       "prompt": "<task-notification>\n<task-id>a1</task-id>\n<status>completed</status>"}));
    assert_eq!(types(&d), ["run.started"]);
    assert_eq!((d[0].run.as_deref(), &d[0].data["trigger"]), (Some("p2"), &json!("agent")));
    let user =
        map(json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": "p3", "prompt": "next"}));
    assert_eq!(types(&user), ["run.cancelled", "run.started"]);
    assert_eq!(user[1].data["trigger"], "user");
}

/// The third order seen in the e2e run (2.1.332): the turn's `Stop` came before the
/// background subagent's `SubagentStop`. The stop still belongs to the run its start was in,
/// so the delegation closes where it opened; a subagent never started here gets no run.
#[test]
fn a_background_subagent_stopping_after_its_turn_stops_in_that_turn() {
    let a = claude_code::adapter();
    let (mut st, cx) = (SessionState::default(), MapContext::default());
    let mut map = |p: Value| a.map(&HookCall { event: None, payload: &p }, &mut st, &cx).unwrap();
    map(json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": "p1", "prompt": "go"}));
    let start = map(json!({"hook_event_name": "SubagentStart", "session_id": "s", "agent_id": "a1",
                           "agent_type": "general-purpose"}));
    assert_eq!(start[0].run.as_deref(), Some("p1"));
    map(json!({"hook_event_name": "Stop", "session_id": "s", "prompt_id": "p1"}));
    let stop = map(json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a1",
                          "agent_type": "general-purpose"}));
    assert_eq!(types(&stop), ["delegation.subagent.stopped"]);
    assert_eq!(stop[0].run.as_deref(), Some("p1"), "the run the subagent started in");
    let stray = map(json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a2"}));
    assert_eq!(stray[0].run, None, "no run ended or open to put it in");
}
