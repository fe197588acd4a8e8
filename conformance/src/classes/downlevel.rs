//! Fixture class `downlevel`: AEP-0001 §8.2 hop down-leveling (`downlevel/cases.json`),
//! through [`downlevel`]. Each case pins the resulting `capture` and `data`; every other
//! envelope attribute must pass through unchanged.

use aep_schemas::downlevel::downlevel;
use aep_schemas::{Capture, Event};
use serde_json::Value;

use crate::{Checks, Fixtures, diff};

/// Appends one check per case.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::run_named_cases(fx, out, "downlevel", "downlevel/cases.json", check_case);
}

fn level(case: &Value, key: &str) -> Result<Capture, String> {
    case.get(key).and_then(Value::as_str).ok_or(format!("case has no `{key}`"))?.parse().map_err(|e| format!("{e}"))
}

fn check_case(case: &Value) -> Result<(), String> {
    let ceiling = level(case, "ceiling")?;
    let expect_capture = level(case, "expect_capture")?;
    let raw = case.get("event").ok_or("case has no `event`")?;
    let ev = Event::from_value(raw.clone()).map_err(|e| format!("fixture event does not parse: {e}"))?;
    let got = downlevel(&ev, ceiling);
    if got.capture() != expect_capture {
        return Err(format!("capture: expected {expect_capture}, got {}", got.capture()));
    }
    let expect_data = case.get("expect_data").unwrap_or(&Value::Null);
    match (&got.data, expect_data) {
        (None, Value::Null) => {}
        (None, e) => return Err(format!("data: expected {e}, got none")),
        (Some(d), Value::Null) => return Err(format!("data: expected none, got {d}")),
        (Some(d), e) => diff(e, d).map_err(|m| format!("data {m}"))?,
    }
    // Everything but `capture` and `data` rides unchanged (AEP-0001 §4.2).
    let mut before = ev.to_map();
    let mut after = got.to_map();
    for m in [&mut before, &mut after] {
        m.remove("capture");
        m.remove("data");
    }
    diff(&Value::Object(before), &Value::Object(after)).map_err(|m| format!("envelope {m}"))
}
