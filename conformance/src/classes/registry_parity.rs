//! Fixture class `registry`: proves the project's own type registry
//! ([`aep_schemas::registry`]) agrees with the spec's published machine files at run
//! time: `schemas/registry/categories.json`, `schemas/registry/types.json`, and every
//! `schemas/types/*.schema.json` (types, `x-aep-capture` annotations, the `[metadata*]`
//! exceptions the schemas mark in `$comment`s, required lists, enums, bounds, nested
//! properties and items, the `if/then` conditional).
//!
//! One check per registered type (`registry: tool.completed`), plus `registry: categories`
//! and `registry: no unpublished types`.

use std::collections::BTreeSet;

use aep_schemas::registry::{self, FieldSpec};
use serde_json::{Map, Value};

use crate::{Checks, Fixtures};

/// Appends the parity checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let schemas = fx.root().join("schemas");
    let read = |rel: &str| -> Result<Value, String> {
        let path = schemas.join(rel);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
    };

    out.record("registry: categories", read("registry/categories.json").and_then(|doc| check_categories(&doc)));

    let doc = match read("registry/types.json") {
        Ok(d) => d,
        Err(e) => return out.fail("registry: types.json", e),
    };
    let Some(rows) = doc.get("types").and_then(Value::as_array) else {
        return out.fail("registry: types.json", "no `types` array");
    };
    let mut published = BTreeSet::new();
    for row in rows {
        let Some(name) = row.get("type").and_then(Value::as_str) else {
            out.fail("registry: types.json", format!("row without `type`: {row}"));
            continue;
        };
        published.insert(name.to_owned());
        out.record(format!("registry: {name}"), check_type(row, name, &read));
    }
    let extra: Vec<&str> =
        registry::types().iter().map(|t| t.name.as_str()).filter(|n| !published.contains(*n)).collect();
    out.record(
        "registry: no unpublished types",
        if extra.is_empty() { Ok(()) } else { Err(format!("not in types.json: {}", extra.join(", "))) },
    );
}

fn check_categories(doc: &Value) -> Result<(), String> {
    let rows = doc.get("categories").and_then(Value::as_array).ok_or("no `categories` array")?;
    let spec: Vec<&str> =
        rows.iter().filter_map(|r| r.get("name").and_then(Value::as_str)).filter(|n| *n != "x").collect();
    if spec != registry::CATEGORIES {
        return Err(format!("spec {spec:?} != registry {:?}", registry::CATEGORIES));
    }
    for r in rows {
        let (Some(name), Some(scope)) = (r.get("name").and_then(Value::as_str), r.get("scope").and_then(Value::as_str))
        else {
            continue;
        };
        if name == "x" {
            continue;
        }
        let ours = registry::registry().categories.iter().find(|(n, _)| n == name).map(|(_, s)| s.as_str());
        if ours != Some(scope) {
            return Err(format!("category {name}: spec scope {scope}, registry {ours:?}"));
        }
    }
    Ok(())
}

fn check_type(row: &Value, name: &str, read: &dyn Fn(&str) -> Result<Value, String>) -> Result<(), String> {
    let ours = registry::lookup(name).ok_or("missing from the registry")?;
    let field = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("");
    if field("status") != ours.status.as_str() {
        return Err(format!("status: spec {}, registry {}", field("status"), ours.status.as_str()));
    }
    if field("scope") != ours.scope.as_str() {
        return Err(format!("scope: spec {}, registry {}", field("scope"), ours.scope.as_str()));
    }
    match (row.get("schema").and_then(Value::as_str), &ours.payload) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err("the spec defers this payload, the registry defines one".into()),
        (Some(file), None) => Err(format!("the spec publishes {file}, the registry has no payload")),
        (Some(file), Some(payload)) => {
            let schema = read(&format!("types/{file}"))?;
            compare(&schema, payload, "data")
        }
    }
}

const KNOWN: [&str; 15] = [
    "$schema",
    "$id",
    "title",
    "$comment",
    "type",
    "properties",
    "items",
    "required",
    "enum",
    "minimum",
    "maximum",
    "const",
    "format",
    "x-aep-capture",
    "if",
];

fn strings(v: Option<&Value>) -> BTreeSet<String> {
    match v {
        Some(Value::String(s)) => BTreeSet::from([s.clone()]),
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect(),
        _ => BTreeSet::new(),
    }
}

