use serde_json::{Value, json};

use super::*;
use crate::spec::{Decision, Held};

fn map(st: &mut SessionState, p: Value) -> Vec<EventDraft> {
    DroidAdapter.map(&HookCall { event: None, payload: &p }, st, &MapContext::default()).unwrap()
}

#[test]
fn the_gate_denies_in_claude_codes_shape() {
    let p = json!({});
    let held = Held { hook: "PreToolUse", payload: &p };
    let deny = Decision { option: Some("deny".into()), ..Default::default() };
    let v: Value = serde_json::from_slice(&spec::SPEC.control.reply_bytes(&held, &deny)).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(v["hookSpecificOutput"]["permissionDecisionReason"], crate::spec::DEFAULT_DENY_REASON);
    let allow = Decision { option: Some("allow".into()), ..Default::default() };
    assert_eq!(spec::SPEC.control.reply_bytes(&held, &allow), b"{}");
}

#[test]
fn a_turn_without_tools_is_still_one_run_and_a_prompt_opens_its_own() {
    let mut st = SessionState::default();
    let stop = map(&mut st, json!({"hook_event_name": "Stop", "session_id": "s"}));
    assert_eq!(stop.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["run.started", "run.finished"]);
    assert_eq!(stop[1].cause_key, stop[0].correlation_key);
    let p = map(&mut st, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"}));
    assert_eq!((p[0].r#type.as_str(), p[0].run.as_deref()), ("run.started", Some("r2")));
    let t = map(
        &mut st,
        json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Read", "tool_input": {}}),
    );
    assert_eq!((t.len(), t[0].run.as_deref()), (1, Some("r2")), "the prompt's run, no second start");
    let end = map(&mut st, json!({"hook_event_name": "SessionEnd", "session_id": "s", "reason": "other"}));
    let types: Vec<_> = end.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["tool.failed", "run.cancelled", "session.ended"]);
    assert_eq!(end[0].cause_key, t[0].correlation_key);
    assert_eq!(end[0].run.as_deref(), Some("r2"));
}
