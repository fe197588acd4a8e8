//! Fixture class `redaction`: the AEP-0003 §9.4 pipeline corpus (`redaction/cases.json`).
//!
//! `text_cases` run [`redact_text`] over the input string; `value_cases` run
//! [`redact_value`] over the input JSON and test the compact serialization of the
//! result. Each case asserts `must_contain` / `must_not_contain` substrings; `opts`
//! maps onto [`RedactConfig`] (`secretValues`, `secretNames`, `home`, `pii`).

use aep_schemas::redact::{RedactConfig, redact_text, redact_value};
use serde_json::Value;

use crate::{Checks, Fixtures};

/// Appends one check per text case and per value case.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let doc = match fx.json("redaction/cases.json") {
        Ok(d) => d,
        Err(e) => return out.fail("redaction: fixture", e),
    };
    for (group, is_value) in [("text_cases", false), ("value_cases", true)] {
        let Some(cases) = doc.get(group).and_then(Value::as_array) else {
            out.fail(format!("redaction: {group}"), "missing array");
            continue;
        };
        for (i, case) in cases.iter().enumerate() {
            let name = case.get("name").and_then(Value::as_str).map_or_else(|| format!("{group}[{i}]"), str::to_owned);
            out.record(format!("redaction: {name}"), check_case(case, is_value));
        }
    }
}

fn config(opts: Option<&Value>) -> Result<RedactConfig, String> {
    let mut cfg = RedactConfig::default();
    let Some(opts) = opts else { return Ok(cfg) };
    let Some(map) = opts.as_object() else { return Err("`opts` is not an object".into()) };
    let strings = |v: &Value| -> Result<Vec<String>, String> {
        v.as_array()
            .ok_or("expected an array")?
            .iter()
            .map(|s| s.as_str().map(str::to_owned).ok_or_else(|| "expected strings".to_owned()))
            .collect()
    };
    for (k, v) in map {
        match k.as_str() {
            "secretValues" => cfg.secret_values = strings(v)?,
            "secretNames" => cfg.secret_names = strings(v)?,
            "home" => cfg.home = Some(v.as_str().ok_or("`home` is not a string")?.to_owned()),
            "pii" => cfg.pii = v.as_bool().ok_or("`pii` is not a boolean")?,
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(cfg)
}

fn check_case(case: &Value, is_value: bool) -> Result<(), String> {
    let cfg = config(case.get("opts"))?;
    let input = case.get("input").ok_or("case has no `input`")?;
    let output = if is_value {
        serde_json::to_string(&redact_value(input, &cfg)).map_err(|e| e.to_string())?
    } else {
        redact_text(input.as_str().ok_or("text case `input` is not a string")?, &cfg)
    };
    let list = |key: &str| -> Vec<&str> {
        case.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let mut problems = Vec::new();
    for needle in list("must_contain") {
        if !output.contains(needle) {
            problems.push(format!("missing {needle:?}"));
        }
    }
    for needle in list("must_not_contain") {
        if output.contains(needle) {
            problems.push(format!("still contains {needle:?}"));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(format!("{}; output: {output:?}", problems.join(", "))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn case_checks_can_fail() {
        let good = json!({"input": "key AKIAABCDEFGHIJKLMNOP", "must_contain": ["[REDACTED:secret]"], "must_not_contain": ["AKIA"]});
        assert!(check_case(&good, false).is_ok());
        let bad = json!({"input": "nothing here", "must_contain": ["[REDACTED:secret]"]});
        assert!(check_case(&bad, false).is_err());
        let value = json!({"input": {"token": "zz"}, "must_not_contain": ["zz"]});
        assert!(check_case(&value, true).is_ok());
        assert!(config(Some(&json!({"bogus": 1}))).is_err());
    }
}