fn compare(schema: &Value, ours: &FieldSpec, path: &str) -> Result<(), String> {
    let s = schema.as_object().ok_or(format!("{path}: schema node is not an object"))?;
    if let Some(k) = s.keys().find(|k| !KNOWN.contains(&k.as_str()) && k.as_str() != "then") {
        return Err(format!("{path}: schema keyword `{k}` is not modelled by the registry"));
    }
    let types: BTreeSet<String> = ours.types.iter().map(|t| t.as_str().to_owned()).collect();
    if strings(s.get("type")) != types {
        return Err(format!("{path}: type {:?} vs registry {types:?}", strings(s.get("type"))));
    }
    let capture = s.get("x-aep-capture").and_then(Value::as_str);
    if capture != ours.capture.map(|c| c.as_str()) {
        return Err(format!("{path}: x-aep-capture {capture:?} vs registry {:?}", ours.capture.map(|c| c.as_str())));
    }
    // The [metadata*] exceptions are marked in prose `$comment`s ("gated by exception",
    // "type-dependent gating"); the registry carries them as a flag (AEP-0002 §5.3, §8).
    let exception = s
        .get("$comment")
        .and_then(Value::as_str)
        .is_some_and(|c| c.contains("by exception") || c.contains("type-dependent"));
    if exception != ours.exception {
        return Err(format!("{path}: [metadata*] exception: schema {exception}, registry {}", ours.exception));
    }
    let enums = strings(s.get("enum"));
    if enums != ours.enum_values.iter().cloned().collect::<BTreeSet<_>>() {
        return Err(format!("{path}: enum {enums:?} vs registry {:?}", ours.enum_values));
    }
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    if num("minimum") != ours.minimum || num("maximum") != ours.maximum {
        return Err(format!(
            "{path}: bounds {:?}..{:?} vs registry {:?}..{:?}",
            num("minimum"),
            num("maximum"),
            ours.minimum,
            ours.maximum
        ));
    }
    if s.get("const").and_then(Value::as_str) != ours.constant.as_deref() {
        return Err(format!("{path}: const differs"));
    }
    if s.get("format").and_then(Value::as_str) != ours.format.as_deref() {
        return Err(format!("{path}: format {:?} vs registry {:?}", s.get("format"), ours.format));
    }
    let required = strings(s.get("required"));
    if required != ours.required.iter().cloned().collect::<BTreeSet<_>>() {
        return Err(format!("{path}: required {required:?} vs registry {:?}", ours.required));
    }
    compare_conditional(s, ours, path)?;
    let empty = Map::new();
    let props = s.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let spec_names: BTreeSet<&str> = props.keys().map(String::as_str).collect();
    let our_names: BTreeSet<&str> = ours.properties.iter().map(|(n, _)| n.as_str()).collect();
    if spec_names != our_names {
        return Err(format!("{path}: members {spec_names:?} vs registry {our_names:?}"));
    }
    for (k, sub) in props {
        let mine = ours.property(k).ok_or(format!("{path}.{k}: missing"))?;
        compare(sub, mine, &format!("{path}.{k}"))?;
    }
    match (s.get("items"), ours.items.as_deref()) {
        (None, None) => Ok(()),
        (Some(i), Some(mine)) => compare(i, mine, &format!("{path}[]")),
        (Some(_), None) => Err(format!("{path}: the schema types array items, the registry does not")),
        (None, Some(_)) => Err(format!("{path}: the registry types array items, the schema does not")),
    }
}

/// The one conditional shape in 0.1: `if {properties: {P: {const: V}}, required: [P]}
/// then {required: [R]}`.
fn compare_conditional(s: &Map<String, Value>, ours: &FieldSpec, path: &str) -> Result<(), String> {
    let spec = match (s.get("if"), s.get("then")) {
        (None, None) => None,
        (Some(i), Some(t)) => {
            let (prop, cond) = i
                .get("properties")
                .and_then(Value::as_object)
                .and_then(|p| p.iter().next())
                .ok_or(format!("{path}: unmodelled `if`"))?;
            let equals = cond.get("const").and_then(Value::as_str).ok_or(format!("{path}: `if` without const"))?;
            let then: Vec<String> = strings(t.get("required")).into_iter().collect();
            Some((prop.clone(), equals.to_owned(), then))
        }
        _ => return Err(format!("{path}: `if` without `then` or the reverse")),
    };
    let mine = ours.conditional.as_ref().map(|c| (c.property.clone(), c.equals.clone(), vec![c.then_required.clone()]));
    if spec != mine {
        return Err(format!("{path}: conditional {spec:?} vs registry {mine:?}"));
    }
    Ok(())
}
