use aep_schemas::Capture;
use serde_json::{Value, json};

use super::*;

fn base(hook: &str, agent: &str, parent: Option<&str>) -> Value {
    json!({"clineVersion": "2.0.0", "hookName": hook, "timestamp": "2026-01-01T00:00:00Z", "taskId": "t_9",
           "workspaceRoots": ["/w"], "userId": "u", "agent_id": agent, "parent_agent_id": parent})
}

fn run(p: &Value, st: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    adapter().map(&HookCall { event: None, payload: p }, st, cx).expect("maps")
}

#[test]
fn real_run_boundaries_per_agent() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let s = run(&base("agent_start", "main", None), &mut st, &cx);
    assert_eq!((s.len(), s[0].r#type.as_str(), s[0].run.as_deref()), (1, "run.started", Some("r1")));
    assert_eq!(s[0].session.as_deref(), Some("t_9"));
    let c = run(&base("agent_start", "kid", Some("main")), &mut st, &cx);
    assert_eq!(c[0].r#type, "delegation.subagent.started");
    assert_eq!(c[1].run.as_deref(), Some("r2"));
    let mut end = base("agent_end", "kid", Some("main"));
    end["iteration"] = json!(4);
    let e = run(&end, &mut st, &cx);
    assert_eq!(
        (e[0].r#type.as_str(), e[0].run.as_deref(), e[0].step.as_deref()),
        ("run.finished", Some("r2"), Some("4"))
    );
    assert_eq!(e[1].r#type, "delegation.subagent.stopped");
    assert_eq!(e[1].step, None);
    assert_eq!(st.current_run.as_deref(), Some("r1"));
    let mut err = base("agent_error", "main", None);
    err["error"] = json!({"name": "Timeout", "message": "took too long"});
    let f = run(&err, &mut st, &cx);
    assert_eq!(f[0].data["reason"], json!("Timeout"));
    assert_eq!(f[0].data["error"], json!({"type": "Timeout"}));
    assert_eq!(f[0].cause_key, Some(crate::common::run_key(Some("t_9"), "r1")));
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let f = run(&err, &mut SessionState::default(), &red);
    assert_eq!(f[0].data["error"]["message"], json!("took too long"));
}

#[test]
fn tool_result_splits_on_the_typed_error() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let mut call = base("tool_call", "main", None);
    call["tool_call"] = json!({"id": "x1", "name": "write_to_file", "input": {"path": "a"}});
    let r = run(&call, &mut st, &cx);
    assert_eq!(r[0].correlation_key.as_deref(), Some("tool:x1"));
    let mut ok = base("tool_result", "main", None);
    ok["tool_result"] = json!({"id": "x1", "name": "write_to_file", "input": {}, "output": "written", "durationMs": 5});
    let c = run(&ok, &mut st, &cx);
    assert_eq!(c[0].r#type, "tool.completed");
    assert_eq!(c[0].data["duration_ms"], json!(5));
    assert_eq!(c[0].cause_key.as_deref(), Some("tool:x1"));
    let mut bad = ok.clone();
    bad["tool_result"]["error"] = json!("disk full");
    let f = run(&bad, &mut st, &cx);
    assert_eq!(f[0].r#type, "tool.failed");
    assert_eq!(f[0].data["error"], json!({"type": "tool_error"}));
    assert!(!f[0].data.contains_key("result_digest"));
}

#[test]
fn other_hooks_and_fallback() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let d = &run(&base("prompt_submit", "main", None), &mut st, &cx)[0];
    assert_eq!(d.r#type, "x.cline.prompt.submitted");
    let d = &run(&base("session_shutdown", "main", None), &mut st, &cx)[0];
    assert_eq!(d.data["reason"], json!("normal"));
    let d = &run(&base("NewThingHappened", "main", None), &mut st, &cx)[0];
    assert_eq!(d.r#type, "x.cline.new.thing.happened");
    let p = base("x", "main", None);
    let d = &adapter().map(&HookCall { event: Some("agent_abort"), payload: &p }, &mut st, &cx).unwrap()[0];
    assert_eq!(d.r#type, "run.cancelled");
    assert_eq!(adapter().neutral_reply("tool_call").as_bytes(), b"{}");
    let mut bad = base("tool_call", "main", None);
    bad["tool_call"] = json!({"id": 3});
    assert!(adapter().map(&HookCall { event: None, payload: &bad }, &mut st, &cx).is_err());
}
