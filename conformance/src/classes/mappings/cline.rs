//! `mappings/cline.json` through this project's Cline adapter: one check per `hooks`
//! case plus the `fallback`. Pins carry `step` beside `{type, data, subject}`: it is
//! compared against the draft's envelope step whenever the pin states one.
//!
//! Each case runs on a fresh [`SessionState`] at the default posture. A run terminal's
//! case is preceded by the `agent_start` of the same agent (a prelude whose drafts are
//! discarded): real run boundaries are runtime state the pin presumes.

use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use serde_json::{Value, json};

use super::compare;
use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let file = match fx.json("mappings/cline.json") {
        Ok(v) => v,
        Err(e) => return out.fail("mappings/cline: file", e),
    };
    let a = aep_adapters::vendors::cline::adapter();
    let cx = MapContext::default();
    match file.get("hooks").and_then(Value::as_object) {
        Some(hooks) => {
            for (name, case) in hooks {
                out.record(format!("mappings/cline: hooks.{name}"), check(a.as_ref(), case, &cx, prelude));
            }
        }
        None => out.fail("mappings/cline: hooks", "no hooks table"),
    }
    match file.get("fallback") {
        Some(case) => out.record("mappings/cline: fallback", check(a.as_ref(), case, &cx, prelude)),
        None => out.fail("mappings/cline: fallback", "no fallback case"),
    }
}

fn prelude(case: &Value) -> Vec<(Option<String>, Value)> {
    let input = case.get("input").unwrap_or(&Value::Null);
    match input.get("hookName").and_then(Value::as_str) {
        Some("agent_end" | "agent_abort" | "agent_error") => {
            let mut start = input.clone();
            start["hookName"] = json!("agent_start");
            vec![(None, start)]
        }
        _ => Vec::new(),
    }
}

/// The moments (URL event name, payload) a case's pin presumes already happened.
pub(crate) type Prelude = fn(&Value) -> Vec<(Option<String>, Value)>;

/// Runs `case.input` (named by `case.hook` when the pin carries one) after the moments
/// `prelude(case)` returns (URL event name, payload)
/// and compares with `case.expected`.
pub(crate) fn check(a: &dyn HookAdapter, case: &Value, cx: &MapContext, prelude: Prelude) -> Result<(), String> {
    let input = case.get("input").ok_or("case has no input")?;
    let hook = case.get("hook").and_then(Value::as_str);
    let mut state = SessionState::default();
    for (event, p) in prelude(case) {
        a.map(&HookCall { event: event.as_deref(), payload: &p }, &mut state, cx)
            .map_err(|e| format!("prelude: {e}"))?;
    }
    let drafts = a.map(&HookCall { event: hook, payload: input }, &mut state, cx).map_err(|e| e.to_string())?;
    check_with_steps(case.get("expected").unwrap_or(&Value::Null), &drafts)
}

/// [`compare`] plus the envelope `step` of every pinned entry that states one.
pub(crate) fn check_with_steps(expected: &Value, drafts: &[EventDraft]) -> Result<(), String> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("step");
        }
        v
    };
    let (stripped, steps): (Value, Vec<Option<Value>>) = match expected {
        Value::Array(items) => {
            (Value::Array(items.iter().map(strip).collect()), items.iter().map(|i| i.get("step").cloned()).collect())
        }
        Value::Null => (Value::Null, Vec::new()),
        one => (strip(one), vec![one.get("step").cloned()]),
    };
    compare(&stripped, drafts)?;
    for (i, (want, d)) in steps.iter().zip(drafts).enumerate() {
        if let Some(w) = want {
            let got = d.step.clone().map(Value::String).unwrap_or(Value::Null);
            if *w != got {
                return Err(format!("event {i}: step: expected {w}, got {got}"));
            }
        }
    }
    Ok(())
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
