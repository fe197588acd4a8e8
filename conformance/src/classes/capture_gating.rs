//! Fixture class `capture-gating`: AEP-0006 type-dependent gating of
//! `attention.answered.answer.values` (`capture-gating/cases.json`), through
//! [`gate_form_values`].

use aep_schemas::Capture;
use aep_schemas::gating::gate_form_values;
use serde_json::Value;

use crate::{Checks, Fixtures, diff};

/// Appends one check per case.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::run_named_cases(fx, out, "capture-gating", "capture-gating/cases.json", check_case);
}

fn check_case(case: &Value) -> Result<(), String> {
    let fields = case.get("fields").ok_or("case has no `fields`")?;
    let values = case.get("values").and_then(Value::as_object).ok_or("case has no `values` object")?;
    let ceiling: Capture = case
        .get("ceiling")
        .and_then(Value::as_str)
        .ok_or("case has no `ceiling`")?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let expect = case.get("expect").ok_or("case has no `expect`")?;
    diff(expect, &Value::Object(gate_form_values(fields, values, ceiling)))
}
