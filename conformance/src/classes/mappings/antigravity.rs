//! `mappings/antigravity.json` through this project's Antigravity adapter: one check per
//! `hooks` case plus the `fallback`. The hook name rides beside the payload (`hook`: the
//! registration argv), and is passed as the URL event.
//!
//! The pins are mid-conversation facts, so every case runs after a prelude (drafts
//! discarded) of the same conversation's first `PreInvocation`: the session has been
//! seen (`session.started` already synthesized) and a run is open. A `PostToolUse` pin
//! carrying `join` additionally gets the `PreToolUse` at its `stepIdx` that supplies the
//! joined name (the daemon's join table is runtime state).

use serde_json::{Value, json};

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::run_preluded(fx, out, "antigravity", aep_adapters::vendors::antigravity::adapter().as_ref(), prelude);
}

fn prelude(case: &Value) -> Vec<(Option<String>, Value)> {
    let conv = case.pointer("/input/conversationId").cloned().unwrap_or(Value::Null);
    let mut steps = vec![(
        Some("PreInvocation".to_owned()),
        json!({"conversationId": conv, "invocationNum": 0, "initialNumSteps": 0}),
    )];
    if let Some(name) = case.pointer("/join/name") {
        let idx = case.pointer("/input/stepIdx").cloned().unwrap_or(Value::Null);
        steps.push((
            Some("PreToolUse".to_owned()),
            json!({"conversationId": conv, "toolCall": {"name": name, "args": {}}, "stepIdx": idx}),
        ));
    }
    steps
}
