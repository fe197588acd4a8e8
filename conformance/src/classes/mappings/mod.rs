//! Fixture class `mappings/*`: every Annex A mapping pin run through this project's own
//! adapters and compared field by field (type, data, subject), one check per case.
//!
//! Check names: `mappings/{file-stem}: {table}.{case}`, e.g. `mappings/codex: hooks.PreToolUse`.

use aep_adapters::EventDraft;
use serde_json::{Value, json};

use crate::{Checks, Fixtures};

pub mod antigravity;
pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod codex_otel;
pub mod gemini_cli;
pub mod hermes;
pub mod kilocode;
pub mod kimi_code;
pub mod opencode;
pub mod pi;
pub mod qwen_code;
pub mod vscode;
pub mod vscode_otel;

/// Files in `mappings/` that pin protocol bridges of a later round (ACP, AG-UI, OpenHands):
/// reported as failing until those bridges exist, so the report never hides them.
const NOT_BUILT: &[&str] = &["acp", "agui", "openhands"];

/// Appends every mapping file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    antigravity::run(fx, out);
    claude_code::run(fx, out);
    cline::run(fx, out);
    codex::run(fx, out);
    codex_otel::run(fx, out);
    gemini_cli::run(fx, out);
    hermes::run(fx, out);
    kilocode::run(fx, out);
    kimi_code::run(fx, out);
    opencode::run(fx, out);
    pi::run(fx, out);
    qwen_code::run(fx, out);
    vscode::run(fx, out);
    vscode_otel::run(fx, out);
    for stem in NOT_BUILT {
        out.fail(format!("mappings/{stem}: not implemented"), "protocol bridge not built in this project yet");
    }
}

/// A draft as the pins state it: `{type, data, subject?}`.
pub fn draft_as_pin(d: &EventDraft) -> Value {
    let mut v = json!({ "type": d.r#type, "data": Value::Object(d.data.clone()) });
    if let Some(s) = &d.subject {
        v["subject"] = Value::String(s.clone());
    }
    v
}

/// Compares a pinned `expected` (`{type, data, subject?, $comment?}` or `null`) with drafts.
/// `$`-prefixed keys of the pin are commentary and ignored.
pub fn compare(expected: &Value, drafts: &[EventDraft]) -> Result<(), String> {
    let strip = |v: &Value| -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), v.clone())).collect(),
            ),
            other => other.clone(),
        }
    };
    let want: Vec<Value> = match expected {
        Value::Null => Vec::new(),
        Value::Array(items) => items.iter().map(strip).collect(),
        one => vec![strip(one)],
    };
    if want.len() != drafts.len() {
        return Err(format!(
            "expected {} event(s), got {}: {}",
            want.len(),
            drafts.len(),
            Value::Array(drafts.iter().map(draft_as_pin).collect())
        ));
    }
    for (i, (w, d)) in want.iter().zip(drafts).enumerate() {
        crate::diff(w, &draft_as_pin(d)).map_err(|e| format!("event {i}: {e}"))?;
    }
    Ok(())
}

/// The check for a whole file that has no implementation yet.
pub fn not_implemented(out: &mut Checks, stem: &str) {
    out.fail(format!("mappings/{stem}: not implemented"), "no adapter for this file yet");
}
