//! AEP-0006 form values: type-dependent capture gating of `answer.values`, and the
//! values rule a control loop enforces before applying a `control.attention.respond`.
//!
//! `values` maps `field_spec.id` to an answer (AEP-0002 §5.3). Free text (a `string`
//! field's value, an `other` free-text value on a `select`) is user-authored and needs
//! `redacted` or more; numbers, booleans and closed-select choice ids are structural and
//! survive at `metadata`.

use serde_json::{Map, Value};

use crate::level::Capture;

/// What a `values` entry is, judged against its `field_spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueClass {
    /// A number, boolean, or closed-select choice id (or array of them): `metadata` survives.
    Structural,
    /// User-authored text: needs `redacted`+ (AEP-0006 gating by exception).
    FreeText,
}

/// Finds the `field_spec` with `id` in a `fields` array.
pub fn find_field<'a>(fields: &'a Value, id: &str) -> Option<&'a Map<String, Value>> {
    fields.as_array()?.iter().filter_map(Value::as_object).find(|f| f.get("id").and_then(Value::as_str) == Some(id))
}

fn choice_ids(field: &Map<String, Value>) -> Vec<&str> {
    field
        .get("choices")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("id").and_then(Value::as_str)).collect())
        .unwrap_or_default()
}

fn flag(field: &Map<String, Value>, name: &str) -> bool {
    field.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// Classifies one answer against its field. Anything that is not recognisably structural
/// (a type mismatch, a non-choice string) counts as free text: the conservative side.
pub fn classify(field: &Map<String, Value>, value: &Value) -> ValueClass {
    let structural = match field.get("type").and_then(Value::as_str) {
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("select") => {
            let ids = choice_ids(field);
            match value {
                Value::String(s) => ids.contains(&s.as_str()),
                Value::Array(items) => items.iter().all(|i| i.as_str().is_some_and(|s| ids.contains(&s))),
                _ => false,
            }
        }
        _ => false,
    };
    if structural { ValueClass::Structural } else { ValueClass::FreeText }
}

/// Gates a form answer's `values` for an emitter writing at capture `level` (AEP-0006,
/// AEP-0002 §5.3): free-text entries are kept only at `redacted`+, structural entries
/// always, and keys without a matching `field_spec` are dropped (conservative).
///
/// At `none` the caller drops `data` wholesale; this function only implements the
/// metadata/redacted asymmetry.
pub fn gate_form_values(fields: &Value, values: &Map<String, Value>, level: Capture) -> Map<String, Value> {
    values
        .iter()
        .filter(|(k, v)| match find_field(fields, k) {
            None => false,
            Some(f) => classify(f, v) == ValueClass::Structural || level >= Capture::Redacted,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Degrades `values` with no request context (a hop, AEP-0001 §8.2): below `redacted`
/// only numbers and booleans survive, since a string or array cannot be told apart from
/// free text without the `field_spec` (dropping more than required is always legal).
pub fn degrade_values_without_context(values: &mut Map<String, Value>) {
    values.retain(|_, v| v.is_number() || v.is_boolean());
}

/// Checks `values` against the request's `fields` the way an emitter MUST before applying a
/// `control.attention.respond` (AEP-0002 §5.3 / AEP-0006): every `required: true` field is
/// answered, each value has its field's type, and a `select` without `other: true` only
/// takes `choices[].id` strings. Unknown keys are tolerated (gating drops them).
pub fn check_form_values(fields: &Value, values: &Value) -> Result<(), String> {
    check_values(fields, values, true)
}

/// Like [`check_form_values`] without the required-coverage rule: the shape and choice
/// rules that hold for any recorded `attention.answered` answering a form.
pub fn check_form_answer(fields: &Value, values: &Value) -> Result<(), String> {
    check_values(fields, values, false)
}

fn check_values(fields: &Value, values: &Value, require_all: bool) -> Result<(), String> {
    let Some(values) = values.as_object() else {
        return Err("`values` must be an object mapping field ids to answers".into());
    };
    let Some(specs) = fields.as_array() else {
        return Err("the request carries no `fields` array".into());
    };
    if require_all {
        for f in specs.iter().filter_map(Value::as_object) {
            if flag(f, "required") {
                let id = f.get("id").and_then(Value::as_str).unwrap_or("");
                if !values.contains_key(id) {
                    return Err(format!("required field {id:?} is not answered"));
                }
            }
        }
    }
    for (id, v) in values {
        let Some(f) = find_field(fields, id) else { continue };
        check_one(f, id, v)?;
    }
    Ok(())
}

fn check_one(f: &Map<String, Value>, id: &str, v: &Value) -> Result<(), String> {
    match f.get("type").and_then(Value::as_str) {
        Some("string") if !v.is_string() => Err(format!("field {id:?} takes a string, got {v}")),
        Some("boolean") if !v.is_boolean() => Err(format!("field {id:?} takes a boolean, got {v}")),
        Some("number") => {
            let Some(n) = v.as_f64() else {
                return Err(format!("field {id:?} takes a number, got {v}"));
            };
            if let Some(min) = f.get("min").and_then(Value::as_f64).filter(|m| n < *m) {
                return Err(format!("field {id:?}: {n} is below min {min}"));
            }
            if let Some(max) = f.get("max").and_then(Value::as_f64).filter(|m| n > *m) {
                return Err(format!("field {id:?}: {n} is above max {max}"));
            }
            Ok(())
        }
        Some("select") => {
            let ids = choice_ids(f);
            let other = flag(f, "other");
            let check = |s: &Value| -> Result<(), String> {
                match s.as_str() {
                    Some(s) if ids.contains(&s) || other => Ok(()),
                    Some(s) => Err(format!("field {id:?}: {s:?} is not one of its choices and `other` is not true")),
                    None => Err(format!("field {id:?}: a select answer is a choice id string, got {s}")),
                }
            };
            match (v, flag(f, "multi")) {
                (Value::Array(items), true) => items.iter().try_for_each(check),
                (Value::Array(_), false) => Err(format!("field {id:?} is single-select; got an array")),
                (Value::String(_), false) => check(v),
                (_, true) => Err(format!("field {id:?} is multi-select; its answer is an array of choice ids")),
                (_, false) => Err(format!("field {id:?}: a select answer is a choice id string, got {v}")),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!([
            {"id":"title","type":"string","label":"Title","required":true},
            {"id":"n","type":"number","label":"Count","min":1,"max":5},
            {"id":"ok","type":"boolean","label":"Ok?"},
            {"id":"tags","type":"select","label":"Tags","multi":true,"choices":[{"id":"a","label":"A"},{"id":"b","label":"B"}]},
            {"id":"color","type":"select","label":"Color","other":true,"choices":[{"id":"r","label":"Red"}]},
            {"id":"size","type":"select","label":"Size","choices":[{"id":"s","label":"S"},{"id":"l","label":"L"}]}
        ])
    }

    #[test]
    fn gating_is_type_dependent() {
        let values = json!({"title":"hello","n":2,"ok":false,"tags":["b"],"color":"teal","size":"l","stray":1});
        let values = values.as_object().unwrap();
        let meta = gate_form_values(&form(), values, Capture::Metadata);
        assert_eq!(Value::Object(meta), json!({"n":2,"ok":false,"tags":["b"],"size":"l"}));
        let red = gate_form_values(&form(), values, Capture::Redacted);
        assert_eq!(red.len(), 6);
        assert!(!red.contains_key("stray"));
        // A choice id on an other:true select is structural.
        let v = json!({"color":"r"});
        assert_eq!(gate_form_values(&form(), v.as_object().unwrap(), Capture::Metadata).len(), 1);
        // A type mismatch is treated as free text.
        let v = json!({"n":"three"});
        assert!(gate_form_values(&form(), v.as_object().unwrap(), Capture::Metadata).is_empty());
    }

    #[test]
    fn values_rule() {
        assert!(check_form_values(&form(), &json!({"title":"x","size":"s","color":"any text"})).is_ok());
        assert!(check_form_values(&form(), &json!({"size":"s"})).unwrap_err().contains("required"));
        assert!(check_form_values(&form(), &json!({"title":"x","size":"medium"})).unwrap_err().contains("choices"));
        assert!(check_form_values(&form(), &json!({"title":"x","tags":"a"})).is_err());
        assert!(check_form_values(&form(), &json!({"title":"x","tags":["a","zz"]})).is_err());
        assert!(check_form_values(&form(), &json!({"title":"x","n":9})).unwrap_err().contains("max"));
        assert!(check_form_values(&form(), &json!({"title":3})).is_err());
        assert!(check_form_values(&form(), &json!(["x"])).is_err());
        assert!(check_form_answer(&form(), &json!({"size":"l"})).is_ok());
    }

    #[test]
    fn degrade_without_context_keeps_numbers_and_booleans() {
        let mut v = json!({"a":"text","b":1,"c":true,"d":["1"]}).as_object().unwrap().clone();
        degrade_values_without_context(&mut v);
        assert_eq!(Value::Object(v), json!({"b":1,"c":true}));
    }
}
