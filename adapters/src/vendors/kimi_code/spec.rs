//! Kimi Code around its mapping: manifest, the opt-in gate on `PreToolUse` and its binary
//! reply; wiring is manual (`~/.kimi-code/config.toml`).

use crate::spec::{ControlSpec, Gate, VendorSpec};

/// Kimi Code CLI.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Kimi Code CLI",
    executables: &["kimi"],
    hook_channel: "command hook (~/.kimi-code/config.toml)",
    families: &["session", "run", "tool", "attention", "error", "progress", "delegation"],
    setup: "add `aep-hook kimi-code` hooks to ~/.kimi-code/config.toml",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "PreToolUse", extra_options: &[] }),
        reply: Some(super::super::hook_family::pre_tool_deny_reply),
    },
    install: None,
    otel: None,
    adapter: super::adapter,
};
