//! `mappings/codex.json` through this project's Codex hook adapter, one check per hook
//! entry plus the fallback. Also home of [`run_hook_table`], the shared runner of the
//! `{hooks: {name: {input, expected}}, fallback}` fixture shape.

use aep_adapters::vendors::codex;
use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use serde_json::Value;

use crate::{Checks, Fixtures};

/// Maps one fixture input through `adapter` with a fresh session state at the default
/// posture (capture metadata, attention.* redacted), as the fixture files pin it.
pub(crate) fn through(adapter: &dyn HookAdapter, input: &Value) -> Result<Vec<EventDraft>, String> {
    adapter
        .map(&HookCall { event: None, payload: input }, &mut SessionState::default(), &MapContext::default())
        .map_err(|e| format!("mapping failed: {e}"))
}

/// Runs a `{hooks, fallback}` fixture file: one check `mappings/{stem}: hooks.{name}` per
/// entry and one `mappings/{stem}: fallback`, each comparing `expected` with what `map`
/// produces for `input`.
pub(crate) fn run_hook_table(
    fx: &Fixtures,
    out: &mut Checks,
    stem: &str,
    map: &dyn Fn(&Value) -> Result<Vec<EventDraft>, String>,
) {
    let doc = match fx.json(&format!("mappings/{stem}.json")) {
        Ok(d) => d,
        Err(e) => return out.fail(format!("mappings/{stem}: load"), e),
    };
    let Some(hooks) = doc.get("hooks").and_then(Value::as_object) else {
        return out.fail(format!("mappings/{stem}: hooks"), "fixture has no `hooks` object");
    };
    for (name, case) in hooks {
        let result = match (case.get("input"), case.get("expected")) {
            (Some(input), Some(expected)) => map(input).and_then(|d| super::compare(expected, &d)),
            _ => Err("case lacks `input` or `expected`".to_owned()),
        };
        out.record(format!("mappings/{stem}: hooks.{name}"), result);
    }
    if let Some(fb) = doc.get("fallback") {
        let result = match (fb.get("input"), fb.get("expected")) {
            (Some(input), Some(expected)) => map(input).and_then(|d| super::compare(expected, &d)),
            _ => Err("fallback lacks `input` or `expected`".to_owned()),
        };
        out.record(format!("mappings/{stem}: fallback"), result);
    }
}

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let adapter = codex::adapter();
    run_hook_table(fx, out, "codex", &|input| through(adapter.as_ref(), input));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs the spec checkout at /work/shared/aep-spec"]
    fn against_the_spec_fixtures() {
        let mut out = Checks::default();
        run(&Fixtures::new("/work/shared/aep-spec"), &mut out);
        let checks = out.into_vec();
        let failed: Vec<_> = checks.iter().filter(|c| c.detail.is_some()).collect();
        assert!(failed.is_empty(), "{failed:#?}");
        assert!(checks.len() >= 11);
    }
}
