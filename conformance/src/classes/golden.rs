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
