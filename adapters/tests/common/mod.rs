//! Shared by the vendor test files (`mod common;`): the replay of captured hook payloads
//! (`tests/data/<vendor>/*.jsonl`, one `{hook, payload}` per line, copied from real agent
//! runs) with the invariants every mapping must keep, and the whole-session driver of the
//! OpenCode, Kilo Code, Cline, Hermes, Antigravity and pi tests (our own payloads in the
//! vendors' typed shapes).

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use aep_schemas::Capture;
use serde_json::{Value, json};

/// The lifecycle types the hook-family adapters map onto: sessions, runs, the tool pair.
pub const LIFECYCLE: &[&str] = &[
    "session.started",
    "session.ended",
    "session.compacted",
    "run.started",
    "run.finished",
    "run.cancelled",
    "tool.requested",
    "tool.completed",
];

/// [`LIFECYCLE`] plus a vendor's further core types.
pub fn core(extra: &[&'static str]) -> Vec<&'static str> {
    LIFECYCLE.iter().chain(extra).copied().collect()
}

/// `(hook, payload)` records of a JSONL capture.
pub fn load(jsonl: &str) -> Vec<(String, Value)> {
    jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let r: Value = serde_json::from_str(l).expect("capture line is JSON");
            (r["hook"].as_str().expect("hook").to_owned(), r["payload"].clone())
        })
        .collect()
}

/// Maps every record with one [`SessionState`] per session, the hook name from the URL as
/// the bridge passes it. Panics with the record on a mapping error.
pub fn replay(adapter: &dyn HookAdapter, records: &[(String, Value)], cx: &MapContext) -> Vec<EventDraft> {
    let mut states: HashMap<Option<String>, SessionState> = HashMap::new();
    let mut out = Vec::new();
    for (hook, payload) in records {
        let call = HookCall { event: Some(hook), payload };
        let state = states.entry(adapter.session_id(&call)).or_default();
        match adapter.map(&call, state, cx) {
            Ok(d) => out.extend(d),
            Err(e) => panic!("{hook} failed to map: {e}\n{payload}"),
        }
    }
    out
}

/// Payload keys that carry content and must never ride at a `metadata` ceiling.
const CONTENT_KEYS: &[&str] =
    &["prompt", "args", "args_redacted", "result", "result_redacted", "cwd", "message", "summary", "title", "text"];

fn content_keys(v: &Value, path: &str, found: &mut Vec<String>) {
    if let Value::Object(m) = v {
        for (k, v) in m {
            if CONTENT_KEYS.contains(&k.as_str()) {
                found.push(format!("{path}.{k}"));
            }
            content_keys(v, &format!("{path}.{k}"), found);
        }
    }
}

/// The invariants: known types only (`core` or the vendor namespace), capture within the
/// ceiling, no content keys at metadata (the attention prompt is the synthesized one),
/// sessions on all but `agent.*`, every cause key resolving to an earlier correlation key.
pub fn check(vendor: &str, drafts: &[EventDraft], cx: &MapContext, core: &[&str]) {
    let ns = format!("x.{vendor}.");
    let mut keys = HashSet::new();
    for d in drafts {
        let ty = d.r#type.as_str();
        assert!(core.contains(&ty) || ty.starts_with(&ns), "{vendor}: unexpected type {ty}");
        let ceiling = cx.ceiling_for(ty);
        assert!(d.capture <= ceiling, "{ty}: capture {} above ceiling {ceiling}", d.capture);
        if ceiling <= Capture::Metadata {
            let mut found = Vec::new();
            content_keys(&Value::Object(d.data.clone()), "", &mut found);
            if ty == "attention.requested" {
                found.retain(|k| k != ".prompt");
                let prompt = d.data.get("prompt").and_then(Value::as_str).unwrap_or("");
                assert!(prompt.starts_with(vendor), "{ty}: metadata prompt must be synthesized, got {prompt:?}");
            }
            assert!(found.is_empty(), "{ty}: content at metadata: {found:?}");
        }
        if ty.starts_with("agent.") {
            assert!(d.session.is_none(), "{ty} is agent-scoped");
        } else {
            assert!(d.session.is_some(), "{ty} lacks a session");
        }
        if let Some(c) = &d.cause_key {
            assert!(keys.contains(c), "{ty}: cause key {c} resolves to nothing earlier");
        }
        if let Some(k) = &d.correlation_key {
            keys.insert(k.clone());
        }
    }
}

/// The drafts' types, in order.
pub fn types(drafts: &[EventDraft]) -> Vec<&str> {
    drafts.iter().map(|d| d.r#type.as_str()).collect()
}

/// A context with every ceiling at `c`.
pub fn all_at(c: Capture) -> MapContext {
    MapContext { capture: c, attention_capture: c, ..MapContext::default() }
}

/// Replays `jsonl` through `adapter` at the default posture and with every ceiling at
/// `metadata` and at `full`, [`check`]ing each; returns the drafts of all three.
pub fn check_postures(adapter: &dyn HookAdapter, vendor: &str, jsonl: &str, core: &[&str]) -> Vec<EventDraft> {
    let mut all = Vec::new();
    for cx in [MapContext::default(), all_at(Capture::Metadata), all_at(Capture::Full)] {
        let drafts = replay(adapter, &load(jsonl), &cx);
        check(vendor, &drafts, &cx, core);
        all.extend(drafts);
    }
    all
}

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
