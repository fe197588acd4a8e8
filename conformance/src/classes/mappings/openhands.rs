//! `mappings/openhands.json` through this project's OpenHands mapping
//! ([`aep_adapters::vendors::openhands`]): one check per event at the default posture
//! (type, data, subject, step), one per `deltas_expected` fork (`AEP_OPENHANDS_DELTAS`;
//! `TokenEvent` pins its refusal there), the fallback, and one per `status_transitions`
//! row of the pure run-synthesis table.

use aep_adapters::MapContext;
use aep_adapters::protocols::Options;
use aep_adapters::vendors::openhands;
use serde_json::Value;

use super::{check_with_steps, compare};
use crate::{Checks, Fixtures};

const STEM: &str = "openhands";

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let Some(doc) = super::load(fx, out, STEM, "file") else { return };
    super::each_case(out, STEM, &doc, "events", "no events table", |out, name, case| {
        out.record(name.clone(), check(case, "expected", Options::default()));
        if case.get("deltas_expected").is_some() {
            out.record(format!("{name} (deltas)"), check(case, "deltas_expected", Options { deltas: true }));
        }
    });
    super::required_fallback(out, STEM, &doc, |case| check(case, "expected", Options::default()));
    super::each_case(out, STEM, &doc, "status_transitions", "no status_transitions table", |out, name, case| {
        out.record(name, transition(case));
    });
}

fn check(case: &Value, key: &str, opts: Options) -> Result<(), String> {
    let input = case.get("input").ok_or("case has no input")?;
    check_with_steps(case.get(key).unwrap_or(&Value::Null), &openhands::map_event(input, opts, &MapContext::default()))
}

fn transition(case: &Value) -> Result<(), String> {
    let next = case.get("next").and_then(Value::as_str).ok_or("row has no `next` status")?;
    let prev = case.get("prev").and_then(Value::as_str);
    compare(
        case.get("expected").unwrap_or(&Value::Null),
        &openhands::status_moments(prev, next, &MapContext::default()),
    )
}
