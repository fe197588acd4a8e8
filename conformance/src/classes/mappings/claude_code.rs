//! `mappings/claude-code.json` through this project's Claude Code hook adapter. The file
//! pins the two AEP-0006 form mappings by their emitted `data`, each at both postures:
//! `expected_data` at the default attention ceiling (redacted) and `expected_data_metadata`
//! at a metadata ceiling. Checks: `mappings/claude-code: {case}` and `... {case} (metadata)`.

use aep_adapters::vendors::claude_code;
use aep_adapters::{HookCall, MapContext, SessionState};
use aep_schemas::Capture;
use serde_json::{Map, Value, json};

use crate::{Checks, Fixtures};

/// The hook payload a case's `input` arrives in.
fn payload(case: &str, input: &Value) -> Value {
    let mut p = Map::new();
    p.insert("session_id".into(), json!("s_fix_1"));
    match case {
        "ask_user_question" => {
            p.insert("hook_event_name".into(), json!("PermissionRequest"));
            p.insert("tool_name".into(), json!("AskUserQuestion"));
            p.insert("tool_input".into(), input.clone());
        }
        _ => {
            p.insert("hook_event_name".into(), json!("Elicitation"));
            p.insert("mcp_server_name".into(), json!("fixture"));
            if let Some(o) = input.as_object() {
                p.extend(o.clone());
            }
        }
    }
    Value::Object(p)
}

/// Maps `input` at `cx` and compares the single draft's `data` with `expected`.
fn check(case: &str, input: &Value, expected: &Value, cx: &MapContext) -> Result<(), String> {
    let p = payload(case, input);
    let adapter = claude_code::adapter();
    let drafts = adapter
        .map(&HookCall { event: None, payload: &p }, &mut SessionState::default(), cx)
        .map_err(|e| format!("mapping failed: {e}"))?;
    let [d] = drafts.as_slice() else {
        return Err(format!("expected 1 event, got {}", drafts.len()));
    };
    if d.r#type != "attention.requested" {
        return Err(format!("expected attention.requested, got {}", d.r#type));
    }
    crate::diff(expected, &Value::Object(d.data.clone()))
}

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let doc = match fx.json("mappings/claude-code.json") {
        Ok(d) => d,
        Err(e) => return out.fail("mappings/claude-code: load", e),
    };
    let metadata = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    for case in ["ask_user_question", "elicitation"] {
        let Some(c) = doc.get(case) else {
            out.fail(format!("mappings/claude-code: {case}"), "case missing from the fixture");
            continue;
        };
        let Some(input) = c.get("input") else {
            out.fail(format!("mappings/claude-code: {case}"), "case lacks `input`");
            continue;
        };
        for (suffix, key, cx) in
            [("", "expected_data", MapContext::default()), (" (metadata)", "expected_data_metadata", metadata.clone())]
        {
            let result = match c.get(key) {
                Some(expected) => check(case, input, expected, &cx),
                None => Err(format!("case lacks `{key}`")),
            };
            out.record(format!("mappings/claude-code: {case}{suffix}"), result);
        }
    }
}
