//! Hermes Agent: a turn with an observed approval, a clarify form overlay and a blocked
//! tool maps onto the Annex A.10 types with the REAL turn id as the run.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::hermes;
use aep_schemas::Capture;

use common::{MARKER, assert_absent, assert_causal, assert_no_panics, drive, present, types};

const SESSION: &str = r#"
{"payload": {"hook_event_name": "on_session_start", "session_id": "H", "cwd": "/home/u/zebra-canary-4471", "extra": {}}}
{"payload": {"hook_event_name": "pre_llm_call", "session_id": "H", "extra": {"turn_id": "H:t1", "user_message": "zebra-canary-4471"}}}
{"payload": {"hook_event_name": "pre_tool_call", "tool_name": "terminal", "tool_input": {"command": "zebra-canary-4471"}, "session_id": "H", "extra": {"tool_call_id": "k1", "turn_id": "H:t1"}}}
{"payload": {"hook_event_name": "pre_approval_request", "session_id": "", "extra": {"command": "zebra-canary-4471", "pattern_key": "terminal:z", "session_key": "H", "turn_id": "H:t1"}}}
{"payload": {"hook_event_name": "post_approval_response", "session_id": "", "extra": {"pattern_key": "terminal:z", "session_key": "H", "choice": "once", "turn_id": "H:t1"}}}
{"payload": {"hook_event_name": "post_tool_call", "tool_name": "terminal", "session_id": "H", "extra": {"tool_call_id": "k1", "turn_id": "H:t1", "status": "ok", "result": "zebra-canary-4471", "duration_ms": 3}}}
{"payload": {"hook_event_name": "pre_tool_call", "tool_name": "clarify", "tool_input": {"question": "zebra-canary-4471?", "choices": ["a", "b"]}, "session_id": "H", "extra": {"tool_call_id": "k2", "turn_id": "H:t1"}}}
{"payload": {"hook_event_name": "post_tool_call", "tool_name": "clarify", "session_id": "H", "extra": {"tool_call_id": "k2", "turn_id": "H:t1", "status": "ok", "result": "{\"question\":\"q\",\"choices_offered\":[\"a\",\"b\"],\"user_response\":\"b\"}"}}}
{"payload": {"hook_event_name": "pre_tool_call", "tool_name": "terminal", "tool_input": {"command": "sudo x"}, "session_id": "H", "extra": {"tool_call_id": "k3", "turn_id": "H:t1"}}}
{"payload": {"hook_event_name": "post_tool_call", "tool_name": "terminal", "session_id": "H", "extra": {"tool_call_id": "k3", "turn_id": "H:t1", "status": "blocked", "error_message": "zebra-canary-4471"}}}
{"payload": {"hook_event_name": "on_session_end", "session_id": "H", "extra": {"turn_id": "H:t1", "completed": true}}}
{"payload": {"hook_event_name": "on_session_finalize", "session_id": "H", "extra": {"reason": "shutdown"}}}
"#;

#[test]
fn a_turn_with_approval_clarify_and_a_block() {
    let a = hermes::adapter();
    let ds = drive(a.as_ref(), SESSION, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "attention.requested",
            "attention.answered",
            "tool.completed",
            "tool.requested",
            "attention.requested",
            "tool.completed",
            "attention.answered",
            "tool.requested",
            "tool.denied",
            "run.finished",
            "session.ended",
        ]
    );
    assert_causal(&ds);
    assert!(ds.iter().all(|d| d.session.as_deref() == Some("H")));
    assert!(ds[1..13].iter().all(|d| d.run.as_deref() == Some("H:t1")));
    assert_eq!(ds[9].data["answer"]["values"]["1"], "2");
    // attention is redacted by default: the approval command and clarify question ride there only
    let (attention, rest): (Vec<_>, Vec<_>) = ds.into_iter().partition(|d| d.r#type.starts_with("attention."));
    assert_absent(&rest, MARKER);
    assert!(present(&attention, MARKER));
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    assert_absent(&drive(a.as_ref(), SESSION, &meta), MARKER);
}

#[test]
fn malformed_payloads_never_panic() {
    let hooks = ["pre_tool_call", "post_tool_call", "pre_approval_request", "subagent_stop", "on_session_end", "q"];
    assert_no_panics(hermes::adapter().as_ref(), &hooks);
}

/// What Hermes Agent 0.19.0 (`hermes -z`, its `terminal` tool) delivered to a shell hook,
/// verbatim: a command printing a word, then one exiting 2 (Hermes calls both `ok`).
const REAL_CLI: &str = include_str!("data/hermes/agent_0.19.0_terminal.jsonl");

#[test]
fn real_cli_the_terminal_exit_code_is_carried() {
    let ds = drive(hermes::adapter().as_ref(), REAL_CLI, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    // The vendor's status stays the split (Annex A.10); its exit code rides along (metadata).
    assert_eq!(ds[3].data["exit_code"], 0);
    assert_eq!(ds[5].data["exit_code"], 2);
    assert_causal(&ds);
}
