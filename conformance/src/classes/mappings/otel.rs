//! The OTel mapping pin files (`mappings/codex-otel.json`, `mappings/vscode-otel.json`)
//! through this project's OTel profiles (`aep_adapters::otel`), in both modes.
//!
//! Check names: `mappings/{stem}: records.<case>` and `mappings/{stem}: unknown`; each
//! check runs the case's input through the companion and the primary mode at the default
//! (metadata) ceiling, compares both with the pin (`super::compare`), and checks the session
//! identity rule (`identity.session_from`).

use std::sync::Arc;

use aep_adapters::MapContext;
use aep_adapters::otel::{Mode, OtelRecord};
use aep_adapters::vendors::OtelVendor;
use serde_json::{Map, Value};

use crate::{Checks, Fixtures};

/// Runs one OTel mapping pin file (`mappings/{stem}.json`) through `vendor`'s profile.
pub(super) fn run_otel_pins(fx: &Fixtures, out: &mut Checks, stem: &str, vendor: OtelVendor) {
    let name = format!("mappings/{stem}");
    let Some(pins) = super::load(fx, out, stem, "load") else { return };
    let session_from = pins.pointer("/identity/session_from").and_then(Value::as_str).unwrap_or("");
    match pins.get("records").and_then(Value::as_object) {
        Some(records) => {
            for (case, pin) in records {
                out.record(format!("{name}: records.{case}"), check_case(pin, vendor, session_from));
            }
        }
        None => out.fail(format!("{name}: records"), "no `records` object in the pin file"),
    }
    if let Some(pin) = pins.get("unknown") {
        out.record(format!("{name}: unknown"), check_case(pin, vendor, session_from));
    }
}

/// The neutral record a pin input describes (flattened resource and record attributes).
fn record_from_pin(input: &Value) -> Result<OtelRecord, String> {
    let obj = |key: &str| -> Result<Map<String, Value>, String> {
        match input.get(key) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(other) => Err(format!("input.{key} is not an object: {other}")),
        }
    };
    Ok(OtelRecord { resource: Arc::new(obj("resource")?), attributes: obj("attributes")?.into(), ..Default::default() })
}

/// The session the pin's identity rule names for `input` (`attr` or `resource:attr`).
fn expected_session(input: &Value, session_from: &str) -> Option<String> {
    let (scope, key) = match session_from.strip_prefix("resource:") {
        Some(k) => ("resource", k),
        None => ("attributes", session_from),
    };
    input.get(scope)?.get(key)?.as_str().map(str::to_owned)
}

fn check_case(pin: &Value, vendor: OtelVendor, session_from: &str) -> Result<(), String> {
    let input = pin.get("input").ok_or("case has no `input`")?;
    let rec = record_from_pin(input)?;
    let profile = vendor.profile();
    let cx = MapContext::default();
    let want_session = expected_session(input, session_from);
    for (mode, key) in [(Mode::Companion, "companion"), (Mode::Primary, "primary")] {
        let expected = pin.get(key).ok_or_else(|| format!("case has no `{key}` pin"))?;
        let drafts = profile.map_record(&rec, &cx, mode);
        super::compare(expected, &drafts).map_err(|e| format!("{key}: {e}"))?;
        if let Some(d) = drafts.iter().find(|d| d.session != want_session) {
            return Err(format!(
                "{key}: session {:?}, identity rule `{session_from}` gives {want_session:?}",
                d.session
            ));
        }
    }
    Ok(())
}
