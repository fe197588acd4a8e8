//! Kimi Code: a whole session through the 16-event surface (our own payloads in the
//! vendor's oracle-captured shapes; no real capture in this repo) maps onto the Annex A.6
//! types only, with the permission pair observed and the companions wired.

mod common;

use aep_adapters::vendors::kimi_code;
use aep_adapters::{MapContext, NeutralReply};

use common::{check_postures, core, load, replay, types};

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
];

const SESSION: &str = r#"
{"hook": "SessionStart", "payload": {"hook_event_name": "SessionStart", "session_id": "k1", "cwd": "/home/u/p", "source": "startup"}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "session_id": "k1", "prompt": [{"type": "text", "text": "clean the build"}]}}
{"hook": "PreToolUse", "payload": {"hook_event_name": "PreToolUse", "session_id": "k1", "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_call_id": "c1"}}
{"hook": "PermissionRequest", "payload": {"hook_event_name": "PermissionRequest", "session_id": "k1", "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_call_id": "c1", "display": "Run rm -rf build?", "turn_id": "turn_1"}}
{"hook": "PermissionResult", "payload": {"hook_event_name": "PermissionResult", "session_id": "k1", "tool_name": "Bash", "tool_call_id": "c1", "decision": "rejected", "feedback": "not now"}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "session_id": "k1", "prompt": [{"type": "text", "text": "use make clean"}], "is_steer": true}}
{"hook": "PreToolUse", "payload": {"hook_event_name": "PreToolUse", "session_id": "k1", "tool_name": "Bash", "tool_input": {"command": "make clean"}, "tool_call_id": "c2"}}
{"hook": "PostToolUseFailure", "payload": {"hook_event_name": "PostToolUseFailure", "session_id": "k1", "tool_name": "Bash", "tool_input": {"command": "make clean"}, "tool_call_id": "c2", "error": {"name": "ToolError", "message": "exit 2"}}}
{"hook": "SubagentStart", "payload": {"hook_event_name": "SubagentStart", "agent_name": "explore", "prompt": "look around"}}
{"hook": "SubagentStop", "payload": {"hook_event_name": "SubagentStop", "agent_name": "explore", "response": "done"}}
{"hook": "Stop", "payload": {"hook_event_name": "Stop", "session_id": "k1", "stop_hook_active": false}}
{"hook": "PreCompact", "payload": {"hook_event_name": "PreCompact", "session_id": "k1", "trigger": "auto", "token_count": 1000}}
{"hook": "PostCompact", "payload": {"hook_event_name": "PostCompact", "session_id": "k1", "trigger": "auto", "estimated_token_count": 200}}
{"hook": "Notification", "payload": {"hook_event_name": "Notification", "session_id": "k1", "notification_type": "task.completed", "title": "done", "severity": "info"}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "session_id": "k1", "prompt": [{"type": "text", "text": "and now"}]}}
{"hook": "Interrupt", "payload": {"hook_event_name": "Interrupt", "session_id": "k1", "turn_id": "turn_2", "reason": "cancelled"}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "session_id": "k1", "prompt": "left open"}}
{"hook": "SessionEnd", "payload": {"hook_event_name": "SessionEnd", "session_id": "k1", "reason": "exit"}}
"#;

#[test]
fn a_whole_session_maps() {
    check_postures(kimi_code::adapter().as_ref(), "kimi-code", SESSION, &core(MORE_CORE));
    let drafts = replay(kimi_code::adapter().as_ref(), &load(SESSION), &MapContext::default());
    assert_eq!(
        types(&drafts),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "attention.requested",
            "attention.answered",
            "attention.resolved",
            "tool.denied",
            "x.kimi-code.run.steer_submitted",
            "tool.requested",
            "tool.failed",
            "delegation.subagent.started",
            "delegation.subagent.stopped",
            "run.finished",
            "x.kimi-code.session.pre_compact",
            "session.compacted",
            "progress.status",
            "run.started",
            "run.cancelled",
            "run.started",
            "run.cancelled",
            "session.ended",
        ]
    );
    // The permission request is caused by its tool call; its answer by the request.
    assert_eq!(drafts[3].cause_key, drafts[2].correlation_key);
    assert_eq!(drafts[4].cause_key, drafts[3].correlation_key);
    assert_eq!(drafts[4].data["answer"]["text"], "not now");
    assert_eq!(drafts[10].session.as_deref(), Some("unknown"));
    // turn_id never becomes the run id.
    assert_eq!(drafts[17].run.as_deref(), Some("r2"));
    assert_eq!(drafts[19].run.as_deref(), Some("r3"), "the run left open drains at SessionEnd");
}

#[test]
fn neutral_reply_is_an_empty_object() {
    assert_eq!(kimi_code::adapter().neutral_reply("PreToolUse"), NeutralReply::Body("{}"));
}
