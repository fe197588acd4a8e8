//! Fixture class `invalid`: every case of `invalid/cases.json` MUST be rejected, and
//! rejected FOR ITS RULE: some violation's rule must be the section the case names, or
//! a subsection of it ([`rule_matches`]). A case with `events` is validated as one stream.

use aep_schemas::validate::{Violation, rule_matches, validate_stream};
use serde_json::Value;

use crate::{Checks, Fixtures};

/// Appends one check per case.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::run_named_cases(fx, out, "invalid", "invalid/cases.json", check_case);
}

fn check_case(case: &Value) -> Result<(), String> {
    let rule = case.get("rule").and_then(Value::as_str).ok_or("case names no `rule`")?;
    let events: Vec<&Value> = match (case.get("event"), case.get("events").and_then(Value::as_array)) {
        (Some(e), _) => vec![e],
        (None, Some(es)) => es.iter().collect(),
        (None, None) => return Err("case has neither `event` nor `events`".into()),
    };
    let violations: Vec<Violation> = validate_stream(events);
    if violations.is_empty() {
        return Err(format!("accepted, but MUST fail under {rule}"));
    }
    if violations.iter().any(|v| rule_matches(rule, v.rule)) {
        return Ok(());
    }
    let got: Vec<String> = violations.iter().map(ToString::to_string).collect();
    Err(format!("rejected, but not for {rule}: {}", got.join("; ")))
}
