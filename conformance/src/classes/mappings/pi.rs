//! `mappings/pi.json` through this project's pi adapter: one check per `moments` case at
//! the default posture (deltas off), one more per case carrying `deltas_expected` (the
//! `AEP_PI_DELTAS` opt-in, named `... (deltas)`), and the `fallback`.
//!
//! Each case runs on a fresh session state; an `agent_end` case is preceded by the
//! `agent_start` that opened its run (a prelude, drafts discarded): the daemon drops a
//! terminal when no run is open.

use aep_adapters::MapContext;
use serde_json::{Value, json};

use super::check;
use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let Some(doc) = super::load(fx, out, "pi", "file") else { return };
    let plain = aep_adapters::vendors::pi::adapter();
    let deltas = aep_adapters::vendors::pi::adapter_with_deltas(true);
    let cx = MapContext::default();
    super::each_case(out, "pi", &doc, "moments", "no moments table", |out, name, case| {
        out.record(name.clone(), check(plain.as_ref(), case, &cx, prelude));
        if let Some(exp) = case.get("deltas_expected") {
            let mut c = case.clone();
            c["expected"] = exp.clone();
            out.record(format!("{name} (deltas)"), check(deltas.as_ref(), &c, &cx, prelude));
        }
    });
    super::required_fallback(out, "pi", &doc, |case| check(plain.as_ref(), case, &cx, prelude));
}

fn prelude(case: &Value) -> Vec<(Option<String>, Value)> {
    match case.pointer("/input/event/type").and_then(Value::as_str) {
        Some("agent_end") => {
            let session = case.pointer("/input/session").cloned().unwrap_or(Value::Null);
            vec![(None, json!({"session": session, "event": {"type": "agent_start"}}))]
        }
        _ => Vec::new(),
    }
}
