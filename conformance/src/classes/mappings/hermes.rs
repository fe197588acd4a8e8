//! `mappings/hermes.json` through this project's Hermes adapter: one check per `hooks`
//! case plus the `fallback`, each on a fresh session state at the default posture. The
//! Hermes pins need no prelude: the run is the payload's own `turn_id`, and the clarify
//! overlay is payload-derived.

use aep_adapters::MapContext;
use serde_json::Value;

use super::cline::check;
use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let file = match fx.json("mappings/hermes.json") {
        Ok(v) => v,
        Err(e) => return out.fail("mappings/hermes: file", e),
    };
    let a = aep_adapters::vendors::hermes::adapter();
    let cx = MapContext::default();
    match file.get("hooks").and_then(Value::as_object) {
        Some(hooks) => {
            for (name, case) in hooks {
                out.record(format!("mappings/hermes: hooks.{name}"), check(a.as_ref(), case, &cx, |_| Vec::new()));
            }
        }
        None => out.fail("mappings/hermes: hooks", "no hooks table"),
    }
    match file.get("fallback") {
        Some(case) => out.record("mappings/hermes: fallback", check(a.as_ref(), case, &cx, |_| Vec::new())),
        None => out.fail("mappings/hermes: fallback", "no fallback case"),
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
