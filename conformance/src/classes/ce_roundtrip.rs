//! Fixture class `ce-roundtrip` (AEP-0005 §5 items 1, 2 and 5): every golden Event
//! forward-maps to its pinned CloudEvent (a valid CloudEvents 1.0 event), maps back to
//! itself, and the hand-authored inbound cases pin the §2 rule 2 preserve/drop paths.

use std::collections::BTreeSet;

use aep_projections::ce::{self, ATTRIBUTE_TABLE};
use aep_schemas::Event;
use serde_json::Value;

use crate::{Checks, Fixtures, diff};

/// Appends this class's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let golden = match fx.jsonl("golden/golden.jsonl") {
        Ok(g) => g,
        Err(e) => return out.fail("ce-roundtrip: golden fixtures", e),
    };
    match fx.jsonl("ce-roundtrip/ce-expected.jsonl") {
        Ok(pinned) => round_trips(&golden, &pinned, out),
        Err(e) => out.fail("ce-roundtrip: ce-expected fixtures", e),
    }
    match fx.json("ce-roundtrip/inbound-cases.json") {
        Ok(cases) => inbound(&cases, out),
        Err(e) => out.fail("ce-roundtrip: inbound fixtures", e),
    }
}

fn type_of(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("?")
}

fn round_trips(golden: &[Value], pinned: &[Value], out: &mut Checks) {
    if golden.len() != pinned.len() {
        out.fail(
            "ce-roundtrip: pin count",
            format!("{} golden Events but {} pinned CloudEvents", golden.len(), pinned.len()),
        );
    }
    for (i, (raw, expected)) in golden.iter().zip(pinned).enumerate() {
        let ty = type_of(raw);
        let ev = Event::from_value(raw.clone()).map_err(|e| format!("golden[{i}] does not parse: {e}"));
        // AEP-0005 §5.1 (forward match) and §5.2 (CE 1.0 validity).
        let forward = ev.clone().and_then(|ev| {
            let ce = ce::to_cloudevent(&ev);
            diff(expected, &ce)?;
            ce::validate_cloudevent(&ce).map_err(|e| e.to_string())
        });
        out.record(format!("ce-roundtrip: forward golden[{i}] {ty}"), forward);
        // AEP-0005 §5.1: inverse(forward(e)) ≡ e, and the pinned CE maps back to e too.
        let inverse = ev.and_then(|ev| {
            for (what, ce) in [("own forward", ce::to_cloudevent(&ev)), ("pinned CE", expected.clone())] {
                let (back, diags) = ce::from_cloudevent(&ce).map_err(|e| format!("{what}: {e}"))?;
                if !diags.is_empty() {
                    return Err(format!("{what}: unexpected diagnostics {diags:?}"));
                }
                diff(raw, &back.to_value()).map_err(|d| format!("{what}: {d}"))?;
                if back != ev {
                    return Err(format!("{what}: the Event differs from golden[{i}] (member order or presence)"));
                }
            }
            Ok(())
        });
        out.record(format!("ce-roundtrip: inverse golden[{i}] {ty}"), inverse);
    }
}

fn inbound(cases: &Value, out: &mut Checks) {
    let Some(list) = cases.get("cases").and_then(Value::as_array) else {
        return out.fail("ce-roundtrip: inbound fixtures", "no `cases` array");
    };
    for (i, case) in list.iter().enumerate() {
        let name = case.get("name").and_then(Value::as_str).map_or_else(|| format!("case[{i}]"), str::to_owned);
        out.record(format!("ce-roundtrip: inbound {name}"), inbound_case(case));
    }
}

fn inbound_case(case: &Value) -> Result<(), String> {
    let (ce, expected) = match (case.get("ce"), case.get("expected")) {
        (Some(c), Some(e)) => (c, e),
        _ => return Err("case lacks `ce` or `expected`".into()),
    };
    let (ev, diags) = ce::from_cloudevent(ce).map_err(|e| e.to_string())?;
    diff(expected, &ev.to_value())?;
    // Every CE attribute that neither maps nor survives must be named by a diagnostic,
    // and no diagnostic may name a surviving one (AEP-0005 §2 rule 2).
    let mapped = |k: &str| {
        ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"].contains(&k)
            || ATTRIBUTE_TABLE.iter().any(|(_, c)| *c == k)
    };
    let dropped: BTreeSet<&str> = ce
        .as_object()
        .map(|o| o.keys().map(String::as_str).filter(|k| !mapped(k) && expected.get(*k).is_none()).collect())
        .unwrap_or_default();
    let diagnosed: BTreeSet<&str> = diags.iter().map(|d| d.attribute.as_str()).collect();
    if dropped != diagnosed {
        return Err(format!("dropped attributes {dropped:?} but diagnostics for {diagnosed:?}"));
    }
    Ok(())
}
