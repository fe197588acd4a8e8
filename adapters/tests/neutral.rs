//! `vendors::neutral_reply`, the hook shim's own table, answers every call exactly as the
//! vendor's adapter in `SPECS` does: on every recorded payload, and on each hook name of a
//! broad list given both as the URL's event and as the payload's own name field.

use aep_adapters::vendors::{SPECS, neutral_reply, ran_by_other};
use aep_adapters::{HookCall, NeutralReply};
use serde_json::{Value, json};

/// The recorded hook payloads of `dir` (adapters/tests/data/<dir>), with their URL event.
fn recorded(dir: &str) -> Vec<(Option<String>, Value)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(dir);
    let Ok(rd) = std::fs::read_dir(&root) else { return Vec::new() };
    let mut out = Vec::new();
    for f in rd.flatten() {
        let text = std::fs::read_to_string(f.path()).unwrap_or_default();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(v) = serde_json::from_str::<Value>(l) else { continue };
            if let Some(p) = v.get("payload").filter(|p| p.is_object()) {
                out.push((v.get("hook").and_then(Value::as_str).map(str::to_owned), p.clone()));
            }
        }
    }
    out
}

const NAMES: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "Notification",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "BeforeTool",
    "AfterTool",
    "PreInvocation",
    "PostInvocation",
    "pre_tool_call",
    "post_tool_call",
    "pre_approval_request",
    "on_session_start",
    "agent_start",
    "agent_end",
    "tool_call",
    "tool_result",
    "session_start",
    "tool_execution_start",
    "bus",
    "tool.execute.before",
    "permission.ask",
    "notify",
    "nope",
];

#[test]
fn the_shims_neutral_table_answers_as_every_vendor_adapter_does() {
    let mut answered = std::collections::BTreeSet::new();
    let hooked = || SPECS.iter().filter(|s| s.adapter.is_some());
    for spec in hooked() {
        let Some(adapter) = spec.adapter.map(|a| a()) else { continue };
        let mut calls: Vec<(Option<String>, Value)> = recorded(spec.id);
        for name in NAMES {
            calls.push((Some((*name).to_owned()), json!({})));
            for field in ["hook_event_name", "hookName", "hook", "type"] {
                calls.push((None, json!({ field: name })));
            }
        }
        for (event, payload) in &calls {
            let call = HookCall { event: event.as_deref(), payload };
            let want: Option<NeutralReply> = adapter.hook_name(&call).ok().map(|h| adapter.neutral_reply(&h));
            assert_eq!(neutral_reply(spec.id, &call), want, "{} {event:?} {payload}", spec.id);
            if want.is_some() {
                answered.insert(spec.id);
            }
        }
    }
    let all: std::collections::BTreeSet<_> = hooked().map(|s| s.id).collect();
    assert_eq!(answered, all, "every hook vendor's arm is reached");
    assert_eq!(neutral_reply("not-a-vendor", &HookCall { event: Some("Stop"), payload: &json!({}) }), None);
}

/// `vendors::ran_by_other`, the shim's other direct table, answers as every adapter in
/// `SPECS` does, on every recorded payload under each environment that tells agents apart
/// (another agent's marker, the vendor's own markers, its own session id or another's).
#[test]
fn the_shims_ran_by_other_table_answers_as_every_vendor_adapter_does() {
    let envs: &[&[(&str, &str)]] = &[
        &[],
        &[("COPILOT_CLI", "1")],
        &[("COPILOT_CLI", "1"), ("CLAUDECODE", "1")],
        &[("COPILOT_CLI", "1"), ("CLAUDE_CODE_SESSION_ID", "not-this-session")],
        &[("COPILOT_CLI", "1"), ("CLAUDE_CODE_SESSION_ID", "s-own")],
    ];
    let mut others = std::collections::BTreeSet::new();
    for spec in SPECS {
        let Some(make) = spec.adapter else { continue };
        let adapter = make();
        let mut calls = recorded(spec.id);
        calls.push((None, json!({"hook_event_name": "SessionStart", "session_id": "s-own"})));
        for (event, payload) in &calls {
            let call = HookCall { event: event.as_deref(), payload };
            for env in envs {
                let look = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
                let want = adapter.ran_by_other(&call, &look);
                assert_eq!(ran_by_other(spec.id, &call, &look), want, "{} {env:?} {payload}", spec.id);
                if let Some(other) = want {
                    others.insert((spec.id, other));
                }
            }
        }
    }
    assert!(others.contains(&("claude-code", "copilot-cli")), "the claude-code arm is reached: {others:?}");
}
