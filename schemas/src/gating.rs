//! AEP-0006 form-values gating of `attention.answered.answer.values` (in progress).

use serde_json::{Map, Value};

use crate::level::Capture;

/// Gates a form answer's `values` for an emitter capture level (AEP-0006).
pub fn gate_form_values(fields: &Value, values: &Map<String, Value>, level: Capture) -> Map<String, Value> {
    let _ = (fields, level);
    values.clone()
}

/// Checks a form answer's `values` against the request's `fields` (AEP-0002 §5.3 values rule).
pub fn check_form_values(fields: &Value, values: &Value) -> Result<(), String> {
    let _ = (fields, values);
    Ok(())
}
