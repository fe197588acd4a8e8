//! Shared driver of the whole-session tests for the OpenCode, Kilo Code, Cline, Hermes,
//! Antigravity and pi adapters (our own payloads in the vendors' typed shapes).

#![allow(dead_code)]

use std::collections::HashMap;

use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use serde_json::{Value, json};

/// Free text every session puts in its content fields: it must never appear at `metadata`.
pub const MARKER: &str = "zebra-canary-4471";

/// Drives JSON lines `{"hook"?: name, "payload": {...}}` through `a`, one [`SessionState`]
/// per session id (as the bridge keys them), returning every draft in order.
pub fn drive(a: &dyn HookAdapter, lines: &str, cx: &MapContext) -> Vec<EventDraft> {
    let mut states: HashMap<Option<String>, SessionState> = HashMap::new();
    let mut out = Vec::new();
    for line in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_str(line).expect("test line is JSON");
        let hook = v.get("hook").and_then(Value::as_str);
        let payload = v.get("payload").expect("line has a payload");
        let call = HookCall { event: hook, payload };
        let st = states.entry(a.session_id(&call)).or_default();
        out.extend(a.map(&call, st, cx).unwrap_or_else(|e| panic!("{line}: {e}")));
    }
    out
}

/// The draft types, in order.
pub fn types(ds: &[EventDraft]) -> Vec<&str> {
    ds.iter().map(|d| d.r#type.as_str()).collect()
}

/// Every `cause_key` names a `correlation_key` some earlier draft set.
pub fn assert_causal(ds: &[EventDraft]) {
    let mut seen = std::collections::HashSet::new();
    for d in ds {
        if let Some(c) = &d.cause_key {
            assert!(seen.contains(c), "{} points at {c}, which no earlier draft set", d.r#type);
        }
        if let Some(k) = &d.correlation_key {
            seen.insert(k.clone());
        }
    }
}

/// No draft's payload or subject contains `needle`.
pub fn assert_absent(ds: &[EventDraft], needle: &str) {
    for d in ds {
        let text = format!("{} {:?}", Value::Object(d.data.clone()), d.subject);
        assert!(!text.contains(needle), "{} leaks {needle}: {text}", d.r#type);
    }
}

/// True when some draft's payload contains `needle`.
pub fn present(ds: &[EventDraft], needle: &str) -> bool {
    ds.iter().any(|d| Value::Object(d.data.clone()).to_string().contains(needle))
}

/// Malformed payloads under every given hook name map to `Ok` or `Err`, never a panic.
pub fn assert_no_panics(a: &dyn HookAdapter, hooks: &[&str]) {
    let junk = [
        json!(null),
        json!(1),
        json!("x"),
        json!([]),
        json!({}),
        json!({"event": 1}),
        json!({"event": {"type": 3, "properties": []}}),
        json!({"kind": "bus", "event": {"type": "todo.updated", "properties": {"todos": [1, {"id": 2}, {"id": "a", "status": 4}]}}}),
        json!({"kind": "bus", "event": {"type": "question.asked", "properties": {"questions": [1, {"options": "x"}]}}}),
        json!({"input": [], "output": 3, "permission": "p"}),
        json!({"extra": "x", "tool_name": 5, "tool_input": "y"}),
        json!({"extra": {"result": "{not json", "status": 9}, "tool_name": "clarify"}),
        json!({"tool_call": [], "tool_result": {"name": "n", "error": {"deep": [1]}}, "iteration": [1]}),
        json!({"toolCall": {"name": 1}, "stepIdx": -3, "error": 7, "invocationNum": "x"}),
        json!({"session": 3, "event": {"type": "agent_end", "messages": 5}}),
        json!({"session": {"id": 1}, "event": {"type": "tool_execution_end", "toolName": "t", "result": 1, "isError": "yes"}}),
    ];
    for hook in hooks {
        for p in &junk {
            for event in [Some(*hook), None] {
                let mut st = SessionState::default();
                let _ = a.map(&HookCall { event, payload: p }, &mut st, &MapContext::default());
            }
        }
    }
}
