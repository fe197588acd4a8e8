//! `mappings/antigravity.json` through this project's Antigravity adapter: one check per
//! `hooks` case plus the `fallback`. The hook name rides beside the payload (`hook`: the
//! registration argv), and is passed as the URL event.
//!
//! The pins are mid-conversation facts, so every case runs after a prelude (drafts
//! discarded) of the same conversation's first `PreInvocation`: the session has been
//! seen (`session.started` already synthesized) and a run is open. A `PostToolUse` pin
//! carrying `join` additionally gets the `PreToolUse` at its `stepIdx` that supplies the
//! joined name (the daemon's join table is runtime state).

use aep_adapters::MapContext;
use serde_json::{Value, json};

use super::cline::check;
use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let file = match fx.json("mappings/antigravity.json") {
        Ok(v) => v,
        Err(e) => return out.fail("mappings/antigravity: file", e),
    };
    let a = aep_adapters::vendors::antigravity::adapter();
    let cx = MapContext::default();
    match file.get("hooks").and_then(Value::as_object) {
        Some(hooks) => {
            for (name, case) in hooks {
                out.record(format!("mappings/antigravity: hooks.{name}"), check(a.as_ref(), case, &cx, prelude));
            }
        }
        None => out.fail("mappings/antigravity: hooks", "no hooks table"),
    }
    match file.get("fallback") {
        Some(case) => out.record("mappings/antigravity: fallback", check(a.as_ref(), case, &cx, prelude)),
        None => out.fail("mappings/antigravity: fallback", "no fallback case"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs the spec checkout at /work/shared/aep-spec"]
    fn against_the_real_fixtures() {
        let mut out = Checks::default();
        run(&Fixtures::new("/work/shared/aep-spec"), &mut out);
        let checks = out.into_vec();
        for c in &checks {
            println!("{:?} {} {}", c.status, c.name, c.detail.clone().unwrap_or_default());
        }
        assert!(checks.iter().all(|c| c.status == crate::Status::Pass));
    }
}
