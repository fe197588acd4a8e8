//! Fixture class `attr-match`: the AEP-0003 §6 golden corpus (`attr-match/cases.json`).
//!
//! `match` cases parse the filter (it must be valid) and compare the verdict on the
//! case's Event; `invalid` cases must be rejected with `invalid-filter` (fail closed).
//! The corpus Events are partial envelopes (routing attributes only), so required
//! attributes they omit are filled with fixed placeholders before parsing; no case
//! filters on an attribute it leaves to a placeholder.

use aep_schemas::Event;
use aep_schemas::filter::Filter;
use serde_json::{Value, json};

use crate::{Checks, Fixtures};

/// Appends one check per `match` case and per `invalid` case.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let doc = match fx.json("attr-match/cases.json") {
        Ok(d) => d,
        Err(e) => return out.fail("attr-match: fixture", e),
    };
    for (group, check) in [("match", check_match as fn(&Value) -> Result<(), String>), ("invalid", check_invalid)] {
        let Some(cases) = doc.get(group).and_then(Value::as_array) else {
            out.fail(format!("attr-match: {group}"), "missing array");
            continue;
        };
        for (i, case) in cases.iter().enumerate() {
            let name = case.get("name").and_then(Value::as_str).map_or_else(|| format!("{group}[{i}]"), str::to_owned);
            out.record(format!("attr-match: {name}"), check(case));
        }
    }
}

/// Completes a partial corpus Event with placeholders for the required attributes it omits.
fn complete(event: &Value) -> Result<Event, String> {
    let Value::Object(given) = event else { return Err("`event` is not an object".into()) };
    let mut map = given.clone();
    let defaults = json!({
        "aep": "0.1", "id": "attr-match-case", "time": "1970-01-01T00:00:00Z",
        "source": "aep://conformance/attr-match", "agent": "conformance"
    });
    if let Value::Object(d) = defaults {
        for (k, v) in d {
            map.entry(k).or_insert(v);
        }
    }
    Event::from_map(map).map_err(|e| format!("event does not parse: {e}"))
}

fn check_match(case: &Value) -> Result<(), String> {
    let filter = Filter::parse(case.get("filter").ok_or("case has no `filter`")?)
        .map_err(|e| format!("a valid filter was rejected: {e}"))?;
    let event = complete(case.get("event").ok_or("case has no `event`")?)?;
    let want = case.get("match").and_then(Value::as_bool).ok_or("case has no boolean `match`")?;
    let got = filter.matches(&event);
    if got == want { Ok(()) } else { Err(format!("expected match={want}, got {got}")) }
}

fn check_invalid(case: &Value) -> Result<(), String> {
    let filter = case.get("filter").ok_or("case has no `filter`")?;
    match Filter::parse(filter) {
        Err(e) if e.code() == "invalid-filter" => Ok(()),
        Err(e) => Err(format!("rejected with the wrong code: {e}")),
        Ok(_) => Err(format!("accepted {filter}; it must fail closed with invalid-filter")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_can_fail() {
        let hit = json!({"filter": {"type": "tool.*"}, "event": {"type": "tool.failed"}, "match": true});
        assert!(check_match(&hit).is_ok());
        let wrong = json!({"filter": {"type": "tool.*"}, "event": {"type": "run.started"}, "match": true});
        assert!(check_match(&wrong).is_err());
        assert!(check_invalid(&json!({"filter": {"seq": 1}})).is_ok());
        assert!(check_invalid(&json!({"filter": {"session": "s"}})).is_err());
    }
}
