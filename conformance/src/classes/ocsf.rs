//! Fixture class `ocsf`: the AEP-0005 §4 projection against `ocsf/ocsf-expected.json`.
//!
//! Each pinned record is keyed by the 0-based line of its golden Event in
//! `golden/golden.jsonl`. One check per pinned record: the projection at the default
//! ceiling (`metadata`) must equal the pin field by field, and must be valid against the
//! pinned OCSF class subset of `ocsf/ocsf-classes.json` (AEP-0005 §5 item 6: only class
//! attributes, enum-legal ids, derived `type_uid`, disposition under its profile).

use aep_projections::ocsf::{OcsfOptions, SECURITY_CONTROL_PROFILE, class_mapping, to_ocsf};
use aep_schemas::{Capture, Event};
use serde_json::Value;

use crate::{Checks, Fixtures, diff};

/// Appends one check per pinned OCSF record, then one sweep over the whole golden corpus.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let loaded = fx.json("ocsf/ocsf-expected.json").and_then(|e| {
        let classes = fx.json("ocsf/ocsf-classes.json")?;
        let golden = fx.jsonl("golden/golden.jsonl")?;
        Ok((e, classes, golden))
    });
    let (expected, classes, golden) = match loaded {
        Ok(t) => t,
        Err(e) => return out.fail("ocsf: fixture", e),
    };
    let Some(pins) = expected.as_object() else {
        return out.fail("ocsf: fixture", "expected records are not an object");
    };
    for (key, want) in pins.iter().filter(|(k, _)| !k.starts_with('$')) {
        let line = key.parse::<usize>().ok().and_then(|i| golden.get(i).map(|g| (i, g)));
        let name = match line {
            Some((i, g)) => format!("ocsf[{i}] {}", g.get("type").and_then(Value::as_str).unwrap_or("?")),
            None => format!("ocsf[{key}]"),
        };
        let result = match line {
            None => Err(format!("no golden event at line index {key}")),
            Some((_, g)) => check(g, want, &classes),
        };
        out.record(name, result);
    }
    out.record("ocsf: every golden event class-valid or out of scope", sweep(&golden, &classes));
}

/// Beyond the pins: every golden Event projects to a class-valid record, or to nothing
/// when its type is outside the AEP-0005 §4.2 families, at both ends of the ceiling.
fn sweep(golden: &[Value], classes: &Value) -> Result<(), String> {
    let mut problems = Vec::new();
    for (i, g) in golden.iter().enumerate() {
        let Ok(ev) = Event::from_value(g.clone()) else { continue };
        for max_capture in [Capture::None, Capture::Full] {
            let rec = to_ocsf(&ev, &OcsfOptions { max_capture });
            match (class_mapping(&ev.r#type), rec) {
                (None, None) => {}
                (None, Some(_)) => problems.push(format!("[{i}] {} is out of scope but projected", ev.r#type)),
                (Some(_), None) => problems.push(format!("[{i}] {} was not projected", ev.r#type)),
                (Some(_), Some(r)) => problems
                    .extend(class_problems(&r, classes).into_iter().map(|p| format!("[{i}] {}: {p}", ev.r#type))),
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

fn check(golden: &Value, want: &Value, classes: &Value) -> Result<(), String> {
    let ev = Event::from_value(golden.clone()).map_err(|e| format!("golden event does not parse: {e}"))?;
    let got = to_ocsf(&ev, &OcsfOptions::default()).ok_or("the projection produced no record")?;
    diff(want, &got)?;
    let problems = class_problems(&got, classes);
    if problems.is_empty() { Ok(()) } else { Err(format!("not valid for its OCSF class: {}", problems.join("; "))) }
}

/// Every way `record` violates the pinned class subset (empty when valid).
pub fn class_problems(record: &Value, classes: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(rec) = record.as_object() else { return vec!["the record is not an object".into()] };
    let Some(class_uid) = rec.get("class_uid").and_then(Value::as_u64) else {
        return vec!["no integer class_uid".into()];
    };
    let Some(class) = classes.get("classes").and_then(|c| c.get(class_uid.to_string())) else {
        return vec![format!("class_uid {class_uid} is outside the pinned subset")];
    };
    // Base-event required attributes.
    for req in ["class_uid", "category_uid", "activity_id", "type_uid", "time", "severity_id", "metadata"] {
        if !rec.contains_key(req) {
            problems.push(format!("required `{req}` missing"));
        }
    }
    let attrs: Vec<&str> = class
        .get("attributes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for k in rec.keys() {
        if !attrs.contains(&k.as_str()) {
            problems.push(format!("`{k}` is not an attribute of class {class_uid}"));
        }
    }
    if rec.get("category_uid") != class.get("category_uid") {
        problems.push(format!(
            "category_uid {:?} is not the class's {:?}",
            rec.get("category_uid"),
            class.get("category_uid")
        ));
    }
    for (attr, set) in [
        ("activity_id", "activity"),
        ("severity_id", "severity"),
        ("status_id", "status"),
        ("disposition_id", "disposition"),
    ] {
        let Some(v) = rec.get(attr) else { continue };
        let legal = v.as_u64().is_some_and(|n| class.get(set).and_then(|s| s.get(n.to_string())).is_some());
        if !legal {
            problems.push(format!("{attr} {v} is not in the class's {set} enum"));
        }
    }
    let activity = rec.get("activity_id").and_then(Value::as_u64).unwrap_or(u64::MAX);
    if rec.get("type_uid").and_then(Value::as_u64) != class_uid.checked_mul(100).and_then(|c| c.checked_add(activity)) {
        problems.push("type_uid is not class_uid * 100 + activity_id".into());
    }
    if rec.contains_key("disposition_id") {
        let declared = rec
            .get("metadata")
            .and_then(|m| m.get("profiles"))
            .and_then(Value::as_array)
            .is_some_and(|p| p.iter().any(|x| x == SECURITY_CONTROL_PROFILE));
        if !declared {
            problems.push("disposition_id without metadata.profiles [\"security_control\"]".into());
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn classes() -> Value {
        json!({"classes": {"1007": {"category_uid": 1,
            "attributes": ["class_uid","category_uid","activity_id","type_uid","time","severity_id","metadata","status_id","disposition_id","message"],
            "activity": {"1": "Launch"}, "severity": {"1": "Informational"}, "status": {"2": "Failure"}, "disposition": {"2": "Blocked"}}}})
    }

    #[test]
    fn class_subset_checks_can_fail() {
        let good = json!({"class_uid": 1007, "category_uid": 1, "activity_id": 1, "type_uid": 100701, "time": 0,
            "severity_id": 1, "metadata": {"profiles": ["security_control"]}, "status_id": 2, "disposition_id": 2});
        assert_eq!(class_problems(&good, &classes()), Vec::<String>::new());
        let mut bad = good.clone();
        bad["type_uid"] = json!(100702);
        bad["bogus"] = json!(1);
        bad["status_id"] = json!(7);
        bad["metadata"] = json!({});
        assert_eq!(class_problems(&bad, &classes()).len(), 4);
        assert!(!class_problems(&json!({"class_uid": 9}), &classes()).is_empty());
    }
}
