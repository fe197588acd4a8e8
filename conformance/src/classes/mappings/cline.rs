//! `mappings/cline.json` through this project's Cline adapter: one check per `hooks`
//! case plus the `fallback`. Pins carry `step` beside `{type, data, subject}`: it is
//! compared against the draft's envelope step whenever the pin states one.
//!
//! Each case runs on a fresh `SessionState` at the default posture. A run terminal's
//! case is preceded by the `agent_start` of the same agent (a prelude whose drafts are
//! discarded): real run boundaries are runtime state the pin presumes.

use serde_json::{Value, json};

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::run_preluded(fx, out, "cline", aep_adapters::vendors::cline::adapter().as_ref(), prelude);
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
