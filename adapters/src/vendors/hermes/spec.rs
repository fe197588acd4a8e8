//! Hermes Agent around its mapping: manifest, the opt-in gate on `pre_tool_call` and its
//! reply shape; wiring is manual.

use serde_json::{Value, json};

use crate::spec::{ControlSpec, Decision, Gate, Held, VendorSpec};

/// Hermes Agent.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Hermes Agent",
    executables: &["hermes"],
    hook_channel: "shell hook (stdin envelope)",
    families: &["session", "run", "tool", "attention", "error"],
    setup: "configure Hermes shell hooks to run `aep-hook hermes <hook_event_name>`",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "pre_tool_call", extra_options: &[] }),
        reply: Some(reply),
    },
    install: None,
    otel: None,
    adapter: super::adapter,
};

/// Allow is "no objection" (`{}`); a denial blocks the call with the reason.
fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    Some(if d.allows() { json!({}) } else { json!({"action": "block", "message": d.reason()}) })
}
