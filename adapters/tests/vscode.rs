//! VS Code agent: a full 8-event session (our own payloads in the vendor's documented
//! snake_case shape; no real capture exists yet) maps onto the Annex A.5 types only, and the
//! absences stay absent: no session.ended, tool.failed or run.failed.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::vscode;

use common::{check_postures, core, load, replay, types};

/// The core types this surface maps onto: the lifecycle but `session.ended` (no such
/// hook here), and the delegation pair.
fn vscode_core() -> Vec<&'static str> {
    let mut core = core(&["delegation.subagent.started", "delegation.subagent.stopped"]);
    core.retain(|t| *t != "session.ended");
    core
}

const SESSION: &str = r#"
{"hook": "SessionStart", "payload": {"hook_event_name": "SessionStart", "session_id": "vs1", "timestamp": "2026-07-16T09:00:00.000Z", "transcript_path": "/home/u/.vscode/t.md", "cwd": "/home/u/w", "source": "new", "model": "gpt-5", "agent_type": "Agent"}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "session_id": "vs1", "timestamp": "2026-07-16T09:00:01.000Z", "prompt": "rename the helper"}}
{"hook": "PreToolUse", "payload": {"hook_event_name": "PreToolUse", "session_id": "vs1", "tool_name": "editFile", "tool_input": {"path": "/w/a.ts"}, "tool_use_id": "c1"}}
{"hook": "SubagentStart", "payload": {"hook_event_name": "SubagentStart", "session_id": "vs1", "agent_id": "sub1", "agent_type": "Plan"}}
{"hook": "SubagentStop", "payload": {"hook_event_name": "SubagentStop", "session_id": "vs1", "agent_id": "sub1", "agent_type": "Plan", "stop_hook_active": false}}
{"hook": "PostToolUse", "payload": {"hook_event_name": "PostToolUse", "session_id": "vs1", "tool_name": "editFile", "tool_input": {"path": "/w/a.ts"}, "tool_response": "File edited", "tool_use_id": "c1"}}
{"hook": "PreCompact", "payload": {"hook_event_name": "PreCompact", "session_id": "vs1", "trigger": "auto", "custom_instructions": "keep it"}}
{"hook": "Stop", "payload": {"hook_event_name": "Stop", "session_id": "vs1", "stop_hook_active": false}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "prompt": "no session id here"}}
{"hook": "UserPromptSubmit", "payload": {"hook_event_name": "UserPromptSubmit", "prompt": "again, interrupted before"}}
{"hook": "ChatModeChanged", "payload": {"hook_event_name": "ChatModeChanged", "session_id": "vs1"}}
"#;

#[test]
fn a_whole_session_maps_with_the_absences_kept() {
    check_postures(vscode::adapter().as_ref(), "vscode", SESSION, &vscode_core());
    let drafts = replay(vscode::adapter().as_ref(), &load(SESSION), &MapContext::default());
    assert_eq!(
        types(&drafts),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "delegation.subagent.started",
            "delegation.subagent.stopped",
            "tool.completed",
            "session.compacted",
            "run.finished",
            "run.started",
            "run.cancelled",
            "run.started",
            "x.vscode.session.chat_mode_changed",
        ]
    );
    assert!(drafts[0].data.get("cwd").is_none() && !drafts[0].data.contains_key("transcript_path"));
    assert_eq!(drafts[0].time.as_deref(), Some("2026-07-16T09:00:00.000Z"));
    assert!(drafts[1..8].iter().filter(|d| d.r#type != "session.compacted").all(|d| d.run.as_deref() == Some("r1")));
    assert_eq!(drafts[8].session.as_deref(), Some("unknown"));
    // The unknown lane keeps its own runs; the interrupted one drains at the next prompt.
    assert_eq!(drafts[9].run.as_deref(), Some("r1"));
    assert_eq!(drafts[10].run.as_deref(), Some("r2"));
}
