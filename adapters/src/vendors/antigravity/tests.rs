use aep_schemas::Capture;
use serde_json::{Value, json};

use super::*;

fn p(extra: Value) -> Value {
    let mut v = json!({"conversationId": "c-1", "workspacePaths": ["/w"], "transcriptPath": "/h/.gemini/antigravity/brain/c-1/t.jsonl", "artifactDirectoryPath": "/h/a"});
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    v
}

fn run(hook: &str, payload: &Value, st: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    adapter().map(&HookCall { event: Some(hook), payload }, st, cx).expect("maps")
}

fn types(v: &[EventDraft]) -> Vec<&str> {
    v.iter().map(|d| d.r#type.as_str()).collect()
}

#[test]
fn first_sight_session_then_run_and_steps() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let a = run("PreInvocation", &p(json!({"invocationNum": 0, "initialNumSteps": 2})), &mut st, &cx);
    assert_eq!(types(&a), ["session.started", "run.started", "run.step.started"]);
    assert_eq!(a[0].data["client"], json!({"name": "antigravity"}));
    assert_eq!(a[2].step.as_deref(), Some("0"));
    assert_eq!(a[2].run.as_deref(), Some("r1"));
    let b = run("PreInvocation", &p(json!({"invocationNum": 1})), &mut st, &cx);
    assert_eq!(types(&b), ["run.step.started"]);
    let s = run(
        "Stop",
        &p(json!({"executionNum": 4, "terminationReason": "max_steps_exceeded", "error": "", "fullyIdle": true})),
        &mut st,
        &cx,
    );
    assert_eq!(types(&s), ["run.finished"]);
    assert_eq!(s[0].data["termination_reason"], json!("max_steps_exceeded"));
    assert_eq!(s[0].cause_key, Some(crate::common::run_key(Some("c-1"), "r1")));
    assert_eq!(st.current_run, None);
}

#[test]
fn step_idx_join_names_the_thin_post() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let pre = run(
        "PreToolUse",
        &p(json!({"toolCall": {"name": "view_file", "args": {"Path": "/x"}}, "stepIdx": 7})),
        &mut st,
        &cx,
    );
    assert_eq!(types(&pre), ["session.started", "tool.requested"]);
    let post = run("PostToolUse", &p(json!({"stepIdx": 7, "error": "boom"})), &mut st, &cx);
    assert_eq!(types(&post), ["tool.failed"]);
    assert_eq!(post[0].subject.as_deref(), Some("view_file"));
    assert_eq!(post[0].cause_key, pre[1].correlation_key);
    // the join entry is consumed: a second post at the same index is unjoined
    let again = run("PostToolUse", &p(json!({"stepIdx": 7, "error": "boom"})), &mut st, &cx);
    assert_eq!(again[0].r#type, "x.antigravity.step.completed");
    assert_eq!(again[0].data, json!({"failed": true, "step_idx": 7}).as_object().unwrap().clone());
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let r = run("PostToolUse", &p(json!({"stepIdx": 8, "error": "exit 2"})), &mut st, &red);
    assert_eq!(r[0].data["error_message"], json!("exit 2"));
}

#[test]
fn neutral_replies_are_byte_exact_and_fallback_is_two_segments() {
    let a = adapter();
    assert_eq!(a.neutral_reply("PreToolUse").as_bytes(), br#"{"decision": ""}"#);
    assert_eq!(a.neutral_reply("Stop").as_bytes(), br#"{"decision": ""}"#);
    assert_eq!(a.neutral_reply("PostInvocation").as_bytes(), b"{}");
    let mut st = SessionState::default();
    let d = run("Brand-New_Hook", &p(json!({})), &mut st, &MapContext::default());
    assert_eq!(d[1].r#type, "x.antigravity.hook.brandnewhook");
    let q = p(json!({}));
    assert!(matches!(
        a.hook_name(&HookCall { event: None, payload: &q }),
        Err(AdapterError::NoHookName { field: "hook" })
    ));
    let cli = json!({"conversationId": "c-2", "transcriptPath": "~/.gemini/antigravity-cli/brain/c-2/x"});
    let d = run("Stop", &cli, &mut SessionState::default(), &MapContext::default());
    assert_eq!(d[0].data["client"], json!({"name": "antigravity-cli"}));
}
