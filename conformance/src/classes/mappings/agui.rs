//! `mappings/agui.json` through this project's AG-UI mapping
//! ([`aep_adapters::protocols::agui`]): one check per event at the default posture (type,
//! data, subject and the envelope step), one per `deltas_expected` fork (`AEP_AGUI_DELTAS`),
//! and the fallback.

use aep_adapters::MapContext;
use aep_adapters::protocols::{Options, agui};
use serde_json::Value;

use super::check_with_steps;
use crate::{Checks, Fixtures};

const STEM: &str = "agui";

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
}

fn check(case: &Value, key: &str, opts: Options) -> Result<(), String> {
    let input = case.get("input").ok_or("case has no input")?;
    check_with_steps(case.get(key).unwrap_or(&Value::Null), &agui::map_event(input, opts, &MapContext::default()))
}
