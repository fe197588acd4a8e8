//! `mappings/acp.json` through this project's ACP mapping ([`aep_adapters::protocols::acp`]):
//! one check per moment at the default posture, one per `deltas_expected` fork (the
//! `AEP_ACP_DELTAS` opt-in, which pairs with capture `redacted`), and the fallback. Tool
//! names are held to the adapter's documented deviation (see [`check`]).

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
    let mut expected = case.get(key).cloned().unwrap_or(Value::Null);
    // The adapter's one documented deviation (Annex A: "deviations MUST be documented in the
    // adapter"; `protocols/acp/README.md`): the pins name a tool by its `title`, which real
    // agents fill with the literal command or file name (content, while `tool_ref.name` is
    // `metadata`, AEP-0002 §5.3). The name is the agent's tool id or the ACP `kind`. The rest
    // of each pin is checked as pinned, and the name against that rule.
    if let Some(update) = input.pointer("/params/update")
        && let Some(items) = expected.as_array_mut()
    {
        for item in items {
            if let Some(name) = item.pointer_mut("/data/tool/name") {
                *name = Value::String(acp::tool_name(update).to_owned());
            }
        }
    }
    compare(&expected, &acp::map_moment(input, opts, cx))
}
