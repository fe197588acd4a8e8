use serde_json::{Value, json};

use super::*;
use crate::spec::{Decision, Held};

fn map(st: &mut SessionState, p: Value) -> Vec<EventDraft> {
    CopilotCliAdapter.map(&HookCall { event: None, payload: &p }, st, &MapContext::default()).unwrap()
}

#[test]
fn the_gate_allows_or_denies_with_the_reason() {
    let p = json!({});
    let held = Held { hook: "PreToolUse", payload: &p };
    let allow = Decision { option: Some("allow".into()), ..Default::default() };
    let out = spec::SPEC.control.reply_bytes(&held, &allow);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
    assert!(v["hookSpecificOutput"].get("permissionDecisionReason").is_none());
    let deny = Decision { option: Some("deny".into()), text: Some("not here".into()), ..Default::default() };
    let v: Value = serde_json::from_slice(&spec::SPEC.control.reply_bytes(&held, &deny)).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(v["hookSpecificOutput"]["permissionDecisionReason"], "not here");
    // Nothing decided: exit 0 with no output, which Copilot reads as "no decision".
    assert_eq!(CopilotCliAdapter.neutral_reply("PreToolUse").as_bytes(), b"");
}

#[test]
fn exit_codes_are_read_from_the_result_tail_only() {
    assert_eq!(hf::trailing_exit_code("e2e-ok\n<shellId: 0 completed with exit code 0>"), Some(0));
    assert_eq!(hf::trailing_exit_code("x\n[Process exited with code 2]\n"), Some(2));
    assert_eq!(hf::trailing_exit_code("exit code 3 then more"), None);
    assert_eq!(hf::trailing_exit_code(""), None);
}

#[test]
fn the_native_permission_request_names_its_session_and_falls_back() {
    let mut st = SessionState::default();
    let d = map(
        &mut st,
        json!({"hookName": "permissionRequest", "sessionId": "s1", "toolName": "bash", "toolInput": {"command": "x"}}),
    );
    assert_eq!(d[0].r#type, "x.copilot-cli.session.permission_request");
    assert_eq!(d[0].session.as_deref(), Some("s1"));
    assert!(
        CopilotCliAdapter.map(&HookCall { event: None, payload: &json!({}) }, &mut st, &MapContext::default()).is_err()
    );
}

#[test]
fn a_failure_result_type_is_tool_failed() {
    let mut st = SessionState::default();
    let base = json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "bash", "tool_input": {"command": "x"}});
    let r = map(&mut st, base.clone());
    let mut post = base;
    post["hook_event_name"] = json!("PostToolUse");
    post["tool_result"] = json!({"result_type": "failure", "text_result_for_llm": "boom"});
    let f = map(&mut st, post);
    assert_eq!(f[0].r#type, "tool.failed");
    assert_eq!(f[0].data["error"]["type"], "failure");
    assert_eq!(f[0].cause_key, r[0].correlation_key);
}
