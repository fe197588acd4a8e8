use aep_schemas::Capture;
use serde_json::{Value, json};

use super::*;

fn moment(event: Value) -> Value {
    json!({"session": {"id": "pi_s", "file": "/home/u/.pi/s.jsonl", "cwd": "/home/u/p"}, "event": event})
}

fn run(a: &dyn HookAdapter, event: Value, st: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    a.map(&HookCall { event: None, payload: &moment(event) }, st, cx).expect("maps")
}

#[test]
fn agent_loops_are_runs_closed_by_the_last_stop_reason() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let s = run(a.as_ref(), json!({"type": "agent_start"}), &mut st, &cx);
    assert_eq!(
        (s[0].r#type.as_str(), s[0].run.as_deref(), s[0].session.as_deref()),
        ("run.started", Some("r1"), Some("pi_s"))
    );
    assert!(run(a.as_ref(), json!({"type": "agent_start"}), &mut st, &cx).is_empty());
    let end = json!({"type": "agent_end", "messages": [
        {"role": "assistant", "stopReason": "error", "errorMessage": "x"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "length", "usage": {"input": 3, "output": 4}},
        {"role": "user", "content": "later"}]});
    let e = run(a.as_ref(), end.clone(), &mut st, &cx);
    assert_eq!(e[0].r#type, "run.finished");
    assert_eq!(e[0].data["stop_reason"], json!("length"));
    assert_eq!(e[0].data["gen_ai.usage.output_tokens"], json!(4));
    assert!(!e[0].data.contains_key("summary"));
    assert_eq!(e[0].cause_key, Some(crate::common::run_key(Some("pi_s"), "r1")));
    // no run open: the terminal is dropped
    assert!(run(a.as_ref(), end, &mut st, &cx).is_empty());
    run(a.as_ref(), json!({"type": "agent_start"}), &mut st, &cx);
    let ab = run(
        a.as_ref(),
        json!({"type": "agent_end", "messages": [{"role": "assistant", "stopReason": "aborted"}]}),
        &mut st,
        &cx,
    );
    assert_eq!((ab[0].r#type.as_str(), ab[0].run.as_deref()), ("run.cancelled", Some("r2")));
    assert!(!ab[0].data.contains_key("by"));
}

#[test]
fn tool_trio_pairs_and_deltas_are_opt_in() {
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let off = adapter();
    let on = adapter_with_deltas(true);
    let upd = json!({"type": "tool_execution_update", "toolCallId": "t1", "toolName": "grep", "args": {}, "partialResult": "3 hits"});
    assert!(run(off.as_ref(), upd.clone(), &mut st, &cx).is_empty());
    let u = run(on.as_ref(), upd, &mut st, &cx);
    assert_eq!(u[0].r#type, "x.pi.tool.update");
    assert_eq!(u[0].data["partial_digest"], json!(aep_schemas::digest::digest(&json!("3 hits"))));
    let start = run(
        off.as_ref(),
        json!({"type": "tool_execution_start", "toolCallId": "t1", "toolName": "grep", "args": {"q": "x"}}),
        &mut st,
        &cx,
    );
    assert_eq!(start[0].correlation_key.as_deref(), Some("tool:t1"));
    let fail = json!({"type": "tool_execution_end", "toolCallId": "t1", "toolName": "grep", "result": {"content": [{"type": "text", "text": "bad regex"}]}, "isError": true});
    let f = run(off.as_ref(), fail.clone(), &mut st, &cx);
    assert_eq!((f[0].r#type.as_str(), &f[0].data["error"]), ("tool.failed", &json!({"type": "error"})));
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let f = run(off.as_ref(), fail, &mut st, &red);
    assert_eq!(f[0].data["error"]["message"], json!("bad regex"));
    let d = run(
        on.as_ref(),
        json!({"type": "message_update", "message": {}, "assistantMessageEvent": {"type": "thinking_delta"}}),
        &mut st,
        &cx,
    );
    assert_eq!(d[0].data["kind"], json!("thinking_delta"));
}

#[test]
fn messages_steps_and_fallback() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let m =
        run(a.as_ref(), json!({"type": "message_start", "message": {"role": "user", "content": "hi"}}), &mut st, &cx);
    assert_eq!(m[0].r#type, "x.pi.message.submitted");
    assert_eq!(m[0].data["content_digest"], json!(aep_schemas::digest::digest(&json!("hi"))));
    assert_eq!(m[0].severity, Some(aep_schemas::Severity::Debug));
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let m = run(
        a.as_ref(),
        json!({"type": "message_start", "message": {"role": "user", "content": "mail ann@example.com"}}),
        &mut st,
        &red,
    );
    assert!(!m[0].data["content"].as_str().unwrap().contains("ann@example.com"));
    assert!(
        run(a.as_ref(), json!({"type": "message_end", "message": {"role": "toolResult"}}), &mut st, &cx).is_empty()
    );
    let blocks =
        json!([{"type": "text", "text": "A"}, {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "B"}]);
    let r = run(
        a.as_ref(),
        json!({"type": "message_end", "message": {"role": "assistant", "content": blocks, "stopReason": "stop"}}),
        &mut st,
        &cx,
    );
    assert_eq!(r[0].data["content_digest"], json!(aep_schemas::digest::digest(&json!("AB"))));
    let t = run(a.as_ref(), json!({"type": "turn_start", "turnIndex": 12}), &mut st, &cx);
    assert_eq!(t[0].step.as_deref(), Some("12"));
    let s = run(a.as_ref(), json!({"type": "session_start", "reason": "fork"}), &mut st, &red);
    assert_eq!(s[0].data["cwd"], json!("~/p")); // home prefix redacted (AEP-0003 §9.4 c)
    let f = run(a.as_ref(), json!({"type": "Odd-Thing"}), &mut st, &cx);
    assert_eq!(f[0].r#type, "x.pi.event.odd_thing");
    let none = json!({"session": {"id": "x"}});
    assert!(a.hook_name(&HookCall { event: None, payload: &none }).is_err());
    assert_eq!(a.hook_name(&HookCall { event: Some("agent_start"), payload: &none }).unwrap(), "agent_start");
}
