//! Antigravity: a conversation through the five hooks maps onto a synthesized session and
//! run, invocation steps, and the stepIdx-joined tool pair; the replies stay neutral.

mod common;

use aep_adapters::vendors::antigravity;
use aep_adapters::{MapContext, NeutralReply};
use aep_schemas::Capture;

use common::{MARKER, assert_absent, assert_causal, assert_no_panics, drive, present, types};

const SESSION: &str = r#"
{"hook": "PreInvocation", "payload": {"conversationId": "cv", "invocationNum": 0, "initialNumSteps": 1}}
{"hook": "PreToolUse", "payload": {"conversationId": "cv", "toolCall": {"name": "run_command", "args": {"CommandLine": "zebra-canary-4471"}}, "stepIdx": 1}}
{"hook": "PostToolUse", "payload": {"conversationId": "cv", "stepIdx": 1, "error": ""}}
{"hook": "PreToolUse", "payload": {"conversationId": "cv", "toolCall": {"name": "view_file", "args": {"Path": "/x"}}, "stepIdx": 2}}
{"hook": "PostToolUse", "payload": {"conversationId": "cv", "stepIdx": 2, "error": "zebra-canary-4471"}}
{"hook": "PostToolUse", "payload": {"conversationId": "cv", "stepIdx": 9, "error": "zebra-canary-4471"}}
{"hook": "PostInvocation", "payload": {"conversationId": "cv", "invocationNum": 0, "initialNumSteps": 1}}
{"hook": "Stop", "payload": {"conversationId": "cv", "executionNum": 1, "terminationReason": "error", "error": "zebra-canary-4471", "fullyIdle": true}}
{"hook": "PreInvocation", "payload": {"conversationId": "cv", "invocationNum": 0, "initialNumSteps": 4}}
"#;

#[test]
fn a_conversation() {
    let a = antigravity::adapter();
    let ds = drive(a.as_ref(), SESSION, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "run.step.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.failed",
            "x.antigravity.step.completed",
            "run.step.finished",
            "run.failed",
            "run.started",
            "run.step.started",
        ]
    );
    assert_causal(&ds);
    assert_eq!(ds[4].step.as_deref(), Some("0"));
    assert_eq!(ds[9].run.as_deref(), Some("r1"));
    assert_eq!(ds[10].run.as_deref(), Some("r2"));
    assert_absent(&ds, MARKER);
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    assert!(present(&drive(a.as_ref(), SESSION, &red), MARKER));
    for hook in ["PreToolUse", "Stop"] {
        assert_eq!(a.neutral_reply(hook), NeutralReply::Body(r#"{"decision": ""}"#));
    }
}

#[test]
fn malformed_payloads_never_panic() {
    let hooks = ["PreToolUse", "PostToolUse", "PreInvocation", "PostInvocation", "Stop", "Other"];
    assert_no_panics(antigravity::adapter().as_ref(), &hooks);
}
