//! The VS Code agent around its mapping: manifest, the opt-in gate on `PreToolUse` (with
//! VS Code's own `ask` tier) and its reply shape; wiring is manual (VS Code settings).

use serde_json::{Value, json};

use crate::spec::{ControlSpec, Decision, Gate, Held, VendorSpec};

/// The VS Code agent (Copilot).
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "VS Code agent (Copilot)",
    executables: &["code", "code-insiders"],
    hook_channel: "command hook (Claude Code contract)",
    families: &["session", "run", "tool", "delegation"],
    setup: "add `aep-hook vscode` agent hooks in the VS Code settings",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "PreToolUse", extra_options: &[("ask", "Ask in VS Code")] }),
        reply: Some(reply),
    },
    install: None,
    server: None,
    otel: Some(&super::otel::VscodeOtel),
    adapter: Some(super::adapter),
};

/// `permissionDecision` allow / ask / deny (a denial with its reason).
fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    let decision = match d.option.as_deref() {
        Some("allow") => "allow",
        Some("ask") => "ask",
        _ => "deny",
    };
    let mut out = json!({"hookEventName": "PreToolUse", "permissionDecision": decision});
    if decision == "deny" {
        out["permissionDecisionReason"] = json!(d.reason());
    }
    Some(json!({ "hookSpecificOutput": out }))
}
