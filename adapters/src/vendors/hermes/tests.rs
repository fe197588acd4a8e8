use aep_schemas::Capture;
use serde_json::{Value, json};

use super::*;

fn env(hook: &str, session: &str, tool: Option<&str>, input: Value, extra: Value) -> Value {
    let mut x = json!({"telemetry_schema_version": "hermes.observer.v1"});
    if let (Some(m), Some(e)) = (x.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    json!({"hook_event_name": hook, "tool_name": tool, "tool_input": input, "session_id": session, "cwd": "/srv", "extra": x})
}

fn run(p: &Value, st: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    adapter().map(&HookCall { event: None, payload: p }, st, cx).expect("maps")
}

#[test]
fn turn_id_is_the_run_and_session_end_closes_runs_only() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let s = run(
        &env("pre_llm_call", "h1", None, Value::Null, json!({"turn_id": "h1:t7", "user_message": "hello"})),
        &mut st,
        &cx,
    );
    assert_eq!((s[0].r#type.as_str(), s[0].run.as_deref()), ("run.started", Some("h1:t7")));
    assert_eq!(s[0].data["message_digest"], json!(aep_schemas::digest::digest(&json!("hello"))));
    assert!(!s[0].data.contains_key("prompt"));
    let e = run(
        &env("on_session_end", "h1", None, Value::Null, json!({"turn_id": "h1:t7", "completed": true})),
        &mut st,
        &cx,
    );
    assert_eq!((e[0].r#type.as_str(), e[0].run.as_deref()), ("run.finished", Some("h1:t7")));
    assert_eq!(e[0].cause_key, Some(crate::common::run_key(Some("h1"), "h1:t7")));
    assert_eq!(st.current_run, None);
    let r = run(&env("on_session_reset", "h2", None, Value::Null, json!({"reason": "new_session"})), &mut st, &cx);
    assert_eq!(r[0].r#type, "x.hermes.session.reset");
}

#[test]
fn approval_card_is_observed_and_session_key_is_identity() {
    let mut st = SessionState::default();
    let p = env(
        "pre_approval_request",
        "",
        None,
        Value::Null,
        json!({"command": "rm -rf /tmp/x", "pattern_key": "terminal:rm", "session_key": "h3"}),
    );
    let d = &run(&p, &mut st, &MapContext::default())[0];
    assert_eq!(d.session.as_deref(), Some("h3"));
    assert_eq!(d.data["respond_via"], json!(["oob"]));
    assert_eq!(d.data["prompt"], json!("Approval requested: rm -rf /tmp/x"));
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    let d = &run(&p, &mut st, &meta)[0];
    assert_eq!(d.data["prompt"], json!("hermes requests permission: terminal:rm"));
    let post = env(
        "post_approval_response",
        "",
        None,
        Value::Null,
        json!({"pattern_key": "terminal:rm", "session_key": "h3", "choice": "session"}),
    );
    let a = &run(&post, &mut st, &MapContext::default())[0];
    assert_eq!(a.data["answer"], json!({"option": "session"}));
    assert_eq!(a.cause_key, d.correlation_key);
}

#[test]
fn three_way_tool_split() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let post = |status: &str| {
        env(
            "post_tool_call",
            "h4",
            Some("write_file"),
            Value::Null,
            json!({"tool_call_id": "w1", "status": status, "error_type": "IOError", "error_message": "nope", "result": "fine"}),
        )
    };
    assert_eq!(run(&post("ok"), &mut st, &cx)[0].r#type, "tool.completed");
    let f = &run(&post("error"), &mut st, &cx)[0];
    assert_eq!((f.r#type.as_str(), &f.data["error"]), ("tool.failed", &json!({"type": "IOError"})));
    let b = &run(&post("blocked"), &mut st, &cx)[0];
    assert_eq!((b.r#type.as_str(), &b.data["by"]), ("tool.denied", &json!("policy")));
    assert!(!b.data.contains_key("rule"));
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    assert_eq!(run(&post("blocked"), &mut st, &red)[0].data["rule"], json!("nope"));
}

#[test]
fn clarify_overlay_card_and_answers() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let pre = env(
        "pre_tool_call",
        "h5",
        Some("clarify"),
        json!({"question": "Which db?", "choices": [{"title": " pg "}, ["a", "b"], "", "x", "y", "z"]}),
        json!({"tool_call_id": "c1"}),
    );
    let out = run(&pre, &mut st, &cx);
    assert_eq!(out.len(), 2);
    let f = &out[1].data["fields"][0];
    let labels: Vec<&str> = f["choices"].as_array().unwrap().iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["pg", "a, b", "x", "y"]);
    let result = |resp: &str| {
        json!({"question": "Which db?", "choices_offered": ["pg", "a, b", "x", "y"], "user_response": resp}).to_string()
    };
    let post = |resp: &str| {
        env(
            "post_tool_call",
            "h5",
            Some("clarify"),
            Value::Null,
            json!({"tool_call_id": "c1", "status": "ok", "result": result(resp)}),
        )
    };
    let a = run(&post("x"), &mut st, &cx);
    assert_eq!(a[1].data["answer"], json!({"values": {"1": "3"}}));
    let t = run(&post("[user did not respond within 5m]"), &mut st, &cx);
    assert_eq!(t[1].r#type, "attention.timeout");
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    let o = run(&post("call me at +1 555 010 9999"), &mut st, &meta);
    assert_eq!(o[1].data["answer"], json!({"values": {}}));
    // no question: no card, and its post settles nothing
    let bare = env("pre_tool_call", "h5", Some("clarify"), json!({}), json!({"tool_call_id": "c2"}));
    assert_eq!(run(&bare, &mut st, &cx).len(), 1);
    let post2 =
        env("post_tool_call", "h5", Some("clarify"), Value::Null, json!({"tool_call_id": "c2", "status": "blocked"}));
    assert_eq!(run(&post2, &mut st, &cx).len(), 1);
}

#[test]
fn drift_sentinel_and_fallback() {
    let p = env("pre_verify", "h6", None, Value::Null, json!({}));
    assert!(!schema_drifted(&p));
    let mut q = p.clone();
    q["extra"]["telemetry_schema_version"] = json!("hermes.observer.v2");
    assert!(schema_drifted(&q));
    let d = &run(&p, &mut SessionState::default(), &MapContext::default())[0];
    assert_eq!(d.r#type, "x.hermes.pre.verify");
    assert_eq!(adapter().neutral_reply("pre_tool_call").as_bytes(), b"{}");
}
