//! Fixture class `golden`: every line of `golden/golden.jsonl` must validate on its own
//! (`golden[i] <type>`, 0-based line index), and the whole file must pass the stream
//! rules as ONE stream (`golden: stream`).

use aep_schemas::validate::{StreamValidator, validate_value};
use serde_json::Value;

use crate::{Checks, Fixtures};

/// Appends one check per golden line plus the stream check.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let lines = match fx.jsonl("golden/golden.jsonl") {
        Ok(l) => l,
        Err(e) => return out.fail("golden: fixture", e),
    };
    let mut stream = StreamValidator::new();
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let ty = line.get("type").and_then(Value::as_str).unwrap_or("?");
        match validate_value(line) {
            Ok(ev) => {
                out.record(format!("golden[{i}] {ty}"), Ok(()));
                problems.extend(stream.push_at(i, &ev).iter().map(ToString::to_string));
            }
            Err(v) => {
                out.fail(format!("golden[{i}] {ty}"), v.to_string());
                problems.push(format!("[{i}] not validated on its own"));
            }
        }
    }
    problems.extend(stream.finish().iter().map(ToString::to_string));
    out.record("golden: stream", if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) });
}

#[cfg(test)]
mod tests {
    use crate::classes::{capture_gating, downlevel, golden, invalid, registry_parity};
    use crate::{Checks, Fixtures};

    /// Runs this helper's classes against a spec checkout (`AEP_SPEC`, default
    /// `/work/shared/aep-spec`) and prints the failures:
    /// `cargo test -p aep-conformance model_classes -- --ignored --nocapture`.
    #[test]
    #[ignore = "needs a spec checkout"]
    fn model_classes() {
        let spec = std::env::var("AEP_SPEC").unwrap_or_else(|_| "/work/shared/aep-spec".into());
        let fx = Fixtures::new(spec);
        let mut out = Checks::default();
        registry_parity::run(&fx, &mut out);
        golden::run(&fx, &mut out);
        invalid::run(&fx, &mut out);
        capture_gating::run(&fx, &mut out);
        downlevel::run(&fx, &mut out);
        let checks = out.into_vec();
        let failed: Vec<_> = checks.iter().filter(|c| c.detail.is_some()).collect();
        for c in &failed {
            println!("FAIL {}: {}", c.name, c.detail.as_deref().unwrap_or(""));
        }
        println!("{} of {} pass", checks.len() - failed.len(), checks.len());
        assert!(failed.is_empty());
    }
}
