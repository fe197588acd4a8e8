//! pi: two agent loops (one retried after an error) through the notification bus map onto
//! runs, turn steps, the tool trio and vendor-scoped message facts.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::pi;
use aep_schemas::Capture;

use common::{MARKER, assert_absent, assert_causal, assert_no_panics, drive, present, types};

const SESSION: &str = r#"
{"payload": {"session": {"id": "P", "cwd": "/home/u/zebra-canary-4471"}, "event": {"type": "session_start", "reason": "startup"}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "agent_start"}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "message_start", "message": {"role": "user", "content": "zebra-canary-4471"}}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "turn_start", "turnIndex": 0}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "tool_execution_start", "toolCallId": "c", "toolName": "bash", "args": {"command": "zebra-canary-4471"}}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "tool_execution_update", "toolCallId": "c", "toolName": "bash", "partialResult": "zebra"}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "tool_execution_end", "toolCallId": "c", "toolName": "bash", "result": {"content": [{"type": "text", "text": "zebra-canary-4471"}]}, "isError": false}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "turn_end", "turnIndex": 0, "message": {"role": "assistant"}}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "agent_end", "messages": [{"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "zebra-canary-4471"}]}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "agent_start"}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "zebra-canary-4471"}], "stopReason": "stop"}}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "agent_end", "messages": [{"role": "assistant", "content": "zebra-canary-4471", "stopReason": "stop"}]}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "agent_settled"}}}
{"payload": {"session": {"id": "P"}, "event": {"type": "session_shutdown", "reason": "quit"}}}
"#;

#[test]
fn a_retried_loop_is_a_new_run() {
    let a = pi::adapter();
    let ds = drive(a.as_ref(), SESSION, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "x.pi.message.submitted",
            "run.step.started",
            "tool.requested",
            "tool.completed",
            "run.step.finished",
            "run.failed",
            "run.started",
            "x.pi.message.replied",
            "run.finished",
            "x.pi.agent.settled",
            "session.ended",
        ]
    );
    assert_causal(&ds);
    assert_eq!((ds[7].run.as_deref(), ds[10].run.as_deref()), (Some("r1"), Some("r2")));
    assert_absent(&ds, MARKER);
    let with_deltas = drive(pi::adapter_with_deltas(true).as_ref(), SESSION, &MapContext::default());
    assert_eq!(with_deltas.len(), ds.len() + 1);
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let r = drive(a.as_ref(), SESSION, &red);
    assert!(present(&r, MARKER));
    assert_absent(&r, "/home/u/");
}

#[test]
fn malformed_payloads_never_panic() {
    let hooks = ["agent_end", "tool_execution_end", "message_end", "turn_start", "session_start", "new"];
    assert_no_panics(pi::adapter().as_ref(), &hooks);
    assert_no_panics(pi::adapter_with_deltas(true).as_ref(), &["message_update", "tool_execution_update"]);
}
