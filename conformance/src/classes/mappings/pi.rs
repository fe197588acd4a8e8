//! `mappings/pi.json` through this project's pi adapter: one check per `moments` case at
//! the default posture (deltas off), one more per case carrying `deltas_expected` (the
//! `AEP_PI_DELTAS` opt-in, named `... (deltas)`), and the `fallback`.
//!
//! Each case runs on a fresh session state; an `agent_end` case is preceded by the
//! `agent_start` that opened its run (a prelude, drafts discarded): the daemon drops a
//! terminal when no run is open.

use aep_adapters::MapContext;
use serde_json::{Value, json};

use super::cline::check;
use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let file = match fx.json("mappings/pi.json") {
        Ok(v) => v,
        Err(e) => return out.fail("mappings/pi: file", e),
    };
    let plain = aep_adapters::vendors::pi::adapter();
    let deltas = aep_adapters::vendors::pi::adapter_with_deltas(true);
    let cx = MapContext::default();
    match file.get("moments").and_then(Value::as_object) {
        Some(moments) => {
            for (name, case) in moments {
                out.record(format!("mappings/pi: moments.{name}"), check(plain.as_ref(), case, &cx, prelude));
                if let Some(exp) = case.get("deltas_expected") {
                    let mut c = case.clone();
                    c["expected"] = exp.clone();
                    out.record(
                        format!("mappings/pi: moments.{name} (deltas)"),
                        check(deltas.as_ref(), &c, &cx, prelude),
                    );
                }
            }
        }
        None => out.fail("mappings/pi: moments", "no moments table"),
    }
    match file.get("fallback") {
        Some(case) => out.record("mappings/pi: fallback", check(plain.as_ref(), case, &cx, prelude)),
        None => out.fail("mappings/pi: fallback", "no fallback case"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs the spec checkout at /work/shared/aep-spec"]
    fn against_the_real_fixtures() {
        let mut out = Checks::default();
        run(&Fixtures::new("/work/shared/aep-spec"), &mut out);
        let checks = out.into_vec();
        for c in &checks {
            println!("{:?} {} {}", c.status, c.name, c.detail.clone().unwrap_or_default());
        }
        assert!(checks.iter().all(|c| c.status == crate::Status::Pass));
    }
}
