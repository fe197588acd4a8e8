//! Replays captured hook payloads (`tests/data/<vendor>/*.jsonl`, one `{hook, payload}` per
//! line, copied from real agent runs) through an adapter and checks the invariants every
//! mapping must keep. Shared by the vendor test files via `#[path]`.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use aep_schemas::Capture;
use serde_json::Value;

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
