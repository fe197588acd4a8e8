//! One module per fixture class. Each `run` appends one check per fixture case.

use serde_json::Value;

use crate::{Checks, Fixtures};

pub mod attr_match;
pub mod capture_gating;
pub mod ce_roundtrip;
pub mod downlevel;
pub mod golden;
pub mod invalid;
pub mod mappings;
pub mod ocsf;
pub mod otlp;
pub mod redaction;
pub mod registry_parity;

/// A fixture class: its name and its runner.
pub struct Class {
    /// The class name, which prefixes every check name.
    pub name: &'static str,
    /// Appends this class's checks.
    pub run: fn(&Fixtures, &mut Checks),
}

/// Every class, in report order.
pub const ALL: &[Class] = &[
    Class { name: "registry", run: registry_parity::run },
    Class { name: "golden", run: golden::run },
    Class { name: "invalid", run: invalid::run },
    Class { name: "attr-match", run: attr_match::run },
    Class { name: "capture-gating", run: capture_gating::run },
    Class { name: "downlevel", run: downlevel::run },
    Class { name: "redaction", run: redaction::run },
    Class { name: "ce-roundtrip", run: ce_roundtrip::run },
    Class { name: "otlp", run: otlp::run },
    Class { name: "ocsf", run: ocsf::run },
    Class { name: "mappings", run: mappings::run },
];

/// Runs a `{cases: [{name, ...}]}` fixture file (`rel`): one check `{class}: {name}` per
/// case (`case {i}` when unnamed) from `check`; `{class}: fixture` fails when the file or
/// its `cases` array is missing.
pub(crate) fn run_named_cases(
    fx: &Fixtures,
    out: &mut Checks,
    class: &str,
    rel: &str,
    check: fn(&Value) -> Result<(), String>,
) {
    let doc = match fx.json(rel) {
        Ok(d) => d,
        Err(e) => return out.fail(format!("{class}: fixture"), e),
    };
    let Some(cases) = doc.get("cases").and_then(Value::as_array) else {
        return out.fail(format!("{class}: fixture"), "no `cases` array");
    };
    for (i, case) in cases.iter().enumerate() {
        let name = case.get("name").and_then(Value::as_str).map_or_else(|| format!("case {i}"), str::to_owned);
        out.record(format!("{class}: {name}"), check(case));
    }
}
