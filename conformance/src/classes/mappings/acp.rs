//! `mappings/acp.json` through this project's ACP mapping ([`aep_adapters::protocols::acp`]):
//! one check per moment at the default posture, one per `deltas_expected` fork (the
//! `AEP_ACP_DELTAS` opt-in, which pairs with capture `redacted`), and the fallback.

use aep_adapters::MapContext;
use aep_adapters::protocols::{Options, acp};
use aep_schemas::Capture;
use serde_json::Value;

use super::compare;
use crate::{Checks, Fixtures};

const STEM: &str = "acp";

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let Some(doc) = super::load(fx, out, STEM, "file") else { return };
    let deltas_cx = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    super::each_case(out, STEM, &doc, "moments", "no moments table", |out, name, case| {
        out.record(name.clone(), check(case, "expected", Options::default(), &MapContext::default()));
        if case.get("deltas_expected").is_some() {
            out.record(
                format!("{name} (deltas)"),
                check(case, "deltas_expected", Options { deltas: true }, &deltas_cx),
            );
        }
    });
    super::required_fallback(out, STEM, &doc, |case| {
        check(case, "expected", Options::default(), &MapContext::default())
    });
}

fn check(case: &Value, key: &str, opts: Options, cx: &MapContext) -> Result<(), String> {
    let input = case.get("input").ok_or("case has no input")?;
    compare(case.get(key).unwrap_or(&Value::Null), &acp::map_moment(input, opts, cx))
}
